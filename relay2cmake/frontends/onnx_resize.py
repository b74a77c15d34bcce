"""Resize where TVM's converter computes something else than ONNX: a scale that is not the
ratio of the extents (TVM maps coordinates through that ratio; ONNX through the scale given,
so downsampling 5 by 0.6 reads other pixels than by 3/5), a scale given at run time, and
antialiasing (a filter widened by 1/scale when downsampling, which TVM ignores).

Resize is separable: along each resized axis, output position o reads a few input positions
(its taps) with weights from ONNX's coordinate transformation and filter. The taps and
weights are computed from the scale in Relax (constants fold when the scale is one); the
axis is then a gather of the taps and a weighted sum. A tap outside the input reads the
edge (ONNX pads with edge values), or is dropped with ``exclude_outside``.
"""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _constant_value, _static_shape, _theirs
from relay2cmake.frontends.onnx_settled import accept, declared_output, given_from, guard, kept_if_chosen


def _f32(value) -> relax.Expr:
    return relax.const(np.asarray(value, dtype="float32"), "float32")


def _source_positions(positions, scale, extent: int, extent_out: int, mode: str, roi):
    """ONNX's coordinate transformation: the input coordinate of each output position (a
    float32 tensor), and for tf_crop_and_resize whether it falls outside the input."""
    op = relax.op
    scaled_width = op.multiply(scale, _f32(extent))  # ONNX compares the unrounded output width
    single = op.equal(scaled_width, _f32(1.0))
    half_pixel = op.subtract(op.divide(op.add(positions, _f32(0.5)), scale), _f32(0.5))
    outside = None
    if mode == "half_pixel":
        x = half_pixel
    elif mode == "pytorch_half_pixel":
        x = op.where(single, _f32(-0.5), half_pixel)
    elif mode == "align_corners":
        stretched = op.divide(op.multiply(positions, _f32(extent - 1)), op.subtract(scaled_width, _f32(1.0)))
        x = op.where(single, _f32(0.0), stretched)
    elif mode == "asymmetric":
        x = op.divide(positions, scale)
    elif mode == "half_pixel_symmetric":
        adjustment = op.divide(_f32(extent_out), scaled_width)
        offset = op.multiply(_f32(extent / 2), op.subtract(_f32(1.0), adjustment))
        x = op.add(offset, half_pixel)
    elif mode == "tf_crop_and_resize":
        start, end = roi
        span = (end - start) * (extent - 1)
        stretched = op.divide(op.multiply(positions, _f32(span)), op.subtract(scaled_width, _f32(1.0)))
        x = op.add(op.where(single, _f32(span / 2), stretched), _f32(start * (extent - 1)))
        outside = op.logical_or(op.less(x, _f32(0.0)), op.greater(x, _f32(extent - 1)))
    else:
        raise NotImplementedError(f"Resize with coordinate_transformation_mode {mode!r}")
    return x, outside


def _cubic(distance, a: float):
    """The cubic convolution kernel with coefficient ``a`` at |distance| (0 from 2 on)."""
    op = relax.op
    d = op.abs(distance)
    d2 = op.multiply(d, d)
    d3 = op.multiply(d2, d)
    near = op.add(op.subtract(op.multiply(_f32(a + 2), d3), op.multiply(_f32(a + 3), d2)), _f32(1.0))
    far = op.add(
        op.subtract(op.multiply(_f32(a), d3), op.multiply(_f32(5 * a), d2)),
        op.subtract(op.multiply(_f32(8 * a), d), _f32(4 * a)),
    )
    return op.where(op.less_equal(d, _f32(1.0)), near, op.where(op.less(d, _f32(2.0)), far, _f32(0.0)))


