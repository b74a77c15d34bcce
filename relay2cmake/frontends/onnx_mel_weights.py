"""MelWeightMatrix: the triangular filters that map a spectrogram's bins onto mel bands, as
ONNX's reference builds them (band edges spaced by (high - low) / (bands + 2) in mel, bins
from ``floor((dft_length + 1) * hz / sample_rate)``). The number of bands and the DFT length
set the shape (given at run time: settled from the declared output, onnx_settled); the sample
rate and the edge frequencies only set values, so they may stay run-time inputs: the filters
are then computed when the package runs, from comparisons over the [bins, bands] grid (no
index comes from the data, so none can reach out of the matrix)."""

from __future__ import annotations

import math

import numpy as np
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _constant_value
from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES


def _f64(value) -> relax.Expr:
    return relax.const(np.asarray(value, dtype=np.float64), "float64")


def _as_f64(expr: relax.Expr) -> relax.Expr:
    return relax.op.astype(expr, "float64")


class MelWeightMatrix(OnnxOpConverter):
    @classmethod
    def _impl_v17(cls, bb, inputs, attr, params):
        counts = [_constant_value(inputs[i], params) for i in (0, 1)]
        if any(c is None for c in counts):
            raise NotImplementedError(
                "MelWeightMatrix's num_mel_bins and dft_length set its shape: give them as constants"
            )
        bands, dft_length = (int(c.reshape(-1)[0]) for c in counts)
        bins = dft_length // 2 + 1
        if bands < 0 or bins < 0:
            raise NotImplementedError("MelWeightMatrix needs num_mel_bins >= 0 and dft_length >= 0")
        rate, low, high = (
            bb.emit(relax.op.reshape(relax.op.astype(inputs[i], "float64"), [])) for i in (2, 3, 4)
        )
        # the edges in mel as the reference rounds them: log1p in the edges' float32, then / ln 10
        edge_type = str(inputs[3].ty.dtype)

        def mel(hz):
            scaled = relax.op.astype(relax.op.divide(hz, _f64(700.0)), edge_type)
            log1p = relax.op.astype(
                relax.op.log(relax.op.add(relax.op.astype(scaled, "float64"), _f64(1.0))), edge_type
            )
            return relax.op.divide(
                relax.op.astype(
                    relax.op.multiply(log1p, relax.const(np.asarray(2595.0, edge_type), edge_type)), "float64"
                ),
                _f64(math.log(10.0)),
            )

        low_mel, high_mel = bb.emit(mel(low)), bb.emit(mel(high))
        step = relax.op.divide(relax.op.subtract(high_mel, low_mel), _f64(bands + 2))
        points = relax.op.add(relax.op.multiply(_f64(np.arange(bands + 2)), step), low_mel)
        hz = relax.op.multiply(
            _f64(700.0),
            relax.op.subtract(
                relax.op.exp(relax.op.multiply(points, _f64(math.log(10.0) / 2595.0))), _f64(1.0)
            ),
        )
        edges = bb.emit(
            relax.op.astype(
                relax.op.floor(relax.op.divide(relax.op.multiply(_f64(dft_length + 1), hz), rate)), "int64"
            )
        )
        left, centre, right = (
            bb.emit(relax.op.reshape(relax.op.strided_slice(edges, [0], [k], [k + bands]), [1, bands]))
            for k in (0, 1, 2)
        )
        j = relax.const(np.arange(bins, dtype=np.int64).reshape(bins, 1), "int64")
        one = relax.const(np.asarray(1, np.int64), "int64")
        falling = relax.op.logical_and(
            relax.op.greater(right, centre),
            relax.op.logical_and(relax.op.less_equal(centre, j), relax.op.less(j, right)),
        )
        rising = relax.op.logical_and(
            relax.op.greater(centre, left),
            relax.op.logical_and(relax.op.less_equal(left, j), relax.op.less_equal(j, centre)),
        )
        spike = relax.op.logical_and(relax.op.equal(centre, left), relax.op.equal(j, centre))
        # later writes win in the reference: the falling side over the rising one
        down = relax.op.divide(
            _as_f64(relax.op.subtract(right, j)),
            _as_f64(relax.op.maximum(relax.op.subtract(right, centre), one)),
        )
        up = relax.op.divide(
            _as_f64(relax.op.subtract(j, left)),
            _as_f64(relax.op.maximum(relax.op.subtract(centre, left), one)),
        )
        zero = _f64(0.0)
        weights = relax.op.where(
            falling, down, relax.op.where(rising, up, relax.op.where(spike, _f64(1.0), zero))
        )
        dtype = ONNX_DTYPES.get(int(attr.get("output_datatype", 1)), "float32")
        return relax.op.astype(bb.emit(weights), dtype)


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"MelWeightMatrix": MelWeightMatrix}
