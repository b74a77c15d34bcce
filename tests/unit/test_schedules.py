"""Default schedules on single kernels: which vectors they choose, and that what they
compute is the unscheduled kernel's result. The packages built from these schedules are
compared with ONNX Runtime in test_scheduled_kernels.py."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from packaging_helpers import call_kernel

from relay2cmake.lower import schedules
from relay2cmake.lower.pipeline import build_context
from relay2cmake.lower.rewrites import conv2d_nhwc as nhwc
from relay2cmake.lower.rewrites import packed_matmul
from relay2cmake.lower.schedules import ScheduleOptions, _vector_width, schedule_function

AVX512 = ScheduleOptions(vector_lanes=16, vectorize=True, parallel=False)
AVX2 = ScheduleOptions(vector_lanes=8, vectorize=True, parallel=False)


def test_vector_width_halves_until_it_divides():
    assert _vector_width(1024, AVX512) == 16
    assert _vector_width(1000, AVX512) == 8  # ImageNet's classes
    assert _vector_width(20, AVX512) == 4
    assert _vector_width(10, AVX512) == 1
    assert _vector_width(1024, ScheduleOptions(vector_lanes=16, vectorize=False, parallel=False)) == 1


def _vector_extents(func) -> list[int]:
    """Extents of the vectorized loops, read from the TVMScript text (TVM 0.27's Python has
    no TIR visitor)."""
    return [int(extent) for extent in re.findall(r"T\.vectorized\((\d+)\)", func.script())]


@pytest.mark.parametrize(
    ("rows", "columns", "lanes"),
    [(1, 40, 8), (3, 20, 4), (1, 1000, 16), (4, 64, 16), (512, 196, 16), (13, 196, 16)],
)
def test_packed_matmul_vectors_divide_the_columns(rows, columns, lanes):
    """A column count 16 does not divide is padded in the packed weights and computed with
    the widest vectors that divide it, not scalar code; 1,000 classes and MLP-Mixer's 196
    tokens are computed as 1,008 and 208 (a cut keeps the real ones; 13 rows are then
    computed as 16), so AVX-512 gets whole vectors."""
    from tvm import te

    rng = np.random.default_rng(columns)
    depth = 24
    a = rng.standard_normal((rows, depth)).astype(np.float32)
    b = rng.standard_normal((depth, columns)).astype(np.float32)
    padded = np.pad(b, [(0, 0), (0, -columns % packed_matmul.PACK)])
    packed = np.ascontiguousarray(padded.reshape(depth, -1, packed_matmul.PACK).transpose(1, 0, 2))
    data = te.placeholder(a.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    out = packed_matmul._matmul_packed(data, weight, columns)
    func = te.create_prim_func([data, weight, out])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None
    extents = _vector_extents(scheduled)  # the update's vectors; the write-back's whole tile
    assert lanes in extents and all(extent % lanes == 0 for extent in extents), extents
    result = call_kernel(scheduled, [a, packed, np.zeros((rows, columns), np.float32)])
    np.testing.assert_allclose(result, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("channels", "lanes"), [(40, 8), (20, 4), (32, 16), (440, 16)])
def test_packed_conv_vectors_divide_the_channels(channels, lanes):
    """The widest vectors that divide the computed channels: RegNet-Y's 440 are computed as
    448, so AVX-512 gets whole 16-lane vectors, not half ones."""
    from tvm import te

    rng = np.random.default_rng(channels)
    image = rng.standard_normal((1, 6, 6, 8)).astype(np.float32)
    hwio = rng.standard_normal((3, 3, 8, channels)).astype(np.float32)
    packed = nhwc._packed(hwio, nhwc.computed_channels_of(channels))
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    out = nhwc._conv2d_nhwc(data, weight, [1, 1], [1, 1, 1, 1], [1, 1], False, channels)
    func = te.create_prim_func([data, weight, out])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None
    extents = _vector_extents(scheduled)
    assert lanes in extents and all(extent % lanes == 0 for extent in extents), extents
    result = call_kernel(scheduled, [image, packed, np.zeros((1, 6, 6, channels), np.float32)])
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = np.zeros((1, 6, 6, channels), np.float32)
    for ry in range(3):
        for rx in range(3):
            want += padded[:, ry : ry + 6, rx : rx + 6, :] @ hwio[ry, rx]
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
@pytest.mark.parametrize(("size", "stride", "channels"), [(7, 1, 256), (14, 2, 192), (6, 1, 64)])
def test_a_conv_with_large_weights_prefetches_the_next_tiles(size, stride, channels, parallel):
    """HRNet's late 3x3 convs (MBs of weights, a few rows of outputs): each tile of output
    channels prefetches the next tile's weights, a line per reduction step, every address
    inside the weights (the last tile's next is clamped to their end). NumPy's numbers; the
    AArch64 set builds it too; the C set (no vectors) and small weights (64 channels, 147
    KB) get none."""
    import dataclasses

    import tvm
    from tvm import te

    from relay2cmake.lower.pipeline import build_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(channels)
    image = rng.standard_normal((1, size, size, channels)).astype(np.float32)
    hwio = (rng.standard_normal((3, 3, channels, channels)) / np.sqrt(9 * channels)).astype(np.float32)
    packed = nhwc._packed(hwio, nhwc.computed_channels_of(channels))
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    out = nhwc._conv2d_nhwc(data, weight, [stride, stride], [1, 1, 1, 1], [1, 1], False, channels)
    func = te.create_prim_func([data, weight, out])
    options = dataclasses.replace(AVX512, parallel=parallel)
    scheduled = schedule_function(func, options)
    assert scheduled is not None
    large = packed.nbytes >= schedules.PREFETCH_WEIGHT_BYTES
    assert ("llvm.prefetch" in scheduled.script()) == large, scheduled.script()
    plain = schedule_function(func, dataclasses.replace(options, vectorize=False))
    assert plain is not None and "llvm.prefetch" not in plain.script()
    outputs = int(out.shape[1])
    result = call_kernel(scheduled, [image, packed, np.zeros((1, outputs, outputs, channels), np.float32)])
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = np.zeros((1, outputs, outputs, channels), np.float32)
    span = stride * (outputs - 1) + 1
    for ry in range(3):
        for rx in range(3):
            want += padded[:, ry : ry + span : stride, rx : rx + span : stride, :] @ hwio[ry, rx]
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)
    if large:
        (offset,) = [c.args[2] for c in schedules._collect(scheduled, tvm.ir.Call, _is_access_pointer)]
        analyzer = tvm.sym.Analyzer()
        for loop in schedules._collect(scheduled, tvm.tirx.For):
            analyzer.bind(loop.loop_var, tvm.ir.Range.from_min_extent(loop.min, loop.extent))
        bound = analyzer.const_int_bound(offset)
        assert 0 <= bound.min_value and bound.max_value + schedules.LINE_FLOATS <= packed.size, bound
        aarch64 = parse_targets(["aarch64"])[-1]
        build_kernels(tvm.IRModule({"main": scheduled}), aarch64.tvm_target(), "the kernel")


def _is_access_pointer(call) -> bool:
    return getattr(call.op, "name", "") == "tirx.tvm_access_ptr"


@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_reads_the_padding_inline(stride):
    """No padded copy of the image (it cost more than the depthwise conv itself), and the
    same values as numpy."""
    from tvm import te

    rng = np.random.default_rng(stride)
    image = rng.standard_normal((1, 9, 9, 24)).astype(np.float32)
    hwio = rng.standard_normal((3, 3, 1, 24)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(hwio.shape, name="weight")
    out = nhwc._conv2d_nhwc(data, weight, [stride, stride], [1, 1, 1, 1], [1, 1], True, 24)
    func = te.create_prim_func([data, weight, out])
    assert 'sblock("pad_temp")' in func.script()
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None and 'sblock("pad_temp")' not in scheduled.script()
    size = int(out.shape[1])
    result = call_kernel(scheduled, [image, hwio, np.zeros((1, size, size, 24), np.float32)])
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = sum(
        padded[:, ry : ry + stride * size : stride, rx : rx + stride * size : stride, :] * hwio[ry, rx, 0]
        for ry in range(3)
        for rx in range(3)
    )
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(
    ("window", "channels", "size", "inlined"), [(3, 16, 23, True), (3, 32, 23, True), (7, 64, 30, False)]
)
def test_stems_read_their_padding_in_place_with_few_products_a_value(window, channels, size, inlined, wide):
    """A stem's RGB padding is a scalar copy, three values a pixel: a 3 x 3 stride-2 stem of
    16 or 32 outputs reads the image in place (33 and 66 multiply-adds per padded value here;
    on the zoo's stems the copy cost more than the checks, 1.14-2.27x), a 7 x 7 one of 64 (544
    here, ResNet's 743) keeps the copy (0.77-0.88x inlined). NumPy's numbers either way."""
    from tvm import te

    rng = np.random.default_rng(window * channels)
    image = rng.standard_normal((1, size, size, 3)).astype(np.float32)
    hwio = rng.standard_normal((window, window, 3, channels)).astype(np.float32)
    packed = nhwc._packed(hwio, nhwc.computed_channels_of(channels))
    pad = window // 2
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    out = nhwc._conv2d_nhwc(data, weight, [2, 2], [pad] * 4, [1, 1], False, channels)
    func = te.create_prim_func([data, weight, out])
    assert 'sblock("pad_temp")' in func.script()
    scheduled = schedule_function(func, AVX512 if wide else AVX2)
    assert scheduled is not None
    assert ('sblock("pad_temp")' not in scheduled.script()) == inlined
    out_size = int(out.shape[1])
    result = call_kernel(scheduled, [image, packed, np.zeros((1, out_size, out_size, channels), np.float32)])
    padded = np.pad(image, [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    want = sum(
        padded[:, ry : ry + 2 * out_size : 2, rx : rx + 2 * out_size : 2, :] @ hwio[ry, rx]
        for ry in range(window)
        for rx in range(window)
    )
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(
    ("size", "channels", "computed", "ragged"),
    [(14, 48, 48, True), (13, 1008, 1008, True), (14, 40, 48, False)],
)
def test_odd_vector_counts_take_ragged_tiles_of_more_vectors_on_avx512(
    size, channels, computed, ragged, wide
):
    """AVX-512: 3 or 63 vectors of output channels on a 14-wide row gave exact tiles of one
    vector over 14 pixels, a broadcast per multiply-add; a ragged tile of 5 pixels x 3
    vectors loads half as often (its last tile a predicated 4). Also where the conv computes
    a 13-wide image 14 wide (the cut of those columns bounds the ragged tile's stores), not
    where only padded channels are cut (that cut's predicate would replace the ragged tile's:
    stores past each row), nor in grouped convs, whose vectors each read an input of their
    own (RegNet-Y's 7 x 7 x 440 ran 0.78x ragged). AVX2 likewise (SqueezeNet's 55 x 55 x 64).
    NumPy's numbers, AVX-512 and AVX2."""
    from tvm import te

    assert schedules._pixel_tile(size, 14, computed // 16, 16) == (1, 5, 3)
    assert schedules._pixel_tile(size, 14, computed // 16, 16, grouped=True) == (1, 14, 1)
    assert schedules._pixel_tile(55, 55, 8, 8) == (1, 6, 2)  # AVX2: 1 x 11 x 1 loaded twice as often
    rng = np.random.default_rng(channels)
    image = rng.standard_normal((1, size, size, 16)).astype(np.float32)
    hwio = rng.standard_normal((1, 1, 16, channels)).astype(np.float32)
    packed = nhwc._packed(hwio, computed)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    out = nhwc._conv2d_nhwc(data, weight, [1, 1], [0] * 4, [1, 1], False, channels, computed)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), AVX512 if wide else AVX2)
    assert scheduled is not None
    if wide:  # columns in tiles of 5, the last one predicated
        assert ("T.where(T.likely(x_0 * 5 + x_1 < 14))" in scheduled.script()) == ragged
    result = call_kernel(scheduled, [image, packed, np.zeros((1, size, size, channels), np.float32)])
    np.testing.assert_allclose(result, image @ hwio[0, 0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(("size", "channels"), [(17, 192), (13, 64), (17, 40)])
def test_wide_rows_that_tile_badly_are_computed_whole_with_ragged_tiles(size, channels, wide):
    """Inception v3's 1x1 convs on 17 x 17: with ragged tiles allowed (a package with an
    AVX-512 set) a row of 16 or more is computed as it is, the last column tile predicated:
    no 18th column and no padded copy of the image (an unpadded conv reads its input in
    place). Rows under 16 (SqueezeNet's 13) and convs whose padded output channels are cut (40
    of 48 computed) are still widened to a width that tiles. NumPy's numbers, both x86 sets."""
    from tvm import te

    computed = nhwc.computed_channels_of(channels, wide=True)
    rng = np.random.default_rng(size + channels)
    image = rng.standard_normal((1, size, size, 32)).astype(np.float32)
    hwio = rng.standard_normal((1, 1, 32, channels)).astype(np.float32)
    packed = nhwc._packed(hwio, computed)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(packed.shape, name="packed")
    whole = size >= nhwc.MIN_RAGGED_WIDTH and computed == channels  # (the caller's rule)
    out = nhwc._conv2d_nhwc(
        data, weight, [1, 1], [0] * 4, [1, 1], False, channels, computed, ragged_columns=computed == channels
    )
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), AVX512 if wide else AVX2)
    assert scheduled is not None
    assert ("pad_temp" in scheduled.script()) == (not whole)  # the padded copy: gone or made
    if whole:
        assert "T.where(T.likely(" in scheduled.script()  # the ragged last tile
    result = call_kernel(scheduled, [image, packed, np.zeros((1, size, size, channels), np.float32)])
    np.testing.assert_allclose(result, image @ hwio[0, 0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("grouped", [False, True])
def test_avx2_tiles_of_few_accumulators_go_ragged(grouped):
    """AVX2 on a 7 x 7 image (ResNet-50's last layers, ResNeXt's grouped ones): exact divisors
    give 7 pixels x 1 vector, 7 of 12 accumulators; a ragged last column tile of 4 pixels x 2
    vectors holds 8 (3.2 -> 2.4 ms on AMD EPYC). AVX-512's exact 7 x 2 keeps 14 already. The
    8 accumulators of an exact tile are still few (``FEW_ACCUMULATORS``): AVX2's 2 x 2 x 2 on
    14 x 14 and 4 x 2 on 56 x 56 become ragged 2 x 3 x 2 and 6 x 2 (12), AVX-512's 4 x 2 on a
    32 x 32 image 7 x 2 (14), but not in AVX-512's grouped convs, whose vectors each read an
    input of their own."""
    assert schedules._pixel_tile(7, 7, 64, 8, ragged=False, grouped=grouped) == (1, 7, 1)
    assert schedules._pixel_tile(7, 7, 64, 8, grouped=grouped) == (1, 4, 2)
    assert schedules._pixel_tile(7, 7, 32, 16, grouped=grouped) == (1, 7, 2)
    assert schedules._pixel_tile(14, 14, 32, 8, ragged=False, grouped=grouped) == (2, 2, 2)
    assert schedules._pixel_tile(14, 14, 32, 8, grouped=grouped) == (2, 3, 2)
    assert schedules._pixel_tile(56, 56, 8, 8, grouped=grouped) == (1, 6, 2)
    assert schedules._pixel_tile(32, 32, 16, 16, ragged=False, grouped=grouped) == (1, 4, 2)
    assert schedules._pixel_tile(32, 32, 16, 16, grouped=grouped) == ((1, 4, 2) if grouped else (1, 7, 2))


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(
    ("groups", "group_inputs", "group_outputs", "lanes", "stride"),
    [(32, 4, 4, 4, 1), (8, 4, 4, 4, 2), (8, 16, 16, 8, 2), (4, 8, 16, 8, 1), (6, 1, 8, 8, 1)],
)
def test_grouped_conv_vectors_stay_inside_a_group(groups, group_inputs, group_outputs, lanes, stride, wide):
    """ResNeXt's 4-channel groups (4 lanes), RegNet's 16-channel ones (8), groups with more
    outputs than inputs and a depthwise conv with a channel multiplier: every vector lies in
    one group, so its input is one broadcast value (no gather), and numpy's numbers. With
    16 lanes (AVX-512) the padding is read in place (no padded copy), vectors up to 16 wide;
    there 4-channel groups take 16 lanes across 4 groups, each input a shuffle of one vector
    load (``group_shuffle``'s intrinsic, which reads a padded copy)."""
    from tvm import te

    options = AVX512 if wide else AVX2
    shuffled = wide and group_inputs == group_outputs == 4
    if wide:
        lanes = 16 if shuffled else min(group_outputs, 16)

    rng = np.random.default_rng(groups)
    in_channels, channels = groups * group_inputs, groups * group_outputs
    image = rng.standard_normal((1, 9, 9, in_channels)).astype(np.float32)
    hwio = rng.standard_normal((3, 3, group_inputs, channels)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(hwio.shape, name="weight")
    out = nhwc._group_conv2d_nhwc(data, weight, [stride, stride], [1, 1, 1, 1], [1, 1], groups)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), options)
    assert scheduled is not None
    extents = _vector_extents(scheduled)
    assert lanes in extents and all(extent % lanes == 0 for extent in extents), extents
    if shuffled:
        assert "T.Shuffle" in scheduled.script()
    else:
        assert "Ramp" not in scheduled.script() and "T.ramp" not in scheduled.script()
    assert ('sblock("pad_temp")' in scheduled.script()) != (wide and not shuffled)
    size = int(out.shape[1])
    result = call_kernel(scheduled, [image, hwio, np.zeros((1, size, size, channels), np.float32)])
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    want = np.zeros((1, size, size, channels), np.float32)
    for g in range(groups):
        inputs = padded[..., g * group_inputs : (g + 1) * group_inputs]
        outputs = slice(g * group_outputs, (g + 1) * group_outputs)
        for ry in range(3):
            for rx in range(3):
                window = inputs[:, ry : ry + stride * size : stride, rx : rx + stride * size : stride]
                want[..., outputs] += window @ hwio[ry, rx, :, outputs]
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("multiplier", [2, 3])
def test_a_depthwise_conv_with_a_channel_multiplier_runs_on_repeated_channels(multiplier):
    """FastViT's downsampling (after a 1x1 conv): a 7x7 and a 3x3 conv, stride 2, each input channel to
    ``multiplier`` outputs (groups = input channels). As grouped convs their vectors were
    ``multiplier`` lanes wide (5-13 GFLOPS); they become depthwise convs of the input with its
    channels repeated, one repeat shared by both, and compute TVM's own grouped conv."""
    from tvm import relax

    channels = 8
    rng = np.random.default_rng(multiplier)
    x = rng.standard_normal((1, channels, 11, 11)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            pointwise = rng.standard_normal((channels, channels, 1, 1)).astype("float32")
            image = bb.emit(relax.op.nn.conv2d(data, relax.const(pointwise)))  # channels-last from here
            branches = []
            for kernel in (7, 3):
                weight = rng.standard_normal((channels * multiplier, 1, kernel, kernel)).astype("float32")
                conv = relax.op.nn.conv2d(
                    image, relax.const(weight), strides=2, padding=kernel // 2, groups=channels
                )
                branches.append(bb.emit(conv))
            out = bb.emit_output(bb.emit(relax.op.add(*branches)))
        bb.emit_func_output(out)
    original = bb.get()
    rewritten = nhwc.convolutions_channels_last(original)
    script = rewritten.script()
    assert "group_conv2d" not in script and script.count("depthwise_conv2d_nhwc") >= 2, script
    assert script.count("R.repeat(") == 1, script
    np.testing.assert_allclose(_run_relax(rewritten, x), _run_relax(original, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("groups", "group_inputs", "group_outputs", "split"),
    [(2, 16, 32, True), (4, 16, 16, True), (2, 8, 32, False), (16, 16, 16, False)],
)
def test_a_conv_with_few_wide_groups_runs_as_one_regular_conv_per_group(
    groups, group_inputs, group_outputs, split
):
    """ResNeSt's split attention: a 3x3 conv of 2 groups, each of 32-256 input and 64-512
    output channels. As one grouped conv (unpacked HWIO weights) it ran at 27-74 GFLOPS; it
    becomes a regular conv per group over a slice of the channels (packed weights or
    Winograd), concatenated, and computes TVM's own grouped conv. Narrow groups, or many
    groups (ResNeXt's 32), stay one grouped conv."""
    from tvm import relax

    rng = np.random.default_rng(groups * group_inputs)
    x = rng.standard_normal((1, groups * group_inputs, 10, 10)).astype("float32")
    weight = rng.standard_normal((groups * group_outputs, group_inputs, 3, 3)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(data, relax.const(weight), padding=1, groups=groups))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(conv)))
        bb.emit_func_output(out)
    original = bb.get()
    rewritten = nhwc.convolutions_channels_last(original)
    script = rewritten.script()
    assert ("group_conv2d" not in script) == split, script
    assert (script.count("R.strided_slice(") == groups and "R.concat(" in script) == split, script
    np.testing.assert_allclose(_run_relax(rewritten, x), _run_relax(original, x), rtol=1e-4, atol=1e-4)


def _scheduled_1x1_conv(x, weights, channels: int, options, computed: int | None = None):
    """A 1x1 conv of ``x`` to ``channels`` with ``weights`` as the kernel takes them (packed
    or widened), scheduled with ``options``."""
    from tvm import te

    data = te.placeholder(x.shape, name="data")
    weight = te.placeholder(weights.shape, name="weight")
    out = nhwc._conv2d_nhwc(data, weight, [1, 1], [0, 0, 0, 0], [1, 1], False, channels, computed)
    return schedule_function(te.create_prim_func([data, weight, out]), options)


def _check_1x1_conv(scheduled, x, weights, w, mcpu: str) -> None:
    """``scheduled`` (``_scheduled_1x1_conv``) built for ``mcpu`` and run here: numpy's
    numbers from the real HWIO weights ``w``, and a sentinel after the output untouched."""
    import tvm

    assert scheduled is not None
    size, in_channels, channels = x.shape[1], x.shape[3], w.shape[3]
    count = size * size * channels
    buffer = _aligned(count + 64, 12345.0)
    output = buffer[:count].reshape(1, size, size, channels)
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": scheduled}), target={"kind": "llvm", "mcpu": mcpu})
    library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(weights), tvm.runtime.from_dlpack(output))
    want = (x.reshape(-1, in_channels) @ w.reshape(in_channels, channels)).reshape(output.shape)
    np.testing.assert_allclose(output, want, rtol=1e-4, atol=1e-4)
    assert np.all(buffer[count:] == 12345.0), "the kernel wrote past its output"


@pytest.mark.parametrize(
    ("size", "in_channels", "channels"),
    [(28, 58, 58), (10, 64, 546), (13, 32, 22), (14, 116, 116), (7, 64, 400), (7, 48, 440)],
)
def test_conv_with_padded_channels_is_vectorized_and_stays_in_bounds(size, in_channels, channels):
    """ShuffleNet's 58 and 116, an SSD head's 546 and RegNet's 400 and 440 output channels:
    the padded channels of the packed weights (400: one whole zero block more) are computed
    with register-wide (8-lane) vector tiles and only the real ones stored (13 wide: the
    width is padded too); numpy's numbers, and a sentinel after the output untouched."""

    rng = np.random.default_rng(channels)
    x = rng.standard_normal((1, size, size, in_channels)).astype("float32")
    w = rng.standard_normal((1, 1, in_channels, channels)).astype("float32")
    packed = nhwc._packed(w, nhwc.computed_channels_of(channels))
    scheduled = _scheduled_1x1_conv(x, packed, channels, AVX2)
    assert scheduled is not None and set(_vector_extents(scheduled)) == {8}, _vector_extents(scheduled)
    _check_1x1_conv(scheduled, x, packed, w, "haswell")


@pytest.mark.parametrize(("channels", "computed"), [(24, 32), (40, 48), (36, 48), (20, 20)])
def test_a_package_with_16_lane_vectors_computes_channels_in_whole_16s(channels, computed):
    """EfficientNet's and GhostNet's 24 and 40 output channels: AVX-512 took 8-lane vectors
    (45% of its peak). A package with a 16-lane set computes whole 16s when they add at most
    a third (not 20: 32 would add 60%), only the real channels stored; a package without one
    keeps the count. Numpy's numbers, a sentinel after the output untouched."""

    from relay2cmake.targets import host_runs_wide

    assert nhwc.computed_channels_of(channels) == channels
    assert nhwc.computed_channels_of(channels, wide=True) == computed
    rng = np.random.default_rng(channels)
    size, in_channels = 14, 32
    x = rng.standard_normal((1, size, size, in_channels)).astype("float32")
    w = rng.standard_normal((1, 1, in_channels, channels)).astype("float32")
    packed = nhwc._packed(w, computed)
    scheduled = _scheduled_1x1_conv(x, packed, channels, AVX512, computed)
    assert scheduled is not None
    widest = 16 if computed % 16 == 0 else 4
    assert max(_vector_extents(scheduled)) == widest, _vector_extents(scheduled)
    if not host_runs_wide():
        pytest.skip("this machine has no AVX-512 to run the 16-lane kernel")
    _check_1x1_conv(scheduled, x, packed, w, "skylake-avx512")


@pytest.mark.parametrize(
    ("channels", "wide", "computed", "lanes", "width"),
    [(6, True, 8, 16, 8), (10, True, 16, 16, 16), (12, True, 16, 8, 8), (6, False, 8, 8, 8),
     (10, False, 12, 8, 4), (3, False, 4, 8, 4), (8, True, 8, 16, 8), (2, True, 2, 16, 1)],
)  # fmt: skip
def test_few_output_channels_are_computed_in_whole_vectors(channels, wide, computed, lanes, width):
    """GhostNet's 1x1 convs to 6 and 10 channels ran scalar (27 GFLOPS, AVX-512) and 12 in
    4-lane vectors: the unpacked weights get zero channels up to whole vectors of 4, or with
    a 16-lane set one vector of 8 or 16; the tile runs ``width``-lane vectors, only the real
    channels are stored. Numpy's numbers, a sentinel after the output untouched (the host's
    widest set that the schedule's lanes fit)."""

    from relay2cmake.targets import host_runs_wide

    assert nhwc.computed_channels_of(channels, wide) == computed
    rng = np.random.default_rng(channels)
    size, in_channels = 10, 36
    x = rng.standard_normal((1, size, size, in_channels)).astype("float32")
    w = rng.standard_normal((1, 1, in_channels, channels)).astype("float32")
    widened = nhwc._widened(w, computed)
    scheduled = _scheduled_1x1_conv(x, widened, channels, AVX512 if lanes == 16 else AVX2)
    assert scheduled is not None
    assert max(_vector_extents(scheduled), default=1) == width, _vector_extents(scheduled)
    if lanes == 16 and not host_runs_wide():
        pytest.skip("this machine has no AVX-512 to run the 16-lane kernel")
    _check_1x1_conv(scheduled, x, widened, w, "skylake-avx512" if lanes == 16 else "haswell")


@pytest.mark.parametrize(("channels", "kernel", "lanes"), [(240, 5, 8), (144, 3, 8), (96, 3, 16), (48, 3, 4)])
def test_depthwise_vectors_are_register_wide(channels, kernel, lanes):
    """EfficientNet's depthwise layers: 30, 18 or 6 vectors of channels. A tile of 3 or 5
    vectors vectorized as one loop became one 24- or 40-lane LLVM vector, 30x slower; each
    vector is now a loop of its own, and the tile stays within the register budget."""
    from tvm import te

    from relay2cmake.lower.schedules import DEPTHWISE_ACCUMULATORS

    rng = np.random.default_rng(channels)
    image = rng.standard_normal((1, 8, 8, channels)).astype(np.float32)
    hwio = rng.standard_normal((kernel, kernel, 1, channels)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(hwio.shape, name="weight")
    pad = kernel // 2
    out = nhwc._conv2d_nhwc(data, weight, [1, 1], [pad] * 4, [1, 1], True, channels)
    options = ScheduleOptions(vector_lanes=lanes, vectorize=True, parallel=False)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), options)
    assert scheduled is not None
    extents = _vector_extents(scheduled)
    assert extents and set(extents) == {lanes}, extents
    # the depthwise schedule's tile (the window unrolled), not the generic reduction's
    assert len(re.findall(rf"T\.unroll\((?:T\.int64\()?{kernel}\)", scheduled.script())) >= 2
    columns, vectors = schedules._depthwise_tile(8, channels // lanes, lanes)
    assert columns * vectors <= DEPTHWISE_ACCUMULATORS[lanes]
    result = call_kernel(scheduled, [image, hwio, np.zeros(image.shape, np.float32)])
    padded = np.pad(image, [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    taps = [(y, x) for y in range(kernel) for x in range(kernel)]
    want = sum(padded[:, y : y + 8, x : x + 8, :] * hwio[y, x, 0] for y, x in taps)
    np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(("channels", "lanes"), [(768, 16), (960, 16), (1152, 16), (576, 8), (1152, 4)])
def test_depthwise_tiles_of_narrow_images_span_their_columns(channels, lanes):
    """The 7 x 7 images of the last stages (ConvNeXt's 768 channels, MobileNet v2's 960,
    EfficientNet's 1152): a tile of 7 columns, each weight vector loaded once for them, not
    12 vectors of one column, which loaded a weight vector for every multiply-add (1.3-3.2x
    slower, AVX-512 and AVX2)."""
    from relay2cmake.lower.schedules import DEPTHWISE_ACCUMULATORS

    columns, vectors = schedules._depthwise_tile(7, channels // lanes, lanes)
    assert columns == 7 and columns * vectors <= DEPTHWISE_ACCUMULATORS[lanes], (columns, vectors)


@pytest.mark.parametrize(
    ("channels", "stride", "lanes"),
    [
        *[(58, 1, 16), (58, 2, 16), (58, 1, 8), (58, 2, 4), (116, 1, 16), (6, 1, 16), (6, 2, 8), (5, 1, 16)],
        *[(120, 1, 16), (40, 2, 16), (72, 1, 16)],
    ],
)
def test_depthwise_over_channels_only_narrow_vectors_divide_uses_full_vectors(channels, stride, lanes):
    """ShuffleNet v2's 58 and 116 channels (29 x 2^k) got scalar or 4-lane tiles (13 and 28
    GFLOPS, AVX-512): now full-width vectors, the last one predicated, the tiles in parallel
    as gen schedules them; so do MobileNet v3's 120 and GhostNet's 40 (7.5 and 2.5 vectors
    of 16, which got vectors of 8); GhostNet's 6 channels (scalar, 5 GFLOPS) one predicated
    vector of 8. The numbers are numpy's, and nothing is written past the output."""
    import tvm
    from tvm import te

    rng = np.random.default_rng(channels + stride)
    size = 9
    image = rng.standard_normal((1, size, size, channels)).astype(np.float32)
    hwio = rng.standard_normal((3, 3, 1, channels)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    weight = te.placeholder(hwio.shape, name="weight")
    out = nhwc._conv2d_nhwc(data, weight, [stride, stride], [1] * 4, [1, 1], True, channels)
    options = ScheduleOptions(vector_lanes=lanes, vectorize=True, parallel=True)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), options)
    assert scheduled is not None
    extents = _vector_extents(scheduled)
    vector = min(lanes, 1 << (channels - 1).bit_length())
    # (the write-back of fewer channels than a vector stores exactly them)
    assert vector in extents and set(extents) <= {vector, channels}, extents
    side = (size - 1) // stride + 1
    count = side * side * channels
    buffer = _aligned(count + 64, 12345.0)
    output = buffer[:count].reshape(1, side, side, channels)
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": scheduled}), target=tvm.target.Target("llvm"))
    library["main"](tvm.runtime.tensor(image), tvm.runtime.tensor(hwio), tvm.runtime.from_dlpack(output))
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    taps = [(y, x) for y in range(3) for x in range(3)]
    want = sum(padded[:, y : y + size : stride, x : x + size : stride, :] * hwio[y, x, 0] for y, x in taps)
    np.testing.assert_allclose(output, want, rtol=1e-4, atol=1e-4)
    assert np.all(buffer[count:] == 12345.0), "the kernel wrote past its output"


@pytest.mark.parametrize("kind", ["sum", "max", "float64 sum", "max pool"])
def test_reductions_over_outer_axes_vectorize_the_channels(kind):
    """Squeeze-excite's mean over H x W of channels-last data, float64 accumulation of a long
    sum, and pooling: the channels are vectorized inside the reduction loops, and the results
    are numpy's."""
    from tvm import te, topi

    rng = np.random.default_rng(3)
    image = rng.standard_normal((1, 12, 10, 40)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    if kind == "sum":
        out, want = topi.sum(data, axis=(1, 2), keepdims=True), image.sum(axis=(1, 2), keepdims=True)
    elif kind == "max":
        out, want = topi.max(data, axis=(1, 2), keepdims=True), image.max(axis=(1, 2), keepdims=True)
    elif kind == "float64 sum":
        out = topi.sum(topi.cast(data, "float64"), axis=(1, 2), keepdims=True)
        want = image.astype(np.float64).sum(axis=(1, 2), keepdims=True)
    else:
        out = topi.nn.pool2d(data, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", layout="NHWC")
        padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=-np.inf)
        want = np.stack(
            [
                np.stack([padded[0, 2 * y : 2 * y + 3, 2 * x : 2 * x + 3].max(axis=(0, 1)) for x in range(5)])
                for y in range(6)
            ]
        )[None]
    func = te.create_prim_func([data, out])
    scheduled = schedule_function(func, ScheduleOptions(vector_lanes=8, vectorize=True, parallel=True))
    assert scheduled is not None
    lanes = 4 if kind == "float64 sum" else 8
    assert set(_vector_extents(scheduled)) == {lanes}, _vector_extents(scheduled)
    result = call_kernel(scheduled, [image, np.zeros(want.shape, want.dtype)])
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


def test_a_max_pool_over_channels_only_half_a_register_divides_uses_half_registers():
    """ShuffleNet's max pool over 24 channels with AVX-512's 16 lanes: 8-lane vectors inside
    the window loops (the pool was left to TVM's scalar lowering), numpy's maxima."""
    from tvm import te, topi

    image = np.random.default_rng(4).standard_normal((1, 14, 14, 24)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    out = topi.nn.pool2d(data, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", layout="NHWC")
    func = te.create_prim_func([data, out])
    scheduled = schedule_function(func, ScheduleOptions(vector_lanes=16, vectorize=True, parallel=True))
    assert scheduled is not None
    assert set(_vector_extents(scheduled)) == {8}, _vector_extents(scheduled)
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=-np.inf)
    want = np.stack(
        [
            np.stack([padded[0, 2 * y : 2 * y + 3, 2 * x : 2 * x + 3].max(axis=(0, 1)) for x in range(7)])
            for y in range(7)
        ]
    )[None]
    result = call_kernel(scheduled, [image, np.zeros(want.shape, want.dtype)])
    np.testing.assert_array_equal(result, want)


@pytest.mark.parametrize("kind", ["max pool", "max", "min"])
def test_running_maxima_in_vectors_propagate_nan_through_their_flags(kind):
    """x86's running maxima of vectorized loops (max pooling's windows, maxima and minima over
    outer axes) take the plain compare-and-select and a flag of the largest magnitude bits
    (``flagged_maxima``): a window or axis holding a NaN (either sign, in any position, also
    the first) gives NaN; infinities, -0 and rows of -inf give numpy's values (a window of
    -inf and padding: -inf, not the padding's -FLT_MAX)."""
    import tvm
    from tvm import te, topi

    from relay2cmake.lower.rewrites.numerics import flagged_maxima, infinite_reduction_identities

    rng = np.random.default_rng(5)
    image = rng.standard_normal((1, 12, 10, 48)).astype(np.float32)
    image[0, 0, 0, :5] = np.nan  # a window's (and the axis') first element
    image[0, 5, 7, 7:9] = -np.nan  # x86's default NaN is negative
    image[0, 11, 9, 20] = np.nan  # the last element
    image[0, 3, 4, 30:34] = [np.inf, -np.inf, -0.0, 0.0]
    image[0, :4, :4, 40] = -np.inf
    data = te.placeholder(image.shape, name="data")
    if kind == "max pool":
        out = topi.nn.pool2d(data, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", layout="NHWC")
        padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)], constant_values=-np.inf)
        windows = [[padded[0, 2 * y : 2 * y + 3, 2 * x : 2 * x + 3] for x in range(5)] for y in range(6)]
        want = np.array([[w.max(axis=(0, 1)) for w in row] for row in windows])[None]
    elif kind == "max":
        out, want = topi.max(data, axis=(1, 2), keepdims=True), image.max(axis=(1, 2), keepdims=True)
    else:
        out, want = topi.min(data, axis=(1, 2), keepdims=True), image.min(axis=(1, 2), keepdims=True)
    assert np.isnan(want).any() and not np.isnan(want).all()
    lowered = infinite_reduction_identities(tvm.IRModule({"main": te.create_prim_func([data, out])}))["main"]
    scheduled = schedule_function(lowered, ScheduleOptions(vector_lanes=16, vectorize=True, parallel=True))
    assert scheduled is not None
    flagged = flagged_maxima(tvm.IRModule({"main": scheduled}))["main"]
    assert "_nan" in flagged.script(), "the running maxima kept llvm.maximum"
    result = call_kernel(scheduled, [image, np.zeros(want.shape, want.dtype)])
    np.testing.assert_array_equal(np.isnan(result), np.isnan(want))
    np.testing.assert_array_equal(result, want)  # NaN positions equal; -0 == 0


@pytest.mark.parametrize("kind", ["max", "min", "sum", "argmax"])
@pytest.mark.parametrize("row", [45, 64])
def test_reductions_over_the_last_axis_take_vectors_and_a_predicated_tail(kind, row):
    """A reduction over the last axis alone (SSD's best of 90 classes a box) is reduced in
    vectors of partial results, the last one predicated where no vector divides the row (45:
    two vectors of 16 and 13 lanes), then combined by halving: numpy's values, NaN of either sign in any
    position (also in the tail), infinities and rows of -inf for max and min; the first index
    of equal maxima for argmax."""
    import tvm
    from tvm import te, topi

    from relay2cmake.lower.rewrites.numerics import infinite_reduction_identities

    rng = np.random.default_rng(row)
    rows = rng.standard_normal((6, 7, row)).astype(np.float32)
    if kind == "argmax":
        rows[2, 3, [5, 40]] = 9.0  # equal maxima: the first wins
        rows[4, 1, row - 1] = 9.5  # in the tail
    elif kind != "sum":
        rows[0, 0, 0] = np.nan
        rows[1, 2, row - 1] = -np.nan
        rows[3, 3, 20] = np.nan
        rows[5, 6, :] = -np.inf if kind == "max" else np.inf
        rows[2, 2, [3, row - 2]] = [np.inf, -np.inf]
    data = te.placeholder(rows.shape, name="data")
    out = {"max": topi.max, "min": topi.min, "sum": topi.sum, "argmax": topi.argmax}[kind](data, axis=2)
    want = getattr(rows, kind)(axis=2)
    lowered = infinite_reduction_identities(tvm.IRModule({"main": te.create_prim_func([data, out])}))["main"]
    scheduled = schedule_function(lowered, ScheduleOptions(vector_lanes=16, vectorize=True, parallel=True))
    assert scheduled is not None and "T.vectorized" in scheduled.script()
    assert {8, 4, 2} <= set(_vector_extents(scheduled)), "the partial results combined one by one"
    result = call_kernel(scheduled, [rows, np.zeros(want.shape, str(out.dtype))])
    if kind == "sum":
        np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(result, want)  # NaN positions equal


@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_fast_sigmoid_and_tanh_match_float64_and_leave_no_libm_call(op):
    """The fast-math rewrite's sigmoid (1 / (1 + fast_exp(-x))) and tanh (topi.fast_tanh):
    within 2e-6 absolute and 1e-5 relative (where the value is not tiny) of float64 over
    [-30, 30], exact at +-inf, NaN for NaN; built for the x86 set, the kernel's machine code
    calls no scalar expf/tanhf (LLVM turns a vector llvm.exp into one call per lane)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    x = np.concatenate([np.linspace(-30, 30, 4093), [np.inf, -np.inf, np.nan]]).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(getattr(relax.op, op)(data))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, _ = scheduled_kernels(bb.get(), target)
    with build_context():
        assembly = tvm.tirx.build(kernels, target=target.tvm_target()).inspect_source("s")
    assert not re.search(r"call\w*\s+(expf|tanhf)\b", assembly), "a scalar libm call is left"
    executable = tvm.compile(lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([]))
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    exact = {"sigmoid": lambda v: 1 / (1 + np.exp(-v)), "tanh": np.tanh}[op](x.astype("float64"))
    finite = np.isfinite(x)
    error = np.abs(got[finite] - exact[finite])
    assert error.max() <= 2e-6, error.max()
    large = np.abs(exact[finite]) > 1e-3
    assert (error[large] / np.abs(exact[finite][large])).max() <= 1e-5
    assert np.array_equal(got[~finite][:2], exact[~finite][:2]) and np.isnan(got[-1])


def test_fast_sigmoid_of_large_negative_arguments_is_a_normal_float():
    """sigmoid(x) for x from -1000 to -80 (random weights give activations in the hundreds): a
    normal float32 within 2e-38 of float64's value, never a subnormal, which the division made
    and the next multiply read through microcode assists (MixNet-S's SiLU kernel 6x slower on
    such inputs). The exponential is capped at exp(87) for the sigmoid alone."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    x = np.linspace(-1000, -80, 4099).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.multiply(data, relax.op.sigmoid(data)))  # SiLU
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, _, _ = scheduled_kernels(bb.get(), target)
    executable = tvm.compile(lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([]))
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    sigmoid = got / x
    assert np.all(np.abs(sigmoid) >= np.finfo(np.float32).tiny), sigmoid.min()
    exact = 1 / (1 + np.exp(-x.astype("float64")))
    assert np.abs(sigmoid - exact).max() <= 2e-38


def test_fast_exp_is_within_float32_rounding_of_exp_without_a_rounding_instruction():
    """Softmax's and sigmoid's exponential (fast_math._fast_exp): n = round(x / ln 2) read from
    the bits of a float sum, not a round or floor instruction. Within 4.5e-7 of float64's exp
    over its whole normal range (a million points: 4.0e-7, most of it the range reduction's at
    large |x|), 0 to a denormal below it, +inf and NaN kept; in the vectorized loop of both x86
    sets, no vroundps/vrndscaleps."""
    import tvm
    from tvm import te

    from relay2cmake.lower.pipeline import build_kernels
    from relay2cmake.lower.rewrites.fast_math import _fast_exp
    from relay2cmake.targets import parse_targets

    x = np.concatenate(
        [np.linspace(-87.3, 88.3, 1 << 20), [0.0, -0.0, 1e-30, -100.0, -88.5, np.inf, -np.inf, np.nan]]
    ).astype("float32")
    data = te.placeholder(x.shape, "float32", name="x")
    func = te.create_prim_func([data, _fast_exp(data)])
    scheduled = schedule_function(func, ScheduleOptions(vector_lanes=16, vectorize=True, parallel=False))
    assert scheduled is not None and "T.vectorized" in scheduled.script()
    got = call_kernel(scheduled, [x, np.zeros_like(x)])
    exact = np.exp(x.astype(np.float64))
    normal = (exact > np.finfo(np.float32).tiny) & np.isfinite(exact)
    assert normal.sum() == (1 << 20) + 3
    assert (np.abs(got[normal] - exact[normal]) / exact[normal]).max() <= 4.5e-7
    assert np.all(got[[-5, -4]] < 1.2e-38) and np.all(got[[-5, -4]] >= 0)
    assert got[-3] == np.inf and got[-2] == 0 and np.isnan(got[-1])
    for target in parse_targets(["x86_64"])[-1:]:
        for variant in (target, target.wide_variant()):
            library = build_kernels(tvm.IRModule({"main": scheduled}), variant.tvm_target(), "exp")
            assert not re.search(r"\bv(round|rndscale)ps\b", library.inspect_source("asm")), variant.label


def test_winograd_output_with_a_silu_epilogue_is_scheduled():
    """MobileViT's 3x3 convs end in SiLU, which reads the conv's result twice (x * sigmoid(x)).
    Folded into Winograd's output transform one consumer at a time, that left a read of a
    buffer nothing wrote any more, LLVM refused the kernel and it shipped unscheduled. The
    intermediates are inlined first now: the output kernel is scheduled, builds, and gives
    the unscheduled kernel's numbers."""
    from tvm import relax

    from relay2cmake.lower.pipeline import _kernels_of, lowered_module, scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(7)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 32, 14, 14), "float32"))
    weight = relax.const(rng.standard_normal((32, 32, 3, 3)).astype("float32"))
    bias = relax.const(rng.standard_normal((1, 32, 1, 1)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            conv = bb.emit(relax.op.add(relax.op.nn.conv2d(x, weight, padding=1), bias))
            out = bb.emit_output(relax.op.multiply(conv, relax.op.sigmoid(conv)))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, scheduled, names = scheduled_kernels(bb.get(), target)
    plain = _kernels_of(lowered_module(bb.get())[0])
    outputs = [name for name in names if "winograd_output" in name]
    assert outputs, f"no scheduled Winograd output kernel among {sorted(names)}"
    for name in outputs:
        arrays = [
            rng.standard_normal([int(d) for d in param.shape]).astype("float32")
            for param in scheduled[name].params
        ]
        got = call_kernel(scheduled[name], [a.copy() for a in arrays])
        want = call_kernel(plain[name], [a.copy() for a in arrays])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(("size", "parallel"), [(14, False), (56, True)])
def test_small_winograd_transforms_run_on_the_caller_alone(size, parallel):
    """Winograd's transforms of a 14 x 14 x 32 image (25 Ki and 6 Ki elements) have no
    parallel loop, as small injective kernels have none (NFNet-L0's took 6.2 us a call on one
    thread and 11.2 us on two); those of a 56 x 56 image keep theirs. The product is not a
    transform and stays parallel either way."""
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(8)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 32, size, size), "float32"))
    weight = relax.const(rng.standard_normal((32, 32, 3, 3)).astype("float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.relu(relax.op.nn.conv2d(x, weight, padding=1)))
        bb.emit_func_output(out)
    _, scheduled, names = scheduled_kernels(bb.get(), parse_targets(["x86_64"])[-1])
    kinds = {kind: [n for n in names if kind in n] for kind in ("winograd_input", "winograd_output")}
    assert all(kinds.values()), sorted(names)
    for kind, found in kinds.items():
        for name in found:
            assert ("T.parallel" in scheduled[name].script()) == parallel, (kind, name)
    products = [n for n in names if "winograd_product" in n]
    assert products and all("T.parallel" in scheduled[n].script() for n in products), sorted(names)


@pytest.mark.parametrize("length", [196, 200, 197, 64])
@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_rows_that_the_register_does_not_divide_are_scheduled_and_exact(op, length):
    """Softmax and layer norm over rows of 196 (MobileViT's attention) and 200 get partial
    sums in 4- or 8-lane vectors, 64 in whole registers, 197 none: each kernel is scheduled,
    and its numbers are NumPy's in float64 (within float32 rounding)."""
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(length)
    x = (4 * rng.standard_normal((3, 5, length))).astype("float32")
    gamma = rng.standard_normal(length).astype("float32")
    beta = rng.standard_normal(length).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            if op == "softmax":
                result = relax.op.nn.softmax(data, axis=-1)
            else:
                result = relax.op.nn.layer_norm(data, relax.const(gamma), relax.const(beta), axes=[-1])
            out = bb.emit_output(result)
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (name,) = [gv.name_hint for gv in kernels.get_global_vars()]
    assert name in scheduled, f"{name} was left unscheduled"
    func = kernels[name]
    arrays = [x] + ([gamma, beta] if len(func.params) == 4 else []) + [np.zeros_like(x)]
    got = call_kernel(func, arrays)
    wide = x.astype("float64")
    if op == "softmax":
        exp = np.exp(wide - wide.max(axis=-1, keepdims=True))
        want = exp / exp.sum(axis=-1, keepdims=True)
    else:
        centred = wide - wide.mean(axis=-1, keepdims=True)
        want = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-5) * gamma + beta
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_softmax_over_a_run_time_row_length_is_scheduled_and_exact_at_every_length():
    """Attention's softmax over 1..40 tokens (rows and row length chosen at run time): one
    scheduled kernel (stages under the row loop, rows in parallel, no partial sums), called
    at several lengths, gives NumPy's float64 numbers; the floats after the output are
    untouched."""
    import tvm
    from tvm import relax, tirx

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    n = tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType((2, n, n), "float32"))
    with bb.function("main", [data], {"tir_var_upper_bound": {"n": 40}, "tir_var_lower_bound": {"n": 1}}):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.softmax(data, axis=-1))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (name,) = [gv.name_hint for gv in kernels.get_global_vars()]
    assert name in scheduled and "T.parallel" in kernels[name].script()
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": kernels[name]}), target=target.tvm_target())
    for length in (1, 7, 16, 33, 40):
        x = (4 * np.random.default_rng(length).standard_normal((2, length, length))).astype("float32")
        count = x.size
        buffer = _aligned(count + 64, 12345.0)
        output = buffer[:count].reshape(x.shape)
        library["main"](tvm.runtime.tensor(x), tvm.runtime.from_dlpack(output))
        wide = x.astype("float64")
        exp = np.exp(wide - wide.max(axis=-1, keepdims=True))
        np.testing.assert_allclose(output, exp / exp.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
        assert np.all(buffer[count:] == 12345.0), f"the kernel wrote past its output at {length} tokens"


def _aligned(count: int, fill: float) -> np.ndarray:
    raw = np.full(count + 16, fill, dtype="float32")
    offset = (-raw.ctypes.data % 64) // 4
    return raw[offset : offset + count]


AWKWARD_EXTENTS = [
    (128, 128, 50257), (3, 64, 1001), (1, 32, 37), (197, 192, 576), (5, 16, 64), (13, 64, 5003), (13, 64, 37),
    ((1, 14, 14), 96, 384), ((1, 7, 7), 64, 48),  # channels-last dense layers (ConvNeXt): rows of 14 and 7
]  # fmt: skip


@pytest.mark.parametrize(("rows", "depth", "columns"), AWKWARD_EXTENTS)
def test_matmul_with_awkward_extents_is_vectorized_and_stays_in_bounds(rows, depth, columns):
    """Packed matmuls whose N not even 4 divides (GPT-2's LM head) compute padded register
    tiles and store only the first N columns; an M that few row counts divide (ViT's 197
    tokens, ConvNeXt's rows of 14 pixels under outer image dimensions) gets full row tiles
    and a predicated last one. The numbers match NumPy, and the floats right after the
    output (a sentinel) are untouched."""
    import tvm

    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(0)
    lead = rows if isinstance(rows, tuple) else (rows,)
    rows = math.prod(lead)
    x = rng.standard_normal((*lead, depth)).astype("float32")
    w = rng.standard_normal((depth, columns)).astype("float32")
    target = parse_targets(["x86_64"])[-1]
    func, scheduled = _matmul_kernel(x, w, target)
    assert scheduled, "the matmul was left unscheduled"
    assert "T.vectorized" in func.script()
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": func}), target=target.tvm_target())
    if columns % 8 and columns > 64:
        # Full column tiles store whole vectors, only the last, cut one lane by lane (before
        # the tail was split off, every tile did: 20-40% of the LM head's time).
        assembly = library.inspect_source("s")
        assert re.search(r"vmovups\s+%ymm\d+,\s*-?\d*\(%r(?!sp)", assembly), "no tile stores whole vectors"
    buffer = _aligned(rows * columns + 64, 12345.0)
    output = buffer[: rows * columns].reshape(*lead, columns)
    constant = [p for p in func.params][1]  # the packed weights, as the kernel reads them
    packed = np.zeros([int(d) for d in constant.shape], dtype="float32")
    padded = np.pad(w, [(0, 0), (0, packed.shape[0] * packed.shape[2] - columns)])
    packed[...] = padded.reshape(depth, packed.shape[0], packed.shape[2]).transpose(1, 0, 2)
    library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(packed), tvm.runtime.from_dlpack(output))
    np.testing.assert_allclose(output, x @ w, rtol=1e-4, atol=1e-4)
    assert np.all(buffer[rows * columns :] == 12345.0), "the kernel wrote past its output"


