"""ONNX operators defined as functions, replaced by their bodies before import.

Many ONNX operators (Celu, Swish, Mish, CenterCropPad, RotaryEmbedding, LinearAttention,
CausalConvWithState, the window functions, ...) are specified as a function of other ONNX
operators: their schema carries the body, fixed or built for the node's attributes and
input types. A node whose operator neither TVM's importer nor our converters handle, or one
a converter declines (``onnx_converters.declines``: Attention with a sliding window), is
replaced by that body through ONNX's own inliner, recursively, so the importer sees only
operators it converts. Nodes of other operators are left as they are: their converters are
faster than a spelt-out body.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import onnx
import onnx.inliner
from onnx import helper

# Schemas of these domains may carry function bodies (ONNX's own and its preview ops).
FUNCTION_DOMAINS = ("", "ai.onnx", "ai.onnx.preview")
MAX_ROUNDS = 4  # a body's own function operators, and theirs (no schema nests deeper today)


def _opsets(model: onnx.ModelProto) -> dict[str, int]:
    return {("" if e.domain == "ai.onnx" else e.domain): e.version for e in model.opset_import}


def _has_function(node: onnx.NodeProto, opsets: dict[str, int]) -> bool:
    domain = "" if node.domain == "ai.onnx" else node.domain
    if domain not in FUNCTION_DOMAINS or domain not in opsets:
        return False
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
    except onnx.defs.SchemaError:
        return False
    return schema.has_function or schema.has_context_dependent_function


def _nodes(graph: onnx.GraphProto):
    """Every node of the graph and of its subgraphs (If branches, Loop and Scan bodies)."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for subgraph in [attribute.g] if attribute.HasField("g") else list(attribute.graphs):
                yield from _nodes(subgraph)


def _expandable(
    model: onnx.ModelProto, converted: set[str], declines: Callable[[onnx.NodeProto], bool]
) -> set[tuple[str, str]]:
    opsets = _opsets(model)
    return {
        (node.domain, node.op_type)
        for node in _nodes(model.graph)
        if (node.op_type not in converted or node.domain not in ("", "ai.onnx") or declines(node))
        and _has_function(node, opsets)
    }


def _with_defaults(model: onnx.ModelProto, functions: set[tuple[str, str]]) -> onnx.ModelProto:
    """The model with every attribute the nodes to inline leave out set to its schema's
    default: the inliner drops a body's reference to an attribute the node does not carry
    (Swish's ``alpha``: its Constant was left with no value)."""
    model = copy.deepcopy(model)
    opsets = _opsets(model)
    for node in _nodes(model.graph):
        if (node.domain, node.op_type) not in functions:
            continue
        domain = "" if node.domain == "ai.onnx" else node.domain
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
        present = {a.name for a in node.attribute}
        for name, attribute in schema.attributes.items():
            default = attribute.default_value
            if name not in present and default is not None and default.type != 0:
                node.attribute.append(default)
    return model


def _typed(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with a type for every value, which context-dependent bodies are built from
    (the inliner reads value_info; initializers have none of their own). An omitted optional
    input ("") gets one too: the inliner asks for its type, and the bodies test its name."""
    typed = onnx.shape_inference.infer_shapes(model)
    known = {vi.name for vi in (*typed.graph.input, *typed.graph.value_info, *typed.graph.output)}
    for tensor in typed.graph.initializer:
        if tensor.name not in known:
            typed.graph.value_info.append(
                helper.make_tensor_value_info(tensor.name, tensor.data_type, tensor.dims)
            )
    typed.graph.value_info.append(helper.make_tensor_value_info("", onnx.TensorProto.FLOAT, None))
    return typed


def expand_functions(
    model: onnx.ModelProto, converted: set[str], declines: Callable[[onnx.NodeProto], bool]
) -> onnx.ModelProto:
    """The model with every node of an operator not in ``converted`` (or declined by its
    converter) replaced by its ONNX function body, where the operator has one."""
    for _ in range(MAX_ROUNDS):
        functions = _expandable(model, converted, declines)
        if not functions:
            break
        try:
            inlined = onnx.inliner.inline_selected_functions(
                _typed(_with_defaults(model, functions)), sorted(functions), inline_schema_functions=True
            )
        except Exception:  # onnx raises bare RuntimeErrors; the operators stay, reported by name
            break
        # The inferred types were for the inliner: later steps set the input shapes and infer again.
        del inlined.graph.value_info[:]
        inlined.graph.value_info.extend(model.graph.value_info)
        model = inlined
    return model