def _taps(bb, x, attr, scale, smallest_scale: float, extent: int):
    """(offsets from the base position, weights [out, taps]) for the input coordinates ``x``.
    Antialiasing widens the filter by 1 / ``scale`` (a tensor): the taps are counted for the
    ``smallest_scale`` the output extent allows, and those beyond a larger scale's filter
    weigh 0."""
    op = relax.op
    mode = _attr_text(attr.get("mode"), "nearest")
    base = bb.emit(op.subtract(op.ceil(x), _f32(1.0)))  # the last position before x
    ratio = bb.emit(op.expand_dims(op.subtract(x, base), 1))  # in (0, 1]
    if mode == "nearest":
        rule = _attr_text(attr.get("nearest_mode"), "round_prefer_floor")
        half = _f32(0.5)
        if rule == "round_prefer_floor":
            after = op.greater(ratio, half)
        elif rule == "round_prefer_ceil":
            after = op.greater_equal(ratio, half)
        elif rule == "floor":
            after = op.equal(ratio, _f32(1.0))
        elif rule == "ceil":
            after = op.greater(ratio, _f32(0.0))
        else:
            raise NotImplementedError(f"Resize with nearest_mode {rule!r}")
        weights = op.concat(
            [op.astype(op.logical_not(after), "float32"), op.astype(after, "float32")], axis=1
        )
        return base, [0, 1], bb.emit(weights)
    antialias = bool(int(attr.get("antialias", 0))) and 0 < smallest_scale < 1.0  # downsampling only
    reach = 1.0 if mode == "linear" else 2.0  # the filter's support, in input steps at scale 1
    if mode not in ("linear", "cubic"):
        raise NotImplementedError(f"Resize with mode {mode!r}")
    first = math.floor(-reach / smallest_scale) + 1 if antialias else math.floor(-reach) + 1
    offsets = list(range(first, 2 - first))
    distances = op.subtract(_f32(np.asarray(offsets)[None, :]), ratio)
    if antialias:
        distances = op.multiply(distances, op.minimum(scale, _f32(1.0)))
    if mode == "linear":
        weights = op.maximum(op.subtract(_f32(1.0), op.abs(distances)), _f32(0.0))
    else:
        weights = _cubic(distances, float(attr.get("cubic_coeff_a", -0.75)))
    if antialias:  # the widened filter's weights sum to 1
        weights = op.divide(weights, op.sum(weights, axis=[1], keepdims=True))
    if int(attr.get("exclude_outside", 0)):
        positions = op.add(op.expand_dims(base, 1), _f32(np.asarray(offsets)[None, :]))
        inside = op.logical_and(
            op.greater_equal(positions, _f32(0.0)), op.less_equal(positions, _f32(extent - 1))
        )
        weights = op.where(inside, weights, _f32(0.0))
        weights = op.divide(weights, op.sum(weights, axis=[1], keepdims=True))
    return base, offsets, bb.emit(weights)


def _resized_axis(bb, data, axis: int, extent_out: int, scale, smallest_scale: float, attr, roi):
    """``data`` resized along ``axis`` to ``extent_out``, and the tf_crop_and_resize mask of
    output positions outside the input along it (None otherwise)."""
    op = relax.op
    shape = _static_shape(data)
    extent = shape[axis]
    positions = _f32(np.arange(extent_out))
    mode = _attr_text(attr.get("coordinate_transformation_mode"), "half_pixel")
    x, outside = _source_positions(positions, scale, extent, extent_out, mode, roi)
    x = bb.emit(x)
    base, offsets, weights = _taps(bb, x, attr, scale, smallest_scale, extent)
    taps = len(offsets)
    index = op.add(
        op.astype(op.expand_dims(base, 1), "int64"), relax.const(np.asarray(offsets)[None, :], "int64")
    )
    index = bb.emit(op.reshape(op.clip(index, 0, extent - 1), [extent_out * taps]))
    gathered = bb.emit(op.take(data, index, axis=axis, mode="clip"))
    split = [*shape[:axis], extent_out, taps, *shape[axis + 1 :]]
    gathered = bb.emit(op.reshape(gathered, split))
    view = [1] * len(split)
    view[axis], view[axis + 1] = extent_out, taps
    result = bb.emit(op.sum(op.multiply(gathered, op.reshape(weights, view)), axis=[axis + 1]))
    if outside is not None:
        mask_view = [1] * len(shape)
        mask_view[axis] = extent_out
        outside = op.reshape(outside, mask_view)
    return result, outside


