"""The CI slice of the real-architecture zoo (tools/real_zoo.py --slice ci): real models
from torchvision and transformers, exported as users do, must generate, build, pass ctest and
match their reference (ONNX Runtime, or PyTorch for .pt2) within rtol 1e-3 / atol 1e-4.
One test case per model; no timing is asserted (the benchmark is left out)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))

from real_zoo_models import ENTRIES  # noqa: E402

# The test extras install them; a bare install of the project has no model libraries.
MISSING = [m for m in ("torchvision", "transformers") if importlib.util.find_spec(m) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {', '.join(MISSING)}")

CI_SLICE = [e for e in ENTRIES if e.ci]


def test_slice_is_representative():
    """A classic opset-9 CNN, a transformer and an LM head (GPT-2's tied 50257-word head) as
    a .pt2 (the rest, the detectors and the zoo's recurrent models among them:
    tools/real_zoo.py; recurrent .pt2 layers against PyTorch: test_frontends.py)."""
    names = {e.name for e in CI_SLICE}
    assert any(e.exporter == "onnx9" and e.edit for e in CI_SLICE), names
    assert any(e.exporter == "pt2" for e in CI_SLICE), names
    assert {"bert", "gpt2"} <= {e.model for e in CI_SLICE}, names


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory) -> Path:
    """Results and packages in a temporary folder, so the test never overwrites the full
    run's results in build/real_zoo/results; exports stay cached in build/real_zoo/models."""
    return tmp_path_factory.mktemp("real_zoo")


@pytest.mark.parametrize("entry", CI_SLICE, ids=lambda e: e.name)
def test_real_model(entry, out_dir):
    import real_zoo

    result = real_zoo.run_entry(entry, skip_bench=True, out=out_dir)
    if result["status"] != "pass":
        pytest.fail(f"{entry.name} failed at {result.get('stage')}: {result.get('error')}", pytrace=False)
    # What "pass" means, spelled out: gen ok, ctest ok, every output within tolerance.
    assert result["gen"]["exit_code"] == 0
    assert result["ctest"] == "pass"
    assert result["compare"]["ok"]
    # The weights once: the package (sources, objects, the weights file) and the library each
    # hold them once, plus a few MB.
    weights = result["weights_file_bytes"]
    assert result["package_bytes"] <= 1.05 * weights + 5 * 2**20, result["package_bytes"]
    assert result["library_bytes"] <= 1.05 * weights + 5 * 2**20, result["library_bytes"]
