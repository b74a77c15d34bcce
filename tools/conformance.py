"""ONNX conformance: every node test case through the full user path and through TVM's VM.

    .venv/bin/python tools/conformance.py                      # everything, writes docs/conformance.md
    .venv/bin/python tools/conformance.py --filter 'conv|gemm'  # a subset (regular expression)
    .venv/bin/python tools/conformance.py --slice ci            # the representative CI slice

Suites: ONNX's node cases (regenerated from the installed onnx wheel, which ships the
definitions but not the data), plus the wheel's `pytorch-converted` and `pytorch-operator`
suites. Each case runs

- through TVM alone: its own ONNX importer (`from_onnx`, none of our checks or constant
  folding), `tvm.compile` for LLVM, its Relax VM, compare;
- through relay2cmake: `gen` → one CMake super-build of all packages (which also proves that
  many models link into one build) → each package's `<prefix>_cli` on the case's inputs →
  compare;
- through ONNX Runtime (CPU provider, default session options), for what a user's other
  choice passes;
- through emx-onnx-cgen, an ONNX-to-C generator, when it is installed
  (`pip install -e '.[conformance]'`): its ONNX backend generates C, compiles it with the
  system compiler and runs it.

Every path uses the same comparison (rtol 1e-3, atol 1e-5) against the case's expected
outputs. Cases whose inputs or outputs are not tensors (sequences, optionals) are counted
apart, as the package cannot take them. The report has a table per suite and one per
operator (a case counts for every operator its graph holds).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import numpy_helper

from relay2cmake.dtypes import PACKED, RAW_BITS

ROOT = Path(__file__).resolve().parent.parent
RTOL, ATOL = 1e-3, 1e-5

# Dozens of cases across operator families, for CI: elementwise, activations, reductions,
# matmul/gemm, convolution and pooling, normalisation, shape manipulation, indexing,
# casts and comparisons, plus PyTorch-converted layers.
CI_SLICE = [
    "test_abs", "test_add_bcast", "test_sub", "test_mul_bcast", "test_div", "test_pow", "test_sqrt",
    "test_exp", "test_log", "test_neg", "test_reciprocal", "test_clip", "test_relu", "test_leakyrelu",
    "test_sigmoid", "test_tanh", "test_elu", "test_selu", "test_softplus", "test_hardsigmoid",
    "test_softmax_axis_1", "test_logsoftmax_axis_1", "test_reduce_sum_keepdims_example",
    "test_reduce_mean_default_axes_keepdims_example", "test_reduce_max_do_not_keepdims_example",
    "test_argmax_default_axis_example", "test_matmul_2d", "test_matmul_4d", "test_gemm_all_attributes",
    "test_gemm_default_single_elem_vector_bias", "test_conv_with_strides_padding",
    "test_conv_with_autopad_same", "test_convtranspose", "test_maxpool_2d_pads",
    "test_averagepool_2d_strides", "test_globalaveragepool", "test_batchnorm_example",
    "test_instancenorm_example", "test_layer_normalization_2d_axis1", "test_transpose_default",
    "test_reshape_reordered_all_dims", "test_flatten_axis1", "test_squeeze", "test_unsqueeze_axis_0",
    "test_concat_2d_axis_0", "test_split_equal_parts_1d_opset18", "test_slice", "test_gather_0",
    "test_gather_elements_0", "test_where_example", "test_cast_FLOAT_to_DOUBLE",
    "test_equal", "test_greater", "test_not", "test_and2d", "test_expand_dim_changed", "test_tile",
    "test_pad", "test_resize_upsample_scales_nearest", "test_depthtospace_example",
    "test_einsum_batch_matmul",
    "test_cumsum_1d", "test_range_float_type_positive_delta", "test_min_two_inputs", "test_max_example",
    "test_mean_example", "test_erf", "test_gelu_default_1", "test_hardmax_example", "test_shape",
    "test_size", "test_constantofshape_float_ones", "test_identity", "test_topk",
    "test_AvgPool2d", "test_BatchNorm2d_eval", "test_Conv2d_depthwise_padded", "test_Linear",
    "test_PReLU_2d", "test_Softmax", "test_operator_add_broadcast", "test_operator_maxpool",
    "test_lstm_defaults", "test_lstm_batchwise", "test_gru_with_initial_bias",
    "test_simple_rnn_bidirectional",
    "test_lpnormalization_default", "test_attention_3d_gqa", "test_attention_4d_attn_mask_bool",
    "test_attention_4d_with_past_and_present",
    "test_onehot_without_axis", "test_reduce_sum_empty_axes_input_noop_example",
    "test_nllloss_NCd1d2_with_weight_reduction_mean", "test_sce_mean_weight_ii_log_prob", "test_if",
    "test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_FLOAT8E4M3FN", "test_scan9_sum", "test_loop11",
    "test_nonzero_example", "test_unique_not_sorted_without_axis", "test_unique_sorted_with_axis_3d",
    "test_compress_negative_axis",
]  # fmt: skip


@dataclass
class Case:
    suite: str
    name: str
    directory: str


@dataclass
class Result:
    suite: str
    name: str
    tensor_case: bool = True
    vm: str = "not run"  # "pass" or a reason
    ort: str = "not run"  # ONNX Runtime: "pass" or a reason
    emx: str = "not run"  # emx-onnx-cgen: "pass", a reason, or "not run" when not installed
    gen: str = "not run"  # "generated" or a reason; later "pass" or a reason
    package: str = ""
    frozen: list[str] = field(default_factory=list)  # inputs given to gen as --constant-input
    operators: list[str] = field(default_factory=list)

    @property
    def lost(self) -> bool:
        """A case TVM's VM passes and the package fails."""
        return self.tensor_case and self.vm == "pass" and self.gen != "pass"


