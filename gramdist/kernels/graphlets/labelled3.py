"""Labelled 3-node graphlet counts, counted before they are keyed.

:func:`~gramdist.kernels.subgraphs.labelled_forms` keys every connected set by hashing its
canonical label sequence (five columns per set). For 3 nodes without edge labels that sequence
has a closed form — a wedge is its centre's label, then its end labels in increasing order; a
triangle its three labels in increasing order — so each set is packed into one integer of
(graph, label ranks, shape), the integers are sorted and counted, and only the distinct ones
are hashed, into the keys :func:`labelled_forms` gives (the tests compare the two bit for bit).
On D&D (2.7 million sets, 1.5 million distinct (graph, labelled graphlet) pairs), one batch:
0.82 s through :func:`labelled_forms`, 0.58 s here (2026-11-28)."""

from __future__ import annotations

import numpy as np

from gramdist.arrayops import counted
from gramdist.graphs import GraphBatch
from gramdist.kernels.hashing import combine
from gramdist.kernels.sparse import SparseFeatures
from gramdist.kernels.subgraphs import neighbour_pairs

#: canonical adjacency patterns of the two connected 3-node classes (``subgraphs.tables(3)``)
_WEDGE, _TRIANGLE = 3, 7


def labelled_three_node_features(graphs: GraphBatch, node_labels: np.ndarray,
                                 salt: np.uint64) -> SparseFeatures | None:
    """Counts of each graph's labelled wedges and triangles, keyed as
    ``combine(salt, 3, pattern, l0, l1, l2)`` over the canonical label sequence.

    Parameters
    ----------
    graphs : the batch (G graphs, N nodes).
    node_labels : (N,) int64 label of each node.
    salt : uint64 feature family tag.

    Returns
    -------
    (G, ·) counts, or None when a packed set does not fit in 63 bits (more than 2^20 distinct
    labels in a batch of 2^20 graphs): then use :func:`labelled_forms`.
    """
    values, rank = np.unique(node_labels, return_inverse=True)
    bits = max(1, int(len(values) - 1).bit_length())
    if 3 * bits + 1 + max(1, int(len(graphs) - 1).bit_length()) > 63:
        return None
    rank = rank.astype(np.int64).ravel()
    node_graph = graphs.node_graph.astype(np.int64)
    codes = []
    for c, a, b, closed in neighbour_pairs(graphs):
        keep = ~closed | (c < a)  # a triangle once, from its smallest node (a < b already)
        c, a, b, closed = c[keep], a[keep], b[keep], closed[keep]
        rc, ra, rb = rank[c], rank[a], rank[b]
        lo, hi = np.minimum(ra, rb), np.maximum(ra, rb)
        first = np.where(closed, np.minimum(rc, lo), rc)
        third = np.where(closed, np.maximum(rc, hi), hi)
        second = np.where(closed, rc + lo + hi - first - third, lo)
        codes.append((((node_graph[c] << bits | first) << bits | second) << bits | third) << 1 | closed)
    if not codes:
        return SparseFeatures.empty(len(graphs))
    code, total = counted(np.concatenate(codes))
    mask = (1 << bits) - 1
    third, second, first = ((code >> (1 + i * bits)) & mask for i in range(3))
    pattern = np.where(code & 1, _TRIANGLE, _WEDGE).astype(np.int64)
    keys = combine(salt, np.int64(3), pattern, values[first], values[second], values[third])
    return SparseFeatures.from_pairs(code >> (1 + 3 * bits), keys, total.astype(np.float64), len(graphs))
