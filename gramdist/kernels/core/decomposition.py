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

from gramdist.arrayops import ranges
from gramdist.graphs import GraphBatch, symmetric_csr


def simple_adjacency(graphs: GraphBatch) -> sp.csr_matrix:
    """(N, N) symmetric 0/1 CSR adjacency of the batch without self-loops, sorted columns."""
    e = graphs.global_edges
    return symmetric_csr(e[e[:, 0] != e[:, 1]], graphs.n_nodes)


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
    """The ``level``-cores of the graphs ``members`` (in that order) as a new batch.

    Induced subgraphs on the nodes with core number ≥ level: node order, node labels and
    attributes, edges (canonical u ≤ v, in their stored order), edge labels and attributes
    are those of the original graph; ``y`` and ``graph_ids`` follow the graphs.
    """
    members = np.asarray(members, dtype=np.int64)
    sub = graphs.take(members) if not (len(members) == len(graphs) and np.array_equal(members, np.arange(len(graphs)))) \
        else graphs
    if sub is not graphs:
        sel = ranges(graphs.node_offsets[members] - graphs.node_offsets[0], graphs.nodes_per_graph[members])
        core = core[sel]
    keep = core >= level
    node_graph = sub.node_graph
    counts = np.bincount(node_graph[keep], minlength=len(sub))
    # new local index of each kept node: its rank among the kept nodes of its graph
    csum = np.cumsum(keep) - keep  # kept nodes before this one in the batch
    first = np.zeros(len(sub) + 1, dtype=np.int64)
    np.cumsum(counts, out=first[1:])
    new_local = csum - first[:-1][node_graph]
    ge = sub.global_edges
    ekeep = keep[ge[:, 0]] & keep[ge[:, 1]] if len(ge) else np.zeros(0, dtype=bool)
    edges = np.stack([new_local[ge[ekeep, 0]], new_local[ge[ekeep, 1]]], axis=1) if len(ge) else np.zeros((0, 2))
    ecounts = np.bincount(sub.edge_graph[ekeep], minlength=len(sub)) if len(ge) else np.zeros(len(sub), np.int64)
    return GraphBatch(
        node_offsets=np.concatenate([[0], np.cumsum(counts)]),
        edge_offsets=np.concatenate([[0], np.cumsum(ecounts)]),
        edges=edges,
        node_labels=None if sub.node_labels is None else sub.node_labels[keep],
        node_attrs=None if sub.node_attrs is None else sub.node_attrs[keep],
        edge_labels=None if sub.edge_labels is None else sub.edge_labels[ekeep],
        edge_attrs=None if sub.edge_attrs is None else sub.edge_attrs[ekeep],
        y=sub.y,
        graph_ids=sub.graph_ids,
        name=sub.name,
    )


__all__ = ["core_batch", "core_numbers", "degeneracies", "simple_adjacency"]
