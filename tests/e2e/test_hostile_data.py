"""Hostile data: indices from the caller never reach memory unchecked.

One model holds every ONNX indexing operator with its indices as a model input. Its package
is built with AddressSanitizer + UndefinedBehaviorSanitizer, once with the scheduled object
kernels and once with the portable C kernels, and run with indices just past each end, far
past them, and at the int64 extremes: every run must stop with the invalid-input status and a
message naming the operator, write no output, and leave the sanitizers silent. In-range
negative indices must wrap once, as ONNX Runtime does.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_zoo import save_model
from onnx import TensorProto, helper
from packaging_helpers import configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate
from relay2cmake.errors import ModelError

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# input name → (shape, the operator that reads it, the bound of each coordinate)
INDICES = {
    "g_idx": ((3,), "Gather", (5,)),
    "ge_idx": ((5, 2), "GatherElements", (4,)),
    "gnd_idx": ((2, 2), "GatherND", (5, 4)),
    "snd_idx": ((2, 1), "ScatterND", (5,)),
    "se_idx": ((5, 2), "ScatterElements", (4,)),
}


def _indexing_model(path):
    def floats(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    def longs(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.INT64, shape)

    nodes = [
        helper.make_node("Gather", ["data", "g_idx"], ["gather"], axis=0),
        helper.make_node("GatherElements", ["data", "ge_idx"], ["gather_elements"], axis=1),
        helper.make_node("GatherND", ["data", "gnd_idx"], ["gather_nd"]),
        helper.make_node("ScatterND", ["data", "snd_idx", "snd_upd"], ["scatter_nd"]),
        helper.make_node("ScatterElements", ["data", "se_idx", "se_upd"], ["scatter_elements"], axis=1),
    ]
    inputs = [floats("data", [5, 4])]
    for name, (shape, _, _) in INDICES.items():
        inputs.append(longs(name, list(shape)))
        if name == "snd_idx":
            inputs.append(floats("snd_upd", [2, 4]))
        if name == "se_idx":
            inputs.append(floats("se_upd", [5, 2]))
    outputs = [
        floats("gather", [3, 4]),
        floats("gather_elements", [5, 2]),
        floats("gather_nd", [2]),
        floats("scatter_nd", [5, 4]),
        floats("scatter_elements", [5, 4]),
    ]
    return save_model(helper.make_graph(nodes, "indexing", inputs, outputs), path, 16)


def _valid_inputs() -> dict[str, np.ndarray]:
    """In range, with negative indices (they wrap once) and distinct scatter targets."""
    rng = np.random.default_rng(0)
    return {
        "data": rng.standard_normal((5, 4)).astype(np.float32),
        "g_idx": np.array([0, -1, 4]),
        "ge_idx": np.array([[0, -1], [1, 2], [-4, 3], [0, 0], [3, -2]]),
        "gnd_idx": np.array([[0, 1], [4, -4]]),
        "snd_idx": np.array([[1], [-2]]),
        "snd_upd": np.ones((2, 4), np.float32),
        "se_idx": np.array([[0, 3]] * 5),
        "se_upd": np.full((5, 2), 2.0, np.float32),
    }


BAD_VALUES = [5, 4, -5, -6, 1000, -(2**31), INT64_MAX, INT64_MIN]


def _bad_cases():
    cases = []
    for name, (_, operator, bounds) in INDICES.items():
        for coordinate, bound in enumerate(bounds):
            for value in sorted({bound, -bound - 1, 2 * bound, *BAD_VALUES[4:]}):
                cases.append((name, coordinate, value, operator))
    return cases


BAD_CASES = _bad_cases()


@pytest.fixture(scope="module")
def indexing_builds(tmp_path_factory):
    work = tmp_path_factory.mktemp("indexing")
    model = _indexing_model(work / "indexing.onnx")
    generate(GenerateOptions(model=model, out=work / "pkg", name="Indexing", self_check=False))
    return model, _sanitized_clis(work, "indexing")


def _sanitized_clis(work, prefix: str) -> dict:
    """The package in ``work / "pkg"`` built under ASan + UBSan, warning-free, once with the
    object kernels and once with the portable C kernels: kernel set -> its cli."""
    clis = {}
    for kernels in ("objects", "c"):
        build = work / f"build_{kernels}"
        configure_build(
            work / "pkg", build, f"-DCMAKE_C_FLAGS={SANITIZE} -Wall -Wextra -Werror",
            f"-DCMAKE_EXE_LINKER_FLAGS={SANITIZE}", "-DCMAKE_BUILD_TYPE=Debug",
            f"-D{prefix.upper()}_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}",
        )  # fmt: skip
        clis[kernels] = build / f"{prefix}_cli"
    return clis


def _run_cli(cli, inputs: dict[str, np.ndarray], folder):
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for position, (name, array) in enumerate(inputs.items()):
        files.append(folder / f"{position}_{name}.npy")
        np.save(files[-1], array)
    out = folder / "out"
    result = run([cli, "--output-dir", out, *files], check=False)
    return result, out


@pytest.mark.parametrize("kernels", ["objects", "c"])
def test_indices_in_range_wrap_once_as_onnxruntime(indexing_builds, kernels, tmp_path):
    import onnxruntime

    model, builds = indexing_builds
    inputs = _valid_inputs()
    result, out = _run_cli(builds[kernels], inputs, tmp_path)
    assert result.returncode == 0, result.stderr
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    for index, want in enumerate(expected):
        got = np.load(out / f"output_{index}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernels", ["objects", "c"])
def test_out_of_range_indices_stop_the_run_cleanly(indexing_builds, kernels, tmp_path):
    """Every bad index of every indexing operator, under ASan + UBSan."""
    _, builds = indexing_builds
    for case, (name, coordinate, value, operator) in enumerate(BAD_CASES):
        inputs = _valid_inputs()
        width = len(INDICES[name][2])
        flat = inputs[name].reshape(-1, width)
        flat[-1, coordinate] = value
        result, out = _run_cli(builds[kernels], inputs, tmp_path / str(case))
        what = f"{name}[..., {coordinate}] = {value}"
        assert result.returncode != 0, what
        sanitizer_report = "Sanitizer" in result.stderr or "runtime error" in result.stderr
        assert not sanitizer_report, (what, result.stderr)
        site = f"{operator} on a 5x4 tensor (indices from input '{name}')"
        assert f"{site}: index {value} is outside" in result.stderr, (what, result.stderr)
        assert not out.exists() or not any(out.iterdir()), f"{what}: outputs written"


def test_constant_indices_out_of_range_are_refused_at_generation(tmp_path):
    graph = helper.make_graph(
        [helper.make_node("Gather", ["data", "idx"], ["y"], axis=1)],
        "g",
        [helper.make_tensor_value_info("data", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 1])],
        [helper.make_tensor("idx", TensorProto.INT64, [1], [-4])],
    )
    model = save_model(graph, tmp_path / "m.onnx", 13)
    with pytest.raises(ModelError, match=r"Gather has a constant index -4 outside \[-3, 3\)"):
        generate(GenerateOptions(model=model, out=tmp_path / "pkg", self_check=False, allow_unverified=True))
    assert not (tmp_path / "pkg").exists()


def test_pytorch_indexing_is_checked(tmp_path):
    """Embedding, advanced indexing, index_select, gather and index_put from a ``.pt2``.
    The embedding narrows its int64 ids to int32 first: the check sees the int64 values."""
    import torch

    class Indexing(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = torch.nn.Embedding(10, 4)

        def forward(self, ids, x, idx):
            y = x.clone()
            y[idx, 0] = 1.0
            return self.embedding(ids), x[idx], torch.index_select(x, 1, idx), torch.gather(x, 1, ids % 3), y

    example = (torch.tensor([[1, 2, 3]]), torch.randn(6, 5), torch.tensor([0, -1, 2]))
    program = tmp_path / "indexing.pt2"
    torch.export.save(torch.export.export(Indexing(), example), program)
    generate(GenerateOptions(model=program, out=tmp_path / "pkg", name="TorchIndexing", self_check=False))
    build = tmp_path / "build"
    configure_build(
        tmp_path / "pkg", build, f"-DCMAKE_C_FLAGS={SANITIZE}", f"-DCMAKE_EXE_LINKER_FLAGS={SANITIZE}",
        "-DCMAKE_BUILD_TYPE=Debug",
    )  # fmt: skip
    cli = build / "torchindexing_cli"
    good = {"ids": np.array([[1, 2, 3]]), "x": example[1].numpy(), "idx": np.array([0, -1, 2])}
    result, _ = _run_cli(cli, good, tmp_path / "good")
    assert result.returncode == 0, result.stderr
    bad_cases = [
        ("ids", 2**32 + 1, "Gather on a 10x4 tensor"),
        ("ids", -11, "Gather on a 10x4 tensor"),
        ("idx", 6, "on a 6"),  # IndexPut (6) or Gather (6x5), whichever runs first
        ("idx", -7, "on a 6"),
    ]
    for case, (name, value, message) in enumerate(bad_cases):
        inputs = {k: v.copy() for k, v in good.items()}
        inputs[name].reshape(-1)[0] = value
        result, out = _run_cli(cli, inputs, tmp_path / str(case))
        assert result.returncode != 0 and f"index {value} is outside" in result.stderr, (
            name,
            value,
            result.stderr,
        )
        assert message in result.stderr and "Sanitizer" not in result.stderr
        assert not out.exists() or not any(out.iterdir())


def test_cli_flags_that_would_overflow_are_refused(indexing_builds, tmp_path):
    """--bench N once wrapped N * 8 into a small malloc (2**61 + 1 → 8 bytes); an output path
    past the buffer was cut short, so two outputs landed in one file."""
    _, builds = indexing_builds
    cli = builds["objects"]
    for flag, value in (("--bench", "2305843009213693953"), ("--bench", "-1"), ("--threads", "0")):
        result = run([cli, flag, value, "x.npy"], check=False)
        assert result.returncode == 2 and f"{flag} takes a whole number" in result.stderr, result.stderr
        assert "Sanitizer" not in result.stderr
    deep = tmp_path
    while len(str(deep)) < 4090:  # the folder fits PATH_MAX (4096), "/output_0.npy" does not
        deep = deep / ("d" * min(200, 4090 - len(str(deep)) - 1))
    deep.mkdir(parents=True)
    _run_cli(cli, _valid_inputs(), tmp_path / "inputs")
    files = sorted((tmp_path / "inputs").glob("*.npy"), key=lambda p: int(p.name.split("_")[0]))
    result = run([cli, "--output-dir", deep, *files], check=False)
    assert result.returncode == 1 and "path is too long" in result.stderr, result.stderr
    assert not any(deep.iterdir())


NPY_EXAMPLES = int(os.environ.get("R2C_FUZZ_EXAMPLES", "40"))


def _npy_bytes(header: str, payload: bytes, version: int = 1) -> bytes:
    text = header.encode("latin-1")
    if version == 1:
        return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + payload
    return b"\x93NUMPY\x02\x00" + len(text).to_bytes(4, "little") + text + payload


npy_descr = st.sampled_from(
    ["<f4", ">f4", "<f8", "|b1", "<i8", "<u4", "O", "<U4", "<f4\x00", "", "<f2", "|V4"]
)
npy_shape = st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(0, 6), min_size=0, max_size=40)


def _header(descr: str, fortran: str, shape: list[int], tail: str) -> str:
    dims = ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "")
    return f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': ({dims}), }}{tail}"


npy_header = st.builds(
    _header,
    npy_descr,
    st.sampled_from(["False", "True", "0", "None"]),
    npy_shape,
    st.sampled_from(["", "\n", " " * 70 + "\n", "\x00"]),
)


@settings(max_examples=NPY_EXAMPLES, deadline=None, derandomize=NPY_EXAMPLES <= 40,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    header=npy_header,
    payload=st.binary(max_size=200) | st.just(np.ones((5, 4), np.float32).tobytes()),
    version=st.sampled_from([1, 2]),
    edits=st.lists(st.tuples(st.integers(0, 160), st.binary(min_size=1, max_size=4)), max_size=3),
)
def test_cli_npy_reader_survives_fuzzed_files(indexing_builds, tmp_path, header, payload, version, edits):
    """The package's own ``.npy`` reader (tools/npy.c) under ASan + UBSan: every file is read
    or refused with a message, never a crash or a sanitizer report."""
    _, builds = indexing_builds
    data = bytearray(_npy_bytes(header, payload, version))
    for at, patch in edits:
        data[at : at + len(patch)] = patch
    inputs = _valid_inputs()
    folder = tmp_path / f"case{abs(hash(bytes(data))) % 10**9}"
    _run_cli(builds["objects"], inputs, folder)  # writes the valid files; replace the first
    first = next(folder.glob("0_*.npy"))
    first.write_bytes(bytes(data))
    files = sorted(folder.glob("*.npy"), key=lambda p: int(p.name.split("_")[0]))
    result = run([builds["objects"], "--output-dir", folder / "out", *files], check=False)
    assert result.returncode in (0, 1), (result.returncode, result.stderr[-2000:])
    assert "Sanitizer" not in result.stderr and "runtime error" not in result.stderr, result.stderr[-2000:]
    if result.returncode == 1:
        assert "indexing_cli:" in result.stderr


@settings(max_examples=NPY_EXAMPLES, deadline=None, derandomize=NPY_EXAMPLES <= 40,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    name=st.sampled_from(sorted(INDICES)),
    values=st.lists(st.integers(-(2**63), 2**63 - 1) | st.integers(-12, 12), min_size=1, max_size=10),
)
def test_fuzzed_indices_are_used_or_refused(indexing_builds, tmp_path, name, values):
    """Random index values (most far out of range, some in it) under ASan + UBSan: the run
    succeeds, or stops with the operator's message; never a sanitizer report."""
    _, builds = indexing_builds
    inputs = _valid_inputs()
    flat = inputs[name].reshape(-1)
    for position, value in enumerate(values[: flat.size]):
        flat[position] = value
    folder = tmp_path / f"case{abs(hash((name, tuple(values)))) % 10**9}"
    result, _ = _run_cli(builds["c"], inputs, folder)
    assert "Sanitizer" not in result.stderr and "runtime error" not in result.stderr, result.stderr[-2000:]
    assert result.returncode == 0 or "is outside" in result.stderr, result.stderr[-2000:]


