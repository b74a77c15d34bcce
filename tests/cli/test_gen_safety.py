"""gen loses nothing: --force never deletes the folder that holds the model or the working
directory, and an interrupted gen leaves no hidden half-written package behind."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from relay2cmake.samples import DIGITS_MODEL


def _gen(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relay2cmake", "-q", "gen", *args], cwd=cwd, capture_output=True, text=True
    )


def test_force_never_deletes_the_models_folder_or_the_working_directory(tmp_path):
    model = tmp_path / "digits.onnx"
    shutil.copy(DIGITS_MODEL, model)
    result = _gen("digits.onnx", "-o", ".", "--force", cwd=tmp_path)
    assert result.returncode == 1 and "--force would delete" in result.stderr, result.stderr
    assert model.exists()
    inner = tmp_path / "work"
    inner.mkdir()
    result = _gen(str(model), "-o", str(tmp_path), "--force", cwd=inner)
    assert result.returncode == 1 and "--force would delete" in result.stderr
    assert model.exists() and inner.exists()


def test_sigterm_during_gen_leaves_no_staging_folder(tmp_path):
    """Interrupted while CMake try-compiles in the self-check build: CMake's own children must stop
    too, or they write into the folders being removed ("Directory not empty")."""
    out, scratch = tmp_path / "out", tmp_path / "scratch"
    scratch.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-m", "relay2cmake", "-q", "gen", str(DIGITS_MODEL), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch)},
    )
    deadline = time.monotonic() + 300
    try_compiles = "relay2cmake-check-*/b0/CMakeFiles/CMakeScratch/TryCompile-*"
    while not list(scratch.glob(try_compiles)) and process.poll() is None:
        assert time.monotonic() < deadline, "the self-check never started"
        time.sleep(0.02)
    assert process.poll() is None, "gen finished before it could be interrupted"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0 and "interrupted" in stderr, stderr
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scratch"]
    assert list(scratch.glob("relay2cmake-*")) == []  # the self-check's build folders are gone


def _one_node_model(path: Path, nodes, inputs, outputs, initializers=()) -> Path:
    from model_zoo import save_model
    from onnx import helper

    return save_model(helper.make_graph(nodes, "g", inputs, outputs, list(initializers)), path, 13)


def test_a_size_bomb_is_refused_before_anything_evaluates_it(tmp_path):
    """137 bytes: ConstantOfShape([1e9]) then ReduceSum. Folding or importing it allocated
    4-8 GB; under a 3 GB address-space cap gen must still end with a one-line error."""
    import resource

    from onnx import TensorProto, helper

    model = _one_node_model(
        tmp_path / "bomb.onnx",
        [helper.make_node("ConstantOfShape", ["s"], ["big"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1])),  # noqa: E501
         helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0)],
        [],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
        [helper.make_tensor("s", TensorProto.INT64, [1], [10**9])],
    )  # fmt: skip

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    result = subprocess.run(
        [sys.executable, "-m", "relay2cmake", "-q", "gen", str(model), "-o", str(tmp_path / "pkg")],
        capture_output=True, text=True, preexec_fn=cap_memory,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "refuses tensors over 2 GiB" in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "pkg").exists()


def test_malformed_models_get_one_complete_sentence(tmp_path):
    """Each used to end in an "internal error" or a message cut off mid-sentence."""
    import pytest
    from onnx import TensorProto, helper

    from relay2cmake.commands.generate import GenerateOptions, generate
    from relay2cmake.errors import ModelError

    def floats(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    external = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    external.data_location = TensorProto.EXTERNAL
    del external.float_data[:]
    for key, value in (("location", "w.bin"), ("length", "lots")):
        entry = external.external_data.add()
        entry.key, entry.value = key, value
    (tmp_path / "w.bin").write_bytes(bytes(8))

    def external_at(location, offset="0"):
        tensor = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
        tensor.data_location = TensorProto.EXTERNAL
        del tensor.float_data[:]
        for key, value in (("location", location), ("offset", offset), ("length", "8")):
            tensor.external_data.add(key=key, value=value)
        return [tensor]

    add = ([helper.make_node("Add", ["x", "w"], ["y"])], [floats("x", [2])], [floats("y", [2])])
    cases = {
        "cycle": ([helper.make_node("Relu", ["b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                  [floats("x", [2])], [floats("b", [2])], [], "is not output of any previous nodes"),
        "dangling": ([helper.make_node("Add", ["x", "nowhere"], ["y"])], [floats("x", [2])],
                     [floats("y", [2])], [], "'nowhere'"),
        "negative": ([helper.make_node("Relu", ["x"], ["y"])], [floats("x", [-3, 2])], [floats("y", [2])], [],
                     "dimensions cannot be negative"),
        "huge": ([helper.make_node("Relu", ["x"], ["y"])], [floats("x", [10**6, 10**6])],
                 [floats("y", [10**6, 10**6])], [], "refuses tensors over 2 GiB"),
        "external": ([helper.make_node("Add", ["x", "w"], ["y"])], [floats("x", [2])], [floats("y", [2])],
                     [external], "is not a number"),
        # External data is read by relay2cmake itself (not by onnx.load): only inside the folder.
        "escaping": (*add, external_at("../outside.bin"), "not a file name inside the model's folder"),
        "absolute": (*add, external_at(str(tmp_path / "w.bin")), "not a file name inside the model's folder"),
        "past the end": (*add, external_at("w.bin", offset="4"), "lies outside 'w.bin' .bytes 4 to 12 of 8."),
    }  # fmt: skip
    for name, (nodes, inputs, outputs, initializers, expected) in cases.items():
        model = _one_node_model(tmp_path / f"{name}.onnx", nodes, inputs, outputs, initializers)
        with pytest.raises(ModelError, match=expected) as caught:
            generate(GenerateOptions(model=model, out=tmp_path / f"pkg_{name}"))
        assert str(caught.value).rstrip().endswith((".", ")")), (name, str(caught.value))
        assert "\n" not in str(caught.value)
