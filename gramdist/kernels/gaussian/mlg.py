"""Feature-space Laplacian (FLG) and Multiscale Laplacian (MLG) graph kernels.

Kondor & Pan, *The Multiscale Laplacian Graph Kernel* (NIPS 2016).

FLG (Definitions 2 and 4)
-------------------------
A graph with regularised Laplacian ``L + eta I`` (n x n) and vertex feature rows
``U`` (n x d) defines the zero-mean Gaussian ``N(0, S)``, ``S = U' (L + eta I)^-1 U + gamma I``
(d x d; the paper's U is our U transposed). Two graphs are compared by the Bhattacharyya kernel
of their Gaussians, Eq. (4)::

    k_FLG(G1, G2) = |(S1^-1 / 2 + S2^-1 / 2)^-1|^1/2 / (|S1|^1/4 |S2|^1/4)
                  = |S1|^1/4 |S2|^1/4 / |(S1 + S2) / 2|^1/2,

computed in log space by :mod:`gramdist.kernels.gaussian.bhattacharyya`. K(G, G) = 1 exactly (also in
floating point), so the kernel is normalised by construction and the engine's
``gram.normalize`` changes nothing. We keep the paper's ``1/2`` in the averaged inverse (GraKeL
drops it, which makes its K(G, G) = 2^(-d/2)).

Base kernel and the kernelised form (Propositions 1-3, Definition 8)
---------------------------------------------------------------------
Vertex features are explicit: one-hot node labels over the label alphabet of the fit sample
(labels unseen in fit map to the zero vector), optionally concatenated with the node attributes
standardised by the fit sample's mean and standard deviation and scaled by ``attr_weight``.
By Proposition 1, projecting the features onto an orthonormal basis of their span leaves the
kernel unchanged (in the orthogonal complement both S equal gamma I and their factors cancel),
so the explicit features *are* the kernelised FLG induced from the linear base kernel.
With ``base_rank`` set, the base features are instead projected onto the leading ``base_rank``
kernel-PCA directions of a sample of ``n_samples`` vertices (Definition 8): the low-rank
approximation of the base kernel. :func:`flg_kernelized` evaluates Proposition 2 literally
(eigendecomposition of the joint vertex Gram of a pair) for any base kernel; the tests use it
to check the explicit path.

MLG (Definitions 5-6, Section 3.1 and 4.1)
------------------------------------------
``N_l(v)`` is the ball of radius ``r_l`` around v (``r_l = l * radius`` with
``radius_growth="linear"``, as in the authors' C++ release and GraKeL; ``r_l = radius * 2^(l-1)``
with ``"double"``, the paper's ``r_0 d^(l-1)`` with d = 2), and ``G_l(v)`` its induced
subgraph (its own Laplacian). Level by level, without recursion:

* level l's base kernel between vertices v, w is K_l(v, w) = FLG(G_l(v), G_l(w)) with the
  level-(l-1) features (level 0: the base features above);
* K_l is linearised by the randomised low-rank projection of Section 4.1: in the **fit**
  phase, ``n_samples`` vertices of the fit sample are drawn (seeded), their subgraph Gaussians
  are the anchors, the anchor Gram ``K~`` is eigendecomposed and the ``rank`` leading
  eigenpairs with ``lambda >= min_eig_ratio * lambda_max`` are kept. A vertex's level-l feature
  vector is ``f(v)_i = lambda_i^-1/2 sum_j u_ij K_l(v, anchor_j)``, the coordinates of its
  feature-space image in the kernel-PCA basis. Anchors and projection are stored in the state,
  so graphs embedded later, test graphs included, are projected with the same basis (the paper's
  transductive shortcut of sampling from train and test graphs is not needed: with the job's
  ``fit.sample_size`` or ``fit.from_store`` the test graphs are never seen in fit; with the
  default fit sample, all graphs, their vertices -- never their class labels -- may be drawn);
* the top level is the FLG kernel between whole graphs induced by K_L (Definition 6).

Choices where the paper is silent (documented and tested): the ``n_samples`` anchor vertices are
drawn uniformly without replacement among all vertices of the fit sample, a fresh draw per
level. As in the paper, vertices whose subgraphs are identical may both be drawn: the
kernel-PCA basis is then weighted by how frequent a subgraph is, which matters -- the authors'
release skips duplicate subgraphs, and doing so cost 5 points on MUTAG (mean over 4 seeds, 10x3
nested CV: 83.3 with duplicates skipped, 88.5 without). Self-loops do not change a Laplacian
and are ignored; the empty graph has S = gamma I. Not followed from the authors' release (the
paper does not state them either): dividing a vertex's features by its distance to the centre
+ 1, and a pseudo-inverse without eta at the top level; every level here uses ``L + eta I``.

Numerics, determinism, cost
---------------------------
Subgraph covariances come from batched LAPACK solves grouped by subgraph size, log-determinants
from Cholesky factors, kernel values are exponentiated log-kernels; the feature projection is
accumulated in a fixed order (:func:`rowwise_matmul`). A graph's embedding is therefore bitwise
the same whichever chunk it is embedded in, and K(a, b) the same whatever the tile (tested).
Two exact shortcuts, both bitwise neutral: per level, subgraphs built from identical inputs
(same size, same member feature rows in the same order, same local arcs:
:func:`subgraph_classes`) get one covariance, and bitwise equal covariances get one evaluation
against the anchors (with one-hot labels, NCI1's 122,747 radius-1 subgraphs have 378 distinct
covariances). Gaussians of dimension <= ``SOA_MAX_DIM`` (16, which covers the default rank 10)
are compared by the element-wise Cholesky of :mod:`gramdist.kernels.gaussian.bhattacharyya`, about twice
as fast as batched LAPACK at d = 10. Per level the cost is O(C n_samples d^3) for C distinct
subgraphs and feature dimension d; the Gram costs O(G^2 rank^3).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import ranges, unique_rows
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import (
    GraphKernel,
    KernelState,
    check_int,
    check_param,
    check_real,
    node_attributes,
)
from gramdist.kernels.gaussian.bhattacharyya import (
    GaussianEmbedding,
    bhattacharyya,
    gaussian_embedding,
    log_bhattacharyya,
    log_bhattacharyya_self,
)

#: memory budget (bytes) of the stacked dense arrays built per block
_BLOCK_BYTES = 32 * 2**20
#: Gaussians up to this dimension are compared by the element-wise Cholesky of
#: :mod:`gramdist.kernels.gaussian.bhattacharyya` (about twice as fast as batched LAPACK for d = 10)
SOA_MAX_DIM = 16

_FEATURES = ("labels", "attributes", "both")
_GROWTHS = ("linear", "double")


# --------------------------------------------------------------------------- graph helpers
def balls(adj: sp.csr_matrix, radius: int, centers: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vertices within ``radius`` hops of each centre, as CSR ``(indptr, indices)``.

    Parameters
    ----------
    adj : (N, N) CSR adjacency (block-diagonal over the graphs of a batch).
    radius : int >= 0.
    centers : (c,) int64 global vertex indices, default all vertices in order.

    Returns
    -------
    indptr : (c + 1,) int64; indices : (nnz,) int64 -- the members of ball ``i`` are
    ``indices[indptr[i]:indptr[i+1]]``, sorted, the centre included.
    """
    n = adj.shape[0]
    step = (adj.astype(np.float32) + sp.identity(n, dtype=np.float32, format="csr")).tocsr()
    step.data[:] = 1.0
    reach = step if centers is None else step[np.asarray(centers, dtype=np.int64)]
    if radius == 0:
        reach = sp.identity(n, dtype=np.float32, format="csr")
        if centers is not None:
            reach = reach[np.asarray(centers, dtype=np.int64)]
    for _ in range(radius - 1):
        reach = reach @ step
        reach.data[:] = 1.0
    reach = reach.tocsr()
    reach.sort_indices()
    return reach.indptr.astype(np.int64), reach.indices.astype(np.int64)


