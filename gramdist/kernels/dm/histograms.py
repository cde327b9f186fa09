"""Sparse multi-resolution histograms of the DM kernel and their exact tile-wide matching.

The VG kernel (Definition 4.2) telescopes into a weighted histogram intersection:

    k_vg(G1, G2) = sum_bins (w_bin - w_parent(bin)) * min(H1[bin], H2[bin])

(Theorem 4.3's rewriting; ``w_parent = 0`` at the root), and the DM kernel sums this over the
pyramids of iterations r = 0..h. Every bin id is global over all pyramids, so a graph's
whole embedding is one histogram over all bins. It is stored in two parts:

* **dense** bins (levels 0 and 1 of every pyramid: at most ``1 + b`` per iteration, and
  nearly every graph has most of them): a ``(G, n_dense)`` count matrix. A tile adds
  ``c_j * minimum.outer(Ha[:, j], Hb[:, j])`` bin by bin, in a fixed bin order.
* **sparse** bins (levels >= 2): integer counts expand into threshold indicators, since
  ``min(x, y) = sum_{k >= 1} [x >= k][y >= k]``. Feature ``(bin, k)`` has column
  ``sparse_index(bin) * k_cap + k - 1`` for ``k <= k_cap``; a tile is the sparse product
  ``Phi_a diag(c) Phi_b^T`` (SciPy's row-by-row Gustavson product), whose cost per pair is
  the number of shared thresholds, never the number of bins. Counts above ``k_cap`` (only
  in very large graphs) keep their excess ``min(x, y) - k_cap`` in a short overflow list
  matched by a sorted join.

Exactness and tile invariance: counts are integers, every product is ``c * 1.0`` or
``c * min(...)`` (one rounding), and each of the three partial sums of a pair is accumulated
in ascending bin (then threshold) order whatever other graphs share the tile; absent bins
contribute nothing or an exact ``+0.0``. :func:`self_match` reproduces the same operations
in the same order, so ``K(g, g)`` equals the tile diagonal bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import group_offsets

try:  # the Gustavson product kernel behind scipy.sparse's matmul (see _threshold_product)
    from scipy.sparse._sparsetools import csr_matmat as _csr_matmat
except ImportError:  # pragma: no cover - depends on the SciPy build
    _csr_matmat = None

#: threshold indicators kept per sparse bin; higher counts go to the overflow list
K_CAP = 32


@dataclass
class BinLayout:
    """Which bins are dense/sparse and their match coefficients ``c = w - w_parent``.

    dense_bins (n_dense,) int64   global ids of dense bins, in column order
    dense_col  (B,) int64         column of each bin in the dense block, -1 if sparse
    sparse_col (B,) int64         sparse index of each bin, -1 if dense
    dense_coef (n_dense,) float64 c of the dense bins
    sparse_coef (n_sparse,)       c of the sparse bins
    """

    dense_bins: np.ndarray
    dense_col: np.ndarray
    sparse_col: np.ndarray
    dense_coef: np.ndarray
    sparse_coef: np.ndarray

    @classmethod
    def from_pyramid(cls, level: np.ndarray, coef: np.ndarray, dense_levels: int = 2) -> BinLayout:
        dense = level < dense_levels
        dense_bins = np.flatnonzero(dense)
        sparse_bins = np.flatnonzero(~dense)
        dense_col = np.full(len(level), -1, dtype=np.int64)
        dense_col[dense_bins] = np.arange(len(dense_bins))
        sparse_col = np.full(len(level), -1, dtype=np.int64)
        sparse_col[sparse_bins] = np.arange(len(sparse_bins))
        return cls(dense_bins, dense_col, sparse_col, coef[dense_bins], coef[sparse_bins])

    @property
    def n_sparse(self) -> int:
        return len(self.sparse_coef)


@dataclass
class Histograms:
    """Per-graph multi-resolution histograms of a chunk (one row per graph); sliceable.

    dense        (G, n_dense) float64   counts in the dense bins
    thr_indptr   (G+1,) int64           row pointers into thr_cols
    thr_cols     (T,) int32             threshold columns, ascending within a row
    over_indptr  (G+1,) int64           row pointers into the overflow list
    over_sparse  (M,) int64             sparse index of an overflowing bin (ascending per row)
    over_excess  (M,) int64             count - k_cap (> 0)
    """

    dense: np.ndarray
    thr_indptr: np.ndarray
    thr_cols: np.ndarray
    over_indptr: np.ndarray
    over_sparse: np.ndarray
    over_excess: np.ndarray

    def __len__(self) -> int:
        return len(self.dense)

    def __getitem__(self, key: slice) -> Histograms:
        if not isinstance(key, slice):
            raise TypeError("Histograms supports slicing only")
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise ValueError("Histograms slices must be contiguous")
        stop = max(stop, start)
        t0, t1 = self.thr_indptr[start], self.thr_indptr[stop]
        o0, o1 = self.over_indptr[start], self.over_indptr[stop]
        return Histograms(
            dense=self.dense[start:stop].copy(),
            thr_indptr=self.thr_indptr[start : stop + 1] - t0,
            thr_cols=self.thr_cols[t0:t1].copy(),
            over_indptr=self.over_indptr[start : stop + 1] - o0,
            over_sparse=self.over_sparse[o0:o1].copy(),
            over_excess=self.over_excess[o0:o1].copy(),
        )

    @classmethod
    def build(cls, node_graph: np.ndarray, n_graphs: int, nodes_per_graph: np.ndarray,
              bins: list[np.ndarray], roots: np.ndarray, layout: BinLayout, k_cap: int = K_CAP) -> Histograms:
        """Histograms from the bins of every node.

        ``bins[r]`` is the (N, t-1) array of bins of the nodes at levels 1..t-1 of pyramid r
        (from :func:`~gramdist.kernels.dm.pyramid.descend`); the root bin ``roots[r]`` holds
        all ``nodes_per_graph`` descriptors.
        """
        n_dense = len(layout.dense_bins)
        dense = np.zeros((n_graphs, n_dense), dtype=np.float64)
        dense[:, layout.dense_col[roots]] = nodes_per_graph[:, None].astype(np.float64)
        all_bins = np.concatenate([b.ravel() for b in bins]) if bins else np.zeros(0, np.int64)
        owner = np.concatenate([np.repeat(node_graph, b.shape[1]) for b in bins]) if bins else all_bins
        dcol = layout.dense_col[all_bins]
        is_dense = dcol >= 0
        if is_dense.any():
            flat = np.bincount(owner[is_dense] * n_dense + dcol[is_dense], minlength=n_graphs * n_dense)
            dense += flat.reshape(n_graphs, n_dense)
        key = owner[~is_dense] * layout.n_sparse + layout.sparse_col[all_bins[~is_dense]]
        span = n_graphs * layout.n_sparse
        if span <= 8 * len(key) + 2**20:  # a counting sort beats sorting the keys
            flat = np.bincount(key, minlength=span)
            keys = np.flatnonzero(flat)
            counts = flat[keys]
        else:
            keys, counts = np.unique(key, return_counts=True)  # sorted: graph-major, then bin
        g = keys // max(layout.n_sparse, 1)
        s = keys % max(layout.n_sparse, 1)
        # threshold columns s * k_cap + (k - 1), k = 1..min(count, k_cap), row-major ascending
        rep = np.minimum(counts, k_cap)
        starts = np.repeat(s * k_cap - (np.cumsum(rep) - rep), rep)
        thr_cols = (np.arange(int(rep.sum()), dtype=np.int64) + starts)
        thr_indptr = np.zeros(n_graphs + 1, dtype=np.int64)
        np.cumsum(np.bincount(g, weights=rep, minlength=n_graphs).astype(np.int64), out=thr_indptr[1:])
        over = counts > k_cap
        over_indptr = group_offsets(g[over], n_graphs)
        return cls(
            dense=dense,
            thr_indptr=thr_indptr,
            thr_cols=thr_cols.astype(np.int32 if layout.n_sparse * k_cap < 2**31 else np.int64),
            over_indptr=over_indptr,
            over_sparse=s[over],
            over_excess=counts[over] - k_cap,
        )


def match_tile(a: Histograms, b: Histograms, layout: BinLayout, k_cap: int = K_CAP) -> np.ndarray:
    """(len(a), len(b)) float64 block of sum_bins c_bin * min(Ha[bin], Hb[bin])."""
    na, nb = len(a), len(b)
    dense = np.zeros((na, nb))
    for j, c in enumerate(layout.dense_coef):
        dense += c * np.minimum.outer(a.dense[:, j], b.dense[:, j])
    n_cols = layout.n_sparse * k_cap
    thr = np.zeros((na, nb))
    if len(a.thr_cols) and len(b.thr_cols):
        coef = layout.sparse_coef[a.thr_cols // k_cap]
        thr = _threshold_product(a, b, coef, n_cols)
    over = np.zeros((na, nb))
    if len(a.over_sparse) and len(b.over_sparse):
        over = _overflow_join(a, b, layout.sparse_coef)
    return dense + thr + over


def _threshold_product(a: Histograms, b: Histograms, coef: np.ndarray, n_cols: int) -> np.ndarray:
    """Dense ``Phi_a diag(c) Phi_b^T`` by SciPy's Gustavson kernel, without its counting pass.

    ``scipy.sparse``'s product first counts the output's non-zeros (a full second pass over
    the same triples, ~40 % of the time); the output of a tile is at most ``na * nb`` entries,
    so the buffers are sized for that and the kernel (``csr_matmat``) is called directly. For
    a pair (i, j) it accumulates ``c_k * 1.0`` over the shared threshold columns k of row i in
    ascending order, as the public product does. Falls back to the public product if the
    private kernel is unavailable.
    """
    na, nb = len(a), len(b)
    pb_t = sp.csr_matrix((np.ones(len(b.thr_cols)), b.thr_cols, b.thr_indptr), shape=(nb, n_cols)).tocsc()
    if _csr_matmat is None:  # no private kernel in this SciPy build
        pa = sp.csr_matrix((coef, a.thr_cols, a.thr_indptr), shape=(na, n_cols))
        return (pa @ pb_t.T).toarray()
    big = max(n_cols, na * nb, len(a.thr_cols), len(b.thr_cols)) >= 2**31 - 1
    idx = np.int64 if big else np.int32
    cp = np.empty(na + 1, dtype=idx)
    cj = np.empty(na * nb, dtype=idx)
    cx = np.empty(na * nb, dtype=np.float64)
    _csr_matmat(na, nb, a.thr_indptr.astype(idx, copy=False), a.thr_cols.astype(idx, copy=False), coef,
                pb_t.indptr.astype(idx, copy=False), pb_t.indices.astype(idx, copy=False), pb_t.data, cp, cj, cx)
    out = np.zeros((na, nb))
    nnz = int(cp[-1])
    rows = np.repeat(np.arange(na), np.diff(cp))
    out[rows, cj[:nnz]] = cx[:nnz]
    return out


def self_match(a: Histograms, layout: BinLayout, k_cap: int = K_CAP) -> np.ndarray:
    """(len(a),) float64 diagonal of :func:`match_tile` ``(a, a)``, same arithmetic."""
    n = len(a)
    dense = np.zeros(n)
    for j, c in enumerate(layout.dense_coef):
        dense += c * a.dense[:, j]  # min(x, x) = x
    n_cols = layout.n_sparse * k_cap
    thr = np.zeros(n)
    if len(a.thr_cols):
        coef = layout.sparse_coef[a.thr_cols // k_cap]
        pa = sp.csr_matrix((coef, a.thr_cols, a.thr_indptr), shape=(n, n_cols))
        thr = pa @ np.ones(n_cols)  # csr_matvec: sequential row sums, like the product
    over = np.zeros(n)
    if len(a.over_sparse):
        g = np.repeat(np.arange(n), np.diff(a.over_indptr))
        over = np.bincount(g, weights=layout.sparse_coef[a.over_sparse] * a.over_excess.astype(np.float64),
                           minlength=n)
    return dense + thr + over


def _overflow_join(a: Histograms, b: Histograms, sparse_coef: np.ndarray) -> np.ndarray:
    """Sum over shared overflowing bins of c * min(excess_a, excess_b), in ascending bin order."""
    na, nb = len(a), len(b)
    ga = np.repeat(np.arange(na), np.diff(a.over_indptr))
    gb = np.repeat(np.arange(nb), np.diff(b.over_indptr))
    oa = np.lexsort((ga, a.over_sparse))  # bin-major
    ob = np.lexsort((gb, b.over_sparse))
    sa, ga, ea = a.over_sparse[oa], ga[oa], a.over_excess[oa]
    sb, gb, eb = b.over_sparse[ob], gb[ob], b.over_excess[ob]
    lo = np.searchsorted(sb, sa, side="left")
    n = np.searchsorted(sb, sa, side="right") - lo
    ia = np.repeat(np.arange(len(sa)), n)
    ib = np.arange(int(n.sum())) + np.repeat(lo - (np.cumsum(n) - n), n)
    val = sparse_coef[sa[ia]] * np.minimum(ea[ia], eb[ib]).astype(np.float64)
    # for one pair the entries come in ascending bin order, whatever else is in the tile
    out = np.bincount(ga[ia] * nb + gb[ib], weights=val, minlength=na * nb)
    return out.reshape(na, nb)
