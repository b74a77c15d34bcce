"""The benchmark's models, built with seeded random weights (no downloads):

- ``mlp``: 784-512-512-10 with ReLU, batch 1.
- ``mobilenet``: a MobileNet-v1-style CNN at 224x224 (strided 3x3 stem, depthwise 3x3 +
  pointwise 1x1 blocks with ReLU6, global pool, 1000-way classifier).
- ``transformer``: one encoder block, sequence 128, hidden 256, 4 heads, FFN 1024
  (attention from MatMul/Softmax, LayerNormalization, GELU as Erf).
- ``resnet50``: ResNet-50 v1 at 224x224 (batch norm folded into the convolutions, as
  exporters do for inference).

``flops(model)`` counts multiply-adds of Conv/MatMul/Gemm as 2 FLOPs each.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Graph:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}{self.count}"

    def const(self, array: np.ndarray, kind: str = "w") -> str:
        name = self.name(kind)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def op(self, op_type: str, inputs: list[str], **attrs) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=out, **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1) -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (0.01 * self.rng.standard_normal(cout)).astype(np.float32)
        return self.op(
            "Conv", [x, self.const(w), self.const(b, "b")],
            kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group,
        )  # fmt: skip

    def dense(self, x: str, n_in: int, n_out: int) -> str:
        w = (self.rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        b = (0.01 * self.rng.standard_normal(n_out)).astype(np.float32)
        return self.op("Add", [self.op("MatMul", [x, self.const(w)]), self.const(b, "b")])

    def model(self, name: str, inputs, outputs) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def _info(name: str, shape: list[int]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp() -> onnx.ModelProto:
    g = _Graph(1)
    h = g.op("Relu", [g.dense("x", 784, 512)])
    h = g.op("Relu", [g.dense(h, 512, 512)])
    g.nodes.append(helper.make_node("Identity", [g.dense(h, 512, 10)], ["y"]))
    return g.model("mlp", [_info("x", [1, 784])], [_info("y", [1, 10])])


def mobilenet() -> onnx.ModelProto:
    g = _Graph(2)
    lo, hi = g.const(np.array(0.0, np.float32), "lo"), g.const(np.array(6.0, np.float32), "hi")

    def relu6(x: str) -> str:
        return g.op("Clip", [x, lo, hi])

    h = relu6(g.conv("x", 3, 32, 3, 2))
    channels = 32
    for cout, stride in [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1), (512, 1),
                         (1024, 2), (1024, 1)]:  # fmt: skip
        h = relu6(g.conv(h, channels, channels, 3, stride, group=channels))
        h = relu6(g.conv(h, channels, cout, 1))
        channels = cout
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    g.nodes.append(helper.make_node("Identity", [g.dense(h, 1024, 1000)], ["y"]))
    return g.model("mobilenet", [_info("x", [1, 3, 224, 224])], [_info("y", [1, 1000])])


def transformer(seq: int = 128, hidden: int = 256, heads: int = 4, ffn: int = 1024) -> onnx.ModelProto:
    g = _Graph(3)
    head = hidden // heads

    def split_heads(x: str) -> str:
        shaped = g.op("Reshape", [x, g.const(np.array([seq, heads, head], np.int64), "s")])
        return g.op("Transpose", [shaped], perm=[1, 0, 2])  # [heads, seq, head]

    def layer_norm(x: str) -> str:
        scale = g.const(np.ones(hidden, np.float32), "g")
        bias = g.const(np.zeros(hidden, np.float32), "b")
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-5)

    q, k, v = (split_heads(g.dense("x", hidden, hidden)) for _ in range(3))
    scores = g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 2, 1])])
    scores = g.op("Mul", [scores, g.const(np.array(1.0 / np.sqrt(head), np.float32), "scale")])
    context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    merged = g.op("Reshape", [g.op("Transpose", [context], perm=[1, 0, 2]),
                              g.const(np.array([seq, hidden], np.int64), "s")])  # fmt: skip
    h = layer_norm(g.op("Add", ["x", g.dense(merged, hidden, hidden)]))
    up = g.dense(h, hidden, ffn)
    # GELU(x) = x * (1 + erf(x / sqrt 2)) / 2
    erf = g.op("Erf", [g.op("Mul", [up, g.const(np.array(1 / np.sqrt(2), np.float32), "c")])])
    gelu = g.op("Mul", [g.op("Mul", [up, g.op("Add", [erf, g.const(np.array(1.0, np.float32), "one")])]),
                        g.const(np.array(0.5, np.float32), "half")])  # fmt: skip
    out = layer_norm(g.op("Add", [h, g.dense(gelu, ffn, hidden)]))
    g.nodes.append(helper.make_node("Identity", [out], ["y"]))
    return g.model("transformer", [_info("x", [seq, hidden])], [_info("y", [seq, hidden])])


def resnet50() -> onnx.ModelProto:
    g = _Graph(4)
    h = g.op("Relu", [g.conv("x", 3, 64, 7, 2)])
    h = g.op("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 64
    for width, blocks, stride in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for block in range(blocks):
            s = stride if block == 0 else 1
            out = width * 4
            y = g.op("Relu", [g.conv(h, channels, width, 1)])
            y = g.op("Relu", [g.conv(y, width, width, 3, s)])
            y = g.conv(y, width, out, 1)
            shortcut = g.conv(h, channels, out, 1, s) if block == 0 else h
            h = g.op("Relu", [g.op("Add", [y, shortcut])])
            channels = out
    h = g.op("Flatten", [g.op("GlobalAveragePool", [h])])
    g.nodes.append(helper.make_node("Identity", [g.dense(h, 2048, 1000)], ["y"]))
    return g.model("resnet50", [_info("x", [1, 3, 224, 224])], [_info("y", [1, 1000])])


MODELS = {"mlp": mlp, "mobilenet": mobilenet, "transformer": transformer, "resnet50": resnet50}


def flops(model: onnx.ModelProto) -> int:
    """2 x multiply-adds of Conv, MatMul and Gemm, from ONNX shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    for init in model.graph.initializer:
        shapes[init.name] = list(init.dims)
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            out = shapes[node.output[0]]
            weight = shapes[node.input[1]]
            total += 2 * int(np.prod(out)) * int(np.prod(weight[1:]))
        elif node.op_type in ("MatMul", "Gemm"):
            a, out = shapes[node.input[0]], shapes[node.output[0]]
            total += 2 * int(np.prod(out)) * a[-1]
    return total
