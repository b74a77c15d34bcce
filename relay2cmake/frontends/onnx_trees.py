"""Decision-tree ensembles of ``ai.onnx.ml`` (``TreeEnsemble``, ``TreeEnsembleRegressor``) as
tensor arithmetic with no branch at run time: every split's comparison for every row at once,
a root-to-leaf path is reached when each of its decisions matches, and the reached leaves'
weights are summed (averaged, or the minimum or maximum taken) per target. The trees are read
at generation time; their sizes are bounded so that a huge ensemble is refused, not built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import numpy_helper
from tvm import relax
from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

from relay2cmake.frontends.onnx_converter_support import _attr_text, _static_shape

# ONNX's split modes, in TreeEnsemble's numbering (the regressor names them BRANCH_<mode>).
MODES = ("LEQ", "LT", "GTE", "GT", "EQ", "NEQ", "MEMBER")
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
# Dense tables past these sizes (elements) would make the package too large to be useful.
MAX_PATH_STEPS = 1 << 22
MAX_LEAF_TARGETS = 1 << 22


@dataclass(frozen=True)
class Split:
    feature: int
    mode: str
    threshold: float
    members: tuple[float, ...]
    missing_goes_true: bool


@dataclass(frozen=True)
class Path:
    """A root-to-leaf walk: (split index, went the true way) per step, and the leaf's
    (target, weight) pairs."""

    steps: tuple[tuple[int, bool], ...]
    weights: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class Ensemble:
    splits: list[Split]
    paths: list[Path]
    targets: int
    trees: int
    aggregate: str
    base_values: tuple[float, ...]


def _paths(root: int, child, node_count: int) -> list[tuple[tuple[tuple[int, bool], ...], int]]:
    """Every walk from ``root``: ``child(node, went_true)`` gives ``(is_leaf, index)``."""
    found: list[tuple[tuple[tuple[int, bool], ...], int]] = []
    pending: list[tuple[int, tuple[tuple[int, bool], ...]]] = [(root, ())]
    total_steps = 0
    while pending:
        node, steps = pending.pop()
        if len(steps) > node_count:
            raise NotImplementedError("a tree of this TreeEnsemble has a cycle")
        for went_true in (True, False):
            is_leaf, index = child(node, went_true)
            walk = (*steps, (node, went_true))
            if is_leaf:
                found.append((walk, index))
                total_steps += len(walk)
            else:
                pending.append((index, walk))
        if total_steps > MAX_PATH_STEPS:
            raise NotImplementedError(f"this TreeEnsemble has more than {MAX_PATH_STEPS} path steps")
    return sorted(found)


def ensemble_v5(attr: dict[str, Any]) -> Ensemble:
    """``TreeEnsemble`` (ai.onnx.ml 5): interior nodes and leaves in separate arrays."""
    array = numpy_helper.to_array
    modes = [int(m) for m in array(attr["nodes_modes"]).reshape(-1)]
    splits_values = array(attr["nodes_splits"]).reshape(-1).astype(np.float64)
    features = list(attr["nodes_featureids"])
    true_ids, false_ids = list(attr["nodes_truenodeids"]), list(attr["nodes_falsenodeids"])
    true_leaf, false_leaf = list(attr["nodes_trueleafs"]), list(attr["nodes_falseleafs"])
    missing = list(attr.get("nodes_missing_value_tracks_true", [0] * len(modes)))
    leaf_targets = list(attr["leaf_targetids"])
    leaf_weights = array(attr["leaf_weights"]).reshape(-1).astype(np.float64)
    members_flat = (
        array(attr["membership_values"]).reshape(-1).astype(np.float64).tolist()
        if "membership_values" in attr
        else []
    )
    lengths = {len(modes), len(splits_values), len(features), len(true_ids), len(false_ids)}
    lengths |= {len(true_leaf), len(false_leaf), len(missing)}
    if len(lengths) != 1 or len(leaf_targets) != len(leaf_weights) or any(m >= len(MODES) for m in modes):
        raise NotImplementedError("TreeEnsemble's node or leaf attributes disagree in length or mode")
    # membership sets follow one another in membership_values, each ended by a NaN
    member_sets: list[tuple[float, ...]] = []
    current: list[float] = []
    for value in members_flat:
        if np.isnan(value):
            member_sets.append(tuple(current))
            current = []
        else:
            current.append(value)
    member_iter = iter(member_sets)
    splits = []
    for i, mode in enumerate(modes):
        members = next(member_iter, None) if MODES[mode] == "MEMBER" else ()
        if members is None:
            raise NotImplementedError("TreeEnsemble has fewer membership sets than MEMBER nodes")
        splits.append(Split(features[i], MODES[mode], float(splits_values[i]), members, bool(missing[i])))

    def child(node: int, went_true: bool) -> tuple[bool, int]:
        is_leaf, index = (
            (true_leaf[node], true_ids[node]) if went_true else (false_leaf[node], false_ids[node])
        )
        if not 0 <= index < (len(leaf_targets) if is_leaf else len(modes)):
            raise NotImplementedError(f"TreeEnsemble's node {node} names a child {index} out of range")
        return bool(is_leaf), index

    paths = []
    roots = list(attr["tree_roots"])
    for root in roots:
        if not 0 <= root < len(modes):
            raise NotImplementedError(f"TreeEnsemble's tree root {root} is out of range")
        if true_leaf[root] and false_leaf[root] and true_ids[root] == false_ids[root]:
            leaf = true_ids[root]  # a tree that is a single leaf
            walks: list[tuple[tuple[tuple[int, bool], ...], int]] = [((), leaf)]
        else:
            walks = _paths(root, child, len(modes))
        paths += [Path(steps, ((leaf_targets[leaf], float(leaf_weights[leaf])),)) for steps, leaf in walks]
    aggregate = int(attr.get("aggregate_function", 1))
    if int(attr.get("post_transform", 0)) != 0:
        raise NotImplementedError("TreeEnsemble's post_transform other than NONE is not supported")
    if not 0 <= aggregate < len(AGGREGATES):
        raise NotImplementedError(f"TreeEnsemble's aggregate_function {aggregate} is not one ONNX defines")
    return Ensemble(splits, paths, int(attr["n_targets"]), len(roots), AGGREGATES[aggregate], ())


def ensemble_regressor(attr: dict[str, Any]) -> Ensemble:
    """``TreeEnsembleRegressor`` (ai.onnx.ml 1 and 3): nodes named by (tree, node) ids, leaves
    are nodes whose mode is LEAF, weights listed per (tree, node, target)."""
    tree_ids, node_ids = list(attr["nodes_treeids"]), list(attr["nodes_nodeids"])
    modes = [_attr_text(m, "") for m in attr["nodes_modes"]]
    values = _floats(attr, "nodes_values", len(modes))
    features = list(attr["nodes_featureids"])
    true_ids, false_ids = list(attr["nodes_truenodeids"]), list(attr["nodes_falsenodeids"])
    missing = list(attr.get("nodes_missing_value_tracks_true", [0] * len(modes)))
    lengths = {len(tree_ids), len(node_ids), len(modes), len(values), len(features), len(true_ids)}
    if len(lengths | {len(false_ids), len(missing)}) != 1:
        raise NotImplementedError("TreeEnsembleRegressor's node attributes disagree in length")
    index = {(t, n): i for i, (t, n) in enumerate(zip(tree_ids, node_ids, strict=True))}
    weights: dict[int, list[tuple[int, float]]] = {}
    target_weights = _floats(attr, "target_weights", len(attr.get("target_ids", ())))
    for t, n, target, weight in zip(
        attr.get("target_treeids", ()), attr.get("target_nodeids", ()), attr.get("target_ids", ()),
        target_weights, strict=True,
    ):  # fmt: skip
        if (t, n) not in index:
            raise NotImplementedError(f"TreeEnsembleRegressor's target names a missing node ({t}, {n})")
        weights.setdefault(index[t, n], []).append((int(target), float(weight)))
    splits = []
    for i, mode in enumerate(modes):
        name = mode.removeprefix("BRANCH_")
        if mode != "LEAF" and (not mode.startswith("BRANCH_") or name not in MODES[:6]):
            raise NotImplementedError(f"TreeEnsembleRegressor's node mode {mode!r} is not supported")
        splits.append(Split(features[i], name, values[i], (), bool(missing[i])))

    def child(node: int, went_true: bool) -> tuple[bool, int]:
        key = (tree_ids[node], true_ids[node] if went_true else false_ids[node])
        if key not in index:
            raise NotImplementedError(f"TreeEnsembleRegressor's node {key} does not exist")
        return modes[index[key]] == "LEAF", index[key]

    roots: dict[int, int] = {}
    for i, tree in enumerate(tree_ids):
        roots.setdefault(tree, i)  # a tree's root is its first node, as ONNX's reference
    paths = []
    for tree in sorted(roots):
        root = roots[tree]
        walks = [((), root)] if modes[root] == "LEAF" else _paths(root, child, len(modes))
        paths += [Path(steps, tuple(weights.get(leaf, ()))) for steps, leaf in walks]
    aggregate = _attr_text(attr.get("aggregate_function"), "SUM")
    if _attr_text(attr.get("post_transform"), "NONE") != "NONE":
        raise NotImplementedError("TreeEnsembleRegressor's post_transform other than NONE is not supported")
    if aggregate not in AGGREGATES:
        raise NotImplementedError(f"TreeEnsembleRegressor's aggregate_function {aggregate!r} is not ONNX's")
    base = tuple(_floats(attr, "base_values", 0))
    return Ensemble(splits, paths, int(attr.get("n_targets", 1)), len(roots), aggregate, base)


def _floats(attr, name: str, default_length: int) -> list[float]:
    if f"{name}_as_tensor" in attr:
        return numpy_helper.to_array(attr[f"{name}_as_tensor"]).reshape(-1).astype(np.float64).tolist()
    return [float(v) for v in attr.get(name, [0.0] * default_length)]


def _decisions(bb, x, splits: list[Split], used: list[int]):
    """[rows, len(used) + 1] bool: each used split's outcome, then a column of True (the
    padding of shorter paths)."""
    dtype = str(x.ty.dtype)
    features = bb.emit(
        relax.op.take(x, relax.const(np.array([splits[i].feature for i in used], "int64")), axis=1)
    )
    outcome = relax.const(np.zeros((1, len(used)), dtype=bool))
    compare = {
        "LEQ": relax.op.less_equal, "LT": relax.op.less, "GTE": relax.op.greater_equal,
        "GT": relax.op.greater, "EQ": relax.op.equal,
        # NaN is unequal to all: TVM's LLVM code makes != an ordered comparison, false for NaN
        "NEQ": lambda a, b: relax.op.logical_or(relax.op.not_equal(a, b), relax.op.isnan(a)),
    }  # fmt: skip
    for mode, op in compare.items():
        mask = np.array([splits[i].mode == mode for i in used])
        if mask.any():
            thresholds = np.array([splits[i].threshold for i in used], dtype=dtype)
            result = op(features, relax.const(thresholds, dtype))
            outcome = bb.emit(relax.op.where(relax.const(mask), result, outcome))
    members = [splits[i].members for i in used]
    width = max((len(m) for m in members), default=0)
    if width:  # NaN never equals a feature: it pads the shorter sets
        table = np.full((len(used), width), np.nan, dtype=dtype)
        for row, values in enumerate(members):
            table[row, : len(values)] = values
        hits = relax.op.equal(relax.op.expand_dims(features, 2), relax.const(table, dtype))
        found = bb.emit(
            relax.op.greater(relax.op.sum(relax.op.astype(hits, "int32"), axis=2), relax.const(0, "int32"))
        )
        mask = np.array([splits[i].mode == "MEMBER" for i in used])
        outcome = bb.emit(relax.op.where(relax.const(mask), found, outcome))
    missing = np.array([splits[i].missing_goes_true for i in used])
    if missing.any():  # a NaN feature also goes the true way when the node says so (ONNX Runtime)
        outcome = bb.emit(
            relax.op.logical_or(outcome, relax.op.logical_and(relax.op.isnan(features), relax.const(missing)))
        )
    rows = _static_shape(x)[0]
    outcome = bb.emit(relax.op.broadcast_to(outcome, [rows, len(used)]))
    return bb.emit(relax.op.concat([outcome, relax.const(np.ones((rows, 1), dtype=bool))], axis=1))


def _reached(bb, decisions, ensemble: Ensemble, column: dict[int, int]):
    """[rows, paths] bool: every step of the path went the way it records."""
    depth = max(1, max(len(p.steps) for p in ensemble.paths))
    padding = len(column)  # the column of True
    steps = np.full((len(ensemble.paths), depth), padding, dtype="int64")
    ways = np.ones((len(ensemble.paths), depth), dtype=bool)
    for row, path in enumerate(ensemble.paths):
        for position, (split, went_true) in enumerate(path.steps):
            steps[row, position], ways[row, position] = column[split], went_true
    rows = _static_shape(decisions)[0]
    taken = bb.emit(relax.op.take(decisions, relax.const(steps.reshape(-1)), axis=1))
    taken = bb.emit(relax.op.reshape(taken, [rows, len(ensemble.paths), depth]))
    wrong = relax.op.astype(
        relax.op.logical_xor(taken, relax.const(ways)), "int32"
    )  # not not_equal: LLVM has no fcmp on i1
    return bb.emit(relax.op.equal(relax.op.sum(wrong, axis=2), relax.const(0, "int32")))


def predicted(bb: relax.BlockBuilder, x: relax.Expr, ensemble: Ensemble, dtype: str) -> relax.Expr:
    """[rows, targets] in ``dtype``: the ensemble's prediction for each row of ``x``."""
    if not ensemble.paths:
        raise NotImplementedError("this TreeEnsemble has no tree")
    if len(ensemble.paths) * ensemble.targets > MAX_LEAF_TARGETS:
        raise NotImplementedError(f"this TreeEnsemble has more than {MAX_LEAF_TARGETS} (leaf, target) pairs")
    features = _static_shape(x)[1]
    used = sorted({split for path in ensemble.paths for split, _ in path.steps})
    if any(not 0 <= ensemble.splits[i].feature < features for i in used):
        raise NotImplementedError(f"a TreeEnsemble split reads a feature beyond the input's {features}")
    if any(not 0 <= t < ensemble.targets for path in ensemble.paths for t, _ in path.weights):
        raise NotImplementedError(f"a TreeEnsemble leaf names a target beyond n_targets = {ensemble.targets}")
    decisions = _decisions(bb, x, ensemble.splits, used)
    reached = _reached(bb, decisions, ensemble, {split: i for i, split in enumerate(used)})
    table = np.zeros((len(ensemble.paths), ensemble.targets), dtype=np.float64)
    present = np.zeros(table.shape, dtype=bool)
    for row, path in enumerate(ensemble.paths):
        for target, weight in path.weights:
            if ensemble.aggregate in ("SUM", "AVERAGE"):
                table[row, target] += weight
            elif present[row, target]:
                table[row, target] = (min if ensemble.aggregate == "MIN" else max)(table[row, target], weight)
            else:
                table[row, target] = weight
            present[row, target] = True
    if ensemble.aggregate in ("SUM", "AVERAGE"):
        scale = 1.0 / ensemble.trees if ensemble.aggregate == "AVERAGE" else 1.0
        result = relax.op.matmul(
            relax.op.astype(reached, dtype), relax.const((table * scale).astype(dtype), dtype)
        )
    else:
        start = np.finfo(dtype).max if ensemble.aggregate == "MIN" else np.finfo(dtype).min
        hit = relax.op.logical_and(relax.op.expand_dims(reached, 2), relax.const(present))
        values = relax.op.where(
            hit, relax.const(table.astype(dtype), dtype), relax.const(np.asarray(start, dtype), dtype)
        )
        reduce = relax.op.min if ensemble.aggregate == "MIN" else relax.op.max
        result = reduce(bb.emit(values), axis=1)
    result = bb.emit(result)
    if ensemble.base_values:
        result = bb.emit(relax.op.add(result, relax.const(np.asarray(ensemble.base_values, dtype), dtype)))
    if not present.all():
        # A target no reached leaf weighs is 0, as in ONNX Runtime (ONNX's reference: the base
        # value, or the type's largest (MIN) or smallest (MAX) value).
        counts = relax.op.matmul(relax.op.astype(reached, dtype), relax.const(present.astype(dtype), dtype))
        weighed = relax.op.greater(counts, relax.const(np.asarray(0, dtype), dtype))
        result = bb.emit(relax.op.where(weighed, result, relax.const(np.asarray(0, dtype), dtype)))
    return result


class TreeEnsemble(OnnxOpConverter):
    """ai.onnx.ml 5: output in the input's type."""

    @classmethod
    def _impl_v5(cls, bb, inputs, attr, params):
        x = inputs[0]
        return predicted(bb, x, ensemble_v5(attr), str(x.ty.dtype))


class TreeEnsembleRegressor(OnnxOpConverter):
    """ai.onnx.ml 1 and 3: float32 output; integer or double inputs are compared as float."""

    @classmethod
    def _impl_v1(cls, bb, inputs, attr, params):
        x = inputs[0]
        if len(_static_shape(x)) == 1:
            x = bb.emit(relax.op.expand_dims(x, 0))
        if str(x.ty.dtype) not in ("float32", "float64"):
            x = bb.emit(relax.op.astype(x, "float32"))
        result = predicted(bb, x, ensemble_regressor(attr), str(x.ty.dtype))
        return relax.op.astype(result, "float32") if str(x.ty.dtype) != "float32" else result

    _impl_v3 = _impl_v1
