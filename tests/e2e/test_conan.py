"""The package as a Conan 2 user receives it: conan create (offline, fresh CONAN_HOME) with
its test_package, a conanfile.txt consumer with CMake presets, and the no_malloc option."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from packaging_helpers import SAMPLE_APPS, cmake, relay2cmake, run

from relay2cmake.samples import DIGITS_MODEL


@pytest.fixture(scope="module")
def conan_env(tmp_path_factory) -> dict:
    home = tmp_path_factory.mktemp("conan_home")
    env = dict(os.environ, CONAN_HOME=str(home))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"  # the cmake wheel, conan
    run(["conan", "profile", "detect"], env=env)
    # Offline: with every remote disabled, nothing can come from outside the recipe.
    run(["conan", "remote", "disable", "*"], env=env)
    return env


@pytest.fixture(scope="module")
def digits_package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("digits") / "pkg"
    relay2cmake("gen", str(DIGITS_MODEL), "-o", str(out), "--name", "Digits")
    return out


@pytest.fixture(scope="module")
def created(conan_env, digits_package) -> str:
    result = run(["conan", "create", digits_package], env=conan_env)
    return result.stdout + result.stderr


def test_conan_create_builds_tests_and_runs_test_package(created):
    assert re.search(r"digits_golden \.+\s+Passed", created), "the package's ctest ran inside conan create"
    assert "(test package): Running test()" in created
    # test_package runs the golden check through ctest (so cross builds use their emulator).
    assert re.search(r"Test\s+#1: golden \.+\s+Passed", created), created[-3000:]
    assert "Package '" in created and "created" in created


def test_conan_consumer_with_presets(created, conan_env, tmp_path):
    app = tmp_path / "conan_consumer"
    shutil.copytree(SAMPLE_APPS / "conan_consumer", app)
    run(["conan", "install", app], env=conan_env)
    run([cmake(), "--preset", "conan-release"], cwd=app, env=conan_env)
    run([cmake(), "--build", "--preset", "conan-release"], cwd=app, env=conan_env)
    result = run([app / "build" / "Release" / "conan_consumer"])
    assert "predicted class" in result.stdout
    assert "wrong byte size for input 'image'" in result.stdout


@pytest.mark.skipif(shutil.which("nm") is None, reason="nm (binutils) is needed")
def test_conan_no_malloc_option(conan_env, digits_package):
    result = run(["conan", "create", digits_package, "-o", "digits/*:no_malloc=True"], env=conan_env)
    output = result.stdout + result.stderr
    package_id = re.search(r"Package '([0-9a-f]+)' created", output).group(1)
    folder = run(["conan", "cache", "path", f"digits/1.0.0:{package_id}"], env=conan_env).stdout.strip()
    symbols = run(["nm", "--format=posix", Path(folder) / "lib" / "libdigits.a"]).stdout
    undefined = {
        line.split()[0] for line in symbols.splitlines() if len(line.split()) > 1 and line.split()[1] == "U"
    }
    assert "memmove" in undefined, "nm output was read (the runtime copies outputs with memmove)"
    assert not undefined & {"malloc", "calloc", "realloc", "free"}
    assert "digits_context_create" not in symbols


def test_conan_external_weights_option(conan_env, digits_package):
    """-o external_weights=True: the library leaves the weights out, the package installs the
    file, and test_package's golden check loads it from the package's share folder."""
    result = run(["conan", "create", digits_package, "-o", "digits/*:external_weights=True"], env=conan_env)
    output = result.stdout + result.stderr
    assert re.search(r"digits_golden \.+\s+Passed", output), "the package's ctest read the file"
    assert re.search(r"Test\s+#1: golden \.+\s+Passed", output), "test_package read the installed file"
    package_id = re.search(r"Package '([0-9a-f]+)' created", output).group(1)
    folder = Path(run(["conan", "cache", "path", f"digits/1.0.0:{package_id}"], env=conan_env).stdout.strip())
    assert (folder / "share" / "digits" / "digits_weights.bin").stat().st_size > 200_000
    assert "digits_embedded_weights" not in run(["nm", folder / "lib" / "libdigits.a"]).stdout
