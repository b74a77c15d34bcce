"""Properties of generated packages: self-contained libraries, determinism, metadata."""

from __future__ import annotations

import filecmp
import shutil
import subprocess

import numpy as np
import pytest
from packaging_helpers import cmake, configure_build, ctest, onnxruntime_outputs, relay2cmake, run


def _system_library_symbols() -> set[str]:
    """What libc and libm define, the linker's GOT symbol, glibc's thread-local accessor
    (in ld.so; the runtime keeps its per-thread current context in a thread-local), and the
    CPU model that ``__builtin_cpu_supports`` reads (libgcc / compiler-rt, which every gcc or
    clang link adds; the x86 objects' CPU check)."""
    names = {"_GLOBAL_OFFSET_TABLE_", "__tls_get_addr", "__cpu_model", "__cpu_indicator_init"}
    for library in ("libc.so.6", "libm.so.6"):
        path = run(["gcc", f"-print-file-name={library}"]).stdout.strip()
        for line in run(["nm", "-D", "--defined-only", "--format=posix", path]).stdout.splitlines():
            if line.strip():
                names.add(line.split()[0].split("@")[0])
    return names


ALLOWED_UNDEFINED = _system_library_symbols() if shutil.which("nm") and shutil.which("gcc") else set()


def _undefined_symbols(library) -> set[str]:
    """Symbols the library needs from elsewhere (an archive's members resolve each other)."""
    defined, undefined = set(), set()
    for line in run(["nm", "--format=posix", library]).stdout.splitlines():
        fields = line.split()
        if len(fields) < 2 or line.endswith(":"):
            continue
        name = fields[0].split("@")[0]
        (undefined if fields[1] in "Uw" else defined).add(name)
    return undefined - defined


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is needed")
@pytest.mark.parametrize(
    "model",
    ["cnn", pytest.param("mlp", marks=pytest.mark.slow), pytest.param("multi_io", marks=pytest.mark.slow)],
)
def test_static_library_needs_only_libc_and_libm(model, built):
    package = built(model)
    library = package.install / "lib" / f"lib{package.prefix}.a"
    undefined = _undefined_symbols(library)
    assert undefined, "nm saw no undefined symbols at all: the check itself is broken"
    assert not {s for s in undefined if "tvm" in s.lower() or "dlopen" in s or "TVM" in s}
    assert undefined <= ALLOWED_UNDEFINED, (
        f"unexpected undefined symbols: {sorted(undefined - ALLOWED_UNDEFINED)}"
    )


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is needed")
def test_shared_library_exports_only_the_prefixed_api(built, tmp_path):
    package = built("mlp")
    build = tmp_path / "shared"
    configure_build(package.source, build, "-DBUILD_SHARED_LIBS=ON")
    library = next(build.glob(f"lib{package.prefix}.so*"))
    exported = run(["nm", "-D", "--defined-only", "--format=posix", library]).stdout.split("\n")
    names = {line.split()[0] for line in exported if line.strip()}
    assert names, "no exported symbols found"
    assert all(name.startswith(f"{package.prefix}_") for name in names), sorted(names)
    undefined = _undefined_symbols(library)
    assert "dlopen" not in undefined
    assert not {s for s in undefined if "tvm" in s.lower()}


def test_generation_is_deterministic_across_runs_and_paths(zoo_dir, tmp_path):
    first, second = tmp_path / "a" / "pkg", tmp_path / "elsewhere" / "deeper" / "pkg"
    for out in (first, second):
        relay2cmake("gen", str(zoo_dir / "cnn.onnx"), "-o", str(out), "--name", "Cnn")
    comparison = filecmp.dircmp(first, second)
    _assert_same_tree(comparison)


def _assert_same_tree(comparison: filecmp.dircmp) -> None:
    assert not comparison.left_only and not comparison.right_only
    _, mismatch, errors = filecmp.cmpfiles(
        comparison.left, comparison.right, comparison.common_files, shallow=False
    )
    assert not mismatch and not errors, mismatch
    for sub in comparison.subdirs.values():
        _assert_same_tree(sub)


def test_metadata_describes_the_package(built):
    package = built("multi_io")
    meta = package.metadata
    assert meta["package"] == {"name": "MultiIo", "prefix": "multiio", "version": "1.0.0"}
    assert [i["name"] for i in meta["inputs"]] == ["features", "offsets"]
    assert meta["outputs"][1] == {
        "name": "total",
        "c_name": "total",
        "dtype": "float32",
        "shape": [],
        "bytes": 4,
    }
    assert meta["memory"]["arena_bytes"] > 0 and meta["memory"]["weight_bytes"] == 96
    assert meta["targets"] == ["c", "x86_64:x86-64-v3", "x86_64:x86-64-v4"]  # v4: the AVX-512 twin
    assert meta["tvm_version"].startswith("0.27")
    assert "MatMul" in meta["model"]["operators"]
    assert (package.install / "share" / "multiio" / "metadata.json").exists()


