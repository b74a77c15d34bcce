"""Tied weights are stored once: a word embedding that is also the LM head (GPT-2's
``wte``: Gather rows for the tokens, ``h @ wte^T`` for the logits) reads the LM head's packed
copy, and the package matches ONNX Runtime (gen's self-check builds it and runs its golden
test; a wrong read fails it)."""

from __future__ import annotations

import json

import numpy as np
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper

from relay2cmake.commands.generate import GenerateOptions, generate

VOCABULARY, WIDTH, TOKENS = 50, 24, 8  # 50 words: the packed copy has a padded last block


def _tied_lm(path, transposed_initializer: bool):
    """ids → embedding → tanh(x W) → logits with the embedding's transpose, given as a
    Transpose node (PyTorch's dynamo export) or as its own initializer (constant-folded)."""
    rng = np.random.default_rng(2)
    embedding = rng.standard_normal((VOCABULARY, WIDTH)).astype(np.float32)
    hidden = (rng.standard_normal((WIDTH, WIDTH)) * 0.3).astype(np.float32)
    initializers = [numpy_helper.from_array(embedding, "wte"), numpy_helper.from_array(hidden, "w")]
    nodes = [
        helper.make_node("Gather", ["wte", "ids"], ["x"], axis=0),
        helper.make_node("MatMul", ["x", "w"], ["xw"]),
        helper.make_node("Tanh", ["xw"], ["h"]),
    ]
    if transposed_initializer:
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(embedding.T), "head"))
    else:
        nodes.append(helper.make_node("Transpose", ["wte"], ["head"], perm=[1, 0]))
    nodes.append(helper.make_node("MatMul", ["h", "head"], ["logits"]))
    graph = helper.make_graph(
        nodes,
        "tied",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, TOKENS])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, TOKENS, VOCABULARY])],
        initializers,
    )
    return save_model(graph, path, 13)


def test_a_tied_embedding_is_stored_once(tmp_path):
    for transposed_initializer in (False, True):
        model = _tied_lm(tmp_path / f"tied{int(transposed_initializer)}.onnx", transposed_initializer)
        out = tmp_path / f"pkg{int(transposed_initializer)}"
        report = generate(GenerateOptions(model=model, out=out, name="Tied", targets=("c",)))
        assert not report.warnings, report.warnings  # self-checked against ONNX Runtime

        def packed(rows: int, columns: int) -> int:  # [K, N] packed in blocks of 16 columns
            return rows * -(-columns // 16) * 16 * 4

        # The embedding (50 x 24) is not stored: only the packed head and the hidden layer.
        assert report.plan.weight_bytes == packed(WIDTH, VOCABULARY) + packed(WIDTH, WIDTH)
        assert any("take" in k for k in json.loads((out / "metadata.json").read_text())["kernels"])
