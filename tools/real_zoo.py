"""Real-architecture model zoo: export torchvision / timm / transformers models (random
weights) the ways users do, then run each through `relay2cmake gen`, CMake, ctest and the
package's cli, comparing with ONNX Runtime (or PyTorch for .pt2) and timing both.

    .venv/bin/python tools/real_zoo.py [--only NAME ...] [--list] [--slice ci] [--skip-bench]
                                       [--resume] [--report]

Exports are cached in build/real_zoo/models/, each entry's result is written to
build/real_zoo/results/<entry>.json when it finishes, and --report (re)writes the
"Real-model zoo" section of docs/models.md from those results. Models are listed in
tools/real_zoo_models.py.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

from real_zoo_models import (  # noqa: E402
    ENTRIES,
    MODELS,
    Entry,
    import_torchvision,
    model_rng,
    onnx_translation_table,
)

OUT = ROOT / "build" / "real_zoo"
MODELS_DIR = OUT / "models"
RESULTS_DIR = OUT / "results"
BIN = Path(sys.executable).parent
RTOL, ATOL = 1e-3, 1e-4
# Seconds per step; generous because VGG-sized weights compile slowly on 2 cores.
TIMEOUTS = {"export": 1800, "gen": 2400, "configure": 600, "build": 3600, "ctest": 900, "run": 600}
REPORT_BEGIN, REPORT_END = "<!-- real-zoo:begin -->", "<!-- real-zoo:end -->"


class StepError(Exception):
    """A step of one entry failed; ``stage`` says which, the message says why."""

    def __init__(self, stage: str, message: str):
        super().__init__(message)
        self.stage = stage


# --------------------------------------------------------------------------- exporting


def model_dir(model: str) -> Path:
    return MODELS_DIR / model


def model_file(entry: Entry) -> Path:
    stem = entry.exporter + (f"-{entry.edit}" if entry.edit else "")
    return model_dir(entry.model) / (f"{stem}.pt2" if entry.exporter == "pt2" else f"{stem}.onnx")


def load_inputs(model: str) -> dict[str, np.ndarray]:
    names = json.loads((model_dir(model) / "inputs.json").read_text())
    return {n: np.load(model_dir(model) / "inputs" / f"{n}.npy") for n in names}


def torch_reference(model: str) -> list[np.ndarray]:
    folder = model_dir(model) / "torch_outputs"
    return [np.load(folder / f"output_{i}.npy") for i in range(len(list(folder.glob("*.npy"))))]


def export(entry: Entry) -> Path:
    """Exports in a child process (cached): an exporter that crashes or hangs costs one entry."""
    path = model_file(entry)
    if path.exists() and (model_dir(entry.model) / "inputs.json").exists():
        return path
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--export-one", entry.name],
            capture_output=True,
            text=True,
            timeout=TIMEOUTS["export"],
        )
    except subprocess.TimeoutExpired as e:
        raise StepError("export", f"timed out after {TIMEOUTS['export']} s") from e
    (OUT / "logs").mkdir(parents=True, exist_ok=True)
    (OUT / "logs" / f"export-{entry.name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0 or not path.exists():
        raise StepError("export", last_error_line(done.stderr) or f"exit code {done.returncode}")
    return path


def export_in_process(entry: Entry) -> None:
    import torch

    # timm and transformers import torchvision too: it has to be importable first.
    import_torchvision()

    spec = MODELS[entry.model]
    folder = model_dir(entry.model)
    (folder / "inputs").mkdir(parents=True, exist_ok=True)
    torch.manual_seed(model_rng(entry.model).integers(2**31))
    with torch.no_grad():
        module, inputs = spec.build(model_rng(entry.model))
        module.eval()
        args = tuple(torch.from_numpy(a) for a in inputs.values())
        if not (folder / "inputs.json").exists():
            save_torch_reference(folder, module, inputs, args)
        if entry.edit:
            base = model_file(Entry(entry.model, entry.exporter))
            if not base.exists():
                export_onnx(module, args, list(inputs), spec.outputs, entry.exporter, base)
            import onnx

            edited = caffe2_style(onnx.load(str(base)), initializers_as_inputs=entry.edit == "caffe2-ir3")
            onnx.save(edited, str(model_file(entry)))
        elif entry.exporter == "pt2":
            program = torch.export.export(module, args)
            torch.export.save(program, str(model_file(entry)))
        else:
            export_onnx(module, args, list(inputs), spec.outputs, entry.exporter, model_file(entry))


def save_torch_reference(folder: Path, module, inputs: dict[str, np.ndarray], args) -> None:
    """PyTorch's outputs on the eager module: the reference for .pt2 entries."""
    import torch

    for name, array in inputs.items():
        np.save(folder / "inputs" / f"{name}.npy", array)
    outputs = torch.utils._pytree.tree_flatten(module(*args))[0]
    (folder / "torch_outputs").mkdir(exist_ok=True)
    for i, out in enumerate(outputs):
        np.save(folder / "torch_outputs" / f"output_{i}.npy", out.detach().numpy())
    # Written last: its presence means inputs and reference are complete.
    (folder / "inputs.json").write_text(json.dumps(list(inputs)))


