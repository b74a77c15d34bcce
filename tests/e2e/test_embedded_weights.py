"""The weights compiled in as a C array (``<P>_EMBED_WEIGHTS=C``: what compilers without the
assembler's .incbin get): the library carries the same bytes and passes its golden test,
and the two writers of the array (a program built for the build machine; CMake's script in
cross builds) write the same text."""

from __future__ import annotations

import json

from packaging_helpers import WARNINGS, cmake, configure_build, ctest, relay2cmake, run

from relay2cmake.samples import DIGITS_MODEL


def test_weights_as_a_c_array_pass_the_golden_test(tmp_path):
    package, build = tmp_path / "pkg", tmp_path / "build"
    relay2cmake("gen", str(DIGITS_MODEL), "-o", str(package), "--name", "Digits", "--no-self-check")
    configure_build(package, build, "-DDIGITS_EMBED_WEIGHTS=C", f"-DCMAKE_C_FLAGS={WARNINGS}")
    cache = (build / "CMakeCache.txt").read_text()
    assert "DIGITS_EMBED_WEIGHTS:STRING=C" in cache
    run([ctest(), "--test-dir", build, "--output-on-failure", "--no-tests=error"])
    unit = build / "digits_weights_embedded.c"
    weights = package / json.loads((package / "metadata.json").read_text())["weights_file"]["path"]
    text = unit.read_text()
    assert "digits_embedded_weights[" in text and "incbin" not in text
    # The array holds the file's bytes, then a 0.
    start = text.index("{\n") + 2
    values = [int(v, 16) for v in text[start : text.rindex("0};")].replace("\n", "").split(",") if v]
    assert bytes(values) == weights.read_bytes()
    scripted = tmp_path / "scripted.c"
    script = package / "cmake" / "weights_to_c.cmake"
    symbol = "-DSYMBOL=digits_embedded_weights"
    run([cmake(), f"-DWEIGHTS={weights}", f"-DUNIT={scripted}", symbol, "-P", script])
    assert scripted.read_bytes() == unit.read_bytes()
