"""--constant-input freezes an ONNX input at generation time (axes, shapes, scales that a
model takes at run time but a static package cannot)."""

from __future__ import annotations

import numpy as np
import onnx
from model_zoo import runtime_axes
from packaging_helpers import build_package, fails_cleanly, onnxruntime_outputs, run


def test_runtime_axes_need_and_accept_constant_input(tmp_path):
    undeclared = tmp_path / "undeclared.onnx"
    onnx.save(runtime_axes(declared=False), str(undeclared))
    message = fails_cleanly("gen", undeclared, "-o", tmp_path / "strict")
    assert "--constant-input" in message and "axes" in message, message
    assert not (tmp_path / "strict").exists()

    model = tmp_path / "axes.onnx"
    onnx.save(runtime_axes(), str(model))

    package = build_package(model, tmp_path / "work", "Axes", ["--constant-input", "axes=1"])
    meta = package.metadata
    assert [i["name"] for i in meta["inputs"]] == ["x"], "the frozen input is gone from the API"
    assert meta["outputs"][0]["shape"] == [2, 4]
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run([package.cli, "--output-dir", tmp_path / "out", tmp_path / "x.npy"])
    full_meta = {"inputs": [*meta["inputs"], {"name": "axes"}], "outputs": meta["outputs"]}
    expected = onnxruntime_outputs(model, full_meta, [x, np.array([1], dtype=np.int64)])
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output_0.npy"), expected[0], rtol=1e-5, atol=1e-6)


def test_constant_input_errors(tmp_path):
    model = tmp_path / "axes.onnx"
    onnx.save(runtime_axes(), str(model))
    for flag, message in [
        ("nope=1", "not an input of this model"),
        ("axes=1,2", "the values have shape [2]"),
        ("axes", "is not NAME=values.npy"),
        ("axes=missing.npy", "cannot read the values"),
    ]:
        assert message in fails_cleanly("gen", model, "-o", tmp_path / "o", "--constant-input", flag), flag
