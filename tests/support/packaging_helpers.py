"""Drive the real tools the way a user does: relay2cmake gen, CMake, the compilers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
SAMPLE_APPS = REPO / "sample_apps"
WARNINGS = "-Wall -Wextra -Werror"


# C for test programs of the C API: every heap call in the process counted while `counting`
# is set, and EXPECT(cond), which fails the program with the line. Interposition: the
# program's own allocator entry points win over libc's for every caller in the process (the
# library, libc, libpthread); glibc's __libc_* do the work.
HEAP_COUNTING_PRELUDE = r"""
#include <stdint.h>
#include <stdio.h>
#include <string.h>

extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void __libc_free(void*);
static volatile int counting;
static volatile long heap_calls;
void* malloc(size_t n) { heap_calls += counting; return __libc_malloc(n); }
void* calloc(size_t n, size_t size) { heap_calls += counting; return __libc_calloc(n, size); }
void* realloc(void* p, size_t n) { heap_calls += counting; return __libc_realloc(p, n); }
void free(void* p) { heap_calls += counting && p != NULL; __libc_free(p); }

#define EXPECT(cond)                                                \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "line %d: expected %s\n", __LINE__, #cond);   \
      return 1;                                                     \
    }                                                               \
  } while (0)
"""


def cmake() -> str:
    """The cmake of the active environment (the PyPI wheel) before the system's."""
    local = Path(sys.executable).parent / "cmake"
    return str(local) if local.exists() else shutil.which("cmake") or "cmake"


def ctest() -> str:
    local = Path(sys.executable).parent / "ctest"
    return str(local) if local.exists() else shutil.which("ctest") or "ctest"


def run(
    cmd: list[str], cwd: Path | None = None, env: dict | None = None, check: bool = True
) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"command failed ({result.returncode}): {' '.join(map(str, cmd))}\n"
            f"--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
        )
    return result


def relay2cmake(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "relay2cmake", *args], check=check)


def fails_cleanly(*args: str) -> str:
    """Run a relay2cmake command in-process (TVM is imported once per test session, not per
    case); it must exit 1 with exactly one ``error:`` line and no traceback. Returns the
    message after ``error: ``."""
    from typer.testing import CliRunner

    from relay2cmake.cli import app

    result = CliRunner().invoke(app, [str(a) for a in args])
    # Only typer's own exit may escape the command: anything else is an internal error.
    assert isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert result.output.count("error: ") == 1, result.output
    return result.output.split("error: ", 1)[1]


def configure_build(source: Path, build: Path, *definitions: str, generator: str = "Ninja") -> None:
    gen = ["-G", generator] if shutil.which("ninja") else []
    run([cmake(), "-S", source, "-B", build, *gen, "-DCMAKE_BUILD_TYPE=Release", *definitions])
    run([cmake(), "--build", build, "--parallel", "2"])


@dataclass(frozen=True)
class BuiltPackage:
    model: Path
    name: str
    prefix: str
    source: Path  # the generated package
    build: Path
    install: Path  # install prefix

    @property
    def metadata(self) -> dict:
        return json.loads((self.source / "metadata.json").read_text())

    @property
    def cli(self) -> Path:
        """The build folder's cli (a static build does not install it: see install-rules)."""
        return self.build / f"{self.prefix}_cli"


def build_package(model: Path, work: Path, name: str, extra: list[str]) -> BuiltPackage:
    source = work / "pkg"
    relay2cmake("gen", str(model), "-o", str(source), "--name", name, *extra)
    build, install = work / "build", work / "install"
    configure_build(source, build, f"-DCMAKE_C_FLAGS={WARNINGS}")
    run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    run([cmake(), "--install", build, "--prefix", install])
    return BuiltPackage(model, name, name.lower(), source, build, install)


