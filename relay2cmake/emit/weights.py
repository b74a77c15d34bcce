"""Weights as C source that compiles fast: string literals, not initializer lists.

GCC parses a string literal as one token: 64 MB of weights compile in about 8 s and 1.3 GB
of memory, against 160 s and 10 GB as a byte array (measured here with gcc 12 -O2).
Constants are grouped into shards of at most SHARD_BYTES so that builds run in parallel.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from relay2cmake.arena import align_up
from relay2cmake.plan import Constant

SHARD_BYTES = 16 << 20
_ESCAPES = np.array([list(f"\\x{b:02x}".encode()) for b in range(256)], dtype=np.uint8)
_LINE_BYTES = 32


@dataclass(frozen=True)
class Placement:
    shard: int
    offset: int


@dataclass(frozen=True)
class Shard:
    index: int
    data: bytes


def layout(constants: tuple[Constant, ...]) -> tuple[list[Shard], list[Placement]]:
    """Shards and, per constant, where it lives; every constant starts on 64 bytes."""
    shards: list[bytearray] = []
    placements = []
    for constant in constants:
        if not shards or (len(shards[-1]) and align_up(len(shards[-1])) + len(constant.data) > SHARD_BYTES):
            shards.append(bytearray())
        current = shards[-1]
        current.extend(b"\0" * (align_up(len(current)) - len(current)))
        placements.append(Placement(len(shards) - 1, len(current)))
        current.extend(constant.data)
    return [Shard(i, bytes(s)) for i, s in enumerate(shards)], placements


@dataclass(frozen=True)
class WeightsFile:
    """Every shard in one file, for builds that load the weights at run time."""

    data: bytes
    shard_starts: tuple[int, ...]  # offsets inside a shard carry over unchanged
    sha256: bytes


def weights_file(shards: list[Shard]) -> WeightsFile:
    data = bytearray()
    starts = []
    for shard in shards:
        data.extend(b"\0" * (align_up(len(data)) - len(data)))  # each shard starts on 64 bytes
        starts.append(len(data))
        data.extend(shard.data)
    return WeightsFile(bytes(data), tuple(starts), hashlib.sha256(data).digest())


_CHUNK_BYTES = 1 << 20  # weights escaped per step: bounds the memory a shard needs


def shard_source(prefix: str, shard: Shard, banner: str) -> Iterator[bytes]:
    """The shard as C, in pieces: 32 bytes per line as ``"\\x12..."``, escaped with NumPy a
    megabyte at a time (a constant can be far larger than a shard, and its C text is 4x)."""
    symbol = f"{prefix}_weights_{shard.index}"
    yield (
        f"{banner}"
        f"/* {len(shard.data)} bytes of weights, 64-byte aligned. One extra byte holds the string's NUL. */\n"
        "#if defined(_MSC_VER)\n"
        "#define WEIGHTS_ALIGNED __declspec(align(64))\n"
        "#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L\n"
        "#define WEIGHTS_ALIGNED _Alignas(64)\n"
        "#else\n"
        "#define WEIGHTS_ALIGNED __attribute__((aligned(64)))\n"
        "#endif\n"
        f"extern const unsigned char {symbol}[{len(shard.data) + 1}];\n"
        f"WEIGHTS_ALIGNED const unsigned char {symbol}[{len(shard.data) + 1}] =\n"
    ).encode("ascii")
    if not shard.data:
        yield b'  "";\n'
        return
    data = np.frombuffer(shard.data, dtype=np.uint8)
    for start in range(0, len(data), _CHUNK_BYTES):
        piece = _lines(data[start : start + _CHUNK_BYTES])
        yield piece if start + _CHUNK_BYTES < len(data) else piece[:-1] + b";\n"


def _lines(data: np.ndarray) -> bytes:
    """``  "\\x..\\x.."\\n`` per 32 bytes (the last line may be shorter)."""
    escaped = _ESCAPES[data].reshape(-1)
    width = _LINE_BYTES * 4
    full = len(escaped) // width
    lines = np.empty((full, width + 5), dtype=np.uint8)  # two spaces, quote, escapes, quote, newline
    lines[:, :3] = np.frombuffer(b'  "', dtype=np.uint8)
    lines[:, 3 : 3 + width] = escaped[: full * width].reshape(full, width)
    lines[:, 3 + width :] = np.frombuffer(b'"\n', dtype=np.uint8)
    rest = escaped[full * width :].tobytes()
    return lines.tobytes() + (b'  "' + rest + b'"\n' if rest else b"")
