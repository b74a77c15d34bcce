"""Side-by-side latency: ONNX Runtime, TVM's own VM running our kernels, and our package.

One command (about 10 minutes on 2 cores): ``python benchmarks/run.py`` writes
``docs/performance.md``. For each model of ``benchmarks/models.py`` and for 1 and 2 threads
it measures, in this one run, median latencies of

- ONNX Runtime (CPU provider, all graph optimisations, ``intra_op_num_threads`` = T);
- TVM's Relax VM on the same lowered module and the same default schedules as our
  package (so the difference is the driver), ``TVM_NUM_THREADS`` = T;
- the generated package's ``<name>_cli --bench --threads T`` (default targets: C plus the
  x86-64-v3 object set and its AVX-512 twin), built Release with the system compiler;

and prints ratios, GFLOPS, % of this machine's measured single-core peak (``peak.c``),
arena bytes and library size; then times every conv and matmul kernel alone on one thread
(``kernels.py``) against that peak. Machines here are shared: each latency is the best of three
medians, and ratios compare measurements of one run.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import kernels  # noqa: E402  (the benchmark's own modules, beside this file)
import models  # noqa: E402

PYTHON = sys.executable
# Each latency is the best of this many medians: other work on the machine only ever adds time.
ROUNDS = 3


def _cmake() -> str:
    local = Path(PYTHON).parent / "cmake"
    return str(local) if local.exists() else "cmake"


def measure_peak(work: Path) -> dict[str, float]:
    """GFLOPS of one core with FMA chains in registers (``peak.c``): with the CPU's widest
    vectors ("native") and with AVX2 ("x86-64-v3")."""
    result = {}
    for label, flags in [("native", ["-march=native"]), ("x86-64-v3", ["-march=x86-64-v3", "-DLANES=8"])]:
        binary = work / f"peak_{label}"
        subprocess.run(
            ["cc", "-O2", "-ffp-contract=fast", *flags, str(HERE / "peak.c"), "-o", str(binary)], check=True
        )
        runs = [
            float(subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout.split()[0])
            for _ in range(3)
        ]
        result[label] = max(runs)
    return result


def _peak_for(kernel_set: str, peak: dict[str, float]) -> float:
    """The peak for the vectors of the kernel set the package ran ("x86_64:x86-64-v4", ...)."""
    return peak["native" if kernel_set.endswith("x86-64-v4") else "x86-64-v3"]


def _runs(runs: int, flop: float) -> int:
    """Timed runs for a model of ``flop``: fewer for big ones; 20x for tiny ones, whose 50
    runs (1.5 ms for the MLP) one preemption of this shared machine could all fall into."""
    if flop < 1e7:
        return runs * 20
    return runs if flop < 2e9 else max(10, runs // 5)


def _median_ms(fn, warmup: int, runs: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def onnxruntime_ms(model_path: Path, inputs: dict[str, np.ndarray], threads: int, runs: int) -> float:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    call = functools.partial(session.run, None, inputs)
    result = min(_median_ms(call, warmup=5, runs=runs) for _ in range(ROUNDS))
    # ORT's worker threads keep spinning after a run; end them before the next measurement
    # (left alive, they halved our 2-thread speed on this 2-core machine).
    del call, session
    gc.collect()
    return result


VM_SCRIPT = r"""
import json, sys, numpy as np, tvm
from pathlib import Path
from tvm import relax
from relay2cmake.frontends import import_model
from relay2cmake.lower.pipeline import scheduled_kernels
from relay2cmake.targets import host_runs_wide, parse_targets

model, input_path, runs = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
target = parse_targets(None)[1]
if target.wide_variant() is not None and host_runs_wide():
    target = target.wide_variant()  # the set the package runs on this machine
