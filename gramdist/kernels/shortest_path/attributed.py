"""Shortest-path kernel on numerical node attributes (Borgwardt & Kriegel, ICDM 2005), ``sp_attr``.

Definition
----------
With ``P(G)`` the ordered node pairs ``(u, v)``, ``u != v``, joined by a path, and ``d`` their
hop distance, the kernel compares every shortest path of one graph with every one of the
other (Borgwardt & Kriegel's ``k_walk`` on edges of the shortest-path graphs):

    k(G, G') = Σ_{(u,v) ∈ P(G)} Σ_{(u',v') ∈ P(G')} k_n(u, u') · k_n(v, v') · k_l(d(u,v), d'(u',v'))

* node kernel ``k_n`` on the attribute vectors ``x``: ``gaussian`` ``exp(-gamma·‖x - x'‖²)`` or
  ``linear`` ``<x, x'>``; with ``with_labels`` (default) and graphs that have discrete labels,
  times the delta kernel on the labels, ``δ(label(u), label(u'))`` (the DM paper's Table 3 uses
  the categorical and the numerical attributes together);
* length kernel ``k_l``: ``delta`` ``[d = d']``, or the Brownian bridge kernel
  ``brownian`` ``max(0, c - |d - d'|)`` of the paper (integer ``c >= 1``; ``c = 1`` is the delta).

With ``h >= 1`` the kernel is the Weisfeiler–Lehman framework (Shervashidze et al., JMLR 2011)
over this base kernel, as :mod:`.wlsp` is over :mod:`.sp`: ``Σ_{i=0..h} k(G_i, G'_i)``, where
``G_i`` carries the WL labels of iteration ``i`` (:func:`gramdist.kernels.relabel.wl_labels`;
``G_0`` the original labels) in the delta factor of ``k_n``, and the attributes unchanged. The
DM paper's Table 3 has a "WLSP" row on attributed graphs without saying how it combines them
(its hash-and-check of WLSP "fails" with attributes); this is our reading: WL refines the
discrete labels only (graphs without them start from one label, as in :mod:`.wlsp`), the
attributes enter through ``k_n`` at every iteration. ``h = 0``
(default) is the plain kernel above, with the same values and features as before ``h``.

This is the kernel of the DM paper's Table 3 "SP" row and of GraKeL's ``ShortestPathAttr``
(which has ``k_n = metric`` on the attribute vectors, default the dot product, ``k_l`` delta,
no labels): with ``with_labels: false`` and ``length_kernel: delta`` our values equal GraKeL's
for the same node kernel (``tests/test_sp_attr.py``, to rounding).

Same conventions as :mod:`.sp`: ordered pairs (each unordered path counted under both
orientations, as GraKeL), no ``u = v``, no pairs in different components, hop distances by BFS,
edge labels and attributes unused. Graphs without node attributes cannot be used: ``embed``
raises :class:`~gramdist.errors.JobError`. Graphs without discrete labels: ``with_labels``
has no effect. ``standardize: true`` centres and scales each attribute column by its mean and
standard deviation over the fit sample (stored in the state) before the node kernel;
default ``false`` (raw attributes, as GraKeL).

How it is computed
------------------
* ``linear`` has a finite feature map, so the kernel is explicit (``feature_vectors`` works):
  ``k_n(u,u')·k_n(v,v') = <x_u ⊗ x_v, x_u' ⊗ x_v'>`` and the Brownian bridge on integers is
  the sum of ``c`` box windows (``max(0, c - |d - d'|) = #{t : d, d' ∈ [t, t+c-1]}``), so the
  features are ``M[a, b, t] = Σ_{(u,v): label a, b, d ∈ [t, t+c-1]} x_u ⊗ x_v`` (``p²`` values per
  (label pair, window), ``p`` attributes), keyed by hashes of ``(a, b, t, i, j)``.
* ``gaussian`` has none; ``pairwise`` avoids the naive O(n²·n'²) double loop over pairs:
  with ``K`` the n × n' node-kernel matrix, ``B_d`` the n × n indicator of pairs at distance
  ``d`` and ``W'_d = Σ_d' k_l(d, d') B'_d'``,

      k(G, G') = Σ_d Σ_{u,u'} K[u,u'] · (B_d K W'_d^T)[u,u'],

  which costs O(n·n'·(n + c·n') + diam·n·n') per pair of graphs instead of O(n²·n'²) —
  e.g. 32-node ENZYMES graphs: ~8·10^4 multiply-adds instead of 10^6. It runs vectorised for
  one graph of a tile's rows against all graphs of its columns (sparse block-diagonal
  ``W'_d``), with every sum in a fixed order (sparse CSR products, row loops), so an entry is
  bitwise independent of the other graphs in the tile; ``K(a, b)`` and ``K(b, a)`` may differ
  in the last bit (different order of the same sums).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import group_offsets
from gramdist.graphs import GraphBatch
from gramdist.kernels.allpairs import count_codes, local_codes, pair_pieces
from gramdist.kernels.base import (
    DerivedCache,
    GraphKernel,
    KernelState,
    check_int,
    check_param,
    check_real,
    node_attributes,
)
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.relabel import wl_labels
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms

TAG_ATTR = tag("sp_attr.linear")
TAG_ATTR_WL = tag("sp_attr.linear.wl")


def _segment_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Sum of each segment ``values[indptr[i]:indptr[i+1]]`` added left to right (CSR mat-vec)."""
    m = sp.csr_matrix((values, np.zeros(len(values), dtype=np.int64), indptr), shape=(len(indptr) - 1, 1))
    return np.asarray(m @ np.ones(1), dtype=np.float64).ravel()