def build_program(package: BuiltPackage, source: str, path: Path) -> Path:
    """Compiles a C (``.c``, C11) or C++ (``.cpp``, C++17) test program against the installed
    static library, warning-free; returns the executable."""
    path.write_text(source)
    compiler, standard = ("g++", "-std=c++17") if path.suffix == ".cpp" else ("gcc", "-std=c11")
    exe = path.with_suffix("")
    run(
        [
            compiler, standard, *WARNINGS.split(), "-I", package.install / "include", path,
            package.install / "lib" / f"lib{package.prefix}.a", "-lm", "-lpthread", "-o", exe,
        ]
    )  # fmt: skip
    return exe


def write_inputs(directory: Path, arrays: list[np.ndarray]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for index, array in enumerate(arrays):
        np.ascontiguousarray(array).tofile(directory / f"input_{index}.bin")


def read_outputs(directory: Path, metadata: dict) -> list[np.ndarray]:
    from relay2cmake.dtypes import numpy_dtype

    arrays = []
    for i, spec in enumerate(metadata["outputs"]):
        shape = list(spec["shape"])
        if "dynamic_axis" in spec:  # a bounded output: its extent is what the file holds
            shape[spec["dynamic_axis"]] = -1
        arrays.append(
            np.fromfile(directory / f"output_{i}.bin", dtype=numpy_dtype(spec["dtype"])).reshape(shape)
        )
    return arrays


def random_inputs(metadata: dict, seed: int) -> list[np.ndarray]:
    from relay2cmake.dtypes import numpy_dtype

    rng = np.random.default_rng(seed)
    arrays = []
    for spec in metadata["inputs"]:
        dtype = numpy_dtype(spec["dtype"])
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(spec["shape"]).astype(dtype))
        else:
            arrays.append(rng.integers(-3, 4, spec["shape"]).astype(dtype))
    return arrays


def onnxruntime_reference(model: Path):
    """An ONNX Runtime session to compare with: its 8-bit sums exact on every x86 machine
    (``ONNXRUNTIME_EXACT_INTEGERS``), as the package's are."""
    import onnxruntime

    from relay2cmake.frontends.onnx import ONNXRUNTIME_EXACT_INTEGERS

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry(*ONNXRUNTIME_EXACT_INTEGERS)
    return onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])


def onnxruntime_outputs(model: Path, metadata: dict, inputs: list[np.ndarray]) -> list[np.ndarray]:
    session = onnxruntime_reference(model)
    feeds = {spec["name"]: array for spec, array in zip(metadata["inputs"], inputs, strict=True)}
    return session.run([o["name"] for o in metadata["outputs"]], feeds)


def build_sample_app(app: str, package: BuiltPackage, work: Path) -> Path:
    build = work / f"{app}_build"
    flags = f"-DCMAKE_{'CXX' if 'cpp' in app else 'C'}_FLAGS={WARNINGS}"
    configure_build(
        SAMPLE_APPS / app,
        build,
        f"-DMODEL_PACKAGE={package.name}",
        f"-DMODEL_PREFIX={package.prefix}",
        f"-DCMAKE_PREFIX_PATH={package.install}",
        flags,
    )
    return build / app


def clean_env() -> dict:
    """An environment without the build's variables, as a user's shell would have."""
    return {k: v for k, v in os.environ.items() if not k.startswith("CMAKE_")}


def call_kernel(func, arrays: list[np.ndarray]) -> np.ndarray:
    """Builds one PrimFunc as gen does for this machine's x86 kernel set (the AVX-512 twin
    where the CPU has it), calls it on ``arrays`` and returns the last one (the output) afterwards."""
    import tvm

    from relay2cmake.lower.pipeline import build_kernels
    from relay2cmake.targets import host_runs_wide, parse_targets

    target = parse_targets(["x86_64"])[-1]
    if host_runs_wide():
        target = target.wide_variant()
    library = build_kernels(tvm.IRModule({"main": func}), target.tvm_target(), "the kernel")
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    library["main"](*tensors)
    return tensors[-1].numpy()
