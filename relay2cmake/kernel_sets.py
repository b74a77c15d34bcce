"""The kernel code a package carries, as plain data (no TVM object): the portable C kernels,
made self-contained, and one object set per architecture. Lowering makes it, the plan carries
it, emit writes it; the kernels' symbol names are defined here for all three."""

from __future__ import annotations

from dataclasses import dataclass, field


def kernel_symbol(prefix: str, name: str) -> str:
    """The C symbol TVM emits for a PrimFunc whose global_symbol is ``<prefix>_<name>``."""
    return f"__tvm_ffi_{prefix}_{name}"


def wide_kernel_symbol(prefix: str, name: str) -> str:
    """The same kernel in an object set's twin (AVX-512 on x86-64, the dot product on AArch64)."""
    return kernel_symbol(f"{prefix}_wide", name)


@dataclass(frozen=True)
class ObjectSet:
    code: bytes  # a relocatable ELF object with every kernel
    scheduled: tuple[str, ...]  # kernels a default schedule applied to (the rest: TVM's lowering)
    serial: tuple[str, ...] = ()  # kernels kept without parallel loops (they would allocate in them)
    tuned: tuple[str, ...] = ()  # kernels scheduled by a tuning record (gen --tuning-db)
    wide: ObjectSet | None = None  # the twin (KernelTarget.wide_variant), symbols <prefix>_wide_*
    kernels: tuple[str, ...] = ()  # every kernel the object defines
    # Kernels LLVM could not build with their schedule for this set: built unscheduled.
    unscheduled: tuple[str, ...] = ()
    # Kernels LLVM could not build at all for this set: compiled from C beside the object
    # (``c_source``, TVM's C for just those kernels, same symbols).
    in_c: tuple[str, ...] = ()
    c_source: str = ""  # self-contained (kernel_source.adapt), without the file banner


@dataclass(frozen=True)
class KernelCode:
    c_source: str  # the portable C kernels, self-contained (kernel_source.adapt), without the banner
    objects: dict[str, ObjectSet] = field(default_factory=dict)  # architecture → its kernel object
    skipped: dict[str, str] = field(default_factory=dict)  # target label → why it has no objects
    tvm_version: str = ""  # the TVM that generated them

    def wide_kernels(self, arch: str) -> frozenset[str]:
        """Kernels the twin of ``arch``'s object set defines."""
        twin = self.objects[arch].wide if arch in self.objects else None
        return frozenset(twin.kernels) if twin is not None else frozenset()