@dataclass(eq=False)
class PathSets(DerivedCache):
    """``sp_attr``'s embedding for the Gaussian node kernel: each graph's nodes and distance pairs.

    ``node_ptr`` (G+1,) node offsets; ``x`` (N, p) attributes (standardised if asked);
    ``labels`` (N,) int64 (zeros without labels), or (N, h + 1) with ``h >= 1`` (the WL labels
    of each iteration); ``pair_ptr`` (G+1,) offsets of each graph's
    pairs in ``pu``, ``pv`` (local node indices, int32) and ``pd`` (distance, int32), which are
    sorted by graph, then distance, then ``u``, then ``v``.
    """

    node_ptr: np.ndarray
    x: np.ndarray
    labels: np.ndarray
    pair_ptr: np.ndarray
    pu: np.ndarray
    pv: np.ndarray
    pd: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.node_ptr) - 1

    def __getitem__(self, key: slice) -> PathSets:
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise IndexError("PathSets supports contiguous slices only")
        stop = max(stop, start)
        n0, n1 = self.node_ptr[start], self.node_ptr[stop]
        p0, p1 = self.pair_ptr[start], self.pair_ptr[stop]
        return PathSets(self.node_ptr[start : stop + 1] - n0, self.x[n0:n1].copy(), self.labels[n0:n1].copy(),
                        self.pair_ptr[start : stop + 1] - p0, self.pu[p0:p1].copy(), self.pv[p0:p1].copy(),
                        self.pd[p0:p1].copy())

    def block_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """All pairs with global node indices, sorted by distance (stable): (d, u, v, d_starts)."""
        if "block" not in self._cache:
            g = np.repeat(np.arange(len(self)), np.diff(self.pair_ptr))
            u = self.pu.astype(np.int64) + self.node_ptr[g]
            v = self.pv.astype(np.int64) + self.node_ptr[g]
            order = np.argsort(self.pd, kind="stable")
            d = self.pd[order].astype(np.int64)
            dmax = int(d[-1]) if len(d) else 0
            starts = np.searchsorted(d, np.arange(dmax + 2))
            self._cache["block"] = (d, u[order], v[order], starts)
        return self._cache["block"]


