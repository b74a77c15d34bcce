"""Relax rewrite: two-operand einsums that are (batched) matrix products as ``matmul``.

TVM lowers ``einsum`` to one generic loop nest that no schedule of ours recognises: MaxViT's
attention, written as ``einsum("B G H I D, B G H J D -> B G H I J")`` and its ``P . V``
twin, ran at 9-10 GFLOPS, a fifth of its kernel time. Each letter of such an equation is a
batch axis (in both operands and the result), a row axis (the left operand and the result),
a column axis (the right operand and the result) or a contracted axis (both operands only).
The left operand is permuted to [batch, rows, contracted] and the right one to [batch,
contracted, columns], each group reshaped to one axis, multiplied by ``matmul`` (the
product and packed-weight schedules take it from there), and the result reshaped and
permuted to the equation's order; identity permutes and reshapes are left out. Equations
with an ellipsis, a letter repeated in one term (a diagonal), a letter summed in one operand
only, dimensions that differ between the operands, or other than float32 operands stay
einsums.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_calls, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule


@dataclass(frozen=True)
class ProductPlan:
    """How an einsum becomes a matmul: each operand's permutation and [batch, rows, depth] or
    [batch, depth, columns] shape (no batch axis when there is none), and the product's shape
    before and permutation after it is laid out in the equation's order."""

    left_order: tuple[int, ...]
    left_shape: tuple[int, ...]
    right_order: tuple[int, ...]
    right_shape: tuple[int, ...]
    grouped_shape: tuple[int, ...]  # the product as [batch..., rows..., columns...]
    output_order: tuple[int, ...]


def product_plan(subscripts: str, left: list[int], right: list[int]) -> ProductPlan | None:
    """The plan for ``subscripts`` over operands of shapes ``left`` and ``right``, or None when
    the equation is not a (batched) matrix product of these shapes."""
    equation = "".join(subscripts.split())
    if "." in equation or equation.count("->") != 1:
        return None
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    if len(terms) != 2:
        return None
    a, b = terms
    if len(a) != len(left) or len(b) != len(right):
        return None
    if any(len(set(term)) != len(term) for term in (a, b, output)) or not set(output) <= set(a + b):
        return None
    sizes = dict(zip(a, left, strict=True))
    for letter, size in zip(b, right, strict=True):
        if sizes.setdefault(letter, size) != size:
            return None
    batch = [x for x in output if x in a and x in b]
    rows = [x for x in output if x in a and x not in b]
    columns = [x for x in output if x in b and x not in a]
    depth = [x for x in a if x in b and x not in output]
    if len(batch) + len(rows) + len(depth) != len(a) or len(batch) + len(depth) + len(columns) != len(b):
        return None  # a letter summed within one operand

    def extent(letters: list[str]) -> int:
        return math.prod(sizes[x] for x in letters)

    lead = (extent(batch),) if batch else ()
    grouped = batch + rows + columns
    return ProductPlan(
        left_order=tuple(a.index(x) for x in batch + rows + depth),
        left_shape=(*lead, extent(rows), extent(depth)),
        right_order=tuple(b.index(x) for x in batch + depth + columns),
        right_shape=(*lead, extent(depth), extent(columns)),
        grouped_shape=tuple(sizes[x] for x in grouped),
        output_order=tuple(grouped.index(x) for x in output),
    )


def einsum_as_matmul(module: IRModule) -> IRModule:
    return rewrite_calls(module, "relax.einsum", _as_matmul)


def _arranged(emit, value, order: tuple[int, ...], shape: tuple[int, ...]):
    """``value`` permuted by ``order`` and reshaped to ``shape``, each step only when needed."""
    from tvm import relax

    if list(order) != sorted(order):
        value = emit(relax.op.permute_dims(value, list(order)))
    if tuple(static_shape(value) or ()) != shape:
        value = emit(relax.op.reshape(value, shape))
    return value


def _as_matmul(mutator, call):
    from tvm import relax

    operands = constant_or_self(mutator, call.args[0])
    if not isinstance(operands, relax.Tuple) or len(operands.fields) != 2:
        return call
    left, right = operands.fields
    shapes = [static_shape(left), static_shape(right), static_shape(call)]
    if any(s is None for s in shapes) or any(str(x.ty.dtype) != "float32" for x in (left, right, call)):
        return call
    plan = product_plan(str(call.attrs.subscripts), shapes[0], shapes[1])
    if plan is None:
        return call
    emit = mutator.builder_.emit
    # each step emitted only when another follows: the last is the call's replacement
    result = relax.op.matmul(
        _arranged(emit, left, plan.left_order, plan.left_shape),
        _arranged(emit, right, plan.right_order, plan.right_shape),
    )
    if (*plan.left_shape[:-1], plan.right_shape[-1]) != plan.grouped_shape:
        result = relax.op.reshape(emit(result), plan.grouped_shape)
    if list(plan.output_order) != sorted(plan.output_order):
        result = relax.op.permute_dims(emit(result), list(plan.output_order))
    return result
