"""Relax → kernels: TVM's CPU pipeline (legalize, fuse, fold, plan memory), then TIR → code.

The result keeps the lowered Relax ``main`` (the plan walks it) and the kernels as C source
for the portable ``c`` target. Every kernel symbol carries the package prefix so several
packages can live in one program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relay2cmake import kernel_source
from relay2cmake.c_legalize import widen_float16_mod
from relay2cmake.control_flow import if_to_select
from relay2cmake.errors import ModelError

SUPPORTED_TARGETS = ("c",)


def needs_aligned_inputs(target_name: str) -> bool:
    """LLVM objects use aligned vector loads on every buffer; portable C kernels do not."""
    return target_name != "c"


@dataclass(frozen=True)
class LoweredModel:
    main: Any  # the lowered tvm.relax.Function
    kernel_symbols: dict[str, str]  # Relax GlobalVar name → C symbol of its kernel
    kernel_source: str  # TVM's C output for the "c" target, unmodified
    kernel_scratch: dict[str, int]  # C symbol → workspace bytes it may hold at once


_C_INTRINSICS_REGISTERED = False


# libm functions for TIR's unary float intrinsics. TVM's ``c`` target has no lowering for
# ``fabs`` at all, and none for float16 arguments of the others.
_C_UNARY_MATH = ("fabs", "floor", "ceil", "exp", "log", "sqrt", "tanh", "sin", "cos", "erf")


def _register_c_intrinsics() -> None:
    global _C_INTRINSICS_REGISTERED
    if _C_INTRINSICS_REGISTERED:
        return
    import tvm

    def lowering(name: str):
        def lower_call(call):
            dtype, arg = str(call.ty), call.args[0]
            if dtype == "float64":
                return tvm.tirx.call_pure_extern(dtype, name, arg)
            if dtype == "float32":
                return tvm.tirx.call_pure_extern(dtype, name + "f", arg)
            # float16 (and anything narrower): compute in float32, round back.
            wide = tvm.tirx.call_pure_extern("float32", name + "f", tvm.tirx.Cast("float32", arg))
            return tvm.tirx.Cast(dtype, wide)

        return lower_call

    for name in _C_UNARY_MATH:
        # Level 20 outranks TVM's own "c" lowerings (level 10) where it has one.
        tvm.tirx.op.register_intrin_lowering(f"tirx.{name}", "c", f=lowering(name), level=20)
    _C_INTRINSICS_REGISTERED = True


def kernel_symbol(prefix: str, name: str) -> str:
    """The C symbol TVM emits for a PrimFunc whose global_symbol is ``<prefix>_<name>``."""
    return f"__tvm_ffi_{prefix}_{name}"


def _called_prim_funcs(main, module) -> list:
    """GlobalVars of the PrimFuncs ``main`` calls, in first-call order (dead kernels dropped)."""
    import tvm
    from tvm import relax

    seen: dict[str, Any] = {}

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.GlobalVar):
            if isinstance(module[expr.op], tvm.tirx.PrimFunc):
                seen.setdefault(expr.op.name_hint, expr.op)

    relax.analysis.post_order_visit(main, visit)
    return list(seen.values())


def lower(module, prefix: str, target_name: str = "c") -> LoweredModel:
    import tvm
    from tvm import relax

    if target_name not in SUPPORTED_TARGETS:
        raise ModelError(f"Unknown target {target_name!r}; supported: {', '.join(SUPPORTED_TARGETS)}.")
    target = tvm.target.Target(target_name)
    module = if_to_select(module)
    if target_name == "c":
        _register_c_intrinsics()
        module = widen_float16_mod(module)
    try:
        with target:
            lowered = relax.backend.cpu_generic.get_default_pipeline(target)(module)
    except Exception as exc:
        message = " ".join(str(exc).split())[:800]
        raise ModelError(f"TVM could not lower this model: {type(exc).__name__}: {message}") from None

    main = lowered["main"]
    called = _called_prim_funcs(main, lowered)
    symbols = {gv.name_hint: kernel_symbol(prefix, gv.name_hint) for gv in called}
    prims = tvm.IRModule(
        {gv: lowered[gv].with_attr("global_symbol", f"{prefix}_{gv.name_hint}") for gv in called}
    )
    if not called:
        return LoweredModel(main=main, kernel_symbols={}, kernel_source="", kernel_scratch={})
    # The driver validates every buffer it passes, so per-call argument checks are dead weight.
    with tvm.transform.PassContext(config={"tirx.disable_assert": True}):
        try:
            library = tvm.tirx.build(prims, target=target)
        except Exception as exc:
            message = " ".join(str(exc).split())[:800]
            raise ModelError(
                f"TVM could not generate code for this model: {type(exc).__name__}: {message}"
            ) from None
    source = library.inspect_source()
    return LoweredModel(
        main=main,
        kernel_symbols=symbols,
        kernel_source=source,
        kernel_scratch=kernel_source.scratch_bytes(source),
    )
