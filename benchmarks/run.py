"""Side-by-side latency on the real-model zoo: ONNX Runtime, OpenVINO and our package.

    .venv/bin/python benchmarks/run.py [--only MODEL ...] [--modes quiet,busy] [--no-kernels]
                                       [--resume] [--report] [--kernels-only]

One ONNX export per model of ``tools/real_zoo_models.py`` (the first the zoo lists; GPT-2's
``.pt2`` too, with its ONNX export for the runtimes), exported and cached as the zoo does.
For each: ``relay2cmake gen`` (this checkout, default targets, no self-check), a Release
build, then at 1 and 2 threads, in rounds that interleave the three:

- ONNX Runtime (CPU provider, all graph optimisations, ``intra_op_num_threads`` = T);
- OpenVINO (CPU plugin, latency hint, f32 inference precision, ``INFERENCE_NUM_THREADS`` = T);
- the package's ``<name>_cli --bench --threads T``.

Each runtime runs in a process of its own (``runtimes.py``). Modes: *quiet* (as quiet as this
shared machine gets; best of the rounds' medians) and *busy* (a neighbour process spins on
the last CPU the whole time; median of the rounds' medians, since the disturbance is the
point). Then every kernel of the package is timed alone on one thread (``kernels.py``): the
time outside kernels is the package's 1-thread latency minus their sum. And the package is
rebuilt with ``<P>_PROFILE=ON`` and run once more at 1 thread with ``--profile``: the same
kernels timed inside it, and the time outside its steps.

Each model's figures go to ``benchmarks/results/<model>.json`` (kept in git, with the commit
and the machine that measured them) when it finishes; ``--report`` (re)writes
``docs/performance.md`` from all of them, so a run of a few models (``--only``) updates their
rows and keeps the others'. ``--resume`` skips the models already measured at this commit. The
whole zoo takes about an hour on 2 cores (50 min at b84fc78, exports cached).
``--kernels-only`` times the kernels of models already measured again, with this checkout's
schedules, and keeps their latencies (the report names both commits).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import platform
import re
import shutil
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tools"))
# This checkout's relay2cmake (kernels.py imports it), also when it is a snapshot of a commit
# run beside an editable install of another (a long run undisturbed by edits in progress).
sys.path.insert(0, str(ROOT))
import kernels  # noqa: E402  (the benchmark's own modules, beside this file)
import real_zoo  # noqa: E402
from real_zoo_models import ENTRIES, MODELS, Entry  # noqa: E402
from runtimes import RUNTIMES, Worker  # noqa: E402

PYTHON = sys.executable
OUT = ROOT / "build" / "bench"
# Each model's figures, kept in git: docs/performance.md is rewritten from them, so a later
# run of some models (--only) updates their rows and keeps the others'.
RESULTS = HERE / "results"
NOT_MODELS = ("peak.json", "threads.json")  # beside the models' results
MACHINE_PEAK: dict = {}  # this machine's, measured once per run (main)
ROUNDS = 3
# A pause before every median: ONNX Runtime's and OpenVINO's workers spin for a while after
# a run, on the cores the next runtime measured needs.
SETTLE_SECONDS = 0.2
THREADS = (1, 2)
# The seven models the performance issue was filed with: ours / ONNX Runtime at 1 thread as
# filed, and from the zoo run at its start (commit c81a777, docs/models.md of that day).
BEFORE = {
    "resnet18": ("0.70", 1.00),
    "bert": ("0.60-0.93", 0.76),
    "mobilenet_v3_small": ("1.51", 1.47),
    "efficientnet_b0": ("2.94", 2.95),
    "vit_tiny": ("4.08", 4.07),
    "gpt2": ("13.9", 12.87),
    "gpt2-pt2": ("112", 13.61),
}


def bench_entries() -> list[Entry]:
    """The first plain ONNX export the zoo lists for each model, and GPT-2's .pt2."""
    chosen: dict[str, Entry] = {}
    for entry in ENTRIES:
        if entry.is_onnx and not entry.edit and entry.model not in chosen:
            chosen[entry.model] = entry
    extra = [e for e in ENTRIES if e.model == "gpt2" and e.exporter == "pt2"]
    return [*chosen.values(), *extra]


def key(entry: Entry) -> str:
    return entry.model if entry.is_onnx else f"{entry.model}-{entry.exporter}"


# --------------------------------------------------------------------------- measuring


