"""Golden-directory tests: the whole generated tree of two tiny models is checked in.

A change to templates, planning or TVM's output shows up here as a readable diff.
Refresh after an intended change with:  UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden_trees.py
"""

from __future__ import annotations

import difflib
import os
import shutil
from pathlib import Path

import pytest
from model_zoo import GEN_ARGS, package_name
from packaging_helpers import relay2cmake

GOLDEN = Path(__file__).parent / "golden_trees"


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
