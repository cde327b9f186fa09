"""GraphHopper: brute force over all pairs of shortest paths, GraKeL, the contract."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import product
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_sp import permuted, to_nx
from test_sp_attr import attributed_graphs

from gramdist.datasets import read_tu
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.graphhopper.kernel import GraphHopperKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def all_shortest_paths(g) -> list[tuple[int, ...]]:
    """Every shortest path of every ordered pair (u, v), one-node paths included (networkx)."""
    G = to_nx(g)
    G.remove_edges_from(nx.selfloop_edges(G))
    out = []
    for u, v in product(range(g.n_nodes), repeat=2):
        if nx.has_path(G, u, v):
            out.extend(tuple(p) for p in nx.all_shortest_paths(G, u, v))
    return out


def brute_force(graphs: GraphBatch, with_labels: bool, attributes: str, gamma: float) -> np.ndarray:
    paths = [all_shortest_paths(g) for g in graphs]

    def kn(a, u, b, w):
        val = 1.0
        if with_labels:
            val *= float(graphs[a].node_labels[u] == graphs[b].node_labels[w])
        x, y = (graphs[a].node_attrs[u], graphs[b].node_attrs[w]) if attributes != "none" else (None, None)
        if attributes == "linear":
            val *= float(x @ y)
        elif attributes == "gaussian":
            val *= float(np.exp(-gamma * np.sum((x - y) ** 2)))
        return val

    n = len(graphs)
    k = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            k[a, b] = k[b, a] = sum(sum(kn(a, p[j], b, q[j]) for j in range(len(p)))
                                    for p in paths[a] for q in paths[b] if len(p) == len(q))
    return k


@pytest.mark.parametrize("with_labels,attributes", [(True, "none"), (False, "none"), (True, "linear"),
                                                    (False, "linear"), (True, "gaussian"), (False, "gaussian")])
def test_matches_brute_force(with_labels, attributes):
    graphs = attributed_graphs(12, seed=7 + len(attributes) + with_labels, max_nodes=9)
    kernel = GraphHopperKernel(with_labels=with_labels, attributes=attributes, gamma=0.5)
    state = kernel.fit(graphs, 0)
    k = gram_by_tiles(kernel, state, graphs, 5)
    ref = brute_force(graphs, with_labels, attributes, 0.5)
    if attributes == "none":
        assert np.array_equal(k, ref)  # integer counts
    else:
        assert np.allclose(k, ref, rtol=1e-12, atol=1e-12)
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 3))
    assert np.allclose(k, gram_by_tiles(kernel, state, permuted(graphs, 4), 12), rtol=1e-12, atol=1e-12)
    assert min_eigenvalue_ratio(k) >= -1e-10
    assert kernel.has_feature_vectors == (attributes != "gaussian")


def test_hand_worked_example():
    # Path a-b (labels 0, 1), unlabelled comparison with itself (with_labels false, no attributes):
    # paths (a), (b), (a,b), (b,a). M_a: [0,0] = 1 (path (a)), [0,1] = 1 ((a,b)), [1,1] = 1 ((b,a));
    # M_b alike. <M_a, M_a> = 3, <M_a, M_b> = 3, so K = 4 * 3 = 12 (= Σ over equal-length path
    # pairs of matching positions: 2 one-node paths x 2 -> 4; 2 x 2 two-node paths x 2 positions -> 8).
    g = GraphBatch.from_graphs([np.array([[0, 1]])], [2], node_labels=[np.array([0, 1])])
    kernel = GraphHopperKernel(with_labels=False)
    assert gram_by_tiles(kernel, kernel.fit(g, 0), g, 1).tolist() == [[12.0]]
    # with the Dirac kernel on labels only equal labels count: (a)(a), (b)(b), and for the
    # two-node paths position j matches only between a path and itself: 2 + 2 * 2 = 6
    kernel = GraphHopperKernel(with_labels=True)
    assert gram_by_tiles(kernel, kernel.fit(g, 0), g, 1).tolist() == [[6.0]]


def without_isolated_nodes(batch: GraphBatch, limit: int) -> GraphBatch:
    """The first ``limit`` graphs without isolated nodes: GraKeL's GraphHopper raises on those
    under NumPy 2 (``np.squeeze`` of the 1 x 1 DAG of a one-node component, then ``nonzero``)."""
    deg = np.bincount(batch.global_edges.ravel(), minlength=batch.n_nodes)
    ok = np.flatnonzero(np.bincount(batch.node_graph, weights=deg == 0, minlength=len(batch)) == 0)
    return batch.take(ok[:limit])


def _grakel_graphs(batch: GraphBatch, feature) -> list:
    from grakel import Graph

    out = []
    for g in batch:
        a = np.zeros((g.n_nodes, g.n_nodes))
        a[g.edges[:, 0], g.edges[:, 1]] = a[g.edges[:, 1], g.edges[:, 0]] = 1
        np.fill_diagonal(a, 0)
        f = feature(g)
        out.append(Graph(a, node_labels={i: f[i] for i in range(g.n_nodes)}))
    return out


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_dirac_labels_equal_grakel_linear_on_one_hot_labels(name, dataset_dir):
    grakel = pytest.importorskip("grakel")
    graphs = without_isolated_nodes(read_tu(dataset_dir(name)), 40 if name != "ENZYMES" else 20)
    n_labels = int(graphs.node_labels.max()) + 1
    theirs = grakel.GraphHopper(kernel_type="linear").fit_transform(
        _grakel_graphs(graphs, lambda g: np.eye(n_labels)[g.node_labels]))
    kernel = GraphHopperKernel(with_labels=True)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 16), theirs)


@pytest.mark.parametrize("with_labels,attributes", [(False, "linear"), (False, "gaussian"), (True, "linear")])
def test_attributes_equal_grakel(with_labels, attributes, dataset_dir):
    grakel = pytest.importorskip("grakel")
    enz = read_tu(dataset_dir("ENZYMES"))
    graphs = without_isolated_nodes(enz.take(np.arange(0, 600, 25)), 20)
    gamma = 0.001
    n_labels = int(enz.node_labels.max()) + 1
    if with_labels:
        def feature(g):
            return np.stack([np.kron(np.eye(n_labels)[lab], x) for lab, x in zip(g.node_labels, g.node_attrs)])
    else:
        def feature(g):
            return g.node_attrs
    kt = "linear" if attributes == "linear" else ("gaussian", gamma)
    theirs = grakel.GraphHopper(kernel_type=kt).fit_transform(_grakel_graphs(graphs, feature))
    kernel = GraphHopperKernel(with_labels=with_labels, attributes=attributes, gamma=gamma)
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 8)
    assert np.allclose(ours, theirs, rtol=1e-12, atol=0)


def test_contract_and_engine(dataset_dir, tmp_path):
    from gramdist import GramTransformer, compute_gram, open_gram

    enz = read_tu(dataset_dir("ENZYMES"))[:40]
    for attributes in ("none", "gaussian"):
        kernel = GraphHopperKernel(attributes=attributes, gamma=0.01)
        state = kernel.fit(enz[:25], 0)
        full = gram_by_tiles(kernel, state, enz, 16)
        new, train = kernel.embed(enz[25:], state), kernel.embed(enz[:25], state)
        assert np.allclose(kernel.pairwise(new, train, state), full[25:, :25], rtol=1e-13, atol=0)
        assert np.array_equal(kernel.self_similarity(new, state), np.diag(full)[25:])
        got = compute_gram(enz, kernel="graphhopper", attributes=attributes, gamma=0.01, normalize=False)
        assert np.array_equal(np.asarray(got), gram_by_tiles(kernel, kernel.fit(enz, 0), enz, 64))
        gt = GramTransformer(kernel="graphhopper", kernel_params={"attributes": attributes, "gamma": 0.01})
        assert np.allclose(gt.fit(enz[:25]).transform(enz[25:]), full[25:, :25], rtol=1e-13, atol=0)
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "gh.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-graphhopper.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--quiet", "--json"], cwd=root, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    assert open_gram(out)[0].shape == (188, 188)


def test_validation_and_missing_attributes(mutag):
    with pytest.raises(JobError, match="attributes"):
        make_kernel("graphhopper", attributes="bridge")
    with pytest.raises(JobError, match="gamma"):
        make_kernel("graphhopper", gamma=-1.0)
    with pytest.raises(JobError, match="numerical node attributes"):
        GraphHopperKernel(attributes="gaussian").fit(mutag, 0)


def test_block_splitting_gives_the_same_counts(monkeypatch):
    import gramdist.kernels.graphhopper.kernel as gh

    graphs = attributed_graphs(6, seed=3, max_nodes=30)
    kernel = GraphHopperKernel()
    state = kernel.fit(graphs, 0)
    whole = kernel.embed(graphs, state)
    monkeypatch.setattr(gh, "BLOCK_ENTRIES", 40)
    split = kernel.embed(graphs, state)
    assert np.array_equal(whole.keys, split.keys) and np.array_equal(whole.values, split.values)
