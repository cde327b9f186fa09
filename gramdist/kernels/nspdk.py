"""Neighbourhood Subgraph Pairwise Distance Kernel (Costa & De Grave, ICML 2010).

Definition implemented
----------------------
For a node ``v`` and a radius ``rho``, the *rooted neighbourhood subgraph* ``N_rho(v)`` is the
subgraph induced by the nodes at shortest-path distance ``<= rho`` from ``v``, rooted at ``v``.
For every radius ``rho in 0..r`` and distance ``delta in 0..d`` the relation ``R_{rho,delta}``
holds the *ordered* pairs of neighbourhoods ``(N_rho(u), N_rho(v))`` whose roots are at
distance exactly ``delta`` (so a pair at ``delta > 0`` appears as ``(u, v)`` and ``(v, u)``,
and ``delta = 0`` gives each neighbourhood once). The kernel is

    K(G, G') = sum_{rho<=r} sum_{delta<=d} k_hat_{rho,delta}(G, G'),
    k_{rho,delta}(G, G') = sum over pairs (A, B) in G, (A', B') in G' of 1[A ~ A'] 1[B ~ B'],

where ``k_hat`` is ``k`` normalised to unit self-similarity (``k / sqrt(k(G,G) k(G',G'))``,
the paper's per-(r, d) normalisation; ``normalize_blocks=False`` gives the raw counts). The
explicit features are ``(rho, delta, code(A), code(B))`` with their counts, each (rho, delta)
block of a graph's vector scaled to unit norm, so the kernel is a plain dot product.

Neighbourhood code (the "~" above)
----------------------------------
Exact isomorphism of rooted subgraphs is replaced, as in the paper, by equality of an
*invariant encoding* that does not depend on node order: ``code(N_rho(v))`` encodes

* for every node ``w`` of the neighbourhood: its distance ``b`` from the root and its label;
* for every such ``w``: the multiset of its neighbours ``u`` *inside* the neighbourhood, each as
  (distance of ``u`` from the root, label of ``u``, label of the edge ``uw``).

So it is the multiset of distance-labelled nodes together with every edge of the induced
subgraph labelled by both endpoints' (distance, label) and the edge label: the paper's
distance-based labelling (which already makes the root unique: the only node at distance 0),
encoded as a multiset rather than as a string of a traversal. Isomorphic rooted neighbourhoods
always get the same code; different codes never match. Like the paper's invariant it is not a
complete isomorphism test (non-isomorphic graphs with identical labelled-degree structure
collide). Codes and features are stable 64-bit hashes (:mod:`gramdist.kernels.hashing`,
multisets hashed as wrapping sums of mixed elements), so every worker names a feature alike.

Computation (vectorised, no Python loop over nodes)
---------------------------------------------------
Exact-distance patterns ``P_a`` (``a = 0..max(r, d)``) come from sparse frontier expansion on
the block-diagonal adjacency. The neighbour multisets are sparse products ``P_a @ A_h`` in
uint64 arithmetic, where ``A_h[u, w]`` is the hash of (label of ``u``, label of edge ``uw``):
entry ``[v, w]`` is the wrapping sum over the neighbours ``u`` of ``w`` at distance ``a`` from
``v``. A neighbourhood code is then a wrapping sum over its nodes, done for all radii at once
with per-(root, distance) segment sums and a cumulative sum over distances.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import check_param
from gramdist.kernels.hashing import combine, mix, segment_sum_u64, tag
from gramdist.kernels.sparse_features import SparseFeatureKernel, SparseFeatures, sort_segments

_T_NODE = tag("nspdk.node")
_T_NBR = tag("nspdk.neighbour")
_T_NBHD = tag("nspdk.neighbourhood")
_T_PAIR = tag("nspdk.pair")
_K = np.uint64(0x9FB21C651E98DF25)

#: graphs are processed in blocks of at most this many nodes (bounds peak memory)
BLOCK_NODES = 20_000


def distance_patterns(adj: sp.csr_matrix, max_dist: int) -> list[sp.csr_matrix]:
    """Exact shortest-path distance patterns ``[P_0, ..., P_max_dist]``.

    Parameters
    ----------
    adj : (n, n) CSR
        Symmetric adjacency (any non-zero entry is an edge).
    max_dist : int
        Largest distance wanted.

    Returns
    -------
    list of (n, n) CSR int8 matrices, ``P_a[v, w] = 1`` iff ``dist(v, w) == a``; sorted indices.
    """
    n = adj.shape[0]
    a = adj.astype(np.int8, copy=True)
    a.data[:] = 1
    cur = sp.identity(n, dtype=np.int8, format="csr")
    reached = cur.copy()
    out = [cur]
    for _ in range(max_dist):
        front = cur @ a
        front.data[:] = 1
        new = (front - reached).tocsr()
        new.data = (new.data > 0).astype(np.int8)
        new.eliminate_zeros()
        new.sort_indices()
        out.append(new)
        reached = (reached + new).tocsr()
        cur = new
        if new.nnz == 0:
            # nothing further away: the remaining patterns are empty
            out.extend(sp.csr_matrix((n, n), dtype=np.int8) for _ in range(max_dist - len(out) + 1))
            break
    return out


def _coo_keys(m: sp.csr_matrix, n: int) -> np.ndarray:
    """int64 keys row * n + col of a CSR's entries in storage order (sorted if canonical)."""
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    return rows * n + m.indices.astype(np.int64)


