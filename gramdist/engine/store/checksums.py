"""Checksums of what a store holds.

Format 2 (stores made by gramdist 0.3 and later, attribute ``checksum_format: 2``): a 64-bit
BLAKE2b digest of the values' bytes in row-major order, so any changed, moved or swapped value
changes it. A Gram tile is hashed in its canonical orientation (the upper tile as computed);
its mirror is read back transposed and must give the same digest, so a mirror that disagrees
with its tile is damage too. A float32 Gram's values are widened to float64 first (exactly and
one-to-one), so one digest serves both types.

Format 1 (stores of gramdist 0.1 and 0.2): the wrapping sum of the 64-bit words. Exact and
order-free, so it catches a lost or changed chunk but **not** two values swapped within a tile
(or a chunk of feature rows): ``gramdist verify`` says so for such stores, and ``gramdist
upgrade`` re-records their checksums in format 2 after checking them in format 1.
"""

from __future__ import annotations

import hashlib

import numpy as np

#: the format new stores record
CHECKSUM_FORMAT = 2


def _digest(*arrays: np.ndarray | None) -> int:
    h = hashlib.blake2b(digest_size=8)
    for a in arrays:
        if a is None:
            h.update(b"\x00none")
            continue
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.reshape(-1).view(np.uint8))  # the bytes themselves, not a copy (8 MB per NCI1 tile)
    return int.from_bytes(h.digest(), "little")


def tile_checksum(block: np.ndarray, fmt: int = CHECKSUM_FORMAT) -> int:
    """Checksum of a Gram block as stored, in its canonical orientation (see the module docstring)."""
    wide = np.ascontiguousarray(block, dtype=np.float64)
    if fmt == 1:
        return int(np.add.reduce(wide.view(np.uint64), axis=None, dtype=np.uint64))
    return _digest(wide)


def words_checksum(*arrays: np.ndarray | None, fmt: int = CHECKSUM_FORMAT) -> int:
    """Checksum of everything a feature chunk wrote (its rows, values, diagonal, labels, ids)."""
    if fmt != 1:
        return _digest(*arrays)
    total = 0
    for a in arrays:
        if a is None:
            continue
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        pad = (-len(raw)) % 8
        if pad:
            raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
        total += int(np.add.reduce(raw.view(np.uint64), dtype=np.uint64))
    return total % (1 << 64)


def array_digest(values: np.ndarray) -> str:
    """Hex digest of one small array (labels, ids, diagonal): recorded when it is written."""
    return f"{_digest(np.asarray(values)):016x}"
