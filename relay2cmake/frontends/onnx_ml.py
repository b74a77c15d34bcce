"""Operators of ONNX's ``ai.onnx.ml`` domain that are plain tensor arithmetic: Binarizer and
ArrayFeatureExtractor (a gather along the last axis, whose indices the package checks at run
time like any gather's); the tree ensembles are in ``onnx_trees``."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends import onnx_trees
from relay2cmake.frontends.onnx_converter_support import _static_shape

DOMAIN = "ai.onnx.ml"


class Binarizer(OnnxOpConverter):
    """1 where the input is above ``threshold``, else 0, in the input's type."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x = inputs[0]
        dtype = str(x.ty.dtype)
        threshold = relax.const(np.asarray(float(attr.get("threshold", 0.0)), dtype=dtype), dtype)
        return relax.op.astype(relax.op.greater(x, threshold), dtype)


class ArrayFeatureExtractor(OnnxOpConverter):
    """The elements of the last axis the indices name, in their order (all the indices,
    flattened); a 1-D input gives a [1, count] result."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        data, indices = inputs
        shape = _static_shape(data)
        count = int(np.prod(_static_shape(indices)))
        flat = bb.emit(relax.op.reshape(relax.op.astype(indices, "int64"), [count]))
        picked = bb.emit(relax.op.take(data, flat, axis=len(shape) - 1))
        return relax.op.reshape(picked, [1, count] if len(shape) == 1 else [*shape[:-1], count])


CONVERTERS: dict[str, type[OnnxOpConverter]] = {
    "ArrayFeatureExtractor": ArrayFeatureExtractor,
    "Binarizer": Binarizer,
    "TreeEnsemble": onnx_trees.TreeEnsemble,
    "TreeEnsembleRegressor": onnx_trees.TreeEnsembleRegressor,
}
