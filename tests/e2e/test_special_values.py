"""Special values: NaN, infinities, -0, denormals, empty axes and long reductions give the
numbers ONNX Runtime gives, in both kernel sets.

Where ONNX Runtime itself differs from ONNX's reference evaluator, NumPy and PyTorch, the
package follows those three and the test says so: ReduceMax/ReduceMin and MaxPool over values
holding a NaN (ONNX Runtime skips the NaN), and long float32 sums (ONNX Runtime accumulates in float32;
the package in float64, checked against NumPy in float64).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper
from packaging_helpers import configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate

UNARY = [
    "Relu", "Erf", "Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Abs", "Neg", "Floor", "Ceil", "Round",
    "Sign", "Reciprocal", "Elu", "Selu", "Softplus", "HardSigmoid", "HardSwish", "LeakyRelu", "Sin",
    "Cos", "Softsign", "Mish",
]  # fmt: skip
REDUCTIONS = [
    "ReduceMax",
    "ReduceMin",
    "ReduceSum",
    "ReduceProd",
    "ReduceMean",
    "ReduceL2",
    "ReduceSumSquare",
]
LONG_ONES = 17_000_000  # past 2**24, where a float32 running sum of ones stops growing
LONG_UNIFORM = 1 << 22

X = np.array(
    [
        np.nan,
        np.inf,
        -np.inf,
        -0.0,
        0.0,
        1e-40,
        -1e-40,
        1.0,
        -1.0,
        3e38,
        -3e38,
        0.5,
        np.nan,
        2.0,
        -np.nan,
        100.0,
    ],
    np.float32,
)
Y = np.array(
    [1.0, np.nan, 2.0, 0.0, -0.0, np.inf, 1.0, np.nan, 0.0, 2.0, 0.5, np.nan, -np.inf, np.inf, 3.0, 1.0],
    np.float32,
)
ROWS = np.array(
    [[-np.inf] * 3, [np.inf] * 3, [1, np.nan, 2], [-0.0, 0.0, -0.0], [1e-40, -1e-40, 5e-41]], np.float32
)


def _model(path):
    nodes = [helper.make_node(op, ["x"], [op]) for op in UNARY]
    outputs = [(op, [16]) for op in UNARY]
    nodes += [
        helper.make_node("Max", ["x", "zero"], ["MaxZero"]),
        helper.make_node("Min", ["x", "zero"], ["MinZero"]),
        helper.make_node("Max", ["x", "y"], ["Max"]),
        helper.make_node("Min", ["x", "y"], ["Min"]),
        helper.make_node("Clip", ["x", "lo", "hi"], ["Clip"]),
        helper.make_node("Div", ["x", "y"], ["Div"]),
        helper.make_node("Pow", ["x", "y"], ["Pow"]),
        helper.make_node("Gelu", ["x"], ["Gelu"]),
        helper.make_node("Gelu", ["x"], ["GeluTanh"], approximate="tanh"),
        helper.make_node("Reshape", ["x", "square"], ["x2"]),
        helper.make_node("Softmax", ["x2"], ["Softmax"]),
        helper.make_node("LogSoftmax", ["x2"], ["LogSoftmax"]),
    ]
    outputs += [
        (n, [16]) for n in ("MaxZero", "MinZero", "Max", "Min", "Clip", "Div", "Pow", "Gelu", "GeluTanh")
    ]
    outputs += [("Softmax", [4, 4]), ("LogSoftmax", [4, 4])]
    nodes += [
        helper.make_node("Reshape", ["x", "image"], ["x4"]),
        helper.make_node("MaxPool", ["x4"], ["MaxPool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("ArgMax", ["rows"], ["ArgMax"], axis=1, keepdims=0),
        helper.make_node("ArgMin", ["rows"], ["ArgMin"], axis=1, keepdims=0),
    ]
    outputs += [("MaxPool", [1, 1, 2, 2])]
    for op in REDUCTIONS:
        nodes.append(helper.make_node(op, ["rows", "axis1"], [f"{op}Rows"], keepdims=0))
        outputs.append((f"{op}Rows", [5]))
        if op != "ReduceMean":  # mean of nothing: ONNX Runtime 0, the reference and PyTorch NaN
            nodes.append(helper.make_node(op, ["empty", "axis1"], [f"{op}Empty"], keepdims=0))
            outputs.append((f"{op}Empty", [3]))
    nodes += [
        helper.make_node("Expand", ["one", "long"], ["ones"]),
        helper.make_node("ReduceSum", ["ones"], ["SumOnes"], keepdims=0),
        helper.make_node("ReduceMean", ["uniform"], ["MeanUniform"], keepdims=0),
        helper.make_node("ReduceSum", ["uniform"], ["SumUniform"], keepdims=0),
    ]
    outputs += [("SumOnes", []), ("MeanUniform", []), ("SumUniform", [])]
    # Comparisons with NaN (TVM folds x == x to true and makes != ordered in LLVM code).
    comparisons = [
        ("Equal", "x"),
        ("Equal", "y"),
        ("LessOrEqual", "x"),
        ("GreaterOrEqual", "x"),
        ("Less", "y"),
    ]
    for op, other in comparisons:
        nodes.append(helper.make_node(op, ["x", other], [f"{op}_{other}"]))
        # an intermediate comparison, fused with Not into one kernel
        nodes.append(helper.make_node(op, ["x", other], [f"{op}_{other}_inside"]))
        nodes.append(helper.make_node("Not", [f"{op}_{other}_inside"], [f"Not{op}_{other}"]))

    # Quantizing NaN and infinities: NaN saturates to the lowest value, as ONNX Runtime's kernel
    # (and our quantized kernels' clamps, which skip NaN propagation for integer results)
    nodes += [
        helper.make_node("QuantizeLinear", ["x", "q_scale", "q_zero_u8"], ["QuantizeU8"]),
        helper.make_node("QuantizeLinear", ["x", "q_scale", "q_zero_i8"], ["QuantizeI8"]),
    ]

    def floats(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    initializers = [
        helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        helper.make_tensor("lo", TensorProto.FLOAT, [], [-1.0]),
        helper.make_tensor("hi", TensorProto.FLOAT, [], [1.0]),
        helper.make_tensor("square", TensorProto.INT64, [2], [4, 4]),
        helper.make_tensor("image", TensorProto.INT64, [4], [1, 1, 4, 4]),
        helper.make_tensor("axis1", TensorProto.INT64, [1], [1]),
        helper.make_tensor("long", TensorProto.INT64, [1], [LONG_ONES]),
        helper.make_tensor("q_scale", TensorProto.FLOAT, [], [0.1]),
        helper.make_tensor("q_zero_u8", TensorProto.UINT8, [], [10]),
        helper.make_tensor("q_zero_i8", TensorProto.INT8, [], [-3]),
    ]
    inputs = [
        floats("x", [16]), floats("y", [16]), floats("rows", [5, 3]), floats("empty", [3, 0]),
        floats("one", [1]), floats("uniform", [LONG_UNIFORM]),
    ]  # fmt: skip
    declared = [floats(name, shape) for name, shape in outputs]
    declared += [helper.make_tensor_value_info(n, TensorProto.INT64, [5]) for n in ("ArgMax", "ArgMin")]
    declared += [helper.make_tensor_value_info("QuantizeU8", TensorProto.UINT8, [16])]
    declared += [helper.make_tensor_value_info("QuantizeI8", TensorProto.INT8, [16])]
    declared += [
        helper.make_tensor_value_info(f"{prefix}{op}_{other}", TensorProto.BOOL, [16])
        for op, other in comparisons
        for prefix in ("", "Not")
    ]
    graph = helper.make_graph(nodes, "special", inputs, declared, initializers)
    return save_model(graph, path, 20)


def _inputs() -> dict[str, np.ndarray]:
    return {
        "x": X,
        "y": Y,
        "rows": ROWS,
        "empty": np.zeros((3, 0), np.float32),
        "one": np.ones(1, np.float32),
        "uniform": np.random.default_rng(0).random(LONG_UNIFORM, dtype=np.float32),
    }


def _same(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: NaN only where NaN, infinities equal, finite values within 1e-5."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    nan_match = np.isnan(got) == np.isnan(want)
    finite = np.isfinite(got) & np.isfinite(want)
    close = np.isclose(got, want, rtol=1e-5, atol=1e-6)
    return nan_match & np.where(np.isnan(got) | np.isnan(want), True, np.where(finite, close, got == want))


@pytest.fixture(scope="module")
def special(tmp_path_factory):
    import onnxruntime

    work = tmp_path_factory.mktemp("special")
    model = _model(work / "special.onnx")
    # Long sums: ONNX Runtime and the reference disagree with each other, so no golden pair.
    generate(
        GenerateOptions(
            model=model, out=work / "pkg", name="Special", self_check=False, allow_unverified=True
        )
    )
    inputs = _inputs()
    files = []
    for position, (name, array) in enumerate(inputs.items()):
        files.append(work / f"{position}_{name}.npy")
        np.save(files[-1], array)
    names = [o["name"] for o in json.loads((work / "pkg" / "metadata.json").read_text())["outputs"]]
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    expected = dict(zip(names, session.run(names, inputs), strict=True))
    return work, files, names, expected


@pytest.mark.parametrize("kernels", ["objects", "c"])
def test_special_values_match_onnxruntime(special, kernels):
    work, files, names, onnxruntime_outputs = special
    expected = {name: value.copy() for name, value in onnxruntime_outputs.items()}
    build = work / f"build_{kernels}"
    configure_build(work / "pkg", build, f"-DSPECIAL_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}")
    out = work / f"out_{kernels}"
    run([build / "special_cli", "--output-dir", out, *files])
    got = {name: np.load(out / f"output_{i}.npy") for i, name in enumerate(names)}

    # Where the package follows NumPy / PyTorch / ONNX's reference instead of ONNX Runtime.
    for op in ("ReduceMax", "ReduceMin"):
        assert np.isnan(got[f"{op}Rows"][2]), f"{op} over [1, NaN, 2] must be NaN (ONNX Runtime: not NaN)"
        expected[f"{op}Rows"][2] = np.nan
    windows = X.reshape(2, 2, 2, 2).transpose(0, 2, 1, 3).reshape(2, 2, 4)  # the 2x2 pooling windows
    with_nan = np.isnan(windows).any(axis=-1).reshape(-1)
    assert np.isnan(got["MaxPool"].reshape(-1)[with_nan]).all(), "a window holding NaN pools to NaN"
    expected["MaxPool"].reshape(-1)[with_nan] = np.nan  # ONNX Runtime skips the NaN
    for op in ("ArgMax", "ArgMin"):  # [1, NaN, 2]: ONNX Runtime picks a NaN only when it is first
        expected[op][2] = 1
    uniform = np.random.default_rng(0).random(LONG_UNIFORM, dtype=np.float32).astype(np.float64)
    assert got["SumOnes"] == LONG_ONES
    assert abs(got["MeanUniform"] / uniform.mean() - 1) < 2e-7
    assert abs(got["SumUniform"] / uniform.sum() - 1) < 2e-7
    for name in ("SumOnes", "MeanUniform", "SumUniform"):
        del expected[name]

    wrong = []
    for name, want in expected.items():
        match = _same(got[name].reshape(-1), want.reshape(-1))
        if not match.all():
            bad = np.nonzero(~match)[0]
            wrong.append(f"{name} at {bad.tolist()}: {got[name].reshape(-1)[bad]} != {want.reshape(-1)[bad]}")
    assert not wrong, "\n".join(wrong)
    assert np.all(got["ReduceMaxEmpty"] == -np.inf) and np.all(got["ReduceMinEmpty"] == np.inf)
    assert got["ArgMax"][2] == 1 and got["ArgMin"][2] == 1, "the NaN is picked, as NumPy and PyTorch do"


@pytest.mark.parametrize("elem_type", [TensorProto.FLOAT16, TensorProto.DOUBLE])
def test_max_and_min_of_infinite_rows_in_other_float_types(tmp_path, elem_type):
    """A row of -inf has maximum -inf (and +inf minimum +inf) in float16 and float64 too: TVM
    starts those reductions at the type's largest finite value (float16: -65504), which the
    package replaces by the infinity for every float type, not only float32."""
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    nodes = [helper.make_node(op, ["rows", "axis1"], [op], keepdims=0) for op in ("ReduceMax", "ReduceMin")]
    graph = helper.make_graph(
        nodes,
        "rows",
        [helper.make_tensor_value_info("rows", elem_type, [5, 3])],
        [helper.make_tensor_value_info(op, elem_type, [5]) for op in ("ReduceMax", "ReduceMin")],
        [helper.make_tensor("axis1", TensorProto.INT64, [1], [1])],
    )
    model = save_model(graph, tmp_path / "rows.onnx", 18)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Rows", self_check=False))
    rows = ROWS.astype(dtype)
    np.save(tmp_path / "rows.npy", rows)
    for kernels in ("objects", "c"):
        build = tmp_path / f"build_{kernels}"
        configure_build(
            tmp_path / "pkg", build, f"-DROWS_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}"
        )
        out = tmp_path / f"out_{kernels}"
        run([build / "rows_cli", "--output-dir", out, tmp_path / "rows.npy"])
        for index, reduce in enumerate((np.max, np.min)):
            got = np.load(out / f"output_{index}.npy")
            assert _same(got, reduce(rows, axis=1)).all(), (kernels, reduce.__name__, got)
