"""Relax rewrite: transposes moved past the elementwise operators that read them, a
transpose of a transpose as one transpose, and a transpose that keeps every axis in place
as its input.

Layout conversion leaves transposes where a model transposes its own data around an
operator that works on the last axis. FocalNet's layer norms (``permute(0, 2, 3, 1)``,
norm, ``permute(0, 3, 1, 2)``) on channels-last data became an identity transpose before
the norm and, after it, a transpose back to channels first that the next block's
``permute(0, 2, 3, 1)`` undid; its residual stream stayed channels first, every residual add
reading two transposed images and transposed again after. An elementwise operator (or a
concat) whose operands are all transposed the same way (or scalars, or constants) now runs on
the untransposed data and is transposed after, so that transposes meet the ones that undo
them and both go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import (
    BROADCAST_ARITHMETIC,
    calls_to,
    constant_or_self,
    rewrite_functions,
    static_shape,
)

if TYPE_CHECKING:
    from tvm.ir import IRModule

# Operators that compute each element from the same element of their operands alone.
_ELEMENTWISE = (
    *BROADCAST_ARITHMETIC,
    "relax.nn.relu",
    "relax.nn.gelu",
    "relax.nn.silu",
    "relax.sigmoid",
    "relax.tanh",
    "relax.exp",
    "relax.erf",
    "relax.sqrt",
    "relax.negative",
)


def collapse_transpose_pairs(module: IRModule) -> IRModule:
    """``f(permute(x, a), permute(y, a))`` → ``permute(f(x, y), a)`` for an elementwise ``f``
    (operands of one shape, scalars, or constants, transposed back with NumPy), and for a
    concat of operands transposed alike; ``permute(permute(x, a), b)`` → ``permute(x, a[b])``;
    ``permute(x, identity)`` → ``x``; the transposes no longer read removed."""
    import tvm
    from tvm import relax

    permute = tvm.ir.Op.get("relax.permute_dims")
    concat = tvm.ir.Op.get("relax.concat")
    elementwise = {tvm.ir.Op.get(name) for name in _ELEMENTWISE}

    @relax.expr_functor.mutator
    class _Transposes(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op == permute:
                return _collapsed(self, call, permute)
            if call.op in elementwise:
                return _hoisted(self, call, permute)
            if call.op == concat:
                return _concat_hoisted(self, call, permute)
            return call

    if not calls_to(module, "relax.permute_dims"):
        return module
    rewritten = rewrite_functions(module, _Transposes(module))
    for gv, func in rewritten.functions.items():  # the transposes no longer read
        if isinstance(func, relax.Function):
            rewritten[gv] = relax.analysis.remove_all_unused(func)
    return rewritten


def _axes(call) -> list[int] | None:
    rank = getattr(call.args[0].ty, "ndim", -1)
    if rank is None or int(rank) < 0:
        return None
    axes = call.attrs.axes
    return [int(a) for a in axes] if axes is not None else list(range(int(rank)))[::-1]


def _collapsed(mutator, call, permute):
    from tvm import relax

    outer = _axes(call)
    if outer is None:
        return call
    data, axes = call.args[0], outer
    inner = constant_or_self(mutator, data)
    if isinstance(inner, relax.Call) and inner.op == permute:
        inner_axes = _axes(inner)
        if inner_axes is not None:
            data, axes = inner.args[0], [inner_axes[a] for a in outer]
    if axes == list(range(len(axes))):
        return data
    return call if data is call.args[0] else relax.op.permute_dims(data, axes)


def _hoisted(mutator, call, permute):
    import numpy as np
    import tvm
    from tvm import relax

    shape = static_shape(call)
    if shape is None:
        return call
    operands: list = []  # each untransposed, or a constant to transpose back once axes are known
    axes = None
    for arg in call.args:
        bound = constant_or_self(mutator, arg)
        if getattr(arg.ty, "ndim", -1) == 0:  # a scalar: the same for any layout
            operands.append(arg)
        elif isinstance(bound, tvm.ir.GenericConst) and len(static_shape(bound) or shape) <= len(shape):
            operands.append(bound.value.numpy())  # (a per-channel scale: ConvNeXt's layer scale)
        elif isinstance(bound, relax.Call) and bound.op == permute and static_shape(arg) == shape:
            found = _axes(bound)
            if found is None or axes not in (None, found):
                return call
            axes = found
            operands.append(bound.args[0])
        else:
            return call
    if axes is None:
        return call
    back = list(np.argsort(axes))  # the inverse permutation
    untransposed = [
        relax.const(np.ascontiguousarray(o.reshape((1,) * (len(shape) - o.ndim) + o.shape).transpose(back)))
        if isinstance(o, np.ndarray)
        else o
        for o in operands
    ]
    computed = mutator.builder_.emit(relax.Call(call.op, untransposed, call.attrs, call.ty_args))
    return relax.op.permute_dims(computed, axes)


def _concat_hoisted(mutator, call, permute):
    """``concat([permute(x, a), permute(y, a)], axis=k)`` → ``permute(concat([x, y], axis=a[k]), a)``."""
    from tvm import relax

    parts = constant_or_self(mutator, call.args[0])
    if not isinstance(parts, relax.Tuple) or call.attrs.axis is None:
        return call
    bound = [constant_or_self(mutator, part) for part in parts.fields]
    if not all(isinstance(b, relax.Call) and b.op == permute for b in bound):
        return call
    axes = {tuple(_axes(b) or ()) for b in bound}
    if len(axes) != 1 or () in axes:
        return call
    order = list(axes.pop())
    axis = order[int(call.attrs.axis) % len(order)]
    joined = mutator.builder_.emit(relax.op.concat([b.args[0] for b in bound], axis=axis))
    return relax.op.permute_dims(joined, order)
