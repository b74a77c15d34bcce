"""Place buffers with known lifetimes in one arena so that buffers alive at the same time
never overlap. Greedy by size (largest first, lowest free offset): simple, deterministic,
and close to optimal for the chain-like lifetimes of inference graphs."""

from __future__ import annotations

from dataclasses import dataclass

ALIGNMENT = 64  # LLVM kernels use aligned vector loads; every tensor starts on 64 bytes.


def align_up(value: int, alignment: int = ALIGNMENT) -> int:
    return (value + alignment - 1) // alignment * alignment


@dataclass(frozen=True)
class Lifetime:
    key: str
    size: int
    first: int  # first step (inclusive) at which the bytes are needed
    last: int  # last step (inclusive) at which the bytes are needed


def pack(lifetimes: list[Lifetime]) -> tuple[dict[str, int], int]:
    """Offsets by key and the arena's total size (a multiple of ALIGNMENT)."""
    order = sorted(lifetimes, key=lambda lt: (-lt.size, lt.first, lt.key))
    placed: list[tuple[Lifetime, int]] = []
    offsets: dict[str, int] = {}
    total = 0
    for item in order:
        size = align_up(max(item.size, 1))
        busy = sorted(
            (offset, offset + align_up(max(other.size, 1)))
            for other, offset in placed
            if other.first <= item.last and item.first <= other.last
        )
        offset = 0
        for start, end in busy:
            if offset + size <= start:
                break
            offset = max(offset, end)
        placed.append((item, offset))
        offsets[item.key] = offset
        total = max(total, offset + size)
    return offsets, total
