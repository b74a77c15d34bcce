"""Relax rewrite: 3-D convolutions as one 2-D convolution over every output frame.

TVM has no CPU schedule for ``conv3d`` and ours are written for 2-D convolutions: a 3-D
ResNet (torchvision's r3d_18, 8 frames of 112 x 112) ran its convolutions as TVM's plain
scalar loops, over 20 s a run. A float32 ``conv3d`` in NCDHW/OIDHW with static shapes is
a ``conv2d`` whose batch is the output frames and whose input channels are the input
channels times the kernel's depth: frame ``z`` of the output reads, for each depth tap
``dz``, input frame ``z * stride + dz * dilation`` (the depth padded first), so the taps
are stacked as channels ``c * depth + dz`` and the kernel ``[O, I, KD, KH, KW]`` becomes
``[O, I * KD, KH, KW]`` (groups keep their channels together). The stacked input is the
kernel's depth times the input (a copy); a kernel of depth 1 and stride 1 only moves the
frames into the batch. It runs before the channels-last rewrite, which then treats the
result like any other 2-D convolution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import (
    constant_or_self,
    rewrite_calls,
    static_float32_convolution,
    static_shape,
)

if TYPE_CHECKING:
    from tvm.ir import IRModule


def conv3d_as_conv2d(module: IRModule) -> IRModule:
    return rewrite_calls(module, "relax.nn.conv3d", _as_conv2d)


def _as_conv2d(mutator, call):
    import tvm
    from tvm import relax

    if not static_float32_convolution(call, "NCDHW", "OIDHW"):
        return call
    emit = mutator.builder_.emit
    attrs = call.attrs
    batch, channels, _, height, width = static_shape(call.args[0])
    outputs, group_inputs, depth, kh, kw = static_shape(call.args[1])
    frames, out_height, out_width = static_shape(call)[2:]
    stride, dilation = int(attrs.strides[0]), int(attrs.dilation[0])
    # (front, top, left, back, bottom, right)
    front, top, left, back, bottom, right = (int(p) for p in attrs.padding)
    data = call.args[0]
    if front or back:
        data = emit(relax.op.nn.pad(data, [0, 0, 0, 0, front, back, 0, 0, 0, 0]))
    taps = []
    for tap in range(depth):
        first = tap * dilation
        last = first + (frames - 1) * stride
        frames_read = emit(
            relax.op.strided_slice(data, axes=[2], begin=[first], end=[last + 1], strides=[stride])
        )
        taps.append(emit(relax.op.expand_dims(frames_read, 2)))
    stacked = taps[0] if depth == 1 else emit(relax.op.concat(taps, axis=2))
    # [N, C, KD, D', H, W] -> [N * D', C * KD, H, W]
    stacked = emit(relax.op.reshape(stacked, (batch, channels * depth, frames, height, width)))
    frames_first = emit(relax.op.permute_dims(stacked, [0, 2, 1, 3, 4]))
    images = emit(relax.op.reshape(frames_first, (batch * frames, channels * depth, height, width)))
    weight = constant_or_self(mutator, call.args[1])
    shape_2d = (outputs, group_inputs * depth, kh, kw)
    if isinstance(weight, tvm.ir.GenericConst):
        weight_2d = relax.const(weight.value.numpy().reshape(shape_2d))
    else:
        weight_2d = emit(relax.op.reshape(call.args[1], shape_2d))
    output = emit(
        relax.op.nn.conv2d(
            images,
            weight_2d,
            strides=(int(attrs.strides[1]), int(attrs.strides[2])),
            padding=(top, left, bottom, right),
            dilation=(int(attrs.dilation[1]), int(attrs.dilation[2])),
            groups=int(attrs.groups),
            out_dtype="float32",
        )
    )
    output = emit(relax.op.reshape(output, (batch, frames, outputs, out_height, out_width)))
    return relax.op.permute_dims(output, [0, 2, 1, 3, 4])
