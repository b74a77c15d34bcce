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

    replacements: dict[int, list[onnx.NodeProto]] = {}
    removed: set[int] = set()
    index_of = {id(node): i for i, node in enumerate(graph.node)}
    added: list[onnx.TensorProto] = []
    for node in graph.node:
        fold = _IN_PLACE_FOLDS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if fold is not None:  # DQ -> node -> Q as one operator: (it, the QuantizeLinear) or None
            kept = fold(node, consumers, outputs, dequantized, constants)
            if kept is not None:
                replacements[index_of[id(node)]] = [kept[0]]
                removed.add(index_of[id(kept[1])])
            continue
        if node.op_type not in ("Conv", "MatMul", "Gemm") or node.domain not in ("", "ai.onnx"):
            continue
        x = dequantized(node.input[0], constant=False)
        w = dequantized(node.input[1], constant=True)
        # Both operands computed (attention's Q.K^T and P.V): QLinearMatMul too, per tensor
        # and with a quantized result, as ONNX Runtime runs it (its float product rounds apart).
        computed = w is None and node.op_type == "MatMul"
        if computed:
            w = dequantized(node.input[1], constant=False)
        if x is None or w is None or not per_tensor(x) or not x[2] or not w[2]:
            continue  # (the QLinear operators need both zero points: they carry the types)
        if constants[w[2] if computed else w[0]].dtype not in (np.int8, np.uint8):
            continue
        quantize = _sole_quantize(node, consumers, outputs)
        if computed and (quantize is None or not per_tensor(w)):
            continue
        if quantize is None:
            # A float result (a transformer's projections, whose consumers take float): the
            # product in integers all the same, scaled to float as ONNX Runtime's
            # MatMulIntegerToFloat does; the weights stay 8-bit.
            folded_nodes = _to_float_product(node, x, w, constants, added)
            if folded_nodes:
                replacements[index_of[id(node)]] = folded_nodes
            continue
        y_scale = quantize.input[1]
        y_zero = quantize.input[2] if len(quantize.input) > 2 else ""
        if y_scale not in constants or constants[y_scale].size != 1 or (y_zero and y_zero not in constants):
            continue
        if not y_zero or constants[y_zero].dtype not in (np.int8, np.uint8):
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
        elif node.op_type == "MatMul":
            rank = 2 if computed else constants[w[0]].ndim
            if rank != 2 or (not per_tensor(w) and int(w[3]) % rank != 1):  # per column: axis 1
                continue
            inputs = [x[0], x[1], x[2], w[0], w[1], w[2], y_scale, y_zero]
            folded = helper.make_node("QLinearMatMul", inputs, [quantize.output[0]], name=node.name)
        else:
            gemm_bias = _gemm_bias(node, x, w, constants, dequantized)
            if gemm_bias is None:
                continue
            inputs = [x[0], x[1], x[2], w[0], w[1], w[2], gemm_bias, y_scale, y_zero]
            folded = _qgemm(inputs, quantize.output[0], node)
        replacements[index_of[id(node)]] = [folded]
        removed.add(index_of[id(quantize)])
    if not replacements:
        return model, 0
    result = onnx.ModelProto()
    result.CopyFrom(model)
    nodes = [
        new
        for i, node in enumerate(model.graph.node)
        if i not in removed
        for new in replacements.get(i, [node])
    ]
    del result.graph.node[:]
    result.graph.node.extend(nodes)
    result.graph.initializer.extend(added)
    declared = any(o.domain == MICROSOFT for o in result.opset_import)
    if any(n.domain == MICROSOFT for n in nodes) and not declared:
        result.opset_import.append(helper.make_opsetid(MICROSOFT, 1))
    return result, len(replacements)


MICROSOFT = "com.microsoft"


def _sole_quantize(node, consumers, outputs) -> onnx.NodeProto | None:
    """The QuantizeLinear that is the only consumer of ``node``'s result (not a graph
    output), or None."""
    users = consumers.get(node.output[0], [])
    if node.output[0] in outputs or len(users) != 1 or users[0].op_type != "QuantizeLinear":
        return None
    return users[0]


