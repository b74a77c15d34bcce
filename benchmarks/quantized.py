"""Quantized models of the real-model zoo: correctness against ONNX Runtime's int8 result and
speed against ONNX Runtime int8 and our own float32 package, side by side.

    .venv/bin/python benchmarks/quantized.py                 # every model, writes docs/quantized.md
    .venv/bin/python benchmarks/quantized.py --models resnet18 --no-bench
    .venv/bin/python benchmarks/quantized.py --target x86_64:haswell --out docs/quantized-avx2.md
    .venv/bin/python benchmarks/quantized.py --sweep    # ten more zoo models, correctness only

Each zoo model (random weights, exported by tools/real_zoo.py) is quantized the ways a user
would with ONNX Runtime's own tools: ``quantize_static`` in QDQ format (uint8 activations,
int8 weights per channel) and in QOperator format (per tensor), and ``quantize_dynamic``
(transformers). Calibration runs on a few random inputs. Every variant goes through
gen → CMake Release build → ``<prefix>_cli``; its outputs are compared with ONNX Runtime's on
the zoo's inputs in units of the output's quantum (the scale of the DequantizeLinear that
gives it; float outputs of dynamic quantization in float32 terms), and its latency is
measured interleaved with ONNX Runtime's on the same model and with our float32 package
(tools/real_zoo.py's rounds, the median kept; machines here are shared, so compare ratios
in one row).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import onnx.version_converter
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import real_zoo as rz  # noqa: E402
from real_zoo_models import Entry  # noqa: E402

OUT = ROOT / "build" / "quantized"
# model entry of the zoo, and the quantizations it gets
MODELS = {
    "resnet18": (Entry("resnet18", "onnx13"), ("float", "qdq", "qoperator")),
    "mobilenet_v2": (Entry("mobilenet_v2", "onnx11"), ("float", "qdq", "qoperator")),
    "bert": (Entry("bert", "onnx17"), ("float", "qdq", "dynamic")),
}
# Further zoo models for a correctness sweep (--sweep: no timing, docs/quantized-zoo.md):
# architectures the quantizer turns into other operators (Concat, Sigmoid, hard-swish,
# grouped and depthwise convolutions, attention).
SWEEP = {
    "squeezenet1_1": (Entry("squeezenet1_1", "onnx9"), ("qdq", "qoperator")),
    "googlenet": (Entry("googlenet", "onnx9"), ("qdq", "qoperator")),
    "densenet121": (Entry("densenet121", "onnx11"), ("qdq", "qoperator")),
    "resnet50": (Entry("resnet50", "onnx17"), ("qdq", "qoperator")),
    "shufflenet_v2_x1_0": (Entry("shufflenet_v2_x1_0", "onnx13"), ("qdq", "qoperator")),
    "regnet_y_400mf": (Entry("regnet_y_400mf", "onnx13"), ("qdq", "qoperator")),
    "efficientnet_b0": (Entry("efficientnet_b0", "onnx13"), ("qdq", "qoperator")),
    "mobilenet_v3_small": (Entry("mobilenet_v3_small", "onnx17"), ("qdq", "qoperator")),
    "vit_tiny": (Entry("vit_tiny", "onnx17"), ("qdq", "dynamic")),
    "distilbert": (Entry("distilbert", "onnx14"), ("qdq", "dynamic")),
}
CALIBRATION_BATCHES = 4
# A transformer's attention mask holds -inf: quantized (the quantizer's default covers Where
# and Add too) its scale is inf, and the masked scores become NaN or 255 depending on how a
# runtime rounds inf / inf; the products are what a user quantizes.
OPERATORS_TO_QUANTIZE = {"bert": ["MatMul", "Gemm"], "distilbert": ["MatMul", "Gemm"]}


def quantize(source: Path, kind: str, target: Path, inputs: dict[str, np.ndarray]) -> Path:
    """``source`` quantized the way ONNX Runtime's documentation shows (pre-processed first)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    if target.exists():
        return target
    prepared = target.with_suffix(".pre.onnx")
    model = onnx.load(str(source))
    if next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")) < 13:
        # Per-channel QuantizeLinear/DequantizeLinear need opset 13 (ONNX Runtime's quantizer
        # writes them into older models anyway, which ONNX's checker then refuses).
        model = onnx.version_converter.convert_version(model, 13)
        source = target.with_suffix(".opset13.onnx")
        onnx.save(model, str(source))
    quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
    if kind == "dynamic":
        quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8)
        return target
    rng = np.random.default_rng(1)

    def batch() -> dict[str, np.ndarray]:
        # Inputs like the zoo's: noise for floats, the same token ids and masks for integers.
        return {
            name: rng.normal(size=value.shape).astype(value.dtype) if value.dtype.kind == "f" else value
            for name, value in inputs.items()
        }

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            self.batches = iter([batch() for _ in range(CALIBRATION_BATCHES)])

        def get_next(self):
            return next(self.batches, None)

    quantize_static(
        str(prepared), str(target), Calibration(),
        quant_format=QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator,
        per_channel=kind == "qdq", activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
        op_types_to_quantize=OPERATORS_TO_QUANTIZE.get(source.parent.name),
    )  # fmt: skip
    return target


