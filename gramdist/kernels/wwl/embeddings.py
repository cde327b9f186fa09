"""Node embeddings of the WWL paper and the variable-size embedding of a chunk of graphs.

Categorical labels (paper, Definition 1)
    Node ``v`` is embedded by its sequence of WL labels ``(l_0(v), ..., l_h(v))`` over the
    iterations 0..h of WL relabelling. Labels are the stable 64-bit hashes of
    :func:`gramdist.kernels.relabel.wl_labels` (the same labels as the ``wl`` kernel), so
    two nodes of any two graphs, fitted or not, share a label exactly when their WL
    signatures are equal (up to a 2^-64 collision probability per pair of labels).
    Graphs without node labels get label 0 on every node; a self-loop makes a node its own
    neighbour once (the ``wl`` kernel's convention).

Continuous attributes (paper, Definition 2)
    ``a^{(0)}(v)`` is the node's attribute vector, standardised with the mean and standard
    deviation of the fit sample's nodes (as the authors' package does with
    ``sklearn.preprocessing.scale`` over the whole dataset; a constant column is left
    unscaled); then ``a^{(t+1)}(v) = 1/2 (a^{(t)}(v) + 1/deg(v) Σ_{u ∈ N(v)} a^{(t)}(u))`` with
    unit edge weights. An isolated node gets ``a^{(t+1)}(v) = a^{(t)}(v) / 2`` (the empty
    neighbour sum), as in the paper's formula and the authors' package. Self-loops are not
    neighbours here (the package's igraph adjacency counts them; no TU dataset of the project
    has any). The embedding of ``v`` is the concatenation ``[a^{(0)}(v), ..., a^{(h)}(v)]``.

:class:`NodeSets` keeps, per graph, its *distinct* embedding rows in lexicographic order with
their multiplicities. Nodes with identical embeddings are interchangeable in optimal
transport (a node's mass can be split among equal copies at no cost), so the Wasserstein
distance between the collapsed weighted sets equals the one between the uniform node sets;
the sorted order makes the transport problem of a graph independent of its node order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import group_offsets
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import DerivedCache
from gramdist.kernels.relabel import wl_labels
from gramdist.kernels.sparse import SparseFeatures


@dataclass(eq=False)
class NodeSets(DerivedCache):
    """Each graph's node embeddings as distinct rows with multiplicities (one entry per graph).

    ``n_nodes`` (G,) int64 nodes per graph; ``indptr`` (G+1,) int64: graph g's distinct rows are
    ``rows[indptr[g]:indptr[g+1]]`` (sorted lexicographically) with multiplicities
    ``counts[...]`` (summing to ``n_nodes[g]``); ``rows`` (R, D) uint64 (WL label sequences) or
    float64 (continuous embeddings). For categorical embeddings :attr:`hist` gives each graph's
    WL label counts (the ``wl`` kernel's features), which the closed-form distance uses; it is
    derived from the rows, so an embedding is plain arrays (a store can keep it for appends).
    """

    n_nodes: np.ndarray
    indptr: np.ndarray
    rows: np.ndarray
    counts: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.n_nodes = np.ascontiguousarray(self.n_nodes, dtype=np.int64)
        self.indptr = np.ascontiguousarray(self.indptr, dtype=np.int64)
        self.counts = np.ascontiguousarray(self.counts, dtype=np.int64)
        if self.indptr[0] != 0:
            self.indptr = self.indptr - self.indptr[0]
        if len(self.indptr) != len(self.n_nodes) + 1 or len(self.rows) != len(self.counts):
            raise ValueError("NodeSets: n_nodes, indptr, rows and counts disagree in length")

    def __len__(self) -> int:
        return len(self.n_nodes)

    @property
    def categorical(self) -> bool:
        return self.rows.dtype == np.uint64

    @property
    def hist(self) -> SparseFeatures | None:
        """Categorical: (G, ·) counts of every WL label of every iteration (None if continuous)."""
        if not self.categorical:
            return None
        if "hist" not in self._cache:
            graph_of_row = np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.indptr))
            width = self.rows.shape[1]
            self._cache["hist"] = SparseFeatures.from_pairs(
                np.tile(graph_of_row, width), self.rows.T.ravel(), np.tile(self.counts, width).astype(np.float64),
                len(self))
        return self._cache["hist"]

    def __getitem__(self, key: slice | int) -> NodeSets:
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            key = slice(i, i + 1)
        if not isinstance(key, slice):
            raise TypeError("NodeSets supports integer and slice indexing")
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise ValueError("NodeSets slices must be contiguous")
        stop = max(stop, start)
        a, b = self.indptr[start], self.indptr[stop]
        return NodeSets(self.n_nodes[start:stop].copy(), self.indptr[start:stop + 1] - a,
                        self.rows[a:b].copy(), self.counts[a:b].copy())

    def graph(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(distinct rows, multiplicities) of graph ``i`` (views)."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.rows[a:b], self.counts[a:b]

    def __repr__(self) -> str:
        kind = "categorical" if self.categorical else "continuous"
        return f"NodeSets({len(self)} graphs, {int(self.n_nodes.sum())} nodes, {len(self.rows)} distinct rows, {kind})"


def distinct_rows(node_graph: np.ndarray, x: np.ndarray, n_graphs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per graph, the distinct rows of ``x`` (sorted lexicographically) and their multiplicities.

    Returns ``(indptr (G+1,), rows (R, D), counts (R,))``.
    """
    n = len(x)
    if n == 0:
        return np.zeros(n_graphs + 1, np.int64), x[:0].copy(), np.zeros(0, np.int64)
    keys = [x[:, c] for c in range(x.shape[1] - 1, -1, -1)] + [node_graph]
    order = np.lexsort(keys)
    xs, gs = x[order], node_graph[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (gs[1:] != gs[:-1]) | np.any(xs[1:] != xs[:-1], axis=1)
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, n))
    rows = xs[starts]
    indptr = group_offsets(gs[starts], n_graphs)
    return indptr, rows, counts


