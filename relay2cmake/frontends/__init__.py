"""Model importers: a model file in, an ``ImportedModel`` (a Relax IRModule) out."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from relay2cmake.errors import UserError
from relay2cmake.symbolic import DimExpr, DimRange

# --input-shape: per input, each dimension a number or a range (LO, HI) chosen at run time.
InputShapes = dict[str, tuple[int | tuple[int, int], ...]]


@dataclass(frozen=True)
class TensorSignature:
    """A model input or output as the user sees it."""

    name: str
    dtype: str
    shape: tuple[int, ...]  # for a bounded output: its upper bound
    # The axis whose extent depends on the data (NonZero, Unique, Compress outputs); None
    # when the shape is static.
    dynamic_axis: int | None = None
    # A shape that depends on dimensions chosen at run time (``ImportedModel.dims``): per
    # axis, its extent as an expression over them, or None where static; ``shape`` then holds
    # the largest extents. Empty: static.
    symbolic: tuple[DimExpr | None, ...] = ()


@dataclass(frozen=True)
class Reference:
    """An independent way to run the source model (for golden outputs), not through TVM."""

    name: str  # "onnxruntime", "onnx-reference", "torch", ...
    run: Callable[[tuple[Any, ...]], list[Any]]  # NumPy inputs in model order → NumPy outputs


@dataclass(frozen=True)
class ImportedModel:
    """What every frontend produces.

    ``module`` is a Relax IRModule whose ``main`` takes the inputs, in ``inputs`` order,
    with static shapes (or with the dimensions of ``dims``), and returns the outputs in
    ``outputs`` order (a tuple when there is
    more than one). Weights are bound as constants.
    """

    module: Any  # tvm.IRModule
    inputs: tuple[TensorSignature, ...]
    outputs: tuple[TensorSignature, ...]
    source_format: str
    source_sha256: str
    operators: tuple[str, ...]  # the model's operator types, sorted, for metadata
    # Independent ways to run the source model, most trusted first (golden.py cross-checks
    # them with each other and with TVM's VM).
    references: tuple[Reference, ...] = ()
    # The dimensions chosen at run time (``--input-shape x=1..8,...``), in the order of the
    # C API's dims array; ``main`` carries them as TIR variables named by their symbols.
    dims: tuple[DimRange, ...] = ()
    # Inputs that set a shape parameter checked at run time (onnx_settled): a value the
    # package accepts, which the golden step feeds instead of random numbers.
    settled_values: dict[str, Any] = field(default_factory=dict)
    # Per output, the step of its values where a quantized operator gives it (onnx_qdq.
    # output_quanta), within which references and the package may round apart; else None.
    output_quanta: tuple[float | None, ...] = ()


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_input_shape_names(input_shapes: dict, names: list[str]) -> None:
    """Every ``--input-shape`` names an input of the model (``names``, in order)."""
    unknown = sorted(set(input_shapes) - set(names))
    if unknown:
        raise UserError(
            f"--input-shape names {', '.join(map(repr, unknown))}, which is not an input of this model; "
            f"its inputs are: {', '.join(map(repr, names)) or '(none)'}."
        )


def check_model_path(path: Path) -> None:
    if not path.exists():
        raise UserError(f"Model file {str(path)!r} does not exist.")
    if path.is_dir():
        raise UserError(f"{str(path)!r} is a directory; give the path of a model file (.onnx, .pt2 or .py).")
    if path.stat().st_size == 0:
        raise UserError(f"Model file {str(path)!r} is empty.")


def load_tvm(path: Path) -> None:
    """Import TVM without PyTorch unless ``path`` is a ``.pt2``. ``tvm_ffi`` imports torch
    whenever it is installed (a work-around for a symbol clash on Windows, and for tensor
    conversions only the ``.pt2`` frontend needs): 1.8 s of the 6.3 s that ``import tvm``
    took here, on every command. ``None`` in ``sys.modules`` makes ``import torch`` fail."""
    import sys

    if "tvm" in sys.modules or "torch" in sys.modules or path.suffix.lower() == ".pt2":
        import tvm

        return
    sys.modules["torch"] = None  # type: ignore[assignment]
    try:
        import tvm  # noqa: F401
        from tvm import relax  # noqa: F401
    finally:
        if "torch" in sys.modules and sys.modules["torch"] is None:
            del sys.modules["torch"]


def import_model(
    path: Path, input_shapes: InputShapes, constant_inputs: dict[str, str] | None = None
) -> ImportedModel:
    """Choose the frontend by file extension and import the model; ``main``'s parameters get
    safe names (the originals stay in ``inputs``); integer divisions cannot trap."""
    import dataclasses

    from relay2cmake.frontends.integer_division import guard_integer_division
    from relay2cmake.frontends.relax_signature import safe_parameter_names

    imported = _import_by_format(path, input_shapes, constant_inputs)
    module = guard_integer_division(safe_parameter_names(imported.module))
    return dataclasses.replace(imported, module=module)


def _import_by_format(
    path: Path, input_shapes: InputShapes, constant_inputs: dict[str, str] | None
) -> ImportedModel:
    check_model_path(path)
    load_tvm(path)
    suffix = path.suffix.lower()
    if suffix == ".onnx":
        from relay2cmake.frontends.onnx import import_onnx

        return import_onnx(path, input_shapes, constant_inputs)
    if constant_inputs:
        raise UserError(
            "--constant-input applies to ONNX models; freeze values in the model itself for other formats."
        )
    if suffix == ".py":
        from relay2cmake.frontends.tvmscript import import_tvmscript

        return import_tvmscript(path, input_shapes)
    if suffix == ".pt2":
        from relay2cmake.frontends.torch import import_torch

        return import_torch(path, input_shapes)
    raise UserError(
        f"Cannot tell the format of {str(path)!r} from its extension {suffix or '(none)'!r}: relay2cmake "
        "reads ONNX models (.onnx), PyTorch exported programs (.pt2) and TVMScript Relax modules (.py)."
    )
