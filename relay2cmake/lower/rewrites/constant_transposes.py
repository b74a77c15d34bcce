"""Relax rewrite: transposes of constants computed at generation time, with NumPy.

They come from layout conversion (convolution weights and biases) and from ONNX Gemm's
``transB``; folded, the weight rewrites (``nhwc``, ``packed_matmul``) see constants, and
nothing else of the graph is evaluated.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.lower.rewrites.common import rewrite_calls

if TYPE_CHECKING:
    from tvm.ir import IRModule


def fold_constant_transposes(module: IRModule) -> IRModule:
    """``permute_dims(constant)`` → the transposed constant."""
    return rewrite_calls(module, "relax.permute_dims", _folded)


def _folded(mutator, call):
    import numpy as np
    import tvm
    from tvm import relax

    if not isinstance(call.args[0], tvm.ir.GenericConst):
        return call
    value = call.args[0].value.numpy()
    if value.dtype.kind not in "fiub":  # ml_dtypes' narrow floats stay as they are
        return call
    axes = call.attrs.axes
    order = [int(a) for a in axes] if axes is not None else list(range(value.ndim))[::-1]
    return relax.const(np.ascontiguousarray(value.transpose(order)))
