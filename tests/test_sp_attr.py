"""Shortest-path kernel on node attributes ``sp_attr``: brute force over pairs of paths, GraKeL, contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_sp import permuted, to_nx

from gramdist.datasets import read_tu
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.shortest_path.attributed import ShortestPathAttrKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def attributed_graphs(n: int, seed: int, max_nodes: int = 8, dim: int = 2) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, attrs = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        e = rng.integers(0, k, size=(int(rng.integers(0, 2 * k)), 2))
        edges.append(e)
        sizes.append(k)
        labels.append(rng.integers(0, 2, size=k))
        attrs.append(rng.normal(size=(k, dim)))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, node_attrs=attrs)


def brute_force(graphs: GraphBatch, node_kernel: str, gamma: float, length_kernel: str, c: int,
                with_labels: bool, labels: list | None = None) -> np.ndarray:
    """The definition, term by term: every ordered pair of paths of one graph against the other's
    (``labels``: each graph's node labels, instead of its own)."""
    labels = labels or [g.node_labels for g in graphs]
    paths = []
    for g in graphs:
        dist = dict(nx.all_pairs_shortest_path_length(to_nx(g)))
        paths.append([(u, v, d) for u, row in dist.items() for v, d in row.items() if u != v])

    def kn(g, u, h, w):
        x, y = graphs[g].node_attrs[u], graphs[h].node_attrs[w]
        val = float(np.exp(-gamma * np.sum((x - y) ** 2))) if node_kernel == "gaussian" else float(x @ y)
        if with_labels:
            val *= float(labels[g][u] == labels[h][w])
        return val

    def kl(d, e):
        return float(d == e) if length_kernel == "delta" else max(0.0, c - abs(d - e))

    n = len(graphs)
    k = np.zeros((n, n))
    for a in range(n):
        for b in range(a, n):
            k[a, b] = k[b, a] = sum(kn(a, u, b, w) * kn(a, v, b, z) * kl(d, e)
                                    for u, v, d in paths[a] for w, z, e in paths[b])
    return k


CASES = [("gaussian", "delta", 1, True), ("gaussian", "brownian", 3, True), ("gaussian", "delta", 1, False),
         ("linear", "delta", 1, True), ("linear", "brownian", 2, False), ("linear", "delta", 1, False)]


@pytest.mark.parametrize("node_kernel,length_kernel,c,with_labels", CASES)
def test_matches_brute_force(node_kernel, length_kernel, c, with_labels):
    graphs = attributed_graphs(14, seed=hash((node_kernel, length_kernel, c, with_labels)) % 1000)
    kernel = ShortestPathAttrKernel(node_kernel=node_kernel, gamma=0.7, length_kernel=length_kernel, c=c,
                                    with_labels=with_labels)
    state = kernel.fit(graphs, 0)
    k = gram_by_tiles(kernel, state, graphs, 4)
    ref = brute_force(graphs, node_kernel, 0.7, length_kernel, c, with_labels)
    assert np.allclose(k, ref, rtol=1e-12, atol=1e-12)
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 9))  # bitwise tile invariance
    assert np.allclose(k, gram_by_tiles(kernel, state, permuted(graphs, 2), 5), rtol=1e-12, atol=1e-12)
    assert min_eigenvalue_ratio(k) >= -1e-10
    assert kernel.has_feature_vectors == (node_kernel == "linear")


def networkx_wl_labels(graphs: GraphBatch, h: int) -> list[list[list[str]]]:
    """Each graph's node labels at WL iterations 0..h from networkx's own WL hashing (an
    implementation independent of ours): ``[iteration][graph][node]``."""
    per_graph = []
    for g in graphs:
        G = to_nx(g)
        nx.set_node_attributes(G, {u: str(int(g.node_labels[u])) for u in range(g.n_nodes)}, "label")
        hashes = nx.weisfeiler_lehman_subgraph_hashes(G, node_attr="label", iterations=h)
        per_graph.append([[G.nodes[u]["label"]] + list(hashes.get(u, [])) if G.degree(u) else
                          [G.nodes[u]["label"]] + [f"isolated-{it}-{G.nodes[u]['label']}" for it in range(1, h + 1)]
                          for u in range(g.n_nodes)])
    return [[[node[it] for node in graph] for graph in per_graph] for it in range(h + 1)]


