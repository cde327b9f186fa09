"""Helpers for testing kernels against the contract without a cluster.

:func:`gram_by_tiles` assembles a Gram from ``pairwise`` calls on ``tile``-sized chunks the way
the engine does (upper triangle, mirrored), so a kernel's tests can check tile-size
invariance and compare against brute-force references without starting Dask.
"""

from __future__ import annotations

import numpy as np

from gramdist.arrayops import normalize_block
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState


def gram_by_tiles(
    kernel: GraphKernel,
    state: KernelState,
    graphs: GraphBatch,
    tile: int,
    normalize: bool = False,
) -> np.ndarray:
    """(N, N) Gram computed tile by tile like the engine: chunks of ``tile`` graphs."""
    chunks = graphs.chunks(tile)
    embs = [kernel.embed(c, state) for c in chunks]
    diag = np.concatenate([kernel.self_similarity(e, state) for e in embs])
    n = len(graphs)
    k = np.zeros((n, n))
    for i, ei in enumerate(embs):
        for j in range(i, len(embs)):
            block = kernel.pairwise(ei, embs[j], state)
            r, c = slice(i * tile, i * tile + len(ei)), slice(j * tile, j * tile + len(embs[j]))
            if normalize:
                block = normalize_block(block, diag[r], diag[c])
            if i == j:  # symmetrise after normalising, as the engine does: exactly symmetric
                block = np.triu(block) + np.triu(block, 1).T
            k[r, c] = block
            k[c, r] = block.T
    return k


def min_eigenvalue_ratio(k: np.ndarray) -> float:
    """Smallest eigenvalue of a symmetric matrix divided by its trace (PSD check)."""
    w = np.linalg.eigvalsh((k + k.T) / 2)
    return float(w[0] / max(np.trace(k), 1e-300))
