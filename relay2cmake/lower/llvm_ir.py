"""Facts about, and adaptations of, the LLVM IR TVM emits for object targets.

TVM's LLVM code reaches the backend (workspace, parallel launch) through weak, null
function pointers (``@__TVMBackendAllocWorkspace`` ...) that TVM's module loader fills in.
A package defines them itself, so they are renamed per package (two packages in one
program would otherwise define the same symbols), as is the weak ``__tvm_ffi_main`` alias.
"""

from __future__ import annotations

import re

from relay2cmake.arena import align_up
from relay2cmake.errors import ModelError

_BACKEND = re.compile(r"@(__TVMBackend\w+|__tvm_ffi_main)\b")
_DEFINE = re.compile(r"^define\b[^@]*@([\w.$]+)\(", re.M)
_ALLOC_POINTER = re.compile(r"(%[\w.]+) = load ptr, ptr @\w*__TVMBackendAllocWorkspace\b")


def prefix_backend_symbols(ir_text: str, prefix: str) -> str:
    """Rename the backend pointers, and hide every symbol: a shared library exports only
    its C API (the C kernels get the same from -fvisibility=hidden)."""
    text = _BACKEND.sub(lambda m: f"@{prefix}{m.group(1)}", ir_text)
    text = re.sub(r"^(define |@[\w.$]+ = [\w ]*?)dllexport\b", r"\1hidden", text, flags=re.M)
    return re.sub(r"^define weak dso_local ", "define weak hidden ", text, flags=re.M)


def scratch_bytes(ir_text: str, prefix: str, sized_elsewhere: frozenset[str] = frozenset()) -> dict[str, int]:
    """Workspace bytes each kernel (``__tvm_ffi_<prefix>_<name>``) may hold at once.

    Every allocation is a call through the loaded ``AllocWorkspace`` pointer with a constant
    size (``i64 N``); the sum per function bounds what it holds (they are freed LIFO).
    Helper functions (``<name>_compute_``, parallel lambdas) count toward their kernel.
    Requests of a size known only at run time are refused unless their kernel is in
    ``sized_elsewhere`` (kernels with run-time dimensions, bounded from their TIR).
    """
    result: dict[str, int] = {}
    starts = [(m.start(), m.group(1)) for m in _DEFINE.finditer(ir_text)]
    for index, (start, function) in enumerate(starts):
        end = starts[index + 1][0] if index + 1 < len(starts) else len(ir_text)
        body = ir_text[start:end]
        total = 0
        for pointer in _ALLOC_POINTER.findall(body):
            for call in re.finditer(rf"call ptr {re.escape(pointer)}\(([^)]*)\)", body):
                size = re.search(r"i64 (\d+)", call.group(1))
                if size is None and _owner(function, prefix) in sized_elsewhere:
                    continue
                if size is None:
                    raise ModelError(
                        "A kernel asks for scratch memory of a size known only at run time; "
                        "relay2cmake needs static sizes to plan the arena."
                    )
                total += align_up(int(size.group(1)))
        if total:
            owner = _owner(function, prefix)
            result[owner] = result.get(owner, 0) + total
    return result


class ParallelScratch(Exception):
    """A parallel loop body allocates scratch: the arena's scratch is one LIFO stack per
    context, which concurrent tasks cannot share."""


def _owner(function: str, prefix: str) -> str:
    """The kernel symbol a function of the object belongs to."""
    if function.startswith("__tvm_parallel_lambda"):
        raise ParallelScratch(function)
    name = function.removeprefix("__tvm_ffi_")
    name = re.sub(r"_compute_(\.\w+)?$", "", name)
    if not name.startswith(f"{prefix}_"):
        raise ModelError(f"TVM's LLVM output allocates scratch in {function}, which belongs to no kernel.")
    return f"__tvm_ffi_{name}"
