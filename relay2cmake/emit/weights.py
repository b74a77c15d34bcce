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
    pieces: list[bytes] = []
    offsets = []
    size = 0
    for constant in constants:
        padding = align_up(size) - size
        pieces.append(b"\0" * padding)
        offsets.append(size + padding)
        pieces.append(constant.data)
        size += padding + len(constant.data)
    data = b"".join(pieces)  # one copy of the weights, not a growing buffer and then another
    return WeightsFile(data, tuple(offsets), hashlib.sha256(data).digest())
