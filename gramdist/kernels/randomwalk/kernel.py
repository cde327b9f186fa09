"""Random-walk kernels: p-step, geometric, exponential (Vishwanathan, Schraudolph, Kondor &
Borgwardt, JMLR 2010; Sugiyama & Borgwardt, NIPS 2015 "Halting in random walk kernels").

Definition
----------
The direct product graph ``G_x`` of ``G`` and ``G'`` has a node for every pair ``(v, v')`` with
equal node labels and an edge ``(u, u')(v, v')`` when ``uv`` is an edge of ``G``, ``u'v'`` one of
``G'`` (and, with ``use_edge_labels``, the two edges have equal labels). With ``W_x`` its
adjacency matrix and uniform (all-ones) start and stop vectors — the convention of
Sugiyama & Borgwardt, where ``1^T W_x^t 1`` is the number of pairs of equally labelled walks of
length ``t`` —

    k(G, G') = sum_{t >= 0} mu_t 1^T W_x^t 1,

* ``kind: p_step``: ``mu_t = lam^t`` for ``t <= p``, 0 after (the k-step kernel with
  geometric weights, GraKeL's ``p=p`` with ``kernel_type="geometric"``);
* ``kind: geometric``: ``mu_t = lam^t`` (``= 1^T (I - lam W_x)^-1 1``); the series converges iff
  ``lam rho(W_x) < 1``;
* ``kind: exponential``: ``mu_t = lam^t / t!`` (``= 1^T exp(lam W_x) 1``), always convergent.

Every choice the papers leave open
----------------------------------
* **Start/stop vectors**: all ones over the product nodes (no 1/n normalisation); cosine
  normalisation is ``gram.normalize``.
* **Labels**: node labels must match (``use_labels``, default true; datasets without node labels
  have one label); edge labels only with ``use_edge_labels`` (default false, as GraKeL's
  ``RandomWalkLabeled``, which ignores them). Node attributes are not used. Self-loops are walk
  steps (they are 1 on the adjacency diagonal).
* **Convergence of the geometric kernel** (``lam`` validated): ``rho(W_x) <= rho(A) rho(A')
  <= d_max(G) d_max(G')``, so gramdist requires ``lam d_max(G) d_max(G') < 1`` for every pair —
  sufficient, not necessary. ``fit`` checks it on the fit sample (a ``JobError`` naming ``lam``
  and the largest admissible value ``1 / d_max^2``), ``pairwise`` on every pair it meets (an
  ``InputError`` for an out-of-sample graph of larger degree). GraKeL instead silently lowers
  ``lam`` to 0.9 / rho_max^2 with a warning.

Solvers, and why
----------------
``solver: auto`` picks, per kind and per whether the fit sample has labels the kernel uses:

* **p-step: explicit features** (``solver: features``). ``1^T W_x^t 1 = sum_s c_s(G) c_s(G')``
  where ``c_s`` counts the walks of length ``t`` with label sequence ``s``, so
  ``phi_(t,s) = lam^(t/2) c_s`` is a finite feature map (Kriege et al. 2019 show explicit maps
  win for short walks). ``embed`` counts walks by dynamic programming over (end node,
  label-sequence hash) states; ``pairwise`` is a sparse dot product; feature stores get the
  rows. The states grow like ``n d^t`` with many labels (D&D, 82 labels: 26 million for p = 3),
  where ``solver: product`` computes p-step implicitly.
* **Unlabelled geometric / exponential: truncated series features** (``solver: features``).
  Without labels ``c`` is the walk count ``m_t = 1^T A^t 1`` and
  ``k = sum_t mu_t m_t m'_t``; since ``m_t <= n d^t`` and ``k >= n n'``, dropping the terms past
  ``T`` changes any value whose graphs have degree ``<= d`` by a relative
  ``sum_{t > T} mu_t (d d')^t`` at most; ``fit`` picks the smallest ``T`` making that ``<= tol``
  for the fit sample's largest degree (13 terms for lam = 0.01, d = 4, tol = 1e-10). ``embed``
  is ``T`` sparse products per graph, ``pairwise`` a dot product of ``T + 1`` numbers — O(1) per
  pair instead of the spectral O(n n'). Graphs of larger degree met later still get exact
  ``T``-term values (a p-step kernel), but the bound no longer covers them:
  ``report_embeddings`` counts them.
* **Unlabelled, exact to rounding: spectral** (``solver: spectral``, the paper's Sec. 4.4):
  ``embed`` decomposes each graph, ``A = V diag(w) V^T`` (``numpy.linalg.eigh``, O(n^3)), keeping
  ``w`` and ``s = (V^T 1)^2``; ``k = sum_ij s_i s'_j f(w_i w'_j)``, ``f(x) = 1/(1 - lam x)`` or
  ``exp(lam x)``, O(n n') per pair (D&D: 5.6e10 evaluations in all, and an O(n^3)
  decomposition of its 5,748-node graph). The tests check it against the series features.
* **Labelled geometric / exponential** (and p-step with ``solver: product``): the series on the
  product graph **without forming it**: ``W_x vec(X) = vec(M ∘ (A X A'))`` (the Kronecker
  identity, ``M`` the label-agreement mask; with edge labels a sum over labels of
  ``A_e X A'_e``). Only the product nodes are stored: with each side's nodes sorted by label,
  ``M ∘ X`` is a set of dense label blocks ``X_l`` holding the equally labelled node pairs of
  many graph pairs at once, and ``(A X A')_l = sum_l' A[l, l'] X_l' A'[l', l]`` over the label
  pairs joined by edges on both sides (sparse adjacency blocks times dense blocks, in groups of
  about 2^17 product nodes, sized for the caches). The geometric kernel is solved by **fixed-point
  iteration** ``x <- 1 + lam W_x x`` (the partial sums of the series) rather than conjugate
  gradients: each graph pair stops on its own, as soon as a rigorous bound on its remaining
  tail, ``T_t r / (1 - r)`` with ``r = lam d_max d'_max``, is at most ``tol`` times its partial
  sum; this needs no inner products across the tile (values do not depend on which pairs
  share a tile) and the bound is an a-posteriori error certificate. The exponential kernel sums
  its Taylor series with the tail bound ``T_t q / (1 - q)``, ``q = r / (t + 1) <= 1/2`` (no
  eigendecomposition of the product graph; Krylov methods would need per-pair inner products
  again). Cost per step: the product nodes of every graph pair times the degree — NCI1: 4.3e9
  equally labelled node pairs (7.5e9 node pairs), ~80 µs per graph pair measured; D&D: 3.3e9
  (5.6e10 node pairs), ~1,500 s on one core projected from a sample at lam = 0.5/d_max^2 (about
  5 steps); more steps as ``lam d_max^2`` nears 1.

``tol`` (default 1e-10) is the relative error bound of every truncated series; ``max_iter``
caps the steps of the product solver.

Against GraKeL
--------------
* ``RandomWalk`` (unlabelled): the same kernel. Its ``"fast"`` geometric mode runs conjugate
  gradients capped at 20 iterations with ``rtol = 1e-6``, so values agree to about 1e-6; its
  spectral modes (exponential, ``p``) agree to rounding.
* ``RandomWalkLabeled``: its product graph keeps *every* node pair (start vector all ones over
  ``n n'`` pairs) and only masks edges by label agreement, so pairs of differently labelled
  nodes each add their ``t = 0`` term 1: ``K_grakel = K + n n' - |V_x|``. The tests check that
  relation on MUTAG, PTC_MR and ENZYMES.
"""

