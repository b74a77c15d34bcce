"""Relax rewrite: a convolution's kernel taps that read only padding are dropped.

An atrous convolution whose dilation is as large as its image (DeepLab v3's pyramid: 3 x 3
taps 24 and 36 apart over a 14 x 14 map) reads zeros through every tap but the centre one,
for every output pixel: computed as written, those two convolutions took 13 of DeepLab
v3-MobileNet's 28 ms of kernel time for nothing. Along each spatial axis the taps that reach
the image for some output position form a range; the kernel is cut to that range and the
padding before the image shrinks by the taps cut ahead of it, so every output reads the
same values (a 1 x 1 convolution, for the centre tap alone). Applies to ``conv2d`` in NCHW
with static shapes, where the cut leaves no negative padding.
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
    return rewrite_calls(module, "relax.nn.conv2d", _without_dead_taps)


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
