"""An optimisation may be declined, correctness may not: every rewrite that raises, breaks
TVM's pipeline or computes wrong values is declined (with one warning line naming it), and a
kernel LLVM cannot build costs only that kernel. Each case forces the failure, then
builds the package with CMake and runs its golden test (gen's self-check and ctest)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from model_zoo import save_model
from onnx import TensorProto, helper, numpy_helper
from packaging_helpers import configure_build, ctest, run

from relay2cmake.commands.generate import GenerateOptions, generate
from relay2cmake.errors import ModelError
from relay2cmake.lower import pipeline as lowering


def _cnn(path: Path, opset: int = 13, dropout_mask: bool = False) -> Path:
    """conv 3x3 → BatchNorm → relu (→ Dropout with its mask) → conv 1x1 → matmul head."""
    rng = np.random.default_rng(3)

    def const(name, *shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["r1"]),
    ]
    last = "r1"
    if dropout_mask:
        nodes.append(helper.make_node("Dropout", [last], ["d1", "mask"]))
        last = "d1"
    nodes += [
        helper.make_node("Conv", [last, "w2"], ["c2"], kernel_shape=[1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "wh"], ["y"]),
    ]
    running_var = numpy_helper.from_array(rng.uniform(4.0, 9.0, 16).astype(np.float32), "var")
    initializers = [
        const("w1", 16, 8, 3, 3),
        const("b1", 16),
        const("g", 16, scale=1.0),
        const("beta", 16),
        numpy_helper.from_array(rng.uniform(2.0, 3.0, 16).astype(np.float32), "mean"),
        running_var,
        const("w2", 32, 16, 1, 1),
        const("wh", 32, 24),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 14, 14])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 24])],
        initializers,
    )
    return save_model(graph, path, opset)


def _generate(model: Path, out: Path, **options):
    return generate(GenerateOptions(model=model, out=out, name="Fb", **options))


def _build_and_ctest(package: Path, build: Path, *definitions: str) -> str:
    configure_build(package, build, *definitions)
    return run([ctest(), "--test-dir", build, "--output-on-failure"]).stdout


@pytest.fixture()
def model(tmp_path) -> Path:
    return _cnn(tmp_path / "cnn.onnx")


def _with_main(module, main):
    import tvm

    functions = dict(module.functions)
    functions[module.get_global_var("main")] = main
    return tvm.IRModule(functions, attrs=module.attrs)


def _matmul_times_1_5(module):
    """A rewrite that lowers and builds but computes every matmul 1.5 times too large."""
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Scale(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op == tvm.ir.Op.get("relax.matmul"):
                return relax.op.multiply(call, relax.const(1.5, "float32"))
            return call

    return _with_main(module, _Scale(module).visit_expr(module["main"]))


def _raising(*_args, **_kwargs):
    raise RuntimeError("forced failure for the test")


@pytest.mark.parametrize(
    "rewrite",
    # channels-last in the default run: the same decline path serves every optional rewrite.
    ["channels-last"]
    + [
        pytest.param(r, marks=pytest.mark.slow)
        for r in (
            "batch-norm-affine",
            "transpose-pairs",
            "constant-transposes",
            "packed-matmul",
            "fast-math",
            "constants-folded",
        )
    ],
)
def test_a_rewrite_that_raises_is_declined(rewrite, model, tmp_path, monkeypatch):
    original = lowering.relax_rewrites

    def rewrites(winograd=True, notes=None, wide=False):
        return [
            lowering.Rewrite(r.name, _raising, r.optional) if r.name == rewrite else r
            for r in original(winograd, notes, wide)
        ]

    monkeypatch.setattr(lowering, "relax_rewrites", rewrites)
    report = _generate(model, tmp_path / "pkg")
    warned = [w for w in report.warnings if w.startswith(f"fallback: {rewrite}:")]
    assert len(warned) == 1 and "forced failure" in warned[0], report.warnings
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert any(f.startswith(f"{rewrite}:") for f in meta["fallbacks"])
    assert meta["self_check"].startswith("passed"), meta["self_check"]
    assert "golden" in _build_and_ctest(tmp_path / "pkg", tmp_path / "build")


@pytest.fixture()
def relu_layout_fails():
    """TVM's layout inference for relu raises (as LRN's or a 5-D reshape's did in old zoo
    files); restored afterwards."""
    import tvm

    op = tvm.ir.Op.get("relax.nn.relu")
    original = op.get_attr("FRelaxInferLayout")

    def refuse(*_args):
        raise RuntimeError("forced layout failure for relu")

    op.reset_attr("FRelaxInferLayout")
    op.set_attr("FRelaxInferLayout", refuse)
    yield
    op.reset_attr("FRelaxInferLayout")
    op.set_attr("FRelaxInferLayout", original)


def test_layout_conversion_converts_back_at_an_operator_it_cannot_pass(model, tmp_path, relu_layout_fails):
    """Only relu stays in NCHW (transposes around it); the convolutions keep channels-last
    and the package is still right."""
    report = _generate(model, tmp_path / "pkg")
    warned = [w for w in report.warnings if w.startswith("fallback: channels-last:")]
    assert len(warned) == 1 and "nn.relu kept in the original layout" in warned[0], report.warnings
    assert "forced layout failure" in warned[0]
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["fallbacks"] == [warned[0].removeprefix("fallback: ")]
    assert meta["self_check"].startswith("passed"), meta["self_check"]
    kernels = (tmp_path / "pkg" / "src" / "fb_kernels.c").read_text()
    assert "conv2d_nhwc" in kernels and "transpose" in kernels


def test_a_rewrite_that_breaks_the_pipeline_is_declined(model, tmp_path, monkeypatch):
    """fast-math returns a module that TVM's pipeline then fails on (marked here by an
    attribute the wrapped pipeline refuses): the retry without it must succeed."""
    original, real_pipeline = lowering.relax_rewrites, lowering._pipeline

    def marked(module):
        return module.with_attr("r2c_test_poison", 1)

    def pipeline(module):
        if module.attrs is not None and "r2c_test_poison" in module.attrs:
            raise RuntimeError("forced pipeline failure")
        return real_pipeline(module)

    def rewrites(winograd=True, notes=None, wide=False):
        return [
            lowering.Rewrite(r.name, marked, r.optional) if r.name == "fast-math" else r
            for r in original(winograd, notes, wide)
        ]

    monkeypatch.setattr(lowering, "relax_rewrites", rewrites)
    monkeypatch.setattr(lowering, "_pipeline", pipeline)
    report = _generate(model, tmp_path / "pkg")
    warned = [w for w in report.warnings if w.startswith("fallback:")]
    assert len(warned) == 1 and warned[0].startswith("fallback: fast-math:"), warned
    assert "pipeline" in warned[0], warned
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["self_check"].startswith("passed")


def test_a_rewrite_that_computes_wrong_values_falls_back_to_the_plain_path(model, tmp_path, monkeypatch):
    """packed-matmul scales every constant by 1.5: it lowers and builds, and only the
    self-check (the package's golden test, run by gen) can see that it is wrong."""
    original = lowering.relax_rewrites

    def rewrites(winograd=True, notes=None, wide=False):
        return [
            lowering.Rewrite(r.name, _matmul_times_1_5, r.optional) if r.name == "packed-matmul" else r
            for r in original(winograd, notes, wide)
        ]

    monkeypatch.setattr(lowering, "relax_rewrites", rewrites)
    report = _generate(model, tmp_path / "pkg")
    assert any(w.startswith("fallback: whole model:") for w in report.warnings), report.warnings
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    assert meta["self_check"].startswith("passed")
    assert any(f.startswith("whole model:") and "FAIL" in f for f in meta["fallbacks"]), meta["fallbacks"]
    assert "golden" in _build_and_ctest(tmp_path / "pkg", tmp_path / "build")


def test_a_wrong_kernel_on_the_plain_path_is_located(tmp_path, monkeypatch):
    """A required rewrite computes MatMul wrong on every path: gen stops, and its message
    names the MatMul node as the first operator whose result diverges (found by bisection
    over cut models), not the Relu before it or the Add and Tanh after it."""
    original = lowering.relax_rewrites
    rng = np.random.default_rng(4)
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w"], ["m"], name="matmul"),
        helper.make_node("Add", ["m", "b"], ["a"], name="add"),
        helper.make_node("Tanh", ["a"], ["y"], name="tanh"),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])],
        [
            numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
        ],
    )
    model = save_model(graph, tmp_path / "chain.onnx")

    def rewrites(winograd=True, notes=None, wide=False):
        return [
            lowering.Rewrite("wrong-matmul", _matmul_times_1_5, optional=False),
            *original(winograd, notes, wide),
        ]

    monkeypatch.setattr(lowering, "relax_rewrites", rewrites)
    with pytest.raises(
        ModelError, match=r"first operator whose result diverges.*MatMul 'matmul' \(output 'm'\)"
    ):
        _generate(model, tmp_path / "pkg")
    assert not (tmp_path / "pkg").exists()


