"""ONNX → Relax, with every problem the user can fix reported before any long step."""

from __future__ import annotations

import contextlib
import io
import math
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from relay2cmake.dtypes import PACKED, carrier, numpy_dtype
from relay2cmake.errors import ModelError, UserError, describe
from relay2cmake.frontends import (
    ImportedModel,
    InputShapes,
    Reference,
    TensorSignature,
    check_input_shape_names,
    file_sha256,
)
from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES
from relay2cmake.frontends.onnx_fold import (
    drop_empty_resize_inputs,
    fold_constants,
    freeze_inputs,
    set_input_shapes,
    static_tensor_types,
)
from relay2cmake.frontends.onnx_functions import expand_functions
from relay2cmake.frontends.onnx_weights import (
    check_external_data,
    external_data,
    initializer_bytes,
    is_external,
    mapped_values,
)
from relay2cmake.frontends.relax_signature import dim_symbol, with_dim_bounds
from relay2cmake.symbolic import DimExpr, DimRange, symbolic_shape

DEFAULT_DOMAINS = ("", "ai.onnx")


def _load(path: Path) -> onnx.ModelProto:
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises several unrelated types on garbage
        raise ModelError(
            f"{str(path)!r} is not a readable ONNX model ({type(exc).__name__}: {exc}). "
            "Check that the file is complete and really is .onnx."
        ) from None
    if not model.graph.node and not model.graph.output:
        raise ModelError(f"{str(path)!r} holds no ONNX graph (no nodes, no outputs); is it an ONNX model?")
    weight_bytes = _initializer_bytes(model, path.parent)
    if weight_bytes >= PROTOBUF_LIMIT:
        # ONNX's checker and shape inference, and TVM's importer, all serialize the model.
        raise ModelError(
            f"{str(path)!r} holds {weight_bytes / 2**30:.2f} GiB of weights; relay2cmake reads models "
            "through protobuf, which stops at 2 GiB even when the weights are external data. Models this "
            "large are not supported yet (split the model, or store the weights in a smaller type)."
        )
    # External data stays in its files (TVM's importer reads it from there, references read
    # the model file itself); here only its places are checked.
    check_external_data(model, path.parent)
    return model


PROTOBUF_LIMIT = 2**31 - 2**20  # protobuf's 2 GiB message limit, less room for the graph itself


def _initializer_bytes(model: onnx.ModelProto, folder: Path) -> int:
    """Bytes of all initializers without reading them: external data by its checked range,
    the rest by shape and type (protobuf's ByteSize walks the data: 1.3 s for 256 MB)."""
    total = 0
    for tensor in model.graph.initializer:
        if is_external(tensor):
            total += external_data(tensor, folder).length
        else:
            total += initializer_bytes(tensor) or tensor.ByteSize()  # strings: ByteSize
    return total


# The largest tensor a package may hold: a model asking for more is damaged or hostile (a
# 137-byte ConstantOfShape([1e9]) made the importers allocate 4 GB), and its arena would not
# fit the devices this is for. Checked on the shapes ONNX infers, before anything evaluates.
MAX_TENSOR_BYTES = 2**31


def _check_tensor_sizes(model: onnx.ModelProto, inputs: tuple[TensorSignature, ...]) -> None:
    """Every input (from its signature) and every tensor whose shape ONNX infers."""
    sizes = {s.name: (s.shape, numpy_dtype(s.dtype).itemsize) for s in inputs}
    for name, (elem_type, shape) in static_tensor_types(model).items():
        itemsize = numpy_dtype(ONNX_DTYPES[elem_type]).itemsize if elem_type in ONNX_DTYPES else 8
        sizes[name] = (shape, itemsize)
    for name, (shape, itemsize) in sizes.items():
        if any(d < 0 for d in shape):
            raise ModelError(f"Tensor {name!r} has a negative dimension {list(shape)}: the model is invalid.")
        nbytes = math.prod(shape) * itemsize
        if nbytes > MAX_TENSOR_BYTES:
            raise ModelError(
                f"Tensor {name!r} would hold {nbytes / 2**30:.3g} GiB (shape {list(shape)}); relay2cmake "
                f"refuses tensors over {MAX_TENSOR_BYTES / 2**30:.0f} GiB (a model that large, or a "
                "damaged one)."
            )


