"""Relax rewrite: 3-D convolutions as one 2-D convolution over every output frame.

TVM has no CPU schedule for ``conv3d`` and ours are written for 2-D convolutions: a 3-D
ResNet (torchvision's r3d_18, 8 frames of 112 x 112) ran its convolutions as TVM's plain
scalar loops, over 20 s a run. A float32 ``conv3d`` in NCDHW/OIDHW with static shapes is
a ``conv2d`` whose batch is the output frames and whose input channels are the input
channels times the kernel's depth: frame ``z`` of the output reads, for each depth tap
``dz``, input frame ``z * stride + dz * dilation`` (the depth padded first), so the taps
are stacked as channels and the kernel ``[O, I, KD, KH, KW]`` becomes HWIO
``[KH, KW, KD * I, O]`` (groups keep their channels together).

The stacking is channels-last (NDHWC, the tap the outer index of a stacked channel within its
group: ``dz * I + c``) and the ``conv2d`` is NHWC/HWIO, so the stacking kernel copies whole
runs of ``I`` contiguous channels of one frame. When every ``conv3d`` of the module can be
rewritten, TVM's layout conversion first moves them to NDHWC/DHWIO and carries that layout
through the elementwise operators, pooling and residual adds between them; a model's
activations then stay channels-last from one convolution to the next. Otherwise each one is
wrapped in its own transposes. Stacked channels-first, every frame went NHWC -> NCDHW ->
stacked NHWC through two transposing kernels (r3d_18's moved 2-4 GB/s). The stacked input is
the kernel's depth times the input (a copy); a kernel of depth 1 and stride 1 only moves the
frames into the batch. It runs before the channels-last rewrite, which takes the NHWC
convolution as it is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from relay2cmake.errors import describe
from relay2cmake.lower.rewrites.common import (
    calls_to,
    constant_or_self,
    rewrite_calls,
    squeeze_axes_counted_from_the_front,
    static_float32_convolution,
    static_shape,
)

if TYPE_CHECKING:
    from tvm.ir import IRModule


def conv3d_as_conv2d(module: IRModule, fallbacks: list[str] | None = None) -> IRModule:
    """The rewrite; when layout conversion fails, each convolution gets its own transposes
    and one line says so in ``fallbacks``."""
    from tvm import relax

    from relay2cmake.lower.rewrites.constant_transposes import fold_constant_transposes

    calls = calls_to(module, "relax.nn.conv3d")
    if not calls:
        return module
    if all(static_float32_convolution(call, "NCDHW", "OIDHW") for call in calls):
        convert = relax.transform.ConvertLayout({"relax.nn.conv3d": ["NDHWC", "DHWIO"]})
        try:
            converted = convert(squeeze_axes_counted_from_the_front(module))
            module = fold_constant_transposes(converted)  # the weights' DHWIO transposes
        except Exception as exc:  # TVM's conversion fails on some operators between them
            if fallbacks is not None:
                fallbacks.append(
                    "conv3d-as-2d: each 3-D convolution transposed on its own "
                    f"(layout conversion failed: {describe(exc, 160)})"
                )
    return rewrite_calls(module, "relax.nn.conv3d", _as_conv2d)


def _as_conv2d(mutator, call):
    import tvm
    from tvm import relax

    channels_first = static_float32_convolution(call, "NCDHW", "OIDHW")
    if not channels_first and not static_float32_convolution(call, "NDHWC", "DHWIO"):
        return call
    emit = mutator.builder_.emit
    attrs = call.attrs
    data, weight = call.args[0], constant_or_self(mutator, call.args[1])
    if channels_first:  # [N, C, D, H, W] -> [N, D, H, W, C], [O, I, KD, KH, KW] -> [KD, KH, KW, I, O]
        data = emit(relax.op.permute_dims(data, [0, 2, 3, 4, 1]))
        if isinstance(weight, tvm.ir.GenericConst):
            weight = relax.const(np.ascontiguousarray(weight.value.numpy().transpose(2, 3, 4, 1, 0)))
        else:
            weight = emit(relax.op.permute_dims(weight, [2, 3, 4, 1, 0]))
    batch, depth_in, height, width, channels = static_shape(data)
    depth, kh, kw, group_inputs, outputs = static_shape(weight)
    frames, out_height, out_width = static_shape(call)[2:] if channels_first else static_shape(call)[1:4]
    stride, dilation = int(attrs.strides[0]), int(attrs.dilation[0])
    # (front, top, left, back, bottom, right)
    front, top, left, back, bottom, right = (int(p) for p in attrs.padding)
    groups = int(attrs.groups)
    if front or back:
        data = emit(relax.op.nn.pad(data, [0, 0, front, back, 0, 0, 0, 0, 0, 0]))
    # [N, D, H, W, G, I]: the taps go between a group and its channels
    data = emit(relax.op.reshape(data, (batch, depth_in + front + back, height, width, groups, group_inputs)))
    taps = []
    for tap in range(depth):
        first = tap * dilation
        last = first + (frames - 1) * stride
        frames_read = emit(
            relax.op.strided_slice(data, axes=[1], begin=[first], end=[last + 1], strides=[stride])
        )
        taps.append(emit(relax.op.expand_dims(frames_read, 5)))
    stacked = taps[0] if depth == 1 else emit(relax.op.concat(taps, axis=5))
    # [N, D', H, W, G, KD, I] -> [N * D', H, W, G * KD * I]
    images = emit(relax.op.reshape(stacked, (batch * frames, height, width, channels * depth)))
    # [KD, KH, KW, I, O] -> [KH, KW, KD * I, O]
    shape_2d = (kh, kw, depth * group_inputs, outputs)
    if isinstance(weight, tvm.ir.GenericConst):
        weight_2d = relax.const(
            np.ascontiguousarray(weight.value.numpy().transpose(1, 2, 0, 3, 4)).reshape(shape_2d)
        )
    else:
        weight_2d = emit(relax.op.reshape(emit(relax.op.permute_dims(weight, [1, 2, 0, 3, 4])), shape_2d))
    output = emit(
        relax.op.nn.conv2d(
            images,
            weight_2d,
            strides=(int(attrs.strides[1]), int(attrs.strides[2])),
            padding=(top, left, bottom, right),
            dilation=(int(attrs.dilation[1]), int(attrs.dilation[2])),
            groups=groups,
            data_layout="NHWC",
            kernel_layout="HWIO",
            out_dtype="float32",
        )
    )
    output = relax.op.reshape(output, (batch, frames, out_height, out_width, outputs))
    return relax.op.permute_dims(emit(output), [0, 4, 1, 2, 3]) if channels_first else output
