"""A model file is untrusted input: names from it (tensor names, the file name) reach the
generated files only through an encoder for each file's language, never pasted. Each payload
would run or break something if pasted: a preprocessor directive or a constructor in the C
kernels, a Python statement in conanfile.py, an HTML comment end or a heading in the README."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper

from relay2cmake.generate import GenerateOptions, generate

C_PAYLOADS = [
    "x\n#error injected through a name\n",
    "x\n__attribute__((constructor)) static void owned(void) { *(volatile int*)0 = 1; }\n",
    'q" */ /* \\',
    "ctrl\x01\x1b[31m\x7f",
    "bidi\u202eevil\u2066",
]
FILE_NAME = 'm"; import os; os.system("touch PWNED"); x="--> *\\.onnx'


def _model(path: Path, input_name: str, output_name: str) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node("Relu", [input_name], ["hidden"], name=input_name),
            helper.make_node("Add", ["hidden", "bias\n#error"], [output_name], name=output_name),
        ],
        "g\n#error",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np.float32), "bias\n#error")],
    )
    return save_model(graph, path, 13)


@pytest.mark.parametrize("payload", C_PAYLOADS, ids=range(len(C_PAYLOADS)))
def test_hostile_tensor_names_never_reach_code(payload, tmp_path):
    """gen's self-check builds the portable C kernels and the object set with the package's
    warnings and runs the golden test: a payload that reached code would fail it (or run)."""
    model = _model(tmp_path / "m.onnx", payload, payload + "_out")
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Hostile"))
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["self_check"].startswith("passed") and "portable C kernels" in meta["self_check"]
    assert meta["inputs"][0]["name"] == payload, "the original name is kept, as data"
    kernels = (tmp_path / "pkg" / "src" / "hostile_kernels.c").read_text()
    for fragment in ("#error", "constructor", "owned", "\x1b", "\u202e"):
        assert fragment not in kernels
    for path in (tmp_path / "pkg").rglob("*"):
        if path.suffix in (".c", ".h", ".hpp", ".txt", ".py", ".in", ".md"):
            text = path.read_text()
            assert "\x1b" not in text and "\u202e" not in text, path
            for line in text.splitlines():
                assert not line.lstrip().startswith("#error"), (path, line)


def test_hostile_file_name_stays_inert(tmp_path):
    model = _model(tmp_path / FILE_NAME, "x", "y")
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Hostile", targets=("c",)))
    conanfile = (tmp_path / "pkg" / "conanfile.py").read_text()
    tree = ast.parse(conanfile)  # still Python
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "system"]
    assert not calls, "the file name became code"
    description = next(
        n.value.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "description"
    )
    assert '"' not in description and "\\" not in description
    readme = (tmp_path / "pkg" / "README.md").read_text()
    first = readme.splitlines()[0]
    assert first.startswith("<!--") and first.endswith("-->") and first.count("-->") == 1
    header = (tmp_path / "pkg" / "include" / "hostile" / "hostile.h").read_text()
    assert header.count("*/") == header.count("/*")
    assert json.loads((tmp_path / "pkg" / "metadata.json").read_text())["model"]["file"] == FILE_NAME