def measure_peak(work: Path) -> dict:
    """GFLOPS of one core with FMA chains in registers (``peak.c``): with the CPU's widest
    vectors ("native") and with AVX2 ("x86-64-v3"); and a core's memcpy bandwidth by working
    set (``copy.c``: "copy_gbps", bytes -> GB/s read and written)."""
    result: dict = {}
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
    binary = work / "copy"
    subprocess.run(["cc", "-std=c11", "-O2", str(HERE / "copy.c"), "-o", str(binary)], check=True)
    printed = subprocess.run([str(binary)], capture_output=True, text=True, check=True).stdout
    result["copy_gbps"] = {line.split()[0]: float(line.split()[1]) for line in printed.splitlines()}
    return result


def _spin() -> None:
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    while True:
        pass


class Neighbour:
    """A process spinning on the last CPU while the block runs (the busy mode)."""

    def __init__(self, busy: bool):
        self.process = multiprocessing.Process(target=_spin, daemon=True) if busy else None

    def __enter__(self) -> Neighbour:
        if self.process is not None:
            self.process.start()
            time.sleep(0.2)
        return self

    def __exit__(self, *exc) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.join()


def ours_median_ms(cli: Path, inputs: list[Path], threads: int, runs: int, out: Path) -> tuple[float, str]:
    # As many unmeasured runs first as measured ones: the runtimes' children stay loaded and
    # warm between medians, and the package's pool settles on its workers in its first runs
    # (with 3 warm-up runs a 2.5 ms model's median at 2 threads was its 1-thread time when a
    # runtime measured just before had left its threads spinning).
    printed = _bench_output(cli, inputs, threads, runs, out)
    kernel_set = re.search(r"^kernels (.+)$", printed, re.M)
    return _median(printed), kernel_set.group(1) if kernel_set else "?"


def _bench_output(cli: Path, inputs: list[Path], threads: int, runs: int, out: Path, *extra: str) -> str:
    """What ``cli --bench`` prints, after as many warm-up runs as measured ones."""
    command = [str(cli), "--bench", str(runs), "--warmup", str(runs), "--threads", str(threads), *extra]
    return subprocess.run(
        [*command, "--output-dir", str(out), *map(str, inputs)], capture_output=True, text=True, check=True
    ).stdout


def _median(printed: str) -> float:
    return float(re.search(r"median=([0-9.]+)", printed).group(1))


def profile_in_package(
    package: Path, build_dir: Path, prefix: str, inputs: list[Path], runs: int, out: Path
) -> dict:
    """The package rebuilt with <P>_PROFILE=ON (the runtime recompiles, the kernels and weights
    do not) and run once more at 1 thread with --profile: its median latency, the mean sum of
    its kernel steps and each kernel's total (in package, caches as the run leaves them)."""
    profiled = f"-D{prefix.upper()}_PROFILE=ON"
    real_zoo.run("profile", [real_zoo.BIN / "cmake", "-S", package, "-B", build_dir, profiled], "build")
    real_zoo.run("profile", [real_zoo.BIN / "cmake", "--build", build_dir, "--parallel", "2"], "build")
    printed = _bench_output(real_zoo.find_cli(build_dir, prefix), inputs, 1, runs, out, "--profile")
    kernels: dict[str, float] = {}
    for kernel, ms in re.findall(r"^step \d+ (\S+) ([0-9.]+)$", printed, re.M):
        kernels[kernel] = kernels.get(kernel, 0.0) + float(ms)
    return {
        "latency_ms": _median(printed),
        "steps_ms": float(re.search(r"^steps_ms ([0-9.]+)$", printed, re.M).group(1)),
        "kernels_ms": kernels,
    }


def _runs_for(ms: float) -> int:
    """Runs per median: about 0.6 s of work, at least 5 and at most 50."""
    return int(min(50, max(5, 600 / max(ms, 1e-3))))


def measure(cli: Path, inputs: list[Path], runtime_model: Path, feeds: Path, modes: list[str], work: Path):
    """Round medians per mode, thread count and runtime, the three interleaved in each round."""
    times: dict = {}
    first, kernel_set = ours_median_ms(cli, inputs, 1, 3, work / "out")  # sizes every median
    runs = _runs_for(first)
    for threads in THREADS:
        workers = {r: Worker(r, runtime_model, feeds, threads) for r in RUNTIMES}
        try:
            for mode in modes:
                rounds: dict[str, list[float]] = {"ours": [], **{r: [] for r in RUNTIMES}}
                with Neighbour(mode == "busy"):
                    for i in range(ROUNDS):
                        order = ["ours", *RUNTIMES]
                        for who in order[i % 3 :] + order[: i % 3]:  # each goes first once
                            time.sleep(SETTLE_SECONDS)  # the last one's spinning threads sleep
                            if who == "ours":
                                ms = ours_median_ms(cli, inputs, threads, runs, work / "out")[0]
                            else:
                                ms = workers[who].median_ms(runs)
                            rounds[who].append(ms)
                times.setdefault(mode, {})[str(threads)] = rounds
        finally:
            for worker in workers.values():
                worker.close()
    return times, kernel_set