def test_coordinates_from_data_stay_inside_the_image(tmp_path):
    """GridSample's grid and RoiAlign's boxes are float data that TVM's kernels turn into
    integer pixel indices: NaN, +-inf and 3e38 coordinates were signed overflows (UBSan) and a
    batch index past the batch read outside the input (ASan). Now: clean under both, in both
    kernel sets; in-range data still matches ONNX Runtime; a bad batch index is refused."""
    import onnxruntime

    def floats(name, shape):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    nodes = [
        helper.make_node("GridSample", ["x", "grid"], ["linear"], mode="linear", padding_mode="zeros"),
        helper.make_node("GridSample", ["x", "grid"], ["border"], mode="nearest", padding_mode="border"),
        helper.make_node("GridSample", ["x", "grid"], ["reflection"], padding_mode="reflection"),
        helper.make_node("RoiAlign", ["x", "rois", "batch"], ["roi"], output_height=2, output_width=2,
                         sampling_ratio=2),
    ]  # fmt: skip
    inputs = [floats("x", [2, 3, 5, 5]), floats("grid", [2, 4, 4, 2]), floats("rois", [3, 4]),
              helper.make_tensor_value_info("batch", TensorProto.INT64, [3])]  # fmt: skip
    outputs = [floats(n, [2, 3, 4, 4]) for n in ("linear", "border", "reflection")] + [
        floats("roi", [3, 3, 2, 2])
    ]
    model = save_model(helper.make_graph(nodes, "coordinates", inputs, outputs), tmp_path / "c.onnx", 20)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Coordinates", self_check=False))
    rng = np.random.default_rng(0)
    good = {
        "x": rng.standard_normal((2, 3, 5, 5)).astype(np.float32),
        "grid": rng.uniform(-1, 1, (2, 4, 4, 2)).astype(np.float32),
        "rois": np.array([[0, 0, 3, 3], [1, 1, 4, 4], [0, 0, 2, 2]], np.float32),
        "batch": np.array([0, 1, 0]),
    }
    expected = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, good)
    for kernels in ("objects", "c"):
        build = tmp_path / f"build_{kernels}"
        configure_build(
            tmp_path / "pkg", build, f"-DCMAKE_C_FLAGS={SANITIZE}", f"-DCMAKE_EXE_LINKER_FLAGS={SANITIZE}",
            "-DCMAKE_BUILD_TYPE=Debug", f"-DCOORDINATES_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}",
        )  # fmt: skip
        cli = build / "coordinates_cli"
        result, out = _run_cli(cli, good, tmp_path / f"good_{kernels}")
        assert result.returncode == 0, result.stderr
        for index, want in enumerate(expected):
            np.testing.assert_allclose(np.load(out / f"output_{index}.npy"), want, rtol=1e-5, atol=1e-5)
        for value in (np.nan, np.inf, -np.inf, 3e38, -3e38):
            hostile = {k: v.copy() for k, v in good.items()}
            hostile["grid"][0, 0, 0, :] = value
            hostile["rois"][1, :] = value
            result, _ = _run_cli(cli, hostile, tmp_path / f"{kernels}_{value}")
            assert result.returncode == 0, result.stderr
            assert "Sanitizer" not in result.stderr and "runtime error" not in result.stderr, result.stderr
        hostile = {k: v.copy() for k, v in good.items()}
        hostile["batch"][0] = 7
        result, out = _run_cli(cli, hostile, tmp_path / f"{kernels}_batch")
        assert (
            result.returncode == 1
            and "RoiAlign on a 2x3x5x5 tensor: index 7 is outside [0, 2)" in result.stderr
        )
        assert "Sanitizer" not in result.stderr and not out.exists()


