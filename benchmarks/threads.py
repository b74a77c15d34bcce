"""The thread pool on a quiet and on a busy machine: 1 vs 2 threads, per package.

    python benchmarks/threads.py MODEL.onnx [MODEL.pt2 ...] [--work DIR] [--runs N]
    python benchmarks/threads.py --package DIR [--package DIR ...]   (packages already made)

For each model it generates a package (this checkout's relay2cmake, or ``--tree`` another
checkout's, to compare revisions), builds it Release, and times ``<p>_cli --bench`` at 1 and
2 threads, interleaved, in three modes:

- quiet: nothing else runs (as far as this machine allows);
- busy: a neighbour process spins on the last CPU the whole time, as another program would;
- loaded: one neighbour per CPU spins, none pinned (a parallel build beside the app): every
  core is shared, so parallel loops wait for descheduled workers unless the pool goes
  without them.

It prints, per mode, the best and the worst of ``--rounds`` medians (a bimodal pool shows up
as a worst far above the best) and the ratio 2 threads / 1 thread: of the best medians when
quiet, of the median medians with neighbours (the disturbance is the point).
The goal the thread pool is held to: busy 2-thread time at most 1.1x the busy 1-thread time.
``--record`` keeps the figures in ``benchmarks/results/threads.json`` (by package and mode),
which ``run.py --report`` puts in ``docs/performance.md``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
RECORD = ROOT / "benchmarks" / "results" / "threads.json"


def _spin(pinned: bool = True) -> None:
    if pinned:
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    while True:
        pass


def neighbours(mode: str) -> list[multiprocessing.Process]:
    pins = {"quiet": [], "busy": [True], "loaded": [False] * len(os.sched_getaffinity(0))}[mode]
    return [multiprocessing.Process(target=_spin, args=(pin,), daemon=True) for pin in pins]


def make_package(model: Path, work: Path, tree: Path) -> Path:
    out = work / f"{model.parent.name}-{model.stem}"  # the zoo's layout: <model>/<exporter>.onnx
    if not (out / "metadata.json").exists():
        env = {**os.environ, "PYTHONPATH": str(tree)}
        command = [PYTHON, "-m", "relay2cmake", "-q", "gen", str(model), "-o", str(out), "--force"]
        subprocess.run(command, check=True, env=env)
    return out


def build_cli(package: Path) -> tuple[Path, list[Path]]:
    build = package / "build-threads"
    cmake = str(Path(PYTHON).parent / "cmake")
    subprocess.run(
        [cmake, "-S", str(package), "-B", str(build), "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
        check=True,
        capture_output=True,
    )
    subprocess.run([cmake, "--build", str(build)], check=True, capture_output=True)
    (cli,) = [p for p in build.glob("*_cli") if p.is_file()]
    inputs = sorted((package / "tests" / "golden").glob("input_*.npy"), key=lambda p: int(p.stem[6:]))
    return cli, inputs


def median_ms(cli: Path, inputs: list[Path], threads: int, runs: int, out: Path) -> float:
    command = [str(cli), "--bench", str(runs), "--warmup", "5", "--threads", str(threads)]
    command += ["--output-dir", str(out), *map(str, inputs)]
    printed = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median=([0-9.]+)", printed).group(1))


def measure(cli: Path, inputs: list[Path], runs: int, rounds: int, out: Path) -> dict[int, list[float]]:
    times: dict[int, list[float]] = {1: [], 2: []}
    for _ in range(rounds):
        for threads in (1, 2):
            times[threads].append(median_ms(cli, inputs, threads, runs, out))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--package", action="append", type=Path, default=[], help="a package already made")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "threads")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose relay2cmake generates")
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--modes", default="quiet,busy,loaded", help="quiet, busy, loaded (default: all)")
    parser.add_argument(
        "--record", action="store_true", help=f"keep the figures in {RECORD.relative_to(ROOT)}"
    )
    args = parser.parse_args()
    record = json.loads(RECORD.read_text()) if args.record and RECORD.exists() else {}
    args.work.mkdir(parents=True, exist_ok=True)
    packages = [*args.package, *(make_package(m, args.work, args.tree.resolve()) for m in args.models)]
    print(f"{'package':28} {'mode':6} {'1 thread ms':>17} {'2 threads ms':>17} {'2t/1t':>6}")
    for package in packages:
        cli, inputs = build_cli(package)
        for mode in args.modes.split(","):
            spinning = neighbours(mode)
            for process in spinning:
                process.start()
            try:
                times = measure(cli, inputs, args.runs, args.rounds, args.work / "outputs")
            finally:
                for process in spinning:
                    process.terminate()
                    process.join()
            one, two = (f"{min(times[t]):8.3f}-{max(times[t]):<8.3f}" for t in (1, 2))
            pick = min if mode == "quiet" else statistics.median
            ratio = pick(times[2]) / pick(times[1])
            print(f"{package.name[:28]:28} {mode:6} {one:>17} {two:>17} {ratio:6.2f}", flush=True)
            record[f"{package.name} {mode}"] = {
                "package": package.name,
                "mode": mode,
                "1": times[1],
                "2": times[2],
                "commit": generator_commit(args.tree),
            }
            if args.record:
                RECORD.parent.mkdir(parents=True, exist_ok=True)
                RECORD.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def generator_commit(tree: Path) -> str:
    marker = tree / ".real_zoo_commit"  # a snapshot made with git archive (tools/real_zoo.py)
    if marker.exists():
        return marker.read_text().strip()
    done = subprocess.run(
        ["git", "-C", tree, "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
