"""Which kernel calls a run may skip at the dimensions it was given.

A recurrent operator over a sequence of run-time length L is unrolled to the largest L; its
states reach the outputs only through the builtins ``stack_states`` and ``last_states``,
which read step t's state only when t < L. This module carries such conditional reads back
through the steps (liveness over the step list): a step is needed when something needed
reads what it writes, under the condition of that read. A step's guard is a condition
``E > k`` per dimension expression E (all must hold); the driver skips the step when its
guard fails, and with it the following steps whose guards then fail too (``skip``), so a
run at L = 1 of a 64-step unroll does not even test the other 63 steps one by one.

Every rule errs towards running a step: when two readers' conditions cannot be joined
exactly, the weaker one (fewer conditions) is kept. The one exception is a step that writes
nothing (a check): it runs only when everything it reads was computed, so it never reads
what a skipped step would have written.
"""

from __future__ import annotations

from dataclasses import dataclass

from relay2cmake.symbolic import DimExpr, DimRange, corners, evaluate

# E > k for every (E, k): the step must run. {} = always; None = nothing needs the step.
Guard = dict[DimExpr, int]


@dataclass(frozen=True)
class StepReads:
    """One step as the analysis sees it: the root buffers of its tensor arguments in order,
    and the arguments read only under a condition (position → (E, k): read when E > k)."""

    roots: tuple[int, ...]
    conditions: dict[int, tuple[DimExpr, int]]


@dataclass(frozen=True)
class StepGuard:
    expr: DimExpr  # the step runs when this is > 0 (never negative: the driver checks extents)
    skip: int  # when it is 0, the next ``skip`` steps' guards are 0 too


def _either(a: Guard | None, b: Guard | None) -> Guard | None:
    """A guard that holds whenever a or b does (the conditions both have, the weaker bound)."""
    if a is None:
        return b
    if b is None:
        return a
    return {e: min(k, b[e]) for e, k in a.items() if e in b}


def _both(a: Guard, b: Guard) -> Guard:
    joined = dict(a)
    for e, k in b.items():
        joined[e] = max(k, joined.get(e, k))
    return joined


def _implies_failure(failed: Guard, other: Guard) -> bool:
    """When ``failed`` fails, so does ``other`` (every condition of it is in other, as strict)."""
    return all(e in other and other[e] >= k for e, k in failed.items())


def step_guards(
    steps: list[StepReads], arena_roots: set[int], kept_roots: set[int], dims: tuple[DimRange, ...]
) -> list[StepGuard | None]:
    """``arena_roots``: roots the steps write (a root's first step writes it); ``kept_roots``:
    roots the caller reads (outputs, extents). None: the step always runs."""
    if not any(s.conditions for s in steps):
        return [None] * len(steps)
    producer: dict[int, int] = {}
    for index, step in enumerate(steps):
        for root in step.roots:
            if root in arena_roots and root not in producer:
                producer[root] = index
    writes: list[set[int]] = [set() for _ in steps]
    for root, index in producer.items():
        writes[index].add(root)

    needed: dict[int, Guard | None] = {root: {} for root in kept_roots}
    guards: list[Guard | None] = [None] * len(steps)
    for index in reversed(range(len(steps))):
        if not writes[index]:
            continue
        guard = None
        for root in writes[index]:
            guard = _either(guard, needed.get(root))
        runs: Guard = guard if guard is not None else {}  # read by nothing: left to run
        guards[index] = runs
        for position, root in enumerate(steps[index].roots):
            if root in writes[index]:
                continue
            condition = steps[index].conditions.get(position)
            read = _both(runs, {condition[0]: condition[1]}) if condition else runs
            needed[root] = _either(needed.get(root), read)
    for index, step in enumerate(steps):
        if not writes[index]:
            guard = {}
            for root in step.roots:
                if root in producer:
                    guard = _both(guard, guards[producer[root]] or {})
            guards[index] = guard

    lows = corners(dims)
    final = [_drop_certain(g or {}, lows) for g in guards]
    # Backwards, so that a step whose failure implies the next one's jumps over that one's
    # own run too (implication is transitive): linear in the unroll, not quadratic.
    skips = [0] * len(final)
    for index in reversed(range(len(final))):
        after = index + 1
        while (
            after < len(final)
            and final[index]
            and final[after]
            and _implies_failure(final[index], final[after])
        ):
            after += skips[after] + 1
        skips[index] = after - index - 1
    return [StepGuard(_guard_expr(g), skip) if g else None for g, skip in zip(final, skips, strict=True)]


def _drop_certain(guard: Guard, values: list[tuple[int, ...]]) -> Guard:
    """Without the conditions that hold at every value of the dimensions (extents grow with
    the dimensions, so the box's corners bound them, as ``symbolic.largest`` assumes)."""
    return {e: k for e, k in guard.items() if min(evaluate(e, v) for v in values) <= k}


def _guard_expr(guard: Guard) -> DimExpr:
    """max(0, min over the conditions of E - k): > 0 exactly when every E > k."""
    terms = [DimExpr("sub", args=(e, DimExpr("const", k))) for e, k in sorted(guard.items(), key=repr)]
    expr = terms[0]
    for term in terms[1:]:
        expr = DimExpr("min", args=(expr, term))
    return DimExpr("max", args=(expr, DimExpr("const", 0)))