@pytest.mark.parametrize("node_kernel,h", [("gaussian", 1), ("gaussian", 3), ("linear", 2)])
def test_wl_iterations_match_brute_force_over_networkx_wl_labels(node_kernel, h):
    """``h``: the sum over WL iterations 0..h of the kernel on each iteration's labels, the
    labels those of networkx's WL hashing; and h = 0 the kernel as before."""
    graphs = attributed_graphs(12, seed=40 + h, max_nodes=7)
    kernel = ShortestPathAttrKernel(node_kernel=node_kernel, gamma=0.7, h=h)
    state = kernel.fit(graphs, 0)
    k = gram_by_tiles(kernel, state, graphs, 5)
    ref = sum(brute_force(graphs, node_kernel, 0.7, "delta", 1, True, labels=labels)
              for labels in networkx_wl_labels(graphs, h))
    assert np.allclose(k, ref, rtol=1e-12, atol=1e-12)
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 8))  # bitwise tile invariance
    assert np.allclose(k, gram_by_tiles(kernel, state, permuted(graphs, 3), 4), rtol=1e-12, atol=1e-12)
    assert min_eigenvalue_ratio(k) >= -1e-10
    plain = ShortestPathAttrKernel(node_kernel=node_kernel, gamma=0.7)
    assert np.all(k >= gram_by_tiles(plain, plain.fit(graphs, 0), graphs, 5) - 1e-12)  # iteration 0 is the plain kernel
    if node_kernel == "linear":
        fv = kernel.feature_vectors(kernel.embed(graphs, state), state)
        assert np.allclose(kernel.pairwise(fv, fv, state), k, rtol=1e-12, atol=1e-12)


def test_wl_iterations_are_recorded_only_when_used(tmp_path, dataset_dir):
    """A store of the plain kernel records no ``h`` (stores written before it existed still
    match); one with ``h`` records it; ``h`` needs the labels."""
    from gramdist.engine.store import GramStore

    dataset_dir("ENZYMES")
    root = Path(__file__).resolve().parents[1]
    for h, out in ((0, tmp_path / "plain.zarr"), (2, tmp_path / "wl.zarr")):
        r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/enzymes-sp_attr.yaml", "--out", str(out),
                            "--quiet", "--set", "dataset.limit=20", "--set", f"kernel.h={h}"],
                           capture_output=True, text=True, cwd=root)
        assert r.returncode == 0, r.stderr[-2000:]
    assert "h" not in GramStore.open(tmp_path / "plain.zarr").kernel["params"]
    assert GramStore.open(tmp_path / "wl.zarr").kernel["params"]["h"] == 2
    with pytest.raises(JobError, match="with_labels: true"):
        make_kernel("sp_attr", h=1, with_labels=False)


def test_hand_worked_example():
    # One edge u-v (attributes 0 and 1) against itself, Gaussian gamma = 1, delta lengths:
    # paths (u,v,1), (v,u,1): K = Σ k(u,u')k(v,v') = 2·(1·1) + 2·(e^-1·e^-1) = 2 + 2e^-2.
    g = GraphBatch.from_graphs([np.array([[0, 1]])], [2], node_attrs=[np.array([[0.0], [1.0]])])
    kernel = ShortestPathAttrKernel(gamma=1.0)
    k = gram_by_tiles(kernel, kernel.fit(g, 0), g, 1)
    assert np.isclose(k[0, 0], 2 + 2 * np.exp(-2.0), rtol=1e-15)


