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
not a copy of the output).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import constant_or_self, rewrite_functions, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule

PACK = 16  # columns per contiguous block: one AVX-512, two AVX2 or four NEON vectors
MATMUL_BLOCK = "r2c_matmul_packed"  # the block name the schedules dispatch on
COLUMNS_BLOCK = "r2c_matmul_columns"  # keeps the first N of the padded columns


def _matmul_packed(data, packed, columns: int):
    from tvm import te

    *batch, rows, depth = (int(d) for d in data.shape)
    k = te.reduce_axis((0, depth), name="k")

    def element(*index):
        *outer, j = index
        return te.sum(data[(*outer, k)] * packed[j // PACK, k, j % PACK], axis=k)

    computed = columns if columns % 4 == 0 else int(packed.shape[0]) * PACK  # see the module's note
    product = te.compute((*batch, rows, computed), element, name=MATMUL_BLOCK)
    if computed == columns:
        return product
    return te.compute((*batch, rows, columns), lambda *index: product[index], name=COLUMNS_BLOCK)


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
                return call
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

    return rewrite_functions(module, _Pack(module))
