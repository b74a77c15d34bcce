"""``--target`` values: which kernel sets a package carries, and how TVM builds each.

Every package carries portable C kernels (``c``); each further target adds one LLVM object
set for an architecture at one CPU level, e.g. ``x86_64`` (x86-64-v3: AVX2 and FMA, any
x86-64 CPU since 2015), ``x86_64:znver4``, ``aarch64`` (ARMv8-A with NEON),
``aarch64:cortex-a76``, ``x86_64:native`` (the generating machine's CPU). The generated
CMake links the set matching ``CMAKE_SYSTEM_PROCESSOR`` and compiles the C kernels
everywhere else. Default sets also carry twin sets (``KernelTarget.twin_variants``), the
first one the CPU has picked when a context is made: ``x86_64`` an x86-64-v4 (AVX-512) twin
and, for a quantized model, an AVX-VNNI one; ``aarch64``, for a quantized model, a
dot-product one.
"""

from __future__ import annotations

import dataclasses
import platform
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from relay2cmake.errors import UserError

if TYPE_CHECKING:
    from tvm.target import Target

# Architecture → (LLVM triple, default CPU, CMAKE_SYSTEM_PROCESSOR spellings).
ARCHITECTURES = {
    "x86_64": ("x86_64-linux-gnu", "x86-64-v3", ("x86_64", "AMD64", "amd64")),
    "aarch64": ("aarch64-linux-gnu", "generic", ("aarch64", "arm64", "ARM64")),
}
WIDE_X86_CPU = "x86-64-v4"  # AVX-512 F/BW/CD/DQ/VL
# x86 CPU levels with 512-bit vectors (16 float32 lanes); others get 256-bit AVX2 tiles.
_AVX512_CPUS = {
    "x86-64-v4", "znver4", "znver5", "skylake-avx512", "cascadelake", "cooperlake",
    "icelake-server", "icelake-client", "tigerlake", "sapphirerapids", "emeraldrapids",
    "graniterapids",
}  # fmt: skip
# x86 CPU levels with AVX-512 VNNI (``vpdpbusd``: uint8 x int8 products, four summed per lane).
_VNNI_CPUS = {
    "znver4", "znver5", "cascadelake", "cooperlake", "icelake-server", "icelake-client", "tigerlake",
    "sapphirerapids", "emeraldrapids", "graniterapids",
}  # fmt: skip
INT8_DOT_FEATURE = "avx512vnni"
# x86 CPU levels with AVX-VNNI (the VEX-encoded 256-bit ``vpdpbusd``) but without AVX-512.
_AVX_VNNI_CPUS = {
    "alderlake", "raptorlake", "meteorlake", "arrowlake", "arrowlake-s", "lunarlake", "gracemont",
    "sierraforest", "grandridge", "clearwaterforest", "pantherlake",
}  # fmt: skip
# AArch64 CPU levels (LLVM names) with ARMv8.6's int8 matrix multiply (``usdot``: uint8 x
# int8 dot products), and further ones with ARMv8.2's dot product only (``sdot``, ``udot``).
_I8MM_CPUS = {
    "cortex-a510", "cortex-a520", "cortex-a710", "cortex-a715", "cortex-a720", "cortex-x2", "cortex-x3",
    "cortex-x4", "neoverse-n2", "neoverse-v1", "neoverse-v2", "apple-m2", "apple-m3", "apple-m4",
}  # fmt: skip
_DOTPROD_CPUS = _I8MM_CPUS | {
    "cortex-a55", "cortex-a65", "cortex-a75", "cortex-a76", "cortex-a76ae", "cortex-a77", "cortex-a78",
    "cortex-a78c", "cortex-x1", "neoverse-n1", "neoverse-e1", "apple-m1",
}  # fmt: skip


