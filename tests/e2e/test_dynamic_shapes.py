"""Dimensions chosen at run time: one package, built once, run at many batch sizes."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import (
    HEAP_COUNTING_PRELUDE,
    SAMPLE_APPS,
    WARNINGS,
    build_package,
    build_program,
    configure_build,
    ctest,
    fails_cleanly,
    onnxruntime_outputs,
    relay2cmake,
    run,
)

BATCHES = (1, 2, 3, 5, 8)


def _batched_cnn() -> onnx.ModelProto:
    """Conv → ReLU → Conv → ReLU → global pool → MatMul → ReLU → MatMul, plus a second input
    sharing the batch dimension. The second conv is a Winograd one (8 input channels, 64
    tiles per image), the first matmul a packed one whose 18 columns are cut from 32: the
    schedules of both with a batch chosen at run time."""
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array((rng.standard_normal((16, 8, 3, 3)) / 8).astype(np.float32), "w2"),
        numpy_helper.from_array((rng.standard_normal((16, 18)) / 4).astype(np.float32), "g1"),
        numpy_helper.from_array(rng.standard_normal((18, 4)).astype(np.float32), "g"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Conv", ["r", "w2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "g1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("MatMul", ["hr", "g"], ["m"]),
        helper.make_node("Add", ["m", "bias"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "batched_cnn",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, ["N", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
        weights,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def package(tmp_path_factory):
    work = tmp_path_factory.mktemp("dynamic_cnn")
    model = work / "batched_cnn.onnx"
    onnx.save(_batched_cnn(), str(model))
    # The range is given for x only; bias shares it through the ONNX dimension name.
    return build_package(model, work, "BatchedCnn", ["--input-shape", "x=1..8,3,16,16"])


def _run_cli(package, arrays, folder):
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index, array in enumerate(arrays):
        paths.append(str(folder / f"in_{index}.npy"))
        np.save(paths[-1], array)
    return subprocess.run(
        [str(package.cli), "--output-dir", str(folder / "out"), *paths], capture_output=True, text=True
    )


def test_one_package_matches_onnxruntime_at_every_batch(package, tmp_path):
    metadata = package.metadata
    header = (package.source / "include" / "batchedcnn" / "batchedcnn.h").read_text()
    assert "#define BATCHEDCNN_DIM_N_MIN 1" in header and "#define BATCHEDCNN_DIM_N_MAX 8" in header
    # The golden test ran at the largest, the smallest and a middle batch (ctest in build_package).
    assert sorted(p.name for p in (package.source / "tests").glob("golden*")) == [
        "golden",
        "golden_1",
        "golden_2",
    ]
    driver = next((package.source / "src").glob("*_model.c")).read_text()
    assert "winograd_product" in driver, "the second conv did not run as Winograd at a run-time batch"
    for batch in BATCHES:
        rng = np.random.default_rng(batch)
        arrays = [
            rng.standard_normal((batch, 3, 16, 16)).astype(np.float32),
            rng.standard_normal((batch, 4)).astype(np.float32),
        ]
        result = _run_cli(package, arrays, tmp_path / f"b{batch}")
        assert result.returncode == 0, result.stderr
        got = np.load(tmp_path / f"b{batch}" / "out" / "output_0.npy")
        (want,) = onnxruntime_outputs(package.model, metadata, arrays)
        assert got.shape == (batch, 4)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


API_PROGRAM = (
    HEAP_COUNTING_PRELUDE
    + r"""
#include <batchedcnn/batchedcnn.h>
#include <math.h>

#define RUN_BUFFERS() batchedcnn_run_buffers(context, in_ptrs, in_bytes, 2, out_ptrs, out_bytes, 1)

static _Alignas(64) unsigned char workspace[BATCHEDCNN_WORKSPACE_BYTES];
static float x[8 * 3 * 16 * 16], bias[8 * 4], y8[8 * 4], y[9 * 4];

