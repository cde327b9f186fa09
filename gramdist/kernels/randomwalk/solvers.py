"""The three ways gramdist evaluates random-walk kernels (see ``kernel.py`` for the definition).

* :func:`walk_features` — explicit features ``sqrt(mu_t) c_s``: the number of walks of each
  length ``t <= T`` with each sequence of node (and edge) labels, by dynamic programming over
  (end node, label-sequence hash) states; :func:`series_terms` gives the weights ``mu_t``
  (p-step: ``T = p``; unlabelled geometric / exponential: ``T`` from a rigorous tail bound).
* :class:`SpectralEmbedding` / :func:`spectral_pairwise` — unlabelled graphs: ``A = V diag(w) V^T``
  once per graph in ``embed``; then ``1^T f(A ⊗ A') 1 = sum_ij s_i s'_j f(w_i w'_j)`` with
  ``s = (V^T 1)^2``: O(n n') per pair, exact to rounding.
* :func:`product_pairwise` — labelled graphs: the series ``sum_t mu_t 1^T W^t 1`` on the direct
  product graph without forming it: ``W vec(X) = vec(M ∘ (A X A'))`` (the Kronecker identity,
  masked by label agreement ``M``; a sum over edge labels when they are used), on dense label
  blocks holding the equally labelled node pairs of a group of graph pairs, per-pair stopping.

Every per-pair value is computed by arithmetic that involves only that pair's nodes, in an
order fixed by the pair alone (sparse indicator products add sequentially), so a Gram is
bitwise the same for any tile size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse._sparsetools import csr_matvecs as _csr_matvecs

from gramdist.arrayops import group_offsets
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import DerivedCache
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.sparse import SparseFeatures

_WALK_TAG = tag("random_walk.walk")
#: entries of a dense block (node pairs) per vectorised step
BLOCK_ENTRIES = 1 << 22
#: product-graph nodes (equally labelled node pairs) per block of graph pairs, product solver
GROUP_ENTRIES = 1 << 17


# ------------------------------------------------------------------ explicit
@dataclass(eq=False)
class WalkFeatures(SparseFeatures):
    """Walk-count feature rows that also flag the graphs whose largest degree exceeds the one
    the truncated series was fitted for (``beyond_fit``, 1 or 0 per graph), so the kernel can
    count them whichever process holds the rows."""

    beyond_fit: np.ndarray | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.beyond_fit = np.zeros(len(self), dtype=np.int8) if self.beyond_fit is None else \
            np.asarray(self.beyond_fit, dtype=np.int8)

    def __getitem__(self, key) -> WalkFeatures:
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            key = slice(i, i + 1)
        rows = super().__getitem__(key)
        idx = np.arange(len(self))[key] if isinstance(key, slice) else np.asarray(key, dtype=np.int64)
        return WalkFeatures(rows.indptr, rows.keys, rows.values, beyond_fit=self.beyond_fit[idx])

    def take(self, idx: np.ndarray) -> WalkFeatures:
        rows = super().take(idx)
        return WalkFeatures(rows.indptr, rows.keys, rows.values,
                            beyond_fit=self.beyond_fit[np.asarray(idx, dtype=np.int64)])


def walk_features(graphs: GraphBatch, weights: list[float], node_labels: np.ndarray | None,
                  edge_labels: np.ndarray | None, fit_degree: int | None = None) -> WalkFeatures:
    """Rows ``phi_(t, s)(G) = sqrt(mu_t) c_s(G)`` for ``t = 0..len(weights)-1``, ``mu_t = weights[t]``.

    ``c_s`` counts the walks of length ``t`` with label sequence ``s`` (node labels, and edge
    labels when given), so ``<phi(G), phi(G')> = sum_t mu_t 1^T W_x^t 1`` (a pair of walks of
    length t with one label sequence is one walk of the product graph). States are (end node,
    hash of the sequence) with counts; duplicates merge after each step. Without labels there
    is one state per node and step: ``c`` is ``1^T A^t`` and the cost O(t |E|). ``fit_degree``:
    flag the graphs of larger degree (``WalkFeatures.beyond_fit``).
    """
    n = graphs.n_nodes
    labels = node_labels if node_labels is not None else np.zeros(n, dtype=np.int64)
    indptr, nbrs, eids = graphs.arcs()
    node = np.arange(n, dtype=np.int64)
    h = combine(_WALK_TAG, labels)
    cnt = np.ones(n, dtype=np.float64)
    rows, keys, vals = [], [], []
    for t, mu in enumerate(weights):
        if t:
            deg = indptr[node + 1] - indptr[node]
            src = np.repeat(np.arange(len(node)), deg)
            arc = _ranges(indptr[node], deg)
            nxt = nbrs[arc]
            step = labels[nxt] if edge_labels is None else combine(edge_labels[eids[arc]], labels[nxt])
            h2 = combine(h[src], step)
            c2 = cnt[src]
            # merge states with the same (node, sequence): sort by (node, hash), sum counts
            order = np.lexsort((h2, nxt))
            nxt, h2, c2 = nxt[order], h2[order], c2[order]
            new = np.ones(len(nxt), dtype=bool)
            new[1:] = (nxt[1:] != nxt[:-1]) | (h2[1:] != h2[:-1])
            starts = np.flatnonzero(new)
            cnt = np.add.reduceat(c2, starts) if len(c2) else c2  # integer counts: exact below 2^53
            node, h = nxt[starts], h2[starts]
        if mu == 0:
            continue
        rows.append(graphs.node_graph[node])
        keys.append(combine(np.int64(t), h))
        vals.append(cnt * np.sqrt(mu))
    beyond = (max_degrees(graphs) > fit_degree).astype(np.int8) if fit_degree is not None else None
    if not rows:
        return WalkFeatures(np.zeros(len(graphs) + 1, np.int64), np.zeros(0, np.uint64), np.zeros(0),
                            beyond_fit=beyond)
    f = SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(keys), np.concatenate(vals), len(graphs))
    return WalkFeatures(f.indptr, f.keys, f.values, beyond_fit=beyond)


def series_terms(kind: str, lam: float, p: int, degree: int, tol: float) -> list[float]:
    """Weights ``mu_0..mu_T`` of the kernel's series, truncated where it is exact to ``tol``.

    p-step: ``lam^t`` for ``t <= p`` (no truncation). Geometric / exponential on graphs whose
    largest degree is at most ``degree``: ``1^T A^t 1 <= n d^t``, so the terms after ``T`` add at
    most ``n n' sum_{t > T} mu_t (d d')^t`` to a kernel value that is at least ``n n'`` (the
    ``t = 0`` term): ``T`` is the first index where that relative tail is at most ``tol``.
    """
    if kind == "p_step":
        return [lam ** t for t in range(p + 1)]
    x = lam * float(degree) ** 2
    mus = [1.0]
    t = 0
    while True:
        tail = (x ** (t + 1) / (1.0 - x) if x > 0 else 0.0) if kind == "geometric" else _exp_tail(x, t)
        if tail <= tol:
            return mus
        t += 1
        if t > 100000:
            raise ValueError("series too long: lam is too close to the convergence bound")
        mus.append(lam ** t if kind == "geometric" else mus[-1] * lam / t)


def _exp_tail(x: float, t: int) -> float:
    """``sum_{j > t} x^j / j!`` (terms summed until they no longer change the sum)."""
    term = 1.0
    for j in range(1, t + 2):
        term *= x / j
    tail, j = 0.0, t + 1
    while term > tail * 1e-17 and j < t + 100000:
        tail += term
        j += 1
        term *= x / j
    return tail


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    from gramdist.arrayops import ranges

    return ranges(starts, counts)


# ------------------------------------------------------------------ spectral
@dataclass(eq=False)
class SpectralEmbedding(DerivedCache):
    """Per graph: eigenvalues ``w`` of A and weights ``s = (V^T 1)^2`` (flat, with offsets).

    Components with ``s_i <= 1e-14 n`` (eigenvectors orthogonal to the all-ones vector up to
    rounding) are dropped: they change a kernel value by a relative ``1e-14`` at most.
    """

    offsets: np.ndarray
    w: np.ndarray
    s: np.ndarray
    max_degree: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, key: slice) -> SpectralEmbedding:
        if isinstance(key, (int, np.integer)):
            key = slice(int(key), int(key) + 1)
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise IndexError("random-walk embeddings slice with step 1 only")
        stop = max(stop, start)
        a, b = self.offsets[start], self.offsets[stop]
        return SpectralEmbedding(self.offsets[start:stop + 1] - a, self.w[a:b].copy(), self.s[a:b].copy(),
                                 self.max_degree[start:stop].copy())

    @classmethod
    def of(cls, graphs: GraphBatch) -> SpectralEmbedding:
        ws, ss, lens = [], [], []
        for x in graphs:
            n = x.n_nodes
            if n == 0:
                lens.append(0)
                continue
            a = x.adjacency().toarray()
            w, v = np.linalg.eigh(a)
            s = v.sum(axis=0) ** 2
            keep = s > 1e-14 * n
            ws.append(w[keep])
            ss.append(s[keep])
            lens.append(int(keep.sum()))
        offsets = np.zeros(len(graphs) + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        return cls(offsets, np.concatenate(ws) if ws else np.zeros(0), np.concatenate(ss) if ss else np.zeros(0),
                   max_degrees(graphs))


def spectral_pairwise(a: SpectralEmbedding, b: SpectralEmbedding, kind: str, lam: float) -> np.ndarray:
    """(len(a), len(b)) ``sum_ij s_i s'_j f(w_i w'_j)`` per pair, tile-invariant arithmetic.

    ``f(x) = 1 / (1 - lam x)`` (geometric) or ``exp(lam x)`` (exponential), evaluated in place
    on blocks of (b's eigenvalues) x (a group of a's eigenvalues); sums over each b graph then
    each a graph are sequential (sparse indicator products).
    """
    out = np.zeros((len(a), len(b)))
    if len(a.w) == 0 or len(b.w) == 0:
        return out
    ind_b = _indicator(b.offsets)
    for lo, hi in _groups(np.diff(a.offsets), max(1, BLOCK_ENTRIES // max(1, len(b.w)))):
        e0, e1 = a.offsets[lo], a.offsets[hi]
        v = np.multiply.outer(b.w, a.w[e0:e1])   # (Eb, ea)
        if kind == "geometric":
            v *= -lam
            v += 1.0
            np.reciprocal(v, out=v)
        else:
            v *= lam
            np.exp(v, out=v)
        v *= b.s[:, None]
        v *= a.s[None, e0:e1]
        col = ind_b @ v                           # (len(b), ea): sums over each b graph
        ind_a = _indicator(a.offsets[lo:hi + 1] - e0)
        out[lo:hi] = ind_a @ np.ascontiguousarray(col.T)
    return out


# ------------------------------------------------------------------ product
def max_degrees(graphs: GraphBatch) -> np.ndarray:
    """(G,) largest row sum of each graph's adjacency (a self-loop counts once)."""
    deg = np.diff(graphs.adjacency().indptr)
    out = np.zeros(len(graphs), dtype=np.int64)
    if len(deg):
        np.maximum.at(out, graphs.node_graph, deg)
    return out


