"""The package builtins (``src/<prefix>_builtins.c``): the Relax extern-function names that
frontends and rewrites emit and the plan turns into direct calls of
``<prefix>_builtin_<last part>``. A neutral module: the plan reads these names without
importing a frontend (or TVM)."""

from __future__ import annotations

# Operators whose output size depends on the data (frontends/onnx_bounded.py).
NONZERO = "relay2cmake.nonzero"
COMPRESS = "relay2cmake.compress"
UNIQUE = "relay2cmake.unique"
NON_MAX_SUPPRESSION = "relay2cmake.non_max_suppression"
# TopK, Sort and ArgSort (sorting.py): TVM's kernels for them call tvm.contrib.sort at run time.
SORT = "relay2cmake.sort"
# Indices checked before a gather or scatter kernel uses them (index_checks.py).
CHECK_INDICES = "relay2cmake.check_indices"
# Which of the values a shape parameter given at run time may hold it holds (onnx_settled.py).
SETTLE = "relay2cmake.settle"

# The outputs of a recurrent operator unrolled over a sequence of run-time length L
# (onnx_converters.py): every pass's states at positions 0..L-1, and each pass's last state.
# Both read step t only when t < L, so the driver skips computing the others (step_guards.py).
STACK_STATES = "relay2cmake.stack_states"
LAST_STATES = "relay2cmake.last_states"

BUILTIN_FUNCTIONS = (
    NONZERO,
    COMPRESS,
    UNIQUE,
    NON_MAX_SUPPRESSION,
    SORT,
    CHECK_INDICES,
    SETTLE,
    STACK_STATES,
    LAST_STATES,
)
# In a builtin's text, "input #3" is model input 3; the plan replaces it with the input's name.
INPUT_MARK = "input #"


def builtin_symbol(prefix: str, name: str) -> str:
    """The C function of builtin ``name``: ``relay2cmake.nonzero`` → ``<prefix>_builtin_nonzero``."""
    return f"{prefix}_builtin_{name.rsplit('.', 1)[1]}"
