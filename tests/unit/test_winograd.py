"""Winograd F(2x2, 3x3) convolutions (winograd.py): the transform matrices, and the three
scheduled kernels against NumPy's direct convolution, including ragged last tiles, uneven
padding, a batch of two and channel counts 16 does not divide. Whole packages with them are
compared with ONNX Runtime in test_scheduled_kernels.py."""

from __future__ import annotations

import numpy as np
import pytest
from packaging_helpers import call_kernel

from relay2cmake.lower import schedules
from relay2cmake.lower.rewrites import winograd
from relay2cmake.lower.schedules import ScheduleOptions, schedule_function


def _correlate(image: np.ndarray, hwio: np.ndarray) -> np.ndarray:
    """Direct 3x3 correlation of an already padded NHWC image, float64."""
    height, width = image.shape[1] - 2, image.shape[2] - 2
    return sum(
        image[:, ry : ry + height, rx : rx + width, :].astype(np.float64) @ hwio[ry, rx].astype(np.float64)
        for ry in range(3)
        for rx in range(3)
    )


def test_matrices_give_a_2x2_block_of_a_3x3_correlation():
    rng = np.random.default_rng(0)
    patch, kernel = rng.standard_normal((4, 4)), rng.standard_normal((3, 3))
    transformed = (winograd.G @ kernel @ winograd.G.T) * (winograd.B_T @ patch @ winograd.B_T.T)
    got = winograd.A_T @ transformed @ winograd.A_T.T
    want = [[np.sum(patch[y : y + 3, x : x + 3] * kernel) for x in range(2)] for y in range(2)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("vectorize", [True, False], ids=["vectors", "scalar (C target)"])
@pytest.mark.parametrize(
    ("batch", "height", "width", "channels", "outputs", "padding"),
    [
        (1, 8, 8, 16, 32, [1, 1, 1, 1]),
        (2, 7, 5, 8, 20, [1, 1, 1, 1]),  # odd sizes: the last tiles are cropped
        (1, 6, 9, 12, 16, [0, 1, 2, 0]),  # uneven padding, none on two sides
        (2, 16, 15, 32, 16, [1, 1, 1, 1]),  # 128 tiles of 32 channels: V and M get a row more
        (1, 10, 10, 28, 28, [1, 1, 1, 1]),  # Res2Net's width: M has 32 channels, Y 28
        (1, 14, 14, 256, 256, [1, 1, 1, 1]),  # ResNet-50's: 4 MB of U, prefetched a position ahead
    ],
)
def test_kernels_match_a_direct_convolution(batch, height, width, channels, outputs, padding, vectorize):
    from tvm import te

    rng = np.random.default_rng(height * width)
    image = rng.standard_normal((batch, height, width, channels)).astype(np.float32)
    hwio = (rng.standard_normal((3, 3, channels, outputs)) / np.sqrt(9 * channels)).astype(np.float32)
    top, left, bottom, right = padding
    want = _correlate(np.pad(image, [(0, 0), (top, bottom), (left, right), (0, 0)]), hwio)
    options = ScheduleOptions(vector_lanes=8, vectorize=vectorize, parallel=True)

    data = te.placeholder(image.shape, name="data")
    transformed = winograd.input_transform(data, padding)
    first = schedule_function(te.create_prim_func([data, transformed]), options)
    packed = winograd.transformed_filter(hwio)
    v = te.placeholder(transformed.shape, name="v")
    u = te.placeholder(packed.shape, name="u")
    products = winograd.product(v, u)
    second = schedule_function(te.create_prim_func([v, u, products]), options)
    assert int(products.shape[-1]) == -(-outputs // 16) * 16  # whole vectors: the filter's padding
    m = te.placeholder(products.shape, name="m")
    out = winograd.output_transform(m, batch, *want.shape[1:3], channels=outputs)
    third = schedule_function(te.create_prim_func([m, out]), options)
    assert None not in (first, second, third), "a Winograd kernel kept the unscheduled lowering"
    prefetched = vectorize and packed.nbytes >= schedules.PREFETCH_WEIGHT_BYTES
    assert ("llvm.prefetch" in second.script()) == prefetched

    tiles = batch * -(-(height + top + bottom - 2) // 2) * -(-(width + left + right - 2) // 2)
    assert int(transformed.shape[2]) == winograd.padded_tiles(tiles, channels)
    v_value = call_kernel(first, [image, np.zeros([int(d) for d in transformed.shape], np.float32)])
    m_value = call_kernel(second, [v_value, packed, np.zeros([int(d) for d in products.shape], np.float32)])
    got = call_kernel(third, [m_value, np.zeros(want.shape, np.float32)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_planes_that_would_share_cache_sets_get_rows_more():
    """The 16 planes of V and M (one write or read stream each per tile) start on at least 4 of
    a 64-set L1's sets: U-Net's 64 x 64 x 64 image (1024 tiles of 64 channels, planes 256 KiB
    apart, all on one set) gets one row more; ResNet's 56 x 56 x 64 (784 tiles) too."""
    assert winograd.padded_tiles(1024, 64) == 1025
    assert winograd.padded_tiles(784, 64) == 785
    assert winograd.padded_tiles(128, 32) == 129
    assert winograd.padded_tiles(49, 256) == 49  # 784 lines apart: 4 sets already
    assert winograd.padded_tiles(50, 64) == 50  # 200 lines: 8 sets
    assert winograd.padded_tiles(64, 12) == 64  # planes not line-aligned
    assert winograd.padded_tiles(64, 1024) == 64  # 4096 lines: no few rows more help


@pytest.mark.parametrize("batch", [1, 3])
def test_a_batch_chosen_at_run_time_has_its_own_axis_and_the_same_result(batch):
    """One set of kernels for batch 1..4 (the tiles of each image a static extent), called at
    two batches, against the direct convolution."""
    from tvm import te

    from relay2cmake.lower.schedules import DIM_BOUNDS

    rng = np.random.default_rng(batch)
    image = rng.standard_normal((batch, 9, 10, 8)).astype(np.float32)
    hwio = (rng.standard_normal((3, 3, 8, 24)) / np.sqrt(72)).astype(np.float32)
    want = _correlate(np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)]), hwio)
    options = ScheduleOptions(vector_lanes=8, vectorize=True, parallel=True)
    n = te.var("n")

    def scheduled(*tensors):
        func = te.create_prim_func(list(tensors)).with_attr(DIM_BOUNDS, {"n": 4})
        result = schedule_function(func, options)
        assert result is not None, "a Winograd kernel kept the unscheduled lowering"
        return result

    data = te.placeholder((n, 9, 10, 8), name="data")
    transformed = winograd.input_transform(data, [1, 1, 1, 1])
    assert len(transformed.shape) == 5  # [4, 4, images, tiles of one image, channels]
    packed = winograd.transformed_filter(hwio)
    v = te.placeholder(transformed.shape, name="v")
    u = te.placeholder(packed.shape, name="u")
    products = winograd.product(v, u)
    m = te.placeholder(products.shape, name="m")
    out = winograd.output_transform(m, n, 9, 10, channels=24)
    kernels = scheduled(data, transformed), scheduled(v, u, products), scheduled(m, out)

    def zeros(tensor):
        return np.zeros([batch if not hasattr(d, "value") else int(d) for d in tensor.shape], np.float32)

    v_value = call_kernel(kernels[0], [image, zeros(transformed)])
    m_value = call_kernel(kernels[1], [v_value, packed, zeros(products)])
    got = call_kernel(kernels[2], [m_value, np.zeros(want.shape, np.float32)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_run_time_batch_qualifies_by_its_fewest_images():
    # 7 x 7 outputs are 16 tiles per image: 2 images are enough, 1 is not
    assert winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [4, 7, 7, 64], fewest_images=2)
    assert not winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [4, 7, 7, 64], fewest_images=1)


def test_only_3x3_stride_1_convs_with_enough_input_channels_and_tiles_qualify():
    image = [1, 14, 14, 64]
    assert winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], image)
    assert not winograd.qualifies([3, 3, 64, 64], [2, 2], [1, 1], image)  # strided
    assert not winograd.qualifies([3, 3, 64, 64], [1, 1], [2, 2], image)  # dilated
    assert not winograd.qualifies([1, 1, 64, 64], [1, 1], [1, 1], image)
    assert not winograd.qualifies([3, 3, 3, 64], [1, 1], [1, 1], image)  # an RGB input layer
    assert not winograd.qualifies([3, 3, 14, 14], [1, 1], [1, 1], [1, 56, 56, 14])  # scalar input transform
    assert winograd.qualifies([3, 3, 28, 28], [1, 1], [1, 1], [1, 28, 28, 28])
    assert not winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [1, 7, 7, 64])  # 16 tiles
    assert winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [2, 7, 7, 64])  # 32
    # ResNet-50's biggest (3.2 MB transformed) qualifies; a VGG layer (51 MB) does not.
    assert winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [1, 56, 56, 64])
    assert not winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [1, 224, 224, 64])
    # DenseNet's 128 -> 32 layers: direct at 56 x 56 (6.4 MB transformed), Winograd at 28 x 28.
    assert not winograd.qualifies([3, 3, 128, 32], [1, 1], [1, 1], [1, 56, 56, 32])
    assert winograd.qualifies([3, 3, 128, 32], [1, 1], [1, 1], [1, 28, 28, 32])
    assert winograd.qualifies([3, 3, 128, 64], [1, 1], [1, 1], [1, 56, 56, 64])


