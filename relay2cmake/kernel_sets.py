"""The kernel code a package carries, as plain data (no TVM object): the portable C kernels,
made self-contained, and one object set per architecture. Lowering makes it, the plan carries
it, emit writes it; the kernels' symbol names are defined here for all three."""

from __future__ import annotations

from dataclasses import dataclass, field


def kernel_symbol(prefix: str, name: str) -> str:
    """The C symbol TVM emits for a PrimFunc whose global_symbol is ``<prefix>_<name>``."""
    return f"__tvm_ffi_{prefix}_{name}"


def twin_tag(index: int) -> str:
    """Names an object set's ``index``-th twin in symbols and files: wide, wide2, ..."""
    return "wide" if index == 0 else f"wide{index + 1}"


def wide_kernel_symbol(prefix: str, name: str, tag: str = "wide") -> str:
    """The same kernel in an object set's twin ``tag`` (``twin_tag``)."""
    return kernel_symbol(f"{prefix}_{tag}", name)


@dataclass(frozen=True)
class ObjectSet:
    code: bytes  # a relocatable ELF object with every kernel
    scheduled: tuple[str, ...]  # kernels a default schedule applied to (the rest: TVM's lowering)
    serial: tuple[str, ...] = ()  # kernels kept without parallel loops (they would allocate in them)
    tuned: tuple[str, ...] = ()  # kernels scheduled by a tuning record (gen --tuning-db)
    # Twins (KernelTarget.twin_variants), in the order a context tries them; symbols
    # <prefix>_<tag>_*, object objects/<arch>/<prefix>_kernels_<tag>.o
    twins: tuple[ObjectSet, ...] = ()
    label: str = ""  # a twin's target label ("x86_64:x86-64-v4+avx512vnni")
    tag: str = ""  # a twin's twin_tag
    kernels: tuple[str, ...] = ()  # every kernel the object defines
    # Kernels LLVM could not build with their schedule for this set: built unscheduled.
    unscheduled: tuple[str, ...] = ()
    # Kernels LLVM could not build at all for this set: compiled from C beside the object
    # (``c_source``, TVM's C for just those kernels, same symbols).
    in_c: tuple[str, ...] = ()
    c_source: str = ""  # self-contained (c_source.adapt), without the file banner


@dataclass(frozen=True)
class KernelCode:
    c_source: str  # the portable C kernels, self-contained (c_source.adapt), without the banner
    objects: dict[str, ObjectSet] = field(default_factory=dict)  # architecture → its kernel object
    skipped: dict[str, str] = field(default_factory=dict)  # target label → why it has no objects
    tvm_version: str = ""  # the TVM that generated them

    def twins(self, arch: str) -> tuple[ObjectSet, ...]:
        """The twins of ``arch``'s object set."""
        return self.objects[arch].twins if arch in self.objects else ()
