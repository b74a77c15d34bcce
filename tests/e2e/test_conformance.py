"""Slices of the ONNX conformance runner: the default run takes the cases only our converters
make pass plus a few common ones; the CI slice (``-m slow``: dozens of cases across operator
families) runs each through TVM's VM and through the full package path. Parity: no case the VM passes may
fail as a standalone package. (The full run: tools/conformance.py, see docs/conformance.md.)"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from packaging_helpers import REPO

# Cases TVM's VM fails and only our converters/rewrites make pass.
OURS = {
    "test_lstm_defaults", "test_gru_with_initial_bias", "test_lpnormalization_default",
    "test_attention_3d_gqa", "test_nllloss_NCd1d2_with_weight_reduction_mean",
    "test_sce_mean_weight_ii_log_prob", "test_scan9_sum", "test_scan_sum", "test_loop11",
    "test_cast_BFLOAT16_to_FLOAT", "test_if", "test_pow_types_int32_float32",
    "test_pow_types_int64_int64", "test_cumprod_2d_negative_axis", "test_cumsum_1d_reverse_exclusive",
    # 8-bit floats (narrow_floats.py): FNUZ, saturation, E8M0's rounding mode, decoding
    "test_cast_FLOAT_to_FLOAT8E4M3FNUZ", "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
    "test_cast_e8m0_FLOAT_to_FLOAT8E8M0", "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16",
    # ONNX's semantics where TVM's differ: shifts out of range, fmod edge cases, IsInf's
    # directions, SpaceToDepth's CRD, a zero vector's norm, float16 Celu, EyeLike's dtype,
    # RMSNormalization over axis 0, a body Constant's default attribute (SwiGLU), BatchNorm's
    # running statistics in training mode, BitCast of bools, blocked and float8 quantization
    "test_bitshift_left_int32_shift_ge_width", "test_bitshift_right_int8_negative_shift",
    "test_mod_float_edge_cases_fmod_0_float32", "test_isinf_negative", "test_spacetodepth_crd_mode_example",
    "test_l2normalization_axis_0", "test_celu_float16", "test_eyelike_with_dtype",
    "test_rms_normalization_2d_axis0", "test_swiglu", "test_batchnorm_example_training_mode",
    "test_bitcast_bool_to_uint8", "test_quantizelinear_blocked_asymmetric", "test_dequantizelinear_e4m3fn",
    # operators TVM has no converter for: DFT as products with constant matrices, ReverseSequence
    # and TensorScatter as checked gathers and scatters
    "test_dft_rfft_opset19", "test_dft_irfft_opset19", "test_reversesequence_batch",
    "test_tensorscatter_circular", "test_onehot_with_negative_axis", "test_reduce_max_empty_set_bool",
    "test_split_zero_size_splits_opset18", "test_roialign_mode_max", "test_melweightmatrix",
    "test_ai_onnx_ml_tree_ensemble_set_membership", "test_convtranspose_output_shape",
    "test_convtranspose_kernel_shape", "test_training_dropout_mask",
    "test_range_int32_type_negative_delta_expanded", "test_operator_index",
    # bfloat16 bounded outputs, confirmed by the builtins' NumPy versions in TVM's VM
    "test_compress_bfloat16", "test_unique_bfloat16_sorted_without_axis",
}  # fmt: skip
# Parameters given at run time (onnx_settled, onnx_given_parameters), which must pass strictly
# (without --constant-input): axes, shapes, repeats, sizes and scales settled by the declared
# output shapes (two reductions with the same shape: both computed; an empty axes list; a
# reduction reaching the output through Log), and pads, bounds, a diagonal read as values.
STRICT = {
    "test_reduce_sum_do_not_keepdims_example", "test_reduce_sum_default_axes_keepdims_example",
    "test_reduce_log_sum_asc_axes_expanded", "test_reshape_negative_dim", "test_unsqueeze_unsorted_axes",
    "test_squeeze_negative_axes", "test_expand_dim_changed", "test_tile",
    "test_split_variable_parts_2d_opset18",
    "test_onehot_without_axis", "test_resize_upsample_scales_linear", "test_resize_upsample_sizes_nearest",
    "test_dft_axis", "test_center_crop_pad_crop_and_pad", "test_reflect_pad", "test_wrap_pad",
    "test_constant_pad", "test_range_int32_type_negative_delta", "test_tril_zero",
    "test_slice_neg_steps", "test_affine_grid_3d", "test_resize_downsample_scales_linear_antialias",
    "test_resize_downsample_scales_cubic_align_corners", "test_col2im", "test_col2im_strides",
    "test_loop11", "test_hannwindow_symmetric", "test_resize_downsample_sizes_nearest_not_smaller",
    "test_maxunpool_export_with_output_shape", "test_reshape_allowzero_reordered",
    "test_hannwindow_expanded", "test_center_crop_pad_crop_axes_hwc_expanded", "test_stft",
}  # fmt: skip
# Package builtins that replace TVM kernels needing the TVM runtime (sorting) or bounded outputs.
BUILTINS = {
    "test_top_k", "test_top_k_smallest", "test_top_k_same_values", "test_top_k_same_values_largest",
    "test_top_k_uint64",  # confirmed by NumPy's sort in TVM's VM (its own refuses uint64)
    "test_nonmaxsuppression_suppress_by_IOU_and_scores",
    "test_nonmaxsuppression_center_point_box_format", "test_nonmaxsuppression_flipped_coordinates",
    "test_nonmaxsuppression_two_batches",
}  # fmt: skip
# Operators replaced by their ONNX function bodies (onnx_functions.py): a fixed body, one our
# converter declines (a sliding window), one with an omitted
# optional input (and a Scan inside), one TVM's converter gets wrong (LayerNormalization's
# mean), a preview-domain operator.
FUNCTION_BODIES = {
    "test_celu", "test_attention_local_window",
    "test_linear_attention_delta", "test_layer_normalization_4d_axis1", "test_flexattention",
}  # fmt: skip
# Sub-byte types: packed at the API, carried one per element inside (onnx_sub_byte).
SUB_BYTE = {
    "test_cast_INT4_to_FLOAT", "test_cast_FLOAT_to_FLOAT4E2M1", "test_castlike_FLOAT_to_INT2",
    "test_quantizelinear_uint4", "test_dequantizelinear_int4",
}  # fmt: skip
# The preview training domain's optimizers (onnx_training).
TRAINING = {"test_adam_multiple", "test_nesterov_momentum"}
# Converters of ours for what TVM lacks: MaxPool's Indices output, DeformConv.
MISSING_IN_TVM = {"test_maxpool_with_argmax_2d_precomputed_strides", "test_deform_conv_with_mask_bias"}
# QOperator integer operators (onnx_quantized): exact int32 accumulation, requantized.
QUANTIZED = {"test_qlinearconv", "test_qlinearmatmul_3D_int8_float16", "test_convinteger_with_padding"}
# The default run: those, and a few cases of common operator families.
QUICK = sorted(
    OURS
    | STRICT
    | BUILTINS
    | FUNCTION_BODIES
    | SUB_BYTE
    | TRAINING
    | MISSING_IN_TVM
    | QUANTIZED
    | {"test_gather_0", "test_slice", "test_concat_2d_axis_0", "test_conv_with_strides_padding"}
)


def _run(tmp_path, *selection: str) -> list[dict]:
    result = subprocess.run(
        [sys.executable, REPO / "tools" / "conformance.py", *selection, "--json", tmp_path / "r.json",
         "--work", tmp_path / "work"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads((tmp_path / "r.json").read_text())


def test_quick_slice_passes_as_packages(tmp_path):
    # Only the packages: nothing here reads TVM's VM or ONNX Runtime (the slow slice does).
    # Built without optimisation: -O3 of each package's runtime was 150 of the build's 160
    # CPU seconds (the slow slice builds Release).
    selection = ("--filter", "^(" + "|".join(QUICK) + ")$", "--no-references", "--build-type", "")
    results = _run(tmp_path, *selection)
    assert {r["name"] for r in results} == set(QUICK), "a case was renamed upstream"
    failing = [f"{r['name']}: {r['gen']}" for r in results if r["tensor_case"] and r["gen"] != "pass"]
    assert not failing, "\n".join(failing)
    frozen = [f"{r['name']}: {r['frozen']}" for r in results if r["name"] in STRICT and r["frozen"]]
    assert not frozen, "needed --constant-input:\n" + "\n".join(frozen)


@pytest.mark.slow
def test_conformance_slice_keeps_parity_with_tvm_vm(tmp_path):
    results = _run(tmp_path, "--slice", "ci")
    assert len(results) >= 70, "the slice lost cases (renamed upstream?)"
    tensor = [r for r in results if r["tensor_case"]]
    lost = [f"{r['name']}: {r['gen']}" for r in tensor if r["vm"] == "pass" and r["gen"] != "pass"]
    assert not lost, "\n".join(lost)
    failing = [f"{r['name']}: {r['gen']}" for r in tensor if r["name"] in OURS and r["gen"] != "pass"]
    assert not failing, "\n".join(failing)
    strict = sum(r["gen"] == "pass" and not r["frozen"] for r in tensor)
    assert strict >= 60, f"only {strict} of {len(tensor)} slice cases pass without --constant-input"
