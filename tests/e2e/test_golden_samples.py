"""A large output's golden data is a sample, not a copy: gen checks the package against the
whole output, then keeps every k-th element, and the package's own golden test compares
exactly those (and fails when one of them is wrong)."""

from __future__ import annotations

import numpy as np
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import configure_build, ctest, run

from relay2cmake.commands.generate import GenerateOptions, generate
from relay2cmake.emit.context import GOLDEN_ELEMENTS

ROWS, COLUMNS = 600, 500  # 300,000 elements: over GOLDEN_ELEMENTS, so every 2nd is kept


def test_a_large_output_keeps_a_sample_that_its_golden_test_checks(tmp_path):
    assert ROWS * COLUMNS > GOLDEN_ELEMENTS
    scale = numpy_helper.from_array(np.full((1, COLUMNS), 2.0, np.float32), "scale")
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "scale"], ["y"])],
        "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ROWS, COLUMNS])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ROWS, COLUMNS])],
        [scale],
    )
    model = save_model(graph, tmp_path / "wide.onnx", 13)
    package = tmp_path / "pkg"
    report = generate(GenerateOptions(model=model, out=package, name="Wide", targets=("c",)))
    assert not report.warnings, report.warnings  # checked against the whole output
    expected_path = package / "tests" / "golden" / "expected_0.npy"
    expected = np.load(expected_path)
    inputs = np.load(package / "tests" / "golden" / "input_0.npy")
    np.testing.assert_array_equal(expected, (inputs * 2.0).reshape(-1)[::2])

    build = tmp_path / "build"
    configure_build(package, build)
    run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    expected[-1] += 1.0  # the last sample: output element 299,998
    np.save(expected_path, expected)
    failed = run([ctest(), "--test-dir", build, "--output-on-failure"], check=False)
    assert failed.returncode != 0 and "1 of 150000 compared elements" in failed.stdout + failed.stderr
