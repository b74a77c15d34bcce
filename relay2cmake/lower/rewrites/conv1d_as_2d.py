"""Relax rewrite: 1-D convolutions as 2-D ones of height 1.

TVM has no CPU schedule of its own for ``conv1d``, and ours are written for 2-D convolutions
(``conv2d_nhwc.py``, ``schedules.py``): Whisper's two input convolutions ran unscheduled at
2 GFLOPS, 90% of the encoder's time. A float32 ``conv1d`` in NCW/OIW with static shapes is
``conv2d`` on ``[N, C, 1, W]`` with an ``[O, I, 1, K]`` kernel, stride, padding and dilation
on the width only; the result is reshaped back to ``[N, O, W']``. It runs before the
channels-last rewrite, which then treats it like any other 2-D convolution.
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


def conv1d_as_conv2d(module: IRModule) -> IRModule:
    return rewrite_calls(module, "relax.nn.conv1d", _as_conv2d)


def _as_conv2d(mutator, call):
    import tvm
    from tvm import relax

    if not static_float32_convolution(call, "NCW", "OIW"):
        return call
    attrs = call.attrs
    weight = constant_or_self(mutator, call.args[1])
    if isinstance(weight, tvm.ir.GenericConst):
        array = weight.value.numpy()
        weight_2d = relax.const(array.reshape(array.shape[0], array.shape[1], 1, array.shape[2]))
    else:
        weight_2d = mutator.builder_.emit(relax.op.expand_dims(call.args[1], 2))
    data_2d = mutator.builder_.emit(relax.op.expand_dims(call.args[0], 2))
    left, right = (int(p) for p in attrs.padding)
    output = mutator.builder_.emit(
        relax.op.nn.conv2d(
            data_2d,
            weight_2d,
            strides=(1, int(attrs.strides[0])),
            padding=(0, left, 0, right),
            dilation=(1, int(attrs.dilation[0])),
            groups=int(attrs.groups),
            out_dtype="float32",
        )
    )
    return relax.op.reshape(output, static_shape(call))
