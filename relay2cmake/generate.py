"""The ``gen`` pipeline: model → Relax → lowered plan → rendered package, one way."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from relay2cmake import golden, naming
from relay2cmake import tuning as tuning_db
from relay2cmake.emit.context import PackageIdentity
from relay2cmake.emit.package import check_output_dir, render_package, write_package
from relay2cmake.frontends import import_model
from relay2cmake.lowering import lower, needs_aligned_inputs
from relay2cmake.plan import PackagePlan, build_plan
from relay2cmake.targets import parse_targets


@dataclass(frozen=True)
class GenerateOptions:
    model: Path
    out: Path
    name: str | None = None
    version: str = "1.0.0"
    input_shapes: dict[str, tuple[int, ...]] | None = None
    targets: tuple[str, ...] = ()  # --target values; none: c plus the host architecture
    force: bool = False
    constant_inputs: dict[str, str] | None = None  # ONNX input name → .npy path or "1,2,3"
    tuning_db: Path | None = None  # written by `relay2cmake tune`
    winograd: bool = True  # 3x3 stride-1 convs as Winograd F(2x2, 3x3) (winograd.py)


@dataclass(frozen=True)
class GenerateReport:
    identity: PackageIdentity
    plan: PackagePlan
    files: int
    seconds: dict[str, float]
    warnings: tuple[str, ...] = ()


Steps = Callable[[str], contextlib.AbstractContextManager[None]]


def _silent(_message: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def timed_step(progress: Steps, seconds: dict[str, float], label: str, message: str, work):
    """Run ``work()`` as one reported step and record its duration under ``label``."""
    start = time.perf_counter()
    with progress(message):
        result = work()
    seconds[label] = time.perf_counter() - start
    return result


def generate(options: GenerateOptions, progress: Steps = _silent) -> GenerateReport:
    name = naming.check_package_name(options.name or naming.package_name_from_path(options.model.stem))
    version = naming.check_version(options.version)
    prefix = naming.c_prefix(name)
    targets = parse_targets(list(options.targets))
    # Refuse to clobber before any long step; checked again just before writing.
    check_output_dir(options.out, options.force)
    tuning = tuning_db.load(options.tuning_db) if options.tuning_db is not None else None
    built = {t.label for t in targets} | {w.label for t in targets if (w := t.wide_variant()) is not None}
    untuned = tuning is not None and tuning.target not in built  # the AVX-512 twin counts
    seconds: dict[str, float] = {}

    def timed(label: str, message: str, work):
        return timed_step(progress, seconds, label, message, work)

    imported = timed(
        "import",
        f"Importing {options.model.name}",
        lambda: import_model(options.model, options.input_shapes or {}, options.constant_inputs),
    )
    lowered = timed(
        "lower",
        f"Lowering with TVM (kernels: {', '.join(t.label for t in targets)})",
        lambda: lower(imported.module, prefix, targets, tuning, options.winograd),
    )
    plan = timed(
        "plan", "Planning memory", lambda: build_plan(imported, lowered, needs_aligned_inputs(targets))
    )
    reference = timed("golden", "Computing golden outputs", lambda: golden.compute(imported))
    identity = PackageIdentity(
        name=name,
        prefix=prefix,
        version=version,
        model_file=options.model.name,
        model_sha256=imported.source_sha256,
        # A model without kernels carries no objects: only what was built is listed.
        targets=tuple(t.label for t in targets if not t.is_object or t.arch in lowered.objects)
        + tuple(t.wide_variant().label for t in targets if t.is_object and _has_wide(lowered, t)),
    )
    files = timed(
        "render",
        "Rendering the package",
        lambda: render_package(identity, plan, lowered, reference, imported.operators),
    )
    timed("write", f"Writing {options.out}", lambda: write_package(options.out, files, options.force))
    warnings = tuple(
        f"no {label} objects ({reason[:300]}); the package uses its portable C kernels there."
        for label, reason in lowered.skipped.items()
    ) + (
        (f"the tuning database is for {tuning.target}, which this package does not build; it was not used.",)
        if untuned
        else ()
    )
    return GenerateReport(identity=identity, plan=plan, files=len(files), seconds=seconds, warnings=warnings)


def _has_wide(lowered, target) -> bool:
    object_set = lowered.objects.get(target.arch)
    return object_set is not None and object_set.wide is not None