def _binary_in_integers(node, consumers, outputs, dequantized, constants: _Constants):
    """DequantizeLinear(a), DequantizeLinear(b) -> Add or Mul -> QuantizeLinear, all per
    tensor, is ONNX Runtime's QLinearAdd / QLinearMul (com.microsoft), which ONNX Runtime runs
    in their place, rounding as they do: (the new node, the QuantizeLinear it replaces), or
    None. (Computed from the operators, the result can differ at rounding ties, and the
    dequantized tensors kept TVM's layout conversion from passing: a ResNet's residual adds
    left transposes around them.)"""
    quantize = _sole_quantize(node, consumers, outputs)
    if quantize is None:
        return None
    a = dequantized(node.input[0], constant=False)
    b = dequantized(node.input[1], constant=False)
    if a is None or b is None or len(quantize.input) < 3 or not a[2] or not b[2]:
        return None
    scales = [a[1], a[2], b[1], b[2], quantize.input[1], quantize.input[2]]
    if any(name not in constants or constants[name].size != 1 for name in scales):
        return None
    types = {constants[name].dtype for name in (a[2], b[2], quantize.input[2])}
    if len(types) != 1 or types.pop() not in (np.int8, np.uint8):
        return None
    if any(constants[name].dtype != np.float32 for name in (a[1], b[1], quantize.input[1])):
        return None
    inputs = [a[0], a[1], a[2], b[0], b[1], b[2], quantize.input[1], quantize.input[2]]
    name = "QLinearAdd" if node.op_type == "Add" else "QLinearMul"
    return helper.make_node(name, inputs, [quantize.output[0]], name=node.name, domain=MICROSOFT), quantize


def _unary_as_onnxruntime(node, consumers, outputs, dequantized, constants: _Constants):
    """DequantizeLinear -> AveragePool or Softmax -> QuantizeLinear, per tensor, is ONNX
    Runtime's QLinearAveragePool or QLinearSoftmax (com.microsoft), which it runs in their
    place, and which round apart from the float operator quantized: QLinearAveragePool adds
    the zero point before rounding (``nearbyint(y / scale + zero)``; at the ties a 2x2
    average makes, a DenseNet-121's outputs were 24% one step apart where the zero point is
    odd); QLinearSoftmax is a table-driven kernel of its own (``QLinearSoftmax``: a
    ViT-Tiny's logits, 64% apart). (The new node, the QuantizeLinear it replaces), or None."""
    quantize = _sole_quantize(node, consumers, outputs) if len(node.output) == 1 else None
    x = dequantized(node.input[0], constant=False)
    if quantize is None or x is None or not x[2] or len(quantize.input) < 3:
        return None
    parameters = [x[1], x[2], quantize.input[1], quantize.input[2]]
    if any(name not in constants or constants[name].size != 1 for name in parameters):
        return None
    if constants[x[2]].dtype != constants[quantize.input[2]].dtype or constants[x[2]].dtype not in (
        np.int8,
        np.uint8,
    ):
        return None
    inputs = [x[0], *parameters]
    unary = helper.make_node(
        f"QLinear{node.op_type}", inputs, [quantize.output[0]], name=node.name, domain=MICROSOFT
    )
    unary.attribute.extend(node.attribute)  # (QLinearSoftmax's opset: the model's, at conversion)
    return unary, quantize


def _pooled_in_place(node, consumers, outputs, dequantized, constants: _Constants):
    """DequantizeLinear -> MaxPool -> QuantizeLinear on the same scale and zero point is a
    MaxPool of the 8-bit tensor itself (dequantizing is increasing for a positive scale, and
    requantizing a value it produced gives it back), as ONNX Runtime runs it: (the new
    MaxPool, the QuantizeLinear it replaces), or None."""
    quantize = _sole_quantize(node, consumers, outputs) if len(node.output) == 1 else None
    x = dequantized(node.input[0], constant=False)
    if quantize is None or x is None or not x[2] or len(quantize.input) < 3:
        return None
    scale, zero = quantize.input[1], quantize.input[2]
    if scale not in constants or zero not in constants:
        return None
    same = [(x[1], scale), (x[2], zero)]
    if any(constants[a].size != 1 or constants[a].dtype != constants[b].dtype for a, b in same):
        return None
    if (
        not all(np.array_equal(constants[a], constants[b]) for a, b in same)
        or constants[scale].reshape(()) <= 0
    ):
        return None
    pooled = helper.make_node("MaxPool", [x[0]], [quantize.output[0]], name=node.name)
    pooled.attribute.extend(node.attribute)
    return pooled, quantize


_IN_PLACE_FOLDS = {
    "MaxPool": _pooled_in_place,
    "AveragePool": _unary_as_onnxruntime,
    "Softmax": _unary_as_onnxruntime,
    "Add": _binary_in_integers,
    "Mul": _binary_in_integers,
}


def _gemm_attributes(node: onnx.NodeProto) -> dict[str, float]:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _gemm_weights_fit(node: onnx.NodeProto, w: list[str], constants: _Constants) -> bool:
    """A Gemm that ONNX Runtime's QGemm computes: 2-D weights, A not transposed, beta 1, and
    per-tensor weights or per output column (axis 0 of transposed weights, 1 otherwise)."""
    attributes = _gemm_attributes(node)
    if constants[w[0]].ndim != 2 or attributes.get("transA", 0) or attributes.get("beta", 1.0) != 1.0:
        return False
    per_column = 0 if attributes.get("transB", 0) else 1
    scale, zero = constants[w[1]], constants.get(w[2])
    per_tensor = scale.size == 1 and (zero is None or zero.size == 1)
    return per_tensor or int(w[3]) % 2 == per_column


