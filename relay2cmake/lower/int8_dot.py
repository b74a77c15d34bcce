"""The integer dot product the quantized convolutions' schedule tensorizes with
(``schedules._schedule_uint8_conv2d``): AVX-512 VNNI's ``vpdpbusd``, which sums four uint8 x
int8 products into each of 16 int32 lanes, exactly (the saturating form is ``vpdpbusds``).

TVM ships this intrinsic (``tvm.s_tir.tensor_intrin.x86``) but calls LLVM's with int32
vectors; the LLVM inside TVM 0.27 takes <64 x i8> operands and refuses the module, so the
description is TVM's and the implementation here.
"""

from __future__ import annotations

VNNI_DOT = "relay2cmake_dot_16x4_u8i8i32_vnni"


def vnni_intrinsic() -> str:
    """The intrinsic's registered name: uint8[4] . int8[16, 4] -> int32[16], accumulated."""
    from tvm.s_tir import TensorIntrin
    from tvm.s_tir.tensor_intrin import x86
    from tvm.script import tirx as T

    try:
        TensorIntrin.get(VNNI_DOT)
        return VNNI_DOT
    except Exception:  # not registered in this process yet
        pass

    @T.prim_func(s_tir=True)
    def vnni(
        a: T.Buffer((4,), "uint8", offset_factor=1),  # type: ignore[valid-type]
        b: T.Buffer((16, 4), "int8", offset_factor=1),  # type: ignore[valid-type]
        c: T.Buffer((16,), "int32", offset_factor=1),  # type: ignore[valid-type]
    ) -> None:
        with T.sblock("root"):
            T.reads(c[0:16], a[0:4], b[0:16, 0:4])
            T.writes(c[0:16])
            # One pixel's 4 channels in every lane. (Inline: bound to a name, TVMScript made it
            # a 4-byte buffer, allocated as scratch in every parallel task, which made every
            # such kernel serial.)
            c[T.ramp(T.int32(0), 1, 16)] = T.call_llvm_pure_intrin(
                T.llvm_lookup_intrinsic_id("llvm.x86.avx512.vpdpbusd.512"),
                c.vload([0], dtype="int32x16"),
                T.reinterpret(
                    T.broadcast(T.reinterpret(a.vload([0], "uint8x4"), dtype="int32"), 16), dtype="int8x64"
                ),
                b.vload([0, 0], dtype="int8x64"),
                dtype="int32x16",
            )

    TensorIntrin.register(VNNI_DOT, x86.dot_product_16x4_u8i8i32_desc, vnni)
    return VNNI_DOT
