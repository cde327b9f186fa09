"""Lovász θ kernel (``lovasz_theta``) and SVM-θ kernel (``svm_theta``), Johansson et al., ICML 2014.

Definition (paper, Section 3)
-----------------------------
Each graph G gets a representation of its nodes (``solvers.py``): for the Lovász kernel an
optimal orthonormal representation from the Lovász θ SDP; for SVM-θ the one-class SVM
coefficients α on ``K = A/ρ + I``. A vertex subset S ⊆ V then has a value: the Lovász value
``θ_S = min_c max_{i∈S} 1/(c·u_i)^2`` (the representation is the graph's, not re-optimised
for S), or the SVM-θ value ``Σ_{i∈S} α_i``. The kernel compares the distributions of these
values over subsets of equal size:

    k(G, G') = Σ_{S ⊆ V} Σ_{S' ⊆ V'} δ(|S|, |S'|) / Z_{|S|} · k_base(θ_S, θ_S'),
    Z_d = C(n, d) · C(n', d),

estimated by sampling: ``k̂ = Σ_d (1/(s_d s'_d)) Σ_{S ∈ 𝔖_d} Σ_{S' ∈ 𝔖'_d} k_base(θ_S, θ_S')``
over the sampled subsets 𝔖_d of size d.

Choices (the paper leaves them to the user; we follow GraKeL where it is faithful)
-----------------------------------------------------------------------------------
* Subset sizes ``subset_sizes = [2, 8]`` (inclusive) and ``n_samples = 50`` subsets per graph
  in total, spread over the sizes d ≤ n in proportion to C(n, d) (floored; the remainder goes
  one each to the largest sizes) — GraKeL's defaults and its ``distribute_samples``. Subsets
  are drawn uniformly without replacement. A size with no sample (d > n) contributes 0; a
  graph with fewer nodes than the smallest size has an all-zero embedding (K(G, G) = 0:
  cosine normalisation gives 0 for it, never NaN).
* ``base_kernel = "linear"`` (GraKeL's default): k̂ is then the dot product of the per-size
  means of the sampled values — **explicit features** (one per size), used for feature
  stores. ``"rbf"``: ``exp(-gamma (x - y)^2)``, averaged over all pairs of sampled subsets
  (no finite feature map; costs s_d·s'_d evaluations per size and pair).
  For SVM-θ with the linear base kernel, note that the expected feature of size d is
  ``d · mean(α)``: the exact kernel has rank one (Σ d² · ᾱ ᾱ'), and sampling only adds noise;
  the RBF base kernel does not have this defect.
* Randomness: each graph's subsets come from a generator seeded by fit's ``seed`` and a
  stable hash of the graph (its node count and edge multiset), so a graph gets the same
  embedding in any chunk and any process; the same graph with its nodes permuted draws
  different subsets (the kernel is permutation invariant in distribution only).
* Lovász: the SDP is solved by cvxopt (optional dependency: ``pip install cvxopt``), interior
  point with tolerances ``sdp_tol = 1e-8`` (θ exact to about 1e-8 relative). Its cost grows
  like n^4 (0.02 s at 30 nodes, 0.8 s at 100, 10 s at 200, measured under load): graphs with
  more than ``max_nodes`` (250) nodes raise a ``JobError`` instead of running for hours
  (D&D's proteins reach 5,748 nodes). Subset values are exact minimum-norm points over the
  subset (sizes up to 10). GraKeL's ``LovaszTheta`` differs: its SDP is that of the
  complement graph, and it averages the cosine ``min_i c·u_i`` of an approximate enclosing
  cone (Welzl's algorithm with a 0.1 tolerance) instead of θ_S = 1/(...)^2; its values are
  not comparable (the tests compare θ itself with GraKeL's SDP on complements).
* SVM-θ: ``ρ = -λ_min(A)·(1 + rho_margin)``, ``rho_margin = 1e-3``. The paper allows any
  ρ ≥ -λ_min(A); with ρ = -λ_min exactly, K is singular and the α of a graph with an edge
  are not unique (for a single edge, any α_1 + α_2 = 1 is optimal), so subset sums would
  depend on the solver. The margin makes K positive definite and α unique. The QP is solved
  exactly by block principal pivoting (``solvers.one_class_svm``), dense up to 100 nodes and
  sparse (SuperLU) above, memory O(edges) for large graphs. The dense graphs of a chunk are
  solved in stacks of equal node count (``solvers.one_class_svm_stack``: per-matrix LAPACK
  calls, so a graph's α do not depend on its chunk); their α agree with the one-graph solver
  to rounding (NCI1's embeddings to 1.7e-14). λ_min of the larger ones comes from one Lanczos
  run over all of a chunk's (``eigen.smallest_eigenvalues``: residual 1e-12 relative, the same
  bits alone or in any chunk), and their QP from one SuperLU factorisation of K each
  (``solvers._CapacitanceSolver``; K_FF refactored at each step above 2,000 nodes). Version 2
  (2026-11-29): version 1 took λ_min from dense ``eigvalsh`` up to 300 nodes and ARPACK above,
  and refactored K_FF at each step; D&D's Gram moved by at most 1e-14 relative, and its
  embedding takes 1.8 s instead of 4.2 s. GraKeL's ``SvmTheta`` runs
  libsvm's one-class SVM with ν = 0.5 on the singular K (a different problem: Σα = n/2 with
  α ≤ 1, and K = 0 without the identity for an edgeless graph), and its default metric
  ``np.inner(x, y)[0, 0]`` on (sizes, 1) columns keeps only the size-2 feature, which gets no
  sample once n ≳ 12: K(G, G) = 0 for most NCI1 graphs, hence its non-finite normalised Gram
  (ours is finite there; tested).
* Labels and attributes are ignored (the kernels are defined for unlabelled graphs);
  self-loops and repeated edges are dropped.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from threadpoolctl import threadpool_limits

from gramdist.arrayops import group_offsets, rank_in_runs, run_starts
from gramdist.graphs import GraphBatch, symmetric_csr
from gramdist.kernels.base import (
    POOLED_NODE_WEIGHT,
    GraphKernel,
    KernelState,
    check_int,
    check_param,
    check_real,
    is_int,
)
from gramdist.kernels.eigen import smallest_eigenvalues
from gramdist.kernels.hashing import combine, multiset_sum, tag
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms
from gramdist.kernels.theta import solvers
from gramdist.kernels.theta.solvers import (
    lovasz_representation,
    one_class_svm,
    one_class_svm_stack,
    require_cvxopt,
    simplex_min,
    theta_matrix,
)

_BASES = ("linear", "rbf")
_GRAPH_TAG = tag("theta.graph")
_SIZE_TAG = tag("theta.size")
#: broadcast elements per band of the RBF pairwise
_BAND_ELEMENTS = 1 << 22
#: matrix entries per stack of SVM-θ's dense solver (32 MB of float64)
_STACK_ENTRIES = 1 << 22




def samples_per_size(n: int, lo: int, hi: int, n_samples: int) -> dict[int, int]:
    """GraKeL's ``distribute_samples``: subsets of each size d in lo..min(hi, n), ∝ C(n, d)."""
    return dict(_sample_plan(n, lo, hi, n_samples))


