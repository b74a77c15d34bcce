"""Contexts are independent: many threads, one context each, give the serial result; with
worker threads per context too, and under ThreadSanitizer. A context with workers goes the
faster way, with them or without, as run times say."""

from __future__ import annotations

import os
import re
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
static int runs_with_workers[THREADS];

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
    if (cnn_context_threads_used(context) > 1) ++runs_with_workers[id];
  }
  cnn_context_destroy(context);
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  cnn_context* serial;
  int t, total = 0, with_workers = 0;
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
  for (t = 0; t < THREADS; ++t) with_workers += runs_with_workers[t];
  printf("%d threads x %d runs, %d mismatches\n", THREADS, RUNS, total);
  printf("runs with workers: %d\n", with_workers);
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


def _run_under_tsan(package, tmp_path, program: str, *flags):
    """``program`` built and linked with the package's library, both with -fsanitize=thread,
    and run: a race reported fails it (exit code 66)."""
    build = tmp_path / "tsan"
    sanitize = "-DCMAKE_C_FLAGS=-fsanitize=thread -g -O1"
    configure_build(package.source, build, sanitize, "-DCNN_BUILD_TESTS=OFF", "-DCNN_BUILD_TOOLS=OFF")
    (tmp_path / "main.c").write_text(program)
    exe = tmp_path / "main_tsan"
    run(
        [
            "gcc", "-std=c11", "-O1", "-g", "-fsanitize=thread", *flags, "-pthread",
            "-I", package.source / "include", tmp_path / "main.c", build / "libcnn.a", "-lm", "-o", exe,
        ]
    )  # fmt: skip
    return run([exe], env=dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66"))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed")
def test_contexts_with_worker_threads_are_race_free_under_tsan(built, tmp_path):
    """8 contexts x 2 threads each (the object kernels' parallel loops on each context's
    pool), built with -fsanitize=thread: no race reported, results identical to serial."""
    result = _run_under_tsan(built("cnn"), tmp_path, PROGRAM, "-DWORKERS_PER_CONTEXT=2")
    assert "8 threads x 50 runs, 0 mismatches" in result.stdout
    # Each context's first two runs use its workers whatever the machine's load.
    assert int(result.stdout.split("runs with workers: ")[1].split()[0]) >= 16, result.stdout


ADAPTIVE_PROGRAM = r"""
#include <cnn/cnn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The run clock the package was built with (-DCNN_RUN_CLOCK=cnn_test_clock): each run
 * reads it at its start and end, and lasts what this test says for the way it went. */
static cnn_context* context;
static uint64_t now, parallel_ns, serial_ns;
static unsigned long reads;

uint64_t cnn_test_clock(void) {
  if (reads++ % 2 == 1) now += cnn_context_threads_used(context) > 1 ? parallel_ns : serial_ns;
  return now;
}

int main(void) {
  static float input[CNN_INPUT_PIXELS_NUM_ELEMENTS];
  float reference[CNN_OUTPUT_SCORES_NUM_ELEMENTS], out[CNN_OUTPUT_SCORES_NUM_ELEMENTS];
  cnn_inputs in = {input};
  cnn_outputs expected = {reference}, outs = {out};
  int r, busy_with_workers = 0, quiet_with_workers = 0, mismatches = 0;
  size_t i;
  for (i = 0; i < CNN_INPUT_PIXELS_NUM_ELEMENTS; ++i) input[i] = (float)(i % 13) / 6.0f - 1.0f;
  if (cnn_context_create(&context) != CNN_OK || cnn_run(context, &in, &expected) != CNN_OK) return 1;
  if (cnn_context_set_threads(context, 2) != CNN_OK) return 1;
  for (r = 0; r < 192; ++r) {
    /* Runs 0-63: the other core is busy (workers make a run slower); then it is free. */
    parallel_ns = r < 64 ? 10000000u : 3000000u;
    serial_ns = 6000000u;
    if (cnn_run(context, &in, &outs) != CNN_OK || memcmp(out, reference, sizeof(out)) != 0) ++mismatches;
    if (cnn_context_threads_used(context) > 1) {
      if (r >= 4 && r < 64) ++busy_with_workers;
      if (r >= 128) ++quiet_with_workers;
    }
  }
  printf("busy: %d of 60 runs with workers; quiet: %d of 64; %d mismatches\n", busy_with_workers,
         quiet_with_workers, mismatches);
  cnn_context_destroy(context);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed")
def test_a_context_runs_without_its_workers_while_they_make_runs_slower(built, tmp_path):
    """The pool times whole runs and goes the faster way, trying the other every 16th run.
    With run times scripted by a test clock: while runs with workers take longer (a busy
    machine) almost every run goes on the caller alone; once they are faster again, almost
    every run uses them. Outputs are the serial ones either way."""
    package = built("cnn")
    build = tmp_path / "scripted"
    configure_build(
        package.source, build, "-DCMAKE_C_FLAGS=-DCNN_RUN_CLOCK=cnn_test_clock",
        "-DCNN_BUILD_TESTS=OFF", "-DCNN_BUILD_TOOLS=OFF",
    )  # fmt: skip
    (tmp_path / "main.c").write_text(ADAPTIVE_PROGRAM)
    exe = tmp_path / "adaptive"
    run(
        [
            "gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
            "-I", package.source / "include", tmp_path / "main.c", build / "libcnn.a", "-lm", "-o", exe,
        ]
    )  # fmt: skip
    printed = run([exe]).stdout
    counts = re.search(r"busy: (\d+) of 60 runs with workers; quiet: (\d+) of 64; (\d+) mismatches", printed)
    assert counts, printed
    busy, quiet, mismatches = map(int, counts.groups())
    assert mismatches == 0, printed
    assert busy <= 60 // 8, printed  # the tries of the other way, every 16th run
    assert quiet >= 64 - 64 // 8, printed


POOL_PROGRAM = r"""
#include "cnn_internal.h"
#include <stdio.h>
#include <string.h>
#include <time.h>

