"""Propagation kernels (labels and attributes): a dense per-graph brute force of the paper's
Algorithm 1, GraKeL's Propagation / PropagationAttr with our random projections injected, and
the contract (tiles, seeds, out-of-sample, permutations, engine)."""

from __future__ import annotations

import logging
import sys
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.propagation import kernel as pk
from gramdist.kernels.propagation.random import cauchy_parts, normal, uniform
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 4, attr_dim: int = 0) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, attrs = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        attrs.append(rng.normal(size=(k, attr_dim)))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, node_attrs=attrs if attr_dim else None)


def dense_transition(g) -> np.ndarray:
    a = np.zeros((g.n_nodes, g.n_nodes))
    for u, v in g.edges.tolist():
        a[u, v] = a[v, u] = 1.0
    deg = a.sum(axis=1)
    a[deg == 0, deg == 0] = 1.0  # a node without neighbours keeps its distribution
    return a / a.sum(axis=1, keepdims=True)


def dot_counts(feats: list[Counter]) -> np.ndarray:
    return np.array([[sum(c * b.get(k, 0) for k, c in a.items()) for b in feats] for a in feats], dtype=float)


def brute_force_labels(graphs: GraphBatch, kernel, state) -> np.ndarray:
    """Algorithm 1 per graph with dense matrices: P_0 one-hot (uniform over the fit alphabet for
    nodes carrying missing_label), bins floor((f(P_t) v_t + b_t) / w), P_{t+1} = T P_t (labelled
    rows pushed back for label propagation); K = Σ_t <bin counts>."""
    seed = state.attrs["seed"]
    alphabet = state.arrays["alphabet"]
    feats = []
    for g in graphs:
        cols = np.union1d(np.unique(g.node_labels), alphabet)
        unl = g.node_labels == kernel.missing_label if kernel.missing_label is not None else np.zeros(g.n_nodes, bool)
        p0 = np.zeros((g.n_nodes, len(cols)))
        p0[np.flatnonzero(~unl), np.searchsorted(cols, g.node_labels[~unl])] = 1.0
        if unl.any():
            p0[np.ix_(np.flatnonzero(unl), np.searchsorted(cols, alphabet))] = 1.0 / len(alphabet)
        tm = dense_transition(g)
        p = p0.copy()
        c = Counter()
        for t in range(kernel.t_max + 1):
            f = np.sqrt(p) if kernel.metric == "hellinger" else p
            proj = f @ kernel.projection(t, cols, seed)
            for b in np.floor((proj + kernel.offset(t, seed)) / kernel.w).astype(np.int64):
                c[(t, int(b))] += 1
            p = tm @ p
            if kernel.scheme == "label_propagation":
                p[~unl] = p0[~unl]
        feats.append(c)
    return dot_counts(feats)


def brute_force_attrs(graphs: GraphBatch, kernel, state) -> np.ndarray:
    seed, dim = state.attrs["seed"], state.attrs["attr_dim"]
    feats = []
    for g in graphs:
        tm, x = dense_transition(g), g.node_attrs.copy()
        c = Counter()
        for t in range(kernel.t_max + 1):
            v, b = kernel.projection(t, dim, seed), kernel.offsets(t, dim, seed)
            if kernel.hashing == "projection":
                keys = np.floor((x @ v + b[0]) / kernel.w).astype(np.int64).tolist()
            else:
                keys = [tuple(r) for r in np.floor((x * v + b) / kernel.w).astype(np.int64).tolist()]
            for k in keys:
                c[(t, k)] += 1
            x = tm @ x
        feats.append(c)
    return dot_counts(feats)


@pytest.mark.parametrize("metric", ["tv", "hellinger"])
@pytest.mark.parametrize("scheme,missing", [("diffusion", None), ("diffusion", 0), ("label_propagation", 0)])
def test_labels_match_brute_force(metric, scheme, missing):
    graphs = random_graphs(30, seed=3)
    kernel = make_kernel("propagation", t_max=3, w=0.05, metric=metric, scheme=scheme, missing_label=missing)
    state = kernel.fit(graphs, 17)
    assert np.array_equal(gram_by_tiles(kernel, state, graphs, 7), brute_force_labels(graphs, kernel, state))