def test_wrong_values_on_the_plain_path_stop_gen(model, tmp_path, monkeypatch):
    """When even the plain path disagrees with the reference, nothing is written."""
    from relay2cmake import golden

    real = golden.compute

    def skewed(imported, **kwargs):
        data = real(imported, **kwargs)
        return golden.GoldenData(
            data.inputs, tuple(e + 1.0 for e in data.expected), data.tolerances, data.reference
        )

    monkeypatch.setattr(golden, "compute", skewed)
    with pytest.raises(ModelError, match=r"does not reproduce the reference outputs.*'y'"):
        _generate(model, tmp_path / "pkg", locate_divergence=False)  # located: the test above
    assert not (tmp_path / "pkg").exists()
    report = _generate(model, tmp_path / "pkg2", allow_unverified=True)
    assert any("FAILS its golden test" in w for w in report.warnings)
    assert json.loads((tmp_path / "pkg2" / "metadata.json").read_text())["self_check"].startswith("FAILED")


def _failing_build(kernel_part: str, scheduled_only: bool):
    """lowering.build_kernels, except that LLVM "fails" on kernels whose name holds ``kernel_part``
    (only when scheduled, if ``scheduled_only``)."""
    real = lowering.build_kernels

    def build(prims, target, what):
        if str(target.kind) == "llvm":
            for gv, func in prims.functions.items():
                scheduled = "s_tir.is_scheduled" in (func.attrs or {}) or _looks_scheduled(func)
                if kernel_part in gv.name_hint and (scheduled or not scheduled_only):
                    raise ModelError(f"forced LLVM failure in {gv.name_hint}")
        return real(prims, target, what)

    return build