def _check(model: onnx.ModelProto, path: Path) -> None:
    external = any(is_external(tensor) for tensor in model.graph.initializer)
    try:
        # The checker finds external data files relative to the model file only.
        onnx.checker.check_model(str(path) if external else model)
    except Exception as exc:
        # The checker's message runs over several lines ("... input 'b' of node:\n{...}").
        message = " ".join(str(exc).split())[:600] or type(exc).__name__
        if _per_axis_quantization_before_13(model):
            message += (
                ". (QuantizeLinear/DequantizeLinear take a per-channel axis from opset 13 on; ONNX "
                "Runtime's quantizer writes one into older models when asked for per-channel "
                "weights. Convert the float model to opset 13 or later first, e.g. with "
                "onnx.version_converter.convert_version(model, 13), then quantize it.)"
            )
        raise ModelError(f"{str(path)!r} is not a valid ONNX model: {message}") from None


def _per_axis_quantization_before_13(model: onnx.ModelProto) -> bool:
    return _opset(model) < 13 and any(
        n.op_type in ("QuantizeLinear", "DequantizeLinear") and any(a.name == "axis" for a in n.attribute)
        for n in model.graph.node
    )


def _opset(model: onnx.ModelProto) -> int:
    for entry in model.opset_import:
        if entry.domain in DEFAULT_DOMAINS:
            return entry.version
    return 1


def _dtype_name(elem_type: int, what: str) -> str:
    if elem_type not in ONNX_DTYPES:
        type_name = (
            TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() else elem_type
        )
        raise ModelError(
            f"{what} has element type {type_name}, which relay2cmake cannot pass through a C API; "
            f"supported: {', '.join(sorted(set(ONNX_DTYPES.values())))}."
        )
    return ONNX_DTYPES[elem_type]


def _input_signatures(
    model: onnx.ModelProto, input_shapes: dict[str, tuple[int | tuple[int, int], ...]]
) -> tuple[tuple[TensorSignature, ...], tuple[DimRange, ...]]:
    """The inputs' signatures and the dimensions chosen at run time. A dimension given as a
    range ``LO..HI`` stays symbolic; inputs whose axes share an ONNX ``dim_param`` share its
    value or range, so giving it once is enough (two different ones are an error)."""
    initializers = {init.name for init in model.graph.initializer}
    graph_inputs = [vi for vi in model.graph.input if vi.name not in initializers]
    names = [vi.name for vi in graph_inputs]
    check_input_shape_names(input_shapes, names)
    shared = _shared_dims(graph_inputs, input_shapes)
    dims: dict[str, DimRange] = {}  # by the model's name for the dimension
    signatures = []
    for vi in graph_inputs:
        what = f"Input {vi.name!r}"
        if not vi.type.HasField("tensor_type"):
            raise ModelError(f"{what} is not a tensor (sequences, maps and optionals are not supported).")
        dtype = _dtype_name(vi.type.tensor_type.elem_type, what)
        given = input_shapes.get(vi.name)
        if not vi.type.tensor_type.HasField("shape"):
            if given is None:
                raise UserError(
                    f"{what} has no shape in the model; give one with --input-shape {vi.name}=D0,D1,..."
                )
            axes = [(f"{vi.name}_{axis}", value) for axis, value in enumerate(given)]
        else:
            model_dims = vi.type.tensor_type.shape.dim
            if given is not None and len(given) != len(model_dims):
                raise UserError(
                    f"--input-shape for {vi.name!r} has {len(given)} dimensions but the input has "
                    f"{len(model_dims)} ({_describe_dims(model_dims)})."
                )
            axes = [
                (dim.dim_param or f"{vi.name}_{axis}", _axis_value(vi, axis, dim, given, shared))
                for axis, dim in enumerate(model_dims)
            ]
        shape: list[int] = []
        symbolic: list[DimExpr | None] = []
        for dim_name, value in axes:
            if isinstance(value, int):
                shape.append(value)
                symbolic.append(None)
                continue
            if dim_name not in dims:
                dims[dim_name] = DimRange(dim_name, f"dim{len(dims)}", *value)
            shape.append(value[1])
            symbolic.append(DimExpr("dim", list(dims).index(dim_name)))
        if dtype in PACKED and any(symbolic):
            raise UserError(
                f"{what} has the sub-byte type {dtype}, whose packed buffer needs a static shape; "
                f"give one with --input-shape {vi.name}=D0,D1,..."
            )
        signatures.append(
            TensorSignature(vi.name, dtype, tuple(shape), symbolic=tuple(symbolic) if any(symbolic) else ())
        )
    return tuple(signatures), tuple(dims.values())


