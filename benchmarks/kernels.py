"""Where a model's time goes: every kernel the package would call, scheduled and built for
one target as `gen` does, timed alone (TVM's time_evaluator, one thread), times its calls.

    .venv/bin/python benchmarks/kernels.py mobilenet            # a benchmark model by name
    .venv/bin/python benchmarks/kernels.py path/to/model.onnx --target x86_64:native --top 15
    .venv/bin/python benchmarks/kernels.py path/to/model.pt2   # any format gen reads
    .venv/bin/python benchmarks/kernels.py enc.onnx --input-shape x=1,1..128,256 --at 64

Prints kernels by total time, with GFLOPS from TVM's estimate of each kernel's work.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# The kernels are built as the package ships them, with their parallel loops, and run on one
# of TVM's threads (its pool reads this when it starts). Built serial instead, they hid what
# the parallel loops cost at one thread: Swin v2's 7 x 7 dense layers, 3.0 ms serial and 4.5
# in the package, which the report then called cold caches.
os.environ.setdefault("TVM_NUM_THREADS", "1")
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))  # relay2cmake from this checkout


def _model_path(name: str, folder: Path) -> Path:
    if name.endswith((".onnx", ".pt2", ".py")):
        return Path(name)
    import models
    import onnx

    path = folder / f"{name}.onnx"
    onnx.save(getattr(models, name)(), str(path))
    return path


def _calls(main) -> Counter:
    import tvm
    from tvm import relax

    counts: Counter = Counter()

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.GlobalVar):
            counts[expr.op.name_hint] += 1

    relax.analysis.post_order_visit(main, visit)
    return counts


def _flops(func) -> float:
    """TVM's own estimate of the floating-point work of a PrimFunc, or the multiply-adds of
    its reductions where those are more: with a ``Let`` in an epilogue (fast erf's value,
    the exponential's result) TVM's estimate refuses the function or counts next to nothing
    (SiLU convs: 0.0-0.8 GFLOPS, counted memory-bound); 0 when neither tells."""
    import tvm
    from tvm.s_tir.analysis import estimate_tir_flops

    try:
        estimate = float(estimate_tir_flops(tvm.IRModule({"main": func})))
    except Exception:
        estimate = 0.0
    return max(estimate, _reduction_flops(func))


def _reduction_flops(func) -> float:
    """2 flop per iteration of each block that reduces (the epilogue's few flop per output
    are left out: this is a floor). Read off the blocks as they stand, not through a
    Schedule: its well-formedness check refuses the scheduled GRU cell, whose sigmoid and
    tanh bind the same ``Let`` variable in two places (which the build takes)."""
    import tvm_ffi
    from tvm import s_tir, tirx

    blocks: list = []
    tvm_ffi.structural_map(func, [(s_tir.SBlock, lambda block: blocks.append(block) or block)])
    return sum(
        2.0 * math.prod(int(iv.dom.extent) for iv in block.iter_vars)
        for block in blocks
        if any(iv.iter_type == tirx.IterVar.CommReduce for iv in block.iter_vars)
    )


def _arguments(func, device, values: dict[str, int]):
    import tvm

    from relay2cmake.symbolic import value_at

    rng = np.random.default_rng(0)
    arrays = []
    for param in func.params:  # TVM 0.27: a PrimFunc's parameters are its buffers
        shape = [value_at(d, values) for d in param.shape]
        dtype = str(param.dtype)
        data = rng.standard_normal(shape).astype(dtype) if "float" in dtype else np.zeros(shape, dtype)
        arrays.append(tvm.runtime.tensor(data, device))
    return arrays


# flop per operand byte below which a kernel counts as memory-bound: this machine's FMA peak
# (117 GFLOPS) over a core's streaming bandwidth from L3 (a few tens of GB/s).
MEMORY_BOUND_INTENSITY = 8


@dataclass(frozen=True)
class KernelTime:
    name: str
    calls: int  # how often the model calls it
    seconds: float  # one call: the fastest repeat's mean (warm), the median call (cold)
    flop: float  # one call, TVM's estimate (0 when it cannot tell)
    bytes: int  # one call's operands: inputs, weights and outputs
    scheduled: bool  # a default schedule (schedules.py) applied

    @property
    def total(self) -> float:
        return self.seconds * self.calls

    @property
    def gflops(self) -> float:
        return self.flop / self.seconds / 1e9

    @property
    def gbytes_per_s(self) -> float:
        return self.bytes / self.seconds / 1e9

    @property
    def memory_bound(self) -> bool:
        """Fewer flop per operand byte than a core can do while streaming them: a GEMV
        (M = 1, 0.5 flop/byte) or a depthwise conv (about 2) waits on memory, not on FMAs."""
        return self.flop < MEMORY_BOUND_INTENSITY * self.bytes

    @property
    def conv_or_matmul(self) -> bool:
        return any(kind in self.name for kind in ("conv2d", "matmul", "winograd_product"))


def time_kernels(
    model_path: Path,
    target_spec: str,
    cold: bool = False,
    input_shapes: dict | None = None,
    at: int | None = None,
) -> list[KernelTime]:
    """Every kernel of the model, scheduled for ``target_spec`` (a gen --target) as gen does,
    built and timed alone on one thread; slowest in total first. ``cold``: every operand but
    the first (the activations a package's previous kernel just wrote) is flushed from the
    caches before each call, as weights are in a package whose weights outgrow the L2 cache.
    ``input_shapes`` as gen's ``--input-shape``; with ranges, the kernels are timed with
    every run-time dimension at ``at`` (default: its largest value)."""
    import tvm

    from relay2cmake.frontends import import_model
    from relay2cmake.lower.pipeline import bounded_kernels, has_wide_set, twin_builds
    from relay2cmake.lower.schedules import ScheduleOptions, schedule_module
    from relay2cmake.symbolic import value_at
    from relay2cmake.targets import parse_targets

    target = parse_targets([target_spec])[-1]
    imported = import_model(model_path, input_shapes or {})
    values = {d.symbol: d.high if at is None else at for d in imported.dims}
    lowered, plain = bounded_kernels(imported.module, wide=has_wide_set((target,)))
    scheduled, names = schedule_module(plain, ScheduleOptions.for_objects(target))
    # A twin set (the AVX-512 one a package reports running) builds only some kernels; the
    # package runs the others from its default set, and so they are timed (MixNet-S's concat
    # kernel timed 0.16 ms as AVX-512 code; the package ran its AVX2 code, 0.74 ms).
    default = parse_targets([target.arch])[-1]
    from_default = target.label in {twin.label for twin in default.twin_variants()}
    if from_default:
        default_kernels, default_names = schedule_module(plain, ScheduleOptions.for_objects(default))
    calls = _calls(lowered["main"])
    device = tvm.cpu()
    rows = []
    for gv in scheduled.get_global_vars():
        func, name, built_for, scheduled_names = scheduled[gv], gv.name_hint, target, names
        if from_default and not twin_builds(func, target, lambda name=name: name in names):
            func, built_for, scheduled_names = default_kernels[name], default, default_names
        try:
            library = _build(func, built_for)
        except Exception:  # gen's fallback: a kernel LLVM cannot build as scheduled ships unscheduled
            func, scheduled_names = plain[name], tuple(n for n in scheduled_names if n != name)
            library = _build(func, built_for)
        if cold:  # a flush per call: number=1 (TVM runs f_preproc once per repeat)
            evaluator = library.time_evaluator(
                "main", device, number=1, repeat=40, f_preproc="cache_flush_cpu_non_first_arg"
            )
        else:
            evaluator = library.time_evaluator("main", device, number=20, repeat=7, min_repeat_ms=50)
        results = evaluator(*_arguments(func, device, values)).results
        # Warm: the fastest repeat (each the mean of 20 or more calls). On a shared machine
        # other work only adds time: medians of the same kernel moved by 1.3-1.8x between
        # runs minutes apart, the fastest repeats by under 10%. Cold: single calls, the median.
        seconds = float(np.median(results) if cold else min(results))
        operands = sum(
            math.prod(value_at(d, values) for d in p.shape) * p.dtype.bits // 8 for p in func.params
        )
        flop = 0.0 if values else _flops(func)  # (TVM estimates static extents only)
        rows.append(KernelTime(name, calls[name], seconds, flop, operands, name in scheduled_names))
    return sorted(rows, key=lambda row: row.total, reverse=True)


def _build(func, target):
    """Built as gen builds it (NaN-propagating max/min included: timing kernels without it
    hid a third of MobileViT-XS's time, which then showed up as "outside kernels")."""
    import tvm

    from relay2cmake.lower.pipeline import build_kernels

    return build_kernels(tvm.IRModule({"main": func}), target.tvm_target(), "a kernel")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "model", help="a benchmarks/models.py name (mobilenet, resnet50, ...) or an .onnx file"
    )
    parser.add_argument("--target", default="x86_64", help="kernel set, as gen --target (default x86_64)")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument(
        "--cold", action="store_true", help="flush weights and outputs from the caches before each call"
    )
    parser.add_argument("--input-shape", action="append", default=[], help="as gen's, ranges included")
    parser.add_argument("--at", type=int, help="the value of every run-time dimension (default: its largest)")
    args = parser.parse_args()
    from relay2cmake.cli import parse_input_shapes

    with tempfile.TemporaryDirectory() as folder:
        rows = time_kernels(
            _model_path(args.model, Path(folder)),
            args.target,
            cold=args.cold,
            input_shapes=parse_input_shapes(args.input_shape),
            at=args.at,
        )
    total = sum(row.total for row in rows)
    caches = "cold weights" if args.cold else "warm caches"
    print(f"{args.model} ({args.target}, 1 thread, {caches}): {total * 1e3:.2f} ms in {len(rows)} kernels")
    print(f"{'kernel':48} {'calls':>5} {'ms each':>9} {'ms total':>9} {'share':>6} {'GFLOPS':>7} scheduled")
    for row in rows[: args.top]:
        gflops = f"{row.gflops:7.1f}" if row.flop else "      -"
        print(
            f"{row.name[:48]:48} {row.calls:5d} {row.seconds * 1e3:9.3f} {row.total * 1e3:9.3f} "
            f"{row.total / total:6.1%} {gflops} {'yes' if row.scheduled else 'no'}"
        )


if __name__ == "__main__":
    main()
