"""Relax rewrite: 2-D convolutions run channels-last (NHWC data, HWIO weights).

A convolution's register tile holds a few pixels times a few vectors of output channels.
Channels-last makes both ends of that tile contiguous: the weights of the tile's channels
are one vector load ([kh, kw, I, O]: O innermost), and its results are whole-vector stores,
so the fused epilogue (bias, relu, clip, residual add) vectorizes too. In NCHW each output
channel of the tile is a separate plane: scalar stores, and a repacking copy per layer.

TVM's ``ConvertLayout`` moves the convolutions to NHWC and carries the layout through the
elementwise operators, pooling and reductions around them; transposes remain only where
the graph leaves that region (the model's input, a flatten before the classifier). The
weights' transposes are constants, folded at generation time. Float32
convolutions with groups 1, depthwise and grouped ones then get this module's own TE definitions,
whose block names the default schedules recognise (``schedules.py``); a few wide groups
become one regular convolution per group (``FEW_GROUPS``); any other convolution keeps
TVM's NHWC legalization.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.errors import describe
from relay2cmake.lower.rewrites import winograd
from relay2cmake.lower.rewrites.common import (
    batch_and_static_shape,
    calls_to,
    constant_or_self,
    one_element_constants_as_scalars,
    rewrite_functions,
    squeeze_axes_counted_from_the_front,
    static_shape,
)
from relay2cmake.lower.rewrites.constant_transposes import fold_constant_transposes
from relay2cmake.lower.rewrites.packed_matmul import (
    COLUMNS_BLOCK,  # the stage that keeps the real columns of a padded computation
    PACK,  # output channels per contiguous weight block
    computed_columns_of,  # whole 16s where 16 does not divide the count (channels too)
)
from relay2cmake.relax_shapes import declared_bounds

if TYPE_CHECKING:
    from tvm.ir import IRModule

# Block names the schedules dispatch on (TVM's own NHWC convolution is "conv2d_nhwc").
CONV_BLOCK = "r2c_conv2d_nhwc"
DEPTHWISE_BLOCK = "r2c_depthwise_conv2d_nhwc"
GROUPED_BLOCK = "r2c_group_conv2d_nhwc"
UINT8_BLOCK = "r2c_conv2d_nhwc_u8s8"
DOT_INPUTS = 4  # input channels one integer dot-product lane sums (VNNI's vpdpbusd)
# A depthwise conv with a channel multiplier under this (FastViT's downsampling: each input
# channel to two outputs) is a depthwise conv of its input with every channel repeated: as a
# grouped conv its vectors, one per group, were 2 lanes wide (5-13 GFLOPS; FastViT-T8's
# largest kernel). The repeat is one copy of the input, times the multiplier. From 8 outputs
# a group the grouped conv's vectors are whole (AVX2's, NEON's) and need no copy.
FEW_OUTPUTS = 8
# A grouped conv with at most this many groups, each of at least PACK input and output
# channels (ResNeSt's split attention: 2 groups of 32-256 inputs and 64-512 outputs), is one
# regular convolution per group over its slice of the channels, concatenated: each then
# gets packed weights or Winograd. As one grouped conv its unpacked HWIO weights were read a
# row of O apart per input channel (27-74 GFLOPS; 68% of ResNeSt-14d's kernel time).
FEW_GROUPS = 8


def _padded(data, padding):
    from tvm import topi

    top, left, bottom, right = (int(p) for p in padding)
    return topi.nn.pad(data, [0, top, left, 0], [0, bottom, right, 0], name="pad_temp")


def _output_extent(size: int, before: int, after: int, kernel: int, stride: int, dilation: int) -> int:
    return (size + before + after - (kernel - 1) * dilation - 1) // stride + 1


def _output_shape(data, kh: int, kw: int, strides, padding, dilation, channels: int) -> tuple:
    batch = data.shape[0]  # a constant, or a batch chosen at run time (the outermost loop)
    height, width = (int(d) for d in data.shape[1:3])
    (sh, sw), (dh, dw) = (int(s) for s in strides), (int(d) for d in dilation)
    top, left, bottom, right = (int(p) for p in padding)
    return (
        batch,
        _output_extent(height, top, bottom, kh, sh, dh),
        _output_extent(width, left, right, kw, sw, dw),
        channels,
    )


def _conv2d_nhwc(
    data,
    weight,
    strides,
    padding,
    dilation,
    depthwise: bool,
    channels: int,
    computed_channels: int | None = None,
    ragged_columns: bool = False,
):
    """``ragged_columns``: the schedules may tile rows of 16 or more with a ragged last column
    tile (``_computed_width``)."""
    from tvm import te

    packed = len(weight.shape) == 5
    if packed:
        _, kh, kw, in_channels, _ = (int(d) for d in weight.shape)
    else:
        kh, kw, in_channels, _ = (int(d) for d in weight.shape)
    sh, sw = (int(s) for s in strides)
    dh, dw = (int(d) for d in dilation)
    shape = _output_shape(data, kh, kw, strides, padding, dilation, channels)
    ragged = ragged_columns and shape[2] >= MIN_RAGGED_WIDTH
    computed_width = shape[2] if depthwise or ragged else _computed_width(shape[2])
    if computed_width != shape[2]:  # the extra columns read zeros past the right edge
        top, left, bottom, right = (int(p) for p in padding)
        padding = [top, left, bottom, right + (computed_width - shape[2]) * sw]
    padded = _padded(data, padding)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    if depthwise:
        integer = str(data.dtype) == "uint8"  # a quantized model's: uint8 x int8 in int32

        def term(value, factor):
            return value.astype("int32") * factor.astype("int32") if integer else value * factor

        return te.compute(
            shape,
            lambda n, y, x, c: te.sum(
                term(padded[n, y * sh + ry * dh, x * sw + rx * dw, c], weight[ry, rx, 0, c]), axis=[ry, rx]
            ),
            name=DEPTHWISE_BLOCK,
        )
    rc = te.reduce_axis((0, in_channels), name="rc")

    def weight_at(f):
        return weight[f // PACK, ry, rx, rc, f % PACK] if packed else weight[ry, rx, rc, f]

    if not packed:  # the weights hold the channels computed (``_widened``), or the real ones
        computed_channels = int(weight.shape[3])
    elif computed_channels is None:
        computed_channels = computed_channels_of(channels)
    if packed and int(weight.shape[0]) * PACK < computed_channels:  # packed by _packed(w, ...)
        raise ValueError(f"packed weights hold {int(weight.shape[0]) * PACK}, not {computed_channels}")
    product = te.compute(
        (*shape[:2], computed_width, computed_channels),
        lambda n, y, x, f: te.sum(
            padded[n, y * sh + ry * dh, x * sw + rx * dw, rc] * weight_at(f), axis=[ry, rx, rc]
        ),
        name=CONV_BLOCK,
    )
    if (computed_width, computed_channels) == (shape[2], channels):
        return product
    return te.compute(shape, lambda *index: product[index], name=COLUMNS_BLOCK)


def computed_channels_of(channels: int, wide: bool = False) -> int:
    """The output channels a packed conv's tile computes (a cut keeps the real ones); the
    packed weights hold that many, the extra ones zero.

    As a packed matmul's columns (``computed_columns_of``): channels that 4 does not divide
    (ShuffleNet's 58, an SSD head's 546) left the tile no vector width, scalar code at 8-26
    GFLOPS; those that 16 does not divide (ShuffleNet's 116, RegNet-Y's 440) left AVX-512
    (and, below 8, AVX2) half-width vectors, 4 lanes at 32 GFLOPS against 55-70 for the
    model's other 1x1 convs. Both compute the zero-padded 16s instead, the second only when
    that adds at most an eighth (NEON's 4-lane vectors and the C kernels gain nothing).

    Besides: an odd count of 16s that 3 does not divide either (RegNet-X's 400 channels: 25
    AVX-512 vectors) leaves the tile of a 7 x 7 image (7 pixels) one vector, one weight load
    and seven broadcasts per seven multiply-adds. One more zero block (416 channels, 4% more
    work) lets it hold two vectors. Only when that adds at most a sixteenth.

    ``wide``: the package has a 16-lane kernel set (x86-64's AVX-512 twin). Then whole 16s
    also when they add at most a third (EfficientNet's and GhostNet's 24 and 40 channels,
    AVX-512 with 8-lane vectors at 45% of the peak): AVX-512's kernels of EfficientNet-B0,
    GhostNet-0.5 and MobileNet v3 small took 5%, 10% and 8% less time, AVX2's +1.4%, -4% and
    +1% (AMD Zen 5, one thread). A package without one (AArch64, C) keeps its channels: 4
    lanes divide them, and the extra ones would be 20-33% more work on those layers."""
    if channels < PACK:
        return _few_channels_computed(channels, wide)
    blocks = -(-channels // PACK)
    if blocks > 3 and blocks % 2 != 0 and blocks % 3 != 0 and 16 * (blocks + 1) * PACK <= 17 * channels:
        return (blocks + 1) * PACK
    if wide and channels % PACK != 0 and 3 * blocks * PACK <= 4 * channels:
        return blocks * PACK
    return computed_columns_of(channels)


def _few_channels_computed(channels: int, wide: bool) -> int:
    """Fewer output channels than a packed block (GhostNet's 6, 10 and 12, MNASNet's 8 and
    12; their weights stay unpacked, ``_widened`` to the count computed): a count that 4 does
    not divide left the tile scalar (GhostNet-0.5's 1x1 convs to 6 and 10 channels: 27
    GFLOPS, AVX-512, 14% of its kernel time), 12 left it 4-lane vectors. Whole vectors of 4
    instead (3 -> 4, 6 -> 8, 10 -> 12: NEON's width); with a 16-lane set, one vector of 8 or
    16, the same instruction count as 8 (more work, but one register where 12 took three).
    One or two channels stay scalar: a vector would be mostly zeros."""
    if channels < 3:
        return channels
    if wide and channels > 4:
        return 8 if channels <= 8 else PACK
    return -(-channels // 4) * 4


def _widened(weight, channels: int):
    """HWIO weights with zero output channels up to ``channels`` (``_few_channels_computed``)."""
    import numpy as np

    return np.pad(weight, [(0, 0)] * 3 + [(0, channels - weight.shape[3])])


def _group_conv2d_nhwc(data, weight, strides, padding, dilation, groups: int):
    """A grouped convolution (ResNeXt's 32 groups, RegNet's 16-channel groups) with HWIO
    weights [kh, kw, I / groups, O]: output channel f reads the input channels of its group,
    (f // (O / groups)) * (I / groups) + rc. A vector of output channels inside one group
    reads one broadcast input value per pixel, as in a regular convolution's tile."""
    from tvm import te

    kh, kw, group_inputs, channels = (int(d) for d in weight.shape)
    group_outputs = channels // groups
    sh, sw = (int(s) for s in strides)
    dh, dw = (int(d) for d in dilation)
    shape = _output_shape(data, kh, kw, strides, padding, dilation, channels)
    padded = _padded(data, padding)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rc = te.reduce_axis((0, group_inputs), name="rc")
    return te.compute(
        shape,
        lambda n, y, x, f: te.sum(
            padded[n, y * sh + ry * dh, x * sw + rx * dw, f // group_outputs * group_inputs + rc]
            * weight[ry, rx, rc, f],
            axis=[ry, rx, rc],
        ),
        name=GROUPED_BLOCK,
    )


MIN_RAGGED_WIDTH = 16  # output columns from which a conv takes ragged tiles (_computed_width)


def _computed_width(width: int) -> int:
    """Output columns the convolution computes: an image width with no divisor from 4 to 8
    (SqueezeNet's 13 x 13 classifier) leaves the tile one pixel, every weight vector read
    once per pixel (20 GFLOPS); it is rounded up to the next width that has one (14), and a
    last stage keeps the real columns (folded into the tile's store, as for matmuls).

    Not where the x86 schedules can take a ragged last column tile instead (a package with
    an AVX-512 set, no cut of padded output channels, rows of MIN_RAGGED_WIDTH or more:
    ``schedules._pixel_tile``), which computes no extra column and needs no padded copy of
    the image (an unpadded conv reads the input itself). Kernels alone, Intel Xeon: Inception
    v3's convs on 17 x 17 (rounded to 18), 73 x 73 and 149 x 149 images, AVX-512 1.02-1.24x
    as fast (the 12 1x1 768 -> 192 convs 0.527 -> 0.463 ms), AVX2 0.99-1.39x; SqueezeNet's
    on 27 x 27 and its 111 x 111 stem AVX-512 1.11-1.45x, AVX2 0.93-1.16x (0.93: the stem, 0.03
    ms). Its 13 x 13 ones keep the 14 columns: AVX2's ragged tiles of 13 had two columns and
    ran 0.84-0.97x as fast (AVX-512's 1.1-1.2x)."""

    def tiles_well(w: int) -> bool:
        return any(w % d == 0 for d in range(4, 9))

    if width <= 4 or tiles_well(width):
        return width
    return next(w for w in range(width + 1, 2 * width) if tiles_well(w))


def _packed(weight, channels: int):
    """HWIO → [O/16, kh, kw, I, 16]: the 16 output channels of one tile column block are
    contiguous for every (kh, kw, I), so a tile's weights are one sequential stream. In HWIO
    consecutive input channels are O * 4 bytes apart, a stride that maps every row of the
    block to the same few L1 sets (measured, 1x1 256 → 1024 on 14 x 14, AVX2: 53 → 105
    GFLOPS). Blocks are zero-padded up to ``channels``, the channels the tile computes
    (``computed_channels_of``); a cut after the tile drops the extra ones."""
    import numpy as np

    kh, kw, in_channels, real = weight.shape
    padded = np.pad(weight, [(0, 0)] * 3 + [(0, -(-channels // PACK) * PACK - real)])
    blocks = padded.reshape(kh, kw, in_channels, -1, PACK).transpose(3, 0, 1, 2, 4)
    return np.ascontiguousarray(blocks)


def _uint8_conv2d_nhwc(data, weight, strides, padding, dilation, channels: int | None = None):
    """A uint8 x int8 convolution (a quantized model's: the frontend's ``_uint8_conv``) with
    weights packed [O/16, kh, kw, I/4, 16, 4] (``_packed_int8``): the 4 input channels of 16
    output channels that one VNNI instruction takes are 64 contiguous bytes, against 4
    broadcast bytes of one pixel. Sums in int32. The image is padded with zeros, which is
    exact: the frontend pads a nonzero zero point itself. Output channels that 16 does not
    divide (MobileNet v2's 24) are computed in whole 16s, their weights zero, and a cut keeps
    the real ``channels``."""
    from tvm import te

    blocks, kh, kw, quads, _, _ = (int(d) for d in weight.shape)
    sh, sw = (int(v) for v in strides)
    dh, dw = (int(v) for v in dilation)
    channels = channels or blocks * PACK
    shape = _output_shape(data, kh, kw, strides, padding, dilation, blocks * PACK)
    padded = _padded(data, padding)
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    rco = te.reduce_axis((0, quads), name="rco")
    rci = te.reduce_axis((0, DOT_INPUTS), name="rci")
    product = te.compute(
        shape,
        lambda n, y, x, f: te.sum(
            padded[n, y * sh + ry * dh, x * sw + rx * dw, rco * DOT_INPUTS + rci].astype("int32")
            * weight[f // PACK, ry, rx, rco, f % PACK, rci].astype("int32"),
            axis=[ry, rx, rco, rci],
        ),
        name=UINT8_BLOCK,
    )
    if channels == blocks * PACK:
        return product
    return te.compute((*shape[:3], channels), lambda *index: product[index], name=COLUMNS_BLOCK)


def _packed_int8(weight):
    """HWIO int8 → [O/16, kh, kw, I/4, 16, 4] (``_uint8_conv2d_nhwc``), output channels
    zero-padded to whole 16s."""
    import numpy as np

    weight = np.pad(weight, [(0, 0)] * 3 + [(0, -weight.shape[3] % PACK)])
    kh, kw, in_channels, out_channels = weight.shape
    quads = weight.reshape(kh, kw, in_channels // DOT_INPUTS, DOT_INPUTS, out_channels // PACK, PACK)
    return np.ascontiguousarray(quads.transpose(4, 0, 1, 2, 5, 3))


def has_uint8_convolutions(module: IRModule) -> bool:
    """Whether ``module`` convolves uint8 data with int8 weights (a quantized model)."""
    return any(
        [str(getattr(a.ty, "dtype", "")) for a in call.args[:2]] == ["uint8", "int8"]
        for call in calls_to(module, "relax.nn.conv2d")
    )


def _kind(call) -> str | None:
    """'conv', 'depthwise', 'grouped', 'uint8' or None (not one of ours: TVM's legalization
    keeps it)."""
    attrs = call.attrs
    data, weight = batch_and_static_shape(call.args[0]), static_shape(call.args[1])
    layouts = (attrs.data_layout, attrs.kernel_layout, attrs.out_layout) == ("NHWC", "HWIO", "NHWC")
    dtypes = (str(call.args[0].ty.dtype), str(call.args[1].ty.dtype), str(attrs.out_dtype))
    if layouts and data is not None and weight is not None and dtypes == ("uint8", "int8", "int32"):
        if int(attrs.groups) == 1 and data[3] % DOT_INPUTS == 0 and weight[3] >= PACK:
            return "uint8"
        if int(attrs.groups) == data[3] and weight[2] == 1 and weight[3] == data[3]:
            return "depthwise"  # widened to int32 as it multiplies
        return None
    if (
        data is None
        or weight is None
        or not layouts
        or str(call.args[0].ty.dtype) != "float32"
        or str(call.args[1].ty.dtype) != "float32"
        or attrs.out_dtype not in ("", "float32", None)
    ):
        return None
    groups, channels = int(attrs.groups), data[3]
    if groups == 1:
        return "conv"
    if groups == channels and weight[2] == 1 and weight[3] == channels:
        return "depthwise"
    if (
        groups == channels
        and weight[2] == 1
        and weight[3] % channels == 0
        and weight[3] < FEW_OUTPUTS * channels
    ):
        return "multiplier"
    if channels % groups == 0 and weight[3] % groups == 0 and weight[2] * groups == channels:
        wide_groups = weight[2] >= PACK and weight[3] // groups >= PACK
        return "split" if groups <= FEW_GROUPS and wide_groups else "grouped"
    return None


def _dimension_ranges(module) -> dict[str, tuple[int, int]]:
    """Each run-time dimension's (lowest, highest) value, from the bounds the frontend put
    on the Relax functions."""
    ranges: dict[str, tuple[int, int]] = {}
    for func in module.functions.values():
        lows, highs = declared_bounds(func)
        ranges.update({name: (lows.get(name, 1), high) for name, high in highs.items()})
    return ranges


def _winograd_qualifies(kernel, attrs, out_shape: list, batch_ranges: dict[str, tuple[int, int]]) -> bool:
    """``winograd.qualifies`` for an output whose batch may be chosen at run time: then
    judged with that dimension's range (a batch that is an expression of several is not)."""
    batch, fewest = out_shape[0], None
    if not isinstance(batch, int):
        if not hasattr(batch, "name") or str(batch.name) not in batch_ranges:
            return False
        fewest, batch = batch_ranges[str(batch.name)]
    return winograd.qualifies(kernel, attrs.strides, attrs.dilation, [batch, *out_shape[1:]], fewest)


def _has_conv2d(module) -> bool:
    return bool(calls_to(module, "relax.nn.conv2d"))


_BARRIER = "relay2cmake.layout_barrier."  # hides one call from layout conversion
_CONVOLUTIONS = ("relax.nn.conv2d", "relax.nn.conv2d_transpose")


def _convert_layout(module):
    from tvm import relax

    # Operators whose legalization knows one layout only are pinned to it, so that layout
    # conversion puts transposes around them instead of handing them NHWC data they cannot
    # lower (TVM legalizes conv2d_transpose for NCHW/IOHW only: a U-Net's up-convolutions).
    return relax.transform.ConvertLayout(
        {"relax.nn.conv2d": ["NHWC", "HWIO"], "relax.nn.conv2d_transpose": ["NCHW", "IOHW"]}
    )(one_element_constants_as_scalars(squeeze_axes_counted_from_the_front(module)))


def _operators(module) -> list[str]:
    """The Relax operators ``module`` calls besides convolutions, in order of first use."""
    names: dict[str, None] = {}
    for call in calls_to(module):
        if call.op.name not in _CONVOLUTIONS and not call.op.name.startswith("relax.call_"):
            names.setdefault(call.op.name)
    return list(names)


def _convert_layout_around(module, hidden: frozenset[str]):
    """Layout conversion with every call of the ``hidden`` operators behind an opaque packed
    call, which conversion treats as layout-unaware: it hands such a call its inputs back in
    the original layout. The calls are restored afterwards."""
    import tvm
    from tvm import relax

    calls: list[tuple] = []

    @relax.expr_functor.mutator
    class _Hide(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if not (isinstance(call.op, tvm.ir.Op) and call.op.name in hidden):
                return call
            calls.append((call.op, call.attrs, call.ty_args))
            return relax.call_pure_packed(f"{_BARRIER}{len(calls) - 1}", *call.args, ty_args=call.ty)

    packed = tvm.ir.Op.get("relax.call_pure_packed")

    @relax.expr_functor.mutator
    class _Restore(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != packed or not str(call.args[0].global_symbol).startswith(_BARRIER):
                return call
            op, attrs, ty_args = calls[int(str(call.args[0].global_symbol)[len(_BARRIER) :])]
            return relax.Call(op, list(call.args[1:]), attrs, ty_args)

    converted = _convert_layout(rewrite_functions(module, _Hide(module)))
    return rewrite_functions(converted, _Restore(converted))


def channels_last_layout(module: IRModule) -> tuple[IRModule, list[str]]:
    """Layout conversion, declined for the fewest operators when it fails on some: first each
    operator kind alone is kept in its original layout (converted back just before it), then
    every operator but the convolutions. Returns the module and one line per decline."""
    try:
        return _convert_layout(module), []
    except Exception as exc:
        failure = describe(exc, 160)
    others = _operators(module)
    for hidden in [[name] for name in others] + [others]:
        try:
            converted = _convert_layout_around(module, frozenset(hidden))
        except Exception:
            continue
        kept = ", ".join(n.removeprefix("relax.") for n in hidden)
        return converted, [
            f"channels-last: {kept} kept in the original layout (layout conversion failed: {failure})"
        ]
    raise RuntimeError(f"layout conversion failed ({failure}), even around every other operator")


def _clip_as_min_max(module):
    """``clip(x, lo, hi)`` as ``max(min(x, hi), lo)`` (TVM's own lowering of clip, so the same
    numbers): layout conversion passes elementwise binary operators but not ``clip``, and put
    two transposes around every ReLU6 and hard-swish of a MobileNet (11% of MobileNet v3's
    kernel time went to one such pair)."""
    import tvm
    from tvm import relax

    clip = tvm.ir.Op.get("relax.clip")

    @relax.expr_functor.mutator
    class _Clip(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            dtype = str(getattr(call.ty, "dtype", ""))
            if call.op != clip or not dtype.startswith("float"):
                return call
            lo, hi = call.args[1], call.args[2]
            if not all(isinstance(v, tvm.tirx.FloatImm | tvm.tirx.IntImm) for v in (lo, hi)):
                return call
            low, high = relax.const(float(lo.value), dtype), relax.const(float(hi.value), dtype)
            return relax.op.maximum(self.builder_.emit(relax.op.minimum(call.args[0], high)), low)

    return rewrite_functions(module, _Clip(module))


def convolutions_channels_last(
    module: IRModule, winograd_3x3: bool = True, fallbacks: list[str] | None = None, wide: bool = False
) -> IRModule:
    """The rewrite; lines for operators layout conversion could not pass go to ``fallbacks``.
    ``wide``: the package has a 16-lane kernel set (``computed_channels_of``)."""
    import tvm
    from tvm import relax

    if not _has_conv2d(module):
        return module
    module, declined = channels_last_layout(_clip_as_min_max(module))
    if fallbacks is not None:
        fallbacks.extend(declined)
    module = fold_constant_transposes(module)
    conv2d = tvm.ir.Op.get("relax.nn.conv2d")
    batch_ranges = _dimension_ranges(module)

    repeated: dict = {}  # (data, multiplier) -> its repeated channels, emitted once

    def _block_scoped(visit, block):
        """A repeat is reused only inside the block that binds it (its variable's scope)."""
        outer = dict(repeated)
        repeated.clear()
        try:
            return visit(block)
        finally:
            repeated.clear()
            repeated.update(outer)

    @relax.expr_functor.mutator
    class _Conv(relax.PyExprMutator):
        def visit_binding_block_(self, block):
            return _block_scoped(super().visit_binding_block_, block)

        def visit_dataflow_block_(self, block):
            return _block_scoped(super().visit_dataflow_block_, block)

        def visit_call_(self, call):
            call = super().visit_call_(call)
            kind = _kind(call) if call.op == conv2d else None
            if kind is None:
                return call
            if kind == "uint8":
                weight = constant_or_self(self, call.args[1])
                if not isinstance(weight, tvm.ir.GenericConst):
                    return call
                return self.builder_.call_te(
                    _uint8_conv2d_nhwc,
                    call.args[0],
                    relax.const(_packed_int8(weight.value.numpy())),
                    strides=list(call.attrs.strides),
                    padding=list(call.attrs.padding),
                    dilation=list(call.attrs.dilation),
                    channels=static_shape(call.args[1])[3],
                    primfunc_name_hint="conv2d_nhwc_u8s8",
                )
            if kind == "multiplier":
                data = call.args[0]
                multiplier = static_shape(call.args[1])[3] // batch_and_static_shape(data)[3]
                if (data, multiplier) not in repeated:  # FastViT's 7x7 and 3x3 branches share one
                    repeated[data, multiplier] = self.builder_.emit(relax.op.repeat(data, multiplier, axis=3))
                depthwise = relax.op.nn.conv2d(
                    repeated[data, multiplier],
                    call.args[1],
                    strides=call.attrs.strides,
                    padding=call.attrs.padding,
                    dilation=call.attrs.dilation,
                    groups=int(call.attrs.groups) * multiplier,
                    data_layout="NHWC",
                    kernel_layout="HWIO",
                    out_dtype=call.attrs.out_dtype,
                )
                return self.visit_call_(self.builder_.normalize(depthwise))
            if kind == "split":
                weight = constant_or_self(self, call.args[1])
                if isinstance(weight, tvm.ir.GenericConst):
                    return self._per_group(call, weight.value.numpy())
            if kind in ("grouped", "split"):
                return self.builder_.call_te(
                    _group_conv2d_nhwc,
                    call.args[0],
                    call.args[1],
                    strides=list(call.attrs.strides),
                    padding=list(call.attrs.padding),
                    dilation=list(call.attrs.dilation),
                    groups=int(call.attrs.groups),
                    primfunc_name_hint="group_conv2d_nhwc",
                )
            weight = constant_or_self(self, call.args[1])
            kernel = static_shape(call.args[1])
            channels = kernel[3]
            constant = isinstance(weight, tvm.ir.GenericConst)
            attrs = call.attrs
            out_shape = batch_and_static_shape(call)
            if (
                winograd_3x3
                and kind == "conv"
                and constant
                and out_shape is not None
                and _winograd_qualifies(kernel, attrs, out_shape, batch_ranges)
            ):
                return winograd.convolution(
                    self.builder_, call.args[0], weight.value.numpy(), attrs.padding, out_shape
                )
            computed = computed_channels_of(channels, wide)
            if kind == "conv" and constant and channels >= PACK:
                weight = relax.const(_packed(weight.value.numpy(), computed))
            elif kind == "conv" and constant and computed != channels:
                weight = relax.const(_widened(weight.value.numpy(), computed))
            else:
                weight = call.args[1]
            return self.builder_.call_te(
                _conv2d_nhwc,
                call.args[0],
                weight,
                strides=list(call.attrs.strides),
                padding=list(call.attrs.padding),
                dilation=list(call.attrs.dilation),
                depthwise=kind == "depthwise",
                channels=channels,
                computed_channels=computed,
                ragged_columns=wide and computed == channels,
                primfunc_name_hint="conv2d_nhwc" if kind == "conv" else "depthwise_conv2d_nhwc",
            )

        def _per_group(self, call, weight):
            """One regular convolution per group over its channels (``weight``: the HWIO
            constant), concatenated."""
            groups = int(call.attrs.groups)
            inputs, outputs = weight.shape[2], weight.shape[3] // groups
            convs = []
            for g in range(groups):
                data = self.builder_.emit(
                    relax.op.strided_slice(call.args[0], axes=[3], begin=[g * inputs], end=[(g + 1) * inputs])
                )
                conv = relax.op.nn.conv2d(
                    data,
                    relax.const(weight[:, :, :, g * outputs : (g + 1) * outputs].copy()),
                    strides=call.attrs.strides,
                    padding=call.attrs.padding,
                    dilation=call.attrs.dilation,
                    data_layout="NHWC",
                    kernel_layout="HWIO",
                    out_dtype=call.attrs.out_dtype,
                )
                convs.append(self.builder_.emit(self.visit_call_(self.builder_.normalize(conv))))
            return relax.op.concat(convs, axis=3)

    return rewrite_functions(module, _Conv(module))
