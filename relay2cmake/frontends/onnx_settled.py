"""Shape parameters given at run time, settled by the shapes the model declares.

ONNX lets a node read its axes, target shape, repeats, K, split sizes or output sizes from a
tensor computed at run time — often a model input. A static package needs them at generation
time. When the model declares the shapes of the node's outputs, only a few values of the
parameter can give those shapes; this module works them out per operator (the
*alternatives*), converts the node once per distinct result (a *variant*: two sets of
reduced axes that differ only in axes of size 1 reduce the same elements), and makes the
package check at run time which alternative the tensor holds:

- the tensor is put in a normal form in Relax (negative axes wrapped, a set of axes as
  counts per axis, Reshape's 0 and -1 resolved), compared with each alternative's row, and
  the package builtin ``settle`` picks the first that matches — or stops the run with
  ``<P>_ERROR_INVALID_INPUT`` and a message naming the node and the values it accepts;
- the node's result is the chosen variant's (``where`` on the chosen index: with one
  variant it selects between the result and zeros, so the check is never dead code).

Values that give other shapes are refused at run time, as a static package must; the user
who wants them regenerates with ``--constant-input`` or other input shapes. Nothing here
trusts the declarations: a parameter that matches none stops the run.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax

from relay2cmake.builtins import INPUT_MARK, SETTLE
from relay2cmake.frontends.onnx_converter_support import _i64
from relay2cmake.relax_shapes import static_dims

# Tensor name → the static shape the model declares (or ONNX's inference derives) for it,
# while a model is imported.
DECLARED_SHAPES: ContextVar[dict[str, tuple[int, ...]] | None] = ContextVar("DECLARED_SHAPES", default=None)
# The declared shapes of the outputs of the node being converted (None where unknown), for
# converters that compute with a parameter given at run time (Pad, Range).
NODE_OUTPUT_SHAPES: ContextVar[list | None] = ContextVar("NODE_OUTPUT_SHAPES", default=None)
# Filled while a model is imported: model input index → a value its settlement accepts.
SETTLED_VALUES: ContextVar[dict[int, np.ndarray] | None] = ContextVar("SETTLED_VALUES", default=None)
# The model's inputs (``main``'s parameters, in order) while a model is imported.
MODEL_INPUTS: ContextVar[list | None] = ContextVar("MODEL_INPUTS", default=None)


def model_input_index(expr: relax.Expr) -> int | None:
    """Which model input ``expr`` is, if it is one."""
    inputs = MODEL_INPUTS.get() or []
    return next((i for i, v in enumerate(inputs) if v.same_as(expr)), None)


def accept(expr: relax.Expr, value: np.ndarray | list | int) -> None:
    """Record ``value`` as one the package accepts for ``expr`` when that is a model input:
    the golden step feeds it (random numbers would be refused)."""
    index = model_input_index(expr)
    settled = SETTLED_VALUES.get()
    dims = static_dims(expr.ty)
    if index is not None and settled is not None and dims is not None:
        settled.setdefault(index, np.asarray(value, dtype=str(expr.ty.dtype)).reshape(dims))


_INVALID = -2  # a normal-form entry no alternative holds (dimensions are never negative)


@dataclass(frozen=True)
class Settlement:
    slot: int  # the node input the rule settles
    rows: tuple[tuple[int, ...], ...]  # the normal forms the run-time tensor may take
    variants: tuple[np.ndarray, ...]  # the constant to convert the node with, per distinct result
    variant_of: tuple[int, ...]  # row → its variant
    normal_form: Callable  # (bb, tensor [k] of ``compared``) → tensor [len(row)]
    accepted: str  # the values accepted, for the run-time message
    compared: str = "int64"  # the type the tensor is compared in


@dataclass(frozen=True)
class NodeShapes:
    inputs: list[list[int] | None]
    outputs: list[tuple[int, ...] | None]
    attrs: dict
    length: int  # elements of the parameter tensor


def declared_output() -> tuple[int, ...] | None:
    """The shape the model declares (or ONNX infers) for the first output of the node being
    converted, or None."""
    shapes = NODE_OUTPUT_SHAPES.get() or [None]
    return shapes[0]


def _counts_per_axis(rank: int):
    """Axes → how often each of [0, rank) is named (negative ones wrapped); an axis out of
    range counts nowhere, so the total no longer matches."""

    def form(bb, axes):
        wrapped = bb.emit(relax.op.where(relax.op.less(axes, _i64(0)), relax.op.add(axes, _i64(rank)), axes))
        table = relax.op.equal(relax.op.expand_dims(wrapped, 1), _i64(np.arange(rank)[None, :]))
        return bb.emit(relax.op.sum(relax.op.astype(table, "int64"), axis=[0]))

    return form


def _as_given(bb, values):
    return values


def _axes_rows(sets: list[tuple[int, ...]], rank: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(a in s) for a in range(rank)) for s in sets)


def _sets_text(sets: list[tuple[int, ...]]) -> str:
    return " or ".join(str(list(s)) for s in sets)


def _axes_settlement(sets: list[tuple[int, ...]], rank: int, keys: list | None = None) -> Settlement | None:
    """Sets of axes (over ``rank`` axes) the tensor may name; ``keys`` groups them by result
    (None: every set gives the same data, one variant)."""
    if not sets:
        return None
    keys = keys if keys is not None else [()] * len(sets)
    distinct = list(dict.fromkeys(keys))
    variants = tuple(np.asarray(sets[keys.index(k)], dtype="int64") for k in distinct)
    return Settlement(
        1, _axes_rows(sets, rank), variants, tuple(distinct.index(k) for k in keys),
        _counts_per_axis(rank), f"axes {_sets_text(sets)}",
    )  # fmt: skip


def _reduce(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None:
        return None
    keep = bool(shapes.attrs.get("keepdims", 1))
    rank = len(data)
    sets = []
    for axes in itertools.combinations(range(rank), shapes.length):
        reduced = (
            [1 if a in axes else d for a, d in enumerate(data)]
            if keep
            else [d for a, d in enumerate(data) if a not in axes]
        )
        if tuple(reduced) == out:
            sets.append(axes)
    # Axes of extent 1 add no elements to a reduction: sets differing only there agree.
    return _axes_settlement(sets, rank, [tuple(a for a in s if data[a] != 1) for s in sets])


def _squeeze(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None:
        return None
    rank = len(data)
    sets = [
        axes
        for axes in itertools.combinations(range(rank), shapes.length)
        if all(data[a] == 1 for a in axes) and tuple(d for a, d in enumerate(data) if a not in axes) == out
    ]
    # Every such set removes only extents of 1: the data is the same for all.
    return _axes_settlement(sets, rank)


def _unsqueeze(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None:
        return None
    rank = len(data) + shapes.length
    sets = []
    for axes in itertools.combinations(range(rank), shapes.length):
        rest = iter(data)
        if tuple(1 if a in axes else next(rest) for a in range(rank)) == out:
            sets.append(axes)
    return _axes_settlement(sets, rank)


def _reshape(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None or len(out) != shapes.length:
        return None
    allow_zero = bool(shapes.attrs.get("allowzero", 0))
    # 0 copies the input's extent at that position (unless allowzero); -1 is inferred, and
    # with every other extent equal to the declared one it can only be the declared one.
    copied = [data[i] if i < len(data) else _INVALID for i in range(len(out))]

    def form(bb, target):
        resolved = relax.op.where(relax.op.equal(target, _i64(-1)), _i64(out), target)
        if not allow_zero:
            resolved = relax.op.where(relax.op.equal(target, _i64(0)), _i64(copied), resolved)
        inferred = relax.op.sum(
            relax.op.astype(relax.op.equal(target, _i64(-1)), "int64"), axis=[0], keepdims=True
        )
        return bb.emit(relax.op.concat([resolved, inferred], axis=0))

    rows = ((*out, 0), (*out, 1))
    return Settlement(1, rows, (np.asarray(out, dtype="int64"),), (0, 0), form, f"shape {list(out)}")


def _expand(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    k = shapes.length
    if data is None or out is None or len(out) != max(len(data), k):
        return None
    if len(data) > k and tuple(data[: len(data) - k]) != out[: len(data) - k]:
        return None
    target = out[len(out) - k :]
    aligned = [data[len(data) - k + i] if len(data) - k + i >= 0 else 1 for i in range(k)]

    def form(bb, shape):
        # Broadcasting (input extent, asked extent): 1 keeps the input's; an input extent of
        # 1 takes the asked one; two other extents must be equal.
        given = _i64(aligned)
        fits = relax.op.logical_or(relax.op.equal(given, _i64(1)), relax.op.equal(given, shape))
        broadcast = relax.op.where(fits, shape, _i64(_INVALID))
        return bb.emit(relax.op.where(relax.op.equal(shape, _i64(1)), given, broadcast))

    return Settlement(
        1, (tuple(target),), (np.asarray(target, dtype="int64"),), (0,), form, f"shape {list(target)}"
    )


def _exact(slot: int, row: list[int], what: str, normal_form=_as_given) -> Settlement:
    return Settlement(
        slot, (tuple(row),), (np.asarray(row, dtype="int64"),), (0,), normal_form, f"{what} {row}"
    )


def _tile(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None or len(data) != len(out) or shapes.length != len(data):
        return None
    if any(d == 0 or o % d for d, o in zip(data, out, strict=True)):
        return None
    return _exact(1, [o // d for d, o in zip(data, out, strict=True)], "repeats")


def _output_shape(slot: int, what: str) -> Callable[[NodeShapes], Settlement | None]:
    """The rule for a parameter that is the whole output shape: ConstantOfShape's shape,
    MaxUnpool's output_shape."""

    def rule(shapes: NodeShapes) -> Settlement | None:
        out = shapes.outputs[0]
        if out is None or len(out) != shapes.length:
            return None
        return _exact(slot, list(out), what)

    return rule


