"""Subnormal floats: IEEE by default (results as ONNX Runtime's); flushed to zero while a run
computes when the package is built with <P>_FLUSH_SUBNORMALS=ON, on the caller's thread and
the workers', with the caller's floating-point mode given back after every run."""

from __future__ import annotations

import platform
import shutil

import numpy as np
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper
from packaging_helpers import SAMPLE_APPS, configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate

ELEMENTS = 1 << 20  # an elementwise kernel long enough that the worker always takes tasks

PROGRAM = r"""
#include <flush/flush.h>
#include <stdint.h>
#include <stdio.h>

#if defined(__aarch64__)
#define MODE_BITS (1u << 24) /* FPCR.FZ */
static unsigned get_mode(void) {
  uint64_t fpcr;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
  return (unsigned)fpcr;
}
static void set_mode(unsigned mode) {
  uint64_t fpcr = mode;
  __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr));
}
#else
#include <xmmintrin.h>
#define MODE_BITS 0x8040u /* MXCSR: FTZ, DAZ */
static unsigned get_mode(void) { return _mm_getcsr(); }
static void set_mode(unsigned mode) { _mm_setcsr(mode); }
#endif

#define N FLUSH_INPUT_X_NUM_ELEMENTS
static float x[N], half[N], sign[N];

static size_t nonzero(const float* values) {
  size_t i, count = 0;
  for (i = 0; i < N; ++i) count += values[i] != 0.0f;
  return count;
}

/* `runs` runs on a new context with `threads` threads, the caller's mode bits set to `mode`:
 * the most nonzero values any run gave. */
static int run_context(int threads, unsigned mode, int runs) {
  flush_context* context;
  flush_inputs in = {x};
  flush_outputs out = {half, sign};
  size_t half_nonzero = 0, sign_nonzero = 0;
  unsigned after = 0;
  int r;
  if (flush_context_create(&context) != FLUSH_OK) return 1;
  if (flush_context_set_threads(context, threads) != FLUSH_OK) return 1;
  for (r = 0; r < runs; ++r) {
    set_mode((get_mode() & ~MODE_BITS) | mode);
    if (flush_run(context, &in, &out) != FLUSH_OK) return 1;
    after |= get_mode() & MODE_BITS;
    if (nonzero(half) > half_nonzero) half_nonzero = nonzero(half);
    if (nonzero(sign) > sign_nonzero) sign_nonzero = nonzero(sign);
  }
  printf("threads %d mode %#x: half nonzero %zu, sign nonzero %zu, mode after %#x, used %d\n", threads,
         mode, half_nonzero, sign_nonzero, after, flush_context_threads_used(context));
  flush_context_destroy(context);
  return 0;
}

int main(void) {
  size_t i;
  for (i = 0; i < N; ++i) x[i] = i % 2 ? 1e-39f : 2e-38f; /* subnormal, normal */
  return run_context(1, 0, 1) || run_context(2, 0, 20) || run_context(1, MODE_BITS, 1);
}
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    work = tmp_path_factory.mktemp("subnormals")
    nodes = [
        helper.make_node("Mul", ["x", "half_const"], ["half"]),
        helper.make_node("Sign", ["x"], ["sign"]),
    ]
    graph = helper.make_graph(
        nodes,
        "flush",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ELEMENTS])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [ELEMENTS]) for n in ("half", "sign")],
        [helper.make_tensor("half_const", TensorProto.FLOAT, [1], [0.5])],
    )
    return save_model(graph, work / "flush.onnx", 17)


def _package(model, arch: str):
    """The model's package with ``arch``'s object kernels (their parallel loops run on the
    workers; the portable C kernels have none)."""
    out = model.parent / f"pkg_{arch}"
    if not out.exists():
        generate(GenerateOptions(model=model, out=out, name="Flush", self_check=False, targets=(arch,)))
    return out


CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")
X86_HOST = platform.machine() in ("x86_64", "AMD64") and shutil.which("gcc") is not None
ARCHES = [
    pytest.param("x86_64", 0x8040, marks=pytest.mark.skipif(not X86_HOST, reason="an x86-64 host, gcc")),
    pytest.param(
        "aarch64",
        1 << 24,
        marks=pytest.mark.skipif(not (X86_HOST and CROSS and QEMU), reason="aarch64 gcc and qemu-user"),
    ),
]


@pytest.mark.parametrize(("arch", "mode_bits"), ARCHES)
@pytest.mark.parametrize("flush", [False, True])
def test_subnormals_flushed_only_when_asked_and_the_callers_mode_restored(
    model, tmp_path, arch, mode_bits, flush
):
    """x86-64 natively (MXCSR's FTZ and DAZ); AArch64 cross-built, run under qemu (FPCR.FZ)."""
    package = _package(model, arch)
    build = tmp_path / "build"
    option = f"-DFLUSH_FLUSH_SUBNORMALS={'ON' if flush else 'OFF'}"
    every_run_on_workers = "-DCMAKE_C_FLAGS=-DFLUSH_ADAPTIVE_THREADS=0"
    no_programs = ("-DFLUSH_BUILD_TESTS=OFF", "-DFLUSH_BUILD_TOOLS=OFF")
    cross = (
        [f"-DCMAKE_TOOLCHAIN_FILE={SAMPLE_APPS / 'cross' / 'aarch64-linux-gnu.cmake'}"]
        if arch == "aarch64"
        else []
    )
    configure_build(package, build, option, every_run_on_workers, *no_programs, *cross)
    (tmp_path / "main.c").write_text(PROGRAM)
    exe = tmp_path / "main"
    run(
        [
            CROSS if arch == "aarch64" else "gcc", "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror",
            "-pthread", "-I", package / "include", tmp_path / "main.c", build / "libflush.a", "-lm",
            "-o", exe,
        ]
    )  # fmt: skip
    lines = run(
        [QEMU, "-L", "/usr/aarch64-linux-gnu", exe] if arch == "aarch64" else [exe]
    ).stdout.splitlines()
    half = ELEMENTS // 2
    # Flushed: 1e-39 reads as 0 (its sign too), 2e-38 * 0.5 = 1e-38 is written as 0, on the
    # caller's thread and on the worker (20 runs on both threads).
    flushed = f"half nonzero 0, sign nonzero {half}"
    kept = f"half nonzero {ELEMENTS}, sign nonzero {ELEMENTS}"
    nonzero = flushed if flush else kept
    assert lines == [
        f"threads 1 mode 0: {nonzero}, mode after 0, used 1",
        f"threads 2 mode 0: {nonzero}, mode after 0, used 2",
        f"threads 1 mode {mode_bits:#x}: {flushed}, mode after {mode_bits:#x}, used 1",
    ], lines
    assert np.float32(2e-38) * np.float32(0.5) != 0  # the model's products are subnormal in IEEE
