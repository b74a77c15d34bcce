"""Relax rewrite: convolutions with constant weights read them packed by output channel.

A register tile of a convolution holds several output channels for several pixels. With
TVM's OIHW weights, the channels of one tile are far apart in memory, so the tile loads
each weight as a scalar; with weights packed as [O/16, I, kh, kw, 16] (once, at generation
time: the weights are constants) 16 channels are one contiguous vector load, and the input
pixel is the broadcast operand. That halves the loads per multiply-add, which is what
bounds a convolution on CPUs (measured: about 2x on ResNet-50's 3x3 convolutions).

Only plain float32 NCHW/OIHW 2-D convolutions qualify (groups 1, dilation 1, output
channels a multiple of 16, output width a multiple of 4); everything else keeps TVM's
legalization. The rewrite is
target-independent, so the C kernels and every object set take the same packed constants.
"""

from __future__ import annotations

from relay2cmake.relax_rewrite import rewrite_functions

PACK = 16  # output channels per packed row: one AVX-512 vector, two AVX2 or four NEON vectors


def _conv2d_packed(data, packed, strides, padding, channels: int):
    from tvm import te, topi

    _, in_channels, height, width = (int(d) for d in data.shape)
    kh, kw = int(packed.shape[2]), int(packed.shape[3])
    top, left, bottom, right = (int(p) for p in padding)
    sh, sw = (int(s) for s in strides)
    padded = topi.nn.pad(data, [0, 0, top, left], [0, 0, bottom, right], name="pad_temp")
    out_h = (height + top + bottom - kh) // sh + 1
    out_w = (width + left + right - kw) // sw + 1
    rc = te.reduce_axis((0, in_channels), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    return te.compute(
        (int(data.shape[0]), channels, out_h, out_w),
        lambda n, f, y, x: te.sum(
            padded[n, rc, y * sh + ry, x * sw + rx] * packed[f // PACK, rc, ry, rx, f % PACK],
            axis=[rc, ry, rx],
        ),
        name="conv2d_nchw_packed",
    )


def _output_width(call) -> int:
    attrs = call.attrs
    width = int(call.args[0].ty.shape.values[3])
    kw = int(call.args[1].value.numpy().shape[3])
    left, right = int(attrs.padding[1]), int(attrs.padding[3])
    return (width + left + right - kw) // int(attrs.strides[1]) + 1


def _qualifies(call, weight) -> bool:
    attrs = call.attrs
    shape = weight.shape
    return (
        str(weight.dtype) == "float32"
        and str(call.args[0].ty.dtype) == "float32"
        and attrs.data_layout == "NCHW"
        and attrs.kernel_layout == "OIHW"
        and (attrs.out_layout in ("", "NCHW", None))
        and int(attrs.groups) == 1
        and all(int(d) == 1 for d in attrs.dilation)
        and len(shape) == 4
        and shape[0] % PACK == 0
        and attrs.out_dtype in ("", "float32", None)
        and all(hasattr(d, "value") for d in call.args[0].ty.shape.values)
        # A packed tile spans 4 or 6 output columns, 2 x 2 pixels (14 wide), or one row of 7
        # pixels with fewer channels (7 wide, stride 1: strided, it ran at 10 GFLOPS); other
        # widths keep the OIHW schedule.
        and (
            _output_width(call) % 2 == 0
            or (_output_width(call) % 7 == 0 and all(int(s) == 1 for s in attrs.strides))
        )
    )


def pack_conv_weights(module):
    import numpy as np
    import tvm
    from tvm import relax

    conv2d = tvm.ir.Op.get("relax.nn.conv2d")

    @relax.expr_functor.mutator
    class _Pack(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != conv2d or not isinstance(call.args[1], tvm.ir.GenericConst):
                return call
            weight = call.args[1].value.numpy()
            if not _qualifies(call, weight):
                return call
            out_channels, in_channels, kh, kw = weight.shape
            packed = np.ascontiguousarray(
                weight.reshape(out_channels // PACK, PACK, in_channels, kh, kw).transpose(0, 2, 3, 4, 1)
            )
            return self.builder_.call_te(
                _conv2d_packed,
                call.args[0],
                relax.const(packed),
                strides=list(call.attrs.strides),
                padding=list(call.attrs.padding),
                channels=out_channels,
                primfunc_name_hint="conv2d_packed",
            )

    return rewrite_functions(module, _Pack(module))
