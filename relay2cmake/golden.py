"""Golden data: seeded inputs, and reference outputs that two independent paths agree on.

No single reference is trusted: ``onnx``'s reference evaluator runs BatchNormalization in
training mode when ``training_mode`` is absent, and any runner can have such a bug. The
paths are tried in order of trust (the frontend's independent runners, e.g. ONNX Runtime
then ONNX's reference evaluator, or PyTorch; then TVM's VM on the unoptimised import)
until two agree within the recorded tolerance; the more trusted of that pair is recorded,
and every path that disagreed is named in ``notes``. When no two agree, generation stops
(``UnconfirmedReference``) unless the caller accepts an unconfirmed reference.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from relay2cmake.dtypes import PACKED, RAW_BITS, lookup, numpy_dtype, pack, unpack
from relay2cmake.errors import ModelError, describe
from relay2cmake.frontends import ImportedModel, Reference
from relay2cmake.symbolic import evaluate

SEED = 20240611
# Golden floats are N(0.5, 1): a non-zero mean, so that a normalisation or reduction that
# wrongly subtracts (or ignores) a mean changes the result.
INPUT_MEAN = 0.5
TVM_VM = "tvm-vm"


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class GoldenData:
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    tolerances: tuple[Tolerance, ...]
    reference: str  # the path whose outputs are recorded: "onnxruntime", "torch", "tvm-vm", ...
    confirmed_by: tuple[str, ...] = ()  # the other paths that agree with it
    notes: tuple[str, ...] = ()  # paths that disagreed (or no confirmation), one line each: warnings
    unavailable: tuple[str, ...] = ()  # paths that could not run the model, one line each
    # Models with run-time dimensions: the same at other values of them (the data above is at
    # the largest), each a GoldenData of its own (``dims`` says which values).
    cases: tuple[GoldenData, ...] = ()
    dims: tuple[int, ...] = ()


class UnconfirmedReference(ModelError):
    """No two reference paths agree: the recorded outputs would be a guess."""


# Integer inputs are drawn from [0, high): small non-negative values are safe as indices,
# counts and values alike, but a dimension smaller than 4 makes some indices invalid (ONNX
# Runtime refuses them, other paths read anywhere), so inputs are drawn again with narrower
# ranges, down to all zeros, until the references agree.
INTEGER_RANGES = (4, 2, 1)


def case_dims(imported: ImportedModel) -> list[tuple[int, ...]]:
    """The values of the run-time dimensions golden cases besides the largest are recorded
    at: every dimension at its smallest, then every one half-way."""
    lows = tuple(d.low for d in imported.dims)
    middles = tuple((d.low + d.high) // 2 for d in imported.dims)
    highs = tuple(d.high for d in imported.dims)
    return [values for values in dict.fromkeys([lows, middles]) if values != highs]


def at_dims(imported: ImportedModel, values: tuple[int, ...]) -> ImportedModel:
    """``imported`` as seen at these values of its run-time dimensions: its signatures' shapes
    are those values' (the module and the references take any shape in the ranges)."""
    import dataclasses

    def shaped(signature):
        if not signature.symbolic:
            return signature
        shape = tuple(
            evaluate(expr, values) if expr is not None else extent
            for expr, extent in zip(signature.symbolic, signature.shape, strict=True)
        )
        return dataclasses.replace(signature, shape=shape)

    return dataclasses.replace(
        imported,
        inputs=tuple(shaped(s) for s in imported.inputs),
        outputs=tuple(shaped(s) for s in imported.outputs),
    )