def _shared_dims(graph_inputs, input_shapes) -> dict[str, int | tuple[int, int]]:
    """What ``--input-shape`` gives each ONNX ``dim_param``, through any input that has it."""
    shared: dict[str, int | tuple[int, int]] = {}
    given_by: dict[str, str] = {}
    for vi in graph_inputs:
        given = input_shapes.get(vi.name)
        if given is None or not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
            continue
        for dim, value in zip(vi.type.tensor_type.shape.dim, given, strict=False):
            if not dim.dim_param or dim.HasField("dim_value"):
                continue
            if dim.dim_param in shared and shared[dim.dim_param] != value:
                raise UserError(
                    f"--input-shape gives the dimension {dim.dim_param!r} as "
                    f"{_dim_text(shared[dim.dim_param])} "
                    f"for {given_by[dim.dim_param]!r} and as {_dim_text(value)} for {vi.name!r}; inputs that "
                    "share a dimension must agree."
                )
            shared[dim.dim_param] = value
            given_by[dim.dim_param] = vi.name
    return shared


def _axis_value(vi, axis: int, dim, given, shared) -> int | tuple[int, int]:
    """One axis of an input: the model's static value, or what ``--input-shape`` gives it
    (directly or through a shared ``dim_param``)."""
    static = dim.dim_value if dim.HasField("dim_value") else None
    if static is not None and static < 0:
        raise ModelError(
            f"Input {vi.name!r} declares dimension {axis} as {static}; dimensions cannot be negative."
        )
    value = given[axis] if given is not None else shared.get(dim.dim_param) if dim.dim_param else None
    if value is None:
        if static is not None:
            return static
        model_dims = vi.type.tensor_type.shape.dim
        label = f"{dim.dim_param!r}" if dim.dim_param else "unnamed"
        example = ",".join(_example_dims(model_dims))
        ranged = ",".join(
            str(d.dim_value) if d.HasField("dim_value") else ("1..8" if i == axis else "1")
            for i, d in enumerate(model_dims)
        )
        raise UserError(
            f"Input {vi.name!r} has a symbolic dimension {axis} ({label}; "
            f"shape {_describe_dims(model_dims)}). "
            f"Fix it with --input-shape {vi.name}={example}, or give it a range chosen at run time, "
            f"as in --input-shape {vi.name}={ranged}."
        )
    if static is not None and value != static:
        raise UserError(
            f"--input-shape for {vi.name!r} sets dimension {axis} to {_dim_text(value)}, but the model "
            f"fixes it to {static} ({_describe_dims(vi.type.tensor_type.shape.dim)})."
        )
    return value


def _tvm_shape(signature: TensorSignature, variables: dict) -> list:
    """The input's shape for TVM's importer: a run-time dimension as a TIR variable named by
    its symbol, one object per dimension (``variables``), so that inputs share it."""
    from tvm import tirx

    if not signature.symbolic:
        return list(carrier(signature.dtype, signature.shape)[1])  # sub-byte types: the packed bytes
    return [
        variables.setdefault(dim_symbol(sym), tirx.Var(dim_symbol(sym), "int64")) if sym else value
        for value, sym in zip(signature.shape, signature.symbolic, strict=True)
    ]


def _onnx_shape(signature: TensorSignature) -> tuple[int | str, ...]:
    """The input's declared shape for folding and TVM: a run-time dimension by its symbol."""
    if not signature.symbolic:
        return signature.shape
    return tuple(
        dim_symbol(sym) if sym else value
        for value, sym in zip(signature.shape, signature.symbolic, strict=True)
    )


def _dim_text(value: int | tuple[int, int]) -> str:
    return str(value) if isinstance(value, int) else f"{value[0]}..{value[1]}"


def _describe_dims(dims) -> str:
    return (
        "["
        + ", ".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
        + "]"
    )


def _example_dims(dims) -> list[str]:
    return [str(d.dim_value) if d.HasField("dim_value") else "1" for d in dims]


