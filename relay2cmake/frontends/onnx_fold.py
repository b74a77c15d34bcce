"""ONNX-level constant folding, before TVM's importer sees the graph.

Once every input shape is static, ``Shape`` and ``Size`` are constants, and so is every node
computed only from constants: the shape arithmetic exporters emit (Shape → Gather → Concat →
Reshape), axes and pads computed from initializers, inputs frozen with ``--constant-input``.
TVM's importer handles constants well and symbolic shape tensors poorly ("Node cannot handle
ShapeExpr inputs", "Only constant axes currently supported"), so folding them first turns
those failures into ordinary static models. Nodes are evaluated with ONNX's reference
implementation, one at a time; anything it cannot evaluate is left as it was.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

from relay2cmake.frontends.onnx_weights import initializer_bytes, initializer_values, is_external

# Never folded: random operators, and nodes whose output is large (folding would inflate
# the weights; TVM computes those at run time just as well).
NOT_FOLDED = frozenset(
    {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli"}
    # onnx's reference evaluator runs an inference BatchNormalization in training mode
    # (golden.py); TVM computes it right, so it is never folded by the evaluator (a training
    # one on constants is folded by _training_batch_norm).
    | {"BatchNormalization"}
)
MAX_FOLDED_BYTES = 1 << 20
# Operators whose output can be far larger than their inputs: folded only when shape
# inference knows the output is small (evaluating first would allocate whatever they ask).
EXPANDING = frozenset(
    {"ConstantOfShape", "Expand", "Tile", "Range", "Resize", "Upsample", "Pad", "OneHot", "EyeLike"}
    | {"MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose", "Col2Im", "Mul", "Add", "Sub", "Div", "Where"}
)


def freeze_inputs(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """Turn the named graph inputs into initializers holding ``values`` (in place)."""
    graph = model.graph
    kept = [vi for vi in graph.input if vi.name not in values]
    del graph.input[:]
    graph.input.extend(kept)
    for name, array in values.items():
        graph.initializer.append(numpy_helper.from_array(array, name))
    return model


def set_input_shapes(model: onnx.ModelProto, shapes: Mapping[str, tuple[int | str, ...]]) -> None:
    """Write the shapes into the graph's input declarations (in place): numbers, or the
    symbols of dimensions chosen at run time."""
    for vi in model.graph.input:
        if vi.name in shapes and vi.type.HasField("tensor_type"):
            dims = vi.type.tensor_type.shape.dim
            del dims[:]
            for value in shapes[vi.name]:
                if isinstance(value, str):
                    dims.add().dim_param = value
                else:
                    dims.add().dim_value = value


def static_tensor_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int, ...]]]:
    """(ONNX element type, shape) of every tensor whose shape ONNX's inference (with data
    propagation) knows completely."""
    try:
        inferred = onnx.shape_inference.infer_shapes(weightless(model), data_prop=True)
    except Exception:
        return {}
    types = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        tensor_type = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tensor_type.HasField("shape"):
            continue
        dims = tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            types[vi.name] = (tensor_type.elem_type, tuple(d.dim_value for d in dims))
    return types


def weightless(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose initializers larger than ``MAX_FOLDED_BYTES`` carry no values,
    for shape inference: it reads their shapes, and values only of the small integer tensors
    that shapes are computed from. Shape inference serializes the model, and a copy of the
    weights costs as much memory as the weights."""
    skeleton = onnx.ModelProto()
    _copy_fields(model, skeleton, skip="graph")
    _copy_fields(model.graph, skeleton.graph, skip="initializer")
    for tensor in model.graph.initializer:
        if not is_external(tensor) and initializer_bytes(tensor) <= MAX_FOLDED_BYTES:
            skeleton.graph.initializer.add().CopyFrom(tensor)
        else:
            stub = skeleton.graph.initializer.add()
            stub.name, stub.data_type = tensor.name, tensor.data_type
            stub.dims.extend(tensor.dims)
    return skeleton


