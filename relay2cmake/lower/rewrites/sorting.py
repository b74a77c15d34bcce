"""Relax rewrite: TopK, Sort and ArgSort become calls of the package builtin ``sort``.

TVM lowers them to kernels that look up ``tvm.contrib.sort.*`` in the TVM runtime when they
run, which a standalone package does not have. The builtin (C, ``src/<prefix>_builtins.c``)
sorts each line of the tensor seen as ``[outer, n, inner]`` around the axis, stably, and
writes the first ``k`` values and their indices; TopK keeps both, Sort the values, ArgSort the
indices. Every frontend's sorting operators pass through here (ONNX's TopK and PyTorch's
topk, sort and argsort all import as these three Relax operators).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from relay2cmake.builtins import SORT
from relay2cmake.errors import ModelError
from relay2cmake.lower.rewrites.common import rewrite_functions, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule

_OPERATORS = {"relax.topk": "TopK", "relax.sort": "Sort", "relax.argsort": "ArgSort"}


def _normal_axis(operator: str, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ModelError(f"{operator} axis {axis} is out of range for a rank-{rank} input.")
    return axis + rank if axis < 0 else axis


def sort_builtins(module: IRModule) -> IRModule:
    import tvm
    from tvm import relax

    ops = {tvm.ir.Op.get(name): name for name in _OPERATORS}

    @relax.expr_functor.mutator
    class _Sorting(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            name = ops.get(call.op)
            if name is None:
                return call
            operator = _OPERATORS[name]
            data = call.args[0]
            shape = static_shape(data)
            if not shape:
                raise ModelError(f"{operator} needs a static input shape of rank 1 or more.")
            attrs = call.attrs
            axis = _normal_axis(operator, int(attrs.axis), len(shape))
            outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])
            k = n
            if name == "relax.topk":
                k = int(attrs.k)
                if k < 1 or k > n:  # Relax's topk reads k < 1 as "all of them"
                    k = n
                descending = bool(attrs.largest)
            else:
                descending = bool(attrs.descending)
            index_dtype = "int64" if name == "relax.sort" else str(attrs.dtype)
            dtype = str(data.ty.dtype)
            out_shape = [*shape[:axis], k, *shape[axis + 1 :]]
            builder = self.builder_
            view = builder.emit(relax.op.reshape(data, (outer, n, inner)))
            args = relax.Tuple([view, relax.prim_value(k), relax.prim_value(int(descending))])
            out_ty = [
                relax.TensorType((outer, k, inner), dtype),
                relax.TensorType((outer, k, inner), index_dtype),
                relax.TensorType((3 * n,), "int64"),  # the builtin's working memory (order, merge, keys)
            ]
            result = builder.emit(relax.call_dps_packed(SORT, args, out_ty=out_ty))
            values = builder.emit(relax.op.reshape(builder.emit(relax.TupleGetItem(result, 0)), out_shape))
            indices = builder.emit(relax.op.reshape(builder.emit(relax.TupleGetItem(result, 1)), out_shape))
            if name == "relax.sort":
                return values
            if name == "relax.argsort":
                return indices
            ret_type = str(attrs.ret_type)
            if ret_type == "values":
                return values
            if ret_type == "indices":
                return indices
            return relax.Tuple([values, indices])

    return rewrite_functions(module, _Sorting(module))