class Resize(OnnxOpConverter):
    """Ours for antialiasing and for scales that are not the extents' ratio or are given at run
    time (checked against the declared shape: floor(extent * scale)); TVM's otherwise."""

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        return _theirs("Resize", bb, inputs, attr, params)

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        data = inputs[0]
        roi = inputs[1] if len(inputs) > 1 else None
        scales = inputs[2] if len(inputs) > 2 else None
        sizes = inputs[3] if len(inputs) > 3 else None
        shape = _static_shape(data)
        rank = len(shape)
        axes = [int(a) % rank for a in attr.get("axes", range(rank))]
        declared = declared_output()
        scale_values = _constant_value(scales, params)
        if scale_values is not None and scale_values.size == 0:
            scale_values, scales = None, None
        size_values = _constant_value(sizes, params)
        if size_values is not None and size_values.size == 0:
            size_values = None
        policy = _attr_text(attr.get("keep_aspect_ratio_policy"), "stretch")
        antialias = bool(attr.get("antialias", 0))
        run_time = scales is not None and scale_values is None
        if not str(data.ty.dtype).startswith(("float", "int", "uint")):
            return _theirs("Resize", bb, inputs, attr, params)
        if policy != "stretch" and sizes is not None and size_values is None and declared is not None:
            return cls._kept_aspect_ratio(bb, data, sizes, axes, list(declared), policy, attr)
        if policy != "stretch":
            return _theirs("Resize", bb, inputs, attr, params)
        if size_values is not None:
            if not antialias and axes == list(range(rank)):
                return _theirs("Resize", bb, inputs, attr, params)  # TVM's takes sizes of every axis
            out = list(shape)
            for a, size in zip(axes, size_values.reshape(-1), strict=True):
                out[a] = int(size)
            scale_values = np.asarray([out[a] / shape[a] for a in axes], dtype="float32")
        elif scale_values is not None:
            out = list(shape)
            for a, s in zip(axes, scale_values.reshape(-1), strict=True):
                out[a] = int(np.float64(s) * shape[a])
            ratios_differ = any(
                np.float32(out[a] / shape[a]) != np.float32(s)
                for a, s in zip(axes, scale_values.reshape(-1), strict=True)
            )
            if not (antialias or ratios_differ):
                return _theirs("Resize", bb, inputs, attr, params)
        elif run_time and declared is not None:
            out = list(declared)
        else:
            return _theirs("Resize", bb, inputs, attr, params)
        mode = _attr_text(attr.get("coordinate_transformation_mode"), "half_pixel")
        roi_values = _constant_value(roi, params) if mode == "tf_crop_and_resize" else None
        if mode == "tf_crop_and_resize" and roi_values is None:
            return _theirs("Resize", bb, inputs, attr, params)
        return _resized(bb, data, inputs[2] if run_time else None, axes, out, scale_values, attr, roi_values)

    @classmethod
    def _kept_aspect_ratio(cls, bb, data, sizes, axes, out, policy, attr):
        """Sizes given at run time with a ``keep_aspect_ratio_policy``: one scale for every
        listed axis, the smallest (not_larger) or largest (not_smaller) of sizes / extents, and
        output extents round(scale x extent), in double precision as ONNX's reference computes
        them; checked against the declared shape."""
        op = relax.op
        shape = _static_shape(data)
        accept(sizes, _accepted_sizes([shape[a] for a in axes], [out[a] for a in axes], policy))
        extents = relax.const(np.asarray([shape[a] for a in axes], "float64"), "float64")
        ratios = op.divide(op.astype(sizes, "float64"), extents)
        pick = op.min if policy == "not_larger" else op.max
        scale = bb.emit(pick(ratios, axis=[0], keepdims=True))
        rounded = bb.emit(op.floor(op.add(op.multiply(scale, extents), relax.const(0.5, "float64"))))
        scales = bb.emit(op.astype(op.broadcast_to(scale, [len(axes)]), "float32"))
        return _resized(bb, data, scales, axes, out, None, attr, None, rounded, sizes)


