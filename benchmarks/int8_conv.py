"""A 3x3 convolution three ways, timed alone (one thread, TVM's time_evaluator): float32, the
int32 kernel quantized models use today (8-bit operands widened, float32's tiles), and uint8 x
int8 with AVX-512 VNNI's ``vpdpbusd`` (4 products summed into each int32 lane per
instruction). The measurement behind the integer kernels of the quantized-models issue;
needs a CPU with avx512_vnni.

    .venv/bin/python benchmarks/int8_conv.py            # ResNet-18's four 3x3 shapes

Layouts: activations NHWC; float32 weights [O/16, kh, kw, I, 16]; int8 weights [O/16, kh, kw,
I/4, 16, 4], so that one 64-byte load holds the 4 input channels of 16 output channels that
one ``vpdpbusd`` takes against 4 broadcast activation bytes. The VNNI kernel's result is
checked against NumPy's exact int64 convolution.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # relay2cmake from this checkout

SHAPES = [(56, 64), (28, 128), (14, 256), (7, 512)]  # (image side, channels in = out)
KERNEL = 3
TILE_PIXELS, TILE_BLOCKS = 7, 2  # register tile: pixels x 16-channel blocks


def build(kind: str, side: int, channels: int):
    import tvm
    from tvm import s_tir, te

    from relay2cmake.lower.int8_dot import vnni_intrinsic

    padded = side + KERNEL - 1
    ry, rx = te.reduce_axis((0, KERNEL), "ry"), te.reduce_axis((0, KERNEL), "rx")
    if kind == "float32":
        data = te.placeholder((1, padded, padded, channels), "float32", name="data")
        w = te.placeholder((channels // 16, KERNEL, KERNEL, channels, 16), "float32", name="w")
        rc = te.reduce_axis((0, channels), "rc")
        out = te.compute(
            (1, side, side, channels // 16, 16),
            lambda n, y, x, fo, fi: te.sum(
                data[n, y + ry, x + rx, rc] * w[fo, ry, rx, rc, fi], axis=[ry, rx, rc]
            ),
            name="conv",
        )
    else:
        data = te.placeholder(
            (1, padded, padded, channels), "uint8" if kind == "vnni" else "int32", name="data"
        )
        w = te.placeholder((channels // 16, KERNEL, KERNEL, channels // 4, 16, 4), "int8", name="w")
        rco, rci = te.reduce_axis((0, channels // 4), "rco"), te.reduce_axis((0, 4), "rci")
        out = te.compute(
            (1, side, side, channels // 16, 16),
            lambda n, y, x, fo, fi: te.sum(
                data[n, y + ry, x + rx, rco * 4 + rci].astype("int32")
                * w[fo, ry, rx, rco, fi, rci].astype("int32"),
                axis=[ry, rx, rco, rci],
            ),
            name="conv",
        )
    sch = s_tir.Schedule(te.create_prim_func([data, w, out]))
    block = sch.get_sblock("conv")
    n, y, x, fo, fi, *reduction = sch.get_loops(block)
    f0, f1 = sch.split(fo, [None, TILE_BLOCKS])
    x0, x1 = sch.split(x, [None, TILE_PIXELS])
    if kind == "float32":  # one multiply-add per input channel: rc outside the tile
        sch.reorder(n, y, x0, f0, *reduction, x1, f1, fi)
    else:  # four input channels per instruction: the innermost reduction inside it
        sch.reorder(n, y, x0, f0, *reduction[:-1], x1, f1, fi, reduction[-1])
    sch.unroll(x1)
    sch.unroll(f1)
    if kind == "vnni":
        init = sch.decompose_reduction(block, reduction[0])
        sch.tensorize(fi, vnni_intrinsic())
    else:
        if kind == "int32":
            sch.unroll(reduction[-1])
        sch.vectorize(fi)
        init = sch.decompose_reduction(block, reduction[0])
    sch.vectorize(sch.get_loops(init)[-1])
    target = tvm.target.Target({"kind": "llvm", "mcpu": "x86-64-v4", "mattr": ["+avx512vnni"]})
    return tvm.tirx.build(sch.mod, target=target)


def main() -> int:
    import tvm

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.parse_args()
    rng = np.random.default_rng(0)
    print("| image | channels | float32 ms | int32 ms | VNNI ms | float32 / VNNI | int32 / VNNI |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for side, channels in SHAPES:
        padded = side + KERNEL - 1
        image = rng.integers(0, 256, (1, padded, padded, channels)).astype("uint8")
        weights = rng.integers(-128, 128, (channels // 16, KERNEL, KERNEL, channels // 4, 16, 4)).astype(
            "int8"
        )
        plain = weights.transpose(0, 4, 1, 2, 3, 5).reshape(
            channels, KERNEL, KERNEL, channels
        )  # [O, kh, kw, I]
        exact = np.zeros((side, side, channels), np.int64)
        for dy in range(KERNEL):
            for dx in range(KERNEL):
                window = image[0, dy : dy + side, dx : dx + side].astype(np.int64)
                exact += np.einsum("hwc,kc->hwk", window, plain[:, dy, dx].astype(np.int64))
        packed_float = plain.transpose(1, 2, 3, 0).reshape(KERNEL, KERNEL, channels, channels // 16, 16)
        arguments = {
            "float32": (
                image.astype("float32"),
                np.ascontiguousarray(packed_float.transpose(3, 0, 1, 2, 4)).astype("float32"),
                "float32",
            ),
            "int32": (image.astype("int32"), weights, "int32"),
            "vnni": (image, weights, "int32"),
        }
        times = {}
        for kind, (data, w, dtype) in arguments.items():
            library = build(kind, side, channels)
            out = tvm.runtime.tensor(np.zeros((1, side, side, channels // 16, 16), dtype))
            args = [tvm.runtime.tensor(data), tvm.runtime.tensor(w), out]
            library["main"](*args)
            if kind == "vnni" and not np.array_equal(out.numpy().reshape(side, side, channels), exact):
                raise SystemExit(f"VNNI kernel wrong at {side}x{side}x{channels}")
            evaluator = library.time_evaluator("main", tvm.cpu(), number=20, repeat=7)
            times[kind] = min(evaluator(*args).results) * 1e3
        print(
            f"| {side} | {channels} | {times['float32']:.3f} | {times['int32']:.3f} | {times['vnni']:.3f} "
            f"| {times['float32'] / times['vnni']:.1f} | {times['int32'] / times['vnni']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
