"""relay2cmake demo: the README's main job, from a relative folder as a newcomer would run it."""

from __future__ import annotations

import subprocess
import sys


def test_demo_runs_end_to_end_from_a_relative_folder(tmp_path):
    command = [sys.executable, "-m", "relay2cmake", "demo", "-o", "demo-here"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert "predicted class" in result.stdout
    assert "latency: median" in result.stdout
    assert "Demo done" in result.stdout
    assert (tmp_path / "demo-here" / "install" / "lib" / "cmake" / "Digits" / "DigitsConfig.cmake").exists()
    # A second run reuses its own folder; a folder holding something else is refused.
    assert subprocess.run(command, cwd=tmp_path, capture_output=True, check=False).returncode == 0
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "file.txt").write_text("mine")
    refused = subprocess.run(
        [*command[:-1], "other"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert refused.returncode == 1 and "not empty" in refused.stderr
    assert (tmp_path / "other" / "file.txt").read_text() == "mine"
