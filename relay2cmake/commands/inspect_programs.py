"""``relay2cmake inspect`` for the formats that are programs, not ONNX graphs: a PyTorch
ExportedProgram (``.pt2``) and a TVMScript module (``.py``).

Read as their frontends read them, without TVM's lowering: the ``.pt2`` from its FX graph
(PyTorch's shapes, symbolic dimensions by their names, parameters and buffers, and the ATen
operators TVM's importer has no converter for), the TVMScript module from its Relax ``main``
(the file is executed, as ``gen`` does: it is code). The arena estimate packs every
intermediate by its lifetime in program order, like the ONNX one: before fusion, an upper
bound of what ``gen`` plans.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from relay2cmake import arena
from relay2cmake.commands.inspect_report import Report, TensorReport
from relay2cmake.errors import ModelError, UserError
from relay2cmake.frontends import InputShapes, check_input_shape_names

if TYPE_CHECKING:
    from tvm import relax


def _output_names(count: int) -> list[str]:
    """As the frontends name them (``relax_signature.main_signatures``)."""
    return ["output"] if count == 1 else [f"output_{i}" for i in range(count)]


def _pack(lifetimes: list[arena.Lifetime] | None) -> int | None:
    if lifetimes is None:
        return None
    return arena.pack(lifetimes)[1] if lifetimes else 0


# --- PyTorch ExportedProgram -----------------------------------------------------------


def _fake_tensor(value) -> bool:
    return hasattr(value, "shape") and hasattr(value, "dtype")


def _torch_shape(value) -> list[int | str]:
    return [int(d) if isinstance(d, int) else str(d) for d in value.shape]


def _torch_dtype(value) -> str:
    return str(value.dtype).removeprefix("torch.")


def _torch_bytes(value, bindings: dict) -> int | None:
    """Bytes of a fake tensor, its symbolic dimensions evaluated with ``bindings``."""
    count = 1
    for dim in value.shape:
        if isinstance(dim, int):
            count *= dim
            continue
        expr = dim.node.expr.subs(bindings)
        if not expr.is_number:
            return None
        count *= int(expr)
    return count * value.element_size() if hasattr(value, "element_size") else None


def _torch_bindings(inputs: list, input_shapes: dict) -> dict:
    """Symbol → value for each symbolic input dimension ``--input-shape`` fixes."""
    bindings = {}
    for node in inputs:
        given = input_shapes.get(node.name)
        if given is None:
            continue
        for dim, value in zip(node.meta["val"].shape, given, strict=False):
            if not isinstance(dim, int) and dim.node.expr.is_symbol:
                bindings[dim.node.expr] = value
    return bindings


def _operator(node) -> str:
    """``aten.linear.default`` as PyTorch prints it; Python's own functions (``getitem``) by name."""
    text = str(node.target)
    return text if text.startswith("aten.") else getattr(node.target, "__name__", text)


def _unsupported_aten(program) -> list[str]:
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    from relay2cmake.frontends.torch_converters import CONVERTERS

    known = set(ExportedProgramImporter().create_convert_map()) | set(CONVERTERS)
    return [
        f"{_operator(node)} ({node.name})"
        for node in program.graph.nodes
        if node.op == "call_function" and getattr(node.target, "__name__", str(node.target)) not in known
    ]


def inspect_pt2(path: Path, input_shapes: InputShapes) -> Report:
    from relay2cmake.frontends.torch import load_program, user_input_names

    program = load_program(path)
    names = user_input_names(program)
    check_input_shape_names(input_shapes, names)
    nodes = list(program.graph.nodes)
    placeholders = {n.name: n for n in nodes if n.op == "placeholder"}
    inputs = [placeholders[name] for name in names]
    output_node = next(n for n in nodes if n.op == "output")
    results = output_node.args[0] if isinstance(output_node.args[0], tuple | list) else [output_node.args[0]]
    outputs = [r.meta["val"] for r in results]
    bindings = _torch_bindings(inputs, input_shapes)
    weights = [*program.state_dict.values(), *program.constants.values()]

    lifetimes: list[arena.Lifetime] | None = []
    last_use = {}
    for step, node in enumerate(nodes):
        for used in node.all_input_nodes:
            last_use[used.name] = step
    output_names = {r.name for r in results}
    for step, node in enumerate(nodes):
        value = node.meta.get("val")
        if node.op != "call_function" or not _fake_tensor(value) or lifetimes is None:
            continue
        size = _torch_bytes(value, bindings)
        if size is None:
            lifetimes = None
            continue
        end = len(nodes) if node.name in output_names else last_use.get(node.name, step)
        lifetimes.append(arena.Lifetime(node.name, size, step, end))
    return Report(
        model=path.name,
        format="PyTorch ExportedProgram",
        opset=None,
        inputs=[
            TensorReport(n, _torch_dtype(node.meta["val"]), _torch_shape(node.meta["val"]))
            for n, node in zip(names, inputs, strict=True)
        ],
        outputs=[
            TensorReport(name, _torch_dtype(v), _torch_shape(v))
            for name, v in zip(_output_names(len(outputs)), outputs, strict=True)
        ],
        operators=dict(sorted(Counter(_operator(n) for n in nodes if n.op == "call_function").items())),
        nodes=sum(n.op == "call_function" for n in nodes),
        parameters=len(weights),
        parameter_bytes=sum(int(t.numel()) * t.element_size() for t in weights),
        unsupported=_unsupported_aten(program),
        estimated_arena_bytes=_pack(lifetimes),
    )