RUNNING = ".running"  # in the packages folder: one file per worker, the index of its case


CASE_SECONDS = 600  # a case's VM path and generation (they take seconds; a hang is killed)


def _age(marker: Path) -> float:
    try:
        return time.time() - marker.stat().st_mtime
    except OSError:  # removed meanwhile
        return 0.0


def _is_gone(pid: int) -> bool:
    """Whether the process has exited (a zombie the pool has not reaped yet counts)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True


def run_cases(
    cases: list[Case], packages: Path, jobs: int, start: float, references: bool = True
) -> list[Result]:
    """Every case's VM path and generation step, in worker processes; a case whose worker
    dies (a signal) or runs longer than CASE_SECONDS is recorded as such instead of being
    waited for (the overdue worker is killed)."""
    (packages / RUNNING).mkdir()
    done: dict[int, Result] = {}
    with multiprocessing.get_context("spawn").Pool(jobs, maxtasksperchild=50) as pool:
        for i, case in enumerate(cases):
            pool.apply_async(
                run_case,
                ((i, case, str(packages), references),),
                callback=lambda r, i=i: done.__setitem__(i, r),
            )
        reported = 0
        while len(done) < len(cases):
            time.sleep(0.5)
            for marker in (packages / RUNNING).iterdir():
                try:
                    index = int(marker.read_text() or -1)
                except (OSError, ValueError):  # removed or being written meanwhile
                    continue
                if index < 0 or index in done:
                    continue
                pid = int(marker.name)
                overdue = _age(marker) > CASE_SECONDS
                if overdue and not _is_gone(pid):  # a hang (LLVM on a huge unrolled body)
                    os.kill(pid, signal.SIGKILL)  # the pool starts a new worker
                if overdue or _is_gone(pid):
                    why = (
                        f"still running after {CASE_SECONDS} s"
                        if overdue
                        else "the process died running this case"
                    )
                    done[index] = Result(cases[index].suite, cases[index].name, vm=why, gen=why)
                    marker.unlink(missing_ok=True)
            if len(done) // 100 > reported:
                reported = len(done) // 100
                print(
                    f"  generated {len(done)}/{len(cases)} ({time.perf_counter() - start:.0f}s)", flush=True
                )
    return [done[i] for i in range(len(cases))]


def generate_node_cases(directory: Path) -> None:
    """ONNX's node test data, from the definitions in the installed wheel (about 10 s)."""
    import onnx.backend.test.case.node as node
    import onnx.backend.test.cmd_tools as tools

    tools.model_test.collect_testcases = lambda: node.collect_testcases()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        tools.generate_data(argparse.Namespace(output=str(directory), op_type=None))