@functools.lru_cache(maxsize=4096)
def _sample_plan(n: int, lo: int, hi: int, n_samples: int) -> tuple[tuple[int, int], ...]:
    """:func:`samples_per_size` as ``(size, count)`` pairs, computed once per node count."""
    top = min(hi, n)
    if top < lo:
        return ()
    sizes = list(range(lo, top + 1))
    w = np.array([float(math.comb(n, d)) for d in sizes])
    w /= w.sum()
    counts = np.floor(w * n_samples).astype(int)
    for r in range(int(n_samples - counts.sum())):
        counts[(len(sizes) - r - 1) % len(sizes)] += 1
    return tuple((d, int(c)) for d, c in zip(sizes, counts) if c > 0)


@dataclass(frozen=True)
class SubsetDraws:
    """The vertex subsets sampled for a chunk's graphs, one row per subset, grouped by graph
    and, within a graph, by size: ``graph`` (R,) its graph, ``size`` (R,) its size d, ``slot``
    (R,) its rank among its graph's subsets of that size, ``nodes`` (R, hi) int64 the first
    ``hi`` nodes of the row's random permutation (-1 past a graph's node count), whose first
    d, sorted, are the subset."""

    graph: np.ndarray
    size: np.ndarray
    slot: np.ndarray
    nodes: np.ndarray


