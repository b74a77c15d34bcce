"""Relax rewrite: a transposed convolution whose kernel equals its stride as a matmul.

U-Net's up-convolutions (2x2, stride 2) scatter each input pixel to its own kh x kw block of
output pixels, and no two blocks overlap: ``out[n, o, y*kh + ky, x*kw + kx] = sum_i
in[n, i, y, x] * w[i, o, ky, kx]``. TVM legalizes ``conv2d_transpose`` as a convolution over
the input dilated with zeros, three of every four multiply-adds by zero, in a layout our
schedules do not tile: 10 GFLOPS, a third of a U-Net's time. As a matmul of the pixels
``[N*H*W, I]`` with the constant weights ``[I, O*kh*kw]`` it takes the packed-matmul path,
and two reshapes and a transpose put the blocks in place (memory-bound, scheduled).

Only float32, groups 1, dilation 1, no padding or output padding, NCHW data with IOHW
constant weights: every other transposed convolution keeps TVM's lowering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_calls, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule


def _non_overlapping(call, kernel: tuple[int, ...]) -> bool:
    attrs = call.attrs
    return (
        attrs.data_layout == "NCHW"
        and attrs.kernel_layout == "IOHW"
        and attrs.out_layout in ("NCHW", "")
        and int(attrs.groups) == 1
        and [int(s) for s in attrs.strides] == list(kernel[2:])
        and all(int(d) == 1 for d in attrs.dilation)
        and all(int(p) == 0 for p in attrs.padding)
        and all(int(p) == 0 for p in attrs.output_padding)
        and attrs.out_dtype in ("", "float32", None)
    )


def conv_transpose_as_matmul(module: IRModule) -> IRModule:
    return rewrite_calls(module, "relax.nn.conv2d_transpose", _as_matmul)


def _as_matmul(mutator, call):
    import tvm
    from tvm import relax

    data, weight = call.args[0], constant_or_self(mutator, call.args[1])
    shape, kernel = static_shape(data), static_shape(call.args[1])
    if (
        shape is None
        or kernel is None
        or not isinstance(weight, tvm.ir.GenericConst)
        or str(data.ty.dtype) != "float32"
        or str(weight.ty.dtype) != "float32"
        or not _non_overlapping(call, kernel)
    ):
        return call
    batch, channels, height, width = shape
    _, outputs, kh, kw = kernel
    emit = mutator.builder_.emit
    pixels = emit(relax.op.reshape(emit(relax.op.permute_dims(data, [0, 2, 3, 1])), [-1, channels]))
    weights = relax.const(weight.value.numpy().reshape(channels, outputs * kh * kw))
    blocks = emit(relax.op.matmul(pixels, weights))  # [N*H*W, O*kh*kw], (o, ky, kx) inner
    blocks = emit(relax.op.reshape(blocks, [batch, height, width, outputs, kh, kw]))
    placed = emit(relax.op.permute_dims(blocks, [0, 3, 1, 4, 2, 5]))  # [N, O, H, kh, W, kw]
    return relax.op.reshape(placed, [batch, outputs, height * kh, width * kw])
