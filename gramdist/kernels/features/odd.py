"""ODD_ST_h kernel: ordered decompositional DAGs with the subtree kernel (Da San Martino,
Navarin & Sperduti, SDM 2012), as an explicit sparse feature map.

Definition implemented
----------------------
For every node ``v`` of a graph, ``DAG_v`` is the breadth-first visit from ``v`` limited to
depth ``h``: its nodes are the graph nodes at distance ``<= h`` from ``v`` and its arcs are the
graph edges ``u -> w`` with ``dist(v, w) = dist(v, u) + 1`` (edges between nodes of the same
level close cycles and are dropped; a node with several parents keeps them all). Let ``L_v``
be the depth actually reached (``<= h``).

For a DAG node ``u`` the *tree visit* ``T(u)`` unfolds the sub-DAG reachable from ``u`` into a
tree; ``T_j(u)`` is the same visit cut at absolute depth ``j`` of ``DAG_v`` (so ``T_j(u)`` is
empty for ``j < depth(u)``). The features of the graph are these proper rooted subtrees:

    phi(G) = sum_v sum_{j=0..L_v} sum_{u in DAG_v, depth(u) <= j} lam^(|T_j(u)| / 2) e[T_j(u)]

where ``|T|`` is the number of nodes of the tree and ``e[T]`` the indicator of the tree up to
isomorphism of unordered labelled trees. The kernel is ``<phi(G), phi(G')>``, i.e. the subtree
kernel ``C(u1, u2) = lam^|T|`` for identical proper subtrees summed over all pairs of DAGs and
truncation depths ``j`` (the ``sum_j`` of ODD_ST_h). This is exactly what the authors'
reference implementation (scikit-learn-graph, ``ODDSTGraphKernel``) computes with its
"frequency" bookkeeping: a subtree cut at ``k = j - depth(u) < height(u)`` levels below ``u``
occurs once, and the full tree ``T(u)`` occurs for the ``L_v - depth(u) - height(u) + 1``
values of ``j`` that no longer cut it. Ordering the children canonically (ODD's "ordered"
DAGs) and comparing ordered trees is the same as comparing unordered trees; here children
form a multiset. ``lam = 1`` counts subtrees.

Encoding and computation
------------------------
A truncated tree is named by a stable 64-bit hash (:mod:`gramdist.kernels.hashing`):
``H_0(u) = hash(label(u), 0)`` and ``H_k(u) = hash(label(u), sum over children w of
mix(H_{k-1}(w)))``, the wrapping sum being an order-free multiset hash, so equal trees get
equal keys in every process. ``H_k(u) != H_{k-1}(u)`` exactly when ``height(u) >= k``, which
gives the heights for free. For all roots at once the child sums are uint64 sparse products:
with ``P_a`` the pattern of (root, node) pairs at distance ``a``, the sums for the nodes at
level ``a`` are ``(M_{a+1} @ A)`` restricted to ``P_a``, where ``M_{a+1}`` holds
``mix(H_{k-1})`` on ``P_{a+1}``. Tree sizes come from the same product in float64.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import check_int, check_real
from gramdist.kernels.features.nspdk import BLOCK_NODES, _blocks, _coo_keys, distance_patterns
from gramdist.kernels.hashing import combine, mix, tag
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures

_T_TREE = tag("odd.tree")
_T_CHILD = tag("odd.child")


def _restrict(prod: sp.csr_matrix, pattern: sp.csr_matrix, pattern_keys: np.ndarray, n: int,
              dtype: type) -> np.ndarray:
    """Values of ``prod`` on the entries of ``pattern`` (in its storage order; 0 if absent)."""
    out = np.zeros(pattern.nnz, dtype=dtype)
    mask = pattern.astype(dtype)
    x = mask.multiply(prod).tocsr()
    x.sort_indices()
    if x.nnz:
        pos = np.searchsorted(pattern_keys, _coo_keys(x, n))  # sorted queries: fast merge
        out[pos] = x.data
    return out


class ODDSTKernel(SparseFeatureKernel):
    """ODD_ST_h graph kernel with explicit hashed subtree features.

    Parameters
    ----------
    h : int, default 3
        Maximum depth of the breadth-first DAGs.
    lam : float, default 1.0
        Subtree weight ``lambda > 0``: a matching subtree of ``s`` nodes contributes
        ``lam ** s`` (each occurrence is weighted ``lam ** (s / 2)``).

    Notes
    -----
    Uses node labels (0 if the dataset has none); ignores edge labels and attributes.
    ``embed`` returns :class:`SparseFeatures`; the features are stable hashes, so ``fit``
    learns nothing (it records the sample size).
    """

    name = "odd"

    def __init__(self, h: int = 3, lam: float = 1.0) -> None:
        self.h = h
        self.lam = lam

    def validate(self) -> None:
        check_int(self.h, self.name, "h", 0, 10)
        check_real(self.lam, self.name, "lam", 0, lo_open=True)

    # ------------------------------------------------------------ features
    def features(self, graphs: GraphBatch) -> SparseFeatures:
        """(G, ·) sparse ODD_ST feature vectors of ``graphs``, computed in node-bounded blocks."""
        parts = [self._features_block(graphs[lo:hi])
                 for lo, hi in _blocks(graphs.nodes_per_graph, BLOCK_NODES)]
        return SparseFeatures.concat(parts) if parts else SparseFeatures.empty(0)

    def _features_block(self, graphs: GraphBatch) -> SparseFeatures:
        h, lam = self.h, float(self.lam)
        n_graphs, n = len(graphs), graphs.n_nodes
        if n == 0:
            return SparseFeatures.empty(n_graphs)
        labels = graphs.node_labels if graphs.node_labels is not None else np.zeros(n, np.int64)
        adj = graphs.adjacency()
        pats = distance_patterns(adj, h)
        keys_by_level = [_coo_keys(p, n) for p in pats]
        roots = [k // n for k in keys_by_level]
        nodes = [k % n for k in keys_by_level]
        # depth reached by each root's DAG
        depth_reached = np.zeros(n, dtype=np.int64)
        for a in range(1, h + 1):
            depth_reached[roots[a]] = a
        leaf = [combine(_T_TREE, labels[nodes[a]], np.uint64(0)) for a in range(h + 1)]
        # hashes[a][k] and sizes[a][k]: truncation k = 0..h-a of the nodes at level a
        hashes = [[leaf[a]] for a in range(h + 1)]
        sizes = [[np.ones(pats[a].nnz)] for a in range(h + 1)]
        a_u = adj.astype(np.uint64)
        a_f = adj.astype(np.float64)
        for k in range(1, h + 1):
            for a in range(0, h - k + 1):
                child = pats[a + 1]
                m = sp.csr_matrix((mix(hashes[a + 1][k - 1] ^ _T_CHILD), child.indices, child.indptr),
                                  shape=(n, n))
                s = _restrict(m @ a_u, pats[a], keys_by_level[a], n, np.uint64)
                hashes[a].append(combine(_T_TREE, labels[nodes[a]], s))
                if lam != 1.0:
                    ms = sp.csr_matrix((sizes[a + 1][k - 1], child.indices, child.indptr), shape=(n, n))
                    sizes[a].append(1.0 + _restrict(ms @ a_f, pats[a], keys_by_level[a], n, np.float64))
                else:
                    sizes[a].append(sizes[a][0])
        node_graph = graphs.node_graph
        rows, keys, vals = [], [], []
        for a in range(h + 1):
            hk = hashes[a]
            height = np.zeros(len(hk[0]), dtype=np.int64)
            for k in range(1, len(hk)):
                height += hk[k] != hk[k - 1]
            full_count = (depth_reached[roots[a]] - a - height + 1).astype(np.float64)
            g = node_graph[roots[a]]
            for k in range(len(hk)):
                sel = np.flatnonzero(height >= k)
                if len(sel) == 0:
                    break
                w = np.where(height[sel] == k, full_count[sel], 1.0)
                if lam != 1.0:
                    w = w * lam ** (sizes[a][k][sel] / 2.0)
                rows.append(g[sel])
                keys.append(hk[k][sel])
                vals.append(w)
        return SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(keys),
                                         np.concatenate(vals), n_graphs)

    # ------------------------------------------------------------ contract


__all__ = ["ODDSTKernel"]
