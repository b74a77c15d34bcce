"""An AArch64 object set: the package cross-builds with Debian's aarch64 gcc and the shipped
CMake toolchain file (sample_apps/cross), and its golden test and cli (2 threads) pass under
qemu: the convolution schedules (conv_family) and the predicated matmul tiles and vectorized
math and the 1-D and 3-D convolutions (awkward_family)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from model_zoo import awkward_family, conv_family
from packaging_helpers import (
    SAMPLE_APPS,
    WARNINGS,
    configure_build,
    ctest,
    onnxruntime_outputs,
    relay2cmake,
    run,
)

CROSS = shutil.which("aarch64-linux-gnu-gcc")
QEMU = shutil.which("qemu-aarch64")


@pytest.mark.skipif(
    not (CROSS and QEMU), reason="needs gcc-aarch64-linux-gnu and qemu-user (tools/install_system_deps.sh)"
)
@pytest.mark.parametrize(
    ("make", "name", "shape"),
    [(conv_family, "Conv", (1, 3, 28, 28)), (awkward_family, "Awkward", (1, 13, 64))],
)
def test_aarch64_objects_cross_build_and_run_under_qemu(make, name, shape, tmp_path):
    model = tmp_path / "model.onnx"
    onnx.save(make(), str(model))
    package = tmp_path / "pkg"
    prefix = name.lower()
    relay2cmake("gen", str(model), "-o", str(package), "--name", name, "--target", "aarch64")
    assert (package / "objects" / "aarch64" / f"{prefix}_kernels.o").exists()
    build = tmp_path / "build"
    toolchain = SAMPLE_APPS / "cross" / "aarch64-linux-gnu.cmake"
    configure_build(package, build, f"-DCMAKE_TOOLCHAIN_FILE={toolchain}", f"-DCMAKE_C_FLAGS={WARNINGS}")
    members = run(["ar", "t", build / f"lib{prefix}.a"]).stdout.split()
    assert f"{prefix}_kernels.o" in members, f"the object set was not linked: {members}"
    run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])

    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    run([QEMU, "-L", "/usr/aarch64-linux-gnu", build / f"{prefix}_cli", "--threads", "2",
         "--output-dir", tmp_path / "out", tmp_path / "x.npy"])  # fmt: skip
    meta = json.loads((package / "metadata.json").read_text())
    for index, expected in enumerate(onnxruntime_outputs(model, meta, [x])):
        got = np.load(tmp_path / "out" / f"output_{index}.npy")
        np.testing.assert_allclose(
            got, expected, rtol=1e-4, atol=1e-5, err_msg=meta["outputs"][index]["name"]
        )