def _matmul_kernel(x, w, target):
    """The kernel of ``x @ w`` (w a constant) as gen schedules it for ``target`` (parallel),
    and the names of the scheduled kernels."""
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels

    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(data, relax.const(w)))
        bb.emit_func_output(out)
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (func,) = kernels.functions.values()
    return func, scheduled


def test_a_parallel_matmul_keeps_its_predicated_row_tiles_out_of_the_parallel_loop():
    """Swin's last-stage MLP, a dense layer on 7 x 7 x 768 channels-last data: rows of 7 in
    tiles of 4, the last predicated. Fused into the parallel loop, the row tiles could not be
    peeled, so every multiply-add kept the row condition and the accumulators spilled to the
    stack (4.5 ms in a parallel build against 3.0 serial, one thread). Now the parallel loop
    runs over column tiles and image rows only, and the kernel keeps its accumulators in
    registers; it still equals NumPy."""
    import tvm

    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 7, 7, 64)).astype("float32")
    w = rng.standard_normal((64, 256)).astype("float32")
    target = parse_targets(["x86_64:x86-64-v3"])[-1]
    func, _ = _matmul_kernel(x, w, target)  # parallel, as gen builds it
    (extent,) = re.findall(r"in T\.parallel\(T\.int64\((\d+)\)\)", func.script())
    assert int(extent) == 256 // 16 * 7, "the row tiles are still fused into the parallel loop"
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": func}), target=target.tvm_target())
    spills = re.findall(r"vmov[au]ps\s+%ymm\d+, -?\d*\(%rsp\)", library.inspect_source("s"))
    assert not spills, f"accumulators spilled to the stack: {spills[:3]}"
    constant = func.params[1]
    packed = np.ascontiguousarray(w.reshape(64, int(constant.shape[0]), 16).transpose(1, 0, 2))
    output = _aligned(7 * 7 * 256, 0.0).reshape(1, 7, 7, 256)  # the kernel's vector stores need 64 bytes
    library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(packed), tvm.runtime.from_dlpack(output))
    np.testing.assert_allclose(output, x @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(24, 1, 64), (24, 1, 1, 64)])
