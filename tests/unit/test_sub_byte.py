"""The packed layout of the sub-byte types is ONNX's: relay2cmake.dtypes packs and unpacks as
onnx.numpy_helper does, for every value and for odd element counts (a half-used last byte)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import numpy_helper

from relay2cmake import dtypes


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2", "float4_e2m1fn"])
@pytest.mark.parametrize("count", [1, 5, 8, 13])
def test_packing_matches_onnx(name, count):
    kind = getattr(ml_dtypes, name)
    bits = dtypes.lookup(name).bits
    codes = np.arange(count, dtype=np.uint8) % (1 << bits)  # every code, as often as fits
    values = codes.view(kind)
    onnx_pack = numpy_helper._pack_4bitx2 if bits == 4 else numpy_helper._pack_2bitx4
    packed = dtypes.pack(values, name)
    assert packed.tobytes() == onnx_pack(values).tobytes()
    assert packed.size == dtypes.storage_bytes(name, (count,)) == -(-count * bits // 8)
    unpacked = dtypes.unpack(packed, name, (count,))
    np.testing.assert_array_equal(unpacked.view(np.uint8), codes)
    assert dtypes.carrier(name, (count,)) == ("uint8", (packed.size,))