def collect(cases_dir: Path) -> list[Case]:
    cases = [Case("node", d.name, str(d)) for d in sorted((cases_dir / "node").iterdir())]
    data = Path(onnx.__file__).parent / "backend" / "test" / "data"
    for suite in ("pytorch-converted", "pytorch-operator"):
        cases += [
            Case(suite, d.name, str(d))
            for d in sorted((data / suite).iterdir())
            if (d / "model.onnx").exists()
        ]
    return cases


def _load_values(directory: Path, stem: str) -> list[np.ndarray] | None:
    """Tensors of test_data_set_0, or None when one is not a tensor."""
    values = []
    for path in sorted(directory.glob(f"{stem}_*.pb"), key=lambda p: int(p.stem.split("_")[-1])):
        tensor = onnx.TensorProto()
        try:
            tensor.ParseFromString(path.read_bytes())
            if not tensor.name and not tensor.dims and not tensor.raw_data and tensor.data_type == 0:
                return None
            values.append(numpy_helper.to_array(tensor))
        except Exception:
            return None
    return values


def _matches(actual: list[np.ndarray], expected: list[np.ndarray]) -> str:
    if len(actual) != len(expected):
        return f"wrong number of outputs ({len(actual)} vs {len(expected)})"
    for index, (a, e) in enumerate(zip(actual, expected, strict=True)):
        a = np.asarray(a)
        if a.shape != e.shape:
            return f"output {index}: shape {a.shape} vs {e.shape}"
        if e.dtype.name in PACKED:  # the cli writes one element per byte, ml_dtypes' bits
            a = a.view(e.dtype) if a.dtype.itemsize == 1 else a
            if not np.array_equal(a.astype(np.float64), e.astype(np.float64)):
                return f"output {index}: values differ"
            continue
        if e.dtype.name in RAW_BITS:
            # The cli writes bfloat16/float8 as raw bits; compare them as numbers, within one
            # unit in the last place of the type (two for bfloat16, as ONNX's own runner has
            # it: rtol = max(rtol, 2**-6)); the case's values come from float32 math.
            a = a.view(e.dtype) if a.dtype.kind == "u" and a.dtype.itemsize == e.dtype.itemsize else a
            a, e = a.astype(np.float64), e.astype(np.float64)
            ulp = 2.0 ** -(ml_dtypes.finfo(expected[index].dtype).nmant)
            if expected[index].dtype.name == "bfloat16":
                ulp *= 2
            if not np.allclose(a, e, rtol=ulp, atol=ATOL, equal_nan=True):
                return f"output {index}: values differ (max abs {np.nanmax(np.abs(a - e)):.3g})"
            continue
        if e.dtype.kind in "fc":
            if not np.allclose(
                a.astype(np.float64), e.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True
            ):
                worst = np.nanmax(np.abs(a.astype(np.float64) - e))
                return f"output {index}: values differ (max abs {worst:.3g})"
        elif not np.array_equal(a.astype(e.dtype), e):
            return f"output {index}: values differ"
    return "pass"


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"


def run_case(job: tuple[int, Case, str, bool]) -> Result:
    """The VM path and the generation step for one case (runs in a worker process)."""
    index, case, packages_dir, references = job
    # Which case this worker runs, for the parent to name it if the process dies (a signal
    # in TVM's own VM or in gen: lost by the pool, it would otherwise wait forever).
    marker = Path(packages_dir) / RUNNING / str(os.getpid())
    marker.write_text(str(index))
    result = _run_case(index, case, packages_dir, references)
    marker.unlink()
    return result


