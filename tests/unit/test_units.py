"""Unit tests: naming, arena packing, the weights file, the plan of small models."""

from __future__ import annotations

import hashlib
import itertools
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from relay2cmake import arena, naming, weights_file


def test_identifiers_are_unique_valid_and_stable():
    names = ["input:0", "1", "a.b", "a_b", "float", "A_B", "_x", "class", "ok"]
    result = naming.unique_identifiers(names)
    assert result == ["input_0", "t_1", "a_b_2", "a_b", "float_", "A_B_3", "t_x", "class_", "ok"]
    assert len({r.upper() for r in result}) == len(result)
    assert naming.unique_identifiers(names) == result


def test_package_names_and_prefix():
    assert naming.package_name_from_path("resnet-50_v2") == "Resnet50V2"
    assert naming.package_name_from_path("3d-unet") == "Model3dUnet"
    assert naming.c_prefix("MyModel") == "mymodel"
    assert naming.package_name_from_path("m") == "MModel"
    assert naming.package_name_from_path("int") == "IntModel"


def test_identifiers_avoid_macros_wrapper_members_and_double_underscores():
    names = ["linux", "INT8_MAX", "SIZE_MAX", "shape", "std", "Span", "FLOAT__INDEX", "a___b", "plain"]
    assert naming.unique_identifiers(names) == [
        "linux_", "INT8_MAX_", "SIZE_MAX_", "shape_", "std_", "Span_", "FLOAT_INDEX", "a_b", "plain"
    ]  # fmt: skip


def test_c_string_literal_escapes():
    assert naming.c_string_literal('a"b\\c?') == '"a\\"b\\\\c\\077"'
    assert naming.comment_text("x*/y") == "x* /y"
    assert naming.comment_text("a/*b\\\n\u202ec") == "a/ *b/??c"


def test_names_and_versions_with_a_trailing_newline_or_a_system_library_are_refused():
    from relay2cmake.errors import UserError

    for bad in ("1.0.0\n", "1.0.0 ", "\n1.0.0"):
        with pytest.raises(UserError, match="not a version"):
            naming.check_version(bad)
    for bad in ("Foo\n", "Foo ", "Foo__Bar"):
        with pytest.raises(UserError, match="not a valid package name"):
            naming.check_package_name(bad)
    for library in ("M", "Pthread", "Dl", "RT", "C"):
        with pytest.raises(UserError, match="system library"):
            naming.check_package_name(library)
    for clash in ("Printf", "Abs", "Size_t", "Int8_t", "Memcpy", "Index", "Std", "Linux"):
        with pytest.raises(UserError, match="C library already declares"):
            naming.check_package_name(clash)
    assert naming.package_name_from_path("printf") == "PrintfModel"
    assert naming.check_version("1.2.3") == "1.2.3" and naming.check_package_name("MyModel") == "MyModel"
    for good, cmake in (("2.1.0-rc.1", "2.1.0"), ("1.0.0+build.5", "1.0.0"), ("0.3.1-x-y+z", "0.3.1")):
        assert naming.check_version(good) == good and naming.cmake_version(good) == cmake


def test_markdown_and_file_label_encoders():
    assert naming.markdown_text("a|b`c<d>\n#e") == "a\\|b\\`c\\<d\\> \\#e"
    assert naming.file_label('m"; import os\n-->.onnx') == "m___import_os_--_.onnx"


def _overlaps(a, b, offsets):
    live_together = a.first <= b.last and b.first <= a.last
    start_a, start_b = offsets[a.key], offsets[b.key]
    disjoint = start_a + a.size <= start_b or start_b + b.size <= start_a
    return live_together and not disjoint


def test_arena_never_overlaps_live_buffers_and_reuses_dead_ones():
    rng = np.random.default_rng(0)
    lifetimes = []
    for i in range(60):
        first = int(rng.integers(0, 50))
        lifetimes.append(
            arena.Lifetime(f"b{i}", int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 8)))
        )
    offsets, total = arena.pack(lifetimes)
    for a, b in itertools.combinations(lifetimes, 2):
        assert not _overlaps(a, b, offsets), (a, b)
    assert all(offset % arena.ALIGNMENT == 0 for offset in offsets.values())
    assert total < sum(arena.align_up(lt.size) for lt in lifetimes)
    peak = max(
        sum(arena.align_up(lt.size) for lt in lifetimes if lt.first <= t <= lt.last) for t in range(60)
    )
    assert peak <= total


def test_weights_file_holds_every_constant_once_on_64_bytes():
    sizes = (3, 64, 100, 0, 1)
    arrays = [np.full(n, i + 1, np.uint8) for i, n in enumerate(sizes)]
    arrays.append(np.arange(3, dtype=">i4"))  # big-endian in, little-endian out
    writer = weights_file.WeightsWriter()
    offsets = [writer.append(weights_file.constant_bytes(a)) for a in arrays]
    file = writer.finish()
    data = file.read()
    assert offsets == [0, 64, 128, 256, 256, 320]
    for array, offset in zip(arrays, offsets, strict=True):
        little = array.astype(array.dtype.newbyteorder("<")).tobytes()
        assert data[offset : offset + len(little)] == little
    assert len(data) == file.size == 332 and file.sha256 == hashlib.sha256(data).digest()


@pytest.fixture(scope="module")
def plans(zoo_dir):
    from relay2cmake.frontends import import_model
    from relay2cmake.lower.pipeline import lower
    from relay2cmake.plan import build_plan

    def plan_of(model: str, shapes=None):
        imported = import_model(zoo_dir / f"{model}.onnx", shapes or {})
        return build_plan(imported, lower(imported.module, "t"), stage_inputs=True)

    return plan_of


def test_plan_reshape_output_is_a_view(plans):
    plan = plans("reshape_view")
    reshaped = plan.buffers[plan.output_buffers[0]]
    assert reshaped.shape == (2, 3, 4)
    sources = [b for b in plan.buffers if b.home == "arena" and b.slot == reshaped.slot and b.shape == (4, 6)]
    assert sources, "the reshape shares its data with the (4, 6) intermediate"
    assert len(plan.steps) == 2, "no kernel is spent on the reshape"


def test_plan_passthrough_and_constant_outputs(plans):
    plan = plans("passthrough")
    echo, exp_x, table = (plan.buffers[i] for i in plan.output_buffers)
    assert (echo.home, echo.slot) == ("input", 0)
    assert exp_x.home == "arena"
    assert table.home == "constant" and plan.constants[table.slot].shape == (2, 3)


def test_plan_arena_is_no_larger_than_tvms_plan_plus_extras(plans):
    plan = plans("cnn")
    scratch = [s.scratch_bytes for s in plan.steps]
    staged_inputs = sum(arena.align_up(i.nbytes) for i in plan.inputs)
    # TVM's static plan holds intermediates only; ours also holds staged inputs and kernel
    # scratch, and must still beat laying those end to end next to TVM's plan.
    assert plan.arena_bytes < plan.tvm_storage_bytes + staged_inputs + sum(scratch)
    assert any(scratch), "the CNN's convolutions use kernel scratch"
    assert all(s.scratch_offset % 64 == 0 for s in plan.steps)