@pytest.mark.parametrize("metric", ["l1", "l2"])
@pytest.mark.parametrize("hashing", ["projection", "per_dimension"])
def test_attributes_match_brute_force(metric, hashing):
    graphs = random_graphs(30, seed=4, attr_dim=3)
    kernel = make_kernel("propagation_attr", t_max=3, w=0.5, metric=metric, hashing=hashing)
    state = kernel.fit(graphs, 5)
    assert np.array_equal(gram_by_tiles(kernel, state, graphs, 7), brute_force_attrs(graphs, kernel, state))


@pytest.mark.parametrize("hashing", ["projection", "per_dimension"])
def test_labels_with_attributes_match_brute_force(hashing):
    """``with_labels``: a node's bin is (label-distribution bin, attribute bin) per iteration,
    each computed densely as in the two brute forces above; K counts nodes equal in both."""
    graphs = random_graphs(30, seed=6, attr_dim=3)
    kernel = make_kernel("propagation_attr", t_max=3, w=0.5, hashing=hashing, with_labels=True, label_w=0.05)
    state = kernel.fit(graphs, 9)
    labels, lstate = kernel.label_kernel(), kernel._label_state(state)
    seed, dim = state.attrs["seed"], state.attrs["attr_dim"]
    feats = []
    for g in graphs:
        tm = dense_transition(g)
        cols = np.union1d(np.unique(g.node_labels), lstate.arrays["alphabet"])
        p = np.zeros((g.n_nodes, len(cols)))
        p[np.arange(g.n_nodes), np.searchsorted(cols, g.node_labels)] = 1.0
        x = g.node_attrs.copy()
        c = Counter()
        for t in range(kernel.t_max + 1):
            lab = np.floor((p @ labels.projection(t, cols, lstate.attrs["seed"]) + labels.offset(t, lstate.attrs["seed"]))
                           / labels.w).astype(np.int64).tolist()
            v, b = kernel.projection(t, dim, seed), kernel.offsets(t, dim, seed)
            if hashing == "projection":
                att = np.floor((x @ v + b[0]) / kernel.w).astype(np.int64).tolist()
            else:
                att = [tuple(r) for r in np.floor((x * v + b) / kernel.w).astype(np.int64).tolist()]
            for key in zip(lab, att):
                c[(t, key)] += 1
            p, x = tm @ p, tm @ x
        feats.append(c)
    joint = gram_by_tiles(kernel, state, graphs, 7)
    assert np.array_equal(joint, dot_counts(feats))
    # the product of the two node kernels: never more than either alone
    attrs_only = make_kernel("propagation_attr", t_max=3, w=0.5, hashing=hashing)
    assert np.all(joint <= gram_by_tiles(attrs_only, attrs_only.fit(graphs, 9), graphs, 7))
    assert np.all(joint <= gram_by_tiles(labels, lstate, graphs, 7))
    # one label value everywhere: every label bin is shared, so the kernel is the attributes' alone
    same = GraphBatch.from_graphs([g.edges for g in graphs], [g.n_nodes for g in graphs],
                                  node_labels=[np.zeros(g.n_nodes, np.int64) for g in graphs],
                                  node_attrs=[g.node_attrs for g in graphs])
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(same, 9), same, 7),
                          gram_by_tiles(attrs_only, attrs_only.fit(same, 9), same, 7))


def test_hand_worked_example():
    # No labels: every distribution is the point mass, one bin per iteration, so
    # K = (t_max + 1) |V| |V'|.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1]])], [3, 2])
    kernel = make_kernel("propagation", t_max=2)
    assert gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1).tolist() == [[27, 18], [18, 12]]
    # Labels a-b (an edge) and a lone a: at t = 0 both a's share a bin; at t = 1 the edge's
    # nodes hold (0, 1) and (1, 0) while the lone node keeps (1, 0): the b-side node of the
    # edge and the lone a share a bin. So K(edge, lone a) = 1 + 1 for t_max = 1 (distinct
    # distributions fall in distinct bins for this tiny w).
    graphs = GraphBatch.from_graphs([np.array([[0, 1]]), np.zeros((0, 2), int)], [2, 1],
                                    node_labels=[np.array([0, 1]), np.array([0])])
    kernel = make_kernel("propagation", t_max=1, w=1e-6)
    assert gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2).tolist() == [[4, 2], [2, 2]]


def without_isolated_graphs(graphs: GraphBatch) -> GraphBatch:
    deg = np.bincount(graphs.global_edges.ravel(), minlength=graphs.n_nodes)
    iso = np.bincount(graphs.node_graph[deg == 0], minlength=len(graphs))
    return graphs[np.flatnonzero(iso == 0)]


