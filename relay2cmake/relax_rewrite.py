"""Running a Relax ``PyExprMutator`` over every Relax function of a module."""

from __future__ import annotations


def rewrite_functions(module, mutator):
    """``module`` with each Relax function passed through ``mutator`` (constructed on
    ``module``); PrimFuncs the mutator emitted with ``call_te`` are part of the result."""
    from tvm import relax

    for gv, func in module.functions.items():
        if isinstance(func, relax.Function):
            mutator.builder_.update_func(gv, mutator.visit_expr(func))
    return mutator.builder_.get()