def test_constant_folding_repeats_until_shapes_settle(monkeypatch):
    """Swin's window padding: pads computed (with Mod, which shape inference does not
    propagate) from the shape of a tensor that follows a Reshape whose target is itself
    computed. One round folds the target; only a second round knows the padded shape."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.frontends import onnx_fold

    def const(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Mod", ["sx", "big"], ["mx"]),  # = sx, but opaque to data propagation
        helper.make_node("Reshape", ["x", "mx"], ["r"]),
        helper.make_node("Shape", ["r"], ["sr"]),
        helper.make_node("Gather", ["sr", "last"], ["n"], axis=0),
        helper.make_node("Sub", ["seven", "n"], ["need"]),  # pad the last axis up to 7
        helper.make_node("Concat", ["zeros5", "need"], ["pads"], axis=0),
        helper.make_node("Pad", ["r", "pads"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [const("big", [100, 100, 100]), const("last", [2]), const("seven", [7]), const("zeros5", [0] * 5)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    monkeypatch.setattr(onnx_fold, "FOLD_ROUNDS", 1)
    once = onnx.ModelProto()
    once.CopyFrom(model)
    onnx_fold.fold_constants(once)  # in place
    monkeypatch.setattr(onnx_fold, "FOLD_ROUNDS", 8)
    folded = onnx_fold.fold_constants(model)
    assert "Pad" in {n.op_type for n in folded.graph.node}
    pads = next(n for n in folded.graph.node if n.op_type == "Pad").input[1]
    assert pads in {i.name for i in folded.graph.initializer}, "pads folded to a constant"
    once_pads = next(n for n in once.graph.node if n.op_type == "Pad").input[1]
    assert once_pads not in {i.name for i in once.graph.initializer}, "one round is not enough here"


def test_constant_folding_settles_a_chain_of_window_paddings():
    """Swin v2-T: each block pads its windows from the shape of the block before, so a round
    folds one block's pads; its twelve blocks need more rounds than the eight there were
    (six pads stayed computed and TVM's importer refused them)."""
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.frontends import onnx_fold

    def const(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    blocks, nodes, initializers = 12, [], [const("big", [100, 100, 100]), const("last", [2])]
    initializers.append(const("zeros5", [0] * 5))
    for i in range(blocks):
        x, y = f"y{i}", f"y{i + 1}"
        initializers.append(const(f"target{i}", [6 + i]))
        nodes += [
            helper.make_node("Shape", [x], [f"sx{i}"]),
            helper.make_node("Mod", [f"sx{i}", "big"], [f"mx{i}"]),  # opaque to data propagation
            helper.make_node("Reshape", [x, f"mx{i}"], [f"r{i}"]),
            helper.make_node("Shape", [f"r{i}"], [f"sr{i}"]),
            helper.make_node("Gather", [f"sr{i}", "last"], [f"n{i}"], axis=0),
            helper.make_node("Sub", [f"target{i}", f"n{i}"], [f"need{i}"]),  # one more each block
            helper.make_node("Concat", ["zeros5", f"need{i}"], [f"pads{i}"], axis=0),
            helper.make_node("Pad", [f"r{i}", f"pads{i}"], [y]),
        ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("y0", TensorProto.FLOAT, [1, 2, 5])],
        [helper.make_tensor_value_info(f"y{blocks}", TensorProto.FLOAT, None)],
        initializers,
    )
    folded = onnx_fold.fold_constants(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    pads = [n.input[1] for n in folded.graph.node if n.op_type == "Pad"]
    constants = {i.name for i in folded.graph.initializer}
    assert len(pads) == blocks and all(p in constants for p in pads), "every block's pads folded"


def test_plan_and_emit_stages_do_not_import_tvm():
    """Stages after lowering work on plain data: importing them must not load TVM (a
    frontend's or the lowering's names live in neutral modules such as builtins.py)."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import relay2cmake.plan, relay2cmake.emit.package, relay2cmake.emit.context, relay2cmake.golden\n"
        "import relay2cmake.commands.self_check, relay2cmake.builtins, relay2cmake.naming\n"
        "assert 'tvm' not in sys.modules, sorted(m for m in sys.modules if m.startswith('tvm'))[:5]\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_resize_with_empty_roi_and_scales_beside_sizes(tmp_path):
    """Opset-11 exports (torchvision's detection transform) pass ``roi=[]`` and ``scales=[]``
    as constants beside ``sizes``: absent, not given (TVM's importer refused "scales and
    sizes"). The package is built and checked against ONNX Runtime by gen's self-check."""
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.commands.generate import GenerateOptions, generate

    nodes = [
        helper.make_node("Constant", [], ["roi"], value=numpy_helper.from_array(np.zeros(0, np.float32))),
        helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], mode="linear"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 5, 7])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])],
        [
            numpy_helper.from_array(np.zeros(0, np.float32), "scales"),
            numpy_helper.from_array(np.array([1, 2, 8, 8], np.int64), "sizes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    import onnx

    onnx.save(model, tmp_path / "resize.onnx")
    report = generate(GenerateOptions(model=tmp_path / "resize.onnx", out=tmp_path / "pkg", name="Resize"))
    assert report.warnings == ()


def test_col2im_with_a_constant_image_and_block_shape(tmp_path):
    """VOLO's outlook attention (torch's F.fold through the dynamo exporter): Col2Im with its
    image and block shapes as initializers and no shape declared for its output, which only
    feeds another node. gen refused it ("needs its output shape declared"); the shape follows
    from the constants. Built and checked against ONNX Runtime by gen's self-check."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.commands.generate import GenerateOptions, generate

    graph = helper.make_graph(
        [
            helper.make_node(
                "Col2Im", ["x", "image", "block"], ["folded"], strides=[2, 2], pads=[1, 1, 1, 1]
            ),
            helper.make_node("Relu", ["folded"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3 * 9, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            numpy_helper.from_array(np.array([8, 8], np.int64), "image"),
            numpy_helper.from_array(np.array([3, 3], np.int64), "block"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "fold.onnx")
    report = generate(GenerateOptions(model=tmp_path / "fold.onnx", out=tmp_path / "pkg", name="Fold"))
    assert report.warnings == ()


def test_an_lstm_after_a_convolution_keeps_the_channels_last_layout(tmp_path):
    """Sequencer's shape: a conv, then a bidirectional LSTM over the image's rows. The LSTM's
    outputs were stacked with ``stack``, on which TVM's layout conversion fails, so the
    channels-last rewrite was declined around an operator kind (and retried around each kind
    in turn: minutes on a large graph). Built and checked against ONNX Runtime, no decline."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.commands.generate import GenerateOptions, generate

    rng = np.random.default_rng(3)
    hidden, channels, width = 5, 8, 6
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1]),
            helper.make_node("Transpose", ["conv"], ["rows"], perm=[3, 0, 2, 1]),  # [W, N, H, C]
            helper.make_node("Reshape", ["rows", "sequence_shape"], ["sequence"]),  # [W, N*H, C]
            helper.make_node(
                "LSTM",
                ["sequence", "W", "R", "B"],
                ["y", "y_h"],
                hidden_size=hidden,
                direction="bidirectional",
            ),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, width])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [width, 2, 4, hidden]),
            helper.make_tensor_value_info("y_h", TensorProto.FLOAT, [2, 4, hidden]),
        ],
        [
            numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(np.array([width, 4, channels], np.int64), "sequence_shape"),
            numpy_helper.from_array(rng.standard_normal((2, 4 * hidden, channels)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.standard_normal((2, 4 * hidden, hidden)).astype(np.float32), "R"),
            numpy_helper.from_array(rng.standard_normal((2, 8 * hidden)).astype(np.float32), "B"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, tmp_path / "conv_lstm.onnx")
    report = generate(
        GenerateOptions(model=tmp_path / "conv_lstm.onnx", out=tmp_path / "pkg", name="ConvLstm")
    )
    assert report.warnings == ()


def test_bisection_finds_the_first_failing_cut_in_few_probes():
    from relay2cmake.commands.divergence import Cut, first_diverging

    candidates = [Cut(i, f"node {i}", None) for i in range(100)]
    for first_bad in (0, 1, 37, 99):
        probed = []

        def probe(cut, first_bad=first_bad, probed=probed):
            probed.append(cut.index)
            return cut.index >= first_bad

        assert first_diverging(candidates, probe).index == first_bad
        assert len(probed) <= 7  # log2(101)
    assert first_diverging(candidates, lambda cut: False) is None  # only the whole model fails
    assert first_diverging(candidates, lambda cut: None) is None  # a probe that cannot tell


def _imports() -> dict[str, list[tuple[str, bool]]]:
    """Each module of the package → the modules it imports, with whether at module level
    (function-level imports included; those under ``if TYPE_CHECKING:`` left out)."""
    import ast
    from pathlib import Path

    import relay2cmake

    root = Path(relay2cmake.__file__).parent
    found: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted(root.rglob("*.py")):
        name = ".".join(("relay2cmake", *path.relative_to(root).with_suffix("").parts)).removesuffix(
            ".__init__"
        )
        tree = ast.parse(path.read_text())
        skipped = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
            for n in ast.walk(block)
        }
        top = {id(n) for n in tree.body}
        targets = []
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            if isinstance(node, ast.Import):
                targets += [(a.name, id(node) in top) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets.append((node.module, id(node) in top))
                targets += [(f"{node.module}.{a.name}", id(node) in top) for a in node.names]
        found[name] = targets
    return found


def test_import_graph_has_no_circles_and_emit_sees_only_the_plan():
    """No module imports, directly or through others (lazy imports too), a module that imports
    it; emit/ never imports TVM, a frontend or the lowering; plan.py not at load time."""
    graph = _imports()
    edges = {m: {t for t, _ in targets if t in graph and t != m} for m, targets in graph.items()}
    # A package's __init__ is imported with each of its modules: no edge to it from inside.
    edges = {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in edges.items()}

    def reaches(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    circles = sorted(m for m in graph if m in reaches(m))
    assert not circles, f"modules on an import circle: {circles}"
    forbidden = ("tvm", "tvm_ffi", "relay2cmake.lowering", "relay2cmake.frontends")
    for module, targets in graph.items():
        if module.startswith("relay2cmake.emit"):
            bad = [t for t, _ in targets if t.startswith(forbidden)]
            assert not bad, f"{module} imports {bad}"
    plan_level = [t for t, top in graph["relay2cmake.plan"] if top and t.startswith(forbidden)]
    assert not plan_level, plan_level


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="process groups are POSIX")
def test_an_interrupted_build_command_stops_everything_it_started(tmp_path):
    """CMake's compilers must not outlive an interrupted gen: they would write into the
    self-check's folder while it is removed (seen once in CI as "Directory not empty")."""
    import signal

    from relay2cmake.commands import cmake_runner

    started = tmp_path / "child.pid"

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.5)
        with pytest.raises(KeyboardInterrupt):
            cmake_runner._run(["sh", "-c", f"sleep 60 & echo $! > {started}; wait"], "a build")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    child = int(started.read_text())
    status = Path(f"/proc/{child}/status")
    deadline = time.monotonic() + 10  # SIGKILLed: it may take a moment to finish exiting
    while status.exists() and "State:\tZ" not in status.read_text():  # Z: dead, not yet reaped
        assert time.monotonic() < deadline, f"the command's child {child} still runs"
        time.sleep(0.01)


def test_every_public_function_is_annotated():
    """Public functions (and methods of public classes) say what they take and return; mypy
    (make lint) checks the annotations."""
    import ast

    missing = []

    def visit(node, public_scope: bool, path: Path) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if public_scope and (not child.name.startswith("_") or child.name == "__init__"):
                    arguments = child.args.posonlyargs + child.args.args + child.args.kwonlyargs
                    arguments += [a for a in (child.args.vararg, child.args.kwarg) if a is not None]
                    bare = [a.arg for a in arguments if a.annotation is None and a.arg not in ("self", "cls")]
                    if bare or (child.returns is None and child.name != "__init__"):
                        missing.append(f"{path}:{child.lineno} {child.name}({', '.join(bare)})")
                visit(child, False, path)
            elif isinstance(child, ast.ClassDef):
                visit(child, public_scope and not child.name.startswith("_"), path)

    package = Path(__file__).resolve().parents[2] / "relay2cmake"
    for path in sorted(package.rglob("*.py")):
        visit(ast.parse(path.read_text()), True, path.relative_to(package))
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("training", [False, True])
def test_inference_batch_norm_becomes_a_multiply_add_that_fuses(training):
    """torch.export keeps a CNN's BatchNorms: with constant statistics an inference batch norm
    becomes x * scale + shift (so fusion folds it into the convolution's epilogue) and
    computes what TVM's own batch norm does; one in training mode is left alone."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.batch_norm import inference_batch_norm_as_affine

    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 6, 6)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    gamma, beta, mean = (rng.standard_normal(4).astype("float32") for _ in range(3))
    var = rng.uniform(0.1, 3, 4).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            conv = bb.emit(relax.op.nn.conv2d(data, relax.const(w), padding=1))
            params = [relax.const(p) for p in (gamma, beta, mean, var)]
            norm = bb.emit(relax.op.nn.batch_norm(conv, *params, axis=1, epsilon=1e-3, training=training))
            out = bb.emit_output(relax.op.nn.relu(relax.TupleGetItem(norm, 0)))
        bb.emit_func_output(out)
    module = bb.get()
    rewritten = inference_batch_norm_as_affine(module)
    assert ("batch_norm" in rewritten.script()) == training

    def run(mod):
        executable = tvm.compile(mod, target="llvm")
        return relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()

    np.testing.assert_allclose(run(rewritten), run(module), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh", "silu"])
def test_fused_activations_use_the_vectorizable_math_and_fuse_into_the_matmul(activation):
    """The dynamo exporter's single Gelu node (and gelu_tanh, SiLU) become TVM's own formulas
    with the polynomial erf / tanh / exp: no scalar libm call in the matmul's epilogue, the
    activation fused into the matmul's kernel, and TVM's own numbers within float32 noise."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.fast_math import vectorizable_math

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((4, 16)) * 2).astype("float32")
    w = rng.standard_normal((16, 24)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            product = bb.emit(relax.op.matmul(data, relax.const(w)))
            out = bb.emit_output(getattr(relax.op.nn, activation)(product))
        bb.emit_func_output(out)
    module = bb.get()
    rewritten = vectorizable_math(module)
    assert f"R.nn.{activation}(" not in rewritten.script()
    fused = tvm.transform.Sequential(
        [
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )(rewritten)
    kernels = [str(gv.name_hint) for gv, f in fused.functions.items() if isinstance(f, tvm.tirx.PrimFunc)]
    assert len(kernels) == 1 and kernels[0].startswith("fused_matmul_"), kernels  # one kernel
    assert not re.search(r"T\.(erf|tanh|exp)\(", fused.script()), "a libm call is left"

    def run(mod):
        executable = tvm.compile(mod, target="llvm")
        return relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()

    np.testing.assert_allclose(run(rewritten), run(module), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("exponent", [0.25, 0.5, 0.75, 1.5])
def test_root_exponents_become_square_roots_within_two_ulps(exponent):
    """``x ** 0.75`` (LRN's) and the other root exponents are computed from square roots, not
    by the scalar powf: within two units in the last place of float64's power rounded to
    float32, and every special value as C's powf has it (-inf gives +inf, a negative number
    NaN, -0 a zero; NumPy's own power gives NaN for -inf ** 0.5)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.fast_math import vectorizable_math

    rng = np.random.default_rng(11)
    finite = np.exp(rng.uniform(-80, 80, 4000)).astype("float32")
    special = np.array([0.0, -0.0, 1.0, -1.0, -2.5, np.inf, -np.inf, np.nan, 1e-45, 3e38], "float32")
    x = np.concatenate([finite, special])
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            out = bb.emit_output(relax.op.power(data, relax.const(np.float32(exponent))))
        bb.emit_func_output(out)
    rewritten = vectorizable_math(bb.get())
    assert "R.power(" not in rewritten.script() and "R.sqrt(" in rewritten.script()
    executable = tvm.compile(rewritten, target="llvm")
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    with np.errstate(invalid="ignore"):
        exact = np.power(x.astype(np.float64), exponent).astype(np.float32)
    exact[x == -np.inf] = np.inf  # powf(-inf, y) for y > 0 not an odd integer
    np.testing.assert_array_equal(got[-len(special) :], exact[-len(special) :])
    ulps = np.abs(got[: len(finite)].view(np.int32).astype(np.int64) - exact[: len(finite)].view(np.int32))
    assert ulps.max() <= 2, ulps.max()


def test_division_by_a_constant_becomes_a_multiplication_within_one_ulp():
    """GELU's ``x / sqrt 2`` (and any float32 division by constants) is computed as ``x * (1/c)``:
    a division is a slow, unpipelined instruction. Within one unit in the last place of the
    division; exact for powers of two; a divisor holding 0, inf, NaN or a value whose reciprocal
    is not a normal float32 keeps its division (x / 0 stays inf, not NaN from 0 * inf); so does
    a division of fewer than 256 elements (a scale: it must stay exact, and costs nothing)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.fast_math import vectorizable_math

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((32, 8)) * 100).astype("float32")
    cases = {
        "sqrt2": (np.float32(2**0.5), True),
        "power_of_two": (np.float32(0.25), True),
        "per_column": (rng.uniform(0.5, 7.0, size=(8,)).astype("float32"), True),
        "zero": (np.array([1.0, 0.0] * 4, "float32"), False),
        "inf": (np.float32(np.inf), False),
        "tiny": (np.float32(1e-39), False),  # subnormal: 1/c overflows float32
        "huge": (np.float32(3e38), False),  # 1/c is subnormal
    }
    cases["few_elements"] = (np.float32(2**0.5), False)
    for name, (divisor, rewritten_expected) in cases.items():
        if name == "few_elements":
            x = x[:3]
        bb = relax.BlockBuilder()
        data = relax.Var("x", relax.TensorType(x.shape, "float32"))
        with bb.function("main", [data]):
            with bb.dataflow():
                out = bb.emit_output(relax.op.divide(data, relax.const(np.asarray(divisor, "float32"))))
            bb.emit_func_output(out)
        module = bb.get()
        rewritten = vectorizable_math(module)
        assert ("R.multiply(" in rewritten.script()) == rewritten_expected, name
        assert ("R.divide(" in rewritten.script()) != rewritten_expected, name
        executable = tvm.compile(rewritten, target="llvm")
        got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
        with np.errstate(divide="ignore", over="ignore"):
            exact = x / divisor
        if name == "power_of_two":
            np.testing.assert_array_equal(got, exact)
        finite = np.isfinite(exact)
        np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=name)
        ulps = np.abs(
            got[finite].view(np.int32).astype(np.int64) - exact[finite].view(np.int32).astype(np.int64)
        )
        assert ulps.max(initial=0) <= 1, (name, ulps.max())


def test_division_by_a_broadcast_square_root_becomes_a_reciprocal_root():
    """A layer norm spelt out divides every element by sqrt(variance + eps) of its row: that is
    x * rsqrt(v), one division per row. Within 2 ulp of the division, and the same special
    values (v = 0: +-inf, or NaN for x = 0; v < 0: NaN; v = inf: 0). A divisor as large as the
    dividend keeps its division (nothing to save)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.fast_math import vectorizable_math

    rng = np.random.default_rng(9)
    x = (rng.standard_normal((6, 8)) * 10).astype("float32")
    x[3, 0] = 0.0
    v = np.abs(rng.standard_normal((6, 1)) * 5).astype("float32")
    v[3, 0], v[4, 0], v[5, 0] = 0.0, -1.0, np.inf

    def run(rows: int):
        bb = relax.BlockBuilder()
        xs = relax.Var("x", relax.TensorType(x.shape, "float32"))
        vs = relax.Var("v", relax.TensorType((6, rows), "float32"))
        with bb.function("main", [xs, vs]):
            with bb.dataflow():
                root = bb.emit(relax.op.sqrt(vs))
                out = bb.emit_output(relax.op.divide(xs, root))
            bb.emit_func_output(out)
        rewritten = vectorizable_math(bb.get())
        executable = tvm.compile(rewritten, target="llvm")
        divisor = np.broadcast_to(v, (6, rows)).copy()
        vm = relax.VirtualMachine(executable, tvm.cpu())
        return rewritten.script(), vm["main"](tvm.runtime.tensor(x), tvm.runtime.tensor(divisor)).numpy()

    script, got = run(1)
    assert "R.rsqrt(" in script and "R.divide(" not in script
    with np.errstate(divide="ignore", invalid="ignore"):
        want = x / np.sqrt(v)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.sign(got[~np.isnan(want)]), np.sign(want[~np.isnan(want)]))
    ulps = np.abs(got[finite].view(np.int32).astype(np.int64) - want[finite].view(np.int32).astype(np.int64))
    assert ulps.max() <= 2, ulps.max()
    script, _ = run(8)
    assert "R.rsqrt(" not in script and "R.divide(" in script


@pytest.mark.parametrize(
    ("activation", "leading_coefficient"),
    [("gelu", "-2.72614"), ("gelu_tanh", "-2.76076"), ("silu", "0.00831252")],
)
def test_the_scheduled_activation_evaluates_its_polynomial_once(activation, leading_coefficient):
    """Inlining a stage copies its expression into each use: the erf clamp once read
    ``fast_erf`` three times and put three polynomials into ConvNeXt's matmul epilogues (1 thread
    184 ms against 137 ms with one, measured side by side). The scheduled kernel for the x86-64
    objects holds each polynomial once (its leading coefficient appears once)."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.pipeline import scheduled_kernels
    from relay2cmake.targets import KernelTarget

    weights = np.random.default_rng(5).standard_normal((64, 96)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType((32, 64), "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            product = bb.emit(relax.op.matmul(data, relax.const(weights)))
            out = bb.emit_output(getattr(relax.op.nn, activation)(product))
        bb.emit_func_output(out)
    _, kernels, scheduled = scheduled_kernels(bb.get(), KernelTarget("x86_64", "x86-64-v3"))
    assert len(scheduled) == 1 and len(kernels.functions) == 1, scheduled
    assert kernels.script().count(f"T.float32({leading_coefficient}") == 1
    assert isinstance(next(iter(kernels.functions.values())), tvm.tirx.PrimFunc)


def test_a_gelu_epilogue_stays_the_size_of_a_relu_one_in_llvm():
    """ViT's GELU matmul (197 tokens: a predicated last row tile; the erf's clamps made
    NaN-propagating): an erf whose exact tails compared the inlined input three times grew
    the kernel's parallel body to 3,427 lines of LLVM IR against 479 with the value bound
    once, and the package from 43 to 56 ms. The GELU body stays within twice a ReLU's."""
    import re

    from tvm import relax

    from relay2cmake.lower import pipeline
    from relay2cmake.targets import KernelTarget

    def parallel_body_lines(activation: str) -> int:
        rng = np.random.default_rng(7)
        weights = relax.const(rng.standard_normal((192, 768)).astype("float32"))
        bias = relax.const(rng.standard_normal(768).astype("float32"))
        bb = relax.BlockBuilder()
        data = relax.Var("x", relax.TensorType((197, 192), "float32"))
        with bb.function("main", [data]):
            with bb.dataflow():
                y = bb.emit(relax.op.add(relax.op.matmul(data, weights), bias))
                if activation == "gelu":  # the TorchScript export's decomposed GELU
                    erf = bb.emit(relax.op.erf(relax.op.divide(y, relax.const(1.4142135, "float32"))))
                    half = relax.op.multiply(y, relax.const(0.5, "float32"))
                    one_plus = relax.op.add(erf, relax.const(1.0, "float32"))
                    out = bb.emit_output(relax.op.multiply(half, one_plus))
                else:
                    out = bb.emit_output(relax.op.nn.relu(y))
            bb.emit_func_output(out)
        _, prims, _ = pipeline.lowered_kernels(bb.get(), "t")
        text, _ = pipeline._llvm_ir(prims, "t", KernelTarget("x86_64", "x86-64-v3"), frozenset(), {})
        bodies = re.finditer(r"define [^\n]*@__tvm_parallel_lambda[^\n]*\n.*?\n}\n", text, re.S)
        return sum(body.group(0).count("\n") for body in bodies)

    gelu, relu = parallel_body_lines("gelu"), parallel_body_lines("relu")
    assert 0 < gelu < 2 * relu, (gelu, relu)


def test_clip_bounds_reach_the_kernel_as_immediates(tmp_path):
    """ONNX Clip (opset 11) takes its bounds as inputs, which TVM's importer wraps in
    ``where(isnan(c), -inf, c)``: folded only after legalization, they reached the kernel as
    0-d buffers and a NaN-propagating max against a loaded bound (six instructions a vector
    on x86 against three for a known 0). Folded first, the kernel holds 0 and 6."""
    import onnx
    from onnx import TensorProto, helper

    from relay2cmake.frontends import import_model
    from relay2cmake.lower import pipeline

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
        "relu6",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])],
        [
            helper.make_tensor("w", TensorProto.FLOAT, [8, 4, 3, 3], np.linspace(-1, 1, 288)),
            helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
            helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0]),
        ],
    )
    path = tmp_path / "relu6.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]), path)
    _, prims, _ = pipeline.lowered_kernels(import_model(path, {}).module, "t")
    ranks = [len(param.ty.shape) for func in prims.functions.values() for param in func.params]
    assert ranks and 0 not in ranks, ranks
    text = "".join(func.script() for func in prims.functions.values())
    assert ", T.float32(0.0))" in text.split("T.max(")[1] and ", T.float32(6.0))" in text.split("T.min(")[1]