#define THREADS 4 /* more than this machine's cores: workers get descheduled */
#define LOOPS 100
#define MAX_TASKS 64

static cnn_pool pool;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int ran_by[MAX_TASKS], order[MAX_TASKS], finished;

static int thread_index(void) {
  int i;
  for (i = 1; i < pool.threads; ++i) {
    if (pthread_equal(pthread_self(), pool.handles[i])) return i;
  }
  return 0; /* the caller */
}

static int task(int id, TVMParallelGroupEnv* env, void* data) {
  struct timespec pause = {0, 100000}; /* long enough for the workers to be awake */
  (void)env;
  (void)data;
  nanosleep(&pause, NULL);
  pthread_mutex_lock(&lock);
  ran_by[id] = thread_index();
  order[finished++] = id;
  pthread_mutex_unlock(&lock);
  return 0;
}

/* Thread t's range: the t-th of as equal ranges of the loop's tasks. */
static int range_of(int id, int tasks) {
  int t;
  for (t = 0; t < THREADS; ++t) {
    if (id < tasks * (t + 1) / THREADS) return t;
  }
  return -1;
}

int main(void) {
  int loop, i, t, tasks = THREADS * 4, at_home = 0, disorders = 0, lost = 0;
  if (cnn_pool_set_threads(&pool, THREADS) != CNN_OK) return 1;
  for (loop = 0; loop < LOOPS; ++loop) {
    int runs[MAX_TASKS] = {0};
    finished = 0;
    if (cnn_pool_run(&pool, task, NULL, 0) != 0) return 1;
    for (i = 0; i < finished; ++i) ++runs[order[i]];
    for (i = 0; i < tasks; ++i) lost += runs[i] != 1;
    for (i = 0; i < tasks; ++i) at_home += range_of(i, tasks) == ran_by[i];
    /* Each thread: its own range's tasks first, then the next ranges' in turn, each range's
     * in order (a task it ran breaks that order if it comes before the last one it ran). */
    for (t = 0; t < THREADS; ++t) {
      int last_turn = 0, last_task = -1;
      for (i = 0; i < finished; ++i) {
        int id = order[i], turn;
        if (ran_by[id] != t) continue;
        turn = (range_of(id, tasks) - t + THREADS) % THREADS;
        if (turn < last_turn || (turn == last_turn && id < last_task)) ++disorders;
        last_turn = turn;
        last_task = id;
      }
    }
  }
  cnn_pool_stop(&pool);
  printf("%d loops of %d tasks: %d lost or repeated, %d out of order, %d run at home\n", LOOPS, tasks, lost,
         disorders, at_home);
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is needed")
def test_pool_threads_claim_their_own_range_first_under_tsan(built, tmp_path):
    """The pool alone (its internal API), 4 threads on this 2-core machine, built with
    -fsanitize=thread: every task of every loop runs exactly once, and each thread runs its own
    range of tasks first, in order, then the other ranges in turn (so that each thread keeps
    to the part of the data it wrote, in its cache), with no race reported."""
    package = built("cnn")
    # the internal header, with the pool laid out as the library built it (with pthreads)
    result = _run_under_tsan(package, tmp_path, POOL_PROGRAM, "-DCNN_THREADS=1", "-I", package.source / "src")
    pattern = r"100 loops of 16 tasks: (\d+) lost or repeated, (\d+) out of order, (\d+) run at home"
    counts = re.search(pattern, result.stdout)
    assert counts, result.stdout
    lost, disorders, at_home = map(int, counts.groups())
    assert (lost, disorders) == (0, 0), result.stdout
    assert at_home > 0, result.stdout  # the caller's first task, at least, is its own