def _output_names(model: onnx.ModelProto) -> tuple[str, ...]:
    if not model.graph.output:
        raise ModelError("The model declares no outputs; there is nothing to compute.")
    for vi in model.graph.output:
        if vi.type.HasField("tensor_type"):
            _dtype_name(vi.type.tensor_type.elem_type, f"Output {vi.name!r}")
        else:
            raise ModelError(
                f"Output {vi.name!r} is not a tensor (sequences, maps and optionals are not supported)."
            )
    return tuple(vi.name for vi in model.graph.output)


def unsupported_nodes(model: onnx.ModelProto) -> list[str]:
    """``op_type (node name)`` for every node TVM's ONNX importer has no converter for."""
    from relay2cmake.frontends import onnx_ml, onnx_ms_quantized, onnx_training
    from relay2cmake.frontends.onnx_converters import known_operators

    # other domains whose operators we convert (their names do not clash with ONNX's)
    ours = {
        onnx_training.DOMAIN: set(onnx_training.CONVERTERS),
        onnx_ml.DOMAIN: set(onnx_ml.CONVERTERS),
        onnx_ms_quantized.DOMAIN: set(onnx_ms_quantized.CONVERTERS),
    }

    known = known_operators()
    problems = []
    for index, node in enumerate(model.graph.node):
        label = node.name or f"node #{index}"
        if node.op_type in ours.get(node.domain, ()):
            continue
        if node.domain not in DEFAULT_DOMAINS:
            problems.append(f"{node.domain}::{node.op_type} ({label}; custom domains are not supported)")
        elif node.op_type not in known:
            problems.append(f"{node.op_type} ({label})")
    return problems


def with_function_bodies(model: onnx.ModelProto) -> onnx.ModelProto:
    """Operators that nothing converts, but that ONNX defines as functions of others, as
    their bodies (``onnx_functions``)."""
    from relay2cmake.frontends.onnx_converters import declines, known_operators

    return expand_functions(model, known_operators(), declines)


def load_checked(path: Path) -> onnx.ModelProto:
    """The model, loaded with its external data and validated by ONNX's checker."""
    model = _load(path)
    _check(model, path)
    max_opset = onnx.defs.onnx_opset_version()
    if _opset(model) > max_opset:
        raise ModelError(
            f"The model uses ONNX opset {_opset(model)}; the installed onnx knows opsets up to {max_opset}."
        )
    return model


def _unsupported_error(problems: list[str]) -> ModelError:
    return ModelError(
        f"The model uses {len(problems)} operator(s) that cannot be lowered: {'; '.join(problems)}. "
        "Replace them (or export the model without them) and run gen again."
    )


def constant_input_values(model: onnx.ModelProto, raw: dict[str, str]) -> dict[str, np.ndarray]:
    """``--constant-input NAME=VALUES`` (a .npy file or comma-separated numbers), checked
    against the input's declared dtype and shape."""
    initializers = {init.name for init in model.graph.initializer}
    declared = {vi.name: vi for vi in model.graph.input if vi.name not in initializers}
    values = {}
    for name, text in raw.items():
        if name not in declared:
            raise UserError(
                f"--constant-input names {name!r}, which is not an input of this model; "
                f"its inputs are: {', '.join(map(repr, declared)) or '(none)'}."
            )
        tensor_type = declared[name].type.tensor_type
        dtype = numpy_dtype(_dtype_name(tensor_type.elem_type, f"Input {name!r}"))
        try:
            if text.endswith(".npy"):
                array = np.load(text, allow_pickle=False)
            else:
                array = np.array([float(v) for v in text.split(",")] if text.strip() else [])
        except (OSError, ValueError) as exc:
            raise UserError(f"--constant-input {name}={text}: cannot read the values ({exc}).") from None
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
        if len(dims) == 0 and array.size == 1:
            array = array.reshape(())
        if len(dims) != array.ndim or any(
            d is not None and d != s for d, s in zip(dims, array.shape, strict=True)
        ):
            raise UserError(
                f"--constant-input {name}: the input is declared with shape "
                f"{_describe_dims(tensor_type.shape.dim)}, "
                f"the values have shape {list(array.shape)}."
            )
        if array.dtype.kind == "V" and array.dtype.itemsize == dtype.itemsize:
            array = array.view(dtype)  # bfloat16/float8 saved by ml_dtypes load as void
        values[name] = array.astype(dtype)
    return values


