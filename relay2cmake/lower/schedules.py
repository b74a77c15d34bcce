"""Default CPU schedules that need no tuning, applied per PrimFunc by pattern.

TVM 0.27 ships no CPU schedules for legalized Relax (dlight's CPU rules cover GEMV and
row reductions, and do nothing useful for matmul or convolution), so unscheduled kernels
run at about 1 GFLOPS. These patterns cover most of the arithmetic in real models:

- matmul-like: one reduction block with a single reduction axis (dense, matmul, batch
  matmul, M = 1 included). A register tile of ``rows x (4 vectors)`` accumulators,
  vectorized along the output's contiguous axis, the reduction unrolled by 4.
- channels-last convolutions (``conv2d_nhwc.py``'s blocks, found by name): regular, 1x1, strided
  and depthwise. A tile of a few pixels x a few vectors of output channels, sized by
  ``_pixel_tile``; a regular conv's padding stays its own stage (a plain copy is
  inlined), a depthwise conv reads it inline.
- Winograd convolutions (``winograd.py``): the product is matmul-like; the input and output
  transforms get a tile loop with every tile position unrolled.
- any other NCHW conv2d-like block (e.g. a transposed convolution): a tile of 8 output
  channels x one vector of output columns.

In all of them, the fused elementwise epilogue (bias, relu, clip, add) is folded into the tile's
write-back, and the outermost tiles run in parallel (``TVMBackendParallelLaunch`` in LLVM
objects; serial loops in C). Anything else, or anything a schedule primitive rejects,
keeps TVM's default lowering: a schedule can only make a kernel faster, never wrong,
because TVM checks every primitive against the block's dependences.
"""

from __future__ import annotations

import itertools
import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relay2cmake.lower import group_shuffle
from relay2cmake.lower.rewrites.conv2d_nhwc import CONV_BLOCK, DEPTHWISE_BLOCK, GROUPED_BLOCK, UINT8_BLOCK
from relay2cmake.lower.rewrites.numerics import finite_reduction_identities, infinite_reduction_identities
from relay2cmake.lower.rewrites.packed_matmul import COLUMNS_BLOCK, MATMUL_BLOCK, PACK
from relay2cmake.lower.rewrites.winograd import INPUT_BLOCK, OUTPUT_BLOCK, OUTPUT_TILE, PRODUCT_BLOCK
from relay2cmake.symbolic import value_at

if TYPE_CHECKING:
    from tvm import tirx
    from tvm.ir import IRModule
    from tvm.tirx import PrimFunc

    from relay2cmake.targets import KernelTarget


@dataclass(frozen=True)
class ScheduleOptions:
    vector_lanes: int  # float32 lanes of one vector register: 4 (NEON), 8 (AVX2), 16 (AVX-512)
    vectorize: bool  # False for the C target, which cannot print vector types
    parallel: bool
    # The integer dot product uint8 x int8 convolutions are tensorized with (int8_dot.py:
    # "vnni", "vnni256", "pmaddwd", "sdot", "usdot"); "" widens to int32 vectors.
    int8_dot: str = ""

    @classmethod
    def for_objects(cls, target: KernelTarget, parallel: bool = True) -> ScheduleOptions:
        """The default schedules of an object set (a ``KernelTarget``): vectorized to its width."""
        return cls(
            vector_lanes=target.vector_lanes,
            vectorize=True,
            parallel=parallel,
            int8_dot=target.int8_dot_instruction,
        )


def _divisor(extent: int, preferred: int) -> int:
    """The largest divisor of ``extent`` not above ``preferred`` (uneven splits add
    predicates that defeat vectorization)."""
    for candidate in range(min(preferred, extent), 0, -1):
        if extent % candidate == 0:
            return candidate
    return 1


def _vector_width(extent: int, options: ScheduleOptions) -> int:
    """Lanes of the vectors along an output axis of ``extent``: the register's width, else
    half or a quarter of it where that divides the extent (1,000 classes: 8 lanes of
    AVX-512), down to 4; 1 (scalar) when none does or the target cannot vectorize."""
    lanes = options.vector_lanes if options.vectorize else 1
    while lanes >= 4 and extent % lanes != 0:
        lanes //= 2
    return lanes if lanes >= 4 else 1


def _reduction_blocks(sch):
    from tvm import tirx

    root = sch.get_sblock("root")
    blocks = []
    for block in sch.get_child_blocks(root):
        iter_vars = sch.get(block).iter_vars
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in iter_vars):
            blocks.append(block)
    return blocks


def _recomputed(sch, block, depth: int, row_count: int) -> bool:
    """Whether ``block``, computed under ``depth`` row loops of ``row_count`` iterations,
    runs more than once over its domain (more than 1.5 times: predicated tails)."""
    inner = _iterations_of(sch, sch.get_loops(block)[depth:])
    domain = math.prod(value_at(iv.dom.extent, _bounds.get()) for iv in sch.get(block).iter_vars)
    return inner * row_count > 1.5 * domain


def _is_product(block) -> bool:
    """Whether a reduction block accumulates a product (a matmul's ``acc + a * b``, perhaps
    of casts), not a plain sum of one operand."""
    import tvm_ffi
    from tvm import tirx

    found = []

    def note(node):
        found.append(node)
        return node

    tvm_ffi.structural_map(block.body, [(tirx.Mul, note)])
    return bool(found)


def _kinds(sch, block) -> str:
    """'S'/'R' per iter var, e.g. 'SSR' for a matmul, 'SSSSRRR' for conv2d."""
    from tvm import tirx

    return "".join("R" if iv.iter_type == tirx.IterVar.CommReduce else "S" for iv in sch.get(block).iter_vars)


# The largest values of the run-time dimensions of the kernel being scheduled (see
# ``DIM_BOUNDS``): a loop over a symbolic extent is tiled for its largest value, its tiles
# then predicated by TVM wherever the extent at run time does not fill them.
_bounds: ContextVar[dict[str, int]] = ContextVar("_bounds", default={})  # noqa: B039 (never mutated)
# The PrimFunc attribute that carries them (``lower/pipeline.lowered_kernels`` sets it).
DIM_BOUNDS = "relay2cmake.dim_bounds"


def _is_static(sch, loop) -> bool:
    return hasattr(sch.get(loop).extent, "value")


def _extent(sch, loop) -> int:
    return value_at(sch.get(loop).extent, _bounds.get())


def _fold_epilogue(sch, block):
    """Cache the block's output in registers and fold the elementwise consumers into the
    write-back; returns the write-back block.

    Intermediate elementwise blocks are inlined into their consumers first, so that an
    epilogue that reads the product twice (GELU: x * (1 + erf(x / sqrt 2)) / 2) becomes one
    block with a single producer, which the write-back can absorb."""
    _inline_intermediates(sch, block)
    # "global" scope: small constant-size buffers become stack arrays (LLVM keeps them in
    # registers); TVM turns "local" ones into workspace calls, even inside parallel loops.
    write_back = sch.cache_write(block, 0, "global")
    _inline_consumers(sch, write_back)
    return write_back


def _inline_intermediates(sch, block) -> None:
    """Every elementwise block after ``block`` but the function's output inlined into its
    consumers: an epilogue that reads ``block``'s result twice (SiLU: x * sigmoid(x)) then
    has one consumer left, which ``reverse_compute_inline`` can take (it left a dangling read
    of the intermediate when that had two consumers, TVM 0.27)."""
    producers = {sch.get(p).name_hint for p in sch.get_producers(block)}
    for candidate in sch.get_child_blocks(sch.get_sblock("root")):
        name = sch.get(candidate).name_hint
        if name == sch.get(block).name_hint or name in producers or name == COLUMNS_BLOCK:
            continue  # the column cut must reach the write-back only after the tiling
        if any(_iterations(sch, c) > _iterations(sch, candidate) for c in sch.get_consumers(candidate)):
            # Read by a broadcast (squeeze-excite's sigmoid of 144 channels scaling a 56 x 56
            # image): inlined, it was computed again for every pixel, in a scalar loop
            # (EfficientNet-B0: 0.72 of its 5.5 ms). It stays per channel, for the write-back.
            continue
        try:
            sch.compute_inline(candidate)
        except Exception:  # the function's output block, or not elementwise: stays
            pass


def _inline_elementwise_producers(sch, block) -> None:
    """``block``'s producers read inline where they are elementwise; the others stay stages
    of their own, computed whole first."""
    for producer in sch.get_producers(block):
        try:
            sch.compute_inline(producer)
        except Exception:  # not elementwise
            pass


def _iterations(sch, block) -> int:
    return math.prod(int(iv.dom.extent) for iv in sch.get(block).iter_vars)


def _vectorize_broadcast_consumers(sch, write_back, options: ScheduleOptions) -> None:
    """The stages after a tile's write-back that it could not absorb, because they read its
    result broadcast over more elements (squeeze-excite's image times its channel scales):
    vectorized and in parallel as injective kernels are."""
    for consumer in sch.get_consumers(write_back):
        if "R" not in _kinds(sch, consumer) and _iterations(sch, consumer) > _iterations(sch, write_back):
            _vectorize_injective(sch, consumer, options)


def _inline_consumers(sch, write_back) -> None:
    """Fold the chain of single elementwise consumers into the write-back; a padded matmul's
    column cut stops it (folded in after the tiling: ``_fold_column_cut``)."""
    while True:
        consumers = sch.get_consumers(write_back)
        if len(consumers) != 1 or sch.get(consumers[0]).name_hint == COLUMNS_BLOCK:
            return
        try:
            sch.reverse_compute_inline(consumers[0])
        except Exception:  # not elementwise (a reduction, a transpose): leave it a stage
            return


def _fold_column_cut(sch, write_back) -> None:
    """A matmul computed over padded columns (packed_matmul.py) ends in a stage that keeps
    the first N: inlined into the tile's write-back once that sits inside the tile loops, it
    becomes a predicate on the store. (Inlined before ``reverse_compute_at``, the predicate
    was lost and the tile wrote past the output.)"""
    consumers = sch.get_consumers(write_back)
    if len(consumers) != 1 or sch.get(consumers[0]).name_hint != COLUMNS_BLOCK:
        return
    sch.reverse_compute_inline(consumers[0])
    _inline_consumers(sch, write_back)  # the fused epilogue after the cut, under its predicate


# Bytes of B beyond which it is not expected to stay in a core's caches (L2 is 512 KiB to
# 2 MiB on the CPUs the object sets target), and of A up to which columns go outermost when
# B is that large: A is then read once per column tile (N / cols times) instead of B once
# per row tile (M / rows times), less traffic whenever the tile has more columns than rows
# (MLP-Mixer's 196 x 1536 x 512 and 196 x 512 x 1536, 1.2 MB and 0.4 MB of A, 3 MB of B:
# 45 -> 65-87 GFLOPS, AVX-512; the limit was 256 KiB).
WEIGHTS_IN_CACHE = 1 << 20
ROWS_IN_CACHE = 2 << 20
COLUMN_BLOCK_BYTES = 128 << 10  # of B, for all row tiles in turn when columns go outermost


