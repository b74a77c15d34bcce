"""3x3 stride-1 convolutions as Winograd F(2x2, 3x3): three kernels instead of one.

A 3x3 convolution computes each 2x2 block of outputs from the 4x4 patch of input around it.
Winograd's minimal filtering algorithm (Lavin and Gray, "Fast Algorithms for Convolutional
Neural Networks", 2015) does it with 16 multiplications per input and output channel instead
of 36, in three steps:

1. input transform: every 4x4 patch d becomes V = Bt d Bt^T (additions only);
2. product: for each of the 16 positions (a, b) of V, a matmul over input channels,
   M[a, b] = V[a, b] x U[a, b], where U = G w G^T is the filter, transformed at generation
   time (NumPy, float64) and packed [4, 4, K/16, C, 16] like the other matmul weights;
3. output transform: Y = At M At^T gives the 2x2 outputs (additions only), followed by the
   convolution's fused epilogue (bias, relu, residual add).

The product does 2.25x fewer multiply-adds than the direct convolution and runs as a
scheduled matmul; measured on ResNet-50's 3x3 layers of 14x14 to 56x56 (AVX-512, one
thread) the three kernels take 0.47-0.56x the time of the direct one. F(2x2, 3x3)'s
matrices have entries 0, +-1 and +-1/2, so the rounding error stays at the direct
convolution's level (measured, relative to the largest output: 4e-7 to 8e-7 vs 1e-6 to
2e-6). F(4x4, 3x3) would save more work (0.33-0.39x) but was 7-10x less accurate.

Channels-last layout throughout: V is [4, 4, tiles, C], M is [4, 4, tiles, K], with tiles
= batch x tile rows x tile columns (and up to 3 more, ``padded_tiles``); vectors run along the
channels. A batch chosen at run time
(``--input-shape x=1..8,...``) gets an axis of its own, V [4, 4, batch, tiles, C]: the
product's rows are then one image's tiles, a static extent the matmul schedule tiles without
predicates, inside a loop over the images.

A static batch whose transformed images are too big together goes through in passes of as
many images as fit (``images_per_pass``): each pass's input transform reads its own images,
the product's kernel is shared, and the passes' outputs are concatenated. r3d_18's 3-D
convolutions run as 2-D ones over 8 frames of 56 x 56 with 192 stacked input channels (77 MB
transformed at once, 9.6 MB a frame): a frame at a time, 0.65x the direct convolution's time
at 56 x 56 and 0.51x at 28 x 28 (AMD EPYC, AVX2, one thread, kernels alone).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, SupportsInt

import numpy as np

from relay2cmake.lower.rewrites.packed_matmul import PACK  # output channels per contiguous block of U

if TYPE_CHECKING:
    from tvm import relax, te, tirx

OUTPUT_TILE = 2  # m: outputs per tile side
PATCH = OUTPUT_TILE + 2  # alpha: input patch (and transformed tile) side
B_T = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)
A_T = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
MIN_INPUT_CHANNELS = 8  # below this the product's matmuls are too thin to gain
# The input transform's vectors run along the input channels: a count that 4 does not divide
# leaves it scalar. Res2Net's 14 channels at 56 x 56: the three kernels took 0.113 ms against
# the direct convolution's 0.077, the input transform alone 0.061 (AVX-512, one thread).
INPUT_CHANNEL_MULTIPLE = 4
# Each transformed filter value is used once per tile: with fewer tiles than this the
# product streams 16/9 of the weights for little gain (ResNet-50's 7x7 layers, 16 tiles:
# 1.34x faster, against 2.0-2.15x at 14x14 and larger; AVX-512, one thread).
MIN_TILES = 32
# The transformed input V and the products M are 4x the conv's input and output: a 224x224
# image with 64 channels would add 2 x 51 MB to the arena. Bigger ones stay direct.
MAX_TRANSFORMED_BYTES = 16 << 20
# A transformed input that outgrows the last-level cache is read by the product from memory,
# which pays only when enough output channels share each read. Measured on DenseNet's
# 128 -> 32 layers (AMD EPYC, AVX2, one thread, kernels alone): at 56 x 56 (6.4 MB) Winograd
# took 1.33x the direct conv's time, at 40 x 40 (3.3 MB) 0.78x, at 28 x 28 0.62x; 128 -> 64
# at 56 x 56 still 0.81x. The product's speed drops between 3.3 and 4.2 MB on this machine.
CACHED_TRANSFORMED_BYTES = 4 << 20
MIN_OUTPUT_CHANNELS_UNCACHED = 64

# Block names the schedules dispatch on.
INPUT_BLOCK = "r2c_winograd_input"
PRODUCT_BLOCK = "r2c_winograd_product"
OUTPUT_BLOCK = "r2c_winograd_output"
# Relax fusion patterns (TVM's OpPatternKind): the input transform fuses with nothing; the
# output transform takes the convolution's elementwise epilogue, like a convolution does.
OPAQUE, OUT_ELEMWISE_FUSABLE = 8, 4


def qualifies(
    kernel: list[int],
    strides: Sequence[SupportsInt],
    dilation: Sequence[SupportsInt],
    out_shape: list[int],
    fewest_images: int | None = None,
) -> bool:
    """For a regular (groups 1) channels-last conv with a constant weight of HWIO shape
    ``kernel`` and an NHWC output of ``out_shape``: 3x3, stride 1, no dilation, enough input
    channels and tiles, and some number of images per pass (``images_per_pass``). A batch
    chosen at run time is given as its largest value in ``out_shape`` and its smallest as
    ``fewest_images``."""
    batch, height, width, _ = out_shape
    fewest_tiles = (batch if fewest_images is None else fewest_images) * _tiles(height) * _tiles(width)
    return (
        list(kernel[:2]) == [3, 3]
        and [int(s) for s in strides] == [1, 1]
        and [int(d) for d in dilation] == [1, 1]
        and kernel[2] >= MIN_INPUT_CHANNELS
        and kernel[2] % INPUT_CHANNEL_MULTIPLE == 0
        and fewest_tiles >= MIN_TILES
        and images_per_pass(kernel, out_shape, run_time_batch=fewest_images is not None) > 0
    )


def images_per_pass(kernel: list[int], out_shape: list[int], run_time_batch: bool = False) -> int:
    """How many images of the batch one pass of the three kernels takes, 0 for none: the
    most that divide the batch and whose transformed images are not too big, nor, when they
    outgrow the cache, shared by too few output channels. A batch of several frames (a 3-D
    convolution's, ``conv3d_as_2d``) then goes through in passes, each with its own
    input transform and output transform. A batch chosen at run time goes in one pass."""
    batch, height, width, _ = out_shape

    def fits(images: int) -> bool:
        tiles = images * _tiles(height) * _tiles(width)
        transformed_input = PATCH * PATCH * tiles * kernel[2] * 4
        return PATCH * PATCH * tiles * max(kernel[2], kernel[3]) * 4 <= MAX_TRANSFORMED_BYTES and (
            transformed_input <= CACHED_TRANSFORMED_BYTES or kernel[3] >= MIN_OUTPUT_CHANNELS_UNCACHED
        )

    if run_time_batch:
        return batch if fits(batch) else 0
    return max((images for images in range(1, batch + 1) if batch % images == 0 and fits(images)), default=0)


def transformed_filter(hwio: np.ndarray) -> np.ndarray:
    """U = G w G^T for every (input, output) channel pair, packed [4, 4, K/16, C, 16] (the
    last block zero-padded when 16 does not divide K)."""
    u = np.einsum("ar,rsck,bs->abck", G, hwio.astype(np.float64), G).astype(np.float32)
    channels = hwio.shape[3]
    u = np.pad(u, [(0, 0)] * 3 + [(0, -channels % PACK)])
    blocks = u.reshape(PATCH, PATCH, hwio.shape[2], -1, PACK).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(blocks)


def _tiles(size: int) -> int:
    return -(-size // OUTPUT_TILE)


def padded_tiles(tiles: int, channels: int) -> int:
    """The rows of V and M for ``tiles`` tiles of ``channels`` channels: a few more when the
    16 planes (a, b) would start on the same few cache sets. The input transform writes, and
    the output transform reads, one row of each plane per tile: 16 streams. Planes a multiple
    of 4 KiB apart all map to one set of a 64-set L1 (12 ways on AMD Zen 5, 48 KiB): U-Net's
    64 x 64 x 64 transform wrote 52 GB/s, 116 GB/s with one row more (a C loop of the same
    stores, one core). Rows are added (at most 3, copies of the last tile) until the planes
    fall on at least 4 sets, where 16 x 64-byte lines fit."""
    if channels % 16:
        return tiles  # planes not line-aligned: their starts already spread over the sets
    for rows in range(tiles, tiles + 4):
        if math.gcd(rows * channels // 16, 64) <= 16:  # planes' line offsets mod 64 sets
            return rows
    return tiles


def _combination(matrix: np.ndarray, index, values) -> object:
    """sum_r matrix[index, r] * values(r) for a symbolic ``index``: one expression per row,
    chosen by Select, so that once the row loop is unrolled only the nonzero terms remain
    (a multiplication by the constant 0 would stay: float x * 0 is not 0 for NaN)."""
    from tvm import tirx

    chosen = None
    for row in reversed(range(matrix.shape[0])):
        terms = [
            values(r) if c == 1 else -values(r) if c == -1 else values(r) * tirx.const(float(c), "float32")
            for r, c in enumerate(matrix[row])
            if c != 0
        ]
        expr = terms[0]
        for term in terms[1:]:
            expr = expr + term
        chosen = expr if chosen is None else tirx.Select(index == row, expr, chosen)
    return chosen


def input_transform(
    data: te.Tensor, padding: Sequence[int], first_image: int = 0, images: int = 0
) -> te.Tensor:
    """V[a, b, t, c] = (Bt d Bt^T)[a, b] for the 4x4 patch d of tile t (channels last), over
    ``images`` images from ``first_image`` (a static batch's pass), or all of them."""
    from tvm import te, topi

    batch = data.shape[0]
    height, width = (int(d) for d in data.shape[1:3])
    top, left, bottom, right = (int(p) for p in padding)
    rows, cols = _tiles(height + top + bottom - 2), _tiles(width + left + right - 2)
    # Zero rows and columns beyond the image complete the last tiles.
    padded = topi.nn.pad(
        data,
        [0, top, left, 0],
        [0, rows * OUTPUT_TILE + 2 - height - top, cols * OUTPUT_TILE + 2 - width - left, 0],
        name="pad_temp",
    )

    channels = int(data.shape[3])
    static = hasattr(batch, "value")
    images = images or (int(batch) if static else 0)
    tiles = images * rows * cols if static else rows * cols
    if static:
        shape: tuple = (PATCH, PATCH, padded_tiles(tiles, channels), channels)
    else:  # the images' axis apart (see the module's note)
        shape = (PATCH, PATCH, batch, tiles, channels)
    repeated_last = static and shape[2] > tiles

    def element(a, b, *tile_and_channel):
        *image, t, c = tile_and_channel
        if repeated_last:  # the padding rows (``padded_tiles``) repeat the last tile
            t = te.min(t, tiles - 1)
        n = image[0] if image else first_image + t // (rows * cols)
        y, x = (t // cols) % rows * OUTPUT_TILE, t % cols * OUTPUT_TILE
        return _combination(B_T, a, lambda r1: _combination(B_T, b, lambda r2: padded[n, y + r1, x + r2, c]))

    return te.compute(shape, element, name=INPUT_BLOCK)


def product(transformed: te.Tensor, packed_filter: te.Tensor) -> te.Tensor:
    """M[a, b, t, k] = sum_c V[a, b, t, c] U[a, b, c, k]: 16 matmuls, over every output channel
    U holds (the output channels rounded up to PACK, the padding's filter zero): the matmul's
    vectors then span whole registers. With Res2Net's 28 channels they were 4 lanes wide and
    the product ran at 27 GFLOPS, 4x the time it took with 32 channels."""
    from tvm import te

    *tiles, depth = transformed.shape[2:]
    rc = te.reduce_axis((0, int(depth)), name="rc")

    def element(a, b, *index):
        *tile, k = index
        return te.sum(transformed[(a, b, *tile, rc)] * packed_filter[a, b, k // PACK, rc, k % PACK], axis=rc)

    packed_channels = int(packed_filter.shape[2]) * PACK
    return te.compute((PATCH, PATCH, *tiles, packed_channels), element, name=PRODUCT_BLOCK)


def output_transform(
    products: te.Tensor, batch: int | tirx.PrimExpr, height: int, width: int, channels: int
) -> te.Tensor:
    """Y[n, y, x, k] = (At M At^T)[y % 2, x % 2] of the tile holding (y, x), for the first
    ``channels`` of M's."""
    from tvm import te

    rows, cols = _tiles(height), _tiles(width)
    images_apart = len(products.shape) == 5

    def element(n, y, x, k):
        t = (y // OUTPUT_TILE) * cols + x // OUTPUT_TILE
        tile = (n, t) if images_apart else (n * rows * cols + t,)
        return _combination(
            A_T,
            y % OUTPUT_TILE,
            lambda a: _combination(A_T, x % OUTPUT_TILE, lambda b: products[(a, b, *tile, k)]),
        )

    return te.compute((batch, height, width, channels), element, name=OUTPUT_BLOCK)


def convolution(
    builder: relax.BlockBuilder,
    data: relax.Expr,
    hwio: np.ndarray,
    padding: Sequence[SupportsInt],
    out_shape: Sequence,
) -> relax.Expr:
    """Emits the three kernels of ``conv2d(data, hwio)`` (NHWC/HWIO, 3x3, stride 1) with
    ``builder``, once per pass over the batch (``images_per_pass``), and returns the output
    transform's call, or the concatenation of the passes' outputs."""
    from tvm import relax

    batch = out_shape[0]  # a number, or the batch chosen at run time
    height, width, channels = (int(d) for d in out_shape[1:])
    static = isinstance(batch, int)
    images = images_per_pass(list(hwio.shape), list(out_shape)) if static else batch
    filter_constant = relax.const(transformed_filter(hwio))  # one for every pass
    outputs = []
    for first_image in range(0, batch, images) if static else [0]:
        transformed = builder.emit(
            builder.call_te(
                input_transform,
                data,
                padding=[int(p) for p in padding],
                first_image=first_image,
                images=images if static else 0,
                primfunc_name_hint="winograd_input",
                primfunc_attrs={"op_pattern": OPAQUE},
            )
        )
        products = builder.emit(
            builder.call_te(
                product,
                transformed,
                filter_constant,
                primfunc_name_hint="winograd_product",
            )
        )
        outputs.append(
            builder.call_te(
                output_transform,
                products,
                batch=images,
                height=height,
                width=width,
                channels=channels,
                primfunc_name_hint="winograd_output",
                primfunc_attrs={"op_pattern": OUT_ELEMWISE_FUSABLE},
            )
        )
    if len(outputs) == 1:
        return outputs[0]
    # A kernel of its own: fused with what follows, each of the concatenation's reads would
    # carry the choice among the passes (r3d_18's next stacking reads each value three times:
    # too big to inline, its kernel went unscheduled, 7 ms against 1).
    return builder.call_te(
        _concatenated,
        [builder.emit(output) for output in outputs],
        primfunc_name_hint="winograd_passes",
        primfunc_attrs={"op_pattern": OPAQUE},
    )


def _concatenated(outputs: list[te.Tensor]) -> te.Tensor:
    from tvm import topi

    return topi.concatenate(outputs, axis=0)