def _looks_scheduled(func) -> bool:
    return "parallel" in str(func.script()) or "vectorized" in str(func.script())


def test_a_kernel_llvm_cannot_build_is_compiled_from_c_and_only_it(model, tmp_path, monkeypatch):
    monkeypatch.setattr(lowering, "build_kernels", _failing_build("conv2d", scheduled_only=False))
    report = _generate(model, tmp_path / "pkg")
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    in_c = [f for f in meta["fallbacks"] if "compiled from C" in f]
    assert in_c and all("conv2d" in line for line in in_c), meta["fallbacks"]
    assert any(w.startswith("fallback: x86_64") and "compiled from C" in w for w in report.warnings)
    assert not any("no x86_64" in w for w in report.warnings), "the object set was kept"
    assert (tmp_path / "pkg" / "objects" / "x86_64" / "fb_kernels.o").exists()
    fallback_c = tmp_path / "pkg" / "src" / "fb_kernels_x86_64_fallback.c"
    assert fallback_c.exists() and "conv2d" in fallback_c.read_text()
    assert "matmul" not in fallback_c.read_text(), "only the failing kernels are in C"
    assert meta["scheduled_kernels"]["x86_64"], "the other kernels keep their schedules"
    readme = (tmp_path / "pkg" / "README.md").read_text()
    assert "Optimisations declined" in readme and "compiled from C" in readme
    assert meta["self_check"].startswith("passed (x86_64 objects")
    _build_and_ctest(tmp_path / "pkg", tmp_path / "build")


def test_a_kernel_whose_schedule_llvm_cannot_build_runs_unscheduled(model, tmp_path, monkeypatch):
    monkeypatch.setattr(lowering, "build_kernels", _failing_build("matmul", scheduled_only=True))
    _generate(model, tmp_path / "pkg")
    meta = json.loads((tmp_path / "pkg" / "metadata.json").read_text())
    unscheduled = [f for f in meta["fallbacks"] if "without a schedule" in f]
    assert unscheduled and all("matmul" in line for line in unscheduled), meta["fallbacks"]
    assert not any("compiled from C" in f for f in meta["fallbacks"])
    assert meta["self_check"].startswith("passed")


