"""Canonical forms of small labelled subgraphs (node labels, optionally edge labels).

A node set with its adjacency pattern (see :mod:`~gramdist.kernels.graphlets.patterns`) has
one unlabelled class; the node orders that map it onto the class's canonical pattern are
``sigma[tau]`` for the automorphisms ``tau`` of that pattern. Among these orders the
**canonical order** is the one whose sequence

    (label of node 0, ..., label of node s-1, label of edge e_1, ..., label of edge e_m)

(edges ``e_i`` of the canonical pattern in bit order; edge labels only when used) is
lexicographically smallest. Two labelled subgraphs are isomorphic (labels preserved) iff
they have the same class and the same smallest sequence, and the number of orders reaching
the minimum is the number of label-preserving automorphisms of the labelled subgraph.

:func:`labelled_forms` computes, vectorised over many sets, the canonical order, the number of
labelled automorphisms and a stable 64-bit key of the labelled isomorphism class.
"""

from __future__ import annotations

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.graphlets.patterns import pair_index, tables
from gramdist.kernels.hashing import combine

_ROWS = 1 << 16  # rows per vectorised step (rows x automorphisms x sequence length)


class EdgeLabels:
    """Label of the edge between two global nodes of a batch (both directions)."""

    def __init__(self, graphs: GraphBatch) -> None:
        e = graphs.global_edges
        lab = graphs.edge_labels
        n = max(graphs.n_nodes, 1)
        keys = np.concatenate([e[:, 0] * n + e[:, 1], e[:, 1] * n + e[:, 0]])
        labels = np.concatenate([lab, lab])
        order = np.argsort(keys, kind="stable")
        self.keys, self.labels, self.n = keys[order], labels[order], n
        self.values = np.unique(self.labels)
        self.ranks = np.searchsorted(self.values, self.labels)  # order-preserving small integers

    def _pos(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        key = np.asarray(u, dtype=np.int64) * self.n + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, len(self.keys) - 1)
        if len(self.keys) == 0 or not np.all(self.keys[pos] == key):
            raise ValueError("edge label asked for a pair of nodes that is not an edge")
        return pos

    def __call__(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.labels[self._pos(u, v)]

    def rank(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The rank of the label among the batch's edge labels (same order as the labels)."""
        return self.ranks[self._pos(u, v)]


def labelled_forms(sets: np.ndarray, patterns: np.ndarray, node_labels: np.ndarray,
                   edge_labels: EdgeLabels | None, salt: np.uint64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical labelled forms of node sets.

    Parameters
    ----------
    sets : (R, s) int64 global node ids; patterns : (R,) their adjacency patterns.
    node_labels : (N,) int64 labels of the batch's nodes.
    edge_labels : edge-label lookup, or None to ignore edge labels.
    salt : uint64 mixed into the keys (a feature family tag).

    Returns
    -------
    keys : (R,) uint64 key of each set's labelled isomorphism class,
        ``combine(salt, s, canonical pattern, sequence...)``.
    order : (R, s) int64 the set's nodes in canonical order.
    n_aut : (R,) int64 number of label-preserving automorphisms.
    """
    r_count, s = sets.shape
    tab = tables(s)
    klass = tab.klass[patterns]
    # labels as order-preserving ranks, to pack a whole sequence into one int64 when it fits
    node_values = np.unique(node_labels)
    node_rank = np.searchsorted(node_values, node_labels)
    bits_n = max(1, int(len(node_values) - 1).bit_length())
    bits_e = 0 if edge_labels is None else max(1, int(len(edge_labels.values) - 1).bit_length())
    keys = np.zeros(r_count, dtype=np.uint64)
    order = np.zeros((r_count, s), dtype=np.int64)
    n_aut = np.zeros(r_count, dtype=np.int64)
    for c in np.unique(klass):
        rows_c = np.flatnonzero(klass == c)
        aut = tab.aut[c].astype(np.int64)  # (A, s)
        canon = int(tab.class_canon[c])
        edges = [(a, b) for b in range(s) for a in range(b) if (canon >> pair_index(a, b)) & 1]
        if s == 3 and canon == 3:  # the path on 3 nodes, the bulk of k = 3: closed form
            _paths3(rows_c, sets, patterns, tab, node_labels, edge_labels, salt, keys, order, n_aut)
            continue
        step = max(1, _ROWS // max(1, len(aut)))
        for lo in range(0, len(rows_c), step):
            rows = rows_c[lo:lo + step]
            sig = tab.sigma[patterns[rows]].astype(np.int64)       # (r, s)
            orders = sig[:, aut]                                   # (r, A, s): position i <- sig[aut[a, i]]
            nodes = np.take_along_axis(sets[rows][:, None, :], orders, axis=2)  # (r, A, s)
            pick = np.arange(len(rows))
            if s * bits_n + len(edges) * bits_e <= 62:
                # the sequence of ranks packed into one integer: its minimum is the smallest
                # sequence (fixed-width fields, most significant first)
                code = np.zeros(nodes.shape[:2], dtype=np.int64)
                for i in range(s):
                    code = (code << bits_n) | node_rank[nodes[:, :, i]]
                if edge_labels is not None:
                    for a, b in edges:
                        code = (code << bits_e) | edge_labels.rank(nodes[:, :, a], nodes[:, :, b])
                cand = code == code.min(axis=1, keepdims=True)
                best = np.argmax(cand, axis=1)
                chosen = nodes[pick, best]
                seq = [node_labels[chosen[:, i]] for i in range(s)]
                if edge_labels is not None:
                    seq += [edge_labels(chosen[:, a], chosen[:, b]) for a, b in edges]
            else:
                cols = [node_labels[nodes[:, :, i]] for i in range(s)]
                if edge_labels is not None:
                    cols += [edge_labels(nodes[:, :, a], nodes[:, :, b]) for a, b in edges]
                cand = np.ones(nodes.shape[:2], dtype=bool)
                big = np.iinfo(np.int64).max
                for col in cols:
                    v = np.where(cand, col, big)
                    cand &= v == v.min(axis=1, keepdims=True)
                best = np.argmax(cand, axis=1)
                chosen = nodes[pick, best]
                seq = [col[pick, best] for col in cols]
            order[rows] = chosen
            n_aut[rows] = cand.sum(axis=1)
            keys[rows] = combine(salt, np.int64(s), np.int64(canon), *seq)
    return keys, order, n_aut


def _paths3(rows: np.ndarray, sets: np.ndarray, patterns: np.ndarray, tab, node_labels: np.ndarray,
            edge_labels: EdgeLabels | None, salt: np.uint64, keys: np.ndarray, order: np.ndarray,
            n_aut: np.ndarray) -> None:
    """:func:`labelled_forms` of paths on 3 nodes without expanding the automorphisms.

    In canonical order the centre is node 0 and the canonical edges are (0, 1), (0, 2), so the
    smallest sequence puts the ends in increasing (label, edge label) order; the two orders tie
    (two automorphisms) when the ends carry equal labels.
    """
    sig = tab.sigma[patterns[rows]].astype(np.int64)
    nodes = np.take_along_axis(sets[rows], sig, axis=1)  # (centre, end, end)
    lc, lx, ly = (node_labels[nodes[:, i]] for i in range(3))
    if edge_labels is not None:
        ex, ey = edge_labels(nodes[:, 0], nodes[:, 1]), edge_labels(nodes[:, 0], nodes[:, 2])
    else:
        ex = ey = np.zeros(len(rows), dtype=np.int64)
    swap = (lx > ly) | ((lx == ly) & (ex > ey))
    tie = (lx == ly) & (ex == ey)
    first, second = np.where(swap, nodes[:, 2], nodes[:, 1]), np.where(swap, nodes[:, 1], nodes[:, 2])
    order[rows, 0], order[rows, 1], order[rows, 2] = nodes[:, 0], first, second
    n_aut[rows] = 1 + tie
    l1, l2 = np.where(swap, ly, lx), np.where(swap, lx, ly)
    seq = [lc, l1, l2]
    if edge_labels is not None:
        seq += [np.where(swap, ey, ex), np.where(swap, ex, ey)]
    keys[rows] = combine(salt, np.int64(3), np.int64(3), *seq)


__all__ = ["EdgeLabels", "labelled_forms"]