def test_a_dense_layer_on_time_major_data_takes_its_rows_along_the_outer_axis(shape):
    """XLNet's dense layers run on [sequence, batch = 1, features]: the matmul's own row axis
    has extent 1. A tile of one row read a vector of weights per multiply-add (50 GFLOPS);
    the outer axes are now the rows, in tiles of 4, and it equals NumPy."""
    import tvm

    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype("float32")
    w = rng.standard_normal((64, 32)).astype("float32")
    target = parse_targets(["x86_64:x86-64-v3"])[-1]
    func, _ = _matmul_kernel(x, w, target)
    assert re.search(r"fused_1 in T\.unroll\(T\.int64\(4\)\)", func.script()), func.script()
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": func}), target=target.tvm_target())
    packed = np.ascontiguousarray(w.reshape(64, 2, 16).transpose(1, 0, 2))
    output = _aligned(24 * 32, 0.0).reshape(*shape[:-1], 32)
    library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(packed), tvm.runtime.from_dlpack(output))
    np.testing.assert_allclose(output, x @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("batch", "rows", "depth", "columns"), [(3, 197, 64, 197), (2, 37, 13, 37), (4, 196, 24, 196)]
)
def test_batched_matmul_with_computed_operand_is_packed_and_stays_in_bounds(batch, rows, depth, columns):
    """Attention's Q.K^T over 197 tokens (ViT) or 196 (MobileViT): the computed right
    operand, whose N not even 4 divides or 16 does not, is packed at run time and the product
    gets vector tiles with padded rows and columns; only [rows, columns] of each batch is
    stored (a sentinel after the output)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(1)
    a = rng.standard_normal((batch, rows, depth)).astype("float32")
    b = rng.standard_normal((batch, depth, columns)).astype("float32")
    bb = relax.BlockBuilder()
    left = relax.Var("a", relax.TensorType(a.shape, "float32"))
    right = relax.Var("b", relax.TensorType(b.shape, "float32"))
    with bb.function("main", [left, right]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(left, right))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    names = {gv.name_hint: gv for gv in kernels.get_global_vars()}
    (pack,) = [n for n in names if "pack_columns" in n]
    (product,) = [n for n in names if n != pack]
    assert product in scheduled and "T.vectorized" in kernels[product].script()
    with build_context():
        build = {
            n: tvm.tirx.build(tvm.IRModule({"main": kernels[n]}), target=target.tvm_target()) for n in names
        }
    packed_param = kernels[pack].params[-1]
    packed = tvm.runtime.tensor(np.zeros([int(d) for d in packed_param.shape], "float32"))
    build[pack]["main"](tvm.runtime.tensor(b), packed)
    count = batch * rows * columns
    buffer = _aligned(count + 64, 12345.0)
    output = buffer[:count].reshape(batch, rows, columns)
    build[product]["main"](tvm.runtime.tensor(a), packed, tvm.runtime.from_dlpack(output))
    np.testing.assert_allclose(output, a @ b, rtol=1e-4, atol=1e-4)
    assert np.all(buffer[count:] == 12345.0), "the kernel wrote past its output"


@pytest.mark.parametrize("columns", [64, 37])
def test_matmul_with_rows_chosen_at_run_time_has_register_tiles_at_every_row_count(columns):
    """Rows known only at run time (a sequence of 1..40 tokens) are computed in 4s, the cut
    keeps the real ones (and the first 37 of 48 columns): one kernel, called at several row
    counts, matches NumPy, writes nothing past its output, and asks the workspace for
    nothing (its accumulators live in registers, not a whole output per tile)."""
    import tvm
    from tvm import relax, tirx

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    depth = 32
    w = np.random.default_rng(2).standard_normal((depth, columns)).astype("float32")
    n = tirx.Var("n", "int64")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType((n, depth), "float32"))
    with bb.function("main", [data], {"tir_var_upper_bound": {"n": 40}, "tir_var_lower_bound": {"n": 1}}):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(data, relax.const(w)))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (func,) = kernels.functions.values()
    assert scheduled and "T.vectorized" in func.script()
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": func}), target=target.tvm_target())
    assert "TVMBackendAllocWorkspace" not in library.inspect_source("ll")
    constant = func.params[1]
    packed = np.zeros([int(d) for d in constant.shape], dtype="float32")
    padded = np.pad(w, [(0, 0), (0, packed.shape[0] * packed.shape[2] - columns)])
    packed[...] = padded.reshape(depth, packed.shape[0], packed.shape[2]).transpose(1, 0, 2)
    for rows in (1, 5, 8, 37, 40):
        x = np.random.default_rng(rows).standard_normal((rows, depth)).astype("float32")
        buffer = _aligned(rows * columns + 64, 12345.0)
        output = buffer[: rows * columns].reshape(rows, columns)
        library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(packed), tvm.runtime.from_dlpack(output))
        np.testing.assert_allclose(output, x @ w, rtol=1e-4, atol=1e-4)
        assert np.all(buffer[rows * columns :] == 12345.0), f"the kernel wrote past its output at {rows} rows"


@pytest.mark.parametrize("product", ["q.kT", "p.v"])
def test_attention_products_over_a_run_time_sequence_are_packed_and_stay_in_bounds(product):
    """Attention over 1..40 tokens: Q.K^T has run-time rows and columns, P.V run-time rows
    and depth. Both pack their computed right operand and get vector tiles over whole
    blocks; one pair of kernels, called at several lengths, matches NumPy and writes
    nothing past its output."""
    import tvm
    from tvm import relax, tirx

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    heads, size = 2, 24
    n = tirx.Var("n", "int64")
    left_shape, right_shape = (
        ((heads, n, size), (heads, size, n)) if product == "q.kT" else ((heads, n, n), (heads, n, size))
    )
    bb = relax.BlockBuilder()
    left = relax.Var("a", relax.TensorType(left_shape, "float32"))
    right = relax.Var("b", relax.TensorType(right_shape, "float32"))
    with bb.function(
        "main", [left, right], {"tir_var_upper_bound": {"n": 40}, "tir_var_lower_bound": {"n": 1}}
    ):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(left, right))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, kernels, scheduled = scheduled_kernels(bb.get(), target)
    names = {gv.name_hint for gv in kernels.get_global_vars()}
    (pack,) = [name for name in names if "pack_columns" in name]
    (matmul,) = names - {pack}
    assert matmul in scheduled and "T.vectorized" in kernels[matmul].script()
    with build_context():
        build = {
            name: tvm.tirx.build(tvm.IRModule({"main": kernels[name]}), target=target.tvm_target())
            for name in names
        }
    for length in (1, 7, 16, 33, 40):
        rng = np.random.default_rng(length)
        shape = {n: length}
        a = rng.standard_normal([shape.get(d, d) for d in left_shape]).astype("float32")
        b = rng.standard_normal([shape.get(d, d) for d in right_shape]).astype("float32")
        # Run-time columns (Q.K^T's) are packed and computed in whole 32s, static ones in 16s.
        blocks = 2 * -(-length // 32) if product == "q.kT" else -(-b.shape[-1] // 16)
        packed = tvm.runtime.tensor(np.zeros((heads, blocks, b.shape[-2], 16), "float32"))
        build[pack]["main"](tvm.runtime.tensor(b), packed)
        count = heads * length * b.shape[-1]
        buffer = _aligned(count + 64, 12345.0)
        output = buffer[:count].reshape(heads, length, b.shape[-1])
        build[matmul]["main"](tvm.runtime.tensor(a), packed, tvm.runtime.from_dlpack(output))
        np.testing.assert_allclose(output, a @ b, rtol=1e-4, atol=1e-4)
        assert np.all(buffer[count:] == 12345.0), f"the kernel wrote past its output at {length} tokens"


def test_portable_kernels_hold_no_padded_product_in_scratch():
    """A matmul over padded columns (N = 50257 in GPT-2's LM head, here 1001) is tiled in
    the portable C set too: its product lives in a stack tile, not in arena scratch the size
    of the whole padded output (which the package's one arena held for every kernel set:
    GPT-2's arena was 51.5 MB instead of 25.8)."""
    from tvm import relax

    from relay2cmake.lower.pipeline import lower

    rows, depth, columns = 64, 32, 1001
    w = np.random.default_rng(0).standard_normal((depth, columns)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType((rows, depth), "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(data, relax.const(w)))
        bb.emit_func_output(out)
    lowered = lower(bb.get(), "t")
    assert "r2c_matmul_columns" in lowered.code.c_source, "the product is not a padded-column cut"
    assert max(lowered.kernel_scratch.values(), default=0) < 4096, lowered.kernel_scratch


@pytest.mark.parametrize(
    ("widths", "dtype", "permute"),
    [
        ((64, 32, 32, 96), "float32", True),
        ((3, 5, 24, 1), "float32", True),
        ((6, 6), "float32", False),
        ((168, 168), "float32", False),
        ((16, 48), "int8", True),
        ((7, 9), "float64", True),
    ],
)
def test_injective_kernels_are_vectorized_and_exact(widths, dtype, permute):
    """Kernels of spatial blocks only (DenseNet's concat + scale + ReLU, a transpose) are
    scheduled: one block, vector loops, a concat's input conditions split off by
    LoopPartition; the results equal NumPy's exactly, whatever the channel boundaries
    (multiples of the vector width or not), tails and dtypes."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(2)
    parts = [(rng.standard_normal((1, 6, 7, w)) * 50).astype(dtype) for w in widths]
    total = sum(widths)
    scale = (rng.standard_normal(total) * 3).astype(dtype)
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(p.shape, dtype)) for i, p in enumerate(parts)]
    with bb.function("main", params):
        with bb.dataflow():
            joined = bb.emit(relax.op.concat(params, axis=3))
            scaled = bb.emit(relax.op.multiply(joined, relax.const(scale, dtype)))
            mapped = bb.emit(relax.op.maximum(scaled, relax.const(0, dtype)))
            out = bb.emit_output(relax.op.permute_dims(mapped, [0, 3, 1, 2]) if permute else mapped)
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    assert scheduled, f"no kernel was scheduled: {[gv.name_hint for gv in kernels.get_global_vars()]}"
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(p) for p in parts]).numpy()
    want = np.maximum(np.concatenate(parts, axis=3) * scale, 0)
    want = want.transpose(0, 3, 1, 2) if permute else want  # GhostNet's 6 + 6: channels innermost
    np.testing.assert_array_equal(got, want)


def test_a_slice_after_a_reshape_reads_plain_indices():
    """SSD drops the background class with a slice of reshaped scores: TVM's indices
    ``[((v + 1) // 91 + u) % rows, (v + 1) % 91]`` are ``[u, v + 1]`` within the block's
    ranges (v < 90), simplified so before vectors split v (the divisions made every vector a
    gather: 16 GB/s); the values are NumPy's."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    scores = np.random.default_rng(3).standard_normal(50 * 91).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(scores.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            rows = bb.emit(relax.op.reshape(data, (50, 91)))
            out = bb.emit_output(relax.op.strided_slice(rows, axes=[1], begin=[1], end=[91]))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (text,) = [func.script() for func in kernels.functions.values()]
    assert scheduled and "T.vectorized" in text and "% T.int64(91)" not in text, text
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(scores)).numpy()
    np.testing.assert_array_equal(got, scores.reshape(50, 91)[:, 1:])


@pytest.mark.parametrize("stage", ["plain", "scaled", "two shifts"])
def test_a_reshape_of_a_slice_reads_its_input_through_a_flat_view(stage):
    """Funnel's relative-position shift: ``[1, 4, 256, 128]`` without its first row, read
    back as ``[1, 4, 128, 255]``. Its indices divide the innermost iterator by 128 (every
    vector a gather: 12 GB/s), yet each head is one contiguous run of the input: the load
    reads a flat view of the input at ``head * 32768 + row * 255 + column + 128``, in plain
    vectors (0.085 -> 0.013 ms); the values are NumPy's, with a scale fused in, and with a
    second shift of the same input (without its last row) added: one view, two offsets."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(6)
    scores = rng.standard_normal((1, 4, 256, 128)).astype("float32")
    scale = rng.standard_normal(255).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(scores.shape, "float32"))

    def shift(begin: int):
        rows = relax.op.strided_slice(data, axes=[2], begin=[begin], end=[begin + 255])
        return relax.op.reshape(rows, (1, 4, 128, 255))

    with bb.function("main", [data]):
        with bb.dataflow():
            out = shift(1)
            if stage == "scaled":
                out = relax.op.multiply(out, relax.const(scale))
            if stage == "two shifts":
                out = relax.op.add(out, shift(0))
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (func,) = kernels.functions.values()
    text = func.script()
    assert scheduled and "T.vectorized" in text and text.count("x_flat = ") == 1, text
    blocks = schedules._collect(func, tvm.s_tir.SBlock, lambda b: bool(b.iter_vars))
    assert not any(schedules._innermost_divided(b) for b in blocks), text
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(scores)).numpy()
    want = scores[:, :, 1:, :].reshape(1, 4, 128, 255)
    if stage == "scaled":
        want = want * scale
    if stage == "two shifts":
        want = want + scores[:, :, :255, :].reshape(1, 4, 128, 255)
    np.testing.assert_array_equal(got, want)


def test_heads_reshaped_to_rows_read_plain_vectors_along_the_rows():
    """SSD's class scores: each head's [1, H, W, 6 x 91] as rows of 91, the heads' rows
    concatenated. Within the block's ranges a row's elements are contiguous (the divisions of
    the element index vanish) while the row index keeps its divisions, one value a vector:
    simplified so, the vectors are plain loads (the divided indices made every vector a
    gather: 5.6 GB/s, 4.3x slower); the values are NumPy's."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(4)
    heads = [rng.standard_normal((1, side, side, 546)).astype("float32") for side in (4, 2, 1)]
    bb = relax.BlockBuilder()
    inputs = [relax.Var(f"head{i}", relax.TensorType(h.shape, "float32")) for i, h in enumerate(heads)]
    with bb.function("main", inputs):
        with bb.dataflow():
            rows = [bb.emit(relax.op.reshape(x, (1, -1, 91))) for x in inputs]
            out = bb.emit_output(relax.op.concat(rows, axis=1))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (func,) = kernels.functions.values()
    assert scheduled and "T.vectorized" in func.script()
    blocks = schedules._collect(func, tvm.s_tir.SBlock, lambda b: bool(b.iter_vars))
    assert not any(schedules._innermost_divided(b) for b in blocks), func.script()
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(h) for h in heads])
    want = np.concatenate([h.reshape(1, -1, 91) for h in heads], axis=1)
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("target_spec", ["x86_64", "x86_64:x86-64-v4", "aarch64"])
@pytest.mark.parametrize("head", [30, 32])
def test_heads_merged_back_run_vectors_along_each_head(target_spec, head):
    """MobileViT's attention output, [patches, heads, tokens, 30] read as [patches, tokens,
    heads x 30]: vectors along the 120 would span heads, each one a gather (8 GB/s); the
    output's last axis is split at the head, [4, 30], within which the loads are contiguous,
    and the vectors run along the 30 (a full vector and a predicated one). Heads of whole
    vectors (Swin's 32) keep the one axis: no vector spans two. The values are NumPy's (run
    on the AVX2 set, which every x86 CI machine has)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    heads = np.random.default_rng(5).standard_normal((4, 4, 49, head)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(heads.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            tokens = bb.emit(relax.op.permute_dims(data, [0, 2, 1, 3]))
            out = bb.emit_output(relax.op.reshape(tokens, (4, 49, 4 * head)))
        bb.emit_func_output(out)
    target = parse_targets([target_spec])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (func,) = kernels.functions.values()
    assert scheduled and "T.vectorized" in func.script()
    blocks = schedules._collect(func, tvm.s_tir.SBlock, lambda b: bool(b.iter_vars))
    assert [int(b.iter_vars[-1].dom.extent) for b in blocks] == [head if head == 30 else 4 * head]
    if head == 30:
        assert not any(schedules._innermost_divided(b) for b in blocks), func.script()
    if target_spec != "x86_64":
        return
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(heads)).numpy()
    np.testing.assert_array_equal(got, heads.transpose(0, 2, 1, 3).reshape(4, 49, 4 * head))


def test_an_injective_kernel_whose_reads_repeat_runs_in_vectorized_stages():
    """EfficientFormerV2's upsampling: a channels-last input and a residual, transposed and
    added, a 2x bilinear resize, GELU, and back to channels-last, all one kernel. Inlining it
    whole would copy the sum into each of the resize's four reads and the resize into each of
    the erf polynomial's: TVM's scalar loops stayed (1.09 ms a call). Now the blocks one load
    reads are inlined, the rest are stages, each vectorized (0.41 ms), and each stage's
    intermediate laid out channels last as the output reads it (0.12 ms: before, every vector
    of the output was a gather across the channel planes); the numbers are those of TVM's own
    lowering."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import _kernels_of, lowered_module, scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(9)
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, 7, 7, 64), "float32"))
    residual = relax.Var("r", relax.TensorType((1, 64, 7, 7), "float32"))
    with bb.function("main", [x, residual]):
        with bb.dataflow():
            summed = relax.op.add(relax.op.permute_dims(x, [0, 3, 1, 2]), residual)
            up = relax.op.image.resize2d(summed, (14, 14), method="linear")
            out = bb.emit_output(relax.op.permute_dims(relax.op.nn.gelu(up), [0, 2, 3, 1]))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    _, scheduled, names = scheduled_kernels(bb.get(), target)
    plain = _kernels_of(lowered_module(bb.get())[0])
    (name,) = [n for n in plain.functions if "resize" in n.name_hint]
    name = name.name_hint
    assert name in names and "T.vectorized" in scheduled[name].script(), scheduled[name].script()
    stages = schedules._collect(scheduled[name], tvm.s_tir.SBlock, lambda b: bool(b.iter_vars))
    assert len(stages) >= 3, scheduled[name].script()
    for stage in stages:  # each writes channels last, along its innermost (vectorized) loop
        (written,) = stage.writes
        assert int(written.source.shape[-1]) == 64, scheduled[name].script()
    loops = schedules._collect(scheduled[name], tvm.tirx.For)
    vectorized = [loop for loop in loops if loop.kind == tvm.tirx.ForKind.VECTORIZED]
    assert len(vectorized) == len(stages), scheduled[name].script()
    arrays = [rng.standard_normal([int(d) for d in p.shape]).astype("float32") for p in plain[name].params]
    got = call_kernel(scheduled[name], [a.copy() for a in arrays])
    want = call_kernel(plain[name], [a.copy() for a in arrays])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("transposed", [False, True])