def _resized(bb, data, scales, axes, out, scale_values, attr, roi_values, extents=None, given=None):
    """``data`` resized to ``out``: along each listed axis, with the constant ``scale_values``
    or (``scales``) the tensor given at run time, checked against ``out``: their extents
    floor(extent x scale), or ``extents`` (float64) computed from the ``given`` tensor."""
    op = relax.op
    dtype = str(data.ty.dtype)
    shape = _static_shape(data)
    result = data if dtype == "float32" else bb.emit(op.astype(data, "float32"))
    if scales is not None:
        if extents is None:
            accept(scales, [_accepted_scale(out[a], shape[a]) for a in axes])
        given_scales = bb.emit(op.astype(scales, "float32"))
    mask = None
    cropped = roi_values is not None  # tf_crop_and_resize: even an unscaled axis is cropped
    for k, axis in enumerate(axes):
        if scales is None:
            value = float(np.float32(scale_values.reshape(-1)[k]))
            if value == 1.0 and out[axis] == shape[axis] and not cropped:
                continue  # an unscaled axis reads every position as it is
            scale = _f32(value)
        else:  # the smallest scale whose floor(extent * scale) is the declared extent
            value = out[axis] / shape[axis]
            scale = bb.emit(op.reshape(op.take(given_scales, relax.const(k, "int64"), axis=0), []))
        roi = None
        if roi_values is not None:
            flat = roi_values.reshape(-1)
            roi = (float(flat[k]), float(flat[k + len(axes)]))
        result, outside = _resized_axis(bb, result, axis, out[axis], scale, value, attr, roi)
        if outside is not None:
            mask = outside if mask is None else op.logical_or(mask, outside)
    if mask is not None:
        result = bb.emit(op.where(mask, _f32(float(attr.get("extrapolation_value", 0.0))), result))
    if dtype != "float32":
        result = bb.emit(op.astype(result, dtype))
    if scales is None:
        return result
    if extents is None:  # ONNX's output extent is floor(extent * scale), in double precision
        extents = op.floor(
            op.multiply(
                op.astype(scales, "float64"),
                relax.const(np.asarray([shape[a] for a in axes], "float64"), "float64"),
            )
        )
        given = scales
    # a NaN, infinite or huge scale becomes -1 (refused) before the cast, which C leaves
    # undefined for values an int64 cannot hold
    representable = op.logical_and(
        op.isfinite(extents), op.less(op.abs(extents), relax.const(2.0**62, "float64"))
    )
    extents = op.where(representable, extents, relax.const(-1.0, "float64"))
    extents = bb.emit(op.astype(extents, "int64"))
    what = "scales" if given is scales else "sizes"
    site = (
        f"Resize reads its {what}{given_from(given)} at run time; this package was generated for the "
        f"output shape {list(out)} the model declares"
    )
    return kept_if_chosen(bb, result, guard(bb, extents, [[out[a] for a in axes]], [0], site))


def _kept_extents(sizes: list[int], extents: list[int], policy: str) -> list[int]:
    """The output extents ONNX's reference gives ``sizes`` under a keep_aspect_ratio_policy."""
    ratios = [size / extent for size, extent in zip(sizes, extents, strict=True)]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(scale * extent + 0.5) for extent in extents]


def _accepted_sizes(extents: list[int], out: list[int], policy: str) -> list[int]:
    """Sizes that give the output extents ``out`` under the policy (for the golden inputs):
    the scale of one axis, the others' sizes rounded so that it stays the smallest (or
    largest) ratio; ``out`` itself when none does."""
    for k in range(len(extents)):
        scale = out[k] / extents[k]
        bound = math.ceil if policy == "not_larger" else math.floor
        sizes = [out[k] if i == k else bound(scale * e) for i, e in enumerate(extents)]
        if _kept_extents(sizes, extents, policy) == out:
            return sizes
    return out


def _accepted_scale(extent_out: int, extent: int) -> np.float32:
    """A float32 scale whose floor(extent * scale) is ``extent_out`` (for the golden inputs)."""
    scale = np.float32(extent_out / extent)
    while int(np.float64(scale) * extent) < extent_out:
        scale = np.nextafter(scale, np.float32(np.inf))
    return scale


class Upsample(OnnxOpConverter):
    """Upsample-9 with scales given at run time: Resize with asymmetric coordinates (nearest:
    the floor, so an integer scale repeats each element), checked against the declared shape."""

    @classmethod
    def _impl_v9(cls, bb, inputs, attr, params):
        data, scales = inputs
        declared = declared_output()
        if _constant_value(scales, params) is not None or declared is None:
            return _theirs("Upsample", bb, inputs, attr, params)
        mode = _attr_text(attr.get("mode"), "nearest")
        as_resize = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        rank = len(_static_shape(data))
        return _resized(bb, data, scales, list(range(rank)), list(declared), None, as_resize, None)


# The inputs computed with at run time (as onnx_given_parameters.PARAMETER_SLOTS): scales
PARAMETER_SLOTS: dict[str, tuple[int, ...]] = {"Resize": (2,), "Upsample": (1,)}
CONVERTERS: dict[str, type[OnnxOpConverter]] = {"Resize": Resize, "Upsample": Upsample}
