"""Operators whose parameters may be tensors computed at run time, as values rather than
shapes: Pad's pads and fill value, CenterCropPad, Range's start and step, Trilu's diagonal.

The output shape comes from the model's declaration (``onnx_settled.NODE_OUTPUT_SHAPES``); the
package computes with the values given and checks at run time that they give that shape (the
``settle`` builtin). A padded or cropped axis is a gather of the input at indices computed
from the pads — clamped, reflected or wrapped as the mode says, so always in range — and a
constant fill is a mask. Constant parameters go to TVM's own converters.
"""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import (
    _attr_text,
    _constant_value,
    _i64,
    _static_shape,
    _theirs,
)
from relay2cmake.frontends.onnx_settled import (
    accept,
    chosen_result,
    declared_output,
    given_from,
    guard,
    kept_if_chosen,
)
from relay2cmake.relax_shapes import static_dims


def _is_constant(expr, params) -> bool:
    return expr is None or _constant_value(expr, params) is not None


def _source_indices(positions, extent: int, mode: str):
    """Input indices along an axis for output positions ``positions`` (input coordinates,
    maybe outside [0, extent)), and for the constant mode whether each is inside."""
    inside = relax.op.logical_and(
        relax.op.greater_equal(positions, _i64(0)), relax.op.less(positions, _i64(extent))
    )
    if mode == "wrap":
        return relax.op.floor_mod(positions, _i64(extent)), None
    if mode == "reflect" and extent > 1:
        period = 2 * (extent - 1)  # numpy's and ONNX's reflection repeats with this period
        folded = relax.op.floor_mod(positions, _i64(period))
        return relax.op.where(
            relax.op.less(folded, _i64(extent)), folded, relax.op.subtract(_i64(period), folded)
        ), None
    clamped = relax.op.clip(positions, 0, extent - 1)  # edge; reflect of 1; constant (masked)
    return clamped, (inside if mode == "constant" else None)


def _windowed(bb, x, out_shape, axes: list[int], begins: list, mode: str, fill):
    """``x`` read through a window per axis: output position o of axis a is input o - begin."""
    shape = _static_shape(x)
    mask = None
    for axis, begin in zip(axes, begins, strict=True):
        positions = relax.op.subtract(_i64(np.arange(out_shape[axis])), begin)
        indices, inside = _source_indices(positions, shape[axis], mode)
        indices = bb.emit(indices)
        if shape[axis] == 0:
            raise NotImplementedError("padding an axis of extent 0")
        x = bb.emit(relax.op.take(x, indices, axis=axis, mode="clip"))
        if inside is not None:
            view = [1] * len(shape)
            view[axis] = out_shape[axis]
            inside = relax.op.reshape(inside, view)
            mask = inside if mask is None else relax.op.logical_and(mask, inside)
    if mask is not None:
        x = bb.emit(relax.op.where(mask, x, fill))
    return x