def categorical_embedding(graphs: GraphBatch, h: int) -> NodeSets:
    """WL label sequences of every node (iterations 0..h), collapsed per graph."""
    seq = np.stack(wl_labels(graphs, h), axis=1)
    indptr, rows, counts = distinct_rows(graphs.node_graph, seq, len(graphs))
    return NodeSets(graphs.nodes_per_graph, indptr, rows, counts)


def propagate_attributes(graphs: GraphBatch, x0: np.ndarray, h: int) -> np.ndarray:
    """(N, d(h+1)) continuous WL embeddings ``[a^(0), ..., a^(h)]`` (module docstring).

    The neighbour sum of a node is a CSR mat-vec over its neighbours in column order, so a
    node's embedding does not depend on which other graphs share the batch.
    """
    n = graphs.n_nodes
    e = graphs.global_edges
    keep = e[:, 0] != e[:, 1]
    e = e[keep]
    adj = sp.csr_matrix((np.ones(2 * len(e)), (np.concatenate([e[:, 0], e[:, 1]]),
                                                np.concatenate([e[:, 1], e[:, 0]]))), shape=(n, n))
    adj.sum_duplicates()
    adj.data[:] = 1.0  # a duplicated edge is one neighbour
    deg = np.diff(adj.indptr).astype(np.float64)
    deg[deg == 0] = 1.0  # isolated: the neighbour sum is 0
    parts = [np.ascontiguousarray(x0, dtype=np.float64)]
    x = parts[0]
    for _ in range(h):
        x = 0.5 * (x + (adj @ x) / deg[:, None])
        parts.append(x)
    return np.concatenate(parts, axis=1)


def continuous_embedding(graphs: GraphBatch, h: int, mean: np.ndarray, scale: np.ndarray) -> NodeSets:
    """Continuous WL embeddings of standardised attributes, collapsed per graph."""
    x0 = (graphs.node_attrs - mean) / scale
    emb = propagate_attributes(graphs, x0, h)
    indptr, rows, counts = distinct_rows(graphs.node_graph, emb, len(graphs))
    return NodeSets(graphs.nodes_per_graph, indptr, rows, counts)


__all__ = ["NodeSets", "categorical_embedding", "continuous_embedding", "distinct_rows", "propagate_attributes"]
