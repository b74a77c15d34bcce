"""NonZero, Compress, Unique and NonMaxSuppression: operators whose output size depends on the data.

A static plan cannot size such a tensor, so each becomes a call to a package builtin (C in
``src/<prefix>_builtins.c``, no run-time look-up) that writes into a buffer sized for the worst
case and reports how many entries along one axis it filled. The data is written compactly, as
the actual shape would lay it out, so the caller's buffer holds a dense tensor of the actual
shape at its start. Such an output is a *bounded* output: the header gives its upper-bound
shape and ``<prefix>_output_shape`` its actual shape after a run.

Bounded values may only be model outputs: an operator that consumed one would see the padded
worst-case tensor, so the importer rejects that (``consumer_error``).

Every converter returns ``(value, marks)``: ``marks`` maps each bounded result to its dynamic
axis and the int64[1] tensor holding its extent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import tvm
from tvm import relax

from relay2cmake.builtins import COMPRESS, NON_MAX_SUPPRESSION, NONZERO, UNIQUE

if TYPE_CHECKING:
    from typing import TypeAlias

    # Each bounded result → (its dynamic axis, the int64[1] tensor holding its extent).
    _Marks: TypeAlias = dict[relax.Expr, tuple[int, relax.Expr]]

# Element types the builtins read (they compare and copy whole bytes).
_SUPPORTED_DTYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"}
    | {"float16", "float32", "float64", "bfloat16"}
)

_COUNT = relax.TensorType((1,), "int64")


def _shape(expr) -> list[int]:
    return [int(d.value) for d in expr.ty.shape.values]


def _check_dtype(op: str, expr) -> str:
    dtype = str(expr.ty.dtype)
    if dtype not in _SUPPORTED_DTYPES:
        raise NotImplementedError(f"{op} on {dtype} tensors is not supported")
    return dtype


def _axis_view(shape: list[int], axis: int | None) -> tuple[int, int, int]:
    """(outer, n, inner): the tensor seen as 3-D around ``axis`` (flattened when None)."""
    if axis is None:
        return 1, math.prod(shape), 1
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _normal_axis(op: str, axis, rank: int) -> int | None:
    if axis is None:
        return None
    axis = int(axis)
    if not -rank <= axis < rank:
        raise ValueError(f"{op} axis {axis} is out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


def nonzero(
    bb: relax.BlockBuilder, inputs: list[relax.Expr], attr: dict[str, Any]
) -> tuple[relax.Expr, _Marks]:
    data = inputs[0]
    _check_dtype("NonZero", data)
    shape = _shape(data)
    if not shape:
        raise NotImplementedError("NonZero of a 0-d tensor is not supported")
    bound = relax.TensorType((len(shape), math.prod(shape)), "int64")
    call = bb.emit(relax.call_dps_packed(NONZERO, relax.Tuple([data]), out_ty=[bound, _COUNT]))
    indices, count = bb.emit(relax.TupleGetItem(call, 0)), bb.emit(relax.TupleGetItem(call, 1))
    return indices, {indices: (1, count)}


def compress(
    bb: relax.BlockBuilder, inputs: list[relax.Expr], attr: dict[str, Any]
) -> tuple[relax.Expr, _Marks]:
    data, condition = inputs
    dtype = _check_dtype("Compress", data)
    shape = _shape(data)
    axis = _normal_axis("Compress", attr.get("axis"), len(shape))
    outer, n, inner = _axis_view(shape, axis)
    condition = bb.emit(relax.op.reshape(condition, (-1,)))
    view = bb.emit(relax.op.reshape(data, (outer, n, inner)))
    bound = relax.TensorType((outer, n, inner), dtype)
    call = bb.emit(relax.call_dps_packed(COMPRESS, relax.Tuple([view, condition]), out_ty=[bound, _COUNT]))
    count = bb.emit(relax.TupleGetItem(call, 1))
    out_shape = shape if axis is not None else [n]
    selected = bb.emit(relax.op.reshape(bb.emit(relax.TupleGetItem(call, 0)), out_shape))
    return selected, {selected: (axis if axis is not None else 0, count)}


def unique(
    bb: relax.BlockBuilder, inputs: list[relax.Expr], attr: dict[str, Any]
) -> tuple[relax.Expr, _Marks]:
    data = inputs[0]
    dtype = _check_dtype("Unique", data)
    shape = _shape(data)
    axis = _normal_axis("Unique", attr.get("axis"), len(shape))
    outer, n, inner = _axis_view(shape, axis)
    view = bb.emit(relax.op.reshape(data, (outer, n, inner)))
    sorted_flag = relax.prim_value(int(attr.get("sorted", 1)))
    out_ty = [
        relax.TensorType((outer, n, inner), dtype),  # unique values (slices)
        relax.TensorType((n,), "int64"),  # index of each one's first occurrence
        relax.TensorType((n,), "int64"),  # inverse indices (static: one per input slice)
        relax.TensorType((n,), "int64"),  # counts
        _COUNT,
        relax.TensorType((3 * n,), "int64"),  # the builtin's working memory (sort order, merge)
    ]
    call = bb.emit(relax.call_dps_packed(UNIQUE, relax.Tuple([view, sorted_flag]), out_ty=out_ty))
    fields = [bb.emit(relax.TupleGetItem(call, i)) for i in range(5)]
    count = fields[4]
    values = bb.emit(relax.op.reshape(fields[0], shape if axis is not None else [n]))
    marks = {values: (axis if axis is not None else 0, count), fields[1]: (0, count), fields[3]: (0, count)}
    return relax.Tuple([values, fields[1], fields[2], fields[3]]), marks


def _constant_scalar(expr):
    """The value of a constant scalar input, else None (a run-time input, or absent)."""
    import tvm

    if isinstance(expr, tvm.ir.GenericConst) and expr.value.numpy().size == 1:
        return expr.value.numpy().reshape(()).item()
    return None


def _scalar_input(expr, default, dtype: str):
    """A scalar input as a 1-element tensor (a constant of ``default`` when absent)."""
    if expr is None:
        return relax.const(np.asarray([default], dtype=dtype))
    shape = _shape(expr)
    if math.prod(shape) != 1:
        raise ValueError(f"NonMaxSuppression takes scalars for its thresholds, not a {shape} tensor")
    return expr


def non_max_suppression(
    bb: relax.BlockBuilder, inputs: list[relax.Expr], attr: dict[str, Any]
) -> tuple[relax.Expr, _Marks]:
    boxes, scores = inputs[0], inputs[1]
    rest = [*inputs[2:], None, None, None][:3]
    max_per_class, iou_threshold, score_threshold = rest
    for name, value in (("boxes", boxes), ("scores", scores)):
        if not str(value.ty.dtype).startswith("float"):
            raise NotImplementedError(f"NonMaxSuppression takes float {name}, not {value.ty.dtype}")
    batches, count, corners = _shape(boxes)
    score_batches, classes, score_count = _shape(scores)
    if corners != 4 or (score_batches, score_count) != (batches, count):
        raise ValueError(f"NonMaxSuppression boxes {_shape(boxes)} do not match scores {_shape(scores)}")
    known_max = _constant_scalar(max_per_class)
    per_class = count if known_max is None else max(0, min(count, int(known_max)))
    bound = relax.TensorType((batches * classes * per_class, 3), "int64")
    args = [
        boxes,
        scores,
        _scalar_input(max_per_class, 0, "int64"),  # ONNX: absent means no box is kept
        _scalar_input(iou_threshold, 0.0, "float32"),
        _scalar_input(score_threshold, 0.0, "float32"),
        relax.prim_value(int(score_threshold is not None)),
        relax.prim_value(int(attr.get("center_point_box", 0))),
    ]
    out_ty = [bound, _COUNT, relax.TensorType((3 * count,), "int64")]  # work: order, merge, kept
    call = bb.emit(relax.call_dps_packed(NON_MAX_SUPPRESSION, relax.Tuple(args), out_ty=out_ty))
    selected, extent = bb.emit(relax.TupleGetItem(call, 0)), bb.emit(relax.TupleGetItem(call, 1))
    return selected, {selected: (0, extent)}


CONVERTERS = {
    "NonZero": nonzero,
    "Compress": compress,
    "Unique": unique,
    "NonMaxSuppression": non_max_suppression,
}


# NumPy versions of the builtins for TVM's own VM (the golden step's TVM-VM path; the package
# runs the C ones): the same buffers filled the same way, compact at the start, so that this path
# confirms the others where ONNX Runtime cannot run a model (bfloat16 data).


def _fill(out, values: np.ndarray) -> None:
    flat = np.zeros(math.prod(int(d) for d in out.shape), dtype=values.dtype)
    flat[: values.size] = values.ravel()
    out.copyfrom(flat.reshape(tuple(int(d) for d in out.shape)))


def _count(out, value: int) -> None:
    out.copyfrom(np.array([value], dtype=np.int64))


def _as_sortable(array: np.ndarray) -> np.ndarray:
    """bfloat16 and float16 as float64 (exact): NumPy sorts those reliably."""
    return array.astype(np.float64) if array.dtype.kind == "f" or array.dtype.name == "bfloat16" else array


def _nonzero_reference(data, indices, count) -> None:
    found = np.array(np.nonzero(_as_sortable(data.numpy())), dtype=np.int64)
    _fill(indices, found)
    _count(count, found.shape[1])


def _compress_reference(view, condition, selected, count) -> None:
    n = int(view.shape[1])
    chosen = np.flatnonzero(condition.numpy().reshape(-1)[:n])
    _fill(selected, view.numpy()[:, chosen, :])
    _count(count, chosen.size)


def _unique_reference(view, sorted_flag, values, first, inverse, counts, count, _work) -> None:
    data = view.numpy()
    slices = _as_sortable(data).transpose(1, 0, 2).reshape(data.shape[1], -1)
    _, index, back, tally = np.unique(
        slices, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    back = back.reshape(-1)
    if not int(sorted_flag):  # in order of first occurrence
        order = np.argsort(index, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        index, tally, back = index[order], tally[order], rank[back]
    _fill(values, data[:, index, :])
    _fill(first, index.astype(np.int64))
    _fill(inverse, back.astype(np.int64))
    _fill(counts, tally.astype(np.int64))
    _count(count, index.size)


tvm.register_global_func(NONZERO, _nonzero_reference, override=True)
tvm.register_global_func(COMPRESS, _compress_reference, override=True)
tvm.register_global_func(UNIQUE, _unique_reference, override=True)


def consumer_error(op_name: str) -> NotImplementedError:
    return NotImplementedError(
        f"{op_name} uses the output of NonZero, Compress, Unique or NonMaxSuppression, whose size "
        "depends on the data; "
        "relay2cmake supports those only as model outputs (a static plan cannot size what follows)"
    )
