"""Hash graph kernels (Morris, Kriege, Kersting & Mutzel, ICDM 2016): ``hgk_wl`` and ``hgk_sp``.

Definition
----------
A family ``H`` of random hash functions maps continuous attributes to discrete labels; with
``h_1..h_I`` drawn from it and a base kernel ``k_b`` for discretely labelled graphs,

    k_HGK(G, G') = (1/I) Σ_{i=1..I} k_b(h_i(G), h_i(G'))                  (Definition 1)

where ``h_i(G)`` is ``G`` with node label ``h_i(a(v))``. When ``k_b`` has explicit features
``φ_b``, so has ``k_HGK``: the concatenation of the iterations' vectors scaled by ``√(1/I)``
(the paper's Algorithm 1). Base kernels here: the WL subtree kernel (``hgk_wl``, the ``wl``
kernel's features with ``h`` iterations) and the shortest-path kernel (``hgk_sp``, the ``sp``
kernel's features: ordered pairs ``(h(u), h(v), d)``, which is the paper's φ_SP of Eq. (1)).
As ``I`` grows, ``k_HGK`` converges to its expectation over the hash functions, the "implicit"
kernel with node kernel ``Pr[h(x) = h(y)]`` (Theorem 1, Corollary 1); the deviation of one draw
is a mean of ``I`` i.i.d. terms, so it shrinks as ``1/√I``.

Hash functions (the paper leaves the family open; we use the authors' code's choice)
----------------------------------------------------------------------------------
The p-stable locality-sensitive hashing of Datar et al. (2004) for the Euclidean distance,
one projection per iteration, as in the authors' implementation (C. Morris,
``locally_sensitive_hashing``):

    h_i(x) = floor((<r_i, x> + b_i) / w),   r_i ~ N(0, I_p),  b_i ~ U[0, w),  w = bin_width.

Two attribute vectors at distance ``c`` collide with probability
``p(c) = 1 - 2Φ(-w/c) - (2c / (√(2π) w)) (1 - exp(-w²/(2c²)))`` (Datar et al., Eq. 4), which is
the node kernel the hash graph kernel approximates. The authors' code also draws the offset
as ``U[0, w·σ)`` with the projection scaled by ``σ``; with their default ``σ = 1`` this is the
same; we keep only ``bin_width``.

Other choices, and ours
-----------------------
* ``standardize`` (default true, as the authors' ``scale_attributes``): each attribute column is
  centred and scaled to unit variance before hashing — with the mean and standard deviation of
  the **fit sample** (stored in the state), not of the whole dataset, so a graph's features
  depend only on the graph and the state.
* ``with_labels`` (default false, as the authors' code, which hashes the attributes only): when
  true and the graphs have discrete labels, a node's label in iteration ``i`` is the pair
  (discrete label, ``h_i(x)``), i.e. the node kernel becomes ``δ(label) · Pr[h(x) = h(x')]``.
* Randomness: ``r_i`` and ``b_i`` are drawn in ``fit`` from ``numpy.random.default_rng(seed)``
  and stored in the state (arrays ``projections`` (I, p) and ``offsets`` (I,)); ``embed`` only
  reads them, so the same seed gives the same bits whatever the chunking. ``<r_i, x>`` is
  summed attribute by attribute in a fixed order (not a BLAS product), so a node's hash never
  depends on the other graphs of its chunk.
* Feature ids: hashes of ``(iteration i, base feature id)``; the values are the base kernel's
  counts times ``√(1/I)``, so ``pairwise`` is the exact dot product of the concatenated,
  scaled vectors (float arithmetic; in a fixed key order).
* Graphs without attributes: ``JobError`` (use ``wl`` / ``sp``).

Cost: ``I`` times the base kernel's (the shortest-path distances are computed once per graph
and shared by the ``I`` labellings); the features of a graph are at most ``I`` times as many.
"""

from __future__ import annotations

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.allpairs import labelled_distance_counts
from gramdist.kernels.base import KernelState, check_int, check_param, check_real, node_attributes
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.relabel import wl_labels
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures

TAG_HGK_WL = tag("hgk.wl")
TAG_HGK_SP = tag("hgk.sp")
_LABELS_ONLY = "; for labels only, use wl or sp"




