"""Running a Relax ``PyExprMutator`` over every Relax function of a module, and small facts
about Relax expressions the rewrites share."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from relay2cmake.relax_shapes import static_dims
from relay2cmake.tensor_memory import adopted_tensor

if TYPE_CHECKING:
    import numpy as np
    from tvm import relax
    from tvm.ir import IRModule


def rewrite_functions(module: IRModule, mutator: relax.PyExprMutator) -> IRModule:
    """``module`` with each Relax function passed through ``mutator`` (constructed on
    ``module``); PrimFuncs the mutator emitted with ``call_te`` are part of the result."""
    from tvm import relax

    for gv, func in module.functions.items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()


def rewrite_calls(
    module: IRModule, op_name: str, rewrite: Callable[[relax.PyExprMutator, relax.Call], relax.Expr]
) -> IRModule:
    """``module`` with each call of the Relax operator ``op_name`` (its arguments rewritten
    first) replaced by ``rewrite(mutator, call)``, which returns the call itself to keep it;
    it may emit bindings through ``mutator.builder_`` and look them up through
    ``constant_or_self``. The expression it returns is bound to the call's variable."""
    import tvm
    from tvm import relax

    op = tvm.ir.Op.get(op_name)

    @relax.expr_functor.mutator
    class _Calls(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            return rewrite(self, call) if call.op == op else call

    return rewrite_functions(module, _Calls(module))


def calls_to(module: IRModule, op_name: str | None = None) -> list[relax.Call]:
    """Every call of the Relax operator ``op_name`` (of any operator when None) in the Relax
    functions of ``module``, inner calls first."""
    import tvm
    from tvm import relax

    op = tvm.ir.Op.get(op_name) if op_name else None
    found: list = []

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and (op is None or expr.op == op):
            found.append(expr)

    for func in module.functions.values():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


def static_shape(expr: relax.Expr) -> list[int] | None:
    """The expression's shape when every dimension is a constant, else None."""
    return static_dims(getattr(expr, "ty", None))


def static_float32_convolution(call: relax.Call, data_layout: str, kernel_layout: str) -> bool:
    """Whether a convolution call has static shapes, float32 data, weights and result, and
    the given layouts (its output in the data's)."""
    attrs = call.attrs
    return (
        static_shape(call.args[0]) is not None
        and static_shape(call.args[1]) is not None
        and static_shape(call) is not None
        and attrs.data_layout == data_layout
        and attrs.kernel_layout == kernel_layout
        and attrs.out_layout == data_layout
        and str(call.args[0].ty.dtype) == "float32"
        and str(call.args[1].ty.dtype) == "float32"
        and attrs.out_dtype in ("", "float32", None)
    )


def number_or_expression(extent: Any) -> Any:
    """An extent as an int when it is a constant, else the TIR expression itself (a
    dimension chosen at run time)."""
    return int(extent.value) if hasattr(extent, "value") else extent


def batch_and_static_shape(expr: relax.Expr) -> list | None:
    """The expression's shape when every dimension but the first is a constant: the first
    (a batch chosen at run time) stays a TIR expression when it is not. Else None."""
    extents = shape_extents(expr)
    if not extents or not all(hasattr(d, "value") for d in extents[1:]):
        return None
    return [number_or_expression(d) for d in extents]


def shape_extents(expr: relax.Expr) -> list | None:
    """The expression's shape as TIR integers (numbers, or expressions of run-time
    dimensions), or None when its rank or shape is unknown."""
    ty = getattr(expr, "ty", None)
    shape = getattr(ty, "shape", None)
    values = getattr(shape, "values", None)
    return None if values is None else list(values)


def constant_or_self(mutator: relax.PyExprMutator, expr: relax.Expr) -> relax.Expr:
    """What a dataflow variable is bound to (a folded transpose's constant, or the call that
    computed it, as the mutator saw or emitted it), or ``expr`` itself."""
    from tvm import relax

    if isinstance(expr, relax.Var):
        bound = mutator.lookup_binding(expr)
        return expr if bound is None else bound
    return expr


def adopted_constant(array: np.ndarray) -> relax.Constant:
    """``relax.const(array)`` holding ``array``'s own memory when TVM can adopt it (a packed
    copy of large weights is then made once, not twice)."""
    from tvm import relax

    return relax.const(adopted_tensor(array))


def squeeze_axes_counted_from_the_front(module: IRModule) -> IRModule:
    """``squeeze`` with its negative axes as their positive equivalents (the input's rank is
    known). TVM 0.27's layout conversion fails with ``std::bad_alloc`` on a squeeze along a
    negative axis after a converted operator; timm's lambda layers squeeze axis -2, and the
    whole conversion was declined (their 3-D convolutions then ran unscheduled, 2.6 GFLOPS)."""
    from tvm import relax

    def from_the_front(call) -> bool:
        return call.attrs.axis is None or all(int(a) >= 0 for a in call.attrs.axis)

    def positive(mutator, call):
        ndim = int(getattr(call.args[0].ty, "ndim", -1))
        if ndim < 0 or from_the_front(call):
            return call
        return relax.op.squeeze(call.args[0], [int(a) % ndim for a in call.attrs.axis])

    if all(from_the_front(call) for call in calls_to(module, "relax.squeeze")):
        return module  # left as it is, not rebuilt
    return rewrite_calls(module, "relax.squeeze", positive)


# Elementwise operators whose result is the broadcast of their two operands' shapes.
BROADCAST_ARITHMETIC = (
    "relax.add",
    "relax.subtract",
    "relax.multiply",
    "relax.divide",
    "relax.maximum",
    "relax.minimum",
    "relax.power",
)


def one_element_constants_as_scalars(module: IRModule) -> IRModule:
    """A constant operand of one element (shape ``[1]``, ``[1, 1, 1, 1]``) of an elementwise
    arithmetic operator, of no higher rank than the other operand, as a scalar: the same
    result, but TVM 0.27's layout conversion carries channels-last data through a scalar
    operand only. HGNetV2's learnable affine after every conv (``x * scale + bias``, both of
    shape ``[1]``) stayed channels first, between two transposes each: 45 transposing
    kernels, 16% of its time at one thread, none of it faster at two."""
    import tvm
    from tvm import relax

    ops = {tvm.ir.Op.get(name) for name in BROADCAST_ARITHMETIC}

    def as_scalar(mutator, operand, other):
        value = constant_or_self(mutator, operand)
        shape = static_shape(value)
        rank = int(getattr(other.ty, "ndim", -1))
        if not isinstance(value, tvm.ir.GenericConst) or not shape or rank < len(shape):
            return None
        if any(d != 1 for d in shape):
            return None
        array = value.value.numpy()
        return relax.const(array.reshape(()), str(array.dtype))

    @relax.expr_functor.mutator
    class _Scalars(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op not in ops or len(call.args) != 2:
                return call
            first, second = call.args
            scalars = (as_scalar(self, first, second), as_scalar(self, second, first))
            if scalars == (None, None):
                return call
            args = [scalar or arg for scalar, arg in zip(scalars, call.args, strict=True)]
            return relax.Call(call.op, args, call.attrs, call.ty_args)

    if not any(call.op in ops for call in calls_to(module)):
        return module
    return rewrite_functions(module, _Scalars(module))
