"""Bad input gets exit code 1, one clear message, no traceback, and nothing clobbered.

The cases run the command in-process (typer's CliRunner: TVM is imported once, not once per
case); test_usage_errors_exit_2_and_version_works and the TVM-import probe run real processes."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
from model_zoo import mlp, symbolic_batch
from packaging_helpers import fails_cleanly as _fails_cleanly
from packaging_helpers import relay2cmake


@pytest.fixture()
def mlp_path(tmp_path):
    path = tmp_path / "mlp.onnx"
    onnx.save(mlp(), str(path))
    return path


def test_missing_file(tmp_path):
    assert "does not exist" in _fails_cleanly("gen", str(tmp_path / "nope.onnx"), "-o", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_directory_instead_of_file(tmp_path):
    assert "is a directory" in _fails_cleanly("gen", str(tmp_path), "-o", str(tmp_path / "out"))


def test_empty_and_random_files(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert "is empty" in _fails_cleanly("gen", str(tmp_path / "empty.onnx"), "-o", str(tmp_path / "o1"))
    (tmp_path / "random.onnx").write_bytes(bytes(range(256)) * 3)
    assert "not a readable ONNX model" in _fails_cleanly(
        "gen", str(tmp_path / "random.onnx"), "-o", str(tmp_path / "o2")
    )


def test_truncated_model(mlp_path, tmp_path):
    data = mlp_path.read_bytes()
    (tmp_path / "cut.onnx").write_bytes(data[: len(data) // 2])
    message = _fails_cleanly("gen", str(tmp_path / "cut.onnx"), "-o", str(tmp_path / "out"))
    assert "ONNX" in message


def test_unknown_extension(tmp_path):
    (tmp_path / "model.tflite").write_bytes(b"x")
    assert "Cannot tell the format" in _fails_cleanly(
        "gen", str(tmp_path / "model.tflite"), "-o", str(tmp_path / "o")
    )


def test_unsupported_operators_are_all_named(zoo_dir, tmp_path):
    message = _fails_cleanly("gen", str(zoo_dir / "unsupported.onnx"), "-o", str(tmp_path / "out"))
    for expected in (
        "RandomNormalLike (jitter)",
        "RandomUniformLike (noise)",
        "Multinomial (draw)",
        "3 operator(s)",
    ):
        assert expected in message
    assert "Relu" not in message and "Celu" not in message


def test_symbolic_dimension_needs_input_shape(tmp_path):
    onnx.save(symbolic_batch(), str(tmp_path / "s.onnx"))
    message = _fails_cleanly("gen", str(tmp_path / "s.onnx"), "-o", str(tmp_path / "out"))
    assert "Input 'x' has a symbolic dimension 0 ('N'" in message
    assert "--input-shape x=1,5" in message
    assert "--input-shape x=1..8,5" in message  # the range form is suggested too


@pytest.mark.parametrize(
    ("flag", "expected"),
    [
        ("image=1", "has 1 dimensions but the input has 2"),
        ("image", "is not NAME=D0,D1"),
        ("image=1,x", "whole numbers"),
        ("image=1,0", "must be positive"),
        ("nothere=1,784", "which is not an input of this model"),
        ("image=2,784", "the model fixes it to 1"),
        ("image=1..2,784", "the model fixes it to 1"),
        ("image=1,5..3", "the range 5..3 is empty"),
        ("image=1,0..3", "must be positive"),
        ("image=1,1..x", "ranges LO..HI"),
    ],
)
def test_bad_input_shapes(mlp_path, tmp_path, flag, expected):
    assert expected in _fails_cleanly(
        "gen", str(mlp_path), "-o", str(tmp_path / "out"), "--input-shape", flag
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--name", "9lives"], "not a valid package name"),
        (["--name", "has-dash"], "not a valid package name"),
        (["--name", "Int"], "reserved word"),
        (["--version", "1.x"], "is not a version X.Y.Z"),
        (["--version", "1.0"], "is not a version X.Y.Z"),
        (["--version", "1.0.0.0"], "is not a version X.Y.Z"),
        (["--version", "01.0.0"], "is not a version X.Y.Z"),
    ],
)
def test_bad_names_and_versions(mlp_path, tmp_path, args, expected):
    assert expected in _fails_cleanly("gen", str(mlp_path), "-o", str(tmp_path / "out"), *args)


def test_non_empty_output_is_not_clobbered_without_force(mlp_path, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert "--force" in _fails_cleanly("gen", str(mlp_path), "-o", str(out))
    assert (out / "precious.txt").read_text() == "keep me"
    # --force replaces only a previous package (its metadata.json), never other files.
    assert "replaces only a package" in _fails_cleanly("gen", str(mlp_path), "-o", str(out), "--force")
    assert (out / "precious.txt").read_text() == "keep me"
    package = tmp_path / "package"
    relay2cmake("gen", str(mlp_path), "-o", str(package), "--no-self-check")
    (package / "stale.txt").write_text("from an older run")
    relay2cmake("gen", str(mlp_path), "-o", str(package), "--force", "--no-self-check")
    assert not (package / "stale.txt").exists() and (package / "CMakeLists.txt").exists()


def test_failed_generation_leaves_existing_output_untouched(zoo_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    _fails_cleanly("gen", str(zoo_dir / "unsupported.onnx"), "-o", str(out), "--force")
    assert (out / "precious.txt").read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["out"], "no staging folders left behind"


def test_usage_errors_exit_2_and_version_works():
    assert relay2cmake("gen", check=False).returncode == 2
    result = relay2cmake("--version")
    assert result.stdout.startswith("relay2cmake ")


def test_data_dependent_value_feeding_another_operator(tmp_path):
    """NonZero/Unique/Compress results may only be model outputs: a static plan cannot size
    what consumes them, so the consumer is named instead of computing on a padded tensor."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("NonZero", ["x"], ["nz"]), helper.make_node("Transpose", ["nz"], ["y"])],
        "nonzero_then_transpose",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, ["n", 2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    message = _fails_cleanly("gen", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out"))
    assert "Transpose uses the output of NonZero, Compress, Unique or NonMaxSuppression" in message
    assert "only as model outputs" in message
    assert not (tmp_path / "out").exists()


def test_an_input_that_sets_a_shape_is_named_with_the_flag_to_freeze_it(tmp_path):
    """TopK's k as a run-time input: the output shape depends on a value, so the message
    names the input and the operator, and shows --constant-input."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("TopK", ["x", "k"], ["values", "indices"], name="top")],
        "topk_k_input",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("values", TensorProto.FLOAT, [3, "k"]),
            helper.make_tensor_value_info("indices", TensorProto.INT64, [3, "k"]),
        ],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    message = _fails_cleanly("gen", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "out"))
    assert "'k' (TopK 'top')" in message and "--constant-input k=VALUES" in message, message
    assert not (tmp_path / "out").exists()


def _relu_graph(inputs=None, outputs=None, nodes=None):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    return helper.make_graph(
        nodes or [helper.make_node("Relu", ["x"], ["y"])], "g", [x] if inputs is None else inputs,
        [y] if outputs is None else outputs,
    )  # fmt: skip


def _bad_model(kind: str, folder):
    """A model file that is valid protobuf but that relay2cmake must refuse, and why."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    opset17 = [helper.make_opsetid("", 17)]
    if kind == "opset too new":
        model = helper.make_model(_relu_graph(), opset_imports=[helper.make_opsetid("", 99)])
        expected = "opset 99; the installed onnx knows opsets up to"
    elif kind == "no outputs":
        model = helper.make_model(_relu_graph(outputs=[]), opset_imports=opset17)
        expected = "declares no outputs"
    elif kind == "string tensors":
        s = helper.make_tensor_value_info("s", TensorProto.STRING, [2])
        so = helper.make_tensor_value_info("so", TensorProto.STRING, [2])
        graph = _relu_graph([s], [so], [helper.make_node("Identity", ["s"], ["so"])])
        model = helper.make_model(graph, opset_imports=opset17)
        expected = "Input 's' has element type STRING"
    elif kind == "complex tensors":
        q = helper.make_tensor_value_info("q", TensorProto.COMPLEX64, [2, 4])
        qo = helper.make_tensor_value_info("qo", TensorProto.COMPLEX64, [2, 4])
        graph = _relu_graph([q], [qo], [helper.make_node("Identity", ["q"], ["qo"])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
        expected = "Input 'q' has element type COMPLEX64"
    elif kind == "custom domain":
        node = helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example", name="frob")
        model = helper.make_model(
            _relu_graph(nodes=[node]), opset_imports=[*opset17, helper.make_opsetid("com.example", 1)]
        )
        expected = "com.example::Frobnicate (frob; custom domains are not supported)"
    elif kind == "sequence output":
        seq = helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, [2, 3])
        graph = _relu_graph(outputs=[seq], nodes=[helper.make_node("SequenceConstruct", ["x"], ["seq"])])
        model = helper.make_model(graph, opset_imports=opset17)
        expected = "Output 'seq' is not a tensor"
    elif kind == "missing external data":
        w = numpy_helper.from_array(np.ones((3, 3), np.float32), "w")
        graph = _relu_graph(nodes=[helper.make_node("MatMul", ["x", "w"], ["y"])])
        graph.initializer.append(w)
        model = helper.make_model(graph, opset_imports=opset17)
        path = str(folder / "m.onnx")
        onnx.save(model, path, save_as_external_data=True, location="w.bin", size_threshold=0)
        (folder / "w.bin").unlink()
        return folder / "m.onnx", "keeps weights in external data that cannot be read"
    elif kind == "over 2 GiB of weights":
        # Two 1.1 GiB external tensors in sparse files: nothing is read before the refusal.
        side = 17000
        for name in ("w1", "w2"):
            with open(folder / f"{name}.bin", "wb") as stream:
                stream.truncate(side * side * 4)
        initializers = []
        for name in ("w1", "w2"):
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[side, side])
            tensor.data_location = TensorProto.EXTERNAL
            entries = {"location": f"{name}.bin", "offset": "0", "length": str(side * side * 4)}
            for key, value in entries.items():
                tensor.external_data.add(key=key, value=value)
            initializers.append(tensor)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])
        layers = (("x", "w1", "h"), ("h", "w2", "y"))
        nodes = [helper.make_node("MatMul", [a, w], [out]) for a, w, out in layers]
        graph = helper.make_graph(nodes, "huge", [x], [y], initializers)
        model = helper.make_model(graph, opset_imports=opset17)
        expected = "GiB of weights; relay2cmake reads models through protobuf, which stops at 2 GiB"
    else:
        raise AssertionError(kind)
    onnx.save(model, str(folder / "m.onnx"))
    return folder / "m.onnx", expected


