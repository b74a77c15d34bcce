"""PyTorch → Relax: a ``torch.export.save``d ExportedProgram (``.pt2``).

Inputs are the program's user inputs, named as in ``forward``'s signature; parameters and
buffers become constants. Outputs are ``output`` (one) or ``output_0``, ``output_1``, ...
PyTorch itself runs the program for the golden outputs.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from relay2cmake.errors import ModelError, UserError, describe
from relay2cmake.frontends import ImportedModel, InputShapes, Reference, file_sha256
from relay2cmake.frontends.relax_signature import bind_input_shapes, main_signatures
from relay2cmake.frontends.torch_converters import CONVERTERS


def load_program(path: Path) -> Any:
    try:
        import torch
    except ImportError:
        raise UserError(
            "Reading .pt2 files needs PyTorch: pip install torch==2.13.0 (the CPU build), then run gen again."
        ) from None
    try:
        return torch.export.load(str(path))
    except Exception as exc:
        raise ModelError(
            f"{str(path)!r} is not a readable torch.export archive ({describe(exc, 400)}). "
            "Save one with torch.export.save(torch.export.export(model, example_inputs), 'model.pt2')."
        ) from None


def user_input_names(program: Any) -> list[str]:
    from torch.export.graph_signature import InputKind

    specs = program.graph_signature.input_specs
    return [spec.arg.name for spec in specs if spec.kind == InputKind.USER_INPUT]


def _runner(program):
    def run(arrays):
        import torch

        with torch.no_grad():
            result = program.module()(*[torch.from_numpy(np.asarray(a).copy()) for a in arrays])
        values = list(result) if isinstance(result, tuple | list) else [result]
        return [v.detach().numpy() for v in values]

    return run


def _drop_empty_concat_inputs(program) -> None:
    """``torch.cat`` skips 1-D empty tensors whatever the other inputs' rank (legacy rule;
    Hugging Face's KV caches start as ``torch.empty(0)``, e.g. GPT-2 with ``use_cache``);
    TVM's importer requires equal ranks. Drop those inputs from the graph, in place."""
    import torch

    graph = program.graph_module.graph
    changed = False
    for node in graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.aten.cat.default:
            continue
        tensors = list(node.args[0])
        kept = [t for t in tensors if not _empty_1d(t)]
        if len(kept) == len(tensors) or not kept:
            continue
        node.args = (kept, *node.args[1:])
        changed = True
    if changed:
        graph.eliminate_dead_code()
        program.graph_module.recompile()


def _empty_1d(node) -> bool:
    value = getattr(node, "meta", {}).get("val")
    shape = getattr(value, "shape", None)
    return shape is not None and len(shape) == 1 and int(shape[0]) == 0


def import_torch(path: Path, input_shapes: InputShapes) -> ImportedModel:
    program = load_program(path)
    _drop_empty_concat_inputs(program)
    names = user_input_names(program)
    from tvm.relax.frontend.torch import from_exported_program

    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            module = from_exported_program(
                program,
                keep_params_as_input=False,
                unwrap_unit_return_tuple=True,
                custom_convert_map=CONVERTERS,
            )
    except Exception as exc:
        raise ModelError(f"TVM's PyTorch importer failed on this program: {describe(exc)}") from None
    module, dims = bind_input_shapes(module, names, input_shapes)
    inputs, outputs = main_signatures(module, names, dims)
    operators = sorted({str(node.target) for node in program.graph.nodes if node.op == "call_function"})
    return ImportedModel(
        module=module,
        inputs=inputs,
        outputs=outputs,
        source_format="pt2",
        source_sha256=file_sha256(path),
        operators=tuple(operators),
        references=(Reference("torch", _runner(program)),),
        dims=dims,
    )
