"""The C API at run time: every bad argument is a status code and a message (never a crash),
and with a caller-supplied workspace ``run`` makes no heap call at all (malloc, calloc,
realloc and free interposed in the test program, counting every call in the process)."""

from __future__ import annotations

import subprocess

import numpy as np
from packaging_helpers import (
    HEAP_COUNTING_PRELUDE,
    WARNINGS,
    build_program,
    configure_build,
    onnxruntime_outputs,
    run,
)

PROGRAM = (
    HEAP_COUNTING_PRELUDE
    + r"""
#include <multiio/multiio.h>

#define WS MULTIIO_WORKSPACE_BYTES
/* run_buffers with these input/output counts and arrays. */
#define BUFFERS(ins, in_sizes, n_in, outs, out_sizes, n_out) \
  multiio_run_buffers(context, ins, in_sizes, n_in, outs, out_sizes, n_out)

static _Alignas(64) unsigned char workspace[WS + 64];

int main(void) {
  static float features[18], activation[12], total[1];
  static int32_t offsets[12], squared[12];
  multiio_inputs in = {features, offsets};
  multiio_outputs out = {activation, total, squared};
  const void* in_ptrs[2] = {features, offsets};
  size_t in_bytes[2] = {sizeof(features), sizeof(offsets)};
  void* out_ptrs[3] = {activation, total, squared};
  size_t out_bytes[3] = {sizeof(activation), sizeof(total), sizeof(squared)};
  multiio_context* context = NULL;
  int64_t dims[4];
  long create_calls, destroy_calls;
  int i;

  for (i = 0; i < 18; ++i) features[i] = (float)i / 10.0f - 0.8f;
  for (i = 0; i < 12; ++i) offsets[i] = i % 5 - 2;

  /* Contexts: NULLs, a misaligned or short workspace. */
  EXPECT(multiio_context_init(NULL, sizeof(workspace), &context) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(multiio_context_init(workspace, sizeof(workspace), NULL) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(multiio_context_init(workspace + 1, WS, &context) == MULTIIO_ERROR_WORKSPACE_MISALIGNED);
  EXPECT(context == NULL);
  EXPECT(multiio_context_init(workspace, WS - 1, &context) == MULTIIO_ERROR_WORKSPACE_TOO_SMALL);
  EXPECT(multiio_context_create(NULL) == MULTIIO_ERROR_NULL_ARGUMENT);
  multiio_context_destroy(NULL);

  /* Runs without a context or with missing buffers. */
  EXPECT(multiio_run(NULL, &in, &out) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(strcmp(multiio_last_error(NULL), "no context (NULL)") == 0);
  EXPECT(multiio_context_init(workspace, WS, &context) == MULTIIO_OK);
  EXPECT(multiio_run(context, NULL, &out) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(multiio_run(context, &in, NULL) == MULTIIO_ERROR_NULL_ARGUMENT);
  {
    multiio_inputs missing = {features, NULL};
    EXPECT(multiio_run(context, &missing, &out) == MULTIIO_ERROR_NULL_ARGUMENT);
    EXPECT(strstr(multiio_last_error(context), "'offsets'") != NULL);
  }
  {
    multiio_outputs missing = {activation, NULL, squared};
    EXPECT(multiio_run(context, &in, &missing) == MULTIIO_ERROR_NULL_ARGUMENT);
    EXPECT(strstr(multiio_last_error(context), "'total'") != NULL);
  }

  /* Untyped runs: counts, NULL arrays, byte sizes. */
  EXPECT(BUFFERS(in_ptrs, in_bytes, 1, out_ptrs, out_bytes, 3) == MULTIIO_ERROR_COUNT_MISMATCH);
  EXPECT(BUFFERS(in_ptrs, in_bytes, 2, out_ptrs, out_bytes, 4) == MULTIIO_ERROR_COUNT_MISMATCH);
  EXPECT(BUFFERS(NULL, in_bytes, 2, out_ptrs, out_bytes, 3) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(BUFFERS(in_ptrs, in_bytes, 2, out_ptrs, NULL, 3) == MULTIIO_ERROR_NULL_ARGUMENT);
  in_bytes[1] -= 4;
  EXPECT(BUFFERS(in_ptrs, in_bytes, 2, out_ptrs, out_bytes, 3) == MULTIIO_ERROR_SIZE_MISMATCH);
  EXPECT(strstr(multiio_last_error(context), "input 'offsets'") != NULL);
  in_bytes[1] += 4;
  out_bytes[0] += 4;
  EXPECT(BUFFERS(in_ptrs, in_bytes, 2, out_ptrs, out_bytes, 3) == MULTIIO_ERROR_SIZE_MISMATCH);
  EXPECT(strstr(multiio_last_error(context), "output 'activation'") != NULL);
  out_bytes[0] -= 4;

  /* Tables, shapes and threads out of range. */
  EXPECT(multiio_input_info(2) == NULL && multiio_output_info(3) == NULL);
  EXPECT(multiio_output_shape(context, 3, dims) == MULTIIO_ERROR_COUNT_MISMATCH);
  EXPECT(multiio_output_shape(NULL, 0, dims) == MULTIIO_ERROR_NULL_ARGUMENT);
  EXPECT(multiio_context_set_threads(context, 0) == MULTIIO_ERROR_THREADS);
  EXPECT(multiio_context_set_threads(context, MULTIIO_MAX_THREADS + 1) == MULTIIO_ERROR_THREADS);
  EXPECT(strcmp(multiio_status_string((multiio_status)99), "unknown status") == 0);

  /* No heap use while running, serially or with worker threads (started beforehand). */
  EXPECT(multiio_run(context, &in, &out) == MULTIIO_OK);
  EXPECT(multiio_last_error(context)[0] == '\0');
  counting = 1;
  for (i = 0; i < 50; ++i) EXPECT(multiio_run(context, &in, &out) == MULTIIO_OK);
  EXPECT(BUFFERS(in_ptrs, in_bytes, 2, out_ptrs, out_bytes, 3) == MULTIIO_OK);
  EXPECT(multiio_output_shape(context, 0, dims) == MULTIIO_OK && dims[0] == 3 && dims[1] == 4);
  counting = 0;
  EXPECT(heap_calls == 0);
  EXPECT(multiio_context_set_threads(context, 2) == MULTIIO_OK);
  counting = 1;
  for (i = 0; i < 50; ++i) EXPECT(multiio_run(context, &in, &out) == MULTIIO_OK);
  counting = 0;
  EXPECT(heap_calls == 0);
  {
    /* An input that is not 64-byte aligned (the library copies it into the arena when its
     * kernels want alignment) gives the same results. */
    static float shifted[19], again[12];
    multiio_inputs moved = {shifted + 1, offsets};
    multiio_outputs out2 = {again, total, squared};
    memcpy(shifted + 1, features, sizeof(features));
    EXPECT(multiio_run(context, &moved, &out2) == MULTIIO_OK);
    EXPECT(memcmp(again, activation, sizeof(again)) == 0);
  }
  {
    /* Outputs 64-byte aligned are computed in place; a misaligned one, or one over an input,
     * is copied out of the arena: the same results every way. */
    static _Alignas(64) float direct[16 + 12], shared[32];
    static _Alignas(64) int32_t squares[16];
    multiio_outputs aligned = {direct, total, squares};
    multiio_outputs misaligned = {direct + 1, total, squared};
    multiio_inputs over_in = {shared, offsets};
    multiio_outputs over_out = {shared, total, squared};
    EXPECT(multiio_run(context, &in, &aligned) == MULTIIO_OK);
    EXPECT(memcmp(direct, activation, sizeof(activation)) == 0);
    EXPECT(memcmp(squares, squared, sizeof(squared)) == 0);
    EXPECT(multiio_run(context, &in, &misaligned) == MULTIIO_OK);
    EXPECT(memcmp(direct + 1, activation, sizeof(activation)) == 0);
    memcpy(shared, features, sizeof(features));
    EXPECT(multiio_run(context, &over_in, &over_out) == MULTIIO_OK);
    EXPECT(memcmp(shared, activation, sizeof(activation)) == 0);
  }
  multiio_context_destroy(context);

  /* What context_create allocates: one block, freed by destroy. */
  counting = 1;
  EXPECT(multiio_context_create(&context) == MULTIIO_OK);
  create_calls = heap_calls;
  multiio_context_destroy(context);
  counting = 0;
  destroy_calls = heap_calls - create_calls;
  printf("heap calls: run 0, create %ld, destroy %ld\n", create_calls, destroy_calls);
  EXPECT(create_calls == 1 && destroy_calls == 1);

  fwrite(activation, sizeof(float), 12, stdout);
  return 0;
}
"""
)


