"""The default schedules (LLVM object kernels) compute what ONNX Runtime computes, with 1
and 2 threads, in both x86 sets (the AVX-512 twin where the CPU has it, x86-64-v3 in qemu's
Haswell), and the portable C kernels of the same package agree. Speed is measured by
benchmarks/, never here."""

from __future__ import annotations

import shutil

import numpy as np
import onnx
import pytest
from model_zoo import awkward_family, conv_family, dense_family
from packaging_helpers import (
    build_package,
    configure_build,
    onnxruntime_outputs,
    random_inputs,
    run,
)

from relay2cmake.targets import host_runs_wide

FAMILIES = {
    "conv_family": (conv_family, 5),
    "dense_family": (dense_family, 5),
    "awkward_family": (awkward_family, 4),
}
QEMU_X86 = shutil.which("qemu-x86_64")
HOST_AVX512 = host_runs_wide()  # the same test the package makes: AVX-512 F/BW/DQ/VL


@pytest.mark.parametrize(
    "family",
    # dense_family takes 2 minutes on 2 cores; the real-model slice's transformers cover matmuls.
    [pytest.param(f, marks=pytest.mark.slow if f == "dense_family" else ()) for f in sorted(FAMILIES)],
)
def test_scheduled_kernels_match_onnxruntime(family, tmp_path):
    make, expected_scheduled = FAMILIES[family]
    model = tmp_path / f"{family}.onnx"
    onnx.save(make(), str(model))
    name = "".join(part.capitalize() for part in family.split("_"))
    package = build_package(model, tmp_path / "work", name, ["--target", "x86_64"])
    meta = package.metadata
    scheduled = meta["scheduled_kernels"]["x86_64"]
    assert len(scheduled) >= expected_scheduled, f"the patterns matched only {scheduled}"
    if family == "conv_family":  # the 3x3 stride-1 conv on 14 x 14 (the others are 7 x 7)
        assert sum(name.startswith("winograd_product") for name in scheduled) == 1, scheduled
        assert any("group_conv2d_nhwc" in name for name in scheduled), scheduled
        assert "repeat" in scheduled, scheduled  # the channel multiplier's
        # two groups of 24 inputs and 32 outputs: a regular conv per group, on its slice
        assert sum(name.startswith("strided_slice") for name in meta["kernels"]) == 2, meta["kernels"]
        # squeeze-excite: the sigmoid's conv and the image times its scales, one kernel
        assert any("conv2d_nhwc" in name and name.endswith("multiply") for name in scheduled), scheduled
    if family == "awkward_family":  # the 1-D convolution runs as our 2-D one of height 1
        assert "conv2d_nhwc" in scheduled, scheduled
        # hard-swish's clip passed the channels-last conversion (as min/max) and fused
        assert not any("clip" in kernel for kernel in meta["kernels"]), meta["kernels"]
        assert any("avg_pool3d" in name for name in scheduled), scheduled  # the LRN's window
        assert {"max", "argmax"} <= set(scheduled), scheduled  # over rows of 37
        # the 3-D convolutions run as 2-D ones (TVM's conv3d has no schedule: scalar loops)
        assert not any("conv3d" in kernel for kernel in meta["kernels"]), meta["kernels"]
        assert not any("einsum" in kernel for kernel in meta["kernels"]), meta["kernels"]  # a matmul
        assert any("variance" in name for name in scheduled), scheduled  # rows of 37, predicated
    # Only the 1,500-class softmax gives up its parallel loops (its row buffer is scratch).
    assert meta["serial_kernels"]["x86_64"] == (["softmax1"] if family == "dense_family" else [])

    portable = tmp_path / "portable"
    configure_build(package.source, portable, f"-D{name.upper()}_PORTABLE_KERNELS=ON")
    inputs = random_inputs(meta, seed=11)
    for index, array in enumerate(inputs):
        np.save(tmp_path / f"in{index}.npy", array)
    paths = [tmp_path / f"in{i}.npy" for i in range(len(inputs))]
    expected = onnxruntime_outputs(model, meta, inputs)
    cli = package.build / f"{name.lower()}_cli"
    runs = {
        "objects 1T": [cli, "--threads", "1"],
        "objects 2T": [cli, "--threads", "2"],
        "C kernels": [portable / f"{name.lower()}_cli"],
    }
    if QEMU_X86 is not None:  # a CPU with AVX2 but not AVX-512: the x86-64-v3 set runs
        runs["x86-64-v3 in qemu"] = [QEMU_X86, "-cpu", "Haswell", cli]
    for label, command in runs.items():
        out = tmp_path / label.replace(" ", "_")
        run([*command, "--output-dir", out, *paths])
        for index, want in enumerate(expected):
            got = np.load(out / f"output_{index}.npy")
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=label)
    # Which set ran: the AVX-512 twin on this CPU if it has AVX-512, the default set in qemu.
    # The twin holds the kernels that reduce; memory-bound ones run from the default set.
    wide = meta["scheduled_kernels"]["x86_64-wide"]
    assert set(wide) <= set(scheduled), wide
    reducing = ("conv2d", "matmul", "winograd_product")
    assert [k for k in scheduled if any(r in k for r in reducing)] == [
        k for k in wide if any(r in k for r in reducing)
    ]
    own = run([cli, "--bench", "1", "--output-dir", tmp_path / "bench", *paths]).stdout
    assert f"kernels x86_64:{'x86-64-v4' if HOST_AVX512 else 'x86-64-v3'}" in own
    if QEMU_X86 is not None:
        emulated = run(
            [QEMU_X86, "-cpu", "Haswell", cli, "--bench", "1", "--output-dir", tmp_path / "b2", *paths]
        )
        assert "kernels x86_64:x86-64-v3" in emulated.stdout


@pytest.mark.skipif(QEMU_X86 is None, reason="needs qemu-user (tools/install_system_deps.sh)")
def test_objects_refuse_a_cpu_without_avx2_and_c_kernels_run(built, tmp_path):
    """On a CPU without AVX2 (qemu's Nehalem model) the x86-64-v3 objects give an error
    status instead of SIGILL; the same package with C kernels runs there."""
    package = built("cnn")
    golden = package.source / "tests" / "golden" / "input_0.npy"
    refused = run(
        [QEMU_X86, "-cpu", "Nehalem", package.build / "cnn_cli", "--output-dir", tmp_path / "o1", golden],
        check=False,
    )
    assert refused.returncode == 1, refused.stderr
    assert "lacks the instructions" in refused.stderr and "CNN_PORTABLE_KERNELS=ON" in refused.stderr
    portable = tmp_path / "portable"
    configure_build(package.source, portable, "-DCNN_PORTABLE_KERNELS=ON", "-DCNN_BUILD_TESTS=OFF")
    run([QEMU_X86, "-cpu", "Nehalem", portable / "cnn_cli", "--output-dir", tmp_path / "o2", golden])
    assert (tmp_path / "o2" / "output_0.npy").exists()