def test_integer_division_by_zero_and_wide_shifts_give_onnx_values_instead_of_a_trap(tmp_path):
    """x / 0 and x % 0 trap on x86 (SIGFPE), as does the most negative int32 / -1: gen died in
    its golden step on such a model, and a package would kill its caller. Now they give 0, 0
    and the wrapped quotient, under UBSan, in both kernel sets; every other element matches
    ONNX Runtime. Shifts by a negative amount or by 32 or more (undefined in C and LLVM) give
    ONNX's values: 0 to the left, the sign's fill to the right; a negative value shifted left
    wraps (its bits shifted)."""
    import onnxruntime

    int32 = TensorProto.INT32
    nodes = [
        helper.make_node("Div", ["x", "y"], ["quotient"]),
        helper.make_node("Mod", ["x", "y"], ["modulo"]),
        helper.make_node("Mod", ["x", "y"], ["remainder"], fmod=1),
        helper.make_node("BitShift", ["x", "s"], ["left"], direction="LEFT"),
        helper.make_node("BitShift", ["x", "s"], ["right"], direction="RIGHT"),
    ]
    graph = helper.make_graph(
        nodes,
        "division",
        [helper.make_tensor_value_info(n, int32, [8]) for n in ("x", "y", "s")],
        [
            helper.make_tensor_value_info(n, int32, [8])
            for n in ("quotient", "modulo", "remainder", "left", "right")
        ],
    )
    model = save_model(graph, tmp_path / "d.onnx")
    # gen's own golden step runs the model on sample inputs that hold zero divisors.
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Division"))
    int32_min = np.iinfo(np.int32).min
    x = np.array([7, -7, int32_min, 5, -9, 9, 0, int32_min], np.int32)
    y = np.array([0, 0, -1, -1, 2, -4, 3, 7], np.int32)
    shifts = np.array([-1, 32, 100, 5, 31, 3, 0, 1], np.int32)
    safe = (y != 0) & ~((x == int32_min) & (y == -1))
    in_range = (shifts >= 0) & (shifts < 32)
    amounts = np.where(in_range, shifts, 0).astype(np.uint32)
    want_left = np.where(in_range, (x.view(np.uint32) << amounts).view(np.int32), 0)
    want_right = np.where(in_range, x >> amounts.astype(np.int32), x >> 31)
    # (ONNX Runtime has no signed BitShift: it runs the divisions alone)
    divisions = save_model(
        helper.make_graph(nodes[:3], "divisions", graph.input[:2], graph.output[:3]), tmp_path / "div.onnx"
    )
    expected = onnxruntime.InferenceSession(str(divisions), providers=["CPUExecutionProvider"]).run(
        None, {"x": np.where(safe, x, 1), "y": np.where(safe, y, 1)}
    )
    for kernels, cli in _sanitized_clis(tmp_path, "division").items():
        result, out = _run_cli(cli, {"x": x, "y": y, "s": shifts}, tmp_path / kernels)
        assert result.returncode == 0, result.stderr
        quotient, modulo, remainder, left, right = (np.load(out / f"output_{i}.npy") for i in range(5))
        np.testing.assert_array_equal(quotient[~safe], [0, 0, int32_min], err_msg=kernels)
        np.testing.assert_array_equal(modulo[~safe], [0, 0, 0], err_msg=kernels)
        np.testing.assert_array_equal(remainder[~safe], [0, 0, 0], err_msg=kernels)
        for got, want in zip((quotient, modulo, remainder), expected, strict=True):
            np.testing.assert_array_equal(got[safe], want[safe], err_msg=kernels)
        np.testing.assert_array_equal(left, want_left, err_msg=kernels)
        np.testing.assert_array_equal(right, want_right, err_msg=kernels)


