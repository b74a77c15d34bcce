"""Relax rewrites that keep models inside what TVM's ``c`` code generator can print.

TVM's C backend rejects float16 ``Mod`` ("expected 32 or 64 bits"), which LLVM handles;
computing it in float32 and rounding back gives the same result as ONNX's reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tvm.ir import IRModule


def widen_float16_mod(module: IRModule) -> IRModule:
    import tvm
    from tvm import relax

    mods = {tvm.ir.Op.get("relax.mod"), tvm.ir.Op.get("relax.floor_mod")}

    @relax.expr_functor.mutator
    class _Widen(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op in mods and str(getattr(call.ty, "dtype", "")) == "float16":
                wide = [relax.op.astype(arg, "float32") for arg in call.args]
                op = relax.op.mod if call.op.name == "relax.mod" else relax.op.floor_mod
                return relax.op.astype(op(*wide), "float16")
            return call

    functions = {
        gv: _Widen().visit_expr(f) if isinstance(f, relax.Function) else f
        for gv, f in module.functions.items()
    }
    return tvm.IRModule(functions, attrs=module.attrs)  # a new module: the caller's stays as it was
