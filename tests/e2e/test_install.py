"""A non-editable install (what users get from a wheel) ships the templates, the static C
runtime and the sample: the wheel is built and gen runs from it alone, away from the checkout.

The wheel's dependencies are this environment's (installing TVM and the rest again into a new
venv took a minute and tests pip, not this project)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile

from packaging_helpers import REPO


def test_wheel_install_generates_a_package(tmp_path, zoo_dir):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(tmp_path / "dist"),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = (tmp_path / "dist").glob("relay2cmake-*.whl")
    installed = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        archive.extractall(installed)
    assert "relay2cmake/cmake_templates/CMakeLists.txt.j2" in names
    assert "relay2cmake/cmake_templates/src/__prefix___runtime.c" in names  # static C, not a template
    assert "relay2cmake/samples/digits.onnx" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "relay2cmake = relay2cmake.cli:main" in (installed / entry_points).read_text()

    env = {**os.environ, "PYTHONPATH": str(installed)}  # ahead of the checkout's editable install
    where = subprocess.run(
        [sys.executable, "-c", "import relay2cmake.samples as s; print(s.__file__, s.DIGITS_MODEL.exists(), "
         "s.DEMO_APP.exists())"],
        capture_output=True, text=True, check=True, cwd=tmp_path, env=env,
    )  # fmt: skip
    module_file, *found = where.stdout.split()
    assert module_file.startswith(str(installed)), module_file
    assert found == ["True", "True"]
    out = tmp_path / "pkg"
    result = subprocess.run(
        [sys.executable, "-m", "relay2cmake", "gen", zoo_dir / "mlp.onnx", "-o", out, "--name", "Mlp"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: the templates must come from the installed package
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (out / "include" / "mlp" / "mlp.h").exists()
    assert "mlp_context_init" in (out / "src" / "mlp_runtime.c").read_text()
