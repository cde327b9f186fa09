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

Ordered pairs, and how they weight pairs against the reference implementation
-----------------------------------------------------------------------------
The paper's ``R^-1_{rho,delta}(G)`` is a set of *ordered* pairs ``(A, B)`` and its kernel
matches ``A`` with ``A'`` and ``B`` with ``B'``; the features above count exactly these
(``phi(a, b) = N(a, b)``, the number of ordered root pairs at distance ``delta`` whose
neighbourhoods have codes ``a`` then ``b``; ``N(a, b) = N(b, a)``). Costa's reference
implementations (the C++ ``NSPDK_FeatureGenerator`` of KLog/EDeN, and scikit-learn-graph's
``NSPDKVectorizer``, which the stream paper used) visit every ordered root pair too but key it
by the *sorted* pair of codes, so that a pair of different neighbourhoods ``{a, b}`` has
count ``N(a, b) + N(b, a)`` in one feature. Per (radius, distance) block, with
``K_same = sum_a N(a, a) N'(a, a)`` the part of pairs of two identical neighbourhoods::

    K_ordered = (K_reference + K_same) / 2

(tested against both brute-force definitions). Counted per *unordered* pair of roots, the
reference weighs every pair alike, while the ordered relation gives a pair of two identical
neighbourhoods (e.g. two carbons of the same environment) twice the weight of a pair of two
different ones; at ``delta = 0`` (a root with itself) both are the same. With the per-block
normalisation only this relative weight matters. **Choice:** gramdist keeps the paper's
ordered definition, which every gramdist NSPDK Gram and figure was computed with (a change
of weighting would change every NSPDK store and its fingerprint); a reader comparing with
numbers from the reference implementations should expect this difference in weighting.

Neighbourhood code (the "~" above)
----------------------------------
Exact isomorphism of rooted subgraphs is replaced, as in the paper, by equality of Costa & De
Grave's *graph invariant* (distance-vector vertex labels, then the sorted list of labelled
edges), as the paper describes it and as Costa's reference implementation computes it (the
NSPDK feature generator of the KLog sources, ``RadiusKRootedGraphCanonicalFormEncoding``):

1. the ball ``B_rho(v)`` is the set of nodes at distance ``<= rho`` from ``v`` *in the whole
   graph*, and ``N_rho(v)`` is the subgraph it induces (all edges between its nodes);
2. distances between members, ``D(w, u)``, are measured *inside* ``N_rho(v)`` (as the
   reference implementation does: it computes the pairwise distances of the induced graph).
   This is the choice that makes the code an invariant of the rooted subgraph itself: a
   6-cycle rooted anywhere has, at radius 2, the path on 5 nodes rooted at its centre as
   neighbourhood, and gets the same code as that path although two of its members are at
   distance 2 in the cycle and 4 in the subgraph (tested). The distance from the root is the
   same in both (a shortest path from the root never leaves the ball);
3. every member ``w`` gets the vertex label ``L(w) = hash(D(v, w), label(w), {(D(w, u),
   label(u)) : u in N_rho(v)})``, the multiset being the paper's sorted distance-vector list
   and ``D(v, w)`` the distance from the root, which distinguishes the root (the only member at
   distance 0; the reference implementation computes this distance next to the distance
   list, although its final vertex hash leaves it out; it is kept here, as the rooted
   definition requires);