def test_small_images_channels_first_take_vectors_across_their_rows(transposed):
    """PoolFormer's layer scale on 14 x 14 and 7 x 7 images, channels first (a flat view
    reshaped, times and plus a per-channel constant): rows of 7 or 14 are shorter than a
    vector, so the row and the column loops are fused and the vectors run across rows
    (scalar code before: 14 GB/s); a 7 x 7 transpose is cut in 7 x 7 tiles that read the flat
    input through a view in the image's shape (1.7-2.5x faster than TVM's scalar loop over 320
    to 512 channels; vectors across rows would be a gather). In the x86 set, both its widths,
    NumPy's numbers."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import host_runs_wide, parse_targets

    rng = np.random.default_rng(7)
    flat = rng.standard_normal(5 * 7 * 7).astype("float32")
    scale, bias = rng.standard_normal((2, 5, 1, 1)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(flat.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            image = bb.emit(relax.op.reshape(data, (1, 5, 7, 7)))
            if transposed:
                image = bb.emit(relax.op.permute_dims(image, [0, 1, 3, 2]))
            scaled = relax.op.add(relax.op.multiply(image, relax.const(scale)), relax.const(bias))
            out = bb.emit_output(scaled)
        bb.emit_func_output(out)
    want = flat.reshape(1, 5, 7, 7)
    want = (want.transpose(0, 1, 3, 2) if transposed else want) * scale + bias
    targets = [parse_targets(["x86_64"])[-1]]
    if host_runs_wide():
        targets.append(targets[0].wide_variant())
    for target in targets:
        lowered, kernels, scheduled = scheduled_kernels(bb.get(), target, parallel=False)
        (text,) = [func.script() for func in kernels.functions.values()]
        assert scheduled, text
        assert "T.vectorized" in text, text
        assert ("_view" in text) == transposed, text
        with build_context():
            executable = tvm.compile(
                lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
            )
        got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(flat)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_a_concat_along_channels_takes_vectors_that_its_inputs_fill():
    """GhostNet's concat of 168 + 168 channels (channels-last): a vector of 16 across the
    inputs' boundary was built from gathers (18 GB/s); vectors of 8 lie inside one input."""
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType((1, 14, 14, 168), "float32")) for i in range(2)]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(relax.op.concat(params, axis=3))
        bb.emit_func_output(out)
    _, kernels, scheduled = scheduled_kernels(bb.get(), parse_targets(["x86_64:x86-64-v4"])[-1])
    text = "".join(func.script() for func in kernels.functions.values())
    assert scheduled and "T.vectorized(T.int64(8))" in text and "T.vectorized(T.int64(16))" not in text


