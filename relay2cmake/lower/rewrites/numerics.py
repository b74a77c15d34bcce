"""Numerics as ONNX Runtime computes them, where TVM's kernels differ.

- **NaN propagates** through max and min (Relu, Max, Min, Clip, ReduceMax, the clamps inside
  TVM's erf and hard-sigmoid...). TIR's ``max(a, b)`` is ``a > b ? a : b`` in both code
  generators, which turns a NaN ``a`` into ``b``: Relu(NaN) was 0. Every float max/min
  becomes ``isnan(a) || a > b ? a : b`` (NaN in either operand wins), at the last moment
  before code generation so that schedules still see TIR's own reducers. (``a != a`` would
  not do: TVM's simplifier folds it to false.) In LLVM code, float32/float64 ones become
  LLVM's own ``llvm.maximum``/``llvm.minimum`` (NaN-propagating by definition): one
  instruction against a constant, one per operand (no re-reads, so no ``Let``); the select
  form's ``Let`` bindings kept LLVM from sharing the clamps that ``fast_exp`` repeats, and
  MobileViT-XS's SiLU convs and softmax ran 1.4-2x slower in the package than measured;
  a running maximum becomes a reduction LLVM can vectorize. On x86 that expansion is four
  mask operations per element; the running maxima of vectorized loops (pools, a row's
  partial maxima) take a plain compare-and-select and a NaN flag instead (``flagged_maxima``:
  GoogLeNet's pools 2-3.7x faster, ViT's softmax 0.070 -> 0.054 ms). A softmax's row
  maximum needs neither (``softmax_maxima``): a NaN in the row makes every output NaN
  through its own exponential.
- **Max and min reductions start at -inf and +inf**, not at the largest finite value of the type
  (float16, float32, float64, bfloat16): the
  maximum of an empty axis, or of a row of -inf, is -inf (ONNX since opset 18); so does a
  max pool's padding (a window of -inf and padding pooled to -FLT_MAX).
- **Reductions over an empty axis give their identity** (-inf for max, +inf for min, 0 for
  sum, 1 for product; NaN for mean, as PyTorch, NumPy and ONNX's reference compute it;
  ONNX Runtime gives 0): TIR runs a reduction's init inside its first iteration, so with
  none the output was never written.
- **Comparisons with NaN are false** (``!=`` true), as in C, also once negated: TVM's
  simplifier folds ``a == a`` to true and ``!(a < b)`` to ``a >= b``, and its LLVM code makes
  ``!=`` ordered (``nan_aware_comparisons``).
- **A clamp whose result becomes an integer gives its lower bound for NaN** (quantization's
  saturation, as ONNX Runtime's kernels): converting NaN to an integer is undefined, and a
  NaN-ignoring max/min is one vector instruction against a constant bound
  (``saturating_clamps``).
- **Sign(NaN) is NaN** (TVM's sign compares against 0 and gives 0).
- **ArgMax/ArgMin pick a NaN** (as NumPy and PyTorch do; ONNX Runtime only when it comes
  first), and a row of -inf (+inf for ArgMin) gives its first index: TVM's reducer starts at
  (-1, -FLT_MAX) and keeps it on ties, so such a row gave -1, an index that wraps to the end.
  The values are compared in float64 with -inf as -1e300 and NaN as +inf.
- **Long float32 sums accumulate in float64** (Sum, Mean): the naive float32 loop stops at
  2**24 (2e7 ones summed to 16777216) and drifts on long means.
- **float16 products and reductions accumulate in float32** (matmuls, convolutions, sums,
  softmax, norms, average pooling), rounded to float16 once per operator.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from relay2cmake.lower.rewrites.common import rewrite_functions, static_shape

if TYPE_CHECKING:
    from tvm.ir import IRModule

# float16 operators that accumulate: computed in float32 and rounded once.
FLOAT16_IN_FLOAT32 = (
    "matmul", "nn.conv1d", "nn.conv2d", "nn.conv3d", "nn.conv1d_transpose", "nn.conv2d_transpose",
    "sum", "mean", "prod", "variance", "std", "cumsum", "cumprod", "nn.softmax", "nn.log_softmax",
    "nn.layer_norm", "nn.group_norm", "nn.rms_norm", "nn.avg_pool1d", "nn.avg_pool2d", "nn.avg_pool3d",
    "nn.adaptive_avg_pool1d", "nn.adaptive_avg_pool2d", "nn.adaptive_avg_pool3d", "einsum",
)  # fmt: skip
# Reductions over at least this many elements per output accumulate in float64. Below it a
# float32 sum is within ~n * 6e-8 relative of the exact one, as ONNX Runtime's own is.
WIDE_ACCUMULATION_ELEMENTS = 4096
# TIR's roundings half to even (a quantizer's), ahead of a conversion to an integer.
_ROUNDINGS = frozenset({"tirx.round", "tirx.nearbyint"})


def _is_float(expr) -> bool:
    return str(expr.ty).startswith(("float", "bfloat"))


def nan_propagating(prims: IRModule, llvm: bool = False) -> IRModule:
    """``prims`` (a module of PrimFuncs) with every float max/min propagating NaN: for an
    ``llvm`` target, float32/float64 ones as LLVM's NaN-propagating intrinsics; otherwise as
    a select, with operands that are not plain loads or constants bound once (``Let``): a
    select reads ``a`` twice, and nested clamps (GridSample's reflection) would grow
    exponentially."""
    import tvm_ffi
    from tvm import tirx

    def propagating(expr, compare):
        if not _is_float(expr):
            return expr
        a, b = expr.a, expr.b
        if llvm and str(expr.ty) in ("float32", "float64"):
            intrinsic = "llvm.maximum" if compare is tirx.GT else "llvm.minimum"
            return tirx.call_llvm_pure_intrin(str(expr.ty), intrinsic, a, b)
        (a, b), bindings = _bound([a, b], "nan")
        result = tirx.Select(tirx.Or(_isnan(a), compare(a, b)), a, b)
        return _with_bindings(result, bindings)

    return tvm_ffi.structural_map(
        prims,
        [(tirx.Max, lambda e: propagating(e, tirx.GT)), (tirx.Min, lambda e: propagating(e, tirx.LT))],
    )


# Blocks of a softmax's (or log-softmax's) row maximum, as TVM's topi and fast_math name them.
_SOFTMAX_MAXIMUM = "T_softmax_maxelem"


def softmax_maxima(prims: IRModule) -> IRModule:
    """``prims`` (scheduled) with a softmax's row maximum as the plain compare-and-select
    (``a > b ? a : b``, one ``vmaxps``), which may skip a NaN: exact all the same, because
    the maximum is only ever subtracted from the row before an exponential, and a NaN in
    the row makes its own exponential NaN, the row's sum NaN and so every output NaN, as
    with the NaN-propagating maximum (+inf still wins: inf - inf is NaN). On x86 the
    NaN-propagating maximum's horizontal combine was a scalar chain of blends: MobileViT-XS's
    softmax over 196 tokens 0.286 -> 0.180 ms (ONNX Runtime's 0.162). For x86 and C code
    (AArch64's ``fmax`` propagates NaN in one instruction)."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    def plain(expr):
        return tirx.Select(tirx.GT(expr.a, expr.b), expr.a, expr.b) if _is_float(expr) else expr

    def block(b):
        if not b.name_hint.startswith(_SOFTMAX_MAXIMUM):
            return b
        return tvm_ffi.structural_map(b, [(tirx.Max, plain)])

    functions = {gv: tvm_ffi.structural_map(f, [(s_tir.SBlock, block)]) for gv, f in prims.functions.items()}
    return tvm.IRModule(functions, attrs=prims.attrs)


# float32's bits with the sign cleared: above this, NaN.
_INFINITY_BITS = 0x7F800000


def flagged_maxima(prims: IRModule) -> IRModule:
    """``prims`` (scheduled) with every running maximum or minimum of a vectorized loop
    (``acc = max(acc, x)`` into a buffer of the function's own: max pooling's windows, a
    row's partial maxima) computed as x86 computes it fastest and exactly: the plain
    compare-and-select (``vmaxps``, which keeps a NaN already in ``acc`` but skips a NaN
    ``x``) and, beside it, the largest magnitude bits of the ``x`` seen (``vpand`` and
    ``vpmaxsd``); a read of the result is NaN where those bits exceed infinity's. For x86
    only: ``nan_propagating``'s ``llvm.maximum`` is one compare, one blend and two more
    blends for the sign of zero per element there, all on the mask ports (GoogLeNet's 14 x
    14 x 512 3 x 3 pool: 0.038 ms, 0.008 without NaN handling, 0.012 so; AMD Zen 5), where
    AArch64 has one ``fmax``. float32 only; other stores to such a buffer leave it to
    ``nan_propagating``."""
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    def running(store):
        """``x`` when ``store`` is ``acc = max(acc, x)`` (or min, either order), else None."""
        value = store.value
        if not isinstance(value, tirx.Max | tirx.Min) or str(value.ty) != "float32":
            return None
        for own, other in [(value.a, value.b), (value.b, value.a)]:
            if (
                isinstance(own, tvm.ir.TensorLoad)
                and own.source.same_as(store.buffer)
                and tvm_ffi.structural_equal(list(own.indices), list(store.indices))
            ):
                return other
        return None

    def rewrite(func):
        in_vectors: set = set()  # buffers updated as running maxima inside vectorized loops
        disqualified: set = set()

        def note(store):
            if running(store) is not None:
                in_vectors.add(store.buffer)
            return store

        def vector_loop(loop):
            if loop.kind == tirx.ForKind.VECTORIZED:
                tvm_ffi.structural_map(loop, [(tirx.BufferStore, note)])
            return loop

        def check(store):
            if running(store) is None and not isinstance(store.value, tirx.FloatImm):
                disqualified.add(store.buffer)
            return store

        tvm_ffi.structural_map(func, [(tirx.For, vector_loop)])
        tvm_ffi.structural_map(func, [(tirx.BufferStore, check)])
        allocated = set()

        def allocations(block):
            allocated.update(block.alloc_buffers)
            return block

        tvm_ffi.structural_map(func, [(s_tir.SBlock, allocations)])
        accumulators = {b for b in in_vectors if b in allocated and b not in disqualified}
        if not accumulators:
            return func
        flags = {
            b: tirx.decl_buffer(b.ty.shape, "int32", f"{b.name}_nan", scope=b.ty.storage_scope)
            for b in accumulators
        }
        placeholders: dict = {}  # the accumulators' own reads in updates, kept from ``flagged``

        def store(stmt):
            if stmt.buffer not in accumulators:
                return stmt
            flag = flags[stmt.buffer]
            x = running(stmt)
            if x is None:  # the start: no NaN seen
                return tirx.SeqStmt([stmt, tirx.BufferStore(flag, tirx.const(0, "int32"), stmt.indices)])
            acc = tirx.Var(f"{stmt.buffer.name}_acc", "float32")
            placeholders[acc] = tirx.BufferLoad(stmt.buffer, stmt.indices)
            compare = tirx.GT if isinstance(stmt.value, tirx.Max) else tirx.LT
            bits = tirx.bitwise_and(tirx.reinterpret("int32", x), tirx.const(0x7FFFFFFF, "int32"))
            seen = tirx.max(tirx.BufferLoad(flag, stmt.indices), bits)
            return tirx.SeqStmt(
                [
                    tirx.BufferStore(flag, seen, stmt.indices),
                    tirx.BufferStore(stmt.buffer, tirx.Select(compare(x, acc), x, acc), stmt.indices),
                ]
            )

        def flagged(load):
            if load.source not in accumulators:
                return load
            nan = tirx.BufferLoad(flags[load.source], load.indices) > tirx.const(_INFINITY_BITS, "int32")
            return tirx.Select(nan, tirx.const(math.nan, "float32"), load)

        def restored(var):
            return placeholders.get(var, var)

        def regions(block):
            def with_flags(regions):
                flagged = [r for r in regions if r.source in accumulators]
                return list(regions) + [tvm.ir.TensorRegion(flags[r.source], r.region, r.ty) for r in flagged]

            allocs = list(block.alloc_buffers) + [flags[b] for b in block.alloc_buffers if b in accumulators]
            return s_tir.SBlock(
                block.iter_vars,
                with_flags(block.reads),
                with_flags(block.writes),
                block.name_hint,
                block.body,
                block.init,
                allocs,
                block.match_buffers,
                block.annotations,
            )

        func = tvm_ffi.structural_map(func, [(tirx.BufferStore, store)])
        func = tvm_ffi.structural_map(func, [(tvm.ir.TensorLoad, flagged)])
        func = tvm_ffi.structural_map(func, [(tirx.Var, restored)])
        return tvm_ffi.structural_map(func, [(s_tir.SBlock, regions)])

    return tvm.IRModule({gv: rewrite(f) for gv, f in prims.functions.items()}, attrs=prims.attrs)


def saturating_clamps(prims: IRModule, llvm: bool = False) -> IRModule:
    """``prims`` with every float32/float64 clamp whose result becomes an integer (a max/min
    chain under a cast to an integer type, directly or through a rounding) as max/min that
    give the bound for a NaN operand: LLVM's ``maxnum``/``minnum`` (one ``vmaxps``/``fmaxnm``
    against a constant bound, where ``nan_propagating``'s ``llvm.maximum`` takes three), in C
    ``a > b ? a : b`` helpers (``c_source``). No integer holds NaN (converting one is undefined
    in C), so no defined result changes; a clamp between constants is ordered lower bound
    first, so NaN saturates to the lowest value, as in ONNX Runtime's quantizing kernels.
    Calls, not TIR selects: TVM's simplifier inlines a select's ``Let`` operands into its
    conditions, and on a fused chain of requantizations took exponential time (a QDQ
    ShuffleNet v2 never finished building)."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    def ordered(expr):
        """max(min(x, high), low) between constants as min(max(x, low), high)."""
        inner = expr.a
        constants = isinstance(expr.b, tirx.FloatImm) and isinstance(getattr(inner, "b", None), tirx.FloatImm)
        if type(expr) is tirx.Max and type(inner) is tirx.Min and constants and expr.b.value <= inner.b.value:
            return tirx.Min(tirx.Max(inner.a, expr.b), inner.b)
        return expr

    def ignoring(expr):
        if type(expr) not in (tirx.Max, tirx.Min) or str(expr.ty) not in ("float32", "float64"):
            return expr
        expr = ordered(expr)
        a, b = ignoring(expr.a), ignoring(expr.b)
        largest = type(expr) is tirx.Max
        if llvm:
            return tirx.call_llvm_pure_intrin(str(expr.ty), "llvm.maxnum" if largest else "llvm.minnum", a, b)
        name = f"r2c_{'max' if largest else 'min'}_{'f32' if str(expr.ty) == 'float32' else 'f64'}"
        return tirx.call_pure_extern(str(expr.ty), name, a, b)  # c_source.adapt defines them

    def to_integer(cast):
        if not str(cast.ty).startswith(("int", "uint")):
            return cast
        value = cast.value
        rounded = isinstance(value, tvm.ir.Call) and getattr(value.op, "name", "") in _ROUNDINGS
        clamp = value.args[0] if rounded else value
        clamped = ignoring(clamp)
        if clamped.same_as(clamp):
            return cast
        if rounded:
            clamped = (tirx.round if value.op.name == "tirx.round" else tirx.nearbyint)(clamped)
        return tirx.Cast(str(cast.ty), clamped)

    return tvm_ffi.structural_map(prims, [(tirx.Cast, to_integer)])


def nan_aware_comparisons(prims: IRModule, llvm: bool = False) -> IRModule:
    """``prims`` with float comparisons false whenever an operand is NaN (``!=``: true), as
    IEEE and C define them, whatever TVM's simplifier then does: it folds ``a == a``,
    ``a <= a`` to true and ``a != a`` to false, turns ``!(a < b)`` into ``a >= b`` (false for
    NaN, where the negation is true) and ``!(a == b)`` into ``a != b``, which its LLVM code
    makes ordered (false for NaN): ``Not(Equal(x, x))`` was false for a NaN ``x`` in both
    kernel sets, ``Not(Less(x, y))`` in the objects. So a negated comparison is replaced by
    its IEEE complement (``!(a < b)`` is ``a >= b || isnan(a) || isnan(b)``; De Morgan through
    ``&&``/``||``), a comparison of an operand with itself gets its NaN case spelled out, and
    (LLVM) ``a != b`` gains ``|| isnan(a) || isnan(b)``. Other comparisons, the hot ones
    (clamps, ReLU-like selects), are left as they are."""
    import tvm_ffi
    from tvm import tirx

    comparisons = (tirx.EQ, tirx.NE, tirx.LT, tirx.LE, tirx.GT, tirx.GE)
    complement = {tirx.EQ: tirx.NE, tirx.NE: tirx.EQ, tirx.LT: tirx.GE, tirx.GE: tirx.LT}
    complement |= {tirx.LE: tirx.GT, tirx.GT: tirx.LE}

    def unordered(a, b):  # true when either operand is NaN
        return tirx.Or(_isnan(a), _isnan(b))

    def compared(kind, a, b):
        """``kind(a, b)`` with its IEEE answer for NaN operands made explicit."""
        if kind is tirx.NE:
            same = tvm_ffi.structural_equal(a, b)
            return _isnan(a) if same else (tirx.Or(tirx.NE(a, b), unordered(a, b)) if llvm else tirx.NE(a, b))
        if tvm_ffi.structural_equal(a, b):  # a == a, a <= a, a >= a: !isnan(a); a < a: false
            return tirx.Not(_isnan(a)) if kind in (tirx.EQ, tirx.LE, tirx.GE) else tirx.const(False, "bool")
        return kind(a, b)

    def negated(expr):
        """``!expr`` with no negation left over a float comparison."""
        if isinstance(expr, comparisons) and _is_float(expr.a):
            kind = complement[type(expr)]
            (a, b), bindings = _bound([expr.a, expr.b], "cmp")
            if kind is tirx.NE or kind is tirx.EQ:  # !(a == b) is a != b; !(a != b) is a == b
                return _with_bindings(compared(kind, a, b), bindings)
            return _with_bindings(tirx.Or(compared(kind, a, b), unordered(a, b)), bindings)
        if isinstance(expr, tirx.And):
            return tirx.Or(negated(expr.a), negated(expr.b))
        if isinstance(expr, tirx.Or):
            return tirx.And(negated(expr.a), negated(expr.b))
        if isinstance(expr, tirx.Not):
            return expr.a
        if isinstance(expr, tirx.Let):
            return tirx.Let(expr.var, expr.value, negated(expr.body))
        return tirx.Not(expr)

    def plain(expr):
        return compared(type(expr), expr.a, expr.b) if _is_float(expr.a) else expr

    def negation(expr):
        return negated(expr.a)

    # post-order: a Not sees its comparison already rewritten by ``plain``
    return tvm_ffi.structural_map(prims, [(comparisons, plain), (tirx.Not, negation)])


def rounded_conversions(prims: IRModule) -> IRModule:
    """For LLVM: float32 rounded half to even and converted to int32 as LLVM's ``lrint`` (one
    ``cvtps2dq`` / ``fcvtns`` under the default rounding mode, which is half to even) instead
    of ``nearbyint`` then a truncating conversion. Out of range, both are undefined."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    def converted(cast):
        value = cast.value
        rounding = isinstance(value, tvm.ir.Call) and getattr(value.op, "name", "") in _ROUNDINGS
        if not rounding or not str(cast.ty).startswith("int32") or not str(value.ty).startswith("float32"):
            return cast
        return tirx.call_llvm_pure_intrin(str(cast.ty), "llvm.lrint", value.args[0])

    return tvm_ffi.structural_map(prims, [(tirx.Cast, converted)])


def _isnan(expr):
    """TIR's isnan; a constant's is folded (TVM's C generator has no isnan for bfloat16: asked
    of its float32 value, exact)."""
    from tvm import tirx

    if isinstance(expr, tirx.FloatImm):
        return tirx.const(math.isnan(expr.value), "bool")
    return tirx.isnan(expr if str(expr.ty) != "bfloat16" else tirx.Cast("float32", expr))


def _bound(operands: list, name: str) -> tuple[list, list]:
    """The operands with each that is not a plain load, variable or constant replaced by a
    variable, and the (variable, value) bindings: an operand read twice is computed once
    (nested clamps or comparisons would otherwise grow exponentially)."""
    import tvm
    from tvm import tirx

    bindings = []
    replaced = []
    for position, operand in enumerate(operands):
        if isinstance(operand, tvm.ir.TensorLoad | tirx.Var | tirx.FloatImm | tirx.IntImm):
            replaced.append(operand)
        else:
            bindings.append((tirx.Var(f"{name}_{'ab'[position]}", str(operand.ty)), operand))
            replaced.append(bindings[-1][0])
    return replaced, bindings


def _with_bindings(result, bindings: list):
    from tvm import tirx

    for var, value in reversed(bindings):
        result = tirx.Let(var, value, result)
    return result


def infinite_reduction_identities(prims: IRModule) -> IRModule:
    """``prims`` with float max/min reduction blocks initialised to -inf/+inf instead of
    -FLT_MAX/+FLT_MAX (TVM's identities). Only a block whose update is ``acc = max(acc, v)``
    (or min) of the buffer its init writes is changed."""
    return _reduction_identities(prims, infinite=True)


def finite_reduction_identities(prims: Any) -> Any:
    """The inverse of ``infinite_reduction_identities`` (on an IRModule or a PrimFunc): TVM's
    rfactor splits only reductions that start at its own identities, so a schedule that
    computes a row's maximum in partial results (one per vector lane) works on -FLT_MAX
    starts and gives its blocks -inf back afterwards: every partial and the combined maximum
    then start at -inf, as the serial block did, and the result is the same."""
    return _reduction_identities(prims, infinite=False)


def _reduction_identities(prims: Any, infinite: bool) -> Any:
    import tvm
    import tvm_ffi
    from tvm import s_tir, tirx

    signs = {tirx.Max: -1.0, tirx.Min: 1.0}

    def fix_block(block):
        init, body = block.init, block.body
        if not (isinstance(init, tirx.BufferStore) and isinstance(body, tirx.BufferStore)):
            return block
        if not (isinstance(init.value, tirx.FloatImm) and init.buffer.same_as(body.buffer)):
            return block
        update = body.value
        if type(update) not in signs:
            return block
        sign, largest = signs[type(update)], _largest_finite(str(init.value.ty))
        if largest is None:
            return block
        finite, infinite_start = sign * largest, sign * math.inf
        old, new = (finite, infinite_start) if infinite else (infinite_start, finite)
        if init.value.value != old:
            return block
        accumulator = update.a
        if not (isinstance(accumulator, tvm.ir.TensorLoad) and accumulator.source.same_as(body.buffer)):
            return block
        new_init = tirx.BufferStore(init.buffer, tirx.const(new, str(init.value.ty)), init.indices)
        padded.extend((r.source, old, new) for r in block.reads if not r.source.same_as(body.buffer))
        dtype = str(init.value.ty)  # the padding's start read inline (a scheduled pool)
        operand = tvm_ffi.structural_map(
            update.b, [(tirx.FloatImm, lambda c: tirx.const(new, dtype) if c.value == old else c)]
        )
        body = tirx.BufferStore(body.buffer, type(update)(update.a, operand), body.indices)
        return s_tir.SBlock(
            block.iter_vars, block.reads, block.writes, block.name_hint, body, new_init,
            block.alloc_buffers, block.match_buffers, block.annotations,
        )  # fmt: skip

    def fix_padding(block):
        """A max pool's padding is TVM's start too (``if_then_else(inside, x, -FLT_MAX)``, a
        stage of its own): a window of -inf and padding pooled to -FLT_MAX."""
        body = block.body
        if not isinstance(body, tirx.BufferStore) or not isinstance(body.value, tvm.ir.expr.Call):
            return block
        value = body.value
        if not value.op.same_as(tvm.ir.Op.get("prim.if_then_else")):
            return block
        fallback = value.args[2]
        for source, old, new in padded:
            if source.same_as(body.buffer) and isinstance(fallback, tirx.FloatImm) and fallback.value == old:
                padding = tirx.if_then_else(value.args[0], value.args[1], tirx.const(new, str(fallback.ty)))
                store = tirx.BufferStore(body.buffer, padding, body.indices)
                return s_tir.SBlock(
                    block.iter_vars, block.reads, block.writes, block.name_hint, store, block.init,
                    block.alloc_buffers, block.match_buffers, block.annotations,
                )  # fmt: skip
        return block

    padded: list = []  # (a buffer a fixed reduction reads, its old and new start)
    fixed = tvm_ffi.structural_map(prims, [(s_tir.SBlock, fix_block)])
    return tvm_ffi.structural_map(fixed, [(s_tir.SBlock, fix_padding)]) if padded else fixed


def _largest_finite(dtype: str) -> float | None:
    """The largest finite value of a float type, TVM's start of a min reduction (float16:
    65504, whose maximum of a row of -inf was then -65504)."""
    import ml_dtypes
    import numpy as np

    try:
        return float(ml_dtypes.finfo(np.dtype(dtype) if dtype != "bfloat16" else ml_dtypes.bfloat16).max)
    except (TypeError, ValueError):
        return None


def onnx_numerics(module: IRModule) -> IRModule:
    """Relax rewrite: Sign keeps NaN, ArgMax/ArgMin pick it, empty axes reduce to their
    identity, long float32 Sum and Mean accumulate in float64."""
    import numpy as np
    import tvm
    from tvm import relax

    sign = tvm.ir.Op.get("relax.sign")
    arg_reductions = {tvm.ir.Op.get("relax.argmax"): 1.0, tvm.ir.Op.get("relax.argmin"): -1.0}
    sums = (tvm.ir.Op.get("relax.sum"), tvm.ir.Op.get("relax.mean"))
    empty_identities = {
        tvm.ir.Op.get(f"relax.{name}"): name for name in ("sum", "mean", "max", "min", "prod")
    }

    def identity(name: str, dtype: str):
        if name in ("sum", "prod"):
            return 0 if name == "sum" else 1
        if dtype.startswith(("float", "bfloat")):
            return {"max": -math.inf, "min": math.inf, "mean": math.nan}[name]
        info = np.iinfo(np.dtype(dtype)) if dtype != "bool" else None
        if name == "mean" or info is None:
            return 0
        return info.min if name == "max" else info.max

    widened = {tvm.ir.Op.get(f"relax.{name}") for name in FLOAT16_IN_FLOAT32}

    @relax.expr_functor.mutator
    class _Numerics(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            dtype = str(getattr(call.ty, "dtype", ""))
            if (
                dtype == "float16"
                and call.op in widened
                and getattr(call.attrs, "out_dtype", None) in (None, "")
            ):
                # Accumulated in float32, rounded to float16 once (per operator, as NumPy
                # and ONNX Runtime's CPU kernels do); a float16 accumulator lost a unit in
                # the last place on attention rows and convolutions.
                args = [
                    relax.op.astype(a, "float32") if str(getattr(a.ty, "dtype", "")) == "float16" else a
                    for a in call.args
                ]
                wide = self.builder_.emit(relax.Call(call.op, args, call.attrs, call.ty_args))
                return relax.op.astype(wide, "float16")
            if call.op == sign and dtype.startswith("float"):
                x = call.args[0]
                probe = relax.op.astype(x, "float32") if dtype == "bfloat16" else x  # (C: no bfloat16 isnan)
                return relax.op.where(relax.op.isnan(probe), x, call)
            if call.op in arg_reductions and str(call.args[0].ty.dtype).startswith("float"):
                direction = arg_reductions[call.op]  # +1: ArgMax
                wide = self.builder_.emit(relax.op.astype(call.args[0], "float64"))
                worst = relax.const(-direction * math.inf, "float64")
                finite = relax.const(-direction * 1e300, "float64")
                finite_worst = self.builder_.emit(relax.op.where(relax.op.equal(wide, worst), finite, wide))
                best = relax.const(direction * math.inf, "float64")
                picked = self.builder_.emit(relax.op.where(relax.op.isnan(wide), best, finite_worst))
                return relax.Call(call.op, [picked], call.attrs, call.ty_args)
            if call.op not in empty_identities:
                return call
            shape, out_shape = static_shape(call.args[0]), static_shape(call)
            if shape is None or out_shape is None:
                return call
            if math.prod(shape) == 0 and math.prod(out_shape) > 0:  # an empty axis reduced
                value = identity(empty_identities[call.op], dtype)
                return relax.op.broadcast_to(relax.const(value, dtype), out_shape)
            reduced = math.prod(shape) // max(1, math.prod(out_shape))
            if call.op in sums and dtype == "float32" and reduced >= WIDE_ACCUMULATION_ELEMENTS:
                # A mean becomes sum / n: TVM fuses the widening cast into a sum, not a mean.
                axis = call.attrs.axis
                wide = self.builder_.emit(relax.op.astype(call.args[0], "float64"))
                total = self.builder_.emit(
                    relax.op.sum(wide, None if axis is None else list(axis), bool(call.attrs.keepdims))
                )
                if call.op == sums[1]:
                    total = self.builder_.emit(relax.op.divide(total, relax.const(float(reduced), "float64")))
                return relax.op.astype(total, "float32")
            return call

    return rewrite_functions(module, _Numerics(module))
