"""Decision-tree ensembles (ai.onnx.ml TreeEnsemble 5 and TreeEnsembleRegressor 3) compute what
ONNX Runtime does: random forests with every split mode, set membership, missing values that go
either way, several targets, and each aggregate function."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate

FEATURES, TARGETS, ROWS = 5, 3, 64
AGGREGATES = ["SUM", "AVERAGE", "MIN", "MAX"]


def _tree(rng, depth: int, with_members: bool):
    """A nested tuple: ("leaf", target, weight) or ("split", feature, mode, threshold, members,
    missing_goes_true, true_branch, false_branch); modes numbered as TreeEnsemble's."""
    if depth == 0 or rng.random() < 0.2:
        return ("leaf", int(rng.integers(TARGETS)), float(np.float32(rng.normal())))
    mode = int(rng.integers(7 if with_members else 6))
    members = tuple(float(v) for v in rng.choice(6, size=int(rng.integers(1, 4)), replace=False))
    threshold = float(rng.integers(0, 6)) + (0.5 if mode < 4 and rng.random() < 0.5 else 0.0)
    branches = (_tree(rng, depth - 1, with_members), _tree(rng, depth - 1, with_members))
    return (
        "split",
        int(rng.integers(FEATURES)),
        mode,
        threshold,
        members,
        bool(rng.random() < 0.5),
        *branches,
    )


