"""A model file is untrusted input: names from it (tensor names, the file name) reach the
generated files only through an encoder for each file's language, never pasted. Each payload
would run or break something if pasted: a preprocessor directive or a constructor in the C
kernels, a Python statement in conanfile.py, an HTML comment end or a heading in the README."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper

from relay2cmake.commands.generate import GenerateOptions, generate

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


@pytest.mark.parametrize(
    "payload",
    # The first in the default run; test_payloads_in_every_slot_stay_data covers the rest's kinds.
    [pytest.param(p, marks=() if i == 0 else pytest.mark.slow) for i, p in enumerate(C_PAYLOADS)],
    ids=range(len(C_PAYLOADS)),
)
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


# Legal tensor names that are macros in GNU C (linux, unix) or in <stdint.h>, members of the
# C++ wrapper's structs, or hold "__" (reserved in C++).
COLLIDING_INPUTS = ["linux", "unix", "INT8_MAX", "SIZE_MAX", "type", "name", "index", "shape", "bytes",
                    "num_elements", "std", "Span", "FLOAT__INDEX"]  # fmt: skip
COLLIDING_OUTPUTS = ["dynamic_axis", "Error", "Model", "Inputs", "OutputVectors", "__out"]


def test_names_colliding_with_macros_and_the_wrapper_still_compile(tmp_path):
    """The package (built by gen's self-check, GNU C), and a C++ program that includes the
    wrapper and runs the model (g++ -std=gnu++17 -Wall -Wextra -Werror)."""
    import subprocess

    from packaging_helpers import configure_build

    floats = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in COLLIDING_INPUTS]
    nodes = [helper.make_node("Sum", COLLIDING_INPUTS, ["total"])]
    nodes += [helper.make_node("Relu", ["total"], [n]) for n in COLLIDING_OUTPUTS]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in COLLIDING_OUTPUTS]
    model = save_model(helper.make_graph(nodes, "g", floats, outputs), tmp_path / "m.onnx", 13)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Colliding"))
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["self_check"].startswith("passed")
    build = tmp_path / "build"
    configure_build(tmp_path / "pkg", build, "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror")
    app = tmp_path / "app.cpp"
    app.write_text(
        '#include "colliding/colliding.hpp"\n'
        "int main() {\n"
        "  colliding::Model model;\n"
        "  std::vector<float> x(2, 1.0f);\n"
        f"  colliding::OutputVectors out = model.run({{ {', '.join(['x'] * len(COLLIDING_INPUTS))} }});\n"
        "  return out.dynamic_axis_[0] == 13.0f ? 0 : 1;\n"
        "}\n"
    )
    binary = tmp_path / "app"
    subprocess.run(
        ["g++", "-std=gnu++17", "-Wall", "-Wextra", "-Werror", f"-I{tmp_path / 'pkg' / 'include'}",
         str(app), str(build / "libcolliding.a"), "-lpthread", "-lm", "-o", str(binary)],
        check=True,
    )  # fmt: skip
    assert subprocess.run([str(binary)], check=False).returncode == 0


def test_names_with_terminal_escapes_never_reach_the_terminal(tmp_path):
    """inspect, gen's progress and messages, and the package's _cli print names from the
    model: escape sequences (here: clear the screen, set the window title) come out inert."""
    from packaging_helpers import configure_build, relay2cmake, run

    name = "evil\x1b[2J\x1b]0;owned\x07\u202e"
    model = _model(tmp_path / "m\x1b[31m.onnx", name, name + "_out")
    inspected = relay2cmake("inspect", str(model))
    generated = relay2cmake(
        "gen", str(model), "-o", str(tmp_path / "pkg"), "--name", "Escapes", "--target", "c"
    )
    build = tmp_path / "build"
    configure_build(tmp_path / "pkg", build)
    usage = run([build / "escapes_cli", "--help"])
    for text in (inspected.stdout, inspected.stderr, generated.stdout, generated.stderr, usage.stderr):
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text, text
    assert "evil?[2J" in inspected.stdout + usage.stderr


# One payload per target language of the generated files; each goes into every slot of a
# model where text can hide. A payload that reached a file unencoded would break its build
# (-Werror), run (touch PWNED), or change its structure.
SLOT_PAYLOADS = {
    "c": 'a\n#error pwned\n*/ /* "\\',
    "python": 'a"""; import os; os.system("touch PWNED"); """\'\'\'',
    "cmake": 'a")\nfile(WRITE PWNED x)\nmessage(FATAL_ERROR "pwned")\n#${CMAKE_COMMAND}',
    "markdown": "a --> <script>alert(1)</script> ](javascript:x) \n# pwned |x|",
    "json": 'a"}, "pwned": {"\x00\\u0000',
    "shell": "a$(touch PWNED)`touch PWNED`;touch PWNED",
    "terminal": "a\x1b]0;pwned\x07\x1b[2J\u202e\u2066",
}
SLOTS = ("input", "output", "node", "initializer", "graph", "model doc", "graph doc", "node doc",
         "metadata key", "metadata value", "producer", "domain", "file name")  # fmt: skip
QUICK_PAYLOADS = {"c", "python"}


def _every_slot_model(folder: Path, payload: str) -> Path:
    graph = helper.make_graph(
        [
            helper.make_node(
                "Add", [payload, payload + "w"], [payload + "o"], name=payload, doc_string=payload
            )
        ],
        payload,
        [helper.make_tensor_value_info(payload, TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(payload + "o", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((2, 3), np.float32), payload + "w")],
        doc_string=payload,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(payload.replace("\x00", ""), 1)],
        producer_name=payload,
        doc_string=payload,
    )
    model.ir_version = 8
    helper.set_model_props(model, {payload: payload})
    path = folder / ("m" + "".join(ch if ch not in "/\x00" else "_" for ch in payload)[:80] + ".onnx")
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize(
    "language",
    [pytest.param(k, marks=() if k in QUICK_PAYLOADS else pytest.mark.slow) for k in SLOT_PAYLOADS],
)
def test_payloads_in_every_slot_stay_data(language, tmp_path, monkeypatch):
    from packaging_helpers import configure_build

    payload = SLOT_PAYLOADS[language]
    monkeypatch.chdir(tmp_path)  # a payload that ran would leave PWNED here
    model = _every_slot_model(tmp_path, payload)
    injected_lines = [part.strip() for part in payload.split("\n")[1:] if part.strip()]
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Slots"))
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())  # still JSON
    assert meta["inputs"][0]["name"] == payload and meta["model"]["file"] == model.name
    ast.parse((tmp_path / "pkg" / "conanfile.py").read_text())
    for kernels in ("OFF", "ON"):
        configure_build(
            tmp_path / "pkg", tmp_path / f"build_{kernels}", "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror",
            f"-DSLOTS_PORTABLE_KERNELS={kernels}",
        )  # fmt: skip
    for path in (tmp_path / "pkg").rglob("*"):
        if path.is_file() and path.suffix in (
            ".c",
            ".h",
            ".hpp",
            ".txt",
            ".py",
            ".in",
            ".md",
            ".cmake",
            ".json",
        ):
            text = path.read_text()
            assert "\x1b" not in text and "\u202e" not in text and "\x00" not in text, path
            # A payload line that starts a line of a file escaped its string or comment.
            for line in text.splitlines():
                assert not any(line.lstrip().startswith(part) for part in injected_lines), (path, line)
    assert not list(tmp_path.rglob("PWNED"))


NAME_EXAMPLES = max(2, int(os.environ.get("R2C_FUZZ_EXAMPLES", "40")) // 20)  # make fuzz: 50


@settings(max_examples=NAME_EXAMPLES, deadline=None, derandomize=NAME_EXAMPLES <= 2,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(names=st.lists(st.text(min_size=1, max_size=40), min_size=3, max_size=3, unique=True))
def test_fuzzed_names_generate_packages_that_build(tmp_path_factory, names):
    """Arbitrary Unicode (control characters, surrogates excluded by protobuf, quotes, "__",
    macros...) as input, output and node names: gen's self-check builds both kernel sets."""
    folder = tmp_path_factory.mktemp("names")
    input_name, output_name, node_name = names
    graph = helper.make_graph(
        [helper.make_node("Relu", [input_name], [output_name], name=node_name)],
        node_name,
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [2, 3])],
    )
    model = save_model(graph, folder / "m.onnx", 13)
    generate(GenerateOptions(model=model, out=folder / "pkg", name="Fuzzed"))
    meta = json.loads((folder / "pkg" / "metadata.json").read_text())
    assert meta["self_check"].startswith("passed") and meta["inputs"][0]["name"] == input_name