def test_dropout_with_its_mask_keeps_channels_last(tmp_path):
    """Old converters keep Dropout's mask output; channels-last must pass it, not refuse."""
    model = _cnn(tmp_path / "dropout.onnx", opset=9, dropout_mask=True)
    report = _generate(model, tmp_path / "pkg")
    assert not [w for w in report.warnings if w.startswith("fallback:")], report.warnings


def test_an_optimised_lowering_that_cannot_be_planned_falls_back_to_the_plain_path(
    model, tmp_path, monkeypatch
):
    from relay2cmake import plan as plan_module  # gen imports build_plan from it when it plans

    real, calls = plan_module.build_plan, []

    def build_plan(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise ModelError("forced: an operator the driver cannot run")
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "build_plan", build_plan)
    report = _generate(model, tmp_path / "pkg")
    assert any(
        w.startswith("fallback: whole model: the optimised lowering could not be planned")
        for w in report.warnings
    )
    assert json.loads((tmp_path / "pkg" / "metadata.json").read_text())["self_check"].startswith("passed")


@pytest.mark.parametrize(("kernel", "size"), [(2, 16), (3, 17)])
def test_transposed_convolutions_stay_in_their_layout(tmp_path, kernel, size):
    """A U-Net's up-convolution (2x2, stride 2: run as a matmul) and an overlapping one (3x3,
    stride 2: TVM's lowering). TVM legalizes conv2d_transpose for NCHW only, so channels-last
    must leave it there (it once handed it NHWC data and the driver refused the result).
    gen's self-check runs the package against its cross-checked golden outputs."""
    rng = np.random.default_rng(5)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node(
                "ConvTranspose", ["c", "wt"], ["u"], kernel_shape=[kernel, kernel], strides=[2, 2]
            ),
            helper.make_node("Relu", ["u"], ["y"]),
        ],
        "up",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, size, size])],
        [
            numpy_helper.from_array((rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32), "w"),
            numpy_helper.from_array(
                (rng.standard_normal((16, 4, kernel, kernel)) * 0.2).astype(np.float32), "wt"
            ),
        ],
    )
    save_model(graph, tmp_path / "up.onnx")
    report = _generate(tmp_path / "up.onnx", tmp_path / "pkg")
    assert not [w for w in report.warnings if w.startswith("fallback:")], report.warnings


def test_every_optional_rewrite_applies_to_a_plain_model(tmp_path):
    """The other side of declining: a rewrite's own bug must not hide behind its fallback. A
    model with what each optional rewrite takes (conv + batch norm, matmul weights, divisions
    by a constant, erf, softmax) gets every one of them and no fallback line (fast-math once
    declined on every model for a misnamed TVM class, reported by one warning)."""
    from relay2cmake.frontends import import_model

    rng = np.random.default_rng(5)

    def const(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)

    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["n1"]),
        helper.make_node("Relu", ["n1"], ["image_out"]),
        helper.make_node("MatMul", ["t", "m"], ["h"]),
        helper.make_node("Div", ["h", "three"], ["scaled"]),
        helper.make_node("Erf", ["scaled"], ["e"]),
        helper.make_node("Softmax", ["e"], ["tokens_out"], axis=-1),
    ]
    initializers = [
        const("w1", 8, 3, 3, 3), const("g", 8), const("beta", 8), const("mean", 8),
        numpy_helper.from_array(np.ones(8, np.float32), "var"), const("m", 64, 64),
        numpy_helper.from_array(np.array(3.0, np.float32), "three"),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "plain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16]),
         helper.make_tensor_value_info("t", TensorProto.FLOAT, [32, 64])],
        [helper.make_tensor_value_info("image_out", TensorProto.FLOAT, [1, 8, 16, 16]),
         helper.make_tensor_value_info("tokens_out", TensorProto.FLOAT, [32, 64])],
        initializers,
    )  # fmt: skip
    path = tmp_path / "plain.onnx"
    save_model(graph, path)
    imported = import_model(path, {})
    _, applied, fallbacks = lowering.rewrite_relax(imported.module)
    assert not fallbacks, fallbacks
    wanted = {"batch-norm-affine", "channels-last", "packed-matmul", "fast-math"}
    assert wanted <= set(applied), applied
