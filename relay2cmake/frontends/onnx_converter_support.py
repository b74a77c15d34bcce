"""What the ONNX converter modules share: TVM's own converter of a node's opset, static
shapes, constant values and attribute text."""

from __future__ import annotations

from contextvars import ContextVar

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map, get_constant

from relay2cmake.relax_shapes import static_dims

# The opset of the node being converted: a converter that handles only some cases leaves the
# others to TVM's converter of that opset (``_theirs``).
OPSET: ContextVar[int] = ContextVar("OPSET", default=1)


def _theirs(op_name: str, bb, inputs, attr, params):
    """TVM's own conversion of the node."""
    return _get_convert_map()[op_name].get_converter(OPSET.get())(bb, inputs, attr, params)


def _static_shape(expr: relax.Expr) -> list[int]:
    dims = static_dims(expr.ty)
    if dims is None:
        raise ValueError(f"a static shape is needed here, not {expr.ty}")
    return dims


def _constant_value(expr: relax.Expr | None, params) -> np.ndarray | None:
    """The value of an input known at generation time, or None (absent, or computed at run time)."""
    if expr is None:
        return None
    value = get_constant(expr, params)
    return value.value.numpy() if hasattr(value, "value") else None


def _attr_text(value, default: str) -> str:
    """A string attribute (TVM's parser leaves them bytes), or ``default`` when absent."""
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


def _i64(values) -> relax.Expr:
    return relax.const(np.asarray(values, dtype="int64"), "int64")