def _run_case(index: int, case: Case, packages_dir: str, references: bool) -> Result:
    result = Result(case.suite, case.name)
    directory = Path(case.directory)
    model_path = directory / "model.onnx"
    inputs = _load_values(directory / "test_data_set_0", "input")
    expected = _load_values(directory / "test_data_set_0", "output")
    try:
        model = onnx.load(str(model_path), load_external_data=False)
        standard = ("", "ai.onnx")
        result.operators = sorted(
            {n.op_type if n.domain in standard else f"{n.domain}::{n.op_type}" for n in model.graph.node}
        )
    except Exception as exc:
        result.vm = result.gen = _short(exc)
        return result
    if inputs is None or expected is None:
        result.tensor_case = False
        result.vm = result.gen = "inputs or outputs are not tensors"
        return result
    with (
        warnings.catch_warnings(),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()),
    ):
        warnings.simplefilter("ignore")
        for path, run in (("vm", _tvm_alone), ("ort", _onnx_runtime), ("emx", _emx_onnx_cgen)):
            if not references or (path == "emx" and not EMX_INSTALLED):
                continue
            try:
                setattr(result, path, _matches(run(model, directory, inputs), expected))
            except Exception as exc:
                setattr(result, path, _short(exc))
        name = f"Case{index:04d}"
        result.gen = _generate(model_path, Path(packages_dir) / name.lower(), name, {})
        if result.gen != "generated":
            # Shape-like inputs (axes, pads, sizes, scales) that the case feeds at run time:
            # frozen at generation time, the way a user of an AOT compiler would.
            frozen = _shape_like_inputs(model, inputs)
            if frozen:
                stash = Path(packages_dir) / f"{name.lower()}_constants"
                stash.mkdir(exist_ok=True)
                constants = {}
                for input_name, array in frozen.items():
                    constants[input_name] = str(stash / f"{len(constants)}.npy")
                    np.save(constants[input_name], array)
                retry = _generate(model_path, Path(packages_dir) / name.lower(), name, constants)
                if retry == "generated":
                    result.gen, result.frozen = retry, sorted(frozen)
        if result.gen == "generated":
            result.package = name.lower()
    return result


