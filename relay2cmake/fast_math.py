"""Relax rewrite: float32 ``erf`` (GELU's core) as TVM's rational approximation.

The math library's ``erff`` is scalar: inside a vectorized matmul epilogue it costs as much
as the matmul (measured: the transformer block's FFN 0.8 ms → 1.6 ms). ``topi.fast_erf``
is the polynomial Eigen uses, exact to float32 rounding on the clamped range [-4, 4]
(|erf| is 1 to float32 precision beyond it), and vectorizes. Applied to every kernel set so
that all of them compute the same numbers.
"""

from __future__ import annotations

from relay2cmake.relax_rewrite import rewrite_functions


def vectorizable_erf(module):
    import tvm
    from tvm import relax, topi

    erf = tvm.ir.Op.get("relax.erf")

    @relax.expr_functor.mutator
    class _Erf(relax.PyExprMutator):
        def visit_call_(self, call):
            call = super().visit_call_(call)
            if call.op == erf and str(getattr(call.ty, "dtype", "")) == "float32":
                return self.builder_.call_te(topi.fast_erf, call.args[0], primfunc_name_hint="erf")
            return call

    return rewrite_functions(module, _Erf(module))
