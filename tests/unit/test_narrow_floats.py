"""The 8-bit float casts (frontends/narrow_floats.py) against ml_dtypes, whose encodings ONNX's
reference uses: every encoding decoded, and float32 values around every encoding's neighbours
(the ties included), the specials and both overflow rules encoded."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from packaging_helpers import call_kernel

from relay2cmake.frontends import narrow_floats


def _kernel(compute, *args):
    from tvm import te

    return te.create_prim_func([*[a for a in args if isinstance(a, te.Tensor)], compute])


def _probes(dtype: str) -> np.ndarray:
    """Every finite value of the format, the midpoints between neighbours (ties) and values
    just beside them, beyond the largest, the specials, and random floats."""
    values = np.unique(narrow_floats.values_table(dtype)[np.isfinite(narrow_floats.values_table(dtype))])
    midpoints = (values[:-1].astype(np.float64) + values[1:]) / 2
    near = np.concatenate([np.nextafter(midpoints.astype(np.float32), s) for s in (-np.inf, np.inf)])
    largest = float(values.max())
    beyond = np.array([largest * 1.03, largest * 1.07, largest * 4, 3e38], np.float32)
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-45], np.float32)
    random = np.random.default_rng(5).standard_normal(4000).astype(np.float32) * largest / 8
    probes = np.concatenate([values, midpoints.astype(np.float32), near, beyond, specials, random])
    return np.concatenate([probes, -probes]).astype(np.float32)


def _same(got: np.ndarray, want: np.ndarray) -> None:
    """As floats: NaN for NaN, equal values with equal signs of zero."""
    g, w = got.astype(np.float32), want.astype(np.float32)
    assert np.array_equal(np.isnan(g), np.isnan(w)), np.flatnonzero(np.isnan(g) != np.isnan(w))[:5]
    finite = ~np.isnan(w)
    bad = np.flatnonzero((g[finite] != w[finite]) | (np.signbit(g[finite]) != np.signbit(w[finite])))
    assert bad.size == 0, list(zip(g[finite][bad][:5], w[finite][bad][:5], strict=True))


@pytest.mark.parametrize("dtype", sorted(narrow_floats.FORMATS))
@pytest.mark.parametrize("saturate", [True, False])
def test_float32_encodes_as_ml_dtypes_rounds_with_onnx_overflow_rules(dtype, saturate):
    from tvm import te

    probes = _probes(dtype)
    x = te.placeholder(probes.shape, "float32", name="x")
    func = _kernel(narrow_floats.encode(x, dtype, saturate, "up"), x)
    got = call_kernel(func, [probes, np.zeros(probes.shape, np.uint8)]).view(getattr(ml_dtypes, dtype))
    kind = getattr(ml_dtypes, dtype)
    # ONNX: saturate clips to the largest finite value first (infinities too), NaN stays NaN.
    info = ml_dtypes.finfo(kind)
    want = (np.clip(probes, info.min, info.max) if saturate else probes).astype(kind)
    _same(got, want)


@pytest.mark.parametrize("dtype", [*sorted(narrow_floats.FORMATS), narrow_floats.E8M0])
def test_every_encoding_decodes_to_its_value(dtype):
    from tvm import te

    codes = np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, dtype))
    bits = te.placeholder((256,), dtype, name="bits")
    table = te.placeholder((256,), "float32", name="table")
    func = _kernel(narrow_floats.decode(bits, table, "float32"), bits, table)
    got = call_kernel(
        func, [codes.view(np.uint8), narrow_floats.values_table(dtype), np.zeros(256, np.float32)]
    )
    _same(got, codes.astype(np.float32))


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [True, False])
def test_e8m0_follows_onnx_rounding_modes(round_mode, saturate):
    from onnx import numpy_helper
    from tvm import te

    probes = np.abs(_probes("float8_e4m3fn"))
    probes = np.concatenate([probes, np.array([3.4e38, 2.0**127 * 1.5, 2.0**-127, 2.0**-149], np.float32)])
    x = te.placeholder(probes.shape, "float32", name="x")
    func = _kernel(narrow_floats.encode(x, narrow_floats.E8M0, saturate, round_mode), x)
    got = call_kernel(func, [probes, np.zeros(probes.shape, np.uint8)])
    want = numpy_helper.to_float8e8m0(probes, saturate, round_mode).view(np.uint8)
    np.testing.assert_array_equal(got, want)
