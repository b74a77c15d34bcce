"""Generated packages run clean under AddressSanitizer + UndefinedBehaviorSanitizer and
under valgrind, with the scheduled object kernels and with the portable C kernels."""

from __future__ import annotations

import shutil

import pytest
from model_zoo import MODELS, package_name
from packaging_helpers import configure_build, ctest, run

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
# In the default run: a CNN through objects, every I/O dtype through C, the builtins (sort,
# NonMaxSuppression, NonZero, Unique, Compress) through C, the MLP's softmax (fast_math's
# exponential, whose bit shifts once overflowed an int32 in C) through C; the rest of the zoo
# with `-m slow`.
QUICK = {
    ("cnn", "objects"),
    ("all_dtypes", "c"),
    ("multi_io", "objects"),
    ("data_dependent", "c"),
    ("mlp", "c"),
}
CASES = [
    pytest.param(model, kernels, marks=() if (model, kernels) in QUICK else pytest.mark.slow)
    for model in MODELS
    for kernels in ("objects", "c")
]


@pytest.mark.parametrize(("model", "kernels"), CASES)
def test_golden_run_is_sanitizer_clean(built, model, kernels, tmp_path):
    package = built(model)
    build = tmp_path / "asan"
    name = package_name(model)
    configure_build(
        package.source, build, f"-DCMAKE_C_FLAGS={SANITIZE}", f"-DCMAKE_EXE_LINKER_FLAGS={SANITIZE}",
        f"-D{name.upper()}_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}",
        "-DCMAKE_BUILD_TYPE=Debug",
    )  # fmt: skip
    result = run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    assert "Sanitizer" not in result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (tools/install_system_deps.sh)")
@pytest.mark.parametrize("kernels", ["objects", "c"])
def test_cli_is_valgrind_clean(built, kernels, tmp_path):
    package = built("cnn")
    build = tmp_path / "plain"
    configure_build(package.source, build, f"-DCNN_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}")
    run([
        "valgrind", "--error-exitcode=1", "--leak-check=full", "--errors-for-leak-kinds=definite",
        build / "cnn_cli", "--threads", "2", "--output-dir", tmp_path / "out",
        package.source / "tests" / "golden" / "input_0.npy",
    ])  # fmt: skip