def _draw_subsets(graphs: GraphBatch, seed: int, lo: int, hi: int, n_samples: int) -> SubsetDraws:
    """Each graph's subsets: d nodes uniformly without replacement, ``cnt`` times per size
    (:func:`samples_per_size`), as the first d of a random permutation (the argsort of i.i.d.
    uniforms). A graph's generator is seeded by ``seed`` and its :func:`graph_hashes` entry,
    and all its sizes' rows come from one draw (the same stream as one draw per size: argsort
    is per row), so its subsets never depend on the chunk it is in."""
    seed &= 0xFFFFFFFFFFFFFFFF
    words = [seed & 0xFFFFFFFF, seed >> 32]
    tops, ids, plans = [], [], []
    for g, (n, h) in enumerate(zip(graphs.nodes_per_graph.tolist(), graph_hashes(graphs).tolist())):
        sizes = _plan_rows(n, lo, hi, n_samples)
        if not len(sizes):
            continue
        rng = np.random.default_rng([*words, h & 0xFFFFFFFF, h >> 32])
        top = np.argsort(rng.random((len(sizes), n)), axis=1)[:, :hi]
        if n < hi:
            top = np.concatenate([top, np.full((len(top), hi - n), -1, dtype=top.dtype)], axis=1)
        tops.append(top)
        ids.append(g)
        plans.append(sizes)
    if not tops:
        empty = np.zeros(0, dtype=np.int64)
        return SubsetDraws(empty, empty, empty, np.zeros((0, hi), dtype=np.int64))
    size = np.concatenate(plans)
    graph = np.repeat(np.array(ids, dtype=np.int64), [len(p) for p in plans])
    rank = rank_in_runs(run_starts(graph, size))  # among the rows of its (graph, size) group
    return SubsetDraws(graph, size, rank, np.concatenate(tops).astype(np.int64, copy=False))


@functools.lru_cache(maxsize=4096)
def _plan_rows(n: int, lo: int, hi: int, n_samples: int) -> np.ndarray:
    """The size of each of a graph's sampled subsets, in draw order: :func:`_sample_plan`'s
    sizes, each repeated by its count (read-only: shared between calls)."""
    plan = _sample_plan(n, lo, hi, n_samples)
    rows = np.repeat(np.array([d for d, _ in plan], dtype=np.int64), [c for _, c in plan])
    rows.flags.writeable = False
    return rows


