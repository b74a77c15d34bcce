"""Small ONNX models built in code, one per behaviour the generator must handle.

Each builder returns an ``onnx.ModelProto``; weights come from a seeded generator so the
models (and the packages generated from them) are the same on every run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _const(name: str, array: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(array, name)


def _model(graph: onnx.GraphProto, opset: int = OPSET) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= OPSET else 9
    onnx.checker.check_model(model, full_check=True)
    return model


def save_model(graph: onnx.GraphProto, path, opset: int = 13, domains: dict[str, int] | None = None):
    """``graph`` as a model file at ``path`` (IR version 8, not checked: tests build hostile and
    old-style graphs on purpose), importing ``domains`` (name: version) too; returns ``path``."""
    opsets = [
        helper.make_opsetid("", opset),
        *(helper.make_opsetid(d, v) for d, v in (domains or {}).items()),
    ]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _float_info(name: str, shape: list[int | str]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def mlp() -> onnx.ModelProto:
    """784-128-64-10 perceptron with ReLU and softmax."""
    rng = _rng(1)
    sizes = [784, 128, 64, 10]
    nodes, inits = [], []
    previous = "image"
    for layer, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        w, b = f"w{layer}", f"b{layer}"
        inits.append(_const(w, (rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)).astype(np.float32)))
        inits.append(_const(b, rng.standard_normal(fan_out).astype(np.float32) * 0.1))
        nodes.append(helper.make_node("Gemm", [previous, w, b], [f"dense{layer}"], name=f"dense{layer}"))
        previous = f"dense{layer}"
        if layer < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [previous], [f"relu{layer}"], name=f"relu{layer}"))
            previous = f"relu{layer}"
    nodes.append(helper.make_node("Softmax", [previous], ["probabilities"], axis=-1, name="softmax"))
    graph = helper.make_graph(
        nodes, "mlp", [_float_info("image", [1, 784])], [_float_info("probabilities", [1, 10])], inits
    )
    return _model(graph)


def cnn() -> onnx.ModelProto:
    """Conv → BatchNorm → ReLU → MaxPool → Conv → ReLU → GlobalAveragePool → Gemm → Softmax."""
    rng = _rng(2)
    inits = [
        _const("conv1_w", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)),
        _const("conv1_b", (rng.standard_normal(8) * 0.1).astype(np.float32)),
        _const("bn_scale", (1.0 + 0.1 * rng.standard_normal(8)).astype(np.float32)),
        _const("bn_bias", (0.1 * rng.standard_normal(8)).astype(np.float32)),
        _const("bn_mean", (0.1 * rng.standard_normal(8)).astype(np.float32)),
        _const("bn_var", (1.0 + 0.1 * rng.random(8)).astype(np.float32)),
        _const("conv2_w", (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32)),
        _const("fc_w", (rng.standard_normal((16, 5)) * 0.3).astype(np.float32)),
        _const("fc_b", (rng.standard_normal(5) * 0.1).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Conv", ["pixels", "conv1_w", "conv1_b"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node(
            "BatchNormalization", ["c1", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn1"
        ),
        helper.make_node("Relu", ["bn"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "conv2_w"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["scores"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [_float_info("pixels", [1, 3, 32, 32])], [_float_info("scores", [1, 5])], inits
    )
    return _model(graph)


def multi_io() -> onnx.ModelProto:
    """Two inputs of different dtypes, three outputs of different shapes."""
    rng = _rng(3)
    inits = [_const("proj", rng.standard_normal((6, 4)).astype(np.float32))]
    nodes = [
        helper.make_node("MatMul", ["features", "proj"], ["projected"], name="project"),
        helper.make_node("Cast", ["offsets"], ["offsets_f"], to=TensorProto.FLOAT, name="cast"),
        helper.make_node("Add", ["projected", "offsets_f"], ["shifted"], name="shift"),
        helper.make_node("Tanh", ["shifted"], ["activation"], name="tanh"),
        helper.make_node("ReduceSum", ["activation"], ["total"], keepdims=0, name="sum"),
        helper.make_node("Mul", ["offsets", "offsets"], ["offsets_squared"], name="square"),
    ]
    graph = helper.make_graph(
        nodes,
        "multi_io",
        [
            _float_info("features", [3, 6]),
            helper.make_tensor_value_info("offsets", TensorProto.INT32, [3, 4]),
        ],
        [
            _float_info("activation", [3, 4]),
            _float_info("total", []),
            helper.make_tensor_value_info("offsets_squared", TensorProto.INT32, [3, 4]),
        ],
        inits,
    )
    return _model(graph)


def reshape_view_output() -> onnx.ModelProto:
    """One output is a reshape (a view, no kernel) of an intermediate that is also used later."""
    rng = _rng(4)
    inits = [
        _const("w", rng.standard_normal((4, 6)).astype(np.float32)),
        _const("flat_shape", np.array([2, 3, 4], dtype=np.int64)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["hidden"], name="matmul"),
        helper.make_node("Relu", ["hidden"], ["hidden_relu"], name="relu"),
        helper.make_node("Reshape", ["hidden_relu", "flat_shape"], ["reshaped"], name="reshape"),
        helper.make_node("Sigmoid", ["hidden_relu"], ["gate"], name="sigmoid"),
    ]
    graph = helper.make_graph(
        nodes,
        "reshape_view",
        [_float_info("x", [4, 4])],
        [_float_info("reshaped", [2, 3, 4]), _float_info("gate", [4, 6])],
        inits,
    )
    return _model(graph)


def passthrough_and_constant() -> onnx.ModelProto:
    """An output that is an input passed straight through, and an output that is a constant."""
    rng = _rng(5)
    table = rng.standard_normal((2, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Identity", ["x"], ["echo"], name="echo"),
        helper.make_node("Exp", ["x"], ["exp_x"], name="exp"),
        helper.make_node("Constant", [], ["table"], value=_const("table_value", table), name="table"),
    ]
    graph = helper.make_graph(
        nodes,
        "passthrough",
        [_float_info("x", [2, 5])],
        [_float_info("echo", [2, 5]), _float_info("exp_x", [2, 5]), _float_info("table", [2, 3])],
    )
    return _model(graph)


def awkward_names() -> onnx.ModelProto:
    """Tensor names that are not C identifiers, and two that sanitise to the same one."""
    nodes = [
        helper.make_node("Add", ["input:0", "1"], ["a.b"], name="add"),
        helper.make_node("Sub", ["input:0", "1"], ["a_b"], name="sub"),
        helper.make_node("Mul", ["a.b", "a_b"], ["float"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "awkward",
        [_float_info("input:0", [2, 3]), _float_info("1", [2, 3])],
        [_float_info("a.b", [2, 3]), _float_info("a_b", [2, 3]), _float_info("float", [2, 3])],
    )
    return _model(graph)


def symbolic_batch() -> onnx.ModelProto:
    """A dense layer whose batch dimension is symbolic (``N``)."""
    rng = _rng(6)
    inits = [
        _const("w", rng.standard_normal((5, 3)).astype(np.float32)),
        _const("b", rng.standard_normal(3).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "w", "b"], ["y0"], name="dense"),
        helper.make_node("Relu", ["y0"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "symbolic", [_float_info("x", ["N", 5])], [_float_info("y", ["N", 3])], inits
    )
    return _model(graph)


def all_dtypes() -> onnx.ModelProto:
    """One input and output of every dtype the C API carries, plus a cast and a comparison."""
    types = {
        "f16": TensorProto.FLOAT16,
        "f64": TensorProto.DOUBLE,
        "i8": TensorProto.INT8,
        "u8": TensorProto.UINT8,
        "i16": TensorProto.INT16,
        "i32": TensorProto.INT32,
        "i64": TensorProto.INT64,
    }
    nodes, inputs, outputs = [], [], []
    for key, elem in types.items():
        inputs.append(helper.make_tensor_value_info(f"x_{key}", elem, [2, 3]))
        nodes.append(helper.make_node("Add", [f"x_{key}", f"x_{key}"], [f"twice_{key}"], name=f"add_{key}"))
        outputs.append(helper.make_tensor_value_info(f"twice_{key}", elem, [2, 3]))
    inputs.append(helper.make_tensor_value_info("flags", TensorProto.BOOL, [2, 3]))
    nodes += [
        helper.make_node("Not", ["flags"], ["not_flags"], name="not"),
        helper.make_node("Cast", ["x_f64"], ["x_f64_as_f16"], to=TensorProto.FLOAT16, name="cast_f16"),
        helper.make_node("Greater", ["x_f16", "x_f64_as_f16"], ["f16_greater"], name="greater"),
        helper.make_node("Cast", ["x_i8"], ["i8_as_f32"], to=TensorProto.FLOAT, name="cast_f32"),
    ]
    outputs += [
        helper.make_tensor_value_info("not_flags", TensorProto.BOOL, [2, 3]),
        helper.make_tensor_value_info("f16_greater", TensorProto.BOOL, [2, 3]),
        helper.make_tensor_value_info("i8_as_f32", TensorProto.FLOAT, [2, 3]),
    ]
    graph = helper.make_graph(nodes, "all_dtypes", inputs, outputs)
    return _model(graph)


def shape_arithmetic() -> onnx.ModelProto:
    """What exporters emit for a dynamic batch: the target shape of a Reshape computed from
    Shape → Gather → Unsqueeze → Concat, plus axes given as an initializer."""
    rng = _rng(8)
    inits = [
        _const("w", rng.standard_normal((12, 4)).astype(np.float32)),
        _const("zero", np.array(0, dtype=np.int64)),
        _const("minus_one", np.array([-1], dtype=np.int64)),
        _const("axes", np.array([0], dtype=np.int64)),
        _const("sum_axes", np.array([2], dtype=np.int64)),
    ]
    nodes = [
        helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
        helper.make_node("Gather", ["x_shape", "zero"], ["batch"], axis=0, name="batch"),
        helper.make_node("Unsqueeze", ["batch", "axes"], ["batch_1d"], name="batch_1d"),
        helper.make_node("Concat", ["batch_1d", "minus_one"], ["flat_shape"], axis=0, name="flat_shape"),
        helper.make_node("ReduceSum", ["x", "sum_axes"], ["summed"], keepdims=1, name="sum"),
        helper.make_node("Reshape", ["summed", "flat_shape"], ["flat"], name="flatten"),
        helper.make_node("MatMul", ["flat", "w"], ["y"], name="dense"),
    ]
    graph = helper.make_graph(
        nodes, "shape_arithmetic", [_float_info("x", ["N", 3, 5, 4])], [_float_info("y", ["N", 4])], inits
    )
    return _model(graph)


def recurrent() -> onnx.ModelProto:
    """A bidirectional LSTM then a GRU over its output: converters TVM 0.27 lacks."""
    rng = _rng(9)
    seq, batch, features, hidden = 5, 2, 6, 4
    inits = [
        _const("lstm_w", (rng.standard_normal((2, 4 * hidden, features)) * 0.4).astype(np.float32)),
        _const("lstm_r", (rng.standard_normal((2, 4 * hidden, hidden)) * 0.4).astype(np.float32)),
        _const("lstm_b", (rng.standard_normal((2, 8 * hidden)) * 0.1).astype(np.float32)),
        _const("gru_w", (rng.standard_normal((1, 3 * hidden, 2 * hidden)) * 0.4).astype(np.float32)),
        _const("gru_r", (rng.standard_normal((1, 3 * hidden, hidden)) * 0.4).astype(np.float32)),
        _const("merged_shape", np.array([seq, batch, 2 * hidden], dtype=np.int64)),
    ]
    nodes = [
        helper.make_node(
            "LSTM", ["x", "lstm_w", "lstm_r", "lstm_b"], ["lstm_y", "lstm_h", "lstm_c"],
            hidden_size=hidden, direction="bidirectional", name="lstm",
        ),
        helper.make_node("Transpose", ["lstm_y"], ["lstm_t"], perm=[0, 2, 1, 3], name="to_seq_batch"),
        helper.make_node("Reshape", ["lstm_t", "merged_shape"], ["merged"], name="merge_directions"),
        helper.make_node(
            "GRU", ["merged", "gru_w", "gru_r"], ["gru_y", "gru_h"],
            hidden_size=hidden, linear_before_reset=1,
            name="gru",
        ),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "recurrent",
        [_float_info("x", [seq, batch, features])],
        [_float_info("gru_y", [seq, 1, batch, hidden]), _float_info("lstm_c", [2, batch, hidden])],
        inits,
    )
    return _model(graph)


def runtime_axes(declared: bool = True) -> onnx.ModelProto:
    """ReduceSum whose axes arrive as a graph input. With its output shape declared the
    package checks the axes at run time; without, it needs --constant-input to compile."""
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0, name="sum")]
    output = _float_info("y", [2, 4] if declared else ["rows", "columns"])
    graph = helper.make_graph(
        nodes,
        "runtime_axes",
        [_float_info("x", [2, 3, 4]), helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
        [output],
    )
    return _model(graph)


def unsupported_ops() -> onnx.ModelProto:
    """Valid ONNX using operators that nothing converts (RandomNormalLike, RandomUniformLike,
    Multinomial: a static package has no random source), and
    Celu, which nothing converts either but ONNX defines as a function (its body is used)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="fine"),
        helper.make_node("Celu", ["r"], ["s"], name="smooth_step"),
        helper.make_node("RandomNormalLike", ["s"], ["c"], name="jitter"),
        helper.make_node("RandomUniformLike", ["c"], ["d"], name="noise"),
        helper.make_node("Multinomial", ["x"], ["p"], name="draw", sample_size=1),
    ]
    graph = helper.make_graph(
        nodes,
        "unsupported",
        [_float_info("x", [3, 3])],
        [_float_info("d", [3, 3]), helper.make_tensor_value_info("p", TensorProto.INT32, [3, 1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 26)])
    model.ir_version = 10
    return model


def runtime_if() -> onnx.ModelProto:
    """An If on a condition computed from the data, with multi-node branches and two outputs."""
    then_graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["t_relu"]),
            helper.make_node("Add", ["t_relu", "x"], ["t_out"]),
            helper.make_node("Identity", ["x"], ["t_second"]),
        ],
        "then",
        [],
        [_float_info("t_out", [2, 3]), _float_info("t_second", [2, 3])],
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("Sigmoid", ["x"], ["e_out"]),
            helper.make_node("Neg", ["x"], ["e_second"]),
        ],
        "else",
        [],
        [_float_info("e_out", [2, 3]), _float_info("e_second", [2, 3])],
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0, name="total"),
        helper.make_node("Greater", ["total", "zero"], ["cond"], name="positive"),
        helper.make_node(
            "If", ["cond"], ["y", "z"], then_branch=then_graph, else_branch=else_graph, name="branch"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "runtime_if",
        [_float_info("x", [2, 3])],
        [_float_info("y", [2, 3]), _float_info("z", [2, 3])],
        initializer=[_const("zero", np.array(0.0, dtype=np.float32))],
    )
    return _model(graph)