def import_onnx(
    path: Path, input_shapes: InputShapes, constant_inputs: dict[str, str] | None = None
) -> ImportedModel:
    model = load_checked(path)
    try:
        return _import_onnx(model, path, input_shapes, constant_inputs)
    except ModelError as error:
        settled = _with_settled_inputs(path, input_shapes, constant_inputs)
        if settled is None:
            raise error from None
        return settled


def _with_settled_inputs(
    path: Path, input_shapes: InputShapes, constant_inputs: dict[str, str] | None
) -> ImportedModel | None:
    """The model imported with its short integer inputs settled by the declared output
    shapes (``onnx_settled_inputs``), when exactly one set of values fits; else None."""
    from relay2cmake.frontends import onnx_settled_inputs

    model = with_function_bodies(load_checked(path))
    declared = onnx_settled_inputs.declared_output_shapes(model)
    fits: list[tuple[dict, ImportedModel]] = []
    for values in onnx_settled_inputs.candidates(model):
        try:
            imported = _import_onnx(load_checked(path), path, input_shapes, constant_inputs, values)
        except (ModelError, UserError):
            continue
        if [tuple(o.shape) for o in imported.outputs] == declared and all(
            o.dynamic_axis is None for o in imported.outputs
        ):
            fits.append((values, imported))
    return fits[0][1] if len(fits) == 1 else None


def _import_onnx(
    model: onnx.ModelProto,
    path: Path,
    input_shapes: InputShapes,
    constant_inputs: dict[str, str] | None,
    settled_inputs: dict[str, np.ndarray] | None = None,
) -> ImportedModel:
    """The import proper; ``settled_inputs``: inputs frozen to these values, kept in the API
    and checked at run time (``onnx_settled_inputs``)."""
    from relay2cmake.frontends.onnx_qdq import integer_operators, output_quanta
    from relay2cmake.frontends.onnx_settled_inputs import GIVEN_INPUTS, with_given_inputs

    opset = _opset(model)
    operators = tuple(sorted({n.op_type for n in model.graph.node}))
    model = with_function_bodies(model)
    problems = unsupported_nodes(model)
    given = with_given_inputs(model, settled_inputs) if settled_inputs else {}
    try:
        frozen = constant_input_values(model, constant_inputs or {})
        model = freeze_inputs(model, frozen) if frozen else model
        inputs, dims = _input_signatures(model, input_shapes)
        set_input_shapes(model, {s.name: _onnx_shape(s) for s in inputs})
        _check_tensor_sizes(model, inputs)
        # Shape arithmetic and everything computed from constants become constants (in
        # place: the references read the file itself); this may also remove operators TVM
        # cannot convert.
        unfolded = model
        model, _ = integer_operators(model)  # before folding: it would make the weights float
        model = fold_constants(model, path.parent)
        drop_empty_resize_inputs(model)
    except UserError:
        if problems:
            raise _unsupported_error(problems) from None
        raise
    problems = unsupported_nodes(model)
    if problems:
        raise _unsupported_error(problems)
    output_names = _output_names(model)

    from relay2cmake.frontends.onnx_converters import DIM_BOUNDS, from_onnx
    from relay2cmake.frontends.onnx_settled import DECLARED_SHAPES, SETTLED_VALUES

    variables: dict = {}
    bounds_token = DIM_BOUNDS.set({d.symbol: d.high for d in dims})
    declared_token = DECLARED_SHAPES.set(_declared_shapes(model))
    settled: dict[int, np.ndarray] = {}
    settled_token = SETTLED_VALUES.set(settled)
    given_token = GIVEN_INPUTS.set(given)
    try:
        # The importer warns about renamed inputs and prints checker chatter; keep the
        # user's terminal for our own messages.
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            module, bounded, packed_outputs = from_onnx(
                model,
                shape_dict={s.name: _tvm_shape(s, variables) for s in inputs},
                dtype_dict={s.name: carrier(s.dtype, s.shape)[0] for s in inputs},
                opset=opset,
                weights_folder=path.parent,
            )
    except ModelError:  # the weights' external data could not be read
        raise
    except Exception as exc:
        raise ModelError(
            f"TVM's ONNX importer failed on this model: {describe(exc)}" + _freeze_hint(model)
        ) from None
    finally:
        DIM_BOUNDS.reset(bounds_token)
        DECLARED_SHAPES.reset(declared_token)
        SETTLED_VALUES.reset(settled_token)
        GIVEN_INPUTS.reset(given_token)

    outputs = _output_signatures(module, output_names, bounded, dims, packed_outputs)
    module = with_dim_bounds(module, dims)
    # a settled input keeps its name in the API (its standing-in graph input had another)
    for index, signature in enumerate(inputs):
        if signature.name in given:
            value, original = given[signature.name]
            inputs = (*inputs[:index], replace(signature, name=original), *inputs[index + 1 :])
            settled[index] = value
    return ImportedModel(
        module=module,
        inputs=inputs,
        outputs=outputs,
        source_format="onnx",
        source_sha256=file_sha256(path),
        operators=operators,
        references=_references(path, [s.name for s in inputs], frozen, "DequantizeLinear" in operators),
        dims=dims,
        settled_values={inputs[index].name: value for index, value in settled.items()},
        output_quanta=output_quanta(unfolded, list(output_names)),
    )