def _gemm_bias(node, x, w, constants: _Constants, dequantized) -> str | None:
    """The int32 bias input of the QGemm a Gemm with a quantized result becomes ("" without
    one), or None when the Gemm does not fit."""
    if not _gemm_weights_fit(node, w, constants):
        return None
    if len(node.input) < 3 or not node.input[2]:
        return ""
    bias = dequantized(node.input[2], constant=True)
    if bias is None or not _is_product_scale(constants, bias, x[1], w[1]):
        return None
    alpha = float(_gemm_attributes(node).get("alpha", 1.0))
    return bias[0] if alpha == 1.0 else None  # QGemm adds C after alpha: on the product scale only at 1


def _qgemm(inputs: list[str], output: str, node: onnx.NodeProto) -> onnx.NodeProto:
    folded = helper.make_node("QGemm", inputs, [output], name=node.name, domain=MICROSOFT)
    attributes = _gemm_attributes(node)
    folded.attribute.extend(
        [helper.make_attribute("transB", int(attributes.get("transB", 0))),
         helper.make_attribute("alpha", float(attributes.get("alpha", 1.0)))]
    )  # fmt: skip
    return folded


def _to_float_product(node, x, w, constants: _Constants, added: list) -> list[onnx.NodeProto] | None:
    """A MatMul or Gemm of dequantized operands whose float result is used as it is: the
    product in integers with a float result (Gemm: QGemm without an output scale; MatMul:
    MatMulInteger, then times x_scale * w_scale in float32). None when it does not fit."""
    if node.op_type == "Gemm":
        if not _gemm_weights_fit(node, w, constants):
            return None
        bias = node.input[2] if len(node.input) > 2 else ""
        return [_qgemm([x[0], x[1], x[2], w[0], w[1], w[2], bias], node.output[0], node)]
    if node.op_type != "MatMul":
        return None
    weights, scale = constants[w[0]], constants[w[1]]
    if weights.ndim != 2 or (scale.size != 1 and int(w[3]) % 2 != 1) or constants[x[1]].dtype != np.float32:
        return None
    zero = constants.get(w[2])
    if zero is not None and zero.size != 1 and zero.size != weights.shape[1]:
        return None
    product = f"{node.output[0]}_r2c_scale"
    scales = constants[x[1]].astype(np.float32).reshape(()) * scale.astype(np.float32).reshape(-1)
    added.append(numpy_helper.from_array(scales.reshape(scale.shape).astype(np.float32), product))
    accumulated, as_float = f"{node.output[0]}_r2c_int32", f"{node.output[0]}_r2c_float"
    return [
        helper.make_node("MatMulInteger", [x[0], w[0], x[2], w[2]], [accumulated], name=f"{node.name}_int"),
        helper.make_node("Cast", [accumulated], [as_float], to=onnx.TensorProto.FLOAT),
        helper.make_node("Mul", [as_float, product], [node.output[0]], name=node.name),
    ]


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


# The quantized operators with an 8-bit result (ONNX's and ONNX Runtime's com.microsoft ones; QGemm
# without y_scale gives float32), the quantizing steps that give one, and operators that only move it.
QUANTIZED_OPERATORS = frozenset(
    {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool",
     "QLinearAveragePool", "QLinearConcat", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearSoftmax",
     "QLinearWhere"}
)  # fmt: skip
_QUANTIZED_RESULTS = QUANTIZED_OPERATORS | {"QuantizeLinear", "DynamicQuantizeLinear"}
_MOVES = frozenset({"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity"})


def output_quanta(model: onnx.ModelProto, names: list[str]) -> tuple[float | None, ...]:
    """Per graph output, the step of its quantized values, where a quantized operator gives it
    (through reshapes): a DequantizeLinear's scale (the largest, per channel), 1 for an 8-bit
    result; None otherwise. Two correct runtimes can round a quantized value apart at an exact
    tie (ONNX Runtime's vector kernels fuse multiply-adds), so references may differ by one."""
    producers = {out: node for node in model.graph.node for out in node.output}
    constants = {i.name: i for i in model.graph.initializer}
    quanta: list[float | None] = []
    for name in names:
        node = producers.get(name)
        while node is not None and node.op_type in _MOVES:
            node = producers.get(node.input[0])
        quantum: float | None = None
        float_qgemm = (
            node is not None and node.op_type == "QGemm" and (len(node.input) < 8 or not node.input[7])
        )
        if node is not None and node.op_type in _QUANTIZED_RESULTS and not float_qgemm:
            quantum = 1.0
        elif node is not None and node.op_type == "DequantizeLinear" and node.input[1] in constants:
            scale = numpy_helper.to_array(constants[node.input[1]]).astype(np.float64)
            quantum = float(np.max(np.abs(scale))) if scale.size else None
        quanta.append(quantum)
    return tuple(quanta)