imported = import_model(model, {}, None)
tvm_target = target.tvm_target()
low, _, _ = scheduled_kernels(imported.module, target)  # the kernels gen schedules
executable = tvm.compile(low, target=tvm_target, relax_pipeline=tvm.transform.Sequential([]))
vm = relax.VirtualMachine(executable, tvm.cpu())
x = tvm.runtime.tensor(np.load(input_path))
timer = vm.time_evaluator("main", tvm.cpu(), number=max(1, runs // 10), repeat=10, min_repeat_ms=50)
print(json.dumps({"ms": min(float(np.median(timer(x).results)) for _ in range(3)) * 1e3}))
"""


def tvm_vm_ms(model_path: Path, input_path: Path, threads: int, runs: int) -> float:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    result = subprocess.run(
        [PYTHON, "-c", VM_SCRIPT, str(model_path), str(input_path), str(runs)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])["ms"]


def build_package(model_path: Path, work: Path, name: str, targets: list[str]) -> tuple[Path, dict]:
    package, build = work / f"{name}_pkg", work / f"{name}_build"
    subprocess.run(
        [
            PYTHON,
            "-m",
            "relay2cmake",
            "--quiet",
            "gen",
            str(model_path),
            "-o",
            str(package),
            "--name",
            name,
            "--force",
            *targets,
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            _cmake(),
            "-S",
            package,
            "-B",
            build,
            "-G",
            "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            f"-D{name.upper()}_BUILD_TESTS=OFF",
        ],
        check=True,
        capture_output=True,
    )
    subprocess.run([_cmake(), "--build", build], check=True, capture_output=True)
    return build, json.loads((package / "metadata.json").read_text())


def ours_ms(build: Path, name: str, input_path: Path, threads: int, runs: int) -> tuple[float, str]:
    """Best median of ROUNDS runs of the cli, and the kernel set it reported."""
    rounds = [_ours_round(build, name, input_path, threads, runs) for _ in range(ROUNDS)]
    return min(ms for ms, _ in rounds), rounds[0][1]


def _ours_round(build: Path, name: str, input_path: Path, threads: int, runs: int) -> tuple[float, str]:
    result = subprocess.run(
        [
            str(build / f"{name.lower()}_cli"),
            "--bench",
            str(runs),
            "--warmup",
            "5",
            "--threads",
            str(threads),
            "--output-dir",
            str(build / "out"),
            str(input_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    kernels = re.search(r"^kernels (.+)$", result.stdout, re.M)
    return float(re.search(r"median=([0-9.]+)", result.stdout).group(1)), kernels.group(1) if kernels else "?"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", default=",".join(models.MODELS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--runs", type=int, default=50, help="timed runs per measurement")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    parser.add_argument("--work", type=Path, help="keep builds here (default: a temporary folder)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="relay2cmake-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    thread_counts = [int(t) for t in args.threads.split(",")]
    started = time.perf_counter()
    peak = measure_peak(work)
    print(
        f"measured single-core peak: {peak['native']:.0f} GFLOPS (native), "
        f"{peak['x86-64-v3']:.0f} GFLOPS (AVX2)",
        flush=True,
    )
    rows, kernel_rows = [], {}
    for model_name in args.models.split(","):
        model = models.MODELS[model_name]()
        model_path = work / f"{model_name}.onnx"
        onnx.save(model, str(model_path))
        flop = models.flops(model)
        name = model_name.capitalize()
        build, meta = build_package(model_path, work, name, [])
        spec = meta["inputs"][0]
        x = np.random.default_rng(0).standard_normal(spec["shape"]).astype(np.float32)
        input_path = work / f"{model_name}_input.npy"
        np.save(input_path, x)
        library = build / f"lib{name.lower()}.a"
        for threads in thread_counts:
            runs = _runs(args.runs, flop)
            ours, kernel_set = ours_ms(build, name, input_path, threads, runs)
            row = {
                "model": model_name,
                "gflop": flop / 1e9,
                "threads": threads,
                "ort": onnxruntime_ms(model_path, {spec["name"]: x}, threads, runs),
                "vm": tvm_vm_ms(model_path, input_path, threads, runs),
                "ours": ours,
                "kernel_set": kernel_set,
                "arena": meta["memory"]["arena_bytes"],
                "library": library.stat().st_size if library.exists() else 0,
                "scheduled": len(meta["scheduled_kernels"].get("x86_64", [])),  # the same in the twin
                "kernels": len(meta["kernels"]),
            }
            rows.append(row)
            print(
                f"{model_name:12s} T={threads} ORT {row['ort']:.3f} ms  TVM VM {row['vm']:.3f} ms  "
                f"ours {row['ours']:.3f} ms  ours/ORT {row['ours'] / row['ort']:.2f}",
                flush=True,
            )
        kernel_rows[model_name] = kernels.time_kernels(model_path, rows[-1]["kernel_set"])
        print(_kernel_summary(model_name, kernel_rows[model_name], _peak_for(rows[-1]["kernel_set"], peak)))
    write_report(rows, kernel_rows, peak, args.out, time.perf_counter() - started, thread_counts)
    print(f"wrote {args.out}")
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


# Conv and matmul kernels below this share of peak are listed by name (the goal).
GOAL_SHARE = 0.8


def _kernel_summary(model: str, rows: list, peak: float) -> str:
    """One line of performance.md's kernel table: the model's conv and matmul kernels, each
    timed alone on one thread; compute-bound ones against the single-core peak."""
    dense = [r for r in rows if r.conv_or_matmul and r.flop]
    compute = [r for r in dense if not r.memory_bound]
    memory = ", ".join(f"{r.name} {r.gbytes_per_s:.0f} GB/s" for r in dense if r.memory_bound) or "none"
    share = sum(r.total for r in dense) / sum(r.total for r in rows)
    if not compute:
        return f"| {model} | 0 | {share:.0%} | - | - | - | - | - | {memory} |"
    work = sum(r.flop * r.calls for r in compute)
    gflops = work / sum(r.total for r in compute) / 1e9
    below = [r for r in compute if r.gflops < GOAL_SHARE * peak]
    at_goal = work - sum(r.flop * r.calls for r in below)
    listed = ", ".join(f"{r.name} {r.gflops:.0f} GFLOPS ({r.gflops / peak:.0%})" for r in below) or "none"
    return (
        f"| {model} | {len(compute)} | {share:.0%} | {gflops:.1f} | {gflops / peak:.0%} | "
        f"{min(r.gflops for r in compute) / peak:.0%} | {at_goal / work:.1%} | {listed} | {memory} |"
    )


def write_report(
    rows: list[dict], kernel_rows: dict, peak: dict, path: Path, seconds: float, thread_counts: list[int]
) -> None:
    kernel_set = rows[0]["kernel_set"] if rows else "?"
    own_peak = _peak_for(kernel_set, peak)
    lines = [
        "# Performance",
        "",
        f"Produced by `python benchmarks/run.py` in {seconds / 60:.1f} minutes on this project's machine "
        f"({platform.machine()}, {os.cpu_count()} cores, shared with other work: compare ratios within "
        "one run). Latencies are the best of three medians. *TVM VM* runs the same lowered module "
        "and the same default schedules as the package, through TVM's Relax VM and runtime; *ours* is the "
        "package's `<name>_cli --bench` with the default kernel sets (C + x86-64-v3 objects and "
        f"their AVX-512 twin; this run used {kernel_set}), built Release by the system gcc.",
        "",
        f"Measured single-core fp32 peak (`benchmarks/peak.c`, twelve independent FMA chains in "
        f"registers): {peak['native']:.0f} GFLOPS with this CPU's widest vectors, {peak['x86-64-v3']:.0f} "
        "GFLOPS with AVX2. % of peak is against the figure for the vectors the package used, times the "
        "threads. A model's GFLOPS count the work of direct convolutions; 3x3 layers run as Winograd "
        "F(2x2, 3x3) do 2.25x fewer multiply-adds, so a model with many of them can pass 100%.",
        "",
        "| model | GFLOP | threads | ONNX Runtime ms | TVM VM ms | ours ms | ours/ORT | ours/VM "
        "| ours GFLOPS | % of peak | arena B | library B | scheduled kernels |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        gflops = r["gflop"] / (r["ours"] / 1e3)
        lines.append(
            f"| {r['model']} | {r['gflop']:.3f} | {r['threads']} | {r['ort']:.3f} | {r['vm']:.3f} | "
            f"{r['ours']:.3f} | {r['ours'] / r['ort']:.2f} | {r['ours'] / r['vm']:.2f} | {gflops:.1f} | "
            f"{100 * gflops / (own_peak * r['threads']):.0f}% | {r['arena']} | {r['library']} | "
            f"{r['scheduled']}/{r['kernels']} |"
        )
    lines += [
        "",
        "| threads | geometric mean ours/ORT | geometric mean ours/TVM VM |",
        "| ---: | ---: | ---: |",
    ]
    for threads in thread_counts:
        subset = [r for r in rows if r["threads"] == threads]
        lines.append(
            f"| {threads} | {_geomean([r['ours'] / r['ort'] for r in subset]):.2f} | "
            f"{_geomean([r['ours'] / r['vm'] for r in subset]):.2f} |"
        )
    lines += [
        "",
        "## Conv and matmul kernels, one thread",
        "",
        "Each kernel of the model is scheduled and built as the package's kernel set is "
        f"({kernel_set}), then timed alone by TVM's `time_evaluator` (warm caches), with TVM's "
        "estimate of its floating-point work (`benchmarks/kernels.py` prints the whole list). "
        f"Kernels doing fewer than {kernels.MEMORY_BOUND_INTENSITY} flop per byte of their operands "
        "(M = 1 matmuls, depthwise convs) are memory-bound: they are listed with their operand "
        "bandwidth instead. For the compute-bound rest, GFLOPS are work-weighted, and *work at goal* "
        f"is the share of their work done by kernels at {GOAL_SHARE:.0%} of peak or more.",
        "",
        "| model | compute-bound kernels | conv+matmul share of kernel time | GFLOPS | % of peak | "
        f"slowest, % of peak | work at goal | below {GOAL_SHARE:.0%} of peak | memory-bound |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    lines += [_kernel_summary(model, kernel_rows[model], own_peak) for model in kernel_rows]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
