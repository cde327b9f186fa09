"""Propagation kernels (Neumann, Garnett, Bauckhage & Kersting, MLJ 2016).

Definition (the paper's Algorithm 1 with the linear base kernel)
---------------------------------------------------------------
Each node ``v`` carries a label distribution ``p_{0,v}`` (a row of ``P_0``). For
``t = 0..t_max``: quantise every node's current distribution into a bin with a
locality-sensitive hash ``h_t``, count the nodes of each graph per bin,
``φ_t(G) = (#{v ∈ G : h_t(p_{t,v}) = b})_b``, and propagate ``P_{t+1} = T P_t``. The kernel is

    K(G, G') = Σ_{t=0..t_max} <φ_t(G), φ_t(G')>,

so it has explicit features: bin counts keyed by ``(t, bin)``. ``t_max`` counts propagation
steps; ``t_max + 1`` feature sets (the authors' code loops ``iteration = 0..num_iterations``;
GraKeL's ``Propagation(t_max=T)`` makes ``T`` sets, i.e. ours with ``t_max = T - 1``).

Propagation (``scheme``)
------------------------
``T = D^-1 A`` (row-normalised adjacency, unit edge weights).

* ``"diffusion"`` (default; the paper's scheme for fully labelled graphs): ``P_{t+1} = T P_t``.
* ``"label_propagation"`` (the paper's scheme for partially labelled graphs): after each
  step the labelled nodes are pushed back to their initial distribution,
  ``P_{t+1}[L] = P_0[L]`` (the authors' ``label_propagation.m``).
  With every node labelled nothing moves (``P_t = P_0``): use it with ``missing_label``.

Initial distributions: a labelled node has the point mass on its label; with
``missing_label`` set, nodes carrying that label value are *unlabelled* and start from the
uniform distribution over the labels of the fit sample (the authors' demo). A node without
neighbours keeps its distribution (``T`` has a 1 on its diagonal): ``D^-1 A`` is undefined
there (0/0 in the authors' Matlab code; GraKeL's ``normalize`` makes the row zero, so its
isolated nodes fall to the all-zero vector after one step — the one place where GraKeL's
values differ from ours; tests compare on graphs without isolated nodes). Graphs without
node labels: every node has label 0, so every distribution is the point mass and the kernel
counts nodes, ``(t_max + 1)·|V|·|V'|``. Edge labels and attributes are ignored.

Hashing (the paper's Algorithm 3, ``calculate-lsh``)
---------------------------------------------------
``h_t(p) = floor((f(p)·v_t + b_t) / w)`` with bin width ``w``, offset ``b_t = w·U[0, 1)`` and a
fresh random projection ``v_t`` per iteration:

* ``metric="tv"`` (total variation, default; the ℓ1 distance of distributions): ``f(p) = p``,
  ``v_t`` standard Cauchy (1-stable), drawn as a ratio of two normals;
* ``metric="hellinger"``: ``f(p) = sqrt(p)`` element-wise, ``v_t`` standard normal (2-stable).

``v_t`` has one coordinate per label *value*, a function of (``fit``'s seed, ``t``, label)
(:mod:`gramdist.kernels.propagation.random`), so labels unseen at fit time get their
coordinate the same way, and a graph's bins depend only on the graph and the seed, never on
the chunk it is embedded in. With the same projections and offsets injected into GraKeL's
``Propagation``, the Grams agree (tests, MUTAG / PTC_MR / ENZYMES).

Defaults: ``t_max = 5``, ``w = 1e-4`` (the authors' code; GraKeL uses ``w = 0.01``),
``metric = "tv"``.

Arithmetic and determinism
--------------------------
For ``tv`` the projection is linear, so ``P_t v_t = T^t (P_0 v_t)`` (the push-back of label
propagation commutes with it too): the kernel propagates the ``t_max + 1`` projected columns
``P_0 [v_0 … v_{t_max}]`` (an ``|V| × (t_max+1)`` array) instead of the ``|V| × L`` distributions,
so memory and time do not grow with the number of labels. ``hellinger`` needs the
distributions themselves (``|V| × L`` dense, over the labels present in the chunk). Every
row's arithmetic is fixed: CSR products add a row's neighbours in their stored order, and
projections add label columns one at a time in increasing label order — so a node's bins do
not depend on the other graphs of its chunk. Rounding can still differ from another
implementation (or for a renumbered graph) in the last bit, which moves a value across a bin
border with probability ~1e-16 · |value| / w per node.

Propagation with attributes (:class:`PropagationAttrKernel`, ``propagation_attr``)
--------------------------------------------------------------------------------
Numerical node attributes ``x_v`` (rows of ``X``, all dimensions) are propagated the same
way (``X_{t+1} = T X_t``, diffusion) and hashed per iteration:

* ``hashing="projection"`` (default; Algorithm 3 applied to the attribute vectors): one
  bin ``floor((x·v_t + b_t) / w)``, ``v_t`` Cauchy for ``metric="l1"`` (default) or normal
  for ``"l2"``;
* ``hashing="per_dimension"`` (GraKeL's ``PropagationAttr``): each dimension is quantised on
  its own, ``floor((x_j v_{t,j} + b_{t,j}) / w)``, and the node's bin is the tuple. GraKeL
  draws its offsets as ``w·N(0, 1)``; ours are ``w·U[0, 1)`` (the LSH scheme's uniform
  offsets); tests inject ours into GraKeL and get its Gram.

Attributes are used as given (no standardisation: choose ``w`` on their scale; default
``w = 4``, GraKeL's). Graphs without node attributes are refused (``JobError``).

Labels and attributes together (``with_labels: true``): the paper's kernel for attributed
graphs that also carry labels propagates both. A node's bin at iteration t is then the pair
(its label distribution's bin, as ``propagation`` computes it with diffusion, the TV hash and
width ``label_w``; its attribute bin), so two nodes count as equal only when they fall in the
same bin for both, the product of the two node kernels:

    K(G, G') = Σ_{t=0..t_max} Σ_{v ∈ G, v' ∈ G'} [h^lab_t(v) = h^lab_t(v')] [h^attr_t(v) = h^attr_t(v')].

The label hash draws its projections from a seed derived from the fit seed (not the
attributes' own streams). The DM paper's Table 3 PK rows (labels and attributes) are
this reading; the default (``false``) uses the attributes alone, as GraKeL's
``PropagationAttr`` does.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import (
    LINEAR_NODE_WEIGHT,
    KernelState,
    check_int,
    check_param,
    check_real,
    is_int,
    node_attributes,
)
from gramdist.kernels.hashing import as_u64, combine, mix, tag
from gramdist.kernels.propagation.random import cauchy, normal, uniform
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures

_TAG = tag("propagation.bin")
_TAG_ATTR = tag("propagation_attr.bin")
_TAG_JOINT = tag("propagation_attr.labels")
# random streams (see random.py): projections and offsets never share one
_S_GAUSS, _S_CAUCHY, _S_OFFSET = 10, 20, 1000
_BIN_LIMIT = float(2**62)


def transition_matrix(graphs: GraphBatch) -> sp.csr_matrix:
    """Block-diagonal ``T = D^-1 A`` of the batch; a node without neighbours gets ``T[v, v] = 1``."""
    a = graphs.adjacency()
    deg = np.diff(a.indptr)
    iso = deg == 0
    if iso.any():
        a = (a + sp.diags(iso.astype(np.float64), format="csr")).tocsr()
        a.sort_indices()
        deg = np.diff(a.indptr)
    data = np.repeat(1.0 / deg.astype(np.float64), deg)
    return sp.csr_matrix((data, a.indices.copy(), a.indptr.copy()), shape=a.shape)


def _bins(values: np.ndarray, offset: float, w: float) -> np.ndarray:
    """``floor((values + offset) / w)`` as int64 (clipped far outside any realistic range)."""
    b = np.floor((values + offset) / w)
    return np.clip(b, -_BIN_LIMIT, _BIN_LIMIT).astype(np.int64)


def _bin_counts(graphs: GraphBatch, keys: list[np.ndarray]) -> SparseFeatures:
    """(G, ·) counts of each graph's nodes per bin key, over the iterations' key arrays."""
    rows = np.tile(graphs.node_graph, len(keys))
    return SparseFeatures.from_pairs(rows, np.concatenate(keys), 1.0, len(graphs))


def _weighted_columns(m: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """``Σ_j m[:, j] · coef[j]`` added column after column (fixed order for every row)."""
    acc = np.zeros(m.shape[0])
    for j in range(m.shape[1]):
        acc += m[:, j] * coef[j]
    return acc


class PropagationKernel(SparseFeatureKernel):
    """Propagation kernel for labelled (or partially labelled) graphs, explicit bin-count features.

    Parameters
    ----------
    t_max : int, default 5
        Propagation steps; bins of iterations 0..t_max are counted.
    w : float, default 1e-4
        Bin width of the locality-sensitive hash.
    metric : {"tv", "hellinger"}, default "tv"
        Distance between distributions the hash preserves.
    scheme : {"diffusion", "label_propagation"}, default "diffusion"
        Propagation scheme (see the module docstring).
    missing_label : int or None, default None
        Label value marking unlabelled nodes (uniform initial distribution); None: every
        node is labelled.
    """

    name = "propagation"
    node_weight = LINEAR_NODE_WEIGHT  # one linear pass: D&D runs in process

    def __init__(self, t_max: int = 5, w: float = 1e-4, metric: str = "tv", scheme: str = "diffusion",
                 missing_label: int | None = None) -> None:
        self.t_max = t_max
        self.w = w
        self.metric = metric
        self.scheme = scheme
        self.missing_label = missing_label

    def validate(self) -> None:
        n = self.name
        check_int(self.t_max, n, "t_max", 0, 100)
        check_real(self.w, n, "w", 0, lo_open=True)
        check_param(self.metric in ("tv", "hellinger"), n, "metric",
                    f"must be 'tv' or 'hellinger', got {self.metric!r}")
        check_param(self.scheme in ("diffusion", "label_propagation"), n, "scheme",
                    f"must be 'diffusion' or 'label_propagation', got {self.scheme!r}")
        check_param(self.missing_label is None or is_int(self.missing_label),
                    n, "missing_label", f"must be null or an integer, got {self.missing_label!r}")

    # ------------------------------------------------------------ contract
    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        labels = self._labels(graphs)
        alphabet = np.unique(labels)
        if self.missing_label is not None:
            alphabet = alphabet[alphabet != self.missing_label]
        return KernelState(arrays={"alphabet": alphabet.astype(np.int64)},
                           attrs={"seed": int(seed), "fit_graphs": len(graphs)})

    def embed(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        return self.features_with(graphs, state)

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        raise TypeError("the propagation kernel's features depend on the fitted seed: use embed(graphs, state)")

    def report(self, state: KernelState) -> list[str]:
        alphabet = state.arrays.get("alphabet", np.zeros(0))
        return [f"propagation: {len(alphabet)} label values in the fit sample; projections seeded "
                f"by seed {state.attrs.get('seed')}"]

    # ------------------------------------------------------------ internals
    def _labels(self, graphs: GraphBatch) -> np.ndarray:
        return graphs.node_labels if graphs.node_labels is not None else np.zeros(graphs.n_nodes, np.int64)

    def projection(self, t: int, keys: np.ndarray, seed: int) -> np.ndarray:
        """The coordinates ``v_t[σ]`` of label values ``keys`` (Cauchy for tv, normal for hellinger)."""
        if self.metric == "tv":
            return cauchy(seed, _S_CAUCHY, t, as_u64(keys))
        return normal(seed, _S_GAUSS, t, as_u64(keys))

    def offset(self, t: int, seed: int) -> float:
        """``b_t = w · U[0, 1)``."""
        return float(self.w) * float(uniform(seed, _S_OFFSET, t, np.zeros(1, np.uint64))[0])

    def features_with(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        return _bin_counts(graphs, self.node_keys(graphs, state))

    def node_keys(self, graphs: GraphBatch, state: KernelState, tm: sp.csr_matrix | None = None) -> list[np.ndarray]:
        """Per iteration t = 0..t_max, the (n_nodes,) bin key of every node of ``graphs``
        (``tm``: the batch's :func:`transition_matrix`, when the caller has it)."""
        seed = int(state.attrs["seed"])
        alphabet = np.asarray(state.arrays["alphabet"], dtype=np.int64)
        labels = self._labels(graphs)
        n = graphs.n_nodes
        unl = labels == self.missing_label if self.missing_label is not None else np.zeros(n, dtype=bool)
        clamp = ~unl if self.scheme == "label_propagation" else None
        tm = transition_matrix(graphs) if tm is None else tm
        w = float(self.w)
        keys = []
        if self.metric == "tv":
            # projected columns P_0 v_t for every t, propagated together (linear hash)
            present = np.unique(labels[~unl])
            cols = np.empty((n, self.t_max + 1))
            for t in range(self.t_max + 1):
                v_present = self.projection(t, present, seed)
                if len(present):
                    z = v_present[np.minimum(np.searchsorted(present, labels), len(present) - 1)]
                else:
                    z = np.zeros(n)
                if unl.any():
                    v_alpha = self.projection(t, alphabet, seed)
                    p = 1.0 / len(alphabet) if len(alphabet) else 0.0
                    z = np.where(unl, _weighted_columns(np.full((1, len(alphabet)), p), v_alpha)[0], z)
                cols[:, t] = z
            init = cols.copy() if clamp is not None else None
            for t in range(self.t_max + 1):
                keys.append(combine(_TAG, np.uint64(t), as_u64(_bins(cols[:, t], self.offset(t, seed), w))))
                if t < self.t_max:
                    rest = tm @ cols[:, t + 1:]
                    if clamp is not None:
                        rest[clamp] = init[clamp, t + 1:]
                    cols[:, t + 1:] = rest
        else:
            # Hellinger: the distributions themselves, over the label values of the chunk
            present = np.unique(labels[~unl])
            columns = np.union1d(present, alphabet) if unl.any() else present
            p0 = np.zeros((n, len(columns)))
            lab_idx = np.searchsorted(columns, labels)
            rows = np.flatnonzero(~unl)
            p0[rows, lab_idx[rows]] = 1.0
            if unl.any() and len(alphabet):
                p0[np.ix_(np.flatnonzero(unl), np.searchsorted(columns, alphabet))] = 1.0 / len(alphabet)
            p = p0
            for t in range(self.t_max + 1):
                proj = _weighted_columns(np.sqrt(p), self.projection(t, columns, seed))
                keys.append(combine(_TAG, np.uint64(t), as_u64(_bins(proj, self.offset(t, seed), w))))
                if t < self.t_max:
                    p = tm @ p
                    if clamp is not None:
                        p[clamp] = p0[clamp]
        return keys


class PropagationAttrKernel(SparseFeatureKernel):
    """Propagation kernel for graphs with numerical node attributes, explicit bin-count features.

    Parameters
    ----------
    t_max : int, default 5
        Propagation steps (diffusion); bins of iterations 0..t_max are counted.
    w : float, default 4.0
        Bin width, on the attributes' scale.
    metric : {"l1", "l2"}, default "l1"
        Distance the hash preserves (Cauchy or Gaussian projections).
    hashing : {"projection", "per_dimension"}, default "projection"
        One random projection per iteration, or GraKeL's per-dimension quantisation.
    with_labels : bool, default False
        Bin nodes by their label distribution too (see "Labels and attributes together").
    label_w : float, default 1e-4
        Bin width of the label hash (``with_labels``; the ``propagation`` kernel's default).
    """

    name = "propagation_attr"
    uses_node_attributes = True
    later_params = {"with_labels": False, "label_w": 1e-4}

    def __init__(self, t_max: int = 5, w: float = 4.0, metric: str = "l1", hashing: str = "projection",
                 with_labels: bool = False, label_w: float = 1e-4) -> None:
        self.t_max = t_max
        self.w = w
        self.metric = metric
        self.hashing = hashing
        self.with_labels = with_labels
        self.label_w = label_w

    def validate(self) -> None:
        n = self.name
        check_int(self.t_max, n, "t_max", 0, 100)
        check_real(self.w, n, "w", 0, lo_open=True)
        check_param(self.metric in ("l1", "l2"), n, "metric", f"must be 'l1' or 'l2', got {self.metric!r}")
        check_param(self.hashing in ("projection", "per_dimension"), n, "hashing",
                    f"must be 'projection' or 'per_dimension', got {self.hashing!r}")
        check_param(isinstance(self.with_labels, bool), n, "with_labels",
                    f"must be true or false, got {self.with_labels!r}")
        check_real(self.label_w, n, "label_w", 0, lo_open=True)

    def _attrs(self, graphs: GraphBatch, dim: int | None = None) -> np.ndarray:
        return node_attributes(graphs, self.name, fitted_dim=dim)

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        x = self._attrs(graphs)
        arrays = self.label_kernel().fit(graphs, seed).arrays if self.with_labels else {}
        return KernelState(arrays=arrays, attrs={"seed": int(seed), "attr_dim": int(x.shape[1]),
                                                 "fit_graphs": len(graphs)})

    def embed(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        return self.features_with(graphs, state)

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        raise TypeError("the propagation kernel's features depend on the fitted seed: use embed(graphs, state)")

    def projection(self, t: int, dim: int, seed: int) -> np.ndarray:
        """``v_t`` over the attribute dimensions (Cauchy for l1, normal for l2)."""
        keys = np.arange(dim, dtype=np.uint64)
        if self.metric == "l1":
            return cauchy(seed, _S_CAUCHY, t, keys)
        return normal(seed, _S_GAUSS, t, keys)

    def offsets(self, t: int, dim: int, seed: int) -> np.ndarray:
        """Per-dimension offsets ``w · U[0, 1)`` (``hashing="per_dimension"``); entry 0 is the
        projection's offset."""
        return float(self.w) * uniform(seed, _S_OFFSET, t, np.arange(dim, dtype=np.uint64))

    def features_with(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        tm = transition_matrix(graphs)  # one for both propagations
        keys = self.node_keys(graphs, state, tm)
        if self.with_labels:
            labels = self.label_kernel().node_keys(graphs, self._label_state(state), tm)
            keys = [combine(_TAG_JOINT, lab, att) for lab, att in zip(labels, keys)]
        return _bin_counts(graphs, keys)

    def label_kernel(self) -> PropagationKernel:
        """The label part of ``with_labels``: diffusion of the label distributions, TV hash of
        width ``label_w``, the same ``t_max``."""
        return PropagationKernel(t_max=self.t_max, w=self.label_w)

    @staticmethod
    def _label_state(state: KernelState) -> KernelState:
        # the label hash draws its projections from a seed of its own, so that a label value's
        # coordinate is not the attribute dimension's of the same number
        seed = int(mix(combine(_TAG_JOINT, np.uint64(int(state.attrs["seed"]) & 0xFFFFFFFFFFFFFFFF))))
        return KernelState(arrays={"alphabet": np.asarray(state.arrays.get("alphabet", np.zeros(0, np.int64)))},
                           attrs={"seed": seed})

    def node_keys(self, graphs: GraphBatch, state: KernelState, tm: sp.csr_matrix | None = None) -> list[np.ndarray]:
        """Per iteration t = 0..t_max, the (n_nodes,) attribute bin key of every node (``tm``:
        the batch's :func:`transition_matrix`, when the caller has it)."""
        seed, dim = int(state.attrs["seed"]), int(state.attrs["attr_dim"])
        x = np.array(self._attrs(graphs, dim), dtype=np.float64)
        tm = transition_matrix(graphs) if tm is None else tm
        w = float(self.w)
        n = graphs.n_nodes
        keys = []
        if self.hashing == "projection":
            cols = np.empty((n, self.t_max + 1))
            for t in range(self.t_max + 1):
                cols[:, t] = _weighted_columns(x, self.projection(t, dim, seed))
            for t in range(self.t_max + 1):
                keys.append(combine(_TAG_ATTR, np.uint64(t),
                                    as_u64(_bins(cols[:, t], float(self.offsets(t, 1, seed)[0]), w))))
                if t < self.t_max:
                    cols[:, t + 1:] = tm @ cols[:, t + 1:]
        else:
            for t in range(self.t_max + 1):
                v, b = self.projection(t, dim, seed), self.offsets(t, dim, seed)
                parts = [as_u64(np.clip(np.floor((x[:, j] * v[j] + b[j]) / w), -_BIN_LIMIT, _BIN_LIMIT)
                                .astype(np.int64)) for j in range(dim)]
                keys.append(combine(_TAG_ATTR, np.uint64(t), np.uint64(dim), *parts))
                if t < self.t_max:
                    x = tm @ x
        return keys