def test_a_static_batch_too_big_at_once_goes_through_in_passes():
    """r3d_18's 3-D convolutions as 2-D ones: 8 frames of 56 x 56 with 192 stacked channels
    are 77 MB transformed at once (direct until now: 1.5x slower), 9.6 MB a frame; its 28 x 28
    layer fits 2 of its 4 frames a pass. Passes divide the batch; a batch chosen at run time
    goes in one pass or not at all."""
    assert winograd.images_per_pass([3, 3, 192, 64], [8, 56, 56, 64]) == 1
    assert winograd.qualifies([3, 3, 192, 64], [1, 1], [1, 1], [8, 56, 56, 64])
    assert winograd.images_per_pass([3, 3, 384, 128], [4, 28, 28, 128]) == 2
    assert winograd.images_per_pass([3, 3, 384, 128], [3, 28, 28, 128]) == 3  # 14.5 MB
    assert winograd.images_per_pass([3, 3, 384, 128], [5, 28, 28, 128]) == 1  # 2 and 3 do not divide 5
    assert winograd.images_per_pass([3, 3, 64, 64], [4, 56, 56, 64]) == 4  # 12.8 MB: one pass
    assert winograd.images_per_pass([3, 3, 64, 64], [1, 224, 224, 64]) == 0  # one image is too big
    assert winograd.images_per_pass([3, 3, 64, 64], [8, 56, 56, 64], run_time_batch=True) == 0
    assert not winograd.qualifies([3, 3, 64, 64], [1, 1], [1, 1], [8, 56, 56, 64], fewest_images=1)


