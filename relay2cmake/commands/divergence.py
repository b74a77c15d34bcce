"""Which ONNX operator's result first diverges, when even the plain package is wrong.

A package that does not reproduce the reference on the plain path is a bug; naming the
operator where it starts makes it reportable. The search cuts the model after one node
(that node's first output becomes the only graph output), generates and checks the cut
model, and bisects over the nodes in graph order: ``probe`` answers "does the package of
this cut model fail its golden test?" (None: it could not tell). It assumes what bisection
assumes, that once a result is wrong the results after it are too; the answer names the
boundary it found.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnx

MAX_PROBES = 12  # 4,096 nodes


@dataclass(frozen=True, eq=False)
class Cut:
    index: int  # the node's position in the graph
    label: str  # "Conv 'conv1' (output 'c1')", as a user finds it in the model
    output: object  # the ValueInfoProto of the node's first output (from shape inference)


def cuts(model: onnx.ModelProto) -> list[Cut]:
    """The nodes whose first output has a type ONNX's shape inference knows (so it can be a
    graph output), in graph order."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    known = (*inferred.graph.value_info, *inferred.graph.output)
    typed = {v.name: v for v in known if v.type.HasField("tensor_type")}
    found = []
    for index, node in enumerate(model.graph.node):
        if node.output and node.output[0] in typed:
            name = f" {node.name!r}" if node.name else ""
            label = f"{node.op_type}{name} (output {node.output[0]!r})"
            found.append(Cut(index, label, typed[node.output[0]]))
    return found


def cut_model(model: onnx.ModelProto, cut: Cut, path: Path) -> Path:
    """``model`` with the output of node ``cut.index`` as its only graph output, saved at ``path``."""
    import onnx

    sub = onnx.ModelProto()
    sub.CopyFrom(model)
    del sub.graph.output[:]
    sub.graph.output.append(cut.output)
    onnx.save(sub, str(path))
    return path


def first_diverging(candidates: list[Cut], probe: Callable[[Cut], bool | None]) -> Cut | None:
    """The first cut whose package fails, by bisection (the whole model is known to fail);
    None when no cut fails, a probe cannot tell, or the model is too large to bisect."""
    if not candidates or math.ceil(math.log2(len(candidates) + 1)) > MAX_PROBES:
        return None
    low, high = 0, len(candidates)  # candidates[high] stands for the whole model: it fails
    while low < high:
        middle = (low + high) // 2
        verdict = probe(candidates[middle])
        if verdict is None:
            return None
        if verdict:
            high = middle
        else:
            low = middle + 1
    return candidates[high] if high < len(candidates) else None
