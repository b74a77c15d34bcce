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
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter, get_constant

from relay2cmake.frontends.onnx_converter_support import _static_shape, _theirs
from relay2cmake.frontends.onnx_settled import NODE_OUTPUT_SHAPES, accept, given_from, guard, kept_if_chosen


def _is_constant(expr, params) -> bool:
    return expr is None or hasattr(get_constant(expr, params), "value")


def _declared_output() -> tuple[int, ...] | None:
    shapes = NODE_OUTPUT_SHAPES.get() or [None]
    return shapes[0]


def _i64(values) -> relax.Expr:
    return relax.const(np.asarray(values, dtype="int64"), "int64")


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
        out = _declared_output()
        constant = _is_constant(pads, params) and _is_constant(value, params)
        if constant or out is None or not _is_constant(axes, params):
            return _theirs("Pad", bb, inputs, attr, params)
        shape = _static_shape(data)
        rank = len(shape)
        listed = (
            list(range(rank))
            if axes is None
            else [int(a) % rank for a in get_constant(axes, params).value.numpy()]
        )
        if len(out) != rank or any(out[a] != shape[a] for a in range(rank) if a not in listed):
            return _theirs("Pad", bb, inputs, attr, params)
        mode = attr.get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        dtype = str(data.ty.dtype)
        fill = (
            relax.const(0, dtype)
            if value is None
            else bb.emit(relax.op.reshape(relax.op.astype(value, dtype), []))
        )
        count = len(listed)
        growth = [out[a] - shape[a] for a in listed]
        accept(pads, [g // 2 for g in growth] + [g - g // 2 for g in growth])
        pads = bb.emit(relax.op.astype(pads, "int64"))
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
        targets = [int(t) for t in get_constant(size, params).value.numpy().reshape(-1)]
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
        out = _declared_output()
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
        steps = relax.const(np.arange(count, dtype=wide), wide)
        values = bb.emit(relax.op.astype(relax.op.add(start, relax.op.multiply(steps, delta)), dtype))
        span = relax.op.subtract(limit, start)
        if wide == "int64":  # ceil of an integer quotient: -((-span) // delta)
            steps_asked = relax.op.negative(relax.op.floor_divide(relax.op.negative(span), delta))
        else:
            steps_asked = relax.op.astype(relax.op.ceil(relax.op.divide(span, delta)), "int64")
        asked = bb.emit(relax.op.reshape(relax.op.maximum(steps_asked, _i64(0)), [1]))
        site = (
            f"Range reads its bounds at run time; this package was generated for the {count} "
            "elements the model declares"
        )
        return kept_if_chosen(bb, values, guard(bb, asked, [[count]], [0], site))


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


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "CenterCropPad": CenterCropPad,
    "Pad": Pad,
    "Range": Range,
    "Trilu": Trilu,
}