def make_inputs(
    imported: ImportedModel, seed: int = SEED, integer_high: int = 4, floats: str = "normal"
) -> tuple[np.ndarray, ...]:
    """``floats``: "normal" (standard normal values around INPUT_MEAN), "unit" (in [0, 1)) or
    "whole" (integers in [0, integer_high), for float inputs used as indices)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for signature in imported.inputs:
        dtype = numpy_dtype(signature.dtype)
        if signature.name in imported.settled_values:
            array = imported.settled_values[signature.name]
        elif signature.dtype in PACKED and signature.dtype.startswith(("int", "uint")):
            # every value of the type: the sign of int4/int2 is in their top bit
            bits = lookup(signature.dtype).bits
            low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if signature.dtype[0] == "i" else (0, 1 << bits)
            array = rng.integers(low, high, signature.shape).astype(dtype)
        elif dtype.kind == "f" or signature.dtype in RAW_BITS:
            if floats == "unit":
                array = rng.uniform(0.0, 1.0, signature.shape)
            elif floats == "whole":
                array = rng.integers(0, integer_high, signature.shape).astype(np.float64)
            else:
                array = rng.standard_normal(signature.shape) + INPUT_MEAN
            if signature.dtype == "float8_e8m0fnu":  # powers of two only: no sign, no zero
                array = np.abs(array) + 0.25
            array = array.astype(dtype)
        elif dtype.kind == "b":
            array = rng.integers(0, 2, signature.shape).astype(dtype)
        else:
            # Small non-negative integers: safe as indices, counts and values alike.
            array = rng.integers(0, integer_high, signature.shape).astype(dtype)
        arrays.append(np.asarray(array, order="C"))  # ascontiguousarray would make 0-d arrays 1-d
    return tuple(arrays)


def tolerance_for(expected: np.ndarray, quantum: float | None = None) -> Tolerance:
    """How far another path's output may be from ``expected``: float rounding; for an output
    a quantized operator gives (``quantum``: the step of its values), one step as well."""
    tolerance = _rounding_tolerance(expected)
    if quantum is None:
        return tolerance
    return Tolerance(max(tolerance.atol, quantum * (1 + 1e-4)), tolerance.rtol)


def _rounding_tolerance(expected: np.ndarray) -> Tolerance:
    if expected.dtype.name == "bfloat16":  # 8 significant bits
        finite = expected.astype(np.float32)
        finite = finite[np.isfinite(finite)]
        scale = float(np.max(np.abs(finite))) if finite.size else 1.0
        return Tolerance(1e-2 * max(1.0, scale), 2e-2)
    if expected.dtype.kind != "f":
        return Tolerance(0.0, 0.0)
    finite = expected[np.isfinite(expected)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    if expected.dtype == np.float16:
        return Tolerance(1e-2 * max(1.0, scale), 1e-2)
    if expected.dtype == np.float64:
        return Tolerance(1e-8 * max(1.0, scale), 1e-6)
    return Tolerance(1e-4 * max(1.0, scale), 1e-3)


def elements_match(got: np.ndarray, want: np.ndarray, tolerance: Tolerance) -> np.ndarray:
    """Per element: NaN matches only NaN, an infinity only the same infinity, and finite
    values match within ``atol + rtol * |want|`` (the package's golden test uses the same
    rule). ``inf - inf`` is NaN, so a plain ``|got - want| <= tol`` gets both wrong."""
    got = np.asarray(got, dtype=np.float64) if got.dtype.kind in "fc" or got.dtype.name in RAW_BITS else got
    want = (
        np.asarray(want, dtype=np.float64) if want.dtype.kind in "fc" or want.dtype.name in RAW_BITS else want
    )
    if got.dtype.kind != "f" or want.dtype.kind != "f":
        if tolerance.atol > 0 and got.dtype.kind in "iub" and want.dtype.kind in "iub":  # quantized
            return np.abs(got.astype(np.float64) - want.astype(np.float64)) <= tolerance.atol
        return np.asarray(got == want)
    with np.errstate(invalid="ignore", over="ignore"):
        close = np.abs(got - want) <= tolerance.atol + tolerance.rtol * np.abs(want)
    both_nan = np.isnan(got) & np.isnan(want)
    same_inf = np.isinf(want) & (got == want)
    finite_pair = np.isfinite(got) & np.isfinite(want)
    return both_nan | same_inf | (finite_pair & close)


@dataclass(frozen=True)
class Difference:
    output: str
    max_abs_error: float  # over elements that are finite in both; inf when shapes or specials differ
    mismatched: int  # elements out of tolerance
    total: int

    def describe(self) -> str:
        return (
            f"output {self.output!r}: {self.mismatched} of {self.total} elements differ "
            f"(max abs error {self.max_abs_error:.3g})"
        )


def compare(name: str, got: np.ndarray, want: np.ndarray, tolerance: Tolerance) -> Difference | None:
    """None when ``got`` matches ``want`` everywhere, else what differs."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Difference(name, float("inf"), max(got.size, want.size), max(got.size, want.size))
    matches = elements_match(got, want, tolerance)
    if bool(np.all(matches)):
        return None
    as_float = got.dtype.kind in "fiub" and want.dtype.kind in "fiub"
    if as_float:
        g, w = got.astype(np.float64), want.astype(np.float64)
        finite = np.isfinite(g) & np.isfinite(w)
        errors = np.abs(g[finite] - w[finite])
        worst = float(errors.max()) if errors.size else float("inf")
    else:
        worst = float("inf")
    return Difference(name, worst, int(matches.size - np.count_nonzero(matches)), int(matches.size))


