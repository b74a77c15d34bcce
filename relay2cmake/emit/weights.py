"""The weights file: every constant once, each on 64 bytes, in the plan's order.

The package carries the weights only as ``weights/<prefix>_weights.bin``. CMake compiles
that file into the library (``cmake/weights.cmake``: the assembler's ``.incbin`` with GCC
and Clang, a generated C array elsewhere) or, with ``<P>_EXTERNAL_WEIGHTS``, the library
reads it at run time; either way a constant is the file's bytes at its offset.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from relay2cmake.arena import align_up
from relay2cmake.plan import Constant


@dataclass(frozen=True)
class WeightsFile:
    data: bytes
    offsets: tuple[int, ...]  # constant i starts at offsets[i], a multiple of 64
    sha256: bytes


def weights_file(constants: tuple[Constant, ...]) -> WeightsFile:
    data = bytearray()
    offsets = []
    for constant in constants:
        data.extend(b"\0" * (align_up(len(data)) - len(data)))
        offsets.append(len(data))
        data.extend(constant.data)
    return WeightsFile(bytes(data), tuple(offsets), hashlib.sha256(data).digest())
