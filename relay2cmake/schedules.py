"""Default CPU schedules that need no tuning, applied per PrimFunc by pattern.

TVM 0.27 ships no CPU schedules for legalized Relax (dlight's CPU rules cover GEMV and
row reductions, and do nothing useful for matmul or convolution), so unscheduled kernels
run at about 1 GFLOPS. Two patterns cover most of the arithmetic in real models:

- matmul-like: one reduction block with a single reduction axis (dense, matmul, batch
  matmul, M = 1 included). A register tile of ``rows x (4 vectors)`` accumulators,
  vectorized along the output's contiguous axis, the reduction unrolled by 4.
- conv2d-like (NCHW): one reduction block with three reduction axes (channels, kernel
  rows, kernel columns) over four spatial axes (regular, 1x1, strided, depthwise). A tile
  of ``8 output channels x one vector of output columns``; padding stays its own stage.

In both, the fused elementwise epilogue (bias, relu, clip, add) is folded into the tile's
write-back, and the outermost tiles run in parallel (``TVMBackendParallelLaunch`` in LLVM
objects; serial loops in C). Anything else, or anything a schedule primitive rejects,
keeps TVM's default lowering: a schedule can only make a kernel faster, never wrong,
because TVM checks every primitive against the block's dependences.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleOptions:
    vector_lanes: int  # float32 lanes of one vector register: 4 (NEON), 8 (AVX2), 16 (AVX-512)
    vectorize: bool  # False for the C target, which cannot print vector types
    parallel: bool


def _divisor(extent: int, preferred: int) -> int:
    """The largest divisor of ``extent`` not above ``preferred`` (uneven splits add
    predicates that defeat vectorization)."""
    for candidate in range(min(preferred, extent), 0, -1):
        if extent % candidate == 0:
            return candidate
    return 1


def _reduction_blocks(sch):
    from tvm import tirx

    root = sch.get_sblock("root")
    blocks = []
    for block in sch.get_child_blocks(root):
        iter_vars = sch.get(block).iter_vars
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in iter_vars):
            blocks.append(block)
    return blocks


def _kinds(sch, block) -> str:
    """'S'/'R' per iter var, e.g. 'SSR' for a matmul, 'SSSSRRR' for conv2d."""
    from tvm import tirx

    return "".join("R" if iv.iter_type == tirx.IterVar.CommReduce else "S" for iv in sch.get(block).iter_vars)


def _extent(sch, loop) -> int:
    return int(sch.get(loop).extent)


def _fold_epilogue(sch, block):
    """Cache the block's output in registers and fold the elementwise consumers into the
    write-back; returns the write-back block.

    Intermediate elementwise blocks are inlined into their consumers first, so that an
    epilogue that reads the product twice (GELU: x * (1 + erf(x / sqrt 2)) / 2) becomes one
    block with a single producer, which the write-back can absorb."""
    producers = {sch.get(p).name_hint for p in sch.get_producers(block)}
    for candidate in sch.get_child_blocks(sch.get_sblock("root")):
        name = sch.get(candidate).name_hint
        if name == sch.get(block).name_hint or name in producers:
            continue
        try:
            sch.compute_inline(candidate)
        except Exception:  # the function's output block, or not elementwise: stays
            pass
    # "global" scope: small constant-size buffers become stack arrays (LLVM keeps them in
    # registers); TVM turns "local" ones into workspace calls, even inside parallel loops.
    write_back = sch.cache_write(block, 0, "global")
    while True:
        consumers = sch.get_consumers(write_back)
        if len(consumers) != 1:
            break
        try:
            sch.reverse_compute_inline(consumers[0])
        except Exception:  # not elementwise (a reduction, a transpose): leave it a stage
            break
    return write_back


def _schedule_matmul(sch, block, options: ScheduleOptions) -> None:
    loops = sch.get_loops(block)
    *outer, i, j, k = loops
    lanes = options.vector_lanes
    n_extent, m_extent = _extent(sch, j), _extent(sch, i)
    rows = _divisor(m_extent, 4 if lanes <= 8 else 8)
    cols = _divisor(n_extent, lanes * (8 if m_extent == 1 else 2))
    write_back = _fold_epilogue(sch, block)
    i0, i1 = sch.split(i, [None, rows])
    j0, j1 = sch.split(j, [None, cols])
    k0, k1 = sch.split(k, [None, _divisor(_extent(sch, k), 4)])
    sch.reorder(*outer, i0, j0, k0, k1, i1, j1)
    sch.reverse_compute_at(write_back, j0)
    sch.unroll(k1)
    sch.unroll(i1)
    if options.vectorize:
        sch.vectorize(j1)
        sch.vectorize(sch.get_loops(write_back)[-1])
    if options.parallel:
        # Vectorize and parallel before decompose_reduction: afterwards the update block
        # no longer counts as a reduction and both primitives refuse it.
        sch.parallel(sch.fuse(*outer, i0, j0))
    init = sch.decompose_reduction(block, k0)
    if options.vectorize:
        sch.vectorize(sch.get_loops(init)[-1])


def _parallel_padding(sch, block, options: ScheduleOptions) -> None:
    """The padding stage stays its own cheap loop nest (inlined into the tile's loads it
    costs 4x); its batch and channel loops run in parallel. Without padding (1x1 and
    unpadded convolutions) the stage is a plain copy of the input, and is inlined."""
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
    # (TVM 0.27 exposes BufferLoad as a constructor function, so compare the type's name.)
    if not isinstance(body, tvm.tirx.BufferStore) or type(body.value).__name__ != "BufferLoad":
        return False
    source, target = body.value.buffer, body.buffer
    return [int(d) for d in source.shape] == [int(d) for d in target.shape] and str(
        body.value.indices
    ) == str(body.indices)


CONV_TILE = (8, 1)  # output channels x vectors of output columns per register tile
# Output columns per register tile of a packed convolution, by vector width: the tile holds
# columns x (16 / lanes) accumulators, which must leave registers for the weights.
PACKED_COLUMNS = {4: 6, 8: 6, 16: 12}
# With a kernel window (3x3...) the unrolled window multiplies the live values: AVX-512's
# 12-column tiles spilled there (45 against 98 GFLOPS with 6 columns, ResNet-50).
WINDOW_COLUMNS = 6
RC_UNROLL = 4  # input channels per trip of a 1x1 packed convolution's reduction loop
# Only where measured to help: AVX2 (8 lanes, 12 accumulators). With AVX-512's 12-column
# tiles the unrolled loop spilled and ran 4x slower; NEON's 24 accumulators are untried.
RC_UNROLL_LANES = (8,)
SEVEN = 7  # output width of the last stage of ImageNet networks (224 / 32)


def _schedule_conv2d(sch, block, options: ScheduleOptions) -> None:
    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    lanes = min(options.vector_lanes, 8) * CONV_TILE[1]  # 8 columns: widths are 7 x 2^k
    _parallel_padding(sch, block, options)
    write_back = _fold_epilogue(sch, block)
    f0, f1 = sch.split(f, [None, _divisor(_extent(sch, f), CONV_TILE[0])])
    x0, x1 = sch.split(x, [None, _divisor(_extent(sch, x), lanes)])
    sch.reorder(n, f0, y, x0, rc, ry, rx, f1, x1)
    sch.reverse_compute_at(write_back, x0)
    sch.unroll(ry)
    sch.unroll(rx)
    sch.unroll(f1)
    if options.vectorize:
        sch.vectorize(x1)
        sch.vectorize(sch.get_loops(write_back)[-1])
    if options.parallel:
        sch.parallel(sch.fuse(n, f0, y))
    init = sch.decompose_reduction(block, rc)
    if options.vectorize:
        sch.vectorize(sch.get_loops(init)[-1])


def _schedule_conv2d_packed(sch, block, options: ScheduleOptions) -> None:
    """Weights [O/16, I, kh, kw, 16] (layouts.py): vectorize along the 16 output channels
    (contiguous weights), broadcast one input pixel per column of the tile."""
    from relay2cmake.layouts import PACK

    n, f, y, x, rc, ry, rx = sch.get_loops(block)
    _parallel_padding(sch, block, options)
    write_back = _fold_epilogue(sch, block)
    f0, f1 = sch.split(f, [None, PACK])
    pixels = PACKED_COLUMNS.get(options.vector_lanes, 4)
    if _extent(sch, ry) * _extent(sch, rx) > 1:
        pixels = min(pixels, WINDOW_COLUMNS)
    width = _extent(sch, x)
    if width % 2 == 1 and width % SEVEN == 0:
        # 7-wide images (ResNet's and MobileNet's last stage): a row of 7 pixels, with only
        # as many channels as keep 7 x channels / lanes accumulators in registers.
        lanes = min(options.vector_lanes, PACK)
        f1, f2 = sch.split(f1, [None, lanes])
        y0, y1 = sch.split(y, [None, 1])
        x0, x1 = sch.split(x, [None, SEVEN])
        outer = [n, f0, f1, y0]
        sch.reorder(*outer, x0, rc, ry, rx, y1, x1, f2)
        f1 = f2
    else:
        columns = _divisor(width, pixels)
        rows = _divisor(_extent(sch, y), pixels // columns) if columns < 4 else 1
        y0, y1 = sch.split(y, [None, rows])  # narrow images (14 wide): a 2 x 2 pixel tile
        x0, x1 = sch.split(x, [None, columns])
        outer = [n, f0, y0]
        sch.reorder(*outer, x0, rc, ry, rx, y1, x1, f1)
    sch.reverse_compute_at(write_back, x0)
    reduction = rc
    if _extent(sch, ry) * _extent(sch, rx) == 1 and options.vector_lanes in RC_UNROLL_LANES:
        # 1x1: unroll input channels instead, so each trip does more than one tile update.
        reduction, rc1 = sch.split(rc, [None, _divisor(_extent(sch, rc), RC_UNROLL)])
        sch.unroll(rc1)
    sch.unroll(ry)
    sch.unroll(rx)
    sch.unroll(y1)
    sch.unroll(x1)
    if options.vectorize:
        sch.vectorize(f1)
    if options.parallel:
        sch.parallel(sch.fuse(*outer))
    init = sch.decompose_reduction(block, reduction)
    if options.vectorize:
        sch.vectorize(sch.get_loops(init)[-1])


def _reads_packed_weights(sch, block) -> bool:
    return any(len(region.region) == 5 for region in sch.get(block).reads)


def schedule_function(func, options: ScheduleOptions):
    """``func`` scheduled when it matches a pattern, else ``None``."""
    try:
        return _schedule(func, options)
    except Exception:  # a primitive refused this instance, or the function has no blocks
        return None  # (hand-written TIR such as scatter): TVM's default lowering stays


def _schedule(func, options: ScheduleOptions):
    from tvm import s_tir

    sch = s_tir.Schedule(func)
    reductions = _reduction_blocks(sch)
    if len(reductions) != 1 or str(sch.get(reductions[0]).writes[0].source.dtype) != "float32":
        return None
    block = reductions[0]
    kinds = _kinds(sch, block)
    if len(sch.get_loops(block)) != len(kinds):
        return None  # loops and block iterators do not correspond one to one
    if kinds.endswith("SSR") and kinds.count("R") == 1:
        _schedule_matmul(sch, block, options)
    elif kinds == "SSSSRRR" and _reads_packed_weights(sch, block):
        _schedule_conv2d_packed(sch, block, options)
    elif kinds == "SSSSRRR":
        _schedule_conv2d(sch, block, options)
    else:
        return None
    return sch.mod["main"]


def schedule_module(module, options: ScheduleOptions):
    """Every PrimFunc of ``module`` scheduled where a pattern applies; returns the new
    module and the names of the scheduled functions."""
    import tvm

    functions, scheduled = {}, []
    for gv, func in module.functions.items():
        result = schedule_function(func, options) if isinstance(func, tvm.tirx.PrimFunc) else None
        if result is not None:
            functions[gv] = result.with_attr("global_symbol", func.attrs["global_symbol"])
            scheduled.append(gv.name_hint)
        else:
            functions[gv] = func
    return tvm.IRModule(functions, attrs=module.attrs), sorted(scheduled)