def export_onnx(module, args, input_names, output_names, exporter: str, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    names = {"input_names": input_names, "output_names": list(output_names)}
    if exporter == "dynamo":
        # One file: weights inline (all zoo models are far below 2 GB); the zoo's own custom
        # ops (ONNX NonMaxSuppression in ssd_topk_nms) translated by real_zoo_models.
        torch.onnx.export(
            module,
            args,
            str(path),
            dynamo=True,
            external_data=False,
            custom_translation_table=onnx_translation_table(),
            **names,
        )
    else:
        torch.onnx.export(module, args, str(path), opset_version=int(exporter[4:]), dynamo=False, **names)


def caffe2_style(model, initializers_as_inputs: bool = False):
    """Makes an opset-9 export look like the old Caffe2-converted ONNX zoo files:
    - LRN after the first two Conv+Relu (AlexNet and GoogLeNet had it; in NCHW between
      convolutions, which is what layout rewrites to NHWC trip over);
    - Dropout (ratio 0.5) before each classifier Gemm, or before the last Conv when there is
      none (SqueezeNet), with its ``mask`` output kept as a second, unused output;
    - with ``initializers_as_inputs``: IR version 3, every initializer also a graph input.
    ONNX Runtime runs the edited graph, so it stays the reference."""
    import onnx
    from onnx import helper

    graph = model.graph
    nodes = list(graph.node)
    producers = {out: node for node in nodes for out in node.output}
    relus = [n for n in nodes if n.op_type == "Relu" and producers.get(n.input[0], n).op_type == "Conv"][:2]
    gemms = [n for n in nodes if n.op_type == "Gemm"]
    targets = gemms or [n for n in nodes if n.op_type == "Conv"][-1:]
    new_nodes = []
    for node in nodes:
        if node in targets:
            source = node.input[0]
            node.input[0] = f"{source}_dropout"
            new_nodes.append(
                helper.make_node(
                    "Dropout",
                    [source],
                    [node.input[0], f"{source}_dropout_mask"],
                    name=f"{node.name}_dropout",
                    ratio=0.5,
                )
            )
        new_nodes.append(node)
        if node in relus:
            out = node.output[0]
            node.output[0] = f"{out}_before_lrn"
            new_nodes.append(
                helper.make_node(
                    "LRN", [node.output[0]], [out], name=f"{node.name}_lrn", size=5, alpha=1e-4, beta=0.75
                )
            )
    del graph.node[:]
    graph.node.extend(new_nodes)
    if initializers_as_inputs:
        known = {i.name for i in graph.input}
        for init in graph.initializer:
            if init.name not in known:
                graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, init.dims))
        model.ir_version = 3
    onnx.checker.check_model(model)
    return model


# --------------------------------------------------------------------------- running