def test_a_cumulative_sum_over_an_axis_out_of_range_stops_the_run(tmp_path):
    """CumSum's axis given at run time: a negative one wraps once, one outside [-rank, rank)
    stops the run with an error code (it silently summed over the last axis)."""
    nodes = [helper.make_node("CumSum", ["x", "axis"], ["sums"])]
    graph = helper.make_graph(
        nodes,
        "cumulative",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("axis", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("sums", TensorProto.FLOAT, [3, 4])],
    )
    model = save_model(graph, tmp_path / "c.onnx")
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Cumulative", self_check=False))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for kernels, cli in _sanitized_clis(tmp_path, "cumulative").items():
        for axis in (0, 1, -1, -2):
            result, out = _run_cli(cli, {"x": x, "axis": np.array(axis)}, tmp_path / f"{kernels}{axis}")
            assert result.returncode == 0, result.stderr
            np.testing.assert_array_equal(
                np.load(out / "output_0.npy"), np.cumsum(x, axis=axis), err_msg=kernels
            )
        for axis in (2, -3, 1 << 40):
            result, out = _run_cli(cli, {"x": x, "axis": np.array(axis)}, tmp_path / f"{kernels}bad{axis}")
            assert result.returncode != 0, (kernels, axis)
            assert "runtime error" not in result.stderr and "Sanitizer" not in result.stderr, result.stderr
            # (the message names the look-up of the axis, "Gather on a 2 tensor", not CumSum)
            assert "index out of range" in result.stderr and "outside" in result.stderr, result.stderr