def raw_bit_dtypes() -> onnx.ModelProto:
    """bfloat16 and float8 tensors at the API: computed in float32 inside."""
    nodes = [
        helper.make_node("Cast", ["x"], ["x_float"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["x_float", "x_float"], ["square0"]),
        helper.make_node("Add", ["square0", "quarter"], ["square"]),  # keeps float8 out of subnormals
        helper.make_node("Cast", ["square"], ["y"], to=TensorProto.BFLOAT16),
        helper.make_node("Cast", ["square"], ["z"], to=TensorProto.FLOAT8E4M3FN),
    ]
    graph = helper.make_graph(
        nodes,
        "raw_bit_dtypes",
        [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 4])],
        [
            helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 4]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT8E4M3FN, [2, 4]),
        ],
        initializer=[_const("quarter", np.array(0.25, dtype=np.float32))],
    )
    return _model(graph, opset=21)  # float8 Cast needs opset 19


def sub_byte_dtypes() -> onnx.ModelProto:
    """int4, uint4, int2 and float4 tensors at the API (odd element counts: the last byte is
    half used) and an int4 weight dequantized per column inside."""
    rng = _rng(21)
    weight = rng.integers(-8, 8, (5, 3)).astype(np.float32).astype(ml_dtypes.int4)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["x_float"]),
        helper.make_node("Add", ["x_float", "f"], ["sum"]),
        helper.make_node("QuantizeLinear", ["sum", "q_scale", "q_zero"], ["q"]),
        helper.make_node("Cast", ["sum"], ["half"], to=TensorProto.FLOAT4E2M1),
        helper.make_node("Cast", ["x"], ["wrapped"], to=TensorProto.INT2),
        helper.make_node("DequantizeLinear", ["w", "w_scale"], ["w_float"], axis=1),
        helper.make_node("MatMul", ["x_float", "w_float"], ["product"]),
    ]
    graph = helper.make_graph(
        nodes,
        "sub_byte_dtypes",
        [
            helper.make_tensor_value_info("x", TensorProto.INT4, [3, 5]),
            helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 5]),
        ],
        [
            helper.make_tensor_value_info("q", TensorProto.UINT4, [3, 5]),
            helper.make_tensor_value_info("half", TensorProto.FLOAT4E2M1, [3, 5]),
            helper.make_tensor_value_info("wrapped", TensorProto.INT2, [3, 5]),
            helper.make_tensor_value_info("product", TensorProto.FLOAT, [3, 3]),
        ],
        initializer=[
            _const("x_scale", np.array(0.5, np.float32)),
            _const("x_zero", np.array(1, np.float32).astype(ml_dtypes.int4)),
            _const("q_scale", np.array(0.25, np.float32)),
            _const("q_zero", np.array(8, np.float32).astype(ml_dtypes.uint4)),
            _const("w", weight),
            _const("w_scale", np.array([0.5, 0.25, 0.125], np.float32)),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 12  # INT2 and opset 25
    onnx.checker.check_model(model, full_check=True)
    return model


def _conv(name: str, x: str, out: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1):
    """A Conv node with seeded weights and bias (returned as initializers)."""
    rng = _rng(len(name))
    fan_in = cin // group * k * k
    weight = (rng.standard_normal((cout, cin // group, k, k)) / np.sqrt(fan_in)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(cout)).astype(np.float32)
    node = helper.make_node(
        "Conv", [x, f"{name}_w", f"{name}_b"], [out], name=name,
        kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group,
    )  # fmt: skip
    return node, [_const(f"{name}_w", weight), _const(f"{name}_b", bias)]


def conv_family() -> onnx.ModelProto:
    """The convolutions the default schedules target (channels-last), each with a fused epilogue: 3x3
    + relu, strided 3x3 + clip, depthwise 3x3 + relu, 1x1 + residual add, a 3x3 on 14 x 14
    (Winograd, 28 outputs: its product computes 32) + relu, 7-wide 1x1 and 3x3 (too few tiles
    for Winograd), odd widths, 24 and 20 output channels (8- and 4-lane vectors, the packed
    weights' last block padded), 272 on 7 x 7 (17 blocks of 16, computed as 288 and cut), a
    grouped convolution (two groups of 12 channels: 4-lane vectors) and a strided depthwise
    one with two outputs per channel (a depthwise conv of the repeated channels), then a conv
    of two groups of 24 inputs and 32 outputs (a regular conv per group, concatenated).
    Between the 1x1 and the 14 x 14 conv, a squeeze-excite block: its second 1x1 conv (on a 1
    x 1 image) ends in a sigmoid computed once per channel, and the image times those scales
    is a vectorized stage of its kernel."""
    nodes, inits = [], []
    epilogues = {
        "c1": [helper.make_node("Relu", ["c1"], ["r1"])],
        "c2": [helper.make_node("Clip", ["c2", "lo", "hi"], ["r2"])],
        "dw": [helper.make_node("Relu", ["dw"], ["r3"])],
        "pw": [
            helper.make_node("Add", ["pw", "r3"], ["sum"]),
            helper.make_node("GlobalAveragePool", ["sum"], ["se_pool"]),
        ],
        "se1": [helper.make_node("Relu", ["se1"], ["se_r"])],
        "se2": [
            helper.make_node("Sigmoid", ["se2"], ["se_scale"]),
            helper.make_node("Mul", ["sum", "se_scale"], ["excited"]),
        ],
        "w14": [helper.make_node("Relu", ["w14"], ["r14"])],
        "s7": [helper.make_node("Relu", ["s7"], ["r7"])],
        "p7": [helper.make_node("Relu", ["p7"], ["rp7"])],
        "q7": [helper.make_node("Add", ["q7", "r7"], ["sum7"])],
        "odd": [helper.make_node("Relu", ["odd"], ["r_odd"])],
        "g2": [helper.make_node("Relu", ["g2"], ["r_g2"])],
        "dm": [helper.make_node("Relu", ["dm"], ["r_dm"])],
        "sg": [helper.make_node("Relu", ["sg"], ["r_sg"])],
        "few": [helper.make_node("GlobalAveragePool", ["few"], ["y"])],
    }
    for args in [
        ("c1", "x", "c1", 3, 16, 3),
        ("c2", "r1", "c2", 16, 32, 3, 2),
        ("dw", "r2", "dw", 32, 32, 3, 1, 32),
        ("pw", "r3", "pw", 32, 32, 1),
        ("se1", "se_pool", "se1", 32, 8, 1),
        ("se2", "se_r", "se2", 8, 32, 1),
        ("w14", "excited", "w14", 32, 28, 3),
        ("s7", "r14", "s7", 28, 32, 3, 2),
        ("p7", "r7", "p7", 32, 272, 1),
        ("q7", "rp7", "q7", 272, 32, 3),
        ("odd", "sum7", "odd", 32, 24, 3),
        ("g2", "r_odd", "g2", 24, 24, 3, 1, 2),
        ("dm", "r_g2", "dm", 24, 48, 3, 2, 24),
        ("sg", "r_dm", "sg", 48, 64, 3, 1, 2),
        ("few", "r_sg", "few", 64, 20, 3),
    ]:
        node, weights = _conv(*args)
        nodes += [node, *epilogues[args[0]]]
        inits += weights
    inits += [_const("lo", np.array(0.0, np.float32)), _const("hi", np.array(6.0, np.float32))]
    graph = helper.make_graph(
        nodes,
        "conv_family",
        [_float_info("x", [1, 3, 28, 28])],  # widths 28, 14 and 7: every packed tile
        [_float_info("y", [1, 20, 1, 1])],
        initializer=inits,
    )
    return _model(graph)


def awkward_family() -> onnx.ModelProto:
    """Extents the matmul schedule must handle with predicated tiles, and the vectorized math
    forms: M = 13 rows (no row count divides it: full tiles and a predicated last one),
    N = 5003 columns (not even 4 divides it: padded register tiles, only the first N stored)
    with 1.3 MB of weights (column tiles outermost), then sigmoid, tanh and x^3 (fast_math),
    and a second matmul back to N = 37. The same input read as [N, C, W] goes through 1-D
    convolutions (run as 2-D ones of height 1): 13 -> 16 channels with a fused sigmoid, then a
    grouped one with stride 2, dilation 2 and uneven padding. Last, y^T.y: a batched matmul
    whose computed right operand has N = 37 (packed at run time, rows and columns padded),
    and 2-D convolutions on an image 13 pixels wide (computed 14 wide, the last column cut):
    1x1 with bias and hard-swish (a clip: fused, no transposes around it), then 1x3 with
    padding and 22 output channels (computed as 32, cut with the columns). And a dense layer
    under outer dimensions ([1, 2, 26, 16] x [16, 40]: the weights read once for both outer
    indices, rows of 26 in predicated tiles of 4). And a softmax of y^T.y / 6 over rows of 37
    (a division by a constant, computed as a multiplication; rows reduced as their whole 16s
    and a tail). And memory-bound layouts: sigmoid(h) transposed to [1, 5003, 13] times a
    per-row scale (tiles of 8 x 8, both axes uneven), and a 3 x 3 average pooling of x seen as
    13 images of 8 x 8 (channels first, padding not counted) minus x (PoolFormer's token mixer).
    And an LRN across the 32 channels of the hard-swish's output (channels last: a window
    along the innermost axis, vectors shifted by -2..2 channels, the edges padded). And the
    maximum and its index over y's rows of 37 (partial results in vectors, the last one
    predicated; the index's values compared in float64). And x read as a volume [1, 13, 4, 4, 4]
    through 3-D convolutions (run as 2-D ones over every output frame, the kernel's depth taps
    stacked as channels): 3 x 3 x 3 with stride and dilation 2 in depth, then relu, then a
    grouped one (two groups) with a 2 x 1 x 3 kernel and uneven padding. And the hard-swish's
    output upsampled bilinearly 3 x 4 (computed channels-last, returned channels-first: a
    stage in channel vectors, then a tiled transpose). And x read as [1, 13, 4, 16], scaled per
    channel and transposed channels-last (the reshape fused into the transpose: its input read
    through a view, in tiles). And an instance norm of y's rows of 37 (a mean, then a variance
    reading it: partial sums in vectors, the last one predicated). And
    y's rows' products with each other as an einsum (a batched matmul). And x without its
    first row read back as rows of 24 (Funnel's relative-position shift: indices that divide
    the rows, one contiguous run of memory, read through a flat view). And y and x joined
    along their last axis, scaled and through a SiLU (inputs switch at 37, which no vector
    width divides: a vector loop per input)."""
    rng = _rng(13)
    w1 = (rng.standard_normal((64, 5003)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((5003, 37)) / 64).astype(np.float32)
    wc1 = (rng.standard_normal((16, 13, 3)) / 6).astype(np.float32)
    wc2 = (rng.standard_normal((8, 4, 3)) / 3).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Sigmoid", ["h"], ["s"]),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Pow", ["t", "three"], ["t3"]),
        helper.make_node("Add", ["s", "t3"], ["a"]),
        helper.make_node("MatMul", ["a", "w2"], ["y"]),
        helper.make_node("Conv", ["x", "wc1", "bc1"], ["c1"], pads=[1, 1]),
        helper.make_node("Sigmoid", ["c1"], ["c1s"]),
        helper.make_node("Conv", ["c1s", "wc2"], ["c"], group=4, strides=[2], dilations=[2], pads=[2, 1]),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["yt", "y"], ["g"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["xt", "image_shape"], ["image"]),
        helper.make_node("Conv", ["image", "wp", "bp"], ["p"]),
        helper.make_node("HardSwish", ["p"], ["pr"]),
        helper.make_node("Conv", ["pr", "wq"], ["q"], pads=[0, 1, 0, 1]),
        helper.make_node("Reshape", ["x", "rows_shape"], ["x4"]),
        helper.make_node("MatMul", ["x4", "wr"], ["r"]),
        helper.make_node("Div", ["g", "six"], ["scaled"]),
        helper.make_node("Softmax", ["scaled"], ["attention"], axis=-1),
        helper.make_node("Transpose", ["s"], ["st"], perm=[0, 2, 1]),
        helper.make_node("Mul", ["st", "row_scale"], ["sts"]),
        helper.make_node("Reshape", ["x", "planes_shape"], ["planes"]),
        helper.make_node("AveragePool", ["planes"], ["pooled"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sub", ["pooled", "planes"], ["mixed"]),
        helper.make_node("LRN", ["pr"], ["normalized"], size=5, alpha=0.002, beta=0.75, bias=1.5),
        helper.make_node("ReduceMax", ["y"], ["best"], axes=[-1], keepdims=0),
        helper.make_node("ArgMax", ["y"], ["best_index"], axis=-1, keepdims=0),
        helper.make_node("Reshape", ["x", "volume_shape"], ["volume"]),
        helper.make_node(
            "Conv",
            ["volume", "wv1", "bv1"],
            ["v1"],
            strides=[2, 1, 1],
            dilations=[2, 1, 1],
            pads=[2, 1, 1, 2, 1, 1],
        ),
        helper.make_node("Relu", ["v1"], ["v1r"]),
        helper.make_node("Conv", ["v1r", "wv2"], ["v2"], group=2, pads=[1, 0, 0, 0, 0, 2]),
        helper.make_node(
            "Resize",
            ["pr", "", "upsampling"],
            ["upsampled"],
            mode="linear",
            coordinate_transformation_mode="half_pixel",
        ),
        helper.make_node("Reshape", ["x", "blocks_shape"], ["blocks"]),
        helper.make_node("Mul", ["blocks", "channel_scale"], ["blocks_scaled"]),
        helper.make_node("Transpose", ["blocks_scaled"], ["blocks_last"], perm=[0, 2, 3, 1]),
        helper.make_node("InstanceNormalization", ["y", "norm_scale", "norm_bias"], ["y_normed"]),
        helper.make_node("Einsum", ["y", "y"], ["gram"], equation="bij,bkj->bik"),
        helper.make_node("Slice", ["x", "shift_start", "shift_end", "shift_axes"], ["x_rest"]),
        helper.make_node("Reshape", ["x_rest", "shift_shape"], ["shifted"]),
        helper.make_node("Concat", ["y", "x"], ["joined"], axis=2),
        helper.make_node("Mul", ["joined", "joined_scale"], ["joined_scaled"]),
        helper.make_node("Sigmoid", ["joined_scaled"], ["joined_gate"]),
        helper.make_node("Mul", ["joined_scaled", "joined_gate"], ["joined_silu"]),
    ]
    graph = helper.make_graph(
        nodes,
        "awkward_family",
        [_float_info("x", [1, 13, 64])],
        [
            _float_info("y", [1, 13, 37]),
            _float_info("c", [1, 8, 32]),
            _float_info("g", [1, 37, 37]),
            _float_info("q", [1, 22, 1, 13]),
            _float_info("r", [1, 2, 26, 40]),
            _float_info("attention", [1, 37, 37]),
            _float_info("sts", [1, 5003, 13]),
            _float_info("mixed", [1, 13, 8, 8]),
            _float_info("normalized", [1, 32, 1, 13]),
            _float_info("best", [1, 13]),
            helper.make_tensor_value_info("best_index", TensorProto.INT64, [1, 13]),
            _float_info("v2", [1, 8, 2, 4, 4]),
            _float_info("upsampled", [1, 32, 3, 52]),
            _float_info("blocks_last", [1, 4, 16, 13]),
            _float_info("y_normed", [1, 13, 37]),
            _float_info("gram", [1, 13, 13]),
            _float_info("shifted", [1, 32, 24]),
            _float_info("joined_silu", [1, 13, 101]),
        ],
        initializer=[
            _const("w1", w1),
            _const("w2", w2),
            _const("three", np.array(3.0, np.float32)),
            _const("wc1", wc1),
            _const("bc1", (0.1 * rng.standard_normal(16)).astype(np.float32)),
            _const("wc2", wc2),
            _const("image_shape", np.array([1, 64, 1, 13], np.int64)),
            _const("wp", (rng.standard_normal((32, 64, 1, 1)) / 8).astype(np.float32)),
            _const("bp", (0.1 * rng.standard_normal(32)).astype(np.float32)),
            _const("wq", (rng.standard_normal((22, 32, 1, 3)) / 9).astype(np.float32)),
            _const("rows_shape", np.array([1, 2, 26, 16], np.int64)),
            _const("wr", (rng.standard_normal((16, 40)) / 4).astype(np.float32)),
            _const("six", np.array(6.0, np.float32)),
            _const("row_scale", rng.standard_normal((5003, 1)).astype(np.float32)),
            _const("planes_shape", np.array([1, 13, 8, 8], np.int64)),
            _const("volume_shape", np.array([1, 13, 4, 4, 4], np.int64)),
            _const("wv1", (rng.standard_normal((8, 13, 3, 3, 3)) / 10).astype(np.float32)),
            _const("bv1", (0.1 * rng.standard_normal(8)).astype(np.float32)),
            _const("wv2", (rng.standard_normal((8, 4, 2, 1, 3)) / 5).astype(np.float32)),
            _const("upsampling", np.array([1, 1, 3, 4], np.float32)),
            _const("blocks_shape", np.array([1, 13, 4, 16], np.int64)),
            _const("channel_scale", rng.standard_normal((13, 1, 1)).astype(np.float32)),
            _const("norm_scale", rng.standard_normal(13).astype(np.float32)),
            _const("norm_bias", rng.standard_normal(13).astype(np.float32)),
            _const("shift_start", np.array([1], np.int64)),
            _const("shift_end", np.array([13], np.int64)),
            _const("shift_axes", np.array([1], np.int64)),
            _const("shift_shape", np.array([1, 32, 24], np.int64)),
            _const("joined_scale", rng.standard_normal(101).astype(np.float32)),
        ],
    )
    return _model(graph)


def dense_family() -> onnx.ModelProto:
    """Matmuls and row-wise functions the default schedules target: M = 1 and M = 6 dense
    with bias and relu (packed weights), Gemm with transB (packed after the transpose),
    batched (attention-like) matmul with softmax, layer norm, N = 20 (4-lane vectors) and
    M = 1 with N = 40 (8-lane vectors, packed weights padded to 48), and a softmax over 1,500
    classes, whose row buffer is too big for the stack (its kernel alone runs without
    parallel loops)."""
    rng = _rng(7)
    w1 = (rng.standard_normal((64, 96)) / 8).astype(np.float32)
    w2 = (rng.standard_normal((48, 96)) / 8).astype(np.float32)  # Gemm transB: [N, K]
    w3 = (rng.standard_normal((48, 20)) / 8).astype(np.float32)
    w4 = (rng.standard_normal((64, 40)) / 8).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["a"]),
        helper.make_node("Gemm", ["a", "w2", "b2"], ["g"], transB=1),
        helper.make_node("LayerNormalization", ["g", "gamma", "beta"], ["normed"], axis=-1),
        helper.make_node("MatMul", ["normed", "w3"], ["odd"]),
        helper.make_node("MatMul", ["q", "k"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["scores"], axis=-1),
        helper.make_node("MatMul", ["v", "w1"], ["row"]),
        helper.make_node("MatMul", ["v", "w4"], ["narrow"]),
        helper.make_node("Softmax", ["classes"], ["probabilities"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "dense_family",
        [_float_info("x", [6, 64]), _float_info("q", [4, 16, 32]), _float_info("k", [4, 32, 16]),
         _float_info("v", [1, 64]), _float_info("classes", [3, 1500])],
        [_float_info("odd", [6, 20]), _float_info("scores", [4, 16, 16]), _float_info("row", [1, 96]),
         _float_info("narrow", [1, 40]), _float_info("probabilities", [3, 1500])],
        initializer=[
            _const("w1", w1), _const("b1", (0.1 * rng.standard_normal(96)).astype(np.float32)),
            _const("w2", w2), _const("b2", (0.1 * rng.standard_normal(48)).astype(np.float32)),
            _const("gamma", (1 + 0.1 * rng.standard_normal(48)).astype(np.float32)),
            _const("beta", (0.1 * rng.standard_normal(48)).astype(np.float32)),
            _const("w3", w3), _const("w4", w4),
        ],
    )  # fmt: skip
    return _model(graph)


def data_dependent() -> onnx.ModelProto:
    """Outputs whose size depends on the data: NonZero, Unique (sorted, four outputs),
    Compress along an axis and NonMaxSuppression (two classes, corners in either order). The
    package returns them as bounded outputs. Beside them, TopK (largest along the first
    axis, smallest along the last) and an index read through TopK's indices."""
    nodes = [
        helper.make_node("TopK", ["x", "k3"], ["top_values", "top_indices"], axis=0),
        helper.make_node("TopK", ["x", "k2"], ["low_values", "low_indices"], axis=-1, largest=0),
        helper.make_node("GatherElements", ["x", "low_indices"], ["low_again"], axis=1),
        helper.make_node(
            "NonMaxSuppression", ["boxes", "box_scores", "max_boxes", "iou", "min_score"], ["selected"]
        ),
        helper.make_node("Greater", ["x", "zero"], ["positive"]),
        helper.make_node("NonZero", ["positive"], ["where_positive"], name="where"),
        helper.make_node("Round", ["x"], ["rounded"]),
        helper.make_node("Unique", ["rounded"], ["values", "first", "inverse", "counts"], sorted=1),
        helper.make_node("ReduceSum", ["x", "axis1"], ["row_sums"], keepdims=0),
        helper.make_node("Greater", ["row_sums", "zero"], ["keep"]),
        helper.make_node("Compress", ["x", "keep"], ["rows"], axis=0, name="rows"),
    ]
    int64_info = [
        helper.make_tensor_value_info(name, TensorProto.INT64, shape)
        for name, shape in (
            ("where_positive", [2, "n"]),
            ("first", ["u"]),
            ("inverse", [24]),
            ("counts", ["u"]),
            ("top_indices", [3, 4]),
            ("low_indices", [6, 2]),
            ("selected", ["s", 3]),
        )
    ]
    graph = helper.make_graph(
        nodes,
        "data_dependent",
        [_float_info("x", [6, 4]), _float_info("boxes", [1, 24, 4]), _float_info("box_scores", [1, 2, 24])],
        [
            int64_info[0], _float_info("values", ["u"]), *int64_info[1:4], _float_info("rows", ["r", 4]),
            _float_info("top_values", [3, 4]), int64_info[4], _float_info("low_values", [6, 2]),
            int64_info[5], _float_info("low_again", [6, 2]), int64_info[6],
        ],
        initializer=[
            _const("zero", np.array(0.0, dtype=np.float32)),
            _const("axis1", np.array([1], dtype=np.int64)),
            _const("k3", np.array([3], dtype=np.int64)),
            _const("k2", np.array([2], dtype=np.int64)),
            _const("max_boxes", np.array([5], dtype=np.int64)),
            _const("iou", np.array([0.3], dtype=np.float32)),
            _const("min_score", np.array([0.2], dtype=np.float32)),
        ],
    )  # fmt: skip
    return _model(graph)


MODELS: dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": mlp,
    "cnn": cnn,
    "multi_io": multi_io,
    "reshape_view": reshape_view_output,
    "passthrough": passthrough_and_constant,
    "awkward_names": awkward_names,
    "symbolic_batch": symbolic_batch,
    "all_dtypes": all_dtypes,
    "shape_arithmetic": shape_arithmetic,
    "recurrent": recurrent,
    "data_dependent": data_dependent,
}

# Flags each zoo model needs on the command line.
GEN_ARGS: dict[str, list[str]] = {
    "symbolic_batch": ["--input-shape", "x=3,5"],
    "shape_arithmetic": ["--input-shape", "x=2,3,5,4"],
}


def package_name(model: str) -> str:
    """The package name tests give a zoo model: ``multi_io`` → ``MultiIo``."""
    return "".join(part.capitalize() for part in model.split("_"))


def large_dense(megabytes: int = 64) -> onnx.ModelProto:
    """One dense layer holding about ``megabytes`` MB of float32 weights (for timing); its
    side a multiple of 16, so that the packed weights need no padding."""
    side = int(np.sqrt(megabytes * (1 << 20) / 4)) // 16 * 16
    rng = _rng(7)
    weights = rng.standard_normal((side, side), dtype=np.float32) / np.float32(np.sqrt(side))
    inits = [_const("w", weights.astype(np.float32))]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
        helper.make_node("Relu", ["h"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "large", [_float_info("x", [1, side])], [_float_info("y", [1, side])], inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model
