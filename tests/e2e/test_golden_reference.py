"""The golden reference is cross-checked, and compared the same way in Python and in C:
NaN matches only NaN, an infinity only the same infinity."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import configure_build, ctest, run

from relay2cmake import golden
from relay2cmake.commands.generate import GenerateOptions, generate
from relay2cmake.frontends import Reference, import_model

INF, NAN = float("inf"), float("nan")


def test_elements_match_treats_specials_exactly():
    tol = golden.Tolerance(1e-4, 1e-3)
    want = np.array([INF, -INF, NAN, 1.0, INF, 1.0, NAN, 0.0], np.float32)
    got = np.array([INF, -INF, NAN, 1.0005, 3e38, INF, 0.0, NAN], np.float32)
    expected = [True, True, True, True, False, False, False, False]
    assert golden.elements_match(got, want, tol).tolist() == expected
    assert golden.compare("y", got[:4], want[:4], tol) is None
    difference = golden.compare("y", got, want, tol)
    assert difference is not None and difference.mismatched == 4 and difference.max_abs_error < 1e-3


def test_integers_compare_exactly():
    tol = golden.Tolerance(0.0, 0.0)
    assert golden.compare("i", np.array([1, 2]), np.array([1, 2]), tol) is None
    assert golden.compare("i", np.array([1, 3]), np.array([1, 2]), tol).mismatched == 1
    assert golden.compare("i", np.array([1, 2, 3]), np.array([1, 2]), tol).mismatched == 3  # shape


def _batch_norm_model(path: Path) -> Path:
    """Conv → BatchNormalization at opset 13 (onnx's evaluator applies the schema's default
    momentum and mixes in the batch's statistics) with running statistics far from any
    batch's: mean 2..3, variance 4..9."""
    rng = np.random.default_rng(7)
    initializers = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "scale"),
        numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "bias"),
        numpy_helper.from_array(rng.uniform(2.0, 3.0, 8).astype(np.float32), "mean"),
        numpy_helper.from_array(rng.uniform(4.0, 9.0, 8).astype(np.float32), "var"),
    ]
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
        ],
        "bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 10, 10])],
        initializers,
    )
    return save_model(graph, path, 13)


def test_batch_norm_reference_is_right_when_onnx_evaluator_is_wrong(tmp_path):
    from onnx.reference import ReferenceEvaluator

    path = _batch_norm_model(tmp_path / "bn.onnx")
    imported = import_model(path, {})
    inputs = golden.make_inputs(imported)
    raw = ReferenceEvaluator(onnx.load(str(path))).run(None, {"x": inputs[0]})[0]
    ort = imported.references[0].run(inputs)[0]
    assert imported.references[0].name == "onnxruntime"
    assert np.abs(raw - ort).max() > 1e-2, "onnx's evaluator normalises with batch statistics here"

    data = golden.compute(imported)
    assert (data.reference, data.confirmed_by) == ("onnxruntime", ("onnx-reference",))
    np.testing.assert_allclose(data.expected[0], ort, rtol=1e-5, atol=1e-5)

    # The unfixed evaluator as the second path: it disagrees, TVM's VM breaks the tie.
    paths = [
        imported.references[0],
        Reference("onnx-raw", lambda a: ReferenceEvaluator(onnx.load(str(path))).run(None, {"x": a[0]})),
        golden.reference_paths(imported)[-1],
    ]
    data = golden.compute(imported, paths=paths)
    assert (data.reference, data.confirmed_by) == ("onnxruntime", ("tvm-vm",))
    assert len(data.notes) == 1 and data.notes[0].startswith("onnx-raw disagrees with onnxruntime and tvm-vm")

    report = generate(GenerateOptions(model=path, out=tmp_path / "pkg", name="Bn"))
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["golden"]["reference"] == "onnxruntime" and meta["self_check"].startswith("passed")
    assert not report.warnings
    configure_build(tmp_path / "pkg", tmp_path / "build")
    run([ctest(), "--test-dir", tmp_path / "build", "--output-on-failure"])


def test_no_confirmation_stops_gen_unless_allowed(tmp_path):
    path = _batch_norm_model(tmp_path / "bn.onnx")
    imported = import_model(path, {})
    good = imported.references[0]
    bad = Reference("skewed", lambda a: [o + 1.0 for o in good.run(a)])
    broken = Reference("broken", lambda a: 1 / 0)
    with pytest.raises(golden.UnconfirmedReference, match="onnxruntime and skewed disagree"):
        golden.compute(imported, paths=[good, bad, broken])
    data = golden.compute(imported, accept_unconfirmed=True, paths=[good, bad, broken])
    assert data.reference == "onnxruntime" and not data.confirmed_by
    assert data.notes[0].startswith("the golden outputs are unconfirmed")
    assert data.unavailable[0].startswith("broken could not run the model (ZeroDivisionError")


