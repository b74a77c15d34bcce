"""``gen`` checks its own work: build the staged package and run its golden test.

Each kernel set this machine can run is built the way a user would (CMake, the package's
own golden test) and must reproduce the recorded reference outputs: the host's object set
(and, on AVX-512 CPUs, also the x86-64-v3 set beneath the AVX-512 twin) and the portable C
kernels. Weights are read from the package's weights file (``<P>_EXTERNAL_WEIGHTS``) so
that the check does not compile them. A machine without a C compiler skips the check,
and says so.
"""

from __future__ import annotations

import platform
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from relay2cmake.commands import cmake_runner
from relay2cmake.errors import BuildError
from relay2cmake.targets import KernelTarget, host_runs

HOST_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}.get(
    platform.machine().lower()
)


@dataclass(frozen=True)
class Variant:
    label: str  # what the user reads: "x86_64 objects", "portable C kernels"
    definitions: tuple[str, ...]  # CMake -D flags besides the common ones


@dataclass(frozen=True)
class CheckResult:
    checked: tuple[str, ...]  # variants that built and passed
    failures: tuple[str, ...]  # one line per failing variant: which outputs, by how much
    skipped: str | None = None  # why nothing could be checked
    not_run: str | None = None  # an object set this CPU cannot run, so it was not checked

    @property
    def passed(self) -> bool:
        return not self.failures


def variants(
    prefix: str, object_arches: tuple[str, ...], twins: tuple[str, ...] = (), host_runs_objects: bool = True
) -> list[Variant]:
    """The kernel sets this machine runs: the host's objects (the first of its ``twins``
    (labels) the CPU has, each further one it has alone, and none) unless their base set needs
    instructions this CPU lacks (``host_runs_objects``), and the C kernels."""
    upper = prefix.upper()
    found = []
    if HOST_ARCH in object_arches and host_runs_objects:
        found.append(Variant(f"{HOST_ARCH} objects", ()))
        runs = [label for label in twins if host_runs(KernelTarget.from_label(label))]
        for label in runs[1:]:  # the first build runs runs[0]
            found.append(Variant(f"{HOST_ARCH} objects, twin {label}", (f"-D{upper}_TWINS={label}",)))
        if runs:  # elsewhere the first build already runs the base set
            found.append(
                Variant(f"{HOST_ARCH} objects without the twin sets", (f"-D{upper}_WIDE_KERNELS=OFF",))
            )
    found.append(Variant("portable C kernels", (f"-D{upper}_PORTABLE_KERNELS=ON",)))
    return found


def _failed_outputs(log: str) -> str:
    """The golden test's FAIL lines (``output 0 'y': max_abs_error=... FAIL``), else its tail."""
    lines = [line.strip() for line in log.splitlines() if re.match(r"\s*output \d+ '.*FAIL\s*$", line)]
    if lines:
        return "; ".join(lines)
    tail = [line.strip() for line in log.strip().splitlines() if line.strip()][-6:]
    return " | ".join(tail)


def check_package(
    package: Path,
    prefix: str,
    object_arches: tuple[str, ...],
    twins: tuple[str, ...],
    external_weights: bool,
    host_objects: KernelTarget | None = None,
) -> CheckResult:
    """``host_objects``: the base object set for this machine's architecture, when the package
    has one: a set built for a newer CPU (``--target x86_64:x86-64-v3+avxvnni`` on a CPU
    without AVX-VNNI) cannot run here, and is left out of the check, which says so."""
    upper = prefix.upper()
    runnable = host_objects is None or host_runs(host_objects)
    not_run = None
    if host_objects is not None and not runnable:
        not_run = f"{host_objects.label} objects (this CPU lacks their instructions)"
    common = (
        f"-D{upper}_BUILD_TESTS=ON",
        f"-D{upper}_BUILD_TOOLS=OFF",
        f"-D{upper}_INSTALL=OFF",
        f"-D{upper}_EXTERNAL_WEIGHTS={'ON' if external_weights else 'OFF'}",
    )
    checked, failures = [], []
    scratch = tempfile.mkdtemp(prefix="relay2cmake-check-")
    try:
        for index, variant in enumerate(variants(prefix, object_arches, twins, runnable)):
            build_dir = Path(scratch) / f"b{index}"
            try:
                cmake_runner.configure(package, build_dir, *common, *variant.definitions)
            except BuildError as exc:
                if index == 0 and _no_compiler(str(exc)):
                    return CheckResult((), (), skipped="no working C compiler was found for CMake")
                failures.append(f"{variant.label}: CMake could not configure the package: {_tail(exc)}")
                continue
            try:
                cmake_runner.build(build_dir, target=f"{prefix}_golden")
            except BuildError as exc:
                failures.append(f"{variant.label}: the package does not compile: {_tail(exc)}")
                continue
            try:
                cmake_runner.test(build_dir)
            except BuildError as exc:
                failures.append(f"{variant.label}: {_failed_outputs(str(exc))}")
                continue
            checked.append(variant.label)
    finally:  # also when interrupted: CMake's killed children may still be writing
        cmake_runner.remove_build_tree(Path(scratch))
    return CheckResult(tuple(checked), tuple(failures), not_run=not_run)


def _no_compiler(log: str) -> bool:
    return (
        "No CMAKE_C_COMPILER could be found" in log or "is not able to compile a simple test program" in log
    )


def _tail(exc: BuildError) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower()]
    return " | ".join((errors or lines)[-3:])[:600]
