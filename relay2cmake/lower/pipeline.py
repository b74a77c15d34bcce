"""Relax → kernels: TVM's CPU pipeline (legalize, fuse, fold, plan memory), then TIR → code.

The result keeps the lowered Relax ``main`` (the plan walks it), the kernels as C source for
the portable ``c`` target, and one scheduled LLVM object per requested architecture. Every
kernel symbol carries the package prefix so several packages can live in one program.
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from relay2cmake.errors import ModelError, describe
from relay2cmake.kernel_sets import KernelCode, ObjectSet, kernel_symbol, twin_tag, wide_kernel_symbol
from relay2cmake.lower import c_source, llvm_ir
from relay2cmake.lower.reshape_views import reshapes_as_views
from relay2cmake.lower.rewrites.batch_norm import inference_batch_norm_as_affine
from relay2cmake.lower.rewrites.c_legalize import widen_float16_mod
from relay2cmake.lower.rewrites.constant_transposes import fold_constant_transposes
from relay2cmake.lower.rewrites.control_flow import if_to_select
from relay2cmake.lower.rewrites.conv1d_as_2d import conv1d_as_conv2d
from relay2cmake.lower.rewrites.conv2d_nhwc import UINT8_BLOCK, convolutions_channels_last
from relay2cmake.lower.rewrites.conv3d_as_2d import conv3d_as_conv2d
from relay2cmake.lower.rewrites.conv_transpose import conv_transpose_as_matmul
from relay2cmake.lower.rewrites.dead_taps import conv_dead_taps
from relay2cmake.lower.rewrites.einsum_matmul import einsum_as_matmul
from relay2cmake.lower.rewrites.fast_math import vectorizable_math
from relay2cmake.lower.rewrites.index_checks import check_indices
from relay2cmake.lower.rewrites.numerics import (
    flagged_maxima,
    infinite_reduction_identities,
    nan_aware_comparisons,
    nan_propagating,
    onnx_numerics,
    rounded_conversions,
    saturating_clamps,
    softmax_maxima,
)
from relay2cmake.lower.rewrites.packed_matmul import COLUMNS_BLOCK, pack_matmul_weights
from relay2cmake.lower.rewrites.sorting import sort_builtins
from relay2cmake.lower.rewrites.transpose_pairs import collapse_transpose_pairs
from relay2cmake.lower.schedules import (
    DIM_BOUNDS,
    PARTITION_LIKELY,
    ScheduleOptions,
    has_block,
    has_reduction,
    schedule_function,
    schedule_module,
)
from relay2cmake.lower.specialise import dim_bounds, intermediate_scratch, is_symbolic
from relay2cmake.lower.tuning_db import TuningDatabase
from relay2cmake.targets import KernelTarget

if TYPE_CHECKING:
    from tvm import relax
    from tvm.ir import IRModule
    from tvm.runtime import Module
    from tvm.target import Target
    from tvm.tirx import PrimFunc
    from tvm.transform import PassContext


def needs_aligned_inputs(targets: tuple[KernelTarget, ...]) -> bool:
    """LLVM objects assume 64-byte aligned buffers (aligned vector loads); C kernels do not."""
    return any(t.is_object for t in targets)


@dataclass(frozen=True)
class LoweredModel:
    prefix: str  # the package's C prefix, on every symbol
    main: Any  # the lowered tvm.relax.Function
    kernel_symbols: dict[str, str]  # Relax GlobalVar name → C symbol of its kernel
    kernel_scratch: dict[str, int]  # C symbol → workspace bytes it may hold at once (any kernel set)
    code: KernelCode  # the C kernels and object sets, plain data the plan carries to emit
    # Optimisations declined, one line each ("channels-last: ..."); the kernel-level ones
    # are in each ObjectSet.
    fallbacks: tuple[str, ...] = ()


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


def _cut_products_tiled(prims):
    """The C kernels as TVM lowers them, except matmuls over padded columns (packed_matmul.py's
    cut): unscheduled, those compute the whole padded product in scratch before keeping the
    first N columns, and the package's one arena holds that scratch for every kernel set
    (GPT-2's LM head: 25.7 MB, as much as all its intermediates). Scheduled in scalar tiles,
    the product lives in a tile on the stack."""
    import tvm

    options = ScheduleOptions(vector_lanes=4, vectorize=False, parallel=False)
    functions = {}
    for gv, func in prims.functions.items():
        tiled = schedule_function(func, options) if has_block(func, COLUMNS_BLOCK) else None
        functions[gv] = (
            func if tiled is None else tiled.with_attr("global_symbol", func.attrs["global_symbol"])
        )
    return tvm.IRModule(functions, attrs=prims.attrs)


def build_context() -> PassContext:
    """The PassContext every kernel is built in (gen, the tuner, the kernel benchmark): no
    per-call argument checks (the driver validates every buffer it passes), and vector tails
    split off their loops (``schedules.likely_vector_tails``)."""
    import tvm

    return tvm.transform.PassContext(opt_level=3, config={"tirx.disable_assert": True, **PARTITION_LIKELY})


def build_kernels(prims: IRModule, target: Target, what: str) -> Module:
    """``prims`` built for ``target`` (a TVM target) as every kernel set is: in
    ``build_context``, max/min made NaN-propagating, comparisons NaN-aware; failures as a
    ModelError naming ``what``."""
    import tvm

    with build_context():
        try:
            # After scheduling (schedules match TIR's own max/min reducers), before code.
            llvm = target.kind.name == "llvm"
            x86 = llvm and str(target.attrs.get("mtriple", "")).startswith("x86_64")
            # (AArch64's fmax propagates NaN in one instruction, where a select takes two)
            plain = softmax_maxima(prims) if x86 or not llvm else prims
            clamps = saturating_clamps(flagged_maxima(plain) if x86 else plain, llvm)
            ieee = nan_propagating(nan_aware_comparisons(clamps, llvm), llvm=llvm)
            if llvm:
                ieee = rounded_conversions(ieee)
            return tvm.tirx.build(ieee, target=target)
        except Exception as exc:
            raise ModelError(f"TVM could not generate {what} for this model: {describe(exc)}") from None


def c_kernels_source(prims: IRModule) -> str:
    """TVM's C code of ``prims`` (as ``build_kernels`` builds it), every float constant
    exact (``c_source.exact_constants``)."""
    import tvm

    exact, literals = c_source.exact_constants(prims)
    source = build_kernels(exact, tvm.target.Target("c"), "C code").inspect_source()
    return c_source.restore_constants(source, literals)


def _twin_object(
    prims,
    prefix: str,
    wide: KernelTarget,
    tag: str,
    tuning: TuningDatabase | None,
    bounds: dict[str, int] | None = None,
):
    """A twin set (``KernelTarget.twin_variants``), symbols ``<prefix>_<tag>_*``, with only
    the kernels it changes (``twin_builds``, or a tuning record for it); (None, {}) when there
    are none. The others run from the default set on every CPU."""
    import tvm

    renamed = _renamed(prims, f"{prefix}_{tag}")
    tuned = _tuned(renamed, tuning) if tuning is not None and tuning.target == wide.label else {}
    options = ScheduleOptions.for_objects(wide)

    def changed(func) -> bool:
        return twin_builds(func, wide, lambda: schedule_function(func, options) is not None)

    kept = [gv for gv in renamed.get_global_vars() if gv.name_hint in tuned or changed(renamed[gv])]
    chosen = {gv: renamed[gv] for gv in kept}
    if not chosen:
        return None, {}
    twin, scratch = _object(tvm.IRModule(chosen), prefix, wide, tuned, twin=True, bounds=bounds)
    return dataclasses.replace(twin, label=wide.label, tag=tag), scratch


def twin_builds(func: PrimFunc, wide: KernelTarget, scheduled: Callable[[], bool]) -> bool:
    """Whether twin set ``wide`` has its own build of kernel ``func`` (unscheduled), given
    ``scheduled()``: whether a default schedule applies to it for ``wide``. AVX-512: the
    kernels that reduce and are scheduled (memory-bound and unscheduled loops gain little from
    it, and LLVM's AVX-512 code for one of them, ONNX's test_tile, computed wrong values). An
    integer dot product the default set lacks (AVX-VNNI, AArch64's): the uint8 x int8
    convolutions, the only kernels that use it."""
    if wide.vector_lanes != 16:  # the default set's vectors: only the dot product differs
        return has_block(func, UINT8_BLOCK)
    return has_reduction(func) and scheduled()


def _tuned(prims, tuning: TuningDatabase) -> dict[str, Any]:
    """Kernel name → its PrimFunc scheduled by a tuning record, where one applies."""
    from relay2cmake.lower import tuning_db

    records = tuning.by_workload()
    result = {}
    for gv in prims.get_global_vars():
        record = records.get(tuning_db.workload_hash(prims[gv]))
        scheduled = tuning_db.apply(prims[gv], record) if record is not None else None
        if scheduled is not None:
            result[gv.name_hint] = scheduled
    return result


def _object(
    prims,
    prefix: str,
    target: KernelTarget,
    tuned: dict[str, Any] | None = None,
    twin: bool = False,
    schedule: bool = True,
    bounds: dict[str, int] | None = None,
) -> tuple[ObjectSet, dict[str, int]]:
    """One relocatable object for ``target``, with the backend function pointers renamed to
    this package's, and the scratch bytes per kernel. A kernel that LLVM cannot build is
    built unscheduled, and failing that left out: from the twin (the default set serves it)
    or, in a default set, compiled from its C source beside the object. ``bounds``: the
    run-time dimensions' largest values, at which scratch is sized (``_scratch``)."""
    import tvm

    tuned = dict(tuned or {}) if schedule else {}
    serial: frozenset[str] = frozenset()
    unscheduled = frozenset() if schedule else frozenset(gv.name_hint for gv in prims.get_global_vars())
    left_out: frozenset[str] = frozenset()
    try:
        text, names = _llvm_ir(prims, prefix, target, serial, tuned, unscheduled)
    except ModelError:
        failing, left_out = _unbuildable_kernels(prims, prefix, target, tuned)
        unscheduled |= failing
        prims = tvm.IRModule({gv: f for gv, f in prims.functions.items() if gv.name_hint not in left_out})
        tuned = {name: f for name, f in tuned.items() if name not in unscheduled}
        if not prims.functions:
            raise ModelError(f"LLVM could build none of the kernels for {target.label}") from None
        text, names = _llvm_ir(prims, prefix, target, serial, tuned, unscheduled)
    try:
        scratch = _scratch(text, prims, prefix, target, serial, tuned, unscheduled, bounds)
    except llvm_ir.ParallelScratch:
        serial = _serial_kernels(prims, prefix, target, tuned, unscheduled, bounds)
        tuned = {name: f for name, f in tuned.items() if name not in serial}  # default, serial
        text, names = _llvm_ir(prims, prefix, target, serial, tuned, unscheduled)
        scratch = _scratch(text, prims, prefix, target, serial, tuned, unscheduled, bounds)
    with tempfile.TemporaryDirectory(prefix="relay2cmake-") as folder:
        ir_path, object_path = Path(folder) / "kernels.ll", Path(folder) / "kernels.o"
        ir_path.write_text(text)
        # TVM's LLVM module loader reads textual IR back and emits the object for its triple.
        tvm.runtime.load_module(str(ir_path)).write_to_file(str(object_path))
        code = object_path.read_bytes()
    object_set = ObjectSet(
        code=code,
        scheduled=tuple(names),
        serial=tuple(sorted(serial)),
        tuned=tuple(sorted(tuned)),
        kernels=tuple(sorted(gv.name_hint for gv in prims.get_global_vars())),
        unscheduled=tuple(sorted(unscheduled)) if schedule else (),
        in_c=() if twin else tuple(sorted(left_out)),
    )
    return object_set, scratch


def _unbuildable_kernels(
    prims, prefix: str, target: KernelTarget, tuned: dict[str, Any]
) -> tuple[frozenset[str], frozenset[str]]:
    """Kernels LLVM cannot build for ``target`` as scheduled (they stay unscheduled) and
    those it cannot build at all (left out), found one kernel at a time after the whole set
    failed: one bad kernel must not cost the set."""
    import tvm

    unscheduled, left_out = set(), set()
    for gv in prims.get_global_vars():
        alone = tvm.IRModule({gv: prims[gv]})
        for plain in (frozenset(), frozenset({gv.name_hint})):
            try:
                _llvm_ir(alone, prefix, target, frozenset(), tuned, plain)
                if plain:
                    unscheduled.add(gv.name_hint)
                break
            except ModelError:
                continue
        else:
            left_out.add(gv.name_hint)
    return frozenset(unscheduled), frozenset(left_out)


def _scratch(
    text: str,
    prims,
    prefix: str,
    target: KernelTarget,
    serial: frozenset[str],
    tuned: dict[str, Any],
    unscheduled: frozenset[str],
    bounds: dict[str, int] | None,
) -> dict[str, int]:
    """Scratch bytes per kernel of the LLVM IR ``text``; a kernel with run-time dimensions
    (whose requests have sizes known only at run time) is bounded by its scheduled TIR's
    intermediates at the dimensions' largest values."""
    symbolic = _symbolic_symbols(prims)
    if not (bounds and symbolic):
        return llvm_ir.scratch_bytes(text, prefix)
    scheduled, _ = schedule_module(prims, ScheduleOptions.for_objects(target), serial, tuned, unscheduled)
    return _merged(llvm_ir.scratch_bytes(text, prefix, symbolic), intermediate_scratch(scheduled, bounds))


def _symbolic_symbols(prims) -> frozenset[str]:
    """The C symbols of the kernels with run-time dimensions."""
    return frozenset(
        f"__tvm_ffi_{f.attrs['global_symbol']}" for f in prims.functions.values() if is_symbolic(f)
    )


def _serial_kernels(
    prims,
    prefix: str,
    target: KernelTarget,
    tuned: dict[str, Any],
    unscheduled: frozenset[str],
    bounds: dict[str, int] | None = None,
) -> frozenset[str]:
    """Kernels whose parallel loops would allocate scratch (the arena's scratch is one stack
    per context, which concurrent tasks cannot share), found one by one: they are scheduled
    without parallel loops, and the others keep theirs."""
    import tvm

    def allocates_in_parallel(module) -> bool:
        try:
            text = _llvm_ir(module, prefix, target, frozenset(), tuned, unscheduled)[0]
            _scratch(text, module, prefix, target, frozenset(), tuned, unscheduled, bounds)
        except llvm_ir.ParallelScratch:
            return True
        return False

    return frozenset(
        gv.name_hint for gv in prims.get_global_vars() if allocates_in_parallel(tvm.IRModule({gv: prims[gv]}))
    )


def _llvm_ir(
    prims,
    prefix: str,
    target: KernelTarget,
    serial: frozenset[str],
    tuned: dict[str, Any],
    unscheduled: frozenset[str] = frozenset(),
) -> tuple[str, list[str]]:
    """The kernels scheduled (``tuned`` ones as given; ``unscheduled`` ones not at all) and
    built for ``target`` as LLVM IR text, backend symbols renamed; and the names of the
    scheduled kernels."""
    scheduled, names = schedule_module(
        prims,
        ScheduleOptions.for_objects(target),
        serial,
        tuned,
        unscheduled,  # schedule_module leaves these alone, tuned or not
    )
    library = build_kernels(scheduled, target.tvm_target(), f"{target.label} code")
    with tempfile.TemporaryDirectory(prefix="relay2cmake-") as folder:
        ir_path = Path(folder) / "kernels.ll"
        library.write_to_file(str(ir_path))
        return llvm_ir.prefix_backend_symbols(ir_path.read_text(), prefix), names


def _renamed(prims, symbol_prefix: str):
    """``prims`` with global symbols ``<symbol_prefix>_<name>`` (a second set of one model)."""
    import tvm

    return tvm.IRModule(
        {
            gv: f.with_attr("global_symbol", f"{symbol_prefix}_{gv.name_hint}")
            for gv, f in prims.functions.items()
        }
    )


def _merged(scratch: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    """Scratch bytes per kernel that any of the kernel sets may need."""
    result = dict(scratch)
    for symbol, size in more.items():
        result[symbol] = max(result.get(symbol, 0), size)
    return result


@dataclass(frozen=True)
class Rewrite:
    """A Relax rewrite run before TVM's pipeline. An optional one is an optimisation: when it
    raises, or TVM's pipeline fails after it, it is declined and the model lowers without it."""

    name: str
    apply: Callable[[Any], Any]
    optional: bool = True


def relax_rewrites(
    winograd: bool = True, notes: list[str] | None = None, wide: bool = False
) -> list[Rewrite]:
    """In order: data-dependent indices checked at run time (safety), sorting as a package
    builtin (TVM's sort kernels look up the TVM runtime), NaN-keeping Sign and
    float64 accumulation of long sums (numerics as ONNX Runtime), control flow to select
    (the driver has no branches) and float16 Mod widened (TVM's C printer cannot print it)
    are required; inference batch norms as a multiply-add (fusable into the convolution before
    them), 1-D convolutions as 2-D ones of height 1, 3-D ones as 2-D ones over every output
    frame, kernel taps that read only padding dropped, transposed convolutions whose kernel is
    their stride as matmuls, einsums that are matrix products as matmuls, 2-D convolutions channels-last (3x3
    ones as Winograd's unless ``winograd`` is False), constant transposes folded, constant
    matmul weights packed, erf and softmax made vectorizable, constants folded before
    legalization are optimisations. A rewrite that
    declines part of its work (channels-last, around an operator layout conversion cannot
    pass) appends one line per decline to ``notes``. ``wide``: the package has a 16-lane
    kernel set, for which channels-last pads more channel counts to whole 16s."""
    return [
        Rewrite("index-checks", check_indices, optional=False),
        Rewrite("sorting", sort_builtins, optional=False),
        Rewrite("onnx-numerics", onnx_numerics, optional=False),
        Rewrite("if-to-select", if_to_select, optional=False),
        Rewrite("float16-mod", widen_float16_mod, optional=False),
        Rewrite("batch-norm-affine", inference_batch_norm_as_affine),
        Rewrite("conv1d-as-2d", conv1d_as_conv2d),
        Rewrite("conv3d-as-2d", lambda m: conv3d_as_conv2d(m, notes)),
        Rewrite("conv-dead-taps", conv_dead_taps),
        Rewrite("conv-transpose-as-matmul", conv_transpose_as_matmul),
        Rewrite("einsum-as-matmul", einsum_as_matmul),
        Rewrite("channels-last", lambda m: convolutions_channels_last(m, winograd, notes, wide)),
        Rewrite("transpose-pairs", collapse_transpose_pairs),
        Rewrite("constant-transposes", fold_constant_transposes),
        Rewrite("packed-matmul", pack_matmul_weights),
        Rewrite("fast-math", vectorizable_math),
        Rewrite("constants-folded", _constants_folded),
    ]


def _constants_folded(module: IRModule) -> IRModule:
    """Constants folded before legalization (TVM's pipeline folds them only after): a scalar
    one (ONNX Clip's bounds, which TVM's importer wraps in ``where(isnan(c), -inf, c)``) then
    reaches the kernel as an immediate, not as a 0-d buffer: ReLU6's NaN-propagating max
    against a known 0 is three instructions, against a loaded bound six (MobileNet v2's
    depthwise convs 0.066 -> 0.051 ms, its kernels 3.16 -> 2.90 ms)."""
    import tvm

    with tvm.target.Target("c"):  # the target TVM's pipeline folds for (_pipeline)
        return tvm.relax.transform.FoldConstant()(module)


WINOGRAD = "winograd"  # part of channels-last, declinable on its own


def _reason(exc: BaseException) -> str:
    return describe(exc, 200)


def rewrite_relax(
    module: IRModule, winograd: bool = True, declined: frozenset[str] = frozenset(), wide: bool = False
) -> tuple[IRModule, list[str], list[str]]:
    """The rewrites every kernel set shares; returns the module, the optional rewrites that
    applied, and one line per rewrite that raised (declined)."""
    applied: list[str] = []
    fallbacks: list[str] = []
    notes: list[str] = []
    winograd = winograd and WINOGRAD not in declined
    for rewrite in relax_rewrites(winograd, notes, wide):
        if rewrite.optional and rewrite.name in declined:
            continue
        notes.clear()
        try:
            module = rewrite.apply(module)
            fallbacks.extend(notes)
        except Exception as exc:
            if not rewrite.optional:
                if isinstance(exc, ModelError):
                    raise
                raise ModelError(f"TVM could not lower this model ({rewrite.name}): {_reason(exc)}") from None
            fallbacks.append(f"{rewrite.name}: declined for the whole model, it failed ({_reason(exc)})")
            if rewrite.name == "channels-last" and winograd:
                # Winograd is part of this rewrite: channels-last may still work without it.
                try:
                    without = next(r for r in relax_rewrites(False, notes, wide) if r.name == rewrite.name)
                    notes.clear()
                    module = without.apply(module)
                    fallbacks[-1] = f"{WINOGRAD}: declined for the whole model, it failed ({_reason(exc)})"
                    fallbacks.extend(notes)
                    applied.append(rewrite.name)
                except Exception:
                    pass
            continue
        if rewrite.optional:
            applied.append(rewrite.name)
            if rewrite.name == "channels-last" and winograd:
                applied.append(WINOGRAD)
    return module, applied, fallbacks


def _pipeline(module):
    """TVM's CPU pipeline without ``VMShapeLower``: that pass moves shapes into the VM's
    shape heap; without it every allocation keeps its shape as an expression (of run-time
    dimensions, when there are any), which ``plan.py`` reads."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    c_target = tvm.target.Target("c")
    finalize = [p for p in cpu.finalize_passes(c_target) if p.info.name != "VMShapeLower"]
    passes = [
        *cpu.library_dispatch_passes(c_target),
        *cpu.legalize_passes(c_target),
        *cpu.dataflow_lower_passes(c_target),
        *finalize,
    ]
    with c_target:
        return tvm.transform.Sequential(passes)(module)


def lowered_module(
    module: IRModule, winograd: bool = True, optimise: bool = True, wide: bool = False
) -> tuple[IRModule, tuple[str, ...]]:
    """The Relax rewrites and TVM's CPU pipeline: the lowered module (``main`` and its
    PrimFuncs) and the optimisations declined. When the pipeline fails after the optional
    rewrites, each is declined in turn (then all of them) until it succeeds;
    ``optimise=False`` declines them all from the start."""
    _register_c_intrinsics()
    names = [WINOGRAD] + [r.name for r in relax_rewrites(winograd) if r.optional]
    declined = frozenset() if optimise else frozenset(names)
    rewritten, applied, fallbacks = rewrite_relax(module, winograd, declined, wide)
    try:
        lowered = _pipeline(rewritten)
    except Exception as exc:
        first_failure = exc
    else:
        return reshapes_as_views(lowered), tuple(fallbacks)
    attempts = [frozenset({name}) for name in applied] + ([frozenset(applied)] if len(applied) > 1 else [])
    for extra in attempts:
        try:
            retry, _, more = rewrite_relax(module, winograd, declined | extra, wide)
            lowered = _pipeline(retry)
        except Exception:
            continue
        # The retry's own declines replace the first attempt's (the same rewrites raise again).
        return reshapes_as_views(lowered), tuple(more) + tuple(
            f"{name}: declined for the whole model, TVM's pipeline failed after it ({_reason(first_failure)})"
            for name in sorted(extra)
        )
    raise ModelError(f"TVM could not lower this model: {_reason(first_failure)}") from None


def _kernels_of(lowered: IRModule) -> IRModule:
    """The PrimFuncs ``main`` calls, with the numerics every kernel set shares."""
    import tvm

    called = _called_prim_funcs(lowered["main"], lowered)
    return infinite_reduction_identities(tvm.IRModule({gv: lowered[gv] for gv in called}))


def lowered_kernels(
    module: IRModule, prefix: str, winograd: bool = True, optimise: bool = True, wide: bool = False
) -> tuple[relax.Function, IRModule, tuple[str, ...]]:
    """``lowered_module``'s ``main``, the PrimFuncs it calls with global symbols
    ``<prefix>_<name>``, and the optimisations declined."""
    import tvm

    lowered, fallbacks = lowered_module(module, winograd, optimise, wide)
    kernels = _kernels_of(lowered)
    bounds = dim_bounds(lowered["main"])
    prims = tvm.IRModule(
        {
            gv: _with_bounds(f.with_attr("global_symbol", f"{prefix}_{gv.name_hint}"), bounds)
            for gv, f in kernels.functions.items()
        }
    )
    _check_printable_names(prims)
    return lowered["main"], prims, fallbacks


def _with_bounds(func, bounds: dict[str, int]):
    """A kernel with run-time dimensions carries their largest values, which its schedule
    tiles for (``schedules.DIM_BOUNDS``)."""
    return func.with_attr(DIM_BOUNDS, bounds) if bounds and is_symbolic(func) else func


def scheduled_kernels(
    module: IRModule, target: KernelTarget, parallel: bool = True
) -> tuple[IRModule, IRModule, tuple[str, ...]]:
    """For benchmarks and tools: the kernels gen builds for the object set ``target``, with
    the default schedules (no tuning database). Returns the lowered module with its kernels
    replaced by the scheduled ones (TVM's VM runs it as is), the scheduled kernels alone, and
    the names of those a schedule applied to."""
    lowered, bounded = bounded_kernels(module, wide=has_wide_set((target,)))
    kernels, names = schedule_module(bounded, ScheduleOptions.for_objects(target, parallel=parallel))
    for gv, func in kernels.functions.items():
        lowered[gv] = func
    return lowered, kernels, tuple(names)


def bounded_kernels(module: IRModule, wide: bool) -> tuple[IRModule, IRModule]:
    """For benchmarks and tools: ``lowered_module``'s module, and the kernels its ``main``
    calls, unscheduled, each with the bounds of its run-time dimensions (as gen schedules
    them, for any object set: ``schedule_module``)."""
    import tvm

    lowered, _ = lowered_module(module, wide=wide)
    bounds = dim_bounds(lowered["main"])
    bounded = tvm.IRModule({gv: _with_bounds(f, bounds) for gv, f in _kernels_of(lowered).functions.items()})
    return lowered, bounded


_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_printable_names(prims) -> None:
    """TVM prints parameter names (and the buffer names made from the same Relax names) into
    the C kernels as they are. The frontends rename every name that comes from the model
    (``safe_parameter_names``); this refuses, rather than prints, a parameter whose name still
    is not a plain C identifier."""
    for gv, func in prims.functions.items():
        names = [p.name for p in func.params]
        bad = [n for n in names if not _C_IDENTIFIER.fullmatch(n)]
        if bad or not _C_IDENTIFIER.fullmatch(gv.name_hint):
            raise ModelError(
                f"Kernel {gv.name_hint!r} would carry names that are not C identifiers ({bad!r}); "
                "relay2cmake refuses to print them into C. Please report this model."
            )


def has_wide_set(targets: tuple[KernelTarget, ...]) -> bool:
    """Whether the object sets of ``targets`` (or their twins) include one with 16-lane
    vectors (x86-64's AVX-512 twin)."""
    sets = [s for t in targets if t.is_object for s in (t, *t.twin_variants())]
    return any(s.vector_lanes == 16 for s in sets)


def lower(
    module: IRModule,
    prefix: str,
    targets: tuple[KernelTarget, ...] = (KernelTarget("c"),),
    tuning: TuningDatabase | None = None,
    winograd: bool = True,
    optimise: bool = True,
) -> LoweredModel:
    """Lower once (one memory plan for every kernel set), then generate each kernel set;
    ``tuning``'s schedules replace the default ones in the set of its target. With
    ``optimise=False`` (the plain path): no optional rewrite, no schedule, no twin set."""
    import tvm

    wide = optimise and has_wide_set(targets)
    main, prims, fallbacks = lowered_kernels(module, prefix, winograd, optimise, wide)
    tuning = tuning if optimise else None
    called = prims.get_global_vars()
    symbols = {gv.name_hint: kernel_symbol(prefix, gv.name_hint) for gv in called}
    abi_header = f"{prefix}_kernel_abi.h"
    if not called:
        code = KernelCode(c_source.adapt("", abi_header), tvm_version=str(tvm.__version__))
        return LoweredModel(
            prefix, main, kernel_symbols={}, kernel_scratch={}, code=code, fallbacks=fallbacks
        )
    as_c = _cut_products_tiled(prims) if optimise else prims
    source = c_kernels_source(as_c)
    bounds = dim_bounds(main)
    # Kernels with run-time dimensions: bounded by their intermediates at the largest values.
    scratch = c_source.scratch_bytes(source, _symbolic_symbols(as_c) if bounds else frozenset())
    if bounds:
        scratch = _merged(scratch, intermediate_scratch(as_c, bounds))
    objects, skipped = {}, {}
    for target in targets:
        if not target.is_object:
            continue
        tuned = _tuned(prims, tuning) if tuning is not None and tuning.target == target.label else {}
        try:
            object_set, object_scratch = _object(
                prims, prefix, target, tuned, schedule=optimise, bounds=bounds
            )
        except ModelError as exc:  # the C kernels still serve this architecture
            skipped[target.label] = str(exc)
            continue
        if object_set.in_c:  # the kernels LLVM could not build, as C beside the object
            subset = tvm.IRModule(
                {gv: f for gv, f in prims.functions.items() if gv.name_hint in object_set.in_c}
            )
            in_c = c_source.adapt(c_kernels_source(subset), abi_header)
            object_set = dataclasses.replace(object_set, c_source=in_c)
        twins = []
        for index, twin in enumerate(target.twin_variants() if optimise else ()):
            tag = twin_tag(index)
            try:
                twin_set, twin_scratch = _twin_object(prims, prefix, twin, tag, tuning, bounds)
            except ModelError as exc:  # the default set still serves the CPUs it was for
                skipped[twin.label] = str(exc)
                continue
            if twin_set is not None:
                twins.append(twin_set)
                base = {wide_kernel_symbol(prefix, n, tag): kernel_symbol(prefix, n) for n in symbols}
                object_scratch = _merged(object_scratch, {base[k]: v for k, v in twin_scratch.items()})
        object_set = dataclasses.replace(object_set, twins=tuple(twins))
        objects[target.arch] = object_set
        scratch = _merged(scratch, object_scratch)
    code = KernelCode(c_source.adapt(source, abi_header), objects, skipped, str(tvm.__version__))
    return LoweredModel(prefix, main, symbols, scratch, code, fallbacks)