@dataclass(frozen=True)
class Series:
    """Which series the product solver sums: ``kind``, ``lam``, ``p`` (p-step), and for the
    infinite ones the relative tail bound ``tol`` and the step cap ``max_iter``."""

    kind: str
    lam: float
    p: int = 3
    tol: float = 1e-10
    max_iter: int = 10000


def product_pairwise(a: GraphBatch, b: GraphBatch, series: Series, use_labels: bool,
                     use_edge_labels: bool) -> tuple[np.ndarray, int]:
    """(len(a), len(b)) random-walk kernel values on the direct product graphs, and the largest
    number of steps a pair needed.

    ``X_0 = M``, ``X_t = c_t M ∘ (A X_{t-1} A')`` with ``c_t = lam`` (p-step, geometric) or
    ``lam / t`` (exponential); a pair's value is ``sum_t sum(X_t)`` over its block. p-step stops
    at ``t = p``; the series stop, pair by pair, at the first ``t`` whose tail bound is below
    ``tol`` times the partial sum: with ``r = lam d d'`` (``d``, ``d'`` the largest degrees,
    which bound the product graph's row sums) the tail after a term ``T_t`` is at most
    ``T_t r / (1 - r)`` (geometric) and ``T_t q / (1 - q)``, ``q = r / (t + 1) <= 1/2``
    (exponential).

    Only the label-matching node pairs are stored: with the nodes of each side sorted by label,
    ``M ∘ X`` is a set of dense blocks ``X_l`` (nodes labelled ``l`` on both sides, every graph
    pair of the group at once) and ``(A X A')_l = sum_l' A[l, l'] X_l' A'[l', l]`` over the label
    pairs joined by edges on both sides: a sum of sparse-times-dense products on blocks that
    hold only product-graph nodes (D&D: 17 times fewer entries than all node pairs).
    """
    out = np.zeros((len(a), len(b)))
    steps = 0
    if len(a) == 0 or len(b) == 0:
        return out, steps
    da, db = max_degrees(a), max_degrees(b)
    # blocks of (a graphs) x (b graphs) holding about GROUP_ENTRIES product nodes: small enough
    # for the caches (on NCI1 4x faster than 16 times more), large enough that the Python loop
    # over label pairs stays cheap; the share of node pairs with equal labels sets the side
    la, lb = _labels(a, use_labels), _labels(b, use_labels)
    both = np.union1d(la, lb)
    pa = np.bincount(np.searchsorted(both, la), minlength=len(both)) / max(1, len(la))
    pb = np.bincount(np.searchsorted(both, lb), minlength=len(both)) / max(1, len(lb))
    share = max(float(pa @ pb), 1e-6)
    side = int(np.clip(np.sqrt(GROUP_ENTRIES / share), 256, 16384))
    groups_a = _groups(a.nodes_per_graph, side)
    groups_b = _groups(b.nodes_per_graph, side)
    sides_b = [_Side(b[lo:hi], _labels(b[lo:hi], use_labels), use_edge_labels) for lo, hi in groups_b]
    for lo, hi in groups_a:
        side_a = _Side(a[lo:hi], _labels(a[lo:hi], use_labels), use_edge_labels)
        for (blo, bhi), side_b in zip(groups_b, sides_b):
            vals, st = _product_block(side_a, side_b, da[lo:hi], db[blo:bhi], series)
            out[lo:hi, blo:bhi] = vals
            steps = max(steps, st)
    return out, steps


