"""Weights between NumPy and TVM without copies: a model's weights are its largest data, and
each copy gen holds of them costs their size in memory (a 1 GiB model is common enough)."""

from __future__ import annotations

from typing import Any

import numpy as np

ALIGNMENT = 64  # TVM adopts (DLPack) only memory aligned to this


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """An uninitialised C-order array on 64 bytes, which TVM can adopt."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start : start + nbytes].view(dtype).reshape(shape)


def adopted_tensor(array: np.ndarray) -> Any:
    """A ``tvm.runtime.Tensor`` holding ``array``'s own memory when it is aligned and
    contiguous, else a copy."""
    import tvm

    if array.flags.c_contiguous and array.ctypes.data % ALIGNMENT == 0 and array.size:
        try:
            return tvm.runtime.from_dlpack(array)
        except (RuntimeError, TypeError, ValueError, BufferError):
            pass
    # Not np.ascontiguousarray: it makes a 0-d array 1-d (a scalar constant would change shape).
    return tvm.runtime.tensor(array if array.flags.c_contiguous else np.array(array, order="C"))


def tensor_values(tensor: Any) -> np.ndarray:
    """A read-only NumPy view of a ``tvm.runtime.Tensor``, or a copy for dtypes NumPy cannot
    view (bfloat16, float8)."""
    try:
        array = np.from_dlpack(tensor)
    except (TypeError, BufferError, RuntimeError, ValueError):
        return tensor.numpy()
    array.flags.writeable = False
    return array