def _specials_model(path: Path) -> Path:
    """inf = x / 0 (±inf by sign), nan = (x - x) / (x - x), finite = 2x."""
    graph = helper.make_graph(
        [
            helper.make_node("Div", ["x", "zeros"], ["inf"]),
            helper.make_node("Sub", ["x", "x"], ["d"]),
            helper.make_node("Div", ["d", "d"], ["nan"]),
            helper.make_node("Add", ["x", "x"], ["finite"]),
        ],
        "specials",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 8]) for n in ("inf", "nan", "finite")],
        [numpy_helper.from_array(np.zeros((2, 8), np.float32), "zeros")],
    )
    return save_model(graph, path, 13)


def test_golden_test_in_c_treats_specials_exactly(tmp_path):
    path = _specials_model(tmp_path / "specials.onnx")
    generate(GenerateOptions(model=path, out=tmp_path / "pkg", name="Specials", targets=("c",)))
    package = tmp_path / "pkg"
    data = package / "tests" / "golden"
    expected = [np.load(data / f"expected_{k}.npy") for k in range(3)]
    assert np.isposinf(expected[0]).any() and np.isneginf(expected[0]).any() and np.isnan(expected[1]).all()
    configure_build(package, tmp_path / "build")
    golden_program = tmp_path / "build" / "specials_golden"
    weights = package / "weights" / "specials_weights.bin"
    assert "FAIL" not in run([golden_program, data, weights]).stdout  # exact infinities and NaNs pass

    def verdict(output: int, index: tuple[int, int], value: float) -> str:
        tampered = tmp_path / f"tampered_{output}_{value}"
        tampered.mkdir()
        for item in data.iterdir():
            (tampered / item.name).write_bytes(item.read_bytes())
        array = expected[output].copy()
        array[index] = value
        np.save(tampered / f"expected_{output}.npy", array)
        result = run([golden_program, tampered, weights], check=False)
        return "FAIL" if result.returncode != 0 and "FAIL" in result.stdout else "ok"

    positive = tuple(np.argwhere(np.isposinf(expected[0]))[0])
    assert verdict(2, (0, 0), INF) == "FAIL", "a finite result where inf is expected"
    assert verdict(0, positive, 3e38) == "FAIL", "inf where a finite value is expected"
    assert verdict(0, positive, -INF) == "FAIL", "the wrong infinity"
    assert verdict(1, (0, 0), 0.0) == "FAIL", "NaN where 0 is expected"
    assert verdict(2, (0, 0), NAN) == "FAIL", "a finite result where NaN is expected"


def test_quantized_outputs_may_differ_by_one_step_between_references(tmp_path):
    """Two correct runtimes can round a quantized value apart at an exact tie (ONNX Runtime's
    vector kernels fuse multiply-adds; a SqueezeNet quantized by ONNX Runtime differed from
    TVM's VM by one step in 25 of 1,000 outputs, and gen refused it): an output a quantized
    operator gives is confirmed within one step (a DequantizeLinear's scale, 1 for 8-bit
    results), recorded as its tolerance; two steps apart still disagree. Float outputs
    keep float32's tolerance."""
    graph = helper.make_graph(
        [
            helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
            helper.make_node("DequantizeLinear", ["q", "s", "z"], ["dq"]),
            helper.make_node("Flatten", ["dq"], ["y"]),
            helper.make_node("Add", ["x", "x"], ["plain"]),
        ],
        "quantized",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [
            helper.make_tensor_value_info("q", TensorProto.UINT8, [2, 8]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]),
            helper.make_tensor_value_info("plain", TensorProto.FLOAT, [2, 8]),
        ],
        [
            numpy_helper.from_array(np.array(0.1, np.float32), "s"),
            numpy_helper.from_array(np.array(128, np.uint8), "z"),
        ],
    )
    imported = import_model(save_model(graph, tmp_path / "q.onnx", 13), {})
    assert imported.output_quanta == (1.0, pytest.approx(0.1), None)
    good = imported.references[0]

    def off_by(steps: int, plain: float = 0.0) -> Reference:
        def run_shifted(inputs):
            q, y, p = good.run(inputs)
            return [q + np.uint8(steps), y + np.float32(0.1 * steps), p + np.float32(plain)]

        return Reference(f"{steps}-steps", run_shifted)

    data = golden.compute(imported, paths=[good, off_by(1)])
    assert data.confirmed_by == ("1-steps",)
    assert data.tolerances[0].atol >= 1.0 and data.tolerances[1].atol >= 0.1 > data.tolerances[2].atol
    with pytest.raises(golden.UnconfirmedReference, match="disagree"):
        golden.compute(imported, paths=[good, off_by(2)])
    with pytest.raises(golden.UnconfirmedReference, match="'plain'"):
        golden.compute(imported, paths=[good, off_by(0, plain=0.1)])
