"""Kernels with run-time dimensions, specialised to given values of them.

A kernel lowered with symbolic extents (``--input-shape x=1..8,...``) takes its dimensions
from the tensors it is given. Its scratch requests then have sizes known only at run time;
the arena reserves what the kernel asks for at the largest dimensions (``at_values`` with the
upper bounds), and the driver's allocator refuses anything beyond that room (the kernel
returns an error, never writes past it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from relay2cmake.symbolic import evaluate, from_tir

if TYPE_CHECKING:
    from tvm.ir import IRModule


def dim_bounds(main: Any) -> dict[str, int]:
    """The run-time dimensions' upper bounds that the frontend attached to ``main``."""
    bounds = main.attrs.get("tir_var_upper_bound") if main.attrs is not None else None
    return {str(name): int(value) for name, value in (bounds or {}).items()}


def is_symbolic(func: Any) -> bool:
    """Whether a PrimFunc's tensors have extents that are not numbers."""
    import tvm

    return any(
        not isinstance(dim, tvm.tirx.IntImm)
        for param in func.params
        if hasattr(param, "shape")
        for dim in param.shape
    )


def at_values(prims: IRModule, values: dict[str, int]) -> IRModule:
    """``prims`` with every run-time dimension (TIR variable named in ``values``) fixed: each
    symbolic tensor parameter replaced by one of static shape, which TVM propagates through
    the body. Kernels without symbolic tensors are kept as they are."""
    import tvm
    from tvm import tirx

    names = sorted(values)
    positions = {name: i for i, name in enumerate(names)}
    point = tuple(values[name] for name in names)
    functions = {}
    for gv, func in prims.functions.items():
        if not is_symbolic(func):
            functions[gv] = func
            continue
        # TVM binds a variable through a parameter whose extent is that variable alone; the
        # others' extents follow from it.
        replaced: dict = {}
        bound: set[str] = set()
        for param in func.params:
            dims = list(param.shape) if hasattr(param, "shape") else []
            symbolic = [d for d in dims if not isinstance(d, tirx.IntImm)]
            if not symbolic or not all(isinstance(d, tirx.Var) for d in symbolic):
                continue
            if all(d.name in bound for d in symbolic):
                continue
            bound.update(d.name for d in symbolic)
            # Static extents stay the same objects (TVM rebinds only what differs).
            shape = [
                dim
                if isinstance(dim, tirx.IntImm)
                else tirx.IntImm("int64", evaluate(from_tir(dim, positions), point))
                for dim in dims
            ]
            replaced[param] = tirx.decl_buffer(shape, param.dtype, name=param.name)
        functions[gv] = func.specialize(replaced)
    return tvm.IRModule(functions)


def intermediate_scratch(prims: IRModule, values: dict[str, int]) -> dict[str, int]:
    """Per symbolic kernel (by C symbol), the bytes of its intermediate tensors at ``values``
    (``prims`` scheduled or not), in every block. At fixed sizes TVM keeps small
    intermediates on the stack; with sizes known only at run time it asks the workspace for
    every one of them (a schedule's packing and partial-sum buffers too): their sum bounds
    what such a kernel holds at once, which the arena then reserves."""
    import tvm
    import tvm_ffi

    from relay2cmake.arena import align_up

    names = sorted(values)
    positions = {name: i for i, name in enumerate(names)}
    point = tuple(values[name] for name in names)
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
                elements *= evaluate(from_tir(dim, positions), point)
            total += align_up(elements * ((buffer.dtype.bits * buffer.dtype.lanes + 7) // 8))
        result[f"__tvm_ffi_{func.attrs['global_symbol']}"] = total
    return result
