"""``relay2cmake demo``: the whole user journey on the bundled sample model.

gen → CMake build → ctest (golden) → install to a prefix → build an application that uses
find_package(Digits) → run it.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from relay2cmake.commands import cmake_runner
from relay2cmake.commands.generate import GenerateOptions, Steps, generate, timed_step
from relay2cmake.errors import UserError
from relay2cmake.samples import DEMO_APP, DIGITS_MODEL

MARKER = ".relay2cmake-demo"


def _prepare(out: Path, force: bool) -> None:
    if out.exists() and any(out.iterdir()) and not (out / MARKER).exists() and not force:
        raise UserError(
            f"{str(out)!r} is not empty and is not a previous demo; choose another -o or pass --force."
        )
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by relay2cmake demo; safe to delete\n")


def _configure_and_build(source: Path, build_dir: Path, *definitions: str) -> None:
    cmake_runner.configure(source, build_dir, *definitions)
    cmake_runner.build(build_dir)


def run_demo(out: Path, force: bool, progress: Steps) -> dict[str, float]:
    out = out.resolve()  # CMake resolves relative prefixes against the build folder, not ours
    _prepare(out, force)
    seconds: dict[str, float] = {}
    package, build_dir, prefix = out / "package", out / "build", out / "install"
    app_build = out / "app-build"

    def step(label: str, message: str, work):
        return timed_step(progress, seconds, label, message, work)

    # `relay2cmake gen bundled/digits.onnx -o OUT/package --name Digits`, with its own steps shown.
    start = time.perf_counter()
    generate(GenerateOptions(model=DIGITS_MODEL, out=package, name="Digits", force=True), progress)
    seconds["generate"] = time.perf_counter() - start
    step(
        "build",
        "Building the package with CMake",
        lambda: _configure_and_build(package, build_dir),
    )
    step("test", "Running its golden test (ctest)", lambda: cmake_runner.test(build_dir))
    step("install", f"Installing to {prefix}", lambda: cmake_runner.install(build_dir, prefix))
    step(
        "app",
        "Building an application with find_package(Digits)",
        lambda: _configure_and_build(DEMO_APP, app_build, f"-DCMAKE_PREFIX_PATH={prefix}"),
    )
    output = step("run", "Running it", lambda: cmake_runner.run_program(app_build / "digits_demo"))
    print(output.rstrip())
    return seconds
