"""Model inputs settled as a whole by the output shapes the model declares.

``onnx_settled`` settles a shape parameter that a node reads directly. Some models compute
the parameter from an input through other nodes first — an operator's ONNX function body: a
window's ``size`` through Cast and Range, CenterCropPad's ``shape`` through Sub, Div and Pad
— and the node then sees a value computed at run time, with no declared shape of its own.

When such a model fails to import, this module tries values for its short integer inputs
(at most ``MAX_ELEMENTS`` elements), taken from the declared output shapes: a scalar may be
any output extent, a vector of k any k extents of one output, in order. The model is imported
with the input frozen to each candidate (folded like ``--constant-input``), and a candidate
is kept when every output then has exactly the shape the model declares; exactly one must
fit. The input stays in the package's API under its name, and the package checks at run time
that it holds that value (the ``settle`` builtin): any other value stops the run with
``<P>_ERROR_INVALID_INPUT`` and a message naming the value accepted — never a wrong result.
"""

from __future__ import annotations

import itertools
from contextvars import ContextVar
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import numpy_helper

from relay2cmake.frontends.onnx_dtypes import ONNX_DTYPES

if TYPE_CHECKING:
    from tvm import relax

MAX_ELEMENTS = 4  # of an input considered (a shape of rank 4 at most)
MAX_ATTEMPTS = 16  # imports tried; a model with more combinations is not settled this way
GIVEN_PREFIX = "r2c_given_"  # the graph input that stands for a settled one while importing

# While a model is imported with settled inputs: the standing-in graph input's name → (the
# value it was settled to, the model's name for the input).
GIVEN_INPUTS: ContextVar[dict[str, tuple[np.ndarray, str]] | None] = ContextVar("GIVEN_INPUTS", default=None)


def _static_dims(value_info: onnx.ValueInfoProto) -> tuple[int, ...] | None:
    if not value_info.type.HasField("tensor_type") or not value_info.type.tensor_type.HasField("shape"):
        return None
    dims = value_info.type.tensor_type.shape.dim
    if not all(d.HasField("dim_value") for d in dims):
        return None
    return tuple(int(d.dim_value) for d in dims)


def declared_output_shapes(model: onnx.ModelProto) -> list[tuple[int, ...]] | None:
    """Every output's declared static shape, or None when one has none (nothing to check)."""
    shapes = [_static_dims(vi) for vi in model.graph.output]
    return None if any(s is None for s in shapes) else [s for s in shapes if s is not None]


def candidates(model: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """The values to try for the model's short integer inputs, every combination (none when
    there are more than MAX_ATTEMPTS, or an output has no declared shape)."""
    outputs = declared_output_shapes(model)
    if not outputs:
        return []
    initializers = {init.name for init in model.graph.initializer}
    choices: dict[str, list[np.ndarray]] = {}
    for vi in model.graph.input:
        dims = _static_dims(vi)
        elem_type = vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else 0
        dtype = ONNX_DTYPES.get(elem_type)
        if vi.name in initializers or dims is None or len(dims) > 1 or dtype is None:
            continue
        if not dtype.startswith(("int", "uint")) or dtype in ("int4", "uint4", "int2", "uint2"):
            continue
        count = int(np.prod(dims))
        if not 1 <= count <= MAX_ELEMENTS:
            continue
        rows = sorted({row for shape in outputs for row in itertools.combinations(shape, count)})
        choices[vi.name] = [np.asarray(row, dtype=dtype).reshape(dims) for row in rows]
    if not choices or any(not values for values in choices.values()):
        return []
    if np.prod([len(values) for values in choices.values()]) > MAX_ATTEMPTS:
        return []
    names = sorted(choices)
    return [
        dict(zip(names, values, strict=True)) for values in itertools.product(*(choices[n] for n in names))
    ]


def with_given_inputs(
    model: onnx.ModelProto, values: dict[str, np.ndarray]
) -> dict[str, tuple[np.ndarray, str]]:
    """Freeze the inputs to ``values`` (initializers of their names, which constant folding
    then reads) and put a standing-in graph input in each one's place, so that ``main`` keeps
    a parameter for it (in place). Returns what ``GIVEN_INPUTS`` holds during the import."""
    graph = model.graph
    inputs = list(graph.input)
    del graph.input[:]
    given: dict[str, tuple[np.ndarray, str]] = {}
    for vi in inputs:
        if vi.name in values:
            standing_in = onnx.ValueInfoProto()
            standing_in.CopyFrom(vi)
            standing_in.name = GIVEN_PREFIX + vi.name
            graph.input.append(standing_in)
            graph.initializer.append(numpy_helper.from_array(values[vi.name], vi.name))
            given[standing_in.name] = (values[vi.name], vi.name)
        else:
            graph.input.append(vi)
    return given


def guarded_outputs(bb: relax.BlockBuilder, parameters: dict, outputs: dict) -> dict:
    """The outputs, each kept only when every settled input holds its value (checked by the
    ``settle`` builtin). ``parameters``: the standing-in inputs' Relax variables by name."""
    from tvm import relax

    from relay2cmake.frontends.onnx_settled import guard, kept_if_chosen

    given = GIVEN_INPUTS.get() or {}
    for name, (value, original) in sorted(given.items()):
        parameter = parameters.get(name)
        if parameter is None:
            continue
        flat = bb.emit(relax.op.reshape(bb.emit(relax.op.astype(parameter, "int64")), [-1]))
        accepted = value.reshape(-1).astype("int64").tolist()
        site = (
            f"Input {original!r} sets a shape at run time; this package was generated for the output "
            f"shapes the model declares, which only {original} = {accepted} gives"
        )
        chosen = guard(bb, flat, [accepted], [0], site)
        outputs = {key: kept_if_chosen(bb, bb.normalize(result), chosen) for key, result in outputs.items()}
    return outputs
