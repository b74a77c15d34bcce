"""Optional tuning: `relay2cmake tune` writes a database MetaSchedule filled, `gen
--tuning-db` replays its schedules in the object set it was tuned for, and the package still
computes what ONNX Runtime computes. Bad databases and flags are clear errors."""

from __future__ import annotations

import json

import model_zoo
import numpy as np
import onnx
import pytest
from onnx import helper
from packaging_helpers import (
    configure_build,
    fails_cleanly,
    onnxruntime_outputs,
    random_inputs,
    relay2cmake,
    run,
)


def _one_matmul() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    weight = (rng.standard_normal((64, 32)) / 8).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
        "one_matmul",
        [model_zoo._float_info("x", [8, 64])],
        [model_zoo._float_info("z", [8, 32])],
        initializer=[model_zoo._const("w", weight)],
    )
    return model_zoo._model(graph)


def _handmade_database(model_path, path, target: str = "x86_64:x86-64-v3") -> str:
    """A record whose schedule differs from the default one (split, reorder, vectorize), so
    that replaying it is what the package runs; returns the kernel's name."""
    import tvm

    from relay2cmake.frontends import import_model
    from relay2cmake.lower import tuning_db as tuning
    from relay2cmake.lower.pipeline import lowered_kernels

    _, prims, _ = lowered_kernels(import_model(model_path, {}).module, "t")
    (gv,) = prims.get_global_vars()
    func = prims[gv]
    sch = tvm.s_tir.Schedule(tuning.normalized(func))
    block = sch.get_sblock("r2c_matmul_packed")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i, j0, k, j1)
    sch.vectorize(j1)
    sch.parallel(i)
    record = tuning.TuningRecord(
        kernel=gv.name_hint,
        workload=tuning.workload_hash(func),
        trace=tvm.ir.save_json(sch.trace.as_json()),
        tuned_us=1.0,
        default_us=2.0,
    )
    tuning.save(tuning.TuningDatabase(target=target, records=(record,)), path)
    return gv.name_hint


def test_gen_replays_a_tuning_record(tmp_path):
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    database = tmp_path / "tuning.json"
    kernel = _handmade_database(model, database)
    source = tmp_path / "pkg"
    relay2cmake("gen", str(model), "-o", str(source), "--name", "Tuned", "--tuning-db", str(database))
    meta = json.loads((source / "metadata.json").read_text())
    assert meta["tuned_kernels"] == {"x86_64": [kernel]}  # the v3 set only, not its AVX-512 twin
    build = tmp_path / "build"
    configure_build(source, build, "-DTUNED_WIDE_KERNELS=OFF")  # the v3 set runs here
    inputs = random_inputs(meta, seed=5)
    np.save(tmp_path / "x.npy", inputs[0])
    out = tmp_path / "out"
    result = run([build / "tuned_cli", "--bench", "1", "--output-dir", out, tmp_path / "x.npy"])
    assert "kernels x86_64:x86-64-v3" in result.stdout
    want = onnxruntime_outputs(model, meta, inputs)[0]
    np.testing.assert_allclose(np.load(out / "output_0.npy"), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    "target, used",
    [("x86_64:x86-64-v4", {"x86_64-wide"}), ("aarch64:generic", set())],
    ids=["the AVX-512 twin", "a set not built"],
)
def test_gen_uses_a_twin_database_and_warns_about_an_unbuilt_set(tmp_path, target, used):
    """`tune` defaults to the AVX-512 twin on AVX-512 machines: gen --target x86_64 builds
    that twin, so it uses the database without a warning. A set gen does not build gets one."""
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    database = tmp_path / "tuning.json"
    kernel = _handmade_database(model, database, target)
    source = tmp_path / "pkg"
    result = relay2cmake(
        "gen", str(model), "-o", str(source), "--target", "x86_64", "--tuning-db", str(database)
    )
    meta = json.loads((source / "metadata.json").read_text())
    assert meta["tuned_kernels"] == {label: [kernel] for label in used}
    assert ("which this package does not build" in result.stderr) == (not used), result.stderr


@pytest.mark.slow  # 2+ minutes on 2 cores; test_gen_replays_a_tuning_record covers gen's side
def test_tune_writes_a_database_gen_accepts(tmp_path):
    """The real search, kept short: 4 trials of one kernel (about 30 s)."""
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    database = tmp_path / "tuning.json"
    result = relay2cmake("tune", str(model), "-o", str(database), "--trials", "4", "--target", "x86_64")
    assert "of 1 kernels faster than their default schedule (x86_64:x86-64-v3)" in result.stdout
    document = json.loads(database.read_text())
    assert document["format"] == "relay2cmake-tuning-1" and document["target"] == "x86_64:x86-64-v3"
    for record in document["records"]:  # kept only when faster than the default schedule
        assert record["tuned_us"] < record["default_us"]
    source = tmp_path / "pkg"
    relay2cmake("-q", "gen", str(model), "-o", str(source), "--tuning-db", str(database))
    meta = json.loads((source / "metadata.json").read_text())
    assert len(meta.get("tuned_kernels", {}).get("x86_64", [])) == len(document["records"])


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "does not exist"),
        ("not json {", "is not readable JSON"),
        ('{"format": "something else"}', "is not a relay2cmake tuning database"),
        ('{"format": "relay2cmake-tuning-1", "target": "x86_64", "records": [{"kernel": 1}]}', "is damaged"),
    ],
)
def test_bad_tuning_database_is_a_clear_error(tmp_path, content, message):
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    database = tmp_path / "tuning.json"
    if content is not None:
        database.write_text(content)
    assert message in fails_cleanly("gen", model, "-o", tmp_path / "pkg", "--tuning-db", database)
    assert not (tmp_path / "pkg").exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--target", "c"], "tune needs an object target"),
        (["--trials", "0"], "--trials must be at least 1"),
    ],
)
def test_bad_tune_flags_are_clear_errors(tmp_path, flags, message):
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    assert message in fails_cleanly("tune", model, "-o", tmp_path / "t.json", *flags)


def test_tune_does_not_overwrite_without_force(tmp_path):
    model = tmp_path / "one_matmul.onnx"
    onnx.save(_one_matmul(), str(model))
    existing = tmp_path / "t.json"
    existing.write_text("keep me")
    assert "--force" in fails_cleanly("tune", model, "-o", existing)
    assert existing.read_text() == "keep me"