# TVM's sorting kernels (tvm.contrib.sort, which its VM calls for sort, argsort and TopK) refuse
# 16-bit and wider unsigned integers; for those the VM path sorts with NumPy instead, so that it
# can confirm the ONNX reference where ONNX Runtime has no kernel either (TopK of uint64).
_CONTRIB_SORT_DTYPES = frozenset({"int16", "uint16", "uint32", "uint64"})
_contrib_sorts: dict[str, Callable] = {}


def _ordered(data: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    """Indices along ``axis`` by value, ties by lower index first either way."""
    if ascending:
        return np.argsort(data, axis=axis, kind="stable")
    size = data.shape[axis]
    # descending with ties in index order: a stable ascending sort of the reversed axis, reversed
    return size - 1 - np.flip(np.argsort(np.flip(data, axis), axis=axis, kind="stable"), axis)


def _sort_fallback(data, out, axis, is_ascend) -> None:
    array = data.numpy()
    order = _ordered(array, int(axis), bool(is_ascend))
    out.copyfrom(np.take_along_axis(array, order, int(axis)))


def _argsort_fallback(data, out, axis, is_ascend) -> None:
    order = _ordered(data.numpy(), int(axis), bool(is_ascend))
    out.copyfrom(order.astype(out.dtype))


def _topk_fallback(data, *rest) -> None:
    *outs, k, axis, ret_type, is_ascend = rest
    array, axis = data.numpy(), int(axis) % data.numpy().ndim
    order = _ordered(array, axis, bool(is_ascend))
    if int(k) >= 1:
        order = np.take(order, np.arange(int(k)), axis=axis)
    results = {"values": np.take_along_axis(array, order, axis), "indices": order}
    wanted = ["values", "indices"] if ret_type == "both" else [str(ret_type)]
    for out, name in zip(outs, wanted, strict=True):
        out.copyfrom(results[name].astype(out.dtype))


def _register_sort_fallbacks() -> None:
    import tvm

    fallbacks = {"sort": _sort_fallback, "argsort": _argsort_fallback, "topk": _topk_fallback}
    for name, fallback in fallbacks.items():
        full = f"tvm.contrib.sort.{name}"
        if full in _contrib_sorts:
            continue
        _contrib_sorts[full] = tvm.get_global_func(full)

        def dispatch(data, *rest, _full=full, _fallback=fallback):
            if str(data.dtype) in _CONTRIB_SORT_DTYPES:
                return _fallback(data, *rest)
            return _contrib_sorts[_full](data, *rest)

        tvm.register_global_func(full, dispatch, override=True)


def tvm_vm_reference(imported: ImportedModel, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """TVM's own VM on the unoptimised import: none of our rewrites, schedules or driver."""
    import tvm
    from tvm import relax

    _register_sort_fallbacks()
    executable = tvm.compile(imported.module, target=tvm.target.Target("llvm"))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    # main takes and returns a sub-byte tensor as its packed bytes (the C API's layout)
    inputs = [
        pack(a, s.dtype) if s.dtype in PACKED else a for a, s in zip(inputs, imported.inputs, strict=True)
    ]
    result = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    values = [result] if hasattr(result, "numpy") else list(result)
    # main also returns the extents of bounded outputs after the outputs: each bounded output
    # is the start of its buffer, with that extent along its dynamic axis.
    extents = iter(int(v.numpy().reshape(-1)[0]) for v in values[len(imported.outputs) :])
    arrays = []
    for signature, value in zip(imported.outputs, values, strict=False):
        array = value.numpy()
        if signature.dtype in PACKED:
            array = unpack(array, signature.dtype, signature.shape)
        if signature.dynamic_axis is not None:
            shape = list(array.shape)
            shape[signature.dynamic_axis] = next(extents)
            array = array.reshape(-1)[: math.prod(shape)].reshape(shape)
        arrays.append(array)
    return arrays


def _conform(imported: ImportedModel, outputs) -> list[np.ndarray]:
    """A path's outputs in the signature's dtypes and shapes."""
    if len(outputs) != len(imported.outputs):
        raise ValueError(f"{len(outputs)} outputs for the model's {len(imported.outputs)}")
    result = []
    for signature, array in zip(imported.outputs, outputs, strict=True):
        array = np.asarray(array).astype(numpy_dtype(signature.dtype), copy=False)
        # A bounded output keeps its actual shape (at most the bound along its dynamic axis).
        shape = array.shape if signature.dynamic_axis is not None else signature.shape
        result.append(np.asarray(array.reshape(shape), order="C"))
    return result


def _run_quietly(run: Callable, inputs, collect: bool = True) -> list:
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return list(run(inputs))
    finally:
        # A runner's model (onnx's reference evaluator holds it in reference cycles) is as
        # large as the weights: freed now, not at some later collection.
        if collect:
            gc.collect()


def reference_paths(imported: ImportedModel) -> list[Reference]:
    """The frontend's independent runners, most trusted first, then TVM's VM."""
    return [*imported.references, Reference(TVM_VM, lambda inputs: tvm_vm_reference(imported, inputs))]


def _differences(imported, got, want) -> list[Difference]:
    tolerances = [tolerance_for(w, q) for w, q in zip(want, _quanta(imported), strict=True)]
    found = []
    for signature, g, w, t in zip(imported.outputs, got, want, tolerances, strict=True):
        difference = compare(signature.name, g, w, t)
        if difference is not None:
            found.append(difference)
    return found


def _quanta(imported: ImportedModel) -> tuple[float | None, ...]:
    return imported.output_quanta or (None,) * len(imported.outputs)


def compute(
    imported: ImportedModel, accept_unconfirmed: bool = False, paths: list[Reference] | None = None
) -> GoldenData:
    """Seeded inputs, and the outputs of the most trusted path that a second path confirms."""
    paths = reference_paths(imported) if paths is None else paths
    attempts = _input_attempts(imported)
    for high, floats in attempts[:-1]:
        try:
            return _compute(imported, _fitting_inputs(imported, paths, high, floats), False, paths)
        except UnconfirmedReference:
            continue
    high, floats = attempts[-1]
    inputs = _fitting_inputs(imported, paths, high, floats)
    return _compute(imported, inputs, accept_unconfirmed, paths)


FITTING_DRAWS = 32  # seeds tried for inputs whose values set an output's shape
FITTING_SECONDS = 10.0  # and the time they may take
# Draws between collections of the runners' garbage: a collection takes about 25 ms with TVM
# loaded, which was most of the probing (a model no draw fits, probed by two runners for each
# of 32 draws and 3 kinds of input: 5.0 of 7.1 s); at most this many models' copies wait.
FITTING_COLLECT_EVERY = 4


def _fitting_inputs(
    imported: ImportedModel, paths: list[Reference], high: int, floats: str
) -> tuple[np.ndarray, ...]:
    """The seeded inputs, or, when the references' outputs on them do not have the shapes the
    package computes (inputs whose values set a shape: Range's bounds, a Loop's count computed
    from inputs) or they fail on them, the first of further seeds on which one does. Probed
    with the references other than TVM's VM (it compiles the model on every call), within
    FITTING_SECONDS; the seeded inputs when no draw fits."""
    import time

    first = make_inputs(imported, integer_high=high, floats=floats)
    probes = [p for p in paths if p.name != TVM_VM]
    start = time.perf_counter()
    try:
        for draw in range(FITTING_DRAWS):
            if draw and time.perf_counter() - start > FITTING_SECONDS:
                break
            inputs = first if draw == 0 else make_inputs(imported, SEED + draw, high, floats)
            for path in probes:
                try:
                    _conform(imported, _run_quietly(path.run, inputs, collect=False))
                except Exception:
                    continue  # this path fails on this draw, or its shapes are not the package's
                return inputs
            if draw % FITTING_COLLECT_EVERY == FITTING_COLLECT_EVERY - 1:
                gc.collect()
        return first
    finally:
        gc.collect()


def _input_attempts(imported: ImportedModel) -> list[tuple[int, str]]:
    """(integer range, kind of floats) for each draw of golden inputs, until references agree:
    narrower integers (see INTEGER_RANGES), then whole floats, for float inputs used as indices
    (OneHot's: ONNX Runtime casts 0.4 to index 0, ONNX's reference matches it with nothing),
    then floats in [0, 1), for inputs that are probabilities or thresholds (NonMaxSuppression's
    IoU threshold: ONNX Runtime refuses one outside [0, 1])."""
    kinds = {numpy_dtype(s.dtype).kind for s in imported.inputs}
    ranges = INTEGER_RANGES if kinds & {"i", "u"} else INTEGER_RANGES[:1]
    attempts = [(high, "normal") for high in ranges]
    if "f" in kinds:
        attempts += [(INTEGER_RANGES[0], "whole"), (ranges[-1], "unit")]
    return attempts


def _compute(
    imported: ImportedModel, inputs: tuple[np.ndarray, ...], accept_unconfirmed: bool, paths: list[Reference]
) -> GoldenData:
    results: list[tuple[str, list[np.ndarray]]] = []
    notes: list[str] = []
    unavailable: list[str] = []
    chosen: tuple[str, list[np.ndarray], str] | None = None
    for path in paths:
        try:
            outputs = _conform(imported, _run_quietly(path.run, inputs))
        except Exception as exc:
            unavailable.append(f"{path.name} could not run the model ({describe(exc, 200)})")
            continue
        for name, earlier in results:
            if not _differences(imported, outputs, earlier):
                chosen = (name, earlier, path.name)
                break
        results.append((path.name, outputs))
        if chosen is not None:
            break
    if chosen is None:
        if len(paths) == 1 and results:  # the format has no path besides TVM's (TVMScript)
            name, outputs = results[0]
            return _golden(imported, inputs, outputs, name, (), notes, unavailable)
        detail = _disagreement(imported, results)
        if accept_unconfirmed and results:
            name, outputs = results[0]
            notes.append(f"the golden outputs are unconfirmed: {detail}")
            return _golden(imported, inputs, outputs, name, (), notes, unavailable)
        raise UnconfirmedReference(
            f"Cannot record trustworthy golden outputs: {detail}. "
            + (f"Also: {'; '.join(unavailable)}. " if unavailable else "")
            + "Pass --allow-unverified to write the package anyway with the first path's outputs."
        )
    name, outputs, confirmer = chosen
    for other, other_outputs in results:
        if other in (name, confirmer):
            continue
        worst = _differences(imported, other_outputs, outputs)
        notes.append(
            f"{other} disagrees with {name} and {confirmer} ({worst[0].describe()}); "
            f"the golden data use {name}"
        )
    return _golden(imported, inputs, outputs, name, (confirmer,), notes, unavailable)


def _disagreement(imported, results) -> str:
    if not results:
        return "no reference path could run the model"
    if len(results) == 1:
        return f"only {results[0][0]} could run the model, so nothing confirms its outputs"
    (first, a), (second, b) = results[0], results[1]
    return f"{first} and {second} disagree ({_differences(imported, b, a)[0].describe()})" + (
        f", and {', '.join(n for n, _ in results[2:])} agrees with neither" if len(results) > 2 else ""
    )


def _golden(
    imported: ImportedModel,
    inputs,
    outputs,
    reference: str,
    confirmed_by: tuple[str, ...],
    notes: list[str],
    unavailable: list[str],
) -> GoldenData:
    return GoldenData(
        inputs=inputs,
        expected=tuple(outputs),
        tolerances=tuple(tolerance_for(e, q) for e, q in zip(outputs, _quanta(imported), strict=True)),
        reference=reference,
        confirmed_by=confirmed_by,
        notes=tuple(notes),
        unavailable=tuple(unavailable),
    )
