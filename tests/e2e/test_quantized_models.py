"""Models quantized by ONNX Runtime's own tools compute what ONNX Runtime computes: a small CNN
(convolutions, a residual add, global average pooling, a classifier) with an MLP beside it,
quantized with ``quantize_static`` in QDQ format (per-channel weights) and in QOperator
format (QLinearConv plus the com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm),
and with ``quantize_dynamic`` (DynamicQuantizeLinear, ConvInteger, MatMulInteger).

The quantized outputs (a DequantizeLinear of an 8-bit tensor) must equal ONNX Runtime's in
at least 99% of the elements and never differ by more than one output quantum: ONNX Runtime's
vector kernels fuse multiply-adds, which can move a value that lies exactly on a rounding tie.
Dynamic quantization ends in float arithmetic: within float32 rounding."""

from __future__ import annotations

import glob
import json
import os
import shutil

import numpy as np
import onnx
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import SAMPLE_APPS, WARNINGS, cmake, configure_build, ctest, onnxruntime_reference, run

from relay2cmake.commands.generate import GenerateOptions, generate
from relay2cmake.commands.inspect import inspect_model


def _float_model(path):
    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array((rng.normal(size=shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r1", "w3", "b3"], ["shortcut"], strides=[2, 2]),
        helper.make_node("Add", ["r2", "shortcut"], ["sum"]),
        helper.make_node("GlobalAveragePool", ["sum"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w4", "b4"], ["classes"], transB=1),
        helper.make_node("MatMul", ["features", "m1"], ["h1"]),
        helper.make_node("Add", ["h1", "mb1"], ["h1b"]),
        helper.make_node("Relu", ["h1b"], ["h1r"]),
        helper.make_node("MatMul", ["h1r", "m2"], ["h2"]),
        helper.make_node("Add", ["h2", "mb2"], ["scores"]),
    ]
    weights = [
        weight("w1", [16, 3, 3, 3]), weight("b1", [16]), weight("w2", [32, 16, 3, 3]), weight("b2", [32]),
        weight("w3", [32, 16, 1, 1]), weight("b3", [32]), weight("w4", [10, 32]), weight("b4", [10]),
        weight("m1", [64, 48]), weight("mb1", [48]), weight("m2", [48, 8]), weight("mb2", [8]),
    ]  # fmt: skip
    inputs = [
        helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32]),
        helper.make_tensor_value_info("features", TensorProto.FLOAT, [4, 64]),
    ]
    outputs = [
        helper.make_tensor_value_info("classes", TensorProto.FLOAT, [1, 10]),
        helper.make_tensor_value_info("scores", TensorProto.FLOAT, [4, 8]),
    ]
    return save_model(helper.make_graph(nodes, "cnn_mlp", inputs, outputs, weights), path, 17)


def _inputs(rng) -> dict[str, np.ndarray]:
    return {
        "image": rng.normal(size=(1, 3, 32, 32)).astype(np.float32),
        "features": rng.normal(size=(4, 64)).astype(np.float32),
    }


def _calibration(make_inputs):
    """ONNX Runtime's calibration reader over 8 seeded batches of ``make_inputs(rng)``."""
    from onnxruntime.quantization import CalibrationDataReader

    class Calibration(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.batches = iter([make_inputs(rng) for _ in range(8)])

        def get_next(self):
            return next(self.batches, None)

    return Calibration()


def _quantized(kind: str, work):
    from onnxruntime.quantization import (
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    source = _float_model(work / "float.onnx")
    target = work / f"{kind}.onnx"
    if kind == "dynamic":
        quantize_dynamic(str(source), str(target))
        return target

    quantize_static(
        str(source), str(target), _calibration(_inputs),
        quant_format=QuantFormat.QDQ if kind.startswith("qdq") else QuantFormat.QOperator,
        per_channel=kind.startswith("qdq"), weight_type=QuantType.QInt8,
        activation_type=QuantType.QInt8 if kind == "qdq-int8" else QuantType.QUInt8,
    )  # fmt: skip
    return target


def _output_quanta(model: onnx.ModelProto) -> dict[str, float]:
    """Each output that is a DequantizeLinear of an 8-bit tensor: its scale."""
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    quanta = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in {o.name for o in model.graph.output}:
            quanta[node.output[0]] = float(constants[node.input[1]].reshape(-1).max())
    return quanta


# qdq-int8: int8 activations (ONNX Runtime's default), moved to uint8 for the convolutions
@pytest.mark.parametrize("kind", ["qdq", "qdq-int8", "qoperator", "dynamic"])
def test_quantized_models_match_onnxruntime(kind, tmp_path):

    model_path = _quantized(kind, tmp_path)
    model = onnx.load(str(model_path))
    operators = {(n.domain, n.op_type) for n in model.graph.node}
    expected_ops = {
        "qdq": {("", "QuantizeLinear"), ("", "DequantizeLinear")},
        "qdq-int8": {("", "QuantizeLinear"), ("", "DequantizeLinear")},
        "qoperator": {("", "QLinearConv"), ("com.microsoft", "QLinearAdd"), ("com.microsoft", "QGemm")},
        "dynamic": {("", "DynamicQuantizeLinear"), ("", "MatMulInteger"), ("", "ConvInteger")},
    }[kind]
    assert expected_ops <= operators, f"ONNX Runtime's quantizer wrote {sorted(operators)}"
    report = inspect_model(model_path, {})  # which parts run in integers
    assert {
        "qdq": "QLinearConv",
        "qdq-int8": "QLinearConv",
        "qoperator": "QLinearAdd",
        "dynamic": "ConvInteger",
    }[kind] in report.integer_operators
    assert "Conv" not in report.float_operators, report.float_operators
    generate(GenerateOptions(model=model_path, out=tmp_path / "pkg", name="Quantized"))
    if kind != "dynamic":  # 8-bit weights stay 8-bit (quantize_dynamic keeps this MLP float)
        stored = json.loads((tmp_path / "pkg" / "metadata.json").read_text())["weights_file"]["bytes"]
        floats = sum(
            numpy_helper.to_array(i).size for i in onnx.load(str(tmp_path / "float.onnx")).graph.initializer
        )
        assert stored < 0.35 * 4 * floats, (stored, 4 * floats)
    configure_build(tmp_path / "pkg", tmp_path / "build")
    cli = glob.glob(str(tmp_path / "build" / "quantized_cli"))[0]
    session = onnxruntime_reference(model_path)
    quanta = _output_quanta(model)
    names = [o.name for o in model.graph.output]
    rng = np.random.default_rng(2)
    for trial in range(4):
        inputs = _inputs(rng)
        files = []
        for name, array in inputs.items():
            files.append(tmp_path / f"{trial}_{name}.npy")
            np.save(files[-1], array)
        out = tmp_path / f"out{trial}"
        run([cli, "--output-dir", out, *files])
        for index, (name, want) in enumerate(zip(names, session.run(names, inputs), strict=True)):
            got = np.load(out / f"output_{index}.npy")
            if name in quanta:
                difference = np.abs(got.astype(np.float64) - want)
                assert difference.max() <= quanta[name] * 1.0001, (name, difference.max(), quanta[name])
                assert np.mean(difference == 0) >= 0.99, (name, np.mean(difference == 0))
            else:
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


def _constant(name: str, value, dtype) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def _build_and_compare(
    model_path, tmp_path, name: str, feeds: list[dict[str, np.ndarray]], quanta=None, exact: bool = False
):
    """gen, a CMake build, and each of ``feeds`` through the cli against ONNX Runtime: every
    output element within one quantum (``quanta``: output name -> scale; else exactly equal)
    and 99% equal (``exact``: all)."""
    generate(GenerateOptions(model=model_path, out=tmp_path / "pkg", name=name))
    configure_build(tmp_path / "pkg", tmp_path / "build")
    cli = glob.glob(str(tmp_path / "build" / f"{name.lower()}_cli"))[0]
    session = onnxruntime_reference(model_path)
    names = [o.name for o in session.get_outputs()]
    for trial, inputs in enumerate(feeds):
        files = []
        for input_name, array in inputs.items():
            files.append(tmp_path / f"{trial}_{input_name}.npy")
            np.save(files[-1], array)
        run([cli, "--output-dir", tmp_path / f"out{trial}", *files])
        for index, (output, want) in enumerate(zip(names, session.run(names, inputs), strict=True)):
            got = np.load(tmp_path / f"out{trial}" / f"output_{index}.npy")
            difference = np.abs(got.astype(np.float64) - want.astype(np.float64))
            assert difference.max() <= (quanta or {}).get(output, 0) * 1.0001, (output, difference.max())
            assert np.mean(difference == 0) >= (1.0 if exact else 0.99), (output, np.mean(difference == 0))


def test_qoperator_activations_pools_and_concat_match_onnxruntime(tmp_path):
    """What ONNX Runtime's QOperator quantizer writes for LeakyRelu, Sigmoid, Concat,
    AveragePool and Softmax (com.microsoft QLinearLeakyRelu, QLinearSigmoid, QLinearConcat,
    QLinearAveragePool, QLinearSoftmax; a DenseNet's, an EfficientNet's and a classifier's):
    each dequantized, the float operator, quantized, as ONNX Runtime's kernels compute it."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    rng = np.random.default_rng(0)

    def weight(name, shape):
        return numpy_helper.from_array((rng.normal(size=shape) * 0.3).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["image", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
        helper.make_node("Conv", ["l1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c2"], ["s2"]),
        helper.make_node("Concat", ["l1", "s2"], ["cat"], axis=1),
        helper.make_node("AveragePool", ["cat"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool", "w3", "b3"], ["c3"]),
        helper.make_node("Flatten", ["c3"], ["flat"]),
        helper.make_node("Gemm", ["flat", "w4", "b4"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    weights = [
        weight("w1", [8, 3, 3, 3]), weight("b1", [8]), weight("w2", [8, 8, 3, 3]), weight("b2", [8]),
        weight("w3", [16, 16, 1, 1]), weight("b3", [16]), weight("w4", [10, 1024]), weight("b4", [10]),
    ]  # fmt: skip
    image = helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 10])
    save_model(helper.make_graph(nodes, "qop", [image], [probs], weights), tmp_path / "float.onnx", 17)

    def feeds(generator):
        return {"image": generator.normal(size=(1, 3, 16, 16)).astype(np.float32)}

    quantized = tmp_path / "qop.onnx"
    quantize_static(
        str(tmp_path / "float.onnx"), str(quantized), _calibration(feeds), quant_format=QuantFormat.QOperator,
        weight_type=QuantType.QInt8, activation_type=QuantType.QUInt8,
    )  # fmt: skip
    written = {n.op_type for n in onnx.load(str(quantized)).graph.node}
    ours = {"QLinearLeakyRelu", "QLinearSigmoid", "QLinearConcat", "QLinearAveragePool", "QLinearSoftmax"}
    assert ours <= written, sorted(written)
    assert ours <= set(inspect_model(quantized, {}).integer_operators)
    generator = np.random.default_rng(5)
    _build_and_compare(
        quantized,
        tmp_path,
        "QOp",
        [feeds(generator) for _ in range(4)],
        _output_quanta(onnx.load(str(quantized))),
    )


def test_qdq_average_pool_rounds_as_onnxruntime(tmp_path):
    """DequantizeLinear -> AveragePool -> QuantizeLinear (a DenseNet's transitions) runs in
    ONNX Runtime as its QLinearAveragePool, which adds the zero point before rounding: with an
    odd zero point a 2x2 average's ties (a quarter of the values) land one step from
    QuantizeLinear's rounding, and a quantized DenseNet-121's outputs were 24% one step from
    ONNX Runtime's. Folded the same way, every byte equals ONNX Runtime's."""
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"]),
        helper.make_node("AveragePool", ["f"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QuantizeLinear", ["p", "s", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "average",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 16, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 16, 4, 4])],
        [_constant("s", 0.05, np.float32), _constant("z", 3, np.uint8)],
    )
    x = np.random.default_rng(0).integers(0, 256, (1, 16, 8, 8)).astype(np.uint8)
    _build_and_compare(save_model(graph, tmp_path / "average.onnx"), tmp_path, "QAverage", [{"x": x}])


@pytest.mark.parametrize(
    "scales",
    [
        pytest.param((0.03135893, 162, 0.0166666, 137, 0.01315279, 0), id="resnet50"),
        pytest.param((0.02070417, 121, 0.00016274463, 126, 0.020678964, 122), id="vit_tiny"),
    ],
)
def test_qlinear_add_rounds_ties_as_onnxruntime(scales, tmp_path):
    """ONNX Runtime's QLinearAdd computes fma(a, r_a, fma(b, r_b, k)) on the raw values, with
    k = z_c - fma(r_a, z_a, r_b z_b); with the scales of a ResNet-50's first residual add
    (quantized by ONNX Runtime), a = 137 and b = 216 make 40.5 computed from the centred values
    and 40.500008 fused: ONNX Runtime writes 41. With a ViT-Tiny's, k rounded twice (not
    fused) put 189 + 179 at 190.5, where ONNX Runtime writes 191. Over every pair (a, b), every
    byte equals ONNX Runtime's."""
    node = helper.make_node(
        "QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["c"], domain="com.microsoft"
    )
    names = ("sa", "za", "sb", "zb", "sc", "zc")
    constants = [
        _constant(n, v, np.float32 if n[0] == "s" else np.uint8) for n, v in zip(names, scales, strict=True)
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.UINT8, [256, 256]) for n in ("a", "b")]
    output = helper.make_tensor_value_info("c", TensorProto.UINT8, [256, 256])
    graph = helper.make_graph([node], "add", inputs, [output], constants)
    path = save_model(graph, tmp_path / "add.onnx", 17, {"com.microsoft": 1})
    every = np.arange(256, dtype=np.uint8)  # every pair (a, b)
    feeds = {"a": np.repeat(every[:, None], 256, axis=1), "b": np.repeat(every[None, :], 256, axis=0)}
    _build_and_compare(path, tmp_path, "QAdd", [feeds], exact=True)


def test_quantized_attention_and_softmax_match_onnxruntime(tmp_path):
    """An attention block as ONNX Runtime's quantizer writes it in QDQ format (Q.K^T and P.V
    between two computed 8-bit tensors, the softmax between DequantizeLinear and
    QuantizeLinear), which ONNX Runtime runs as QLinearMatMul and its table-driven
    QLinearSoftmax; and QLinearSoftmax itself, int8 and at opset 12 (rows over every axis from
    ``axis``). Computed in float instead, a ViT-Tiny's first attention had 212 probabilities
    one step off and 64% of its logits apart. Every byte equals ONNX Runtime's."""

    def dequantize(x, scale):
        return helper.make_node("DequantizeLinear", [x, scale, f"{scale}_zero"], [f"{x}_float"])

    def quantize(x, scale, out):
        return helper.make_node("QuantizeLinear", [x, scale, f"{scale}_zero"], [out])

    nodes = [
        quantize("q", "s_q", "q_8"), quantize("k", "s_k", "k_8"), quantize("v", "s_v", "v_8"),
        dequantize("q_8", "s_q"), dequantize("k_8", "s_k"), dequantize("v_8", "s_v"),
        helper.make_node("MatMul", ["q_8_float", "k_8_float"], ["scores"]),
        quantize("scores", "s_scores", "scores_8"), dequantize("scores_8", "s_scores"),
        helper.make_node("Softmax", ["scores_8_float"], ["probs"], axis=-1),
        quantize("probs", "s_probs", "probs_8"), dequantize("probs_8", "s_probs"),
        helper.make_node("MatMul", ["probs_8_float", "v_8_float"], ["attended"]),
        quantize("attended", "s_out", "attended_8"),
        helper.make_node(
            "QLinearSoftmax", ["x", "s_x", "s_x_zero", "s_y", "s_y_zero"], ["y"],
            domain="com.microsoft", opset=12, axis=1,
        ),
    ]  # fmt: skip
    scales = {"s_q": (0.05, 128), "s_k": (0.05, 128), "s_v": (0.04, 128), "s_scores": (0.08, 128)}
    scales |= {"s_probs": (1 / 256, 0), "s_out": (0.03, 128)}
    constants = [_constant(n, s, np.float32) for n, (s, _) in scales.items()]
    constants += [_constant(f"{n}_zero", z, np.uint8) for n, (_, z) in scales.items()]
    constants += [_constant("s_x", 0.07, np.float32), _constant("s_x_zero", 3, np.int8)]
    constants += [_constant("s_y", 1 / 256, np.float32), _constant("s_y_zero", -128, np.int8)]
    shapes = {"q": [1, 2, 48, 16], "k": [1, 2, 16, 48], "v": [1, 2, 48, 16]}
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in shapes.items()]
    inputs.append(helper.make_tensor_value_info("x", TensorProto.INT8, [4, 3, 10]))
    outputs = [
        helper.make_tensor_value_info("attended_8", TensorProto.UINT8, [1, 2, 48, 16]),
        helper.make_tensor_value_info("y", TensorProto.INT8, [4, 3, 10]),
    ]
    graph = helper.make_graph(nodes, "attention", inputs, outputs, constants)
    path = save_model(graph, tmp_path / "attention.onnx", 17, {"com.microsoft": 1})
    rng = np.random.default_rng(0)
    feeds = [
        {
            **{n: rng.normal(0, 2.5, shape).astype(np.float32) for n, shape in shapes.items()},
            "x": rng.integers(-128, 128, (4, 3, 10)).astype(np.int8),
        }
        for _ in range(2)
    ]
    _build_and_compare(path, tmp_path, "QAttention", feeds, exact=True)
    # gen's golden outputs are ONNX Runtime's as a user runs it (QDQ groups as integer
    # kernels), not the float graph as written, whose sums round apart

    golden = tmp_path / "pkg" / "tests" / "golden"
    session = onnxruntime_reference(path)
    names = [i.name for i in session.get_inputs()]
    recorded = {n: np.load(golden / f"input_{i}.npy") for i, n in enumerate(names)}
    for index, want in enumerate(session.run(None, recorded)):
        np.testing.assert_array_equal(np.load(golden / f"expected_{index}.npy"), want)


def test_qlinear_where_matches_onnxruntime(tmp_path):
    """com.microsoft QLinearWhere (ONNX Runtime 1.32's quantizer fails on Where, so written by
    hand): each input dequantized with its own scale and zero point, chosen, quantized to z's;
    broadcasting y; exactly ONNX Runtime's bytes."""
    node = helper.make_node(
        "QLinearWhere", ["cond", "x", "xs", "xz", "y", "ys", "yz", "zs", "zz"], ["z"], domain="com.microsoft"
    )
    constants = [
        _constant("xs", 0.05, np.float32), _constant("xz", 120, np.uint8), _constant("ys", 0.11, np.float32),
        _constant("yz", 30, np.uint8), _constant("zs", 0.07, np.float32), _constant("zz", 128, np.uint8),
    ]  # fmt: skip
    inputs = [
        helper.make_tensor_value_info("cond", TensorProto.BOOL, [4, 64]),
        helper.make_tensor_value_info("x", TensorProto.UINT8, [4, 64]),
        helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 64]),
    ]
    output = helper.make_tensor_value_info("z", TensorProto.UINT8, [4, 64])
    graph = helper.make_graph([node], "where", inputs, [output], constants)
    path = save_model(graph, tmp_path / "where.onnx", 17, {"com.microsoft": 1})
    rng = np.random.default_rng(0)
    feeds = {
        "cond": rng.random((4, 64)) > 0.5,
        "x": rng.integers(0, 256, (4, 64)).astype(np.uint8),
        "y": rng.integers(0, 256, (1, 64)).astype(np.uint8),
    }
    _build_and_compare(path, tmp_path, "QWhere", [feeds])


