"""Control flow the static driver flattens (If → both branches + where) and the dtypes that
travel as raw bits (bfloat16, float8)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from model_zoo import raw_bit_dtypes, runtime_if
from onnx.reference import ReferenceEvaluator
from packaging_helpers import build_package, run


def test_if_on_a_runtime_condition_takes_either_branch(tmp_path):
    model = tmp_path / "branch.onnx"
    onnx.save(runtime_if(), str(model))
    package = build_package(model, tmp_path / "work", "Branch", [])
    cli = package.cli
    reference = ReferenceEvaluator(runtime_if())
    base = np.random.default_rng(3).standard_normal((2, 3)).astype(np.float32)
    for x in (np.abs(base), -np.abs(base)):  # the sum is positive, then negative
        np.save(tmp_path / "x.npy", x)
        out = tmp_path / "out"
        run([cli, "--output-dir", out, tmp_path / "x.npy"])
        expected = reference.run(None, {"x": x})
        for index, want in enumerate(expected):
            np.testing.assert_allclose(np.load(out / f"output_{index}.npy"), want, rtol=1e-6, atol=1e-6)


def test_bfloat16_and_float8_pass_as_raw_bits(tmp_path):
    model = tmp_path / "raw.onnx"
    onnx.save(raw_bit_dtypes(), str(model))
    package = build_package(model, tmp_path / "work", "Raw", [])
    header = (package.install / "include" / "raw" / "raw.h").read_text()
    assert "const uint16_t* x;" in header and "uint8_t* z;" in header
    meta = package.metadata
    assert [o["dtype"] for o in meta["outputs"]] == ["bfloat16", "float8_e4m3fn"]

    # Squares stay normal float8 numbers: TVM's float8 rounding of subnormals differs from
    # ml_dtypes' (a TVM lowering issue, docs/conformance.md).
    rng = np.random.default_rng(4)
    x = (rng.uniform(0.5, 2.0, (2, 4)) * rng.choice([-1, 1], (2, 4))).astype(ml_dtypes.bfloat16)
    np.save(tmp_path / "x.npy", x)  # ml_dtypes writes '<V2'; the cli takes it as bfloat16 bits
    run([package.cli, "--output-dir", tmp_path / "out", tmp_path / "x.npy"])
    y = np.load(tmp_path / "out" / "output_0.npy")
    z = np.load(tmp_path / "out" / "output_1.npy")
    assert y.dtype == np.uint16 and z.dtype == np.uint8, "raw bits load with plain NumPy"
    square = x.astype(np.float32) ** 2 + np.float32(0.25)
    np.testing.assert_array_equal(y.view(ml_dtypes.bfloat16), square.astype(ml_dtypes.bfloat16))
    np.testing.assert_array_equal(z.view(ml_dtypes.float8_e4m3fn), square.astype(ml_dtypes.float8_e4m3fn))
