"""Static shapes of Relax values: the one helper the frontends and the rewrites share (a leaf
module: it imports nothing from the stages)."""

from __future__ import annotations

from typing import Any


def declared_bounds(func: Any) -> tuple[dict[str, int], dict[str, int]]:
    """The lowest and highest values a Relax function declares for its symbolic variables
    (TVM's ``tir_var_lower_bound``/``tir_var_upper_bound`` attributes), by name."""
    attrs = getattr(func, "attrs", None) or {}
    lows = {str(k): int(v) for k, v in (attrs.get("tir_var_lower_bound") or {}).items()}
    highs = {str(k): int(v) for k, v in (attrs.get("tir_var_upper_bound") or {}).items()}
    return lows, highs


def static_dims(ty: Any) -> list[int] | None:
    """A Relax tensor type's dimensions when every one is a constant, else None (a symbolic
    dimension, an unknown rank, or not a tensor)."""
    values = getattr(getattr(ty, "shape", None), "values", None)
    if values is None or not all(hasattr(d, "value") for d in values):
        return None
    return [int(d.value) for d in values]