def neighbourhood_codes(graphs: GraphBatch, r: int, patterns: list[sp.csr_matrix]) -> np.ndarray:
    """(r+1, N) uint64 codes of the rooted neighbourhoods ``N_rho(v)`` of every node.

    ``patterns`` are the distance patterns of the batch up to at least ``r + 1``.
    """
    n = graphs.n_nodes
    labels = graphs.node_labels if graphs.node_labels is not None else np.zeros(n, np.int64)
    indptr, nbrs, eids = graphs.arcs()
    elab = graphs.edge_labels[eids] if graphs.edge_labels is not None else np.zeros(len(eids), np.int64)
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    # A_h[u, w] = hash(label(u), label(uw)): what w sees of its neighbour u
    a_h = sp.csr_matrix((combine(_T_NBR, labels[src], elab), nbrs, indptr), shape=(n, n))

    # table of all pairs (v, w) with dist <= r (+1 ring so that every product entry is found)
    table = sp.csr_matrix((n, n), dtype=np.int64)
    for b in range(r + 2):
        p = patterns[b].astype(np.int64)
        p.data[:] = b + 1
        table = table + p
    table = table.tocsr()
    table.sort_indices()
    t_keys = _coo_keys(table, n)
    t_dist = table.data - 1
    # neighbour-multiset sums split by the neighbour's distance relative to w's: a = b-1, b, b+1
    q = np.zeros((3, len(t_keys)), dtype=np.uint64)
    for a in range(r + 1):
        pa = patterns[a].astype(np.uint64)
        qa = (pa @ a_h).tocsr()
        qa.sort_indices()
        pos = np.searchsorted(t_keys, _coo_keys(qa, n))
        rel = a - t_dist[pos] + 1  # 0: a=b-1, 1: a=b, 2: a=b+1
        q[rel, pos] = qa.data  # each (pair, a) occurs once: plain assignment

    keep = t_dist <= r
    v = t_keys[keep] // n
    w = t_keys[keep] % n
    b = t_dist[keep]
    qm, q0, qp = q[0, keep], q[1, keep], q[2, keep]
    base = combine(_T_NODE, b, labels[w])
    t_bnd = combine(base, qm, q0)  # w on the boundary (b == rho): neighbours at b+1 are outside
    t_int = combine(base, qm, q0, qp)  # w inside (b < rho)
    idx = v * (r + 1) + b
    s_int = segment_sum_u64(t_int, idx, n * (r + 1)).reshape(n, r + 1)
    s_bnd = segment_sum_u64(t_bnd, idx, n * (r + 1)).reshape(n, r + 1)
    codes = np.empty((r + 1, n), dtype=np.uint64)
    inner = np.zeros(n, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for rho in range(r + 1):
            codes[rho] = combine(_T_NBHD, rho, inner + s_bnd[:, rho])
            inner = inner + s_int[:, rho]
    return codes


class NSPDKKernel(SparseFeatureKernel):
    """Neighbourhood subgraph pairwise distance kernel with explicit hashed features.

    Parameters
    ----------
    r : int, default 3
        Maximum neighbourhood radius (radii ``0..r`` are used).
    d : int, default 4
        Maximum distance between the two roots (distances ``0..d``).
    normalize_blocks : bool, default True
        Scale each (radius, distance) block of a graph's feature vector to unit norm, the
        paper's per-(r, d) normalisation. ``False`` gives raw pair counts.

    Notes
    -----
    Uses node labels and edge labels when the dataset has them (0 otherwise); ignores
    attributes. ``embed`` returns :class:`SparseFeatures`; no fitted state is needed (features
    are stable hashes), so ``fit`` learns nothing (it records the sample size).
    """

    name = "nspdk"

    def __init__(self, r: int = 3, d: int = 4, normalize_blocks: bool = True) -> None:
        self.r = r
        self.d = d
        self.normalize_blocks = normalize_blocks

    def validate(self) -> None:
        for p in ("r", "d"):
            val = getattr(self, p)
            check_param(isinstance(val, int) and not isinstance(val, bool) and 0 <= val <= 10,
                        self.name, p, f"must be an integer in 0..10, got {val!r}")
        check_param((self.r + 1) * (self.d + 1) <= 256, self.name, "d",
                    f"and r give more than 256 (radius, distance) blocks: r={self.r}, d={self.d}")
        check_param(isinstance(self.normalize_blocks, bool), self.name, "normalize_blocks",
                    f"must be true or false, got {self.normalize_blocks!r}")

    # ------------------------------------------------------------ features
    def features(self, graphs: GraphBatch) -> SparseFeatures:
        """(G, ·) sparse NSPDK feature vectors of ``graphs``, computed in node-bounded blocks."""
        parts = []
        for lo, hi in _blocks(graphs.nodes_per_graph, BLOCK_NODES):
            parts.append(self._features_block(graphs[lo:hi]))
        return SparseFeatures.concat(parts) if parts else SparseFeatures.empty(0)

    def _features_block(self, graphs: GraphBatch) -> SparseFeatures:
        r, d = self.r, self.d
        n_graphs = len(graphs)
        if graphs.n_nodes == 0:
            return SparseFeatures.empty(n_graphs)
        patterns = distance_patterns(graphs.adjacency(), max(r + 1, d))
        codes = neighbourhood_codes(graphs, r, patterns)
        node_graph = graphs.node_graph
        # a feature key is a 56-bit hash of (rho, delta, code_u, code_v) with the block id
        # rho * (d + 1) + delta in its low 8 bits (for the per-block normalisation)
        high = np.uint64(0xFFFFFFFFFFFFFF00)
        keys, rows = [], []
        for delta in range(d + 1):
            p = patterns[delta]
            if p.nnz == 0:
                continue
            v = np.repeat(np.arange(p.shape[0], dtype=np.int64), np.diff(p.indptr))
            w = p.indices.astype(np.int64)
            g = node_graph[v]
            for rho in range(r + 1):
                c = codes[rho]
                salt = combine(_T_PAIR, rho, delta)
                with np.errstate(over="ignore"):
                    h = mix(mix(c[v] ^ salt) + c[w] * _K)
                keys.append((h & high) | np.uint64(rho * (d + 1) + delta))
                rows.append(g)
        if not keys:
            return SparseFeatures.empty(n_graphs)
        return _count_features(np.concatenate(rows), np.concatenate(keys), n_graphs,
                               (r + 1) * (d + 1), self.normalize_blocks)

    # ------------------------------------------------------------ contract


def _count_features(rows: np.ndarray, keys: np.ndarray, n_graphs: int, n_blocks: int,
                    normalize: bool) -> SparseFeatures:
    """Count (graph, key) occurrences; optionally scale each (graph, block) to unit norm.

    The block of a key is its low 8 bits (see :meth:`NSPDKKernel._features_block`).
    """
    order = np.argsort(rows.astype(np.uint32 if n_graphs >= 1 << 16 else np.uint16), kind="stable")
    indptr = np.zeros(n_graphs + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_graphs), out=indptr[1:])
    k, _ = sort_segments(keys[order], indptr)
    new = np.empty(len(k), dtype=bool)
    new[0] = True
    new[1:] = k[1:] != k[:-1]
    new[indptr[:-1][indptr[:-1] < len(k)]] = True
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, len(k))).astype(np.float64)
    k = k[starts]
    g = np.searchsorted(indptr, starts, side="right") - 1
    if normalize:
        gb = g * n_blocks + (k & np.uint64(0xFF)).astype(np.int64)
        norms = np.sqrt(np.bincount(gb, weights=counts * counts, minlength=n_graphs * n_blocks))
        counts = counts / norms[gb]
    out_ptr = np.zeros(n_graphs + 1, dtype=np.int64)
    np.cumsum(np.bincount(g, minlength=n_graphs), out=out_ptr[1:])
    return SparseFeatures(out_ptr, k, counts)


def _blocks(sizes: np.ndarray, limit: int) -> list[tuple[int, int]]:
    """Consecutive ranges of graphs with at most ``limit`` nodes each (a bigger graph alone)."""
    out, lo, acc = [], 0, 0
    for i, s in enumerate(np.asarray(sizes).tolist()):
        if acc and acc + s > limit:
            out.append((lo, i))
            lo, acc = i, 0
        acc += s
    if lo < len(sizes):
        out.append((lo, len(sizes)))
    return out


__all__ = ["NSPDKKernel", "distance_patterns", "neighbourhood_codes"]