def _labels(g: GraphBatch, use_labels: bool) -> np.ndarray:
    if use_labels and g.node_labels is not None:
        return g.node_labels.astype(np.int64)
    return np.zeros(g.n_nodes, dtype=np.int64)


class _Side:
    """One side of a block of graph pairs: its nodes sorted by (label, node), the blocks
    ``A[l, l']`` of its adjacency (per edge label) and per-label graph indicators."""

    def __init__(self, g: GraphBatch, labels: np.ndarray, use_edge_labels: bool) -> None:
        self.n_graphs = len(g)
        keep = np.unique(labels)
        order = np.argsort(labels, kind="stable")
        self.order = order
        lab = labels[order]
        self.bounds = {int(v): (int(i), int(j)) for v, i, j in zip(
            keep, np.searchsorted(lab, keep, side="left"), np.searchsorted(lab, keep, side="right"))}
        rank = np.empty(g.n_nodes, dtype=np.int64)
        rank[order] = np.arange(len(order))
        e = g.global_edges
        elab = (g.edge_labels if (use_edge_labels and g.edge_labels is not None) else
                np.zeros(g.n_edges, dtype=np.int64))
        from gramdist.graphs import symmetric_csr

        # {edge label: adjacency over the kept nodes in sorted order}, then its label blocks
        self.blocks: dict = {}
        for el in np.unique(elab) if len(elab) else []:
            sel = e[elab == el]
            m = symmetric_csr(np.stack([rank[sel[:, 0]], rank[sel[:, 1]]], axis=1), len(order))
            for l1, (i0, i1) in self.bounds.items():
                rows = m[i0:i1]
                if rows.nnz == 0:
                    continue
                for l2 in np.unique(lab[rows.indices]).tolist():  # labels the rows reach
                    j0, j1 = self.bounds[l2]
                    blk = rows[:, j0:j1]
                    if blk.nnz:
                        blk.sort_indices()
                        self.blocks[(l1, l2, int(el))] = blk.tocsr()
        graph = g.node_graph[order]
        self.ind = {lab_: _indicator_cols(graph[i0:i1], len(g)) for lab_, (i0, i1) in self.bounds.items()}