# --- TVMScript --------------------------------------------------------------------------


def _relax_shape(info) -> list[int | str]:
    import tvm

    values = list(info.shape.values) if info.shape is not None and hasattr(info.shape, "values") else []
    return [int(d.value) if isinstance(d, tvm.tirx.IntImm) else str(d) for d in values]


def _relax_bytes(info) -> int | None:
    from tvm import relax

    from relay2cmake.dtypes import storage_bytes

    if not isinstance(info, relax.TensorType):
        return None
    shape = _relax_shape(info)
    if not all(isinstance(d, int) for d in shape):
        return None
    return storage_bytes(str(info.dtype), tuple(int(d) for d in shape))


def _relax_lifetimes(main: relax.Function) -> list[arena.Lifetime] | None:
    from tvm import relax

    bindings = [b for block in main.body.blocks for b in block.bindings]
    step_of = {b.var.name: i for i, b in enumerate(bindings)}
    last_use: dict[str, int] = {}
    for step, binding in enumerate(bindings):

        def note(expr, step=step):
            if isinstance(expr, relax.Var) and expr.name in step_of:
                last_use[expr.name] = step

        relax.analysis.post_order_visit(binding.value, note)
    # The outputs: the vars the body returns, through the tuple it builds of them.
    returned: set[str] = set()
    relax.analysis.post_order_visit(
        main.body.body, lambda e: returned.add(e.name) if isinstance(e, relax.Var) else None
    )
    for binding in reversed(bindings):
        if binding.var.name in returned and isinstance(binding.value, relax.Tuple):
            returned.update(f.name for f in binding.value.fields if isinstance(f, relax.Var))
    lifetimes = []
    for step, binding in enumerate(bindings):
        if not isinstance(binding.var.ty, relax.TensorType):
            continue
        size = _relax_bytes(binding.var.ty)
        if size is None:
            return None
        name = binding.var.name
        end = len(bindings) if name in returned else last_use.get(name, step)
        lifetimes.append(arena.Lifetime(f"{name}#{step}", size, step, end))
    return lifetimes


def _constants(main: relax.Function) -> list:
    """The tensors of ``main``'s constants (TVM 0.27 calls a Relax constant GenericConst)."""
    import tvm
    from tvm import relax

    found: list = []
    relax.analysis.post_order_visit(
        main, lambda e: found.append(e.value) if isinstance(e, tvm.ir.GenericConst) else None
    )
    return found


# Relax operators that are not legalized, because the VM or our plan carries them out itself.
_BUILTIN_PREFIXES = ("relax.call_", "relax.builtin.", "relax.memory.", "relax.vm.", "relax.null_value")


def _unlegalizable(operators: list[str]) -> list[str]:
    import tvm

    missing = []
    for name in sorted(set(operators)):
        if name.startswith(_BUILTIN_PREFIXES):
            continue
        if tvm.ir.Op.get(name).get_attr("FLegalize") is None:
            missing.append(f"{name} (no lowering in TVM)")
    return missing


def inspect_tvmscript(path: Path, input_shapes: InputShapes) -> Report:
    from relay2cmake.frontends.relax_signature import bind_input_shapes
    from relay2cmake.frontends.tvmscript import load_module, operators

    module = load_module(path)
    main = module["main"]
    names = [p.name for p in main.params]
    check_input_shape_names(input_shapes, names)
    inputs = [
        TensorReport(n, str(p.ty.dtype), _relax_shape(p.ty)) for n, p in zip(names, main.params, strict=True)
    ]
    try:
        static_main = bind_input_shapes(module, names, input_shapes)[0]["main"]
        lifetimes = _relax_lifetimes(static_main)
    except (UserError, ModelError):  # a symbolic dimension --input-shape does not fix: no estimate
        static_main, lifetimes = main, None
    ret = static_main.ret_ty
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    called = operators(main)
    constants = _constants(main)
    return Report(
        model=path.name,
        format="TVMScript (Relax)",
        opset=None,
        inputs=inputs,
        outputs=[
            TensorReport(name, str(info.dtype), _relax_shape(info))
            for name, info in zip(_output_names(len(fields)), fields, strict=True)
        ],
        operators=dict(sorted(Counter(called).items())),
        nodes=len(called),
        parameters=len(constants),
        parameter_bytes=sum(int(c.numpy().nbytes) for c in constants),
        unsupported=_unlegalizable(called),
        estimated_arena_bytes=_pack(lifetimes),
    )