def output_quanta(model: onnx.ModelProto) -> dict[int, float]:
    """Position of each output that a DequantizeLinear gives: its scale."""
    constants = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    producers = {o: n for n in model.graph.node for o in n.output}
    quanta = {}
    for index, output in enumerate(model.graph.output):
        node = producers.get(output.name)
        if node is not None and node.op_type == "DequantizeLinear" and node.input[1] in constants:
            quanta[index] = float(constants[node.input[1]].reshape(-1).max())
    return quanta


def agreement(ours: list[np.ndarray], theirs: list[np.ndarray], quanta: dict[int, float]) -> dict:
    """Per output: the largest difference (in quanta for quantized outputs) and the share of
    elements that are equal."""
    rows = []
    for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        difference = np.abs(a.astype(np.float64) - np.asarray(b, np.float64))
        quantum = quanta.get(index)
        largest = float(difference.max(initial=0))
        rows.append({
            "max": largest / quantum if quantum else largest,
            "unit": "quanta" if quantum else "abs",
            "equal": float(np.mean(difference == 0)) if difference.size else 1.0,
            "reference_max": float(np.abs(np.asarray(b)).max(initial=0)),
        })  # fmt: skip
    return {"outputs": rows}


def package_bytes(source: Path) -> int:
    return int(json.loads((source / "metadata.json").read_text())["weights_file"]["bytes"])


def run_variant(entry: Entry, kind: str, bench: bool, target: str | None = None, out: Path = OUT) -> dict:
    work = out / (f"{entry.model}-{kind}" + (f"-{target.replace(':', '-')}" if target else ""))
    work.mkdir(parents=True, exist_ok=True)
    source = rz.export(entry)
    inputs = rz.load_inputs(entry.model)
    model_path = source if kind == "float" else quantize(source, kind, work / f"{kind}.onnx", inputs)
    result: dict = {"model": entry.model, "kind": kind}
    variant = Entry(entry.model, f"{entry.exporter}-{kind}")
    start = time.perf_counter()
    package = rz.generate(variant, model_path, inputs, work, result, ("--target", target) if target else ())
    build_dir = rz.build(package, work, result)
    result["gen_and_build_seconds"] = round(time.perf_counter() - start, 1)
    metadata = json.loads((package / "metadata.json").read_text())
    cli = rz.find_cli(build_dir, rz.package_name(variant))
    input_paths = []
    for i, value in enumerate(rz.ordered_inputs(metadata, inputs)):
        input_paths.append(work / f"input_{i}.npy")
        np.save(input_paths[-1], value)
    rz.run_cli(cli, input_paths, work / "out")
    ours = [np.load(work / "out" / f"output_{i}.npy") for i in range(len(metadata["outputs"]))]
    session = rz.onnxruntime_session(model_path, 1, exact_integers=True)
    feeds = rz.ort_feeds(session, inputs)
    result["agreement"] = agreement(ours, session.run(None, feeds), output_quanta(onnx.load(str(model_path))))
    result["weights_bytes"] = package_bytes(package)
    if bench:  # the zoo's interleaved rounds against ONNX Runtime on the same model
        rz.bench(variant, model_path, cli, input_paths, inputs, work, result)
        result["times"] = result.pop("bench")
    result["relay2cmake"] = result["gen"]["relay2cmake"]
    (work / "result.json").write_text(json.dumps(result, indent=1))
    return result


