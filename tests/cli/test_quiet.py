"""What gen prints: TVM's own warnings never reach the terminal unless asked for (--debug),
and -q prints nothing at all when nothing goes wrong, before or after the command."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# TVM's take() logs "Warning: Fast mode segfaults when there are out-of-bounds indices" from
# C++ for this Gather (the package checks its indices itself).
TVM_WARNING = "Fast mode segfaults"


def _embedding(path):
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)],
        "embed",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, [3, 4])],
        [table],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def _gen(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relay2cmake", *map(str, args)], capture_output=True, text=True, check=True
    )


def test_tvm_warnings_only_with_debug_and_quiet_prints_nothing(tmp_path):
    model = _embedding(tmp_path / "embed.onnx")
    common = ("--no-self-check", "--allow-unverified")
    debug = _gen("gen", model, "-o", tmp_path / "debug", *common, "--debug")
    assert TVM_WARNING in debug.stderr, "the model no longer makes TVM warn: pick another"
    plain = _gen("gen", model, "-o", tmp_path / "plain", *common)
    assert TVM_WARNING not in plain.stderr and "Warning" not in plain.stderr, plain.stderr
    assert "✓ Lowering with TVM" in plain.stderr and plain.stdout.startswith("Wrote Embed")
    for quiet in (("-q", "gen", model), ("gen", model, "--quiet")):
        out = tmp_path / f"quiet{len(quiet[0])}"
        result = _gen(*quiet, "-o", out, *common)
        assert (result.stdout, result.stderr) == ("", ""), result
        assert (out / "metadata.json").exists()


def test_onnx_models_never_load_pytorch(tmp_path):
    """tvm_ffi imports torch whenever it is installed (1.8 s of every command here); only the
    .pt2 frontend needs it. Checked in a fresh interpreter: import, lowering and planning."""
    import importlib.util

    assert importlib.util.find_spec("torch") is not None, "the test extras install torch"
    model = _embedding(tmp_path / "embed.onnx")
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from relay2cmake.frontends import import_model\n"
        "from relay2cmake.lower.pipeline import lower\n"
        "from relay2cmake.plan import build_plan\n"
        f"imported = import_model(Path({str(model)!r}), {{}})\n"
        "build_plan(imported, lower(imported.module, 'embed'), stage_inputs=True)\n"
        "import tvm\n"
        "print('torch' in sys.modules, 'tvm' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"], result.stdout
