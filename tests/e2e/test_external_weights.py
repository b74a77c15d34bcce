"""External weights: the same generated package, configured with <P>_EXTERNAL_WEIGHTS=ON,
leaves its weights out of the library and reads weights/<p>_weights.bin at run time, checked
against the size and SHA-256 compiled into the code."""

from __future__ import annotations

import hashlib
import json
import subprocess

import numpy as np
import pytest
from packaging_helpers import WARNINGS, cmake, configure_build, ctest, relay2cmake, run

from relay2cmake.samples import DIGITS_MODEL

PROGRAM = r"""
#include <digits/digits.h>
#include <stdio.h>

int main(int argc, char** argv) {
  static float image[DIGITS_INPUT_IMAGE_NUM_ELEMENTS], probabilities[10];
  digits_inputs in = {image};
  digits_outputs out = {probabilities};
  digits_context* context = NULL;
  digits_status status;
  (void)argc;
  if (!digits_weights_external()) return 10;
  /* Before the weights are there, no context. */
  if (digits_context_create(&context) != DIGITS_ERROR_WEIGHTS_NOT_LOADED || context != NULL) return 11;
  if (digits_weights_load("/nonexistent/digits_weights.bin") != DIGITS_ERROR_WEIGHTS_UNREADABLE) return 12;
  status = digits_weights_load(argv[1]);
  printf("%s\n", digits_status_string(status));
  if (status != DIGITS_OK) return 13;
  if (digits_context_create(&context) != DIGITS_OK) return 14;
  if (digits_run(context, &in, &out) != DIGITS_OK) return 15;
  fwrite(probabilities, sizeof(float), 10, stderr);
  digits_context_destroy(context);
  return 0;
}
"""


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    root = tmp_path_factory.mktemp("external")
    package = root / "pkg"
    relay2cmake("gen", str(DIGITS_MODEL), "-o", str(package), "--name", "Digits")
    builds = {}
    for mode in ("OFF", "ON"):
        build = root / f"build_{mode}"
        configure_build(
            package, build, f"-DDIGITS_EXTERNAL_WEIGHTS={mode}", f"-DCMAKE_C_FLAGS={WARNINGS}",
            f"-DCMAKE_INSTALL_PREFIX={root / f'install_{mode}'}",
        )  # fmt: skip
        run([cmake(), "--install", build])
        builds[mode] = build
    return root, package, builds


def test_external_build_runs_its_golden_test_without_weights_inside(digits):
    root, package, builds = digits
    meta = json.loads((package / "metadata.json").read_text())
    weights_file = package / meta["weights_file"]["path"]
    assert hashlib.sha256(weights_file.read_bytes()).hexdigest() == meta["weights_file"]["sha256"]
    run([ctest(), "--test-dir", builds["ON"], "--output-on-failure", "--no-tests=error"])
    symbols = run(["nm", "--defined-only", builds["ON"] / "libdigits.a"]).stdout
    assert (
        "digits_embedded_weights" not in symbols
        and "digits_embedded_weights" in run(["nm", builds["OFF"] / "libdigits.a"]).stdout
    )
    library_bytes = {mode: (builds[mode] / "libdigits.a").stat().st_size for mode in builds}
    # The ON build drops the weights and adds the SHA-256 check (a few KB).
    assert library_bytes["OFF"] - library_bytes["ON"] > 0.95 * meta["memory"]["weight_bytes"]
    assert (
        root / "install_ON" / "share" / "digits" / "digits_weights.bin"
    ).read_bytes() == weights_file.read_bytes()


def test_cli_needs_and_checks_the_weights_file(digits, tmp_path):
    root = digits[0]
    # The embedded build's cli stays in its build folder (beside a static library it would
    # install a second copy of the weights); the external build installs it.
    cli = {"OFF": root / "build_OFF" / "digits_cli", "ON": root / "install_ON" / "bin" / "digits_cli"}
    assert not (root / "install_OFF" / "bin" / "digits_cli").exists()
    image = np.random.default_rng(4).random((1, 1, 28, 28), dtype=np.float32)
    np.save(tmp_path / "image.npy", image)
    installed = root / "install_ON" / "share" / "digits" / "digits_weights.bin"

    missing = run([cli["ON"], tmp_path / "image.npy"], check=False)
    assert missing.returncode == 1 and "pass --weights" in missing.stderr

    corrupt = bytearray(installed.read_bytes())
    corrupt[len(corrupt) // 2] ^= 0x40
    (tmp_path / "corrupt.bin").write_bytes(bytes(corrupt))
    (tmp_path / "short.bin").write_bytes(bytes(corrupt[:-64]))
    for bad in ("corrupt.bin", "short.bin"):
        result = run([cli["ON"], "--weights", tmp_path / bad, tmp_path / "image.npy"], check=False)
        assert result.returncode == 1 and "not this model's" in result.stderr, result.stderr

    run([cli["OFF"], "--output-dir", tmp_path / "embedded", tmp_path / "image.npy"])
    run([cli["ON"], "--weights", installed, "--output-dir", tmp_path / "external", tmp_path / "image.npy"])
    assert (tmp_path / "embedded" / "output_0.npy").read_bytes() == (
        tmp_path / "external" / "output_0.npy"
    ).read_bytes()


def test_weights_load_maps_the_file_through_the_c_api(digits, tmp_path):
    install = digits[0] / "install_ON"
    (tmp_path / "main.c").write_text(PROGRAM)
    run(["gcc", "-std=c99", *WARNINGS.split(), "-I", install / "include", tmp_path / "main.c",
         install / "lib" / "libdigits.a", "-lm", "-lpthread", "-o", tmp_path / "app"])  # fmt: skip
    result = subprocess.run(
        [tmp_path / "app", install / "share" / "digits" / "digits_weights.bin"],
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, (result.returncode, result.stdout)
    probabilities = np.frombuffer(result.stderr, dtype=np.float32)
    assert probabilities.shape == (10,) and abs(float(probabilities.sum()) - 1.0) < 1e-4
