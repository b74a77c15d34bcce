"""Writes relay2cmake/samples/digits.onnx, the model `relay2cmake demo` compiles.

A small digit-classifier-shaped CNN (28x28 grey image → 10 class probabilities) with
seeded random weights: Conv → BatchNorm → ReLU → MaxPool → Conv → ReLU → MaxPool → Flatten
→ Gemm → ReLU → Gemm → Softmax. Rerun this script only to change the sample.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2024)

    def const(name, shape, scale):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [
        const("conv1_w", (8, 1, 3, 3), 0.4),
        const("conv1_b", (8,), 0.1),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(8)).astype(np.float32), "bn_scale"),
        const("bn_bias", (8,), 0.1),
        const("bn_mean", (8,), 0.1),
        numpy_helper.from_array((1 + 0.1 * rng.random(8)).astype(np.float32), "bn_var"),
        const("conv2_w", (16, 8, 3, 3), 0.15),
        const("conv2_b", (16,), 0.1),
        const("fc1_w", (16 * 7 * 7, 64), 0.05),
        const("fc1_b", (64,), 0.1),
        const("fc2_w", (64, 10), 0.2),
        const("fc2_b", (10,), 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node(
            "BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["b1"], name="bn1"
        ),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
        helper.make_node("Flatten", ["p2"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc1_w", "fc1_b"], ["f1"], name="fc1"),
        helper.make_node("Relu", ["f1"], ["r3"], name="relu3"),
        helper.make_node("Gemm", ["r3", "fc2_w", "fc2_b"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "digits",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="relay2cmake")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    target = Path(__file__).resolve().parent.parent / "relay2cmake" / "samples" / "digits.onnx"
    onnx.save(build(), str(target))
    print(f"wrote {target} ({target.stat().st_size} bytes)")
