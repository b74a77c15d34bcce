"""The sub-byte element types (ONNX's INT4, UINT4, INT2, UINT2, FLOAT4E2M1) inside a package.

A kernel cannot address a 4- or 2-bit element, so inside ``main`` each such tensor is carried
one element per slot of a type kernels can: int4 and int2 as int8, uint4 and uint2 as uint8
(the value itself), float4_e2m1fn as float32 (its value, which float32 holds exactly). The
model's inputs arrive as the packed bytes of the C API (``dtypes``) and are unpacked first;
its outputs are packed last. Cast, CastLike and QuantizeLinear to these types compute the
carried value by ONNX's rules (``cast``, ``quantized``); every other operator sees an ordinary
tensor (DequantizeLinear, Cast from these types: the carrier's values are the values).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

import numpy as np
import onnx

from relay2cmake.dtypes import PACKED, lookup, numpy_dtype, storage_bytes
from relay2cmake.frontends import narrow_floats

if TYPE_CHECKING:
    from tvm import relax, te

FLOAT4 = "float4_e2m1fn"
CARRIERS = {"int4": "int8", "int2": "int8", "uint4": "uint8", "uint2": "uint8", FLOAT4: "float32"}
# The sub-byte type of each input of the node being converted (None: any other type); the
# importer sets it, the converters of Cast, CastLike and the quantization operators read it.
NODE_INPUT_TYPES: ContextVar[tuple[str | None, ...]] = ContextVar("NODE_INPUT_TYPES", default=())


def input_type(index: int) -> str | None:
    """The sub-byte type of input ``index`` of the node being converted, or None."""
    types = NODE_INPUT_TYPES.get()
    return types[index] if index < len(types) else None


def limits(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of a sub-byte integer type."""
    bits = lookup(dtype).bits
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.startswith("int") else (0, (1 << bits) - 1)


def value_types(model: onnx.ModelProto) -> dict[str, str]:
    """Every value of the top graph whose type is a sub-byte one: its name and that type (ONNX's
    shape inference gives the intermediate values' types)."""
    from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

    graph = model.graph
    infos = [*graph.input, *graph.output, *graph.value_info]
    if not any(ONNX_DTYPES.get(i.type.tensor_type.elem_type) in PACKED for i in infos) and not any(
        ONNX_DTYPES.get(t.data_type) in PACKED for t in graph.initializer
    ):
        mentioned = any(
            ONNX_DTYPES.get(a.i) in PACKED or ONNX_DTYPES.get(a.t.data_type) in PACKED
            for n in graph.node
            for a in n.attribute
        )
        if not mentioned:
            return {}
    try:
        infos += list(onnx.shape_inference.infer_shapes(model).graph.value_info)
    except Exception:  # inference is a help here: declared types still count
        pass
    types = {t.name: ONNX_DTYPES.get(t.data_type) for t in graph.initializer}
    types.update({i.name: ONNX_DTYPES.get(i.type.tensor_type.elem_type) for i in infos})
    return {name: dtype for name, dtype in types.items() if dtype in PACKED}


def carrier_array(array: np.ndarray) -> np.ndarray:
    """A constant of a sub-byte type (ml_dtypes) as its carrier's values."""
    return np.asarray(array).astype(CARRIERS[array.dtype.name])


def _float4_table() -> np.ndarray:
    return np.arange(16, dtype=np.uint8).view(numpy_dtype(FLOAT4)).astype(np.float32)


def unpacked(bb: relax.BlockBuilder, packed: relax.Expr, dtype: str, shape: list[int]) -> relax.Expr:
    """The carrier tensor of ``shape`` held in the packed bytes ``packed``."""
    from tvm import relax

    count = int(np.prod(shape, dtype=np.int64))
    table = relax.const(_float4_table()) if dtype == FLOAT4 else None
    flat = bb.emit_te(_unpack_te, packed, table, dtype, count, primfunc_name_hint=f"unpack_{dtype}")
    return bb.emit(relax.op.reshape(flat, shape))


def packed(bb: relax.BlockBuilder, value: relax.Expr, dtype: str) -> relax.Expr:
    """The packed bytes of the carrier tensor ``value`` (of the sub-byte type ``dtype``)."""
    from tvm import relax

    shape = [int(d) for d in value.ty.shape.values]
    count = int(np.prod(shape, dtype=np.int64))
    flat = bb.emit(relax.op.reshape(value, [count]))
    nbytes = storage_bytes(dtype, shape)
    return bb.emit_te(_pack_te, flat, dtype, count, nbytes, primfunc_name_hint=f"pack_{dtype}")


def cast(bb: relax.BlockBuilder, value: relax.Expr, target: str) -> relax.Expr:
    """Cast (and CastLike) to a sub-byte type: a float truncated toward zero, 0 when that is
    outside the type's range (ONNX leaves it undefined; its test data, made with ml_dtypes,
    say 0); an integer wrapped to the type's bits; to float4 rounded to the nearest (ties to
    even), saturated."""
    return bb.emit_te(_cast_te, value, target, primfunc_name_hint=f"cast_{target}")


