"""Generated code compiles warning-free with gcc and clang as C99 and C11, and the C++
wrapper works inside C++17/C++20 programs using the named, typed accessors."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from packaging_helpers import onnxruntime_outputs, random_inputs, run

COMPILERS = [c for c in ("gcc", "clang") if shutil.which(c)]
STRICT = ["-Wall", "-Wextra", "-Werror", "-O1"]


def _has_float16(compiler: str) -> bool:
    macros = run([compiler, "-dM", "-E", "-x", "c", "/dev/null"]).stdout
    return "__FLT16_MAX__" in macros


@pytest.mark.parametrize("compiler", COMPILERS)
@pytest.mark.parametrize("standard", ["c99", "c11"])
@pytest.mark.parametrize("model", ["cnn", "multi_io", "all_dtypes", "data_dependent"])
def test_generated_c_compiles_cleanly(compiler, standard, model, built, tmp_path):
    package = built(model)
    if model == "all_dtypes" and not _has_float16(compiler):
        # float16 kernels need _Float16 (clang >= 15); older compilers get a clear #error.
        kernels = package.source / "src" / f"{package.prefix}_kernels.c"
        failed = run([compiler, f"-std={standard}", "-I", package.source / "include", "-c", kernels,
                      "-o", tmp_path / "k.o"], check=False)  # fmt: skip
        assert failed.returncode != 0 and "build it with a compiler that has _Float16" in failed.stderr
        return
    sources = sorted((package.source / "src").glob("*.c")) + sorted((package.source / "tools").glob("*.c"))
    sources += sorted((package.source / "tests").glob("*.c"))
    for source in sources:
        run(
            [
                compiler,
                f"-std={standard}",
                *STRICT,
                "-I",
                package.source / "include",
                "-I",
                package.source / "src",
                "-I",
                package.source / "tools",
                "-c",
                source,
                "-o",
                tmp_path / (source.stem + ".o"),
            ]
        )


CPP_PROGRAM = r"""
#include <multiio/multiio.hpp>
#include <cstdio>
#include <fstream>
#include <vector>

static_assert(multiio::input::features::shape[0] == 3, "shape in the header");
static_assert(multiio::output::total::num_elements == 1, "0-d output");
static_assert(std::is_same<multiio::input::offsets::type, std::int32_t>::value, "typed input");

template <typename T>
std::vector<T> load(const char* path, std::size_t count) {
  std::vector<T> data(count);
  std::ifstream(path, std::ios::binary).read(reinterpret_cast<char*>(data.data()), count * sizeof(T));
  return data;
}

int main(int, char** argv) {
  auto features = load<float>(argv[1], multiio::input::features::num_elements);
  auto offsets = load<std::int32_t>(argv[2], multiio::input::offsets::num_elements);
  multiio::Model model;
  multiio::OutputVectors out = model.run({features, offsets});
  // A wrong size is an exception, not a crash.
  std::vector<float> short_buffer(2);
  try {
    multiio::Outputs bad{short_buffer, out.total, out.offsets_squared};
    model.run({features, offsets}, bad);
    return 3;
  } catch (const multiio::Error& e) {
    if (e.status() != MULTIIO_ERROR_SIZE_MISMATCH) return 4;
  }
  // No-malloc construction, moved into another object.
  alignas(64) static unsigned char workspace[multiio::Model::workspace_bytes];
  multiio::Model fixed(workspace, sizeof(workspace));
  multiio::Model moved = std::move(fixed);
  multiio::OutputVectors again = moved.run({features, offsets});
  if (again.activation != out.activation) return 5;
  auto save = [](const char* path, const void* data, std::size_t bytes) {
    std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), bytes);
  };
  save(argv[3], out.activation.data(), out.activation.size() * 4);
  save(argv[4], out.total.data(), 4);
  save(argv[5], out.offsets_squared.data(), out.offsets_squared.size() * 4);
  return 0;
}
"""


@pytest.mark.parametrize("compiler", [c for c in ("g++", "clang++") if shutil.which(c)])
@pytest.mark.parametrize("standard", ["c++17", "c++20"])
def test_cpp_wrapper_named_accessors(compiler, standard, built, tmp_path):
    package = built("multi_io")
    program = tmp_path / "main.cpp"
    program.write_text(CPP_PROGRAM)
    exe = tmp_path / "main"
    run(
        [
            compiler,
            f"-std={standard}",
            *STRICT,
            "-I",
            package.install / "include",
            program,
            "-L",
            package.install / "lib",
            f"-l{package.prefix}",
            "-lm",
            "-o",
            exe,
        ]
    )
    inputs = random_inputs(package.metadata, seed=5)
    paths = [tmp_path / f"in{i}.bin" for i in range(2)] + [tmp_path / f"out{i}.bin" for i in range(3)]
    for array, path in zip(inputs, paths, strict=False):
        array.tofile(path)
    run([exe, *paths])
    expected = onnxruntime_outputs(package.model, package.metadata, inputs)
    np.testing.assert_allclose(
        np.fromfile(paths[2], np.float32).reshape(3, 4), expected[0], rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(np.fromfile(paths[3], np.float32)[0], expected[1], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(np.fromfile(paths[4], np.int32).reshape(3, 4), expected[2])
