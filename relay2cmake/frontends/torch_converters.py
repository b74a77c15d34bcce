"""ATen operators TVM 0.27's PyTorch importer lacks, as ``custom_convert_map`` entries.

Each takes the FX node and the importer and returns a Relax expression. They cover the
inference forms recommenders use; anything else raises a clear NotImplementedError (which
becomes a one-line error naming the operator).
"""

from __future__ import annotations

import numpy as np

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


def embedding_bag(node, importer):
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


def triu_indices(node, importer):
    """``aten.triu_indices`` with constant sizes: a constant."""
    from tvm import relax

    row, col = int(node.args[0]), int(node.args[1])
    offset = int(node.args[2]) if len(node.args) > 2 else int(node.kwargs.get("offset", 0))
    values = np.stack(np.triu_indices(row, offset, col)).astype(np.int64)
    return relax.const(values)


CONVERTERS = {
    "_embedding_bag.default": embedding_bag,
    "_embedding_bag_forward_only.default": embedding_bag,
    "triu_indices.default": triu_indices,
}