@pytest.mark.parametrize(("kernel", "padding", "rewritten"), [(2, 0, True), (3, 0, False), (2, 1, False)])
def test_a_transposed_conv_whose_kernel_is_its_stride_becomes_a_matmul(kernel, padding, rewritten):
    """U-Net's 2x2 stride-2 up-convolutions: each input pixel fills its own 2x2 block, so the
    transposed conv is a matmul and a depth-to-space move, with TVM's own numbers. Overlapping
    windows (3x3 at stride 2) and padded ones keep TVM's lowering."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.conv_transpose import conv_transpose_as_matmul

    rng = np.random.default_rng(kernel)
    x = rng.standard_normal((2, 6, 5, 7)).astype("float32")
    w = rng.standard_normal((6, 4, kernel, kernel)).astype("float32")
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float32"))
    with bb.function("main", [data]):
        with bb.dataflow():
            up = relax.op.nn.conv2d_transpose(data, relax.const(w), strides=2, padding=padding)
            out = bb.emit_output(relax.op.nn.relu(bb.emit(up)))
        bb.emit_func_output(out)
    module = bb.get()
    after = conv_transpose_as_matmul(module)
    assert ("conv2d_transpose" not in after.script()) == rewritten
    assert ("R.matmul" in after.script()) == rewritten

    def run(mod):
        executable = tvm.compile(mod, target="llvm")
        return relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()

    np.testing.assert_allclose(run(after), run(module), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("subscripts", "left", "right", "constant_right", "rewritten"),
    [
        ("B G H I D, B G H J D -> B G H I J", (1, 2, 3, 5, 4), (1, 2, 3, 6, 4), False, True),  # MaxViT's Q.K
        ("BGHIJ,BGHJD->BGHID", (1, 2, 3, 5, 6), (1, 2, 3, 6, 4), False, True),  # its P.V
        ("bhqd,bkhd->bhqk", (2, 3, 5, 4), (2, 6, 3, 4), False, True),  # heads in other places
        ("bij,jk->bik", (2, 5, 4), (4, 7), True, True),  # a weight: rows from two axes
        ("ij,kj->ki", (5, 4), (7, 4), False, True),  # the result transposed
        ("bij,bjk->ik", (2, 5, 4), (2, 4, 7), False, True),  # b and j both contracted
        ("ij,jk->k", (5, 4), (4, 7), False, False),  # i summed in one operand only
        ("...ij,...jk->...ik", (2, 5, 4), (2, 4, 7), False, False),  # ellipsis
        ("ii,ij->ij", (4, 4), (4, 7), False, False),  # a diagonal
    ],
)
def test_einsums_that_are_matrix_products_become_matmuls(subscripts, left, right, constant_right, rewritten):
    """Two-operand einsums whose letters are batch, row, column and contracted axes become
    permutes, reshapes and one matmul (MaxViT's attention ran as TVM's generic einsum loops at
    9-10 GFLOPS); the others stay einsums. TVM's einsum's numbers either way."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.einsum_matmul import einsum_as_matmul

    rng = np.random.default_rng(len(subscripts))
    a = rng.standard_normal(left).astype("float32")
    b = rng.standard_normal(right).astype("float32")
    bb = relax.BlockBuilder()
    x = relax.Var("a", relax.TensorType(a.shape, "float32"))
    params = [x] if constant_right else [x, relax.Var("b", relax.TensorType(b.shape, "float32"))]
    with bb.function("main", params):
        with bb.dataflow():
            other = relax.const(b) if constant_right else params[1]
            product = bb.emit(relax.op.einsum(relax.Tuple([x, other]), subscripts))
            out = bb.emit_output(relax.op.nn.relu(product))
        bb.emit_func_output(out)
    module = bb.get()
    after = einsum_as_matmul(module)
    assert ("R.einsum" not in after.script()) == rewritten
    assert ("R.matmul" in after.script()) == rewritten

    def run(mod):
        executable = tvm.compile(mod, target="llvm")
        feeds = [a] if constant_right else [a, b]
        return relax.VirtualMachine(executable, tvm.cpu())["main"](*map(tvm.runtime.tensor, feeds)).numpy()

    got = run(after)
    np.testing.assert_allclose(got, run(module), rtol=1e-5, atol=1e-5)
    want = np.maximum(np.einsum(subscripts.replace(" ", ""), a.astype("float64"), b.astype("float64")), 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


RESHAPE_OUTSIDE_DATAFLOW = """
import numpy as np
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 6), "float32")):
        with R.dataflow():
            h = R.matmul(x, R.const(np.ones((6, 6), "float32")))
            R.output(h)
        logits = R.reshape(h, (1, 4, 6))
        return logits
"""


def test_a_reshape_outside_a_dataflow_block_is_a_view_not_a_kernel(tmp_path):
    """The ``.pt2`` importer returns GPT-2's logits through a reshape outside the dataflow
    block, which TVM keeps as a copy kernel (25 MB copied per run): the plan makes it a view,
    the matmul writes straight into the caller's output, and the reshape kernel is not built."""
    from relay2cmake.frontends.tvmscript import import_tvmscript
    from relay2cmake.lower.pipeline import lower
    from relay2cmake.plan import build_plan

    source = tmp_path / "logits.py"
    source.write_text(RESHAPE_OUTSIDE_DATAFLOW)
    imported = import_tvmscript(source, {})
    lowered = lower(imported.module, "t")
    assert not any("reshape" in name for name in lowered.kernel_symbols), lowered.kernel_symbols
    plan = build_plan(imported, lowered, stage_inputs=True)
    assert [step.kernel for step in plan.steps] == ["matmul"]
    output = plan.buffers[plan.output_buffers[0]]
    assert output.shape == (1, 4, 6) and output.output == 0, "computed in the caller's buffer"
    (written,) = (arg.value for arg in plan.steps[0].args[-1:])
    assert (plan.buffers[written].home, plan.buffers[written].slot) == (output.home, output.slot)


def test_tensors_adopted_by_tvm_keep_shape_dtype_and_values():
    """Weights pass between NumPy and TVM without copies where they can: an aligned array is
    adopted (shares its memory), anything else copied, scalars stay 0-d (a scalar constant
    that became [1] changed a Greater's result shape and a Loop's trip count)."""
    from relay2cmake.tensor_memory import adopted_tensor, aligned_empty, tensor_values

    aligned = aligned_empty((3, 5), np.float32)
    aligned[:] = np.arange(15, dtype=np.float32).reshape(3, 5)
    adopted = adopted_tensor(aligned)
    aligned[0, 0] = 42.0  # shared memory: TVM sees it
    assert tuple(adopted.shape) == (3, 5) and adopted.numpy()[0, 0] == 42.0
    for array in (np.array(2.5, np.float32), np.arange(6, dtype=np.int64)[::2], np.zeros((0, 4), np.float16)):
        tensor = adopted_tensor(array)
        assert tuple(tensor.shape) == array.shape and str(tensor.dtype) == str(array.dtype), array
        np.testing.assert_array_equal(tensor.numpy(), array)
        view = tensor_values(tensor)
        assert view.shape == array.shape and not view.flags.writeable


@pytest.mark.parametrize("op", ["sum", "matmul", "softmax"])
def test_float16_reductions_accumulate_in_float32_and_round_once(op):
    """A float16 sum of 2,048 values of 0.1 came to 236.1 in TVM's float16 accumulator (each
    addition rounded to float16); accumulated in float32 it is the exact sum, 204.8, rounded
    once. The same for a matmul's dot products and a softmax's row sums."""
    import tvm
    from tvm import relax

    from relay2cmake.lower.rewrites.numerics import onnx_numerics

    x = np.full((3, 2048), 0.1, np.float16)
    ones = np.ones((2048, 2), np.float16)
    bb = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(x.shape, "float16"))
    with bb.function("main", [data]):
        with bb.dataflow():
            if op == "sum":
                value = relax.op.sum(data, axis=[1])
            elif op == "matmul":
                value = relax.op.matmul(data, relax.const(ones))
            else:
                value = relax.op.nn.softmax(relax.op.multiply(data, relax.const(np.float16(0))), axis=1)
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    exact = {
        "sum": x.astype(np.float64).sum(axis=1),
        "matmul": x.astype(np.float64) @ ones.astype(np.float64),
        "softmax": np.full(x.shape, 1 / 2048),
    }[op].astype(np.float16)
    rewritten = onnx_numerics(bb.get())
    assert "float32" in rewritten.script()
    executable = tvm.compile(rewritten, target="llvm")
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize(
    ("label", "instruction", "hwcaps"),
    [("x86_64", "pmaddwd", ()), ("x86_64:x86-64-v4+avx512vnni", "vnni", ()), ("x86_64:znver4", "vnni", ()),
     ("x86_64:skylake-avx512", "pmaddwd", ()), ("aarch64", "", ()),
     ("aarch64:cortex-a76", "sdot", (("AT_HWCAP", 20),)),
     ("aarch64:generic+dotprod", "sdot", (("AT_HWCAP", 20),)),
     ("aarch64:neoverse-v1", "usdot", (("AT_HWCAP2", 13),)), ("c", "", ())],
)  # fmt: skip
def test_each_kernel_set_has_its_integer_dot_product(label, instruction, hwcaps):
    """Which instruction a set's uint8 x int8 convolutions use (lower/int8_dot.py), and the
    Linux HWCAP bit an AArch64 context checks before running it (else UNSUPPORTED_CPU)."""
    from relay2cmake.targets import KernelTarget

    target = KernelTarget.from_label(label)
    assert target.int8_dot_instruction == instruction
    assert target.aarch64_hwcaps == hwcaps