def induced_arcs(adj: sp.csr_matrix, indptr: np.ndarray, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arcs of the induced subgraphs, in local coordinates.

    Parameters
    ----------
    adj : (N, N) CSR adjacency; self-loops are ignored.
    indptr, indices : CSR of the vertex sets (sorted global indices) of the subgraphs.

    Returns
    -------
    grp, p, q : int64 arrays, one entry per arc u -> w (u != w) with both ends in subgraph
    ``grp``; ``p`` and ``q`` are the positions of u and w in the subgraph's member list. Arcs
    come grouped by subgraph, in the order of its members and of their adjacency lists.
    """
    n_sub = len(indptr) - 1
    empty = np.zeros(0, dtype=np.int64)
    if n_sub == 0:
        return empty, empty, empty
    n_total = adj.shape[0]
    sizes = np.diff(indptr)
    members = np.asarray(indices, dtype=np.int64)
    grp = np.repeat(np.arange(n_sub, dtype=np.int64), sizes)
    pos = np.arange(len(members), dtype=np.int64) - indptr[grp]
    a_ptr = adj.indptr.astype(np.int64)
    a_idx = adj.indices.astype(np.int64)
    deg = a_ptr[members + 1] - a_ptr[members]
    t_grp = np.repeat(grp, deg)
    t_p = np.repeat(pos, deg)
    t_u = np.repeat(members, deg)
    t_w = a_idx[ranges(a_ptr[members], deg)]
    keys = grp * n_total + members  # strictly increasing: groups in order, members sorted
    t_key = t_grp * n_total + t_w
    if len(keys) == 0:
        return empty, empty, empty
    loc = np.minimum(np.searchsorted(keys, t_key), len(keys) - 1)
    found = (t_w != t_u) & (keys[loc] == t_key)
    t_grp = t_grp[found]
    return t_grp, t_p[found], loc[found] - indptr[t_grp]


def subgraph_classes(
    adj: sp.csr_matrix, indptr: np.ndarray, indices: np.ndarray, row_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Group subgraphs whose FLG covariances are computed from identical inputs.

    Two subgraphs are in one class when they have the same size, the same feature-row ids
    member by member (``row_ids[v]`` equal iff the feature rows of v are bitwise equal) and
    the same local arcs. :func:`subgraph_covariances` then returns bitwise equal matrices for
    them, so computing one per class is an exact shortcut (no isomorphism test: the same
    subgraph with its members in another order is another class).

    Returns
    -------
    first : (C,) int64, one representative subgraph per class (its first occurrence);
    inverse : (H,) int64, the class of each subgraph (``first[inverse]`` is a representative).
    """
    n_sub = len(indptr) - 1
    if n_sub == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    sizes = np.diff(indptr)
    members = np.asarray(indices, dtype=np.int64)
    t_grp, t_p, t_q = induced_arcs(adj, indptr, members)
    codes = t_p * sizes[t_grp] + t_q
    order = np.lexsort((codes, t_grp))
    codes = codes[order]
    n_arcs = np.bincount(t_grp, minlength=n_sub).astype(np.int64)
    arc_ptr = np.concatenate([[0], np.cumsum(n_arcs)])
    ids = np.asarray(row_ids, dtype=np.int64)[members]
    shape_key = sizes * (int(n_arcs.max(initial=0)) + 1) + n_arcs
    shapes, shape_inv = np.unique(shape_key, return_inverse=True)
    shape_inv = shape_inv.ravel()
    by_shape = np.argsort(shape_inv, kind="stable")
    bounds = np.searchsorted(shape_inv[by_shape], np.arange(len(shapes) + 1))
    inverse = np.empty(n_sub, dtype=np.int64)
    firsts = []
    n_classes = 0
    for k in range(len(shapes)):
        gs = by_shape[bounds[k] : bounds[k + 1]]
        n, e = int(sizes[gs[0]]), int(n_arcs[gs[0]])
        sig = np.empty((len(gs), n + e), dtype=np.int64)
        sig[:, :n] = ids[indptr[gs][:, None] + np.arange(n)]
        sig[:, n:] = codes[arc_ptr[gs][:, None] + np.arange(e)]
        first, inv = unique_rows(sig)
        inverse[gs] = n_classes + inv
        firsts.append(gs[first])
        n_classes += len(first)
    return np.concatenate(firsts).astype(np.int64), inverse


def subgraph_covariances(
    adj: sp.csr_matrix, indptr: np.ndarray, indices: np.ndarray, x: np.ndarray, eta: float, gamma: float
) -> np.ndarray:
    """FLG covariances ``S = X_H' (L_H + eta I)^-1 X_H + gamma I`` of induced subgraphs H.

    Parameters
    ----------
    adj : (N, N) CSR adjacency; self-loops are ignored.
    indptr, indices : CSR of the vertex sets (sorted global indices) of the subgraphs.
    x : (N, d) vertex features.
    eta, gamma : Laplacian and covariance regularisers.

    Returns
    -------
    (H, d, d) float64, exactly symmetric. Each matrix depends only on its own subgraph (the
    batched LAPACK solve and product treat the stacked matrices one by one).
    """
    n_sub = len(indptr) - 1
    d = x.shape[1]
    out = np.empty((n_sub, d, d))
    if n_sub == 0:
        return out
    sizes = np.diff(indptr)
    members = np.asarray(indices, dtype=np.int64)
    t_grp, t_p, t_q = induced_arcs(adj, indptr, members)
    order = np.argsort(sizes[t_grp], kind="stable")
    t_grp, t_p, t_q = t_grp[order], t_p[order], t_q[order]
    t_size = sizes[t_grp]
    eye = np.eye(d)
    for n in np.unique(sizes):
        gs = np.flatnonzero(sizes == n)
        if n == 0:
            out[gs] = gamma * eye
            continue
        lo, hi = np.searchsorted(t_size, [n, n + 1])
        local = np.full(n_sub, -1, dtype=np.int64)
        local[gs] = np.arange(len(gs))
        e_loc, e_p, e_q = local[t_grp[lo:hi]], t_p[lo:hi], t_q[lo:hi]
        per = max(1, _BLOCK_BYTES // (8 * (n * n + 2 * n * d + d * d)))
        for b0 in range(0, len(gs), per):
            blk = gs[b0 : b0 + per]
            m = len(blk)
            sel = (e_loc >= b0) & (e_loc < b0 + m)
            li, p, q = e_loc[sel] - b0, e_p[sel], e_q[sel]
            lap = np.zeros((m, n, n))
            lap[li, p, q] = -1.0
            dg = np.bincount(li * n + p, minlength=m * n).reshape(m, n)
            diag = np.arange(n)
            lap[:, diag, diag] = dg + eta
            y = x[members[indptr[blk][:, None] + np.arange(n)]]  # (m, n, d)
            z = np.linalg.solve(lap, y)
            s = np.matmul(y.transpose(0, 2, 1), z)
            s = 0.5 * (s + s.transpose(0, 2, 1))
            s += gamma * eye
            out[blk] = s
    return out


def graph_covariances(graphs: GraphBatch, x: np.ndarray, eta: float, gamma: float) -> np.ndarray:
    """(G, d, d) FLG covariances of whole graphs from vertex features ``x`` (N, d)."""
    return subgraph_covariances(
        graphs.adjacency(), graphs.node_offsets - graphs.node_offsets[0],
        np.arange(graphs.n_nodes, dtype=np.int64), x, eta, gamma,
    )


# --------------------------------------------------------------------------- linear algebra
def rowwise_matmul(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``a @ w`` with a fixed summation order per row (never depends on ``len(a)``).

    (n, p) x (p, q) -> (n, q), accumulated over p by explicit element-wise steps, so that a
    vertex's features are bitwise the same whichever chunk it is embedded in.
    """
    n, p = a.shape
    out = np.zeros((n, w.shape[1]))
    for i in range(p):
        out += a[:, i : i + 1] * w[i]
    return out


def nystrom_features(cov: np.ndarray, anchors: GaussianEmbedding, proj: np.ndarray) -> np.ndarray:
    """Level features ``f(v) = proj' k(v, anchors)`` from subgraph covariances.

    Parameters
    ----------
    cov : (n, d, d) subgraph covariances of the vertices.
    anchors : the level's ``n_anchors`` anchor Gaussians (same d).
    proj : (n_anchors, P) kernel-PCA projection ``U / sqrt(lambda)``.

    Returns
    -------
    (n, P) float64. Exactly equal matrices share one computation (a memo: the value of each
    is computed by the same per-pair arithmetic as if alone).
    """
    first, inverse = unique_rows(cov)
    emb = gaussian_embedding(cov[first], soa_max_dim=SOA_MAX_DIM)
    kv = np.exp(log_bhattacharyya(emb, anchors, soa_max_dim=SOA_MAX_DIM))
    return rowwise_matmul(kv, proj)[inverse]


def kernel_pca(k: np.ndarray, rank: int | None, min_eig_ratio: float) -> np.ndarray:
    """Projection ``U / sqrt(lambda)`` of the leading eigenpairs of a Gram matrix.

    Keeps at most ``rank`` eigenpairs (all if ``None``) with
    ``lambda >= max(min_eig_ratio, 1e-12) * lambda_max`` (the fixed floor drops the rounding
    noise of exactly-zero eigenvalues, e.g. from repeated anchors). Eigenvector signs are fixed
    (largest-magnitude entry positive) so the state is reproducible across LAPACK builds.
    Returns (n, P) with P >= 1.
    """
    k = 0.5 * (k + k.T)
    w, u = np.linalg.eigh(k)
    w, u = w[::-1], u[:, ::-1]
    top = max(float(w[0]), 0.0)
    keep = np.flatnonzero((w > 0) & (w >= max(min_eig_ratio, 1e-12) * top))
    if rank is not None:
        keep = keep[:rank]
    if len(keep) == 0:
        raise JobError("the sampled Gram matrix has no positive eigenvalue; sample more vertices")
    u = u[:, keep]
    sign = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(len(keep))])
    return (u * sign) / np.sqrt(w[keep])


def flg_kernelized(
    base_gram: np.ndarray, n1: int, lap1: np.ndarray, lap2: np.ndarray, eta: float, gamma: float,
    tol: float = 1e-10,
) -> float:
    """FLG kernel of two graphs from their joint vertex Gram matrix (Proposition 2).

    Parameters
    ----------
    base_gram : (n1 + n2, n1 + n2) base kernel values between the vertices of G1 then G2.
    n1 : number of vertices of G1.
    lap1, lap2 : (n1, n1), (n2, n2) graph Laplacians (without eta).
    eta, gamma : regularisers.
    tol : eigenvalues below ``tol * lambda_max`` are treated as zero.

    Returns
    -------
    float, ``k_FLG(G1, G2)``. Reference implementation (one pair, dense); the kernels use the
    linearised form of Proposition 3.
    """
    w, u = np.linalg.eigh(0.5 * (base_gram + base_gram.T))
    keep = w > tol * max(w.max(initial=0.0), 0.0)
    q = u[:, keep] * np.sqrt(w[keep])
    q1, q2 = q[:n1], q[n1:]
    p = q.shape[1]
    s1 = q1.T @ np.linalg.solve(lap1 + eta * np.eye(n1), q1) + gamma * np.eye(p)
    s2 = q2.T @ np.linalg.solve(lap2 + eta * np.eye(len(lap2)), q2) + gamma * np.eye(p)
    ld = lambda m: np.linalg.slogdet(m)[1]  # noqa: E731
    return float(np.exp(0.25 * ld(s1) + 0.25 * ld(s2) - 0.5 * ld(0.5 * (s1 + s2))))


# --------------------------------------------------------------------------- kernels
class _LaplacianKernel(GraphKernel):
    """Shared machinery of FLG (no levels) and MLG; see the module docstring."""

    uses_node_attributes: ClassVar[bool] = True

    # subclasses set these attributes in __init__
    eta: float
    gamma: float
    node_features: str
    attr_weight: float
    base_rank: int | None
    n_samples: int

    def _levels(self) -> int:
        return 0

    def _radius(self, level: int) -> int:
        raise NotImplementedError

    # ------------------------------------------------------------ validation
    def validate(self) -> None:
        name = self.name
        check_real(self.eta, name, "eta", 0, lo_open=True)
        check_real(self.gamma, name, "gamma", 0, lo_open=True)
        check_param(self.node_features in _FEATURES, name, "node_features",
                    f"must be one of {', '.join(_FEATURES)}, got {self.node_features!r}")
        check_real(self.attr_weight, name, "attr_weight", 0)
        check_int(self.base_rank, name, "base_rank", 1, optional=True)
        check_int(self.n_samples, name, "n_samples", 2)

    # ------------------------------------------------------------ base features
    def _attributes(self, graphs: GraphBatch, fitted_dim: int | None = None) -> np.ndarray:
        """The (N, p) node attributes, refused in one wording at fit and at embed."""
        return node_attributes(graphs, self.name, f"node_features={self.node_features!r} needs", fitted_dim)

    def _fit_base(self, graphs: GraphBatch, rng: np.random.Generator, arrays: dict[str, np.ndarray]) -> None:
        if self.node_features in ("labels", "both"):
            labels = graphs.node_labels if graphs.node_labels is not None else np.zeros(graphs.n_nodes, np.int64)
            arrays["base.labels"] = np.unique(labels)
        if self.node_features in ("attributes", "both"):
            x = self._attributes(graphs)
            mean = x.mean(axis=0) if graphs.n_nodes else np.zeros(x.shape[1])
            std = x.std(axis=0) if graphs.n_nodes else np.ones(x.shape[1])
            arrays["base.attr_mean"] = mean
            arrays["base.attr_scale"] = np.where(std > 0, std, 1.0)
        if self.base_rank is not None:
            x = self._raw_base(graphs, arrays)
            xs = x[_sample(rng, graphs.n_nodes, self.n_samples)]
            proj = kernel_pca(xs @ xs.T, self.base_rank, 1e-10)
            arrays["base.proj"] = xs.T @ proj  # (d_raw, r): f(v) = x(v)' xs' U / sqrt(lambda)

    def _raw_base(self, graphs: GraphBatch, arrays: dict[str, np.ndarray]) -> np.ndarray:
        parts = []
        if "base.labels" in arrays:
            alphabet = arrays["base.labels"]
            labels = graphs.node_labels if graphs.node_labels is not None else np.zeros(graphs.n_nodes, np.int64)
            idx = np.searchsorted(alphabet, labels)
            idx = np.minimum(idx, len(alphabet) - 1)
            known = alphabet[idx] == labels
            onehot = np.zeros((graphs.n_nodes, len(alphabet)))
            onehot[np.flatnonzero(known), idx[known]] = 1.0
            parts.append(onehot)
        if "base.attr_mean" in arrays:
            x = self._attributes(graphs, fitted_dim=len(arrays["base.attr_mean"]))
            parts.append((x - arrays["base.attr_mean"]) / arrays["base.attr_scale"] * float(self.attr_weight))
        return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]

    def _base_features(self, graphs: GraphBatch, arrays: dict[str, np.ndarray]) -> np.ndarray:
        x = self._raw_base(graphs, arrays)
        if "base.proj" in arrays:
            x = rowwise_matmul(x, arrays["base.proj"])
        return x

    # ------------------------------------------------------------ levels
    def _level_features(self, graphs: GraphBatch, arrays: dict[str, np.ndarray], upto: int) -> np.ndarray:
        """(N, d) vertex features after levels 1..upto (0: base features).

        Per level, subgraphs built from identical inputs (:func:`subgraph_classes`) share one
        covariance and one evaluation against the anchors; the result is bitwise what every
        vertex would get computed alone.
        """
        x = self._base_features(graphs, arrays)
        adj = graphs.adjacency()
        for level in range(1, upto + 1):
            anchors = GaussianEmbedding(arrays[f"level{level}.cov"], arrays[f"level{level}.logdet"])
            proj = arrays[f"level{level}.proj"]
            indptr, indices = balls(adj, self._radius(level))
            _, row_ids = unique_rows(x)
            first, inverse = subgraph_classes(adj, indptr, indices, row_ids)
            u_sizes = indptr[first + 1] - indptr[first]
            u_ptr = np.concatenate([[0], np.cumsum(u_sizes)]).astype(np.int64)
            u_idx = indices[ranges(indptr[first], u_sizes)]
            d = x.shape[1]
            per = max(1, _BLOCK_BYTES // (8 * d * d * 4))
            feats = np.empty((len(first), proj.shape[1]))
            for c0 in range(0, len(first), per):
                c1 = min(len(first), c0 + per)
                cov = subgraph_covariances(adj, u_ptr[c0 : c1 + 1] - u_ptr[c0], u_idx[u_ptr[c0] : u_ptr[c1]], x,
                                           float(self.eta), float(self.gamma))
                feats[c0:c1] = nystrom_features(cov, anchors, proj)
            x = feats[inverse]
        return x

    # ------------------------------------------------------------ contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        """Base alphabet/scaling (and base projection), then each level's anchors and basis."""
        self.validate()
        rng = np.random.default_rng(seed)
        arrays: dict[str, np.ndarray] = {}
        self._fit_base(graphs, rng, arrays)
        dims = [int(self._base_features(graphs[:1], arrays).shape[1])] if graphs.n_graphs else []
        for level in range(1, self._levels() + 1):
            cand = _sample(rng, graphs.n_nodes, self.n_samples)
            if len(cand) == 0:
                raise JobError(f"kernel {self.name}: the fit sample has no vertices")
            gidx, inv = np.unique(graphs.node_graph[cand], return_inverse=True)
            sub = graphs.take(gidx)
            starts = graphs.node_offsets[graphs.node_graph[cand]] - graphs.node_offsets[0]
            local = cand - starts + sub.node_offsets[inv.ravel()]
            x = self._level_features(sub, arrays, level - 1)
            adj = sub.adjacency()
            indptr, indices = balls(adj, self._radius(level), local)
            cov = subgraph_covariances(adj, indptr, indices, x, float(self.eta), float(self.gamma))
            anchors = gaussian_embedding(cov, soa_max_dim=SOA_MAX_DIM)
            k_anchor = np.exp(log_bhattacharyya(anchors, anchors, soa_max_dim=SOA_MAX_DIM))
            arrays[f"level{level}.cov"] = anchors.cov
            arrays[f"level{level}.logdet"] = anchors.logdet
            arrays[f"level{level}.proj"] = kernel_pca(k_anchor, self._rank(), self._min_eig_ratio())
            dims.append(int(arrays[f"level{level}.proj"].shape[1]))
        attrs: dict[str, Any] = {"feature_dims": dims, "levels": self._levels(),
                                 "radii": [self._radius(level) for level in range(1, self._levels() + 1)]}
        return KernelState(arrays=arrays, attrs=attrs)

    def _rank(self) -> int | None:
        return None

    def _min_eig_ratio(self) -> float:
        return 0.0

    def embed(self, graphs: GraphBatch, state: KernelState) -> GaussianEmbedding:
        """(G,) zero-mean Gaussians: top-level covariances (G, d, d) and log-determinants."""
        self.validate()
        x = self._level_features(graphs, state.arrays, self._levels())
        return gaussian_embedding(graph_covariances(graphs, x, float(self.eta), float(self.gamma)),
                                  soa_max_dim=SOA_MAX_DIM)

    def pairwise(self, a: GaussianEmbedding, b: GaussianEmbedding, state: KernelState) -> np.ndarray:
        return bhattacharyya(a, b, soa_max_dim=SOA_MAX_DIM)

    def self_similarity(self, a: GaussianEmbedding, state: KernelState) -> np.ndarray:
        return np.exp(log_bhattacharyya_self(a, soa_max_dim=SOA_MAX_DIM))


class FLGKernel(_LaplacianKernel):
    """Feature-space Laplacian graph kernel (Kondor & Pan, Definitions 2 and 4).

    Parameters
    ----------
    eta : float
        Laplacian regulariser (> 0): the graph's Gaussian has precision ``L + eta I``.
    gamma : float
        Covariance softening (> 0): ``S = U' (L + eta I)^-1 U + gamma I``.
    node_features : {"labels", "attributes", "both"}
        Vertex features: one-hot labels, standardised attributes, or both concatenated.
    attr_weight : float
        Scale of the standardised attributes relative to the unit one-hot vectors.
    base_rank : int or None
        ``None``: exact FLG with the explicit features. An int: project them onto that many
        kernel-PCA directions of ``n_samples`` sampled vertices (Definition 8).
    n_samples : int
        Vertices sampled for ``base_rank``'s projection.
    """

    name: ClassVar[str] = "flg"

    def __init__(self, eta: float = 0.1, gamma: float = 0.01, node_features: str = "labels",
                 attr_weight: float = 1.0, base_rank: int | None = None, n_samples: int = 100) -> None:
        self.eta = eta
        self.gamma = gamma
        self.node_features = node_features
        self.attr_weight = attr_weight
        self.base_rank = base_rank
        self.n_samples = n_samples


class MLGKernel(_LaplacianKernel):
    """Multiscale Laplacian graph kernel (Kondor & Pan, Definitions 5-6, Section 4.1).

    Parameters
    ----------
    eta, gamma, node_features, attr_weight, base_rank : as in :class:`FLGKernel`.
    levels : int
        Number of subgraph levels L (>= 1); the top-level FLG comes on top of them.
    radius : int
        Radius of the level-1 neighbourhoods (>= 1).
    radius_growth : {"linear", "double"}
        Level-l radius ``l * radius`` or ``radius * 2^(l-1)``.
    n_samples : int
        Anchor vertices sampled per level (the paper's N~), also used for ``base_rank``.
    rank : int
        Number of kernel-PCA directions kept per level (the paper's P^, "~ 10"). An
        approximation setting, not part of the kernel's definition: a larger rank is closer to
        the exact MLG, at O(rank^3) per Gaussian comparison. On NCI1 and NCI109, 20 scored 2-3
        points above 10 (REPRODUCTION.md); the MLG jobs select it from {10, 20} in the inner CV.
    min_eig_ratio : float
        Eigenvalues below this fraction of the largest are dropped (never less than 1e-12).
    """

    name: ClassVar[str] = "mlg"

    def __init__(self, levels: int = 2, radius: int = 1, radius_growth: str = "linear", eta: float = 0.1,
                 gamma: float = 0.01, n_samples: int = 100, rank: int = 10, min_eig_ratio: float = 1e-6,
                 node_features: str = "labels", attr_weight: float = 1.0, base_rank: int | None = None) -> None:
        self.levels = levels
        self.radius = radius
        self.radius_growth = radius_growth
        self.eta = eta
        self.gamma = gamma
        self.n_samples = n_samples
        self.rank = rank
        self.min_eig_ratio = min_eig_ratio
        self.node_features = node_features
        self.attr_weight = attr_weight
        self.base_rank = base_rank

    def validate(self) -> None:
        super().validate()
        name = self.name
        check_int(self.levels, name, "levels", 1, 8)
        check_int(self.radius, name, "radius", 1)
        check_param(self.radius_growth in _GROWTHS, name, "radius_growth",
                    f"must be one of {', '.join(_GROWTHS)}, got {self.radius_growth!r}")
        check_int(self.rank, name, "rank", 1)
        check_real(self.min_eig_ratio, name, "min_eig_ratio", 0, 1, hi_open=True)

    def _levels(self) -> int:
        return int(self.levels)

    def _radius(self, level: int) -> int:
        r = int(self.radius)
        return r * level if self.radius_growth == "linear" else r * 2 ** (level - 1)

    def _rank(self) -> int | None:
        return int(self.rank)

    def _min_eig_ratio(self) -> float:
        return float(self.min_eig_ratio)


# --------------------------------------------------------------------------- small helpers
def _sample(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``size`` distinct indices of ``range(n)`` in random order (all of them if n <= size)."""
    return rng.permutation(n)[: min(n, size)].astype(np.int64)


__all__ = ["FLGKernel", "MLGKernel", "balls", "subgraph_covariances", "graph_covariances", "nystrom_features",
           "kernel_pca", "flg_kernelized", "rowwise_matmul"]