def _copy_fields(source, target, skip: str) -> None:
    for field, value in source.ListFields():
        if field.name == skip:
            continue
        if field.is_repeated:
            getattr(target, field.name).extend(value)
        elif field.type == field.TYPE_MESSAGE:
            getattr(target, field.name).CopyFrom(value)
        else:
            setattr(target, field.name, value)


def _static_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...]]:
    return {name: shape for name, (_, shape) in static_tensor_types(model).items()}


def _small_result(node: onnx.NodeProto, shapes: dict[str, tuple[int, ...]]) -> bool:
    """Whether ``node``'s outputs are known not to exceed the folding limit before evaluating
    it (8 bytes per element at most). Unknown shapes pass unless the operator can expand."""
    for name in node.output:
        if name in shapes:
            if int(np.prod(shapes[name], dtype=np.float64)) * 8 > MAX_FOLDED_BYTES:
                return False
        elif name and node.op_type in EXPANDING:
            return False
    return True


def _no_larger_than_inputs(node: onnx.NodeProto, shapes: dict, known: dict, initializers: dict) -> bool:
    """Whether shape inference knows ``node``'s outputs and none has more elements than its
    largest input (an operator that can expand, folded only where it does not)."""
    if node.op_type not in EXPANDING:
        return True
    if not all(name in shapes for name in node.output if name):
        return False

    def elements(name: str) -> int:
        if name in known:
            return int(known[name].size)
        if name in initializers:
            return int(np.prod(initializers[name].dims, dtype=np.float64))
        return 0

    largest = max((elements(name) for name in node.input if name), default=0)
    return all(int(np.prod(shapes[name], dtype=np.float64)) <= largest for name in node.output if name)


def _has_subgraph(node: onnx.NodeProto) -> bool:
    return any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)


def _evaluate(node: onnx.NodeProto, inputs: list[np.ndarray | None], opsets) -> list[np.ndarray] | None:
    from onnx.reference import ReferenceEvaluator

    names = [f"in{i}" if value is not None else "" for i, value in enumerate(inputs)]
    single = helper.make_node(
        node.op_type, names, [f"out{i}" for i in range(len(node.output))], domain=node.domain
    )
    single.attribute.extend(node.attribute)
    graph = helper.make_graph(
        [single],
        "fold",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in zip(names, inputs, strict=True) if v is not None],
        [helper.make_tensor_value_info(f"out{i}", onnx.TensorProto.UNDEFINED, None)
         for i in range(len(node.output))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=list(opsets))
    feeds = {n: v for n, v in zip(names, inputs, strict=True) if v is not None}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]
    except Exception:
        return None


def _training_batch_norm(node: onnx.NodeProto, inputs: list[np.ndarray]) -> list[np.ndarray] | None:
    """A BatchNormalization in training mode on constants (NFNet's and BiT's weight
    standardization): each channel (axis 1) standardized by its own mean and population
    variance, then scaled and shifted; the running statistics as ONNX defines them (input
    times momentum plus the current one times 1 - momentum). Computed here in float64:
    onnx's reference evaluator is not trusted with BatchNormalization (golden.py). None for
    inference mode (TVM computes it)."""
    attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if not attributes.get("training_mode") or len(inputs) != 5:
        return None
    x, scale, bias, running_mean, running_var = (np.asarray(v) for v in inputs)
    if x.dtype not in (np.float32, np.float64) or x.ndim < 2:
        return None
    axes = tuple(i for i in range(x.ndim) if i != 1)
    wide = x.astype(np.float64)
    mean = wide.mean(axis=axes, keepdims=True)
    variance = ((wide - mean) ** 2).mean(axis=axes, keepdims=True)
    channels = (1, -1) + (1,) * (x.ndim - 2)
    epsilon = float(attributes.get("epsilon", 1e-5))
    momentum = float(attributes.get("momentum", 0.9))
    normalized = (wide - mean) / np.sqrt(variance + epsilon)
    y = normalized * scale.astype(np.float64).reshape(channels) + bias.astype(np.float64).reshape(channels)
    mean, variance = mean.reshape(-1), variance.reshape(-1)
    return [
        y.astype(x.dtype),
        (running_mean * momentum + mean * (1 - momentum)).astype(running_mean.dtype),
        (running_var * momentum + variance * (1 - momentum)).astype(running_var.dtype),
    ][: len(node.output)]


