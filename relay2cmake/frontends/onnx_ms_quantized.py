"""The ``com.microsoft`` quantized operators ONNX Runtime's own quantizer writes in QOperator
format (``quantize_static(..., quant_format=QOperator)``) for CNNs and classifier heads:
QLinearAdd, QLinearMul, QLinearGlobalAveragePool and QGemm, and the activations, pools and
concatenations computed through float32 (QLinearLeakyRelu, QLinearSigmoid, QLinearSoftmax,
QLinearAveragePool, QLinearConcat, QLinearWhere). Each computes as
ONNX Runtime's x86 CPU kernels do: the arithmetic in float32 with the scale ratios ONNX
Runtime forms (QLinearAdd with its fused multiply-adds, ``QLinearAdd``), or an exact int32
product for QGemm, then rounding half to even and saturation. Where a kernel of ONNX Runtime
fuses differently the last rounding can differ by one unit at exact ties (the QLinear tests
accept 1)."""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter, _get_convert_map

from relay2cmake.frontends.onnx_converter_support import OPSET, _constant_value, _static_shape
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


def _fused_multiply_add(bb, x, ratio: np.float32, addend):
    """float32 ``fma(x, ratio, addend)`` for 8-bit ``x``: in float64 the product (at most 33
    bits) and, for addends of comparable size, the sum are exact, so one rounding to float32
    gives the fused result."""
    wide = relax.op.multiply(relax.op.astype(x, "float64"), relax.const(np.float64(ratio), "float64"))
    total = relax.op.add(wide, relax.op.astype(addend, "float64"))
    return bb.emit(relax.op.astype(total, "float32"))


