"""The QOperator integer operators TVM's importer lacks: QLinearMatMul, QLinearConv and
ConvInteger (opset 10). Each computes as ONNX defines it: zero points subtracted in int32,
an int32 matrix product or convolution (exact), then for the QLinear ones the requantization
``round_half_even(acc * (scale_in * scale_w / scale_out)) + zero_out`` saturated to the
output type, with the product in float32 as ONNX Runtime computes it. The products run as
TVM's int32 kernels: correct, not yet the VNNI / dot-product
kernels a quantized model wants (the int8 issue).
"""

from __future__ import annotations

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _constant_value, _static_shape, _theirs


def _centred(bb, values, zero_point, per_axis: int | None = None):
    """``values - zero_point`` in int32; a 1-D zero point applies along ``per_axis``."""
    wide = bb.emit(relax.op.astype(values, "int32"))
    if zero_point is None:
        return wide
    zero = relax.op.astype(zero_point, "int32")
    zero_shape = _static_shape(zero_point)
    if per_axis is not None and len(zero_shape) == 1 and zero_shape[0] > 1:
        view = [1] * len(_static_shape(values))
        view[per_axis] = zero_shape[0]
        zero = relax.op.reshape(zero, view)
    return bb.emit(relax.op.subtract(wide, zero))


def _weights(bb, values, zero_point, params, per_axis: int | None = None):
    """Constant 8-bit weights with a zero point of 0 (ONNX Runtime's symmetric int8 weights)
    as they are, so that the package stores them in 8 bits (the kernel widens them as it
    multiplies); otherwise ``_centred``, which folds into int32 constants."""
    zero = _constant_value(zero_point, params) if zero_point is not None else np.zeros(1)
    if _constant_value(values, params) is not None and zero is not None and not np.any(zero):
        return values
    return _centred(bb, values, zero_point, per_axis)


def _requantized(accumulated, multiplier, zero_point, dtype: str):
    """The int32 ``accumulated`` requantized as ONNX Runtime's kernels do it (MLAS's
    requantization): converted to float32, times the float32 ``multiplier``, rounded half to
    even, offset by the output zero point and saturated to ``dtype``. The float32 product
    matters: in float64 (as ONNX's reference computes it) a product close to a rounding tie
    can land on the other side; ResNet-18 quantized by ONNX Runtime differed from it by one
    quantum in a few outputs of its 8th convolution, and by layer 4 in 13% of them."""
    value = relax.op.multiply(relax.op.astype(accumulated, "float32"), relax.op.astype(multiplier, "float32"))
    return _saturated(value, dtype, zero_point)


def _saturated(value, dtype: str, zero_point=None):
    """A float ``value`` rounded half to even, plus ``zero_point``, saturated to the integer
    ``dtype``, in the fewest vector operations: clamped first to the range less the zero
    point (the bounds are integers, so the same result), rounded straight into int32 (one
    ``cvtps2dq``: ``numerics.rounded_conversions``), the zero point added in int32."""
    limits = np.iinfo(np.dtype(dtype))
    low, high = relax.const(np.float32(limits.min), "float32"), relax.const(np.float32(limits.max), "float32")
    zero_point = _scalar_constant(zero_point)
    if isinstance(zero_point, int):  # bounds as numbers in the kernel: LLVM then knows them not NaN
        low = relax.const(np.float32(limits.min - zero_point))
        high = relax.const(np.float32(limits.max - zero_point))
    elif zero_point is not None:
        zero = relax.op.astype(zero_point, "float32")
        low, high = relax.op.subtract(low, zero), relax.op.subtract(high, zero)
    value = relax.op.minimum(relax.op.maximum(value, low), high)  # NaN: the lowest (saturating_clamps)
    rounded = relax.op.astype(relax.op.round(value), "int32")
    if isinstance(zero_point, int):
        rounded = relax.op.add(rounded, relax.const(np.int32(zero_point)))
    elif zero_point is not None:
        rounded = relax.op.add(rounded, relax.op.astype(zero_point, "int32"))
    return relax.op.astype(rounded, dtype)


def _scalar_constant(zero_point):
    """A zero point that is one number known now, as an int; otherwise as it is. A 0-d
    constant operand becomes a number in the kernel (TVM's legalization); a computed one is a
    parameter, and a clamp against a parameter costs LLVM two more vector operations per
    bound (it must allow for NaN: ``numerics.saturating_clamps``)."""
    if not isinstance(zero_point, tvm.ir.Constant):
        return zero_point
    values = zero_point.value.numpy()
    return int(values.reshape(-1)[0]) if values.size == 1 else zero_point


