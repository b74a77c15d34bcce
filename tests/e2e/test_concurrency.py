"""Contexts are independent: many threads, one context each, give the serial result; with
worker threads per context too, and under ThreadSanitizer."""

from __future__ import annotations

import os
import shutil

import pytest
from packaging_helpers import configure_build, run

PROGRAM = r"""
#include <cnn/cnn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define THREADS 8
#define RUNS 50
#ifndef WORKERS_PER_CONTEXT
#define WORKERS_PER_CONTEXT 1
#endif

static float input[THREADS][CNN_INPUT_PIXELS_NUM_ELEMENTS];
static float reference[THREADS][CNN_OUTPUT_SCORES_NUM_ELEMENTS];
static int failures[THREADS];

static void* worker(void* arg) {
  int id = (int)(size_t)arg, r;
  cnn_context* context;
  float out[CNN_OUTPUT_SCORES_NUM_ELEMENTS];
  cnn_inputs in = {input[id]};
  cnn_outputs outs = {out};
  if (cnn_context_create(&context) != CNN_OK) { failures[id] = 1; return NULL; }
  if (cnn_context_set_threads(context, WORKERS_PER_CONTEXT) != CNN_OK) { failures[id] = 1; return NULL; }
  for (r = 0; r < RUNS; ++r) {
    if (cnn_run(context, &in, &outs) != CNN_OK) ++failures[id];
    if (memcmp(out, reference[id], sizeof(out)) != 0) ++failures[id];
  }
  cnn_context_destroy(context);
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  cnn_context* serial;
  int t, total = 0;
  size_t i;
  if (cnn_context_create(&serial) != CNN_OK) return 1;
  for (t = 0; t < THREADS; ++t) {
    cnn_inputs in = {input[t]};
    cnn_outputs out = {reference[t]};
    for (i = 0; i < CNN_INPUT_PIXELS_NUM_ELEMENTS; ++i) {
      input[t][i] = (float)((i * (size_t)(t + 3)) % 17) / 8.0f - 1.0f;
    }
    if (cnn_run(serial, &in, &out) != CNN_OK) return 1;
  }
  cnn_context_destroy(serial);
  for (t = 0; t < THREADS; ++t) pthread_create(&threads[t], NULL, worker, (void*)(size_t)t);
  for (t = 0; t < THREADS; ++t) pthread_join(threads[t], NULL);
  for (t = 0; t < THREADS; ++t) total += failures[t];
  printf("%d threads x %d runs, %d mismatches\n", THREADS, RUNS, total);
  return total != 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed")
def test_eight_threads_eight_contexts_match_serial(built, tmp_path):
    package = built("cnn")
    (tmp_path / "main.c").write_text(PROGRAM)
    exe = tmp_path / "threads"
    run(
        [
            "gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread",
            "-I", package.install / "include", tmp_path / "main.c",
            "-L", package.install / "lib", "-lcnn", "-lm", "-o", exe,
        ]
    )  # fmt: skip
    assert "8 threads x 50 runs, 0 mismatches" in run([exe]).stdout


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed")
def test_contexts_with_worker_threads_are_race_free_under_tsan(built, tmp_path):
    """8 contexts x 2 threads each (the object kernels' parallel loops on each context's
    pool), built with -fsanitize=thread: no race reported, results identical to serial."""
    package = built("cnn")
    build = tmp_path / "tsan"
    flags = "-DCMAKE_C_FLAGS=-fsanitize=thread -g -O1"
    configure_build(package.source, build, flags, "-DCNN_BUILD_TESTS=OFF", "-DCNN_BUILD_TOOLS=OFF")
    (tmp_path / "main.c").write_text(PROGRAM)
    exe = tmp_path / "threads_tsan"
    run(
        [
            "gcc", "-std=c11", "-O1", "-g", "-fsanitize=thread", "-DWORKERS_PER_CONTEXT=2", "-pthread",
            "-I", package.source / "include", tmp_path / "main.c", build / "libcnn.a", "-lm", "-o", exe,
        ]
    )  # fmt: skip
    result = run([exe], env=dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66"))
    assert "8 threads x 50 runs, 0 mismatches" in result.stdout
