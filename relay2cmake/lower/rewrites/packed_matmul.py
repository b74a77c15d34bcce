"""Relax rewrite: a matmul whose right-hand side is a constant [K, N] matrix reads it packed.

The matmul schedule's register tile holds a few rows of the output times a few vectors of
its columns; per step of the reduction it loads one vector of B per column vector. In B's
own [K, N] layout consecutive steps are N * 4 bytes apart, 4 KiB for N = 1024: a stride
that maps every row of the tile's column block to the same few L1 sets, so the block is
re-read from L2 for every row tile. Packed as [N/16, K, 16] (once, at generation time) a
column block is one sequential stream. Measured on the transformer's FFN (128 x 256 →
1024, AVX2): see docs/performance.md.

Float32 matmuls of a left operand of rank 2 or more (its depth static; rows and batch may be
chosen at run time) and a constant [K, N] right operand with N of 16 or more qualify (dense
layers, ONNX MatMul/Gemm with weights); the last block of an N that 16 does not divide
(1,000 classes) is padded with zeros, which the kernel never reads. Everything else keeps TVM's legalization.

An N that not even 4 divides (GPT-2's 50,257-word LM head) would leave the schedule no
vector width: scalar code at 5.5 GFLOPS against 90 for the model's other matmuls. There the
kernel computes the padded width in its register tiles and a last stage keeps the first N
columns; the schedule folds that stage into the tile's write-back (a predicate on the store,
not a copy of the output). An M that 4 does not divide is then rounded up as well (the cut
keeps the first M rows). Rows chosen at run time (a sequence of 1..512 tokens) are always
rounded up to 4s the same way (the row tile of the x86 and NEON schedules; 8s made one token
cost 1.56x a fixed-length package, 4s 1.19x): the tile's rows then need no predicate, which
kept TVM from shrinking the tile's accumulators to registers (it asked the workspace for a
whole output's worth). A batched matmul whose computed right operand has such an N
(attention's Q.K^T over ViT's 197 tokens, 12 GFLOPS as scalar code) packs that operand at run
time the same way.

Tied embeddings (GPT-2's word embedding E [V, D] is also its LM head, ``h @ E^T``) would be
stored twice: E for the embedding's Gather and E^T packed for the matmul. A Gather along
axis 0 of a constant whose transpose is a packed weight reads the packed copy instead
(row v of E is column v of B: ``packed[v // 16, :, v % 16]``), so the weights hold E once.
The Gather's indices are already checked and non-negative (``index_checks`` runs first).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import (
    adopted_constant,
    calls_to,
    constant_or_self,
    number_or_expression,
    rewrite_functions,
    shape_extents,
    static_shape,
)
from relay2cmake.tensor_memory import aligned_empty, tensor_values

if TYPE_CHECKING:
    from tvm.ir import IRModule

PACK = 16  # columns per contiguous block: one AVX-512, two AVX2 or four NEON vectors
MATMUL_BLOCK = "r2c_matmul_packed"  # the block name the schedules dispatch on
COLUMNS_BLOCK = "r2c_matmul_columns"  # keeps the first N of the padded columns (and M rows)
# Rows chosen at run time are computed in multiples of this (the cut keeps the real ones).
SYMBOLIC_ROW_TILE = 4
# Columns chosen at run time (a computed operand's: attention's Q.K^T over the sequence) are
# computed in multiples of this, two packed blocks: the AVX-512 tile's two vectors (in 16s
# it got one, 4 accumulators: 2.0 against 1.2 ms at 512 tokens, head size 64).
SYMBOLIC_COLUMN_TILE = 2 * PACK


def computed_columns_of(columns: int) -> int:
    """Columns the kernel computes (a cut keeps the first ``columns``): an N that 4 does not
    divide is padded to the packed 16s (see the module's note), and so is one that 16 does
    not divide when that adds at most an eighth, so that AVX-512 gets whole vectors
    (MLP-Mixer's token mixing, N = 196: 4-lane vectors at 19 GFLOPS; 208 computed)."""
    padded = -(-columns // PACK) * PACK
    if columns % 4 != 0 or (columns % PACK != 0 and 8 * padded <= 9 * columns):
        return padded
    return columns


def _padded_rows(rows: int, cut: bool) -> int:
    """Rows the kernel computes: with a column cut, an M that 4 does not divide is rounded up
    to 8s (the cut drops the extra rows too; a predicated last row tile cannot be combined
    with the cut's predicate, and one row per tile reads each block of B once per row)."""
    if not cut or rows <= 4 or rows % 4 == 0:
        return rows
    return -(-rows // 8) * 8


def _whole(extent, tile: int):
    """A run-time extent rounded up to whole tiles (a TIR expression)."""
    return (extent + tile - 1) // tile * tile


def _matmul_packed(data, packed, columns):
    """``data`` [..., M, K] times ``packed`` [N/16, K, 16] (constant weights), or times
    [..., N/16, K, 16] with the same leading dimensions as ``data`` (a computed operand).
    M, K and (for a computed operand) N may be chosen at run time."""
    from tvm import te

    *batch, rows, depth = (number_or_expression(d) for d in data.shape)
    k = te.reduce_axis((0, depth), name="k")
    batched = len(packed.shape) > 3
    if isinstance(columns, int):
        computed_columns = computed_columns_of(columns)
        cut_columns = computed_columns != columns
        if int(packed.shape[-3]) * PACK < computed_columns:
            raise ValueError(
                f"packed columns hold {int(packed.shape[-3]) * PACK}; the tile computes {computed_columns}"
            )
    else:  # columns chosen at run time (attention's Q.K^T over the sequence): whole blocks
        computed_columns, cut_columns = _whole(columns, SYMBOLIC_COLUMN_TILE), True
    if isinstance(rows, int):
        computed_rows = _padded_rows(rows, cut_columns)
        padded = computed_rows != rows
    else:  # rows chosen at run time: whole tiles of them (the module's note)
        computed_rows, padded = _whole(rows, SYMBOLIC_ROW_TILE), True

    def element(*index):
        *outer, i, j = index
        row = te.min(i, rows - 1) if padded else i  # extra rows re-read the last
        right = packed[(*outer, j // PACK, k, j % PACK)] if batched else packed[j // PACK, k, j % PACK]
        return te.sum(data[(*outer, row, k)] * right, axis=k)

    product = te.compute((*batch, computed_rows, computed_columns), element, name=MATMUL_BLOCK)
    if not padded and not cut_columns:
        return product
    return te.compute((*batch, rows, columns), lambda *index: product[index], name=COLUMNS_BLOCK)


def _pack_columns(matrix):
    """A computed right operand [..., K, N] as [..., N/16, K, 16], zeros past N (a run-time N:
    in whole ``SYMBOLIC_COLUMN_TILE`` columns, as the matmul computes them)."""
    from tvm import te, tirx

    *batch, depth, columns = (number_or_expression(d) for d in matrix.shape)
    blocks = (
        (columns + PACK - 1) // PACK
        if isinstance(columns, int)
        else _whole(columns, SYMBOLIC_COLUMN_TILE) // PACK
    )

    def element(*index):
        *outer, block, k, lane = index
        j = block * PACK + lane
        return tirx.if_then_else(j < columns, matrix[(*outer, k, te.min(j, columns - 1))], 0.0)

    return te.compute((*batch, blocks, depth, PACK), element, name="r2c_pack_columns")


def _take_packed(indices, packed, rows: int):
    """Rows ``indices`` of E [rows, D] from ``packed`` [rows/16, D, 16], E's transpose packed."""
    from tvm import te

    depth = int(packed.shape[1])

    def element(*index):
        *where, d = index
        row = indices[tuple(where)].astype("int64")
        return packed[row // PACK, d, row % PACK]

    return te.compute((*(int(n) for n in indices.shape), depth), element, name="r2c_take_packed")


def _constant_take_tables(module) -> set[tuple[int, ...]]:
    """Shapes of the float32 constants that a ``take`` along axis 0 reads."""
    import tvm

    return {
        tuple(int(d) for d in call.args[0].value.shape)
        for call in calls_to(module, "relax.take")
        if isinstance(call.args[0], tvm.ir.GenericConst) and str(call.args[0].value.dtype) == "float32"
    }


def _key(matrix) -> bytes:
    """Content key of a float32 matrix (shape and bytes)."""
    import numpy as np

    digest = hashlib.sha256(repr(matrix.shape).encode())
    digest.update(np.ascontiguousarray(matrix).data)
    return digest.digest()


def _packed_columns(value):
    """B (K x N) as column blocks of PACK, (ceil(N / PACK), K, PACK), the last block padded
    with zeros; written once into memory TVM can adopt."""
    depth, columns = value.shape
    full = columns // PACK
    packed = aligned_empty((-(-columns // PACK), depth, PACK), value.dtype)
    packed[:full] = value[:, : full * PACK].reshape(depth, full, PACK).transpose(1, 0, 2)
    if full < packed.shape[0]:
        packed[full] = 0
        packed[full, :, : columns - full * PACK] = value[:, full * PACK :]
    return packed


def _left_shape(expr) -> list | None:
    """A left operand's shape: its depth (last dimension) a constant; the others constants or
    expressions of dimensions chosen at run time (a batch, a sequence). Else None."""
    extents = shape_extents(expr)
    if not extents or not hasattr(extents[-1], "value"):
        return None
    return [number_or_expression(d) for d in extents]


def _same(a, b) -> bool:
    """Two extents (numbers or TIR expressions) that are provably equal."""
    import tvm

    return bool(tvm.sym.Analyzer().can_prove_equal(a, b))


def _worth_packing(left: list, right: list) -> bool:
    """A computed right operand is packed when its N leaves the tile no whole vectors (see
    the module's note) or when any extent is chosen at run time: the packed kernel then
    computes whole row tiles and column blocks, where TVM's own lowering ran a condition or
    a scalar loop (attention over 64 tokens, head size 64: 1.17 ms against 0.04 at a fixed
    length)."""
    columns = right[-1]
    if not all(hasattr(d, "value") for d in (*left, *right)):
        return True
    return int(columns) >= PACK and computed_columns_of(int(columns)) != int(columns)


def _qualifies(call, data_shape, weight) -> bool:
    return (
        data_shape is not None
        and len(data_shape) >= 2
        and str(call.args[0].ty.dtype) == "float32"
        and str(weight.dtype) == "float32"
        and weight.ndim == 2
        and weight.shape[0] == data_shape[-1]
        and weight.shape[1] >= PACK
        and call.attrs.out_dtype in ("", "float32", None)
    )


def pack_matmul_weights(module: IRModule) -> IRModule:
    import tvm
    from tvm import relax

    matmul = tvm.ir.Op.get("relax.matmul")
    take = tvm.ir.Op.get("relax.take")
    packed_by_transpose: dict[bytes, tuple[relax.Expr, int]] = {}  # key of B^T → (packed B, N)
    table_shapes = _constant_take_tables(module)  # only a B of such a shape transposed is hashed

    @relax.expr_functor.mutator
    class _Pack(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != matmul:
                return call
            weight = constant_or_self(self, call.args[1])
            if not isinstance(weight, tvm.ir.GenericConst):
                return self.computed_operand(call)
            value = tensor_values(weight.value)
            if not _qualifies(call, _left_shape(call.args[0]), value):
                return call
            depth, columns = value.shape
            packed = adopted_constant(_packed_columns(value))
            if (columns, depth) in table_shapes:
                packed_by_transpose.setdefault(_key(value.T), (packed, columns))
            return self.builder_.call_te(
                _matmul_packed, call.args[0], packed, columns=columns, primfunc_name_hint="matmul"
            )

        def computed_operand(self, call):
            """Attention's Q.K^T with 197 tokens (N that 4 does not divide) or 196 (16 does
            not, whole 16s add an eighth at most), B computed. Packed at run time (one small
            copy, fused with the transpose that makes B), so the kernel gets vector tiles and
            the column cut like constant weights: MobileViT-XS's 196 x 24 x 196 products ran
            in 4-lane vectors at 11 GFLOPS (AVX-512)."""
            left, right = shape_extents(call.args[0]), shape_extents(call.args[1])
            if (
                left is None
                or right is None
                or len(left) < 3
                or len(left) != len(right)
                or not all(_same(a, b) for a, b in zip(left[:-2], right[:-2], strict=True))
                or not _same(left[-1], right[-2])
                or not _worth_packing(left, right)
                or str(call.args[0].ty.dtype) != "float32"
                or str(call.args[1].ty.dtype) != "float32"
                or call.attrs.out_dtype not in ("", "float32", None)
            ):
                return call
            packed = self.builder_.emit(
                self.builder_.call_te(_pack_columns, call.args[1], primfunc_name_hint="pack_columns")
            )
            return self.builder_.call_te(
                _matmul_packed,
                call.args[0],
                packed,
                columns=number_or_expression(right[-1]),
                primfunc_name_hint="matmul",
            )

    @relax.expr_functor.mutator
    class _TiedTake(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != take or call.attrs.axis is None or int(call.attrs.axis) not in (0, -2):
                return call
            table = constant_or_self(self, call.args[0])
            if not isinstance(table, tvm.ir.GenericConst) or str(table.value.dtype) != "float32":
                return call
            value = tensor_values(table.value)
            if value.ndim != 2 or static_shape(call.args[1]) is None:
                return call
            tied = packed_by_transpose.get(_key(value))
            if tied is None:
                return call
            return self.builder_.call_te(
                _take_packed, call.args[1], tied[0], rows=value.shape[0], primfunc_name_hint="take"
            )

    packed = rewrite_functions(module, _Pack(module))
    return rewrite_functions(packed, _TiedTake(packed)) if packed_by_transpose else packed