int main(void) {
  batchedcnn_context* context = NULL;
  batchedcnn_inputs in = {x, bias};
  batchedcnn_outputs out = {y};
  int64_t dims[1], shape[2];
  const int64_t x_shape[4] = {2, 3, 16, 16}, bias_shape[2] = {3, 4}, bad_x[4] = {2, 3, 16, 15};
  const int64_t* shapes[2] = {x_shape, bias_shape};
  const void* in_ptrs[2] = {x, bias};
  size_t in_bytes[2];
  void* out_ptrs[1] = {y};
  size_t out_bytes[1];
  int64_t batch;
  size_t i;

  for (i = 0; i < sizeof(x) / sizeof(x[0]); ++i) x[i] = (float)((i * 7919u) % 101u) / 50.0f - 1.0f;
  for (i = 0; i < sizeof(bias) / sizeof(bias[0]); ++i) bias[i] = (float)i / 8.0f;
  EXPECT(batchedcnn_context_init(workspace, sizeof(workspace), &context) == BATCHEDCNN_OK);

  /* The dimension, its range, and a context that starts at the largest batch. */
  EXPECT(BATCHEDCNN_NUM_DIMS == 1 && BATCHEDCNN_DIM_N == 0);
  EXPECT(strcmp(batchedcnn_dim(0)->name, "N") == 0 && batchedcnn_dim(1) == NULL);
  EXPECT(batchedcnn_dim(0)->min == 1 && batchedcnn_dim(0)->max == 8);
  EXPECT(batchedcnn_get_dims(context, dims) == BATCHEDCNN_OK && dims[0] == 8);

  /* Out of range, inputs that disagree, a wrong fixed extent: errors; the dimensions stay. */
  dims[0] = 9;
  EXPECT(batchedcnn_set_dims(context, dims) == BATCHEDCNN_ERROR_DIMS);
  EXPECT(strstr(batchedcnn_last_error(context), "'N'") != NULL);
  dims[0] = 0;
  EXPECT(batchedcnn_set_dims(context, dims) == BATCHEDCNN_ERROR_DIMS);
  EXPECT(batchedcnn_set_dims(context, NULL) == BATCHEDCNN_ERROR_NULL_ARGUMENT);
  EXPECT(batchedcnn_set_input_shapes(context, shapes) == BATCHEDCNN_ERROR_DIMS);
  EXPECT(strstr(batchedcnn_last_error(context), "'bias'") != NULL);
  shapes[0] = bad_x;
  EXPECT(batchedcnn_set_input_shapes(context, shapes) == BATCHEDCNN_ERROR_SIZE_MISMATCH);
  EXPECT(batchedcnn_get_dims(context, dims) == BATCHEDCNN_OK && dims[0] == 8);

  /* The largest batch, then every other: no heap call in any run, sizes follow the batch,
   * and each batch's rows are the largest batch's first rows. */
  EXPECT(batchedcnn_run(context, &in, &(batchedcnn_outputs){y8}) == BATCHEDCNN_OK);
  for (batch = 1; batch <= 8; ++batch) {
    dims[0] = batch;
    memset(y, 0, sizeof(y));
    counting = 1;
    EXPECT(batchedcnn_run_shaped(context, dims, &in, &out) == BATCHEDCNN_OK);
    counting = 0;
    EXPECT(batchedcnn_input_num_bytes(context, 0) == (size_t)batch * 3 * 16 * 16 * sizeof(float));
    EXPECT(batchedcnn_output_capacity(context, 0) == (size_t)batch * 4 * sizeof(float));
    EXPECT(batchedcnn_output_shape(context, 0, shape) == BATCHEDCNN_OK && shape[0] == batch && shape[1] == 4);
    EXPECT(batchedcnn_input_shape(context, 1, shape) == BATCHEDCNN_OK && shape[0] == batch);
    for (i = 0; i < (size_t)batch * 4; ++i) EXPECT(fabsf(y[i] - y8[i]) <= 1e-5f * (1.0f + fabsf(y8[i])));
    EXPECT(y[batch * 4] == 0.0f);  /* nothing written past the output at this batch */
  }
  EXPECT(heap_calls == 0);

  /* run_buffers: inputs at exactly the batch's size; outputs at least the batch's size. */
  dims[0] = 3;
  EXPECT(batchedcnn_set_dims(context, dims) == BATCHEDCNN_OK);
  in_bytes[0] = 3 * 3 * 16 * 16 * sizeof(float);
  in_bytes[1] = 3 * 4 * sizeof(float);
  out_bytes[0] = 3 * 4 * sizeof(float) - 1;
  EXPECT(RUN_BUFFERS() == BATCHEDCNN_ERROR_SIZE_MISMATCH);
  out_bytes[0] = sizeof(y);
  EXPECT(RUN_BUFFERS() == BATCHEDCNN_OK);
  in_bytes[0] = sizeof(x);
  EXPECT(RUN_BUFFERS() == BATCHEDCNN_ERROR_SIZE_MISMATCH);
  batchedcnn_context_destroy(context);
  printf("ok\n");
  return 0;
}
"""
)


def test_c_api_dimensions_errors_and_no_heap_call_in_any_run(package, tmp_path):
    exe = build_program(package, API_PROGRAM, tmp_path / "api.c")
    result = subprocess.run([exe], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ok\n"


def test_golden_runs_at_three_batches_are_sanitizer_clean(package, tmp_path):
    _golden_tests_are_sanitizer_clean(package, tmp_path / "asan")


@pytest.mark.skipif(
    not (shutil.which("aarch64-linux-gnu-gcc") and shutil.which("qemu-aarch64")),
    reason="needs gcc-aarch64-linux-gnu and qemu-user (tools/install_system_deps.sh)",
)
def test_the_aarch64_objects_run_at_three_batches_under_qemu(tmp_path):
    """The AArch64 object set with a run-time batch (NEON tiles of the Winograd and packed
    kernels over it): cross-built, its golden tests at the largest, smallest and a middle
    batch pass under qemu."""
    model = tmp_path / "batched_cnn.onnx"
    onnx.save(_batched_cnn(), str(model))
    package, build = tmp_path / "pkg", tmp_path / "build"
    relay2cmake(
        "gen", str(model), "-o", str(package), "--target", "aarch64", "--input-shape", "x=1..8,3,16,16"
    )
    assert (package / "objects" / "aarch64").is_dir()
    toolchain = SAMPLE_APPS / "cross" / "aarch64-linux-gnu.cmake"
    configure_build(package, build, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", f"-DCMAKE_C_FLAGS={WARNINGS}")
    result = run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    assert result.stdout.count("Passed") >= 3, result.stdout


def test_a_batch_out_of_range_and_inputs_that_disagree_are_errors(package, tmp_path):
    rng = np.random.default_rng(1)
    too_large = [rng.standard_normal((9, 3, 16, 16)).astype(np.float32), np.zeros((9, 4), np.float32)]
    result = _run_cli(package, too_large, tmp_path / "large")
    assert result.returncode == 1
    assert "dimension outside its range" in result.stderr and "'N'" in result.stderr

    disagree = [rng.standard_normal((2, 3, 16, 16)).astype(np.float32), np.zeros((3, 4), np.float32)]
    result = _run_cli(package, disagree, tmp_path / "disagree")
    assert result.returncode == 1
    assert "inputs disagree on a dimension" in result.stderr and "'bias'" in result.stderr

    wrong_fixed = [rng.standard_normal((2, 3, 16, 15)).astype(np.float32), np.zeros((2, 4), np.float32)]
    result = _run_cli(package, wrong_fixed, tmp_path / "fixed")
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "Segmentation" not in result.stderr


def _export_encoder(path) -> None:
    """A two-layer PyTorch transformer encoder, exported by torch.export with a sequence
    dimension of 1..512 (the TorchScript exporter bakes one length into its reshapes)."""
    import torch

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, num_layers=2).eval()
    sequence = torch.export.Dim("seq", min=1, max=512)
    torch.onnx.export(
        model,
        (torch.randn(1, 10, 32),),
        str(path),
        input_names=["x"],
        output_names=["y"],
        dynamic_shapes={"src": {1: sequence}},
        opset_version=18,
        dynamo=True,
    )


@pytest.mark.slow
def test_a_transformer_encoder_runs_at_every_sequence_length(tmp_path):
    model = tmp_path / "encoder.onnx"
    _export_encoder(model)
    package = build_package(model, tmp_path, "Encoder", ["--input-shape", "x=1,1..512,32"])
    for length in (1, 2, 77, 300, 512):
        x = np.random.default_rng(length).standard_normal((1, length, 32)).astype(np.float32)
        result = _run_cli(package, [x], tmp_path / f"s{length}")
        assert result.returncode == 0, result.stderr
        got = np.load(tmp_path / f"s{length}" / "out" / "output_0.npy")
        (want,) = onnxruntime_outputs(package.model, package.metadata, [x])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    result = _run_cli(package, [np.zeros((1, 513, 32), np.float32)], tmp_path / "long")
    assert result.returncode == 1 and "'seq'" in result.stderr

    exe = build_program(package, ENCODER_PROGRAM, tmp_path / "lengths.c")
    result = subprocess.run([exe], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr
    _golden_tests_are_sanitizer_clean(package, tmp_path / "asan")


ENCODER_PROGRAM = (
    HEAP_COUNTING_PRELUDE
    + r"""
