"""Large weights: what a package costs on disk, in the build and in memory, by weights size.

    .venv/bin/python tools/large_weights.py            # 64, 512 and 1024 MB, writes docs/large_weights.md
    .venv/bin/python tools/large_weights.py --sizes 64 # one size, prints the table only
    .venv/bin/python tools/large_weights.py --sizes 64 --no-conan  # without `conan create`
    .venv/bin/python tools/large_weights.py --models build/real_zoo/models/resnet18/onnx13.onnx \
        --out docs/large_weights.md   # the sizes and real models, in one report

For each size, one dense layer (``model_zoo.large_dense``), and each model named, goes
through `relay2cmake gen`, a CMake build with the weights compiled in (2 jobs) and its install, a build with
`<P>_EXTERNAL_WEIGHTS=ON`, one cli run of each (process start to exit: the external run reads
the file and checks its SHA-256), and `conan create` in a fresh Conan home (the cache's size
after it). Peak memory is the largest resident set of any process of a step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))


def measure(cmd: list, env: dict | None = None) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``cmd`` and its descendants, in a fresh process so
    that earlier steps do not count."""
    probe = (
        "import resource, subprocess, sys, time, json\n"
        "start = time.perf_counter()\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "seconds = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "print(json.dumps({'rc': done.returncode, 's': seconds, 'mb': peak, 'err': done.stderr[-2000:]}))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, *map(str, cmd)], capture_output=True, text=True, check=True, env=env
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["rc"] != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {report['err']}")
    return report["s"], report["mb"]


def one_size(megabytes: int, work: Path, conan: bool) -> dict:
    import onnx
    from model_zoo import large_dense

    model = work / f"dense{megabytes}.onnx"
    onnx.save(
        large_dense(megabytes), str(model), save_as_external_data=True, location=f"dense{megabytes}.bin"
    )
    return one_model(model, f"dense {megabytes} MB", f"Dense{megabytes}", work, conan)


def one_model(model: Path, label: str, name: str, work: Path, conan: bool) -> dict:
    """gen, both builds, the runs and `conan create` for ``model``; its inputs are the .npy
    files in ``inputs/`` beside it (the real zoo's, named in ``inputs.json``), else ones."""
    import numpy as np

    package, row = work / f"pkg_{name}", {"label": label}
    cmake = str(Path(sys.executable).parent / "cmake")
    row["gen_s"], row["gen_mb"] = measure([sys.executable, "-m", "relay2cmake", "gen", model, "-o", package,
                                           "--name", name, "--force"])  # fmt: skip
    meta = json.loads((package / "metadata.json").read_text())
    row["weight_bytes"] = meta["memory"]["weight_bytes"]
    row["package_mb"] = _folder_mb(package)
    prefix = meta["package"]["prefix"]
    inputs = []
    for index, signature in enumerate(meta["inputs"]):
        given = model.parent / "inputs" / f"{signature['name']}.npy"
        inputs.append(work / f"{name}_input_{index}.npy")
        if given.is_file():
            inputs[-1].write_bytes(given.read_bytes())
        else:
            np.save(inputs[-1], np.ones(signature["shape"], dtype=signature["dtype"]))
    for mode in ("embedded", "external"):
        build = work / f"build_{name}_{mode}"
        flag = "ON" if mode == "external" else "OFF"
        subprocess.run([cmake, "-S", package, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                        f"-D{prefix.upper()}_EXTERNAL_WEIGHTS={flag}", f"-D{prefix.upper()}_BUILD_TESTS=OFF"],
                       check=True, capture_output=True)  # fmt: skip
        row[f"{mode}_build_s"], row[f"{mode}_build_mb"] = measure(
            [cmake, "--build", build, "--parallel", "2"]
        )
        row[f"{mode}_library_mb"] = (build / f"lib{prefix}.a").stat().st_size / 2**20
        if mode == "embedded":
            subprocess.run([cmake, "--install", build, "--prefix", work / f"install_{name}"],
                           check=True, capture_output=True)  # fmt: skip
            row["install_mb"] = _folder_mb(work / f"install_{name}")
        weights = ["--weights", package / "weights" / f"{prefix}_weights.bin"] if mode == "external" else []
        row[f"{mode}_run_s"], row[f"{mode}_run_mb"] = measure(
            [build / f"{prefix}_cli", *weights, "--output-dir", work / f"out_{name}_{mode}", *inputs]
        )
    row["same_outputs"] = all(
        (work / f"out_{name}_embedded" / f"output_{k}.npy").read_bytes()
        == (work / f"out_{name}_external" / f"output_{k}.npy").read_bytes()
        for k in range(len(meta["outputs"]))
    )
    if conan:
        home = work / f"conan_{name}"
        env = {**os.environ, "CONAN_HOME": str(home)}
        conan_bin = str(Path(sys.executable).parent / "conan")
        subprocess.run([conan_bin, "profile", "detect"], env=env, check=True, capture_output=True)
        row["conan_s"], row["conan_mb"] = measure([conan_bin, "create", package], env=env)
        row["conan_cache_mb"] = _folder_mb(home / "p")
        row["package_after_conan_mb"] = _folder_mb(package)
    return row


def _folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| model | weights | gen s | gen peak MB | package MB | build s (embedded) | build peak MB "
        "| library MB | install MB | build s (external) | library MB | cli run s (embedded) "
        "| cli run s (external: read + SHA-256) | conan create s | Conan cache MB | same outputs |",
        "| --- |" + " ---: |" * 14 + " --- |",
    ]
    for r in rows:
        size = r["weight_bytes"] / 2**20
        conan = f"{r['conan_s']:.1f} | {r['conan_cache_mb']:.0f}" if "conan_s" in r else "- | -"
        lines.append(
            f"| {r['label']} | {size:.1f} MB | {r['gen_s']:.1f} | {r['gen_mb']:.0f} | {r['package_mb']:.0f} "
            f"| {r['embedded_build_s']:.1f} | {r['embedded_build_mb']:.0f} | {r['embedded_library_mb']:.0f} "
            f"| {r['install_mb']:.0f} | {r['external_build_s']:.1f} | {r['external_library_mb']:.1f} "
            f"| {r['embedded_run_s']:.3f} | {r['external_run_s']:.3f} | {conan} "
            f"| {'yes' if r['same_outputs'] else 'NO'} |"
        )
    return lines


