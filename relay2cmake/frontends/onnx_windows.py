"""HannWindow, HammingWindow and BlackmanWindow: a window of a constant length is a constant
(a length given at run time is settled from the declared output first, onnx_settled), so
the package holds its values; periodic windows divide by N, symmetric ones by N - 1."""

from __future__ import annotations

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _constant_value
from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

# cos(k 2 pi n / N) coefficients (k = 0, 1, 2), ONNX's operator definitions
COEFFICIENTS = {
    "HannWindow": (0.5, -0.5, 0.0),
    "HammingWindow": (25.0 / 46.0, -(1.0 - 25.0 / 46.0), 0.0),
    "BlackmanWindow": (0.42, -0.5, 0.08),
}


def _window(op_name: str):
    class Window(OnnxOpConverter):
        @classmethod
        def _impl_v17(cls, bb, inputs, attr, params):
            size = _constant_value(inputs[0], params)
            if size is None:
                raise NotImplementedError(f"{op_name} with a size given at run time and no declared output")
            length = int(size.reshape(-1)[0])
            divisor = length if int(attr.get("periodic", 1)) else length - 1
            n = np.arange(length, dtype=np.float64)
            phase = 2.0 * np.pi * n / divisor if divisor else np.zeros(length)
            values = sum(c * np.cos(k * phase) for k, c in enumerate(COEFFICIENTS[op_name]))
            dtype = ONNX_DTYPES.get(int(attr.get("output_datatype", 1)), "float32")
            return relax.const(np.asarray(values).astype(dtype), dtype)

    Window.__name__ = op_name
    return Window


CONVERTERS: dict[str, type[OnnxOpConverter]] = {name: _window(name) for name in COEFFICIENTS}
