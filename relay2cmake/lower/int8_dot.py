"""The integer dot products the quantized convolutions' schedule tensorizes with
(``schedules._schedule_uint8_conv2d``), one per instruction set, each exact (no saturation):

- ``vnni``: AVX-512 VNNI's ``vpdpbusd`` sums four uint8 x int8 products into each of 16
  int32 lanes (the saturating form is ``vpdpbusds``).
- ``vnni256``: AVX-VNNI (Intel's client and E-core CPUs since Alder Lake, which lack
  AVX-512): the same ``vpdpbusd``, VEX-encoded on 8 lanes, two per 16 output channels.
- ``pmaddwd``: AVX2 without VNNI. Its uint8 x int8 instruction, ``vpmaddubsw`` (ONNX Runtime's
  on such CPUs), adds pairs of products in saturating int16: 255 x 127 x 2 does not fit, and
  every convolution of ResNet-18 quantized by ONNX Runtime has weight pairs that overflow.
  So both operands are widened to int16 and ``vpmaddwd`` sums pairs into int32, which keeps
  the sum of input channels 0+1 apart from 2+3 in the accumulator (two partial sums per
  output channel, added once per tile: the schedule's ``rfactor``).
- ``sdot`` / ``usdot``: AArch64's dot product (ARMv8.2 ``dotprod``; ``usdot`` needs ARMv8.6
  ``i8mm``) sums four products into each of 4 int32 lanes. ``sdot`` takes int8 on both sides:
  the image's uint8 x becomes x - 128 (its top bit flipped), and 128 x sum(w) is added back.

TVM ships VNNI and NEON intrinsics (``tvm.s_tir.tensor_intrin``), but its VNNI one calls LLVM
with operand types the LLVM inside TVM 0.27 refuses, and its NEON ones take the same type on
both sides; so the descriptions (what the instruction computes) and the implementations are here.
"""

from __future__ import annotations

# instruction → the intrinsic's registered name
INTRINSICS = {
    "vnni": "relay2cmake_dot_16x4_u8i8i32_vnni",
    "vnni256": "relay2cmake_dot_16x4_u8i8i32_vnni256",
    "pmaddwd": "relay2cmake_dot_16x2x2_u8i8i32_pmaddwd",
    "sdot": "relay2cmake_dot_16x4_u8i8i32_sdot",
    "usdot": "relay2cmake_dot_16x4_u8i8i32_usdot",
}
# instructions whose accumulator keeps two partial sums per output channel
PAIRWISE = frozenset({"pmaddwd"})


def int8_dot_intrinsic(instruction: str) -> str:
    """The registered name of ``instruction``'s intrinsic: uint8[4] . int8[16, 4] into
    int32[16] accumulated (``pmaddwd``: into int32[16, 2], inputs 0+1 and 2+3 apart)."""
    from tvm.s_tir import TensorIntrin

    name = INTRINSICS[instruction]
    try:
        TensorIntrin.get(name)
    except Exception:  # not registered in this process yet
        TensorIntrin.register(name, *_descriptions()[instruction])
    return name