class _HashGraphKernel(SparseFeatureKernel):
    """Shared part of the hash graph kernels: attribute hashing and the concatenation."""

    uses_node_attributes = True
    _tag: np.uint64

    def __init__(self, iterations: int = 20, bin_width: float = 1.0, standardize: bool = True,
                 with_labels: bool = False) -> None:
        self.iterations = iterations
        self.bin_width = bin_width
        self.standardize = standardize
        self.with_labels = with_labels

    def validate(self) -> None:
        n = self.name
        check_int(self.iterations, n, "iterations", 1, 10_000)
        check_real(self.bin_width, n, "bin_width", 0, lo_open=True)
        check_param(isinstance(self.standardize, bool), n, "standardize", f"must be true or false, got {self.standardize!r}")
        check_param(isinstance(self.with_labels, bool), n, "with_labels", f"must be true or false, got {self.with_labels!r}")

    def _attrs(self, graphs: GraphBatch) -> np.ndarray:
        return node_attributes(graphs, self.name, "hashes", instead=_LABELS_ONLY)

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        x = self._attrs(graphs)
        p = x.shape[1]
        rng = np.random.default_rng(seed)
        arrays = {
            "projections": rng.standard_normal((self.iterations, p)),
            "offsets": rng.uniform(0.0, float(self.bin_width), self.iterations),
        }
        if self.standardize:
            mean = x.mean(axis=0) if len(x) else np.zeros(p)
            std = x.std(axis=0) if len(x) else np.ones(p)
            arrays["attr_mean"] = mean
            arrays["attr_scale"] = np.where(std > 0, std, 1.0)
        return KernelState(arrays=arrays, attrs={"fit_graphs": len(graphs), "n_attributes": int(p), "seed": int(seed)})

    def hashed_labels(self, graphs: GraphBatch, state: KernelState) -> list[np.ndarray]:
        """(N,) int64 node labels of each iteration: ``floor((<r_i, x> + b_i) / w)`` (with the label)."""
        proj = state.arrays["projections"]
        x = node_attributes(graphs, self.name, "hashes", fitted_dim=proj.shape[1], instead=_LABELS_ONLY)
        if "attr_mean" in state.arrays:
            x = (x - state.arrays["attr_mean"]) / state.arrays["attr_scale"]
        w = float(self.bin_width)
        use_labels = self.with_labels and graphs.node_labels is not None
        out = []
        for i in range(len(proj)):
            acc = np.zeros(len(x))
            for j in range(x.shape[1]):  # fixed order: a node's hash never depends on its chunk
                acc += x[:, j] * proj[i, j]
            lab = np.floor((acc + state.arrays["offsets"][i]) / w).astype(np.int64)
            if use_labels:
                lab = combine(graphs.node_labels, lab).view(np.int64)
            out.append(lab)
        return out

    def base_features(self, graphs: GraphBatch, labels: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        """(rows, keys, counts) of the base kernel for every labelling, keys tagged by iteration."""
        raise NotImplementedError

    def embed(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        labels = self.hashed_labels(graphs, state)
        rows, keys, counts = self.base_features(graphs, labels)
        counted = SparseFeatures.from_pairs(rows, keys, counts, len(graphs))  # exact integer counts
        counted.values *= np.sqrt(1.0 / len(labels))
        return counted

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        raise NotImplementedError(f"{self.name} needs its fitted hash functions: use embed(graphs, state)")

    def report(self, state: KernelState) -> list[str]:
        return [f"{self.name}: {len(state.arrays['projections'])} LSH draws (seed {state.attrs.get('seed')}), "
                f"bin width {self.bin_width}, attributes {'standardised on the fit sample' if self.standardize else 'raw'}"]


class HashWLKernel(_HashGraphKernel):
    """Hash graph kernel with the WL subtree base kernel (``h`` WL iterations on the hashed labels).

    Parameters
    ----------
    iterations : int, default 20
        Number ``I`` of hash functions drawn (the authors' default).
    h : int, default 3
        WL relabelling iterations of the base kernel.
    bin_width : float, default 1.0
        LSH bin width ``w``.
    standardize : bool, default True
        Standardise attributes with the fit sample's mean and std before hashing.
    with_labels : bool, default False
        Pair the hashed label with the node's discrete label.
    """

    name = "hgk_wl"

    def __init__(self, iterations: int = 20, h: int = 3, bin_width: float = 1.0, standardize: bool = True,
                 with_labels: bool = False) -> None:
        super().__init__(iterations=iterations, bin_width=bin_width, standardize=standardize, with_labels=with_labels)
        self.h = h

    def validate(self) -> None:
        super().validate()
        check_int(self.h, self.name, "h", 0, 100)

    def base_features(self, graphs: GraphBatch, labels: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        rows, keys = [], []
        for i, lab in enumerate(labels):
            relabelled = GraphBatch(graphs.node_offsets, graphs.edge_offsets, graphs.edges, node_labels=lab)
            wl = np.concatenate(wl_labels(relabelled, self.h))
            rows.append(np.tile(graphs.node_graph, self.h + 1))
            keys.append(combine(TAG_HGK_WL, np.uint64(i), wl))
        rows_a, keys_a = np.concatenate(rows), np.concatenate(keys)
        return rows_a, keys_a, np.ones(len(keys_a))


class HashSPKernel(_HashGraphKernel):
    """Hash graph kernel with the shortest-path base kernel (explicit ``(h(u), h(v), d)`` counts).

    Parameters as :class:`HashWLKernel` without ``h``.
    """

    name = "hgk_sp"

    def base_features(self, graphs: GraphBatch, labels: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        rows, keys, counts = [], [], []
        for i, (g, lu, lv, d, cnt) in enumerate(labelled_distance_counts(graphs, labels)):
            rows.append(g)
            keys.append(combine(TAG_HGK_SP, np.uint64(i), lu, lv, d))
            counts.append(cnt.astype(np.float64))
        return np.concatenate(rows), np.concatenate(keys), np.concatenate(counts)


__all__ = ["HashWLKernel", "HashSPKernel"]
