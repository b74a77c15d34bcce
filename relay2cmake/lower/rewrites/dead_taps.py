"""Relax rewrite: a convolution's kernel taps that read only padding are dropped.

An atrous convolution whose dilation is as large as its image (DeepLab v3's pyramid: 3 x 3
taps 24 and 36 apart over a 14 x 14 map) reads zeros through every tap but the centre one,
for every output pixel: computed as written, those two convolutions took 13 of DeepLab
v3-MobileNet's 28 ms of kernel time for nothing. Along each spatial axis the taps that reach
the image for some output position form a range; the kernel is cut to that range and the
padding before the image shrinks by the taps cut ahead of it, so every output reads the
same values (a 1 x 1 convolution, for the centre tap alone). Applies to ``conv2d`` in NCHW
with static shapes, where the cut leaves no negative padding. Taps that reach the image for
only some outputs are then summed as 1 x 1 convolutions over those outputs alone
(``_as_live_tap_sums``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import rewrite_calls, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule


def live_taps(size: int, out: int, kernel: int, stride: int, dilation: int, before: int) -> tuple[int, int]:
    """(first, last) tap of one axis that reads the image (not padding) for some output."""
    live = [
        tap
        for tap in range(kernel)
        if any(0 <= o * stride + tap * dilation - before < size for o in range(out))
    ]
    return (live[0], live[-1]) if live else (kernel // 2, kernel // 2)


def conv_dead_taps(module: IRModule) -> IRModule:
    """Dead taps cut, then partly live ones summed."""
    return rewrite_calls(cut_dead_taps(module), "relax.nn.conv2d", _as_live_tap_sums)


def cut_dead_taps(module: IRModule) -> IRModule:
    """Each kernel cut to the taps that reach the image for some output."""
    return rewrite_calls(module, "relax.nn.conv2d", _without_dead_taps)


def live_outputs(size: int, out: int, tap: int, dilation: int, before: int) -> tuple[int, int]:
    """[first, end) of the outputs of one axis whose input through ``tap`` is in the image
    (stride 1); empty when first >= end."""
    return max(0, before - tap * dilation), min(out, size + before - tap * dilation)


# Rewritten as sums of 1x1 convs when at most this share of the multiply-adds reads the image.
LIVE_SHARE = 0.5


def _as_live_tap_sums(mutator, call):
    """A dilated convolution whose taps reach the image for only some outputs (DeepLab v3's
    3 x 3 taps 12 apart over a 14 x 14 map: each off-centre tap reads the image for 2 of the 14
    rows or columns, so 81% of its multiply-adds read padding): the sum over taps of a 1 x 1
    convolution of the image region each one reads, zero-padded to the outputs it reaches.
    The same products, summed in another order (float32 rounding apart). Dilated, stride 1,
    groups 1, NCHW with static shapes; declined unless at most ``LIVE_SHARE`` of the work is
    live (a 3 x 3 conv on a 2 x 2 map would become nine kernels of a pixel or two)."""
    from tvm import relax

    attrs = call.attrs
    if (
        attrs.data_layout != "NCHW"
        or attrs.kernel_layout != "OIHW"
        or attrs.out_layout not in ("", "NCHW")  # the terms are NCHW
        or int(attrs.groups) != 1
        or any(int(s) != 1 for s in attrs.strides)
        or all(int(d) == 1 for d in attrs.dilation)  # atrous only: small maps keep one conv
    ):
        return call
    data, weight, out = (static_shape(e) for e in (call.args[0], call.args[1], call))
    if data is None or weight is None or out is None or weight[2] * weight[3] == 1:
        return call
    top, left = int(attrs.padding[0]), int(attrs.padding[1])
    ranges = [
        [
            live_outputs(data[2 + a], out[2 + a], tap, int(attrs.dilation[a]), (top, left)[a])
            for tap in range(weight[2 + a])
        ]
        for a in range(2)
    ]
    live = [sum(max(0, end - first) for first, end in axis) for axis in ranges]
    if live[0] * live[1] > LIVE_SHARE * weight[2] * weight[3] * out[2] * out[3]:
        return call
    total = None
    for ky, (y0, y1) in enumerate(ranges[0]):
        for kx, (x0, x1) in enumerate(ranges[1]):
            if y0 >= y1 or x0 >= x1:
                continue
            dy, dx = ky * int(attrs.dilation[0]) - top, kx * int(attrs.dilation[1]) - left
            region = mutator.builder_.emit(
                relax.op.strided_slice(
                    call.args[0], axes=[2, 3], begin=[y0 + dy, x0 + dx], end=[y1 + dy, x1 + dx]
                )
            )
            tap = mutator.builder_.emit(
                relax.op.strided_slice(call.args[1], axes=[2, 3], begin=[ky, kx], end=[ky + 1, kx + 1])
            )
            term = mutator.builder_.emit(relax.op.nn.conv2d(region, tap, out_dtype=attrs.out_dtype or None))
            if (y0, y1, x0, x1) != (0, out[2], 0, out[3]):
                widths = [0, 0, 0, 0, y0, out[2] - y1, x0, out[3] - x1]
                term = mutator.builder_.emit(relax.op.nn.pad(term, widths))
            total = term if total is None else mutator.builder_.emit(relax.op.add(total, term))
    return call if total is None else total


def _without_dead_taps(mutator, call):
    from tvm import relax

    if call.attrs.data_layout != "NCHW" or call.attrs.kernel_layout != "OIHW":
        return call
    data, weight, out = (static_shape(e) for e in (call.args[0], call.args[1], call))
    if data is None or weight is None or out is None:
        return call
    attrs = call.attrs
    top, left, bottom, right = (int(p) for p in attrs.padding)
    cuts, padding = [], [[top, bottom], [left, right]]
    for axis in range(2):
        stride, dilation = int(attrs.strides[axis]), int(attrs.dilation[axis])
        kernel, before = weight[2 + axis], padding[axis][0]
        first, last = live_taps(data[2 + axis], out[2 + axis], kernel, stride, dilation, before)
        new_before = before - first * dilation
        new_after = (out[2 + axis] - 1) * stride + (last - first) * dilation + 1 - data[2 + axis] - new_before
        if new_before < 0 or new_after < 0:
            return call
        cuts.append((first, last + 1))
        padding[axis] = [new_before, new_after]
    if all(cut == (0, k) for cut, k in zip(cuts, weight[2:], strict=True)):
        return call
    kept = mutator.builder_.emit(
        relax.op.strided_slice(
            call.args[1], axes=[2, 3], begin=[c[0] for c in cuts], end=[c[1] for c in cuts]
        )
    )
    return relax.op.nn.conv2d(
        call.args[0],
        kept,
        strides=[int(s) for s in attrs.strides],
        padding=(padding[0][0], padding[1][0], padding[0][1], padding[1][1]),
        dilation=[int(d) for d in attrs.dilation],
        groups=int(attrs.groups),
        data_layout="NCHW",
        kernel_layout="OIHW",
        out_layout=attrs.out_layout,
        out_dtype=attrs.out_dtype or None,
    )