SLICE_PARAMETERS = ("starts", "ends", "slice_axes", "steps")


def test_shape_parameters_given_at_run_time_are_checked(tmp_path):
    """Axes, a target shape and pads as model inputs (onnx_settled, onnx_given_parameters):
    the package is generated for the output shapes the model declares; any values that give
    them compute what ONNX Runtime does (reducing axis 1 or axis 2 gives the same shape, so
    both are accepted and each computes its own sum), and values that do not stop the run."""
    nodes = [
        helper.make_node("ReduceSum", ["x", "axes"], ["sums"], keepdims=0),
        helper.make_node("Reshape", ["x", "shape"], ["reshaped"]),
        helper.make_node("Pad", ["x", "pads"], ["padded"], mode="reflect"),
        helper.make_node("Slice", ["x", "starts", "ends", "slice_axes", "steps"], ["sliced"]),
        helper.make_node("Resize", ["x", "", "scales"], ["resized"], mode="nearest"),
        helper.make_node("Range", ["start", "limit", "delta"], ["range"]),
    ]
    graph = helper.make_graph(
        nodes,
        "parameters",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 4]),
            helper.make_tensor_value_info("axes", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
            helper.make_tensor_value_info("pads", TensorProto.INT64, [6]),
            *[helper.make_tensor_value_info(n, TensorProto.INT64, [1]) for n in SLICE_PARAMETERS],
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, [3]),
            *[helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in ("start", "limit", "delta")],
        ],
        [
            helper.make_tensor_value_info("sums", TensorProto.FLOAT, [3, 4]),
            helper.make_tensor_value_info("reshaped", TensorProto.FLOAT, [6, 8]),
            helper.make_tensor_value_info("padded", TensorProto.FLOAT, [3, 7, 4]),
            helper.make_tensor_value_info("sliced", TensorProto.FLOAT, [3, 2, 4]),
            helper.make_tensor_value_info("resized", TensorProto.FLOAT, [3, 2, 4]),
            helper.make_tensor_value_info("range", TensorProto.INT64, [3]),
        ],
    )
    model = save_model(graph, tmp_path / "p.onnx", 13)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Parameters", self_check=False))
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((3, 4, 4)).astype(np.float32)
    # Slice's starts, ends, axes and steps: rows 0-1 of axis 1, rows 3 and 1 (backwards, an end
    # far out of range), rows 1 and 3 (an axis counted from the end)
    slices = [(0, 2, 1, 1), (3, -1000, 1, -2), (1, 100, -2, 2)]
    # Resize's scales: 0.5 and 0.6 both give 2 rows of 4 (and read different rows), 0.75 gives 3
    good = [
        ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.5),
        ([-1], [-1, 8], [0, 3, 0, 0, 0, 0], slices[1], 0.6, (10, 4, -2)),
        ([2], [6, -1], [0, 0, 0, 0, 3, 0], slices[2], 0.74, (-5, -2, 1)),
    ]
    bad = {
        "axes": ([0], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.5),  # gives [4, 4]
        "shape": ([1], [8, 6], [0, 1, 0, 0, 2, 0], slices[0], 0.5),
        "pads": ([1], [6, 8], [0, 1, 0, 0, 1, 0], slices[0], 0.5),  # adds 2 rows, not 3
        "ends": ([1], [6, 8], [0, 1, 0, 0, 2, 0], (0, 3, 1, 1), 0.5),  # 3 rows, not 2
        "steps": ([1], [6, 8], [0, 1, 0, 0, 2, 0], (0, 2, 1, 0), 0.5),
        "slice_axes": ([1], [6, 8], [0, 1, 0, 0, 2, 0], (0, 2, 1 << 40, 1), 0.5),
        "scales": ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.75),
    }

    def parameters(axes, shape, pads, sliced, scale, bounds=(0, 3, 1)):  # in the model's order
        feeds = {"x": x, "axes": np.array(axes), "shape": np.array(shape), "pads": np.array(pads)}
        feeds.update({n: np.array([v]) for n, v in zip(SLICE_PARAMETERS, sliced, strict=True)})
        feeds["scales"] = np.array([1.0, scale, 1.0], np.float32)
        return {**feeds, **{n: np.array(v) for n, v in zip(("start", "limit", "delta"), bounds, strict=True)}}

    for kernels, cli in _sanitized_clis(tmp_path, "parameters").items():
        for case, values in enumerate(good):
            feeds = parameters(*values)
            result, out = _run_cli(cli, feeds, tmp_path / f"{kernels}{case}")
            assert result.returncode == 0, result.stderr
            for index, want in enumerate(session.run(None, feeds)):
                np.testing.assert_allclose(
                    np.load(out / f"output_{index}.npy"), want, rtol=1e-5, err_msg=kernels
                )
        cases = [
            *bad.items(),
            ("axes", ([1 << 40], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.5)),
            ("scales", ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], float("nan"))),
            ("scales", ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 1e30)),
            # values whose sums or products overflow int64 unless clamped first
            ("pads", ([1], [6, 8], [0, 1 << 62, 0, 0, 1 << 62, 0], slices[0], 0.5)),
            ("steps", ([1], [6, 8], [0, 1, 0, 0, 2, 0], (1 << 62, 1 << 62, 1, 1 << 62), 0.5)),
            ("ends", ([1], [6, 8], [0, 1, 0, 0, 2, 0], (-(1 << 63), (1 << 63) - 1, 1, 1), 0.5)),
            ("delta", ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.5, (0, 3, 0))),  # divides by 0
            (
                "start",
                ([1], [6, 8], [0, 1, 0, 0, 2, 0], slices[0], 0.5, (-(1 << 63), (1 << 63) - 1, 1 << 62)),
            ),
        ]
        for case, (name, values) in enumerate(cases):
            feeds = parameters(*values)
            result, out = _run_cli(cli, feeds, tmp_path / f"{kernels}bad{case}")
            assert result.returncode != 0, (kernels, name)
            assert "runtime error" not in result.stderr and "Sanitizer" not in result.stderr, result.stderr
            assert f"from input '{name}'" in result.stderr and "at run time" in result.stderr, result.stderr
            assert not out.exists() or not any(out.iterdir()), f"{name}: outputs written"


