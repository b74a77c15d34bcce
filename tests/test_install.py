"""A non-editable install (what users get from a wheel) ships the templates and the sample."""

from __future__ import annotations

import subprocess
import venv

from packaging_helpers import REPO


def test_wheel_install_generates_a_package(tmp_path, zoo_dir):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", str(REPO)], check=True, capture_output=True, text=True
    )
    out = tmp_path / "pkg"
    result = subprocess.run(
        [env_dir / "bin" / "relay2cmake", "gen", zoo_dir / "mlp.onnx", "-o", out, "--name", "Mlp"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # not the checkout: the templates must come from the installed package
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (out / "include" / "mlp" / "mlp.h").exists()
    assert (out / "src" / "mlp_runtime.c").exists()
    installed = subprocess.run(
        [
            python,
            "-c",
            "import relay2cmake.samples as s; print(s.DIGITS_MODEL.exists(), s.DEMO_APP.exists())",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert installed.stdout.split() == ["True", "True"]
