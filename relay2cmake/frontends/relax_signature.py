"""Signatures of a Relax ``main`` and the binding of its symbolic dimensions.

Shared by the frontends that hand us Relax directly (TVMScript) or through TVM's own
importer (PyTorch): both may carry symbolic dimensions, which ``--input-shape`` fixes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.errors import ModelError, UserError
from relay2cmake.frontends import InputShapes, TensorSignature, check_input_shape_names
from relay2cmake.symbolic import DimExpr, DimRange

if TYPE_CHECKING:
    from tvm import relax
    from tvm.ir import IRModule


def _dims(shape) -> list:
    return list(shape.values) if shape is not None and hasattr(shape, "values") else []


def bind_input_shapes(module: IRModule, names: list[str], input_shapes: InputShapes) -> IRModule:
    """``module`` with every symbolic dimension of ``main``'s inputs replaced by a number.

    ``names[i]`` is the user-facing name of parameter i. A symbolic dimension that no
    ``--input-shape`` fixes is an error naming the input and the dimension.
    """
    import tvm
    from tvm import relax

    main = module["main"]
    check_input_shape_names(input_shapes, names)
    ranged = [name for name, shape in input_shapes.items() if any(isinstance(d, tuple) for d in shape)]
    if ranged:
        raise UserError(
            f"--input-shape gives {ranged[0]!r} a range: dimensions chosen at run time are supported for "
            "ONNX models so far; give this model's inputs fixed sizes."
        )
    bindings: dict[str, int] = {}
    for name, param in zip(names, main.params, strict=True):
        info = param.ty
        if not isinstance(info, relax.TensorType):
            raise ModelError(f"Input {name!r} is not a tensor; only tensor inputs are supported.")
        dims = _dims(info.shape)
        given = input_shapes.get(name)
        if given is not None and len(given) != len(dims):
            raise UserError(
                f"--input-shape for {name!r} has {len(given)} dimensions but the input has {len(dims)}."
            )
        for axis, dim in enumerate(dims):
            if isinstance(dim, tvm.tirx.IntImm):
                if given is not None and given[axis] != int(dim.value):
                    raise UserError(
                        f"--input-shape for {name!r} sets dimension {axis} to {given[axis]}, "
                        f"but the model fixes it to {int(dim.value)}."
                    )
            elif isinstance(dim, tvm.tirx.Var):
                if given is None:
                    raise UserError(
                        f"Input {name!r} has a symbolic dimension {axis} ({dim.name}). "
                        f"Fix it with --input-shape {name}=D0,D1,..."
                    )
                value = given[axis]
                assert isinstance(value, int)  # ranges were refused above
                bindings.setdefault(dim.name, value)
            else:
                raise ModelError(f"Input {name!r} has a computed dimension {dim}; give static shapes.")
    if not bindings:
        return module
    return relax.transform.BindSymbolicVars(bindings, "main")(module)


def dim_symbol(expr: DimExpr) -> str:
    """The TIR variable of an input's run-time dimension (``DimRange.symbol``)."""
    return f"dim{expr.value}"


def with_dim_bounds(module: IRModule, dims: tuple[DimRange, ...]) -> IRModule:
    """``main`` told the range of each run-time dimension (TVM's memory planning and
    arithmetic read these attributes)."""
    if not dims:
        return module
    main = module["main"]
    main = main.with_attr("tir_var_lower_bound", {d.symbol: d.low for d in dims})
    main = main.with_attr("tir_var_upper_bound", {d.symbol: d.high for d in dims})
    module["main"] = main  # the importer's own module, not shared
    return module


def signature_of(info: relax.Type, name: str) -> TensorSignature:
    import tvm
    from tvm import relax

    if not isinstance(info, relax.TensorType) or info.shape is None:
        raise ModelError(f"{name!r} is not a tensor with a known shape.")
    dims = []
    for dim in _dims(info.shape):
        if not isinstance(dim, tvm.tirx.IntImm):
            raise ModelError(f"{name!r} has a shape that is not known at generation time ({info.shape}).")
        dims.append(int(dim.value))
    return TensorSignature(name, str(info.dtype), tuple(dims))


def main_signatures(
    module: IRModule, input_names: list[str]
) -> tuple[tuple[TensorSignature, ...], tuple[TensorSignature, ...]]:
    """Inputs and outputs of a static ``main``; outputs are named output_0, output_1, ..."""
    main = module["main"]
    inputs = tuple(signature_of(p.ty, n) for n, p in zip(input_names, main.params, strict=True))
    ret = main.ret_ty
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    names = ["output"] if len(fields) == 1 else [f"output_{i}" for i in range(len(fields))]
    outputs = tuple(signature_of(info, name) for info, name in zip(fields, names, strict=True))
    return inputs, outputs


def safe_parameter_names(module: IRModule) -> IRModule:
    """``module`` with ``main``'s parameters named ``input_0``, ``input_1``, ...: TVM names a
    kernel's C parameters after them, unescaped, and the model's own names are untrusted text
    (a newline and ``#include`` in an input name reached the C kernels). The package maps
    inputs by position and keeps the original names in its tables."""
    import tvm
    from tvm import relax

    main = module["main"]
    renamed = [relax.Var(f"input_{i}", p.ty) for i, p in enumerate(main.params)]

    @relax.expr_functor.mutator
    class _Rename(relax.PyExprMutator):
        pass

    mutator = _Rename(module)
    for old, new in zip(main.params, renamed, strict=True):
        mutator.set_var_remap(old, new)
    body = mutator.visit_expr(main.body)
    functions = dict(module.functions)
    functions[module.get_global_var("main")] = relax.Function(
        renamed, body, main.ret_ty, main.is_pure, main.attrs
    )
    return tvm.IRModule(functions, attrs=module.attrs)