def test_c_kernels_print_every_float_constant_exactly():
    """TVM's C code generator prints float constants with six decimals (0.70710677f as
    7.071068e-01f, a float64 ratio as 1.267153e+00): the C kernels computed with constants an
    ulp or more off, and a ResNet-50 quantized by ONNX Runtime had a third of its outputs a
    step or two from TVM's VM in the C kernels only. Each inexact one is now its shortest
    exact literal; exact ones stay as TVM prints them."""
    import tvm
    from tvm.script import tirx as T

    from relay2cmake.lower.pipeline import c_kernels_source

    @T.prim_func
    def scale(a: T.Buffer((4,), "float32"), b: T.Buffer((4,), "float64")):
        T.func_attr({"global_symbol": "scale"})
        for i in range(4):
            a[i] = a[i] * T.float32(0.70710677) + T.float32(0.5)
            b[i] = b[i] * T.float64(1.2671530246734619)

    source = c_kernels_source(tvm.IRModule({"scale": scale}))
    floats = {float(t) for t in re.findall(r"([0-9.]+e[+-][0-9]+)f", source)}
    doubles = {float(t) for t in re.findall(r"([0-9.]+e[+-][0-9]+)(?![0-9f])", source)}
    assert {np.float32(v) for v in floats} == {np.float32(0.70710677), np.float32(0.5)}, source
    assert doubles == {1.2671530246734619}, source
    assert "5.000000e-01f" in source and "r2c_exact_constant" not in source