def last_error_line(text: str) -> str:
    """The line that says what went wrong: the last line of a traceback, else the last
    non-empty line (CMake and compilers print their first error early, so look for it)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("error:") or " error: " in line or line.startswith("CMake Error"):
            return line[:400]
    return lines[-1][:400] if lines else ""


def run(stage: str, cmd: list, timeout_key: str | None = None, **kwargs) -> subprocess.CompletedProcess:
    timeout = TIMEOUTS[timeout_key or stage]
    try:
        done = subprocess.run(
            [str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, check=False, **kwargs
        )
    except subprocess.TimeoutExpired as e:
        raise StepError(stage, f"timed out after {timeout} s") from e
    if done.returncode != 0:
        raise StepError(stage, last_error_line(done.stderr + "\n" + done.stdout) or f"exit {done.returncode}")
    return done


def package_name(entry: Entry) -> str:
    return "rz_" + re.sub(r"[^0-9a-zA-Z]+", "_", entry.name).lower()


def gen_args(entry: Entry, path: Path, inputs: dict[str, np.ndarray]) -> list[str]:
    """--input-shape for every ONNX input with a symbolic dimension (the zoo exports static
    shapes, but an exporter may still leave one symbolic)."""
    if not entry.is_onnx:
        return []
    import onnx

    args = []
    for value in onnx.load(str(path), load_external_data=False).graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name in inputs and any(d.dim_param or not d.HasField("dim_value") for d in dims):
            args += ["--input-shape", f"{value.name}=" + ",".join(map(str, inputs[value.name].shape))]
    return args


def generator_source() -> Path:
    """The relay2cmake checkout that generates: this one, or REAL_ZOO_SOURCE (a snapshot of a
    commit, say, so a long run is not disturbed by edits in progress)."""
    return Path(os.environ.get("REAL_ZOO_SOURCE", ROOT)).resolve()


def generator_commit() -> str:
    source = generator_source()
    marker = source / ".real_zoo_commit"  # written next to a snapshot made with git archive
    if marker.exists():
        return marker.read_text().strip()
    done = subprocess.run(
        ["git", "-C", source, "describe", "--always", "--dirty"], capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def generate(
    entry: Entry, path: Path, inputs: dict, work: Path, result: dict, extra: tuple[str, ...] = ()
) -> Path:
    source = work / "pkg"
    cmd = [sys.executable, "-m", "relay2cmake", "gen", path, "-o", source]
    cmd += ["--name", package_name(entry), "--force", *gen_args(entry, path, inputs), *extra]
    # Run outside the checkout: `python -m` puts the working directory first on sys.path.
    env = {**os.environ, "PYTHONPATH": str(generator_source())}
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [str(c) for c in cmd],
            capture_output=True,
            text=True,
            timeout=TIMEOUTS["gen"],
            check=False,
            env=env,
            cwd=work,
        )
    except subprocess.TimeoutExpired as e:
        raise StepError("gen", f"timed out after {TIMEOUTS['gen']} s") from e
    (work / "gen.log").write_text(done.stdout + done.stderr)
    result["gen"] = {
        "seconds": round(time.perf_counter() - start, 2),
        "exit_code": done.returncode,
        "warnings": [line for line in done.stderr.splitlines() if line.startswith("warning:")],
        "args": [str(c) for c in cmd[4:]],
        "relay2cmake": generator_commit(),
    }
    if done.returncode != 0:
        raise StepError("gen", last_error_line(done.stderr) or f"exit {done.returncode}")
    return source


def build(source: Path, work: Path, result: dict) -> Path:
    build_dir = work / "build"
    shutil.rmtree(build_dir, ignore_errors=True)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    start = time.perf_counter()
    run("configure", [BIN / "cmake", "-S", source, "-B", build_dir, *generator, "-DCMAKE_BUILD_TYPE=Release"])
    run("build", [BIN / "cmake", "--build", build_dir, "--parallel", "2"])
    result["build_seconds"] = round(time.perf_counter() - start, 2)
    return build_dir


def find_cli(build_dir: Path, prefix: str) -> Path:
    found = sorted(p for p in build_dir.rglob(f"{prefix}_cli") if p.is_file() and os.access(p, os.X_OK))
    if not found:
        raise StepError("run", f"no {prefix}_cli in the build tree")
    return found[0]


def ordered_inputs(metadata: dict, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The package's inputs in its order: by name, else by position (a .pt2's placeholder
    names may differ from ours); cast to the package's dtype when the frontend changed it."""
    from relay2cmake.dtypes import numpy_dtype

    specs = metadata["inputs"]
    by_name = all(s["name"] in inputs for s in specs)
    values = [inputs[s["name"]] for s in specs] if by_name else list(inputs.values())[: len(specs)]
    return [
        np.ascontiguousarray(v.astype(numpy_dtype(s["dtype"]))) for v, s in zip(values, specs, strict=True)
    ]


