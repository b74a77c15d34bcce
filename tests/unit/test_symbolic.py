"""Unit tests: extents over run-time dimensions (evaluation, C text, TIR conversion) and the
parsing of --input-shape ranges."""

from __future__ import annotations

import pytest

from relay2cmake.cli import parse_input_shapes
from relay2cmake.errors import ModelError, UserError
from relay2cmake.symbolic import DimExpr, DimRange, c_expression, evaluate, from_tir, largest


def _dim(k: int) -> DimExpr:
    return DimExpr("dim", k)


def _const(v: int) -> DimExpr:
    return DimExpr("const", v)


def test_evaluation_uses_floor_division_like_tir():
    expr = DimExpr("floordiv", args=(DimExpr("sub", args=(_dim(0), _const(7))), _const(2)))
    assert evaluate(expr, (4,)) == -2  # floor(-3 / 2), not C's truncation (-1)
    assert (
        evaluate(DimExpr("floormod", args=(DimExpr("sub", args=(_dim(0), _const(7))), _const(2))), (4,)) == 1
    )
    assert evaluate(DimExpr("max", args=(_dim(0), _dim(1))), (3, 9)) == 9


def test_c_text_reads_the_dims_array_and_floor_helpers():
    expr = DimExpr("add", args=(DimExpr("mul", args=(_dim(1), _const(197))), _const(1)))
    assert c_expression(expr, "dims") == "((dims[1] * INT64_C(197)) + INT64_C(1))"
    assert (
        c_expression(DimExpr("floordiv", args=(_dim(0), _const(2))), "d") == "dim_floordiv(d[0], INT64_C(2))"
    )


def test_largest_value_over_the_corners():
    dims = (DimRange("batch", "dim0", 1, 8), DimRange("seq", "dim1", 2, 512))
    shrinking = DimExpr("sub", args=(_const(600), _dim(1)))  # grows as seq shrinks
    assert largest(DimExpr("mul", args=(_dim(0), _dim(1))), dims) == 8 * 512
    assert largest(shrinking, dims) == 598


def test_tir_expressions_convert_and_unknown_sizes_are_refused():
    from tvm import tirx

    n = tirx.Var("dim0", "int64")
    assert evaluate(from_tir(n * 3 + 1, {"dim0": 0}), (5,)) == 16
    assert evaluate(from_tir(tirx.floordiv(n + 1, 2), {"dim0": 0}), (6,)) == 3
    with pytest.raises(ModelError, match="not one of the dimensions"):
        from_tir(tirx.Var("len_from_data", "int64"), {"dim0": 0})
    with pytest.raises(ModelError, match="cannot evaluate"):
        from_tir(tirx.floordiv(n, n), {"dim0": 0})  # a divisor known only at run time


def test_input_shape_ranges_parse():
    assert parse_input_shapes(["ids=1..8,1..512", "x=3,4..4"]) == {"ids": ((1, 8), (1, 512)), "x": (3, 4)}
    for bad, message in [("x=4..2", "is empty"), ("x=0..2", "positive"), ("x=1..", "LO..HI")]:
        with pytest.raises(UserError, match=message):
            parse_input_shapes([bad])