CLAMP_CHAIN = """
import sys
import tvm, tvm_ffi
from tvm import tirx
from tvm.script import tirx as T
from relay2cmake.lower.pipeline import build_kernels, c_kernels_source

@T.prim_func
def chain(a: T.Buffer((64,), "float32"), b: T.Buffer((64,), "int8")):
    T.func_attr({"global_symbol": "chain"})
    for i in range(64):
        b[i] = T.Cast("int8", a[i])

def requantized_eight_times(store):
    value = store.value.value
    for level in range(8):
        scaled = value * tirx.const(1.5 + level, "float32")
        clamped = tirx.Max(tirx.Min(scaled, tirx.const(127.0, "float32")), tirx.const(-128.0, "float32"))
        quantized = tirx.Cast("int8", tirx.Cast("int32", tirx.round(clamped)))
        value = tirx.Cast("float32", quantized)
    return tirx.BufferStore(store.buffer, quantized, store.indices)

module = tvm.IRModule({"chain": tvm_ffi.structural_map(chain, [(tirx.BufferStore, requantized_eight_times)])})
build_kernels(module, tvm.target.Target("llvm"), "the chain")
source = c_kernels_source(module)
assert "r2c_max_f32(" in source and "r2c_min_f32(" in source, source
print("built")
"""


