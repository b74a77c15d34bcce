"""ATen operators TVM 0.27's PyTorch importer lacks, as ``custom_convert_map`` entries.

Each takes the FX node and the importer and returns a Relax expression. They cover the
inference forms recommenders use; anything else raises a clear NotImplementedError (which
becomes a one-line error naming the operator).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from torch import fx
    from tvm import relax
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

_MODES = {0: "sum", 1: "mean", 2: "max"}


def _constant_arange(node) -> range | None:
    """The values of an ``aten.arange`` node with constant integer arguments, else None."""
    import torch

    if getattr(node, "op", None) != "call_function":
        return None
    args = list(node.args)
    if node.target is torch.ops.aten.arange.start_step and all(isinstance(a, int) for a in args[:3]):
        return range(*args[:3])
    if node.target is torch.ops.aten.arange.start and all(isinstance(a, int) for a in args[:2]):
        return range(args[0], args[1])
    return None


def embedding_bag(node: fx.Node, importer: ExportedProgramImporter) -> relax.Expr:
    """``aten._embedding_bag``: bags of equal size (offsets a constant arange, as
    ``nn.EmbeddingBag`` makes for 2-D input), sum/mean/max, no per-sample weights."""
    from tvm import relax

    args = list(node.args) + [None] * (9 - len(node.args))
    weight, indices, offsets = args[0], args[1], args[2]
    mode = _MODES.get(int(args[4] or 0))
    per_sample_weights, include_last_offset = args[6], bool(args[7])
    padding_idx = args[8]
    starts = _constant_arange(offsets)
    count = int(indices.meta["val"].shape[0])
    if (
        mode is None
        or per_sample_weights is not None
        or include_last_offset
        or (padding_idx is not None and padding_idx >= 0)
        or starts is None
        or len(starts) == 0
        or starts[0] != 0
        or count != len(starts) * (starts.step if len(starts) > 1 else count)
    ):
        raise NotImplementedError(
            "embedding_bag is supported with equal bags (2-D input), sum/mean/max, "
            "no per_sample_weights, no padding_idx"
        )
    bags, size = len(starts), count // len(starts)
    bb = importer.block_builder
    rows = bb.emit(relax.op.take(importer.env[weight], importer.env[indices], axis=0))
    dim = int(weight.meta["val"].shape[1])
    grouped = bb.emit(relax.op.reshape(rows, [bags, size, dim]))
    reduce = {"sum": relax.op.sum, "mean": relax.op.mean, "max": relax.op.max}[mode]
    result = bb.emit(reduce(grouped, axis=[1]))
    # The other three results (offset2bag, bag sizes, max indices) serve training only.
    return relax.Tuple([result, result, result, result])


def triu_indices(node: fx.Node, importer: ExportedProgramImporter) -> relax.Expr:
    """``aten.triu_indices`` with constant sizes: a constant."""
    from tvm import relax

    row, col = int(node.args[0]), int(node.args[1])
    offset = int(node.args[2]) if len(node.args) > 2 else int(node.kwargs.get("offset", 0))
    values = np.stack(np.triu_indices(row, offset, col)).astype(np.int64)
    return relax.const(values)


def amax(node: fx.Node, importer: ExportedProgramImporter) -> relax.Expr:
    """``aten.amax`` / ``aten.amin`` (dims, keepdim): a max/min reduction; no dims reduces
    every axis, as in PyTorch (Hiera's max-pooling of its unrolled tokens)."""
    from tvm import relax

    args = list(node.args) + [None] * (3 - len(node.args))
    dims = args[1] if args[1] is not None else node.kwargs.get("dim", [])
    keepdim = bool(args[2] if args[2] is not None else node.kwargs.get("keepdim", False))
    dims = [int(d) for d in ([dims] if isinstance(dims, int) else dims)] or None
    reduce = relax.op.max if "amax" in str(node.target) else relax.op.min
    return importer.block_builder.emit(reduce(importer.env[node.args[0]], axis=dims, keepdims=keepdim))


_INDEX_DTYPES = ("int32", "int64")


def index_tensor(node: fx.Node, importer: ExportedProgramImporter) -> relax.Expr:
    """``aten.index.Tensor``: PyTorch's advanced indexing, ``x[:, rows, cols]`` and the like.

    ``indices`` holds one entry per leading axis of ``x`` (axes past its end are kept whole):
    None keeps the axis whole, an integer tensor indexes it. The index tensors broadcast to
    one shape B, which replaces the indexed axes where they are adjacent and goes first
    where a whole axis separates them. TVM's own conversion takes one index tensor after
    the other when a None is present, an outer product instead (``x[:, rows, cols]`` became
    ``[n, k, k]`` rather than ``[n, k]``).

    Emitted as ``take`` (one index tensor) or ``permute_dims`` + ``index_tensor`` (several),
    so index_checks.py checks indices that are not constants at run time.
    """
    from tvm import relax

    data = importer.env[node.args[0]]
    entries = list(node.args[1])
    ndim = int(data.ty.ndim)
    if ndim < 0 or len(entries) > ndim:
        raise NotImplementedError("index.Tensor is supported on a tensor of known rank, one index per axis")
    positions = [axis for axis, entry in enumerate(entries) if entry is not None]
    if not positions:
        raise NotImplementedError("index.Tensor is supported with at least one index tensor")
    indices = [importer.env[entries[axis]] for axis in positions]
    dtypes = {str(getattr(index.ty, "dtype", "")) for index in indices}
    if not dtypes <= set(_INDEX_DTYPES) or any(int(index.ty.ndim) < 0 for index in indices):
        raise NotImplementedError(
            "index.Tensor is supported with int32/int64 index tensors of known rank "
            "(not boolean masks, whose result size depends on the data)"
        )
    bb = importer.block_builder
    if len(dtypes) > 1:
        indices = [bb.emit(relax.op.astype(index, "int64")) for index in indices]
    extents = list(data.ty.shape) if data.ty.shape is not None else [None] * ndim
    indices = [
        _wrap_negative(bb, index, extents[axis]) for index, axis in zip(indices, positions, strict=True)
    ]
    if len(positions) == 1:
        # One index tensor: its shape replaces the axis, in place; exactly take's rule.
        result = bb.emit(relax.op.take(data, indices[0], axis=positions[0]))
    else:
        # index_tensor indexes the leading axes: move the indexed axes there (in order),
        # which gives B followed by the whole axes.
        kept = [axis for axis in range(ndim) if axis not in positions]
        order = positions + kept
        if order != list(range(ndim)):
            data = bb.emit(relax.op.permute_dims(data, order))
        result = bb.emit(relax.op.index_tensor(data, indices))
        first = positions[0]
        adjacent = positions == list(range(first, positions[-1] + 1))
        if adjacent and first > 0:
            # Adjacent index tensors keep B where they were: after the first ``first`` whole axes.
            batch = int(result.ty.ndim) - len(kept)
            back = [*range(batch, batch + first), *range(batch), *range(batch + first, batch + len(kept))]
            result = bb.emit(relax.op.permute_dims(result, back))
    _check_result_shape(node, result)
    return result


def _wrap_negative(bb, index, extent):
    """PyTorch counts a negative index from the end; TVM's gather kernels do not (and TVM's
    VM, the golden outputs' second opinion, runs the import as it is). A constant is wrapped
    here (only where in [-extent, 0): index_checks.py refuses what is left outside); other
    indices get ``where(i < 0, i + extent, i)``, the form index_checks.py looks through so
    it checks, and wraps once, the original values."""
    import tvm
    from tvm import relax

    dtype = str(index.ty.dtype)
    if extent is None:
        return index
    if _static(extent):
        extent = int(extent)
        if isinstance(index, tvm.ir.GenericConst):
            values = index.value.numpy()
            if not (values < 0).any():
                return index
            return relax.const(np.where((values < 0) & (values >= -extent), values + extent, values), dtype)
        bound = relax.const(extent, dtype)
    else:  # a symbolic dimension: its value at run time
        bound = relax.prim_value(tvm.tirx.Cast(dtype, extent))
    negative = bb.emit(relax.op.less(index, relax.const(0, dtype)))
    shifted = bb.emit(relax.op.add(index, bound))
    return bb.emit(relax.op.where(negative, shifted, index))


def _check_result_shape(node, result) -> None:
    """The Relax result has PyTorch's shape (its static extents), or the conversion is wrong."""
    expected = getattr(node.meta.get("val"), "shape", None)
    got = getattr(result.ty, "shape", None)
    if expected is None or got is None:
        return
    got = list(got)
    if len(got) != len(expected):
        mismatch = True
    else:
        pairs = [(int(g), int(e)) for g, e in zip(got, expected, strict=True) if _static(g) and _static(e)]
        mismatch = any(g != e for g, e in pairs)
    if mismatch:
        raise NotImplementedError(
            f"index.Tensor: the conversion gives shape {[str(d) for d in got]}, PyTorch {list(expected)}"
        )


def _static(extent) -> bool:
    """A known extent: a Python int or a TVM integer immediate (not a symbolic dimension,
    not a torch SymInt, whose ``int()`` would add a guard or fail)."""
    import tvm

    return isinstance(extent, int | tvm.tirx.IntImm)


CONVERTERS = {
    "_embedding_bag.default": embedding_bag,
    "_embedding_bag_forward_only.default": embedding_bag,
    "triu_indices.default": triu_indices,
    "index.Tensor": index_tensor,
    "amax.default": amax,
    "amin.default": amax,
}
