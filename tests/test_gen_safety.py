"""gen loses nothing: --force never deletes the folder that holds the model or the working
directory, and an interrupted gen leaves no hidden half-written package behind."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from relay2cmake.samples import DIGITS_MODEL


def _gen(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "relay2cmake", "-q", "gen", *args], cwd=cwd, capture_output=True, text=True
    )


def test_force_never_deletes_the_models_folder_or_the_working_directory(tmp_path):
    model = tmp_path / "digits.onnx"
    shutil.copy(DIGITS_MODEL, model)
    result = _gen("digits.onnx", "-o", ".", "--force", cwd=tmp_path)
    assert result.returncode == 1 and "--force would delete" in result.stderr, result.stderr
    assert model.exists()
    inner = tmp_path / "work"
    inner.mkdir()
    result = _gen(str(model), "-o", str(tmp_path), "--force", cwd=inner)
    assert result.returncode == 1 and "--force would delete" in result.stderr
    assert model.exists() and inner.exists()


def test_sigterm_during_gen_leaves_no_staging_folder(tmp_path):
    out = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-m", "relay2cmake", "-q", "gen", str(DIGITS_MODEL), "-o", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while not list(tmp_path.glob(".out.*")) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the staging folder exists from rendering until the self-check ends
    assert process.poll() is None, "gen finished before it could be interrupted"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode != 0 and "interrupted" in stderr, stderr
    assert not out.exists()
    assert list(tmp_path.iterdir()) == [], [p.name for p in tmp_path.iterdir()]
