"""Helpers for testing kernels against the contract without a cluster.

:func:`gram_by_tiles` assembles a Gram from ``pairwise`` calls on ``tile``-sized chunks the way
the engine does (upper triangle, mirrored), so a kernel's tests can check tile-size
invariance and compare against brute-force references without starting Dask;
:func:`random_labelled_graphs` and :func:`adjacency_lists` are the small random sets and the
neighbour lists the brute-force references of several kernels' tests walk.
"""

from __future__ import annotations

from typing import Any

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


def random_labelled_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3) -> GraphBatch:
    """``n`` random graphs of 1..``max_nodes`` nodes with labels in 0..``n_labels``-1 and up to
    2k − 1 random edges on k nodes (self-loops, repeated edges and isolated nodes included):
    the same draws for the same seed."""
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def adjacency_lists(graph: Any) -> list[list[int]]:
    """Neighbour lists of one graph (a ``GraphBatch`` item): each edge listed from both ends, a
    self-loop once, repeated edges repeated — the multiset a brute-force WL-style update reads."""
    adj: list[list[int]] = [[] for _ in range(graph.n_nodes)]
    for u, v in graph.edges.tolist():
        adj[u].append(v)
        if u != v:
            adj[v].append(u)
    return adj
