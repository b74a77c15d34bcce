"""RoiAlign's max mode as ONNX defines it (its reference and ONNX Runtime): each output is the
largest of the *weighted* corner values w * v of every bilinear sample in its bin, not the
largest interpolated value, which TVM's roi_align computes. With a fixed sampling_ratio the
sample grid is static, so this is tensor arithmetic in the rois' float type, step for step as
the reference rounds it: sample positions per (roi, bin, sample), clamped corners and weights
(samples outside the map weigh 0), one gather of the corners of every sample over all
channels, a product and a maximum. The rois' images come through a checked gather. Average
mode, and max mode with an adaptive grid (sampling_ratio 0), stay TVM's."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _static_shape, _theirs


class RoiAlign(OnnxOpConverter):
    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        return cls._converted(bb, inputs, attr, params, "output_half_pixel")

    @classmethod
    def _impl_v16(cls, bb, inputs, attr, params):
        return cls._converted(bb, inputs, attr, params, "half_pixel")

    @classmethod
    def _converted(cls, bb, inputs, attr, params, default_mode: str):
        ratio = int(attr.get("sampling_ratio", 0))
        if _attr_text(attr.get("mode"), "avg") != "max" or ratio <= 0:
            return _theirs("RoiAlign", bb, inputs, attr, params)
        half_pixel = _attr_text(attr.get("coordinate_transformation_mode"), default_mode) == "half_pixel"
        data, rois, batch_indices = inputs
        _, channels, height, width = _static_shape(data)
        count = _static_shape(rois)[0]
        out_h, out_w = int(attr.get("output_height", 1)), int(attr.get("output_width", 1))
        dtype = str(rois.ty.dtype)

        def const(value, kind: str = dtype):
            return relax.const(np.asarray(value, dtype=kind), kind)

        def column(k: int):  # roi coordinate k, scaled and offset: [count]
            value = relax.op.multiply(
                relax.op.reshape(relax.op.strided_slice(rois, [1], [k], [k + 1]), [count]),
                const(float(attr.get("spatial_scale", 1.0))),
            )
            return bb.emit(relax.op.subtract(value, const(0.5 if half_pixel else 0.0)))

        start_w, start_h, end_w, end_h = (column(k) for k in range(4))
        extent_w, extent_h = relax.op.subtract(end_w, start_w), relax.op.subtract(end_h, start_h)
        if not half_pixel:  # malformed rois count as 1 x 1
            extent_w, extent_h = (
                relax.op.maximum(extent_w, const(1.0)),
                relax.op.maximum(extent_h, const(1.0)),
            )
        bin_w = bb.emit(relax.op.divide(extent_w, const(float(out_w))))
        bin_h = bb.emit(relax.op.divide(extent_h, const(float(out_h))))

        def samples(start, size, bins: int):
            """[count, bins, ratio]: start + b * size + (i + 0.5) * size / ratio."""
            size3 = relax.op.reshape(size, [count, 1, 1])
            offset = relax.op.multiply(const(np.arange(bins).reshape(1, bins, 1)), size3)
            within = relax.op.divide(
                relax.op.multiply(const((np.arange(ratio) + 0.5).reshape(1, 1, ratio)), size3),
                const(float(ratio)),
            )
            return bb.emit(relax.op.add(relax.op.add(relax.op.reshape(start, [count, 1, 1]), offset), within))

        def corners(position, extent: int):
            """The low and high corner (int64) and the high corner's weight of each sample."""
            clamped = relax.op.maximum(position, const(0.0))
            low = relax.op.astype(relax.op.floor(clamped), "int64")
            edge = bb.emit(relax.op.greater_equal(low, const(extent - 1, "int64")))
            last = const(extent - 1, "int64")
            low = bb.emit(relax.op.where(edge, last, low))
            high = relax.op.where(edge, last, relax.op.add(low, const(1, "int64")))
            clamped = relax.op.where(edge, relax.op.astype(last, dtype), clamped)
            return low, bb.emit(high), bb.emit(relax.op.subtract(clamped, relax.op.astype(low, dtype)))

        ys, xs = samples(start_h, bin_h, out_h), samples(start_w, bin_w, out_w)
        grid = [count, out_h, ratio, out_w, ratio]
        ys5 = relax.op.reshape(ys, [count, out_h, ratio, 1, 1])
        xs5 = relax.op.reshape(xs, [count, 1, 1, out_w, ratio])
        outside = bb.emit(
            relax.op.logical_or(
                relax.op.logical_or(
                    relax.op.less(ys5, const(-1.0)), relax.op.greater(ys5, const(float(height)))
                ),
                relax.op.logical_or(
                    relax.op.less(xs5, const(-1.0)), relax.op.greater(xs5, const(float(width)))
                ),
            )
        )
        y_low, y_high, ly = corners(ys5, height)
        x_low, x_high, lx = corners(xs5, width)
        hy, hx = relax.op.subtract(const(1.0), ly), relax.op.subtract(const(1.0), lx)
        weights = [relax.op.multiply(a, b) for a, b in ((hy, hx), (hy, lx), (ly, hx), (ly, lx))]
        rows = [(y_low, x_low), (y_low, x_high), (y_high, x_low), (y_high, x_high)]
        first = const(np.arange(count).reshape(count, 1, 1, 1, 1) * height * width, "int64")
        positions, scales = [], []
        for (y, x), weight in zip(rows, weights, strict=True):
            flat = relax.op.add(relax.op.add(relax.op.multiply(y, const(width, "int64")), x), first)
            # a sample outside the map reads position 0 of its image with weight 0
            positions.append(relax.op.where(outside, relax.op.broadcast_to(first, grid), flat))
            scales.append(relax.op.where(outside, const(0.0), relax.op.broadcast_to(weight, grid)))
        position = bb.emit(relax.op.stack(positions, axis=5))  # [count, out_h, ratio, out_w, ratio, 4]
        scale = bb.emit(relax.op.stack(scales, axis=5))
        images = bb.emit(relax.op.take(data, relax.op.astype(batch_indices, "int64"), axis=0))
        pixels = bb.emit(
            relax.op.reshape(relax.op.permute_dims(images, [0, 2, 3, 1]), [count * height * width, channels])
        )
        picked = relax.op.take(pixels, relax.op.reshape(position, [-1]), axis=0)
        picked = relax.op.reshape(picked, [*grid, 4, channels])
        weighted = relax.op.multiply(
            picked, relax.op.expand_dims(relax.op.astype(scale, str(data.ty.dtype)), 6)
        )
        best = bb.emit(relax.op.max(weighted, axis=[2, 4, 5]))  # [count, out_h, out_w, channels]
        return relax.op.permute_dims(best, [0, 3, 1, 2])


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"RoiAlign": RoiAlign}