def _tvm_alone(model: onnx.ModelProto, _directory: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TVM by itself: its ONNX importer (none of our checks or folding) and its Relax VM.
    (For NonZero and Unique the VM calls NumPy through Python functions ``tvm.relax.op``
    registers in this process; those count as VM passes too.)"""
    import tvm
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    names = _graph_input_names(model)
    module = from_onnx(
        model,
        shape_dict={n: list(a.shape) for n, a in zip(names, inputs, strict=False)},
        dtype_dict={n: str(a.dtype) for n, a in zip(names, inputs, strict=False)},
        keep_params_in_input=False,
    )
    executable = tvm.compile(module, target=tvm.target.Target("llvm"))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    result = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    values = list(result) if len(model.graph.output) > 1 else [result]
    return [v.numpy() for v in values]


def _onnx_runtime(model: onnx.ModelProto, directory: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    session = onnxruntime.InferenceSession(
        str(directory / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    names = _graph_input_names(model)
    return list(session.run(None, dict(zip(names, inputs, strict=False))))


EMX_INSTALLED = importlib.util.find_spec("emx_onnx_cgen") is not None


def _emx_onnx_cgen(model: onnx.ModelProto, directory: Path, inputs: list[np.ndarray]) -> list[np.ndarray]:
    from emx_onnx_cgen.onnx_backend import run_model

    full = onnx.load(str(directory / "model.onnx"))  # with any external data
    return [np.asarray(v) for v in run_model(full, inputs)]


def _generate(model_path: Path, out: Path, name: str, constants: dict[str, str]) -> str:
    from relay2cmake.commands.generate import GenerateOptions, generate
    from relay2cmake.errors import Relay2CMakeError

    # No self-check: the super-build below runs every package on the case's own inputs and
    # compares with ONNX's expected outputs, a stronger check than gen's own golden test.
    options = GenerateOptions(
        model=model_path, out=out, name=name, force=True, constant_inputs=constants, self_check=False
    )
    try:
        generate(options)
        return "generated"
    except Relay2CMakeError as exc:
        return str(exc)[:300]
    except Exception as exc:
        return _short(exc)


def _graph_input_names(model: onnx.ModelProto) -> list[str]:
    initializers = {init.name for init in model.graph.initializer}
    return [vi.name for vi in model.graph.input if vi.name not in initializers]


# Formal ONNX input names that carry parameters (shapes, axes, sizes), not data.
PARAMETER_SLOTS = frozenset(
    {"axes", "shape", "pads", "k", "depth", "repeats", "sizes", "scales", "roi", "starts", "ends", "steps",
     "split", "axis", "start", "limit", "delta", "sequence_lens", "output_shape", "blocksize", "dft_length",
     "TopK.K", "OneHot.values", "Loop.M", "Loop.cond"}
)  # fmt: skip


def _shape_like_inputs(model: onnx.ModelProto, inputs: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Graph inputs of rank 0 or 1 used only in parameter slots (a ReduceSum's ``axes``, a
    Reshape's ``shape``, a Resize's ``scales``...), never the data a case computes on."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    slots: dict[str, set[str]] = {}
    for node in model.graph.node:
        try:
            formal = [i.name for i in onnx.defs.get_schema(node.op_type, opset, node.domain).inputs]
        except Exception:
            formal = []
        for position, name in enumerate(node.input):
            slot = formal[min(position, len(formal) - 1)] if formal else "?"
            qualified = f"{node.op_type}.{slot}"
            slots.setdefault(name, set()).add(qualified if qualified in PARAMETER_SLOTS else slot)
    frozen = {}
    for name, array in zip(_graph_input_names(model), inputs, strict=False):
        if array.ndim <= 1 and slots.get(name) and slots[name] <= PARAMETER_SLOTS:
            frozen[name] = array
    return frozen


def super_build(work: Path, packages: list[str], jobs: int, build_type: str = "Release") -> Path:
    """One CMake project that adds every package and builds every cli (keeps going on errors)."""
    lines = ["cmake_minimum_required(VERSION 3.16)", "project(conformance LANGUAGES C)"]
    for prefix in packages:
        upper = prefix.upper()
        lines += [
            f'set({upper}_BUILD_TOOLS ON CACHE BOOL "" FORCE)',
            f'set({upper}_BUILD_TESTS OFF CACHE BOOL "" FORCE)',
            f'set({upper}_INSTALL OFF CACHE BOOL "" FORCE)',
            f"add_subdirectory(packages/{prefix} {prefix})",
        ]
    (work / "CMakeLists.txt").write_text("\n".join(lines) + "\n")
    build = work / "build"
    cmake = str(Path(sys.executable).parent / "cmake")
    subprocess.run(
        [cmake, "-S", work, "-B", build, "-G", "Ninja", f"-DCMAKE_BUILD_TYPE={build_type}"],
        check=True,
        capture_output=True,
    )
    log = subprocess.run(
        [cmake, "--build", build, "--parallel", str(jobs), "--", "-k", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    (work / "build.log").write_text(log.stdout + log.stderr)
    return build


def _build_error(log: str, prefix: str) -> str:
    for line in log.splitlines():
        if f"/{prefix}/" in line and "error:" in line:
            return "build error: " + line.split("error:", 1)[1].strip()[:200]
    return "build error"


def run_packages(
    results: list[Result], cases: dict[str, Case], build: Path, log: str, packages_dir: Path
) -> None:
    for result in results:
        if result.gen != "generated":
            continue
        cli = build / result.package / f"{result.package}_cli"
        if not cli.exists():
            result.gen = _build_error(log, result.package)
            continue
        case_dir = Path(cases[result.name].directory)
        expected = _load_values(case_dir / "test_data_set_0", "output")
        names = _graph_input_names(onnx.load(str(case_dir / "model.onnx"), load_external_data=False))
        by_name = dict(zip(names, _load_values(case_dir / "test_data_set_0", "input"), strict=False))
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            declared = json.loads((packages_dir / result.package / "metadata.json").read_text())["inputs"]
            for i, spec in enumerate(declared):  # frozen inputs are no longer package inputs
                array = by_name[spec["name"]]
                # Some cases store a scalar as [1] (or the reverse); feed the declared shape.
                if array.size == int(np.prod(spec["shape"], dtype=np.int64)):
                    array = array.reshape(spec["shape"])
                paths.append(Path(tmp) / f"in{i}.npy")
                np.save(paths[-1], np.asarray(array, order="C"))
            run = subprocess.run(
                [cli, "--output-dir", Path(tmp) / "out", *paths],
                capture_output=True,
                text=True,
                check=False,
                timeout=120,
            )
            if run.returncode != 0:
                result.gen = f"run failed ({run.returncode}): {run.stderr.strip()[:200]}"
                continue
            actual = [np.load(Path(tmp) / "out" / f"output_{i}.npy") for i in range(len(expected))]
        result.gen = _matches(actual, expected)


def reason_group(reason: str) -> str:
    """Failure reasons with case-specific details folded, for counting."""
    text = re.sub(r"'[^']*'", "'…'", reason)
    text = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    text = re.sub(r"\([^()]*\)", "(…)", text)
    return text[:140]


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.0f}%)" if total else str(count)


def _counts(rows: list[Result]) -> dict[str, int]:
    tensor = [r for r in rows if r.tensor_case]
    return {
        "cases": len(rows),
        "tensor": len(tensor),
        "vm": sum(r.vm == "pass" for r in tensor),
        "ort": sum(r.ort == "pass" for r in tensor),
        "emx": sum(r.emx == "pass" for r in tensor),
        "strict": sum(r.gen == "pass" and not r.frozen for r in tensor),
        "ours": sum(r.gen == "pass" for r in tensor),
        "lost": sum(r.lost for r in tensor),
        "ort_lost": sum(r.ort == "pass" and r.gen != "pass" for r in tensor),
    }


def write_report(results: list[Result], path: Path, seconds: float, selection: str) -> None:
    suites = sorted({r.suite for r in results})
    emx = any(r.emx != "not run" for r in results)
    emx_column = "emx-onnx-cgen" if emx else "emx-onnx-cgen (not installed)"
    lines = [
        "# ONNX conformance",
        "",
        f"Produced by `tools/conformance.py` ({selection}) in {seconds / 60:.1f} minutes on a 2-core "
        "machine.",
        "Each case runs through TVM alone (its own `from_onnx`, `tvm.compile` for LLVM, its Relax VM),",
        "ONNX Runtime (CPU provider), emx-onnx-cgen 1.4.0 (an ONNX-to-C generator; its ONNX backend",
        "generates C, compiles it with gcc -O2 and runs it) and",
        "the full relay2cmake path (gen → CMake super-build → `<prefix>_cli` on the case's inputs),",
        f"each compared with the case's expected outputs the same way: rtol {RTOL}, atol {ATOL}.",
        "",
        "*Strict* runs `gen` on the model as it is. Many node cases feed shape-like values (axes,",
        "pads, sizes, scales) as run-time inputs, which no static-shape compiler can take; when",
        "strict generation fails, the runner freezes those inputs (rank 0-1 inputs used only in",
        "parameter slots such as `axes`, `shape`, `pads`, `K`, `sizes`, `scales`; never data) with",
        "`gen --constant-input NAME=values.npy`, as a user",
        "would, and counts the case under *with constant inputs* (which includes the strict passes).",
        "",
        f"| suite | cases | tensor cases | TVM VM | ONNX Runtime | {emx_column} | relay2cmake strict "
        "| relay2cmake with constant inputs | VM passes lost by relay2cmake "
        "| ONNX Runtime passes relay2cmake fails |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for suite in [*suites, "all"]:
        c = _counts([r for r in results if suite in ("all", r.suite)])
        t = c["tensor"]
        lines.append(
            f"| {suite} | {c['cases']} | {t} | {_share(c['vm'], t)} | {_share(c['ort'], t)} "
            f"| {_share(c['emx'], t) if emx else '—'} | {_share(c['strict'], t)} | {_share(c['ours'], t)} "
            f"| {c['lost']} | {c['ort_lost']} |"
        )
    lines += ["", "## relay2cmake failures by reason", "", "| cases | reason |", "| ---: | --- |"]
    for reason, count in Counter(
        reason_group(r.gen) for r in results if r.tensor_case and r.gen != "pass"
    ).most_common(40):
        lines.append(f"| {count} | {reason.replace('|', '/')} |")
    lost = [r for r in results if r.lost]
    if lost:
        lines += ["", "## Cases the VM passes and relay2cmake does not", ""]
        lines += [f"- `{r.suite}/{r.name}`: {r.gen}" for r in lost]
    behind = [r for r in results if r.tensor_case and r.ort == "pass" and r.gen != "pass"]
    if behind:
        lines += ["", "## Cases ONNX Runtime passes and relay2cmake does not", ""]
        lines += [f"- `{r.suite}/{r.name}`: {r.gen}" for r in behind]
    lines += _operator_table(results, emx)
    path.write_text("\n".join(lines) + "\n")


def _operator_table(results: list[Result], emx: bool) -> list[str]:
    """Per operator: how many tensor cases hold it, and how many each path passes."""
    by_operator: dict[str, list[Result]] = {}
    for r in results:
        if r.tensor_case:
            for op in r.operators:
                by_operator.setdefault(op, []).append(r)
    lines = [
        "",
        "## By operator",
        "",
        "A case counts for every operator in its graph (an expanded function's case counts for each",
        "primitive it expands to); *strict* as above. Rows where relay2cmake passes fewer cases than",
        "another path come first.",
        "",
        "| operator | cases | TVM VM | ONNX Runtime | emx-onnx-cgen | relay2cmake strict |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows = []
    for op, cases in by_operator.items():
        c = _counts(cases)
        best_other = max(c["vm"], c["ort"], c["emx"])
        rows.append((c["strict"] >= best_other, op, c))
    for _, op, c in sorted(rows, key=lambda row: (row[0], row[1])):
        lines.append(
            f"| {op} | {c['tensor']} | {c['vm']} | {c['ort']} | {c['emx'] if emx else '—'} | {c['strict']} |"
        )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description="ONNX conformance through relay2cmake and TVM's VM")
    parser.add_argument("--filter", default="", help="regular expression on case names")
    parser.add_argument("--slice", choices=["ci"], help="run the representative CI slice")
    parser.add_argument("--limit", type=int, default=0, help="at most this many cases")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--work", type=Path, help="keep the work folder here (default: a temporary one)")
    parser.add_argument(
        "--out", type=Path, help="Markdown report (default: docs/conformance.md for a full run)"
    )
    parser.add_argument("--json", type=Path, help="also write every result as JSON")
    parser.add_argument(
        "--no-references",
        action="store_true",
        help="skip TVM's VM and ONNX Runtime (their columns say 'not run'): only the packages",
    )
    parser.add_argument(
        "--build-type",
        default="Release",
        help="CMAKE_BUILD_TYPE of the packages' build; empty: no optimisation flags (the test slice's: "
        "it checks values, and the packages' runtimes compiled at -O3 were 90%% of its build time)",
    )
    args = parser.parse_args()

    start = time.perf_counter()
    work = args.work or Path(tempfile.mkdtemp(prefix="conformance-"))
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "cases" / "node").is_dir():
        generate_node_cases(work / "cases")
    cases = collect(work / "cases")
    if args.slice == "ci":
        wanted = set(CI_SLICE)
        cases = [c for c in cases if c.name in wanted]
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c.name)]
    if args.limit:
        cases = cases[: args.limit]
    packages = work / "packages"
    shutil.rmtree(packages, ignore_errors=True)
    packages.mkdir()
    print(f"{len(cases)} cases; work folder {work}", flush=True)

    results = run_cases(cases, packages, args.jobs, start, references=not args.no_references)
    generated = [r.package for r in results if r.gen == "generated"]
    print(f"building {len(generated)} packages in one CMake project", flush=True)
    build = super_build(work, generated, args.jobs, args.build_type) if generated else work
    log = (work / "build.log").read_text() if generated else ""
    run_packages(results, {c.name: c for c in cases}, build, log, packages)
    seconds = time.perf_counter() - start

    selection = "the CI slice" if args.slice else (f"filter {args.filter!r}" if args.filter else "all cases")
    out = args.out or (
        ROOT / "docs" / "conformance.md" if not (args.slice or args.filter or args.limit) else None
    )
    if out:
        write_report(results, out, seconds, selection)
        print(f"wrote {out}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    c = _counts(results)
    emx = f", emx-onnx-cgen {c['emx']}" if EMX_INSTALLED else ", emx-onnx-cgen not installed"
    print(
        f"{c['tensor']} tensor cases pass: TVM VM {c['vm']}, ONNX Runtime {c['ort']}{emx}; relay2cmake "
        f"{c['strict']} strict, {c['ours']} with constant inputs; {c['lost']} VM passes lost, "
        f"{c['ort_lost']} ONNX Runtime passes failed"
    )
    for r in (r for r in results if r.lost):
        print(f"  lost {r.name}: {r.gen}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