def _spmm_add(m: sp.csr_matrix, x: np.ndarray, out: np.ndarray) -> None:
    """``out += m @ x`` in place (C-contiguous float64 ``x`` and ``out``), through SciPy's own
    ``csr_matvecs`` kernel (what ``m @ x`` runs, without its per-call overhead and temporary):
    each output entry adds its products in the CSR order of its row."""
    _csr_matvecs(m.shape[0], m.shape[1], x.shape[1], m.indptr, m.indices, m.data, x.ravel(), out.ravel())


def _indicator_cols(graph_of_col: np.ndarray, n_graphs: int) -> sp.csr_matrix:
    """(n_graphs, len(graph_of_col)) CSR with a one at (graph, column), columns in order."""
    n = len(graph_of_col)
    order = np.argsort(graph_of_col, kind="stable")
    indptr = group_offsets(graph_of_col, n_graphs)
    return sp.csr_matrix((np.ones(n), order.astype(np.int64), indptr), shape=(n_graphs, n))


def _product_block(side_a: _Side, side_b: _Side, da: np.ndarray, db: np.ndarray,
                   series: Series) -> tuple[np.ndarray, int]:
    """The series for every pair (a graph of side a, a graph of side b) at once, on label blocks.

    ``x[l]`` is the block of label ``l``. One step is ``sum_l' A[l, l'] X_l' A'[l', l]``: a
    sparse product from the left, one transposed copy, a sparse product from the left again —
    so the blocks alternate between the (a, b) and (b, a) orientations and SciPy never
    multiplies a non-contiguous array. Labels and label pairs are visited in sorted order; one
    that a pair's graphs lack adds exact zeros to its entries, and a pair's entries only ever
    meet its own graphs' nodes, so its arithmetic ignores the rest of the group.
    """
    kind, lam, p, tol, max_iter = series.kind, series.lam, series.p, series.tol, series.max_iter
    blocks = _LabelBlocks.of(side_a, side_b)
    x = {lab: np.ones(blocks.size(0, lab)) for lab in blocks.labels}
    o = 0
    total = blocks.pair_sums(x, o)
    if kind == "p_step" and p == 0:
        return total, 0
    r = lam * da[:, None].astype(np.float64) * db[None, :].astype(np.float64)
    done = np.zeros(total.shape, dtype=bool)
    result = np.zeros(total.shape)
    t = 0
    while True:
        t += 1
        x = blocks.step(x, o, lam if kind != "exponential" else lam / t)
        o = 1 - o
        term = blocks.pair_sums(x, o)
        total = total + term
        if kind == "p_step":
            if t == p:
                return total, t
            continue
        stop = ~done & (_tail_bound(kind, term, r, t) <= tol * total)
        result[stop] = total[stop]
        done |= stop
        if done.all():
            return result, t
        if t >= max_iter:
            raise RuntimeError(f"random walk series did not reach tol={tol} in max_iter={max_iter} steps")