def test_a_fused_chain_of_requantizations_builds_in_both_kernel_sets(tmp_path):
    """Eight requantizations in one kernel (a QDQ ShuffleNet v2's channel shuffle fuses
    several): their clamps become NaN-ignoring max/min calls (``saturating_clamps``). Written
    as TIR selects instead, TVM's simplifier inlined their ``Let`` operands into the
    conditions and took exponential time (4 levels 1.8 s, 6 over 100 s; the ShuffleNet never
    finished building)."""
    script = tmp_path / "chain.py"  # a file: TVMScript reads its source
    script.write_text(CLAMP_CHAIN)
    result = subprocess.run(
        [sys.executable, script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0 and "built" in result.stdout, result.stderr[-3000:]


def test_reinterpretations_in_c_kernels_become_memcpy_loads():
    """TVM prints a reinterpretation as a pointer cast, in an expression or binding a variable
    (fast_exp's bits of a float: arm-none-eabi-gcc -Os -Werror stopped at -Wstrict-aliasing);
    both forms become loads through memcpy."""
    from relay2cmake.errors import ModelError
    from relay2cmake.lower import c_source

    source = (
        '#include "tvm/runtime/base.h"\n'
        "void k(float v) {\n"
        "  int32_t bits = *(int32_t *)(&(v));\n"
        "  float back = (*(float *)(&(bits))) - 1.0f;\n"
        "}\n"
    )
    adapted = c_source.adapt(source, "abi.h")
    assert "int32_t bits = r2c_load_int32_t(&(v));" in adapted
    assert "float back = r2c_load_float(&(bits)) - 1.0f;" in adapted
    assert " *)(&(" not in adapted
    # An operand in a form the rewrite cannot read is refused, not shipped as a raw pun.
    with pytest.raises(ModelError, match="reinterprets a value in an unexpected form"):
        c_source.adapt(source.replace("&(bits)", "&(((float*)b)[i])"), "abi.h")


def test_weights_computed_from_weights_fold_without_growing_the_weights():
    """NFNet's weight standardization (a training-mode BatchNormalization over the raw
    weights, 4 MB here): folded even though it is over 1 MB, since the computed weights
    replace the raw ones, and computed as ONNX Runtime does; a 4 MB transpose of weights
    that another node still reads raw (a tied embedding) is not folded (the weights would
    grow by its size)."""
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    from relay2cmake.frontends import onnx_fold

    rng = np.random.default_rng(4)
    raw = rng.standard_normal((512, 2048)).astype(np.float32)
    nodes = [
        helper.make_node("Reshape", ["raw", "rows_3d"], ["raw_3d"]),  # timm's [1, O, I * kh * kw]
        helper.make_node(
            "BatchNormalization",
            ["raw_3d", "gain", "zero", "mean", "var"],
            ["standardized_3d", "running_mean", "running_var"],
            training_mode=1,
            momentum=1.0,
            epsilon=1e-5,
        ),
        helper.make_node("Reshape", ["standardized_3d", "rows_2d"], ["standardized"]),
        helper.make_node("MatMul", ["x", "standardized"], ["y"]),  # [1, 512] x [512, 2048]
        helper.make_node("Transpose", ["tied"], ["tied_t"], perm=[1, 0]),
        helper.make_node("MatMul", ["y", "tied_t"], ["z"]),  # the tied weights read twice
        helper.make_node("MatMul", ["x", "tied"], ["w"]),
    ]
    channels = np.ones(512, np.float32)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("z", "w")],
        [
            numpy_helper.from_array(raw, "raw"),
            numpy_helper.from_array(rng.standard_normal((512, 2048)).astype(np.float32) / 32, "tied"),
            numpy_helper.from_array(rng.uniform(0.5, 2, 512).astype(np.float32), "gain"),
            numpy_helper.from_array(np.zeros(512, np.float32), "zero"),
            numpy_helper.from_array(0 * channels, "mean"),
            numpy_helper.from_array(channels, "var"),
            numpy_helper.from_array(np.array([1, 512, 2048], np.int64), "rows_3d"),
            numpy_helper.from_array(np.array([512, 2048], np.int64), "rows_2d"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)])
    x = rng.standard_normal((1, 512)).astype(np.float32)
    expected = onnxruntime.InferenceSession(model.SerializeToString()).run(None, {"x": x})
    before = sum(onnx_fold.initializer_bytes(t) for t in model.graph.initializer)
    folded = onnx_fold.fold_constants(model)
    kinds = [n.op_type for n in folded.graph.node]
    assert "BatchNormalization" not in kinds and "Transpose" in kinds, kinds
    assert sum(onnx_fold.initializer_bytes(t) for t in folded.graph.initializer) <= before + (1 << 20)
    got = onnxruntime.InferenceSession(folded.SerializeToString()).run(None, {"x": x})
    for want, have in zip(expected, got, strict=True):
        np.testing.assert_allclose(have, want, rtol=2e-4, atol=2e-3)