class Injected(np.random.RandomState):
    """A RandomState whose randn / rand return prepared arrays in order (our projections)."""

    def __init__(self, randn: list, rand: list | None = None) -> None:
        super().__init__(0)
        self._randn, self._rand = list(randn), list(rand or [])

    def randn(self, *size):
        return self._randn.pop(0)

    def rand(self, *size):
        return self._rand.pop(0)


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
@pytest.mark.parametrize("metric,grakel_m", [("tv", "TV"), ("hellinger", "H")])
def test_labels_equal_grakel(name, metric, grakel_m, dataset_dir):
    """GraKeL draws, per iteration, randn(L) (divided by randn(L) for TV) over its label
    enumeration and w*rand(); injecting ours gives our Gram. Graphs with isolated nodes are
    left out (GraKeL zeroes their distributions; see the kernel's docstring)."""
    pytest.importorskip("grakel")
    from grakel.kernels import Propagation

    from gramdist.datasets import read_tu

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = without_isolated_graphs(read_tu(dataset_dir(name)))
    t_max, w, seed = 3, 0.01, 7
    kernel = make_kernel("propagation", t_max=t_max, w=w, metric=metric)
    state = kernel.fit(graphs, seed)
    ours = gram_by_tiles(kernel, state, graphs, 128)
    labels: set = set()
    for g in graphs:
        labels |= set(int(v) for v in g.node_labels)
    order = np.array(list(labels), dtype=np.int64)  # GraKeL's enumeration: list() of the same set
    randn, rand = [], []
    for t in range(t_max + 1):
        if metric == "tv":
            randn += list(cauchy_parts(seed, pk._S_CAUCHY, t, order.view(np.uint64)))
        else:
            randn.append(normal(seed, pk._S_GAUSS, t, order.view(np.uint64)))
        rand.append(float(uniform(seed, pk._S_OFFSET, t, np.zeros(1, np.uint64))[0]))
    gk = Propagation(t_max=t_max + 1, w=w, M=grakel_m, random_state=Injected(randn, rand))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = gk.fit_transform(grakel_labelled_graphs(graphs))
    assert list(gk._enum_labels) == order.tolist()
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", ["ENZYMES", "PROTEINS"])
@pytest.mark.parametrize("metric,grakel_m", [("l1", "L1"), ("l2", "L2")])
def test_attributes_equal_grakel_per_dimension(name, metric, grakel_m, dataset_dir):
    """GraKeL's PropagationAttr quantises each dimension; per iteration it draws randn(d)
    (over randn(d) for L1) and offsets w*randn(d): injecting our projections and our uniform
    offsets gives our ``hashing="per_dimension"`` Gram."""
    pytest.importorskip("grakel")
    from grakel import Graph
    from grakel.kernels import PropagationAttr

    from gramdist.datasets import read_tu

    graphs = without_isolated_graphs(read_tu(dataset_dir(name)))
    if name == "PROTEINS":
        graphs = graphs[:300]
    t_max, w, seed = 2, 4.0, 3
    kernel = make_kernel("propagation_attr", t_max=t_max, w=w, metric=metric, hashing="per_dimension")
    state = kernel.fit(graphs, seed)
    ours = gram_by_tiles(kernel, state, graphs, 128)
    d = graphs.node_attrs.shape[1]
    keys = np.arange(d, dtype=np.uint64)
    randn = []
    for t in range(t_max + 1):
        if metric == "l1":
            randn += list(cauchy_parts(seed, pk._S_CAUCHY, t, keys))
        else:
            randn.append(normal(seed, pk._S_GAUSS, t, keys))
        randn.append(uniform(seed, pk._S_OFFSET, t, keys))  # GraKeL multiplies by w
    gk_graphs = []
    for g in graphs:
        adj = {v: [] for v in range(g.n_nodes)}
        for u, v in g.edges.tolist():
            adj[u].append(v)
            if u != v:
                adj[v].append(u)
        gk_graphs.append(Graph(adj, node_labels={v: g.node_attrs[v].copy() for v in range(g.n_nodes)},
                               graph_format="dictionary"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = PropagationAttr(t_max=t_max + 1, w=w, M=grakel_m, random_state=Injected(randn)).fit_transform(gk_graphs)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name,params", [("propagation", {"t_max": 4, "w": 1e-3}),
                                         ("propagation", {"t_max": 3, "metric": "hellinger", "w": 1e-3})])
