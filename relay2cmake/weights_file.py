"""The weights file: every constant once, each on 64 bytes, in the plan's order.

The package carries the weights only as ``weights/<prefix>_weights.bin``. CMake compiles
that file into the library (``cmake/weights.cmake``: the assembler's ``.incbin`` with GCC
and Clang, a generated C array elsewhere) or, with ``<P>_EXTERNAL_WEIGHTS``, the library
reads it at run time; either way a constant is the file's bytes at its offset.

The plan appends each constant as it meets it, straight to disk: the only copy of the weights
gen holds in memory is TVM's (a 1 GiB model would otherwise need several).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from relay2cmake.arena import align_up


@dataclass(frozen=True)
class WeightsFile:
    """The file's bytes, in an anonymous temporary file (gone when it is closed or gen exits)."""

    file: BinaryIO
    size: int
    sha256: bytes

    def read(self) -> bytes:
        self.file.seek(0)
        return self.file.read()

    def copy_to(self, path: Path) -> None:
        self.file.seek(0)
        with path.open("wb") as out:
            shutil.copyfileobj(self.file, out, COPY_CHUNK)


COPY_CHUNK = 16 << 20


class WeightsWriter:
    """Appends constants to the weights file on disk: gen then holds no copy of the weights
    besides TVM's (in ``folder``: the output's, not a /tmp that may be memory)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.file = tempfile.TemporaryFile(dir=folder)
        self.size = 0
        self.digest = hashlib.sha256()

    def append(self, data: memoryview) -> int:
        """Where ``data`` starts: its bytes are placed on 64 bytes."""
        self._write(b"\0" * (align_up(self.size) - self.size))
        offset = self.size
        self._write(data)
        return offset

    def _write(self, data: bytes | memoryview) -> None:
        self.file.write(data)
        self.digest.update(data)
        self.size += memoryview(data).nbytes

    def finish(self) -> WeightsFile:
        self.file.flush()
        return WeightsFile(self.file, self.size, self.digest.digest())


def constant_bytes(array: np.ndarray) -> memoryview:
    """``array``'s little-endian, C-order bytes, without copying them when they already are."""
    little = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False)
    return little.reshape(-1).view(np.uint8).data