class ShortestPathAttrKernel(GraphKernel):
    """Shortest-path kernel on node attributes: node kernel on the endpoints × length kernel.

    Parameters
    ----------
    node_kernel : {"gaussian", "linear"}, default "gaussian"
        Kernel on the endpoints' attribute vectors (``linear`` gives explicit features).
    gamma : float, default 1.0
        Gaussian width: ``exp(-gamma·‖x - x'‖²)``.
    length_kernel : {"delta", "brownian"}, default "delta"
        Kernel on the path lengths; ``brownian`` is ``max(0, c - |d - d'|)``.
    c : int, default 3
        Brownian bridge constant (integer >= 1).
    with_labels : bool, default True
        Multiply the node kernel by the delta kernel on discrete node labels (when present).
    standardize : bool, default False
        Standardise each attribute by its mean / std over the fit sample.
    h : int, default 0
        WL relabelling iterations of the discrete labels: the kernel sums over the labels of
        iterations 0..h (WL shortest path on attributes; needs ``with_labels``).
    """

    name = "sp_attr"
    uses_node_attributes = True
    later_params = {"h": 0}

    def __init__(self, node_kernel: str = "gaussian", gamma: float = 1.0, length_kernel: str = "delta",
                 c: int = 3, with_labels: bool = True, standardize: bool = False, h: int = 0) -> None:
        self.node_kernel = node_kernel
        self.gamma = gamma
        self.length_kernel = length_kernel
        self.c = c
        self.with_labels = with_labels
        self.standardize = standardize
        self.h = h

    @property
    def has_feature_vectors(self) -> bool:  # type: ignore[override]
        return self.node_kernel == "linear"

    def validate(self) -> None:
        n = self.name
        check_param(self.node_kernel in ("gaussian", "linear"), n, "node_kernel",
                    f"must be gaussian or linear, got {self.node_kernel!r}")
        check_real(self.gamma, n, "gamma", 0, lo_open=True)
        check_param(self.length_kernel in ("delta", "brownian"), n, "length_kernel",
                    f"must be delta or brownian, got {self.length_kernel!r}")
        check_int(self.c, n, "c", 1, 1000)
        check_param(isinstance(self.with_labels, bool), n, "with_labels", f"must be true or false, got {self.with_labels!r}")
        check_param(isinstance(self.standardize, bool), n, "standardize",
                    f"must be true or false, got {self.standardize!r}")
        check_int(self.h, n, "h", 0, 20)
        check_param(self.h == 0 or self.with_labels, n, "h",
                    "refines the discrete labels: it needs with_labels: true")

    @property
    def _window(self) -> int:
        return self.c if self.length_kernel == "brownian" else 1

    # ------------------------------------------------------------ state
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        x = node_attributes(graphs, self.name)
        arrays: dict[str, np.ndarray] = {}
        if self.standardize:
            mean = x.mean(axis=0) if len(x) else np.zeros(x.shape[1])
            std = x.std(axis=0) if len(x) else np.ones(x.shape[1])
            arrays["attr_mean"] = mean
            arrays["attr_scale"] = np.where(std > 0, std, 1.0)
        return KernelState(arrays=arrays, attrs={"fit_graphs": len(graphs), "n_attributes": int(x.shape[1])})

    def _prepared(self, graphs: GraphBatch, state: KernelState) -> tuple[np.ndarray, np.ndarray]:
        x = node_attributes(graphs, self.name, fitted_dim=state.attrs.get("n_attributes"))
        if "attr_mean" in state.arrays:
            x = (x - state.arrays["attr_mean"]) / state.arrays["attr_scale"]
        x = np.ascontiguousarray(x, dtype=np.float64)
        if self.h > 0:  # (N, h + 1): the WL labels of iterations 0..h, as int64
            return x, np.stack(wl_labels(graphs, self.h), axis=1).view(np.int64)
        use_labels = self.with_labels and graphs.node_labels is not None
        labels = graphs.node_labels if use_labels else np.zeros(graphs.n_nodes, np.int64)
        return x, labels

    # ------------------------------------------------------------ embed
    def embed(self, graphs: GraphBatch, state: KernelState) -> PathSets | SparseFeatures:
        x, labels = self._prepared(graphs, state)
        if self.node_kernel == "linear":
            return self._linear_features(graphs, x, labels)
        return self._path_sets(graphs, x, labels)

    def _path_sets(self, graphs: GraphBatch, x: np.ndarray, labels: np.ndarray) -> PathSets:
        starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
        gs, us, vs, ds = [], [], [], []
        for piece in pair_pieces(graphs):
            gs.append(piece.graph)
            us.append(piece.u - starts[piece.graph])
            vs.append(piece.v - starts[piece.graph])
            ds.append(piece.d)
        if gs:
            g, u, v, d = (np.concatenate(a) for a in (gs, us, vs, ds))
        else:
            g = u = v = d = np.zeros(0, np.int64)
        order = np.lexsort((v, u, d, g))
        pair_ptr = group_offsets(g, len(graphs))
        node_ptr = graphs.node_offsets - graphs.node_offsets[0]
        return PathSets(node_ptr, x, np.asarray(labels, np.int64), pair_ptr, u[order].astype(np.int32),
                        v[order].astype(np.int32), d[order].astype(np.int32))

    def _linear_features(self, graphs: GraphBatch, x: np.ndarray, labels: np.ndarray) -> SparseFeatures:
        """Explicit features M[a, b, t][i, j] = Σ x_u[i]·x_v[j] over pairs in window t, of every
        labelling: features of different WL iterations have different keys, so their sum is
        the WL sum."""
        pieces = [p for it, labelling in enumerate(_labellings(labels))
                  for p in self._linear_pieces(graphs, x, labelling, it)]
        if not pieces:
            return SparseFeatures.empty(len(graphs))
        rows, keys, vals = (np.concatenate(col) for col in zip(*pieces))
        return SparseFeatures.from_pairs(rows, keys, vals, len(graphs))

    def _linear_pieces(self, graphs: GraphBatch, x: np.ndarray, labels: np.ndarray,
                       iteration: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(graph, key, value) columns of :meth:`_linear_features` for one labelling; keys of WL
        iteration ``i >= 1`` also hash ``i`` (keys of iteration 0 are formed as without WL)."""
        p = x.shape[1]
        w = self._window
        code, n_codes, table = local_codes(graphs, labels)
        cum = np.concatenate([[0], np.cumsum(n_codes)])
        sizes = graphs.nodes_per_graph
        n_win = sizes + w  # window starts t in 0..n+w-1 after the shift below
        space = n_codes * n_codes * n_win
        pieces = []
        for piece in pair_pieces(graphs):
            L = n_codes[piece.graph]
            nw = n_win[piece.graph]
            for shift in range(w):  # window start t = d - shift, stored as t + w - 1 >= 0
                t = piece.d - shift + (w - 1)
                c = (code[piece.u] * L + code[piece.v]) * nw + t
                g, cc, _ = count_codes(piece.graph, c, space)
                # positions of each pair's group among the distinct groups of the piece
                bounds = np.flatnonzero(np.diff(piece.graph)) + 1
                first = np.concatenate([[0], bounds])
                gsu = piece.graph[first]
                off = np.concatenate([[0], np.cumsum(space[gsu])])
                pos = np.repeat(np.arange(len(gsu)), np.diff(np.append(first, len(piece.graph))))
                comb = off[pos] + c
                gpos = np.searchsorted(gsu, g)
                distinct = off[gpos] + cc
                grp = np.searchsorted(distinct, comb)
                xu = x[piece.u]
                xv = x[piece.v]
                block = np.empty((len(distinct), p, p))
                for i in range(p):
                    for j in range(p):
                        block[:, i, j] = np.bincount(grp, weights=xu[:, i] * xv[:, j], minlength=len(distinct))
                Lg, nwg = n_codes[g], n_win[g]
                tt = cc % nwg - (w - 1)
                q = cc // nwg
                la = table[cum[g] + q // Lg]
                lb = table[cum[g] + q % Lg]
                base = (combine(TAG_ATTR, la, lb, tt) if iteration == 0
                        else combine(TAG_ATTR_WL, np.uint64(iteration), la, lb, tt))
                ii, jj = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
                k = combine(base[:, None], (ii * p + jj).ravel()[None, :])
                pieces.append((np.repeat(g, p * p), k.ravel(), block.reshape(len(distinct), p * p).ravel()))
        return pieces

    # ------------------------------------------------------------ kernel values
    def feature_vectors(self, emb: SparseFeatures, state: KernelState) -> SparseFeatures:
        if not isinstance(emb, SparseFeatures):
            raise NotImplementedError("sp_attr has explicit features only with node_kernel: linear")
        return emb

    def pairwise(self, a: PathSets | SparseFeatures, b: PathSets | SparseFeatures, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return dot(a, b)
        return self._gaussian_block(a, b)

    def self_similarity(self, a: PathSets | SparseFeatures, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return sq_norms(a)
        return np.array([self._gaussian_block(a[i : i + 1], a[i : i + 1])[0, 0] for i in range(len(a))])

    def _attribute_kernel(self, xa: np.ndarray, xb: np.ndarray) -> np.ndarray:
        """(len(xa), len(xb)) Gaussian values, each entry by the same elementwise arithmetic."""
        sq = np.zeros((len(xa), len(xb)))
        for j in range(xa.shape[1]):  # one attribute at a time: a fixed order of the sum
            diff = xa[:, j, None] - xb[None, :, j]
            sq += diff * diff
        return np.exp(-float(self.gamma) * sq)

    def _gaussian_block(self, a: PathSets, b: PathSets) -> np.ndarray:
        out = np.zeros((len(a), len(b)))
        nb = int(b.node_ptr[-1])
        if len(a) == 0 or len(b) == 0 or nb == 0:
            return out
        bd, bu, bv, bstarts = b.block_pairs()
        bmax = len(bstarts) - 2
        w = self._window
        weights = {}  # d -> CSR (nb x nb) of Σ_d' k_l(d, d') B'_d' over b's graphs (block diagonal)

        def wmat(d: int) -> sp.csr_matrix:
            if d not in weights:
                lo, hi = max(d - w + 1, 1), min(d + w - 1, bmax)
                if lo > hi:
                    weights[d] = None
                    return None
                s, e = bstarts[lo], bstarts[hi + 1]
                val = (w - np.abs(bd[s:e] - d)).astype(np.float64)
                m = sp.csr_matrix((val, (bu[s:e], bv[s:e])), shape=(nb, nb))
                m.sum_duplicates()
                m.sort_indices()
                weights[d] = m
            return weights[d]

        col_graph_ptr = b.node_ptr
        b_labels = _labellings(b.labels)
        for i in range(len(a)):
            n0, n1 = a.node_ptr[i], a.node_ptr[i + 1]
            p0, p1 = a.pair_ptr[i], a.pair_ptr[i + 1]
            if p1 == p0:
                continue
            n = int(n1 - n0)
            gauss = self._attribute_kernel(a.x[n0:n1], b.x)  # (n, nb)
            pd, pu, pv = a.pd[p0:p1], a.pu[p0:p1], a.pv[p0:p1]
            dvals = np.unique(pd)
            dstart = np.searchsorted(pd, dvals)
            dend = np.searchsorted(pd, dvals, side="right")
            steps = []  # (W'_d, B_d) of each distance of this graph that b's graphs have
            for d, s, e in zip(dvals.tolist(), dstart.tolist(), dend.tolist()):
                if (wm := wmat(d)) is not None:
                    bmat = sp.csr_matrix((np.ones(e - s), pv[s:e].astype(np.int64), _row_ptr(pu[s:e], n)), shape=(n, n))
                    steps.append((wm, bmat))
            total = np.zeros(len(b))
            for la, lb in zip(_labellings(a.labels[n0:n1]), b_labels):  # WL iterations 0..h, in order
                k = gauss * (la[:, None] == lb[None, :]) if self.with_labels else gauss
                total += _segment_sums(_paths_against(k, steps, nb), col_graph_ptr)
            out[i] = total
        return out


def _labellings(labels: np.ndarray) -> list[np.ndarray]:
    """The (N,) labels of each WL iteration: one labelling, or a column of (N, h + 1) each."""
    return [labels] if labels.ndim == 1 else [labels[:, it] for it in range(labels.shape[1])]


def _paths_against(k: np.ndarray, steps: list[tuple[sp.csr_matrix, sp.csr_matrix]], nb: int) -> np.ndarray:
    """(nb,) Σ_d Σ_u K[u, u'] · (B_d K W'_d^T)[u, u'] for one graph's rows of the node kernel
    ``k`` (n, nb), with ``steps`` its (W'_d, B_d) per distance; every sum in a fixed order."""
    kt = np.ascontiguousarray(k.T)
    acc = np.zeros(nb)
    for wm, bmat in steps:
        q = np.ascontiguousarray((wm @ kt).T)  # (n, nb): Σ_v' K[v, v'] W'[u', v']
        t = bmat @ q  # (n, nb): Σ_v B_d[u, v] Q[v, u']
        prod = k * t
        col = prod[0].copy()
        for r in range(1, len(k)):  # column sums over u in a fixed order
            col += prod[r]
        acc += col
    return acc


def _row_ptr(rows: np.ndarray, n: int) -> np.ndarray:
    """CSR row pointer of ``n`` rows from sorted row indices."""
    ptr = group_offsets(rows, n)
    return ptr


__all__ = ["ShortestPathAttrKernel", "PathSets"]