@pytest.mark.parametrize(
    "kind",
    ["opset too new", "no outputs", "string tensors", "complex tensors", "custom domain", "sequence output",
     "missing external data", "over 2 GiB of weights"],
)  # fmt: skip
def test_models_relay2cmake_cannot_compile(kind, tmp_path):
    path, expected = _bad_model(kind, tmp_path)
    message = _fails_cleanly("gen", str(path), "-o", str(tmp_path / "out"))
    assert expected in message
    assert not (tmp_path / "out").exists()


def test_unwritable_output_folder_and_unknown_target(mlp_path, tmp_path):
    (tmp_path / "a_file").write_text("keep me")
    message = _fails_cleanly("gen", str(mlp_path), "-o", str(tmp_path / "a_file" / "pkg"))
    assert "Cannot write next to" in message and "Not a directory" in message
    assert (tmp_path / "a_file").read_text() == "keep me"
    message = _fails_cleanly("gen", str(mlp_path), "-o", str(tmp_path / "out"), "--target", "sparc")
    assert "unknown architecture 'sparc'" in message
    assert not (tmp_path / "out").exists()


def test_file_and_flag_mistakes_answer_before_tvm_loads(tmp_path):
    """`import tvm` takes seconds (more with PyTorch installed): a missing model, a bad --name
    or --version, or a malformed --input-shape must not wait for it."""
    probe = (
        "import sys\n"
        "from relay2cmake.cli import main\n"
        "for argv in sys.argv[1:]:\n"
        "    sys.argv = ['relay2cmake', *argv.split('|')]\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code not in (0, None), argv\n"
        "assert 'tvm' not in sys.modules, 'TVM was imported'\n"
    )
    model = tmp_path / "m.onnx"
    model.write_bytes(b"not read")
    cases = [
        f"gen|{tmp_path / 'missing.onnx'}|-o|{tmp_path / 'out'}",
        f"gen|{model}|-o|{tmp_path / 'out'}|--name|Foo bar",
        f"gen|{model}|-o|{tmp_path / 'out'}|--version|1.x",
        f"gen|{model}|-o|{tmp_path / 'out'}|--input-shape|image",
        f"inspect|{tmp_path / 'missing.onnx'}",
        f"tune|{tmp_path / 'missing.onnx'}|-o|{tmp_path / 't.json'}",
    ]
    result = subprocess.run([sys.executable, "-c", probe, *cases], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("error:") == len(cases), result.stderr


def test_gen_starts_its_first_step_before_the_heavy_imports():
    """gen's first progress line ("Importing ...") comes once the command's own module is
    loaded; NumPy, Jinja, ONNX and TVM (half a second and more) load inside the steps."""
    probe = (
        "import sys\n"
        "import relay2cmake.cli, relay2cmake.commands.generate\n"
        "print(sorted(m for m in ('numpy', 'jinja2', 'onnx', 'tvm', 'torch') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]", result.stdout
