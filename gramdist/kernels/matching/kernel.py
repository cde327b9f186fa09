"""Adaptive matching based kernels (Woźnica, Kalousis & Hilario, "Adaptive Matching Based
Kernels for Labelled Graphs").

A graph ``G`` is decomposed in ``m`` ways — walks of lengths ``l ∈ walk_lengths`` and trees of
heights ``h ∈ tree_heights`` from every node (:mod:`gramdist.kernels.matching.decompositions`) — and
two graphs are compared decomposition by decomposition with one set distance ``d_set``
(:mod:`gramdist.kernels.matching.set_distances`), giving the vector

    d(G1, G2) = (d_set(G1^{t_1}, G2^{t_1}), …, d_set(G1^{t_m}, G2^{t_m}))ᵀ ∈ R^m.

A learned matrix ``A`` combines them: ``d_A(G1, G2) = ‖A d(G1, G2)‖`` (Eq. 1), with ``A``
learned by NCA (:mod:`gramdist.kernels.matching.nca`). Each graph is mapped to its *proximity
vector* against a representation set ``S = {S_1, …, S_p}``,

    φ(G) = (d_A(G, S_1), …, d_A(G, S_p)) ∈ R^p,

and the kernel is an elementary kernel on these vectors: ``k(G1, G2) = c ⟨φ(G1), φ(G2)⟩``
(linear, the paper's choice) or ``exp(−γ ‖φ(G1) − φ(G2)‖²)`` (RBF). The constant ``c`` (folded
into the stored ``A``) gives the coordinates of ``φ`` unit variance on average over the
representation set, like standardised features: it does not change the SVM's solutions
(C absorbs it) but puts the useful values of C in the middle of the usual ``10^-3..10^3``
grid, whatever the set distance and ``|S|``.

Centring (``center: true``, the default with the linear elementary kernel). The proximity
coordinates are distances to the graphs of ``S``: large and alike for every graph (with
complete linkage on MUTAG each coordinate has mean ≈ 117 and standard deviation 1 after the
scaling below), so ``⟨φ(G1), φ(G2)⟩`` is a constant ≈ 2·10⁶ plus small variations. libsvm
does not solve an SVM on such a Gram: on a MUTAG training fold its solutions reach dual
objectives of 42 and 62 where the optimum is 59 and 390 (C = 1, 10), and at C = 50 it runs
for hours. The kernel therefore subtracts ``μ``, the mean proximity vector over ``S``
(stored in the state as ``rep.phi_mean``): ``k(G1, G2) = c ⟨φ(G1) − μ, φ(G2) − μ⟩``. For an
SVM with an intercept (``SVC``) this changes nothing in exact arithmetic — ``w·(x − μ) + b``
is ``w·x + b'`` with the same ``‖w‖`` and slacks, so the optimal classifier is the same — and
it makes the Gram well-conditioned (standardised coordinates, entries of order ``p``). Learners
without an intercept (kernel ridge) do see the difference. The RBF elementary kernel depends
only on ``φ(G1) − φ(G2)`` and is never centred. A state without ``rep.phi_mean`` (stores made
before this option) embeds uncentred, so an append to such a store stays consistent.

Two documented choices beyond the paper: each decomposition's set distances are divided by
their mean over the pairs of distinct graphs of ``S`` before NCA (walk distances of long
walks are larger than those of short ones; the division is a fixed diagonal
reparametrisation of ``A``, so the family of metrics is unchanged, but ``A = I`` then weighs
decompositions equally and NCA starts balanced); and, as the paper's regularised objective
is maximised, its Frobenius penalty is subtracted (see :mod:`gramdist.kernels.matching.nca`).

Engine phases
-------------
* ``fit(sample, seed)``: the label encoding is learned on the sample; ``S`` is the sample
  (or a seeded random subset of ``representation_size`` graphs); the decompositions of ``S``
  are stored in the state as arrays (deduplicated walk and tree-node types plus each graph's
  multisets, see :class:`RepresentationSet`); the ``p × p × m`` distance vectors inside ``S``
  are computed and ``A`` is learned on them (with λ chosen by internal cross-validation when
  ``nca_lambda`` is a list, as in the paper).
* ``embed(chunk, state)``: each graph is decomposed and compared with the stored ``S``, one
  graph at a time (so a graph's vector never depends on its chunk), giving ``φ`` (p,).
* ``pairwise``: a tile is the elementary kernel between proximity vectors, computed by a
  fixed arithmetic per pair (see :meth:`AdaptiveMatchingKernel.pairwise`): bitwise
  independent of the tile composition.

Supervision and cross-validation
--------------------------------
NCA uses the class labels ``y`` of the graphs of ``S`` it learns on (all of ``S``, or those
of ``nca_graph_ids``). Cross-validating one Gram on graphs whose labels shaped ``A`` would
be optimistic (the paper learns ``A`` inside each training fold). The state therefore lists
the ``graph_ids`` of exactly those graphs in its attribute ``supervised_graph_ids``, and
``gramdist evaluate`` keeps them in every training part and draws its test folds from the
other graphs only (:mod:`gramdist.evaluation`): its figure is honest by default, provided the
fit sample (``fit.sample_size``) or ``representation_size`` leaves graphs to test — the jobs
fit on about half of each dataset. The other uses of the fit sample (label alphabets,
representation set, scale normalisation) do not read class labels. ``nca: none`` (``A = I``)
uses no labels at all and records no supervised graphs.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import (
    GraphKernel,
    KernelState,
    check_int,
    check_param,
    check_real,
    is_finite_real,
    is_int,
)
from gramdist.kernels.matching import nca as nca_mod
from gramdist.kernels.matching.decompositions import (
    LabelEncoding,
    Multisets,
    TreeTypes,
    TypeTable,
    WalkTypes,
    needed_depths,
    tree_distances,
    tree_types,
    unfold,
    walk_distances,
    walk_types,
)
from gramdist.kernels.matching.set_distances import SET_DISTANCES, ManySets, set_distances_to_many

DEFAULT_WALK_LENGTHS = tuple(range(1, 12))
DEFAULT_TREE_HEIGHTS = (2, 3, 4, 5)


# ------------------------------------------------------------- representation set
@dataclass
class RepresentationSet:
    """Decompositions of the representation set ``S``, as stored in the kernel state.

    Arrays (``p = |S|``):

    * ``rep.graph_ids`` (p,): graph ids of ``S``;
    * ``labels.*``: the :class:`LabelEncoding` (alphabets, attribute ranges);
    * ``walk.L{l}.cat`` (T, l), ``walk.L{l}.attr`` (T, A): the distinct walks of length ``l``
      in ``S``; ``walk.L{l}.indptr`` (p+1,), ``.types`` (E,), ``.counts`` (E,): the multiset
      of each graph of ``S`` over them;
    * ``tree.{v|e}{r}.cat`` / ``.attr`` / ``.children``: tree-node types of each kind and
      remaining depth ``r`` (children padded with -1); ``tree.H{h}.indptr`` / ``.types`` /
      ``.counts``: each graph's multiset of root types for trees of height ``h``.
    """

    enc: LabelEncoding
    walks: dict[int, WalkTypes]
    trees: TreeTypes
    graph_ids: np.ndarray

    @classmethod
    def build(cls, graphs: GraphBatch, enc: LabelEncoding, walk_lengths: tuple[int, ...],
              tree_heights: tuple[int, ...], cap: int | None, seed: int) -> tuple[RepresentationSet, np.ndarray]:
        """Decompose ``graphs``; also returns the (p,) number of capped roots per graph."""
        labels = enc.encode(graphs)
        depth = max(max(walk_lengths, default=1), max(tree_heights, default=1))
        unf = unfold(graphs, depth, cap, seed)
        walks = {length: walk_types(unf, labels, length, len(graphs)) for length in walk_lengths}
        trees = tree_types(unf, labels, tree_heights, len(graphs))
        return cls(enc=enc, walks=walks, trees=trees, graph_ids=np.asarray(graphs.graph_ids)), unf.capped_roots

    def __len__(self) -> int:
        return len(self.graph_ids)

    def to_arrays(self) -> dict[str, np.ndarray]:
        """State arrays; empty arrays (e.g. attributes of unattributed graphs) are left out
        and rebuilt by :meth:`from_arrays` from the shapes they must have."""
        out = {"rep.graph_ids": self.graph_ids}
        out.update(self.enc.to_arrays("labels."))
        for length, w in self.walks.items():
            p = f"walk.L{length}."
            out.update({p + "cat": w.cat, p + "attr": w.attr, p + "indptr": w.sets.indptr,
                        p + "types": w.sets.types, p + "counts": w.sets.counts})
        for (kind, r), t in self.trees.tables.items():
            p = f"tree.{kind}{r}."
            out.update({p + "cat": t.cat, p + "attr": t.attr, p + "children": t.children})
        for h, s in self.trees.roots.items():
            p = f"tree.H{h}."
            out.update({p + "indptr": s.indptr, p + "types": s.types, p + "counts": s.counts})
        return {k: np.ascontiguousarray(v) for k, v in out.items() if np.asarray(v).size}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], walk_lengths: tuple[int, ...],
                    tree_heights: tuple[int, ...]) -> RepresentationSet:
        def a(name: str, empty: tuple[int, ...] | None = None, dtype: type = np.int64) -> np.ndarray:
            if name in arrays:
                return np.asarray(arrays[name])
            if empty is not None:
                return np.zeros(empty, dtype=dtype)
            raise JobError(f"matching kernel state lacks array {name!r}: refit the kernel")

        def ms(p: str) -> Multisets:
            return Multisets(indptr=a(p + "indptr"), types=a(p + "types", (0,)), counts=a(p + "counts", (0,)))

        enc = LabelEncoding.from_arrays(arrays, "labels.")
        dn, de = enc.node_attr_dim, enc.edge_attr_dim
        walks = {}
        for length in walk_lengths:
            cat = a(f"walk.L{length}.cat", (0, length))
            attr = a(f"walk.L{length}.attr", (len(cat), ((length + 1) // 2) * dn + (length // 2) * de), np.float64)
            walks[length] = WalkTypes(length=length, cat=cat, attr=attr, sets=ms(f"walk.L{length}."))
        trees = TreeTypes(heights=tuple(sorted(tree_heights)))
        for kind, r in needed_depths(trees.heights):
            p = f"tree.{kind}{r}."
            cat = a(p + "cat", (0,))
            attr = a(p + "attr", (len(cat), dn if kind == "v" else de), np.float64)
            children = a(p + "children", (len(cat), 0))
            trees.tables[(kind, r)] = TypeTable(cat=cat, attr=attr, children=children)
        for h in trees.heights:
            trees.roots[h] = ms(f"tree.H{h}.")
        return cls(enc=enc, walks=walks, trees=trees, graph_ids=a("rep.graph_ids"))


def graph_key(g: GraphBatch) -> int:
    """64-bit BLAKE2b digest of the content of a one-graph batch (structure, labels,
    attributes, in stored order: everything a graph's proximity vector depends on)."""
    h = hashlib.blake2b(digest_size=8)
    h.update(str(g.n_nodes).encode())
    for name in ("edges", "node_labels", "node_attrs", "edge_labels", "edge_attrs"):
        arr = getattr(g, name)
        h.update(name.encode())
        if arr is None:
            h.update(b"<none>")
        else:
            arr = np.ascontiguousarray(arr)
            h.update(f"{arr.dtype}{arr.shape}".encode())
            h.update(arr.tobytes())
    return int.from_bytes(h.digest(), "little")


# ------------------------------------------------------------------- embedding
@dataclass(eq=False)
class ProximityEmbedding:
    """Proximity vectors of a chunk: ``features`` (n, p) = ``φ(G)`` for each graph, and
    ``capped`` (n,) the number of roots of each graph where the per-node cap was hit."""

    features: np.ndarray
    capped: np.ndarray

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, key: slice) -> ProximityEmbedding:
        return ProximityEmbedding(self.features[key], self.capped[key])


