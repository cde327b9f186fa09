"""Checksums of what a store holds: exact integer sums of 64-bit words (see each function)."""

from __future__ import annotations

import numpy as np


def tile_checksum(block: np.ndarray) -> int:
    """Checksum of a block as stored: the sum of the 64-bit patterns of its values, widened
    to float64, modulo 2**64.

    Integer arithmetic, so the value is exact and independent of the summation order, the
    machine and the block's orientation (a mirrored tile has its source's checksum). A float32
    Gram's values widen to float64 exactly and one-to-one, so the same sum serves both types: a
    changed float32 word changes its widened word and so the sum. A chunk that is missing (read
    as zeros) or has a changed word no longer matches.
    """
    words = np.ascontiguousarray(block, dtype=np.float64).view(np.uint64)
    return int(np.add.reduce(words, axis=None, dtype=np.uint64))


def words_checksum(*arrays: np.ndarray | None) -> int:
    """Sum modulo 2⁶⁴ of the 64-bit words of the arrays' bytes (each zero-padded to whole words)."""
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