def _schedule_matmul(sch, block, options: ScheduleOptions) -> _Prefetch | None:
    """Returns the prefetch to add to Winograd's product (``_next_position_prefetch``), if any."""
    loops = sch.get_loops(block)
    *outer, i, j, k = loops
    positions = (
        math.prod(_extent(sch, loop) for loop in outer) if sch.get(block).name_hint == PRODUCT_BLOCK else 0
    )
    while outer and all(_is_static(sch, loop) for loop in (outer[-1], i)) and _extent(sch, i) == 1:
        if not _shared_weights(sch, block):
            break
        # One row per outer index (time-major data, [sequence, batch = 1, features]: XLNet's
        # dense layers): the outer axis becomes the rows, so that a tile has several and each
        # vector of weights loaded feeds as many multiply-adds (one row a tile: 50 GFLOPS).
        i = sch.fuse(outer.pop(), i)
    lanes = options.vector_lanes
    n_extent, m_extent, depth = _extent(sch, j), _extent(sch, i), _extent(sch, k)
    width = _vector_width(n_extent, options)
    # Columns: 2 register widths, 8 for M = 1 (a GEMV has no rows to reuse weights across).
    cols = width * _divisor(n_extent // width, lanes * (8 if m_extent == 1 else 2) // width)
    if not _is_static(sch, j):  # whole blocks of columns chosen at run time: tiles inside one
        cols = math.gcd(cols, _known_multiple(sch.get(j).extent))
        width = math.gcd(width, cols)
    preferred_rows = min(4 if lanes <= 8 else 8, (STACK_BYTES - 1) // (4 * cols))
    rows = _divisor(m_extent, preferred_rows)
    blocks = {sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))}
    waste = (-m_extent % preferred_rows) / m_extent  # rows a predicated last tile computes for nothing
    if (
        width > 1
        and rows < preferred_rows
        and (rows < preferred_rows // 2 or waste <= 0.15)
        and m_extent > preferred_rows
        and COLUMNS_BLOCK not in blocks
    ):
        # An M that few row counts divide (ViT's 197 tokens, ConvNeXt's rows of 14 pixels)
        # would leave one or two rows per tile, too few accumulators to hide the FMA latency
        # and each block of B read once per row: full tiles and a predicated last one instead.
        # Not with a column cut: inlining the cut into the write-back replaces the rows'
        # predicate there instead of adding to it (the tile then stores past the last row).
        rows = preferred_rows
    static_rows = _is_static(sch, i)
    if not static_rows:
        # Rows chosen at run time: tiles that divide what the rows are a multiple of (a
        # packed matmul computes them in 4s), no predicate on the tile; else one row a tile.
        rows = _divisor(_known_multiple(sch.get(i).extent), preferred_rows)
    write_back = _fold_epilogue(sch, block)
    i0, i1 = sch.split(i, [None, rows])
    vector = width if width > 1 else cols  # scalar: the columns stay one plain loop
    # One loop per vector, so that none spans two blocks of packed weights (packed_matmul.py).
    j0, jv, j1 = sch.split(j, [None, cols // vector, vector])
    # A depth known only at run time stays whole: a split would put a condition on every
    # multiply-add (P.V over the sequence: 25 -> ? us).
    k0, k1 = sch.split(k, [None, _divisor(_extent(sch, k), 4) if _is_static(sch, k) else 1])
    # Rows of tiles outermost (B streamed once per row tile) unless B is too big for the
    # caches and A is not: then columns outermost, each block of B read once and A from L2
    # or L3 (GPT-2's LM head: 25 MB of weights, 64 KiB of activations; 5.5 -> 16+ GFLOPS).
    columns_first = 4 * depth * n_extent > WEIGHTS_IN_CACHE and 4 * depth * m_extent <= ROWS_IN_CACHE
    tiles = (j0, i0) if columns_first else (i0, j0)
    order = (*outer, *tiles)
    inner: tuple = ()
    block_tiles = COLUMN_BLOCK_BYTES // (4 * depth * cols)
    if outer and _shared_weights(sch, block) and math.prod(_extent(sch, loop) for loop in outer) > 1:
        # Weights shared by every outer index (a dense layer on [1, 14, 14, C] channels-last
        # data, ConvNeXt's): each block of B read once for all of them, not once per index.
        order = (j0, *outer, i0)
    elif columns_first and 1 < block_tiles < _extent(sch, j0):
        # Column tiles in blocks of B that stay in L2, every row tile across a block: each
        # row's output is then written in runs of a block's width. One column tile at a time
        # wrote 128 rows 200 KB apart, a store stream per row, more than the prefetchers
        # follow (GPT-2's LM head, 128 x 128 x 50257: 27 -> 20 ms, 60 -> 80 GFLOPS).
        column_blocks, block_tile = sch.split(j0, [None, block_tiles])
        order, inner = (*outer, column_blocks, i0), (block_tile,)
    sch.reorder(*order, *inner, k0, k1, i1, jv, j1)
    sch.reverse_compute_at(write_back, (*order, *inner)[-1])
    _fold_column_cut(sch, write_back)
    sch.unroll(k1)
    sch.unroll(i1)
    sch.unroll(jv)
    parallel = order
    ragged_rows = static_rows and m_extent % rows != 0
    if ragged_rows and order[-1] is i0 and _iterations_of(sch, order[:-1]) >= MIN_PARALLEL_TILES:
        # The row tiles stay a loop of their own inside the parallel one: fused into it,
        # LoopPartition could not peel the predicated last tile and every multiply-add kept
        # its row condition, spilling the accumulators (Swin's 7 x 7 x 768 MLP, one
        # thread: 3.0 ms serial, 4.5 ms in a parallel build).
        parallel = order[:-1]
    _finish_tile(sch, block, write_back, j1 if width > 1 else None, parallel, k0, options)
    if options.vectorize and positions and len(outer) == 2 and not columns_first:
        return _next_position_prefetch(sch, block, positions)
    return None


MIN_PARALLEL_TILES = 16  # iterations a parallel loop keeps when a loop is taken out of it


def _iterations_of(sch, loops) -> int:
    return math.prod(_extent(sch, loop) for loop in loops)


def _known_multiple(extent) -> int:
    """The largest of 32, 16, 8, 4, 2 that provably divides a symbolic extent, else 1."""
    import tvm

    analyzer = tvm.sym.Analyzer()
    return next((d for d in (32, 16, 8, 4, 2) if analyzer.can_prove(tvm.tirx.floormod(extent, d) == 0)), 1)


def _shared_weights(sch, block) -> bool:
    """The matmul reads packed constant weights [N/16, K, 16], the same for every outer index."""
    return sch.get(block).name_hint == MATMUL_BLOCK and any(
        len(region.source.shape) == 3
        and all(hasattr(d, "value") for d in region.source.shape)  # constant weights: a static shape
        and int(region.source.shape[-1]) == PACK
        for region in sch.get(block).reads
    )


def _finish_tile(
    sch, block, write_back, vector, outer, first_reduction, options: ScheduleOptions, intrinsic=None
) -> None:
    """The end of every tile schedule: the ``vector`` loop vectorized in the update (or, with
    ``intrinsic``, the loops from it tensorized), its write-back and its init; the ``outer``
    tile loops fused and parallel. Both before decompose_reduction: afterwards the update no
    longer counts as a reduction, and both primitives refuse it."""
    if vector is not None:
        if intrinsic is None:
            sch.vectorize(vector)
        _vectorize_register_wide(sch, sch.get_loops(write_back)[-1], _extent(sch, vector))
    if options.parallel:
        sch.parallel(sch.fuse(*outer))
    init = sch.decompose_reduction(block, first_reduction)
    if intrinsic is not None:  # after decompose_reduction: the intrinsic has no init
        sch.tensorize(vector, intrinsic)
    if vector is not None:
        sch.vectorize(sch.get_loops(init)[-1])


def _vectorize_register_wide(sch, loop, lanes: int) -> None:
    """A write-back's innermost loop spans the tile's vectors; split into register-wide
    vectors (one loop of 3 or 5 vectors becomes a single 24- to 80-lane LLVM vector)."""
    if _extent(sch, loop) > lanes:
        outer, loop = sch.split(loop, [None, lanes])
        sch.unroll(outer)
    sch.vectorize(loop)


def _parallel_padding(sch, block, options: ScheduleOptions) -> None:
    """The padding stage of a regular convolution stays its own cheap loop nest (inlined
    into the tile's loads it costs 3-8%); its batch and row loops run in parallel. Without
    padding (1x1 and unpadded convolutions) the stage is a plain copy of the input, and is
    inlined."""
    for producer in sch.get_producers(block):
        if _is_plain_copy(sch, producer):
            sch.compute_inline(producer)
            continue
        loops = sch.get_loops(producer)
        if options.parallel and len(loops) >= 3:
            sch.parallel(sch.fuse(*loops[:2]))


def _is_plain_copy(sch, block) -> bool:
    """``out[i, j, ...] = in[i, j, ...]`` over the whole of ``in``: no padding, no arithmetic."""
    import tvm

    stmt = sch.get(block)
    body = stmt.body
    # (TVM 0.27's BufferLoad is a constructor function that makes TensorLoad objects.)
    if not isinstance(body, tvm.tirx.BufferStore) or type(body.value).__name__ != "TensorLoad":
        return False
    source, target = body.value.source, body.buffer  # a TensorLoad names its buffer "source"
    # Extents compared as text: equal numbers, or the same run-time dimension.
    return [str(d) for d in source.shape] == [str(d) for d in target.shape] and str(
        body.value.indices
    ) == str(body.indices)


CONV_TILE = (8, 1)  # output channels x vectors of output columns per register tile


UNROLLED_WINDOW = 64  # kernel taps up to which a window's loops are unrolled (7 x 7 = 49)


def _unroll_window(sch, loops) -> None:
    """A kernel window's loops unrolled, unless the window is large: a 60 x 80 max pool
    (ONNX's PyTorch suite) unrolled into 4,800 copies of its body, which LLVM compiled for
    more than seven minutes."""
    if math.prod(_extent(sch, loop) for loop in loops) <= UNROLLED_WINDOW:
        for loop in loops:
            sch.unroll(loop)


def _schedule_conv2d(sch, block, options: ScheduleOptions) -> None:
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    lanes = min(options.vector_lanes, 8) * CONV_TILE[1]  # 8 columns: widths are 7 x 2^k
    _parallel_padding(sch, block, options)
    write_back = _fold_epilogue(sch, block)
    f0, f1 = sch.split(f, [None, _divisor(_extent(sch, f), CONV_TILE[0])])
    x0, x1 = sch.split(x, [None, _divisor(_extent(sch, x), lanes)])
    sch.reorder(n, f0, y, x0, rc, ry, rx, f1, x1)
    sch.reverse_compute_at(write_back, x0)
    _unroll_window(sch, [ry, rx])
    sch.unroll(f1)
    _finish_tile(sch, block, write_back, x1 if options.vectorize else None, (n, f0, y), rc, options)


# Accumulator vectors a register tile may hold: AVX2 has 16 vector registers (12 for the
# tile, the rest for one weight vector per column block and a broadcast pixel); NEON has 32.
# AVX-512 has 32 too, but TVM keeps a tile on the stack only below 1 KiB (16 x 64 bytes is
# too much): a bigger one becomes scratch, which parallel loops cannot hold.
ACCUMULATORS = {4: 24, 8: 12, 16: 15}
STACK_BYTES = 1024  # TVM's kMaxStackAlloca: a tile must stay below it
MIN_PIXELS = 4
RAGGED_WASTE = 0.15  # of a row, computed past its end by a ragged last column tile
RC_UNROLL = 4  # input channels per trip of a channels-last convolution's reduction loop
FEWER_LOADS = 1.5  # times fewer loads per multiply-add a ragged x86 tile must make
MIN_ACCUMULATORS = 8  # of such a tile: two FMA units of 4 cycles' latency kept busy
# An exact tile with at most these accumulators (no slack over 2 FMA units x 4 cycles) takes a
# ragged one with more where there is one: AVX2's 4 x 2 and 2 x 2 x 2 tiles on rows of 56, 28
# and 14, AVX-512's 4 x 2 on rows of 2^k (BoTNet's 64, 32, 16, 8). Kernels alone, Intel Xeon:
# AVX2, ResNet-50's convs 23.1 -> 20.6 ms (1.02-1.16x each), DenseNet-121's 30.4 -> 27.3,
# BoTNet-26t's 34.8 -> 31.9; AVX-512, BoTNet's 22.1 -> 20.6 (0.96-1.20x).
FEW_ACCUMULATORS = 8


def _pixel_tile(
    height: int,
    width: int,
    vectors: int,
    lanes: int,
    ragged: bool = True,
    budget: int | None = None,
    grouped: bool = False,
) -> tuple[int, int, int]:
    """(rows, columns, vectors of output channels) of a channels-last tile: at least 4 pixels
    where the image allows (each weight vector is reused once per pixel: fewer pixels stream
    the weights from L2), then the most accumulators within budget, then the fewest loads
    per multiply-add (one broadcast per pixel, one weight load per vector), then wider rows.
    Exact divisors, or (``ragged``) a ragged last column tile where those leave too few
    accumulators (FEW_ACCUMULATORS or fewer: AVX2, and AVX-512 but in grouped convs) or make
    FEWER_LOADS times as many loads (AVX2, AVX-512). ``budget``:
    accumulators, when one is not a register of ``lanes``. ``grouped``: each vector of a
    pixel reads an input of its own (not one broadcast for all)."""
    budget = budget or ACCUMULATORS.get(lanes, 12)

    def best_tile(column_choices, fewest_loads: bool = False) -> tuple | None:
        best = None
        for v in (d for d in range(1, vectors + 1) if vectors % d == 0):
            for columns in column_choices:
                for rows in (d for d in range(1, min(height, 4) + 1) if height % d == 0):
                    pixels = rows * columns
                    if pixels * v > budget or (rows > 1 and columns * 2 > width):
                        continue
                    if fewest_loads and pixels * v < MIN_ACCUMULATORS:
                        continue
                    # at least 4 pixels, then the most accumulators, then the fewest loads
                    key: tuple = (min(pixels, MIN_PIXELS), pixels * v, -(pixels + v), columns)
                    if fewest_loads:  # the fewest loads before the most accumulators
                        key = (key[0], -_loads_per_product((rows, columns, v)), *key[1:])
                    if best is None or key > best[0]:
                        best = (key, (rows, columns, v))
        return best

    exact = best_tile([d for d in range(1, width + 1) if width % d == 0])
    # column counts whose ragged last tile wastes at most RAGGED_WASTE of the row
    ragged_columns = [c for c in range(2, width) if -width % c <= RAGGED_WASTE * width and width % c]
    few = exact is None or exact[0][1] <= FEW_ACCUMULATORS
    if ragged and (lanes == 8 or (lanes == 16 and not grouped)) and few:
        # Too few accumulators from exact divisors (AVX2 on a 7 x 7 image: 7 pixels x 1
        # vector): a ragged last column tile, which LoopPartition peels (likely_vector_tails).
        # ResNet-50's 7 x 7 layers, AVX2 set on AMD EPYC: 4 x 2 vectors against 7 x 1, 3.2 ->
        # 2.4 ms and 2.75 -> 2.15 ms. (NEON tiles hold 14 accumulators over 7 pixels.)
        uneven = best_tile(ragged_columns)
        if uneven is not None and (exact is None or uneven[0][1] > exact[0][1]):
            return uneven[1]
    if ragged and lanes in (8, 16) and not grouped and exact is not None:
        # Exact divisors give enough accumulators but, for an odd count of vectors, one vector
        # over many pixels (AVX-512, 14 x 1 on a 14-wide row of 48 channels): a broadcast per
        # multiply-add. The ragged tile of the fewest loads (5 x 3) loads half as often.
        # Kernels alone, interleaved, Intel Xeon: AVX-512, the 28 tiles that change over 18
        # zoo CNNs 1.00-1.27x (RegNet-Y's 112 x 112 x 48 convs 1.25x and 1.27x); AVX2, the 3
        # that change over 12 (SqueezeNet's 55 x 55 convs) 1.06-1.13x. Not for grouped convs,
        # whose vectors each broadcast an input of their own: RegNet-Y's 7 x 7 x 440 (55
        # vectors of 8 lanes, AVX-512) 1 x 7 x 1 -> 1 x 2 x 5 ran 0.78-0.84x.
        uneven = best_tile(ragged_columns, fewest_loads=True)
        if uneven is not None and _loads_per_product(uneven[1]) * FEWER_LOADS <= _loads_per_product(exact[1]):
            return uneven[1]
    return exact[1] if exact else (1, 1, 1)


def _loads_per_product(tile: tuple[int, int, int]) -> float:
    """Loads per multiply-add of a (rows, columns, vectors) tile: a broadcast per pixel and a
    weight vector per vector, for pixels x vectors multiply-adds."""
    rows, columns, vectors = tile
    return (rows * columns + vectors) / (rows * columns * vectors)


def _ragged_tiles_stay_inside(sch, block) -> bool:
    """Whether a ragged last column tile would store inside the output: yes without a column
    cut; with one only where the cut drops padded columns of the image as well (SqueezeNet's
    13 x 13 computed as 14 wide), whose predicate, inlined into the write-back, then bounds
    the ragged tile too. A cut of padded channels alone replaces the ragged tile's predicate
    instead of adding to it: the tile stored past the end of each row (heap corruption,
    caught by the package's golden test; ShuffleNet's 14 x 14 x 232 forced ragged, glibc's
    "corrupted double-linked list")."""
    cut = [b for b in sch.get_consumers(block) if sch.get(b).name_hint == COLUMNS_BLOCK]
    if not cut:
        return COLUMNS_BLOCK not in {
            sch.get(b).name_hint for b in sch.get_child_blocks(sch.get_sblock("root"))
        }
    kept, computed = (sch.get(b).writes[0].source.shape for b in (cut[0], block))
    widths = [d[2] for d in (kept, computed) if len(d) == 4 and hasattr(d[2], "value")]
    return len(widths) == 2 and int(widths[0]) < int(widths[1])


def _group_outputs(sch, block) -> int:
    """Output channels per group of a grouped convolution: the input channels its padded
    input has, divided by the ones each output channel reads (the ``rc`` extent), is the
    number of groups."""
    *_, f, _, _, rc = sch.get_loops(block)
    channels, group_inputs = _extent(sch, f), _extent(sch, rc)
    groups = int(_padded_image(sch, block).shape[3]) // group_inputs
    return channels // groups


def _padded_image(sch, block):
    """The padded copy of the image a convolution block reads (``pad_temp``), or None."""
    return next((r.source for r in sch.get(block).reads if r.source.name == "pad_temp"), None)


# A tile of the shuffled grouped convolution (``group_shuffle``): with more, the shuffled
# inputs spilled (ResNeXt-50's 4-channel groups, AVX-512: 7 x 2 vectors 1.68x faster than
# 4-lane vectors, 8 x 1 and 4 x 2 1.98x).
SHUFFLED_GROUP_ACCUMULATORS = 8


def _shuffled_groups(sch, block, options: ScheduleOptions) -> bool:
    """Whether a grouped convolution takes ``group_shuffle``'s intrinsic: groups of 4 inputs
    and 4 outputs, whole vectors of 16 output channels, and 16-lane registers (AVX2's 8 lanes
    would take a shuffle per multiply-add too, at no gain over 4-lane vectors' broadcasts)."""
    *_, f, _, _, rc = sch.get_loops(block)
    return (
        options.vectorize
        and options.vector_lanes == group_shuffle.LANES
        and _extent(sch, rc) == group_shuffle.GROUP
        and _group_outputs(sch, block) == group_shuffle.GROUP
        and _extent(sch, f) % group_shuffle.LANES == 0
    )


# A grouped convolution does a few multiply-adds per input value (8 or 4 per group: RegNet,
# ResNeXt), so its padded copy of the image costs more than its loads' bounds checks where
# registers are plenty: inlined, AVX-512's grouped convs took 10-20% less time (RegNet-Y-400MF's
# 0.70 -> 0.60 ms, RegNet-X's 0.48 -> 0.40, ResNeXt-50's 1.99 -> 1.79), AVX2's 5% more.
INLINED_GROUP_PADDING_LANES = 16


# An image's padding with fewer than 4 channels (a stem's RGB) is copied three values a pixel,
# each with its bounds check, by a scalar loop. Where the convolution does few multiply-adds
# per padded value (3 x 3, stride 2, 16 to 64 outputs: 36 to 144), the copy cost more than the
# checks inlined into the tile's loads: AVX-512, kernels alone, MnasNet's stem 1.66-1.88x
# faster, SSD's, LeViT's, GhostNet's and MobileNet v3's 1.5x or more, RegNet's and
# ShuffleNet's 1.3x, MobileNet v2's and EfficientNet's 1.14-1.3x, SqueezeNet's (64 outputs)
# 1.1x, U-Net's 3 x 3 of 16 at stride 1 (142) the same; the 7 x 7 stems (ResNet's, GoogLeNet's,
# DenseNet's: 743) ran 0.77-0.88x as fast inlined.
INLINED_STEM_PADDING = 160  # multiply-adds per padded input value, at most


def _stem_padding(sch, block) -> bool:
    """Whether ``block``'s padded image has fewer than 4 channels and few multiply-adds per
    value (``INLINED_STEM_PADDING``): every output pixel's channels times the window, over
    the padded pixels."""
    _, y, x, f, ry, rx, rc = sch.get_loops(block)
    padded = _padded_image(sch, block)
    if padded is None or _extent(sch, rc) >= RC_UNROLL:
        return False
    products = _extent(sch, y) * _extent(sch, x) * _extent(sch, f) * _extent(sch, ry) * _extent(sch, rx)
    return products <= INLINED_STEM_PADDING * int(padded.shape[1]) * int(padded.shape[2])


def _inline_producers(sch, block) -> None:
    for producer in sch.get_producers(block):
        sch.compute_inline(producer)


def _schedule_conv2d_nhwc(sch, block, options: ScheduleOptions) -> _Prefetch | None:
    """out[n, y, x, f] += pad[n, y*s + ry, x*s + rx, rc] * w[ry, rx, rc, f]: vectors along f
    (contiguous weights and outputs), one broadcast input value per pixel of the tile. A
    grouped convolution reads channel ``group(f) * I/groups + rc``: its vectors lie inside
    one group (lanes dividing the group's channels), so that index is one value per vector.
    Returns the prefetch of the next tile's weights to add (``_next_weights_prefetch``), if any."""
    n, y, x, f, ry, rx, rc = sch.get_loops(block)
    channels = _extent(sch, f)
    grouped = sch.get(block).name_hint == GROUPED_BLOCK
    shuffled = grouped and _shuffled_groups(sch, block, options)
    lanes = _vector_width(_group_outputs(sch, block) if grouped else channels, options)
    if shuffled:
        lanes = group_shuffle.LANES
    rows, columns, vectors = _pixel_tile(
        _extent(sch, y),
        _extent(sch, x),
        channels // lanes,
        options.vector_lanes,
        _ragged_tiles_stay_inside(sch, block),
        SHUFFLED_GROUP_ACCUMULATORS if shuffled else None,
        grouped,
    )
    weights = _extent(sch, ry) * _extent(sch, rx) * _extent(sch, rc) * channels
    pixels = _extent(sch, y) * _extent(sch, x) * _extent(sch, rc)
    inline = grouped and options.vector_lanes >= INLINED_GROUP_PADDING_LANES and not shuffled
    if inline or _stem_padding(sch, block):  # (the intrinsic reads a padded copy: no conditions)
        _inline_producers(sch, block)
    else:
        _parallel_padding(sch, block, options)
    write_back = _fold_epilogue(sch, block)
    y0, y1 = sch.split(y, [None, rows])
    x0, x1 = sch.split(x, [None, columns])
    # One loop per vector: vectors start at multiples of the lanes, so each one lies inside
    # a packed weight block (a vector across two blocks becomes a gather).
    f0, fv, f1 = sch.split(f, [None, vectors, lanes])
    rc0, rc1 = sch.split(rc, [None, _divisor(_extent(sch, rc), RC_UNROLL)])
    # Whichever is larger is read once, from the outer loop: weights (late layers: 2048 x
    # 512 weights, 7 x 7 pixels) or the image rows (early layers: 56 x 56 x 64 pixels).
    # Each thread then reads only its share of it.
    outer = (n, f0, y0) if weights > pixels else (n, y0, f0)
    if shuffled:  # a group's 4 inputs innermost: the intrinsic's
        sch.reorder(*outer, x0, ry, rx, rc0, y1, x1, fv, f1, rc1)
    else:
        sch.reorder(*outer, x0, ry, rx, rc0, rc1, y1, x1, fv, f1)
    sch.reverse_compute_at(write_back, x0)
    _fold_column_cut(sch, write_back)  # a padded output width (conv2d_nhwc._computed_width)
    sch.unroll(rc1)
    sch.unroll(y1)
    sch.unroll(x1)
    sch.unroll(fv)
    if options.vectorize:
        _vectorize_broadcast_consumers(sch, write_back, options)
    intrinsic = group_shuffle.group4_intrinsic() if shuffled else None
    tiles_and_rows = [_extent(sch, f0), _extent(sch, y0)]  # (before the loops are fused)
    _finish_tile(sch, block, write_back, f1 if lanes > 1 else None, outer, ry, options, intrinsic)
    if weights <= pixels or grouped or not options.vectorize:
        return None
    return _next_weights_prefetch(sch, block, tiles_and_rows, vectors * lanes)


# Weights of a channels-last convolution from which each tile prefetches the next tile's.
# HRNet-W18-small's 3x3 512 -> 1024 conv on 14 x 14 (18.9 MB of weights, 7 x 7 outputs): each
# tile of 32 output channels reads its 590 KB of weights once per output row; the first row
# waits on memory (the weights of every other layer have pushed them out of the caches by
# the next inference). Flushed from the caches before each call, 4.4-4.7 -> 3.7-3.8 ms; a line
# a step (1,152 steps a row) did better than 2, 4 or 8 (4.3, 4.6, 5.7 ms: the prefetches'
# own loads and address arithmetic).
PREFETCH_WEIGHT_BYTES = 1 << 20


@dataclass(frozen=True)
class _Prefetch:
    """Where and what ``_with_prefetch`` adds: at the top of the loop ``step_loop``'s body, a
    prefetch of the float at ``offset`` of ``weights`` (an expression of the loop variables)."""

    step_loop: tirx.Var
    weights: tirx.Buffer
    offset: tirx.PrimExpr


def _next_weights_prefetch(sch, block, tiles_and_rows: list[int], tile_channels: int) -> _Prefetch | None:
    """For a tile order of weight tiles outside rows (``tiles_and_rows``: the extents of the
    output-channel tile loop and the row loop inside it), weights packed [F/16, RY, RX, RC,
    16] (``conv2d_nhwc``) and tiles of whole packs: a prefetch of one 64-byte line of the next
    tile's weights per innermost reduction step, the step's number within the tile choosing
    the line, so that the next tile's lines are requested while this tile computes."""
    weights = next((r.source for r in sch.get(block).reads if len(r.source.shape) == 5), None)
    if (
        weights is None
        or tile_channels % PACK
        or int(weights.shape[4]) != PACK
        or not _worth_prefetching(weights)
    ):
        return None
    tiles, rows = tiles_and_rows
    loops = sch.get_loops(block)
    # fused (image, tile, row) or the three apart; then columns, ry, rx, the reduction's outer loop
    outer_count = 1 if len(loops) == 10 else 3
    if len(loops) != outer_count + 9:
        return None
    var = [sch.get(loop).loop_var for loop in loops[: outer_count + 4]]
    extents = [_extent(sch, loop) for loop in loops[outer_count : outer_count + 4]]
    if outer_count == 1:
        tile, row = var[0] // rows % tiles, var[0] % rows
    else:
        tile, row = var[1], var[2]
    step = row
    for v, extent in zip(var[outer_count:], extents, strict=True):
        step = step * extent + v
    tile_floats = tile_channels * int(weights.shape[1]) * int(weights.shape[2]) * int(weights.shape[3])
    return _next_block_prefetch(var[-1], weights, tile, step, tile_floats)


LINE_FLOATS = 16  # float32 values in a 64-byte cache line


def _next_block_prefetch(step_loop, weights, block, step, block_floats: int) -> _Prefetch:
    """The prefetch, at step ``step`` of block ``block`` of ``weights`` (blocks of
    ``block_floats`` floats one after another), of line ``step`` of the next block: the last
    line for steps beyond its lines, the weights' last line for the last block's next."""
    from tvm import tirx

    line = LINE_FLOATS
    offset = tirx.min(
        (block + 1) * block_floats + tirx.min(step, block_floats // line - 1) * line,
        tirx.const(_floats(weights) - line, str(step.ty)),
    )
    return _Prefetch(step_loop, weights, offset)


def _next_position_prefetch(sch, block, positions: int) -> _Prefetch | None:
    """Winograd's product (``_schedule_matmul`` on ``r2c_winograd_product``), its loops the
    16 positions, row and column tiles fused, then the reduction's: while one position's
    matmul runs, a line a reduction step of the next position's transformed filter (ResNet-50's
    256-channel layers: 256 KB a position, read once per row tile)."""
    weights = sch.get(block).reads[-1].source
    if not _worth_prefetching(weights) or int(weights.shape[0]) * int(weights.shape[1]) != positions:
        return None  # (U: [4, 4, K/16, C, 16])
    loops = sch.get_loops(block)
    if len(loops) != 6:  # (positions, row tiles, column tiles) fused, the reduction's 2, the tile's 3
        return None
    fused, reduction = (sch.get(loop).loop_var for loop in loops[:2])
    per_position = _extent(sch, loops[0]) // positions
    if per_position * positions != _extent(sch, loops[0]):
        return None
    step = fused % per_position * _extent(sch, loops[1]) + reduction
    return _next_block_prefetch(
        reduction, weights, fused // per_position, step, _floats(weights) // positions
    )


def _worth_prefetching(weights) -> bool:
    return str(weights.dtype) == "float32" and _floats(weights) * 4 >= PREFETCH_WEIGHT_BYTES


def _floats(weights) -> int:
    return math.prod(int(d) for d in weights.shape)


def _with_prefetch(func: PrimFunc, prefetch: _Prefetch) -> PrimFunc:
    """``func`` with ``prefetch`` added (LLVM's ``llvm.prefetch``: read, kept in the outer
    caches, data). The loop is found by its variable, which scheduling keeps."""
    import tvm_ffi
    from tvm import tirx

    pointer = tirx.call_intrin(
        "handle",
        "tirx.tvm_access_ptr",
        tirx.type_annotation(prefetch.weights.dtype),
        prefetch.weights.data,
        prefetch.offset,
        LINE_FLOATS,
        1,
    )
    read, outer_caches, data = tirx.const(0), tirx.const(2), tirx.const(1)
    call = tirx.Evaluate(tirx.call_llvm_intrin("void", "llvm.prefetch.p0", pointer, read, outer_caches, data))
    found = []

    def add(loop):
        if not loop.loop_var.same_as(prefetch.step_loop):
            return loop
        found.append(loop)
        body = tirx.SeqStmt([call, loop.body])
        return tirx.For(
            loop.loop_var, loop.min, loop.extent, loop.kind, body, loop.thread_binding, loop.annotations
        )

    added = tvm_ffi.structural_map(func, [(tirx.For, add)])
    return added if len(found) == 1 else func


def _schedule_uint8_conv2d(sch, block, options: ScheduleOptions) -> None:
    """``_uint8_conv2d_nhwc``: a tile of pixels x 16-channel blocks as the float32 one, the
    4 input channels of one dot product innermost, tensorized with the set's integer dot
    product (``int8_dot``): each (pixel, block) of the tile is one ``vpdpbusd`` (VNNI), four
    ``vpmaddwd`` (AVX2) or four ``sdot``/``usdot`` (AArch64) per 4 input channels. VNNI:
    ResNet-18's 3x3 layers 4.0-4.4x float32's time, 13-15x the widening int32 kernel's
    (benchmarks/int8_conv.py, AVX-512, one thread). Without one (the C set, ARMv8.0) the 4
    products are widened multiply-adds on 16 int32 lanes."""
    from relay2cmake.lower.int8_dot import PAIRWISE, int8_dot_intrinsic

    pairwise = options.int8_dot in PAIRWISE
    n, y, x, f, ry, rx, rco, rci = sch.get_loops(block)
    vectors = _extent(sch, f) // PACK
    # (pixel, block)s in registers: each holds 16 int32 lanes, twice that with partial sums
    lanes = options.vector_lanes
    budget = (
        ACCUMULATORS.get(lanes, 12) * lanes // (PACK * (2 if pairwise else 1)) if options.vectorize else None
    )
    rows, columns, tile_vectors = _pixel_tile(_extent(sch, y), _extent(sch, x), vectors, 16, False, budget)
    _parallel_padding(sch, block, options)
    write_back = _fold_epilogue(sch, block)
    tiled, sums = block, None
    if pairwise:
        # inputs 0+1 and 2+3 summed apart (an extra axis of the tile), added in ``sums``
        rch, rcl = sch.split(rci, [2, 2])
        tiled, sums = sch.rfactor(rch, 4), block
        n, y, x, f, ry, rx, rco, rch, rcl = sch.get_loops(tiled)
        inner: tuple = (rch, rcl)
    else:
        inner = (rci,)
    y0, y1 = sch.split(y, [None, rows])
    x0, x1 = sch.split(x, [None, columns])
    f0, fv, f1 = sch.split(f, [None, tile_vectors, PACK])
    outer = (n, y0, f0)
    sch.reorder(*outer, x0, ry, rx, rco, y1, x1, fv, f1, *inner)
    if sums is not None:  # under x0: the half, the tile's pixels, its channels
        sch.reverse_compute_at(sums, x0)
        half = sch.get_loops(sums)[len(outer) + 1]
    sch.reverse_compute_at(write_back, x0)
    _fold_column_cut(sch, write_back)  # padded output channels (conv2d_nhwc._uint8_conv2d_nhwc)
    sch.unroll(y1)
    sch.unroll(x1)
    sch.unroll(fv)
    if not options.int8_dot:
        sch.unroll(rci)
        sch.vectorize(f1)
    _vectorize_register_wide(sch, sch.get_loops(write_back)[-1], PACK)
    sch.vectorize(sch.get_loops(write_back)[-1])
    if options.parallel:
        sch.parallel(sch.fuse(*outer))
    init = sch.decompose_reduction(tiled, ry)
    if options.int8_dot:  # after decompose_reduction: the intrinsic has no init
        sch.tensorize(f1, int8_dot_intrinsic(options.int8_dot))
    sch.vectorize(sch.get_loops(init)[-1])
    if sums is not None:  # after the parallel loop: the sums' update then has no init
        sch.vectorize(sch.get_loops(sch.decompose_reduction(sums, half))[-1])
        sch.unroll(half)


# A depthwise tile loads one input vector per multiply-add (nothing to broadcast), so it also
# needs registers for those and for its weight vectors: fewer accumulators than a regular
# convolution's tile (AVX2 with 12 spilled: 19 against 46-68 GFLOPS with 8, measured).
DEPTHWISE_ACCUMULATORS = {4: 16, 8: 8, 16: 12}


def _depthwise_tile(width: int, vectors: int, lanes: int) -> tuple[int, int]:
    """(output columns, vectors of channels) of a depthwise tile: two columns or more where
    the image has them (a one-column tile loads a weight vector for every multiply-add: the
    7 x 7 images of MobileNet's, EfficientNet's and ConvNeXt's last stages took 12 vectors
    of one column, 1.3-3.2x slower than 7 columns of one vector), then the most accumulators
    within budget, then the most columns (each weight vector is reused once per column)."""
    budget = DEPTHWISE_ACCUMULATORS.get(lanes, 8)
    best = (0, 0, 0), (1, 1)
    for v in (d for d in range(1, vectors + 1) if vectors % d == 0):
        for columns in (d for d in range(1, width + 1) if width % d == 0):
            key = (min(columns, 2), columns * v, columns)
            if columns * v <= budget and key > best[0]:
                best = key, (columns, v)
    return best[1]


def _schedule_depthwise_nhwc(sch, block, options: ScheduleOptions) -> None:
    """out[n, y, x, c] += pad[n, y*s + ry, x*s + rx, c] * w[ry, rx, 0, c]: vectors along c,
    the kernel window unrolled over a few pixels."""
    n, y, x, c, ry, rx = sch.get_loops(block)
    channels = _extent(sch, c)
    lanes = _vector_width(channels, options)
    whole_vectors = channels // lanes
    narrow = lanes < options.vector_lanes // 2 and channels > options.vector_lanes
    half = lanes == options.vector_lanes // 2 and channels > 2 * options.vector_lanes
    predicated = options.vectorize and (narrow or half)
    if predicated:
        # Channels that only narrow vectors divide (ShuffleNet's 58 and 116, 29 x 2^k: scalar
        # and 4-lane code, 13 and 28 GFLOPS on AVX-512): full-width vectors, the last one
        # predicated (35 and 45 GFLOPS); likely_vector_tails has LoopPartition peel it, so
        # the others carry no condition. Channels that half-width vectors divide, from two
        # and a half full ones (40, 72, 120, 168, 184, 200, 232): the same, 1.1-1.5x faster
        # on AVX-512; 24 stays in vectors of 8 (a predicated 16 + 8 was slower).
        lanes = options.vector_lanes
        whole_vectors = -(-channels // lanes)
    elif lanes == 1 and 4 < channels < options.vector_lanes and options.vectorize:
        # Fewer channels than a register holds, none of 4 or 8 (GhostNet's 6: scalar code, 5
        # GFLOPS): one predicated vector of the next power of two.
        lanes = 1 << (channels - 1).bit_length()
        whole_vectors, predicated = 1, True
    columns, vectors = _depthwise_tile(_extent(sch, x), whole_vectors, options.vector_lanes)
    # The padding is inlined into the loads: with 9 multiply-adds per input vector, a padded
    # copy of the image cost more than the convolution (MobileNet's layers, AVX-512: 1.4-2.1x
    # faster inlined; a regular conv is 3-8% slower inlined and keeps its copy).
    _inline_producers(sch, block)
    write_back = _fold_epilogue(sch, block)
    x0, x1 = sch.split(x, [None, columns])
    # One loop per vector, unrolled: a vectorized loop of 3, 5 or 6 vectors became one LLVM
    # vector of 24-48 lanes, which LLVM lowered 30x slower (1.5 against 60 GFLOPS measured).
    c0, cv, c1 = sch.split(c, [None, vectors, lanes])
    sch.reorder(n, y, c0, x0, ry, rx, x1, cv, c1)
    sch.reverse_compute_at(write_back, x0)
    _unroll_window(sch, [ry, rx])
    sch.unroll(x1)
    sch.unroll(cv)
    # The channel tiles stay a loop of their own when the last is predicated: fused into the
    # parallel loop, LoopPartition could not peel it and every vector kept the condition
    # (gathers: 2 GFLOPS).
    parallel = (n, y) if predicated else (n, y, c0)
    _finish_tile(sch, block, write_back, c1 if lanes > 1 else None, parallel, ry, options)


POOL_BLOCKS = ("pool_sum", "pool_max")  # TVM's pooling reductions (topi's pool2d, pool1d)


def _schedule_pool_rows(sch, block, options: ScheduleOptions) -> bool:
    """out[n, c, y, x] = sum or max of in[n, c, y*s + ry, x*s + rx] over the window, channels
    first (PoolFormer's 3 x 3 average pooling, left NCHW by its group norms): TVM's default
    was a scalar loop that divided every output by its window's size (1-3 GB/s). Vectors
    along the output's row, the window unrolled around them in registers, the padded image
    made per channel and the epilogue (average, PoolFormer's ``pool(x) - x`` and layer
    scale) folded into the write-back; images in parallel. Rows of 7 (7 x 7 images) take one
    predicated vector of 8 where the registers have 16 lanes (AVX-512 masks them natively:
    PoolFormer's last stage 0.018 ms against 0.164 in TVM's loop); with 8 or 4 lanes, rows
    under 8 stay TVM's (AVX2's masked loads: 0.053 against 0.031 ms) and this returns False."""
    *spatial, x = sch.get_loops(block)[: len(_kinds(sch, block).rstrip("R"))]
    window = sch.get_loops(block)[len(spatial) + 1 :]
    width = _extent(sch, x)
    if width < 8 and options.vector_lanes < 16:
        return False
    lanes = options.vector_lanes
    while lanes > 4 and lanes // 2 >= width:  # a row of 7 or 14 fills half a vector or less
        lanes //= 2
    planes = spatial[: len(spatial) - len(window) + 1]  # the loops around one image
    write_back = _fold_epilogue(sch, block)
    x0, x1 = sch.split(x, [None, lanes])
    sch.reorder(*spatial, x0, *window, x1)
    sch.reverse_compute_at(write_back, x0)
    _unroll_window(sch, window)
    sch.vectorize(x1)
    _vectorize_register_wide(sch, sch.get_loops(write_back)[-1], lanes)
    plane = sch.fuse(*planes)
    if options.parallel:
        sch.parallel(plane)
    # The padded image is made per channel, where it stays in L1: read inline, every load
    # of the window was conditional (slower than TVM's scalar loop); padded once for the
    # whole tensor, an extra pass over memory.
    for producer in sch.get_producers(block):
        sch.compute_at(producer, plane)
        sch.vectorize(sch.get_loops(producer)[-1])
    init = sch.decompose_reduction(block, window[0])
    sch.vectorize(sch.get_loops(init)[-1])
    return True


def _schedule_pool_innermost(sch, block, options: ScheduleOptions) -> bool:
    """A sum or max whose window runs along the innermost axis only (LRN, which TVM's ONNX
    importer makes a 5-wide average pool over the channels of channels-last data): TVM's
    default was three scalar passes over the image (padding, window sums, division by each
    window's size; SqueezeNet's 111 x 111 x 64: 0.21 ms, 29 GB/s). Per pixel: every vector
    of channels sums the window from the input at shifted offsets, channel vectors and window
    unrolled, so that only the first and last vectors keep the padding's condition (a stack
    array of the padded channels stalled each shifted load on store forwarding: 0.18 ms; read
    inline, 0.115 ms); the epilogue folded into the write-back; rows in parallel. False when
    the window also spans another axis or the channels are fewer than a vector."""

    kinds = _kinds(sch, block)
    spatial = len(kinds.rstrip("R"))
    loops = sch.get_loops(block)
    if len(loops) != len(kinds) or "R" in kinds[:spatial] or spatial < 2:
        return False
    window = [loop for loop in loops[spatial:] if _extent(sch, loop) > 1]
    stmt = sch.get(block)
    sources = [r for r in stmt.reads if not r.source.same_as(stmt.writes[0].source)]
    if len(window) != 1 or len(sources) != 1 or not options.vectorize:
        return False
    reduce_var = stmt.iter_vars[spatial + list(loops[spatial:]).index(window[0])].var
    source = sources[0]

    *outer, last = source.region
    if any(_uses(r.min, reduce_var) for r in outer) or not _uses(last.min, reduce_var):
        return False
    channels = _extent(sch, loops[spatial - 1])
    lanes = options.vector_lanes
    while lanes > 4 and channels % lanes != 0:
        lanes //= 2
    if channels % lanes != 0:
        return False
    write_back = _fold_epilogue(sch, block)
    *pixel, c = sch.get_loops(block)[:spatial]
    c0, c1 = sch.split(c, [None, lanes])
    reduction_loops = sch.get_loops(block)[spatial + 1 :]
    sch.reorder(*pixel, c0, *reduction_loops, c1)
    sch.reverse_compute_at(write_back, pixel[-1])
    for producer in sch.get_producers(block):
        sch.compute_inline(producer)
    sch.unroll(c0)
    _unroll_window(sch, window)
    sch.vectorize(c1)
    _vectorize_register_wide(sch, sch.get_loops(write_back)[-1], lanes)
    if options.parallel:
        sch.parallel(sch.fuse(*pixel[:-1]))
    init = sch.decompose_reduction(block, reduction_loops[0])
    sch.vectorize(sch.get_loops(init)[-1])
    return True


def _schedule_winograd_transforms(sch, options: ScheduleOptions) -> bool:
    """Winograd's input and output transforms (``winograd.py``): per tile, every position
    of the tile unrolled, so that the Select of each position's coefficients folds to its
    few nonzero terms; vectors along the channels. The input transform reads the padding
    inline; the output transform computes the convolution's fused epilogue in place.
    Returns whether the function was one of them."""
    blocks = {sch.get(b).name_hint: b for b in sch.get_child_blocks(sch.get_sblock("root"))}
    if INPUT_BLOCK in blocks:
        block = blocks[INPUT_BLOCK]
        for producer in sch.get_producers(block):
            sch.compute_inline(producer)
        a, b, *tiles, c = sch.get_loops(block)  # tiles: (tile,) or (image, tile of the image)
        width = _vector_width(_extent(sch, c), options)
        c0, vector = sch.split(c, [None, width])
        sch.reorder(*tiles, c0, a, b, vector)
        outer: tuple = tuple(tiles)
        positions = (a, b)
    elif OUTPUT_BLOCK in blocks:
        block = blocks[OUTPUT_BLOCK]
        _inline_intermediates(sch, block)
        while consumers := sch.get_consumers(block):
            sch.reverse_compute_inline(consumers[0])
        n, y, x, k = sch.get_loops(block)
        width = _vector_width(_extent(sch, k), options)
        y0, y1 = sch.split(y, [None, OUTPUT_TILE])
        x0, x1 = sch.split(x, [None, OUTPUT_TILE])
        k0, vector = sch.split(k, [None, width])
        sch.reorder(n, y0, x0, k0, y1, x1, vector)
        outer, positions = (n, y0), (y1, x1)
    else:
        return False
    for loop in positions:
        sch.unroll(loop)
    if width > 1:
        sch.vectorize(vector)
    # A small transform runs on the caller alone, as a small injective kernel does: NFNet-L0's
    # 14 x 14 x 64 groups took 6.2 us a call on one thread and 11.2 us split over two.
    if options.parallel and _static_iterations(sch, block) >= PARALLEL_ELEMENTS:
        sch.parallel(sch.fuse(*outer))
    return True


def _static_iterations(sch, block) -> int:
    """``block``'s iterations, an extent known only at run time counted as PARALLEL_ELEMENTS."""
    from tvm import tirx

    extents = [iv.dom.extent for iv in sch.get(block).iter_vars]
    return math.prod(int(e) if isinstance(e, tirx.IntImm) else PARALLEL_ELEMENTS for e in extents)


# Last blocks of row-wise functions: every stage of one row is computed together.
ROW_OUTPUTS = ("T_softmax_norm", "T_layer_norm")


def _partial_reductions(sch, block, lanes: int):
    """A row's sum or maximum split into ``lanes`` partial results (one vector), combined
    at the end: a serial chain would wait on the adder's latency at every element. Returns
    the partial block, or None when the row does not divide into vectors."""
    loop = sch.get_loops(block)[-1]
    if _extent(sch, loop) % lanes != 0:
        return None
    _, lane = sch.split(loop, [None, lanes])
    try:
        return sch.rfactor(lane, factor_axis=0)
    except Exception:  # a maximum starting at -inf matches none of TVM's reducers: serial
        return None


def _symbolic_reduction(sch) -> bool:
    """Whether a block reduces over an extent known only at run time. The row schedules'
    partial sums (rfactor) over such an extent, tiled for its largest value, computed wrong
    rows at others (a softmax over 7 of at most 64 tokens); matmul and conv tiles, whose
    predicates TVM places itself, stay right and are kept."""
    from tvm import tirx

    for block in sch.get_child_blocks(sch.get_sblock("root")):
        for iv in sch.get(block).iter_vars:
            if iv.iter_type == tirx.IterVar.CommReduce and not hasattr(iv.dom.extent, "value"):
                return True
    return False


def _schedule_rows(sch, options: ScheduleOptions, any_output: bool = False) -> bool:
    """Softmax and layer norm: the row's reductions and elementwise stages computed under
    the output's row loop (the row stays in L1), vectorized, rows in parallel. False when
    the function is not one of these. ``any_output``: whatever the output block's name, and
    the output may be a row's reduction itself (``_schedule_long_rows``). A row whose
    length is chosen at run time keeps its stages together and its rows in parallel, but no
    partial sums (see ``_symbolic_reduction``); LLVM vectorizes its plain loops itself
    (attention's softmax over 512 tokens, AVX-512: 3.56 -> 2.65 ms; 1.42 at a fixed length)."""
    symbolic = _symbolic_reduction(sch)
    root = sch.get_sblock("root")
    output = sch.get_child_blocks(root)[-1]
    # The row's output, or an elementwise stage after it (a mask's ``where`` after softmax):
    # inlined instead (``_schedule_long_rows``), each exponential was computed twice.
    names = {sch.get(b).name_hint for b in sch.get_child_blocks(root)}
    if not any_output and (not names.intersection(ROW_OUTPUTS) or "R" in _kinds(sch, output)):
        return False
    *rows, _ = sch.get_loops(output)
    if not rows:
        return False
    _inline_single_use_stages(sch)
    output = sch.get_child_blocks(root)[-1]
    *rows, _ = sch.get_loops(output)
    # A reduction over a row that the register's lanes do not divide gets half or a quarter of
    # them (MobileViT's layer norm over 196: 4 lanes; serial chains before, 2.4 ns an element);
    # softmax reduces such a row as its whole 16s and a tail (fast_math._softmax).
    lanes = 1 if symbolic or not options.vectorize else options.vector_lanes
    partials = []
    if lanes > 1:
        for block in _reduction_blocks(sch):
            width = _vector_width(_extent(sch, sch.get_loops(block)[-1]), options)
            partial = _partial_reductions(sch, block, width) if width > 1 else None
            if partial is not None:
                partials += [partial, *_halving_combination(sch, block, width)]
    blocks = sch.get_child_blocks(root)
    together = _rows_together(sch, output, rows[-1], lanes)
    if together > 1:
        outer, _ = sch.split(rows[-1], [None, together])
        rows = [*rows[:-1], outer]
    for block in reversed(blocks[:-1]):
        sch.compute_at(block, rows[-1])
    row_count = _iterations_of(sch, rows)
    if any(_recomputed(sch, block, len(rows), row_count) for block in blocks[:-1]):
        # A reduction along another axis than the output's last (CoaT's softmax over the
        # 3137 tokens of [1, 8, 3137, 8]) needs all of its values under every row: it was
        # computed again for each, quadratic (1.25 s a call); the schedules below take it.
        return False
    if lanes > 1:
        for block in blocks:
            loops = sch.get_loops(block)
            if len(loops) <= len(rows) + (together > 1):
                continue  # a per-row scalar stage (a row's mean, a combined sum)
            if any(sch.get(block).same_as(sch.get(p)) for p in partials):
                # lane, then row / lanes (unless the row is one vector) and the rows taken
                # together: the lanes go innermost, the rows outermost
                lane, *others = loops[len(rows) :]
                if others:
                    sch.reorder(*reversed(others), lane)
                if together > 1:  # each row's partial sums contiguous: [row, lane], not [lane, row]
                    sch.transform_layout(block, ("write", 0), lambda lane, *rest: (*rest, lane))
                sch.vectorize(lane)
            elif "R" not in _kinds(sch, block) and _extent(sch, loops[-1]) >= lanes:
                # Whole registers; a row they do not divide ends in a predicated one, which
                # likely_vector_tails has LoopPartition peel. (Narrower vectors lost to LLVM's
                # own; LLVM left the exponentials of a 197-long row scalar.)
                sch.vectorize(sch.split(loops[-1], [None, lanes])[1])
    if options.parallel:
        sch.parallel(sch.fuse(*rows))
    return True


def _same_iterations(sch, block, other) -> bool:
    """Whether ``block`` and ``other`` run as many iterations (run-time extents included)."""
    import tvm

    def count(b):
        product = None
        for iv in sch.get(b).iter_vars:
            product = iv.dom.extent if product is None else product * iv.dom.extent
        return product

    a, b = count(block), count(other)
    return a is not None and b is not None and tvm.sym.Analyzer().can_prove_equal(a, b)


def _inline_single_use_stages(sch) -> None:
    """Each elementwise stage of a row kernel that one elementwise stage alone reads inlined
    into it: ESM's softmax then NaN check made seven passes over each row (the maximum, the
    difference from it, the exponentials, their sum, the normalized row, a NaN flag per
    element, the ``where``), each through a row buffer; the difference is now computed in the
    exponentials' pass (0.046 -> 0.040 ms). A stage read by a reduction (the exponentials,
    read by their sum and the output) stays, and so does one computed once a row (``1 / sum``)
    or one of flags (``isnan``)."""
    root = sch.get_sblock("root")
    inlined = True
    while inlined:
        inlined = False
        for block in reversed(sch.get_child_blocks(root)[:-1]):
            consumers = sch.get_consumers(block)
            if "R" in _kinds(sch, block) or len(consumers) != 1 or "R" in _kinds(sch, consumers[0]):
                continue
            if not _same_iterations(sch, block, consumers[0]):
                continue  # a row's scalar (1 / sum) stays once a row, not once an element
            if str(sch.get(block).writes[0].source.dtype) == "bool":
                continue  # (ESM's NaN flags inlined into the ``where``: 0.046 -> 0.053 ms)
            try:
                sch.compute_inline(block)
            except Exception:  # (a stage TVM cannot inline stays a pass of its own)
                continue
            inlined = True
            break


def _halving_combination(sch, block, lanes: int) -> list:
    """A row's ``lanes`` partial results combined by halving (16 -> 8 -> 4 -> 2 -> 1):
    combined one after another, LLVM kept them a serial chain of scalar maxima or sums, 16
    latencies a row."""
    halves = []
    while lanes > 2:
        lanes //= 2
        _, half = sch.split(sch.get_loops(block)[-1], [2, lanes])
        halves.append(sch.rfactor(half, factor_axis=0))
    return halves


SHORT_ROW = 1024  # elements up to which a row's stages are computed for several rows together
ROWS_TOGETHER = 4


def _rows_together(sch, output, row_loop, lanes: int) -> int:
    """How many short rows each stage computes in turn: a layer norm over 96 channels
    (ConvNeXt's) waited on the latency of one row's sum, mean, variance and rsqrt after
    another; four rows at once overlap them."""
    row = _extent(sch, sch.get_loops(output)[-1])
    count = _extent(sch, row_loop)
    if lanes == 1 or row > SHORT_ROW or count % ROWS_TOGETHER or count < 2 * ROWS_TOGETHER:
        return 1
    if sch.get(output).name_hint == "T_softmax_norm" or _is_softmax(sch):
        return 1  # (BERT's masked softmax over 128: 10 -> 6 GB/s taken four rows at a time)
    return ROWS_TOGETHER


def _is_softmax(sch) -> bool:
    """Whether a kernel computes exponentials (a softmax, fused or our own TE's)."""
    return "exp" in str(sch.mod["main"])


def _schedule_long_rows(sch, options: ScheduleOptions) -> bool:
    """Normalizations and sums TVM leaves as chains of blocks, each reducing over its last
    axis only: a group norm of one group (PoolFormer's, over a [1, 1, C*H*W] view: a float64
    mean, then variance and scaling as eight blocks) or a long float64 sum. Unscheduled, each
    reduction was one scalar chain waiting on the adder (2.6 GB/s). The elementwise stages
    are inlined into their consumers, then the rows schedule applies: partial sums in
    vectors, every stage under the row loop. False when a reduction reduces more than its
    last axis."""
    if _symbolic_reduction(sch):
        return False
    reductions = _reduction_blocks(sch)
    if not options.vectorize or not reductions:
        return False
    for block in reductions:
        kinds = _kinds(sch, block)
        if not kinds.endswith("SR") or kinds.count("R") != 1 or len(sch.get_loops(block)) != len(kinds):
            return False
    root = sch.get_sblock("root")
    for block in sch.get_child_blocks(root)[:-1]:
        if "R" not in _kinds(sch, block):
            try:
                sch.compute_inline(block)
            except Exception:  # read by a reduction's init or not elementwise: stays a stage
                pass
    if any(_ragged_row(_extent(sch, sch.get_loops(block)[-1]), options) for block in reductions):
        return _schedule_ragged_rows(sch, options)
    return _schedule_rows(sch, options, any_output=True)


def _ragged_row(extent: int, options: ScheduleOptions) -> bool:
    """A row that no vector width divides, long enough for vectors of partial results."""
    return _vector_width(extent, options) == 1 and extent >= RAGGED_ROW * options.vector_lanes


def _schedule_ragged_rows(sch, options: ScheduleOptions) -> bool:
    """The long rows schedule for rows that no vector width divides (Wav2Vec2's group norm over
    3199 samples a channel: a mean, then a variance that reads it; one scalar chain each, 1.7
    GB/s). Each reduction into a vector of partial results a row, its last vector predicated
    (likely_vector_tails has LoopPartition peel it), combined by halving; every stage over all
    the rows in turn, not under one row loop: compute_at drops a block's predicate, and the
    partial results then read past the row. Rows in parallel, stage by stage."""
    lanes = options.vector_lanes
    partials = []
    for block in _reduction_blocks(sch):
        *rows, k = sch.get_loops(block)
        ragged = _extent(sch, k) % lanes != 0
        partial = _partials_in_lanes(sch, block, lanes)
        for half in _halving_combination(sch, block, lanes):  # (loops: rows, pair, lane)
            sch.vectorize(sch.get_loops(half)[-1])
        if options.parallel and rows:
            loops = sch.get_loops(partial)[: len(rows)]
            sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])
        if ragged:
            partials.append(partial)
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        if "R" not in _kinds(sch, block) and loops and _extent(sch, loops[-1]) >= lanes:
            sch.vectorize(sch.split(loops[-1], [None, lanes])[1])
    func = sch.mod["main"]
    for partial in partials:
        if not _predicated(func, sch.get(partial).writes[0].source):
            raise RuntimeError("the partial results' last vector lost its predicate")
    return True


WHOLE_REDUCTION_VECTORS = 4  # partial results of a whole-tensor reduction, in registers


def _single_reduction(sch, options: ScheduleOptions):
    """(block, kinds, loops) of a vectorized kernel's only reduction, whose loops match its
    iterators and whose extents are static; None otherwise."""
    if not options.vectorize or _symbolic_reduction(sch):
        return None
    reductions = _reduction_blocks(sch)
    if len(reductions) != 1:
        return None
    block = reductions[0]
    kinds = _kinds(sch, block)
    loops = sch.get_loops(block)
    return (block, kinds, loops) if len(loops) == len(kinds) else None


def _schedule_whole_reduction(sch, options: ScheduleOptions) -> bool:
    """A reduction of a whole tensor to one value (dynamic quantization's minimum and maximum
    of each activation, a ReduceSum without axes): unscheduled, one scalar chain over every
    element (a 2-layer BERT quantized with ``quantize_dynamic`` spent 2.6 of its 2.9 ms of
    kernel time in twelve of them). The elements, as one loop, are reduced into a few
    vectors of partial results (``rfactor``), which are reduced last. Elementwise producers
    are read inline. False when the function is not one such reduction of a static size."""
    found = _single_reduction(sch, options)
    if found is None:
        return False
    block, kinds, loops = found
    if set(kinds) != {"R"}:
        return False
    _inline_elementwise_producers(sch, block)
    elements = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    width = options.vector_lanes * WHOLE_REDUCTION_VECTORS
    width = (
        width
        if _extent(sch, elements) % width == 0
        else _divisor(_extent(sch, elements), options.vector_lanes)
    )
    if width < 4:
        return False
    _, lanes = sch.split(elements, [None, width])
    partial = sch.rfactor(lanes, 0)
    outer, lanes = sch.get_loops(partial)
    sch.reorder(outer, lanes)
    sch.vectorize(lanes)  # before decompose_reduction: an update without init is no reduction
    init = sch.decompose_reduction(partial, outer)
    sch.vectorize(sch.get_loops(init)[-1])
    return True


RAGGED_ROW = 2  # vectors a row must hold to be reduced in partial results


def _schedule_last_axis_reduction(sch, options: ScheduleOptions) -> bool:
    """A maximum, minimum, sum or arg-reduction over the last axis alone, and the stages after
    it: TVM left one scalar chain a row (SSD's best score of 90 classes for each of 3234 boxes:
    0.108 ms, 11 GB/s), and the row schedules take only rows that vectors divide. Each row is
    reduced into a vector of partial results (``rfactor``), the last vector predicated where
    the row is not whole vectors (likely_vector_tails has LoopPartition peel it), then the
    vector into the result under the same row loop; rows in parallel. Elementwise producers
    are read inline. False when the function is not one such reduction, its row holds fewer
    than two vectors, or (under outer axes) vectors divide it: the rows schedule takes those."""
    found = _single_reduction(sch, options)
    if found is None:
        return False
    block, kinds, loops = found
    if not kinds.endswith("SR") or kinds.count("R") != 1:
        return False
    if _is_product(sch.get(block)):
        return False  # a matmul's
    bits = max(int(region.source.dtype.bits) for region in sch.get(block).reads)
    lanes = options.vector_lanes * 32 // max(bits, 32)
    extent = _extent(sch, loops[-1])
    if len(kinds) > 2 and _vector_width(extent, options) > 1:
        return False  # rows that vectors divide, under outer axes: the rows schedule's
    while extent % lanes == 1 and extent >= RAGGED_ROW * lanes:
        # A last vector of one lane: LoopPartition peeled it into a loop of one iteration,
        # whose index it replaced with an int32 constant among int64 indices (argmax's 37
        # classes in vectors of 4 float64 could not be built); vectors twice as wide.
        lanes *= 2
    if extent < RAGGED_ROW * lanes:
        return False
    _inline_elementwise_producers(sch, block)
    *rows, _ = sch.get_loops(block)
    partial = _partials_in_lanes(sch, block, lanes)
    row = sch.get_loops(partial)[len(rows) - 1]
    halves = _halving_combination(sch, block, lanes)
    later = [halves[0] if halves else block]  # the others follow as its consumers
    while later:
        stage = later.pop(0)
        sch.reverse_compute_at(stage, row)
        later.extend(sch.get_consumers(stage))
    for half in halves:  # (loops: lane, pair)
        lane, pair = sch.get_loops(half)[-2:]
        sch.reorder(pair, lane)
        sch.vectorize(lane)
    if options.parallel and len(rows) > 0:
        sch.parallel(sch.fuse(*sch.get_loops(partial)[: len(rows)]) if len(rows) > 1 else row)
    if extent % lanes and not _predicated(sch.mod["main"], sch.get(partial).writes[0].source):
        # (compute_at drops a block's predicate: a row read past its end.)
        raise RuntimeError("the partial results' last vector lost its predicate")
    return True


def _partials_in_lanes(sch, block, lanes: int):
    """The block's last-axis reduction into ``lanes`` partial results a row, vectorized (the
    last vector predicated when the row is not whole vectors); returns the partial block."""
    _, lane = sch.split(sch.get_loops(block)[-1], [None, lanes])
    # the lanes last in the partial results: one vector store per row
    partial = sch.rfactor(lane, factor_axis=len(sch.get(block).writes[0].region))
    sch.vectorize(sch.get_loops(partial)[-1])
    return partial


def _block_analyzer(block):
    """An arithmetic analyzer that knows the ranges of ``block``'s iterators."""
    import tvm

    analyzer = tvm.sym.Analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    return analyzer


def _predicated(func, written) -> bool:
    """Whether the block of ``func`` that writes the buffer ``written`` runs under a predicate
    (found by its buffer: the halving combination's blocks take the partial block's name)."""
    from tvm import s_tir, tirx

    def writes(realize) -> bool:
        return any(region.source.same_as(written) for region in realize.block.writes)

    realizes = _collect(func, s_tir.SBlockRealize, writes)
    return bool(realizes) and all(not isinstance(r.predicate, tirx.IntImm) for r in realizes)


def _schedule_outer_axis_reduction(sch, options: ScheduleOptions) -> bool:
    """A sum, mean or maximum over outer axes of channels-last data (squeeze-excite's and
    global pooling's mean over H x W): in loop order each output channel walked the image
    with a stride of C floats (2 GB/s). The reduction loops go outside the channel loop,
    whose vectors (up to four) accumulate in registers; producers such as float64's cast are
    read inline, and elementwise consumers (an average pool's division by each window's size)
    folded into the write-back. False when the function is not one reduction whose innermost
    axis is kept."""
    if _symbolic_reduction(sch):
        return False
    from tvm import tirx

    reductions = _reduction_blocks(sch)
    if not options.vectorize or len(reductions) != 1:
        return False
    block = reductions[0]
    if sch.get(block).name_hint in (CONV_BLOCK, DEPTHWISE_BLOCK, GROUPED_BLOCK, MATMUL_BLOCK):
        return False  # their own schedules (a depthwise conv also keeps its innermost axis)
    kinds = _kinds(sch, block)
    loops = sch.get_loops(block)
    spatial = kinds.rstrip("R")
    if len(loops) != len(kinds) or "R" in spatial or spatial == kinds or len(spatial) < 1:
        return False
    stmt = sch.get(block)
    channel = stmt.iter_vars[len(spatial) - 1].var
    for region in stmt.reads:
        last = region.region[-1].min
        if not (isinstance(last, tirx.Var) and last.same_as(channel)):
            return False
    dtype = str(stmt.writes[0].source.dtype)
    if dtype not in ("float32", "float64"):
        return False
    lanes = options.vector_lanes if dtype == "float32" else options.vector_lanes // 2
    channels = _extent(sch, loops[len(spatial) - 1])
    while lanes > 4 and channels % lanes != 0:  # ShuffleNet's max pool over 24 channels: 8 lanes
        lanes //= 2
    if lanes < 2 or channels % lanes != 0:
        return False
    _inline_elementwise_producers(sch, block)
    loops = sch.get_loops(block)
    *outer, c = loops[: len(spatial)]
    c0, cv, c1 = sch.split(c, [None, _divisor(channels // lanes, 4), lanes])
    sch.reorder(*outer, c0, *loops[len(spatial) :], cv, c1)
    write_back = _fold_epilogue(sch, block)
    sch.reverse_compute_at(write_back, c0)
    sch.unroll(cv)
    sch.vectorize(c1)
    _vectorize_register_wide(sch, sch.get_loops(write_back)[-1], lanes)
    if options.parallel:
        sch.parallel(sch.fuse(*outer, c0))
    init = sch.decompose_reduction(block, loops[len(spatial)])
    sch.vectorize(sch.get_loops(init)[-1])
    return True


TRANSPOSE_TILE = 8  # rows and columns of a transpose's tile (AVX-512: 8 x 8 46 GB/s, 16 x 16 40)


def _schedule_transpose(func: PrimFunc, options: ScheduleOptions) -> PrimFunc | None:
    """A transpose and the elementwise or reshaping stages around it (MLP-Mixer's token
    mixing, ConvNeXt's NHWC <-> NCHW with its layer scale, PoolFormer's flattening). Every
    vector of the output's innermost axis read one element from each of 8-16 input rows:
    3.6 GB/s, with or without vectors. Instead the two axes are cut in 8 x 8 tiles; each tile
    of the input is loaded as 8 contiguous vectors into a stack array that LLVM keeps in
    registers, and stored transposed as 8 vectors (46-59 GB/s). None when no stage
    transposes, the stages do not fold into one, or an axis is shorter than half a tile."""
    from tvm import s_tir

    if not options.vectorize or has_reduction(func):
        return None
    size = len(str(func))
    for fold in (_fold_into_output, _fold_into_transpose):
        sch = s_tir.Schedule(deep_copy(func))
        try:
            block = fold(sch)
            if block is not None and len(str(sch.mod["main"])) > INLINED_GROWTH * size:
                continue  # values copied into every read (see _schedule_injective)
            if block is not None and _tile_transpose(sch, block, options):
                return sch.mod["main"]
        except Exception:  # a stage that is not elementwise: the other fold, or none
            continue
    return None


# A transpose read through a view computes its stages in the tiles' 8-lane vectors: fine for a
# scale and a bias, but Wav2Vec2's GELU (38 float operations an element) ran 14% slower there
# than in the 16-lane vectors of the injective schedule.
VIEWED_ARITHMETIC = 8


def _schedule_viewed_transpose(func: PrimFunc, options: ScheduleOptions) -> PrimFunc | None:
    """The transpose schedule on ``func`` with each block that copies an input into a
    reshaped intermediate (a reshape fused into its consumer) reading a view of that input
    in the intermediate's shape, the same memory; None when no block does or the transpose
    schedule declines. BiT's group norm, [1, 32, 25088] read back as [1, 256, 56, 56] and
    transposed to channels-last, indexed its input with divisions and modulos that the
    transpose tiles cannot follow (5.7 GB/s); through a view its reads are plain. A block
    qualifies when it stores each element at its own iterators and the flat offset it reads
    equals the one it writes (proved over the iterators' ranges). The views are extra
    parameters while the schedule runs (a declaration in the root block would be renamed by
    the tiles' cache_read), declared over their inputs' memory after."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    views: list = []  # (view, input)

    def flat(indices, shape):
        offset = tirx.const(0, "int64")
        for index, extent in zip(indices, shape, strict=True):
            offset = offset * extent + index
        return offset

    def viewed(block):
        store = block.body
        load = getattr(store, "value", None)
        if not isinstance(store, tirx.BufferStore) or not isinstance(load, tvm.ir.TensorLoad):
            return block
        source = load.source
        axes = [iv.var for iv in block.iter_vars]
        if (
            not any(source.same_as(param) for param in func.params)
            or not any(_contains(i, (tirx.FloorDiv, tirx.FloorMod)) for i in load.indices)
            or len(store.indices) != len(axes)
            or not all(index.same_as(axis) for index, axis in zip(store.indices, axes, strict=True))
            or str(source.dtype) != str(store.buffer.dtype)
        ):
            return block
        analyzer = _block_analyzer(block)
        difference = flat(load.indices, source.shape) - flat(store.indices, store.buffer.shape)
        if not analyzer.can_prove_equal(difference, 0):
            return block
        view = tirx.decl_buffer(store.buffer.shape, source.dtype, f"{source.name}_view")
        views.append((view, source))
        body = tirx.BufferStore(store.buffer, tirx.BufferLoad(view, list(axes)), list(axes))
        reads = [tirx.BufferRegion(view, [tvm.ir.Range.from_min_extent(axis, 1) for axis in axes])]
        return s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint, body)

    arithmetic = (tirx.Add, tirx.Sub, tirx.Mul, tirx.Div)
    if len(_collect(func.body, arithmetic, lambda e: "float" in str(e.ty))) > VIEWED_ARITHMETIC:
        return None
    mapped = tvm_ffi.structural_map(func, [(s_tir.SBlock, viewed)])
    if not views:
        return None
    with_views = tirx.PrimFunc([*func.params, *(v for v, _ in views)], mapped.body, attrs=func.attrs)
    scheduled = _schedule_transpose(with_views, options)
    if scheduled is None:
        return None
    sources = [next(i for i, p in enumerate(func.params) if p.same_as(s)) for _, s in views]
    return _declare_views(scheduled, sources)


def _declare_views(scheduled: PrimFunc, sources: list[int]) -> PrimFunc:
    """``scheduled``, whose last parameters are views, one of the parameter at each position
    of ``sources``, with the views declared over their sources' memory instead: views are
    parameters only while a schedule runs (a declaration in the root block would be renamed
    by the transpose tiles' cache_read)."""
    from tvm import s_tir, tirx

    count = len(scheduled.params) - len(sources)
    params, views = list(scheduled.params[:count]), scheduled.params[count:]
    root = scheduled.body.block
    declared = tirx.SeqStmt(
        [*(tirx.DeclBuffer(v, data=params[i].data) for v, i in zip(views, sources, strict=True)), root.body]
    )
    root = s_tir.SBlock(
        root.iter_vars,
        root.reads,
        root.writes,
        root.name_hint,
        declared,
        root.init,
        root.alloc_buffers,
        root.match_buffers,
        root.annotations,
    )
    return tirx.PrimFunc(params, s_tir.SBlockRealize([], True, root), attrs=scheduled.attrs)


def _schedule_gather_then_transpose(func: PrimFunc, options: ScheduleOptions) -> PrimFunc | None:
    """A gather whose every load runs along its innermost axis, then a transpose of its result
    (a resize left channels-last by the layout conversion, whose output the model returns
    channels-first: LR-ASPP's final upsample to 224 x 224). Inlined into the transpose, each
    output vector took its lanes from 16 pixels one scalar load at a time (5.1 ms, 0.8 GB/s of
    output). Kept a stage of its own, it runs in vectors along its innermost axis (channels:
    every load contiguous, a pixel's source positions computed once), the last one
    predicated; the transpose then goes in tiles. None when the kernel is not those two."""
    from tvm import s_tir

    if not options.vectorize or has_reduction(func):
        return None
    sch = s_tir.Schedule(deep_copy(func))
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    if len(blocks) != 2 or not _transposed_reads(sch.get(blocks[1])):
        return None
    gather, transposing = blocks
    loops = sch.get_loops(gather)
    if len(loops) != len(sch.get(gather).iter_vars) or not _reads_along_innermost(sch.get(gather)):
        return None
    if _extent(sch, loops[-1]) < options.vector_lanes // 2:
        return None  # a few channels: vectors across pixels would be gathers again
    if not _tile_transpose(sch, transposing, options):
        return None
    *outer, inner = sch.get_loops(gather)
    _, vector = sch.split(inner, [None, options.vector_lanes])
    sch.vectorize(vector)
    if options.parallel and outer:
        sch.parallel(sch.fuse(*outer) if len(outer) > 1 else outer[0])
    return sch.mod["main"]


def _reads_along_innermost(block) -> bool:
    """Whether every buffer ``block`` reads is indexed last by the block's innermost iterator
    alone (one element a lane, contiguous), and by it nowhere else."""
    innermost = block.iter_vars[-1].var
    for region in block.reads:
        *others, last = region.region
        if not (last.min.same_as(innermost) and hasattr(last.extent, "value") and last.extent.value == 1):
            return False
        if any(_uses(r.min, innermost) or _uses(r.extent, innermost) for r in others):
            return False
    return True


def _fold_into_output(sch):
    """Every stage inlined into the output (two transposed inputs added: ConvNeXt's residual);
    the output's block when it reads an input transposed."""
    root = sch.get_sblock("root")
    blocks = sch.get_child_blocks(root)
    if not any(_transposed_reads(sch.get(b)) for b in blocks):
        return None
    for block in blocks[:-1]:
        sch.compute_inline(block)
    blocks = sch.get_child_blocks(root)
    return blocks[0] if len(blocks) == 1 and _transposed_reads(sch.get(blocks[0])) else None


def _fold_into_transpose(sch):
    """The stages before the first transposing one inlined into it, those after (a reshape
    that flattens its output) inlined backwards, so that the loops stay the transpose's."""
    root = sch.get_sblock("root")
    blocks = sch.get_child_blocks(root)
    transposing = [b for b in blocks if _transposed_reads(sch.get(b))]
    if len(transposing) != 1:  # two transposes may cancel out (MobileViT's unfold and fold)
        return None
    anchor = transposing[0]
    position = [sch.get(b).same_as(sch.get(anchor)) for b in blocks].index(True)
    for block in blocks[:position]:
        sch.compute_inline(block)
    size = _elements(sch.get(anchor).writes[0].source)
    for block in blocks[position + 1 :]:
        # Only a reshape: TVM also inlined a padding stage backwards, whose padding was then
        # never written (LeViT's packed columns).
        if _elements(sch.get(block).writes[0].source) != size:
            return None
        sch.reverse_compute_inline(block)
    return anchor if len(sch.get_child_blocks(root)) == 1 else None


def _elements(buffer) -> int:
    return math.prod(int(extent) for extent in buffer.shape)


def _drop_unit_axes(sch, block) -> None:
    """``block``'s iterators of extent 1 dropped (two or more kept): a transpose into
    ``[128, 4, 128, 1]`` (Funnel's positional scores) has its contiguous output axis second
    last, and the tiles look for the last (scalar loops, 1.4 GFLOPS)."""
    from tvm import tirx

    extents = [iv.dom.extent for iv in sch.get(block).iter_vars]
    unit = [isinstance(e, tirx.IntImm) and int(e) == 1 for e in extents]
    if not any(unit) or len(extents) - sum(unit) < 2:
        return
    sch.transform_block_layout(
        block,
        tirx.IndexMap.from_func(
            lambda *axes: [a for a, one in zip(axes, unit, strict=True) if not one], ndim=len(extents)
        ),
    )


def _tile_transpose(sch, block, options: ScheduleOptions) -> bool:
    _drop_unit_axes(sch, block)
    stmt = sch.get(block)
    transposed = _transposed_reads(stmt)
    loops = sch.get_loops(block)
    if len(loops) != len(stmt.iter_vars) or len({axis for _, axis in transposed}) != 1:
        return False
    axis = transposed[0][1]
    *outer, inner = loops
    # 7 x 7 images (ConvNeXt's last stage): tiles of 7 rows or columns
    row_tile, column_tile = (min(TRANSPOSE_TILE, _extent(sch, loop)) for loop in (outer[axis], inner))
    if min(row_tile, column_tile) < TRANSPOSE_TILE // 2:
        return False
    rows, row = sch.split(outer[axis], [None, row_tile])
    columns, column = sch.split(inner, [None, column_tile])
    others = [loop for i, loop in enumerate(outer) if i != axis]
    sch.reorder(*others, rows, columns, row, column)
    for index, _ in transposed:
        tile = sch.cache_read(block, index, "global")  # a stack array: see _fold_epilogue
        sch.compute_at(tile, columns)
        *tile_loops, contiguous = sch.get_loops(tile)[len(others) + 2 :]
        for loop in tile_loops:
            sch.unroll(loop)
        sch.vectorize(contiguous)
    sch.unroll(row)
    sch.vectorize(column)
    elements = math.prod(_extent(sch, loop) for loop in sch.get_loops(block))
    if options.parallel and elements >= PARALLEL_ELEMENTS:
        sch.parallel(sch.fuse(*others, rows))
    return True


def _transposed_reads(block) -> list[tuple[int, int]]:
    """(read index, axis) of each buffer ``block`` reads transposed: its innermost index is
    the block's axis ``axis``, not the last, and one of its outer indices uses the last (as
    itself, or as ``tile * 16 + lane``: ViT's keys packed for ``Q K^T``, gathered at 13% of
    the L2's copy bandwidth, 2.8x faster in tiles)."""
    from tvm import tirx

    axes = [iv.var for iv in block.iter_vars]
    if len(axes) < 2 or any(iv.iter_type != tirx.IterVar.DataPar for iv in block.iter_vars):
        return []

    def axis_of(index) -> int:
        return next((i for i, var in enumerate(axes) if index.same_as(var)), -1)

    found = []
    for position, region in enumerate(block.reads):
        indices = [r.min for r in region.region]
        if any(not (hasattr(r.extent, "value") and r.extent.value == 1) for r in region.region):
            continue
        last = axis_of(indices[-1])
        if 0 <= last < len(axes) - 1 and any(_uses(i, axes[-1]) for i in indices[:-1]):
            found.append((position, last))
    return found


PARALLEL_ELEMENTS = 1 << 16  # an injective kernel smaller than this runs on the caller alone
INLINED_GROWTH = 3  # times its text an injective kernel may grow by inlining its blocks


def _schedule_injective(sch, options: ScheduleOptions) -> int:
    """A kernel of spatial blocks only (concat, transposes, elementwise chains: DenseNet's
    concat + batch norm + ReLU). TVM's default lowering computes every block into an
    intermediate of the output's size and picks a concat's input per element through a chain
    of conditions (DenseNet's kernels: 0.2-1.4 GFLOPS, five 2.8 MB intermediates each). Every
    block but the output is inlined into it; its innermost loop is vectorized and the rest run
    in parallel; a concat's conditions on the loop indices are marked ``likely`` so that
    LoopPartition gives each input a plain loop of its own (``PARTITION_LIKELY``). Returns
    the width of the innermost loop's vectors (1: scalar), 0 when the function has a
    reduction or keeps more than one block."""
    if not options.vectorize or _reduction_blocks(sch):
        return 0
    root = sch.get_sblock("root")
    blocks = sch.get_child_blocks(root)
    if not blocks:
        return 0
    if not _inline_into_outputs(sch):  # (raises when a block cannot be inlined: TVM's lowering stays)
        return 0
    # One block per output: a split's (attention's q, k and v out of one projection), each
    # vectorized and parallel on its own.
    widths = [_vectorize_injective(sch, block, options) for block in sch.get_child_blocks(root)]
    return 0 if 0 in widths else min(widths)


def _schedule_injective_stages(sch, options: ScheduleOptions) -> int:
    """An injective kernel that ``_schedule_injective`` declined because inlining every block
    would copy values into every read (a bilinear resize reads its input four times; TVM's
    ``fast_erf`` reads its argument a dozen times): each block that one load alone reads is
    inlined into its reader, the others stay stages of their own, and every stage is
    vectorized along its innermost axis and parallel as an injective output is.
    EfficientFormerV2-S0's transposes, residual add, 7 -> 14 resize and GELU ran unscheduled
    in TVM's scalar loops, a full-size intermediate each: 1.09 ms a call, 23% of the model.
    Returns the narrowest vector width, 0 when the kernel reduces or a stage cannot be
    vectorized (its loops do not match its iterators)."""
    import tvm

    if not options.vectorize or _reduction_blocks(sch):
        return 0
    root = sch.get_sblock("root")
    if len(sch.get_child_blocks(root)) < 2:
        return 0
    outputs = {param.name for param in sch.mod["main"].params}

    def reads_of(block) -> int:
        written = sch.get(block).writes[0].source
        return sum(
            len(_collect(sch.get(c).body, tvm.ir.TensorLoad, lambda load: load.source.same_as(written)))
            for c in sch.get_consumers(block)
        )

    inlined = True
    while inlined:
        inlined = False
        for block in reversed(sch.get_child_blocks(root)):
            if sch.get(block).writes[0].source.name in outputs or reads_of(block) != 1:
                continue
            sch.compute_inline(block)
            inlined = True
            break
    stages = sch.get_child_blocks(root)
    if len(stages) < 2:
        return 0  # (one block: what _schedule_injective declined)
    for block in reversed(stages):  # readers first: each stage follows what reads it
        if sch.get(block).writes[0].source.name not in outputs:
            _lay_out_for_readers(sch, block)
    widths = [_vectorize_injective(sch, block, options) for block in stages]
    return 0 if 0 in widths else min(widths)


def _lay_out_for_readers(sch, block) -> None:
    """The intermediate that stage ``block`` writes laid out with last the axis along which
    its readers' innermost loops run, and the stage's own loops reordered to write it
    innermost, when every reader runs along one axis and it is not the last: a layer whose
    stages run channels first between channels-last input and output (EfficientFormerV2-S0's
    7 -> 14 resize and GELU: every vector of its output a gather across 1024 channel planes)
    then reads and writes contiguous vectors at every stage."""
    import tvm

    stmt = sch.get(block)
    written = stmt.writes[0].source
    loops = sch.get_loops(block)
    iterators = [iv.var for iv in stmt.iter_vars]
    store = _collect(stmt.body, tvm.tirx.BufferStore)
    if (
        len(loops) != len(iterators)
        or len(store) != 1
        or not all(i.same_as(v) for i, v in zip(store[0].indices, iterators, strict=True))
        or not _loops_bind_in_order(sch, block)
    ):
        return
    axes = {_axis_read_innermost(sch, reader, written) for reader in sch.get_consumers(block)}
    if len(axes) != 1:
        return
    axis = axes.pop()
    if axis is None or axis == len(iterators) - 1:
        return
    sch.transform_layout(block, ("write", 0), lambda *a: (*a[:axis], *a[axis + 1 :], a[axis]))
    sch.reorder(*loops[:axis], *loops[axis + 1 :], loops[axis])


def _innermost_realize(sch, block):
    """``block``'s realize when it sits directly in its innermost loop, else None."""
    from tvm import s_tir

    realize = sch.get(sch.get_loops(block)[-1]).body
    if not isinstance(realize, s_tir.SBlockRealize) or not realize.block.same_as(sch.get(block)):
        return None
    return realize


def _loops_bind_in_order(sch, block) -> bool:
    """Whether ``block``'s loops bind its iterators one to one, in order."""
    realize = _innermost_realize(sch, block)
    if realize is None:
        return False
    loop_vars = [sch.get(loop).loop_var for loop in sch.get_loops(block)]
    return all(value.same_as(var) for value, var in zip(realize.iter_values, loop_vars, strict=True))


def _axis_read_innermost(sch, reader, buffer) -> int | None:
    """The axis of ``buffer`` that ``reader`` indexes by the iterator of its innermost loop,
    when every one of its loads of ``buffer`` indexes that one axis by that iterator alone and
    no other axis by it; else None."""
    import tvm

    realize = _innermost_realize(sch, reader)
    if realize is None:
        return None
    innermost = sch.get(sch.get_loops(reader)[-1]).loop_var
    bindings = zip(realize.block.iter_vars, realize.iter_values, strict=True)
    found = [iv.var for iv, value in bindings if value.same_as(innermost)]
    if len(found) != 1:
        return None
    loads = _collect(realize.block.body, tvm.ir.TensorLoad, lambda load: load.source.same_as(buffer))
    axes = set()
    for load in loads:
        along = [i for i, index in enumerate(load.indices) if _uses(index, found[0])]
        if len(along) != 1 or not load.indices[along[0]].same_as(found[0]):
            return None
        axes.add(along[0])
    return axes.pop() if len(axes) == 1 else None


def _inline_into_outputs(sch) -> bool:
    """Every block of ``sch`` but those that write the function's outputs inlined into its
    consumers (raises when one cannot be); False when that grew the function's text over
    ``INLINED_GROWTH`` times: a value read several times by each consumer is copied into each
    read (a GRU cell's gates grew so large that building the package took minutes instead of
    seconds)."""
    size = len(str(sch.mod["main"]))
    outputs = {param.name for param in sch.mod["main"].params}  # TVM 0.27: parameters are the buffers
    for block in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(block).writes[0].source.name not in outputs:
            sch.compute_inline(block)
    return len(str(sch.mod["main"])) <= INLINED_GROWTH * size


def _element_lanes(sch, block, options: ScheduleOptions) -> tuple[int, int]:
    """The bits of an element ``block`` writes (a bool is a byte in memory) and how many of
    them a register holds."""
    bits = max(8, int(sch.get(block).writes[0].source.dtype.bits))
    return bits, options.vector_lanes * 32 // bits


def _vectorize_injective(sch, block, options: ScheduleOptions) -> int:
    """One output block of an injective kernel: the innermost loop in vectors, the outer ones
    in parallel when the block is large enough. Returns the vectors' width (1: scalar), 0
    when the block's loops do not match its iterators."""
    loops = sch.get_loops(block)
    if len(loops) != len(sch.get(block).iter_vars):
        return 0
    elements = math.prod(_extent(sch, loop) for loop in loops)
    bits, lanes = _element_lanes(sch, block, options)
    # An 8-bit innermost axis shorter than a vector (a quantized image's 4 channels, channels-
    # last: MobileNet v2's first kernel 0.118 -> 0.077 ms) is fused with the one outside it:
    # the vectors then span pixels. (Measured on 8-bit outputs only.)
    while (
        bits == 8
        and len(loops) > 2
        and _extent(sch, loops[-1]) < lanes <= _extent(sch, loops[-1]) * _extent(sch, loops[-2])
    ):
        loops = [*loops[:-2], sch.fuse(loops[-2], loops[-1])]
    # A wider innermost axis shorter than a vector (PoolFormer's 14 x 14 and 7 x 7 images,
    # channels first: scalar code, 14 GB/s) is fused with the one outside it when every
    # access runs on contiguously across the two or ignores both (a per-channel scale): the
    # vectors then stay plain loads, never gathers.
    if (
        bits > 8
        and len(loops) >= 2
        and _extent(sch, loops[-1]) < lanes
        and _contiguous_across(sch, block, loops[-2], loops[-1])
    ):
        loops = [*loops[:-2], sch.fuse(loops[-2], loops[-1])]
    *outer, inner = loops
    extent = _extent(sch, inner)
    if len(loops) == len(sch.get(block).iter_vars):  # not fused: the vectors run along one axis
        lanes = _lanes_between_inputs(sch.get(block), lanes)
    if extent < lanes:
        lanes = 1
    else:  # a last vector that the extent does not fill is predicated
        inner, vector = sch.split(inner, [None, lanes])
        sch.vectorize(vector)
        outer.append(inner)
    if options.parallel and outer and elements >= PARALLEL_ELEMENTS:
        parallel = outer[:-1] if len(outer) > 1 and _extent(sch, outer[-1]) > 1 else outer
        sch.parallel(sch.fuse(*parallel) if len(parallel) > 1 else parallel[0])
    return lanes


def _contiguous_across(sch, block, outer_loop, inner_loop) -> bool:
    """Whether every load and store of ``block`` (directly under ``inner_loop``, inside
    ``outer_loop``) reads or writes its flattened buffer at ``outer * extent(inner) + inner``
    plus what the other loops give, or (a load only) at an offset that depends on neither."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    realize = sch.get(inner_loop).body
    if not isinstance(realize, s_tir.SBlockRealize) or not realize.block.same_as(sch.get(block)):
        return False
    outer, inner = sch.get(outer_loop).loop_var, sch.get(inner_loop).loop_var
    binding = dict(zip([iv.var for iv in realize.block.iter_vars], realize.iter_values, strict=True))
    stride = _extent(sch, inner_loop)
    analyzer = tvm.sym.Analyzer()
    for loop in sch.get_loops(block):
        analyzer.bind(sch.get(loop).loop_var, tvm.ir.Range(0, _extent(sch, loop)))
    body = realize.block.body
    stores = [(store.buffer, store.indices, True) for store in _collect(body, tirx.BufferStore)]
    loads = [(load.source, load.indices, False) for load in _collect(body, tvm.ir.TensorLoad)]
    for buffer, indices, stored in stores + loads:
        if not all(isinstance(d, tirx.IntImm) for d in buffer.shape):
            return False
        flat = tirx.const(0, "int64")
        for extent, index in zip(buffer.shape, indices, strict=True):
            bound = tvm_ffi.structural_map(index, [(tirx.Var, lambda v: binding.get(v, v))])
            flat = flat * int(extent) + tirx.Cast("int64", bound)
        coefficients = tvm.sym.detect_linear_equation(analyzer.simplify(flat), [outer, inner])
        if len(coefficients) != 3:
            return False  # not linear in the two loops
        terms = [analyzer.simplify(c) for c in coefficients[:2]]
        if not all(isinstance(t, tirx.IntImm) for t in terms):
            return False
        # (the output is always written along both: a store that seems to ignore them means
        # the loops were not found in its indices, and nothing here can be trusted)
        if [int(t) for t in terms] not in ([[stride, 1]] if stored else [[0, 0], [stride, 1]]):
            return False
    return bool(stores)


def _indices_within_ranges(func, lanes: int):
    """``func`` with the indices of every load simplified within its block's iterator ranges,
    when that leaves none of them a division or modulo (else None): a slice after a reshape
    reads ``[((v + 1) // 91 + u) % 3234, (v + 1) % 91]`` for v < 90, which is ``[u, v + 1]``;
    once ``v`` is split into vectors its bound is lost, and the divisions made every vector a
    gather (SSD's scores without the background class: 16 GB/s). Also when divisions of outer
    iterators only are left and the innermost iterators span ``lanes`` or more, so that the
    vectors run along them and each division is one value a vector (SSD's class scores, six
    heads' [1, H, W, 546] as rows of 91: 5.6 GB/s, 4.3x faster); over shorter innermost axes
    the vectors span rows (its boxes' rows of 4: ten times slower than TVM's scalar loop).
    Simplified only in part, ShuffleNet's channel shuffles ran 1.3-1.6x slower: those stay as
    they were."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    def divided(f) -> bool:
        return any(
            _contains(i, (tirx.FloorDiv, tirx.FloorMod))
            for load in _collect(f, tvm.ir.TensorLoad)
            for i in load.indices
        )

    def vectors_along_innermost(f) -> bool:
        outputs = {param.name for param in f.params}  # the blocks the others are inlined into
        blocks = [b for b in _collect(f, s_tir.SBlock) if b.iter_vars]
        written = [b for b in blocks if b.writes[0].source.name in outputs]
        extents = [b.iter_vars[-1].dom.extent for b in written]
        wide = all(isinstance(e, tirx.IntImm) and e.value >= lanes for e in extents)
        return wide and not any(_innermost_divided(b) for b in blocks)

    simplified = tvm_ffi.structural_map(func, [(s_tir.SBlock, _loads_within_ranges)])
    if divided(func) and (not divided(simplified) or vectors_along_innermost(simplified)):
        return simplified
    return None


def _flat_view_loads(func):
    """``func``'s blocks inlined into its outputs, with each load of an input whose indices
    divide the block's innermost iterator, or take it modulo, but whose offset in the flat
    input does not (proved over the iterators' ranges) and steps by one element along it,
    reading a one-dimensional view of that input at that offset; with the views as extra
    parameters and the inputs they view, or None when no load qualifies. A slice of a reshape
    (Funnel's relative-position shift: ``[4, 256, 128]`` rows 1 onwards read back as ``[4,
    128, 255]``) indexes its input with ``(i * 255 + j) // 128`` and ``% 128``: every vector
    a gather (12 GB/s), though it copies four contiguous runs of memory (80 GB/s so)."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    sch = s_tir.Schedule(deep_copy(func))
    try:
        if not _inline_into_outputs(sch):
            return None
    except Exception:  # a block that cannot be inlined: as it was
        return None
    inlined = sch.mod["main"]
    params = list(inlined.params)
    views: dict[int, object] = {}  # an input's position among the parameters -> its flat view

    def flat_offset(load, analyzer):
        offset = tirx.const(0, "int64")
        for index, extent in zip(load.indices, load.source.shape, strict=True):
            offset = offset * extent + tirx.Cast("int64", index)
        return analyzer.simplify(offset)

    def through_view(block):
        if not block.iter_vars:
            return block
        innermost = block.iter_vars[-1].var
        analyzer = _block_analyzer(block)
        divisions = (tirx.FloorDiv, tirx.FloorMod)

        def load(node):
            source = node.source
            position = next((i for i, p in enumerate(params) if source.same_as(p)), None)
            if (
                position is None
                or not all(isinstance(d, tirx.IntImm) for d in source.shape)
                or not any(_contains(i, divisions, lambda d: _uses(d, innermost)) for i in node.indices)
            ):
                return node
            offset = flat_offset(node, analyzer)
            if _contains(offset, divisions, lambda d: _uses(d, innermost)):
                return node
            step = tvm.sym.detect_linear_equation(offset, [innermost])
            if len(step) != 2 or not isinstance(step[0], tirx.IntImm) or int(step[0]) != 1:
                return node
            if position not in views:
                size = tirx.const(math.prod(int(d) for d in source.shape), "int64")
                views[position] = tirx.decl_buffer([size], source.dtype, f"{source.name}_flat")
            return tirx.BufferLoad(views[position], [offset])

        body = tvm_ffi.structural_map(block.body, [(tvm.ir.TensorLoad, load)])
        if body.same_as(block.body):
            return block
        buffers = {b: b for b in [*params, *views.values()]}
        changed = s_tir.SBlock(block.iter_vars, [], block.writes, block.name_hint, body)
        reads, _ = s_tir.analysis.get_sblock_read_write_region(changed, buffers)
        return s_tir.SBlock(
            block.iter_vars,
            reads,
            block.writes,
            block.name_hint,
            body,
            block.init,
            block.alloc_buffers,
            block.match_buffers,
            block.annotations,
        )

    mapped = tvm_ffi.structural_map(inlined, [(s_tir.SBlock, through_view)])
    if not views:
        return None
    with_views = tirx.PrimFunc([*params, *views.values()], mapped.body, attrs=inlined.attrs)
    return with_views, list(views)


def _loads_within_ranges(block):
    """``block`` with the indices it loads simplified within its iterators' ranges."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    if not block.iter_vars:
        return block
    analyzer = _block_analyzer(block)

    def load(node):
        return tirx.BufferLoad(node.source, [analyzer.simplify(i) for i in node.indices])

    return tvm_ffi.structural_map(block, [(tvm.ir.TensorLoad, load)])


def _split_last(run: int):
    """An index map's function: the last of its indices as two, ``[i // run, i % run]``. (Not
    a lambda with ``run`` as a default: ``IndexMap.from_func`` takes every parameter for an index.)"""
    return lambda *indices: (*indices[:-1], indices[-1] // run, indices[-1] % run)


def _innermost_runs(func, options: ScheduleOptions):
    """``func``'s blocks inlined into its outputs, and an output's innermost axis that its
    loads divide split in two, ``[E / run, run]``, at the longest run of a vector or more over
    which no load divides it, when that is not a whole number of vectors; None when no output
    needs or allows that. MobileViT's heads merged back, ``[4, 4, 196, 24]`` read as
    ``[4, 196, 96]``: vectors of 16 along the 96 ran across heads, each one a gather (8 GB/s);
    along a head's 24 they are plain loads, a full and a predicated one (75 GB/s)."""
    import tvm_ffi
    from tvm import s_tir, tirx

    sch = s_tir.Schedule(deep_copy(func))
    split = False
    try:
        if not _inline_into_outputs(sch):
            return None  # (``_schedule_injective`` keeps TVM's lowering for such a kernel)
        for block in sch.get_child_blocks(sch.get_sblock("root")):
            iter_vars = sch.get(block).iter_vars
            extent = iter_vars[-1].dom.extent if iter_vars else None
            if not isinstance(extent, tirx.IntImm) or not _innermost_divided(
                _loads_within_ranges(sch.get(block))
            ):
                continue
            _, lanes = _element_lanes(sch, block, options)
            for run in sorted((r for r in range(lanes, extent.value) if extent.value % r == 0), reverse=True):
                trial = sch.copy()
                try:
                    trial.transform_block_layout(
                        block,
                        tirx.IndexMap.from_func(_split_last(run), ndim=len(iter_vars)),
                    )
                except Exception:  # a map TVM refuses: the next run
                    continue
                if not _innermost_divided(_loads_within_ranges(trial.get(block))):
                    # Whole vectors never span two runs, and TVM divides their ramps itself
                    # (split anyway, Swin's heads of 32 ran 0.6-0.9x as fast)
                    if run % lanes:
                        sch, split = trial, True
                    break
    except Exception:  # a block that cannot be inlined: as it was
        return None
    return tvm_ffi.structural_map(sch.mod["main"], [(s_tir.SBlock, _loads_within_ranges)]) if split else None


def _innermost_divided(block) -> bool:
    """Whether an index that ``block`` loads divides its innermost iterator, or takes it modulo."""
    import tvm
    from tvm import tirx

    if not block.iter_vars:
        return False
    innermost = block.iter_vars[-1].var
    loads = _collect(block, tvm.ir.TensorLoad)
    divisions = (tirx.FloorDiv, tirx.FloorMod)
    return any(_contains(i, divisions, lambda d: _uses(d, innermost)) for load in loads for i in load.indices)


def _lanes_between_inputs(block, lanes: int) -> int:
    """``lanes`` halved (down to 4) until they divide every point where a condition on the
    block's innermost index changes value: a concat along the innermost axis (channels-last)
    switches inputs there. A vector across such a point is built from gathers (GhostNet's
    168 + 168 channels: 18 GB/s); vectors inside one input are plain loads, and
    ``likely_index_conditions`` then gives each input a loop of its own."""
    innermost = block.iter_vars[-1].var
    points = [_split_point(condition, innermost) for condition in _index_conditions(block)]
    points = [p for p in points if p > 0]
    narrow = lanes
    while narrow > 4 and any(p % narrow for p in points):
        narrow //= 2
    return lanes if any(p % narrow for p in points) else narrow


def _schedule_input_segments(func: PrimFunc, options: ScheduleOptions) -> PrimFunc | None:
    """An injective kernel whose one output block switches inputs along its innermost axis at
    points no vector width divides (MixNet-S's concat of 4 x 90 channels + batch norm + SiLU):
    that axis's loop partitioned at the points, one loop per input, each with its conditions
    resolved and vectorized with a predicated tail. Vectors across the points were built
    lane by lane (0.74 ms a call with AVX2, 0.023 ms so). None when the kernel is not one."""
    from tvm import s_tir

    if not options.vectorize:
        return None
    sch = s_tir.Schedule(deep_copy(func))
    if _reduction_blocks(sch) or not sch.get_child_blocks(sch.get_sblock("root")):
        return None
    if not _inline_into_outputs(sch):
        return None
    blocks = sch.get_child_blocks(sch.get_sblock("root"))
    if len(blocks) != 1 or not _loops_bind_in_order(sch, blocks[0]):
        return None
    block = sch.get(blocks[0])
    loops = sch.get_loops(blocks[0])
    _, lanes = _element_lanes(sch, blocks[0], options)
    innermost = block.iter_vars[-1].var
    extent = _extent(sch, loops[-1])
    points = sorted({_split_point(condition, innermost) for condition in _index_conditions(block)})
    if not points or points[0] <= 0 or points[-1] >= extent:
        return None  # no switch, or one that is not a comparison with a constant
    if all(p % _lanes_between_inputs(block, lanes) == 0 for p in points):
        return None  # vectors fit between the points: the plain injective schedule
    bounds = [0, *points, extent]
    elements = math.prod(_extent(sch, loop) for loop in loops)
    sch.loop_partition(loops[-1], [b - a for a, b in itertools.pairwise(bounds[:-1])] + [None])
    resolved = s_tir.Schedule(_loops_from_zero(_resolve_index_conditions(sch.mod["main"])))
    segments = [b.name_hint for b in _blocks(resolved.mod["main"]) if not _contains(b.body, s_tir.SBlock)]
    for name in segments:
        segment = resolved.get_sblock(name)
        if _index_conditions(resolved.get(segment)):
            return None  # a condition the partition did not settle
        (loop,) = resolved.get_loops(segment)
        width = lanes
        while width > 4 and width > _extent(resolved, loop):
            width //= 2
        if width <= _extent(resolved, loop):
            resolved.vectorize(resolved.split(loop, [None, width])[1])
    (common,) = resolved.get_child_blocks(resolved.get_sblock("root"))
    outer = resolved.get_loops(common)
    if options.parallel and outer and elements >= PARALLEL_ELEMENTS:
        resolved.parallel(resolved.fuse(*outer) if len(outer) > 1 else outer[0])
    return likely_index_conditions(resolved.mod["main"], lanes)


def _index_conditions(block) -> list:
    """The conditions of ``block``'s ``if_then_else``s that read its innermost index and no data."""
    import tvm

    if_then_else = tvm.ir.Op.get("prim.if_then_else")
    innermost = block.iter_vars[-1].var
    calls = _collect(block.body, tvm.ir.expr.Call, lambda call: call.op.same_as(if_then_else))
    return [
        call.args[0]
        for call in calls
        if _uses(call.args[0], innermost) and not _contains(call.args[0], tvm.ir.TensorLoad)
    ]


def _resolve_index_conditions(func: PrimFunc) -> PrimFunc:
    """Every ``if_then_else`` on loop indices only that the loops' ranges settle replaced by
    its branch, and each block's ``Let`` variables made its own (a partitioned loop copies
    its block, whose lets TVM requires to be defined once)."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    if_then_else = tvm.ir.Op.get("prim.if_then_else")
    analyzer = _loop_ranges(func)

    def in_realize(realize):
        bindings = list(zip([iv.var for iv in realize.block.iter_vars], realize.iter_values, strict=True))

        def settle(call):
            if not call.op.same_as(if_then_else) or _contains(call.args[0], tvm.ir.TensorLoad):
                return call
            condition = _substituted(call.args[0], bindings)
            if analyzer.can_prove(condition):
                return call.args[1]
            if analyzer.can_prove(tirx.Not(condition)):
                return call.args[2]
            return call

        def own(let):
            fresh = tirx.Var(let.var.name, let.var.ty)
            return tirx.Let(fresh, let.value, _substituted(let.body, [(let.var, fresh)]))

        block = tvm_ffi.structural_map(realize.block, [(tvm.ir.expr.Call, settle)])
        block = tvm_ffi.structural_map(block, [(tirx.Let, own)])
        return s_tir.SBlockRealize(realize.iter_values, realize.predicate, block)

    return tvm_ffi.structural_map(func, [(s_tir.SBlockRealize, in_realize)])


def _loop_ranges(func: PrimFunc):
    """An analyzer that knows the range of every loop variable of ``func``."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    analyzer = tvm.sym.Analyzer()

    def bind(loop):
        analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        return loop

    tvm_ffi.structural_map(func, [(tirx.For, bind)])
    return analyzer


def _loops_from_zero(func: PrimFunc) -> PrimFunc:
    """Loops that start past 0 (a partition's) rewritten to start at 0: ``split`` takes no other."""
    import tvm_ffi
    from tvm import tirx

    def from_zero(loop):
        if isinstance(loop.min, tirx.IntImm) and loop.min.value == 0:
            return loop
        body = _substituted(loop.body, [(loop.loop_var, loop.loop_var + loop.min)])
        start = loop.min - loop.min  # 0 of the loop's type
        kind, binding, annotations = loop.kind, loop.thread_binding, loop.annotations
        return tirx.For(loop.loop_var, start, loop.extent, kind, body, binding, annotations)

    return tvm_ffi.structural_map(func, [(tirx.For, from_zero)])


def _substituted(node, bindings: list) -> object:
    """``node`` with each variable of ``bindings`` ((variable, value) pairs) replaced by its value."""
    import tvm_ffi
    from tvm import tirx

    def replace(var):
        return next((value for bound, value in bindings if var.same_as(bound)), var)

    return tvm_ffi.structural_map(node, [(tirx.Var, replace)])


def has_reduction(func: PrimFunc) -> bool:
    """Whether ``func`` reduces (a matmul, convolution, pooling or norm) rather than only
    moves and maps data."""
    from tvm import s_tir, tirx

    def reduces(block) -> bool:
        return any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)

    return _contains(func, s_tir.SBlock, reduces)  # no copy of the function, no Schedule


def likely_index_conditions(func: PrimFunc, lanes: int) -> PrimFunc:
    """``if_then_else`` conditions on loop indices only (a concat's ``192 <= c``, a pad's
    border) marked ``likely``; conditions that read data are left alone, and so are those on
    the innermost index unless they compare it with a multiple of ``lanes`` (the vectors
    along it): LoopPartition would otherwise cut a vector loop to a variable extent, which
    TVM cannot build (GhostNet's concat of 6 + 6 channels)."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    if_then_else = tvm.ir.Op.get("prim.if_then_else")

    innermost = [block.iter_vars[-1].var for block in _blocks(func) if block.iter_vars]  # one per output

    def mark(call):
        condition = call.args[0] if call.op.same_as(if_then_else) else None
        if condition is None or _contains(condition, tvm.ir.TensorLoad) or not _splittable(condition):
            return call
        used = tirx.analysis.undefined_vars(condition)
        for var in innermost:
            if any(v.same_as(var) for v in used) and _split_point(condition, var) % lanes != 0:
                return call
        return tirx.if_then_else(tirx.likely(condition), call.args[1], call.args[2])

    return tvm_ffi.structural_map(func, [(tvm.ir.expr.Call, mark)])


def _blocks(func) -> list:
    from tvm import s_tir

    return _collect(func, s_tir.SBlock, lambda block: block.name_hint != "root")


def _split_point(condition, var) -> int:
    """Where ``condition``, a comparison of ``var`` with a constant, changes value (-1, never
    a multiple of anything, for any other condition)."""
    from tvm import tirx

    kinds = {tirx.LT: (0, 1), tirx.LE: (1, 0), tirx.GT: (1, 0), tirx.GE: (0, 1)}  # var left, right
    shift = kinds.get(type(condition))
    if shift is None:
        return -1
    if condition.a.same_as(var) and isinstance(condition.b, tirx.IntImm):
        return int(condition.b.value) + shift[0]
    if condition.b.same_as(var) and isinstance(condition.a, tirx.IntImm):
        return int(condition.a.value) + shift[1]
    return -1


def schedule_function(func: PrimFunc, options: ScheduleOptions) -> PrimFunc | None:
    """``func`` scheduled when it matches a pattern, else ``None``."""
    try:
        scheduled = _schedule(func, options)
    except Exception:  # a primitive refused this instance, or the function has no blocks
        return None  # (hand-written TIR such as scatter): TVM's default lowering stays
    return None if scheduled is None else likely_vector_tails(scheduled)


# The build option that makes TVM's LoopPartition split a loop at a ``likely`` condition
# (constant-extent loops are left whole by default). TVM's own lowerings emit no ``likely``
# (the objects of GPT-2, ResNet-18, EfficientNet-B0, ViT and DenseNet-121 are byte-identical
# with and without it), so it acts on the conditions below only.
PARTITION_LIKELY = {"s_tir.LoopPartition": {"partition_const_loop": True}}


def likely_vector_tails(func: PrimFunc) -> PrimFunc:
    """Block predicates that depend on a vectorized loop's lanes, or on an unrolled loop's
    index, marked ``likely``.

    Such a predicate is a cut of padded columns (an LM head's N = 50257, padded output
    channels): true for every tile but the last. As it stands TVM scalarizes the store of
    every tile, one compare and one extract per element (GPT-2's LM head spent 20-40% of its
    time there); marked ``likely``, LoopPartition (``PARTITION_LIKELY``) splits the tile loop
    into full tiles, stored as whole vectors, and the predicated last one. The same for a
    cut of rows (the unrolled rows of a matmul tile): 7 rows in tiles of 4 (AVX2) branched
    on the last row at every multiply-add and spilled the accumulators."""
    import tvm_ffi
    from tvm import s_tir, tirx

    tail_loop_kinds = (tirx.ForKind.VECTORIZED, tirx.ForKind.UNROLLED)

    # Every loop's range, so that a fused index over a unit loop (``fused % 6304`` where
    # fused < 6304) simplifies to the index it is before it is judged.
    analyzer = _loop_ranges(func)

    def in_loop(loop):
        def on_lanes(term) -> bool:
            return _uses(term, loop.loop_var)

        def marked(term):
            if isinstance(term, tirx.And):  # a cut of padded rows and columns: mark the columns'
                return tirx.And(marked(term.a), marked(term.b))
            term = analyzer.simplify(term) if on_lanes(term) else term
            return tirx.likely(term) if on_lanes(term) and _splittable(term) else term

        def mark(realize):
            predicate = realize.predicate
            if isinstance(predicate, tirx.IntImm) or not on_lanes(predicate):
                return realize
            return s_tir.SBlockRealize(realize.iter_values, marked(predicate), realize.block)

        return tvm_ffi.structural_map(loop, [(s_tir.SBlockRealize, mark)])

    def visit(loop):
        return in_loop(loop) if loop.kind in tail_loop_kinds else loop

    return tvm_ffi.structural_map(func, [(tirx.For, visit)])


def _splittable(term) -> bool:
    """A tail condition LoopPartition can split at: not already ``likely``, and no modulo (a
    column tile index ``fused % n`` of rows-first tiles has no single split point, and TVM then
    makes unrolled loops of non-constant extent, which it cannot build)."""
    from tvm import tirx

    op = getattr(term, "op", None)  # a Call (TVM 0.27 names the op "prim.likely")
    if op is not None and getattr(op, "name", "").endswith(".likely"):
        return False
    return not _contains(term, (tirx.FloorMod, tirx.Mod))


def has_block(func: object, name: str) -> bool:
    """Whether the PrimFunc ``func`` has a block named ``name``."""
    import tvm
    from tvm import s_tir

    return isinstance(func, tvm.tirx.PrimFunc) and _contains(
        func, s_tir.SBlock, lambda b: b.name_hint == name
    )


def _uses(expr, var) -> bool:
    """Whether the expression ``expr`` reads the variable ``var``."""
    from tvm import tirx

    return any(v.same_as(var) for v in tirx.analysis.undefined_vars(expr))


def _contains(node, kinds, where=lambda _: True) -> bool:
    """Whether ``node`` holds an object of the type(s) ``kinds`` for which ``where`` holds."""
    return bool(_collect(node, kinds, where))


def _collect(node, kinds, where=lambda _: True) -> list:
    """The objects of the type(s) ``kinds`` in ``node`` for which ``where`` holds."""
    import tvm_ffi

    found: list[object] = []

    def note(value):
        if where(value):
            found.append(value)
        return value

    tvm_ffi.structural_map(node, [(kinds, note)])
    return found


def deep_copy(func: PrimFunc) -> PrimFunc:
    """A PrimFunc that shares nothing with ``func``: schedule primitives were seen to rewrite
    the loops of a function that shares its body with the one scheduled (``with_attr``
    copies share it), in place (TVM 0.27). Read back without ``tvm.ir.load_json``'s upgrade of
    old versions' JSON (a Python pass over every node: a quarter of gen's time on small models)."""
    import tvm
    from tvm_ffi.serialization import from_json_graph_str

    return from_json_graph_str(tvm.ir.save_json(func))


def _schedule(func, options: ScheduleOptions):
    bounds = func.attrs.get(DIM_BOUNDS) if func.attrs is not None else None
    token = _bounds.set({str(k): int(v) for k, v in (bounds or {}).items()})
    try:
        return _schedule_with(func, options)
    finally:
        _bounds.reset(token)


def _schedule_with(func, options: ScheduleOptions):
    from tvm import s_tir

    # Rows (softmax, layer norm) on TVM's own max identities so that rfactor splits a row's
    # maximum as well as its sums; -inf starts are given back after.
    rows = s_tir.Schedule(deep_copy(finite_reduction_identities(func)))
    if _schedule_rows(rows, options):
        return infinite_reduction_identities(rows.mod["main"])
    sch = s_tir.Schedule(deep_copy(func))
    if _schedule_winograd_transforms(sch, options):
        return sch.mod["main"]
    if _schedule_outer_axis_reduction(sch, options):
        return sch.mod["main"]
    whole = s_tir.Schedule(deep_copy(finite_reduction_identities(func)))
    if _schedule_whole_reduction(whole, options):
        return infinite_reduction_identities(whole.mod["main"])
    last_axis = s_tir.Schedule(deep_copy(finite_reduction_identities(func)))
    try:
        reduced = _schedule_last_axis_reduction(last_axis, options)
    except Exception:  # a stage after it that cannot follow the row loop: the others try
        reduced = False
    if reduced:
        return infinite_reduction_identities(last_axis.mod["main"])
    transposed = _schedule_transpose(func, options)
    if transposed is None:
        try:
            transposed = _schedule_viewed_transpose(func, options)
        except Exception:  # a view or a stage the tiles cannot take: the schedules below
            transposed = None
    if transposed is None:
        try:
            transposed = _schedule_gather_then_transpose(func, options)
        except Exception:  # a stage the tiles cannot take: the injective schedule below
            transposed = None
    if transposed is not None:
        return transposed
    ranged = (options.vectorize and _innermost_runs(func, options)) or func
    injective_func = _indices_within_ranges(ranged, options.vector_lanes) or ranged
    try:
        segmented = _schedule_input_segments(injective_func, options)
    except Exception:  # a primitive refused the partition: the injective schedules below
        segmented = None
    if segmented is not None:
        return segmented
    flat = _flat_view_loads(injective_func) if options.vectorize else None
    if flat is not None:
        with_views, sources = flat
        viewed = s_tir.Schedule(deep_copy(with_views))
        lanes = _schedule_injective(viewed, options)
        if lanes:
            return _declare_views(likely_index_conditions(viewed.mod["main"], lanes), sources)
    injective = s_tir.Schedule(deep_copy(injective_func))
    lanes = _schedule_injective(injective, options)
    if lanes:
        return likely_index_conditions(injective.mod["main"], lanes)
    staged = s_tir.Schedule(deep_copy(injective_func))
    try:
        lanes = _schedule_injective_stages(staged, options)
    except Exception:  # a stage the loops cannot take: TVM's lowering stays
        lanes = 0
    if lanes:
        return likely_index_conditions(staged.mod["main"], lanes)
    reductions = _reduction_blocks(sch)
    # int32: the quantized convolutions and products (8-bit operands widened as they multiply;
    # QDQ CNN's 3x3 conv 0.203 -> 0.025 ms, as float32's tiles)
    if len(reductions) != 1 or str(sch.get(reductions[0]).writes[0].source.dtype) not in ("float32", "int32"):
        rows = s_tir.Schedule(deep_copy(finite_reduction_identities(func)))
        return infinite_reduction_identities(rows.mod["main"]) if _schedule_long_rows(rows, options) else None
    block = reductions[0]
    kinds = _kinds(sch, block)
    if len(sch.get_loops(block)) != len(kinds):
        return None  # loops and block iterators do not correspond one to one
    name = sch.get(block).name_hint
    prefetch = None
    if name in (CONV_BLOCK, GROUPED_BLOCK) and kinds == "SSSSRRR":
        prefetch = _schedule_conv2d_nhwc(sch, block, options)
    elif name == UINT8_BLOCK and kinds == "SSSSRRRR":
        if not options.vectorize:
            return None  # the C kernels: TVM's loops
        _schedule_uint8_conv2d(sch, block, options)
    elif name == DEPTHWISE_BLOCK and kinds == "SSSSRR":
        _schedule_depthwise_nhwc(sch, block, options)
    elif kinds.endswith("SSR") and kinds.count("R") == 1:
        if not _is_product(sch.get(block)):
            # A sum over the last axis kept as an axis of 1 (a layer norm's mean, spelt out by
            # the exporter) is no matmul of one column (one scalar chain): the rows schedule's
            # partial sums, its consumer under the same row loop (DeiT's: 3-4x faster).
            rows = s_tir.Schedule(deep_copy(finite_reduction_identities(func)))
            if _schedule_long_rows(rows, options):
                return infinite_reduction_identities(rows.mod["main"])
        columns = sch.get(sch.get_loops(block)[-2]).extent
        if not hasattr(columns, "value") and _known_multiple(columns) < options.vector_lanes:
            # Columns known only at run time, not in whole vectors: a condition on every
            # vector lane; TVM's plain loop, which LLVM vectorizes itself, ran 27x faster
            # (4 vs 114 us, 64 tokens, one thread). A packed product computes whole blocks.
            return None
        prefetch = _schedule_matmul(sch, block, options)
    elif kinds == "SSSSRRR":
        _schedule_conv2d(sch, block, options)
    elif name in POOL_BLOCKS and kinds.startswith("SSS") and kinds.strip("S") in ("R", "RR"):
        if not _schedule_pool_rows(sch, block, options):
            return None
    elif name in POOL_BLOCKS and kinds.endswith("R"):
        if not _schedule_pool_innermost(sch, block, options):
            return None
    else:
        return None
    return sch.mod["main"] if prefetch is None else _with_prefetch(sch.mod["main"], prefetch)


def schedule_module(
    module: IRModule,
    options: ScheduleOptions,
    serial: frozenset[str] = frozenset(),
    tuned: dict | None = None,
    unscheduled: frozenset[str] = frozenset(),
) -> tuple[IRModule, list[str]]:
    """Every PrimFunc of ``module`` scheduled: as given in ``tuned`` (by name), else where a
    pattern applies (the ``serial`` ones without parallel loops; the ``unscheduled`` ones
    not at all); returns the new module and the names of the scheduled functions."""
    import dataclasses

    import tvm

    functions, scheduled = {}, []
    for gv, func in module.functions.items():
        if gv.name_hint in unscheduled:
            functions[gv] = func
            continue
        own = dataclasses.replace(options, parallel=False) if gv.name_hint in serial else options
        result = schedule_function(func, own) if isinstance(func, tvm.tirx.PrimFunc) else None
        if tuned and gv.name_hint in tuned:
            result = tuned[gv.name_hint]
        if result is not None:
            functions[gv] = result.with_attr("global_symbol", func.attrs["global_symbol"])
            scheduled.append(gv.name_hint)
        else:
            functions[gv] = func
    return tvm.IRModule(functions, attrs=module.attrs), sorted(scheduled)