def write_report(results: list[dict], path: Path, target: str | None) -> None:
    floats = {r["model"]: r for r in results if r["kind"] == "float"}
    commits = sorted({r["relay2cmake"] for r in results if r["relay2cmake"]})
    lines = [
        "# Quantized models",
        "",
        "Produced by `python benchmarks/quantized.py` "
        f"({platform.machine()}, 2 cores shared with other work; relay2cmake {', '.join(commits)}; "
        f"kernel set: {target or 'the default, x86_64 with its AVX-512 twin'}).",
        "Zoo models (random weights) quantized with ONNX Runtime's tools: *qdq* = `quantize_static`",
        "QDQ, uint8 activations, int8 weights per channel; *qoperator* = `quantize_static` QOperator,",
        "per tensor; *dynamic* = `quantize_dynamic`. *max diff* is the largest difference from ONNX",
        "Runtime's output on the zoo's input, in output quanta where a DequantizeLinear gives the",
        "output, else absolute; *equal* the share of output elements equal to ONNX Runtime's.",
        "Latencies: medians, our `_cli --bench` and ONNX Runtime (CPU provider) on the same model,",
        "interleaved in 3 rounds; *float/int8* is our float32 package's time over this one's.",
        "",
        "| model | variant | weights MB | max diff | equal | ours ms 1t | ORT ms 1t | ours/ORT 1t "
        "| ours ms 2t | ORT ms 2t | ours/ORT 2t | our float/int8 1t |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['kind']} | error: {r['error'][:120]} |")
            continue
        worst = max(r["agreement"]["outputs"], key=lambda o: o["max"])
        diff = f"{worst['max']:.3g} {worst['unit']}"
        equal = min(o["equal"] for o in r["agreement"]["outputs"])
        t = r.get("times", {})
        base = floats.get(r["model"], {}).get("times", {})

        def ms(key: str, times: dict = t) -> str:
            return f"{times[key]:.3g}" if key in times else "—"

        def ratio(a: str, b: str, x: dict = t, y: dict = t) -> str:
            return f"{x[a] / y[b]:.2f}" if a in x and b in y else "—"

        lines.append(
            f"| {r['model']} | {r['kind']} | {r['weights_bytes'] / 1e6:.1f} | {diff} | {equal:.1%} "
            f"| {ms('ours_ms_t1')} | {ms('ort_ms_t1')} | {ratio('ours_ms_t1', 'ort_ms_t1')} "
            f"| {ms('ours_ms_t2')} | {ms('ort_ms_t2')} | {ratio('ours_ms_t2', 'ort_ms_t2')} "
            f"| {ratio('ours_ms_t1', 'ours_ms_t1', base, t) if r['kind'] != 'float' else '—'} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", choices=[*MODELS, *SWEEP], help="default: all of the set")
    parser.add_argument("--sweep", action="store_true", help="the further zoo models, correctness only")
    parser.add_argument("--no-bench", action="store_true", help="correctness only")
    parser.add_argument("--out", type=Path, help="default: docs/quantized.md, --sweep docs/quantized-zoo.md")
    parser.add_argument("--target", help="one kernel set, as gen --target (x86_64:haswell: AVX2 only)")
    args = parser.parse_args()
    chosen = SWEEP if args.sweep else MODELS
    out = args.out or ROOT / "docs" / ("quantized-zoo.md" if args.sweep else "quantized.md")
    results = []
    for name in args.models or list(chosen):
        entry, kinds = {**MODELS, **SWEEP}[name]
        for kind in kinds:
            print(f"{name} {kind} ...", flush=True)
            try:
                results.append(run_variant(entry, kind, not (args.no_bench or args.sweep), args.target))
            except rz.StepError as exc:
                error = f"{exc.stage}: {exc}"
                results.append({"model": name, "kind": kind, "error": error, "relay2cmake": ""})
            print(f"  {json.dumps(results[-1].get('agreement', results[-1].get('error')))[:300]}", flush=True)
            print(f"  {results[-1].get('times', '')}", flush=True)
    write_report(results, out, args.target)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