@pytest.mark.skipif(
    not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64")),
    reason="needs gcc-aarch64-linux-gnu and qemu-user (tools/install_system_deps.sh)",
)
@pytest.mark.parametrize(
    ("target", "instruction"),
    [("aarch64", None), pytest.param("aarch64:cortex-a76", "sdot", marks=pytest.mark.slow),
     ("aarch64:generic+i8mm", "usdot")],
)  # fmt: skip
def test_quantized_cnn_on_aarch64_matches_onnxruntime_under_qemu(target, instruction, tmp_path):
    """The QDQ model's AArch64 objects (the uint8 x int8 convolutions as widened NEON vectors
    on ARMv8.0, with a twin of them in ``sdot`` chosen at run time where the CPU has the dot
    product; ``sdot`` alone where the CPU level has it, ``usdot`` with i8mm): cross-built, its
    golden test and cli under qemu (whose CPU has both), every quantized output element
    within a quantum of ONNX Runtime's (x86) and 99% equal, as on x86; on a Cortex-A53
    (ARMv8.0) the default set's package runs its base set and gives the same outputs."""
    model_path = _quantized("qdq", tmp_path)
    generate(GenerateOptions(model=model_path, out=tmp_path / "pkg", name="QArm", targets=(target,)))
    objects = tmp_path / "pkg" / "objects" / "aarch64"
    twin = objects / "qarm_kernels_wide.o"
    assert twin.exists() == (instruction is None)
    for path, used in [(objects / "qarm_kernels.o", instruction), (twin, "sdot")]:
        if path.exists():
            disassembly = run([shutil.which("aarch64-linux-gnu-objdump"), "-d", path]).stdout
            for dot in ("sdot", "usdot"):
                assert (f"\t{dot}\t" in disassembly) == (dot == used), (path.name, dot)
    build = tmp_path / "build"
    toolchain = SAMPLE_APPS / "cross" / "aarch64-linux-gnu.cmake"
    configure_build(
        tmp_path / "pkg", build, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", f"-DCMAKE_C_FLAGS={WARNINGS}"
    )
    run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    inputs = _inputs(np.random.default_rng(3))
    files = []
    for name, array in inputs.items():
        files.append(tmp_path / f"{name}.npy")
        np.save(files[-1], array)
    ran = run([shutil.which("qemu-aarch64"), "-L", "/usr/aarch64-linux-gnu", build / "qarm_cli", "--threads",
               "2", "--bench", "1", "--output-dir", tmp_path / "out", *files]).stdout  # fmt: skip
    assert f"kernels {target if instruction else 'aarch64:generic+dotprod'}\n" in ran, ran
    qemu = [shutil.which("qemu-aarch64"), "-cpu", "cortex-a53", "-L", "/usr/aarch64-linux-gnu"]
    older = run(
        [*qemu, build / "qarm_cli", "--bench", "1", "--output-dir", tmp_path / "older", *files], check=False
    )
    if instruction:  # on a CPU without it (Cortex-A53: ARMv8.0): an error, not SIGILL
        assert older.returncode != 0 and "lacks the instructions" in older.stderr, older
    else:  # the base set, with the twin's outputs
        assert older.returncode == 0 and "kernels aarch64:generic\n" in older.stdout, older
        for produced in sorted((tmp_path / "out").glob("*.npy")):
            assert np.array_equal(np.load(produced), np.load(tmp_path / "older" / produced.name)), produced
    model = onnx.load(str(model_path))
    session = onnxruntime_reference(model_path)
    names = [o.name for o in model.graph.output]
    quanta = _output_quanta(model)
    for index, (name, want) in enumerate(zip(names, session.run(names, inputs), strict=True)):
        got = np.load(tmp_path / "out" / f"output_{index}.npy")
        difference = np.abs(got.astype(np.float64) - want)
        assert difference.max() <= quanta[name] * 1.0001, (name, difference.max())
        assert np.mean(difference == 0) >= 0.99, (name, np.mean(difference == 0))


