"""QDQ models (QuantizeLinear/DequantizeLinear around float operators, as ONNX Runtime's
``quantize_static(..., quant_format=QDQ)`` writes them) folded into integer operators, as
ONNX Runtime itself runs them: a Conv or MatMul whose data input is dequantized, whose weights
are dequantized 8-bit constants, whose bias (Conv) is a dequantized int32 constant on the
scale x_scale * w_scale, and whose only consumer quantizes the result becomes QLinearConv or
QLinearMatMul on the 8-bit tensors. The weights then stay 8-bit in the package and the product
runs in integers (onnx_quantized). Anything else keeps its float form, which computes the same
values up to the last rounding."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper


def integer_operators(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """``model`` with the QDQ patterns above folded (a copy when any is), and how many."""
    graph = model.graph
    if not any(n.op_type == "DequantizeLinear" for n in graph.node):
        return model, 0
    constants = _Constants(graph)
    producers = {out: node for node in graph.node for out in node.output}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.output}

    def dequantized(name: str, constant: bool) -> list[str] | None:
        """The DequantizeLinear inputs (value, scale, zero point) behind ``name``."""
        node = producers.get(name)
        if node is None or node.op_type != "DequantizeLinear" or node.domain not in ("", "ai.onnx"):
            return None
        value, scale = node.input[0], node.input[1]
        zero = node.input[2] if len(node.input) > 2 else ""
        if scale not in constants or (zero and zero not in constants):
            return None
        if constant and value not in constants:
            return None
        if any(a.name == "block_size" and a.i for a in node.attribute):
            return None
        return [value, scale, zero, str(_axis(node))]

    def per_tensor(parts: list[str]) -> bool:
        return constants[parts[1]].size == 1 and (not parts[2] or constants[parts[2]].size == 1)

    replacements: dict[int, onnx.NodeProto] = {}
    removed: set[int] = set()
    index_of = {id(node): i for i, node in enumerate(graph.node)}
    for node in graph.node:
        if node.op_type not in ("Conv", "MatMul") or node.domain not in ("", "ai.onnx"):
            continue
        users = consumers.get(node.output[0], [])
        if node.output[0] in outputs or len(users) != 1 or users[0].op_type != "QuantizeLinear":
            continue
        quantize = users[0]
        y_scale = quantize.input[1]
        y_zero = quantize.input[2] if len(quantize.input) > 2 else ""
        if y_scale not in constants or constants[y_scale].size != 1 or (y_zero and y_zero not in constants):
            continue
        if not y_zero or constants[y_zero].dtype not in (np.int8, np.uint8):
            continue
        x = dequantized(node.input[0], constant=False)
        w = dequantized(node.input[1], constant=True)
        if x is None or w is None or not per_tensor(x) or not x[2] or not w[2]:
            continue  # (the QLinear operators need both zero points: they carry the types)
        if constants[w[0]].dtype not in (np.int8, np.uint8):
            continue
        if node.op_type == "Conv":
            if not per_tensor(w) and int(w[3]) != 0:  # per output channel: axis 0
                continue
            inputs = [x[0], x[1], x[2], w[0], w[1], w[2], y_scale, y_zero]
            if len(node.input) > 2 and node.input[2]:
                bias = dequantized(node.input[2], constant=True)
                if bias is None or not _is_product_scale(constants, bias, x[1], w[1]):
                    continue
                inputs.append(bias[0])
            folded = helper.make_node("QLinearConv", inputs, [quantize.output[0]], name=node.name)
            folded.attribute.extend(node.attribute)
        else:
            rank = constants[w[0]].ndim
            if rank != 2 or (not per_tensor(w) and int(w[3]) % rank != 1):  # per column: axis 1
                continue
            inputs = [x[0], x[1], x[2], w[0], w[1], w[2], y_scale, y_zero]
            folded = helper.make_node("QLinearMatMul", inputs, [quantize.output[0]], name=node.name)
        replacements[index_of[id(node)]] = folded
        removed.add(index_of[id(quantize)])
    if not replacements:
        return model, 0
    result = onnx.ModelProto()
    result.CopyFrom(model)
    nodes = [replacements.get(i, node) for i, node in enumerate(model.graph.node) if i not in removed]
    del result.graph.node[:]
    result.graph.node.extend(nodes)
    return result, len(replacements)


class _Constants:
    """The initializers' values, read when first asked for (weights are not all copied);
    one stored outside the model file counts as not constant."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self._protos = {i.name: i for i in graph.initializer}
        self._values: dict[str, np.ndarray] = {}

    def __contains__(self, name: object) -> bool:
        proto = self._protos.get(name) if isinstance(name, str) else None
        return proto is not None and proto.data_location != onnx.TensorProto.EXTERNAL

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self._values:
            if name not in self:
                raise KeyError(name)
            self._values[name] = numpy_helper.to_array(self._protos[name])
        return self._values[name]

    def get(self, name: str) -> np.ndarray | None:
        return self[name] if name in self else None


def _axis(node: onnx.NodeProto) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 1)


def _is_product_scale(constants: _Constants, bias: list[str], x_scale: str, w_scale: str) -> bool:
    """An int32 bias, zero point 0, on the scale x_scale * w_scale (as ONNX Runtime writes it)."""
    value, scale, zero = constants[bias[0]], constants[bias[1]], constants.get(bias[2]) if bias[2] else None
    if value.dtype != np.int32 or (zero is not None and np.any(zero)):
        return False
    product = (constants[x_scale].astype(np.float32) * constants[w_scale].astype(np.float32)).reshape(-1)
    scale = scale.astype(np.float32).reshape(-1)
    if scale.size != product.size and product.size != 1:
        return False
    return bool(np.allclose(scale, product, rtol=1e-6, atol=0))
