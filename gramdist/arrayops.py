"""Small array primitives shared by the kernels.

``np.unique`` on large integer arrays is an order of magnitude slower than a plain sort in
NumPy 2.4 (2.8 s vs 0.16 s for 2 M uint64 keys, measured here): use :func:`unique_sorted`.
"""

from __future__ import annotations

import numpy as np


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a 1-D array (``np.unique`` without its slow paths)."""
    x = np.sort(np.asarray(x).ravel())
    if len(x) == 0:
        return x
    keep = np.empty(len(x), dtype=bool)
    keep[0] = True
    np.not_equal(x[1:], x[:-1], out=keep[1:])
    return x[keep]


def normalize_block(block: np.ndarray, diag_rows: np.ndarray, diag_cols: np.ndarray) -> np.ndarray:
    """Cosine normalisation K_ij / sqrt(K_ii K_jj); rows/cols with a zero diagonal give 0."""
    dr = np.sqrt(np.asarray(diag_rows, dtype=np.float64))
    dc = np.sqrt(np.asarray(diag_cols, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        # one product of the two norms: K_ij and K_ji get bit-identical results
        out = block / (dr[:, None] * dc[None, :])
    out[~np.isfinite(out)] = 0.0
    return out


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` for each (s, c), vectorised."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    offsets = np.repeat(np.asarray(starts, dtype=np.int64) - (ends - counts), counts)
    return np.arange(total, dtype=np.int64) + offsets
