"""Mutated model bytes never make `relay2cmake gen` crash or print a traceback: every outcome
is a package (exit 0) or one clear error (exit 1), and a refused model writes nothing.

CI runs a few dozen mutations; `R2C_FUZZ_EXAMPLES=1000 pytest tests/cli/test_fuzz.py` (or
`make fuzz`) runs a long campaign.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import onnx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_zoo import multi_io
from typer.testing import CliRunner

from relay2cmake.cli import app

# Small weights, several operators and dtypes: most bytes are structure, not numbers.
SEED_MODEL = multi_io().SerializeToString()
EXAMPLES = int(os.environ.get("R2C_FUZZ_EXAMPLES", "40"))
OUTCOMES: dict[int, int] = {}  # exit code → count, printed by the last test

# One mutation: overwrite bytes, cut the file, or splice in random bytes. Protobuf's framing
# (tags, lengths) sits everywhere, so small edits reach the parser, the checker, shape
# inference and the importer alike.
overwrite = st.tuples(
    st.just("overwrite"), st.integers(0, len(SEED_MODEL) - 1), st.binary(min_size=1, max_size=8)
)
truncate = st.tuples(st.just("truncate"), st.integers(0, len(SEED_MODEL) - 1), st.just(b""))
insert = st.tuples(st.just("insert"), st.integers(0, len(SEED_MODEL)), st.binary(min_size=1, max_size=8))


def _mutate(data: bytes, edits) -> bytes:
    for kind, at, payload in edits:
        at = min(at, len(data))
        if kind == "overwrite":
            data = data[:at] + payload + data[at + len(payload) :]
        elif kind == "truncate":
            data = data[:at]
        else:
            data = data[:at] + payload + data[at:]
    return data


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 40,  # CI: the same cases every run
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(st.one_of(overwrite, truncate, insert), min_size=1, max_size=4))
def test_mutated_models_fail_cleanly_or_generate(edits):
    with tempfile.TemporaryDirectory() as folder:
        model = Path(folder) / "fuzzed.onnx"
        model.write_bytes(_mutate(SEED_MODEL, edits))
        out = Path(folder) / "out"
        result = CliRunner().invoke(app, ["gen", str(model), "-o", str(out), "--target", "c"])
        # CliRunner hands back what escaped the command: only typer's own exit is allowed.
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
        assert result.exit_code in (0, 1), result.output
        assert "Traceback" not in result.output and "internal error" not in result.output, result.output
        OUTCOMES[result.exit_code] = OUTCOMES.get(result.exit_code, 0) + 1
        if result.exit_code == 1:
            assert "error: " in result.output
            assert not out.exists(), "a refused model must not leave a partial package"
        else:
            assert (out / "CMakeLists.txt").exists()


def test_seed_model_is_valid_and_outcomes_are_mixed():
    """The mutations start from a valid model, and reach both outcomes (a fuzzer whose every
    case fails at the first byte tests nothing past the parser)."""
    onnx.checker.check_model(onnx.load_from_string(SEED_MODEL), full_check=True)
    print(f"fuzz outcomes (exit code: cases): {OUTCOMES}")
    if OUTCOMES:
        assert OUTCOMES.get(0, 0) > 0 and OUTCOMES.get(1, 0) > 0, OUTCOMES