def _tail_bound(kind: str, term: np.ndarray, r: np.ndarray, t: int) -> np.ndarray:
    """A bound on what the terms after step ``t`` add to each pair's sum: a geometric tail
    with ratio ``r`` (λ times the degree bounds), or, for the exponential series, the same
    with ratio r / (t + 1) where it is at most 1/2 (infinite elsewhere: keep going)."""
    if kind == "geometric":
        with np.errstate(divide="ignore", invalid="ignore"):
            return term * (r / (1.0 - r))
    q = r / (t + 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(q <= 0.5, term * (q / (1.0 - q)), np.inf)


@dataclass
class _LabelBlocks:
    """The two sides' label blocks as :func:`_product_block` walks them: the labels both have,
    and for each label the (label, edge label) steps with edges on both sides, sorted."""

    sides: list[_Side]
    labels: list[int]
    steps_of: dict[int, list[tuple[int, int]]]

    @classmethod
    def of(cls, side_a: _Side, side_b: _Side) -> _LabelBlocks:
        labels = sorted(set(side_a.bounds) & set(side_b.bounds))
        steps_of = {l1: [(l2, el) for (x1, l2, el) in sorted(side_a.blocks) if x1 == l1
                         and (l1, l2, el) in side_b.blocks] for l1 in labels}
        return cls([side_a, side_b], labels, steps_of)

    def size(self, o: int, lab: int) -> tuple[int, int]:
        """Shape of label ``lab``'s block in orientation ``o`` (side o's nodes, the other's)."""
        i0, i1 = self.sides[o].bounds[lab]
        j0, j1 = self.sides[1 - o].bounds[lab]
        return i1 - i0, j1 - j0

    def pair_sums(self, x: dict, o: int) -> np.ndarray:
        """(graphs of side a, graphs of side b): each pair's sum over its nodes of blocks ``x``."""
        na, nb = self.sides[0].n_graphs, self.sides[1].n_graphs
        total = np.zeros((nb, na) if o == 0 else (na, nb))  # (graphs of 1-o, graphs of o)
        for lab in self.labels:
            ind_o = self.sides[o].ind[lab]
            rows = np.zeros((ind_o.shape[0], x[lab].shape[1]))
            _spmm_add(ind_o, x[lab], rows)                        # sums over side o's nodes
            _spmm_add(self.sides[1 - o].ind[lab], np.ascontiguousarray(rows.T), total)
        return total.T if o == 0 else total

    def step(self, x: dict, o: int, coef: float) -> dict:
        """One walk step ``coef · sum_l' A[l, l'] X_l' A'[l', l]`` of blocks in orientation
        ``o``; the result is in orientation ``1 - o``."""
        y = {}
        for lab in self.labels:
            acc = np.zeros(self.size(1 - o, lab))
            for l2, el in self.steps_of[lab]:
                left = self.sides[o].blocks[(lab, l2, el)]
                z = np.zeros((left.shape[0], x[l2].shape[1]))
                _spmm_add(left, x[l2], z)                                       # A_o[l, l'] X_l'
                _spmm_add(self.sides[1 - o].blocks[(lab, l2, el)], np.ascontiguousarray(z.T), acc)  # += A_1-o[l, l'] (.)^T
            acc *= coef
            y[lab] = acc
        return y


def _indicator(offsets: np.ndarray) -> sp.csr_matrix:
    """(G, offsets[-1]) CSR with ones at (g, i) for offsets[g] <= i < offsets[g+1]."""
    offsets = np.asarray(offsets, dtype=np.int64)
    n = int(offsets[-1] - offsets[0])
    return sp.csr_matrix((np.ones(n), np.arange(n, dtype=np.int64), offsets - offsets[0]),
                         shape=(len(offsets) - 1, n))


def _groups(sizes: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive (lo, hi) graph ranges whose summed ``sizes`` stay within ``budget`` (>= 1 graph)."""
    out, lo, acc = [], 0, 0
    for i, s in enumerate(np.asarray(sizes).tolist()):
        if i > lo and acc + s > budget:
            out.append((lo, i))
            lo, acc = i, 0
        acc += s
    if lo < len(sizes):
        out.append((lo, len(sizes)))
    return out


__all__ = ["WalkFeatures", "walk_features", "series_terms", "SpectralEmbedding", "spectral_pairwise", "Series",
           "product_pairwise", "max_degrees", "BLOCK_ENTRIES", "GROUP_ENTRIES"]