#include <encoder/encoder.h>

static _Alignas(64) unsigned char workspace[ENCODER_WORKSPACE_BYTES];
static float x[512 * 32], y[512 * 32 + 1];

int main(void) {
  encoder_context* context = NULL;
  encoder_inputs in = {x};
  encoder_outputs out = {y};
  int64_t dims[1], shape[3], length;
  size_t i;
  for (i = 0; i < sizeof(x) / sizeof(x[0]); ++i) x[i] = (float)((i * 7919u) % 101u) / 50.0f - 1.0f;
  EXPECT(encoder_context_init(workspace, sizeof(workspace), &context) == ENCODER_OK);
  /* Every length 1..512: no heap call, the output's shape follows, nothing written past it. */
  for (length = 1; length <= 512; ++length) {
    dims[0] = length;
    y[length * 32] = 7.0f;
    counting = 1;
    EXPECT(encoder_run_shaped(context, dims, &in, &out) == ENCODER_OK);
    counting = 0;
    EXPECT(encoder_output_shape(context, 0, shape) == ENCODER_OK && shape[1] == length);
    EXPECT(y[length * 32] == 7.0f);
  }
  EXPECT(heap_calls == 0);
  printf("ok\n");
  return 0;
}
"""
)


def _golden_tests_are_sanitizer_clean(package, build) -> None:
    """The package's golden tests (largest, smallest and a middle value) under ASan and UBSan."""
    flags = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
    configure_build(
        package.source, build, f"-DCMAKE_C_FLAGS={flags}", f"-DCMAKE_EXE_LINKER_FLAGS={flags}",
        "-DCMAKE_BUILD_TYPE=Debug",
    )  # fmt: skip
    result = run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    assert "100% tests passed out of 3" in result.stdout
    assert "Sanitizer" not in result.stdout + result.stderr


