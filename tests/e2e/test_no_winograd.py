"""`gen --no-winograd`: 3x3 convolutions stay direct (a package built and self-checked)."""

from __future__ import annotations

import re


def test_gen_no_winograd_keeps_3x3_convs_direct_and_weights_smaller(tmp_path):
    """`gen --no-winograd` (for flash-limited targets): no Winograd kernels, and the weights
    shrink by the transformed filters' extra 7/16."""
    import json

    import onnx
    from model_zoo import conv_family
    from packaging_helpers import relay2cmake

    model = tmp_path / "convs.onnx"
    onnx.save(conv_family(), str(model))
    found = {}
    for flags in ([], ["--no-winograd"]):
        out = tmp_path / ("direct" if flags else "winograd")
        printed = relay2cmake("gen", str(model), "-o", str(out), "--target", "c", *flags).stdout
        kernels = json.loads((out / "metadata.json").read_text())["kernels"]
        weights = int(re.search(r"weights (\d+) B", printed).group(1))
        found[bool(flags)] = (sum("winograd" in k for k in kernels), weights)
    (winograd_kernels, winograd_weights), (direct_kernels, direct_weights) = found[False], found[True]
    assert winograd_kernels > 0 and direct_kernels == 0
    assert direct_weights < winograd_weights
