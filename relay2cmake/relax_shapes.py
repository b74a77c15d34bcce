"""Static shapes of Relax values: the one helper the frontends and the rewrites share (a leaf
module: it imports nothing from the stages)."""

from __future__ import annotations

from typing import Any


def static_dims(ty: Any) -> list[int] | None:
    """A Relax tensor type's dimensions when every one is a constant, else None (a symbolic
    dimension, an unknown rank, or not a tensor)."""
    values = getattr(getattr(ty, "shape", None), "values", None)
    if values is None or not all(hasattr(d, "value") for d in values):
        return None
    return [int(d.value) for d in values]
