"""Every dtype the C API carries: its C type, DLPack code, and NumPy descriptor."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from relay2cmake.errors import ModelError


@dataclass(frozen=True)
class DType:
    name: str  # TVM/NumPy spelling
    value: int  # the enum value in the C header (stable across packages)
    ctype: str
    dl_code: int  # DLDataTypeCode: 0 int, 1 uint, 2 float, 6 bool
    bits: int
    npy_descr: str
    raw_bits: bool = False

    @property
    def enum_suffix(self) -> str:
        return self.name.upper()


DTYPES = {
    d.name: d
    for d in (
        DType("float32", 1, "float", 2, 32, "<f4"),
        DType("float64", 2, "double", 2, 64, "<f8"),
        DType("float16", 3, "uint16_t", 2, 16, "<f2"),
        DType("int8", 4, "int8_t", 0, 8, "|i1"),
        DType("int16", 5, "int16_t", 0, 16, "<i2"),
        DType("int32", 6, "int32_t", 0, 32, "<i4"),
        DType("int64", 7, "int64_t", 0, 64, "<i8"),
        DType("uint8", 8, "uint8_t", 1, 8, "|u1"),
        DType("uint16", 9, "uint16_t", 1, 16, "<u2"),
        DType("uint32", 10, "uint32_t", 1, 32, "<u4"),
        DType("uint64", 11, "uint64_t", 1, 64, "<u8"),
        DType("bool", 12, "uint8_t", 6, 8, "|b1"),
        # Types C has no arithmetic type for travel as their raw bits, and .npy files hold
        # them as unsigned integers any NumPy can load (view them with ml_dtypes).
        DType("bfloat16", 13, "uint16_t", 4, 16, "<u2", raw_bits=True),
        DType("float8_e4m3fn", 14, "uint8_t", 10, 8, "|u1", raw_bits=True),
        DType("float8_e4m3fnuz", 15, "uint8_t", 11, 8, "|u1", raw_bits=True),
        DType("float8_e5m2", 16, "uint8_t", 12, 8, "|u1", raw_bits=True),
        DType("float8_e5m2fnuz", 17, "uint8_t", 13, 8, "|u1", raw_bits=True),
        DType("float8_e8m0fnu", 18, "uint8_t", 14, 8, "|u1", raw_bits=True),
    )
}


def lookup(name: str) -> DType:
    if name not in DTYPES:
        raise ModelError(f"The model uses dtype {name!r}, which the generated C code cannot carry yet.")
    return DTYPES[name]


RAW_BITS = frozenset(name for name, d in DTYPES.items() if d.raw_bits)


def numpy_dtype(name: str) -> np.dtype:
    if name in RAW_BITS:
        import ml_dtypes  # NumPy has no bfloat16/float8; ml_dtypes (an onnx dependency) does

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(lookup(name).npy_descr)
