"""The ``com.microsoft`` quantized operators ONNX Runtime's own quantizer writes in QOperator
format (``quantize_static(..., quant_format=QOperator)``) for CNNs and classifier heads:
QLinearAdd, QLinearMul, QLinearGlobalAveragePool and QGemm. Each computes as
ONNX Runtime's CPU kernels do: zero points subtracted in int32, the arithmetic in float32 with
the scale ratios ONNX Runtime forms (QLinearAdd: ``a * (sa / sc) + b * (sb / sc) + zc``), or
an exact int32 product for QGemm, then rounding half to even and saturation. Where ONNX
Runtime's vector code fuses a multiply-add the last rounding can differ by one unit at exact
ties (the QLinear tests accept 1)."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _static_shape
from relay2cmake.frontends.onnx_quantized import (
    _centred,
    _integer_matmul,
    _multiplier,
    _requantized,
    _saturated,
)

DOMAIN = "com.microsoft"


def _float(bb, values, zero_point):
    """``values - zero_point`` as float32 (exact: both are 8-bit)."""
    return bb.emit(relax.op.astype(_centred(bb, values, zero_point), "float32"))


def _output_type(zero_point, fallback) -> str:
    return str((zero_point if zero_point is not None else fallback).ty.dtype)


def _zero(zero_point):
    if zero_point is None:
        return relax.const(np.float32(0.0), "float32")
    return relax.op.astype(zero_point, "float32")


class QLinearAdd(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        a, a_scale, a_zero, b, b_scale, b_zero, c_scale = inputs[:7]
        c_zero = inputs[7] if len(inputs) > 7 else None
        ratio_a = bb.emit(relax.op.divide(a_scale, c_scale))
        ratio_b = bb.emit(relax.op.divide(b_scale, c_scale))
        value = relax.op.add(
            relax.op.add(
                relax.op.multiply(_float(bb, a, a_zero), ratio_a),
                relax.op.multiply(_float(bb, b, b_zero), ratio_b),
            ),
            _zero(c_zero),
        )
        return _saturated(value, _output_type(c_zero, a))


class QLinearMul(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        a, a_scale, a_zero, b, b_scale, b_zero, c_scale = inputs[:7]
        c_zero = inputs[7] if len(inputs) > 7 else None
        ratio = bb.emit(relax.op.divide(relax.op.multiply(a_scale, b_scale), c_scale))
        value = relax.op.multiply(relax.op.multiply(_float(bb, a, a_zero), _float(bb, b, b_zero)), ratio)
        return _saturated(relax.op.add(value, _zero(c_zero)), _output_type(c_zero, a))


class QLinearGlobalAveragePool(OnnxOpConverter):
    """The spatial sum in int32 less the zero point's share, times x_scale / (y_scale * count)."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x, x_scale, x_zero, y_scale = inputs[:4]
        y_zero = inputs[4] if len(inputs) > 4 else None
        shape = _static_shape(x)
        last = bool(int(attr.get("channels_last", 0)))
        axes = list(range(1, len(shape) - 1)) if last else list(range(2, len(shape)))
        count = int(np.prod([shape[a] for a in axes]))
        total = bb.emit(relax.op.sum(_centred(bb, x, x_zero), axis=axes, keepdims=True))
        scale = bb.emit(
            relax.op.divide(x_scale, relax.op.multiply(y_scale, relax.const(np.float32(count), "float32")))
        )
        value = relax.op.add(relax.op.multiply(relax.op.astype(total, "float32"), scale), _zero(y_zero))
        return _saturated(value, _output_type(y_zero, x))


class QGemm(OnnxOpConverter):
    """alpha * (A - za)(B - zb) + C (int32 bias) in int32, requantized to y's type, or in
    float32 without y_scale."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        a, a_scale, a_zero, b, b_scale, b_zero = inputs[:6]
        bias = inputs[6] if len(inputs) > 6 else None
        y_scale = inputs[7] if len(inputs) > 7 else None
        y_zero = inputs[8] if len(inputs) > 8 else None
        if int(attr.get("transA", 0)):
            a = bb.emit(relax.op.permute_dims(a, [1, 0]))
        accumulated = _integer_matmul(bb, a, a_zero, b, b_zero, params, bool(int(attr.get("transB", 0))))
        alpha = relax.const(np.float32(float(attr.get("alpha", 1.0))), "float32")
        if y_scale is None:  # float output: the bias is float then
            value = relax.op.multiply(
                relax.op.astype(accumulated, "float32"), relax.op.multiply(a_scale, b_scale)
            )
            value = relax.op.multiply(value, alpha)
            return relax.op.add(value, bias) if bias is not None else value
        if bias is not None:
            accumulated = bb.emit(relax.op.add(accumulated, relax.op.astype(bias, "int32")))
        scaled_a = bb.emit(relax.op.multiply(a_scale, alpha))
        columns = [1, -1]  # a per-column scale of B: along the result's columns
        multiplier = _multiplier(bb, scaled_a, b_scale, y_scale, view=columns)
        return _requantized(accumulated, multiplier, y_zero, _output_type(y_zero, a))


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "QGemm": QGemm,
    "QLinearAdd": QLinearAdd,
    "QLinearGlobalAveragePool": QLinearGlobalAveragePool,
    "QLinearMul": QLinearMul,
}
