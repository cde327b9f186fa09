"""k-core decomposition of a whole batch of graphs, vectorised.

The k-core of G is its largest induced subgraph whose nodes all have degree ≥ k in it; the
core number c(v) is the largest k whose k-core contains v, and the degeneracy δ*(G) is the
largest core number (Seidman 1983; Batagelj & Zaversnik 2003). The 0-core is G itself.
Self-loops do not count towards degrees (networkx refuses them; GraKeL counts a self-loop
as a neighbour) and repeated edges count once.

:func:`core_numbers` peels the whole batch at once: for k = 0, 1, ..., every alive node of
degree ≤ k gets core number k and is removed, its neighbours' degrees drop, and the newly
qualifying neighbours are removed in the next round; each round touches only the removed
nodes and their arcs, so the cost is O(N·(δ+1) + E) over the batch.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import group_offsets, ranges
from gramdist.graphs import GraphBatch


def simple_adjacency(graphs: GraphBatch) -> sp.csr_matrix:
    """(N, N) symmetric 0/1 CSR adjacency of the batch without self-loops, sorted columns.

    The batch's cached :meth:`GraphBatch.adjacency` less its diagonal (that matrix itself when
    no graph has a self-loop: read it, do not modify it).
    """
    a = graphs.adjacency()
    rows = np.repeat(np.arange(a.shape[0], dtype=np.int64), np.diff(a.indptr))
    off_diagonal = a.indices != rows
    if off_diagonal.all():
        return a
    return sp.csr_matrix((a.data[off_diagonal], a.indices[off_diagonal],
                          group_offsets(rows[off_diagonal], a.shape[0])), shape=a.shape)


def core_numbers(graphs: GraphBatch) -> np.ndarray:
    """(N,) int64 core number of every node of the batch."""
    a = simple_adjacency(graphs)
    n = graphs.n_nodes
    indptr, nbrs = a.indptr, a.indices
    deg = np.diff(indptr).astype(np.int64)
    core = np.full(n, -1, dtype=np.int64)
    alive = np.ones(n, dtype=bool)
    remaining = n
    k = 0
    while remaining:
        rem = np.flatnonzero(alive & (deg <= k))
        while len(rem):
            core[rem] = k
            alive[rem] = False
            remaining -= len(rem)
            arcs = ranges(indptr[rem], indptr[rem + 1] - indptr[rem])
            touched = nbrs[arcs]
            touched = touched[alive[touched]]
            if len(touched) == 0:
                break
            np.subtract.at(deg, touched, 1)
            cand = np.unique(touched)
            rem = cand[deg[cand] <= k]
        k += 1
    return core


def degeneracies(graphs: GraphBatch, core: np.ndarray) -> np.ndarray:
    """(G,) int64 degeneracy of each graph (-1 for a graph without nodes)."""
    out = np.full(len(graphs), -1, dtype=np.int64)
    if graphs.n_nodes:
        np.maximum.at(out, graphs.node_graph, core)
    return out


def core_batch(graphs: GraphBatch, core: np.ndarray, level: int, members: np.ndarray) -> GraphBatch:
    """The ``level``-cores of the graphs ``members`` (increasing indices) as a new batch.

    Induced subgraphs on the nodes with core number ≥ level: node order, node labels and
    attributes, edges (canonical u ≤ v, in their stored order), edge labels and attributes
    are those of the original graph; ``y`` and ``graph_ids`` follow the graphs. The batch's
    arcs are filtered from ``graphs``' (:meth:`GraphBatch.induced`), not sorted again.
    """
    members = np.asarray(members, dtype=np.int64)
    in_members = np.zeros(len(graphs), dtype=bool)
    in_members[members] = True
    return graphs.induced((core >= level) & in_members[graphs.node_graph], members)


__all__ = ["core_batch", "core_numbers", "degeneracies", "simple_adjacency"]
