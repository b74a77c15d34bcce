"""The CI slice of the ONNX conformance runner: dozens of cases across operator families,
each through TVM's VM and through the full package path. Parity: no case the VM passes may
fail as a standalone package. (The full run: tools/conformance.py, see docs/conformance.md.)"""

from __future__ import annotations

import json
import subprocess
import sys

from packaging_helpers import REPO


def test_conformance_slice_keeps_parity_with_tvm_vm(tmp_path):
    result = subprocess.run(
        [sys.executable, REPO / "tools" / "conformance.py", "--slice", "ci", "--json", tmp_path / "r.json",
         "--work", tmp_path / "work"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    results = json.loads((tmp_path / "r.json").read_text())
    assert len(results) >= 70, "the slice lost cases (renamed upstream?)"
    tensor = [r for r in results if r["tensor_case"]]
    lost = [f"{r['name']}: {r['gen']}" for r in tensor if r["vm"] == "pass" and r["gen"] != "pass"]
    assert not lost, "\n".join(lost)
    # Cases TVM's VM fails and only our converters/rewrites make pass.
    ours = {
        "test_lstm_defaults", "test_gru_with_initial_bias", "test_lpnormalization_default",
        "test_attention_3d_gqa", "test_nllloss_NCd1d2_with_weight_reduction_mean",
        "test_sce_mean_weight_ii_log_prob", "test_scan9_sum", "test_loop11",
        "test_cast_BFLOAT16_to_FLOAT", "test_if",
    }  # fmt: skip
    failing = [f"{r['name']}: {r['gen']}" for r in tensor if r["name"] in ours and r["gen"] != "pass"]
    assert not failing, "\n".join(failing)
    strict = sum(r["gen"] == "pass" and not r["frozen"] for r in tensor)
    assert strict >= 60, f"only {strict} of {len(tensor)} slice cases pass without --constant-input"