# Other converters that settle a parameter given at run time by the declared output (the node's
# input slots): STFT's frame step and length.
RUN_TIME_PARAMETER_SLOTS: dict[str, tuple[int, ...]] = {"STFT": (1, 3)}


def _declared_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]] | None:
    """The static shapes the model declares or ONNX infers, when a node reads a shape
    parameter computed at run time (onnx_settled); else None (no inference run for it)."""
    from relay2cmake.frontends import onnx_given_parameters, onnx_resize
    from relay2cmake.frontends.onnx_settled import RULES

    constants = {init.name for init in model.graph.initializer} | {""}
    constants |= {out for node in model.graph.node if node.op_type == "Constant" for out in node.output}
    parameters = {op: {slot for slot, _, _ in rules} for op, rules in RULES.items()}
    for table in (
        onnx_given_parameters.PARAMETER_SLOTS,
        onnx_resize.PARAMETER_SLOTS,
        RUN_TIME_PARAMETER_SLOTS,
    ):
        for op, slots in table.items():
            parameters.setdefault(op, set()).update(slots)
    if not any(
        slot < len(node.input) and node.input[slot] not in constants
        for node in model.graph.node
        for slot in parameters.get(node.op_type, ())
    ):
        return None
    shapes = {name: shape for name, (_, shape) in static_tensor_types(model).items()}
    # An elementwise operator's output has its input's shape: a reduction whose result only
    # passes through Log or a Cast before the declared output (ONNX's function bodies) gets it.
    for node in reversed(model.graph.node):
        if node.op_type in _SAME_SHAPE and node.input and node.output[0] in shapes:
            shapes.setdefault(node.input[0], shapes[node.output[0]])
    return shapes


# Operators whose output has the shape of their first input.
_SAME_SHAPE = frozenset(
    {"Abs", "Cast", "CastLike", "Ceil", "Erf", "Exp", "Floor", "Identity", "Log", "Neg", "Not"}
    | {"Reciprocal", "Relu", "Round", "Sigmoid", "Sign", "Softplus", "Sqrt", "Tanh"}
)


# ONNX Runtime's 8-bit kernels on x86 without VNNI (AVX2, AVX-512F) sum pairs of uint8 x int8
# products in saturating 16-bit lanes (vpmaddubsw) unless asked not to: on an AVX2-only EPYC a
# QDQ model's outputs were up to 0.45 (several quanta) from its own unoptimised run, and every
# quantized model's golden outputs were refused. With this entry they equal the exact sums.
ONNXRUNTIME_EXACT_INTEGERS = ("session.x64quantprecision", "1")


