"""The package where Python and TVM never run: cross-built for aarch64 Linux with the shipped
Conan profile (golden test and test_package under qemu), and for a bare-metal Cortex-M4F with
the shipped toolchain file, linked into a minimal firmware image."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from packaging_helpers import SAMPLE_APPS, WARNINGS, cmake, relay2cmake, run

from relay2cmake.samples import DIGITS_MODEL

CROSS = SAMPLE_APPS / "cross"
AARCH64_TOOLS = all(shutil.which(t) for t in ("aarch64-linux-gnu-gcc", "qemu-aarch64"))
ARM_NONE_EABI = shutil.which("arm-none-eabi-gcc")

# What the library may take from a bare-metal C library: memory and string helpers, libm,
# and the compiler's runtime. No malloc, stdio, files or threads.
FREESTANDING = re.compile(r"^(mem(cpy|set|move)|strlen|[a-z0-9]+f|__aeabi_\w+)$")


@pytest.mark.skipif(not AARCH64_TOOLS, reason="needs gcc-aarch64-linux-gnu and qemu-user")
def test_conan_create_for_aarch64_runs_its_tests_under_qemu(tmp_path):
    package = tmp_path / "pkg"
    relay2cmake("gen", str(DIGITS_MODEL), "-o", str(package), "--name", "Digits", "--target", "aarch64")
    env = dict(os.environ, CONAN_HOME=str(tmp_path / "conan_home"))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    run(["conan", "profile", "detect"], env=env)
    run(["conan", "remote", "disable", "*"], env=env)
    profile = CROSS / "aarch64-linux-gnu.profile"
    result = run(["conan", "create", package, "-pr:h", profile, "-pr:b", "default"], env=env)
    log = result.stdout + result.stderr
    assert "Digits: kernels for aarch64:generic" in log, "the aarch64 object set was not chosen"
    assert re.search(r"digits_golden \.+\s+Passed", log), "the package's golden test did not run"
    assert re.search(r"Test\s+#1: golden \.+\s+Passed", log), "test_package did not run"
    tests = "".join(p.read_text() for p in tmp_path.rglob("CTestTestfile.cmake"))
    assert tests.count('"qemu-aarch64"') == 2, "both tests ran in the emulator"


@pytest.mark.skipif(not ARM_NONE_EABI, reason="needs gcc-arm-none-eabi")
def test_bare_metal_cortex_m4f_firmware_links(tmp_path):
    package = tmp_path / "pkg"
    relay2cmake("gen", str(DIGITS_MODEL), "-o", str(package), "--name", "Digits")
    build = tmp_path / "build"
    # CFLAGS adds to the toolchain file's CPU flags (CMAKE_C_FLAGS on the command line would
    # replace them).
    env = dict(os.environ, CFLAGS=WARNINGS)
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    configure = [cmake(), "-S", SAMPLE_APPS / "firmware", "-B", build, *gen, "-DCMAKE_BUILD_TYPE=MinSizeRel",
                 f"-DCMAKE_TOOLCHAIN_FILE={CROSS / 'cortex-m4f.cmake'}", f"-DMODEL_PACKAGE_DIR={package}",
                 "-DMODEL_PREFIX=digits"]  # fmt: skip
    log = run(configure, env=env).stdout
    assert "Digits: kernels for c" in log
    run([cmake(), "--build", build], env=env)
    firmware = build / "firmware.elf"
    library = build / "model" / "libdigits.a"
    assert not list(build.rglob("digits_cli*")) and not list(build.rglob("digits_golden*")), "no programs"

    attributes = run(["arm-none-eabi-readelf", "-A", firmware]).stdout
    assert 'Tag_CPU_name: "7E-M"' in attributes and "Tag_ABI_VFP_args: VFP registers" in attributes

    undefined = set(run(["arm-none-eabi-nm", "-u", "--format=just-symbols", library]).stdout.split())
    own = {s for s in undefined if s.startswith(("digits_", "__tvm_ffi_digits_"))}
    foreign = sorted(s for s in undefined - own if not FREESTANDING.match(s))
    assert not foreign, f"the library needs more than a freestanding C library: {foreign}"
    assert not any(s in undefined for s in ("malloc", "free", "pthread_create", "snprintf", "fopen"))

    sizes = run(["arm-none-eabi-size", firmware]).stdout.splitlines()[1].split()
    text, data, bss = (int(v) for v in sizes[:3])
    weights = json.loads((package / "metadata.json").read_text())["memory"]["weight_bytes"]  # const: .text
    assert weights < text < weights + 64 * 1024, f"code besides the weights: {text - weights} bytes"
    print(f"firmware.elf text={text} data={data} bss={bss}")
