"""``relay2cmake inspect``: what a model needs, in seconds, before anyone waits for a build.

The report is the same for every format; ``.pt2`` and TVMScript files are read in
``inspect_programs.py``. For ONNX it reads the graph only (no TVM lowering): inputs and
outputs with symbolic dimensions, an operator histogram, parameter bytes, the operators
that cannot be lowered, and an estimate of the arena from ONNX shape inference and node
order (before fusion, so an upper bound of what ``gen`` plans for intermediates).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx

from relay2cmake import arena
from relay2cmake.commands.inspect_report import Report, TensorReport
from relay2cmake.dtypes import storage_bytes
from relay2cmake.errors import UserError
from relay2cmake.frontends import check_input_shape_names, check_model_path
from relay2cmake.frontends.onnx import load_checked, unsupported_nodes, with_function_bodies
from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES
from relay2cmake.frontends.onnx_fold import set_input_shapes
from relay2cmake.frontends.onnx_qdq import QUANTIZED_OPERATORS, integer_operators
from relay2cmake.frontends.onnx_weights import initializer_bytes


def _dtype(elem_type: int) -> str:
    if elem_type in ONNX_DTYPES:
        return ONNX_DTYPES[elem_type]
    return onnx.TensorProto.DataType.Name(elem_type).lower()


def _tensor(vi: onnx.ValueInfoProto) -> TensorReport:
    tensor_type = vi.type.tensor_type
    dims: list[int | str] = []
    for dim in tensor_type.shape.dim:
        dims.append(dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or "?"))
    return TensorReport(vi.name, _dtype(tensor_type.elem_type), dims)


def _static_bytes(vi: onnx.ValueInfoProto) -> int | None:
    tensor_type = vi.type.tensor_type
    if tensor_type.elem_type not in ONNX_DTYPES or not tensor_type.HasField("shape"):
        return None
    if not all(d.HasField("dim_value") for d in tensor_type.shape.dim):
        return None
    shape = tuple(d.dim_value for d in tensor_type.shape.dim)
    return storage_bytes(ONNX_DTYPES[tensor_type.elem_type], shape)


def _estimate_arena(model: onnx.ModelProto, input_shapes: dict[str, tuple[int, ...]]) -> int | None:
    """Pack every intermediate by its node-order lifetime, as ``gen`` does after lowering."""
    graph = model.graph
    set_input_shapes(model, input_shapes)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except Exception:
        return None
    infos = {vi.name: vi for vi in [*inferred.graph.value_info, *inferred.graph.output]}
    constants = {init.name for init in graph.initializer} | {vi.name for vi in graph.input}
    outputs = {vi.name for vi in graph.output}
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step, node in enumerate(graph.node):
        for name in node.input:
            if name in first:
                last[name] = step
        for name in node.output:
            if name and name not in constants:
                first.setdefault(name, step)
                last[name] = step
    lifetimes = []
    for name, start in first.items():
        if name not in infos:
            return None
        size = _static_bytes(infos[name])
        if size is None:
            return None
        end = len(graph.node) if name in outputs else last[name]
        lifetimes.append(arena.Lifetime(name, size, start, end))
    return arena.pack(lifetimes)[1] if lifetimes else 0


# Operators on 8-bit integers (ONNX's and ONNX Runtime's quantized ones: some go through float32
# per element inside, as ONNX Runtime's kernels do), the quantizing steps, and those that only
# move or reshape data (the same in any type).
INTEGER_OPERATORS = QUANTIZED_OPERATORS | {"ConvInteger", "MatMulInteger"}
QUANTIZING = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})
DATA_MOVEMENT = frozenset(
    {"Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Gather", "Split",
     "Identity", "Shape", "Expand", "Tile", "Pad", "MaxPool", "Cast", "Constant"}
)  # fmt: skip


def _arithmetic(model: onnx.ModelProto) -> tuple[dict[str, int], dict[str, int]]:
    """For a quantized model, (integer operators, float operators that compute), as gen will
    convert them (QDQ patterns folded); two empty dicts for a float model."""
    folded, _ = integer_operators(model)
    operators = Counter(n.op_type for n in folded.graph.node)
    if not set(operators) & (INTEGER_OPERATORS | QUANTIZING):
        return {}, {}
    integer = {op: n for op, n in sorted(operators.items()) if op in INTEGER_OPERATORS}
    floating = {
        op: n
        for op, n in sorted(operators.items())
        if op not in INTEGER_OPERATORS | QUANTIZING | DATA_MOVEMENT
    }
    return integer, floating


def inspect_model(path: Path, input_shapes: dict[str, tuple[int, ...]]) -> Report:
    check_model_path(path)
    suffix = path.suffix.lower()
    if suffix in (".pt2", ".py"):
        from relay2cmake.commands import inspect_programs

        read = inspect_programs.inspect_pt2 if suffix == ".pt2" else inspect_programs.inspect_tvmscript
        return read(path, dict(input_shapes))
    if suffix != ".onnx":
        raise UserError(
            f"inspect reads ONNX models (.onnx), PyTorch exported programs (.pt2) and TVMScript "
            f"modules (.py); {str(path)!r} is none of them."
        )
    model = load_checked(path)
    initializers = {init.name for init in model.graph.initializer}
    inputs = [_tensor(vi) for vi in model.graph.input if vi.name not in initializers]
    check_input_shape_names(input_shapes, [t.name for t in inputs])
    parameter_bytes = sum(initializer_bytes(init) for init in model.graph.initializer)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    integer, floating = _arithmetic(model)
    return Report(
        model=path.name,
        format="ONNX",
        opset=opset,
        inputs=inputs,
        outputs=[_tensor(vi) for vi in model.graph.output],
        operators=dict(sorted(Counter(n.op_type for n in model.graph.node).items())),
        nodes=len(model.graph.node),
        parameters=len(model.graph.initializer),
        parameter_bytes=parameter_bytes,
        unsupported=unsupported_nodes(with_function_bodies(model)),
        estimated_arena_bytes=_estimate_arena(model, input_shapes),
        integer_operators=integer,
        float_operators=floating,
    )


def render_text(report: Report) -> str:
    def shape(t: TensorReport) -> str:
        return "[" + ", ".join(map(str, t.shape)) + "]"

    source = f"ONNX opset {report.opset}" if report.opset is not None else report.format
    lines = [f"{report.model}: {source}, {report.nodes} nodes"]
    lines.append("inputs:")
    lines += [f"  {t.name}: {t.dtype}{shape(t)}" for t in report.inputs]
    symbolic = [t.name for t in report.inputs if any(isinstance(d, str) for d in t.shape)]
    if symbolic:
        lines.append(
            f"  symbolic dimensions in {', '.join(symbolic)}: fix them with --input-shape NAME=D0,D1,..."
        )
    lines.append("outputs:")
    lines += [f"  {t.name}: {t.dtype}{shape(t)}" for t in report.outputs]
    lines.append("operators: " + ", ".join(f"{op} x{count}" for op, count in report.operators.items()))
    lines.append(f"parameters: {report.parameters} tensors, {report.parameter_bytes} bytes")
    if report.integer_operators or report.float_operators:

        def listed(operators: dict[str, int]) -> str:
            return ", ".join(f"{op} x{count}" for op, count in operators.items()) or "none"

        lines.append(
            f"quantized: in integers {listed(report.integer_operators)}; "
            f"stays float {listed(report.float_operators)}"
        )
    if report.estimated_arena_bytes is None:
        lines.append("estimated arena: unknown (some shapes are symbolic or could not be inferred)")
    else:
        lines.append(
            f"estimated arena: {report.estimated_arena_bytes} bytes (before fusion; gen gives the exact plan)"
        )
    if report.unsupported:
        lines.append(f"cannot be lowered ({len(report.unsupported)}): " + "; ".join(report.unsupported))
    else:
        lines.append("every operator can be lowered")
    return "\n".join(lines)
