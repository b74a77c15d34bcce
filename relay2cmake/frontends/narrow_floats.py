"""Casts to and from the 8-bit float types (ONNX's FLOAT8E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ,
E8M0) as integer arithmetic on their bits: TVM's own casts got every conformance case of these
types wrong (no FNUZ encodings, no saturation, E8M0's rounding mode ignored).

Decoding is a look-up in a table of the 256 values (made with ml_dtypes, whose encodings ONNX
uses); encoding rounds a float32 to the format's grid (nearest, ties to even) and assembles the
bits, with ONNX's overflow rules: ``saturate`` clamps to the largest finite value (infinities
included), otherwise an overflow is infinity where the format has one and NaN where it has not.
Float64 inputs are rounded to float32 first (a double rounding only at exact float32 ties)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tvm import te, tirx


@dataclass(frozen=True)
class Float8:
    mantissa_bits: int
    bias: int
    largest: float  # the largest finite value
    nan: int  # the encoding of NaN (ORed with the sign where the format has signed NaNs)
    infinity: int | None  # the encoding of +infinity, None where the format has none
    negative_zero: bool  # False: the FNUZ formats, where 0x80 is NaN
    bits: int = 8  # FLOAT4E2M1 (``FLOAT4``) has 4
    nan_flips_sign: bool = False  # NaN's encoding XORed with the sign (FLOAT4: a signed zero)


FORMATS: dict[str, Float8] = {
    "float8_e4m3fn": Float8(3, 7, 448.0, 0x7F, None, True),
    "float8_e4m3fnuz": Float8(3, 8, 240.0, 0x80, None, False),
    "float8_e5m2": Float8(2, 15, 57344.0, 0x7F, 0x7C, True),
    "float8_e5m2fnuz": Float8(2, 16, 57344.0, 0x80, None, False),
}
# No NaN and no infinity: a NaN becomes a zero of the opposite sign (as ml_dtypes, and so
# ONNX's test data, have it), an overflow the largest value whatever ``saturate`` says.
FLOAT4 = Float8(1, 1, 6.0, 0x8, None, True, bits=4, nan_flips_sign=True)
E8M0 = "float8_e8m0fnu"  # exponent only: 2^(bits - 127), 0xFF is NaN; no sign, no zero
NARROW = frozenset(FORMATS) | {E8M0}


def values_table(dtype: str) -> np.ndarray:
    """The float32 value of each of the 256 encodings of ``dtype``."""
    import ml_dtypes

    return np.arange(256, dtype=np.uint8).view(getattr(ml_dtypes, dtype)).astype(np.float32)


def decode(bits: te.Tensor, table: te.Tensor, out_dtype: str) -> te.Tensor:
    """TE: the values of the 8-bit floats ``bits`` (a tensor of a NARROW dtype), as ``out_dtype``."""
    from tvm import te, tirx

    return te.compute(
        bits.shape,
        lambda *i: table[tirx.Cast("int32", tirx.reinterpret("uint8", bits(*i)))].astype(out_dtype),
        name="decode_float8",
    )


def encode(x: te.Tensor, dtype: str, saturate: bool, round_mode: str) -> te.Tensor:
    """TE: the float tensor ``x`` as the 8-bit float ``dtype``."""
    from tvm import te, tirx

    def element(*i):
        value = x(*i) if x.dtype == "float32" else x(*i).astype("float32")
        code = (
            _e8m0_code(value, saturate, round_mode)
            if dtype == E8M0
            else float_code(value, FORMATS[dtype], saturate)
        )
        return tirx.reinterpret(dtype, code.astype("uint8"))

    return te.compute(x.shape, element, name="encode_float8")


def float_code(value: tirx.PrimExpr, fmt: Float8, saturate: bool) -> tirx.PrimExpr:
    """The encoding of one float32 ``value`` in ``fmt`` (an int32 expression)."""
    from tvm import tirx

    def i32(number: int):
        return tirx.const(number, "int32")

    smallest_normal_exponent = 1 - fmt.bias
    largest = int(np.array(fmt.largest, np.float32).view(np.int32))
    largest_code = (largest >> (23 - fmt.mantissa_bits)) - ((127 - fmt.bias) << fmt.mantissa_bits)
    subnormal_scale = 2.0 ** (fmt.mantissa_bits - smallest_normal_exponent)

    def from_magnitude(magnitude):
        # The grid's step around |value|: 2^(exponent - mantissa bits), no finer than the
        # subnormals' (a float32's exponent field, clamped to the format's smallest normal).
        field = (tirx.reinterpret("int32", magnitude) >> i32(23)) & i32(0xFF)
        exponent = tirx.max(field - i32(127), i32(smallest_normal_exponent))
        step = tirx.reinterpret("float32", (exponent + i32(127 - fmt.mantissa_bits)) << i32(23))
        return _let(tirx.nearbyint(magnitude / step) * step, "float32", from_rounded)  # ties to even

    def from_rounded(rounded):
        # A normal value's float32 bits shifted to the format's mantissa width, less the
        # difference of the biases; a subnormal one counted in the smallest subnormal.
        normal = (tirx.reinterpret("int32", rounded) >> i32(23 - fmt.mantissa_bits)) - i32(
            (127 - fmt.bias) << fmt.mantissa_bits
        )
        subnormal = tirx.Cast("int32", rounded * tirx.const(subnormal_scale, "float32"))
        finite = tirx.Select(
            rounded < tirx.const(2.0**smallest_normal_exponent, "float32"), subnormal, normal
        )
        if saturate:
            overflow = i32(largest_code)
        else:
            overflow = i32(fmt.infinity if fmt.infinity is not None else fmt.nan)
        return tirx.Select(rounded > tirx.const(fmt.largest, "float32"), overflow, finite)

    def from_code(code):
        bits = tirx.reinterpret("int32", value)
        sign = ((bits >> i32(31)) & i32(1)) << i32(fmt.bits - 1)
        signed = code | sign
        if not fmt.negative_zero:  # no -0 (and 0x80 is NaN): a zero keeps no sign
            signed = tirx.Select(code == i32(0), code, signed)
        # NaN told by its bits: TVM's simplifier folds ``x != x`` to false
        is_nan = (bits & i32(0x7FFFFFFF)) > i32(0x7F800000)
        return tirx.Select(is_nan, i32(fmt.nan) ^ sign if fmt.nan_flips_sign else i32(fmt.nan), signed)

    return _let(_let(tirx.abs(value), "float32", from_magnitude), "int32", from_code)


def _let(value, dtype: str, body):
    """``body(v)`` with ``v`` bound to ``value`` once (the expression would otherwise be
    copied into every use)."""
    from tvm import tirx

    var = tirx.Var("v", dtype)
    return tirx.Let(var, value, body(var))


def _e8m0_code(value, saturate: bool, round_mode: str):
    """E8M0 shares float32's exponent field; the sign is dropped, infinities and NaN give NaN,
    and the mantissa rounds the exponent up, down or to the nearest (ONNX's Cast-24 rules:
    a tie rounds up unless the value is subnormal)."""
    from tvm import tirx

    bits = tirx.reinterpret("int32", value)
    exponent = (bits >> 23) & 0xFF
    fraction = bits & 0x7FFFFF
    if round_mode == "up":
        round_up = fraction > 0
    elif round_mode == "down":
        round_up = tirx.const(False)
    elif round_mode == "nearest":
        half = (fraction & 0x400000) > 0
        round_up = tirx.And(half, tirx.Or((fraction & 0x3FFFFF) > 0, exponent > 0))
    else:
        raise NotImplementedError(f"Cast to FLOAT8E8M0 with round_mode {round_mode!r}")
    if saturate:
        round_up = tirx.And(round_up, exponent < 0xFE)
    rounded = exponent + tirx.Select(round_up, tirx.const(1, "int32"), tirx.const(0, "int32"))
    return tirx.Select(exponent == 0xFF, tirx.const(0xFF, "int32"), rounded)