@dataclass(frozen=True)
class KernelTarget:
    arch: str  # "c" or a key of ARCHITECTURES
    # An LLVM CPU name, optionally with LLVM features after it: "x86-64-v4+avx512vnni".
    cpu: str = ""
    # The model has uint8 x int8 convolutions: the default x86 set's AVX-512 twin then needs
    # VNNI too (``twin_variants``). Not part of the label: the twin's label says it.
    int8_dot: bool = field(default=False, compare=False)

    @classmethod
    def from_label(cls, label: str) -> KernelTarget:
        """The inverse of ``label`` ("c", "x86_64:x86-64-v3")."""
        arch, _, cpu = label.partition(":")
        return cls(arch, cpu)

    @property
    def label(self) -> str:
        return self.arch if not self.cpu else f"{self.arch}:{self.cpu}"

    @property
    def is_object(self) -> bool:
        return self.arch != "c"

    @property
    def processors(self) -> tuple[str, ...]:
        return ARCHITECTURES[self.arch][2]

    @property
    def base_cpu(self) -> str:
        return self.cpu.split("+")[0]

    @property
    def cpu_features(self) -> tuple[str, ...]:
        """LLVM features named after the CPU ("x86-64-v4+avx512vnni": avx512vnni)."""
        return tuple(self.cpu.split("+")[1:])

    @property
    def vector_lanes(self) -> int:
        """float32 lanes of one vector register, which sizes the schedules' tiles."""
        if self.arch == "aarch64":
            return 4
        if self.arch == "x86_64":
            return 16 if self.base_cpu in _AVX512_CPUS else 8
        return 1

    @property
    def int8_dot_instruction(self) -> str:
        """The integer dot product its uint8 x int8 convolutions use (lower/int8_dot.py):
        AVX-512 VNNI where the CPU level has it, AVX-VNNI's 256-bit form where it has that
        (``x86-64-v3+avxvnni``, ``alderlake``), else AVX2's ``vpmaddwd`` (every x86 set);
        AArch64's ``usdot`` (i8mm) or ``sdot`` (dotprod) where the CPU level or a ``+feature``
        has it; "" (int32 vectors) for ARMv8.0 and the C set."""
        features, cpu = self.cpu_features, self.base_cpu
        if self.arch == "x86_64":
            vnni = INT8_DOT_FEATURE in features or cpu in _VNNI_CPUS
            if vnni and self.vector_lanes == 16:
                return "vnni"
            return "vnni256" if "avxvnni" in features or cpu in _AVX_VNNI_CPUS else "pmaddwd"
        if self.arch == "aarch64":
            if "i8mm" in features or cpu in _I8MM_CPUS:
                return "usdot"
            if "dotprod" in features or cpu in _DOTPROD_CPUS:
                return "sdot"
        return ""

    @property
    def x86_features(self) -> tuple[str, ...]:
        """What ``__builtin_cpu_supports`` must report before the objects may run (x86)."""
        if self.arch != "x86_64":
            return ()
        wide = ("avx512f", "avx512bw", "avx512dq", "avx512vl") if self.vector_lanes == 16 else ()
        # the dot product a named CPU level implies (``alderlake``: AVX-VNNI), used or not
        implied = {"vnni": INT8_DOT_FEATURE, "vnni256": "avxvnni"}.get(self.int8_dot_instruction)
        named = (implied,) if implied and implied not in self.cpu_features else ()
        return ("avx2", "fma", *wide, *self.cpu_features, *named)

    @property
    def aarch64_hwcaps(self) -> tuple[tuple[str, int], ...]:
        """(auxiliary vector entry, bit) that Linux sets where the CPU has the integer dot
        product this AArch64 set uses: ``sdot`` HWCAP_ASIMDDP, ``usdot`` HWCAP2_I8MM."""
        if self.arch != "aarch64":
            return ()
        return {"sdot": (("AT_HWCAP", 20),), "usdot": (("AT_HWCAP2", 13),)}.get(self.int8_dot_instruction, ())

    def twin_variants(self) -> tuple[KernelTarget, ...]:
        """The twin sets that ship beside an architecture's default set, each chosen at run
        time, the first the CPU has, on CPUs that have more. x86-64: AVX-512 (10-15% faster
        kernels, measured on Zen 4), with VNNI as well when the model has uint8 x int8
        convolutions (4x float32's speed); for such a model also AVX-VNNI (x86-64-v3 with the
        256-bit ``vpdpbusd``: Intel's client CPUs since Alder Lake, which lack AVX-512; 2.6x
        the ``vpmaddwd`` kernels on ResNet-18). AArch64, for such a model: ARMv8.2's dot
        product (``sdot``; Cortex-A55/A76 and later, where ARMv8.0 widens to int32).
        Explicit CPU levels (``x86_64:znver4``, ``aarch64:cortex-a76``) carry one set only."""
        default = ARCHITECTURES.get(self.arch, ("", "", ()))[1]
        if self.cpu != default:
            return ()
        if self.arch == "x86_64":
            wide = KernelTarget("x86_64", WIDE_X86_CPU + (f"+{INT8_DOT_FEATURE}" if self.int8_dot else ""))
            return (wide, KernelTarget("x86_64", f"{default}+avxvnni")) if self.int8_dot else (wide,)
        if self.arch == "aarch64" and self.int8_dot:
            return (KernelTarget("aarch64", f"{default}+dotprod"),)
        return ()

    def wide_variant(self) -> KernelTarget | None:
        """The first twin set (``twin_variants``): AVX-512 for the default x86-64 set."""
        return next(iter(self.twin_variants()), None)

    @property
    def twin_name(self) -> str:
        """What this set adds as a twin of its architecture's default set, for people."""
        if self.arch == "aarch64":
            return "the dot product"
        return "AVX-512" if self.vector_lanes == 16 else "AVX-VNNI"

    def cpu_check(self, prefix: str) -> str:
        """A C condition: the CPU running the program has what this set needs (x86: GCC's and
        Clang's ``__builtin_cpu_supports``, AVX-VNNI through CPUID, ``<prefix>_x86_has_avx_vnni``
        in the package's internal header, since Clang 14 does not name it; AArch64: Linux's
        auxiliary vector); "1" when nothing is needed."""
        x86 = [
            f"{prefix}_x86_has_avx_vnni()" if feature == "avxvnni" else f'__builtin_cpu_supports("{feature}")'
            for feature in self.x86_features
        ]
        aarch64 = [f"(getauxval({entry}) & (1UL << {bit})) != 0" for entry, bit in self.aarch64_hwcaps]
        return " && ".join(x86 + aarch64) or "1"

    @property
    def cpu_check_available(self) -> str:
        """A preprocessor condition under which ``cpu_check`` compiles."""
        if self.arch == "aarch64":
            return "defined(__aarch64__) && defined(__linux__)"
        return "defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))"

    def tvm_target(self, cores: int | None = None) -> Target:
        """TVM's target; ``cores`` (physical cores) is what MetaSchedule needs to know."""
        import tvm

        if not self.is_object:
            return tvm.target.Target("c")
        triple, _, _ = ARCHITECTURES[self.arch]
        spec: dict[str, object] = {"kind": "llvm", "mtriple": triple, "mcpu": self.base_cpu}
        if cores is not None:
            spec["num-cores"] = cores
        attributes = [f"+{feature}" for feature in self.cpu_features]
        if self.arch == "aarch64":
            attributes.append("+neon")
        if attributes:
            spec["mattr"] = attributes
        return tvm.target.Target(spec)


