"""Relax rewrite: every data-dependent index is checked before a kernel uses it.

TVM's gather and scatter kernels address memory with the index values as given (``take``'s
"fast" mode: "extra indices lead to seg fault"), so an index from the caller's data could read
or write anywhere. Each indexing operator whose indices are not constant gets its indices
through the package builtin ``check_indices`` first: it wraps a negative index once (ONNX and
PyTorch semantics), and stops the run with ``<P>_ERROR_INVALID_INPUT`` and a message naming the
operator when an index is still outside ``[0, bound)``. The kernel then only ever sees checked,
non-negative indices, in every kernel set (the builtin is C, shared by all of them).

Constant indices are checked here, at generation time, and wrapped in place.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from relay2cmake.builtins import CHECK_INDICES, INPUT_MARK
from relay2cmake.errors import ModelError
from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_functions, shape_extents, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule

# Relax operator → the name a user knows it by (ONNX's, which PyTorch's indexing maps to).
_OPERATORS = {
    "relax.take": "Gather",
    "relax.gather_elements": "GatherElements",
    "relax.gather_nd": "GatherND",
    "relax.scatter_elements": "ScatterElements",
    "relax.scatter_nd": "ScatterND",
    "relax.index_tensor": "Index",
    "relax.index_put": "IndexPut",
}
_INDEX_DTYPES = ("int32", "int64")
# Operators that read at coordinates computed from float data: the coordinates are made
# finite and clamped (a NaN or 1e30 became an out-of-range integer index inside TVM's
# kernels), and RoiAlign's float batch column is checked like an index.
_COORDINATE_OPERATORS = {
    "relax.image.grid_sample": "GridSample",
    "relax.vision.roi_align": "RoiAlign",
    "relax.vision.roi_pool": "MaxRoiPool",
}
# GridSample's grid is normalised to [-1, 1]: beyond +-1e4 every padding mode but reflection
# already gives its final answer, and unnormalised coordinates still fit int32 for images
# up to 2**17 pixels wide.
_GRID_LIMIT = 1e4


def _bounds(name: str, call, data_shape: list, indices_shape: list) -> list | None:
    """The bounds the indices' last axis cycles through (one bound: every index has it), as
    numbers or, with run-time dimensions, TIR expressions of them. None: no check needed."""
    attrs = call.attrs
    if name == "relax.take":
        if str(attrs.mode) != "fast":
            return None  # "clip" and "wrap" keep indices in range themselves
        axis = attrs.axis
        return [_product(data_shape)] if axis is None else [data_shape[int(axis)]]
    if name in ("relax.gather_elements", "relax.scatter_elements"):
        return [data_shape[int(attrs.axis)]]
    if name == "relax.gather_nd":
        batch = int(attrs.batch_dims)
        return data_shape[batch : batch + int(indices_shape[-1])]
    if name == "relax.scatter_nd":
        return data_shape[: int(indices_shape[-1])]
    return None


def _product(extents: list):
    result = 1
    for extent in extents:
        result = result * extent
    return result


def _is_number(extent) -> bool:
    return isinstance(extent, int) or hasattr(extent, "value")


def _describe(operator: str, data_shape: list) -> str:
    extents = [str(int(d)) if _is_number(d) else "n" for d in data_shape]  # n: chosen at run time
    return f"{operator} on a {'x'.join(extents) or 'scalar'} tensor"


def _wrapped_constant(operator: str, values: np.ndarray, bounds: list[int]) -> np.ndarray:
    period = len(bounds)
    flat = values.reshape(-1, period) if values.size else values.reshape(0, period)
    limits = np.asarray(bounds, dtype=np.int64)
    wrapped = np.where(flat < 0, flat + limits, flat)
    bad = (wrapped < 0) | (wrapped >= limits)
    if bad.any():
        row, column = (int(x[0]) for x in np.nonzero(bad))
        raise ModelError(
            f"{operator} has a constant index {int(flat[row, column])} outside "
            f"[-{bounds[column]}, {bounds[column]}): the model is invalid."
        )
    return wrapped.reshape(values.shape).astype(values.dtype)


def check_indices(module: IRModule) -> IRModule:
    import tvm
    from tvm import relax

    ops = {tvm.ir.Op.get(name): name for name in (*_OPERATORS, *_COORDINATE_OPERATORS)}
    where, less, add, astype, reshape = (
        tvm.ir.Op.get(f"relax.{n}") for n in ("where", "less", "add", "astype", "reshape")
    )

    @relax.expr_functor.mutator
    class _CheckIndices(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            name = ops.get(call.op)
            if name is None:
                return call
            if name in _COORDINATE_OPERATORS:
                return self._coordinates(call, name, static_shape(call.args[0]))
            # Extents are numbers, or expressions of run-time dimensions (checked at run time).
            data_shape = shape_extents(call.args[0])
            operator = _OPERATORS[name]
            if name in ("relax.index_tensor", "relax.index_put"):
                return self._per_axis_indices(call, operator, data_shape)
            indices = call.args[1]
            indices_shape = shape_extents(indices)
            if data_shape is None or indices_shape is None:
                raise ModelError(f"{operator} needs tensors of known rank to check its indices.")
            bounds = _bounds(name, call, data_shape, indices_shape)
            if not bounds:
                return call
            checked = self._checked(indices, bounds, operator, data_shape)
            return relax.Call(call.op, [call.args[0], checked, *call.args[2:]], call.attrs, call.ty_args)

        def _coordinates(self, call, name, data_shape):
            """GridSample's grid and the boxes of RoiAlign/MaxRoiPool: finite, clamped; the
            boxes' batch column checked against the batch."""
            operator = _COORDINATE_OPERATORS[name]
            coordinates = call.args[1]
            dtype = str(coordinates.ty.dtype)
            if data_shape is None or static_shape(coordinates) is None:
                raise ModelError(f"{operator} needs static shapes to check its coordinates.")
            if name == "relax.image.grid_sample":
                limit = _GRID_LIMIT
            else:
                if static_shape(coordinates)[-1] != 5:
                    raise ModelError(f"{operator} takes boxes [N, 5] (batch index, x1, y1, x2, y2).")
                scale = float(call.attrs.spatial_scale)
                limit = 4.0 * max([*data_shape[2:], 1]) / max(scale, 1e-6)
                batch_column = [data_shape[0], -1, -1, -1, -1]
                coordinates = self._checked(coordinates, batch_column, operator, data_shape)
            low, high = relax.const(-limit, dtype), relax.const(limit, dtype)
            clamped = self.builder_.emit(relax.op.minimum(relax.op.maximum(coordinates, low), high))
            finite = self.builder_.emit(relax.op.where(relax.op.isnan(coordinates), low, clamped))
            return relax.Call(call.op, [call.args[0], finite, *call.args[2:]], call.attrs, call.ty_args)

        def _per_axis_indices(self, call, operator, data_shape):
            """index_tensor / index_put: the i-th indices tensor indexes axis i."""
            fields = constant_or_self(self, call.args[1])
            if not isinstance(fields, relax.Tuple) or data_shape is None:
                raise ModelError(f"{operator} with indices the checker cannot see is not supported.")
            checked = [
                self._checked(field, [data_shape[axis]], operator, data_shape)
                for axis, field in enumerate(fields.fields)
            ]
            return relax.Call(
                call.op, [call.args[0], relax.Tuple(checked), *call.args[2:]], call.attrs, call.ty_args
            )

        def _before_wrapping(self, indices):
            """The indices before TVM's ONNX importer wrapped them (``where(i < 0, i + n, i)``):
            the check wraps once itself, and a second wrap would accept [-2n, -n)."""
            call = constant_or_self(self, indices)
            if not (isinstance(call, relax.Call) and call.op == where):
                return indices
            condition, shifted = (constant_or_self(self, a) for a in call.args[:2])
            if not (isinstance(condition, relax.Call) and condition.op == less):
                return indices
            if not (isinstance(shifted, relax.Call) and shifted.op == add):
                return indices
            original = call.args[2]
            zero = condition.args[1]
            if not (
                condition.args[0].same_as(original)
                and shifted.args[0].same_as(original)
                and isinstance(zero, tvm.ir.GenericConst)
                and not zero.value.numpy().any()
            ):
                return indices
            return original

        def _before_narrowing(self, indices):
            """The int64 tensor ``indices`` was narrowed (and perhaps reshaped) from, or None."""
            expr = indices
            while True:
                call = constant_or_self(self, expr)
                if isinstance(call, relax.Call) and call.op == reshape:
                    expr = call.args[0]
                    continue
                if (
                    isinstance(call, relax.Call)
                    and call.op == astype
                    and str(call.args[0].ty.dtype) == "int64"
                    and str(call.attrs.dtype) == "int32"
                ):
                    return call.args[0]
                return None

        def _checked(self, indices, bounds: list[int], operator: str, data_shape: list[int]):
            indices = self._before_wrapping(indices)
            wide = self._before_narrowing(indices)
            if wide is not None:
                # PyTorch's embedding narrows int64 indices to int32 first: 2**32 + 1 would
                # pass as 1. Check the int64 values, then narrow and reshape as before.
                checked = self._checked(wide, bounds, operator, data_shape)
                narrowed = self.builder_.emit(relax.op.astype(checked, "int32"))
                return self.builder_.emit(relax.op.reshape(narrowed, indices.ty.shape))
            dtype = str(getattr(indices.ty, "dtype", ""))
            if dtype not in _INDEX_DTYPES and not (dtype.startswith("float") and -1 in bounds):
                return indices  # boolean masks and the like: no addresses from values
            if isinstance(indices, tvm.ir.GenericConst) and -1 in bounds:  # constant boxes
                values = indices.value.numpy().reshape(-1, len(bounds))
                for column, bound in enumerate(bounds):
                    if bound >= 0 and not ((values[:, column] >= 0) & (values[:, column] < bound)).all():
                        raise ModelError(f"{operator} has a constant batch index outside [0, {bound}).")
                return indices
            if isinstance(indices, tvm.ir.GenericConst) and all(_is_number(b) for b in bounds):
                wrapped = _wrapped_constant(operator, indices.value.numpy(), [int(b) for b in bounds])
                return relax.const(wrapped, dtype)
            site = _describe(operator, data_shape)
            parameter = re.fullmatch(r"input_(\d+)", indices.name) if isinstance(indices, relax.Var) else None
            if parameter:
                # A model input (main's parameters are input_0, input_1, ...): the plan puts
                # its own name in the message.
                site += f" (indices from {INPUT_MARK}{parameter.group(1)})"
            args = [indices, tvm.ir.StringImm(site)]
            args += [relax.prim_value(int(b) if _is_number(b) else b) for b in bounds]
            return self.builder_.emit(
                relax.call_dps_packed(CHECK_INDICES, relax.Tuple(args), out_ty=indices.ty)
            )

    return rewrite_functions(module, _CheckIndices(module))
