"""The ``gen`` pipeline: model → Relax → lowered plan → rendered package, one way."""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from relay2cmake import naming
from relay2cmake.emit.output_folder import check_output_dir, commit_package, discard_staging
from relay2cmake.errors import ModelError
from relay2cmake.frontends import InputShapes, import_model
from relay2cmake.lower import tuning_db
from relay2cmake.targets import KernelTarget, parse_targets

# The stages after import load NumPy, Jinja and more (half a second): imported where they
# run, so that gen's first progress line appears at once.
if TYPE_CHECKING:
    from relay2cmake import golden
    from relay2cmake.commands import self_check
    from relay2cmake.emit.context import PackageIdentity
    from relay2cmake.frontends import ImportedModel
    from relay2cmake.lower.pipeline import LoweredModel
    from relay2cmake.plan import PackagePlan


@dataclass(frozen=True)
class GenerateOptions:
    model: Path
    out: Path
    name: str | None = None
    version: str = "1.0.0"
    input_shapes: InputShapes | None = None
    targets: tuple[str, ...] = ()  # --target values; none: c plus the host architecture
    force: bool = False
    constant_inputs: dict[str, str] | None = None  # ONNX input name → .npy path or "1,2,3"
    tuning_db: Path | None = None  # written by `relay2cmake tune`
    winograd: bool = True  # 3x3 stride-1 convs as Winograd F(2x2, 3x3) (winograd.py)
    self_check: bool = True  # build the package and run its golden test before writing it
    allow_unverified: bool = False  # write it even when no second path or the check disagrees
    optimise: bool = True  # False: the plain path only (no optional rewrite, schedule or twin)
    locate_divergence: bool = True  # when even the plain package is wrong: which operator first


@dataclass(frozen=True)
class GenerateReport:
    identity: PackageIdentity
    plan: PackagePlan
    files: int
    seconds: dict[str, float]
    warnings: tuple[str, ...] = ()


Steps = Callable[[str], contextlib.AbstractContextManager[None]]
_T = TypeVar("_T")


def _silent(_message: str) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext()


def timed_step(
    progress: Steps, seconds: dict[str, float], label: str, message: str, work: Callable[[], _T]
) -> _T:
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
    check_output_dir(options.out, options.force, keep=(options.model,))
    tuning = tuning_db.load(options.tuning_db) if options.tuning_db is not None else None
    built = {t.label for t in targets} | {w.label for t in targets for w in t.twin_variants()}
    # A twin set counts as built.
    untuned_target = tuning.target if tuning is not None and tuning.target not in built else None
    seconds: dict[str, float] = {}

    def timed(label: str, message: str, work):
        return timed_step(progress, seconds, label, message, work)

    imported = timed(
        "import",
        f"Importing {options.model.name}",
        lambda: import_model(options.model, options.input_shapes or {}, options.constant_inputs),
    )
    from relay2cmake import golden

    reference = timed(
        "golden",
        "Computing golden outputs (cross-checked references)",
        lambda: golden.compute(imported, accept_unconfirmed=options.allow_unverified),
    )
    if imported.dims:  # the package is checked at its smallest and a middle shape too
        reference = timed(
            "golden-cases",
            "Computing golden outputs at other values of the run-time dimensions",
            lambda: dataclasses.replace(
                reference,
                dims=tuple(d.high for d in imported.dims),
                cases=tuple(
                    dataclasses.replace(
                        golden.compute(golden.at_dims(imported, values), options.allow_unverified),
                        dims=values,
                    )
                    for values in golden.case_dims(imported)
                ),
            ),
        )
    # The references hold the source model (PyTorch's program is as large as its weights);
    # the golden data were all they were for.
    imported = dataclasses.replace(imported, references=())
    gc.collect()
    from relay2cmake.lower.rewrites.conv2d_nhwc import has_uint8_convolutions

    if has_uint8_convolutions(imported.module):  # twins with integer dot products (twin_variants)
        targets = tuple(dataclasses.replace(t, int8_dot=True) for t in targets)
    build = _Builder(options, imported, reference, name, version, prefix, targets, tuning, timed)
    try:
        package = _build_checked(build, options)
    finally:
        # Interrupted (Ctrl-C, SIGTERM via the CLI) or failed: no hidden half-package stays.
        for staging in build.staged:
            discard_staging(staging)
    warnings = (
        tuple(f"fallback: {line}" for line in package.fallbacks)
        + tuple(f"golden reference: {note}" for note in reference.notes)
        + ((f"the package was not checked: {package.check.skipped}.",) if package.check.skipped else ())
        + ((f"not checked: {package.check.not_run}.",) if package.check.not_run else ())
        + (
            (f"the package FAILS its golden test ({'; '.join(package.check.failures)[:600]}); written "
             "because of --allow-unverified.",)
            if package.check.failures
            else ()
        )
        + (
            (f"the tuning database is for {untuned_target}, which this package does not build; not used.",)
            if untuned_target
            else ()
        )
    )  # fmt: skip
    return GenerateReport(
        identity=package.identity,
        plan=package.plan,
        files=len(package.files),
        seconds=seconds,
        warnings=warnings,
    )


