"""CSM kernel against a brute force over all bijections between node subsets, GraKeL's
SubgraphMatching (the paper's product-graph clique enumeration) and the contract."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

from gramdist.graphs import GraphBatch
from gramdist.kernels.csm.kernel import CSMKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def random_graphs(n: int, seed: int, max_nodes: int = 6, n_labels: int = 2, attrs: bool = False) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, elabels, na = [], [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k + 1))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        elabels.append(rng.integers(0, 2, size=m))
        na.append(rng.normal(size=(k, 2)))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels,
                                  node_attrs=na if attrs else None)


def _structure(g):
    a = np.zeros((g.n_nodes, g.n_nodes), dtype=bool)
    el = {}
    for (u, v), e in zip(g.edges.tolist(), g.edge_labels.tolist() if g.edge_labels is not None
                         else [0] * len(g.edges)):
        if u != v:
            a[u, v] = a[v, u] = True
            el[(u, v)] = el[(v, u)] = e
    return a, el


def _connected(a: np.ndarray, nodes) -> bool:
    nodes = list(nodes)
    reach = {nodes[0]}
    for _ in nodes:
        reach |= {w for v in reach for w in nodes if a[v, w]}
    return len(reach) == len(nodes)


def brute_csm(graphs: GraphBatch, k: int, weights=None, gamma: float | None = None,
              use_edge_labels: bool = True) -> np.ndarray:
    """The definition: every bijection phi: S -> S' (|S| <= k, G[S] connected) that preserves
    adjacency and non-adjacency, weighted lambda(|S|) prod k_V prod k_E (Dirac; times a Gaussian
    of the attributes when ``gamma`` is given)."""
    lam = [1.0] * (k + 1) if weights is None else [0.0, *weights]
    gs = list(graphs)
    st = [_structure(g) for g in gs]
    out = np.zeros((len(gs), len(gs)))
    for i, gi in enumerate(gs):
        ai, ei = st[i]
        for j, gj in enumerate(gs):
            aj, ej = st[j]
            total = 0.0
            for s in range(1, k + 1):
                for sub in itertools.combinations(range(gi.n_nodes), s):
                    if not _connected(ai, sub):
                        continue
                    for img in itertools.permutations(range(gj.n_nodes), s):
                        w = lam[s]
                        for x, y in zip(sub, img):
                            if gi.node_labels[x] != gj.node_labels[y]:
                                w = 0.0
                                break
                            if gamma is not None:
                                d = gi.node_attrs[x] - gj.node_attrs[y]
                                w *= np.exp(-gamma * float(d @ d))
                        if w == 0.0:
                            continue
                        for (x1, y1), (x2, y2) in itertools.combinations(zip(sub, img), 2):
                            if ai[x1, x2] != aj[y1, y2]:
                                w = 0.0
                                break
                            if ai[x1, x2] and use_edge_labels and ei[(x1, x2)] != ej[(y1, y2)]:
                                w = 0.0
                                break
                        total += w
            out[i, j] = total
    return out


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_labels_match_brute_force(k):
    graphs = random_graphs(9, seed=k, max_nodes=6)
    kern = CSMKernel(k=k)
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 4)
    np.testing.assert_allclose(got, brute_csm(graphs, k), rtol=1e-13, atol=0)


def test_weights_and_no_edge_labels_match_brute_force():
    graphs = random_graphs(8, seed=9, max_nodes=6)
    w = [0.5, 2.0, 0.25, 3.0]
    kern = CSMKernel(k=4, weights=w, use_edge_labels=False)
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 3)
    np.testing.assert_allclose(got, brute_csm(graphs, 4, weights=w, use_edge_labels=False), rtol=1e-13, atol=0)


def test_attributes_match_brute_force():
    graphs = random_graphs(8, seed=5, max_nodes=6, attrs=True)
    kern = CSMKernel(k=4, node_attributes=True, gamma=0.3)
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 3)
    np.testing.assert_allclose(got, brute_csm(graphs, 4, gamma=0.3), rtol=1e-12, atol=0)
    assert not kern.has_feature_vectors and CSMKernel(k=4).has_feature_vectors


def test_hand_worked_example():
    # Triangle T and path P3, one node label, no edge labels, k = 3. Isomorphisms between
    # connected induced subgraphs: K(T, T) = 3*3 nodes + 3 edges * 3 edges * 2 + 1 triangle * 6
    # = 33; K(P, P) = 9 + 2*2*2 + 1*1*2 (the path and its reversal) = 19; K(T, P) = 9 + 3*2*2 = 21.
    g = GraphBatch.from_graphs([np.array([[0, 1], [1, 2], [2, 0]]), np.array([[0, 1], [1, 2]])], [3, 3])
    kern = CSMKernel(k=3)
    assert gram_by_tiles(kern, kern.fit(g, 0), g, 1).tolist() == [[33, 21], [21, 19]]


# ------------------------------------------------------------------ GraKeL
def grakel_graphs(batch: GraphBatch, attrs: bool = False):
    from grakel import Graph

    out = []
    for x in batch:
        e = {}
        labels = x.edge_labels if x.edge_labels is not None else np.zeros(len(x.edges), np.int64)
        for (u, v), lab in zip(x.edges.tolist(), labels.tolist()):
            e[(u, v)] = e[(v, u)] = int(lab)
        if attrs:
            nl = {v: (int(lab), tuple(x.node_attrs[v])) for v, lab in enumerate(x.node_labels)}
        else:
            nl = {v: int(lab) for v, lab in enumerate(x.node_labels)}
        out.append(Graph(list(e.keys()), node_labels=nl, edge_labels=e))
    return out


@pytest.mark.parametrize("name,n", [("MUTAG", 25), ("PTC_MR", 30), ("ENZYMES", 10)])
def test_grakel_subgraph_matching_labels(name, n, dataset_dir):
    pytest.importorskip("grakel")
    from grakel.kernels import SubgraphMatching

    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir(name))
    # GraKeL includes isolated nodes only through its edge list: keep graphs without them; its
    # product graph costs (n n')^2 Python steps: keep graphs of at most 30 nodes
    keep = [i for i, g in enumerate(graphs) if len(np.unique(g.edges)) == g.n_nodes and g.n_nodes <= 30]
    graphs = graphs[keep[:n]]
    edge = graphs.edge_labels is not None
    for k in (3, 5):
        kern = CSMKernel(k=k, use_edge_labels=edge)
        ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 16)
        theirs = SubgraphMatching(k=k, ke=None if not edge else SubgraphMatching().ke).fit_transform(
            grakel_graphs(graphs))
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_grakel_subgraph_matching_attributes(dataset_dir):
    pytest.importorskip("grakel")
    from grakel.kernels import SubgraphMatching

    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir("ENZYMES"))
    graphs = graphs[[i for i, g in enumerate(graphs) if g.n_nodes <= 25][:8]]
    gamma = 0.05

    def kv(a, b):
        if a[0] != b[0]:
            return 0.0
        d = np.asarray(a[1]) - np.asarray(b[1])
        return float(np.exp(-gamma * np.dot(d, d)))

    kern = CSMKernel(k=3, node_attributes=True, gamma=gamma)
    ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 4)
    theirs = SubgraphMatching(k=3, kv=kv, ke=None).fit_transform(grakel_graphs(graphs, attrs=True))
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("params", [dict(k=5), dict(k=3, node_attributes=True, gamma=0.5)])
def test_tiles_psd_out_of_sample_and_permutations(params):
    from gramdist.datasets import make_synthetic

    graphs = make_synthetic(n_graphs=40, n_nodes=(4, 12), avg_degree=2.5, n_labels=3, attr_dim=2, seed=3)
    kern = CSMKernel(**params)
    kern.validate()
    state = kern.fit(graphs[:10], 0)
    a = gram_by_tiles(kern, state, graphs, 16)
    assert np.array_equal(a, gram_by_tiles(kern, state, graphs, 7))
    assert min_eigenvalue_ratio(a) >= -1e-10
    new, train = kern.embed(graphs[30:], state), kern.embed(graphs[:30], state)
    # the full Gram's block below the diagonal is K(train, new) transposed (the engine computes
    # the upper triangle); K(new, train) may differ from it in the last bit (summation order)
    assert np.array_equal(kern.pairwise(train, new, state).T, a[30:, :30])
    np.testing.assert_allclose(kern.pairwise(new, train, state), a[30:, :30], rtol=1e-14)
    assert np.array_equal(kern.self_similarity(new, state), np.diag(a)[30:])
    rng = np.random.default_rng(0)
    parts = []
    for g in graphs:
        p = rng.permutation(g.n_nodes)
        parts.append((np.argsort(p)[g.edges], g.n_nodes, g.node_labels[p], g.node_attrs[p]))
    permuted = GraphBatch.from_graphs([x[0] for x in parts], [x[1] for x in parts],
                                      node_labels=[x[2] for x in parts], node_attrs=[x[3] for x in parts])
    np.testing.assert_allclose(gram_by_tiles(kern, state, permuted, 16), a, rtol=1e-12)


@pytest.mark.parametrize("params,match", [(dict(k=0), "k"), (dict(k=7), "k"), (dict(weights=[1, 2]), "weights"),
                                          (dict(gamma=-1.0), "gamma"), (dict(use_labels="yes"), "use_labels")])
def test_invalid_parameters_are_named(params, match):
    from gramdist.errors import JobError
    from gramdist.kernels import make_kernel

    with pytest.raises(JobError, match=match):
        make_kernel("csm", **params)


def test_attributes_required():
    from gramdist.errors import JobError

    g = random_graphs(3, seed=1)
    with pytest.raises(JobError, match="needs numerical node attributes.*from_networkx"):
        CSMKernel(node_attributes=True).embed(g, None)


def test_through_the_engine(mutag, dataset_dir, tmp_path):
    import gramdist
    from gramdist import FeatureTransformer, GramTransformer

    dataset_dir("MUTAG")
    kern = CSMKernel(k=4)
    ref = gram_by_tiles(kern, kern.fit(mutag, 0), mutag, 188)
    assert np.array_equal(gramdist.compute_gram(mutag, kernel="csm", k=4), ref)
    k2 = GramTransformer(kernel="csm", kernel_params={"k": 4}, tile_size=40).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k2, ref[100:, :100])
    x = FeatureTransformer(kernel="csm", kernel_params={"k": 4}).fit_transform(mutag)
    np.testing.assert_allclose((x @ x.T).toarray(), ref, rtol=1e-14)
    root = os.path.join(os.path.dirname(__file__), "..")
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-csm.yaml", "--set", "kernel.k=3",
                        "--out", str(tmp_path / "c.zarr"), "--quiet", "--json"], cwd=root, capture_output=True,
                       text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    from gramdist.engine.store import open_gram

    stored, _ = open_gram(tmp_path / "c.zarr")
    kern = CSMKernel(k=3)
    ref = gram_by_tiles(kern, kern.fit(mutag, 0), mutag, 188)
    d = np.sqrt(np.diag(ref))
    np.testing.assert_allclose(np.asarray(stored), ref / np.outer(d, d), rtol=1e-14)