def host_target() -> KernelTarget | None:
    machine = platform.machine()
    for arch, (_, cpu, spellings) in ARCHITECTURES.items():
        if machine in spellings:
            return KernelTarget(arch, cpu)
    return None


def host_runs(target: KernelTarget) -> bool:
    """Whether this machine's CPU has what ``target``'s objects need (Linux's /proc/cpuinfo)."""
    try:
        flags = set(open("/proc/cpuinfo").read().split())
    except OSError:
        return False
    if target.arch == "aarch64":
        spelled = {"sdot": "asimddp", "usdot": "i8mm"}.get(target.int8_dot_instruction)
        return platform.machine() in ARCHITECTURES["aarch64"][2] and (spelled is None or spelled in flags)
    spelling = {"avx512vnni": "avx512_vnni", "avxvnni": "avx_vnni"}  # the kernel's names for them
    return target.arch == "x86_64" and all(spelling.get(f, f) in flags for f in target.x86_features)


def host_runs_wide() -> bool:
    """Whether this machine's CPU runs its architecture's first twin set: AVX-512 (a float
    model's) on x86-64, the dot product on AArch64."""
    host = host_target()
    if host is None:
        return False
    twin = dataclasses.replace(host, int8_dot=host.arch == "aarch64").wide_variant()
    return twin is not None and host_runs(twin)


def parse_targets(specs: list[str] | None) -> tuple[KernelTarget, ...]:
    """``c`` first, then object sets in the order given; no ``--target`` means ``c`` plus
    the host architecture at its default CPU level."""
    if not specs:
        host = host_target()
        return (KernelTarget("c"),) + ((host,) if host else ())
    result = [KernelTarget("c")]
    for spec in specs:
        arch, _, cpu = spec.partition(":")
        if arch == "c" and not cpu:
            continue
        if arch not in ARCHITECTURES:
            raise UserError(
                f"--target {spec!r}: unknown architecture {arch!r}; use c, "
                + ", ".join(f"{a} or {a}:CPU" for a in ARCHITECTURES)
                + "."
            )
        if any(t.arch == arch for t in result):
            raise UserError(f"--target names {arch} twice; a package carries one CPU level per architecture.")
        if cpu == "native":  # this machine's CPU, by LLVM's name for it (not portable)
            import tvm

            host = host_target()
            if host is None or host.arch != arch:
                raise UserError(f"--target {spec!r}: 'native' needs a {arch} host.")
            cpu = tvm.target.codegen.llvm_get_system_cpu()
        target = KernelTarget(arch, cpu or ARCHITECTURES[arch][1])
        _check_cpu(target, spec)
        result.append(target)
    return tuple(result)


def _check_cpu(target: KernelTarget, spec: str) -> None:
    try:
        target.tvm_target()
    except Exception as exc:
        raise UserError(f"--target {spec!r}: TVM rejects it ({' '.join(str(exc).split())[:200]}).") from None