def test_quantized_cnn_with_avx_vnni_matches_onnxruntime(tmp_path):
    """An x86-64-v3 set with AVX-VNNI (Intel's client CPUs since Alder Lake, which lack
    AVX-512): its integer convolutions are VEX ``vpdpbusd`` on 8 lanes (not ``vpmaddwd``),
    every output within a quantum of ONNX Runtime's and 99% equal; a CPU without AVX-VNNI
    gets an error from the context, not SIGILL (checked through CPUID: Clang 14's
    ``__builtin_cpu_supports`` has no name for it)."""
    model_path = _quantized("qdq", tmp_path)
    target = "x86_64:x86-64-v3+avxvnni"
    generate(GenerateOptions(model=model_path, out=tmp_path / "pkg", name="QVnni", targets=(target,)))
    objects = tmp_path / "pkg" / "objects" / "x86_64" / "qvnni_kernels.o"
    disassembly = run(["objdump", "-d", objects]).stdout
    assert "{vex} vpdpbusd" in " ".join(disassembly.split()) and "vpmaddwd" not in disassembly
    assert "zmm" not in disassembly  # 256-bit vectors only
    configure_build(tmp_path / "pkg", tmp_path / "build")
    cli = tmp_path / "build" / "qvnni_cli"
    inputs = _inputs(np.random.default_rng(4))
    files = []
    for name, array in inputs.items():
        files.append(tmp_path / f"{name}.npy")
        np.save(files[-1], array)
    host_has_it = "avx_vnni" in open("/proc/cpuinfo").read().split()
    ran = run([cli, "--bench", "1", "--output-dir", tmp_path / "out", *files], check=False)
    if not host_has_it:
        assert ran.returncode != 0 and "lacks the instructions" in ran.stderr, ran
        pytest.skip("this CPU has no AVX-VNNI: only the refusal was checked")
    assert ran.returncode == 0 and f"kernels {target}\n" in ran.stdout, ran
    model = onnx.load(str(model_path))
    session = onnxruntime_reference(model_path)
    names = [o.name for o in model.graph.output]
    quanta = _output_quanta(model)
    for index, (name, want) in enumerate(zip(names, session.run(names, inputs), strict=True)):
        difference = np.abs(np.load(tmp_path / "out" / f"output_{index}.npy").astype(np.float64) - want)
        assert difference.max() <= quanta[name] * 1.0001, (name, difference.max())
        assert np.mean(difference == 0) >= 0.99, (name, np.mean(difference == 0))
    if shutil.which("qemu-x86_64"):  # a CPU with AVX2 but without AVX-VNNI
        haswell = [shutil.which("qemu-x86_64"), "-cpu", "Haswell"]
        older = run([*haswell, cli, "--output-dir", tmp_path / "o", *files], check=False)
        assert older.returncode != 0 and "lacks the instructions" in older.stderr, older


