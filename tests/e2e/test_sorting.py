"""TopK, Sort, ArgSort and NonMaxSuppression: package builtins (TVM's kernels for them look up
``tvm.contrib.sort`` in the TVM runtime, which a package does not have). The ONNX forms are
also in the data_dependent zoo model (end-to-end and compiler tests) and in the conformance
quick slice (ONNX's own expected outputs)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper
from packaging_helpers import configure_build, run

torch = pytest.importorskip("torch")


class _Sorting(torch.nn.Module):
    def forward(self, x):
        top = torch.topk(x, 5, dim=1)
        low = torch.topk(x, 3, dim=-1, largest=False)
        ascending = torch.sort(x, dim=-1).values
        order = torch.argsort(x, dim=0, descending=True)
        return top.values, top.indices, low.values, low.indices, ascending, order


def test_pt2_topk_sort_and_argsort_match_pytorch(tmp_path):
    import json

    from relay2cmake.commands.generate import GenerateOptions, generate

    x = torch.randn(4, 37, 6)
    path = tmp_path / "sorting.pt2"
    program = torch.export.export(_Sorting().eval(), (x,))
    torch.export.save(program, str(path))
    # gen's self-check builds the package and runs its golden test in every kernel set.
    generate(GenerateOptions(model=path, out=tmp_path / "pkg", name="Sorting"))
    metadata = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert metadata["golden"]["reference"] == "torch"
    assert metadata["fallbacks"] == []
    golden = tmp_path / "pkg" / "tests" / "golden"
    given = torch.from_numpy(np.load(golden / "input_0.npy"))
    with torch.no_grad():
        want = program.module()(given)
    for index, expected in enumerate(want):
        np.testing.assert_array_equal(np.load(golden / f"expected_{index}.npy"), expected.numpy())


def _nms_model(path):
    """NonMaxSuppression with its IoU threshold a run-time input (center-point boxes)."""
    floats = TensorProto.FLOAT
    node = helper.make_node(
        "NonMaxSuppression", ["boxes", "scores", "most", "iou"], ["selected"], center_point_box=1
    )
    graph = helper.make_graph(
        [node],
        "nms",
        [
            helper.make_tensor_value_info("boxes", floats, [2, 30, 4]),
            helper.make_tensor_value_info("scores", floats, [2, 3, 30]),
            helper.make_tensor_value_info("iou", floats, [1]),
        ],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["n", 3])],
        initializer=[onnx.numpy_helper.from_array(np.array([10], np.int64), "most")],
    )
    return save_model(graph, path, 13)


def test_non_max_suppression_matches_onnxruntime_and_refuses_a_bad_threshold(tmp_path):
    from relay2cmake.commands.generate import GenerateOptions, generate

    model = _nms_model(tmp_path / "nms.onnx")
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Nms", self_check=False))
    build = tmp_path / "build"
    configure_build(tmp_path / "pkg", build, "-DNMS_PORTABLE_KERNELS=ON")
    rng = np.random.default_rng(5)
    centers = rng.uniform(0, 5, (2, 30, 2))
    sizes = rng.uniform(2, 4, (2, 30, 2))
    feeds = {
        "boxes": np.concatenate([centers, sizes], axis=-1).astype(np.float32),
        "scores": rng.uniform(0, 1, (2, 3, 30)).astype(np.float32),
    }
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    for iou in (0.0, 0.25, 1.0):
        feeds["iou"] = np.array([iou], np.float32)
        (want,) = session.run(None, feeds)
        paths = []
        for name in ("boxes", "scores", "iou"):
            paths.append(tmp_path / f"{name}.npy")
            np.save(paths[-1], feeds[name])
        out = tmp_path / f"out_{iou}"
        run([build / "nms_cli", "--output-dir", out, *paths])
        np.testing.assert_array_equal(np.load(out / "output_0.npy"), want)
        if iou == 0.25:
            assert 0 < len(want) < 2 * 3 * 10, "the case should suppress some boxes and keep some"
    np.save(tmp_path / "iou.npy", np.array([1.5], np.float32))
    result = run([build / "nms_cli", "--output-dir", tmp_path / "bad", *paths], check=False)
    assert result.returncode == 1 and "iou_threshold is outside [0, 1]" in result.stderr, result.stderr
    assert not (tmp_path / "bad").exists()
