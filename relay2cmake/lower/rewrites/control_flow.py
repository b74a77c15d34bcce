"""Relax rewrites that remove control flow the static driver cannot run.

The driver executes a fixed list of kernel calls. An ``If`` whose branches both yield
tensors of the same static shape and dtype becomes straight-line code: both branches run
and ``where(cond, then, else)`` picks the result. This costs the work of the branch not
taken, and is only sound because ONNX branches are pure (no state, no I/O). Anything else
(branches with different shapes, non-tensor results) stays an ``If`` and is reported by the
plan as unsupported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from relay2cmake.relax_shapes import static_dims

if TYPE_CHECKING:
    from tvm.ir import IRModule


def _static_tensor(sinfo) -> bool:
    from tvm import relax

    return isinstance(sinfo, relax.TensorType) and static_dims(sinfo) is not None


def _same_static_result(a, b) -> bool:
    from tvm import relax

    if isinstance(a, relax.TupleType) and isinstance(b, relax.TupleType):
        return len(a.fields) == len(b.fields) and all(
            _same_static_result(x, y) for x, y in zip(a.fields, b.fields, strict=True)
        )
    if not (_static_tensor(a) and _static_tensor(b)) or a.dtype != b.dtype:
        return False
    return [int(d) for d in a.shape.values] == [int(d) for d in b.shape.values]


def if_to_select(module: IRModule) -> IRModule:
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Flatten(relax.PyExprMutator):
        def visit_if_(self, op):
            then_sinfo = op.true_branch.body.ty
            else_sinfo = op.false_branch.body.ty
            cond = self.visit_expr(op.cond)
            if not (_same_static_result(then_sinfo, else_sinfo) and _is_scalar_bool(cond.ty)):
                return super().visit_if_(op)
            then_value = self._inline(op.true_branch)
            else_value = self._inline(op.false_branch)
            return self._select(cond, then_value, else_value, then_sinfo)

        def _inline(self, seq):
            for block in seq.blocks:
                for binding in block.bindings:
                    value = self.visit_expr(binding.value)
                    if isinstance(binding, relax.MatchCast):
                        new_var = self.builder_.match_cast(value, binding.ty)
                    else:
                        new_var = self.builder_.emit(value)
                    self.set_var_remap(binding.var, new_var)
            return self.builder_.emit(self.visit_expr(seq.body))

        def _select(self, cond, then_value, else_value, sinfo):
            if isinstance(sinfo, relax.TupleType):
                return relax.Tuple(
                    [
                        self._select(
                            cond,
                            self.builder_.emit(relax.TupleGetItem(then_value, i)),
                            self.builder_.emit(relax.TupleGetItem(else_value, i)),
                            field,
                        )
                        for i, field in enumerate(sinfo.fields)
                    ]
                )
            return self.builder_.emit(relax.op.where(cond, then_value, else_value))

    functions = {
        gv: _Flatten().visit_expr(f) if isinstance(f, relax.Function) else f
        for gv, f in module.functions.items()
    }
    return tvm.IRModule(functions, attrs=module.attrs)  # a new module: the caller's stays as it was


def _is_scalar_bool(sinfo) -> bool:
    from tvm import relax

    return isinstance(sinfo, relax.TensorType) and sinfo.dtype == "bool" and sinfo.ndim == 0