@pytest.mark.skipif(not shutil.which("arm-none-eabi-gcc"), reason="needs gcc-arm-none-eabi")
def test_quantized_cnn_links_into_cortex_m4f_firmware_with_8_bit_weights(tmp_path):
    """The QDQ model in the bare-metal firmware sample (portable C kernels, MinSizeRel): it
    links, its weights take the flash as 8-bit values (the image's text holds the weights
    file's bytes plus code), and the report gives flash and RAM."""
    model_path = _quantized("qdq", tmp_path)
    package = tmp_path / "pkg"
    generate(GenerateOptions(model=model_path, out=package, name="QFirm", self_check=False))
    build = tmp_path / "build"
    env = dict(os.environ, CFLAGS=WARNINGS)
    toolchain = SAMPLE_APPS / "cross" / "cortex-m4f.cmake"
    configure = [cmake(), "-S", SAMPLE_APPS / "firmware", "-B", build, "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=MinSizeRel", f"-DCMAKE_TOOLCHAIN_FILE={toolchain}",
                 f"-DMODEL_PACKAGE_DIR={package}", "-DMODEL_PREFIX=qfirm"]  # fmt: skip
    run(configure, env=env)
    run([cmake(), "--build", build], env=env)
    sizes = run(["arm-none-eabi-size", build / "firmware.elf"]).stdout.splitlines()[1].split()
    text, data, bss = (int(v) for v in sizes[:3])
    metadata = json.loads((package / "metadata.json").read_text())
    weights = metadata["memory"]["weight_bytes"]
    floats = sum(
        numpy_helper.to_array(i).nbytes for i in onnx.load(str(tmp_path / "float.onnx")).graph.initializer
    )
    assert weights < 0.35 * floats, (weights, floats)
    assert weights < text < weights + 96 * 1024, f"code besides the weights: {text - weights} bytes"
    print(
        f"int8 firmware: flash {text + data} B (weights {weights} B; float32 {floats} B), RAM {data + bss} B"
    )


def test_per_channel_quantization_in_an_old_opset_says_how_to_fix_it(tmp_path):
    """ONNX Runtime's quantizer writes per-channel DequantizeLinear (an ``axis``) into opset-11
    models, which ONNX defines from opset 13 only: the error says what to do."""
    from relay2cmake.errors import ModelError

    weights = numpy_helper.from_array(np.ones((4, 3), np.int8), "w")
    scales = numpy_helper.from_array(np.full(4, 0.1, np.float32), "s")
    node = helper.make_node("DequantizeLinear", ["w", "s"], ["y"], axis=0)
    graph = helper.make_graph(
        [node], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], [weights, scales]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    onnx.save(model, str(tmp_path / "old.onnx"))
    with pytest.raises(ModelError, match="convert_version"):
        generate(GenerateOptions(model=tmp_path / "old.onnx", out=tmp_path / "pkg", name="Old"))