def test_inputs_sharing_a_dimension_must_agree_on_its_range(tmp_path):
    model = tmp_path / "batched_cnn.onnx"
    onnx.save(_batched_cnn(), str(model))
    shapes = ["--input-shape", "x=1..8,3,16,16", "--input-shape", "bias=1..4,4"]
    message = fails_cleanly("gen", str(model), "-o", str(tmp_path / "out"), *shapes)
    assert "dimension 'N' as 1..8 for 'x' and as 1..4 for 'bias'" in message


@pytest.mark.slow
def test_a_torch_export_dim_becomes_a_range(tmp_path):
    """``torch.export`` with ``Dim("batch", min=1, max=16)``: the package takes 1..16 without
    --input-shape, and --input-shape may narrow it but not widen it."""
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x, y):
            return torch.relu(self.linear(x)) + y

    batch = torch.export.Dim("batch", min=1, max=16)
    example = (torch.randn(2, 8), torch.randn(2, 4))
    program = torch.export.export(Model().eval(), example, dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    path = tmp_path / "linear.pt2"
    torch.export.save(program, str(path))

    message = fails_cleanly("gen", str(path), "-o", str(tmp_path / "wide"), "--input-shape", "x=1..32,8")
    assert "outside the range the program declares (1..16)" in message

    package = build_package(path, tmp_path, "Linear", [])
    assert package.metadata["dims"] == [{"name": "x_0", "min": 1, "max": 16}]
    for rows in (1, 5, 16):
        rng = np.random.default_rng(rows)
        arrays = [
            rng.standard_normal((rows, 8)).astype(np.float32),
            rng.standard_normal((rows, 4)).astype(np.float32),
        ]
        result = _run_cli(package, arrays, tmp_path / f"r{rows}")
        assert result.returncode == 0, result.stderr
        got = np.load(tmp_path / f"r{rows}" / "out" / "output_0.npy")
        want = program.module()(*[torch.from_numpy(a) for a in arrays]).detach().numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _recurrent_weights(
    rng, directions: int, gate_rows: int, hidden: int, features: int, scale: float
) -> list:
    """ONNX's W [dirs, gates*H, F], R [dirs, gates*H, H] (random, times ``scale``) and B
    [dirs, 2*gates*H] (times 0.1), drawn in that order."""
    arrays = {
        "W": scale * rng.standard_normal((directions, gate_rows, features)),
        "R": scale * rng.standard_normal((directions, gate_rows, hidden)),
        "B": 0.1 * rng.standard_normal((directions, 2 * gate_rows)),
    }
    return [numpy_helper.from_array(a.astype(np.float32), name) for name, a in arrays.items()]


def _lstm(hidden: int = 16, features: int = 8) -> onnx.ModelProto:
    """A bidirectional ONNX LSTM over a sequence of run-time length."""
    weights = _recurrent_weights(np.random.default_rng(0), 2, 4 * hidden, hidden, features, 0.3)
    node = helper.make_node(
        "LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden, direction="bidirectional"
    )
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 2, 1, hidden]),
        helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [2, 1, hidden]),
        helper.make_tensor_value_info("y_c", TensorProto.FLOAT, [2, 1, hidden]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", 1, features])]
    graph = helper.make_graph([node], "lstm", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _reverse_gru(hidden: int = 4, features: int = 3, batch: int = 2) -> onnx.ModelProto:
    """A reverse GRU with an initial state input, over a sequence of run-time length."""
    weights = _recurrent_weights(np.random.default_rng(1), 1, 3 * hidden, hidden, features, 0.5)
    node = helper.make_node(
        "GRU", ["x", "W", "R", "B", "", "h0"], ["y", "y_h"], hidden_size=hidden, direction="reverse"
    )
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", batch, features]),
        helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, batch, hidden]),
    ]
    outputs = [
        helper.make_tensor_value_info("y", TensorProto.FLOAT, ["seq", 1, batch, hidden]),
        helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [1, batch, hidden]),
    ]
    graph = helper.make_graph([node], "reverse_gru", inputs, outputs, weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def test_a_reverse_gru_skips_the_steps_past_the_length_and_still_matches(tmp_path):
    """Unrolled to 6 steps; a run at L computes L of them (the step table's guards) and the
    reverse pass starts at step L - 1 from the initial state."""
    model = tmp_path / "gru.onnx"
    onnx.save(_reverse_gru(), str(model))
    package = build_package(model, tmp_path, "ReverseGru", ["--input-shape", "x=1..6,2,3"])
    table = (package.source / "src" / "reversegru_model.c").read_text()
    guarded = [
        line for line in table.splitlines() if line.startswith("  { __tvm_ffi") and ", -1, 0u }" not in line
    ]
    assert guarded, "no step of the unrolled GRU is guarded"
    rng = np.random.default_rng(2)
    for length in (1, 4, 6):
        arrays = [
            rng.standard_normal((length, 2, 3)).astype(np.float32),
            rng.standard_normal((1, 2, 4)).astype(np.float32),
        ]
        result = _run_cli(package, arrays, tmp_path / f"s{length}")
        assert result.returncode == 0, result.stderr
        wants = onnxruntime_outputs(package.model, package.metadata, arrays)
        for index, want in enumerate(wants):
            got = np.load(tmp_path / f"s{length}" / "out" / f"output_{index}.npy")
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


LSTM_PROGRAM = (
    HEAP_COUNTING_PRELUDE
    + r"""
#include <lstm/lstm.h>
#include <math.h>

static _Alignas(64) unsigned char workspace[LSTM_WORKSPACE_BYTES];
static float x[64 * 8], y64[64 * 2 * 16], y[64 * 2 * 16], h[2 * 16], c[2 * 16];

int main(void) {
  lstm_context* context = NULL;
  lstm_inputs in = {x};
  lstm_outputs out = {y, h, c};
  int64_t dims[1], shape[4], length;
  size_t i;
  for (i = 0; i < sizeof(x) / sizeof(x[0]); ++i) x[i] = (float)((i * 7919u) % 101u) / 50.0f - 1.0f;
  EXPECT(lstm_context_init(workspace, sizeof(workspace), &context) == LSTM_OK);
  EXPECT(lstm_run(context, &in, &(lstm_outputs){y64, h, c}) == LSTM_OK);
  /* Every length: no heap call, and the forward pass's states at 0..L-1 are the 64-step
   * run's (they see the same inputs); the skipped steps leave nothing behind. */
  for (length = 1; length <= 64; ++length) {
    dims[0] = length;
    memset(y, 0, sizeof(y));
    counting = 1;
    EXPECT(lstm_run_shaped(context, dims, &in, &out) == LSTM_OK);
    counting = 0;
    EXPECT(lstm_output_shape(context, 0, shape) == LSTM_OK && shape[0] == length && shape[1] == 2);
    for (i = 0; i < (size_t)length; ++i) {
      size_t k;
      for (k = 0; k < 16; ++k) EXPECT(fabsf(y[i * 32 + k] - y64[i * 32 + k]) <= 1e-6f);
    }
    if (length < 64) EXPECT(y[length * 32] == 0.0f);  /* nothing written past the output */
  }
  EXPECT(heap_calls == 0);
  printf("ok\n");
  return 0;
}
"""
)


@pytest.mark.slow
def test_an_lstm_runs_at_every_sequence_length(tmp_path):
    """Unrolled to 64 steps, a run at L computes L of them (both directions): it matches ONNX
    Runtime at five lengths, calls no heap function at any of 1..64, and its golden tests
    (three lengths) are clean under ASan and UBSan."""
    model = tmp_path / "lstm.onnx"
    onnx.save(_lstm(), str(model))
    package = build_package(model, tmp_path, "Lstm", ["--input-shape", "x=1..64,1,8"])
    for length in (1, 2, 9, 40, 64):
        x = np.random.default_rng(length).standard_normal((length, 1, 8)).astype(np.float32)
        result = _run_cli(package, [x], tmp_path / f"s{length}")
        assert result.returncode == 0, result.stderr
        wants = onnxruntime_outputs(package.model, package.metadata, [x])
        for index, want in enumerate(wants):
            got = np.load(tmp_path / f"s{length}" / "out" / f"output_{index}.npy")
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)

    exe = build_program(package, LSTM_PROGRAM, tmp_path / "lengths.c")
    result = subprocess.run([exe], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and result.stdout == "ok\n", result.stderr

    _golden_tests_are_sanitizer_clean(package, tmp_path / "asan")


CPP_PROGRAM = r"""
#include <batchedcnn/batchedcnn.hpp>
#include <cstdio>
#include <vector>

int main() {
  batchedcnn::Model model;
  std::vector<float> x(3 * 3 * 16 * 16, 0.5f), bias(3 * 4, 0.25f);
  batchedcnn::OutputVectors out = model.run({x, bias}, {{3, 3, 16, 16}, {3, 4}});
  if (out.y.size() != 12 || model.dims()[0] != 3 || model.output_shape(0)[0] != 3) return 1;
  try {
    model.set_dims({9});
    return 1;
  } catch (const batchedcnn::Error& error) {
    std::printf("%d\n", static_cast<int>(error.status()));
  }
  return 0;
}
"""


def test_the_cpp_wrapper_takes_shapes_and_cuts_outputs_to_them(package, tmp_path):
    exe = build_program(package, CPP_PROGRAM, tmp_path / "app.cpp")
    result = subprocess.run([exe], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "14"  # BATCHEDCNN_ERROR_DIMS