def _conv_model(x_shape, w, **attributes):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], **attributes)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "x_shape, w_shape, attributes",
    [
        (
            (2, 6, 10, 7),
            (6, 2, 3, 2),
            {"dilations": [3, 2], "group": 3, "strides": [2, 1], "pads": [1, 1, 2, 2]},
        ),
        ((1, 4, 8, 9), (4, 4, 3, 3), {"dilations": [2, 2], "auto_pad": "SAME_LOWER", "strides": [2, 2]}),
        ((1, 2, 6, 5, 5), (3, 2, 2, 3, 3), {"dilations": [2, 1, 2], "pads": [1, 1, 1, 1, 1, 1]}),
    ],
)
def test_the_reference_evaluators_dilated_conv_matches_onnxs(x_shape, w_shape, attributes):
    """The golden path's own Conv for onnx's reference evaluator (dilated kernels summed tap
    by tap) computes what onnx's computes: groups, strides, SAME padding, 3-D."""
    from onnx.reference import ReferenceEvaluator

    from relay2cmake.frontends.onnx import _dilated_conv

    rng = np.random.default_rng(8)
    x = rng.standard_normal(x_shape).astype(np.float32)
    conv = _conv_model(x_shape, rng.standard_normal(w_shape).astype(np.float32), **attributes)
    ours = ReferenceEvaluator(conv, new_ops=[_dilated_conv()]).run(None, {"x": x})[0]
    theirs = ReferenceEvaluator(conv).run(None, {"x": x})[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


def test_the_reference_evaluators_atrous_conv_takes_little_memory():
    """An atrous 3 x 3 conv with taps 36 apart (DeepLab v3's pyramid; gen was killed for want
    of memory there, 23 GB): the golden path's Conv takes a tenth or less of the memory of
    onnx's, which writes out the dilated kernel and unfolds the image for it."""
    import tracemalloc

    from onnx.reference import ReferenceEvaluator

    from relay2cmake.frontends.onnx import _dilated_conv

    rng = np.random.default_rng(9)
    weights = rng.standard_normal((64, 64, 3, 3)).astype(np.float32)
    atrous = _conv_model((1, 64, 14, 14), weights, dilations=[36, 36], pads=[36] * 4)
    image = {"x": rng.standard_normal((1, 64, 14, 14)).astype(np.float32)}
    peaks = []
    for new_ops in ([_dilated_conv()], []):
        tracemalloc.start()
        ReferenceEvaluator(atrous, new_ops=new_ops).run(None, image)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[0] * 10 < peaks[1], peaks


def test_the_self_check_leaves_out_objects_this_cpu_cannot_run():
    """``--target x86_64:x86-64-v3+avxvnni`` generated on a CPU without AVX-VNNI: the package
    refuses to run those objects here, so gen checks the C kernels and says what it left out
    (it failed the whole generation: "context_create failed")."""
    from relay2cmake.commands import self_check
    from relay2cmake.targets import KernelTarget

    if self_check.HOST_ARCH != "x86_64":
        pytest.skip("an x86-64 machine's object sets")
    both = self_check.variants("m", ("x86_64",), ())
    assert [v.label for v in both] == ["x86_64 objects", "portable C kernels"]
    alone = self_check.variants("m", ("x86_64",), (), host_runs_objects=False)
    assert [v.label for v in alone] == ["portable C kernels"]
    impossible = KernelTarget("x86_64", "x86-64-v3+avxvnni+avx512vnni+amx-int8")
    result = self_check.check_package(Path("/nonexistent"), "m", (), (), False, impossible)
    assert result.not_run == f"{impossible.label} objects (this CPU lacks their instructions)"


def test_a_slice_to_a_length_read_from_a_run_time_shape_imports(tmp_path):
    """PyTorch's transformer encoder exported with a sequence of 1..512 slices a tensor whose
    sequence extent is chosen at run time, its end read from the input's shape: the Slice
    converter asked for the data's static shape first and refused the model; such a slice now
    goes to TVM's converter, and the model imports with its one run-time dimension."""
    import onnx
    from onnx import TensorProto, helper

    from relay2cmake.cli import parse_input_shapes
    from relay2cmake.frontends import import_model

    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
        helper.make_node("Unsqueeze", ["length", "zero"], ["end"]),
        helper.make_node("Slice", ["x", "start", "end", "one_axis"], ["rows"]),
        helper.make_node("Add", ["x", "rows"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slice_to_length",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "seq", 8])],
        initializer=[
            helper.make_tensor("one", TensorProto.INT64, [], [1]),
            helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
            helper.make_tensor("start", TensorProto.INT64, [1], [0]),
            helper.make_tensor("one_axis", TensorProto.INT64, [1], [1]),
        ],
    )
    path = tmp_path / "slice.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    imported = import_model(path, parse_input_shapes(["x=1,1..16,8"]))
    assert len(imported.dims) == 1 and imported.dims[0].high == 16, imported.dims