def _multiplier(bb, *scales, view: list[int] | None = None):
    """in_scale * w_scale / out_scale in the scales' own type (as ONNX's reference and ONNX
    Runtime compute it: float16 scales round there), then float64 (``_requantized`` uses it
    in float32); a per-channel one reshaped to ``view``."""
    first, second, third = scales
    product = relax.op.divide(relax.op.multiply(first, second), third)
    product = bb.emit(relax.op.astype(product, "float64"))
    if view is not None and int(np.prod(_static_shape(product))) > 1:
        product = bb.emit(relax.op.reshape(product, view))
    return product


class QLinearMatMul(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        a, a_scale, a_zero, b, b_scale, b_zero, y_scale, y_zero = inputs
        # per-row zero points of a (its rows: axis -2), per-column of b (axis -1)
        accumulated = _integer_matmul(bb, a, a_zero, b, b_zero, params)
        rank = len(_static_shape(accumulated))
        if len(_static_shape(a_scale)) == 1 and _static_shape(a_scale)[0] > 1 and rank >= 2:
            rows = [1] * rank  # a per-row scale of a: along the result's rows (b's broadcast)
            rows[-2] = _static_shape(a_scale)[0]
            a_scale = bb.emit(relax.op.reshape(a_scale, rows))
        multiplier = _multiplier(bb, a_scale, b_scale, y_scale)
        dtype = str(y_zero.ty.dtype) if y_zero is not None else str(a.ty.dtype)
        return _requantized(accumulated, multiplier, y_zero, dtype)


class MatMulInteger(OnnxOpConverter):
    """(A - za)(B - zb) in int32; constant 8-bit B with a zero point of 0 stays 8-bit in the
    package (TVM's converter widens it to int32 constants: four times the bytes)."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        a, b = inputs[0], inputs[1]
        a_zero = inputs[2] if len(inputs) > 2 else None
        b_zero = inputs[3] if len(inputs) > 3 else None
        return _integer_matmul(bb, a, a_zero, b, b_zero, params)


def _int32_conv(bb, x, w, attr, params):
    """TVM's Conv (attributes, padding, groups) on int32 operands, accumulating in int32; 8-bit
    weights (``_weights``) in a 2-D convolution with explicit padding as conv2d's mixed-type
    form (TVM's converter asks for one type), others widened to int32 first."""
    if str(w.ty.dtype) == str(x.ty.dtype):
        return bb.emit(_theirs("Conv", bb, [x, w, None], dict(attr), params))
    plain = _attr_text(attr.get("auto_pad"), "NOTSET") == "NOTSET"
    if len(_static_shape(x)) != 4 or not plain:
        return bb.emit(
            _theirs("Conv", bb, [x, bb.emit(relax.op.astype(w, "int32")), None], dict(attr), params)
        )
    return bb.emit(
        relax.op.nn.conv2d(
            x,
            w,
            strides=[int(v) for v in attr.get("strides", [1, 1])],
            padding=[int(v) for v in attr.get("pads", [0, 0, 0, 0])],
            dilation=[int(v) for v in attr.get("dilations", [1, 1])],
            groups=int(attr.get("group", 1)),
            out_dtype="int32",
        )
    )


def _as_uint8(bb, x, zero_point: int):
    """(uint8 activations, their zero point): int8 ones moved up by 128, exactly."""
    if str(x.ty.dtype) != "int8":
        return x, zero_point
    shifted = relax.op.add(relax.op.astype(x, "int16"), relax.const(128, "int16"))
    return bb.emit(relax.op.astype(shifted, "uint8")), zero_point + 128


def _uint8_matmul(bb, a, a_zero, b, params, transpose_b: bool = False):
    """A product of 8-bit activations [..., M, K] with constant int8 weights [K, N] (zero
    point 0) as a 1x1 uint8 x int8 convolution over an image of M pixels, channels-last
    (``_uint8_conv``'s form, which the integer dot-product kernels take: a BERT's products
    ran as widened int32 matmuls, slower than its float32 package), K padded to 4s with zero
    weights and zx * sum(w) subtracted per column (zx may be computed at run time: dynamic
    quantization). None where the operands do not allow it (shapes not static, a per-row
    zero point, fewer than 16 columns)."""
    weights = _constant_value(b, params)
    zero = _constant_value(a_zero, params) if a_zero is not None else np.zeros((), np.uint8)
    # dynamic quantization's zero point is computed at run time: one value, of uint8 data
    dynamic = zero is None and str(a.ty.dtype) == "uint8" and int(np.prod(_static_shape(a_zero) or [1])) == 1
    shape = _static_shape(a)
    if (
        weights is None
        or weights.dtype != np.int8
        or weights.ndim != 2
        or (zero is None and not dynamic)
        or (zero is not None and zero.size != 1)
        or str(a.ty.dtype) not in ("uint8", "int8")
        or shape is None
        or len(shape) < 2
        or not all(isinstance(d, int) for d in shape)
    ):
        return None
    weights = weights.T if transpose_b else weights
    depth, columns = weights.shape
    if columns < 16 or shape[-1] != depth:
        return None
    a, zero_point = _as_uint8(bb, a, int(zero.reshape(())) if zero is not None else 0)
    extra = -depth % 4
    rows = int(np.prod(shape[:-1]))
    image = bb.emit(relax.op.reshape(a, [1, 1, rows, depth]))
    if extra:
        image = bb.emit(relax.op.nn.pad(image, [0, 0, 0, 0, 0, 0, 0, extra], pad_value=0.0))
    kernel = np.pad(weights, [(0, extra), (0, 0)]).reshape(1, 1, depth + extra, columns)
    product = bb.emit(
        relax.op.nn.conv2d(
            image,
            relax.const(kernel),
            data_layout="NHWC",
            kernel_layout="HWIO",
            out_layout="NHWC",
            out_dtype="int32",
        )
    )
    product = bb.emit(relax.op.reshape(product, [*shape[:-1], columns]))
    sums = weights.astype(np.int64).sum(axis=0)
    if dynamic:
        zero_term = relax.op.reshape(relax.op.astype(a_zero, "int32"), [])
        correction = relax.op.multiply(zero_term, relax.const(sums.astype(np.int32)))
        return bb.emit(relax.op.subtract(product, correction))
    if not zero_point:
        return product
    return bb.emit(relax.op.subtract(product, relax.const((sums * zero_point).astype(np.int32))))


def _integer_matmul(bb, a, a_zero, b, b_zero, params, transpose_b: bool = False):
    """The exact int32 product of MatMulInteger, QLinearMatMul and QGemm: uint8 x int8
    (``_uint8_matmul``) where the operands allow it, else of the centred values."""
    rank_a, rank_b = len(_static_shape(a)), len(_static_shape(b))
    weights = _weights(bb, b, b_zero, params, (0 if transpose_b else rank_b - 1))
    if weights is b:
        product = _uint8_matmul(bb, a, a_zero, b, params, transpose_b)
        if product is not None:
            return product
    if transpose_b:
        weights = bb.emit(relax.op.permute_dims(weights, [1, 0]))
    centred = _centred(bb, a, a_zero, rank_a - 2 if rank_a >= 2 else None)
    return bb.emit(relax.op.matmul(centred, weights, out_dtype="int32"))


def _uint8_conv(bb, x, x_zero, w, attr, params, bias=None):
    """The convolution of 8-bit activations with constant int8 weights as a uint8 x int8 one,
    the form integer dot-product instructions take (AVX-512 VNNI's ``vpdpbusd``: four such
    products summed into each int32 lane): sum((x - zx) * w) = sum(x * w) - zx * sum(w), where
    the image is padded with its zero point (ONNX pads the centred values with zeros) and
    zx * sum(w) is a constant per output channel. int8 activations are moved to uint8 first
    (x + 128, zero point + 128). Exact in int32, as the centred form. None when the operands
    do not allow it (weights or zero point not constant, weights not int8, groups other than
    1 or depthwise, not 2-D, auto_pad); the caller checks that the weights' zero point is 0
    (``_weights``). Depthwise ones become uint8 x int8 too (widened as they multiply). A
    constant int32 ``bias`` joins zx * sum(w) in one addition (one operation fewer per
    element of the requantizing epilogue)."""
    weights = _constant_value(w, params)
    zero = _constant_value(x_zero, params) if x_zero is not None else np.zeros((), np.uint8)
    if (
        weights is None
        or weights.dtype != np.int8
        or zero is None
        or zero.size != 1
        or str(x.ty.dtype) not in ("uint8", "int8")
        or len(_static_shape(x)) != 4
        or int(attr.get("group", 1)) not in (1, weights.shape[0])
        or _attr_text(attr.get("auto_pad"), "NOTSET") != "NOTSET"
    ):
        return None
    groups = int(attr.get("group", 1))
    if groups != 1 and (weights.shape[1] != 1 or _static_shape(x)[1] != groups):
        return None  # grouped but not depthwise
    x, zero_point = _as_uint8(bb, x, int(zero.reshape(())))
    top, left, bottom, right = (int(v) for v in attr.get("pads", [0, 0, 0, 0]))
    # Input channels in whole 4s, the dot product's width (an RGB image's 3: ResNet-18's first
    # layer took 42% of the model's time in the widening int32 kernel): the extra channels
    # meet zero weights.
    extra = -weights.shape[1] % 4 if groups == 1 else 0
    if extra:
        weights = np.pad(weights, [(0, 0), (0, extra), (0, 0), (0, 0)])
        w = relax.const(weights)
    spatial = [top, bottom, left, right] if zero_point else [0, 0, 0, 0]
    if extra or any(spatial):
        x = bb.emit(relax.op.nn.pad(x, [0, 0, 0, extra, *spatial], pad_value=float(zero_point)))
        if zero_point:
            top = left = bottom = right = 0
    accumulated = bb.emit(
        relax.op.nn.conv2d(
            x,
            w,
            strides=[int(v) for v in attr.get("strides", [1, 1])],
            padding=[top, left, bottom, right],
            dilation=[int(v) for v in attr.get("dilations", [1, 1])],
            groups=groups,
            out_dtype="int32",
        )
    )
    offset = (bias.astype(np.int64) if bias is not None else 0) - weights.astype(np.int64).sum(
        axis=(1, 2, 3)
    ) * zero_point
    if not np.any(offset):
        return accumulated
    return bb.emit(relax.op.add(accumulated, relax.const(offset.astype(np.int32).reshape(1, -1, 1, 1))))


def _integer_conv(bb, x, x_zero, w, w_zero, attr, params, bias=None):
    """The exact int32 convolution of ConvInteger and QLinearConv, plus QLinearConv's int32
    ``bias``: uint8 x int8 (``_uint8_conv``) where the operands allow it, else of the centred
    values (padded after the zero point is subtracted: ONNX pads with the zero point)."""
    weights = _weights(bb, w, w_zero, params, 0)
    constant_bias = _constant_value(bias, params) if bias is not None else None
    if weights is w and (bias is None or constant_bias is not None):
        accumulated = _uint8_conv(bb, x, x_zero, w, attr, params, constant_bias)
        if accumulated is not None:
            return accumulated
    accumulated = _int32_conv(bb, _centred(bb, x, x_zero), weights, attr, params)
    if bias is None:
        return accumulated
    channels = [1, -1] + [1] * (len(_static_shape(accumulated)) - 2)
    return bb.emit(relax.op.add(accumulated, relax.op.reshape(bias, channels)))


class ConvInteger(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        x, w = inputs[0], inputs[1]
        x_zero = inputs[2] if len(inputs) > 2 else None
        w_zero = inputs[3] if len(inputs) > 3 else None
        return _integer_conv(bb, x, x_zero, w, w_zero, attr, params)


class QLinearConv(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        x, x_scale, x_zero, w, w_scale, w_zero, y_scale, y_zero = inputs[:8]
        bias = inputs[8] if len(inputs) > 8 else None
        accumulated = _integer_conv(bb, x, x_zero, w, w_zero, attr, params, bias)
        channels = [1, -1] + [1] * (len(_static_shape(accumulated)) - 2)
        multiplier = _multiplier(bb, x_scale, w_scale, y_scale, view=channels)
        dtype = str(y_zero.ty.dtype) if y_zero is not None else str(x.ty.dtype)
        return _requantized(accumulated, multiplier, y_zero, dtype)


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "ConvInteger": ConvInteger,
    "MatMulInteger": MatMulInteger,
    "QLinearConv": QLinearConv,
    "QLinearMatMul": QLinearMatMul,
}