def _references(
    path: Path, input_names: list[str], frozen: dict[str, np.ndarray], qdq: bool = False
) -> tuple[Reference, ...]:
    """ONNX Runtime, then ONNX's reference evaluator: both independent of TVM, and both read
    the model file as the user gave it (frozen inputs are fed like the others), so gen holds
    no second copy of the weights while TVM's is alive. ONNX Runtime computes the graph as
    written, except in a ``qdq`` model (QuantizeLinear/DequantizeLinear around float
    operators), which it runs as a user gets it: its QDQ groups fused into integer kernels
    (what the package computes too). As written, their float32 sums round apart from the exact
    integer ones: a ResNet-50 quantized by ONNX Runtime had 335 of 1,000 outputs up to two
    steps from ONNX Runtime's own optimised result."""

    def feeds(arrays):
        return {**dict(zip(input_names, arrays, strict=True)), **frozen}

    def onnxruntime(arrays):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        # Unoptimised: the reference should compute the graph as written. QDQ groups become
        # integer kernels at the extended level (ONNX Runtime's QDQ transformer).
        level = ort.GraphOptimizationLevel
        options.graph_optimization_level = level.ORT_ENABLE_EXTENDED if qdq else level.ORT_DISABLE_ALL
        # Prepacked MatMul weights would be a second copy of the weights in memory.
        options.add_session_config_entry("session.disable_prepacking", "1")
        options.add_session_config_entry(*ONNXRUNTIME_EXACT_INTEGERS)
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        return session.run(None, feeds(arrays))

    def onnx_reference(arrays):
        from onnx.reference import ReferenceEvaluator

        class FromFiles(ReferenceEvaluator):
            """External data mapped from its files, not loaded (onnx.load would copy it into
            protobuf, and the evaluator again into arrays)."""

            def retrieve_external_data(self, initializer):
                return mapped_values(initializer, path.parent)

        model = onnx.load(str(path), load_external_data=False)
        evaluator = FromFiles(model, new_ops=[_inference_batch_norm(), _dilated_conv()])
        return evaluator.run(None, feeds(arrays))

    return (Reference("onnxruntime", onnxruntime), Reference("onnx-reference", onnx_reference))


def _inference_batch_norm():
    """A BatchNormalization for onnx's reference evaluator that uses the running statistics,
    as an inference graph means. onnx 1.23's own (measured here) normalises with the batch's
    statistics at opsets 9-13 whenever ``momentum`` is set, which the schema's default (0.9)
    always does, and fails outright at opsets 6-8 (it returns a tuple); opset 14+ is right
    because the schema's ``training_mode`` default (0) is filled in."""
    from onnx.reference.op_run import OpRun

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, training_mode=None, spatial=None, **_):
            if training_mode or spatial == 0:
                raise NotImplementedError("training-mode or per-activation BatchNormalization")
            shape = [1, -1] + [1] * (x.ndim - 2)
            eps = 1e-5 if epsilon is None else epsilon
            normalised = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
            return ((normalised * scale.reshape(shape) + bias.reshape(shape)).astype(x.dtype),)

    return BatchNormalization