4. every edge ``wu`` of ``N_rho(v)`` gets the code ``hash({L(w), L(u)}, label(wu))`` (the
   endpoint labels as an unordered pair; a self-loop has ``w = u``), and the code of
   ``N_rho(v)`` hashes ``rho``, the multiset of its edge codes (the paper's sorted edge list)
   and the multiset of its vertex labels (so that the edgeless one-node subgraphs, e.g. radius
   0, are told apart by the root's label; for a connected subgraph with edges this adds
   nothing the edges do not already carry except vertex multiplicities).

The paper and the reference implementation treat radius 0 and 1 as special cases for speed
(the root's label; the root with its sorted neighbour labels); here every radius uses the
general encoding, which for radius 1 also sees the edges among the root's neighbours.
Isomorphic rooted neighbourhoods always get the same code; like the paper's invariant it is
not a complete isomorphism test (rare non-isomorphic subgraphs with equal distance-vector
labels collide). Sorted lists are replaced by order-free multiset hashes (wrapping sums of
stable 64-bit hashes, :mod:`gramdist.kernels.hashing`), so every worker names a feature alike.

Computation (vectorised, no Python loop over nodes)
---------------------------------------------------
Exact-distance patterns ``P_a`` (``a = 0..max(r, d)``) come from sparse frontier expansion on
the block-diagonal adjacency. The members of every ball ``B_r(v)`` are laid out by (distance
from the root, node), so ``B_rho(v)`` is a prefix for every ``rho``, and the edges of every
induced subgraph are listed once in these local positions (:func:`ball_table`,
:func:`ball_edges`). For each radius the balls are grouped by padded size ``s`` and processed
as dense ``(batch, s, s)`` float32 stacks: the reachability ``[D(w, u) <= k]`` inside each ball
is a product of the induced adjacency plus identity (one BLAS product per ``k < 2 rho``, since
every member is within ``2 rho`` of every other through the root), and the distance-vector
multiset sums ``sum_u H[D(w, u), label(u)]`` are computed exactly from those matrices by
telescoping ``H[D] = sum_{k >= D} (H[k] - H[k + 1])`` and multiplying by the 16-bit limbs of
the hash table (sums below 2^24, so float32 is exact; float64 for balls over 256 nodes).
Balls over ``_DENSE_MAX_BALL`` nodes (dense products cost ``s^3``) are the one exception to
the batching: each gets breadth-first searches inside its subgraph
(:func:`scipy.sparse.csgraph.shortest_path`) and the same hashes; this never happens on the
molecule and protein benchmarks (D&D's largest radius-3 ball has 238 nodes).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph
from threadpoolctl import threadpool_limits

from gramdist.arrayops import group_offsets, ranges, stable_order
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import check_int, check_param
from gramdist.kernels.hashing import as_u64, combine, mix, segment_sum_u64, tag
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures, sort_segments

_T_DIST = tag("nspdk.distance-label")
_T_NODE = tag("nspdk.vertex")
_T_EDGE = tag("nspdk.edge")
_T_NBHD = tag("nspdk.subgraph")
_T_PAIR = tag("nspdk.pair")
_K = np.uint64(0x9FB21C651E98DF25)

#: graphs are processed in blocks of at most this many nodes (bounds peak memory)
BLOCK_NODES = 20_000
#: at most this many (root, member, member) entries per dense batch of balls
_DENSE_ELEMS = 1 << 20
#: balls up to this size use float32 products (16-bit limb sums stay below 2^24), else float64
_F32_MAX_BALL = 256
#: larger balls are not handled by dense products (s^3) but by breadth-first searches
_DENSE_MAX_BALL = 384
#: largest dense (root, node) -> ball position table (sum of squared graph sizes of a block)
_TABLE_MAX = 1 << 25


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


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(concat of arange(starts[i], starts[i] + lengths[i]), owner i of each element)``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    return ranges(starts, lengths), np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)


def _size_class(s: np.ndarray) -> np.ndarray:
    """Padded dense size for balls of ``s`` nodes: exact up to 8, then at most 25 % larger."""
    s = np.asarray(s, dtype=np.int64)
    shift = np.maximum(np.floor(np.log2(np.maximum(s, 1))).astype(np.int64) - 2, 0)
    step = np.where(s <= 8, 1, np.left_shift(1, shift))
    return -(-s // step) * step


def _distance_counts(patterns: list[sp.csr_matrix], r: int) -> np.ndarray:
    """(r+1, n): how many nodes lie at distance exactly b from each node, b = 0..r."""
    return np.stack([np.diff(patterns[b].indptr) for b in range(r + 1)])


def ball_table(patterns: list[sp.csr_matrix], r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members of every ball ``B_r(v)`` ordered by (distance from ``v``, node index).

    Returns ``(indptr, members, dist)``: the members of ``B_r(v)`` are
    ``members[indptr[v]:indptr[v+1]]`` with distances ``dist[...]`` (non-decreasing), so the
    members of ``B_rho(v)`` for ``rho < r`` are a prefix of that range. Built by interleaving
    the rows of ``P_0..P_r`` (no sort).
    """
    n = patterns[0].shape[0]
    counts = _distance_counts(patterns, r)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts.sum(axis=0), out=indptr[1:])
    before = np.cumsum(counts, axis=0) - counts  # members of v closer than distance b
    members = np.empty(indptr[-1], dtype=np.int64)
    dist = np.empty(indptr[-1], dtype=np.int8)
    for b in range(r + 1):
        p = patterns[b]
        row = np.repeat(np.arange(n, dtype=np.int64), counts[b])
        pos = indptr[row] + before[b, row] + (np.arange(p.nnz, dtype=np.int64) - p.indptr[row])
        members[pos] = p.indices
        dist[pos] = b
    return indptr, members, dist


def ball_edges(graphs: GraphBatch, indptr: np.ndarray, members: np.ndarray,
               edge_labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edges of the subgraphs induced by the balls of :func:`ball_table`, in local indices.

    Returns ``(eptr, lo, hi, elab)``: the edges of ``B_r(v)`` are ``eptr[v]:eptr[v+1]``, each
    as local member positions ``lo <= hi`` (positions in ``members[indptr[v]:]``; ``lo == hi``
    for a self-loop) and the edge label. An edge lies in ``B_rho(v)`` iff ``hi < |B_rho(v)|``.
    """
    n = graphs.n_nodes
    a_ptr, nbrs, eids = graphs.arcs()
    root = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))
    local = np.arange(len(members), dtype=np.int64) - indptr[root]
    # every arc (w -> u) leaving a member w, with u looked up in the root's ball
    deg = np.diff(a_ptr)
    arc, owner = _ranges(a_ptr[members], deg[members])
    lu = _ball_position(graphs, root, members, local, root[owner], nbrs[arc])
    lw = local[owner]
    keep = lu >= lw  # u in the ball (lu >= 0) and each edge once (self-loops too)
    e_root = root[owner[keep]]
    eptr = group_offsets(e_root, n)
    return eptr, lw[keep], lu[keep], edge_labels[eids[arc[keep]]]


def _ball_position(graphs: GraphBatch, root: np.ndarray, members: np.ndarray, local: np.ndarray,
                   q_root: np.ndarray, q_node: np.ndarray) -> np.ndarray:
    """Local position of node ``q_node`` in the ball of ``q_root`` (-1 if not a member).

    A dense per-graph table ``(v, u) -> position`` when the graphs are small enough (sum of
    squared sizes at most ``_TABLE_MAX``), else a binary search in the sorted (root, node) keys.
    """
    n = graphs.n_nodes
    g_size = np.asarray(graphs.nodes_per_graph, dtype=np.int64)
    if int((g_size * g_size).sum()) <= _TABLE_MAX:
        g_off = np.asarray(graphs.node_offsets[:-1] - graphs.node_offsets[0], dtype=np.int64)
        sq_off = np.zeros(len(g_size) + 1, dtype=np.int64)
        np.cumsum(g_size * g_size, out=sq_off[1:])
        gv = graphs.node_graph
        row_key = sq_off[gv] + (np.arange(n, dtype=np.int64) - g_off[gv]) * g_size[gv] - g_off[gv]
        big = int(local.max(initial=0)) >= 1 << 15
        table = np.full(int(sq_off[-1]), -1, dtype=np.int32 if big else np.int16)
        table[row_key[root] + members] = local
        return table[row_key[q_root] + q_node].astype(np.int64)
    keys = root * n + members
    order = np.argsort(keys)
    skeys = keys[order]
    q = q_root * n + q_node
    at = np.minimum(np.searchsorted(skeys, q), len(skeys) - 1)
    return np.where(skeys[at] == q, local[order[at]], -1)


class _RadiusContext(NamedTuple):
    """What the code builders need for one radius rho (arrays over all balls of the batch)."""

    rho: int
    size: np.ndarray  # |B_rho(v)| per root
    indptr: np.ndarray  # ball_table's member ranges
    m_lab: np.ndarray  # label index of every ball member
    m_vertex: np.ndarray  # hash(distance from the root, label) of every ball member
    e_ptr: np.ndarray  # edges of B_rho(v): e_ptr[v]:e_ptr[v+1] of the arrays below
    e_lo: np.ndarray
    e_hi: np.ndarray
    e_hash: np.ndarray
    h_dist: np.ndarray  # hash(distance, label), distances 0..2r
    dh: np.ndarray  # its telescoped differences up to 2 rho
    limbs: np.ndarray  # dh in 16-bit float limbs


def neighbourhood_codes(graphs: GraphBatch, r: int, patterns: list[sp.csr_matrix]) -> np.ndarray:
    """(r+1, N) uint64 codes of the rooted neighbourhood subgraphs ``N_rho(v)`` of every node.

    ``patterns`` are the distance patterns of the batch up to at least ``r``. See the module
    docstring for the encoding.
    """
    n = graphs.n_nodes
    labels = np.asarray(graphs.node_labels if graphs.node_labels is not None else np.zeros(n), np.int64)
    elab = graphs.edge_labels if graphs.edge_labels is not None else np.zeros(graphs.n_edges)
    indptr, members, dist = ball_table(patterns, r)
    eptr, e_lo, e_hi, e_lab = ball_edges(graphs, indptr, members, np.asarray(elab, dtype=np.int64))
    e_root = np.repeat(np.arange(n, dtype=np.int64), np.diff(eptr))
    uniq, inv = np.unique(labels, return_inverse=True)
    m_lab = inv.astype(np.int64).ravel()[members]  # label index of every ball member
    n_lab = len(uniq)
    # hash(distance, label) of the distance-vector multisets, for distances 0..2r
    h_dist = combine(_T_DIST, np.arange(2 * r + 1)[:, None], uniq[None, :])
    # hash(distance from the root, label) of a vertex, for distances 0..r
    h_vertex = combine(_T_NODE, np.arange(r + 1)[:, None], uniq[None, :]).ravel()
    m_vertex = h_vertex[dist.astype(np.int64) * n_lab + m_lab]
    e_hash = mix(as_u64(e_lab) ^ _T_EDGE)
    sizes = np.cumsum(_distance_counts(patterns, r), axis=0)  # |B_rho(v)|
    codes = np.empty((r + 1, n), dtype=np.uint64)
    for rho in range(r + 1):
        size = sizes[rho]
        # telescoped distance table: H[d, c] = sum_{k >= d} dh[k, c] (k <= 2 rho), so that
        # sum_u H[d(w, u), c_u] = sum_k sum_u [d(w, u) <= k] dh[k, c_u]
        k_max = 2 * rho
        dh = h_dist[: k_max + 1].copy()
        with np.errstate(over="ignore"):
            dh[:-1] -= h_dist[1 : k_max + 1]
        limbs = np.stack([(dh >> np.uint64(16 * i)) & np.uint64(0xFFFF) for i in range(4)],
                         axis=-1).astype(np.float32)
        e_in = e_hi < size[e_root]  # edges of B_r(v) that lie in B_rho(v)
        e_ptr = group_offsets(e_root[e_in], n)
        ctx = _RadiusContext(rho, size, indptr, m_lab, m_vertex, e_ptr, e_lo[e_in], e_hi[e_in], e_hash[e_in],
                             h_dist, dh, limbs)
        cls = _size_class(size)
        order = np.argsort(cls, kind="stable")
        for grp in np.split(order, np.flatnonzero(np.diff(cls[order])) + 1):
            if len(grp) == 0:
                continue
            s = int(cls[grp[0]])
            if s > _DENSE_MAX_BALL:
                codes[rho, grp] = _sparse_codes(grp, ctx)
                continue
            per = max(1, _DENSE_ELEMS // (s * s))
            for lo in range(0, len(grp), per):
                roots = grp[lo : lo + per]
                codes[rho, roots] = _dense_codes(roots, s, ctx)
    return codes


def _subgraph_code(rho: int, node: np.ndarray, node_sum: np.ndarray, owner: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray, e_hash: np.ndarray, nb: int) -> np.ndarray:
    """Codes from the vertex labels ``node`` (nb, s) and the edges (owner, lo, hi, label hash)."""
    with np.errstate(over="ignore"):
        # edge (w, u): order-free pair of vertex labels with the edge label
        mn = mix(node)
        edge = mix(mn[owner, lo] + mn[owner, hi] + e_hash)
        edge_sum = segment_sum_u64(edge, owner, nb)
    return combine(_T_NBHD, rho, node_sum, edge_sum)


def _sparse_codes(roots: np.ndarray, ctx: _RadiusContext) -> np.ndarray:
    """Codes of ``N_rho(v)`` for roots with very large balls, one ball at a time.

    The dense products cost ``s^3`` per ball; here the distances inside the subgraph come from
    breadth-first searches (:func:`scipy.sparse.csgraph.shortest_path`, ``O(s |E|)``), then the
    same hashes as :func:`_dense_codes`.
    """
    rho, size, indptr, m_lab, m_vertex = ctx.rho, ctx.size, ctx.indptr, ctx.m_lab, ctx.m_vertex
    e_ptr, e_lo, e_hi, e_hash, h_dist = ctx.e_ptr, ctx.e_lo, ctx.e_hi, ctx.e_hash, ctx.h_dist
    out = np.empty(len(roots), dtype=np.uint64)
    for i, v in enumerate(np.asarray(roots).tolist()):
        m = int(size[v])
        sel = slice(e_ptr[v], e_ptr[v + 1])
        lo, hi = e_lo[sel], e_hi[sel]
        adj = sp.csr_matrix((np.ones(len(lo)), (lo, hi)), shape=(m, m))
        dist = csgraph.shortest_path(adj, directed=False, unweighted=True)
        lab = m_lab[indptr[v] : indptr[v] + m]
        with np.errstate(over="ignore"):
            ms = h_dist[dist.astype(np.int64), lab[None, :]].sum(axis=1, dtype=np.uint64)
            node = mix(ms * _K + m_vertex[indptr[v] : indptr[v] + m])[None, :]
            node_sum = node.sum(axis=1, dtype=np.uint64)
        zero = np.zeros(len(lo), dtype=np.int64)
        out[i] = _subgraph_code(rho, node, node_sum, zero, lo, hi, e_hash[sel], 1)[0]
    return out


def _dense_codes(roots: np.ndarray, s: int, ctx: _RadiusContext) -> np.ndarray:
    """Codes of ``N_rho(v)`` for ``roots`` whose balls have at most ``s`` nodes (dense, batched)."""
    rho, size, indptr, m_lab, m_vertex = ctx.rho, ctx.size, ctx.indptr, ctx.m_lab, ctx.m_vertex
    e_ptr, e_lo, e_hi, e_hash, dh, limbs = ctx.e_ptr, ctx.e_lo, ctx.e_hi, ctx.e_hash, ctx.dh, ctx.limbs
    nb = len(roots)
    sz = size[roots]
    pos = np.arange(s, dtype=np.int64)
    mask = pos[None, :] < sz[:, None]  # (nb, s) real members
    idx = np.where(mask, indptr[roots][:, None] + pos[None, :], 0)
    lab = m_lab[idx]
    eidx, owner = _ranges(e_ptr[roots], e_ptr[roots + 1] - e_ptr[roots])
    lo, hi = e_lo[eidx], e_hi[eidx]
    k_max = 2 * rho
    # multiset sum over members u of hash(d(w, u), label(u)), d measured inside the subgraph:
    # k = k_max (every member is within 2 rho of w, through the root) and k = 0 (u = w) directly
    with np.errstate(over="ignore"):
        ms = np.where(mask, dh[k_max][lab], np.uint64(0)).sum(axis=1, dtype=np.uint64)[:, None]
        if k_max > 0:
            ms = ms + dh[0][lab]
    if k_max > 1:
        # reach_k = [d(w, u) <= k] by boolean products of the induced adjacency (+ identity);
        # the multiset terms of 1 <= k < 2 rho are exact products with 16-bit limbs
        ftype = np.float32 if s <= _F32_MAX_BALL else np.float64  # exact limb sums
        a1 = np.zeros((nb, s, s), dtype=ftype)
        a1.reshape(nb, s * s)[:, pos * (s + 1)] = mask
        flat = a1.reshape(-1)
        base = owner * (s * s)
        flat[base + lo * s + hi] = 1.0
        flat[base + hi * s + lo] = 1.0
        acc = np.zeros((nb, s, 4), dtype=np.float64)
        reach = a1
        for k in range(1, k_max):
            if k > 1:
                reach = reach @ a1
                np.minimum(reach, 1.0, out=reach)
            acc += reach @ limbs[k][lab].astype(ftype, copy=False)
        acc_u = acc.astype(np.uint64)
        with np.errstate(over="ignore"):
            ms = ms + (acc_u[..., 0] + (acc_u[..., 1] << np.uint64(16)) + (acc_u[..., 2] << np.uint64(32))
                       + (acc_u[..., 3] << np.uint64(48)))
    with np.errstate(over="ignore"):
        # vertex label L(w) = hash(distance from the root, label, distance-vector multiset)
        node = mix(ms * _K + m_vertex[idx])
        node_sum = np.where(mask, node, np.uint64(0)).sum(axis=1, dtype=np.uint64)
    return _subgraph_code(rho, node, node_sum, owner, lo, hi, e_hash[eidx], nb)


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
            check_int(val, self.name, p, 0, 10)
        check_param((self.r + 1) * (self.d + 1) <= 256, self.name, "d",
                    f"and r give more than 256 (radius, distance) blocks: r={self.r}, d={self.d}")
        check_param(isinstance(self.normalize_blocks, bool), self.name, "normalize_blocks",
                    f"must be true or false, got {self.normalize_blocks!r}")

    # ------------------------------------------------------------ features
    def features(self, graphs: GraphBatch) -> SparseFeatures:
        """(G, ·) sparse NSPDK feature vectors of ``graphs``, computed in node-bounded blocks."""
        parts = []
        # one BLAS thread: the dense products are many small matrices, where BLAS threads
        # only contend with the other workers (and spin on a loaded machine)
        with threadpool_limits(1):
            for lo, hi in _blocks(graphs.nodes_per_graph, BLOCK_NODES):
                parts.append(self._features_block(graphs[lo:hi]))
        return SparseFeatures.concat(parts) if parts else SparseFeatures.empty(0)

    def _features_block(self, graphs: GraphBatch) -> SparseFeatures:
        r, d = self.r, self.d
        n_graphs = len(graphs)
        if graphs.n_nodes == 0:
            return SparseFeatures.empty(n_graphs)
        patterns = distance_patterns(graphs.adjacency(), max(r, d))
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
    order = stable_order(rows, n_graphs)
    indptr = group_offsets(rows, n_graphs)
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
    out_ptr = group_offsets(g, n_graphs)
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
