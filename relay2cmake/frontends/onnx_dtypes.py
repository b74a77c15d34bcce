"""The ONNX element types a package carries, by the name TVM uses (a leaf module: the
frontend, its converters and ``inspect`` read it without importing each other)."""

from __future__ import annotations

from onnx import TensorProto

# ONNX element types we can carry through the C API, by the name TVM uses.
ONNX_DTYPES: dict[int, str] = {
    TensorProto.FLOAT: "float32",
    TensorProto.DOUBLE: "float64",
    TensorProto.FLOAT16: "float16",
    TensorProto.INT8: "int8",
    TensorProto.INT16: "int16",
    TensorProto.INT32: "int32",
    TensorProto.INT64: "int64",
    TensorProto.UINT8: "uint8",
    TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32",
    TensorProto.UINT64: "uint64",
    TensorProto.BOOL: "bool",
    TensorProto.BFLOAT16: "bfloat16",
    TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz",
    TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz",
    TensorProto.FLOAT8E8M0: "float8_e8m0fnu",
    # Packed in the C API; carried one per element inside a package (onnx_sub_byte).
    TensorProto.INT4: "int4",
    TensorProto.UINT4: "uint4",
    TensorProto.INT2: "int2",
    TensorProto.UINT2: "uint2",
    TensorProto.FLOAT4E2M1: "float4_e2m1fn",
}