def _shape_value(node: onnx.NodeProto, shape: tuple[int, ...]) -> np.ndarray:
    start, end = 0, len(shape)
    for attribute in node.attribute:
        if attribute.name == "start":
            start = attribute.i
        elif attribute.name == "end":
            end = attribute.i
    return np.array(shape[slice(start, end)], dtype=np.int64)


# Rounds of folding: each round's constants can give shape inference the static shapes
# (after a Reshape whose target became constant) that the next round folds further (Swin's
# window padding is computed from the shape of a tensor that follows a patch merge). Each
# block's padding waits on the one before: torchvision's Swin v2-T folds in 16 rounds (3 s;
# at 8, six of its pads stayed computed and TVM's importer refused them). A round that folds
# nothing ends it sooner; the cap only bounds a pathological graph.
FOLD_ROUNDS = 64


def fold_constants(model: onnx.ModelProto, folder: Path | None = None) -> onnx.ModelProto:
    """``model``, changed in place: every foldable node replaced by its value, repeated while
    a round still folds something (``folder``: where its external data is).

    Values over MAX_FOLDED_BYTES fold too when the round leaves the weights no larger: weights
    computed from weights (NFNet's and BiT's standardized convolution weights, recomputed from
    the raw ones at every inference otherwise: 57 standardizations of 35M weights a run) are
    then stored as computed, in place of the raw ones. A round whose large values would add to
    the weights (a transpose of a tied embedding, kept for its other use) is done again
    without them."""
    for _ in range(FOLD_ROUNDS):
        if not _fold_once(model, folder, large=True):
            break
    return model