def _dilated_conv():
    """A Conv for onnx's reference evaluator that sums the kernel's taps over strided views of
    the padded image when the kernel is dilated. onnx 1.23's own writes the dilated kernel out
    (zeros between the taps) and unfolds the image for it: DeepLab v3's atrous pyramid (3 x 3
    taps 36 apart over 960 channels) asked for gigabytes a convolution and gen was killed for
    want of memory (23 GB). Undilated convolutions stay onnx's."""
    import itertools

    from onnx.reference.op_run import OpRun
    from onnx.reference.ops.op_conv import Conv as OnnxConv

    class Conv(OpRun):
        op_domain = ""

        def _run(self, x, w, b=None, auto_pad=None, dilations=None, group=None, kernel_shape=None, pads=None,
                 strides=None):  # fmt: skip
            spatial = x.ndim - 2
            dilations = list(dilations or [1] * spatial)
            if all(d == 1 for d in dilations):
                return OnnxConv._run(self, x, w, b, auto_pad, dilations, group, kernel_shape, pads, strides)
            group, strides = group or 1, list(strides or [1] * spatial)
            taps = w.shape[2:]
            extents = [(k - 1) * d + 1 for k, d in zip(taps, dilations, strict=True)]
            pads = list(pads or [0] * 2 * spatial)
            if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                needed = [
                    max(0, (-(-size // s) - 1) * s + e - size)
                    for size, s, e in zip(x.shape[2:], strides, extents, strict=True)
                ]
                head = [(n + 1) // 2 if auto_pad == "SAME_LOWER" else n // 2 for n in needed]
                pads = head + [n - h for n, h in zip(needed, head, strict=True)]
            elif auto_pad == "VALID":
                pads = [0] * 2 * spatial
            padded = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + spatial]) for i in range(spatial)])
            out = [(size - e) // s + 1 for size, e, s in zip(padded.shape[2:], extents, strides, strict=True)]
            images = padded.reshape(x.shape[0], group, x.shape[1] // group, *padded.shape[2:])
            kernels = w.reshape(group, w.shape[0] // group, *w.shape[1:])
            result = np.zeros((x.shape[0], group, kernels.shape[1], *out), dtype=np.float64)
            for tap in itertools.product(*(range(k) for k in taps)):
                window = tuple(
                    slice(t * d, t * d + (o - 1) * s + 1, s)
                    for t, d, o, s in zip(tap, dilations, out, strides, strict=True)
                )
                view = images[(slice(None), slice(None), slice(None), *window)]
                result += np.einsum(
                    "gmc,ngc...->ngm...", kernels[(slice(None), slice(None), slice(None), *tap)], view
                )
            result = result.reshape(x.shape[0], w.shape[0], *out)
            if b is not None:
                result += b.reshape([1, -1] + [1] * spatial)
            return (result.astype(x.dtype),)

    return Conv


# Operator inputs that set a shape, a size, axes or a count: a static package needs them at
# generation time (operator → positions of such inputs).
_SHAPE_PARAMETERS = {
    "TopK": (1,), "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,),
    "Range": (0, 1, 2), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3), "Upsample": (1,),
    "Unsqueeze": (1,), "Squeeze": (1,), "Split": (1,), "OneHot": (1,), "CumSum": (1,),
    "ReduceSum": (1,), "ReduceMean": (1,), "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,),
    "ReduceL1": (1,), "ReduceL2": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,),
    "DFT": (1, 2), "STFT": (1, 3),
}  # fmt: skip


def _freeze_hint(model: onnx.ModelProto) -> str:
    """`` Input 'k' sets ... of TopK 'top': freeze it with --constant-input k=VALUES.`` for the
    graph inputs that feed such a parameter, else nothing."""
    inputs = {vi.name for vi in model.graph.input} - {init.name for init in model.graph.initializer}
    uses: dict[str, str] = {}
    for index, node in enumerate(model.graph.node):
        for position in _SHAPE_PARAMETERS.get(node.op_type, ()):
            if position < len(node.input) and node.input[position] in inputs:
                label = f"{node.op_type} {node.name!r}" if node.name else f"{node.op_type} (node #{index})"
                uses.setdefault(node.input[position], label)
    if not uses:
        return ""
    named = ", ".join(f"{name!r} ({label})" for name, label in sorted(uses.items()))
    example = next(iter(sorted(uses)))
    return (
        f". These inputs set a shape, size, axis or count, which a static package needs at "
        f"generation time: {named}; freeze them with --constant-input (e.g. --constant-input "
        f"{example}=VALUES)"
    )


def _output_signatures(
    module,
    names: tuple[str, ...],
    bounded: dict[str, int],
    dims: tuple[DimRange, ...] = (),
    packed: dict[str, tuple[str, tuple[int, ...]]] | None = None,
) -> tuple[TensorSignature, ...]:
    """Output dtypes and shapes as Relax inferred them (the ONNX declaration may omit them).
    A bounded output's shape is its upper bound; ``main`` also returns its extent. A sub-byte
    output (``packed``: its type and shape) is returned as its packed bytes."""
    from tvm import relax

    packed = packed or {}
    ret = module["main"].ret_ty
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    if len(fields) != len(names) + len(bounded):
        raise ModelError(f"The importer produced {len(fields)} outputs for the model's {len(names)}.")
    signatures = []
    for name, info in zip(names, fields, strict=False):
        if not isinstance(info, relax.TensorType) or info.shape is None:
            raise ModelError(
                f"Output {name!r} has no static tensor shape after import: its size depends on "
                "shape-like inputs or on operators computed at run time; freeze those with "
                "--constant-input, as a static package needs every shape at generation time."
            )
        if name in packed:
            signatures.append(TensorSignature(name, *packed[name]))
            continue
        shape, symbolic = symbolic_shape(info.shape.values, dims, f"Output {name!r}")
        signatures.append(TensorSignature(name, str(info.dtype), shape, bounded.get(name), symbolic))
    return tuple(signatures)
