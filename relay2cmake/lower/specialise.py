"""Kernels with run-time dimensions: which they are, the dimensions' bounds, and the scratch
they may hold.

A kernel lowered with symbolic extents (``--input-shape x=1..8,...``) takes its dimensions
from the tensors it is given. Its scratch requests then have sizes known only at run time;
the arena reserves what its intermediates take at the largest dimensions
(``intermediate_scratch``), and the driver's allocator refuses anything beyond that room (the
kernel returns an error, never writes past it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relay2cmake.relax_shapes import declared_bounds
from relay2cmake.symbolic import value_at

if TYPE_CHECKING:
    from tvm.ir import IRModule


def dim_bounds(main: Any) -> dict[str, int]:
    """The run-time dimensions' upper bounds that the frontend attached to ``main``."""
    return declared_bounds(main)[1]


def is_symbolic(func: Any) -> bool:
    """Whether a PrimFunc's tensors have extents that are not numbers."""
    import tvm

    return any(
        not isinstance(dim, tvm.tirx.IntImm)
        for param in func.params
        if hasattr(param, "shape")
        for dim in param.shape
    )


def intermediate_scratch(prims: IRModule, values: dict[str, int]) -> dict[str, int]:
    """Per symbolic kernel (by C symbol), the bytes of its intermediate tensors at ``values``
    (``prims`` scheduled or not), in every block. At fixed sizes TVM keeps small
    intermediates on the stack; with sizes known only at run time it asks the workspace for
    every one of them (a schedule's packing and partial-sum buffers too): their sum bounds
    what such a kernel holds at once, which the arena then reserves."""
    import tvm
    import tvm_ffi

    from relay2cmake.arena import align_up

    result = {}
    for func in prims.functions.values():
        if not is_symbolic(func):
            continue
        buffers: list = []

        def note(block, found=buffers):
            found.extend(block.alloc_buffers)
            return block

        tvm_ffi.structural_map(func.body, [(tvm.s_tir.SBlock, note)])
        total = 0
        for buffer in buffers:
            elements = 1
            for dim in buffer.shape:
                elements *= value_at(dim, values)
            total += align_up(elements * ((buffer.dtype.bits * buffer.dtype.lanes + 7) // 8))
        result[f"__tvm_ffi_{func.attrs['global_symbol']}"] = total
    return result