def bench_one(entry: Entry, modes: list[str], with_kernels: bool) -> dict:
    result: dict = {"key": key(entry), "entry": entry.name, "model": entry.model, "status": "fail"}
    result["source"], result["exporter"] = MODELS[entry.model].source, entry.exporter
    result["machine"] = {"cpu": cpu_name(), "peak": MACHINE_PEAK}
    work = OUT / "work" / key(entry)
    started = time.perf_counter()
    try:
        path = real_zoo.export(entry)
        runtime_model = path if entry.is_onnx else real_zoo.onnx_sibling(entry)
        if runtime_model is None:
            raise real_zoo.StepError("export", "no ONNX export of this model for the runtimes")
        inputs = real_zoo.load_inputs(entry.model)
        work.mkdir(parents=True, exist_ok=True)
        feeds = work / "feeds.npz"
        np.savez(feeds, **inputs)
        package = generate(entry, path, inputs, work, result)
        metadata = json.loads((package / "metadata.json").read_text())
        build_dir = real_zoo.build(package, work, result)
        prefix = real_zoo.package_name(entry).lower()
        result["arena_bytes"] = metadata["memory"]["arena_bytes"]
        result.update(real_zoo.sizes(package, build_dir, prefix))
        cli = real_zoo.find_cli(build_dir, prefix)
        input_paths = []
        for i, array in enumerate(real_zoo.ordered_inputs(metadata, inputs)):
            input_paths.append(work / f"input_{i}.npy")
            np.save(input_paths[-1], array)
        result["times"], result["kernel_set"] = measure(cli, input_paths, runtime_model, feeds, modes, work)
        result["status"] = "pass"
        ours = latency(result, "quiet" if "quiet" in modes else modes[0], 1, "ours") or 1.0
        runs = _runs_for(ours)
        result["profile"] = profile_in_package(package, build_dir, prefix, input_paths, runs, work / "out")
        if with_kernels:
            result["kernels"] = kernel_rows(path, result["kernel_set"])
    except real_zoo.StepError as e:
        result["stage"], result["error"] = e.stage, str(e)
    except Exception as e:  # one model's failure is that model's, never the run's
        result["stage"], result["error"] = "harness", f"{type(e).__name__}: {e}".splitlines()[0]
        result["traceback"] = traceback.format_exc()
    result["seconds"] = round(time.perf_counter() - started, 1)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{key(entry)}.json").write_text(json.dumps(result, indent=1) + "\n")
    shutil.rmtree(work, ignore_errors=True)  # packages of big models take gigabytes
    return result


def generate(entry: Entry, path: Path, inputs: dict, work: Path, result: dict) -> Path:
    package = work / "pkg"
    command = [PYTHON, "-m", "relay2cmake", "-q", "gen", str(path), "-o", str(package), "--force"]
    command += ["--name", real_zoo.package_name(entry), "--no-self-check"]
    command += real_zoo.gen_args(entry, path, inputs)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise real_zoo.StepError("gen", real_zoo.last_error_line(done.stderr) or f"exit {done.returncode}")
    result["gen_seconds"] = round(time.perf_counter() - start, 1)
    result["relay2cmake"] = real_zoo.generator_commit()
    return package


def kernel_rows(path: Path, kernel_set: str) -> list[dict]:
    """Every kernel of the package timed alone, as ``kernels.py`` prints them."""
    rows = kernels.time_kernels(path, kernel_set if kernel_set != "?" else "x86_64")
    return [
        {
            "name": r.name,
            "calls": r.calls,
            "ms": r.seconds * 1e3,
            "flop": r.flop,
            "bytes": r.bytes,
            "scheduled": r.scheduled,
            "memory_bound": r.memory_bound,
            "conv_or_matmul": r.conv_or_matmul,
        }
        for r in rows
    ]


