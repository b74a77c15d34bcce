"""Before/after latency of the generated packages of two relay2cmake revisions.

    python benchmarks/compare_revisions.py OLD_REV NEW_REV MODEL.onnx [MODEL.onnx ...]

Each revision is exported with ``git archive`` and generates every model (default targets,
self-check off); both packages are built Release and their ``_cli --bench`` runs alternate,
``--rounds`` times, on the package's own golden inputs. Printed: best median per package and
the ratio new/old per model, with their geometric mean. A change that should cost nothing
(index checks, NaN-propagating max) shows as ratios within noise of 1.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _snapshot(revision: str, folder: Path) -> Path:
    target = folder / f"src_{revision}"
    target.mkdir()
    archive = subprocess.run(["git", "archive", revision], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target


def _generate(source: Path, model: Path, out: Path) -> None:
    env = {"PYTHONPATH": str(source), "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"}
    command = [sys.executable, "-m", "relay2cmake", "-q", "gen", str(model), "-o", str(out)]
    command += ["--name", "Bench", "--no-self-check", "--allow-unverified"]
    # cwd: ``python -m`` puts the working directory first on sys.path, before PYTHONPATH; run
    # from a checkout, both revisions generated with the checkout's own code.
    subprocess.run(command, env=env, cwd=source, check=True, capture_output=True, text=True)


def _build(package: Path, build: Path) -> Path:
    cmake = shutil.which("cmake", path=str(Path(sys.executable).parent)) or "cmake"
    subprocess.run([cmake, "-S", package, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run([cmake, "--build", build], check=True, capture_output=True)
    return build / "bench_cli"


def _median_ms(cli: Path, package: Path, runs: int) -> float:
    inputs = sorted(
        (package / "tests" / "golden").glob("input_*.npy"), key=lambda p: int(p.stem.split("_")[1])
    )
    with tempfile.TemporaryDirectory() as out:
        result = subprocess.run(
            [str(cli), "--bench", str(runs), "--threads", "1", "--output-dir", out, *map(str, inputs)],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
    return float(re.search(r"median=([0-9.]+)", result.stdout).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="compare-") as work:
        folder = Path(work)
        sources = {rev: _snapshot(rev, folder) for rev in (args.old, args.new)}
        ratios = []
        print(f"{'model':40s} {args.old[:10]:>10s} {args.new[:10]:>10s}  new/old")
        for index, model in enumerate(args.models):
            clis = {}
            for rev, source in sources.items():
                package = folder / f"pkg{index}_{rev}"
                _generate(source, model.resolve(), package)
                clis[rev] = (_build(package, folder / f"build{index}_{rev}"), package)
            best = {rev: math.inf for rev in sources}
            for _ in range(args.rounds):  # alternate: drift on a shared machine hits both alike
                for rev, (cli, package) in clis.items():
                    best[rev] = min(best[rev], _median_ms(cli, package, args.runs))
            ratio = best[args.new] / best[args.old]
            ratios.append(ratio)
            label = f"{model.parent.name}/{model.name}"
            print(f"{label:40s} {best[args.old]:10.3f} {best[args.new]:10.3f}  {ratio:.3f}", flush=True)
        print(f"geometric mean new/old: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    main()
