"""TVMScript → Relax: a Python file that defines a Relax IRModule.

Convention (docs/frontends.md): the file defines a module-level IRModule, normally with
``@I.ir_module class Module``; if it has no ``Module``, it must define exactly one IRModule.
Its Relax function ``main`` is the entry: its parameters are the inputs, in order, named as
in the script; it returns one tensor or a tuple of tensors (``output_0``, ``output_1``, ...).
Weights are constants inside the module. The file is executed with ``runpy``: it is code,
so only give relay2cmake files you trust.
"""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path
from typing import Any

from relay2cmake.errors import ModelError, describe
from relay2cmake.frontends import ImportedModel, InputShapes, file_sha256
from relay2cmake.frontends.relax_signature import bind_input_shapes, main_signatures


def _find_module(namespace: dict, path: Path):
    import tvm

    modules = {k: v for k, v in namespace.items() if isinstance(v, tvm.IRModule)}
    if "Module" in modules:
        return modules["Module"]
    if len(modules) == 1:
        return next(iter(modules.values()))
    found = ", ".join(sorted(modules)) or "none"
    raise ModelError(
        f"{str(path)!r} must define one Relax IRModule (preferably named Module, with @I.ir_module); "
        f"found: {found}."
    )


def load_module(path: Path) -> Any:
    """The Relax IRModule the file defines, with a Relax ``main``."""
    from tvm import relax

    try:
        with contextlib.redirect_stdout(io.StringIO()):
            namespace = runpy.run_path(str(path), run_name="relay2cmake_tvmscript")
    except Exception as exc:
        raise ModelError(f"Running {str(path)!r} failed: {describe(exc, 600)}") from None
    module = _find_module(namespace, path)
    if "main" not in [gv.name_hint for gv in module.get_global_vars()] or not isinstance(
        module["main"], relax.Function
    ):
        raise ModelError(f"The IRModule in {str(path)!r} has no Relax function named main (the entry point).")
    return module


def import_tvmscript(path: Path, input_shapes: InputShapes) -> ImportedModel:
    module = load_module(path)
    names = [p.name for p in module["main"].params]
    module, dims = bind_input_shapes(module, names, input_shapes)
    inputs, outputs = main_signatures(module, names, dims)
    calls = sorted({str(op) for op in operators(module["main"])})
    return ImportedModel(
        module=module,
        inputs=inputs,
        outputs=outputs,
        source_format="tvmscript",
        source_sha256=file_sha256(path),
        operators=tuple(calls),
        dims=dims,
    )


def operators(function: Any) -> list[str]:
    import tvm
    from tvm import relax

    names: list[str] = []

    def visit(expr):
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op):
            names.append(expr.op.name)

    relax.analysis.post_order_visit(function, visit)
    return names
