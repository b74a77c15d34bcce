"""Per-model figures for the zoo (and a large-weights model): generation time, build time,
arena bytes next to TVM's static plan, library size, and max |error| against ONNX Runtime.

    .venv/bin/python tools/model_report.py [--large-mb 64] [--out docs/models.md]

Every number comes from running the real tools once on this machine.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

import model_zoo  # noqa: E402
from packaging_helpers import (  # noqa: E402
    build_sample_app,
    cmake,
    onnxruntime_outputs,
    random_inputs,
    read_outputs,
    run,
    write_inputs,
)


def _child_peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def measure(model_path: Path, name: str, extra: list[str], work: Path) -> dict:
    from packaging_helpers import BuiltPackage

    source, build, install = work / "pkg", work / "build", work / "install"
    start = time.perf_counter()
    run([sys.executable, "-m", "relay2cmake", "-q", "gen", model_path, "-o", source, "--name", name, *extra])
    gen_s = time.perf_counter() - start
    start = time.perf_counter()
    run([cmake(), "-S", source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"])
    run([cmake(), "--build", build, "--parallel", "2"])
    build_s = time.perf_counter() - start
    run([cmake(), "--install", build, "--prefix", install])
    package = BuiltPackage(model_path, name, name.lower(), source, build, install)
    meta = package.metadata
    app = build_sample_app("c_consumer", package, work)
    inputs = random_inputs(meta, seed=1)
    write_inputs(work / "in", inputs)
    (work / "out").mkdir()
    run([app, work / "in", work / "out"])
    ours = read_outputs(work / "out", meta)
    reference = onnxruntime_outputs(model_path, meta, inputs)
    error = max(
        float(np.max(np.abs(a.astype(np.float64) - np.asarray(b, dtype=np.float64)), initial=0.0))
        for a, b in zip(ours, reference, strict=True)
    )
    library = install / "lib" / f"lib{name.lower()}.a"
    return {
        "model": model_path.stem,
        "gen_s": gen_s,
        "build_s": build_s,
        "arena": meta["memory"]["arena_bytes"],
        "intermediates": meta["memory"]["intermediate_bytes"],
        "tvm_plan": meta["memory"]["tvm_static_plan_bytes"],
        "weights": meta["memory"]["weight_bytes"],
        "library": library.stat().st_size,
        "steps": meta["steps"],
        "max_abs_error": error,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large-mb", type=int, default=64, help="weights of the large model (0: skip)")
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = {
            name: (builder(), model_zoo.GEN_ARGS.get(name, [])) for name, builder in model_zoo.MODELS.items()
        }
        if args.large_mb:
            models[f"dense_{args.large_mb}mb"] = (model_zoo.large_dense(args.large_mb), [])
        for name, (model, extra) in models.items():
            path = root / f"{name}.onnx"
            onnx.save(model, str(path))
            work = root / name
            work.mkdir()
            rows.append(measure(path, model_zoo.package_name(name), extra, work))
            print(json.dumps(rows[-1]), flush=True)
    lines = [
        "| model | gen s | build s | kernel calls | arena B | of which intermediates B | TVM static plan B "
        "| weights B | library B | max abs err vs ORT |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['gen_s']:.1f} | {r['build_s']:.1f} | {r['steps']} | {r['arena']} "
            f"| {r['intermediates']} | {r['tvm_plan']} "
            f"| {r['weights']} | {r['library']} | {r['max_abs_error']:.2e} |"
        )
    lines.append(f"\nPeak memory of any child process (gen, compiler): {_child_peak_mb():.0f} MB.")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.write_text(
            "# Per-model figures\n\nProduced by `tools/model_report.py` on a 2-core machine. The arena "
            "holds intermediates and kernel scratch (and staged inputs on targets that need them); "
            "TVM's static plan counts intermediates only, all alive for the whole call.\n\n" + table + "\n"
        )


if __name__ == "__main__":
    main()
