"""Node embeddings from the adjacency spectrum (Nikolentzos et al. 2017, Section "Vertex embeddings").

Each node ``v`` of a graph with n nodes is embedded as ``(|u_1(v)|, ..., |u_d(v)|)`` where
``u_1..u_d`` are unit-norm eigenvectors of the adjacency matrix A for the d eigenvalues of
largest magnitude. Taking absolute values makes the signs of the eigenvectors irrelevant
and puts every point in the unit hypercube [0, 1]^d (a unit vector's components lie in
[-1, 1]); no other normalisation is applied.

Choices (the paper leaves them open):

* Selection: the d largest |λ|; magnitudes equal to 1e-9 (relative) count as ties and the
  positive eigenvalue goes first. The selected eigenvectors are ordered by decreasing λ
  (algebraic), as GraKeL orders them; the order matters because dimension q of one graph
  is matched with dimension q of the other.
* A graph with n < d nodes has only n dimensions: its points have no coordinate in the
  others and match nothing there (GraKeL does the same: its histogram rows for missing
  dimensions stay empty). GraKeL's small-graph branch (n ≤ d+1) keeps the d largest
  eigenvalues algebraically instead of in magnitude; we keep the rule above at every size.
* Eigenvalue ties make the eigenvectors of a multiple eigenvalue a basis of its eigenspace
  chosen by the solver: the embedding (and so the kernel) then depends on the solver and
  on the node order. That is in the definition; we document it rather than hide it. A ±λ
  pair of a bipartite graph is harmless (the two eigenvectors differ by signs only).
* Components are rounded to the nearest multiple of 2^-32 before binning, so that values
  which are exactly on a bin boundary in exact arithmetic (1/2, 1/4, ... — common in
  symmetric graphs) land on the same side whatever the last-bit rounding of the solver.
* Self-loops count in A (1 on the diagonal); multiple edges count once.

Computation: graphs are grouped by size and each group's adjacency matrices go through one
batched dense ``numpy.linalg.eigh`` (per matrix the same LAPACK call as alone, so a graph's
embedding does not depend on its chunk); graphs above ``dense_max`` nodes use ARPACK
(``scipy.sparse.linalg.eigsh``, ``which="LM"``, a fixed start vector, so the result is
deterministic), with memory O(n d + edges) instead of O(n^2). Both run with one BLAS thread:
the matrices are small, so threads gain nothing, and ARPACK's Ritz vectors (``dseupd``'s BLAS
calls) cost 2-3 times the CPU with OpenBLAS's own threads (D&D's 438 graphs above 300 nodes:
7.5 or 5.5 s against 2.6 s of CPU, the same bits, 2026-11-30); a graph's eigenvectors must
not depend on the thread count of the process computing them either.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from gramdist.graphs import GraphBatch
from gramdist.kernels.eigen import eigsh

#: embeddings are rounded to multiples of this before binning
SNAP = 2.0**-32
#: graphs up to this many nodes use dense eigh
DENSE_MAX = 300
#: matrix entries per batched eigh call (8 M float64: 64 MiB)
_BATCH_ELEMENTS = 1 << 23


def _select(vals: np.ndarray, d: int) -> np.ndarray:
    """Indices of the d eigenvalues of largest magnitude (ties: positive first), by decreasing λ."""
    scale = max(float(np.max(np.abs(vals))), 1.0) if len(vals) else 1.0
    mag = np.round(np.abs(vals) / scale * 1e9)
    order = np.lexsort((-vals, -mag))[:d]
    return order[np.argsort(-vals[order], kind="stable")]


def spectral_embedding(graphs: GraphBatch, d: int, dense_max: int = DENSE_MAX) -> np.ndarray:
    """(N, d) float64 node embeddings in [0, 1]; NaN in the dimensions a graph lacks (n < d)."""
    with threadpool_limits(1):  # see the module docstring
        return _spectral_embedding(graphs, d, dense_max)


def _spectral_embedding(graphs: GraphBatch, d: int, dense_max: int) -> np.ndarray:
    n_nodes = graphs.nodes_per_graph
    out = np.full((graphs.n_nodes, d), np.nan)
    starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
    e = graphs.edges
    e_start = graphs.edge_offsets[:-1] - graphs.edge_offsets[0]
    for size in np.unique(n_nodes):
        size = int(size)
        if size == 0:
            continue
        members = np.flatnonzero(n_nodes == size)
        k = min(d, size)
        if size <= dense_max:
            per_batch = max(1, _BATCH_ELEMENTS // (size * size))
            for b0 in range(0, len(members), per_batch):
                batch = members[b0:b0 + per_batch]
                mats = np.zeros((len(batch), size, size))
                for slot, g in enumerate(batch):
                    ge = e[e_start[g]:e_start[g] + graphs.edges_per_graph[g]]
                    mats[slot, ge[:, 0], ge[:, 1]] = 1.0
                    mats[slot, ge[:, 1], ge[:, 0]] = 1.0
                vals, vecs = np.linalg.eigh(mats)
                for slot, g in enumerate(batch):
                    sel = _select(vals[slot], k)
                    out[starts[g]:starts[g] + size, :k] = np.abs(vecs[slot][:, sel])
        else:
            for g in members:
                ge = e[e_start[g]:e_start[g] + graphs.edges_per_graph[g]].astype(np.int64)
                a = sp.coo_matrix((np.ones(2 * len(ge)), (np.concatenate([ge[:, 0], ge[:, 1]]),
                                                          np.concatenate([ge[:, 1], ge[:, 0]]))),
                                  shape=(size, size)).tocsr()
                a.data[:] = 1.0
                # a few spare eigenpairs so that magnitude ties at the cut are resolved by _select
                m = min(size - 1, k + 4)
                v0 = np.linspace(1.0, 2.0, size)
                vals, vecs = eigsh(a, k=m, which="LM", v0=v0, tol=0.0, maxiter=100 * size)
                sel = _select(vals, k)
                out[starts[g]:starts[g] + size, :k] = np.abs(vecs[:, sel])
    np.clip(out, 0.0, 1.0, out=out)
    return np.round(out / SNAP) * SNAP


__all__ = ["DENSE_MAX", "SNAP", "spectral_embedding"]
