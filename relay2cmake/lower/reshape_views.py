"""Lowered ``main``: kernels that only reshape become views (``vm.builtin.reshape``).

TVM's ``RewriteDataflowReshape`` turns a reshape into a view only inside a dataflow block and
only when its result is not the block's output, so a reshape that produces a model output,
or that TVM's importer placed outside a dataflow block, stays a copy kernel. GPT-2's ``.pt2``
export copied its 25 MB of logits that way: 4.5 ms of a 31 ms run. The package's plan has
no such limit (a view of the arena may be an output; it is then computed straight into the
caller's buffer or copied once), so every call to a PrimFunc with TVM's reshape pattern
(``has_reshape_pattern``: the output is the input in row-major order) and the same dtype and
size on both sides is rebound as a view, and the kernel is no longer called.
"""

from __future__ import annotations

import math
from typing import Any


def _is_view_kernel(func: Any) -> bool:
    import tvm
    from tvm.relax.analysis import has_reshape_pattern

    if not isinstance(func, tvm.tirx.PrimFunc) or len(func.params) != 2:
        return False
    source, result = func.params  # TVM 0.27: a PrimFunc's parameters are its buffers
    if not all(isinstance(p.ty, tvm.tirx.buffer.BufferType) for p in func.params):
        return False  # a size taken as an integer (a run-time dimension)
    if source.dtype != result.dtype:
        return False
    if not all(isinstance(d, tvm.tirx.IntImm) for d in (*source.shape, *result.shape)):
        return False
    if math.prod(int(d) for d in source.shape) != math.prod(int(d) for d in result.shape):
        return False
    return bool(has_reshape_pattern(func))


def reshapes_as_views(module: Any) -> Any:
    """``module`` with ``main``'s calls to reshape-only kernels replaced by views."""
    import tvm
    from tvm import relax

    main = module["main"]
    body = main.body
    # destination var → the binding of the call ``kernel(source, destination)``
    views: dict[Any, Any] = {}
    allocated = {
        binding.var
        for block in body.blocks
        for binding in block.bindings
        if isinstance(binding.value, relax.Call)
        and isinstance(binding.value.op, tvm.ir.Op)
        and binding.value.op.name == "relax.vm.alloc_tensor"
    }
    for block in body.blocks:
        for binding in block.bindings:
            value = binding.value
            if (
                isinstance(binding, relax.VarBinding)
                and isinstance(value, relax.Call)
                and isinstance(value.op, tvm.ir.GlobalVar)
                and len(value.args) == 2
                and value.args[1] in allocated
                and _is_view_kernel(module[value.op])
            ):
                views[value.args[1]] = binding
    if not views:
        return module
    # The destination's alloc_tensor goes; the destination is bound where the kernel ran.
    blocks = []
    for block in body.blocks:
        bindings = []
        for binding in block.bindings:
            if isinstance(binding, relax.VarBinding) and binding.var in views:
                continue  # the alloc_tensor of a view
            call = binding.value
            if (
                isinstance(call, relax.Call)
                and len(call.args) == 2
                and call.args[1] in views
                and views[call.args[1]].same_as(binding)
            ):
                destination = call.args[1]
                reshape = relax.Call(
                    relax.ExternFunc("vm.builtin.reshape"),
                    [call.args[0], relax.ShapeExpr(list(destination.ty.shape.values))],
                    ty_args=[destination.ty],
                )
                bindings.append(relax.VarBinding(destination, reshape))
                continue
            bindings.append(binding)
        kind = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else relax.BindingBlock
        blocks.append(kind(bindings))
    new_main = relax.Function(
        main.params, relax.SeqExpr(blocks, body.body), main.ret_ty, main.is_pure, main.attrs
    )
    updated = module.clone()  # the rest of the module (kernels, attributes) as it was
    updated["main"] = new_main
    return updated
