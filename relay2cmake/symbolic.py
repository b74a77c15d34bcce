"""Dimensions chosen at run time: their ranges and the extents computed from them.

A model built with ``--input-shape ids=1..8,1..512`` keeps those dimensions symbolic through
lowering. The plan records every extent that depends on them as a ``DimExpr`` (plain data,
no TVM object): the driver evaluates it in C when the caller sets the dimensions, and gen
evaluates it in Python to size the arena for the largest values.

Every dimension is named twice: ``name`` is the model's (untrusted text: it reaches
generated files only through the encoders in ``naming``), ``symbol`` is ours (``dim0``,
``dim1``, ...), the name TVM prints into kernels.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from relay2cmake.errors import ModelError


@dataclass(frozen=True)
class DimRange:
    name: str  # the model's name for it (an ONNX dim_param, or "<input>_<axis>")
    symbol: str  # dim0, dim1, ...: the variable in the lowered model and its kernels
    low: int
    high: int


@dataclass(frozen=True)
class DimExpr:
    """An integer expression over the dimensions: ``op`` is ``const`` (``value``), ``dim``
    (``value`` = its position in the model's dimension list) or an operator applied to
    ``args``."""

    op: str
    value: int = 0
    args: tuple[DimExpr, ...] = ()


OPERATORS = ("add", "sub", "mul", "floordiv", "floormod", "min", "max")


def evaluate(expr: DimExpr, values: tuple[int, ...]) -> int:
    if expr.op == "const":
        return expr.value
    if expr.op == "dim":
        return values[expr.value]
    a, b = (evaluate(arg, values) for arg in expr.args)
    if expr.op == "add":
        return a + b
    if expr.op == "sub":
        return a - b
    if expr.op == "mul":
        return a * b
    if expr.op == "floordiv":
        return a // b
    if expr.op == "floormod":
        return a % b
    return min(a, b) if expr.op == "min" else max(a, b)


def c_expression(expr: DimExpr, dims: str) -> str:
    """C text of ``expr`` reading dimension k as ``dims[k]`` (int64_t). Floor division and
    modulo go through ``dim_floordiv``/``dim_floormod`` (C's ``/`` truncates), defined by
    the file that uses this; their divisors are non-zero constants (``from_tir``)."""
    if expr.op == "const":
        return f"INT64_C({expr.value})"
    if expr.op == "dim":
        return f"{dims}[{expr.value}]"
    a, b = (c_expression(arg, dims) for arg in expr.args)
    symbol = {"add": "+", "sub": "-", "mul": "*"}.get(expr.op)
    if symbol:
        return f"({a} {symbol} {b})"
    return f"dim_{expr.op}({a}, {b})"


def corners(dims: tuple[DimRange, ...]) -> list[tuple[int, ...]]:
    """Every combination of each dimension's lowest and highest value."""
    return list(itertools.product(*[sorted({d.low, d.high}) for d in dims]))


def largest(expr: DimExpr, dims: tuple[DimRange, ...]) -> int:
    """The largest value of ``expr`` at the corners of the dimensions' box. Extents of real
    models grow with their dimensions, so that is the largest over the box; the driver still
    checks each buffer against the room it was given (``<p>_set_dims``), so an extent that
    does not grow that way is an error at run time, never an overflow."""
    return max(evaluate(expr, values) for values in corners(dims))


def value_at(expr: Any, values: dict[str, int]) -> int:
    """A TIR integer expression (a constant, or over the dimension variables) with each
    variable at ``values`` (symbol → value)."""
    if hasattr(expr, "value"):
        return int(expr.value)
    names = sorted(values)
    return evaluate(from_tir(expr, {n: i for i, n in enumerate(names)}), tuple(values[n] for n in names))


def from_tir(expr: Any, symbols: dict[str, int]) -> DimExpr:
    """A TIR integer expression over the dimension variables (named by ``symbols``: symbol →
    position) as a ``DimExpr``; anything else is refused."""
    from tvm import tirx

    if isinstance(expr, int):
        return DimExpr("const", expr)
    if isinstance(expr, tirx.IntImm):
        return DimExpr("const", int(expr.value))
    if isinstance(expr, tirx.Var):
        if expr.name not in symbols:
            raise ModelError(
                f"The lowered model uses a size {expr.name!r} that is not one of the dimensions given "
                "with --input-shape (a size computed from tensor values): not supported with run-time shapes."
            )
        return DimExpr("dim", symbols[expr.name])
    if isinstance(expr, tirx.Cast):
        return from_tir(expr.value, symbols)
    kinds = {
        tirx.Add: "add",
        tirx.Sub: "sub",
        tirx.Mul: "mul",
        tirx.FloorDiv: "floordiv",
        tirx.FloorMod: "floormod",
        tirx.Min: "min",
        tirx.Max: "max",
    }
    for kind, op in kinds.items():
        if isinstance(expr, kind):
            a, b = from_tir(expr.a, symbols), from_tir(expr.b, symbols)
            if op in ("floordiv", "floormod") and (b.op != "const" or b.value == 0):
                break
            return _simplified(DimExpr(op, args=(a, b)))
    raise ModelError(
        f"The lowered model computes a size as {str(expr)!r}, which relay2cmake cannot evaluate at run time."
    )


def _simplified(expr: DimExpr) -> DimExpr:
    """Constant operands folded (keeps the generated C short and the plan comparable)."""
    if all(arg.op == "const" for arg in expr.args):
        return DimExpr("const", evaluate(expr, ()))
    return expr


def is_static(expr: DimExpr) -> bool:
    return expr.op == "const"


def symbolic_shape(
    values: Any, dims: tuple[DimRange, ...], what: str
) -> tuple[tuple[int, ...], tuple[DimExpr | None, ...]]:
    """A Relax shape as (largest extents, per-axis expressions or None); empty expressions
    when every extent is static."""
    symbols = {d.symbol: i for i, d in enumerate(dims)}
    shape: list[int] = []
    symbolic: list[DimExpr | None] = []
    for dim in values:
        if hasattr(dim, "value"):
            shape.append(int(dim.value))
            symbolic.append(None)
            continue
        if not dims:
            raise ModelError(
                f"{what} has a shape that depends on the input data ({list(values)}); "
                "relay2cmake needs shapes known at generation time."
            )
        expr = from_tir(dim, symbols)
        shape.append(largest(expr, dims))
        symbolic.append(None if is_static(expr) else expr)
    return tuple(shape), tuple(symbolic) if any(e is not None for e in symbolic) else ()