def onnxruntime_session(path: Path, threads: int, exact_integers: bool = False):
    """``exact_integers`` for the reference outputs (``ONNXRUNTIME_EXACT_INTEGERS``); timings
    use ONNX Runtime's defaults, as a user gets them."""
    import onnxruntime

    from relay2cmake.frontends.onnx import ONNXRUNTIME_EXACT_INTEGERS

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if exact_integers:
        options.add_session_config_entry(*ONNXRUNTIME_EXACT_INTEGERS)
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def ort_feeds(session, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = [i.name for i in session.get_inputs()]
    if all(n in inputs for n in names):
        return {n: inputs[n] for n in names}
    return dict(zip(names, inputs.values(), strict=False))


def compare(ours: list[np.ndarray], reference: list[np.ndarray]) -> dict:
    """Every output within rtol/atol; the largest absolute and relative errors."""
    if len(ours) != len(reference):
        return {"ok": False, "why": f"{len(ours)} outputs, reference has {len(reference)}"}
    report = {"ok": True, "max_abs": 0.0, "max_rel": 0.0, "outputs": []}
    for i, (a, b) in enumerate(zip(ours, reference, strict=True)):
        b = np.asarray(b)
        if a.shape != b.shape:
            report["ok"] = False
            report.setdefault("why", f"output {i}: shape {list(a.shape)} vs reference {list(b.shape)}")
            report["outputs"].append({"shape": list(a.shape), "reference_shape": list(b.shape)})
            continue
        x, y = a.astype(np.float64), b.astype(np.float64)
        diff = np.abs(x - y)
        max_abs = float(np.max(diff, initial=0.0))
        max_rel = float(np.max(diff / np.maximum(np.abs(y), 1e-12), initial=0.0))
        ok = bool(np.allclose(x, y, rtol=RTOL, atol=ATOL, equal_nan=True))
        scale = float(np.max(np.abs(y), initial=0.0))
        report["outputs"].append({"max_abs": max_abs, "max_rel": max_rel, "ref_max_abs": scale, "ok": ok})
        report["max_abs"] = max(report["max_abs"], max_abs)
        report["max_rel"] = max(report["max_rel"], max_rel)
        if not ok:
            report["ok"] = False
            report.setdefault("why", f"output {i}: max abs err {max_abs:.3g} (|ref| up to {scale:.3g})")
    return report


def onnx_sibling(entry: Entry) -> Path | None:
    """An ONNX export of the same module that is already cached (for a .pt2's second check)."""
    for other in ENTRIES:
        if other.model == entry.model and other.is_onnx and not other.edit and model_file(other).exists():
            return model_file(other)
    return None


def run_cli(cli: Path, input_paths: list[Path], out_dir: Path, *extra: str) -> str:
    shutil.rmtree(out_dir, ignore_errors=True)
    done = run("run", [cli, "--output-dir", out_dir, *extra, *input_paths])
    return done.stdout


def check_outputs(entry, path, cli, input_paths, inputs, metadata, work, result) -> None:
    run_cli(cli, input_paths, work / "out")
    ours = [np.load(work / "out" / f"output_{i}.npy") for i in range(len(metadata["outputs"]))]
    if entry.is_onnx:
        session = onnxruntime_session(path, 2, exact_integers=True)
        reference = session.run(None, ort_feeds(session, inputs))
        result["compare"] = {"reference": "onnxruntime", **compare(ours, reference)}
    else:
        result["compare"] = {"reference": "pytorch", **compare(ours, torch_reference(entry.model))}
        sibling = onnx_sibling(entry)
        if sibling is not None:
            session = onnxruntime_session(sibling, 2, exact_integers=True)
            reference = session.run(None, ort_feeds(session, inputs))
            result["compare_onnxruntime"] = {"model": sibling.name, **compare(ours, reference)}
    if not result["compare"]["ok"]:
        raise StepError("compare", result["compare"].get("why", "mismatch"))


def bench(entry, path, cli, input_paths, inputs, work, result) -> None:
    """Our cli's --bench median against ONNX Runtime's median on the same model (for a .pt2,
    its ONNX sibling when there is one), at 1 and 2 threads, interleaved in 3 rounds so that
    load from other processes hits both alike; the median round is kept. Each side first runs
    as many times unmeasured: a millisecond model's first tens of runs at 2 threads were
    ~40% slower than later ones (MobileNet v2 int8: 1.0 ms against 0.70), which is where the
    package's thread pool also learns whether its workers pay."""
    ort_model = path if entry.is_onnx else onnx_sibling(entry)
    sessions = {t: onnxruntime_session(ort_model, t) for t in (1, 2)} if ort_model else {}
    feeds = ort_feeds(sessions[1], inputs) if sessions else None
    if sessions:
        sessions[1].run(None, feeds)
        start = time.perf_counter()
        sessions[1].run(None, feeds)
        one = time.perf_counter() - start
    else:
        start = time.perf_counter()
        run_cli(cli, input_paths, work / "bench")
        one = time.perf_counter() - start
    repeats = int(min(30, max(3, 1.0 / max(one, 1e-4))))
    figures = {}
    for threads in (1, 2):
        ours, theirs = [], []
        for _ in range(3):
            text = run_cli(
                cli, input_paths, work / "bench", "--bench", str(repeats), "--warmup", str(repeats),
                "--threads", str(threads),
            )  # fmt: skip
            ours.append(float(re.search(r"median=([0-9.]+)", text).group(1)))
            if sessions:
                for _ in range(repeats):
                    sessions[threads].run(None, feeds)
                times = []
                for _ in range(repeats):
                    start = time.perf_counter()
                    sessions[threads].run(None, feeds)
                    times.append((time.perf_counter() - start) * 1000)
                theirs.append(statistics.median(times))
        figures[f"ours_ms_t{threads}"] = statistics.median(ours)
        figures[f"ort_ms_t{threads}"] = statistics.median(theirs) if theirs else None
    result["bench"] = {"repeats": repeats, "ort_model": ort_model.name if ort_model else None, **figures}


def sizes(source: Path, build_dir: Path, prefix: str) -> dict:
    package = sum(p.stat().st_size for p in source.rglob("*") if p.is_file())
    libraries = [p for p in build_dir.rglob(f"lib{prefix}.*") if p.is_file() and p.suffix in (".a", ".so")]
    weights = json.loads((source / "metadata.json").read_text())["weights_file"]["bytes"]
    return {
        "package_bytes": package,
        "library_bytes": libraries[0].stat().st_size if libraries else None,
        "weights_file_bytes": weights,
    }


def run_entry(entry: Entry, skip_bench: bool, out: Path = OUT) -> dict:
    """Runs every step of one entry and writes its result to ``out``/results/<entry>.json
    (packages are built under ``out``/work; exports are always cached in MODELS_DIR)."""
    result: dict = {
        "entry": entry.name,
        "model": entry.model,
        "source": MODELS[entry.model].source,
        "exporter": entry.exporter + (f"+{entry.edit}" if entry.edit else ""),
        "status": "fail",
    }
    work = out / "work" / entry.name
    started = time.perf_counter()
    try:
        path = export(entry)
        result["model_file"] = str(path.relative_to(ROOT))
        inputs = load_inputs(entry.model)
        work.mkdir(parents=True, exist_ok=True)
        source = generate(entry, path, inputs, work, result)
        metadata = json.loads((source / "metadata.json").read_text())
        result["fallbacks"] = {k: v for k, v in metadata.items() if "fallback" in k.lower()}
        build_dir = build(source, work, result)
        prefix = package_name(entry).lower()
        result.update(sizes(source, build_dir, prefix))
        ctest = [BIN / "ctest", "--test-dir", build_dir, "--output-on-failure", "--no-tests=error"]
        run("ctest", ctest)
        result["ctest"] = "pass"
        cli = find_cli(build_dir, prefix)
        input_paths = []
        for i, array in enumerate(ordered_inputs(metadata, inputs)):
            input_paths.append(work / f"input_{i}.npy")
            np.save(input_paths[-1], array)
        check_outputs(entry, path, cli, input_paths, inputs, metadata, work, result)
        result["status"] = "pass"
        if not skip_bench:
            try:
                bench(entry, path, cli, input_paths, inputs, work, result)
            except (StepError, Exception) as e:  # a failed benchmark does not fail the entry
                result["bench_error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    except StepError as e:
        result["stage"], result["error"] = e.stage, str(e)
    except Exception as e:  # any other failure is this entry's, never the run's
        result["stage"], result["error"] = "harness", f"{type(e).__name__}: {e}".splitlines()[0]
        result["traceback"] = traceback.format_exc()
    result["seconds"] = round(time.perf_counter() - started, 1)
    result["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "results" / f"{entry.name}.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


# --------------------------------------------------------------------------- report


def _mb(value) -> str:
    return f"{value / 1e6:.1f}" if value else "-"


def _ms(bench: dict | None, who: str, threads: int) -> str:
    value = (bench or {}).get(f"{who}_ms_t{threads}")
    return f"{value:.2f}" if value is not None else "-"


def report_rows(results: list[dict]) -> list[str]:
    lines = [
        "| model | exporter | result | fallbacks | max abs err | max rel err | gen s | build s "
        "| package MB | library MB | ms ours / ORT, 1 thread | ms ours / ORT, 2 threads | commit |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        cmp_ = r.get("compare") or {}
        fallbacks = r.get("fallbacks") or {}
        count = (
            sum(len(v) if isinstance(v, list | dict) else 1 for v in fallbacks.values()) if fallbacks else 0
        )
        status = r["status"] if r["status"] == "pass" else f"fail ({r.get('stage')})"
        err = f"{cmp_['max_abs']:.1e}" if "max_abs" in cmp_ else "-"
        rel = f"{cmp_['max_rel']:.1e}" if "max_rel" in cmp_ else "-"
        gen_s = f"{r['gen']['seconds']:.0f}" if "gen" in r else "-"
        build_s = f"{r['build_seconds']:.0f}" if "build_seconds" in r else "-"
        b = r.get("bench")
        lines.append(
            f"| {r['model']} | {r['exporter']} | {status} | {count or '-'} | {err} | {rel} | {gen_s} "
            f"| {build_s} | {_mb(r.get('package_bytes'))} | {_mb(r.get('library_bytes'))} "
            f"| {_ms(b, 'ours', 1)} / {_ms(b, 'ort', 1)} | {_ms(b, 'ours', 2)} / {_ms(b, 'ort', 2)} "
            f"| {(r.get('gen') or {}).get('relay2cmake', '-')} |"
        )
    return lines


def latency_summary(results: list[dict]) -> list[str]:
    """The geometric mean of ours / ONNX Runtime per thread count, and the entries over 1.3."""
    lines = []
    for threads in (1, 2):
        ratios = {
            r["entry"]: r["bench"][f"ours_ms_t{threads}"] / r["bench"][f"ort_ms_t{threads}"]
            for r in results
            if r["status"] == "pass" and (r.get("bench") or {}).get(f"ort_ms_t{threads}")
        }
        if not ratios:
            continue
        mean = statistics.geometric_mean(ratios.values())
        slow = ", ".join(f"{e} {v:.2f}" for e, v in sorted(ratios.items(), key=lambda kv: -kv[1]) if v > 1.3)
        lines.append(
            f"- {threads} thread{'s' if threads > 1 else ''}: ours / ORT geometric mean {mean:.2f} over "
            f"{len(ratios)} entries; over 1.3x: {slow or 'none'}."
        )
    return [*lines, ""] if lines else []


def write_report(target: Path = ROOT / "docs" / "models.md") -> None:
    order = {e.name: i for i, e in enumerate(ENTRIES)}
    results = [json.loads(p.read_text()) for p in RESULTS_DIR.glob("*.json")]
    results.sort(key=lambda r: order.get(r["entry"], len(order)))
    passed = sum(r["status"] == "pass" for r in results)
    section = [
        REPORT_BEGIN,
        "## Real-model zoo",
        "",
        f"Produced by `tools/real_zoo.py --report` from {len(results)} entries ({passed} pass) on a "
        "2-core machine: real architectures from torchvision, timm and transformers (random "
        "weights, BatchNorm statistics randomised, or calibrated on a batch for Inception v3 and "
        "the detectors), batch 1, exported with the TorchScript "
        "exporter at the opset shown (`onnx9`..`onnx17`), `torch.onnx.export(dynamo=True)` "
        "(`dynamo`) or `torch.export` (`pt2`); `+caffe2` adds LRN and mask-keeping Dropout "
        "like old Caffe2-converted zoo files (`-ir3`: initializers also graph inputs). Pass means "
        "gen, build, ctest and every output within rtol 1e-3 / atol 1e-4 of ONNX Runtime "
        "(PyTorch for pt2). Latency: medians of the cli's `--bench` and of ONNX Runtime with as "
        "many intra-op threads, measured interleaved (for pt2, ORT runs the model's ONNX export). "
        "Each package was first checked by gen itself (built, golden test run for every kernel "
        "set this machine runs, against outputs two reference paths agree on).",
        "",
        *report_rows(results),
        "",
        *latency_summary(results),
        "### Failures",
        "",
    ]
    failures = [r for r in results if r["status"] != "pass"]
    section += [f"- `{r['entry']}` ({r.get('stage')}): {r.get('error', '')}" for r in failures] or ["None."]
    section += ["", "### Warnings from gen (fallbacks, reference disagreements)", ""]
    warned = [(r["entry"], w) for r in results for w in (r.get("gen") or {}).get("warnings", [])]
    section += [f"- `{entry}`: {w.removeprefix('warning: ')[:300]}" for entry, w in warned] or ["None."]
    section.append(REPORT_END)
    text = target.read_text() if target.exists() else ""
    block = "\n".join(section)
    if REPORT_BEGIN in text and REPORT_END in text:
        head, rest = text.split(REPORT_BEGIN, 1)
        text = head + block + rest.split(REPORT_END, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    target.write_text(text)


# --------------------------------------------------------------------------- main


def select(only: list[str] | None, slice_: str | None) -> list[Entry]:
    entries = ENTRIES
    if slice_ == "ci":
        entries = [e for e in entries if e.ci]
    if only:
        entries = [e for e in entries if e.name in only or e.model in only]
    return entries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", help="entries (or whole models) to run")
    parser.add_argument("--list", action="store_true", help="list the entries and exit")
    parser.add_argument("--slice", choices=["ci"], help="the CI slice only")
    parser.add_argument("--skip-bench", action="store_true", help="no latency measurements")
    parser.add_argument("--resume", action="store_true", help="skip entries that already have a result")
    parser.add_argument("--report", action="store_true", help="(re)write docs/models.md from the results")
    parser.add_argument("--export-one", help=argparse.SUPPRESS)  # the child process of export()
    args = parser.parse_args()
    if args.export_one:
        export_in_process(next(e for e in ENTRIES if e.name == args.export_one))
        return
    entries = select(args.only, args.slice)
    if args.list:
        for e in entries:
            print(f"{e.name:40s} {MODELS[e.model].source:12s}{' ci' if e.ci else ''}")
        return
    if not args.report or args.only or args.slice:
        for entry in entries:
            if args.resume and (RESULTS_DIR / f"{entry.name}.json").exists():
                continue
            r = run_entry(entry, args.skip_bench)
            tail = "" if r["status"] == "pass" else f" [{r.get('stage')}] {r.get('error')}"
            print(f"{r['entry']:40s} {r['status']:4s} {r['seconds']:7.1f}s{tail}", flush=True)
    if args.report:
        write_report()


if __name__ == "__main__":
    main()