def _v5_node(trees, aggregate: str, output: str):
    """TreeEnsemble's arrays: interior nodes and leaves numbered in depth-first order."""
    nodes: dict[str, list] = {
        k: [] for k in ("modes", "splits", "features", "true", "false", "tl", "fl", "mtt")
    }
    leaves: dict[str, list] = {"targets": [], "weights": []}
    members: list[float] = []

    def visit(tree) -> tuple[bool, int]:
        if tree[0] == "leaf":
            leaves["targets"].append(tree[1])
            leaves["weights"].append(tree[2])
            return True, len(leaves["targets"]) - 1
        _, feature, mode, threshold, member_set, missing, true_branch, false_branch = tree
        index = len(nodes["modes"])
        for key, value in (
            ("modes", mode),
            ("splits", threshold if mode != 6 else np.nan),
            ("features", feature),
        ):
            nodes[key].append(value)
        for key in ("true", "false", "tl", "fl"):
            nodes[key].append(0)
        nodes["mtt"].append(int(missing))
        if mode == 6:
            members.extend([*member_set, np.nan])
        nodes["tl"][index], nodes["true"][index] = visit(true_branch)
        nodes["fl"][index], nodes["false"][index] = visit(false_branch)
        return False, index

    roots = []
    for tree in trees:
        is_leaf, index = visit(tree)
        if is_leaf:  # a single-leaf tree: a node whose both branches are that leaf
            for key, value in (
                ("modes", 0),
                ("splits", 0.0),
                ("features", 0),
                ("true", index),
                ("false", index),
            ):
                nodes[key].append(value)
            nodes["tl"].append(1)
            nodes["fl"].append(1)
            nodes["mtt"].append(0)
            index = len(nodes["modes"]) - 1
        roots.append(index)

    def floats(name, values):
        return numpy_helper.from_array(np.asarray(values, np.float32), name)

    extra = {"membership_values": floats("membership_values", members)} if members else {}
    return helper.make_node(
        "TreeEnsemble", ["X"], [output], domain="ai.onnx.ml",
        nodes_modes=numpy_helper.from_array(np.asarray(nodes["modes"], np.uint8), "nodes_modes"),
        nodes_splits=floats("nodes_splits", nodes["splits"]), nodes_featureids=nodes["features"],
        nodes_truenodeids=nodes["true"], nodes_falsenodeids=nodes["false"],
        nodes_trueleafs=[int(v) for v in nodes["tl"]], nodes_falseleafs=[int(v) for v in nodes["fl"]],
        nodes_missing_value_tracks_true=nodes["mtt"], leaf_targetids=leaves["targets"],
        leaf_weights=floats("leaf_weights", leaves["weights"]), tree_roots=roots, n_targets=TARGETS,
        aggregate_function={"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}[aggregate],
        post_transform=0, **extra,
    )  # fmt: skip


def _regressor_node(trees, aggregate: str, output: str):
    """TreeEnsembleRegressor's arrays: nodes by (tree, node id), a leaf's weights as targets."""
    names = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
    columns: dict[str, list] = {
        k: []
        for k in ("tree", "id", "mode", "value", "feature", "true", "false", "mtt", "tt", "tn", "ti", "tw")
    }

    def visit(tree_id: int, tree) -> int:
        node_id = sum(1 for t in columns["tree"] if t == tree_id)
        for key, value in (("tree", tree_id), ("id", node_id), ("true", 0), ("false", 0)):
            columns[key].append(value)
        position = len(columns["tree"]) - 1
        if tree[0] == "leaf":
            for key, value in (("mode", "LEAF"), ("value", 0.0), ("feature", 0), ("mtt", 0)):
                columns[key].append(value)
            for key, value in (("tt", tree_id), ("tn", node_id), ("ti", tree[1]), ("tw", tree[2])):
                columns[key].append(value)
            return node_id
        _, feature, mode, threshold, _, missing, true_branch, false_branch = tree
        for key, value in (
            ("mode", names[mode]),
            ("value", threshold),
            ("feature", feature),
            ("mtt", int(missing)),
        ):
            columns[key].append(value)
        columns["true"][position] = visit(tree_id, true_branch)
        columns["false"][position] = visit(tree_id, false_branch)
        return node_id

    for tree_id, tree in enumerate(trees):
        visit(tree_id, tree)
    return helper.make_node(
        "TreeEnsembleRegressor", ["X"], [output], domain="ai.onnx.ml",
        nodes_treeids=columns["tree"], nodes_nodeids=columns["id"], nodes_modes=columns["mode"],
        nodes_values=columns["value"], nodes_featureids=columns["feature"],
        nodes_truenodeids=columns["true"], nodes_falsenodeids=columns["false"],
        nodes_missing_value_tracks_true=columns["mtt"], target_treeids=columns["tt"],
        target_nodeids=columns["tn"], target_ids=columns["ti"], target_weights=columns["tw"],
        n_targets=TARGETS, aggregate_function=aggregate, base_values=[0.25, -1.0, 2.0],
    )  # fmt: skip


def _model(path, kind: str):
    """Four ensembles, one per aggregate function: TreeEnsemble's (ai.onnx.ml 5; six forests with
    set membership and a single-leaf tree) or TreeEnsembleRegressor's (ai.onnx.ml 3, which
    deprecates it in 5; deeper trees, base values)."""
    rng = np.random.default_rng(7)
    nodes = []
    for aggregate in AGGREGATES:
        if kind == "v5":
            forest = [_tree(rng, 4, with_members=True) for _ in range(6)] + [("leaf", 1, 0.5)]
            nodes.append(_v5_node(forest, aggregate, aggregate))
        else:
            nodes.append(
                _regressor_node([_tree(rng, 5, with_members=False) for _ in range(4)], aggregate, aggregate)
            )
    graph = helper.make_graph(
        nodes, "forests", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [ROWS, FEATURES])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [ROWS, TARGETS]) for name in AGGREGATES],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5 if kind == "v5" else 3)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 10
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize("kind, kernels", [("v5", "objects"), ("v5", "c"), ("regressor", "objects")])
def test_tree_ensembles_match_onnxruntime(kind, kernels, tmp_path):
    import onnxruntime

    model = _model(tmp_path / "forests.onnx", kind)
    # small whole numbers hit EQ, NEQ and the membership sets; NaN takes the missing-value way
    x = np.random.default_rng(3).integers(0, 6, size=(ROWS, FEATURES)).astype(np.float32)
    x[np.random.default_rng(4).random(x.shape) < 0.15] = np.nan
    np.save(tmp_path / "x.npy", x)
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Forests"))
    build = tmp_path / "build"
    configure_build(
        tmp_path / "pkg", build, f"-DFORESTS_PORTABLE_KERNELS={'ON' if kernels == 'c' else 'OFF'}"
    )
    run([build / "forests_cli", "--output-dir", tmp_path / "out", tmp_path / "x.npy"])
    names = [o["name"] for o in json.loads((tmp_path / "pkg" / "metadata.json").read_text())["outputs"]]
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    for i, (name, want) in enumerate(zip(names, session.run(names, {"X": x}), strict=True)):
        got = np.load(tmp_path / "out" / f"output_{i}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
