"""ONNX initializers as arrays. External data stays in its file until TVM's importer asks for
a tensor, and is then read straight into memory TVM adopts: protobuf never holds those
weights, and gen holds one copy of them, TVM's."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from relay2cmake.errors import ModelError
from relay2cmake.tensor_memory import aligned_empty

# Element types read straight from an external file: one NumPy item per element, little-endian.
DIRECT_TYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BOOL}
    | {TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64}
    | {TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64}
)


@dataclass(frozen=True)
class ExternalData:
    file: Path
    offset: int
    length: int


def initializer_bytes(tensor: onnx.TensorProto) -> int:
    """A tensor's size from its shape and type (reading ``raw_data`` would copy it); 0 for
    strings and unknown types."""
    try:
        itemsize = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError):
        return 0
    return int(np.prod(tensor.dims, dtype=np.float64)) * itemsize


def is_external(tensor: onnx.TensorProto) -> bool:
    return tensor.data_location == TensorProto.EXTERNAL


def external_data(tensor: onnx.TensorProto, folder: Path) -> ExternalData:
    """Where a tensor's external data is, checked: a regular file inside ``folder`` (the
    model's), a byte range within it."""
    info = {entry.key: entry.value for entry in tensor.external_data}
    location = info.get("location", "")
    name = repr(tensor.name)
    if not location or Path(location).is_absolute() or ".." in Path(location).parts:
        raise ModelError(
            f"Initializer {name} keeps its data at {location!r}, which is not a file name inside the "
            "model's folder; ONNX external data must be."
        )
    file = folder / location
    try:
        inside = file.resolve().is_relative_to(folder.resolve())
        size = file.stat().st_size if file.is_file() else None
        offset = int(info.get("offset", 0))
        length = int(info["length"]) if "length" in info else (size or 0) - offset
    except ValueError:
        raise ModelError(
            f"Initializer {name} has external data whose offset or length is not a number "
            f"({info.get('offset')!r}, {info.get('length')!r}): the model file is damaged."
        ) from None
    except OSError as exc:
        raise ModelError(
            f"Initializer {name}: its external data {location!r} cannot be read ({exc})."
        ) from None
    if not inside or size is None:
        raise ModelError(
            f"Initializer {name} keeps weights in external data that cannot be read ({location!r} is not a "
            "file in the model's folder). Keep the data files next to the model, as ONNX expects."
        )
    if offset < 0 or length < 0 or offset + length > size:
        raise ModelError(
            f"Initializer {name}: its external data lies outside {location!r} (bytes {offset} to "
            f"{offset + length} of {size}): the data file is incomplete or damaged."
        )
    return ExternalData(file, offset, length)


def check_external_data(model: onnx.ModelProto, folder: Path) -> None:
    for tensor in model.graph.initializer:
        if is_external(tensor):
            reference = external_data(tensor, folder)
            if tensor.data_type in DIRECT_TYPES and reference.length != initializer_bytes(tensor):
                raise ModelError(
                    f"Initializer {tensor.name!r} has shape {list(tensor.dims)} ({initializer_bytes(tensor)} "
                    f"bytes), but its external data holds {reference.length} bytes: the file is damaged."
                )


def initializer_values(tensor: onnx.TensorProto, folder: Path | None) -> np.ndarray:
    """The tensor's values; external data of the common types read into a 64-byte-aligned
    array (TVM adopts it), everything else through onnx."""
    if not is_external(tensor):
        return numpy_helper.to_array(tensor)
    if folder is None:
        raise ModelError(f"Initializer {tensor.name!r} keeps its data in a file; no model folder is known.")
    reference = external_data(tensor, folder)
    if tensor.data_type not in DIRECT_TYPES:
        return numpy_helper.to_array(tensor, base_dir=str(folder))
    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
    array = aligned_empty(tuple(tensor.dims), dtype)
    target = array.reshape(-1).view(np.uint8).data
    with reference.file.open("rb") as stream:
        stream.seek(reference.offset)
        read = stream.readinto(target) if array.nbytes else 0
    if read != array.nbytes:
        raise ModelError(
            f"Initializer {tensor.name!r}: its external data ends after {read} of {array.nbytes} bytes."
        )
    if sys.byteorder == "big":  # ONNX stores little-endian
        array.byteswap(inplace=True)
    return array


def mapped_values(tensor: onnx.TensorProto, folder: Path) -> np.ndarray:
    """A read-only view of a tensor's external data, mapped from its file (the system pages
    it in from the file; no copy is made), or its values read by ``initializer_values``."""
    if not is_external(tensor) or tensor.data_type not in DIRECT_TYPES:
        return initializer_values(tensor, folder)
    reference = external_data(tensor, folder)
    dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type).newbyteorder("<")
    shape = tuple(tensor.dims)
    if reference.length == 0:
        return np.zeros(shape, dtype)
    elements = int(np.prod(shape, dtype=np.int64))
    if reference.length != elements * dtype.itemsize:
        raise ModelError(
            f"Initializer {tensor.name!r}: its external data does not match its shape {list(shape)}."
        )
    return np.memmap(
        reference.file, dtype=dtype, mode="r", offset=reference.offset, shape=(elements,)
    ).reshape(shape)
