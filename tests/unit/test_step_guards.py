"""Which steps a run at a smaller run-time length skips (relay2cmake.step_guards)."""

from __future__ import annotations

from relay2cmake.step_guards import StepReads, step_guards
from relay2cmake.symbolic import DimExpr, DimRange, evaluate

LENGTH = DimExpr("dim", 0)
DIMS = (DimRange("seq", "dim0", 1, 4),)


def _chain(extra: list[StepReads] = ()) -> list[StepReads]:
    """Input 0 → state 10 → state 11 → state 12 (one step each), stacked by stack_states into
    13 (read when the length exceeds the part's index)."""
    return [
        StepReads((0, 10), {}),
        StepReads((10, 11), {}),
        StepReads((11, 12), {}),
        StepReads((10, 11, 12, 13), {0: (LENGTH, 0), 1: (LENGTH, 1), 2: (LENGTH, 2)}),
        *extra,
    ]


def _runs(guard, length: int) -> bool:
    return guard is None or evaluate(guard.expr, (length,)) > 0


def test_steps_past_the_length_are_skipped_and_the_first_failure_skips_the_rest():
    guards = step_guards(_chain(), {10, 11, 12, 13}, {13}, DIMS)
    # The first state is needed at every length (>= 1): no guard at all.
    assert guards[0] is None and guards[3] is None
    for length in range(1, 5):
        assert [_runs(g, length) for g in guards[:3]] == [True, length > 1, length > 2]
    # Where step 1 is skipped, step 2 is too: the driver jumps over it without a test.
    assert guards[1].skip == 1 and guards[2].skip == 0


def test_an_unconditional_reader_keeps_a_step_running():
    reader = StepReads((12, 14), {})  # reads the last state whatever the length
    guards = step_guards(_chain([reader]), {10, 11, 12, 13, 14}, {13, 14}, DIMS)
    assert guards[:3] == [None, None, None]


def test_a_check_runs_only_when_what_it_reads_was_computed():
    check = StepReads((12, 0), {})  # writes nothing (an index check)
    guards = step_guards(_chain([check]), {10, 11, 12, 13}, {13}, DIMS)
    assert [_runs(guards[4], n) for n in range(1, 5)] == [False, False, True, True]


def test_without_conditional_reads_nothing_is_guarded():
    steps = [StepReads((0, 10), {}), StepReads((10, 11), {})]
    assert step_guards(steps, {10, 11}, {11}, DIMS) == [None, None]


def test_a_guard_that_always_holds_is_dropped():
    # The length is at least 3: the first three states are always read.
    guards = step_guards(_chain(), {10, 11, 12, 13}, {13}, (DimRange("seq", "dim0", 3, 4),))
    assert guards == [None, None, None, None]
