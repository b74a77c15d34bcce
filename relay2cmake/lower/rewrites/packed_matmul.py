"""Relax rewrite: a matmul whose right-hand side is a constant [K, N] matrix reads it packed.

The matmul schedule's register tile holds a few rows of the output times a few vectors of
its columns; per step of the reduction it loads one vector of B per column vector. In B's
own [K, N] layout consecutive steps are N * 4 bytes apart, 4 KiB for N = 1024: a stride
that maps every row of the tile's column block to the same few L1 sets, so the block is
re-read from L2 for every row tile. Packed as [N/16, K, 16] (once, at generation time) a
column block is one sequential stream. Measured on the transformer's FFN (128 x 256 →
1024, AVX2): see docs/performance.md.

Float32 matmuls of a static left operand of rank 2 or more and a constant [K, N] right
operand with N of 16 or more qualify (dense layers, ONNX MatMul/Gemm with weights); the last
block of an N that 16 does not divide (1,000 classes) is padded with zeros, which the
kernel never reads. Everything else keeps TVM's legalization.

An N that not even 4 divides (GPT-2's 50,257-word LM head) would leave the schedule no
vector width: scalar code at 5.5 GFLOPS against 90 for the model's other matmuls. There the
kernel computes the padded width in its register tiles and a last stage keeps the first N
columns; the schedule folds that stage into the tile's write-back (a predicate on the store,
not a copy of the output). An M that 4 does not divide is then rounded up as well (the cut
keeps the first M rows). A batched matmul whose computed right operand has such an N
(attention's Q.K^T over ViT's 197 tokens, 12 GFLOPS as scalar code) packs that operand at run
time the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_functions, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule

PACK = 16  # columns per contiguous block: one AVX-512, two AVX2 or four NEON vectors
MATMUL_BLOCK = "r2c_matmul_packed"  # the block name the schedules dispatch on
COLUMNS_BLOCK = "r2c_matmul_columns"  # keeps the first N of the padded columns


def _padded_rows(rows: int, columns: int) -> int:
    """Rows the kernel computes: with a column cut, an M that 4 does not divide is rounded up
    to 8s (the cut drops the extra rows too; a predicated last row tile cannot be combined
    with the cut's predicate, and one row per tile reads each block of B once per row)."""
    if columns % 4 == 0 or rows <= 4 or rows % 4 == 0:
        return rows
    return -(-rows // 8) * 8


def _matmul_packed(data, packed, columns: int):
    """``data`` [..., M, K] times ``packed`` [N/16, K, 16] (constant weights), or times
    [..., N/16, K, 16] with the same leading dimensions as ``data`` (a computed operand)."""
    from tvm import te

    *batch, rows, depth = (int(d) for d in data.shape)
    k = te.reduce_axis((0, depth), name="k")
    batched = len(packed.shape) > 3
    computed_columns = columns if columns % 4 == 0 else int(packed.shape[-3]) * PACK  # see the module's note
    computed_rows = _padded_rows(rows, columns)

    def element(*index):
        *outer, i, j = index
        row = te.min(i, rows - 1) if computed_rows != rows else i  # extra rows re-read the last
        right = packed[(*outer, j // PACK, k, j % PACK)] if batched else packed[j // PACK, k, j % PACK]
        return te.sum(data[(*outer, row, k)] * right, axis=k)

    product = te.compute((*batch, computed_rows, computed_columns), element, name=MATMUL_BLOCK)
    if (computed_rows, computed_columns) == (rows, columns):
        return product
    return te.compute((*batch, rows, columns), lambda *index: product[index], name=COLUMNS_BLOCK)


def _pack_columns(matrix):
    """A computed right operand [..., K, N] as [..., N/16, K, 16], zeros past N."""
    from tvm import te, tirx

    *batch, depth, columns = (int(d) for d in matrix.shape)

    def element(*index):
        *outer, block, k, lane = index
        j = block * PACK + lane
        return tirx.if_then_else(j < columns, matrix[(*outer, k, te.min(j, columns - 1))], 0.0)

    shape = (*batch, -(-columns // PACK), depth, PACK)
    return te.compute(shape, element, name="r2c_pack_columns")


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
    import numpy as np
    import tvm
    from tvm import relax

    matmul = tvm.ir.Op.get("relax.matmul")

    @relax.expr_functor.mutator
    class _Pack(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op != matmul:
                return call
            weight = constant_or_self(self, call.args[1])
            if not isinstance(weight, tvm.ir.GenericConst):
                return self.computed_operand(call)
            value = weight.value.numpy()
            if not _qualifies(call, static_shape(call.args[0]), value):
                return call
            depth, columns = value.shape
            padded = np.pad(value, [(0, 0), (0, -columns % PACK)])
            packed = np.ascontiguousarray(padded.reshape(depth, -1, PACK).transpose(1, 0, 2))
            return self.builder_.call_te(
                _matmul_packed,
                call.args[0],
                relax.const(packed),
                columns=columns,
                primfunc_name_hint="matmul",
            )

        def computed_operand(self, call):
            """Attention's Q.K^T with 197 tokens: N that 4 does not divide, B computed.
            Packed at run time (one small copy, fused with the transpose that makes B), so
            the kernel gets vector tiles and the column cut like constant weights."""
            left, right = static_shape(call.args[0]), static_shape(call.args[1])
            if (
                left is None
                or right is None
                or len(left) < 3
                or left[:-2] != right[:-2]
                or left[-1] != right[-2]
                or right[-1] % 4 == 0
                or right[-1] < PACK
                or str(call.args[0].ty.dtype) != "float32"
                or str(call.args[1].ty.dtype) != "float32"
                or call.attrs.out_dtype not in ("", "float32", None)
            ):
                return call
            packed = self.builder_.emit(
                self.builder_.call_te(_pack_columns, call.args[1], primfunc_name_hint="pack_columns")
            )
            return self.builder_.call_te(
                _matmul_packed, call.args[0], packed, columns=right[-1], primfunc_name_hint="matmul"
            )

    return rewrite_functions(module, _Pack(module))