def test_c_api_rejects_bad_arguments_and_run_never_touches_the_heap(built, tmp_path):
    package = built("multi_io")
    exe = build_program(package, PROGRAM, tmp_path / "api.c")
    result = subprocess.run([exe], capture_output=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
    report, _, data = result.stdout.partition(b"\n")
    assert report == b"heap calls: run 0, create 1, destroy 1"
    # The runs that were checked for errors and allocations still compute the right thing.
    features = (np.arange(18, dtype=np.float32) / np.float32(10) - np.float32(0.8)).reshape(3, 6)
    offsets = (np.arange(12) % 5 - 2).astype(np.int32).reshape(3, 4)
    expected = onnxruntime_outputs(package.model, package.metadata, [features, offsets])[0]
    np.testing.assert_allclose(np.frombuffer(data, dtype=np.float32).reshape(3, 4), expected, rtol=1e-5)


def test_a_profiling_build_times_every_kernel_step(built, tmp_path):
    """Configured with <P>_PROFILE=ON (warning-free), the cli's --profile prints each step's
    kernel, in run order, with its mean time over the bench runs, and their sum, which is at
    most the slowest run; the default build refuses --profile with a message."""
    package = built("multi_io")
    profiled = tmp_path / "profiled"
    configure_build(package.source, profiled, "-DMULTIIO_PROFILE=ON", f"-DCMAKE_C_FLAGS={WARNINGS}")
    features = (np.arange(18, dtype=np.float32) / np.float32(10)).reshape(3, 6)
    offsets = (np.arange(12) % 5 - 2).astype(np.int32).reshape(3, 4)
    inputs = [tmp_path / "features.npy", tmp_path / "offsets.npy"]
    np.save(inputs[0], features)
    np.save(inputs[1], offsets)
    command = ["--bench", "50", "--profile", "--output-dir", tmp_path / "out", *inputs]
    result = run([profiled / "multiio_cli", *command])
    lines = result.stdout.splitlines()
    steps = [line.split() for line in lines if line.startswith("step ")]
    kernels = package.metadata["kernels"]
    assert len(steps) == package.metadata["steps"] > 0, result.stdout
    assert [int(s[1]) for s in steps] == list(range(len(steps)))
    assert all(s[2] in kernels for s in steps), (steps, kernels)
    times = [float(s[3]) for s in steps]
    assert all(t >= 0 for t in times) and sum(times) > 0, times
    total = float(next(line for line in lines if line.startswith("steps_ms ")).split()[1])
    slowest = float(next(line for line in lines if line.startswith("latency_ms")).split("max=")[1])
    assert abs(total - sum(times)) < 1e-5 and total <= slowest, result.stdout
    refused = run([package.build / "multiio_cli", *command], check=False)
    assert refused.returncode == 2 and "MULTIIO_PROFILE=ON" in refused.stderr, refused.stderr
