"""DeformConv (2-D): a convolution whose every kernel tap reads the input at its regular
position moved by a learned offset, sampled bilinearly (a corner outside the image counts 0,
as GridSample with zero padding and aligned corners), weighted by an optional mask.

Two kernels: the samples [N, C, kH, kW, oH, oW] (offset group of each channel), then their
grouped weighted sum; the bias is added after.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _static_shape

if TYPE_CHECKING:
    from tvm import te


def _samples_te(x: te.Tensor, offset: te.Tensor, mask: te.Tensor | None, geometry) -> te.Tensor:
    from tvm import te, tirx

    kernel, strides, dilations, begins, offset_groups = geometry
    batch, channels, height, width = (int(d) for d in x.shape)
    out_h, out_w = (int(d) for d in offset.shape[2:])
    per_group = channels // offset_groups
    dtype = x.dtype

    def corner(n, c, row, column, weight):
        inside = tirx.And(tirx.And(row >= 0, row < height), tirx.And(column >= 0, column < width))
        value = x[n, c, tirx.max(tirx.min(row, height - 1), 0), tirx.max(tirx.min(column, width - 1), 0)]
        return tirx.Select(inside, value * weight, tirx.const(0, dtype))

    def sample(n, c, kh, kw, i, j):
        group = tirx.floordiv(c, per_group)
        tap = (group * kernel[0] + kh) * kernel[1] + kw
        y = (i * strides[0] - begins[0] + kh * dilations[0]).astype(dtype) + offset[n, tap * 2, i, j]
        x_ = (j * strides[1] - begins[1] + kw * dilations[1]).astype(dtype) + offset[n, tap * 2 + 1, i, j]
        top, left = tirx.floor(y), tirx.floor(x_)
        dy, dx = y - top, x_ - left
        row, column = top.astype("int32"), left.astype("int32")
        one = tirx.const(1, dtype)
        value = (
            corner(n, c, row, column, (one - dy) * (one - dx))
            + corner(n, c, row, column + 1, (one - dy) * dx)
            + corner(n, c, row + 1, column, dy * (one - dx))
            + corner(n, c, row + 1, column + 1, dy * dx)
        )
        return value * mask[n, tap, i, j] if mask is not None else value

    return te.compute((batch, channels, *kernel, out_h, out_w), sample, name="deform_samples")


def _convolved_te(samples: te.Tensor, weight: te.Tensor, groups: int) -> te.Tensor:
    from tvm import te

    batch, _, kh_, kw_, out_h, out_w = (int(d) for d in samples.shape)
    out_channels, per_group = (int(d) for d in weight.shape[:2])
    outputs_per_group = out_channels // groups
    c = te.reduce_axis((0, per_group), name="c")
    kh = te.reduce_axis((0, kh_), name="kh")
    kw = te.reduce_axis((0, kw_), name="kw")

    def output(n, o, i, j):
        channel = (o // outputs_per_group) * per_group + c
        return te.sum(samples[n, channel, kh, kw, i, j] * weight[o, c, kh, kw], axis=[c, kh, kw])

    return te.compute((batch, out_channels, out_h, out_w), output, name="deform_conv")


class DeformConv(OnnxOpConverter):
    @classmethod
    def _impl_v19(cls, bb, inputs, attr, params):
        x, weight, offset = inputs[:3]
        bias = inputs[3] if len(inputs) > 3 else None
        mask = inputs[4] if len(inputs) > 4 else None
        if len(_static_shape(x)) != 4:
            raise NotImplementedError("DeformConv beyond 2-D")
        kernel = [int(k) for k in attr.get("kernel_shape", _static_shape(weight)[2:])]
        strides = [int(s) for s in attr.get("strides", [1, 1])]
        dilations = [int(d) for d in attr.get("dilations", [1, 1])]
        begins = [int(p) for p in attr.get("pads", [0, 0, 0, 0])][:2]
        geometry = (kernel, strides, dilations, begins, int(attr.get("offset_group", 1)))
        samples = bb.emit_te(_samples_te, x, offset, mask, geometry, primfunc_name_hint="deform_samples")
        result = bb.emit_te(
            _convolved_te, samples, weight, int(attr.get("group", 1)), primfunc_name_hint="deform_conv"
        )
        if bias is None:
            return result
        return relax.op.add(result, relax.op.reshape(bias, [1, -1, 1, 1]))


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"DeformConv": DeformConv}