def retime_kernels(entry: Entry) -> str:
    """The kernels of a model already measured, timed again with this checkout (its
    latencies stay): a line for the log."""
    path = RESULTS / f"{key(entry)}.json"
    if not path.exists():
        return f"{key(entry):24s} skip (not measured)"
    result = json.loads(path.read_text())
    if result["status"] != "pass":
        return f"{key(entry):24s} skip ({result['status']})"
    started = time.perf_counter()
    result["kernels"] = kernel_rows(real_zoo.export(entry), result["kernel_set"])
    result["kernels_relay2cmake"] = real_zoo.generator_commit()
    result["kernels_peak"] = MACHINE_PEAK
    path.write_text(json.dumps(result, indent=1) + "\n")
    return f"{key(entry):24s} kernels {kernels_ms(result):8.2f} ms  {time.perf_counter() - started:6.1f}s"


# --------------------------------------------------------------------------- report


def peak_for(kernel_set: str, peak: dict) -> float:
    """The single-core peak for the vectors of the kernel set the package ran."""
    return peak.get("native" if kernel_set.endswith("x86-64-v4") else "x86-64-v3", 0.0)


def kernels_machine_peak(result: dict, fallback: dict) -> dict:
    """Peaks and copy bandwidths of the machine that timed this result's kernels: the one
    that measured its latencies, or the one of a later ``--kernels-only`` run (results from
    several sessions' machines are reported together, and their peaks differ by 30%)."""
    return result.get("kernels_peak") or result.get("machine", {}).get("peak") or fallback


def result_peak(result: dict, fallback: dict) -> float:
    """The peak of the machine that timed this result's kernels, for the kernel set the
    package ran there."""
    return peak_for(result.get("kernel_set", "?"), kernels_machine_peak(result, fallback))


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def measured_on(result: dict) -> str:
    """The machine and kernel set of a result, e.g. "AMD EPYC, x86-64-v3": the project's
    machines change between sessions, and ratios compare only within one machine."""
    cpu = result.get("machine", {}).get("cpu", "an unrecorded CPU")
    return f"{cpu}, {result.get('kernel_set', '?').split(':')[-1]}"


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def latency(result: dict, mode: str, threads: int, who: str) -> float | None:
    rounds = result.get("times", {}).get(mode, {}).get(str(threads), {}).get(who)
    if not rounds:
        return None
    return min(rounds) if mode == "quiet" else float(np.median(rounds))


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def best_runtime(result: dict, threads: int) -> tuple[str, float | None]:
    figures = [(r, latency(result, "quiet", threads, r)) for r in RUNTIMES]
    figures = [(r, v) for r, v in figures if v]
    return min(figures, key=lambda f: f[1]) if figures else ("-", None)


# Conv and matmul kernels below this share of peak are named (the goal).
GOAL_SHARE = 0.8


def kernels_ms(result: dict) -> float:
    return sum(k["ms"] * k["calls"] for k in result.get("kernels", []))


def _top_kernels(result: dict, peak: float, count: int = 5) -> list[str]:
    rows = sorted(result.get("kernels", []), key=lambda k: k["ms"] * k["calls"], reverse=True)
    total = kernels_ms(result)
    lines = []
    for k in rows[:count]:
        seconds = k["ms"] / 1e3
        speed = (
            f"{k['bytes'] / seconds / 1e9:.0f} GB/s of operands (memory-bound)"
            if k["memory_bound"]
            else f"{k['flop'] / seconds / 1e9:.0f} GFLOPS ({k['flop'] / seconds / 1e9 / peak:.0%} of peak)"
        )
        lines.append(
            f"  - `{k['name']}` x{k['calls']}: {k['ms'] * k['calls']:.2f} ms "
            f"({k['ms'] * k['calls'] / total:.0%} of the kernels), "
            f"{speed if k['flop'] else 'no flop estimate'}{'' if k['scheduled'] else ', no schedule'}"
        )
    return lines


