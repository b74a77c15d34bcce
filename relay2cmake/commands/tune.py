"""``relay2cmake tune``: MetaSchedule searches schedules for a model's kernels, and a kernel
keeps a tuned schedule only when it ran faster than the default schedule, both timed here
the same way. By default ``tune`` tunes the set this machine runs: the default x86-64 set,
or its AVX-512 twin on CPUs with AVX-512. The records it keeps form a tuning database
(``lower/tuning_db.py``), which ``gen --tuning-db`` replays.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from relay2cmake.errors import ModelError, UserError, describe
from relay2cmake.frontends import InputShapes
from relay2cmake.lower.tuning_db import TuningDatabase, TuningRecord, normalized, workload_hash

if TYPE_CHECKING:
    from relay2cmake.commands.generate import Steps

BUILD_FUNCTION = "relay2cmake.tuning.build"  # MetaSchedule's builder workers look it up by name


def register_build_function() -> None:
    """Worker initializer: MetaSchedule's default build imports all of TVM's tensor
    intrinsics first (about 16 s per worker, past its 30 s timeout on 2 cores)."""
    import tvm

    if tvm.get_global_func(BUILD_FUNCTION, allow_missing=True) is None:
        tvm.register_global_func(BUILD_FUNCTION, _build)


def _build(mod, target, _params):
    from tvm.driver import build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    return build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod), target=target)


def _seconds(func, target) -> float:
    """Median time of one call, in this process (TVM's thread pool), random inputs."""
    import numpy as np
    import tvm

    from relay2cmake.lower.pipeline import build_kernels

    library = build_kernels(tvm.IRModule({"main": func}), target, "a tuning candidate")
    device = tvm.cpu()
    rng = np.random.default_rng(0)
    arguments = []
    for param in func.params:
        shape, dtype = [int(d) for d in param.shape], str(param.dtype)
        data = rng.standard_normal(shape).astype(dtype) if "float" in dtype else np.zeros(shape, dtype)
        arguments.append(tvm.runtime.tensor(data, device))
    evaluator = library.time_evaluator("main", device, number=10, repeat=3, min_repeat_ms=20)
    return float(np.median(evaluator(*arguments).results))


@dataclass(frozen=True)
class TuneReport:
    database: TuningDatabase
    kernels: int
    seconds: float


def tune(
    model: Path,
    input_shapes: InputShapes | None,
    constant_inputs: dict[str, str] | None,
    target_spec: tuple[str, ...],
    trials: int,
    progress: Steps,
    winograd: bool = True,
) -> TuneReport:
    """Search ``trials`` schedules per kernel of the model lowered as ``gen`` lowers it
    (``winograd`` as gen's); returns the kept records (faster than default)."""
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from relay2cmake.frontends import import_model
    from relay2cmake.lower.pipeline import has_wide_set, lowered_kernels
    from relay2cmake.lower.schedules import ScheduleOptions, schedule_function
    from relay2cmake.targets import host_runs_wide, parse_targets

    start = time.perf_counter()
    target = parse_targets(list(target_spec))[-1]
    wide = target.wide_variant()
    if not target_spec and wide is not None and host_runs_wide():
        target = wide  # by default, tune the set this machine runs: the AVX-512 twin here
    if not target.is_object:
        raise UserError("tune needs an object target (x86_64[:CPU] or aarch64[:CPU]), not c.")
    if trials < 1:
        raise UserError("--trials must be at least 1.")
    with progress("Importing the model"):
        imported = import_model(model, input_shapes or {}, constant_inputs or {})
    with progress("Lowering"):
        # (padded as gen pads them for a package with this target's sets)
        _, prims, _ = lowered_kernels(imported.module, "tune", winograd, wide=has_wide_set((target,)))
    tvm_target = target.tvm_target(cores=os.cpu_count() or 1)
    kernels = {gv.name_hint: prims[gv] for gv in prims.get_global_vars()}
    register_build_function()
    with tempfile.TemporaryDirectory(prefix="relay2cmake-tune-") as work:
        with progress(f"Tuning {len(kernels)} kernels, {trials} trials each (MetaSchedule)"):
            try:
                database = ms.tune_tir(
                    tvm.IRModule({name: normalized(f) for name, f in kernels.items()}),
                    tvm_target,
                    work_dir=work,
                    max_trials_global=trials * len(kernels),
                    max_trials_per_task=trials,
                    num_trials_per_iter=min(trials, 16),
                    builder=ms.builder.LocalBuilder(
                        f_build=BUILD_FUNCTION, initializer=register_build_function
                    ),
                    seed=0,
                )
            except Exception as exc:
                raise ModelError(f"MetaSchedule failed: {describe(exc, 500)}") from None
        records = []
        options = ScheduleOptions.for_objects(target)
        with progress("Timing tuned against default schedules"):
            for name, func in sorted(kernels.items()):
                best = database.query_schedule(tvm.IRModule({"main": normalized(func)}), tvm_target, "main")
                if best is None:
                    continue
                default = schedule_function(func, options) or func
                tuned_s, default_s = _seconds(best.mod["main"], tvm_target), _seconds(default, tvm_target)
                if tuned_s < default_s:
                    records.append(
                        TuningRecord(
                            kernel=name,
                            workload=workload_hash(func),
                            trace=tvm.ir.save_json(best.trace.as_json()),
                            tuned_us=round(tuned_s * 1e6, 2),
                            default_us=round(default_s * 1e6, 2),
                        )
                    )
    result = TuningDatabase(target=target.label, records=tuple(records))
    return TuneReport(database=result, kernels=len(kernels), seconds=time.perf_counter() - start)