def test_add_subdirectory_consumer(built, tmp_path):
    """Two different packages vendored with add_subdirectory link into one program (no symbol
    clashes) and both compute what ONNX Runtime computes."""
    first, second = built("mlp"), built("cnn")
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(two LANGUAGES C)\n"
        f"add_subdirectory({first.source} mlp)\nadd_subdirectory({second.source} cnn)\n"
        "add_executable(two main.c)\ntarget_link_libraries(two PRIVATE Mlp::Mlp Cnn::Cnn)\n"
    )
    (tmp_path / "app" / "main.c").write_text(
        "#include <mlp/mlp.h>\n#include <cnn/cnn.h>\n#include <stdio.h>\n"
        "int main(void) {\n  mlp_context* a; cnn_context* b; int i;\n"
        "  static float image[784], probabilities[10], pixels[3*32*32], scores[5];\n"
        "  mlp_inputs ai = {image}; mlp_outputs ao = {probabilities};\n"
        "  cnn_inputs bi = {pixels}; cnn_outputs bo = {scores};\n"
        "  for (i = 0; i < 784; ++i) image[i] = (float)(i % 17) / 17.0f;\n"
        "  for (i = 0; i < 3*32*32; ++i) pixels[i] = (float)(i % 13) / 13.0f - 0.5f;\n"
        "  if (mlp_context_create(&a) || cnn_context_create(&b)) return 1;\n"
        "  if (mlp_run(a, &ai, &ao) || cnn_run(b, &bi, &bo)) return 2;\n"
        '  for (i = 0; i < 10; ++i) printf("%.9g ", probabilities[i]);\n'
        '  for (i = 0; i < 5; ++i) printf("%.9g ", scores[i]);\n'
        "  mlp_context_destroy(a); cnn_context_destroy(b);\n  return 0;\n}\n"
    )
    configure_build(tmp_path / "app", tmp_path / "build", "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror")
    assert not (tmp_path / "build" / "mlp" / "mlp_cli").exists(), "tools must be off when not top-level"
    result = subprocess.run([tmp_path / "build" / "two"], capture_output=True, text=True, check=True)
    values = np.array(result.stdout.split(), dtype=np.float32)
    image = (np.arange(784) % 17 / 17).astype(np.float32).reshape(1, 784)
    pixels = (np.arange(3 * 32 * 32) % 13 / 13 - 0.5).astype(np.float32).reshape(1, 3, 32, 32)
    expected_mlp = onnxruntime_outputs(first.model, first.metadata, [image])[0].reshape(-1)
    expected_cnn = onnxruntime_outputs(second.model, second.metadata, [pixels])[0].reshape(-1)
    np.testing.assert_allclose(values[:10], expected_mlp, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(values[10:], expected_cnn, rtol=1e-4, atol=1e-5)


def test_installed_package_is_relocatable(built, tmp_path):
    """Move the install prefix after installing; consumers still find and link it."""
    package = built("reshape_view")
    moved = tmp_path / "somewhere" / "else"
    shutil.copytree(package.install, moved)
    from packaging_helpers import SAMPLE_APPS

    configure_build(
        SAMPLE_APPS / "c_consumer",
        tmp_path / "app",
        f"-DMODEL_PACKAGE={package.name}",
        f"-DMODEL_PREFIX={package.prefix}",
        f"-DCMAKE_PREFIX_PATH={moved}",
    )
    config = (moved / "lib" / "cmake" / package.name / f"{package.name}Targets.cmake").read_text()
    assert str(package.install) not in config
    cache = (tmp_path / "app" / "CMakeCache.txt").read_text()
    assert f"{package.name}_DIR:PATH={moved}/lib/cmake/{package.name}" in cache


def test_shared_library_consumer(built, tmp_path):
    """BUILD_SHARED_LIBS=ON: install, consume with find_package, run."""
    package = built("passthrough")
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    configure_build(package.source, build, "-DBUILD_SHARED_LIBS=ON", "-DCMAKE_C_FLAGS=-Wall -Wextra -Werror")
    run([ctest(), "--test-dir", build, "--no-tests=error", "--output-on-failure"])
    run([cmake(), "--install", build, "--prefix", prefix])
    assert list((prefix / "lib").glob(f"lib{package.prefix}.so*"))
    from packaging_helpers import SAMPLE_APPS

    configure_build(
        SAMPLE_APPS / "c_consumer",
        tmp_path / "app",
        f"-DMODEL_PACKAGE={package.name}",
        f"-DMODEL_PREFIX={package.prefix}",
        f"-DCMAKE_PREFIX_PATH={prefix}",
    )
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "in" / "input_0.bin").write_bytes(bytes(40))
    result = run([tmp_path / "app" / "c_consumer", tmp_path / "in", tmp_path / "out"])
    assert "output 2 'table'" in result.stdout