# ------------------------------------------------------------------------ kernel
class AdaptiveMatchingKernel(GraphKernel):
    """Adaptive matching based kernel in the proximity space of NCA-weighted set distances.

    Parameters
    ----------
    set_distance : str, default "smd"
        One of ``single, complete, average, smd, hausdorff, ribl, tanimoto, surjection,
        fair_surjection, linking, matching`` (:mod:`gramdist.kernels.matching.set_distances`).
    walk_lengths : list of int or None
        Walk decompositions (length = number of vertices and edges). None: 1..11 (paper).
    tree_heights : list of int or None
        Tree decompositions. None: 2..5 (paper). ``[]`` disables trees (or walks).
    nca : {"full", "diag", "none"}, default "full"
        Learn a full ``A`` (Frobenius-regularised), a diagonal ``A`` (NCA_diag), or use
        ``A = I`` without labels (unsupervised; no label leak under cross-validation).
    nca_lambda : float, list of float or None, default 10.0
        λ of the regulariser (full mode). A list is searched by ``nca_cv_folds``-fold
        stratified cross-validation inside the labelled graphs, scored by the held-out NCA
        likelihood (the paper cross-validates λ over ``[0, 0.1, 1, 10]``, which is what
        ``None`` means; the jobs use it). The default 10 is the largest value of that grid
        and costs one optimisation instead of ``4 × (folds + 1)``; with the jobs' fit samples
        the internal search picks 0.1 on MUTAG and 10 on PTC_MR.
    nca_cv_folds : int, default 5
        Folds of that search.
    nca_max_iter : int, default 200
        L-BFGS iterations.
    nca_graph_ids : list of int or None
        Restrict the labels NCA uses to the representation graphs with these ``graph_ids``
        (e.g. a training split); None: all of ``S``. See the module docstring.
    representation_size : int or None
        Size of ``S``: a seeded random subset of the fit sample; None: the whole sample.
    elementary_kernel : {"linear", "rbf"}, default "linear"
    gamma : float or None
        RBF width; None: ``1 / median ‖φ(S_i) − φ(S_j)‖²`` over the representation set.
    max_walks_per_node : int or None, default 5000
        Per-node cap on prefixes per level of the unfolding (walks and trees), see
        :mod:`gramdist.kernels.matching.decompositions`; the random choice uses the fit seed. Hits
        are counted in the state (``cap.*``, the representation set) and the embeddings
        (``capped``); a run notes both (:meth:`report`, :meth:`report_embeddings`).
    normalize_sets : bool, default True
        Normalised set distances (the paper's ``Σ_F d / |F|``) or the references' raw sums.
    center : bool, default True
        Linear elementary kernel: subtract the mean proximity vector over ``S`` (see the
        module docstring: the same SVM classifier, a Gram libsvm can solve). False: the raw
        ``⟨φ(G1), φ(G2)⟩``. Ignored by the RBF kernel.
    """

    name = "matching"
    has_embedding_counts = True
    uses_node_attributes = True
    # set distances to the representation set in Python-level loops, GIL held: the NCI1 job
    # took 60.5 s in one process (embed 44.8 s), 36.3 s on two worker processes (embed 20.8 s)
    node_weight = 10.0

    def __init__(
        self,
        set_distance: str = "smd",
        walk_lengths: list[int] | None = None,
        tree_heights: list[int] | None = None,
        nca: str = "full",
        nca_lambda: float | list[float] | None = 10.0,
        nca_cv_folds: int = 5,
        nca_max_iter: int = 200,
        nca_graph_ids: list[int] | None = None,
        representation_size: int | None = None,
        elementary_kernel: str = "linear",
        gamma: float | None = None,
        max_walks_per_node: int | None = 5000,
        normalize_sets: bool = True,
        center: bool = True,
    ) -> None:
        self.set_distance = set_distance
        self.walk_lengths = walk_lengths
        self.tree_heights = tree_heights
        self.nca = nca
        self.nca_lambda = nca_lambda
        self.nca_cv_folds = nca_cv_folds
        self.nca_max_iter = nca_max_iter
        self.nca_graph_ids = nca_graph_ids
        self.representation_size = representation_size
        self.elementary_kernel = elementary_kernel
        self.gamma = gamma
        self.max_walks_per_node = max_walks_per_node
        self.normalize_sets = normalize_sets
        self.center = center

    # ---------------------------------------------------------------- params
    @property
    def lengths(self) -> tuple[int, ...]:
        return tuple(sorted(set(DEFAULT_WALK_LENGTHS if self.walk_lengths is None else self.walk_lengths)))

    @property
    def heights(self) -> tuple[int, ...]:
        return tuple(sorted(set(DEFAULT_TREE_HEIGHTS if self.tree_heights is None else self.tree_heights)))

    @property
    def lambdas(self) -> list[float]:
        lam = [0.0, 0.1, 1.0, 10.0] if self.nca_lambda is None else self.nca_lambda
        return [float(x) for x in (lam if isinstance(lam, (list, tuple)) else [lam])]

    def decomposition_names(self) -> list[str]:
        """Names of the ``m`` decompositions in the order of the distance vectors."""
        return [f"walk{length}" for length in self.lengths] + [f"tree{h}" for h in self.heights]

    def validate(self) -> None:
        k = self.name

        check_param(self.set_distance in SET_DISTANCES, k, "set_distance",
                    f"must be one of {', '.join(SET_DISTANCES)}, got {self.set_distance!r}")
        for pname, val, hi in (("walk_lengths", self.walk_lengths, 40), ("tree_heights", self.tree_heights, 20)):
            check_param(val is None or (isinstance(val, (list, tuple)) and all(is_int(x) and 1 <= x <= hi for x in val)),
                        k, pname, f"must be null or a list of integers in 1..{hi}, got {val!r}")
        check_param(len(self.lengths) + len(self.heights) > 0, k, "walk_lengths",
                    "and tree_heights are both empty: no decomposition to compare")
        check_param(self.nca in ("full", "diag", "none"), k, "nca", f"must be full, diag or none, got {self.nca!r}")
        lam = self.nca_lambda
        lam_list = lam if isinstance(lam, (list, tuple)) else [lam]
        check_param(lam is None or (len(lam_list) > 0 and all(is_finite_real(x) and x >= 0 for x in lam_list)),
                    k, "nca_lambda", f"must be a finite number >= 0 or a non-empty list of them, got {lam!r}")
        check_int(self.nca_cv_folds, k, "nca_cv_folds", 2)
        check_int(self.nca_max_iter, k, "nca_max_iter", 1)
        check_param(self.nca_graph_ids is None or (isinstance(self.nca_graph_ids, (list, tuple))
                                                   and all(is_int(x) for x in self.nca_graph_ids)),
                    k, "nca_graph_ids", f"must be null or a list of graph ids, got {self.nca_graph_ids!r}")
        check_int(self.representation_size, k, "representation_size", 2, optional=True)
        check_param(self.elementary_kernel in ("linear", "rbf"), k, "elementary_kernel",
                    f"must be linear or rbf, got {self.elementary_kernel!r}")
        check_real(self.gamma, k, "gamma", 0, lo_open=True, optional=True)
        check_int(self.max_walks_per_node, k, "max_walks_per_node", 1, optional=True)
        check_param(isinstance(self.normalize_sets, bool), k, "normalize_sets",
                    f"must be true or false, got {self.normalize_sets!r}")
        check_param(isinstance(self.center, bool), k, "center", f"must be true or false, got {self.center!r}")

    # ------------------------------------------------------------ distances
    def _depth(self) -> int:
        return max(max(self.lengths, default=1), max(self.heights, default=1))

    def distance_vectors(self, graphs: GraphBatch, rep: RepresentationSet, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """Set-distance vectors of every graph against every graph of ``S``.

        Returns
        -------
        dvec : (n, p, m) float64
            ``dvec[i, s, t] = d_set(G_i^t, S_s^t)`` (decompositions in
            :meth:`decomposition_names` order).
        capped : (n,) int64
            Roots of each graph where the per-node cap was hit.

        Each graph is processed on its own, so its rows depend only on the graph and ``rep``.
        """
        # many small matrix products: BLAS threads would only contend with the engine's workers
        with threadpool_limits(1):
            return self._distance_vectors(graphs, rep, seed)

    def _distance_vectors(self, graphs: GraphBatch, rep: RepresentationSet, seed: int) -> tuple[np.ndarray, np.ndarray]:
        n, p, m = len(graphs), len(rep), len(self.lengths) + len(self.heights)
        out = np.empty((n, p, m))
        capped = np.zeros(n, np.int64)
        depth = self._depth()
        walk_sets = {length: ManySets(w.sets.indptr, w.sets.types, w.sets.counts) for length, w in rep.walks.items()}
        tree_sets = {h: ManySets(r.indptr, r.types, r.counts) for h, r in rep.trees.roots.items()}
        for i in range(n):
            g = graphs[i:i + 1]
            labels = rep.enc.encode(g)
            unf = unfold(g, depth, self.max_walks_per_node, seed)
            capped[i] = unf.capped_roots[0]
            col = 0
            for length in self.lengths:
                wt = walk_types(unf, labels, length, 1)
                R = rep.walks[length]
                D = walk_distances(wt, R.cat, R.attr, rep.enc)
                # d_W is a Euclidean (pseudo-)metric: walks at distance 0 may be paired first
                out[i, :, col] = set_distances_to_many(self.set_distance, D, wt.sets.counts, walk_sets[length],
                                                       normalize=self.normalize_sets, metric=True)
                col += 1
            if self.heights:
                tt = tree_types(unf, labels, self.heights, 1)
                Dt = tree_distances(tt, rep.trees, rep.enc)
                for h in self.heights:
                    types, counts = tt.roots[h].of(0)
                    out[i, :, col] = set_distances_to_many(self.set_distance, Dt[("v", h)][types], counts,
                                                           tree_sets[h], normalize=self.normalize_sets)
                    col += 1
        return out, capped

    @staticmethod
    def proximity(dvec: np.ndarray, A: np.ndarray) -> np.ndarray:
        """(n, p) proximity vectors ``φ(G)_s = ‖A d(G, S_s)‖`` from (n, p, m) distance vectors,
        graph by graph."""
        out = np.empty(dvec.shape[:2])
        with threadpool_limits(1):      # the same BLAS path in fit and in embed, per graph
            for i in range(len(dvec)):
                Z = dvec[i] @ A.T
                out[i] = np.sqrt(np.einsum("ij,ij->i", Z, Z))
        return out

    # -------------------------------------------------------------- contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        """Build the representation set, its distance vectors, and learn ``A`` by NCA.

        NCA needs ``graphs.y`` (unless ``nca: none``); see the module docstring for how this
        interacts with cross-validation.
        """
        self.validate()
        n = len(graphs)
        if n < 2:
            raise JobError("kernel matching: the fit sample needs at least 2 graphs")
        rng = np.random.default_rng(seed)
        if self.representation_size is not None and self.representation_size < n:
            idx = np.sort(rng.choice(n, size=self.representation_size, replace=False))
        else:
            idx = np.arange(n)
        S = graphs.take(idx)
        enc = LabelEncoding.fit(graphs)
        rep, capped_rep = RepresentationSet.build(S, enc, self.lengths, self.heights, self.max_walks_per_node, seed)
        dvec, _ = self.distance_vectors(S, rep, seed)
        m = dvec.shape[2]

        attrs: dict[str, Any] = {
            "set_distance": self.set_distance,
            "decompositions": self.decomposition_names(),
            "representation_size": int(len(S)),
            "seed": int(seed),
            "cap.max_walks_per_node": self.max_walks_per_node,
            "cap.roots_capped_in_representation_set": int(capped_rep.sum()),
            "cap.graphs_capped_in_representation_set": int((capped_rep > 0).sum()),
            "types": {f"walk{length}": int(len(rep.walks[length].cat)) for length in self.lengths}
            | {f"tree{h}": int(len(rep.trees.tables[("v", h)])) for h in self.heights},
        }
        # Decompositions differ in scale (distances of long walks are larger): divide each by
        # its mean over the pairs of distinct graphs of S, so that A = I weighs them equally
        # and NCA starts from a balanced metric. ‖A (d / s)‖ = ‖(A diag(1/s)) d‖: the family
        # of metrics is unchanged; the state stores the effective matrix A diag(1/s).
        off = ~np.eye(len(S), dtype=bool)
        scale = dvec[off].mean(axis=0) if len(S) > 1 else np.ones(m)
        scale = np.where(scale > 0, scale, 1.0)
        scaled = dvec / scale
        A, learned = self._learn_metric(S, scaled, seed)
        attrs |= learned
        A = A / scale[None, :]
        # A constant factor on the kernel is absorbed by the SVM's C, but it decides which C
        # are useful: scale A so that over S the proximity coordinates have unit variance on
        # average (like standardised features), which puts good C values in the middle of
        # the usual 10^-3..10^3 grid whatever the set distance and |S|.
        phi = self.proximity(dvec, A)
        sigma = float(np.sqrt(np.mean(np.sum((phi - phi.mean(axis=0)) ** 2, axis=1)) / phi.shape[1]))
        if sigma > 0 and np.isfinite(sigma):
            A = A / sigma
        attrs["kernel_scale"] = sigma
        arrays = rep.to_arrays()
        arrays["nca.A"] = np.ascontiguousarray(A, dtype=np.float64)
        arrays["nca.scale"] = scale
        # The proximity vectors of S itself were just computed (by the code embed runs): keep
        # them with a content key, so that embedding a graph of S is a look-up giving the same
        # bits (the engine embeds every graph, fit sample included).
        arrays["rep.phi"] = self.proximity(dvec, A)
        if self.center and self.elementary_kernel == "linear":
            arrays["rep.phi_mean"] = arrays["rep.phi"].mean(axis=0)
        arrays["rep.key"] = np.array([graph_key(S[i:i + 1]) for i in range(len(S))], dtype=np.uint64)
        arrays["rep.capped"] = capped_rep.astype(np.int64)
        if self.elementary_kernel == "rbf":
            attrs["gamma"] = _median_gamma(arrays["rep.phi"]) if self.gamma is None else float(self.gamma)
        return KernelState(arrays=arrays, attrs=attrs)

    def _learn_metric(self, S: GraphBatch, scaled: np.ndarray, seed: int) -> tuple[np.ndarray, dict[str, Any]]:
        """``(A, attrs)``: the (m, m) combination of the decompositions learned by NCA on the
        labelled graphs of the representation set ``S`` from their scaled distance vectors
        (|S|, |S|, m), or the identity under ``nca: none``; ``attrs`` record how."""
        m = scaled.shape[2]
        if self.nca == "none":
            return np.eye(m), {"nca": {"mode": "none", "labelled_graphs": 0}}
        if S.y is None:
            raise JobError("kernel matching: NCA needs class labels (graphs.y) in the fit sample; "
                           "set nca: none to run without labels")
        sel = np.arange(len(S))
        if self.nca_graph_ids is not None:
            sel = np.flatnonzero(np.isin(S.graph_ids, np.asarray(self.nca_graph_ids, dtype=np.int64)))
        y = np.asarray(S.y)[sel]
        if len(sel) < 2 or len(np.unique(y)) < 2:
            raise JobError(f"kernel matching: NCA needs at least 2 labelled graphs of 2 classes in the "
                           f"representation set, got {len(sel)} graph(s) of {len(np.unique(y))} class(es)")
        pairs = np.ascontiguousarray(scaled[np.ix_(sel, sel)])
        mode = self.nca
        lambdas = self.lambdas if mode == "full" else [0.0]
        scores = None
        if len(lambdas) > 1:
            lam, scores = nca_mod.select_lambda(pairs, y, lambdas, mode, self.nca_cv_folds, self.nca_max_iter, seed)
        else:
            lam = lambdas[0]
        res = nca_mod.fit_nca(pairs, y, mode, lam, self.nca_max_iter, seed)
        nca = {
            "mode": mode, "lambda": lam, "lambda_grid": lambdas, "lambda_cv_scores": scores,
            "objective_initial": res.objective_initial, "objective_final": res.objective_final,
            "iterations": res.n_iter, "converged": res.converged,
            "labelled_graphs": int(len(sel)),
            "labelled_graph_ids": "all of the representation set" if self.nca_graph_ids is None else "nca_graph_ids",
            "decomposition_weights": [float(x) for x in np.linalg.norm(res.A, axis=0)],
        }
        # the evaluate contract: graphs whose labels the fit used are never tested
        return res.A, {"nca": nca, "supervised_graph_ids": [int(g) for g in np.asarray(S.graph_ids)[sel]]}

    def _rep(self, state: KernelState) -> RepresentationSet:
        return RepresentationSet.from_arrays(state.arrays, self.lengths, self.heights)

    def embed(self, graphs: GraphBatch, state: KernelState) -> ProximityEmbedding:
        """Proximity vectors ``φ(G)`` (n, p) of ``graphs`` against the stored ``S``, less the
        state's ``rep.phi_mean`` where it has one (``center``).

        A graph whose content is that of a graph of ``S`` gets the vector stored at fit
        (``rep.phi``, computed by this same code); the others are computed here.
        """
        n = len(graphs)
        phi_rep = np.asarray(state.arrays["rep.phi"])
        known = {int(k): j for j, k in enumerate(np.asarray(state.arrays["rep.key"], dtype=np.uint64))}
        hit = np.array([known.get(graph_key(graphs[i:i + 1]), -1) for i in range(n)], dtype=np.int64)
        features = np.empty((n, phi_rep.shape[1]))
        capped = np.zeros(n, np.int64)
        cached = hit >= 0
        features[cached] = phi_rep[hit[cached]]
        capped[cached] = np.asarray(state.arrays["rep.capped"])[hit[cached]]
        todo = np.flatnonzero(~cached)
        if len(todo):
            dvec, cap = self.distance_vectors(graphs.take(todo), self._rep(state), int(state.attrs.get("seed", 0)))
            features[todo] = self.proximity(dvec, np.asarray(state.arrays["nca.A"]))
            capped[todo] = cap
        if "rep.phi_mean" in state.arrays:  # one subtraction per coordinate: chunk-independent
            features -= np.asarray(state.arrays["rep.phi_mean"])[None, :]
        return ProximityEmbedding(features, capped)

    def pairwise(self, a: ProximityEmbedding, b: ProximityEmbedding, state: KernelState) -> np.ndarray:
        """Elementary kernel between proximity vectors, row by row.

        Row ``i`` is ``(a_i * b).sum(axis=1)`` (linear) or ``exp(−γ ((a_i − b)²).sum(axis=1))``
        (RBF): each entry is one reduction over the ``p`` coordinates of that pair alone, in
        NumPy's fixed order for a contiguous row, so ``K(a_i, b_j)`` does not depend on the
        other graphs of the tile (no BLAS product whose blocking depends on the shapes).
        """
        A, B = a.features, np.ascontiguousarray(b.features)
        out = np.empty((len(A), len(B)))
        rbf = self.elementary_kernel == "rbf"
        gamma = float(state.attrs.get("gamma", 1.0)) if rbf else 0.0
        for i in range(len(A)):
            if rbf:
                diff = A[i] - B
                out[i] = np.exp(-gamma * (diff * diff).sum(axis=1))
            else:
                out[i] = (A[i] * B).sum(axis=1)
        return out

    def self_similarity(self, a: ProximityEmbedding, state: KernelState) -> np.ndarray:
        """K(G, G): ``(φ * φ).sum(axis=1)`` (the same reduction as :meth:`pairwise`), or 1 (RBF)."""
        if self.elementary_kernel == "rbf":
            return np.ones(len(a))
        F = np.ascontiguousarray(a.features)
        return np.array([(F[i] * F[i:i + 1]).sum(axis=1)[0] for i in range(len(F))])

    def embedding_counts(self, emb: ProximityEmbedding) -> dict[str, int]:
        """Roots where the per-node cap was hit, and graphs with at least one, in a chunk."""
        capped = np.asarray(emb.capped)
        return {"roots_capped": int(capped.sum()), "graphs_capped": int((capped > 0).sum()),
                "graphs": len(capped)}

    def report_embeddings(self, counts: dict[str, int]) -> list[str]:
        if not counts.get("roots_capped"):
            return []
        graphs = f"{counts['graphs_capped']} of the {counts['graphs']} graphs embedded in this run"
        return [_cap_note(self.max_walks_per_node, counts["roots_capped"], graphs)
                + " (raise the cap for exact decompositions)"]

    def report(self, state: KernelState) -> list[str]:
        """Notes for the user: NCA summary, label use, and per-node cap hits."""
        at = state.attrs
        notes = []
        nca = at.get("nca", {})
        if nca.get("mode") in ("full", "diag"):
            notes.append(
                f"NCA ({nca['mode']}, lambda={nca['lambda']}) learned on the class labels of "
                f"{nca['labelled_graphs']} graphs ({nca['labelled_graph_ids']}); objective "
                f"{nca['objective_initial']:.2f} -> {nca['objective_final']:.2f}. Their ids are in the "
                "state (supervised_graph_ids): gramdist evaluate keeps them in every training part and "
                "tests only the other graphs, so fit on a sample (fit.sample_size) that leaves enough")
        capped = at.get("cap.roots_capped_in_representation_set", 0)
        if capped:
            graphs = f"{at.get('cap.graphs_capped_in_representation_set')} representation graphs"
            notes.append(_cap_note(at.get("cap.max_walks_per_node"), capped, graphs))
        return notes


def _cap_note(cap: int | None, roots: int, graphs: str) -> str:
    """The note for per-node cap hits, in the fitted state or in a run's embeddings."""
    return (f"per-node cap max_walks_per_node={cap} hit on {roots} roots of {graphs}: "
            "their walks/trees are a seeded random subset")


__all__ = ["AdaptiveMatchingKernel", "ProximityEmbedding", "RepresentationSet", "graph_key"]


def _median_gamma(phi: np.ndarray) -> float:
    """The RBF width 1 / median of the squared distances between the proximity vectors (|S|, m)
    of distinct graphs of the representation set (1 when they all coincide)."""
    sq = ((phi[:, None, :] - phi[None, :, :]) ** 2).sum(-1)
    med = float(np.median(sq[np.triu_indices(len(phi), 1)]))
    return 1.0 / med if med > 0 else 1.0