from __future__ import annotations

import numpy as np

from gramdist.errors import InputError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState, check_int, check_param, check_real
from gramdist.kernels.randomwalk.solvers import (
    Series,
    SpectralEmbedding,
    WalkFeatures,
    max_degrees,
    product_pairwise,
    series_terms,
    spectral_pairwise,
    walk_features,
)
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms

KINDS = ("p_step", "geometric", "exponential")
#: graphs are grouped up to this many nodes to compute their K(g, g) in one call
_SELF_GROUP_NODES = 256
SOLVERS = ("auto", "features", "spectral", "product")


class ProductEmbedding:
    """Embedding of the product solver: the graphs themselves (sliceable) and their max degree."""

    def __init__(self, graphs: GraphBatch) -> None:
        self.graphs = graphs
        self.max_degree = max_degrees(graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def __getitem__(self, key: slice) -> ProductEmbedding:
        if isinstance(key, (int, np.integer)):
            key = slice(int(key), int(key) + 1)
        return ProductEmbedding(self.graphs[key])


class RandomWalkKernel(GraphKernel):
    """p-step / geometric / exponential random-walk kernel; see the module docstring.

    Parameters
    ----------
    kind : {"p_step", "geometric", "exponential"}, default "geometric"
    lam : float, default 0.01
        The weight ``lambda`` (``mu_t = lam^t`` or ``lam^t / t!``).
    p : int, default 3
        Number of steps of the p-step kernel.
    use_labels : bool, default True
        Product nodes need equal node labels.
    use_edge_labels : bool, default False
        Product edges need equal edge labels.
    solver : {"auto", "features", "spectral", "product"}, default "auto"
        auto: features for p-step and for unlabelled geometric/exponential, product for
        labelled geometric/exponential.
    tol : float, default 1e-10
        Relative error bound of the truncated series (features and product solvers).
    max_iter : int, default 10000
        Largest number of series terms (product solver).
    """

    name = "random_walk"

    def __init__(self, kind: str = "geometric", lam: float = 0.01, p: int = 3, use_labels: bool = True,
                 use_edge_labels: bool = False, solver: str = "auto", tol: float = 1e-10,
                 max_iter: int = 10000) -> None:
        self.kind = kind
        self.lam = lam
        self.p = p
        self.use_labels = use_labels
        self.use_edge_labels = use_edge_labels
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter

    has_embedding_counts = True

    @property
    def node_weight(self) -> float:  # type: ignore[override]
        """10 when the tiles may solve a product-graph system per pair (geometric or exponential
        with solver auto on labelled graphs, or solver product), in many small GIL-holding
        steps: 600 NCI1 graphs, geometric, took 9.1 s of tiles on one thread, 7.7 s on two,
        3.0 s on two worker processes. 1 otherwise (explicit features)."""
        product = self.solver == "product" or (self.solver == "auto" and self.kind != "p_step")
        return 10.0 if product else 1.0

    @property
    def has_feature_vectors(self) -> bool:  # type: ignore[override]
        """Explicit features: p-step (solver auto or features), or any kind with solver features."""
        return self.solver == "features" or (self.kind == "p_step" and self.solver == "auto")

    # ------------------------------------------------------------ params
    def validate(self) -> None:
        n = self.name
        check_param(self.kind in KINDS, n, "kind", f"must be one of {', '.join(KINDS)}, got {self.kind!r}")
        check_real(self.lam, n, "lam", 0, lo_open=True)
        check_int(self.p, n, "p", 0, 100)
        for q in ("use_labels", "use_edge_labels"):
            check_param(isinstance(getattr(self, q), bool), n, q, f"must be true or false, got {getattr(self, q)!r}")
        check_param(self.solver in SOLVERS, n, "solver", f"must be one of {', '.join(SOLVERS)}, got {self.solver!r}")
        check_param(not (self.solver == "spectral" and self.kind == "p_step"), n, "solver",
                    "'spectral' is for geometric and exponential; p_step uses features or product")
        check_real(self.tol, n, "tol", 0, 1, lo_open=True, hi_open=True)
        check_int(self.max_iter, n, "max_iter", 1)

    # ------------------------------------------------------------ contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        labelled = (self.use_labels and graphs.node_labels is not None) or \
                   (self.use_edge_labels and graphs.edge_labels is not None)
        route = self.solver
        if route == "auto":
            route = "features" if (self.kind == "p_step" or not labelled) else "product"
        if route == "spectral" and labelled:
            check_param(False, self.name, "solver", "'spectral' needs unlabelled graphs (set use_labels: false "
                        "and use_edge_labels: false, or use solver: product)")
        if route == "features" and labelled and self.kind != "p_step":
            check_param(False, self.name, "solver", f"'features' for kind {self.kind} needs unlabelled graphs "
                        "(labelled walk sequences of unbounded length have no finite feature map): "
                        "use solver: product")
        d = int(max_degrees(graphs).max()) if len(graphs) and graphs.n_nodes else 0
        if self.kind == "geometric" and d > 0:
            bound = 1.0 / (d * d)
            check_param(self.lam < bound, self.name, "lam",
                        f"must be below 1 / d_max^2 = {bound:.6g} for these graphs (largest degree {d}) "
                        "for the geometric series to converge, got {:.6g}".format(self.lam))
        attrs = {"fit_graphs": len(graphs), "route": route, "max_degree": d,
                 "labels": bool(self.use_labels and graphs.node_labels is not None),
                 "edge_labels": bool(self.use_edge_labels and graphs.edge_labels is not None)}
        if route == "features":
            attrs["weights"] = series_terms(self.kind, float(self.lam), int(self.p), d, float(self.tol))
        return KernelState(arrays={}, attrs=attrs)

    def embed(self, graphs: GraphBatch, state: KernelState):
        route = state.attrs["route"]
        if route == "features":
            nl = graphs.node_labels if state.attrs["labels"] else None
            el = graphs.edge_labels if state.attrs["edge_labels"] else None
            if state.attrs["labels"] and nl is None:
                raise InputError(f"kernel {self.name}: fitted with node labels, but these graphs have none")
            if state.attrs["edge_labels"] and el is None:
                raise InputError(f"kernel {self.name}: fitted with edge labels, but these graphs have none")
            fit_degree = None if self.kind == "p_step" else int(state.attrs["max_degree"])
            return walk_features(graphs, [float(w) for w in state.attrs["weights"]], nl, el, fit_degree)
        if route == "spectral":
            return SpectralEmbedding.of(graphs)
        return ProductEmbedding(graphs)

    def embedding_counts(self, emb) -> dict[str, int]:
        if isinstance(emb, WalkFeatures):
            return {"above_fit_degree": int(np.count_nonzero(emb.beyond_fit))}
        return {}

    def report_embeddings(self, counts: dict[str, int]) -> list[str]:
        n = counts.get("above_fit_degree", 0)
        if not n:
            return []
        return [f"{n} graphs have a larger degree than every graph of the fit sample: the {self.kind} series "
                f"truncated for the fit sample may miss more than tol={self.tol} of their values "
                "(refit on a sample that includes them, or use solver: spectral)"]

    def _check_pairs(self, da: np.ndarray, db: np.ndarray) -> None:
        if self.kind != "geometric" or len(da) == 0 or len(db) == 0:
            return
        worst = float(da.max()) * float(db.max())
        if self.lam * worst >= 1.0:
            raise InputError(f"kernel {self.name}: lam={self.lam} makes the geometric series diverge for graphs "
                             f"of largest degrees {int(da.max())} and {int(db.max())}: it needs "
                             f"lam < 1/({int(da.max())}*{int(db.max())}) = {1.0 / worst:.6g}")

    def pairwise(self, a, b, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return dot(a, b)
        self._check_pairs(a.max_degree, b.max_degree)
        if isinstance(a, SpectralEmbedding):
            return spectral_pairwise(a, b, self.kind, float(self.lam))
        series = Series(self.kind, float(self.lam), int(self.p), float(self.tol), int(self.max_iter))
        vals, _ = product_pairwise(a.graphs, b.graphs, series, bool(state.attrs["labels"]),
                                   bool(state.attrs["edge_labels"]))
        return vals

    def self_similarity(self, a, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return sq_norms(a)
        # the diagonal of pairwise on small groups of graphs: each pair's arithmetic ignores the
        # other pairs of its block, so this is bitwise K(g, g), with far fewer calls than one per graph
        out = np.zeros(len(a))
        sizes = np.diff(a.offsets) if isinstance(a, SpectralEmbedding) else a.graphs.nodes_per_graph
        lo = 0
        while lo < len(a):
            hi, acc = lo, 0
            while hi < len(a) and (hi == lo or acc + int(sizes[hi]) <= _SELF_GROUP_NODES):
                acc += int(sizes[hi])
                hi += 1
            out[lo:hi] = np.diag(self.pairwise(a[lo:hi], a[lo:hi], state))
            lo = hi
        return out

    def feature_vectors(self, emb, state: KernelState) -> SparseFeatures:
        if not isinstance(emb, SparseFeatures):
            raise NotImplementedError("only the p-step random-walk kernel has explicit feature vectors")
        return emb

    def report(self, state: KernelState) -> list[str]:
        route = state.attrs.get("route")
        how = {"features": f"explicit walk-count features, {len(state.attrs.get('weights', []))} terms",
               "spectral": "per-graph eigendecomposition",
               "product": f"series on the implicit product graph (tol {self.tol})"}.get(route, route)
        lab = "labelled" if state.attrs.get("labels") else "unlabelled"
        return [f"{self.kind} random walk kernel, lam={self.lam}" + (f", p={self.p}" if self.kind == "p_step" else "")
                + f", {lab}: {how}; largest degree in the fit sample {state.attrs.get('max_degree')}"]


__all__ = ["RandomWalkKernel", "ProductEmbedding"]