def _build_checked(build: _Builder, options: GenerateOptions) -> _Package:
    """The optimised package if it passes its golden test, else the plain path's; committed
    to ``options.out``."""
    if not options.optimise:
        return _commit(build, options, build.attempt(optimise=False))
    try:
        package = build.attempt(optimise=True)
    except _PlanFailed as exc:
        # The optimised lowering left something the driver cannot run: the plain path.
        package = build.attempt(optimise=False, label=" (plain path)")
        package.fallbacks = (
            f"whole model: the optimised lowering could not be planned ({exc}); built without optimisations",
            *package.fallbacks,
        )
        return _commit(build, options, package)
    if not package.check.passed:
        # Whole-model fallback: the plain path (no optional rewrite, no schedule).
        failed = package
        package = build.attempt(optimise=False, label=" (plain path)")
        if package.check.passed:
            package.fallbacks = (
                "whole model: the optimised package failed its golden test "
                f"({'; '.join(failed.check.failures)[:400]}); built without optimisations",
                *package.fallbacks,
            )
    return _commit(build, options, package)


def _commit(build: _Builder, options: GenerateOptions, package: _Package) -> _Package:
    """Write ``package`` (always built on the plain path when its check failed)."""
    if not package.check.passed and not options.allow_unverified:
        where = build.timed(
            "locate",
            "Locating the first operator whose result diverges",
            lambda: _first_diverging_operator(build, options),
        )
        raise ModelError(
            "The generated package does not reproduce the reference outputs, with or without "
            f"optimisations: {'; '.join(package.check.failures)[:1200]}.{where} This is a bug in relay2cmake "
            "or TVM; please report it. --allow-unverified writes the package anyway."
        )
    build.finish(package)
    build.timed(
        "write", f"Writing {options.out}", lambda: commit_package(package.staging, options.out, options.force)
    )
    return package


def _first_diverging_operator(build: _Builder, options: GenerateOptions) -> str:
    """`` The first operator whose result diverges: ...`` for an ONNX model (bisection over
    cut models, each generated on the plain path and checked), else nothing."""
    import json
    import tempfile

    import onnx

    from relay2cmake.commands import divergence

    if not options.locate_divergence or options.model.suffix.lower() != ".onnx" or not options.self_check:
        return ""
    try:
        model = onnx.load(str(options.model))
        candidates = divergence.cuts(model)
    except Exception:  # too large to cut in memory, shapes unknown: say nothing rather than guess
        return ""
    with tempfile.TemporaryDirectory(prefix="relay2cmake-locate-") as scratch:

        def probe(cut: divergence.Cut) -> bool | None:
            work = Path(scratch) / f"cut{cut.index}"
            work.mkdir()
            cut_options = dataclasses.replace(
                options,
                model=divergence.cut_model(model, cut, work / f"{options.model.stem}.onnx"),
                out=work / "pkg",
                name=build.name,
                force=False,
                optimise=False,
                allow_unverified=True,
                locate_divergence=False,
            )
            try:
                generate(cut_options)
            except Exception:
                return None
            check = json.loads((work / "pkg" / "metadata.json").read_text())["self_check"]
            return check.startswith("FAILED")

        found = divergence.first_diverging(candidates, probe)
    if found is None:
        return ""
    label = naming.terminal_text(found.label)
    return f" The first operator whose result diverges (bisection over the graph): {label}."


class _PlanFailed(Exception):
    """The optimised lowering cannot be planned (e.g. an operator a rewrite left unlowered)."""


@dataclass
class _Package:
    identity: PackageIdentity
    lowered: LoweredModel
    plan: PackagePlan
    files: dict
    staging: Path
    check: self_check.CheckResult
    fallbacks: tuple[str, ...]


