"""relay2cmake inspect: a model's needs, without lowering."""

from __future__ import annotations

import json

import pytest
from packaging_helpers import fails_cleanly, relay2cmake


def _inspect(*args: str) -> dict:
    return json.loads(_inspect_text(*args, "--json"))


def _inspect_text(*args: str) -> str:
    """In this process (TVM and PyTorch are imported once per test worker, not per call);
    test_inspect_describes_a_cnn runs the command as a program."""
    from typer.testing import CliRunner

    from relay2cmake.cli import app

    result = CliRunner().invoke(app, ["inspect", *args])
    assert result.exit_code == 0 and result.exception is None, (result.exception, result.output)
    return result.stdout


def test_inspect_describes_a_cnn(zoo_dir):
    report = json.loads(relay2cmake("inspect", str(zoo_dir / "cnn.onnx"), "--json").stdout)  # as a program
    assert report["inputs"] == [{"name": "pixels", "dtype": "float32", "shape": [1, 3, 32, 32]}]
    assert report["outputs"] == [{"name": "scores", "dtype": "float32", "shape": [1, 5]}]
    assert report["operators"]["Conv"] == 2 and report["operators"]["Softmax"] == 1
    assert report["parameter_bytes"] == 5972 and report["parameters"] == 9
    # Largest live set: conv1's output (8x32x32 floats) next to the batch-norm output.
    assert report["estimated_arena_bytes"] == 2 * 8 * 32 * 32 * 4
    assert report["lowerable"] is True and report["unsupported"] == []


def test_inspect_lists_unsupported_operators(zoo_dir):
    report = _inspect(str(zoo_dir / "unsupported.onnx"))
    assert report["lowerable"] is False
    # Celu is not among them: its ONNX function body replaces it, as in gen.
    assert report["unsupported"] == [
        "RandomNormalLike (jitter)",
        "RandomUniformLike (noise)",
        "Multinomial (draw)",
    ]
    text = _inspect_text(str(zoo_dir / "unsupported.onnx"))
    assert "cannot be lowered (3)" in text


def test_inspect_symbolic_dimensions(zoo_dir):
    report = _inspect(str(zoo_dir / "symbolic_batch.onnx"))
    assert report["inputs"][0]["shape"] == ["N", 5]
    assert report["estimated_arena_bytes"] is None
    fixed = _inspect(str(zoo_dir / "symbolic_batch.onnx"), "--input-shape", "x=3,5")
    assert fixed["estimated_arena_bytes"] == 2 * 64  # two 3x3 float tensors, 64-byte aligned
    assert "--input-shape" in _inspect_text(str(zoo_dir / "symbolic_batch.onnx"))


def test_inspect_bad_file(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    fails_cleanly("inspect", tmp_path / "bad.onnx")


def test_inspect_reads_an_exported_program(tmp_path):
    """A .pt2: PyTorch's shapes with the symbolic batch by its name, ATen operators, the
    parameters' bytes, an arena once the batch is fixed, and an operator TVM's importer has
    no converter for named with its node."""
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(6, 4)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.special.i0(x)

    batch = torch.export.Dim("batch", min=1, max=64)
    program = torch.export.export(Net(), (torch.zeros(2, 6),), dynamic_shapes={"x": {0: batch}})
    torch.export.save(program, str(tmp_path / "net.pt2"))
    report = _inspect(str(tmp_path / "net.pt2"))
    assert report["format"] == "PyTorch ExportedProgram" and report["opset"] is None
    (given,) = report["inputs"]
    assert (given["name"], given["dtype"], given["shape"][1:]) == ("x", "float32", [6]), given
    assert isinstance(given["shape"][0], str), given  # PyTorch's symbol for the batch (s0, s77, ...)
    assert report["outputs"][0]["name"] == "output" and report["outputs"][0]["shape"][1] == 4
    assert report["operators"]["aten.linear.default"] == 1 and report["operators"]["aten.relu.default"] == 1
    assert report["parameters"] == 2 and report["parameter_bytes"] == (6 * 4 + 4) * 4
    assert report["estimated_arena_bytes"] is None and report["lowerable"] is True
    fixed = _inspect(str(tmp_path / "net.pt2"), "--input-shape", "x=3,6")
    assert fixed["estimated_arena_bytes"] == 2 * 64  # linear's and relu's 3x4 outputs, 64-byte aligned

    torch.export.save(torch.export.export(Odd(), (torch.zeros(3),)), str(tmp_path / "odd.pt2"))
    odd = _inspect(str(tmp_path / "odd.pt2"))
    assert odd["lowerable"] is False and odd["unsupported"] == ["aten.special_i0.default (special_i0)"], odd
    assert "cannot be lowered (1): aten.special_i0.default" in _inspect_text(str(tmp_path / "odd.pt2"))


TVMSCRIPT = """
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        with R.dataflow():
            h = R.nn.relu(R.matmul(x, R.const(np.ones((4, 3), "float32"))))
            total = R.sum(h, axis=[1])
            R.output(h, total)
        return (h, total)
"""


def test_inspect_reads_a_tvmscript_module(tmp_path):
    source = tmp_path / "mlp.py"
    source.write_text(TVMSCRIPT)
    report = _inspect(str(source))
    assert report["format"] == "TVMScript (Relax)"
    assert report["inputs"] == [{"name": "x", "dtype": "float32", "shape": ["n", 4]}]
    assert [o["name"] for o in report["outputs"]] == ["output_0", "output_1"]
    assert report["operators"] == {"relax.matmul": 1, "relax.nn.relu": 1, "relax.sum": 1}
    assert report["parameters"] == 1 and report["parameter_bytes"] == 4 * 3 * 4
    assert report["estimated_arena_bytes"] is None and report["lowerable"] is True
    fixed = _inspect(str(source), "--input-shape", "x=5,4")
    assert fixed["outputs"][0]["shape"] == [5, 3]
    # matmul's 5x3 output dies at relu, and sum's output reuses its space: 2 x 64 bytes
    assert fixed["estimated_arena_bytes"] == 2 * 64


def test_inspect_names_every_format_it_reads(tmp_path):
    (tmp_path / "model.tflite").write_bytes(b"x")
    message = fails_cleanly("inspect", tmp_path / "model.tflite")
    assert ".pt2" in message and ".py" in message
