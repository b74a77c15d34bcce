"""Golden data: seeded inputs, and reference outputs computed by an independent path.

The reference is the frontend's independent runner when it has one and it can run the
model (ONNX's reference evaluator, PyTorch itself), else TVM's Relax VM on the imported module
(which checks lowering and the driver, not the importer). The package's ctest compares
against these within the recorded tolerance.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from dataclasses import dataclass

import numpy as np

from relay2cmake.dtypes import RAW_BITS, numpy_dtype
from relay2cmake.errors import ModelError
from relay2cmake.frontends import ImportedModel

SEED = 20240611


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class GoldenData:
    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]
    tolerances: tuple[Tolerance, ...]
    reference: str  # "onnx-reference" or "tvm-vm"


def make_inputs(imported: ImportedModel, seed: int = SEED) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    arrays = []
    for signature in imported.inputs:
        dtype = numpy_dtype(signature.dtype)
        if dtype.kind == "f" or signature.dtype in RAW_BITS:
            array = rng.standard_normal(signature.shape)
            if signature.dtype == "float8_e8m0fnu":  # powers of two only: no sign, no zero
                array = np.abs(array) + 0.25
            array = array.astype(dtype)
        elif dtype.kind == "b":
            array = rng.integers(0, 2, signature.shape).astype(dtype)
        else:
            # Small non-negative integers: safe as indices, counts and values alike.
            array = rng.integers(0, 4, signature.shape).astype(dtype)
        arrays.append(np.asarray(array, order="C"))  # ascontiguousarray would make 0-d arrays 1-d
    return tuple(arrays)


def _tolerance(expected: np.ndarray) -> Tolerance:
    if expected.dtype.name == "bfloat16":  # 8 significant bits
        finite = expected.astype(np.float32)
        finite = finite[np.isfinite(finite)]
        scale = float(np.max(np.abs(finite))) if finite.size else 1.0
        return Tolerance(1e-2 * max(1.0, scale), 2e-2)
    if expected.dtype.kind != "f":
        return Tolerance(0.0, 0.0)
    finite = expected[np.isfinite(expected)]
    scale = float(np.max(np.abs(finite))) if finite.size else 1.0
    if expected.dtype == np.float16:
        return Tolerance(1e-2 * max(1.0, scale), 1e-2)
    if expected.dtype == np.float64:
        return Tolerance(1e-8 * max(1.0, scale), 1e-6)
    return Tolerance(1e-4 * max(1.0, scale), 1e-3)


def tvm_vm_reference(imported: ImportedModel, inputs) -> list[np.ndarray]:
    import tvm
    from tvm import relax

    executable = tvm.compile(imported.module, target=tvm.target.Target("llvm"))
    vm = relax.VirtualMachine(executable, tvm.cpu())
    result = vm["main"](*[tvm.runtime.tensor(a) for a in inputs])
    values = list(result) if len(imported.outputs) > 1 else [result]
    return [v.numpy() for v in values]


def compute(imported: ImportedModel) -> GoldenData:
    inputs = make_inputs(imported)
    outputs = None
    if imported.reference is not None:
        reference = imported.reference.name
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                outputs = [np.asarray(r) for r in imported.reference.run(inputs)]
        except Exception:
            outputs = None  # the reference lacks an operator: fall back to TVM's VM
    if outputs is None:
        reference = "tvm-vm"
        try:
            outputs = tvm_vm_reference(imported, inputs)
        except Exception as exc:
            raise ModelError(
                f"Cannot compute golden outputs for this model: {type(exc).__name__}: {exc}"
            ) from None
    expected = []
    for signature, array in zip(imported.outputs, outputs, strict=True):
        want = numpy_dtype(signature.dtype)
        array = np.asarray(array).astype(want, copy=False)
        # A bounded output keeps its actual shape (at most the bound along its dynamic axis).
        shape = array.shape if signature.dynamic_axis is not None else signature.shape
        array = np.asarray(array.reshape(shape), order="C")
        expected.append(array)
    return GoldenData(
        inputs=inputs,
        expected=tuple(expected),
        tolerances=tuple(_tolerance(e) for e in expected),
        reference=reference,
    )