def test_an_input_settled_through_other_nodes_is_checked(tmp_path):
    """A size that reaches Range through a Cast (an operator's function body does this): the
    model is imported with the one value the declared output allows (onnx_settled_inputs),
    the input stays in the API, and any other value stops the run with its name."""
    nodes = [
        helper.make_node("Cast", ["size"], ["limit"], to=TensorProto.FLOAT),
        helper.make_node("Range", ["zero", "limit", "one"], ["positions"]),
        helper.make_node("Mul", ["positions", "x"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "settled",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1]),
            helper.make_tensor_value_info("size", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])],
        [
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]),
        ],
    )
    model = save_model(graph, tmp_path / "s.onnx", 13)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Settled", self_check=False))
    x = np.array([0.5], np.float32)
    for kernels, cli in _sanitized_clis(tmp_path, "settled").items():
        result, out = _run_cli(cli, {"x": x, "size": np.array(8)}, tmp_path / f"{kernels}good")
        assert result.returncode == 0, result.stderr
        np.testing.assert_array_equal(np.load(out / "output_0.npy"), np.arange(8, dtype=np.float32) * 0.5)
        for case, size in enumerate((7, 9, -(1 << 63))):
            result, out = _run_cli(cli, {"x": x, "size": np.array(size)}, tmp_path / f"{kernels}bad{case}")
            assert result.returncode != 0, (kernels, size)
            assert "Input 'size' sets a shape at run time" in result.stderr, result.stderr
            assert not out.exists() or not any(out.iterdir()), f"{size}: outputs written"