def _fold_once(
    model: onnx.ModelProto, folder: Path | None, large: bool = False, blocked: frozenset[str] = frozenset()
) -> bool:
    """Replace every foldable node of ``model`` by its value (in place); whether any was.
    ``large``: values over MAX_FOLDED_BYTES too (see fold_constants), except the outputs
    ``blocked``."""
    graph = model.graph
    shapes = _static_shapes(model)
    initializers = {init.name: init for init in graph.initializer}
    # Initializers are read as arrays only when a node to fold takes them: converting all of
    # them would copy the weights.
    known: dict[str, np.ndarray] = {}
    folded: set[str] = set()
    # the weights over MAX_FOLDED_BYTES each folded value was computed from
    sources: dict[str, frozenset[str]] = {
        name: frozenset([name]) if initializer_bytes(t) > MAX_FOLDED_BYTES else frozenset()
        for name, t in initializers.items()
    }
    kept_nodes, kept_positions = [], set()
    for position, node in enumerate(graph.node):
        value = None
        if node.domain in ("", "ai.onnx") and node.op_type not in NOT_FOLDED and not _has_subgraph(node):
            if node.op_type == "Shape" and node.input[0] in shapes:
                value = [_shape_value(node, shapes[node.input[0]])]
            elif node.op_type == "Size" and node.input[0] in shapes:
                value = [np.array(int(np.prod(shapes[node.input[0]], dtype=np.int64)), dtype=np.int64)]
            elif all(n == "" or n in known or n in initializers for n in node.input) and (
                _small_result(node, shapes)
                or (large and _no_larger_than_inputs(node, shapes, known, initializers))
            ):
                inputs = [_value(n, known, initializers, folder) if n else None for n in node.input]
                value = _evaluate(node, inputs, model.opset_import)
        elif (
            node.op_type == "BatchNormalization"
            and node.domain in ("", "ai.onnx")
            and all(n in known or n in initializers for n in node.input)
        ):
            value = _training_batch_norm(node, [_value(n, known, initializers, folder) for n in node.input])
        too_large = value is not None and sum(v.nbytes for v in value) > MAX_FOLDED_BYTES
        if value is None or (too_large and (not large or blocked.intersection(node.output))):
            kept_nodes.append(node)
            kept_positions.add(position)
            continue
        inputs_from = frozenset().union(*(sources.get(n, frozenset()) for n in node.input if n))
        for name, array in zip(node.output, value, strict=False):
            if name:
                known[name] = array
                folded.add(name)
                sources[name] = inputs_from
    if not folded:
        return False

    needed = {name for node in kept_nodes for name in node.input}
    needed |= {name for node in kept_nodes for name in _subgraph_inputs(node)}
    outputs = {vi.name for vi in graph.output}
    if large:
        # A large value computed from weights that stay (a transpose of a tied embedding)
        # would store them twice: the round again without folding it.
        stored = [name for name in needed & folded - outputs if known[name].nbytes > MAX_FOLDED_BYTES]
        twice = {name for name in stored if sources[name] & needed}
        if twice:
            return _fold_once(model, folder, large, blocked | twice)
        # and the large values stored must take no more room than the weights they free
        # (dequantized int8 weights would take four times theirs)
        freed = sum(initializer_bytes(t) for t in graph.initializer if t.name not in needed | outputs)
        if sum(known[name].nbytes for name in stored) > freed:
            return _fold_once(model, folder, large=False)
    if outputs & folded:
        # Folded graph outputs still need a producer: a Constant node, first (rare: the kept
        # nodes are copied to make room).
        constants = []
        for name in sorted(outputs & folded):
            value = numpy_helper.from_array(known[name], name)
            constants.append(helper.make_node("Constant", [], [name], value=value, name=f"folded_{name}"))
        nodes = constants + _detached(kept_nodes)
        del graph.node[:]
        graph.node.extend(nodes)
    else:
        for position in reversed(range(len(graph.node))):
            if position not in kept_positions:
                del graph.node[position]
    dropped = {name for name in initializers if name not in needed and name not in outputs}
    for index in reversed(range(len(graph.initializer))):
        if graph.initializer[index].name in dropped:
            del graph.initializer[index]
    # Old exporters also list weights as graph inputs; one whose initializer is gone would
    # otherwise turn into a real input.
    inputs = [vi for vi in graph.input if vi.name not in dropped]
    del graph.input[:]
    graph.input.extend(inputs)
    for name in sorted(needed & folded - outputs):
        graph.initializer.append(numpy_helper.from_array(known[name], name))
    values = [vi for vi in graph.value_info if vi.name not in folded]
    del graph.value_info[:]
    graph.value_info.extend(values)
    return True


def _value(name: str, known: dict[str, np.ndarray], initializers: dict, folder: Path | None) -> np.ndarray:
    if name not in known:
        known[name] = initializer_values(initializers[name], folder)
    return known[name]


def _detached(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """Copies of ``nodes`` that outlive their graph's node list being cleared."""
    copies = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copies.append(copy)
    return copies


def drop_empty_resize_inputs(model: onnx.ModelProto) -> None:
    """Resize's ``roi`` and ``scales`` given as empty constants (opset-11 exports pass
    ``scales=[]`` beside ``sizes``) mean absent; TVM's importer reads an empty one as given
    and refuses "scales and sizes". They become ``""``. In place, after folding (which makes
    constants initializers)."""
    empty = {init.name for init in model.graph.initializer if 0 in init.dims}
    for node in model.graph.node:
        if node.op_type == "Constant" and any(a.name == "value" and 0 in a.t.dims for a in node.attribute):
            empty.update(node.output)
    for node in model.graph.node:
        if node.op_type == "Resize":
            for position in (1, 2):
                if position < len(node.input) and node.input[position] in empty:
                    node.input[position] = ""


def _subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    names: set[str] = set()
    for attribute in node.attribute:
        graphs = [attribute.g] if attribute.type == onnx.AttributeProto.GRAPH else list(attribute.graphs)
        for graph in graphs:
            for inner in graph.node:
                names.update(inner.input)
                names.update(_subgraph_inputs(inner))
    return names
