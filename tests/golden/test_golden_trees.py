"""Golden-directory tests: the whole generated tree of two tiny models is checked in.

A change to templates, planning or TVM's output shows up here as a readable diff.
Refresh after an intended change with:
    UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/golden/test_golden_trees.py
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from model_zoo import GEN_ARGS, package_name
from packaging_helpers import relay2cmake

GOLDEN = Path(__file__).parent / "trees"


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("model", ["passthrough", "awkward_names"])
def test_generated_tree_matches_golden(model, zoo_dir, tmp_path):
    out = tmp_path / "pkg"
    relay2cmake(
        "gen",
        str(zoo_dir / f"{model}.onnx"),
        "-o",
        str(out),
        "--name",
        package_name(model),
        "--target",
        "x86_64",  # explicit, so the tree does not depend on the machine generating it
        *GEN_ARGS.get(model, []),
    )
    expected_root = GOLDEN / model
    if os.environ.get("UPDATE_GOLDEN"):
        shutil.rmtree(expected_root, ignore_errors=True)
        shutil.copytree(out, expected_root)
    actual, expected = _files(out), _files(expected_root)
    assert sorted(actual) == sorted(expected), "the set of generated files changed"
    for name, data in actual.items():
        if data != expected[name]:
            if name.endswith((".npy", ".o")):
                pytest.fail(f"{name} differs from the golden copy")
            diff = difflib.unified_diff(
                expected[name].decode().splitlines(),
                data.decode().splitlines(),
                f"golden/{name}",
                f"new/{name}",
                lineterm="",
            )
            pytest.fail("\n".join(list(diff)[:80]))


TEMPLATES = Path(__file__).resolve().parents[2] / "cmake_templates"
STATIC_SOURCES = sorted(p for p in TEMPLATES.rglob("*") if p.suffix in (".c", ".h"))


def test_the_static_runtime_is_plain_c_that_compiles_on_its_own(tmp_path):
    """The C that is the same for every package (runtime, threads, builtins, weights file,
    tools) is real C with a ``__prefix__`` placeholder: each file, with the prefix put in,
    compiles warning-free as C99 against a checked-in package's generated headers, with and
    without threads and external weights, and profiling (a model of no kernel steps)."""
    compilers = [c for c in ("gcc", "clang") if shutil.which(c)]
    if not compilers:
        pytest.fail("neither gcc nor clang is installed (make system-deps installs them)")
    assert STATIC_SOURCES, "no static C sources found"
    package = tmp_path / "pkg"
    shutil.copytree(GOLDEN / "passthrough", package)
    for source in STATIC_SOURCES:
        text = source.read_text()
        assert "{{" not in text and "{%" not in text, f"{source.name} has template syntax"
        relative = source.relative_to(source.parents[1]).as_posix().replace("__prefix__", "passthrough")
        rendered = text.replace("__prefix__", "passthrough").replace("__PREFIX__", "PASSTHROUGH")
        (package / relative).write_text(rendered)
        if source.suffix != ".c":
            continue
        for compiler in compilers:
            for defines in (
                [],
                ["-DPASSTHROUGH_THREADS=1", "-DPASSTHROUGH_EXTERNAL_WEIGHTS"],
                ["-DPASSTHROUGH_PROFILE", "-U_POSIX_C_SOURCE"],  # its clock by its own define
            ):
                command = [
                    compiler, "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror",
                    "-fsyntax-only", "-I", str(package / "include"), "-I", str(package / "src"),
                    *defines, str(package / relative),
                ]  # fmt: skip
                result = subprocess.run(command, capture_output=True, text=True, check=False)
                assert result.returncode == 0, f"{compiler} {' '.join(defines)} {relative}:\n{result.stderr}"
