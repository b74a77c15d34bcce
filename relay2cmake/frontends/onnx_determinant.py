"""Det of small square matrices: the sum over permutations of the signed products of the
entries they pick (Leibniz's formula). Exact in the algebra and cheap up to 5 x 5 (120
terms); a larger matrix needs a pivoted LU decomposition, which is not written."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _static_shape

if TYPE_CHECKING:
    from tvm import te

LARGEST = 5


def _sign(permutation: tuple[int, ...]) -> int:
    inversions = sum(a > b for a, b in itertools.combinations(permutation, 2))
    return -1 if inversions % 2 else 1


def _determinant_te(x: te.Tensor) -> te.Tensor:
    from tvm import te, tirx

    size = int(x.shape[-1])

    def value(*batch):
        total = tirx.const(0, x.dtype)
        for permutation in itertools.permutations(range(size)):
            term = tirx.const(_sign(permutation), x.dtype)
            for row, column in enumerate(permutation):
                term = term * x[(*batch, row, column)]
            total = total + term
        return total

    return te.compute(x.shape[:-2], value, name="determinant")


class Det(OnnxOpConverter):
    @classmethod
    def _impl_v11(cls, bb, inputs, attr, params):
        shape = _static_shape(inputs[0])
        if len(shape) < 2 or shape[-1] != shape[-2]:
            raise ValueError(f"Det takes square matrices, not {shape}")
        if shape[-1] > LARGEST:
            raise NotImplementedError(
                f"Det of {shape[-1]} x {shape[-1]} matrices (up to {LARGEST} x {LARGEST})"
            )
        return bb.emit_te(_determinant_te, inputs[0], primfunc_name_hint="determinant")


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"Det": Det}
