"""Integer division and modulo that cannot trap: a zero divisor gives 0.

A CPU traps on an integer division by zero (x86's ``idiv``/``div``: SIGFPE) and on the most
negative value divided by -1; C calls both undefined. A divisor from the caller's data would
then kill the process running the package, and gen itself, whose golden step runs the model
on sample inputs through TVM's VM. Every integer ``divide``/``floor_divide``/``mod``/
``floor_mod`` whose divisor is not a constant free of 0 and -1 divides by a safe divisor
instead: x / 0 and x % 0 give 0 (NumPy's result, which ONNX's reference evaluator returns;
ONNX leaves it undefined and ONNX Runtime stops with an error), x / -1 is -x, x % -1 is 0.
Applied to what every frontend produces, so the golden references, TVM's VM and every kernel
set compute the same values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tvm.ir import IRModule

_DIVISIONS = ("relax.divide", "relax.floor_divide")
_REMAINDERS = ("relax.mod", "relax.floor_mod")


def guard_integer_division(module: IRModule) -> IRModule:
    import numpy as np
    import tvm
    from tvm import relax

    @relax.expr_functor.mutator
    class _Guard(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            name = getattr(call.op, "name", "")
            if name not in _DIVISIONS + _REMAINDERS:
                return call
            dtype = str(getattr(call.ty, "dtype", ""))
            if not dtype.startswith(("int", "uint")):
                return call
            dividend, divisor = call.args
            known = self.lookup_binding(divisor) if isinstance(divisor, relax.Var) else divisor
            if isinstance(known, tvm.ir.GenericConst):
                values = known.value.numpy()
                if not np.any(values == 0) and not (dtype.startswith("int") and np.any(values == -1)):
                    return call
            zero, one = relax.const(0, dtype), relax.const(1, dtype)
            by_zero = self.builder_.emit(relax.op.equal(divisor, zero))
            unsafe = by_zero
            if dtype.startswith("int"):
                by_minus_one = self.builder_.emit(relax.op.equal(divisor, relax.const(-1, dtype)))
                unsafe = self.builder_.emit(relax.op.logical_or(by_zero, by_minus_one))
            safe_divisor = self.builder_.emit(relax.op.where(unsafe, one, divisor))
            result = self.builder_.emit(relax.Call(call.op, [dividend, safe_divisor], call.attrs))
            if dtype.startswith("int"):
                # The safe divisor 1 gave x and 0; x % -1 is 0 too, x / -1 is -x, negated where
                # it cannot overflow: the most negative value stays itself, as two's complement
                # wraps (a negation through an unsigned type does not: TVM's casts saturate).
                if name in _DIVISIONS:
                    smallest = int(np.iinfo(dtype).min)
                    lowest = relax.const(smallest, dtype)
                    # (x < lowest + 1, not x == lowest, on the dividend the quotient by 1 equals:
                    # TVM's simplifier folds both "== lowest" tests to false in the C kernels.)
                    is_lowest = relax.op.less(dividend, relax.const(smallest + 1, dtype))
                    negated = relax.op.subtract(zero, relax.op.where(is_lowest, zero, result))
                    negated = relax.op.where(is_lowest, lowest, negated)
                    result = self.builder_.emit(relax.op.where(by_minus_one, negated, result))
            return relax.op.where(by_zero, zero, result)

    guard = _Guard(module)
    for gv, func in module.functions.items():
        if isinstance(func, relax.Function):
            guard.builder_.update_func(gv, guard.visit_expr(func))
    return guard.builder_.get()
