"""Signatures of a Relax ``main`` and the binding of its symbolic dimensions.

Shared by the frontends that hand us Relax directly (TVMScript) or through TVM's own
importer (PyTorch): both may carry symbolic dimensions, which ``--input-shape`` fixes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.errors import ModelError, UserError
from relay2cmake.frontends import InputShapes, TensorSignature, check_input_shape_names
from relay2cmake.relax_shapes import declared_bounds
from relay2cmake.symbolic import DimExpr, DimRange, symbolic_shape

if TYPE_CHECKING:
    from tvm import relax
    from tvm.ir import IRModule


def _dims(shape) -> list:
    return list(shape.values) if shape is not None and hasattr(shape, "values") else []


def bind_input_shapes(
    module: IRModule, names: list[str], input_shapes: InputShapes
) -> tuple[IRModule, tuple[DimRange, ...]]:
    """``module`` with every symbolic dimension of ``main``'s inputs fixed to a number or
    kept as a dimension chosen at run time, and those dimensions.

    ``names[i]`` is the user-facing name of parameter i. A dimension keeps the range the
    program declares (``torch.export``'s ``Dim(min=, max=)``, which TVM's importer records as
    ``tir_var_lower_bound``/``tir_var_upper_bound``), narrowed or fixed by ``--input-shape``;
    one with no upper bound and no ``--input-shape`` is an error naming the input.
    """
    import tvm
    from tvm import relax

    main = module["main"]
    check_input_shape_names(input_shapes, names)
    lows, highs = _declared_bounds(main)
    bindings: dict[str, int] = {}
    ranges: dict[str, tuple[int, int]] = {}
    labels: dict[str, str] = {}
    for name, param in zip(names, main.params, strict=True):
        info = param.ty
        if not isinstance(info, relax.TensorType):
            raise ModelError(f"Input {name!r} is not a tensor; only tensor inputs are supported.")
        extents = _dims(info.shape)
        given = input_shapes.get(name)
        if given is not None and len(given) != len(extents):
            raise UserError(
                f"--input-shape for {name!r} has {len(given)} dimensions but the input has {len(extents)}."
            )
        for axis, dim in enumerate(extents):
            value = given[axis] if given is not None else None
            if isinstance(dim, tvm.tirx.IntImm):
                if value is not None and value != int(dim.value):
                    raise UserError(
                        f"--input-shape for {name!r} sets dimension {axis} to {_text(value)}, "
                        f"but the model fixes it to {int(dim.value)}."
                    )
                continue
            if not isinstance(dim, tvm.tirx.Var):
                raise ModelError(f"Input {name!r} has a computed dimension {dim}; give static shapes.")
            low_declared, high_declared = lows.get(dim.name, 1), highs.get(dim.name)
            if value is None:
                if high_declared is None:
                    raise UserError(
                        f"Input {name!r} has a symbolic dimension {axis} ({dim.name}) with no upper bound. "
                        f"Fix it with --input-shape {name}=D0,D1,..., or give it a range chosen at run "
                        "time (LO..HI in place of a number)."
                    )
                value = (low_declared, high_declared) if low_declared < high_declared else low_declared
            elif high_declared is not None:
                low, high = (value, value) if isinstance(value, int) else value
                if low < low_declared or high > high_declared:
                    raise UserError(
                        f"--input-shape for {name!r} gives dimension {axis} as {_text(value)}, outside "
                        f"the range the program declares ({low_declared}..{high_declared})."
                    )
            if isinstance(value, int):
                bindings.setdefault(dim.name, value)
            else:
                ranges.setdefault(dim.name, value)
                labels.setdefault(dim.name, f"{name}_{axis}")
    for var in set(bindings) & set(ranges):
        raise UserError(
            f"--input-shape gives the dimension shared as {labels[var]!r} both a value and a range."
        )
    if bindings:
        module = relax.transform.BindSymbolicVars(bindings, "main")(module)
    if not ranges:
        return module, ()
    # Our own variable names (TVM prints them into the kernels), in order of first use.
    dims = tuple(DimRange(labels[var], f"dim{k}", *ranges[var]) for k, var in enumerate(ranges))
    renamed = {var: tvm.tirx.Var(d.symbol, "int64") for var, d in zip(ranges, dims, strict=True)}
    module = relax.transform.BindSymbolicVars(renamed, "main")(module)
    return with_dim_bounds(module, dims), dims


def _declared_bounds(main) -> tuple[dict[str, int], dict[str, int]]:
    """The bounds the program declares per symbolic variable (an upper bound beyond any real
    size, torch's unbounded ``int_oo``, counts as none)."""
    lows, highs = declared_bounds(main)
    return lows, {name: high for name, high in highs.items() if high < 1 << 31}


def _text(value: int | tuple[int, int]) -> str:
    return str(value) if isinstance(value, int) else f"{value[0]}..{value[1]}"


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


def signature_of(info: relax.Type, name: str, dims: tuple[DimRange, ...] = ()) -> TensorSignature:
    from tvm import relax

    if not isinstance(info, relax.TensorType) or info.shape is None:
        raise ModelError(f"{name!r} is not a tensor with a known shape.")
    try:
        shape, symbolic = symbolic_shape(_dims(info.shape), dims, repr(name))
    except ModelError:
        raise ModelError(
            f"{name!r} has a shape that is not known at generation time ({info.shape})."
        ) from None
    return TensorSignature(name, str(info.dtype), shape, symbolic=symbolic)


def main_signatures(
    module: IRModule, input_names: list[str], dims: tuple[DimRange, ...] = ()
) -> tuple[tuple[TensorSignature, ...], tuple[TensorSignature, ...]]:
    """Inputs and outputs of ``main`` (static, or with the run-time dimensions ``dims``);
    outputs are named output_0, output_1, ..."""
    main = module["main"]
    inputs = tuple(signature_of(p.ty, n, dims) for n, p in zip(input_names, main.params, strict=True))
    ret = main.ret_ty
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    names = ["output"] if len(fields) == 1 else [f"output_{i}" for i in range(len(fields))]
    outputs = tuple(signature_of(info, name, dims) for info, name in zip(fields, names, strict=True))
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