@pytest.mark.parametrize("target_name", ["x86_64:x86-64-v3", "x86_64:x86-64-v4", "aarch64"])
def test_a_concat_at_points_no_vector_fits_gets_a_vector_loop_per_input(target_name):
    """MixNet-S's concat of 4 x 90 channels + batch norm + SiLU (channels-last): no vector
    width of 4 or more divides 90, so vectors across the inputs were built lane by lane (0.74
    ms a call, AVX2). The channel loop is partitioned at the inputs: one vector loop per
    input, no condition left on the channel, values as NumPy's."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(5)
    parts = [rng.standard_normal((1, 5, 7, 90)).astype("float32") for _ in range(4)]
    scale, shift = (rng.standard_normal((2, 360)) * 2).astype("float32")
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(p.shape, "float32")) for i, p in enumerate(parts)]
    with bb.function("main", params):
        with bb.dataflow():
            joined = bb.emit(relax.op.concat(params, axis=3))
            normed = bb.emit(relax.op.add(relax.op.multiply(joined, relax.const(scale)), relax.const(shift)))
            out = bb.emit_output(relax.op.multiply(normed, relax.op.sigmoid(normed)))
        bb.emit_func_output(out)
    target = parse_targets([target_name])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    (text,) = [func.script() for func in kernels.functions.values()]
    assert scheduled and text.count("T.vectorized(") == 4 and "if_then_else" not in text, text
    normed = np.concatenate(parts, axis=3).astype("float64") * scale + shift
    want = normed / (1 + np.exp(-normed))
    if target_name == "aarch64":
        return  # run under qemu: test_cross_aarch64.py (awkward_family joins inputs at 37)
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(p) for p in parts]).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["attention heads", "channel shuffle"])
def test_injective_kernels_with_several_outputs_are_scheduled_and_exact(kind):
    """A split's kernel writes several outputs: attention's q, k and v out of one projection
    ([1, 197, 576] -> heads), ShuffleNet's channel shuffle (concat, reshape to groups,
    transpose, reshape, split in two). Each output block is vectorized on its own (the
    kernel was left to TVM's lowering, which copied through two intermediates); NumPy's
    numbers exactly."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(6)
    if kind == "attention heads":
        parts = [rng.standard_normal((1, 197, 576)).astype("float32")]
    else:
        parts = [rng.standard_normal((1, 58, 28, 28)).astype("float32") for _ in range(2)]
    bb = relax.BlockBuilder()
    params = [relax.Var(f"x{i}", relax.TensorType(p.shape, "float32")) for i, p in enumerate(parts)]
    with bb.function("main", params):
        with bb.dataflow():
            if kind == "attention heads":
                heads = bb.emit(relax.op.reshape(params[0], (1, 197, 3, 3, 64)))
                moved = bb.emit(relax.op.permute_dims(heads, [2, 0, 3, 1, 4]))
                split = bb.emit(relax.op.split(moved, 3, axis=0))
            else:
                joined = bb.emit(relax.op.concat(params, axis=1))
                groups = bb.emit(relax.op.reshape(joined, (1, 2, 58, 28, 28)))
                moved = bb.emit(relax.op.permute_dims(groups, [0, 2, 1, 3, 4]))
                flat = bb.emit(relax.op.reshape(moved, (1, 116, 28, 28)))
                split = bb.emit(relax.op.split(flat, 2, axis=1))
            out = bb.emit_output(split)
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1]
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target)
    names = [gv.name_hint for gv in kernels.get_global_vars()]
    assert len(names) == 1 and names[0] in scheduled, (names, scheduled)
    assert "T.vectorized(" in kernels[names[0]].script(), "no vector loop"
    with build_context():
        executable = tvm.compile(
            lowered, target=target.tvm_target(), relax_pipeline=tvm.transform.Sequential([])
        )
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](*[tvm.runtime.tensor(p) for p in parts])
    if kind == "attention heads":
        moved = parts[0].reshape(1, 197, 3, 3, 64).transpose(2, 0, 3, 1, 4)
        want = np.split(moved, 3, axis=0)
    else:
        joined = np.concatenate(parts, axis=1).reshape(1, 2, 58, 28, 28).transpose(0, 2, 1, 3, 4)
        want = np.split(joined.reshape(1, 116, 28, 28), 2, axis=1)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.numpy(), w)


