"""A package with run-time dimensions against packages generated for one shape each.

    .venv/bin/python benchmarks/dynamic_shapes.py MODEL --input-shape x=1,1..64,32 --at 8 32 64
                                                  [--work DIR] [--runs N] [--rounds R]
                                                  [--reuse-fixed]

Generates MODEL once with the ranges of ``--input-shape`` and once per value of ``--at`` with
every range fixed to that value (each a Release build of this checkout's relay2cmake, default
kernel sets), then times ``<p>_cli --bench`` on the same random inputs, the two packages of a
value interleaved in rounds, one thread. Prints per value the medians (best of the rounds)
and the ratio dynamic / fixed; issue 19's goal is 1.25 or less at every value. Every input
is given by ``--input-shape`` and takes random float32 data.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from relay2cmake.cli import parse_input_shapes  # noqa: E402

RELAY2CMAKE = [sys.executable, "-m", "relay2cmake"]


def _cmake() -> str:
    local = Path(sys.executable).parent / "cmake"
    return str(local) if local.exists() else "cmake"


def _package(model: Path, out: Path, shapes: list[str], reuse: bool = False) -> Path:
    """Generate and build (or, with ``reuse``, take the one built before); its cli's path."""
    built = sorted((out / "build").glob("*_cli"))
    if reuse and built:
        return built[0]
    if out.exists():
        shutil.rmtree(out)
    flags = [arg for shape in shapes for arg in ("--input-shape", shape)]
    subprocess.run([*RELAY2CMAKE, "gen", str(model), "-o", str(out / "pkg"), "-q", *flags], check=True)
    build = out / "build"
    subprocess.run(
        [_cmake(), "-S", out / "pkg", "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
        check=True,
        capture_output=True,
    )
    subprocess.run([_cmake(), "--build", build], check=True, capture_output=True)
    (cli,) = build.glob("*_cli")
    return cli


def _median_ms(cli: Path, inputs: list[Path], runs: int) -> float:
    result = subprocess.run(
        [str(cli), "--bench", str(runs), "--output-dir", str(cli.parent / "out"), *map(str, inputs)],
        check=True,
        capture_output=True,
        text=True,
    )
    match = re.search(r"median=([0-9.]+)", result.stdout + result.stderr)
    if match is None:
        raise RuntimeError(f"no latency in the output of {cli}")
    return float(match.group(1))


def _at(shapes: dict, value: int) -> dict[str, tuple[int, ...]]:
    return {name: tuple(value if isinstance(d, tuple) else d for d in dims) for name, dims in shapes.items()}


def _flags(shapes: dict) -> list[str]:
    def text(d) -> str:
        return f"{d[0]}..{d[1]}" if isinstance(d, tuple) else str(d)

    return [f"{name}={','.join(text(d) for d in dims)}" for name, dims in shapes.items()]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("model", type=Path)
    parser.add_argument("--input-shape", action="append", required=True)
    parser.add_argument("--at", type=int, nargs="+", required=True, help="values of the run-time dimensions")
    parser.add_argument("--work", type=Path, default=ROOT / "build" / "dynamic_shapes")
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--reuse-fixed", action="store_true", help="time the fixed-shape packages built by an earlier run"
    )
    args = parser.parse_args()

    shapes = parse_input_shapes(args.input_shape)
    work = args.work / args.model.stem
    dynamic = _package(args.model, work / "dynamic", args.input_shape)
    print(f"{'value':>6} {'dynamic ms':>11} {'fixed ms':>9} {'dynamic/fixed':>14}")
    for value in args.at:
        fixed_shapes = _at(shapes, value)
        fixed = _package(args.model, work / f"fixed_{value}", _flags(fixed_shapes), args.reuse_fixed)
        inputs = []
        for index, dims in enumerate(fixed_shapes.values()):
            path = work / f"input_{value}_{index}.npy"
            np.save(path, np.random.default_rng(index).standard_normal(dims).astype(np.float32))
            inputs.append(path)
        timings: dict[str, list[float]] = {"dynamic": [], "fixed": []}
        for _ in range(args.rounds):  # interleaved: the machine's drift touches both alike
            timings["dynamic"].append(_median_ms(dynamic, inputs, args.runs))
            timings["fixed"].append(_median_ms(fixed, inputs, args.runs))
        best = {kind: min(values) for kind, values in timings.items()}
        ratio = best["dynamic"] / best["fixed"]
        print(f"{value:>6} {best['dynamic']:>11.5f} {best['fixed']:>9.5f} {ratio:>14.2f}")


if __name__ == "__main__":
    main()
