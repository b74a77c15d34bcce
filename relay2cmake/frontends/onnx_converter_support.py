"""What the ONNX converter modules share: TVM's own converter of a node's opset, and static
shapes."""

from __future__ import annotations

from contextvars import ContextVar

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

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
