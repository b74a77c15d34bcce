"""Run CMake the way a user would: configure, build, test, install. Used by ``demo``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from relay2cmake.errors import BuildError


def tool(name: str) -> str:
    """A tool from this Python environment (the cmake wheel) or else from PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if found is None:
        raise BuildError(f"{name} is not installed; install it (pip install cmake) and try again.")
    return found


def _run(command: list[str], what: str) -> str:
    # A session of its own, so that an interruption stops CMake's compilers and try-compiles
    # too: they would otherwise keep writing into a folder that is being removed.
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate()
    except BaseException:
        _stop_all(process)
        raise
    if process.returncode != 0:
        log = (stdout + stderr).strip().splitlines()
        tail = "\n".join(log[-25:])
        raise BuildError(f"{what} failed (exit code {process.returncode}):\n{tail}")
    return stdout


def _stop_all(process: subprocess.Popen) -> None:
    """Kill the command and everything it started, and wait until it is gone."""
    if hasattr(os, "killpg"):
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    else:  # Windows: no process groups here; the command itself
        process.kill()
    process.communicate()


def remove_build_tree(path: Path, attempts: int = 50) -> None:
    """Remove a CMake build folder, also right after an interruption: the killed compilers
    and try-compiles may still be finishing a write for a moment ("Directory not empty"), so
    a failed removal is retried for up to ``attempts`` tenths of a second."""
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)


def configure(source: Path, build: Path, *definitions: str) -> None:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    _run(
        [
            tool("cmake"),
            "-S",
            str(source),
            "-B",
            str(build),
            *generator,
            "-DCMAKE_BUILD_TYPE=Release",
            *definitions,
        ],
        f"Configuring {source.name}",
    )


def build(build_dir: Path, target: str | None = None) -> None:
    only = ["--target", target] if target else []
    _run([tool("cmake"), "--build", str(build_dir), "--parallel", *only], f"Building {build_dir.name}")


def test(build_dir: Path) -> str:
    return _run(
        [tool("ctest"), "--test-dir", str(build_dir), "--output-on-failure", "--no-tests=error"], "ctest"
    )


def install(build_dir: Path, prefix: Path) -> None:
    _run([tool("cmake"), "--install", str(build_dir), "--prefix", str(prefix)], "Installing")


def run_program(program: Path) -> str:
    return _run([str(program)], program.name)