class QLinearAdd(OnnxOpConverter):
    """ONNX Runtime's x86 kernel (MLAS, AVX2 and AVX-512 machines): with r_a = s_a / s_c,
    r_b = s_b / s_c and k = z_c - fma(r_a, z_a, r_b z_b), ``fma(a, r_a, fma(b, r_b, k))`` on the raw
    8-bit values, rounded half to even. Computed as ``(a - z_a) r_a + (b - z_b) r_b + z_c``
    the sum is a few ulps apart, which decides exact ties: a ResNet-50 quantized by ONNX
    Runtime had 33 of 802,816 values of its first residual add one step off, and 31% of its
    outputs. Scales not constant: that formula."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        a, a_scale, a_zero, b, b_scale, b_zero, c_scale = inputs[:7]
        c_zero = inputs[7] if len(inputs) > 7 else None
        values = [_constant_value(v, params) for v in (a_scale, a_zero, b_scale, b_zero, c_scale, c_zero)]
        if any(v is None for v in values[0::2]) or any(v is not None and v.size != 1 for v in values):
            return cls._from_centred(bb, inputs)
        sa, za, sb, zb, sc, zc = (np.asarray(v if v is not None else 0).reshape(()) for v in values)
        ratio_a, ratio_b = (
            np.float32(np.float32(sa) / np.float32(sc)),
            np.float32(np.float32(sb) / np.float32(sc)),
        )
        if int(np.prod(_static_shape(a))) == 1 and int(np.prod(_static_shape(b))) > 1:
            a, b, ratio_a, ratio_b, za, zb = b, a, ratio_b, ratio_a, zb, za  # the scalar is b
        # k as ONNX Runtime's compiler contracts it: zc - fma(r_a, z_a, r_b z_b) (float64 holds
        # the product and sum of these few bits exactly; a ViT-Tiny's residual add had 2 of
        # 37,824 values a step apart with k rounded twice)
        product_b = np.float64(ratio_b * np.float32(zb))
        fixed = np.float32(zc) - np.float32(np.float64(ratio_a) * np.float64(za) + product_b)
        if int(np.prod(_static_shape(b))) == 1:  # a scalar b joins the fixed part: mul, add
            scaled = relax.op.multiply(relax.op.astype(b, "float32"), relax.const(ratio_b, "float32"))
            partial = bb.emit(relax.op.add(relax.const(np.float32(fixed), "float32"), scaled))
        else:
            partial = _fused_multiply_add(bb, b, ratio_b, relax.const(np.float32(fixed), "float32"))
        value = _fused_multiply_add(bb, a, ratio_a, partial)
        return _saturated(value, _output_type(c_zero, a))

    @staticmethod
    def _from_centred(bb, inputs):
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


def _dequantized(bb, values, scale, zero_point):
    """DequantizeLinear: ``(values - zero_point) * scale`` in float32."""
    return bb.emit(relax.op.multiply(_float(bb, values, zero_point), scale))


def _quantized(value, scale, zero_point, fallback):
    """``value / scale + zero_point`` rounded half to even and saturated, as ONNX Runtime's
    QLinear kernels quantize (the zero point added before rounding; MLAS divides too)."""
    return _saturated(
        relax.op.add(relax.op.divide(value, scale), _zero(zero_point)), _output_type(zero_point, fallback)
    )


def _float_operator(op_name: str, bb, inputs, attr, params):
    """The float operator as the importer converts it: our pooling converters, else TVM's
    (at QLinearSoftmax's ``opset`` attribute where it has one: Softmax's meaning changed at 13)."""
    from relay2cmake.frontends import onnx_pooling

    attr = dict(attr)
    version = int(attr.pop("opset", 0)) or OPSET.get()
    converter = onnx_pooling.CONVERTERS.get(op_name) or _get_convert_map()[op_name]
    return bb.emit(converter.get_converter(version)(bb, inputs, attr, params))


class _ThroughFloat(OnnxOpConverter):
    """The QOperator activations and pools ONNX Runtime's quantizer writes around one float
    operator (QLinearSigmoid, QLinearLeakyRelu, QLinearAveragePool, QLinearSoftmax): the input
    dequantized, the float operator, the result quantized. ONNX Runtime's kernels compute the
    same per element (its activations through a 256-entry table built the same way), so the
    results agree but where its float function and ours round apart across a quantization
    boundary."""

    FLOAT_OPERATOR = ""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x, x_scale, x_zero, y_scale = inputs[:4]
        y_zero = inputs[4] if len(inputs) > 4 else None
        attr = dict(attr)
        channels_last = bool(int(attr.pop("channels_last", 0)))  # QLinearAveragePool's NHWC
        value = _dequantized(bb, x, x_scale, x_zero)
        rank = len(_static_shape(x))
        if channels_last:
            value = bb.emit(relax.op.permute_dims(value, [0, rank - 1, *range(1, rank - 1)]))
        result = _float_operator(cls.FLOAT_OPERATOR, bb, [value], attr, params)
        if channels_last:
            result = bb.emit(relax.op.permute_dims(result, [0, *range(2, rank), 1]))
        return _quantized(result, y_scale, y_zero, x)


class QLinearSigmoid(_ThroughFloat):
    FLOAT_OPERATOR = "Sigmoid"


class QLinearLeakyRelu(_ThroughFloat):
    FLOAT_OPERATOR = "LeakyRelu"


class QLinearSoftmax(_ThroughFloat):
    """ONNX Runtime's kernel, which is not a float softmax quantized: e^(x - max) from a
    256-entry float32 table built in float64 (each entry scaled by e^b, b = ln(FLT_MAX / D) - 5,
    so that a row's sum cannot overflow), the row summed in float32, and each output
    ``round(e * floor(1 / y_scale) / sum) + y_zero``, saturated above only. The ONNX softmax
    of the dequantized values, quantized, is up to a step apart: a ViT-Tiny quantized by ONNX
    Runtime (QDQ, which ONNX Runtime runs as this kernel) had 212 of its first attention's
    probabilities one step off, and 64% of its logits apart. A scale known only at run time
    or a row length not known now: that float path."""

    FLOAT_OPERATOR = "Softmax"

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x, x_scale = inputs[0], inputs[1]
        y_scale, y_zero = inputs[3], inputs[4] if len(inputs) > 4 else None
        scales = [_constant_value(v, params) for v in (x_scale, y_scale)]
        shape = _static_shape(x)
        if any(v is None or v.size != 1 for v in scales) or shape is None or any(d is None for d in shape):
            return super()._impl_v1(bb, inputs, attr, params)
        opset = int(attr.get("opset", 0)) or OPSET.get()
        axis = int(attr.get("axis", 1 if opset < 13 else -1)) % len(shape)
        row = int(np.prod(shape[axis:])) if opset < 13 else int(shape[axis])
        table = _softmax_table(float(np.asarray(scales[0]).reshape(())), row)
        values = x
        if opset < 13:  # the operator's rows: every axis from ``axis`` on
            values = bb.emit(relax.op.reshape(x, [*shape[:axis], row]))
        reduce_axis = axis if opset >= 13 else len(shape[:axis])
        largest = bb.emit(relax.op.max(relax.op.astype(values, "int32"), axis=[reduce_axis], keepdims=True))
        # x - max + 255 picks e^((x - max) s) (times e^b) from the table, for int8 and uint8 alike
        index = relax.op.subtract(relax.op.astype(values, "int32"), largest)
        index = bb.emit(relax.op.add(index, relax.const(255, "int32")))
        exps = bb.emit(relax.op.take(relax.const(table, "float32"), index, axis=0))
        total = bb.emit(relax.op.sum(exps, axis=[reduce_axis], keepdims=True))
        levels = np.float32(np.floor(np.float32(1.0) / np.float32(np.asarray(scales[1]).reshape(()))))
        scaled = relax.op.divide(relax.op.multiply(exps, relax.const(levels, "float32")), total)
        value = relax.op.round(scaled)
        if y_zero is not None:
            value = relax.op.add(value, relax.op.astype(y_zero, "float32"))
        dtype = _output_type(y_zero, x)
        value = relax.op.minimum(value, relax.const(np.float32(255), "float32"))  # (saturated above only)
        result = bb.emit(relax.op.astype(value, "int32"))
        result = bb.emit(relax.op.astype(result, dtype))  # int8 keeps the low byte, as ONNX Runtime's cast
        return bb.emit(relax.op.reshape(result, shape)) if opset < 13 else result


def _softmax_table(x_scale: float, row: int) -> np.ndarray:
    """QLinearSoftmax's table: entry 255 - k holds e^(-k x_scale) times e^b (float64, then
    float32), as ONNX Runtime builds it."""
    shift = max(0.0, math.log(float(np.finfo(np.float32).max) / row) - 5.0) / x_scale
    steps = np.arange(256, dtype=np.float64) - 255.0
    return np.exp((steps + shift) * x_scale).astype(np.float32)


class QLinearAveragePool(_ThroughFloat):
    FLOAT_OPERATOR = "AveragePool"


class QLinearConcat(OnnxOpConverter):
    """Each input dequantized with its own scale and zero point, concatenated, quantized."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        y_scale, y_zero = inputs[0], inputs[1]
        triples = [inputs[i : i + 3] for i in range(2, len(inputs), 3)]
        parts = [_dequantized(bb, x, scale, zero) for x, scale, zero in triples]
        joined = bb.emit(relax.op.concat(parts, axis=int(attr.get("axis", 0))))
        return _quantized(joined, y_scale, y_zero, triples[0][0])


class QLinearWhere(OnnxOpConverter):
    """Where on the dequantized inputs, quantized to z's scale and zero point."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        condition, x, x_scale, x_zero, y, y_scale, y_zero, z_scale, z_zero = inputs[:9]
        chosen = relax.op.where(
            condition, _dequantized(bb, x, x_scale, x_zero), _dequantized(bb, y, y_scale, y_zero)
        )
        return _quantized(bb.emit(chosen), z_scale, z_zero, x)


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "QGemm": QGemm,
    "QLinearAdd": QLinearAdd,
    "QLinearAveragePool": QLinearAveragePool,
    "QLinearConcat": QLinearConcat,
    "QLinearGlobalAveragePool": QLinearGlobalAveragePool,
    "QLinearLeakyRelu": QLinearLeakyRelu,
    "QLinearMul": QLinearMul,
    "QLinearSigmoid": QLinearSigmoid,
    "QLinearSoftmax": QLinearSoftmax,
    "QLinearWhere": QLinearWhere,
}
