"""relay2cmake inspect: a model's needs, without lowering."""

from __future__ import annotations

import json

from packaging_helpers import fails_cleanly, relay2cmake


def _inspect(*args: str) -> dict:
    return json.loads(relay2cmake("inspect", *args, "--json").stdout)


def test_inspect_describes_a_cnn(zoo_dir):
    report = _inspect(str(zoo_dir / "cnn.onnx"))
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
    assert report["unsupported"] == ["Celu (smooth_step)", "Det (determinant)", "CumProd (running_product)"]
    text = relay2cmake("inspect", str(zoo_dir / "unsupported.onnx")).stdout
    assert "cannot be lowered (3)" in text


def test_inspect_symbolic_dimensions(zoo_dir):
    report = _inspect(str(zoo_dir / "symbolic_batch.onnx"))
    assert report["inputs"][0]["shape"] == ["N", 5]
    assert report["estimated_arena_bytes"] is None
    fixed = _inspect(str(zoo_dir / "symbolic_batch.onnx"), "--input-shape", "x=3,5")
    assert fixed["estimated_arena_bytes"] == 2 * 64  # two 3x3 float tensors, 64-byte aligned
    assert "--input-shape" in relay2cmake("inspect", str(zoo_dir / "symbolic_batch.onnx")).stdout


def test_inspect_bad_file(tmp_path):
    (tmp_path / "bad.onnx").write_bytes(b"not a model")
    fails_cleanly("inspect", tmp_path / "bad.onnx")