SPECIAL_ROWS = {
    "nan": lambda row: np.where(np.arange(row.size) == 3, np.nan, row),
    # (a softmax's row maximum may skip a NaN: softmax_maxima; the row is NaN all the same)
    "nan_last": lambda row: np.where(np.arange(row.size) == row.size - 1, np.nan, row),
    "nan_and_plus_inf": lambda row: np.where(
        np.arange(row.size) % 7 == 1, np.inf, np.where(np.arange(row.size) == 0, np.nan, row)
    ),
    "plus_inf": lambda row: np.where(np.arange(row.size) == 5, np.inf, row),
    "all_minus_inf": lambda row: np.full_like(row, -np.inf),
    "some_minus_inf": lambda row: np.where(np.arange(row.size) % 3 == 0, -np.inf, row),
    "last_is_largest": lambda row: np.where(np.arange(row.size) == row.size - 1, 80.0, row),
    "huge": lambda row: row * 1e30,
}


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("length", [20, 49, 128, 197])
def test_softmax_rows_reduce_in_vectors_and_keep_special_values(length, wide, masked):
    """Softmax over rows of 20, 49 (Swin's windows), 128 and 197 (ViT's tokens): the row's
    maximum and sum in partial vectors (rfactor on TVM's identities, -inf starts given back),
    a row that 16 does not divide as its whole 16s and a tail, elementwise stages in whole
    registers with a predicated last one; the partial vectors combined by halving (one after
    another: a chain of 16 scalar latencies a row). NumPy's numbers in float64, also for rows with a
    NaN, +inf, only -inf, some -inf, the largest value last (the tail), and huge values; and
    a mask's ``where`` after the softmax keeps one exponential per element. The difference
    from the maximum is no pass of its own (inlined into the exponentials); ``1 / sum`` is
    computed once a row."""
    from tvm import relax, s_tir

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import host_runs_wide, parse_targets

    target = parse_targets(["x86_64"])[-1]
    if wide:
        if not host_runs_wide():
            pytest.skip("this machine has no AVX-512 to run the wide kernel set")
        target = target.wide_variant()
    rng = np.random.default_rng(length)
    x = (4 * rng.standard_normal((2, len(SPECIAL_ROWS) + 3, length))).astype("float32")
    for i, make in enumerate(SPECIAL_ROWS.values()):
        x[1, i] = make(x[1, i].astype("float64")).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            soft = relax.op.nn.softmax(data, axis=-1)
            if masked:
                soft = bb.emit(soft)
                soft = relax.op.where(relax.op.isnan(soft), relax.const(0.0, "float32"), soft)
            out = bb.emit_output(soft)
        bb.emit_func_output(out)
    _, kernels, scheduled = scheduled_kernels(bb.get(), target, parallel=False)
    (name,) = [gv.name_hint for gv in kernels.get_global_vars()]
    assert name in scheduled, f"{name} was left unscheduled"
    func = kernels[name]
    script = func.script()
    assert script.count("0.0083125252") == 1, "the exponential is computed more than once per element"
    assert "T_softmax_maxelem_rf" in script and "T_softmax_expsum_rf" in script, "a serial row reduction"
    # the difference from the maximum is computed in the exponentials' pass; 1 / sum once a row
    blocks = {b.name_hint for b in schedules._collect(func, s_tir.SBlock)}
    assert "T_softmax_delta" not in blocks and "T_softmax_scale" in blocks, sorted(blocks)
    if length >= 128:  # the partial vectors combined by halving: the last step adds two
        schedule = s_tir.Schedule(func)
        for name in ("T_softmax_maxelem", "T_softmax_expsum"):
            (combined,) = [iv for iv in schedule.get(schedule.get_sblock(name)).iter_vars if iv.iter_type]
            assert int(combined.dom.extent) == 2, f"{name} combines its partial results one by one"
    params = [np.zeros(tuple(int(d) for d in p.shape), "float32") for p in func.params]
    got = call_kernel(func, [x, *params[1:]])
    wide_x = x.astype("float64")
    with np.errstate(invalid="ignore", over="ignore"):
        exp = np.exp(wide_x - wide_x.max(axis=-1, keepdims=True))
        want = exp / exp.sum(axis=-1, keepdims=True)
    if masked:
        want = np.where(np.isnan(want), 0.0, want)
    else:
        assert np.isnan(want).any()  # the NaN, +inf and only -inf rows
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("shape", "axis"), [((1, 2, 197, 8), 2), ((2, 50, 12), 1), ((40, 3), 0)])
def test_softmax_over_an_axis_other_than_the_last_is_computed_once_per_element(shape, axis):
    """CoaT's factorized attention takes the softmax of its keys over the tokens, [1, 8,
    3137, 8] along axis 2. The rows schedule, which computes a row's reductions under the
    output's row loop, took it for a softmax over the last axis and recomputed the maximum
    and the sum for every row: quadratic, 1.25 s a call (ONNX Runtime runs the whole model in
    66 ms). Now the reductions run once (TVM's estimate: a few hundred flop an element, not
    that times the tokens) and the numbers are NumPy's."""
    import tvm
    from tvm import relax
    from tvm.s_tir.analysis import estimate_tir_flops

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    x = (4 * np.random.default_rng(axis).standard_normal(shape)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.nn.softmax(data, axis=axis))
        bb.emit_func_output(out)
    _, kernels, _ = scheduled_kernels(bb.get(), parse_targets(["x86_64"])[-1], parallel=False)
    (func,) = kernels.functions.values()
    flop_per_element = float(estimate_tir_flops(tvm.IRModule({"main": func}))) / x.size
    # The exponential, written out, counts about 90 flop; recomputed reductions count the
    # axis' length times that (3549-17337 here).
    assert flop_per_element < 600, f"{flop_per_element:.0f} flop an element: the reductions are recomputed"
    got = call_kernel(func, [x, np.zeros(shape, "float32")])
    exp = np.exp(x.astype("float64") - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(got, exp / exp.sum(axis=axis, keepdims=True), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("length", [3199, 49, 35])
def test_rows_no_vector_divides_reduce_in_predicated_partial_sums(length):
    """A group norm with a group a channel (Wav2Vec2's over 3199 samples): a mean, then a
    variance that reads it, over rows that neither 16, 8, 4 nor 2 divide. Each was one scalar
    chain (1.7 GB/s); now partial sums in vectors, the last one predicated (it would read the
    next row), numpy's numbers."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(length)
    x = (3 * rng.standard_normal((1, 6, length)) + 1).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            variance = relax.op.variance(data, axis=[-1], keepdims=True)
            out = bb.emit_output(relax.op.rsqrt(relax.op.add(variance, relax.const(1e-5, "float32"))))
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1].wide_variant()
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target, parallel=False)
    reducing = [gv.name_hint for gv in kernels.get_global_vars() if "variance" in gv.name_hint]
    assert reducing and set(reducing) <= set(scheduled), (reducing, scheduled)
    for name in reducing:
        script = kernels[name].script()
        assert script.count("T.vectorized(T.int64(16))") >= 2, f"{name}: no partial sums in vectors"
        assert script.count("T.where(") >= 2, f"{name}: a partial sum lost its predicate"
    executable = tvm.compile(lowered, target="llvm")
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    want = 1 / np.sqrt(x.astype("float64").var(axis=-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("length", [192, 196])
def test_a_layer_norm_spelt_out_reduces_its_rows_in_partial_sums(length):
    """A layer norm as older exporters write it (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt,
    Div, Mul, Add: DeiT's, over rows of 192): each mean over the last axis, kept as an axis of
    1, was scheduled as a matmul of one column, a scalar chain per row; now as rows, in
    partial sums (4 lanes where 16 and 8 do not divide the row), numpy's numbers."""
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import parse_targets

    rng = np.random.default_rng(length)
    x = (3 * rng.standard_normal((1, 9, length)) + 1).astype("float32")
    gamma = rng.standard_normal(length).astype("float32")
    beta = rng.standard_normal(length).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            centred = bb.emit(relax.op.subtract(data, relax.op.mean(data, axis=[-1], keepdims=True)))
            variance = bb.emit(relax.op.mean(relax.op.multiply(centred, centred), axis=[-1], keepdims=True))
            scale = relax.op.sqrt(relax.op.add(variance, relax.const(1e-6, "float32")))
            normed = relax.op.divide(centred, scale)
            out = bb.emit_output(
                relax.op.add(relax.op.multiply(normed, relax.const(gamma)), relax.const(beta))
            )
        bb.emit_func_output(out)
    target = parse_targets(["x86_64"])[-1].wide_variant()
    lowered, kernels, scheduled = scheduled_kernels(bb.get(), target, parallel=False)
    reducing = [gv.name_hint for gv in kernels.get_global_vars() if "mean" in gv.name_hint]
    assert reducing and set(reducing) <= set(scheduled), (reducing, scheduled)
    for name in reducing:
        assert "_rf" in kernels[name].script(), f"{name} reduces its rows in one scalar chain"
    import tvm

    executable = tvm.compile(lowered, target="llvm")
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    wide = x.astype("float64")
    centred = wide - wide.mean(axis=-1, keepdims=True)
    want = centred / np.sqrt((centred**2).mean(axis=-1, keepdims=True) + 1e-6) * gamma + beta
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("shape", "axes", "stage", "dtype"),
    [
        ((1, 196, 512), (0, 2, 1), "plain", "float32"),  # MLP-Mixer's token mixing
        ((1, 13, 21, 40), (0, 3, 1, 2), "layer scale and residual", "float32"),  # ConvNeXt, uneven tiles
        ((1, 7, 7, 768), (0, 3, 1, 2), "plain", "float32"),  # 7 x 7 images: tiles of 7
        ((1, 768, 7, 7), (0, 2, 3, 1), "plain", "float32"),
        ((1, 14, 14, 64), (0, 3, 1, 2), "flatten", "float32"),  # PoolFormer's
        ((1, 24, 36), (0, 2, 1), "pad", "float32"),  # a padding stage after: not folded backwards
        ((2, 40, 24), (0, 2, 1), "plain", "int8"),
        # ViT's keys as a right operand: rows tile * 16 + lane, past the 197th zero
        ((1, 3, 197, 64), (0, 1, 3, 2), "scale and packed columns", "float32"),
        # Funnel's positional scores: the output's contiguous axis second last, before a 1
        ((1, 4, 24, 40), (3, 1, 2, 0), "plain", "float32"),
    ],
)
def test_transposes_are_tiled_and_exact(shape, axes, stage, dtype):
    """A transpose of the innermost axis, with the stages around it, is cut in tiles whose
    input rows are loaded as whole vectors (the output's vectors gathered one element per
    input row: 3.6 GB/s); NumPy's values (exactly but for FMAs), whatever the tails and axes of
    extent 1; a stage that pads the transposed tensor keeps its padding written."""
    from tvm import te, topi

    rng = np.random.default_rng(11)
    data = (rng.standard_normal(shape) * 40).astype(dtype)
    x = te.placeholder(shape, dtype, name="x")
    moved = topi.transpose(x, axes)
    want = data.transpose(axes)
    inputs, arrays = [x], [data]
    if stage == "layer scale and residual":
        gamma = te.placeholder((shape[3], 1, 1), dtype, name="gamma")
        residual = te.placeholder(shape, dtype, name="residual")
        out = topi.add(topi.multiply(moved, gamma), topi.transpose(residual, axes))
        g, r = rng.standard_normal((shape[3], 1, 1)).astype(dtype), rng.standard_normal(shape).astype(dtype)
        inputs, arrays = [x, gamma, residual], [data, g, r]
        want = want * g + r.transpose(axes)
    elif stage == "flatten":
        out = topi.reshape(moved, (1, 1, math.prod(shape)))
        want = want.reshape(1, 1, -1)
    elif stage == "pad":
        out = topi.nn.pad(moved, (0, 0, 0), (0, 0, 4), pad_value=0.0)
        want = np.pad(want, [(0, 0), (0, 0), (0, 4)])
    elif stage == "scale and packed columns":
        out = packed_matmul._pack_columns(topi.multiply(moved, 0.125))
        lanes = packed_matmul.PACK
        want = np.pad(want * 0.125, [(0, 0)] * 3 + [(0, -shape[2] % lanes)])
        want = want.reshape(*want.shape[:3], -1, lanes).transpose(0, 1, 3, 2, 4)
    else:
        out = moved
    func = te.create_prim_func([*inputs, out])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None
    if stage != "pad":
        assert schedules.TRANSPOSE_TILE in _vector_extents(scheduled) or 7 in _vector_extents(scheduled)
    result = call_kernel(scheduled, [*arrays, np.full(want.shape, 99, want.dtype)])
    # (a multiply and add become one FMA, rounded once)
    fma = 1e-6 * float(np.abs(want).max()) if stage.startswith("layer") else 0
    np.testing.assert_allclose(result, want, rtol=0, atol=fma)


@pytest.mark.parametrize(("groups", "channels", "size"), [(32, 64, 28), (8, 24, 9)])
def test_a_transpose_of_a_reshaped_input_reads_a_view_in_tiles(groups, channels, size):
    """BiT's group norm: the normalized [1, groups, C*H*W/groups] read back as [1, C, H, W],
    scaled per channel, ReLU, transposed to channels-last for the next conv. The reshape's
    divisions kept the transpose untiled (one gather a lane, 5.7 GB/s); the input read
    through a view of its memory in the reshaped shape takes the tiles. NumPy's values."""
    from tvm import te, topi

    rng = np.random.default_rng(size)
    data = rng.standard_normal((1, groups, channels * size * size // groups)).astype("float32")
    scale = rng.standard_normal((channels, 1, 1)).astype("float32")
    x = te.placeholder(data.shape, "float32", name="x")
    gamma = te.placeholder(scale.shape, "float32", name="gamma")
    image = topi.reshape(x, (1, channels, size, size))
    out = topi.transpose(topi.nn.relu(topi.multiply(image, gamma)), (0, 2, 3, 1))
    func = te.create_prim_func([x, gamma, out])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None
    assert schedules.TRANSPOSE_TILE in _vector_extents(scheduled), "not tiled"
    want = np.maximum(data.reshape(1, channels, size, size) * scale, 0).transpose(0, 2, 3, 1)
    result = call_kernel(scheduled, [data, scale, np.full(want.shape, 99, "float32")])
    np.testing.assert_allclose(result, want, rtol=0, atol=0)


@pytest.mark.parametrize(
    ("size", "stride", "kind"),
    [(56, 1, "avg"), (14, 1, "avg"), (7, 1, "avg"), (28, 2, "max"), (20, 1, "avg 1-D")],
)
def test_pooling_over_channels_first_rows_is_vectorized_and_exact(size, stride, kind):
    """PoolFormer's 3 x 3 average pooling of NCHW data (padding not counted) followed by
    ``pool(x) - x`` and a layer scale (rows of 7: one predicated vector, AVX-512 only), a
    strided max pool and a 1-D pool: vectors along the output rows, the epilogue in the
    write-back; NumPy's values."""
    from tvm import te, topi

    rng = np.random.default_rng(12)
    one_d = kind == "avg 1-D"
    shape = (1, 5, size) if one_d else (1, 5, size, size)
    image = rng.standard_normal(shape).astype(np.float32)
    data = te.placeholder(shape, name="data")
    mode = kind.split()[0]
    if one_d:
        pooled = topi.nn.pool1d(data, (3,), (1,), (1,), (1, 1), mode, count_include_pad=False, layout="NCW")
    else:
        pooled = topi.nn.pool2d(
            data, (3, 3), (stride, stride), (1, 1), (1, 1, 1, 1), mode, count_include_pad=False, layout="NCHW"
        )
    out = pooled
    scale = rng.standard_normal((5, 1) if one_d else (5, 1, 1)).astype(np.float32)
    if stride == 1:
        gamma = te.placeholder(scale.shape, name="gamma")
        out = topi.multiply(topi.subtract(pooled, data), gamma)
    func = te.create_prim_func([data, gamma, out] if stride == 1 else [data, out])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None and _vector_extents(scheduled), "not vectorized"
    if size == 7:  # a predicated vector only where AVX-512 masks it natively
        assert schedule_function(func, AVX2) is None
    fill = -np.inf if mode == "max" else np.nan
    padded = np.pad(image, [(0, 0), (0, 0)] + [(1, 1)] * (len(shape) - 2), constant_values=fill)
    windows = np.lib.stride_tricks.sliding_window_view(
        padded, (3,) * (len(shape) - 2), axis=tuple(range(2, len(shape)))
    )
    windows = windows[(slice(None), slice(None)) + (slice(None, None, stride),) * (len(shape) - 2)]
    reduce_axes = tuple(range(-(len(shape) - 2), 0))
    want = np.nanmax(windows, axis=reduce_axes) if mode == "max" else np.nanmean(windows, axis=reduce_axes)
    arrays = [image, scale] if stride == 1 else [image]
    if stride == 1:
        want = (want - image) * scale
    result = call_kernel(scheduled, [*arrays, np.zeros(want.shape, np.float32)])
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [12, 10])
def test_short_rows_are_normalized_four_at_a_time_and_exactly(rows):
    """A layer norm over 96 channels (ConvNeXt's): four rows' sums, variances and outputs
    computed together (each row's chain waited on the last), when four divide the rows;
    NumPy's values either way."""
    from tvm import te, topi

    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 96)).astype(np.float32) * 3 + 1
    gamma, beta = rng.standard_normal(96).astype(np.float32), rng.standard_normal(96).astype(np.float32)
    data, g, b = (
        te.placeholder(x.shape, name="x"),
        te.placeholder((96,), name="g"),
        te.placeholder((96,), name="b"),
    )
    func = te.create_prim_func([data, g, b, topi.nn.layer_norm(data, g, b, axis=[1], epsilon=1e-6)])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None
    grouped = re.search(r"T\.grid\(4, ", scheduled.script()) is not None
    assert grouped == (rows % schedules.ROWS_TOGETHER == 0), scheduled.script()
    mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-6) * gamma + beta
    result = call_kernel(scheduled, [x, gamma, beta, np.zeros_like(x)])
    np.testing.assert_allclose(result, want, rtol=1e-5, atol=1e-5)