@dataclass
class _Builder:
    """Lower → plan → render → stage → check, for one choice of optimisations."""

    options: GenerateOptions
    imported: ImportedModel
    reference: golden.GoldenData
    name: str
    version: str
    prefix: str
    targets: tuple[KernelTarget, ...]
    tuning: tuning_db.TuningDatabase | None
    timed: Callable
    staged: list[Path] = field(default_factory=list)  # staging folders made so far

    def attempt(self, optimise: bool, label: str = "") -> _Package:
        from relay2cmake.commands import self_check
        from relay2cmake.emit.context import PackageIdentity
        from relay2cmake.emit.package import stage_package
        from relay2cmake.lower.pipeline import lower, needs_aligned_inputs
        from relay2cmake.plan import build_plan

        options, targets, timed = self.options, self.targets, self.timed
        lowered = timed(
            "lower",
            f"Lowering with TVM (kernels: {', '.join(t.label for t in targets)}){label}",
            lambda: lower(
                self.imported.module, self.prefix, targets, self.tuning, options.winograd, optimise
            ),
        )
        try:
            plan = timed(
                "plan",
                "Planning memory",
                lambda: build_plan(
                    self.imported, lowered, needs_aligned_inputs(targets), options.out.resolve().parent
                ),
            )
        except ModelError as exc:
            if optimise:
                raise _PlanFailed(str(exc)[:300]) from None
            raise
        identity = PackageIdentity(
            name=self.name,
            prefix=self.prefix,
            version=self.version,
            model_file=options.model.name,
            model_sha256=self.imported.source_sha256,
            # A model without kernels carries no objects: only what was built is listed.
            targets=tuple(t.label for t in targets if not t.is_object or t.arch in lowered.code.objects)
            + tuple(twin.label for o in lowered.code.objects.values() for twin in o.twins),
        )
        fallbacks = fallback_lines(lowered, targets)
        files = timed("render", "Rendering the package", lambda: self._render(identity, plan, fallbacks))
        staging = timed(
            "stage", "Staging the package's files", lambda: stage_package(options.out, files, options.force)
        )
        self.staged.append(staging)
        check = self_check.CheckResult((), (), skipped="--no-self-check")
        if options.self_check:
            arches = tuple(lowered.code.objects)
            twins = tuple(twin.label for twin in lowered.code.twins(self_check.HOST_ARCH or ""))
            host_objects = next(
                (t for t in targets if t.arch == self_check.HOST_ARCH and t.arch in arches), None
            )
            external = plan.weight_bytes >= EXTERNAL_WEIGHTS_FROM
            check = timed(
                "check",
                "Checking the package: building it and running its golden test",
                lambda: self_check.check_package(staging, self.prefix, arches, twins, external, host_objects),
            )
        return _Package(identity, lowered, plan, files, staging, check, fallbacks)

    def _render(self, identity, plan, fallbacks, check: str = "pending"):
        from relay2cmake.emit.package import render_package

        return render_package(identity, plan, self.reference, self.imported.operators, fallbacks, check)

    def finish(self, package: _Package) -> None:
        """Rewrite the two files that report the check, now that its result is known."""
        check = package.check
        if check.skipped:
            summary = f"not run ({check.skipped})"
        elif check.failures:
            summary = f"FAILED, written with --allow-unverified: {'; '.join(check.failures)}"
        else:
            summary = f"passed ({', '.join(check.checked)})" + (
                f"; not run: {check.not_run}" if check.not_run else ""
            )
        files = self._render(package.identity, package.plan, package.fallbacks, summary)
        for relative in ("metadata.json", "README.md"):
            (package.staging / relative).write_bytes(files[relative])
        from relay2cmake.emit.package import golden_samples

        # Large expected outputs were whole for the check; the package keeps samples of them.
        for relative, data in golden_samples(self.reference).items():
            (package.staging / relative).write_bytes(data)


# From this many bytes of weights the check reads them from the weights file instead of
# compiling them (<P>_EXTERNAL_WEIGHTS): compiling 100 MB of weights takes longer than the rest.
EXTERNAL_WEIGHTS_FROM = 1 << 20


def fallback_lines(lowered: LoweredModel, targets: tuple[KernelTarget, ...]) -> tuple[str, ...]:
    """One line per optimisation declined: Relax rewrites, then kernel by kernel per set."""
    labels = {t.arch: t.label for t in targets if t.is_object}
    lines = list(lowered.fallbacks)
    for label, reason in sorted(lowered.code.skipped.items()):
        lines.append(f"{label}: no objects ({reason[:300]}); the portable C kernels serve it")
    for arch, object_set in sorted(lowered.code.objects.items()):
        sets = [(labels.get(arch, arch), object_set)] + [(t.label, t) for t in object_set.twins]
        for label, one in sets:
            if one.unscheduled:
                lines.append(
                    f"{label}: {', '.join(one.unscheduled)} built without a schedule "
                    "(LLVM could not build the scheduled version)"
                )
            if one.in_c:
                lines.append(f"{label}: {', '.join(one.in_c)} compiled from C (LLVM could not build it)")
    return tuple(lines)