def test_passes_over_a_batch_compute_the_direct_convolution(monkeypatch):
    """Three images, one a pass (the size limit lowered for a small image): three input and
    output transforms, one product kernel, their outputs concatenated in a kernel of its own,
    each scheduled, equal to the direct convolution."""
    import tvm
    from tvm import relax

    rng = np.random.default_rng(7)
    image = rng.standard_normal((3, 9, 10, 8)).astype(np.float32)
    hwio = (rng.standard_normal((3, 3, 8, 24)) / np.sqrt(72)).astype(np.float32)
    want = _correlate(np.pad(image, [(0, 0), (1, 1), (1, 1), (0, 0)]), hwio)
    one_image = winograd.PATCH**2 * 5 * 5 * 24 * 4  # 25 tiles of 24 channels
    monkeypatch.setattr(winograd, "MAX_TRANSFORMED_BYTES", one_image)
    monkeypatch.setattr(winograd, "CACHED_TRANSFORMED_BYTES", one_image)
    assert winograd.images_per_pass(list(hwio.shape), [3, 9, 10, 24]) == 1

    builder = relax.BlockBuilder()
    data = relax.Var("x", relax.TensorType(image.shape, "float32"))
    with builder.function("main", [data]):
        with builder.dataflow():
            conv = winograd.convolution(builder, data, hwio, [1, 1, 1, 1], [3, 9, 10, 24])
            out = builder.emit_output(builder.emit(conv))
        builder.emit_func_output(out)
    module = builder.get()
    names = sorted(str(g.name_hint) for g in module.functions)
    assert sum(n.startswith("winograd_input") for n in names) == 3, names
    assert sum(n.startswith("winograd_product") for n in names) == 1, names
    options = ScheduleOptions(vector_lanes=8, vectorize=True, parallel=True)
    for gv, func in list(module.functions.items()):
        if isinstance(func, tvm.tirx.PrimFunc):  # each kernel as the package schedules it
            module[gv] = schedule_function(func, options)
            assert module[gv] is not None, f"{gv.name_hint} kept the unscheduled lowering"
    executable = tvm.compile(module, target="llvm")
    got = relax.VirtualMachine(executable, tvm.cpu())["main"](tvm.runtime.tensor(image)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
