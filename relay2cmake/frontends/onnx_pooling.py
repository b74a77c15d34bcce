"""MaxPool's second output, Indices (TVM's converter returns the values only): per output
element, the flat index into the input of the first maximum of its window, row-major over
(N, C, spatial...) — or, with ``storage_order`` = 1 (2-D only), over (N, C, W, H) — padding
never counted (ONNX's MaxPool)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _static_shape, _theirs
from relay2cmake.frontends.onnx_settled import NODE_OUTPUT_SHAPES

if TYPE_CHECKING:
    from tvm import te

_NONE = (1 << 63) - 1  # no element of the window is the maximum (only NaN windows)


def _begin_pads(attr, spatial: list[int], out: list[int], kernel, strides, dilations) -> list[int]:
    """The padding before each spatial axis, explicit or from ``auto_pad``."""
    mode = _attr_text(attr.get("auto_pad"), "NOTSET")
    if mode in ("SAME_UPPER", "SAME_LOWER"):
        begins = []
        for size, extent, k, s, d in zip(spatial, out, kernel, strides, dilations, strict=True):
            total = max((extent - 1) * s + (k - 1) * d + 1 - size, 0)
            begins.append(total // 2 if mode == "SAME_UPPER" else total - total // 2)
        return begins
    if mode == "VALID":
        return [0] * len(spatial)
    pads = [int(p) for p in attr.get("pads", [0] * 2 * len(spatial))]
    return pads[: len(spatial)]


def _indices_te(
    x: te.Tensor, y: te.Tensor, kernel, strides, dilations, begins, column_major: bool
) -> te.Tensor:
    from tvm import te, tirx

    channels, spatial = int(x.shape[1]), [int(d) for d in x.shape[2:]]
    axes = [te.reduce_axis((0, k), name=f"k{i}") for i, k in enumerate(kernel)]

    def element(n, c, *o):
        positions = [
            o[i].astype("int64") * strides[i] + axes[i].var.astype("int64") * dilations[i] - begins[i]
            for i in range(len(spatial))
        ]
        inside = tirx.const(True, "bool")
        for position, size in zip(positions, spatial, strict=True):
            inside = tirx.And(inside, tirx.And(position >= 0, position < size))
        clamped = [tirx.max(tirx.min(p, size - 1), 0) for p, size in zip(positions, spatial, strict=True)]
        flat = n.astype("int64") * channels + c.astype("int64")
        order = list(reversed(range(len(spatial)))) if column_major else list(range(len(spatial)))
        for i in order:
            flat = flat * spatial[i] + positions[i]
        hit = tirx.And(inside, x(n, c, *clamped) == y(n, c, *o))
        return te.min(tirx.Select(hit, flat, tirx.const(_NONE, "int64")), axis=axes)

    return te.compute(y.shape, element, name="maxpool_indices")


class MaxPool(OnnxOpConverter):
    """Values from TVM's converter; Indices, when the node asks for them, computed here."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        outputs = NODE_OUTPUT_SHAPES.get() or [None]
        values = _theirs("MaxPool", bb, inputs, dict(attr), params)
        if len(outputs) < 2:
            return values
        values = bb.emit(values)
        x = inputs[0]
        spatial, out = _static_shape(x)[2:], _static_shape(values)[2:]
        kernel = [int(k) for k in attr["kernel_shape"]]
        strides = [int(s) for s in attr.get("strides", [1] * len(kernel))]
        dilations = [int(d) for d in attr.get("dilations", [1] * len(kernel))]
        column_major = bool(attr.get("storage_order", 0))
        if column_major and len(spatial) != 2:
            raise NotImplementedError("MaxPool's column-major Indices (storage_order = 1) beyond 2-D")
        begins = _begin_pads(attr, spatial, out, kernel, strides, dilations)
        indices = bb.emit_te(
            _indices_te, x, values, kernel, strides, dilations, begins, column_major,
            primfunc_name_hint="maxpool_indices",
        )  # fmt: skip
        return relax.Tuple([values, indices])


CONVERTERS: dict[str, type[OnnxOpConverter]] = {"MaxPool": MaxPool}