@pytest.mark.parametrize("node_kernel", ["linear", "gaussian"])
def test_equals_grakel_shortest_path_attr(node_kernel, dataset_dir):
    grakel = pytest.importorskip("grakel")
    enz = read_tu(dataset_dir("ENZYMES"))
    sub = enz.take(np.flatnonzero(enz.nodes_per_graph <= 12)[:10])
    gamma = 0.01
    metric = np.dot if node_kernel == "linear" else (lambda x, y: np.exp(-gamma * np.sum((x - y) ** 2)))
    graphs = []
    for g in sub:
        a = np.zeros((g.n_nodes, g.n_nodes))
        a[g.edges[:, 0], g.edges[:, 1]] = a[g.edges[:, 1], g.edges[:, 0]] = 1
        graphs.append(grakel.Graph(a, node_labels={i: g.node_attrs[i] for i in range(g.n_nodes)}))
    theirs = grakel.ShortestPathAttr(metric=metric, algorithm_type="floyd_warshall").fit_transform(graphs)
    kernel = ShortestPathAttrKernel(node_kernel=node_kernel, gamma=gamma, with_labels=False)
    ours = gram_by_tiles(kernel, kernel.fit(sub, 0), sub, 4)
    assert np.allclose(ours, theirs, rtol=1e-12, atol=0)


def test_explicit_linear_features_are_the_gram(dataset_dir):
    enz = read_tu(dataset_dir("ENZYMES"))[:40]
    kernel = ShortestPathAttrKernel(node_kernel="linear", length_kernel="brownian", c=2, standardize=True)
    state = kernel.fit(enz, 0)
    k = gram_by_tiles(kernel, state, enz, 16)
    fv = kernel.feature_vectors(kernel.embed(enz, state), state)
    assert np.array_equal(kernel.pairwise(fv, fv, state)[np.triu_indices(40)], k[np.triu_indices(40)])
    assert np.array_equal(k, gram_by_tiles(kernel, state, enz, 7))


def test_standardize_uses_the_fit_sample(dataset_dir):
    enz = read_tu(dataset_dir("ENZYMES"))[:30]
    kernel = ShortestPathAttrKernel(gamma=0.1, standardize=True)
    state = kernel.fit(enz[:20], 0)
    x = (enz.node_attrs - state.arrays["attr_mean"]) / state.arrays["attr_scale"]
    scaled = GraphBatch(enz.node_offsets, enz.edge_offsets, enz.edges, node_labels=enz.node_labels, node_attrs=x)
    raw = ShortestPathAttrKernel(gamma=0.1)
    assert np.array_equal(gram_by_tiles(kernel, state, enz, 8), gram_by_tiles(raw, raw.fit(scaled, 0), scaled, 8))


def test_fit_then_embed_new_graphs(dataset_dir):
    enz = read_tu(dataset_dir("ENZYMES"))[:36]
    kernel = ShortestPathAttrKernel(gamma=0.01)
    state = kernel.fit(enz[:24], 0)
    full = gram_by_tiles(kernel, state, enz, 12)
    new, train = kernel.embed(enz[24:], state), kernel.embed(enz[:24], state)
    # the new graphs sit in the columns of the train rows in the full Gram: same values, the
    # other orientation of the same sums (equal to rounding)
    assert np.allclose(kernel.pairwise(new, train, state), full[24:, :24], rtol=1e-13, atol=0)
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(full)[24:])


def test_needs_attributes_and_validates(mutag):
    with pytest.raises(JobError, match="numerical node attributes"):
        ShortestPathAttrKernel().fit(mutag, 0)
    for bad in ({"node_kernel": "rbf"}, {"gamma": 0}, {"length_kernel": "bridge"}, {"c": 0}, {"c": 1.5}):
        with pytest.raises(JobError, match=next(iter(bad))):
            make_kernel("sp_attr", **bad)


def test_through_the_engine(dataset_dir, tmp_path):
    from gramdist import GramTransformer, compute_gram, open_gram

    enz = read_tu(dataset_dir("ENZYMES"))[:30]
    kernel = ShortestPathAttrKernel(gamma=0.01)
    ref = gram_by_tiles(kernel, kernel.fit(enz, 0), enz, 64)
    assert np.array_equal(np.asarray(compute_gram(enz, kernel="sp_attr", gamma=0.01, normalize=False)), ref)
    got = GramTransformer(kernel="sp_attr", kernel_params={"gamma": 0.01}).fit(enz[:20]).transform(enz[20:])
    assert np.allclose(got, ref[20:, :20], rtol=1e-13, atol=0)
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "e.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/enzymes-sp_attr.yaml", "--out", str(out),
                        "--set", "dataset.limit=40", "--set", "cluster.n_workers=1", "--quiet", "--json"], cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    assert open_gram(out)[0].shape == (40, 40)