def test_a_large_pooling_window_stays_a_loop():
    """A 60 x 80 max pool (ONNX's PyTorch suite) unrolled into 4,800 copies of its body and
    LLVM compiled it for more than seven minutes; windows above 64 taps stay loops."""
    from tvm import te, topi

    data = te.placeholder((1, 1, 128, 160), name="data")
    out = topi.nn.pool2d(data, (60, 80), (10, 10), (1, 1), (10, 20, 10, 20), "max", layout="NCHW")
    scheduled = schedule_function(te.create_prim_func([data, out]), AVX512)
    assert scheduled is not None and "T.unroll" not in scheduled.script()


def _aligned_int32(count: int, fill: int) -> np.ndarray:
    """``count`` int32 values set to ``fill``, 64-byte aligned (TVM's buffers assume it)."""
    raw = np.full(count + 16, fill, np.int32)
    start = (-raw.ctypes.data % 64) // 4
    return raw[start : start + count]


def _host_has(flag: str) -> bool:
    try:
        return flag in open("/proc/cpuinfo").read().split()
    except OSError:
        return False


# instruction → (LLVM target, an instruction of it the kernel must hold)
DOT_TARGETS = {
    "vnni": ({"kind": "llvm", "mcpu": "x86-64-v4", "mattr": ["+avx512vnni"]}, "vpdpbusd"),
    "vnni256": ({"kind": "llvm", "mcpu": "x86-64-v3", "mattr": ["+avxvnni"]}, "{vex}\tvpdpbusd\t%ymm"),
    "pmaddwd": ({"kind": "llvm", "mcpu": "x86-64-v3"}, "vpmaddwd"),
    "": ({"kind": "llvm", "mcpu": "x86-64-v4"}, None),
}


def _uint8_conv(size, in_channels, channels, kernel, stride, options):
    """A packed uint8 x int8 convolution scheduled with ``options``: (scheduled function,
    image, packed weights, NumPy's exact int64 result)."""
    from tvm import te

    rng = np.random.default_rng(size + channels)
    x = rng.integers(0, 256, (1, size, size, in_channels)).astype(np.uint8)
    w = rng.integers(-128, 128, (kernel, kernel, in_channels, channels)).astype(np.int8)
    packed = nhwc._packed_int8(w)
    pad = kernel // 2
    data = te.placeholder(x.shape, "uint8", name="data")
    weight = te.placeholder(packed.shape, "int8", name="weight")
    out = nhwc._uint8_conv2d_nhwc(data, weight, [stride, stride], [pad] * 4, [1, 1], channels)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), options)
    assert scheduled is not None
    image = np.pad(x.astype(np.int64), [(0, 0), (pad, pad), (pad, pad), (0, 0)])
    side = int(out.shape[1])
    want = np.zeros((1, side, side, channels), np.int64)
    for dy in range(kernel):
        for dx in range(kernel):
            window = image[0, dy : dy + stride * side : stride, dx : dx + stride * side : stride]
            want[0] += window @ w[dy, dx].astype(np.int64)
    return scheduled, x, packed, want