def write_report(results: list[dict], peak: dict, path: Path) -> None:
    passed = [r for r in results if r["status"] == "pass"]
    kernel_sets = sorted({r.get("kernel_set", "?") for r in passed})
    cpus = sorted({r.get("machine", {}).get("cpu", "an unrecorded CPU") for r in passed})
    commits = sorted({r.get("relay2cmake", "?") for r in passed})
    kernel_commits = sorted({r.get("kernels_relay2cmake", r.get("relay2cmake", "?")) for r in passed})
    lines = [
        "# Performance",
        "",
        f"Produced by `python benchmarks/run.py` on this project's machines ({'; '.join(cpus)}; "
        f"{os.cpu_count()} cores, shared with other work, so compare ratios within one row: the three "
        "runtimes were measured interleaved, in rounds). Models: one ONNX export of each model of the "
        "real-model zoo (`tools/real_zoo_models.py`: torchvision, timm, transformers and a few "
        "written here; random weights; batch 1), plus GPT-2's `torch.export` `.pt2` (the runtimes "
        f"run its ONNX export). relay2cmake {', '.join(commits)}; packages generated with the default "
        f"kernel sets and built Release by the system gcc; the machine ran {', '.join(kernel_sets)}.",
        "",
        "- *ONNX Runtime*: CPU provider, all graph optimisations, `intra_op_num_threads` = threads.",
        "- *OpenVINO* 2026.4.1: CPU plugin, `PERFORMANCE_HINT` latency, f32 inference precision, "
        "`INFERENCE_NUM_THREADS` = threads.",
        "- *ours*: the package's `<name>_cli --bench --threads T`.",
        "",
        "Quiet latencies are the best of three rounds' medians (other work only adds time). "
        "*best* is the faster of ONNX Runtime and OpenVINO for that model and thread count. The "
        "runtimes are timed through their Python bindings (10-60 us a call) and the package in C, "
        f"which favours the package on models that take well under a millisecond; the summary "
        f"therefore also gives the means over the models that take ONNX Runtime {SMALL_MS:g} ms or more. "
        "*kernels ms* is the sum of every kernel timed alone (one thread, warm caches, TVM's "
        "`time_evaluator`; per kernel the fastest of 7 repeats of 20 or more calls) times its calls, "
        f"with relay2cmake {', '.join(kernel_commits)}; *outside kernels* is the package's 1-thread "
        "latency minus that sum: copies, the driver and launches, or, when negative, kernels that ran "
        "faster inside the package than alone (timings on this shared machine move by 10-20%). "
        "*in package ms*: the same kernels timed inside the package (a build with `<P>_PROFILE=ON`, "
        "the cli's `--profile`, one thread: each step between the clock readings around its call), "
        "and *outside steps ms* that run's median latency minus their sum: what the driver itself "
        "costs (input and output copies, the step loop). In package minus alone is what the caches "
        "cost: the weights and activations a kernel finds where the previous kernels left them, "
        "not warm from its own last call.",
        "",
    ]
    lines += _summary(passed)
    lines += ["", "## Per model", ""]
    lines += [
        "| model | source | measured on | ORT ms 1t | OpenVINO ms 1t | ours ms 1t | ours/ORT 1t "
        "| ours/best 1t | ORT ms 2t | OpenVINO ms 2t | ours ms 2t | ours/ORT 2t | ours/best 2t "
        "| kernels ms | outside kernels ms | in package ms | outside steps ms | arena MB | library MB |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in passed:
        cells = [f"{r['key']}", r["source"], measured_on(r)]
        for threads in THREADS:
            ort, ov, ours = (latency(r, "quiet", threads, w) for w in ("ort", "openvino", "ours"))
            best = best_runtime(r, threads)[1]
            cells += [_ms(ort), _ms(ov), _ms(ours), _ratio(ours, ort), _ratio(ours, best)]
        inside = kernels_ms(r)
        ours1 = latency(r, "quiet", 1, "ours")
        cells += [
            _ms(inside) if inside else "-",
            _ms(ours1 - inside) if inside and ours1 else "-",
            *_profile_cells(r.get("profile")),
            f"{r['arena_bytes'] / 1e6:.1f}",
            f"{(r.get('library_bytes') or 0) / 1e6:.1f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += _busy_section(passed)
    lines += _threads_section(RESULTS / "threads.json")
    lines += _worst_section(passed, peak)
    lines += _before_after(passed)
    lines += _kernel_goal_section(passed, peak)
    lines += _memory_goal_section(passed, peak)
    failed = [r for r in results if r["status"] != "pass"]
    if failed:
        lines += ["", "## Not measured", ""]
        lines += [f"- `{r['key']}` ({r.get('stage')}): {r.get('error', '')}" for r in failed]
    path.write_text("\n".join(lines) + "\n")


def _profile_cells(profile: dict | None) -> list[str]:
    """In-package kernel time and the time outside the steps (results measured before the
    profiling build existed: none)."""
    if not profile:
        return ["-", "-"]
    return [_ms(profile["steps_ms"]), _ms(profile["latency_ms"] - profile["steps_ms"])]


# Below this ONNX Runtime latency a model's figures are dominated by call overheads: the
# runtimes are timed through their Python bindings (10-60 us a call), the package in C.
SMALL_MS = 1.0


def _summary(passed: list[dict]) -> list[str]:
    lines = [
        "| threads | models | geometric mean ours/ORT | geometric mean ours/best | slower than 1.3x ORT "
        "| worst model (ours/ORT) |",
        "| ---: | --- | ---: | ---: | ---: | --- |",
    ]
    for threads in THREADS:
        large = [r for r in passed if (latency(r, "quiet", 1, "ort") or 0) >= SMALL_MS]
        for label, subset in (
            (f"all {len(passed)}", passed),
            (f"{len(large)} of {SMALL_MS:g} ms or more", large),
        ):
            vs_ort = {r["key"]: _div(r, threads, "ort") for r in subset}
            vs_ort = {k: v for k, v in vs_ort.items() if v}
            vs_best = [
                latency(r, "quiet", threads, "ours") / best_runtime(r, threads)[1]
                for r in subset
                if best_runtime(r, threads)[1]
            ]
            worst = max(vs_ort, key=lambda k: vs_ort[k]) if vs_ort else "-"
            slow = sum(v > 1.3 for v in vs_ort.values())
            lines.append(
                f"| {threads} | {label} | {_geomean(list(vs_ort.values())):.2f} | {_geomean(vs_best):.2f} | "
                f"{slow} of {len(vs_ort)} | {worst} ({vs_ort.get(worst, float('nan')):.2f}) |"
            )
    return lines


def _div(result: dict, threads: int, runtime: str) -> float | None:
    ours, theirs = latency(result, "quiet", threads, "ours"), latency(result, "quiet", threads, runtime)
    return ours / theirs if ours and theirs else None


def _busy_section(passed: list[dict]) -> list[str]:
    busy = [r for r in passed if "busy" in r.get("times", {})]
    if not busy:
        return []
    lines = [
        "",
        "## With a busy neighbour",
        "",
        "A process spins on the last CPU the whole time (medians of three rounds' medians). The "
        "thread pool's goal: 2 threads at most 1.10x the 1-thread time.",
        "",
        "| model | ours ms 1t | ours ms 2t | ours 2t/1t | ORT 2t/1t | OpenVINO 2t/1t |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    over = []
    for r in busy:
        one, two = (latency(r, "busy", t, "ours") for t in THREADS)
        ratios = [_ratio(latency(r, "busy", 2, w), latency(r, "busy", 1, w)) for w in ("ours", *RUNTIMES)]
        if one and two and two > 1.10 * one:
            over.append(r["key"])
        lines.append(f"| {r['key']} | {_ms(one)} | {_ms(two)} | {' | '.join(ratios)} |")
    lines += ["", f"Over the goal: {', '.join(over) if over else 'none'}."]
    return lines


def _threads_section(record_path: Path) -> list[str]:
    """The thread pool with every core loaded (``threads.py --record``), beside quiet and busy."""
    if not record_path.exists():
        return []
    rows = sorted(json.loads(record_path.read_text()).values(), key=lambda r: (r["package"], r["mode"]))
    lines = [
        "",
        "## The thread pool under load (`benchmarks/threads.py`)",
        "",
        "1 and 2 threads of the package alone, interleaved: *quiet*; *busy*, a neighbour spinning on "
        "the last CPU; *loaded*, one unpinned spinner per CPU, so every core is shared (quiet: best "
        "of the rounds' medians; with neighbours: their median). With workers a context times its "
        "runs and goes without them while they make runs slower.",
        "",
        "| package | mode | 1 thread ms | 2 threads ms | 2t/1t | commit |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        pick = min if r["mode"] == "quiet" else (lambda v: float(np.median(v)))
        one, two = pick(r["1"]), pick(r["2"])
        lines.append(
            f"| {r['package']} | {r['mode']} | {_ms(one)} | {_ms(two)} | {two / one:.2f} | {r['commit']} |"
        )
    return lines


def _worst_section(passed: list[dict], peak: dict) -> list[str]:
    ranked = sorted(passed, key=lambda r: _div(r, 1, "ort") or 0, reverse=True)[:3]
    lines = ["", "## Where the worst three spend their time (1 thread)", ""]
    for r in ranked:
        inside, ours = kernels_ms(r), latency(r, "quiet", 1, "ours")
        outside = f"; outside kernels {ours - inside:.2f} ms" if inside and ours else ""
        lines.append(
            f"- **{r['key']}**: ours/ORT {_div(r, 1, 'ort'):.2f}; kernels {inside:.2f} ms of "
            f"{_ms(ours)} ms{outside}"
        )
        lines += _top_kernels(r, result_peak(r, peak))
    return lines


def _before_after(passed: list[dict]) -> list[str]:
    by_key = {r["key"]: r for r in passed}
    lines = [
        "",
        "## The seven models of the performance issue, before and after",
        "",
        "ours / ONNX Runtime at 1 thread: as the issue was filed; in the zoo run at its start "
        "(commit c81a777, same machine); and in this run.",
        "",
        "| model | filed | zoo run at c81a777 | now 1t | now 2t |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for name, (filed, zoo) in BEFORE.items():
        r = by_key.get(name)
        now = [_div(r, t, "ort") if r else None for t in THREADS]
        lines.append(
            f"| {name} | {filed} | {zoo:.2f} | " + " | ".join(f"{v:.2f}" if v else "-" for v in now) + " |"
        )
    return lines


def _kernel_goal_section(passed: list[dict], peak: dict) -> list[str]:
    peaks = sorted({f"{result_peak(r, peak):.0f}" for r in passed if result_peak(r, peak)})
    lines = [
        "",
        "## Conv and matmul kernels against the peak (1 thread)",
        "",
        "Measured single-core fp32 peak (`benchmarks/peak.c`, FMA chains in registers) for the "
        "vectors of the kernel set the packages ran, on the machine that measured each model: "
        f"{' / '.join(peaks)} GFLOPS. Each kernel is timed alone with warm caches by TVM's "
        "`time_evaluator`, with TVM's estimate of its work; kernels under "
        f"{kernels.MEMORY_BOUND_INTENSITY} flop per operand byte count as memory-bound. *work at goal*: "
        f"the share of the compute-bound conv/matmul work done at {GOAL_SHARE:.0%} of peak or more. "
        "Winograd kernels do 2.25x fewer multiply-adds than TVM counts for a direct 3x3 conv.",
        "",
        "| model | compute-bound conv/matmul kernels | their GFLOPS | % of peak | work at goal | "
        "share of kernel time |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in passed:
        rows = r.get("kernels", [])
        own_peak = result_peak(r, peak)
        dense = [k for k in rows if k["conv_or_matmul"] and k["flop"] and not k["memory_bound"]]
        if not dense or not own_peak:
            continue
        work = sum(k["flop"] * k["calls"] for k in dense)
        seconds = sum(k["ms"] * k["calls"] for k in dense) / 1e3
        goal = GOAL_SHARE * own_peak * 1e9
        at_goal = sum(k["flop"] * k["calls"] for k in dense if k["flop"] / (k["ms"] / 1e3) >= goal)
        gflops = work / seconds / 1e9
        lines.append(
            f"| {r['key']} | {len(dense)} | {gflops:.1f} | {gflops / own_peak:.0%} | {at_goal / work:.0%} | "
            f"{seconds * 1e3 / kernels_ms(r):.0%} |"
        )
    return lines


# --------------------------------------------------------------------------- main


def copy_bandwidth(operand_bytes: float, copy_gbps: dict) -> float:
    """The copy bandwidth of the smallest measured working set that holds the operands (the
    largest one measured beyond that): a kernel timed alone with warm caches reads them from
    the same level of the memory hierarchy."""
    sizes = sorted((int(size), gbps) for size, gbps in copy_gbps.items())
    return next((gbps for size, gbps in sizes if size >= operand_bytes), sizes[-1][1])


MEMORY_GOAL_SHARE = 0.7


def _memory_goal_section(passed: list[dict], peak: dict) -> list[str]:
    lines = [
        "",
        "## Memory-bound kernels against the copy bandwidth (1 thread)",
        "",
        "A core's `memcpy` bandwidth (`benchmarks/copy.c`, bytes read and written) by working set, "
        "on the machine that measured each model; each memory-bound kernel (under "
        f"{kernels.MEMORY_BOUND_INTENSITY} flop per operand byte) is held to the bandwidth of the "
        "working set that holds its operands. *GB/s*: all their operand bytes over all their time; "
        f"*bytes at goal*: the share of their operand bytes moved at {MEMORY_GOAL_SHARE:.0%} of "
        "that bandwidth or more. *% of roofline*: the time each would take at that bandwidth or at "
        "the FMA peak, whichever is longer, over their time: a depthwise 3x3 conv (about 2 flop per "
        "byte by this count) whose operands sit in L1 or L2 is bound by its multiply-adds, not by "
        "the copy bandwidth of those caches.",
        "",
        "| model | memory-bound kernels | their ms | GB/s | % of copy bandwidth | % of roofline | "
        "bytes at goal | share of kernel time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in passed:
        # (results measured before copy.c existed take this machine's)
        copy_gbps = kernels_machine_peak(r, peak).get("copy_gbps") or peak.get("copy_gbps")
        bound = [k for k in r.get("kernels", []) if k["memory_bound"] and k["bytes"]]
        if not copy_gbps or not bound:
            continue
        seconds = sum(k["ms"] * k["calls"] for k in bound) / 1e3
        moved = sum(k["bytes"] * k["calls"] for k in bound)
        expected = sum(k["bytes"] * k["calls"] / (copy_bandwidth(k["bytes"], copy_gbps) * 1e9) for k in bound)
        own_peak = result_peak(r, peak) or math.inf
        roofline = sum(
            max(k["bytes"] / (copy_bandwidth(k["bytes"], copy_gbps) * 1e9), k["flop"] / (own_peak * 1e9))
            * k["calls"]
            for k in bound
        )
        at_goal = sum(
            k["bytes"] * k["calls"]
            for k in bound
            if k["bytes"] / (k["ms"] / 1e3) >= MEMORY_GOAL_SHARE * copy_bandwidth(k["bytes"], copy_gbps) * 1e9
        )
        lines.append(
            f"| {r['key']} | {len(bound)} | {seconds * 1e3:.2f} | {moved / seconds / 1e9:.1f} | "
            f"{expected / seconds:.0%} | {roofline / seconds:.0%} | {at_goal / moved:.0%} | "
            f"{seconds * 1e3 / kernels_ms(r):.0%} |"
        )
    return lines


def _measured_at(path: Path, commit: str) -> bool:
    return path.exists() and json.loads(path.read_text()).get("relay2cmake") == commit


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", help="models (zoo keys, gpt2-pt2) to measure")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--modes", default="quiet,busy", help="quiet, busy or both (default)")
    parser.add_argument("--no-kernels", action="store_true", help="do not time the kernels alone")
    parser.add_argument("--resume", action="store_true", help="skip models measured at this commit")
    parser.add_argument("--report", action="store_true", help="(re)write docs/performance.md")
    parser.add_argument(
        "--kernels-only",
        action="store_true",
        help="time the kernels of measured models again, keep their latencies",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance.md")
    args = parser.parse_args()
    entries = bench_entries()
    if args.list:
        print("\n".join(key(e) for e in entries))
        return 0
    if args.only:
        entries = [e for e in entries if key(e) in args.only or e.model in args.only]
    OUT.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    peak_file = RESULTS / "peak.json"
    if not peak_file.exists() or not (args.resume or args.kernels_only):
        peak_file.write_text(json.dumps(measure_peak(OUT)) + "\n")
    MACHINE_PEAK.update(json.loads(peak_file.read_text()))
    modes = args.modes.split(",")
    if args.kernels_only:
        for entry in entries:
            print(retime_kernels(entry), flush=True)
    elif not args.report or args.only:
        for entry in entries:
            if args.resume and _measured_at(RESULTS / f"{key(entry)}.json", real_zoo.generator_commit()):
                continue
            r = bench_one(entry, modes, not args.no_kernels)
            line = f"{r['key']:24s} {r['status']:4s} {r['seconds']:7.1f}s"
            if r["status"] == "pass":
                line += "  ours/ORT " + " ".join(f"{t}t {_div(r, t, 'ort'):.2f}" for t in THREADS)
                line += "  ours/OpenVINO " + " ".join(f"{t}t {_div(r, t, 'openvino'):.2f}" for t in THREADS)
            else:
                line += f" [{r.get('stage')}] {r.get('error')}"
            print(line, flush=True)
    if args.report:
        order = {key(e): i for i, e in enumerate(bench_entries())}
        results = [json.loads(p.read_text()) for p in RESULTS.glob("*.json") if p.name not in NOT_MODELS]
        results.sort(key=lambda r: order.get(r["key"], len(order)))
        write_report(results, json.loads(peak_file.read_text()), args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