NOTES = [
    "",
    "Notes:",
    "",
    "- Before the weights were stored once (string-literal C shards plus the `.bin`, measured with",
    "  the previous version of this tool): 512 MB of weights gave a 2640 MB package, a 58 s build",
    "  at 8951 MB of compiler memory; the build is now the time to copy the file (the assembler",
    "  `.incbin`s it), and its peak memory is about the weights' size (one tool holding the file).",
    "- Generation holds about two copies of the weights at its peak (TVM's constants and the",
    "  packed copies), whatever their size: 1 GiB needs 2.4 GB (the issue's bound: 2 x weights",
    "  + 1.5 GB = 3.5 GB), where it needed 7.5 GB, and takes 38 s instead of 100 s. The",
    "  references read the model file themselves, external data goes from its file straight",
    "  into memory TVM adopts, the packed weights are written once, and the weights file goes",
    "  to disk as the plan meets each constant (docs/ARCHITECTURE.md, Weights).",
    "- ResNet-18's weights here (51.6 MB) exceed its ONNX file's 46.7 MB: the Winograd",
    "  transform stores 3x3 filters as 4x4 tiles. GPT-2's tied embedding and LM head are",
    "  stored once (26 MB, where the ONNX export holds 53 MB).",
    "- The Conan cache holds the weights twice: with the recipe (exported, not copied to a",
    "  source folder) and in the package; the build folder's weight-sized files are removed",
    "  once packaged.",
    "- The external run includes reading the file and checking its SHA-256 (the package's own",
    "  C implementation, about 150 MB/s here).",
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="*", default=[64, 512, 1024], help="weights in MB")
    parser.add_argument(
        "--models", type=Path, nargs="*", default=[], help="model files measured the same way"
    )
    parser.add_argument("--no-conan", action="store_true", help="leave out `conan create`")
    parser.add_argument("--out", default=None, help="Markdown report (default: docs/large_weights.md)")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            started = time.perf_counter()
            rows.append(one_size(size, Path(folder), conan=not args.no_conan))
            print(f"{size} MB done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        for index, model in enumerate(args.models):
            started = time.perf_counter()
            label = f"{model.parent.name}/{model.name}"
            rows.append(one_model(model.resolve(), label, f"Model{index}", Path(folder), not args.no_conan))
            print(f"{label} done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    lines = table(rows)
    print("\n".join(lines))
    out = (
        Path(args.out)
        if args.out
        else (
            ROOT / "docs" / "large_weights.md" if args.sizes == [64, 512, 1024] and not args.models else None
        )
    )
    if out is not None:
        command = " ".join(["tools/large_weights.py", *sys.argv[1:]])
        header = [
            "# Large weights",
            "",
            f"Produced on a {os.cpu_count()}-core machine (gcc 12, -O2 Release, 2 build jobs) by",
            "",
            f"    {command}",
            "",
            "One dense layer per size, and the models named (the real zoo's: random weights, its",
            "inputs). The cli run is a whole process: start, load, one inference, write the output.",
            "The package holds the weights once, as `weights/<p>_weights.bin`: embedded builds compile",
            "it in with the assembler's `.incbin`; external builds read it at run time (the cli with",
            "`--weights`), checked against the size and SHA-256 compiled into the code. Install: the",
            "static library and headers (the cli stays in the build folder). Conan cache: the whole",
            "`p/` folder after `conan create` (recipe with the weights, build folder, package).",
            "",
        ]
        out.write_text("\n".join(header + lines + NOTES) + "\n")
        print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
