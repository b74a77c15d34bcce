"""RoiAlign's max mode computes what ONNX Runtime does (the largest weighted corner value of a
bin's samples, not TVM's largest interpolated value): both coordinate modes, two sampling
ratios, rois reaching outside the map, malformed (reversed) rois and two images; a batch
index out of range is refused at run time."""

from __future__ import annotations

import json

import numpy as np
import onnx
from onnx import TensorProto, helper
from packaging_helpers import configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate

ROIS = np.array(
    [[0, 0, 9, 9], [0, 5, 4, 9], [5, 5, 9, 9], [-3, -2, 4.5, 3.25], [7.5, 1, 12, 14], [6, 6, 2, 3]],
    np.float32,
)
BATCH = np.array([0, 1, 0, 1, 1, 0], np.int64)


def _model(path):
    nodes = [
        helper.make_node(
            "RoiAlign", ["X", "rois", "batch_indices"], [f"Y_{mode}_{ratio}"], mode="max",
            output_height=4, output_width=3, sampling_ratio=ratio, spatial_scale=0.8,
            coordinate_transformation_mode=mode,
        )
        for mode, ratio in (("half_pixel", 2), ("output_half_pixel", 3))
    ]  # fmt: skip
    inputs = [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3, 10, 10]),
        helper.make_tensor_value_info("rois", TensorProto.FLOAT, [6, 4]),
        helper.make_tensor_value_info("batch_indices", TensorProto.INT64, [6]),
    ]
    outputs = [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, [6, 3, 4, 3]) for n in nodes]
    model = helper.make_model(
        helper.make_graph(nodes, "roi", inputs, outputs), opset_imports=[helper.make_opsetid("", 16)]
    )
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def test_roi_align_max_matches_onnxruntime(tmp_path):
    import onnxruntime

    model = _model(tmp_path / "roi.onnx")
    generate(GenerateOptions(model=model, out=tmp_path / "pkg", name="Roi"))
    configure_build(tmp_path / "pkg", tmp_path / "build")
    x = np.random.default_rng(5).normal(size=(2, 3, 10, 10)).astype(np.float32)
    files = []
    for name, array in (("x", x), ("rois", ROIS), ("batch", BATCH)):
        files.append(tmp_path / f"{name}.npy")
        np.save(files[-1], array)
    run([tmp_path / "build" / "roi_cli", "--output-dir", tmp_path / "out", *files])
    names = [o["name"] for o in json.loads((tmp_path / "pkg" / "metadata.json").read_text())["outputs"]]
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    wanted = session.run(names, {"X": x, "rois": ROIS, "batch_indices": BATCH})
    for index, (name, want) in enumerate(zip(names, wanted, strict=True)):
        got = np.load(tmp_path / "out" / f"output_{index}.npy")
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)

    np.save(files[2], np.array([0, 1, 0, 2, 1, 0], np.int64))  # image 2 of 2
    refused = run([tmp_path / "build" / "roi_cli", "--output-dir", tmp_path / "bad", *files], check=False)
    assert refused.returncode != 0 and "index" in refused.stderr.lower(), refused.stderr