def test_tiles_psd_seed_permutation_and_out_of_sample(mutag, name, params):
    kernel = make_kernel(name, **params)
    state = kernel.fit(mutag[:30], 2)
    a = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(a, gram_by_tiles(kernel, state, mutag, 21))
    assert min_eigenvalue_ratio(a) >= -1e-10
    # the same seed gives the same bits whatever the fit sample; another seed other bins
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(mutag, 2), mutag, 50), a)
    assert not np.array_equal(kernel.embed(mutag[:5], kernel.fit(mutag, 3)).keys, kernel.embed(mutag[:5], state).keys)
    new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:150], state)
    assert np.array_equal(kernel.pairwise(new, train, state), a[150:, :150])
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(a)[150:])
    rng = np.random.default_rng(11)
    edges, sizes, labels = [], [], []
    for g in mutag:
        perm = rng.permutation(g.n_nodes)
        edges.append(np.argsort(perm)[g.edges])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[perm])
    permuted = GraphBatch.from_graphs(edges, sizes, node_labels=labels)
    # rounding of a node's sums can depend on its neighbours' order; a bin border is met with
    # probability ~1e-16 |value| / w per node: no flip on MUTAG
    assert np.array_equal(gram_by_tiles(kernel, state, permuted, 64), a)


def test_attributes_contract_and_missing_attributes(mutag):
    graphs = random_graphs(40, seed=8, attr_dim=4)
    kernel = make_kernel("propagation_attr", t_max=3, w=0.3)
    state = kernel.fit(graphs[:10], 1)
    a = gram_by_tiles(kernel, state, graphs, 16)
    assert np.array_equal(a, gram_by_tiles(kernel, state, graphs, 9)) and min_eigenvalue_ratio(a) >= -1e-10
    with pytest.raises(JobError, match="node attributes"):
        kernel.fit(mutag, 0)
    with pytest.raises(JobError, match="4"):
        kernel.embed(random_graphs(3, seed=1, attr_dim=2), state)


def test_feature_vectors_are_the_gram(mutag):
    kernel = make_kernel("propagation", t_max=2)
    state = kernel.fit(mutag, 0)
    emb = kernel.embed(mutag, state)
    rows = kernel.feature_vectors(emb, state)
    assert kernel.has_feature_vectors and rows.nnz <= 3 * mutag.n_nodes
    import scipy.sparse as sp

    cols = np.unique(rows.keys)
    x = sp.csr_matrix((rows.values, np.searchsorted(cols, rows.keys), rows.indptr), shape=(len(rows), len(cols)))
    assert np.array_equal((x @ x.T).toarray(), kernel.pairwise(emb, emb, state))


def test_engine_and_job_files(mutag, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    from gramdist import GramTransformer, compute_gram
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram
    from gramdist.jobs import load_job

    dataset_dir("MUTAG")
    kernel = make_kernel("propagation", t_max=3)
    ref = gram_by_tiles(kernel, kernel.fit(mutag, 4), mutag, 64)
    assert np.array_equal(compute_gram(mutag, kernel="propagation", t_max=3, seed=4), ref)
    k = GramTransformer(kernel="propagation", kernel_params={"t_max": 3}, seed=4).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k, ref[100:, :100])
    dataset_dir("ENZYMES")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        for job, n in (("mutag-propagation.yaml", 188), ("enzymes-propagation_attr.yaml", 600)):
            res = run_job(load_job(ROOT / "jobs" / job), out=str(tmp_path / f"{job}.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
            assert res.complete and open_gram(tmp_path / f"{job}.zarr")[0].shape == (n, n)


def test_invalid_parameters():
    with pytest.raises(JobError, match="metric"):
        make_kernel("propagation", metric="l1")
    with pytest.raises(JobError, match="w"):
        make_kernel("propagation", w=0)
    with pytest.raises(JobError, match="scheme"):
        make_kernel("propagation", scheme="walk")
    with pytest.raises(JobError, match="missing_label"):
        make_kernel("propagation", missing_label=1.5)
    with pytest.raises(JobError, match="hashing"):
        make_kernel("propagation_attr", hashing="grid")
    with pytest.raises(JobError, match="metric"):
        make_kernel("propagation_attr", metric="tv")
