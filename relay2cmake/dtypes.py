"""Every dtype the C API carries: its C type, DLPack code, and NumPy descriptor.

The sub-byte types (int4, uint4, float4_e2m1fn: two per byte; int2, uint2: four per byte)
travel packed as ONNX stores them: element ``i`` in bits ``(i % n) * bits`` up of byte
``i // n``. Inside a package they are one byte (or, for float4, one float32) per element
(``frontends/onnx_sub_byte``); the model's ``main`` takes and returns the packed bytes."""

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
    def packed(self) -> bool:
        """Several elements per byte (the sub-byte types)."""
        return self.bits < 8

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
        # Packed in C buffers; a .npy file holds one element per byte, as ml_dtypes does.
        DType("int4", 19, "uint8_t", 0, 4, "|u1", raw_bits=True),
        DType("uint4", 20, "uint8_t", 1, 4, "|u1", raw_bits=True),
        DType("int2", 21, "uint8_t", 0, 2, "|u1", raw_bits=True),
        DType("uint2", 22, "uint8_t", 1, 2, "|u1", raw_bits=True),
        DType("float4_e2m1fn", 23, "uint8_t", 17, 4, "|u1", raw_bits=True),
    )
}


def lookup(name: str) -> DType:
    if name not in DTYPES:
        raise ModelError(f"The model uses dtype {name!r}, which the generated C code cannot carry yet.")
    return DTYPES[name]


RAW_BITS = frozenset(name for name, d in DTYPES.items() if d.raw_bits)
PACKED = frozenset(name for name, d in DTYPES.items() if d.packed)


def storage_bytes(name: str, shape: tuple[int, ...] | list[int]) -> int:
    """The bytes a tensor takes in a C buffer (sub-byte types packed, the last byte padded)."""
    elements = int(np.prod(shape, dtype=np.int64))
    bits = lookup(name).bits if name in DTYPES else np.dtype(name).itemsize * 8  # bool: a byte
    return (elements * bits + 7) // 8


def carrier(name: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    """The dtype and shape of the tensor ``main`` takes or returns for a model's input or
    output: the packed bytes for a sub-byte type, else the tensor itself."""
    if name in PACKED:
        return "uint8", (storage_bytes(name, shape),)
    return name, tuple(shape)


def numpy_dtype(name: str) -> np.dtype:
    if name in RAW_BITS:
        import ml_dtypes  # NumPy has no bfloat16/float8; ml_dtypes (an onnx dependency) does

        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(lookup(name).npy_descr)


def pack(array: np.ndarray, name: str) -> np.ndarray:
    """A sub-byte tensor (ml_dtypes, one element per byte) as the packed bytes a C buffer holds."""
    bits = lookup(name).bits
    per_byte = 8 // bits
    codes = np.asarray(array).astype(numpy_dtype(name)).reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    padded = np.zeros(-(-codes.size // per_byte) * per_byte, np.uint8)
    padded[: codes.size] = codes
    lanes = padded.reshape(-1, per_byte).astype(np.uint16) << (np.arange(per_byte, dtype=np.uint16) * bits)
    return np.bitwise_or.reduce(lanes, axis=1).astype(np.uint8)


def unpack(packed: np.ndarray, name: str, shape: tuple[int, ...]) -> np.ndarray:
    """The packed bytes of a C buffer as an ml_dtypes tensor of ``shape``."""
    bits = lookup(name).bits
    per_byte = 8 // bits
    count = int(np.prod(shape, dtype=np.int64))
    lanes = np.asarray(packed, np.uint8).reshape(-1, 1) >> (np.arange(per_byte, dtype=np.uint8) * bits)
    codes = (lanes & ((1 << bits) - 1)).astype(np.uint8).reshape(-1)[:count]
    return codes.view(numpy_dtype(name)).reshape(shape)  # ml_dtypes reads only the low bits