class Pad(OnnxOpConverter):
    """Pads (and the fill value) given at run time."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):  # pads as an attribute
        return _theirs("Pad", bb, inputs, attr, params)

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        data, pads = inputs[0], inputs[1]
        value = inputs[2] if len(inputs) > 2 else None
        axes = inputs[3] if len(inputs) > 3 else None
        out = declared_output()
        constant = _is_constant(pads, params) and _is_constant(value, params)
        if constant or out is None or not _is_constant(axes, params):
            return _theirs("Pad", bb, inputs, attr, params)
        shape = _static_shape(data)
        rank = len(shape)
        listed = list(range(rank)) if axes is None else [int(a) % rank for a in _constant_value(axes, params)]
        if len(out) != rank or any(out[a] != shape[a] for a in range(rank) if a not in listed):
            return _theirs("Pad", bb, inputs, attr, params)
        mode = _attr_text(attr.get("mode"), "constant")
        dtype = str(data.ty.dtype)
        fill = (
            relax.const(0, dtype)
            if value is None
            else bb.emit(relax.op.reshape(relax.op.astype(value, dtype), []))
        )
        count = len(listed)
        growth = [out[a] - shape[a] for a in listed]
        accept(pads, [g // 2 for g in growth] + [g - g // 2 for g in growth])
        # Pads beyond the extents read nothing but the fill (or wrap around) either way:
        # clamped, no sum below overflows an int64 (undefined in C).
        reach = max(out) + max(shape) + 1
        pads = bb.emit(relax.op.clip(relax.op.astype(pads, "int64"), -reach, reach))
        begins = [bb.emit(relax.op.take(pads, _i64(i), axis=0)) for i in range(count)]
        padded = _windowed(bb, data, out, listed, begins, mode, fill)
        # Each axis grows by its two pads: the declared shape holds only for these sums.
        sums = bb.emit(
            relax.op.add(
                relax.op.strided_slice(pads, [0], [0], [count]),
                relax.op.strided_slice(pads, [0], [count], [2 * count]),
            )
        )
        site = (
            f"Pad reads its pads{given_from(inputs[1])} at run time; this package was generated for the "
            f"output shape {list(out)} the model declares, which only pads adding {growth} give"
        )
        return kept_if_chosen(bb, padded, guard(bb, sums, [growth], [0], site))


class CenterCropPad(OnnxOpConverter):
    """Crop or pad each listed axis to the size asked, centred (ONNX puts the odd element of
    a crop at the end and of a pad at the end too). The size is a constant here: one given
    at run time is settled from the declared output shape first (``onnx_settled``)."""

    @classmethod
    def _impl_v18(cls, bb, inputs, attr, params):
        data, size = inputs
        if not _is_constant(size, params):
            raise NotImplementedError(
                "CenterCropPad with a size computed at run time and no declared output shape"
            )
        shape = _static_shape(data)
        rank = len(shape)
        axes = [int(a) % rank for a in attr.get("axes", range(rank))]
        targets = [int(t) for t in _constant_value(size, params).reshape(-1)]
        out = list(shape)
        begins = []
        for axis, target in zip(axes, targets, strict=True):
            out[axis] = target
            # A crop starts (d - t) // 2 in; a pad puts (t - d) // 2 before.
            begins.append(
                _i64(-((shape[axis] - target) // 2) if target < shape[axis] else (target - shape[axis]) // 2)
            )
        return _windowed(bb, data, out, axes, begins, "constant", relax.const(0, str(data.ty.dtype)))


class Range(OnnxOpConverter):
    """start + i * delta for i < n, n from the declared output shape, checked against
    max(ceil((limit - start) / delta), 0) at run time."""

    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        start, limit, delta = inputs
        out = declared_output()
        if all(_is_constant(x, params) for x in inputs) or out is None:
            return _theirs("Range", bb, inputs, attr, params)
        (count,) = out
        for given, value in zip(inputs, (0, count, 1), strict=True):
            accept(given, value)
        dtype = str(start.ty.dtype)
        wide = "float64" if dtype.startswith(("float", "bfloat")) else "int64"
        start, limit, delta = (
            bb.emit(relax.op.reshape(relax.op.astype(x, wide), [])) for x in (start, limit, delta)
        )
        if wide == "int64":
            # Integers clamped where no sum or product below overflows (C leaves that
            # undefined): a range reaching past them does not fit an int64 anyway.
            start, limit = (bb.emit(relax.op.clip(x, -(1 << 61), 1 << 61)) for x in (start, limit))
            bound = (1 << 61) // max(count, 1)
            delta = bb.emit(relax.op.clip(delta, -bound, bound))
        steps = relax.const(np.arange(count, dtype=wide), wide)
        values = bb.emit(relax.op.astype(relax.op.add(start, relax.op.multiply(steps, delta)), dtype))
        span = relax.op.subtract(limit, start)
        zero = relax.op.equal(delta, relax.const(0, wide))
        if wide == "int64":  # ceil of an integer quotient: -((-span) // delta); a delta of 0 divides by 1
            divisor = relax.op.where(zero, _i64(1), delta)
            steps_asked = relax.op.negative(relax.op.floor_divide(relax.op.negative(span), divisor))
        else:  # inf, NaN or too large for an int64: refused before the cast (undefined in C)
            steps_asked = relax.op.ceil(relax.op.divide(span, delta))
            fits = relax.op.logical_and(
                relax.op.isfinite(steps_asked),
                relax.op.less(relax.op.abs(steps_asked), relax.const(2.0**62, wide)),
            )
            steps_asked = relax.op.astype(relax.op.where(fits, steps_asked, relax.const(-1.0, wide)), "int64")
        steps_asked = relax.op.where(zero, _i64(-1), relax.op.maximum(steps_asked, _i64(0)))
        asked = bb.emit(relax.op.reshape(steps_asked, [1]))
        sources = [
            f"its {n}{given_from(x)}"
            for n, x in zip(("start", "limit", "delta"), inputs, strict=True)
            if not _is_constant(x, params)
        ]
        site = (
            f"Range reads {' and '.join(sources)} at run time; this package was generated for the {count} "
            "elements the model declares (a delta of 0 gives none)"
        )
        return kept_if_chosen(bb, values, guard(bb, asked, [[count]], [0], site))


class Slice(OnnxOpConverter):
    """Starts, ends, axes or steps given at run time (opset 10 on): each axis of the output
    is a gather at ``start + i * step`` for i below the declared extent, with start, end and
    step worked out per axis of the data from the tensors (ONNX's clamping; an axis not listed
    keeps its extent). The package checks at run time that the values give the declared shape
    and name each axis at most once, with no step of 0 and no axis out of range."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        """starts/ends/axes as attributes (before opset 10): as constant inputs to TVM's
        converter, which knows only those (PyTorch's old exports: ``x[0]``)."""
        given = [
            _i64([int(v) for v in attr[name]]) if name in attr else None
            for name in ("starts", "ends", "axes")
        ]
        return _theirs("Slice", bb, [inputs[0], *given, None], {}, params)

    @classmethod
    def _impl_v10(cls, bb, inputs, attr, params):
        data, starts, ends = inputs[:3]
        axes = inputs[3] if len(inputs) > 3 else None
        steps = inputs[4] if len(inputs) > 4 else None
        out = declared_output()
        shape = static_dims(data.ty)  # None with an extent chosen at run time
        given = [starts, ends, axes, steps]
        constant = all(_is_constant(x, params) for x in given)
        if constant or shape is None or out is None or len(out) != len(shape):
            # (a transformer exported with a run-time sequence length slices it by constants)
            return _theirs("Slice", bb, inputs, attr, params)
        count = (_static_shape(starts) or [0])[0]
        if any(_static_shape(x) != [count] for x in given if x is not None) or 0 in shape:
            return _theirs("Slice", bb, inputs, attr, params)
        rank = len(shape)
        _accept_slice(given, out, shape, params)
        # Clamped first (ONNX clamps starts and ends to the extent, a step longer than the
        # extent reads one element either way, an axis out of range stays out of range), so
        # that no sum or product below overflows an int64 (undefined in C).
        reach = max(shape) + 1

        def clamped(x, low, high):
            return bb.emit(relax.op.clip(relax.op.astype(x, "int64"), low, high))

        starts, ends = clamped(starts, -reach, reach), clamped(ends, -reach, reach)
        axes = _i64(np.arange(count)) if axes is None else clamped(axes, -rank - 1, rank)
        steps = _i64(np.ones(count)) if steps is None else clamped(steps, -reach, reach)
        wrapped = bb.emit(relax.op.where(relax.op.less(axes, _i64(0)), relax.op.add(axes, _i64(rank)), axes))
        counts, problems = [], [_count_true(relax.op.equal(steps, _i64(0)))]
        problems.append(
            _count_true(
                relax.op.logical_or(
                    relax.op.less(wrapped, _i64(0)), relax.op.greater_equal(wrapped, _i64(rank))
                )
            )
        )
        result = data
        for axis in range(rank):
            listed = bb.emit(relax.op.equal(wrapped, _i64(axis)))
            times = bb.emit(_count_true(listed))
            problems.append(relax.op.maximum(relax.op.subtract(times, _i64(1)), _i64(0)))  # named twice
            named = relax.op.greater(times, _i64(0))

            def pick(values, default: int, named=named, listed=listed):
                chosen = relax.op.sum(relax.op.where(listed, values, _i64(0)))
                return bb.emit(relax.op.where(named, chosen, _i64(default)))

            step = pick(steps, 1)
            step = bb.emit(relax.op.where(relax.op.equal(step, _i64(0)), _i64(1), step))  # counted above
            start, end = _clamped(bb, pick(starts, 0), pick(ends, shape[axis]), step, shape[axis])
            # ceil((end - start) / step), at least 0
            counts.append(
                relax.op.maximum(
                    relax.op.negative(relax.op.floor_divide(relax.op.subtract(start, end), step)), _i64(0)
                )
            )
            indices = relax.op.add(start, relax.op.multiply(_i64(np.arange(out[axis])), step))
            indices = bb.emit(relax.op.clip(indices, 0, shape[axis] - 1))  # in range even before the check
            result = bb.emit(relax.op.take(result, indices, axis=axis, mode="clip"))
        problems_total = relax.op.sum(relax.op.stack([relax.op.reshape(p, [1]) for p in problems], axis=0))
        normal = bb.emit(
            relax.op.concat([relax.op.stack(counts, axis=0), relax.op.reshape(problems_total, [1])], axis=0)
        )
        named = ["starts", "ends", "axes", "steps"]
        sources = [
            f"its {n}{given_from(x)}"
            for n, x in zip(named, given, strict=True)
            if not _is_constant(x, params)
        ]
        site = (
            f"Slice reads {' and '.join(sources)} at run time; this package was generated for the output "
            f"shape {list(out)} the model declares, which needs each axis named once, no step 0"
        )
        return kept_if_chosen(bb, result, guard(bb, normal, [[*out, 0]], [0], site))


class Col2Im(OnnxOpConverter):
    """Col2Im: the image whose sliding blocks the input's columns are, overlapping blocks
    summed. The image shape comes from the declared output, the block shape from the input's
    extents (the one shape whose blocks give them); both tensors are checked at run time.
    Each output pixel sums, over the block offsets, the column of the block that covers it
    there (a block position reached by a whole number of strides)."""

    @classmethod
    def _impl_v18(cls, bb, inputs, attr, params):
        data, image, block = inputs
        batch, planes, length = _static_shape(data)
        out = declared_output() or _constant_col2im_output(data, image, block, params)
        if out is None:
            raise NotImplementedError("Col2Im needs its output shape declared (image_shape, block_shape)")
        spatial = list(out[2:])
        rank = len(spatial)
        dilations = [int(d) for d in attr.get("dilations", [1] * rank)]
        strides = [int(d) for d in attr.get("strides", [1] * rank)]
        pads = [int(p) for p in attr.get("pads", [0] * 2 * rank)]
        counts = _block_counts(spatial, planes // max(out[1], 1), length, dilations, strides, pads)
        if out[0] != batch or out[1] == 0 or planes % out[1] or not counts:
            raise NotImplementedError(f"Col2Im: no block shape fits the declared output {list(out)}")
        accept(image, spatial)
        accept(block, counts[0][0])
        # Several block shapes may fit (5 columns of 5 are 1x5 or 5x1 blocks): one image each,
        # the one the block shape given names chosen at run time.
        results = [
            bb.emit_te(
                _col2im_te, data, out[1], spatial, kernel, blocks, dilations, strides, pads[:rank],
                primfunc_name_hint="col2im",
            )
            for kernel, blocks in counts
        ]  # fmt: skip
        given = bb.emit(
            relax.op.concat([relax.op.astype(image, "int64"), relax.op.astype(block, "int64")], axis=0)
        )
        site = (
            f"Col2Im reads its image shape{given_from(image)} and block shape{given_from(block)} at run "
            f"time; this package was generated for image {spatial} and blocks "
            + " or ".join(str(kernel) for kernel, _ in counts)
        )
        rows = [[*spatial, *kernel] for kernel, _ in counts]
        return chosen_result(bb, results, guard(bb, given, rows, list(range(len(rows))), site))


def _constant_col2im_output(data, image, block, params) -> tuple[int, ...] | None:
    """Col2Im's output shape from an image and block shape known at generation time (the
    declared shapes are looked up only when some node reads a shape at run time)."""
    image_shape, block_shape = _constant_value(image, params), _constant_value(block, params)
    if image_shape is None or block_shape is None:
        return None
    batch, planes, _ = _static_shape(data)
    block_size = int(np.prod(block_shape))
    if block_size <= 0 or planes % block_size:
        return None
    return (batch, planes // block_size, *(int(d) for d in image_shape))


def _block_counts(spatial, per_channel: int, length: int, dilations, strides, pads):
    """Every (block shape, blocks per axis) whose blocks have ``per_channel`` elements and
    number ``length`` over the image ``spatial``."""
    rank = len(spatial)
    found = []

    def blocks_along(axis: int, k: int) -> int:
        reach = spatial[axis] + pads[axis] + pads[axis + rank] - dilations[axis] * (k - 1) - 1
        return reach // strides[axis] + 1 if reach >= 0 else 0

    def search(axis: int, kernel: list[int], remaining: int):
        if axis == rank:
            blocks = [blocks_along(a, k) for a, k in enumerate(kernel)]
            if remaining == 1 and int(np.prod(blocks)) == length and min(blocks) >= 1:
                found.append((kernel, blocks))
            return
        for k in range(1, remaining + 1):
            if remaining % k == 0:
                search(axis + 1, [*kernel, k], remaining // k)

    search(0, [], per_channel)
    return found


def _col2im_te(data, channels: int, spatial, kernel, blocks, dilations, strides, begins):
    from tvm import te, tirx

    rank = len(spatial)
    offsets = [te.reduce_axis((0, k), name=f"k{i}") for i, k in enumerate(kernel)]

    def pixel(n, c, *position):
        column = c
        block = tirx.const(0, "int32")
        valid = tirx.const(True, "bool")
        for axis in range(rank):
            column = column * kernel[axis] + offsets[axis]
            # the block whose offset lands here: (position + pad - offset * dilation) / stride
            reach = position[axis] + begins[axis] - offsets[axis] * dilations[axis]
            index = tirx.floordiv(reach, strides[axis])
            valid = tirx.And(
                valid,
                tirx.And(
                    tirx.And(reach >= 0, tirx.floormod(reach, strides[axis]) == 0), index < blocks[axis]
                ),
            )
            block = block * blocks[axis] + tirx.max(tirx.min(index, blocks[axis] - 1), 0)
        value = data[n, column, block]
        return te.sum(tirx.Select(valid, value, tirx.const(0, data.dtype)), axis=offsets)

    return te.compute((data.shape[0], channels, *spatial), pixel, name="col2im")


def _count_true(mask) -> relax.Expr:
    return relax.op.sum(relax.op.astype(mask, "int64"))


def _clamped(bb, start, end, step, extent: int):
    """ONNX's start and end on an axis of ``extent``: negative ones count from the end, then
    clamped to [0, extent] going forward and to [0, extent - 1] / [-1, extent - 1] backward."""
    forward = relax.op.greater(step, _i64(0))

    def from_end(value):
        return relax.op.where(relax.op.less(value, _i64(0)), relax.op.add(value, _i64(extent)), value)

    start, end = from_end(start), from_end(end)
    start = relax.op.where(forward, relax.op.clip(start, 0, extent), relax.op.clip(start, 0, extent - 1))
    end = relax.op.where(forward, relax.op.clip(end, 0, extent), relax.op.clip(end, -1, extent - 1))
    return bb.emit(start), bb.emit(end)


def _accept_slice(given, out, shape, params) -> None:
    """Values the golden step feeds to the parameters that are model inputs: the constant ones
    as they are, the others chosen to give the declared shape (from the start of each axis)."""
    starts, ends, axes, steps = given
    count = _static_shape(starts)[0]
    rank = len(shape)

    changed = [a for a in range(rank) if out[a] != shape[a]]
    axis_values = np.arange(count) if axes is None else _constant_value(axes, params)
    if axis_values is None:  # given at run time: the axes whose extent changes first
        axis_values = np.array((changed + [a for a in range(rank) if a not in changed])[:count])
    step_values = _constant_value(steps, params)
    if step_values is None:
        step_values = np.ones(count, np.int64)
    start_values = _constant_value(starts, params)
    begins, finals = [], []
    for k, (axis, step) in enumerate(
        zip(axis_values.reshape(-1) % rank, step_values.reshape(-1), strict=True)
    ):
        extent = shape[axis]
        begin = 0 if step > 0 else extent - 1
        if start_values is not None:  # a constant start: the end counts from it
            begin = int(start_values.reshape(-1)[k])
            begin = min(max(begin + extent if begin < 0 else begin, 0), extent - (step < 0))
        final = begin + (out[axis] - 1) * int(step) + (1 if step > 0 else -1)
        begins.append(begin)
        finals.append(final if final >= 0 else -extent - 1)  # -1 would count from the end
    for tensor, value in ((axes, axis_values), (steps, step_values), (starts, begins), (ends, finals)):
        if tensor is not None:
            accept(tensor, np.asarray(value).reshape(-1))


class Trilu(OnnxOpConverter):
    """A diagonal offset ``k`` given at run time (TVM's converter takes a constant only):
    the triangle is a comparison of column minus row with k, the shape is the input's."""

    @classmethod
    def _impl_v14(cls, bb, inputs, attr, params):
        x = inputs[0]
        k = inputs[1] if len(inputs) > 1 else None
        if _is_constant(k, params):
            return _theirs("Trilu", bb, inputs, attr, params)
        rows, columns = _static_shape(x)[-2:]
        offset = relax.op.subtract(_i64(np.arange(columns)[None, :]), _i64(np.arange(rows)[:, None]))
        k = bb.emit(relax.op.reshape(relax.op.astype(k, "int64"), []))
        upper = bool(attr.get("upper", 1))
        keep = relax.op.greater_equal(offset, k) if upper else relax.op.less_equal(offset, k)
        return relax.op.where(keep, x, relax.op.zeros_like(x))


# The inputs of each operator whose values are computed with at run time: a model that gives
# one of them as a tensor computed at run time has its declared shapes read (onnx.py).
PARAMETER_SLOTS: dict[str, tuple[int, ...]] = {
    "CenterCropPad": (1,), "Col2Im": (1, 2), "Pad": (1, 2, 3), "Range": (0, 1, 2), "Slice": (1, 2, 3, 4),
    "Trilu": (1,),
}  # fmt: skip

CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "CenterCropPad": CenterCropPad,
    "Col2Im": Col2Im,
    "Pad": Pad,
    "Range": Range,
    "Slice": Slice,
    "Trilu": Trilu,
}
