"""512 MB of weights through gen, an embedded build and an external-weights build, with the
same outputs from both (slow: several minutes; `tools/large_weights.py` prints the timings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "tools" / "large_weights.py"


@pytest.mark.slow
def test_512_megabytes_of_weights_embedded_and_external(tmp_path):
    result = subprocess.run(
        [sys.executable, TOOL, "--sizes", "512", "--out", tmp_path / "report.md"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    row = (tmp_path / "report.md").read_text().splitlines()[-1]
    assert row.startswith("| 512 MB |") and row.endswith("| yes |"), row