def _axis(shapes: NodeShapes, rank: int, default: int = -1) -> int:
    return int(shapes.attrs.get("axis", default)) % rank


def _top_k(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None or shapes.length != 1:
        return None
    return _exact(1, [out[_axis(shapes, len(data))]], "K")


def _split(shapes: NodeShapes) -> Settlement | None:
    data = shapes.inputs[0]
    if data is None or any(o is None for o in shapes.outputs) or shapes.length != len(shapes.outputs):
        return None
    axis = _axis(shapes, len(data), 0)
    return _exact(1, [o[axis] for o in shapes.outputs if o is not None], "split")


def _extents_of_axes(slot: int, what: str) -> Callable[[NodeShapes], Settlement | None]:
    """The rule for a parameter that lists the output's extent on each of the ``axes``
    attribute (all by default): CenterCropPad's shape, Resize's sizes."""

    def rule(shapes: NodeShapes) -> Settlement | None:
        data, out = shapes.inputs[0], shapes.outputs[0]
        if data is None or out is None:
            return None
        axes = [int(a) % len(data) for a in shapes.attrs.get("axes", range(len(data)))]
        if len(axes) != shapes.length:
            return None
        return _exact(slot, [out[a] for a in axes], what)

    return rule


def _resize_sizes(shapes: NodeShapes) -> Settlement | None:
    """Resize's sizes, unless a keep_aspect_ratio_policy makes many sizes give one output
    (onnx_resize computes and checks those at run time)."""
    policy = shapes.attrs.get("keep_aspect_ratio_policy", b"stretch")
    if (policy.decode() if isinstance(policy, bytes) else str(policy)) != "stretch":
        return None
    return _extents_of_axes(3, "sizes")(shapes)


def _one_hot(shapes: NodeShapes) -> Settlement | None:
    out = shapes.outputs[0]
    if out is None or shapes.length != 1:
        return None
    return _exact(1, [out[_axis(shapes, len(out))]], "depth")


def _loop_iterations(shapes: NodeShapes) -> int | None:
    """How often a Loop runs, from its first scan output's declared extent (the outputs after
    the carried values, one per input after the count and the condition)."""
    scans = shapes.outputs[len(shapes.inputs) - 2 :]
    extents = {out[0] for out in scans if out}
    return extents.pop() if len(extents) == 1 and shapes.length == 1 else None


def _loop_count(shapes: NodeShapes) -> Settlement | None:
    iterations = _loop_iterations(shapes)
    return None if iterations is None else _exact(0, [iterations], "trip count")


def _loop_condition(shapes: NodeShapes) -> Settlement | None:
    """The first condition: true whenever the loop runs (its body then says when to stop)."""
    iterations = _loop_iterations(shapes)
    return None if iterations is None else _exact(1, [int(iterations > 0)], "condition")


def _window_size(shapes: NodeShapes) -> Settlement | None:
    """HannWindow, HammingWindow, BlackmanWindow: the window is as long as its size says."""
    out = shapes.outputs[0]
    if out is None or len(out) != 1 or shapes.length != 1:
        return None
    return _exact(0, [out[0]], "size")


def _mel_bands(shapes: NodeShapes) -> Settlement | None:
    """MelWeightMatrix's num_mel_bins: the output's second extent."""
    out = shapes.outputs[0]
    if out is None or len(out) != 2 or shapes.length != 1:
        return None
    return _exact(0, [out[1]], "num_mel_bins")


def _mel_dft_length(shapes: NodeShapes) -> Settlement | None:
    """MelWeightMatrix's dft_length: dft_length // 2 + 1 bins, so two lengths give the declared
    output; the length also sets the values (one variant each)."""
    out = shapes.outputs[0]
    if out is None or len(out) != 2 or shapes.length != 1 or out[0] < 1:
        return None
    lengths = (2 * (out[0] - 1), 2 * (out[0] - 1) + 1)
    return Settlement(
        1, tuple((n,) for n in lengths), tuple(np.asarray(n, dtype="int64") for n in lengths), (0, 1),
        _as_given, f"dft_length in {list(lengths)}",
    )  # fmt: skip


def _affine_grid(shapes: NodeShapes) -> Settlement | None:
    """AffineGrid's size [N, C, spatial...]: the grid [N, spatial..., k] says all but C, which
    the grid does not depend on (compared as 0, converted as 1)."""
    out = shapes.outputs[0]
    if out is None or len(out) < 3 or shapes.length != len(out) or out[-1] != len(out) - 2:
        return None
    row = [out[0], 0, *out[1:-1]]
    keep = _i64([1, 0] + [1] * (len(out) - 2))

    def without_channels(bb, values):
        return bb.emit(relax.op.multiply(values, keep))

    return Settlement(
        1, (tuple(row),), (np.asarray([out[0], 1, *out[1:-1]], dtype="int64"),), (0,), without_channels,
        f"size {[out[0], 'C', *out[1:-1]]}",
    )  # fmt: skip


def _dft_axis(shapes: NodeShapes) -> Settlement | None:
    data, out = shapes.inputs[0], shapes.outputs[0]
    if data is None or out is None or shapes.length != 1:
        return None
    rank = len(data)  # the last axis holds (real, imaginary)
    if len(out) != rank:
        return None
    # The transformed axis may change length (one-sided, dft_length); every other keeps it.
    candidates = [a for a in range(rank - 1) if all(out[b] == data[b] for b in range(rank - 1) if b != a)]
    if not candidates:
        return None

    def form(bb, axis):
        return bb.emit(relax.op.where(relax.op.less(axis, _i64(0)), relax.op.add(axis, _i64(rank)), axis))

    # Which axis is transformed changes the values, not only the shape: one variant each.
    rows = tuple((a,) for a in candidates)
    variants = tuple(np.asarray(a, dtype="int64") for a in candidates)
    return Settlement(2, rows, variants, tuple(range(len(candidates))), form, f"axis in [0, {rank - 1})")


# op → the slots that may be settled: (slot, rule, the first opset where that slot exists).
_AXES_REDUCTIONS = (
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSumSquare",
)
RULES: dict[str, tuple[tuple[int, Callable[[NodeShapes], Settlement | None], int], ...]] = {
    **{op: ((1, _reduce, 18),) for op in _AXES_REDUCTIONS},
    "ReduceSum": ((1, _reduce, 13),),
    "Squeeze": ((1, _squeeze, 13),),
    "Unsqueeze": ((1, _unsqueeze, 13),),
    "Reshape": ((1, _reshape, 5),),
    "Expand": ((1, _expand, 8),),
    "Tile": ((1, _tile, 6),),
    "ConstantOfShape": ((0, _output_shape(0, "shape"), 9),),
    "MaxUnpool": ((2, _output_shape(2, "output_shape"), 9),),
    "TopK": ((1, _top_k, 10),),
    "Split": ((1, _split, 13),),
    "CenterCropPad": ((1, _extents_of_axes(1, "shape"), 18),),
    "OneHot": ((1, _one_hot, 9),),
    "Resize": ((3, _resize_sizes, 11),),  # scales given at run time: onnx_resize
    "DFT": ((2, _dft_axis, 20),),
    "AffineGrid": ((1, _affine_grid, 20),),
    "MelWeightMatrix": ((0, _mel_bands, 17), (1, _mel_dft_length, 17)),
    "Loop": ((0, _loop_count, 1), (1, _loop_condition, 1)),
    **{op: ((0, _window_size, 17),) for op in ("HannWindow", "HammingWindow", "BlackmanWindow")},
}  # fmt: skip


def _is_run_time(expr) -> bool:
    """A tensor computed at run time (not a constant, not a shape expression) whose static
    rank-0 or rank-1 shape and numeric type let it be settled."""
    if expr is None or isinstance(expr, tvm.ir.GenericConst) or not isinstance(expr.ty, relax.TensorType):
        return False
    dims = static_dims(expr.ty)
    return (
        dims is not None
        and len(dims) <= 1
        and str(expr.ty.dtype).startswith(("int", "uint", "float", "bool"))
    )


def settlement(op_name: str, opset: int, inputs: list, attrs: dict, outputs: list[str]) -> Settlement | None:
    """The settlement of the node's run-time parameter, or None when it has none or its
    declared shapes do not settle it (the node is then converted as usual)."""
    declared = DECLARED_SHAPES.get()
    if declared is None:
        return None
    for slot, rule, since in RULES.get(op_name, ()):
        if opset >= since and slot < len(inputs) and _is_run_time(inputs[slot]):
            return _settled(slot, rule, inputs, attrs, [declared.get(name) for name in outputs])
    return None


def _settled(slot: int, rule, inputs: list, attrs: dict, outputs: list) -> Settlement | None:
    param = static_dims(inputs[slot].ty)
    if param and 0 in param:  # no values: nothing to work out or check
        return Settlement(slot, ((),), (np.zeros(param, dtype="int64"),), (0,), _as_given, "no values")
    shapes = NodeShapes(
        inputs=[
            static_dims(i.ty) if i is not None and isinstance(i.ty, relax.TensorType) else None
            for i in inputs
        ],
        outputs=outputs,
        attrs=attrs,
        length=int(np.prod(param)) if param else 1,
    )
    result = rule(shapes)
    return result if result is not None and result.slot == slot else None


def given_from(expr: relax.Expr) -> str:
    """`` from input #N`` when ``expr`` is a model input (the plan puts in its name)."""
    index = model_input_index(expr)
    return f" from {INPUT_MARK}{index}" if index is not None else ""


def _site(op_name: str, node_name: str, param, accepted: str) -> str:
    label = f"{op_name} {node_name!r}" if node_name else op_name
    return (
        f"{label} reads a shape parameter{given_from(param)} at run time; this package was generated for the "
        f"output shapes the model declares, which only {accepted} give"
    )


def settle(
    bb: relax.BlockBuilder, op_name: str, node_name: str, inputs: list, plan: Settlement, convert: Callable
) -> relax.Expr:
    """The node converted once per variant, the result chosen at run time by ``settle``."""
    param = inputs[plan.slot]
    dims = static_dims(param.ty)
    assert dims is not None, "a settlement is only made for a parameter of static shape"
    results: list[relax.Expr] = []
    for variant in plan.variants:
        constant_inputs = list(inputs)
        dtype = str(param.ty.dtype)
        value = variant.astype(dtype).reshape(dims)
        constant_inputs[plan.slot] = relax.const(value, dtype)
        if not results:
            accept(param, value)
        result = convert(constant_inputs)
        results.append(result if isinstance(result, relax.Tuple) else bb.emit(result))
    if not plan.rows[0]:  # an empty parameter has one value: nothing to check
        return results[0]
    wide = bb.emit(relax.op.astype(param, plan.compared))
    given = bb.emit(relax.op.reshape(wide, [int(np.prod(dims))]))
    site = _site(op_name, node_name, param, plan.accepted)
    chosen = guard(bb, plan.normal_form(bb, given), plan.rows, plan.variant_of, site, plan.compared)
    return chosen_result(bb, results, chosen)


def guard(
    bb: relax.BlockBuilder,
    normal: relax.Expr,
    rows: list | tuple,
    variant_of: list | tuple,
    site: str,
    compared: str = "int64",
) -> relax.Expr:
    """The variant of the first row ``normal`` (a 1-D tensor) equals, as a scalar int64
    chosen at run time by the ``settle`` builtin, which stops the run when none does."""
    table = relax.const(np.asarray(rows, dtype=compared), compared)
    matches = relax.op.equal(relax.op.expand_dims(normal, 0), table)
    every = relax.op.min(relax.op.astype(matches, "int64"), axis=[1])
    choices = bb.emit(relax.op.where(relax.op.equal(every, _i64(1)), _i64(variant_of), _i64(-1)))
    text = tvm.ir.StringImm(site)
    chosen = bb.emit(
        relax.call_dps_packed(SETTLE, relax.Tuple([choices, text]), out_ty=relax.TensorType((1,), "int64"))
    )
    return bb.emit(relax.op.reshape(chosen, []))


def kept_if_chosen(bb: relax.BlockBuilder, result: relax.Expr, chosen: relax.Expr) -> relax.Expr:
    """``result`` where the guard chose its only variant (the guard stops the run otherwise):
    reading ``chosen`` keeps the guard in the program."""
    return chosen_result(bb, [result], chosen)


def chosen_result(bb: relax.BlockBuilder, results: list, chosen: relax.Expr) -> relax.Expr:
    """The result of the variant ``chosen`` (a guard's), among ``results``, by `where`."""
    first = results[0]
    if isinstance(first.ty, relax.TupleType):
        fields = len(first.ty.fields)
        items = [[bb.emit(relax.TupleGetItem(r, i)) for r in results] for i in range(fields)]
        return relax.Tuple([chosen_result(bb, item, chosen) for item in items])
    picked = bb.emit(relax.op.zeros_like(first)) if len(results) == 1 else results[-1]
    for index in reversed(range(len(results) if len(results) == 1 else len(results) - 1)):
        picked = bb.emit(relax.op.where(relax.op.equal(chosen, _i64(index)), results[index], picked))
    return picked


def _settle_reference(choices, site, chosen) -> None:
    """``settle`` for TVM's VM (the golden step runs the imported module there)."""
    values = choices.numpy().reshape(-1)
    picked = [int(v) for v in values if v >= 0]
    if not picked:
        raise ValueError(f"{site}: the values given are none of these")
    chosen.copyfrom(np.asarray([picked[0]], dtype="int64"))


tvm.register_global_func(SETTLE, _settle_reference, override=True)