def quantized(bb: relax.BlockBuilder, value: relax.Expr, target: str) -> relax.Expr:
    """QuantizeLinear's last step to a sub-byte type: ``value`` (x / scale + zero point, in
    float32, already rounded for an integer type) saturated to the type."""
    from tvm import relax

    if target == FLOAT4:
        return cast(bb, value, target)
    low, high = limits(target)
    return relax.op.astype(relax.op.clip(value, float(low), float(high)), CARRIERS[target])


def _unpack_te(packed: te.Tensor, table: te.Tensor | None, dtype: str, count: int) -> te.Tensor:
    from tvm import te, tirx

    bits = lookup(dtype).bits
    per_byte = 8 // bits
    half = 1 << (bits - 1)

    def element(i):
        byte = packed[tirx.floordiv(i, per_byte)].astype("int32")
        field = (byte >> (tirx.floormod(i, per_byte) * bits).astype("int32")) & ((1 << bits) - 1)
        if table is not None:
            return table[field]
        if dtype.startswith("int"):
            return ((field ^ half) - half).astype("int8")
        return field.astype("uint8")

    return te.compute((count,), element, name=f"unpack_{dtype}")


def _pack_te(flat: te.Tensor, dtype: str, count: int, nbytes: int) -> te.Tensor:
    from tvm import te, tirx

    bits = lookup(dtype).bits
    per_byte = 8 // bits

    def code(value):
        if dtype == FLOAT4:
            return narrow_floats.float_code(value, narrow_floats.FLOAT4, True)
        return value.astype("int32") & ((1 << bits) - 1)

    def byte(j):
        total = tirx.const(0, "int32")
        for lane in range(per_byte):
            index = j * per_byte + lane
            # The last byte's spare lanes are zero bits (and read no element past the end).
            lane_bits = code(flat[tirx.min(index, count - 1)]) << (lane * bits)
            total = total | tirx.Select(index < count, lane_bits, tirx.const(0, "int32"))
        return total.astype("uint8")

    return te.compute((nbytes,), byte, name=f"pack_{dtype}")


def _float4_value(value):
    """The float4_e2m1fn nearest a float32 (ties to even), saturated to +-6, as a float32; a
    NaN gives a zero of the opposite sign (ml_dtypes', so ONNX's test data's, rule). Computed
    in float arithmetic, not as a table index: TVM widens an index expression to int64,
    which breaks the bit casts of a code computation inside it."""
    from tvm import tirx

    def i32(number: int):
        return tirx.const(number, "int32")

    bits = tirx.reinterpret("int32", value)
    magnitude = tirx.abs(value)
    # The grid's step around |value|: 2^(exponent - 1), no finer than 0.5 (the subnormal's).
    exponent = tirx.max(((tirx.reinterpret("int32", magnitude) >> i32(23)) & i32(0xFF)) - i32(127), i32(0))
    step = tirx.reinterpret("float32", (exponent + i32(126)) << i32(23))
    rounded = tirx.min(tirx.nearbyint(magnitude / step) * step, tirx.const(6.0, "float32"))
    negative = (bits >> i32(31)) & i32(1)
    signed = tirx.Select(negative == i32(1), -rounded, rounded)
    # shifted as unsigned: 1 << 31 overflows an int32 (undefined in the C kernels)
    sign = (negative ^ i32(1)).astype("uint32") << tirx.const(31, "uint32")
    opposite_zero = tirx.reinterpret("float32", sign)
    is_nan = (bits & i32(0x7FFFFFFF)) > i32(0x7F800000)
    return tirx.Select(is_nan, opposite_zero, signed)


def _cast_te(x: te.Tensor, target: str) -> te.Tensor:
    from tvm import te, tirx

    source = str(x.dtype)
    is_float = source.startswith(("float", "bfloat"))
    wide = "float64" if source == "float64" else "float32"

    def element(*i):
        value = x(*i)
        if target == FLOAT4:
            return _float4_value(value if source == "float32" else value.astype("float32"))
        low, high = limits(target)
        if is_float:
            truncated = tirx.trunc(value.astype(wide))
            inside = tirx.And(truncated >= tirx.const(low, wide), truncated <= tirx.const(high, wide))
            return tirx.Select(inside, truncated, tirx.const(0, wide)).astype(CARRIERS[target])
        bits = lookup(target).bits
        field = value.astype("int64") & ((1 << bits) - 1)
        if target.startswith("int"):
            field = (field ^ (1 << (bits - 1))) - (1 << (bits - 1))
        return field.astype(CARRIERS[target])

    return te.compute(x.shape, element, name=f"cast_{target}")
