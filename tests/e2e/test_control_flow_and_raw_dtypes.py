"""Control flow the static driver flattens (If → both branches + where) and the dtypes that
travel as raw bits (bfloat16, float8) or packed (int4, uint4, int2, float4)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from model_zoo import raw_bit_dtypes, runtime_if, sub_byte_dtypes
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


def test_sub_byte_types_travel_packed(tmp_path):
    model = tmp_path / "sub.onnx"
    onnx.save(sub_byte_dtypes(), str(model))
    package = build_package(model, tmp_path / "work", "Sub", [])
    header = (package.install / "include" / "sub" / "sub.h").read_text()
    # 15 int4 take 8 bytes, 15 int2 take 4: the C buffers hold them packed
    assert "#define SUB_INPUT_X_BYTES 8u" in header and "#define SUB_OUTPUT_WRAPPED_BYTES 4u" in header
    assert "const uint8_t* x;" in header
    meta = package.metadata
    assert [o["dtype"] for o in meta["outputs"]] == ["uint4", "float4_e2m1fn", "int2", "float32"]

    # every int4 value, and sums that reach past uint4's and float4's ranges (saturated)
    x = np.arange(-8, 7).reshape(3, 5).astype(np.float32).astype(ml_dtypes.int4)
    f = np.linspace(-3.1, 3.3, 15).reshape(3, 5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)  # ml_dtypes writes '<V1', one element per byte
    np.save(tmp_path / "f.npy", f)
    run([package.cli, "--output-dir", tmp_path / "out", tmp_path / "x.npy", tmp_path / "f.npy"])
    expected = ReferenceEvaluator(sub_byte_dtypes()).run(None, {"x": x, "f": f})
    for index, want in enumerate(expected):
        got = np.load(tmp_path / "out" / f"output_{index}.npy")
        if want.dtype == np.float32:
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            continue
        assert got.dtype == np.uint8 and got.shape == want.shape, "one element per byte, plain NumPy"
        # the element's bits at the bottom of its byte, as ml_dtypes stores them (-0 kept)
        np.testing.assert_array_equal(got, want.view(np.uint8))
        np.testing.assert_array_equal(got.view(want.dtype).astype(np.float32), want.astype(np.float32))