@pytest.mark.parametrize(
    ("size", "in_channels", "channels", "kernel", "stride", "dot"),
    [(14, 64, 64, 3, 1, "vnni"), (7, 32, 48, 1, 1, "vnni"), (15, 4, 32, 7, 2, "vnni"),
     (14, 64, 64, 3, 1, ""), (14, 96, 24, 1, 1, "vnni"), (14, 96, 24, 1, 1, ""),
     (14, 64, 64, 3, 1, "pmaddwd"), (7, 32, 48, 1, 1, "pmaddwd"), (15, 4, 32, 7, 2, "pmaddwd"),
     (14, 96, 24, 1, 1, "pmaddwd"), (14, 64, 64, 3, 1, "vnni256"), (15, 4, 32, 7, 2, "vnni256"),
     (14, 96, 24, 1, 1, "vnni256")],
)  # fmt: skip
def test_uint8_conv_is_exact_with_each_dot_product(size, in_channels, channels, kernel, stride, dot):
    """A quantized convolution's uint8 x int8 kernel (packed [O/16, kh, kw, I/4, 16, 4]):
    with VNNI one vpdpbusd per pixel, 16 channels and 4 inputs (AVX-VNNI: two on 8 lanes);
    with AVX2 vpmaddwd on int16 (two partial sums per channel); without either widened
    int32 vectors. All equal NumPy's exact sums over the full range of both types, where a
    saturating vpmaddubsw would not (a 7x7 stride-2 layer over an RGB image's channels
    padded to 4, ResNet-18's first; MobileNet v2's 24 output channels, computed as 32 and
    cut, writing nothing past the output), and hold their instruction."""
    import tvm

    # widened int32 vectors: AVX-512's 16 lanes where this machine runs them, else AVX2's 8
    plain_on_avx2 = dot == "" and not _host_has("avx512f")
    lanes = 8 if dot in ("pmaddwd", "vnni256") or plain_on_avx2 else 16
    options = ScheduleOptions(vector_lanes=lanes, vectorize=True, parallel=True, int8_dot=dot)
    scheduled, x, packed, want = _uint8_conv(size, in_channels, channels, kernel, stride, options)
    target, instruction = DOT_TARGETS[dot]
    if plain_on_avx2:
        target = {"kind": "llvm", "mcpu": "x86-64-v3"}
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": scheduled}), target=target)
    if instruction:
        assert instruction in library.inspect_source("asm")
    needed = {"vnni": "avx512_vnni", "vnni256": "avx_vnni"}.get(dot)
    if needed and not _host_has(needed):
        pytest.skip(f"this CPU has no {needed} to run the kernel on")
    out_shape = want.shape
    count = int(np.prod(out_shape))
    buffer = _aligned_int32(count + 64, 12345)
    result = buffer[:count].reshape(out_shape)
    library["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(packed), tvm.runtime.from_dlpack(result))
    assert np.all(buffer[count:] == 12345), "the kernel wrote past its output"
    np.testing.assert_array_equal(result, want)


@pytest.mark.parametrize("dot", ["sdot", "usdot"])
def test_uint8_conv_uses_the_aarch64_dot_product(dot):
    """AArch64's sets with ``dotprod`` or ``i8mm`` tensorize the uint8 x int8 convolution
    with ``sdot`` (the image shifted to int8, 128 x sum(w) added back) or ``usdot``; the
    AArch64 packages run them under qemu (tests/e2e/test_quantized_models.py)."""
    import tvm

    options = ScheduleOptions(vector_lanes=4, vectorize=True, parallel=False, int8_dot=dot)
    scheduled, *_ = _uint8_conv(14, 64, 64, 3, 1, options)
    feature = "+i8mm" if dot == "usdot" else "+dotprod"
    target = {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon", feature]}
    with build_context():
        library = tvm.tirx.build(tvm.IRModule({"main": scheduled}), target=target)
    assert f"{dot}\t" in library.inspect_source("asm")


@pytest.mark.parametrize(("channels", "stride"), [(96, 1), (144, 2), (24, 1)])
def test_uint8_depthwise_conv_is_scheduled_and_exact(channels, stride):
    """A quantized MobileNet's depthwise convolutions: uint8 x int8 widened to int32 as they
    multiply, the float32 depthwise schedule's vectors along the channels; NumPy's sums."""
    from tvm import te

    rng = np.random.default_rng(channels)
    x = rng.integers(0, 256, (1, 14, 14, channels)).astype(np.uint8)
    w = rng.integers(-128, 128, (3, 3, 1, channels)).astype(np.int8)
    data = te.placeholder(x.shape, "uint8", name="data")
    weight = te.placeholder(w.shape, "int8", name="weight")
    out = nhwc._conv2d_nhwc(data, weight, [stride, stride], [1, 1, 1, 1], [1, 1], True, channels)
    scheduled = schedule_function(te.create_prim_func([data, weight, out]), AVX512)
    assert scheduled is not None
    assert channels == 24 or 16 in _vector_extents(scheduled), _vector_extents(scheduled)
    result = call_kernel(scheduled, [x, w, np.zeros([int(d) for d in out.shape], np.int32)])
    image = np.pad(x.astype(np.int64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    side = int(out.shape[1])
    want = np.zeros((side, side, channels), np.int64)
    for dy in range(3):
        for dx in range(3):
            window = image[0, dy : dy + stride * side : stride, dx : dx + stride * side : stride]
            want += window * w[dy, dx, 0].astype(np.int64)
    np.testing.assert_array_equal(result[0], want)


@pytest.mark.parametrize("reduce", ["max", "min", "sum"])
@pytest.mark.parametrize("nan", [False, True])
def test_a_whole_tensor_reduction_is_vectorized_and_exact(reduce, nan):
    """Dynamic quantization's minimum and maximum of a whole activation (a BERT's [1, 128,
    768]): partial results in vectors, then combined; the same maximum and minimum as NumPy
    (NaN propagated: ONNX's ReduceMax of NaN is NaN), the sum within float32 rounding."""
    from tvm import te, topi

    x = np.random.default_rng(1).standard_normal((1, 128, 768)).astype(np.float32)
    x[0, 77, 5] = 9.0 if reduce != "min" else -9.0
    if nan:
        x[0, 100, 700] = np.nan
    data = te.placeholder(x.shape, name="x")
    func = te.create_prim_func([data, getattr(topi, reduce)(data)])
    scheduled = schedule_function(func, AVX512)
    assert scheduled is not None and "T.vectorized" in scheduled.script()
    got = call_kernel(scheduled, [x, np.zeros((), np.float32)])
    want = getattr(np, reduce)(x)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize(
    "shape, outputs, groups, kernel, strides, padding, dilation",
    [
        # depth taps stacked: stride and dilation in depth, uneven padding, two groups
        ((1, 4, 9, 7, 6), 6, 2, (3, 2, 3), (2, 1, 2), (2, 0, 1, 1, 1, 0), (2, 1, 1)),
        # a kernel of depth 1 (frames moved into the batch), two samples, strided image
        ((2, 3, 5, 6, 6), 4, 1, (1, 3, 3), (1, 2, 2), (0, 1, 1, 0, 1, 1), (1, 1, 1)),
        # depthwise over time only (X3D's temporal convs), padded in depth
        ((1, 6, 4, 5, 5), 6, 6, (3, 1, 1), (1, 1, 1), (1, 0, 0, 1, 0, 0), (1, 1, 1)),
    ],
)
@pytest.mark.parametrize("weight_is_input", [False, True], ids=["constant-weight", "weight-input"])
def test_conv3d_as_2d_computes_tvms_conv3d(
    shape, outputs, groups, kernel, strides, padding, dilation, weight_is_input
):
    """A 3-D convolution rewritten as one 2-D convolution over every output frame (the depth
    taps stacked as channels, tap-major within each group) gives TVM's own conv3d, and none is
    left, whether the weight is a constant (reordered at generation time) or an input."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.conv3d_as_2d import conv3d_as_conv2d

    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype("float32")
    weight = rng.standard_normal((outputs, shape[1] // groups, *kernel)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(shape, "float32"))
    weight_var = relax.Var("w", relax.TensorType(weight.shape, "float32"))
    params = [data, weight_var] if weight_is_input else [data]
    with bb.function("main", params):
        with bb.dataflow():
            kernel_arg = weight_var if weight_is_input else relax.const(weight)
            conv = relax.op.nn.conv3d(data, kernel_arg, strides, padding, dilation, groups=groups)
            out = bb.emit_output(bb.emit(conv))
        bb.emit_func_output(out)
    original = bb.get()
    rewritten = conv3d_as_conv2d(original)
    assert "conv3d" not in rewritten.script() and "conv2d" in rewritten.script()
    arguments = [tvm.runtime.tensor(x)] + ([tvm.runtime.tensor(weight)] if weight_is_input else [])
    results = []
    for module in (original, rewritten):
        executable = tvm.compile(module, target="llvm")
        results.append(relax.VirtualMachine(executable, tvm.cpu())["main"](*arguments).numpy())
    assert results[0].shape == results[1].shape
    np.testing.assert_allclose(results[1], results[0], rtol=1e-5, atol=1e-5)


def _conv3d_block(dtypes=("float32", "float32")):
    """conv3d -> add the input -> relu -> conv3d (a 3-D ResNet's basic block), each conv in
    its own dtype; with its input and a runner."""
    from tvm import relax

    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 5, 6, 7)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            value = data
            for i, dtype in enumerate(dtypes):
                weight = relax.const(rng.standard_normal((8, 8, 3, 3, 3)), dtype)
                conv = relax.op.nn.conv3d(bb.emit(relax.op.astype(value, dtype)), weight, padding=1)
                conv = bb.emit(relax.op.astype(conv, "float32"))
                value = bb.emit(relax.op.nn.relu(relax.op.add(conv, data))) if i == 0 else conv
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return bb.get(), x


def _assert_close_to_largest(actual, expected):
    """Equal up to float32 rounding of sums of 216 products (outputs up to about 200)."""
    np.testing.assert_allclose(actual, expected, rtol=0, atol=2e-6 * np.abs(expected).max())


def _run_relax(module, *arrays):
    import tvm
    from tvm import relax

    executable = tvm.compile(module, target="llvm")
    return relax.VirtualMachine(executable, tvm.cpu())["main"](*map(tvm.runtime.tensor, arrays)).numpy()


@pytest.mark.parametrize(
    "shape, kernel, dilation, padding, rewritten",
    [
        ((1, 8, 14, 14), (3, 3), (12, 12), (12, 12, 12, 12), True),  # DeepLab v3's rate 12
        ((2, 5, 9, 11), (3, 2), (5, 7), (5, 4, 6, 3), True),  # uneven padding, two images
        ((1, 8, 14, 14), (3, 3), (2, 2), (2, 2, 2, 2), False),  # most taps live: one conv
    ],
)
def test_an_atrous_convolution_sums_its_live_taps(shape, kernel, dilation, padding, rewritten):
    """A dilated conv whose off-centre taps reach the image for only a few outputs becomes a
    sum of 1x1 convs over those outputs (no multiply-add of padding) and computes TVM's conv."""
    from tvm import relax

    from relay2cmake.lower.rewrites.dead_taps import conv_dead_taps

    rng = np.random.default_rng(7)
    x = rng.standard_normal(shape).astype("float32")
    weight = rng.standard_normal((6, shape[1], *kernel)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            conv = relax.op.nn.conv2d(data, relax.const(weight), padding=padding, dilation=dilation)
            out = bb.emit_output(bb.emit(conv))
        bb.emit_func_output(out)
    original = bb.get()
    result = conv_dead_taps(original)
    assert (result.script().count("R.nn.conv2d(") > 1) == rewritten, result.script()
    expected = _run_relax(original, x)
    np.testing.assert_allclose(_run_relax(result, x), expected, rtol=0, atol=1e-5 * np.abs(expected).max())


def test_conv3d_as_2d_keeps_activations_channels_last_between_convolutions():
    """When every conv3d can be rewritten, the residual add and relu between two of them run
    channels-last: the only transposes left are the model's input and output (a transpose on
    each side of every conv made the package move each frame NHWC -> NCDHW -> NHWC through two
    transposing kernels: r3d_18's at 2-4 GB/s)."""
    from relay2cmake.lower.rewrites.conv3d_as_2d import conv3d_as_conv2d

    original, x = _conv3d_block()
    rewritten = conv3d_as_conv2d(original)
    script = rewritten.script()
    assert "conv3d" not in script and script.count('data_layout="NHWC"') == 2
    # x to NDHWC (the conv's input and the residual's), the result back: no others
    assert script.count("R.permute_dims(") == 3, script
    _assert_close_to_largest(_run_relax(rewritten, x), _run_relax(original, x))


def test_conv3d_as_2d_wraps_each_convolution_when_one_cannot_be_rewritten():
    """A conv3d the rewrite does not take (float64 here) keeps TVM's NCDHW conv3d, so the
    layout stays where it is and each rewritten one is wrapped in its own transposes."""
    from relay2cmake.lower.rewrites.conv3d_as_2d import conv3d_as_conv2d

    original, x = _conv3d_block(("float32", "float64"))
    rewritten = conv3d_as_conv2d(original)
    script = rewritten.script()
    assert script.count("R.nn.conv3d(") == 1 and 'data_layout="NCDHW"' in script
    assert script.count('data_layout="NHWC"') == 1
    _assert_close_to_largest(_run_relax(rewritten, x), _run_relax(original, x))


def _conv_then_squeeze(op: str, shape, kernel, padding, axis: int):
    """A convolution whose output has a 1 along ``axis`` (negative), squeezed away (timm's
    lambda layers squeeze axis -2 after their conv3d)."""
    from tvm import relax

    rng = np.random.default_rng(11)
    x = rng.standard_normal(shape).astype("float32")
    weight = rng.standard_normal((4, shape[1], *kernel)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            conv = bb.emit(getattr(relax.op.nn, op)(data, relax.const(weight), padding=padding))
            out = bb.emit_output(bb.emit(relax.op.squeeze(relax.op.nn.relu(conv), [axis])))
        bb.emit_func_output(out)
    return bb.get(), x


def test_conv3d_as_2d_converts_layout_past_a_squeeze_along_a_negative_axis(monkeypatch):
    """TVM's layout conversion fails (std::bad_alloc) on a squeeze along a negative axis after
    a converted operator; the axis is counted from the front first, so the conversion
    succeeds. Were it to fail all the same, each conv3d is still rewritten, wrapped in its own
    transposes, and one line says so (it declined the whole rewrite: lambda layers' conv3d
    ran unscheduled at 2.6 GFLOPS)."""
    from relay2cmake.lower.rewrites import common, conv3d_as_2d

    original, x = _conv_then_squeeze("conv3d", (1, 3, 5, 6, 1), (3, 3, 1), (1, 1, 0, 1, 1, 0), -1)
    expected = _run_relax(original, x)
    notes: list[str] = []
    rewritten = conv3d_as_2d.conv3d_as_conv2d(original, notes)
    assert notes == [] and "conv3d" not in rewritten.script()
    np.testing.assert_allclose(_run_relax(rewritten, x), expected, rtol=1e-5, atol=1e-5)

    assert common.squeeze_axes_counted_from_the_front(original).script().count("axis=[4]") == 1
    monkeypatch.setattr(conv3d_as_2d, "squeeze_axes_counted_from_the_front", lambda module: module)
    rewritten = conv3d_as_2d.conv3d_as_conv2d(original, notes)
    assert len(notes) == 1 and "transposed on its own" in notes[0] and "bad_alloc" in notes[0], notes
    assert "conv3d" not in rewritten.script()
    np.testing.assert_allclose(_run_relax(rewritten, x), expected, rtol=1e-5, atol=1e-5)


def test_channels_last_converts_layout_past_a_squeeze_along_a_negative_axis():
    """The 2-D convolutions' layout conversion, past the same squeeze: nothing is kept in
    the original layout (the squeeze was, with a transpose before it)."""
    from relay2cmake.lower.rewrites.conv2d_nhwc import convolutions_channels_last

    original, x = _conv_then_squeeze("conv2d", (1, 3, 6, 1), (3, 1), (1, 0, 1, 0), -1)
    notes: list[str] = []
    rewritten = convolutions_channels_last(original, fallbacks=notes)
    assert notes == [] and "R.squeeze(" in rewritten.script() and "axis=[2]" in rewritten.script()
    np.testing.assert_allclose(_run_relax(rewritten, x), _run_relax(original, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels", [21, 32])
def test_a_channels_last_resize_then_transpose_runs_in_channel_vectors(channels):
    """A bilinear resize left channels-last, then transposed to the model's channels-first
    output (LR-ASPP's last upsample): the resize is a stage of its own in vectors along the
    channels (the last one predicated where 16 does not divide them), not inlined into the
    transpose, whose vectors gathered 16 pixels one scalar load at a time (5.2x slower), and
    it computes TVM's resize."""
    import tvm
    from tvm import te, topi

    data = te.placeholder((1, 7, 6, channels), "float32", name="x")
    resized = topi.image.resize2d(
        data, [0.0] * 4, (28, 24), layout="NHWC", method="linear", coordinate_transformation_mode="half_pixel"
    )
    func = te.create_prim_func([data, topi.transpose(resized, [0, 3, 1, 2])])
    options = ScheduleOptions(vector_lanes=16, vectorize=True, parallel=False)
    assert schedules._schedule_transpose(func, options) is None  # not the elementwise transposes' path
    scheduled = schedule_function(func, options)
    assert scheduled is not None
    assert 'T.sblock("resize")' in scheduled.script(), "the resize was inlined into the transpose"
    resize_loops = scheduled.script().split('T.sblock("resize")')[0].rsplit("for ", 2)[-1]
    assert re.search(r"T\.vectorized\((T\.int64\()?16\b", resize_loops), scheduled.script()
    x = np.random.default_rng(5).standard_normal((1, 7, 6, channels)).astype("float32")
    got = call_kernel(scheduled, [x, np.zeros((1, channels, 28, 24), "float32")])
    reference = tvm.tirx.build(tvm.IRModule({"main": func}), target="llvm")
    want = tvm.runtime.tensor(np.zeros((1, channels, 28, 24), "float32"))
    reference["main"](tvm.runtime.tensor(x), want)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    "shape, weight_shape, attributes, kept",
    [
        # DeepLab v3's pyramid: taps 36 apart over 14 x 14, only the centre one reads the image
        ((1, 8, 14, 14), (4, 8, 3, 3), {"padding": (36,) * 4, "dilation": (36, 36)}, (1, 1)),
        # 12 apart: every tap reaches the image for some output, nothing dropped
        ((1, 8, 14, 14), (4, 8, 3, 3), {"padding": (12,) * 4, "dilation": (12, 12)}, (3, 3)),
        # uneven: two rows of taps live in height, all in width, grouped, strided
        (
            (1, 8, 9, 11),
            (6, 4, 3, 3),
            {"padding": (10, 0, 10, 0), "dilation": (10, 2), "strides": (2, 1), "groups": 2},
            (1, 3),
        ),
        ((1, 8, 5, 5), (4, 8, 5, 5), {"padding": (8, 1, 4, 2), "dilation": (4, 1)}, (2, 5)),
    ],
)
def test_kernel_taps_that_read_only_padding_are_dropped(shape, weight_shape, attributes, kept):
    """A convolution cut to the taps that reach the image (the padding before it shrunk by
    the taps cut ahead) gives TVM's result for the whole kernel, bit for bit (the cut alone:
    partly live taps are then summed, ``test_an_atrous_convolution_sums_its_live_taps``)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.dead_taps import cut_dead_taps

    rng = np.random.default_rng(6)
    x = rng.standard_normal(shape).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            weight = relax.const(rng.standard_normal(weight_shape).astype("float32"))
            out = bb.emit_output(bb.emit(relax.op.nn.conv2d(data, weight, **attributes)))
        bb.emit_func_output(out)
    original = bb.get()
    rewritten = cut_dead_taps(original)
    convs = [c for c in _calls(rewritten, "relax.nn.conv2d")]
    assert len(convs) == 1 and tuple(int(d) for d in convs[0].args[1].ty.shape)[2:] == kept
    results = []
    for module in (original, rewritten):
        executable = tvm.compile(module, target="llvm")
        results.append(relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy())
    np.testing.assert_array_equal(results[1], results[0])


def _calls(module, op_name: str) -> list:
    import tvm
    from tvm import relax

    found = []
    op = tvm.ir.Op.get(op_name)
    relax.analysis.post_order_visit(
        module["main"], lambda e: found.append(e) if isinstance(e, relax.Call) and e.op == op else None
    )
    return found


@pytest.mark.parametrize("scale_shape", [(1,), (1, 1, 1, 1), (1, 1, 1, 1, 1)])
def test_channels_last_passes_through_one_element_constants(scale_shape):
    """HGNetV2's learnable affine between two convs, ``x * scale + bias`` with constants of
    shape ``[1]``: TVM's layout conversion kept it channels first, between two transposes,
    unless the constants are scalars. They are made scalars (those of no higher rank than the
    data: a rank-5 one broadcasts the result to rank 5, squeezed here, and stays as it is),
    the data stays channels-last from the first conv to the second, and the numbers are the
    original's."""
    from tvm import relax

    from relay2cmake.lower.rewrites.conv2d_nhwc import convolutions_channels_last

    rng = np.random.default_rng(12)
    x = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    weight = rng.standard_normal((8, 8, 3, 3)).astype("float32")
    scale, bias = (np.full(scale_shape, v, "float32") for v in (1.5, -0.25))
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(data, relax.const(weight), padding=1))
            y = bb.emit(relax.op.add(relax.op.multiply(relax.const(scale), y), relax.const(bias)))
            if len(scale_shape) > 4:
                y = bb.emit(relax.op.squeeze(y, [0]))
            out = bb.emit_output(bb.emit(relax.op.nn.conv2d(y, relax.const(weight), padding=1)))
        bb.emit_func_output(out)
    original = bb.get()
    notes: list[str] = []
    rewritten = convolutions_channels_last(original, fallbacks=notes)
    script = rewritten.script()
    data_transposes = [
        line for line in script.splitlines() if "R.permute_dims(" in line and "Const" not in line
    ]
    assert len(data_transposes) == 2, script  # the input's and the output's
    np.testing.assert_allclose(_run_relax(rewritten, x), _run_relax(original, x), rtol=1e-5, atol=1e-5)


def test_transposes_move_past_elementwise_operators_and_cancel():
    """FocalNet's blocks on channels-last data: the model transposes to channels-last for each
    layer norm and back after it, and its residual adds run channels first. After layout
    conversion that was an identity transpose before each norm, a transpose pair after it, and
    residual adds of two transposed images transposed again. The adds (and a GELU, a scalar
    multiply and ConvNeXt's per-channel layer scale, its constant transposed back) now run on
    untransposed data, the pairs cancel, and only the input's and the output's transposes
    stay; the numbers are the original's. An add whose operands are
    transposed differently keeps its transposes."""
    from tvm import relax

    from relay2cmake.lower.rewrites.conv2d_nhwc import convolutions_channels_last
    from relay2cmake.lower.rewrites.transpose_pairs import collapse_transpose_pairs

    rng = np.random.default_rng(13)
    x = rng.standard_normal((1, 8, 6, 6)).astype("float32")
    weight = rng.standard_normal((8, 8, 3, 3)).astype("float32")
    gamma, beta = rng.standard_normal((2, 8)).astype("float32")
    layer_scale = rng.standard_normal((8, 1, 1)).astype("float32")

    def norm(image):  # the model's own transposes around a layer norm over the channels
        last = relax.op.permute_dims(image, [0, 2, 3, 1])
        normed = relax.op.nn.layer_norm(last, relax.const(gamma), relax.const(beta), axes=[3])
        return relax.op.permute_dims(normed, [0, 3, 1, 2])

    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            stream = bb.emit(relax.op.nn.conv2d(data, relax.const(weight), padding=1))
            for _ in range(2):
                branch = bb.emit(relax.op.nn.conv2d(norm(stream), relax.const(weight), padding=1))
                branch = relax.op.multiply(relax.op.nn.gelu(branch), relax.const(0.5, "float32"))
                branch = relax.op.multiply(relax.const(layer_scale), branch)  # per channel
                stream = bb.emit(relax.op.add(stream, branch))
            swapped = relax.op.permute_dims(stream, [0, 1, 3, 2])  # an add of two layouts
            out = bb.emit_output(bb.emit(relax.op.add(stream, swapped)))
        bb.emit_func_output(out)
    original = bb.get()
    converted = convolutions_channels_last(original, fallbacks=[])

    def data_transposes(module) -> int:
        lines = module.script().splitlines()
        return sum("R.permute_dims(" in line and "Const" not in line for line in lines)

    collapsed = collapse_transpose_pairs(converted)
    assert data_transposes(converted) > 6, converted.script()
    # the input's; the output's before the last add; the swap, channels-last
    assert data_transposes(collapsed) == 3, collapsed.script()
    np.testing.assert_allclose(_run_relax(collapsed, x), _run_relax(original, x), rtol=1e-5, atol=1e-5)


def test_a_concat_of_operands_transposed_alike_is_transposed_after():
    """A concat along the channels of two channels-first views of channels-last data,
    transposed back after (HGNetV2's aggregation, when its affine kept channels first): the
    concat runs along the last axis of the untransposed data and no transpose stays; one of
    operands transposed differently keeps its transposes. The numbers are the original's."""
    from tvm import relax

    from relay2cmake.lower.rewrites.transpose_pairs import collapse_transpose_pairs

    x = np.random.default_rng(15).standard_normal((1, 6, 6, 8)).astype("float32")
    for second_axes, kept in (([0, 3, 1, 2], 0), ([0, 3, 2, 1], 3)):
        bb = relax.BlockBuilder()
        data = relax.Var("x", relax.TensorType(x.shape, "float32"))
        with bb.function("main", [data]):
            with bb.dataflow():
                first = relax.op.permute_dims(data, [0, 3, 1, 2])
                second = relax.op.permute_dims(relax.op.nn.relu(data), second_axes)  # rows, columns swapped
                joined = bb.emit(relax.op.concat([first, second], axis=1))
                out = bb.emit_output(bb.emit(relax.op.permute_dims(joined, [0, 2, 3, 1])))
            bb.emit_func_output(out)
        original = bb.get()
        collapsed = collapse_transpose_pairs(original)
        count = sum("R.permute_dims(" in line for line in collapsed.script().splitlines())
        assert count == kept, collapsed.script()
        np.testing.assert_allclose(_run_relax(collapsed, x), _run_relax(original, x), rtol=1e-6)


def test_an_average_pool_over_outer_axes_divides_in_its_write_back():
    """Inception v3's 3 x 3 average pools on 17 x 17 x 768 channels-last images: the window's
    sums over the outer axes divided by each window's size (padding excluded) as the vectors
    are stored, in the one parallel loop nest (the division was a second, scalar pass over a
    whole-image intermediate: 0.089 -> 0.043 ms); numpy's averages."""
    from tvm import te, tirx, topi

    image = np.random.default_rng(8).standard_normal((1, 9, 7, 32)).astype(np.float32)
    data = te.placeholder(image.shape, name="data")
    out = topi.nn.pool2d(data, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), "avg", False, "NHWC", False)
    func = te.create_prim_func([data, out])
    scheduled = schedule_function(func, ScheduleOptions(vector_lanes=16, vectorize=True, parallel=True))
    assert scheduled is not None
    root = scheduled.body.block.body
    nests = list(root.seq) if isinstance(root, tirx.SeqStmt) else [root]
    assert len(nests) == 1 and nests[0].kind == tirx.ForKind.PARALLEL, scheduled.script()
    assert set(_vector_extents(scheduled)) == {16}, _vector_extents(scheduled)
    padded = np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)])
    ones = np.pad(np.ones(image.shape[1:3]), 1)
    sums = sum(padded[0, dy : dy + 9, dx : dx + 7] for dy in range(3) for dx in range(3))
    counts = sum(ones[dy : dy + 9, dx : dx + 7] for dy in range(3) for dx in range(3))
    want = (sums / counts[..., None])[None].astype(np.float32)
    result = call_kernel(scheduled, [image, np.zeros(want.shape, want.dtype)])
    np.testing.assert_allclose(result, want, rtol=1e-6, atol=1e-6)
