"""MelWeightMatrix with every parameter given at run time: the shape ones settled from the
declared output (and checked when the package runs), the sample rate and band edges computed
with; one package matches ONNX Runtime at several rates, edges and both DFT lengths that give
its shape, and refuses a band count that would give another."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper
from packaging_helpers import configure_build, run

from relay2cmake.commands.generate import GenerateOptions, generate

BANDS, BINS = 40, 257  # dft_length 512 or 513
NAMES = ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"]


def _model(path):
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, []) for n in NAMES[:3]]
    inputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in NAMES[3:]]
    node = helper.make_node("MelWeightMatrix", NAMES, ["weights"])
    graph = helper.make_graph(
        [node], "mel", inputs, [helper.make_tensor_value_info("weights", TensorProto.FLOAT, [BINS, BANDS])]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _inputs(bands, dft_length, rate, low, high) -> list[np.ndarray]:
    return [np.array(v, np.int64) for v in (bands, dft_length, rate)] + [
        np.array(v, np.float32) for v in (low, high)
    ]


def test_mel_weights_with_parameters_at_run_time_match_onnxruntime(tmp_path):
    import onnxruntime

    model = _model(tmp_path / "mel.onnx")
    # Random golden inputs are no valid rates and edges (the references fail on them): this test
    # compares with ONNX Runtime on meaningful ones instead.
    generate(
        GenerateOptions(
            model=model, out=tmp_path / "pkg", name="Mel", self_check=False, allow_unverified=True
        )
    )
    configure_build(tmp_path / "pkg", tmp_path / "build")
    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    cases = [
        (BANDS, 512, 16000, 0.0, 8000.0),
        (BANDS, 513, 22050, 20.0, 7600.0),
        (BANDS, 512, 8000, 300.5, 3000.25),
        (BANDS, 513, 44100, 125.0, 3800.0),
    ]
    for index, case in enumerate(cases):
        arrays = _inputs(*case)
        files = []
        for name, array in zip(NAMES, arrays, strict=True):
            files.append(tmp_path / f"{index}_{name}.npy")
            np.save(files[-1], array)
        out = tmp_path / f"out{index}"
        run([tmp_path / "build" / "mel_cli", "--output-dir", out, *files])
        want = session.run(None, dict(zip(NAMES, arrays, strict=True)))[0]
        np.testing.assert_allclose(
            np.load(out / "output_0.npy"), want, rtol=1e-6, atol=1e-7, err_msg=str(case)
        )
        assert np.count_nonzero(want) > BANDS, "the filters are not all empty"

    refused = _inputs(BANDS + 1, 512, 16000, 0.0, 8000.0)
    files = []
    for name, array in zip(NAMES, refused, strict=True):
        files.append(tmp_path / f"refused_{name}.npy")
        np.save(files[-1], array)
    result = run([tmp_path / "build" / "mel_cli", "--output-dir", tmp_path / "refused", *files], check=False)
    assert result.returncode != 0 and "num_mel_bins" in result.stderr, result.stderr
