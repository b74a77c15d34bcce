"""ConvTranspose with an ``output_shape`` attribute, which TVM's converter ignores (its output
kept the natural size). As ONNX's reference: the begin padding is the given ``pads`` (0 when
none), or with ``auto_pad`` SAME_UPPER/SAME_LOWER derived from the total padding
``stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1 - output_shape``; output
position o is the natural (unpadded) output's o + begin, 0 where that falls outside it, plus
the bias. Without ``output_shape`` the node stays TVM's."""

from __future__ import annotations

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _static_shape, _theirs


class ConvTranspose(OnnxOpConverter):
    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        if "output_shape" not in attr:
            return _theirs("ConvTranspose", bb, inputs, attr, params)
        data, weight = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        spatial = _static_shape(data)[2:]
        dims = len(spatial)
        wanted = [int(v) for v in attr["output_shape"]][-dims:]
        if len(wanted) != dims or min(wanted) < 1:
            raise ValueError(
                f"ConvTranspose's output_shape {list(attr['output_shape'])} is not {dims} positive extents"
            )
        strides = [int(v) for v in attr.get("strides", [1] * dims)]
        dilations = [int(v) for v in attr.get("dilations", [1] * dims)]
        kernel = [int(v) for v in attr.get("kernel_shape", _static_shape(weight)[2:])]
        output_padding = [int(v) for v in attr.get("output_padding", [0] * dims)]
        auto_pad = _attr_text(attr.get("auto_pad"), "NOTSET")
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            begins = []
            for i in range(dims):
                total = strides[i] * (spatial[i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
                total -= wanted[i]
                begins.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        else:
            begins = [int(v) for v in attr.get("pads", [0] * (2 * dims))][:dims]
        natural_attr = {
            k: v for k, v in attr.items() if k not in ("output_shape", "pads", "auto_pad", "output_padding")
        }
        natural_attr["pads"] = [0] * (2 * dims)
        natural = bb.normalize(_theirs("ConvTranspose", bb, [data, weight, None], natural_attr, params))
        full = _static_shape(natural)[2:]
        before = [max(0, -b) for b in begins]
        after = [max(0, w + b - f) for w, b, f in zip(wanted, begins, full, strict=True)]
        if any(before) or any(after):
            widths = [0, 0, 0, 0] + [p for pair in zip(before, after, strict=True) for p in pair]
            natural = bb.emit(relax.op.nn.pad(natural, widths))
        starts = [b + p for b, p in zip(begins, before, strict=True)]
        ends = [s + w for s, w in zip(starts, wanted, strict=True)]
        result = bb.emit(relax.op.strided_slice(natural, list(range(2, 2 + dims)), starts, ends))
        if bias is not None:
            result = relax.op.add(result, relax.op.reshape(bias, [1, -1] + [1] * dims))
        return result


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"ConvTranspose": ConvTranspose}
