"""The tensor intrinsic of a grouped convolution with 4 input and 4 output channels per group
(ResNeXt's ``32x4d`` first stage) on 16 lanes (``schedules._schedule_conv2d_nhwc``).

One vector of 16 output channels spans 4 groups, and lane ``l`` reads input channel
``(l // 4) * 4 + k`` for each of the group's 4 inputs ``k``: no single value to broadcast, and
TVM's vectorizer made that index a gather (ten times slower than 4-lane vectors). Here the 16
input channels of those 4 groups are one vector load, and each ``k`` takes a shuffle of it,
``[x[k] x 4, x[4 + k] x 4, x[8 + k] x 4, x[12 + k] x 4]``, times the weights' row ``k``: a
shuffle per 16-lane multiply-add instead of four 4-lane multiply-adds (AVX-512: the shuffles
share a port with one of the two FMA units, so at best half the peak, against a quarter).
"""

from __future__ import annotations

NAME = "relay2cmake_group4_fma_16"
LANES = 16
GROUP = 4  # input and output channels per group


def group4_intrinsic() -> str:
    """The registered name of the intrinsic: ``c[16] += shuffled(a[16], k) * b[k, 16]`` over
    the group's 4 inputs ``k``, in that order (the sums of TVM's loop, bit for bit)."""
    from tvm.s_tir import TensorIntrin

    try:
        TensorIntrin.get(NAME)
    except Exception:  # not registered in this process yet
        TensorIntrin.register(NAME, *_description_and_implementation())
    return NAME


def _description_and_implementation():
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def description(
        a: T.Buffer((16,), "float32", offset_factor=1),
        b: T.Buffer((4, 16), "float32", offset_factor=1, strides=[T.int64(), 1]),
        c: T.Buffer((16,), "float32", offset_factor=1),
    ) -> None:
        """What the schedule's innermost loops compute: 16 output channels (the lanes), each
        summing its group's 4 inputs (unrolled, as the schedule unrolls them)."""
        with T.sblock("root"):
            T.reads(c[0:16], a[0:16], b[0:4, 0:16])
            T.writes(c[0:16])
            for i in T.serial(16):
                for k in T.unroll(4):
                    with T.sblock("update"):
                        vi, vk = T.axis.remap("SR", [i, k])
                        c[vi] = c[vi] + a[vi // 4 * 4 + vk] * b[vk, vi]

    def term(a, b, k: int):
        """Input ``k`` of each group in its group's 4 lanes, times the weights' row ``k``."""
        lanes = [group * GROUP + k for group in range(LANES // GROUP) for _ in range(GROUP)]
        return T.Shuffle([a.vload([0], dtype="float32x16")], lanes) * b.vload([k, 0], dtype="float32x16")

    @T.prim_func(s_tir=True)
    def implementation(
        a: T.Buffer((16,), "float32", offset_factor=1),
        b: T.Buffer((4, 16), "float32", offset_factor=1, strides=[T.int64(), 1]),
        c: T.Buffer((16,), "float32", offset_factor=1),
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:16], b[0:4, 0:16])
            T.writes(c[0:16])
            accumulated = c.vload([0], dtype="float32x16")
            c[T.ramp(T.int32(0), 1, 16)] = (
                accumulated + term(a, b, 0) + term(a, b, 1) + term(a, b, 2) + term(a, b, 3)
            )

    return description, implementation