def _graph_runs(graph: np.ndarray) -> list[tuple[int, int, int]]:
    """``(g, start, stop)`` of each run of equal values in ``graph`` (rows grouped by graph)."""
    bounds = np.append(np.flatnonzero(run_starts(graph)), len(graph))
    return [(int(graph[a]), int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def graph_hashes(graphs: GraphBatch) -> np.ndarray:
    """(G,) uint64 stable hash of each graph's node count and edge multiset."""
    e = graphs.edges.astype(np.int64)
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    edge_h = combine(lo, hi)
    indptr = graphs.edge_offsets - graphs.edge_offsets[0]
    return combine(_GRAPH_TAG, graphs.nodes_per_graph, multiset_sum(edge_h, indptr))


def simple_edges(graphs: GraphBatch, g: int) -> np.ndarray:
    """Graph g's distinct undirected edges without self-loops, (m, 2) local indices, lo < hi."""
    a, b = graphs.edge_offsets[g] - graphs.edge_offsets[0], graphs.edge_offsets[g + 1] - graphs.edge_offsets[0]
    e = graphs.edges[a:b].astype(np.int64)
    lo, hi = np.minimum(e[:, 0], e[:, 1]), np.maximum(e[:, 0], e[:, 1])
    keep = lo != hi
    pairs = np.unique(np.stack([lo[keep], hi[keep]], axis=1), axis=0) if keep.any() else np.zeros((0, 2), np.int64)
    return pairs.reshape(-1, 2)


def simple_edge_lists(graphs: GraphBatch) -> tuple[np.ndarray, np.ndarray]:
    """:func:`simple_edges` of every graph at once: ``(offsets, pairs)``, graph g's edges being
    ``pairs[offsets[g]:offsets[g + 1]]``. They are the entries above the diagonal of the
    batch's adjacency (``GraphBatch.adjacency``: repeated edges once, columns sorted), in its
    row order: one pass for the batch instead of one ``np.unique`` per graph (0.4 s of SVM-θ's
    1.9 s embedding of NCI1 was those calls)."""
    a = graphs.adjacency()
    rows = np.repeat(np.arange(graphs.n_nodes, dtype=np.int64), np.diff(a.indptr))
    cols = a.indices.astype(np.int64)
    above = cols > rows
    rows, cols = rows[above], cols[above]
    g = graphs.node_graph[rows]
    first = graphs.node_offsets[g] - graphs.node_offsets[0]  # each graph's first node in the batch
    return group_offsets(g, len(graphs)), np.stack([rows - first, cols - first], axis=1)


@dataclass(eq=False)
class ThetaFeatures(SparseFeatures):
    """The linear base kernel's embedding: per-size mean values as sparse features, and the
    number of graphs of the chunk whose solver stopped short of its tolerance (a 1-element array,
    so that the embedding is plain arrays a store can keep)."""

    not_converged: np.ndarray | int = 0


@dataclass(eq=False)
class ThetaSamples:
    """Sampled subset values of a chunk: ``values`` (G, n_sizes, n_samples) NaN-padded,
    ``counts`` (G, n_sizes) samples per size; sizes are ``lo..hi`` of the kernel."""

    values: np.ndarray
    counts: np.ndarray
    not_converged: np.ndarray | int = 0

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, key: slice | int) -> ThetaSamples:
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            key = slice(i, i + 1)
        return ThetaSamples(self.values[key].copy(), self.counts[key].copy())  # counters stay with the chunk

    def means(self) -> np.ndarray:
        """(G, n_sizes) mean value per size (0 where a size has no sample)."""
        with np.errstate(invalid="ignore"):
            m = np.nansum(self.values, axis=2) / np.maximum(self.counts, 1)
        return np.where(self.counts > 0, m, 0.0)


class _ThetaKernel(GraphKernel):
    """Shared sampling and kernel machinery; subclasses give the per-graph subset values."""

    has_embedding_counts: ClassVar[bool] = True
    _max_size: ClassVar[int] = 64

    n_samples: int
    subset_sizes: list
    base_kernel: str
    gamma: float

    @property
    def has_feature_vectors(self) -> bool:  # type: ignore[override]
        return self.base_kernel == "linear"

    def _sizes(self) -> tuple[int, int]:
        lo, hi = self.subset_sizes
        return int(lo), int(hi)

    def validate(self) -> None:
        n = self.name
        check_int(self.n_samples, n, "n_samples", 1, 100_000)
        ok = (isinstance(self.subset_sizes, (list, tuple)) and len(self.subset_sizes) == 2
              and all(is_int(v) for v in self.subset_sizes)
              and 1 <= self.subset_sizes[0] <= self.subset_sizes[1] <= self._max_size)
        check_param(ok, n, "subset_sizes", f"must be [min, max] with 1 <= min <= max <= {self._max_size}, "
                    f"got {self.subset_sizes!r}")
        check_param(self.base_kernel in _BASES, n, "base_kernel",
                    f"must be one of {', '.join(_BASES)}, got {self.base_kernel!r}")
        check_real(self.gamma, n, "gamma", 0, lo_open=True)

    # ------------------------------------------------------------ per graph (subclasses)
    def _graph_state(self, n: int, edges: np.ndarray) -> tuple[object, bool]:
        """The representation of one graph and whether its solver converged."""
        raise NotImplementedError

    def _graph_states(self, graphs: GraphBatch, ids: list[int], offsets: np.ndarray, pairs: np.ndarray
                      ) -> tuple[dict[int, object], int]:
        """The representations of the graphs ``ids`` (from their simple edge lists ``pairs``,
        graph ``g``'s at ``offsets[g]:offsets[g + 1]``) and how many solvers did not converge;
        subclasses may batch them."""
        reps: dict[int, object] = {}
        not_converged = 0
        sizes = graphs.nodes_per_graph  # a property: np.diff at every call
        for g in ids:
            reps[g], ok = self._graph_state(int(sizes[g]), pairs[offsets[g]:offsets[g + 1]])
            not_converged += not ok
        return reps, not_converged

    def _subset_values(self, rep: object, subsets: np.ndarray) -> np.ndarray:
        """(s,) values of the (s, d) subsets (node indices) under the representation."""
        raise NotImplementedError

    def _packed(self, reps: dict[int, object]) -> object:
        """The chunk's representations in the form :meth:`_size_values` takes: here the dict of
        them by graph, as :meth:`_graph_states` gives it."""
        return reps

    def _size_values(self, packed: object, graph: np.ndarray, subsets: np.ndarray) -> np.ndarray:
        """(R,) values of the subsets of one size ``subsets`` (R, d), row r one of graph
        ``graph[r]`` (rows grouped by graph), from :meth:`_packed`; graph by graph here,
        subclasses compute them at once (the same values: each is its own subset's)."""
        out = np.empty(len(graph))
        for g, a, b in _graph_runs(graph):
            out[a:b] = self._subset_values(packed[g], subsets[a:b])
        return out

    # ------------------------------------------------------------ contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        return KernelState(arrays={}, attrs={"seed": int(seed), "fit_graphs": len(graphs)})

    def embed(self, graphs: GraphBatch, state: KernelState) -> ThetaSamples | SparseFeatures:
        lo, hi = self._sizes()
        n_sizes = hi - lo + 1
        s_max = int(self.n_samples)
        values = np.full((len(graphs), n_sizes, s_max), np.nan)
        offsets, pairs = simple_edge_lists(graphs)
        # one BLAS thread: the solvers' small problems gain nothing from threads, and a graph's
        # values must not depend on the thread count of the worker computing them
        with threadpool_limits(1):
            draws = _draw_subsets(graphs, int(state.attrs.get("seed", 0)), lo, hi, s_max)
            drawn = draws.graph[run_starts(draws.graph)].tolist()  # rows come grouped by graph
            reps, not_converged = self._graph_states(graphs, drawn, offsets, pairs)
            packed = self._packed(reps)
            for d in range(lo, hi + 1):
                rows = np.flatnonzero(draws.size == d)
                if len(rows):
                    graph = draws.graph[rows]
                    values[graph, d - lo, draws.slot[rows]] = self._size_values(
                        packed, graph, np.sort(draws.nodes[rows, :d], axis=1))
        counts = np.bincount(draws.graph * n_sizes + (draws.size - lo), minlength=len(graphs) * n_sizes)
        counts = counts.reshape(len(graphs), n_sizes).astype(np.int64, copy=False)
        flag = np.array([not_converged], dtype=np.int64)
        emb = ThetaSamples(values, counts, flag)
        if self.base_kernel == "linear":
            f = self._linear_features(emb)
            return ThetaFeatures(f.indptr, f.keys, f.values, not_converged=flag)
        return emb

    def _linear_features(self, emb: ThetaSamples) -> SparseFeatures:
        lo, _ = self._sizes()
        means = emb.means()
        g, j = np.nonzero(emb.counts > 0)
        keys = combine(_SIZE_TAG, j + lo)
        return SparseFeatures.from_pairs(g, keys, means[g, j], len(emb))

    def pairwise(self, a, b, state: KernelState) -> np.ndarray:
        if self.base_kernel == "linear":
            return dot(a, b)
        return _rbf_block(a, b, float(self.gamma))

    def self_similarity(self, a, state: KernelState) -> np.ndarray:
        if self.base_kernel == "linear":
            return sq_norms(a)
        return np.array([_rbf_block(a[i:i + 1], a[i:i + 1], float(self.gamma))[0, 0] for i in range(len(a))])

    def feature_vectors(self, emb, state: KernelState) -> SparseFeatures:
        if self.base_kernel != "linear":
            raise NotImplementedError(f"{type(self).__name__} with base_kernel='rbf' has no explicit features")
        return emb

    # ------------------------------------------------------------ notes
    def embedding_counts(self, emb) -> dict[str, int]:
        return {"graphs": len(emb), "solver_not_converged": int(np.sum(getattr(emb, "not_converged", 0)))}

    def report_embeddings(self, counts: dict[str, int]) -> list[str]:
        bad = counts.get("solver_not_converged", 0)
        if not bad:
            return []
        return [f"{self.name}: the solver stopped short of its tolerance on {bad} of {counts.get('graphs', 0)} graphs "
                "(their values are the solver's last iterate)"]


def _rbf_block(a: ThetaSamples, b: ThetaSamples, gamma: float) -> np.ndarray:
    """Mean RBF kernel over all pairs of sampled values of equal size, summed over sizes.

    For each size, an entry is the sequential sum over sample pairs (p, q) in p-major order
    (a prefix sum along the leading axis), divided by s_d s'_d; padding is +inf in ``a`` and
    -inf in ``b``, so padded pairs add exp(-inf) = 0.0 exactly and the result does not depend
    on how far the tile pads: the same bits whatever the other graphs of the tile.
    """
    out = np.zeros((len(a), len(b)))
    for j in range(a.values.shape[1]):
        p, q = int(a.counts[:, j].max(initial=0)), int(b.counts[:, j].max(initial=0))
        if p == 0 or q == 0:
            continue
        xa = np.where(np.isnan(a.values[:, j, :p]), np.inf, a.values[:, j, :p]).T  # (p, na)
        xb = np.where(np.isnan(b.values[:, j, :q]), -np.inf, b.values[:, j, :q]).T  # (q, nb)
        total = np.empty((len(a), len(b)))
        band = max(1, _BAND_ELEMENTS // (p * q * max(1, len(b))))
        for r0 in range(0, len(a), band):
            r1 = min(r0 + band, len(a))
            diff = xa[:, None, r0:r1, None] - xb[None, :, None, :]  # (p, q, rows, nb)
            e = np.exp(-gamma * diff * diff).reshape(p * q, (r1 - r0) * len(b))
            # a prefix sum is sequential by definition (a reduction may regroup by shape)
            total[r0:r1] = np.cumsum(e, axis=0)[-1].reshape(r1 - r0, len(b))
        denom = np.outer(a.counts[:, j], b.counts[:, j]).astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            out += np.where(denom > 0, total / denom, 0.0)
    return out


class LovaszThetaKernel(_ThetaKernel):
    """Lovász θ kernel; see the module docstring.

    Parameters
    ----------
    n_samples : int, default 50
        Sampled subsets per graph, spread over the sizes.
    subset_sizes : [int, int], default [2, 8]
        Smallest and largest subset size (at most 10).
    base_kernel : {"linear", "rbf"}, default "linear"
    gamma : float, default 1.0
        RBF parameter (``base_kernel="rbf"`` only).
    sdp_tol : float, default 1e-8
        cvxopt's absolute, relative and feasibility tolerances.
    max_nodes : int, default 250
        Larger graphs raise a JobError (the SDP's cost grows like n^4).
    """

    name = "lovasz_theta"
    _max_size: ClassVar[int] = 10
    # one cvxopt SDP per graph, GIL held: ~1.4 ms per NCI1 node; 800 NCI1 graphs took 29.5 s
    # of embeddings in this process, 14.9 s on two worker processes
    node_weight = 100.0

    def __init__(self, n_samples: int = 50, subset_sizes: list | tuple = (2, 8), base_kernel: str = "linear",
                 gamma: float = 1.0, sdp_tol: float = 1e-8, max_nodes: int = 250) -> None:
        self.n_samples = n_samples
        self.subset_sizes = subset_sizes
        self.base_kernel = base_kernel
        self.gamma = gamma
        self.sdp_tol = sdp_tol
        self.max_nodes = max_nodes

    def validate(self) -> None:
        super().validate()
        check_real(self.sdp_tol, self.name, "sdp_tol", 0, 1, lo_open=True, hi_open=True)
        check_int(self.max_nodes, self.name, "max_nodes", 1)
        require_cvxopt()

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        require_cvxopt()
        return super().fit(graphs, seed)

    def _graph_state(self, n: int, edges: np.ndarray) -> tuple[object, bool]:
        if n > int(self.max_nodes):
            from gramdist.errors import JobError

            raise JobError(f"kernel {self.name}: a graph has {n} nodes, more than max_nodes={self.max_nodes}; the "
                           "Lovász SDP's cost grows like n^4 (about 10 s at 200 nodes): raise kernel.max_nodes "
                           "or use svm_theta")
        theta, k, ok = lovasz_representation(n, edges, float(self.sdp_tol))
        return k, ok

    def _subset_values(self, rep: object, subsets: np.ndarray) -> np.ndarray:
        k = np.asarray(rep)
        ks = k[subsets[:, :, None], subsets[:, None, :]]
        return 1.0 / simplex_min(ks)

    def _size_values(self, packed: object, graph: np.ndarray, subsets: np.ndarray) -> np.ndarray:
        """All subsets of one size, over every graph of the chunk, in one :func:`simplex_min`
        call (each matrix is solved on its own, so a value does not depend on the batch)."""
        ks = []
        for g, a, b in _graph_runs(graph):
            sub, k = subsets[a:b], np.asarray(packed[g])  # type: ignore[index]
            ks.append(k[sub[:, :, None], sub[:, None, :]])
        return 1.0 / simplex_min(np.concatenate(ks))

    def theta(self, graphs: GraphBatch) -> np.ndarray:
        """(G,) Lovász numbers θ(G) of the graphs (the SDP's optimum)."""
        offsets, pairs = simple_edge_lists(graphs)
        sizes = graphs.nodes_per_graph
        return np.array([lovasz_representation(int(sizes[g]), pairs[offsets[g]:offsets[g + 1]],
                                               float(self.sdp_tol))[0] for g in range(len(graphs))])


class SvmThetaKernel(_ThetaKernel):
    """SVM-θ kernel; see the module docstring.

    Parameters
    ----------
    n_samples : int, default 50
    subset_sizes : [int, int], default [2, 8]
    base_kernel : {"linear", "rbf"}, default "linear"
    gamma : float, default 1.0
    rho_margin : float, default 1e-3
        ``ρ = -λ_min(A)(1 + rho_margin)``: K = A/ρ + I positive definite, α unique.
    """

    name = "svm_theta"
    version = 2  # Lanczos and one factorisation per graph above 100 nodes (module docstring)
    # equal-size graphs stacked through LAPACK (eigvalsh, solve) and SuperLU for the large ones:
    # in the pool, NCI1 end to end 1.41 -> 1.37 s; D&D in process (2 threads 2.1-2.2 s against
    # 2.5-2.8 s in one, 2026-11-29)
    embeds_in_threads = True
    # SuperLU takes the GIL at each allocation and the pivoting is short NumPy calls: two threads
    # embed D&D in 1.5 s against 1.75 s in one; two forked processes in about 1.05 s
    embeds_in_processes = True
    node_weight = POOLED_NODE_WEIGHT

    def __init__(self, n_samples: int = 50, subset_sizes: list | tuple = (2, 8), base_kernel: str = "linear",
                 gamma: float = 1.0, rho_margin: float = 1e-3) -> None:
        self.n_samples = n_samples
        self.subset_sizes = subset_sizes
        self.base_kernel = base_kernel
        self.gamma = gamma
        self.rho_margin = rho_margin

    def validate(self) -> None:
        super().validate()
        check_real(self.rho_margin, self.name, "rho_margin", 0, 1, lo_open=True)

    def alphas(self, n: int, edges: np.ndarray) -> np.ndarray:
        """The one-class SVM coefficients α of one graph (local edge list): the same bits as
        the embedding's batched paths give it."""
        if n <= solvers.DENSE_MAX:  # small graphs: dense arrays, no sparse-matrix overhead
            return self.alphas_stack(n, [edges])[0]
        return self.alphas_sparse([n], [edges])[0]

    def alphas_sparse(self, sizes: list[int], edge_lists: list[np.ndarray]) -> list[np.ndarray]:
        """The α of graphs of more than ``DENSE_MAX`` nodes (local edge lists): λ_min(A) of
        all of them by one Lanczos run on their block-diagonal adjacency (each graph's λ the
        same bits alone or among others), then each one's QP on sparse K."""
        lam = np.zeros(len(sizes))
        with_edges = [i for i, e in enumerate(edge_lists) if len(e)]
        if with_edges:
            offsets = np.concatenate([[0], np.cumsum([sizes[i] for i in with_edges])]).astype(np.int64)
            edges = np.concatenate([edge_lists[i] + offsets[j] for j, i in enumerate(with_edges)])
            lam[with_edges] = smallest_eigenvalues(symmetric_csr(edges, int(offsets[-1])), offsets)
        out = []
        for n, e, x in zip(sizes, edge_lists, lam.tolist()):
            if not len(e) or x >= 0:  # K = I
                out.append(np.ones(n))
            else:
                out.append(one_class_svm(theta_matrix(n, e, -x * (1.0 + float(self.rho_margin)))))
        return out

    def alphas_stack(self, n: int, edge_lists: list[np.ndarray]) -> np.ndarray:
        """(B, n) one-class SVM coefficients of B graphs of ``n <= DENSE_MAX`` nodes (local edge
        lists), each the same bits alone or in any stack (per-matrix LAPACK calls, see
        :func:`solvers.one_class_svm_stack`)."""
        b = len(edge_lists)
        if n == 0:
            return np.ones((b, 0))
        a = np.zeros((b, n, n))
        which = np.repeat(np.arange(b), [len(e) for e in edge_lists])
        e = np.concatenate(edge_lists) if b else np.zeros((0, 2), np.int64)
        a[which, e[:, 0], e[:, 1]] = a[which, e[:, 1], e[:, 0]] = 1.0
        lam = np.linalg.eigvalsh(a)[:, 0]
        out = np.ones((b, n))  # K = I: no edge, or no negative eigenvalue
        svm = np.array([len(e) > 0 for e in edge_lists], dtype=bool) & (lam < 0)
        if svm.any():
            scale = -lam[svm] * (1.0 + float(self.rho_margin))
            out[svm] = one_class_svm_stack(a[svm] / scale[:, None, None] + np.eye(n))
        return out

    def _graph_state(self, n: int, edges: np.ndarray) -> tuple[object, bool]:
        return self.alphas(n, edges), True

    def _graph_states(self, graphs: GraphBatch, ids: list[int], offsets: np.ndarray, pairs: np.ndarray
                      ) -> tuple[dict[int, object], int]:
        """Graphs of up to ``DENSE_MAX`` nodes in stacks of equal size (:meth:`alphas_stack`: on
        NCI1, 4,110 small problems' Python overhead was most of the embedding); larger ones
        together on the sparse path (:meth:`alphas_sparse`)."""
        sizes = graphs.nodes_per_graph
        by_size: dict[int, list[int]] = {}
        large = []
        for g in ids:
            if sizes[g] <= solvers.DENSE_MAX:
                by_size.setdefault(int(sizes[g]), []).append(g)
            else:
                large.append(g)
        reps: dict[int, object] = dict(zip(large, self.alphas_sparse(
            [int(sizes[g]) for g in large], [pairs[offsets[g]:offsets[g + 1]] for g in large])))
        for n, same in sorted(by_size.items()):
            step = max(1, _STACK_ENTRIES // max(1, n * n))
            for a in range(0, len(same), step):
                part = same[a:a + step]
                alphas = self.alphas_stack(n, [pairs[offsets[g]:offsets[g + 1]] for g in part])
                reps.update(zip(part, alphas))
        return reps, 0

    def _subset_values(self, rep: object, subsets: np.ndarray) -> np.ndarray:
        alpha = np.asarray(rep)
        vals = alpha[subsets]
        out = np.zeros(len(subsets))
        for c in range(vals.shape[1]):  # sequential sum in index order
            out += vals[:, c]
        return out

    def _packed(self, reps: dict[int, object]) -> tuple[np.ndarray, np.ndarray]:
        """The chunk's α laid end to end, and where each graph's start (by graph index)."""
        ids = sorted(reps)
        sizes = np.array([len(reps[g]) for g in ids], dtype=np.int64)
        start = np.zeros(max(ids, default=-1) + 1, dtype=np.int64)
        start[ids] = np.cumsum(sizes) - sizes
        flat = np.concatenate([np.asarray(reps[g], dtype=np.float64) for g in ids]) if ids else np.zeros(0)
        return flat, start

    def _size_values(self, packed: object, graph: np.ndarray, subsets: np.ndarray) -> np.ndarray:
        """:meth:`_subset_values` of every subset of one size at once, on the packed α (the
        same sums, in the same order)."""
        flat, start = packed  # type: ignore[misc]
        return self._subset_values(flat, subsets + start[graph][:, None])


__all__ = ["LovaszThetaKernel", "SvmThetaKernel", "ThetaFeatures", "ThetaSamples", "graph_hashes", "samples_per_size",
           "simple_edge_lists", "simple_edges"]