def _descriptions() -> dict:
    # (Not TVM's x86 description: importing tvm.s_tir.tensor_intrin parses its 500 intrinsics,
    # a minute under pytest's deep stacks, since TVMScript's parser walks inspect.stack().)
    from tvm.script import tirx as T

    @T.prim_func(s_tir=True)
    def four(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        """What every 16 x 4 dot computes: 16 output channels, each 4 products accumulated."""
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            for i, k in T.grid(16, 4):
                with T.sblock("update"):
                    vi, vk = T.axis.remap("SR", [i, k])
                    c[vi] = c[vi] + T.Cast("int32", a[vk]) * T.Cast("int32", b[vi, vk])

    def pixel_bytes(a, lanes: int, dtype: str):
        """One pixel's 4 channels in every 32-bit lane. (Inline: bound to a name, TVMScript
        made it a 4-byte buffer, allocated as scratch in every parallel task, which made
        every such kernel serial.)"""
        return T.reinterpret(
            T.broadcast(T.reinterpret(a.vload([0], "uint8x4"), dtype="int32"), lanes), dtype=dtype
        )

    def vpdpbusd(c, a, b, first, lanes: int):
        """``vpdpbusd`` on ``lanes`` output channels from ``first``: 16 (AVX-512 VNNI), 8
        (AVX-VNNI's VEX form: the same LLVM intrinsic, selected without AVX-512)."""
        return T.call_llvm_pure_intrin(
            T.llvm_lookup_intrinsic_id(f"llvm.x86.avx512.vpdpbusd.{32 * lanes}"),
            c.vload([first], dtype=f"int32x{lanes}"),
            pixel_bytes(a, lanes, f"int8x{4 * lanes}"),
            b.vload([first, 0], dtype=f"int8x{4 * lanes}"),
            dtype=f"int32x{lanes}",
        )

    @T.prim_func(s_tir=True)
    def vnni(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            c[T.ramp(T.int32(0), 1, 16)] = vpdpbusd(c, a, b, 0, 16)

    @T.prim_func(s_tir=True)
    def vnni256(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            for j in T.unroll(2):  # output channels 8j..8j+7
                c[T.ramp(j * 8, 1, 8)] = vpdpbusd(c, a, b, j * 8, 8)

    @T.prim_func(s_tir=True)
    def pairwise(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16, 2), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16, 0:2], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16, 0:2])
            # the block's iterators in the rfactor-ed block's order: (half, channel, input)
            for i, h, k in T.grid(16, 2, 2):
                with T.sblock("update"):
                    vh, vi, vk = T.axis.remap("SSR", [h, i, k])
                    c[vi, vh] = c[vi, vh] + T.Cast("int32", a[vh * 2 + vk]) * T.Cast(
                        "int32", b[vi, vh * 2 + vk]
                    )

    @T.prim_func(s_tir=True)
    def pmaddwd(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16, 2), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16, 0:2], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16, 0:2])
            # 4 output channels x 4 inputs as 16 int16 against the pixel's 4 repeated: lane
            # 2j holds channel j's inputs 0+1, lane 2j+1 its inputs 2+3 (c's [16, 2] order).
            for j in T.unroll(4):
                c[j * 4, T.ramp(T.int32(0), 1, 8)] = c.vload(
                    [j * 4, 0], dtype="int32x8"
                ) + T.call_llvm_pure_intrin(
                    T.llvm_lookup_intrinsic_id("llvm.x86.avx2.pmadd.wd"),
                    T.Cast("int16x16", pixel_bytes(a, 4, "uint8x16")),
                    T.Cast("int16x16", b.vload([j * 4, 0], dtype="int8x16")),
                    dtype="int32x8",
                )

    def neon_dot(instruction: str, accumulated, image, b, j):
        """4 lanes of ``instruction`` (``sdot``, ``usdot``): output channels 4j..4j+3."""
        return T.call_llvm_pure_intrin(
            T.llvm_lookup_intrinsic_id(f"llvm.aarch64.neon.{instruction}.v4i32.v16i8"),
            accumulated,
            image,
            b.vload([j * 4, 0], dtype="int8x16"),
            dtype="int32x4",
        )

    @T.prim_func(s_tir=True)
    def sdot(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            # sum(x w) = sum((x - 128) w) - sum(-128 w): x ^ 0x80 is x - 128 as int8
            for j in T.unroll(4):
                c[T.ramp(j * 4, 1, 4)] = neon_dot(
                    "sdot",
                    c.vload([j * 4], dtype="int32x4"),
                    T.bitwise_xor(pixel_bytes(a, 4, "int8x16"), T.broadcast(T.int8(-128), 16)),
                    b,
                    j,
                ) - neon_dot("sdot", T.broadcast(T.int32(0), 4), T.broadcast(T.int8(-128), 16), b, j)

    @T.prim_func(s_tir=True)
    def usdot(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            for j in T.unroll(4):
                c[T.ramp(j * 4, 1, 4)] = neon_dot(
                    "usdot", c.vload([j * 4], dtype="int32x4"), pixel_bytes(a, 4, "uint8x16"), b, j
                )

    return {
        "vnni": (four, vnni),
        "vnni256": (four, vnni256),
        "pmaddwd": (pairwise, pmaddwd),
        "sdot": (four, sdot),
        "usdot": (four, usdot),
    }
