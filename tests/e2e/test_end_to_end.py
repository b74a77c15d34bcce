"""gen → configure → build → ctest → install → sample app via find_package → run → compare
with ONNX Runtime, for every model of the zoo."""

from __future__ import annotations

import re

import numpy as np
import pytest
from model_zoo import MODELS
from packaging_helpers import (
    SAMPLE_APPS,
    build_sample_app,
    configure_build,
    onnxruntime_outputs,
    random_inputs,
    read_outputs,
    run,
    write_inputs,
)


def _compare(ours: list[np.ndarray], reference: list[np.ndarray]) -> float:
    worst = 0.0
    for mine, theirs in zip(ours, reference, strict=True):
        theirs = np.asarray(theirs).astype(mine.dtype)
        assert mine.shape == theirs.shape
        if mine.dtype.kind == "f":
            np.testing.assert_allclose(mine, theirs, rtol=1e-4, atol=1e-5)
            worst = max(worst, float(np.max(np.abs(mine - theirs), initial=0.0)))
        else:
            np.testing.assert_array_equal(mine, theirs)
    return worst


# Four models whose traits other tests also cover (names: golden trees and hostile names;
# --input-shape: test_cli_errors and the real-model slice) run only in the full suite.
SLOW_CONSUMERS = {"awkward_names", "symbolic_batch", "shape_arithmetic", "reshape_view"}


@pytest.mark.parametrize(
    "model", [pytest.param(m, marks=pytest.mark.slow if m in SLOW_CONSUMERS else ()) for m in sorted(MODELS)]
)
def test_c_consumer_matches_onnxruntime(model, built, tmp_path):
    package = built(model)
    app = build_sample_app("c_consumer", package, tmp_path)
    inputs = random_inputs(package.metadata, seed=7)
    write_inputs(tmp_path / "in", inputs)
    (tmp_path / "out").mkdir()
    run([app, tmp_path / "in", tmp_path / "out"])
    ours = read_outputs(tmp_path / "out", package.metadata)
    _compare(ours, onnxruntime_outputs(package.model, package.metadata, inputs))


@pytest.mark.parametrize("model", ["cnn", "multi_io", "passthrough", "data_dependent"])
def test_cpp_consumer_matches_onnxruntime(model, built, tmp_path):
    package = built(model)
    app = build_sample_app("cpp_consumer", package, tmp_path)
    inputs = random_inputs(package.metadata, seed=11)
    write_inputs(tmp_path / "in", inputs)
    (tmp_path / "out").mkdir()
    run([app, tmp_path / "in", tmp_path / "out", "3"])
    _compare(
        read_outputs(tmp_path / "out", package.metadata),
        onnxruntime_outputs(package.model, package.metadata, inputs),
    )


def test_cli_tool_runs_npy_files_and_benchmarks(built, tmp_path):
    package = built("multi_io")
    cli = package.cli
    inputs = random_inputs(package.metadata, seed=3)
    paths = []
    for index, array in enumerate(inputs):
        paths.append(tmp_path / f"in{index}.npy")
        np.save(paths[-1], array)
    result = run([cli, "--output-dir", tmp_path / "out", "--bench", "5", "--warmup", "1", *paths])
    assert result.stdout.startswith("latency_ms min=")
    outputs = package.metadata["outputs"]
    ours = [np.load(tmp_path / "out" / f"output_{i}.npy") for i in range(len(outputs))]
    _compare(ours, onnxruntime_outputs(package.model, package.metadata, inputs))
    # One line per output: which model output went to which file, with its dtype and shape.
    for index, (output, array) in enumerate(zip(outputs, ours, strict=True)):
        shape = ", ".join(map(str, array.shape))
        file = f"{tmp_path / 'out'}/output_{index}.npy"
        line = f"output {index} '{output['name']}' {output['dtype']}[{shape}] -> {file}"
        assert line in result.stdout.splitlines(), result.stdout
    # With workers, --bench says in how many runs the context used them (it may go without).
    threaded = run([cli, "--output-dir", tmp_path / "out2", "--bench", "5", "--threads", "2", *paths])
    assert re.search(r"^threads 2 used in [0-5] of 5 runs$", threaded.stdout, re.M), threaded.stdout

    # --named-outputs: files named after the outputs (their C identifiers); --quiet: no lines.
    named = run([cli, "--output-dir", tmp_path / "named", "--named-outputs", "--quiet", *paths])
    assert named.stdout == ""
    for output, array in zip(outputs, ours, strict=True):
        np.testing.assert_array_equal(np.load(tmp_path / "named" / f"{output['c_name']}.npy"), array)
    missing = run([cli, *paths, "--output-dir"], check=False)
    assert missing.returncode == 2 and "--output-dir needs a value" in missing.stderr, missing.stderr


def paths_of(folder):
    return [folder / "f.npy", folder / "i.npy"]


def test_cli_tool_rejects_wrong_inputs(built, tmp_path):
    package = built("multi_io")
    cli = package.cli
    good = random_inputs(package.metadata, seed=3)
    np.save(tmp_path / "f.npy", good[0])
    np.save(tmp_path / "i.npy", good[1])
    np.save(tmp_path / "wrong_dtype.npy", good[1].astype(np.int64))
    np.save(tmp_path / "wrong_shape.npy", good[0].reshape(-1))
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY\x01\x00garbage")

    cases = {
        "count": [tmp_path / "f.npy"],
        "dtype": [tmp_path / "f.npy", tmp_path / "wrong_dtype.npy"],
        "shape": [tmp_path / "wrong_shape.npy", tmp_path / "i.npy"],
        "corrupt": [tmp_path / "corrupt.npy", tmp_path / "i.npy"],
        "missing": [tmp_path / "absent.npy", tmp_path / "i.npy"],
    }
    for case, args in cases.items():
        result = run([cli, "--output-dir", tmp_path / "out", *args], check=False)
        assert result.returncode != 0, case
        assert result.returncode < 128, f"{case}: crashed with signal"
        assert f"{package.prefix}_cli" in result.stderr, case
    shape_error = run([cli, *cases["shape"]], check=False).stderr
    assert "('features') must be float32[3, 6]" in shape_error
    # An output folder that cannot be made (its parent is a file): an error, not a crash.
    (tmp_path / "a_file").write_text("")
    unwritable = run([cli, "--output-dir", tmp_path / "a_file" / "out", *paths_of(tmp_path)], check=False)
    assert unwritable.returncode == 1 and "cannot create the output directory" in unwritable.stderr


@pytest.mark.parametrize("app", ["add_subdirectory_consumer", "fetchcontent_consumer"])
def test_source_consumers(app, built, tmp_path):
    """The package vendored with add_subdirectory, or pulled with FetchContent."""
    package = built("cnn")
    build = tmp_path / "build"
    configure_build(
        SAMPLE_APPS / app,
        build,
        f"-DMODEL_SOURCE_DIR={package.source}",
        f"-DMODEL_PACKAGE={package.name}",
        f"-DMODEL_PREFIX={package.prefix}",
        "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror",
    )
    assert not list(build.rglob(f"{package.prefix}_cli")), "tools stay off when the package is not top level"
    inputs = random_inputs(package.metadata, seed=2)
    write_inputs(tmp_path / "in", inputs)
    (tmp_path / "out").mkdir()
    run([build / app, tmp_path / "in", tmp_path / "out"])
    _compare(
        read_outputs(tmp_path / "out", package.metadata),
        onnxruntime_outputs(package.model, package.metadata, inputs),
    )
