"""Wasserstein Weisfeiler–Lehman kernel: brute force (ot.emd2 on hand-built cost matrices), the
authors' ``wwl`` package, the closed form, positive definiteness, invariances, the engine."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.wwl.kernel import WWLKernel, smallest_eigenvalue_ratio
from gramdist.testing import gram_by_tiles

ot = pytest.importorskip("ot")
ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- references
def random_graphs(n: int, seed: int, max_nodes: int = 8, n_labels: int = 3, attrs: int = 0) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, feats = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        edges.append(rng.integers(0, k, size=(int(rng.integers(0, 2 * k)), 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        feats.append(rng.normal(size=(k, attrs)))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, node_attrs=feats if attrs else None)


def adjacency_lists(g, self_loops: bool = False) -> list[list[int]]:
    """Neighbours; a self-loop makes a node its own neighbour once when ``self_loops``."""
    adj = [[] for _ in range(g.n_nodes)]
    for u, v in g.edges:
        if u != v:
            adj[u].append(int(v))
            adj[v].append(int(u))
        elif self_loops:
            adj[u].append(int(u))
    return adj


def brute_sequences(graphs: GraphBatch, h: int) -> list[np.ndarray]:
    """WL label sequences with a shared string dictionary (Shervashidze et al.'s relabelling;
    a self-loop counts its node as a neighbour once, as in the ``wl`` kernel)."""
    labels = [[str(x) for x in g.node_labels] for g in graphs]
    seqs = [[[lab] for lab in labs] for labs in labels]
    for _ in range(h):
        new = []
        for gi, g in enumerate(graphs):
            adj = adjacency_lists(g, self_loops=True)
            lab = labels[gi]
            new.append(["(" + lab[v] + "|" + ",".join(sorted(lab[u] for u in adj[v])) + ")" for v in range(g.n_nodes)])
        labels = new
        for gi in range(len(graphs)):
            for v, s in enumerate(labels[gi]):
                seqs[gi][v].append(s)
    return [np.array(s, dtype=object) for s in seqs]


def brute_continuous(graphs: GraphBatch, h: int) -> list[np.ndarray]:
    """The paper's continuous WL, node by node, on attributes standardised over all nodes."""
    x = graphs.node_attrs
    std = x.std(axis=0)
    x = (x - x.mean(axis=0)) / np.where(std > 0, std, 1.0)
    out, start = [], 0
    for g in graphs:
        a = [x[start + v] for v in range(g.n_nodes)]
        start += g.n_nodes
        adj = [sorted(set(n)) for n in adjacency_lists(g)]
        levels = [a]
        for _ in range(h):
            prev = levels[-1]
            levels.append([0.5 * (prev[v] + (sum(prev[u] for u in adj[v]) / len(adj[v]) if adj[v] else 0 * prev[v]))
                           for v in range(g.n_nodes)])
        out.append(np.array([np.concatenate([lev[v] for lev in levels]) for v in range(g.n_nodes)]))
    return out


def brute_distances(emb: list[np.ndarray], categorical: bool) -> np.ndarray:
    """ot.emd2 with uniform masses on every node and a cost matrix built entry by entry."""
    n = len(emb)
    d = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            a, b = emb[i], emb[j]
            c = np.array([[np.mean(a[p] != b[q]) if categorical else np.linalg.norm(a[p] - b[q])
                           for q in range(len(b))] for p in range(len(a))])
            d[i, j] = ot.emd2(np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b)), c)
    return d


def distances(kernel: WWLKernel, graphs: GraphBatch) -> np.ndarray:
    state = kernel.fit(graphs, 0)
    emb = kernel.embed(graphs, state)
    return kernel.distances(emb, emb, state)


# --------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("h", [0, 1, 3])
def test_categorical_matches_brute_force(h):
    graphs = random_graphs(14, seed=h)
    ref = brute_distances(brute_sequences(graphs, h), categorical=True)
    for solver in ("tree", "emd"):
        d = distances(WWLKernel(h=h, categorical_solver=solver, psd_check=0), graphs)
        assert np.allclose(d, ref, rtol=1e-12, atol=1e-14), solver


@pytest.mark.parametrize("h", [0, 2])
def test_continuous_matches_brute_force(h):
    graphs = random_graphs(10, seed=10 + h, attrs=3)
    ref = brute_distances(brute_continuous(graphs, h), categorical=False)
    d = distances(WWLKernel(h=h, node_features="continuous", psd_check=0), graphs)
    assert np.allclose(d, ref, rtol=1e-10, atol=1e-12)


def test_hand_worked_example():
    # P3 and K2, one label, h = 1: P3 = {ends: (0, s1) x2, middle: (0, s2)}, K2 = {(0, s1) x2}.
    # Moving the middle's 1/3 onto an (0, s1) costs Hamming 1/2: D = 1/6 (closed form:
    # q = 2*3*2 = 12, M = min(3*2, 2*3) + min(2*2, 2*3) = 10, D = (12 - 10)/12).
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1]]), np.zeros((0, 2))],
                                    [3, 2, 1], node_labels=[[0, 0, 0], [0, 0], [1]])
    kernel = WWLKernel(h=1, gamma=2.0, psd_check=0)
    d = distances(kernel, graphs)
    assert d[0, 1] == 1 / 6 and d[0, 0] == 0.0 and d[0, 2] == 1.0 and d[1, 2] == 1.0
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k[0, 1] == np.exp(-2.0 / 6) and np.array_equal(np.diag(k), np.ones(3))


def test_empty_graph_is_far_from_every_other():
    graphs = GraphBatch.from_graphs([np.zeros((0, 2)), np.array([[0, 1]]), np.zeros((0, 2))], [0, 2, 0],
                                    node_labels=[[], [0, 0], []])
    kernel = WWLKernel(psd_check=0)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k.tolist() == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]


# --------------------------------------------------------------------------- the authors' package
def _package():
    wwl = pytest.importorskip("wwl")
    ig = pytest.importorskip("igraph")
    import wwl.propagation_scheme as ps

    # the package calls np.asarray on a ragged list of per-graph arrays, which NumPy >= 1.24
    # refuses: give its module a numpy whose asarray falls back to an object array there
    if not isinstance(ps.np, types.SimpleNamespace):
        shim = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})

        def asarray(x, *a, **kw):
            try:
                return np.asarray(x, *a, **kw)
            except ValueError:
                return np.asarray(x, dtype=object)

        shim.asarray = asarray
        ps.np = shim
    return wwl, ig


def _igraphs(ig, graphs: GraphBatch) -> list:
    out = []
    for g in graphs:
        x = ig.Graph(n=g.n_nodes, edges=[tuple(map(int, e)) for e in g.edges])
        x.vs["label"] = [str(int(v)) for v in g.node_labels]
        out.append(x)
    return out


# h = 0 (the labels alone): in the authors' experiment grid, and what D&D's inner CV picks
@pytest.mark.parametrize("name,count,h", [("MUTAG", 188, 3), ("PTC_MR", 120, 2), ("ENZYMES", 120, 2), ("DD", 12, 0)])
def test_categorical_equals_the_authors_package(dataset_dir, name, count, h):
    from gramdist.datasets import read_tu

    wwl, ig = _package()
    graphs = read_tu(dataset_dir(name))[:count]
    ref = wwl.pairwise_wasserstein_distance(_igraphs(ig, graphs), num_iterations=h)
    d = distances(WWLKernel(h=h, node_features="categorical", psd_check=0), graphs)
    assert np.allclose(d, ref, rtol=1e-9, atol=1e-12)
    assert np.abs(d - ref).max() < 1e-14  # observed: 8e-16 on MUTAG


def test_continuous_equals_the_authors_package(dataset_dir):
    from gramdist.datasets import read_tu

    wwl, ig = _package()
    graphs = read_tu(dataset_dir("ENZYMES"))[:60]
    feats = [g.node_attrs for g in graphs]
    ref = wwl.pairwise_wasserstein_distance(_igraphs(ig, graphs), node_features=feats, num_iterations=2)
    d = distances(WWLKernel(h=2, node_features="continuous", psd_check=0), graphs)
    # the package standardises with scikit-learn's scale (a second centring pass): the
    # embeddings differ in the last bits, the distances (up to ~25) by < 1e-8
    assert np.allclose(d, ref, rtol=1e-9, atol=1e-8)


def test_sinkhorn_matches_brute_force():
    """Converged Sinkhorn on collapsed node sets equals POT's plain Sinkhorn on all nodes."""
    graphs = random_graphs(8, seed=5)
    seqs = brute_sequences(graphs, 1)
    n = len(seqs)
    ref = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            a, b = seqs[i], seqs[j]
            c = np.array([[np.mean(a[p] != b[q]) for q in range(len(b))] for p in range(len(a))])
            plan = ot.sinkhorn(np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b)), c, 0.05,
                               numItermax=20000, stopThr=1e-14)
            ref[i, j] = np.sum(plan * c)
    d = distances(WWLKernel(h=1, sinkhorn=True, sinkhorn_reg=0.05, sinkhorn_max_iter=20000, psd_check=0), graphs)
    assert np.allclose(d, ref, rtol=1e-6, atol=1e-9)


def test_sinkhorn_is_not_compared_with_the_package_at_its_50_iterations(mutag):
    """The package stops Sinkhorn at 50 iterations, far from feasible plans: some of its
    "distances" fall below the exact Wasserstein distance, which no transport plan can. With
    its default 1000 iterations ours stays above the exact distance (a feasible plan's cost)."""
    wwl, ig = _package()
    graphs = mutag[:24]
    ref = wwl.pairwise_wasserstein_distance(_igraphs(ig, graphs), num_iterations=2, sinkhorn=True)
    exact = distances(WWLKernel(h=2, psd_check=0), graphs)
    off = ~np.eye(len(graphs), dtype=bool)
    assert np.any(ref[off] < exact[off] - 1e-3)
    ours = distances(WWLKernel(h=2, sinkhorn=True, sinkhorn_reg=0.05, psd_check=0), graphs)
    assert np.all(ours[off] >= exact[off] - 1e-6)


def test_the_package_kernel_helper_is_not_the_papers_laplacian_kernel(mutag):
    """``wwl.wwl`` feeds D to scikit-learn's laplacian_kernel, which treats its rows as vectors."""
    from sklearn.metrics.pairwise import laplacian_kernel

    wwl, ig = _package()
    graphs = mutag[:30]
    ref = wwl.wwl(_igraphs(ig, graphs), num_iterations=2, gamma=0.5)
    d = distances(WWLKernel(h=2, psd_check=0), graphs)
    assert np.allclose(ref, laplacian_kernel(d, gamma=0.5), rtol=1e-9)
    kernel = WWLKernel(h=2, gamma=0.5, psd_check=0)
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 16)
    assert np.allclose(ours, np.exp(-0.5 * d), rtol=1e-15) and not np.allclose(ours, ref, atol=1e-3)


# --------------------------------------------------------------------------- positive definiteness
# Ten 2-point sets in the plane (found by a hill-climbing search) on which the Wasserstein
# distance is not conditionally negative definite: exp(-gamma D) has a negative eigenvalue.
NON_CND = [[[1.9, 2.0], [1.4, 0.4]], [[0.5, 2.1], [2.0, 2.0]], [[0.9, 1.9], [2.0, 0.0]], [[2.0, 2.0], [1.2, 0.2]],
           [[1.3, 0.2], [0.6, 2.0]], [[1.1, 1.9], [0.3, 0.1]], [[0.2, 0.9], [0.0, 0.0]], [[0.4, 0.7], [0.5, 2.0]],
           [[2.0, 2.0], [0.0, 1.0]], [[0.0, 1.0], [2.0, 0.0]]]


def test_continuous_wwl_is_not_psd_and_the_report_says_so():
    graphs = GraphBatch.from_graphs([np.zeros((0, 2))] * len(NON_CND), [2] * len(NON_CND),
                                    node_attrs=[np.array(p) for p in NON_CND])
    kernel = WWLKernel(h=0, gamma=0.1, standardize=False, psd_check=10)
    state = kernel.fit(graphs, 0)
    k = gram_by_tiles(kernel, state, graphs, 4)
    assert smallest_eigenvalue_ratio(k) < -1e-3
    assert state.attrs["psd_check"]["min_eigenvalue_ratio"] < -1e-3
    notes = " ".join(kernel.report(state))
    assert "NOT positive semi-definite" in notes and "indefinite on these graphs" in notes


def test_categorical_wwl_is_psd_on_mutag(mutag):
    kernel = WWLKernel(h=3, gamma=10.0, psd_check=0)
    state = kernel.fit(mutag, 0)
    assert smallest_eigenvalue_ratio(gram_by_tiles(kernel, state, mutag, 64)) >= -1e-10
    kernel = WWLKernel(h=3, psd_check=40)
    state = kernel.fit(mutag, 0)
    assert "positive definite (categorical" in kernel.report(state)[0]
    assert "PSD to rounding" in kernel.report(state)[1]


def test_continuous_wwl_on_enzymes_shows_no_negative_eigenvalue(dataset_dir):
    """The non-PSD case exists (above) but not on these ENZYMES graphs: their distance matrix is
    conditionally negative definite to rounding, so every gamma gives a PSD block."""
    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir("ENZYMES"))[:40]
    kernel = WWLKernel(h=1, node_features="continuous", psd_check=0)
    d = distances(kernel, graphs)
    p = np.eye(len(d)) - 1.0 / len(d)
    assert np.linalg.eigvalsh(p @ d @ p)[-1] < 1e-10
    for gamma in (1e-3, 0.1, 10.0):
        assert smallest_eigenvalue_ratio(np.exp(-gamma * d)) > -1e-12


# --------------------------------------------------------------------------- contract
@pytest.mark.parametrize("params", [{}, {"categorical_solver": "emd"},
                                    {"sinkhorn": True, "sinkhorn_reg": 0.05, "sinkhorn_max_iter": 30}])
def test_tile_size_invariance_categorical(mutag, params):
    graphs = mutag[:20]
    kernel = WWLKernel(h=2, psd_check=0, **params)
    state = kernel.fit(graphs, 0)
    a = gram_by_tiles(kernel, state, graphs, 20)
    assert np.array_equal(a, gram_by_tiles(kernel, state, graphs, 7))
    assert np.array_equal(a, gram_by_tiles(kernel, state, graphs, 1))


def test_tile_size_invariance_continuous(dataset_dir):
    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir("ENZYMES"))[:24]
    kernel = WWLKernel(h=2, psd_check=0)
    state = kernel.fit(graphs, 0)
    assert state.attrs["mode"] == "continuous"
    a = gram_by_tiles(kernel, state, graphs, 24)
    assert np.array_equal(a, gram_by_tiles(kernel, state, graphs, 5))


def _permuted(g, rng):
    perm = rng.permutation(g.n_nodes)
    inv = np.argsort(perm)
    return GraphBatch.from_graphs([inv[g.edges]], [g.n_nodes], node_labels=[g.node_labels[perm]],
                                  node_attrs=None if g.node_attrs is None else [g.node_attrs[perm]])


def test_node_permutation_invariance(mutag, dataset_dir):
    from gramdist.datasets import read_tu

    rng = np.random.default_rng(3)
    kernel = WWLKernel(h=3, psd_check=0)
    state = kernel.fit(mutag, 0)
    ref = kernel.embed(mutag[:10], state)
    for i in range(10):
        p = kernel.embed(_permuted(mutag[i], rng), state)
        assert np.array_equal(kernel.pairwise(p, ref, state), kernel.pairwise(ref[i:i + 1], ref, state))
    enz = read_tu(dataset_dir("ENZYMES"))[:8]
    kernel = WWLKernel(h=2, psd_check=0)
    state = kernel.fit(enz, 0)
    ref = kernel.embed(enz, state)
    for i in range(4):
        p = kernel.embed(_permuted(enz[i], rng), state)
        assert np.allclose(kernel.pairwise(p, ref, state), kernel.pairwise(ref[i:i + 1], ref, state), rtol=1e-12)


def test_fit_then_embed_new_graphs_gives_the_rows_of_the_full_gram(dataset_dir):
    from gramdist.datasets import read_tu

    enz = read_tu(dataset_dir("ENZYMES"))[:30]
    kernel = WWLKernel(h=1, psd_check=5)
    state = kernel.fit(enz[:20], seed=4)  # attribute scaling from these 20 only
    full = gram_by_tiles(kernel, state, enz, 8)
    block = kernel.pairwise(kernel.embed(enz[20:], state), kernel.embed(enz[:20], state), state)
    assert np.array_equal(block, full[20:, :20])
    again = kernel.fit(enz[:20], seed=4)
    assert again.attrs == state.attrs and all(np.array_equal(again.arrays[k], state.arrays[k]) for k in state.arrays)


def test_continuous_needs_attributes(mutag):
    with pytest.raises(JobError, match="needs numerical node attributes"):
        WWLKernel(node_features="continuous").fit(mutag, 0)
    enz_state = WWLKernel(node_features="continuous", psd_check=0).fit(
        random_graphs(3, 0, attrs=2), 0)
    with pytest.raises(JobError, match="node_features='continuous' needs numerical node attributes, but the "
                       "graphs have none"):
        WWLKernel(node_features="continuous").embed(mutag[:2], enz_state)
    with pytest.raises(JobError, match="these graphs have 3 node attributes, the kernel was fitted with 2"):
        WWLKernel(node_features="continuous").embed(random_graphs(3, 1, attrs=3), enz_state)


@pytest.mark.parametrize("params", [{"h": -1}, {"gamma": 0}, {"node_features": "labels"}, {"categorical_solver": "lp"},
                                    {"sinkhorn": "yes"}, {"sinkhorn_reg": -1.0}, {"psd_check": -2}])
def test_invalid_parameters(params):
    with pytest.raises(JobError, match="kernel wwl: parameter"):
        make_kernel("wwl", **params)


# --------------------------------------------------------------------------- through the engine
def test_compute_gram_and_transformer(mutag):
    import gramdist
    from gramdist import GramTransformer

    k = gramdist.compute_gram(mutag[:30], kernel="wwl", h=2, gamma=0.5)
    kernel = WWLKernel(h=2, gamma=0.5, psd_check=0)
    assert np.array_equal(k, gram_by_tiles(kernel, kernel.fit(mutag[:30], 0), mutag[:30], 30))
    t = GramTransformer(kernel="wwl", kernel_params={"h": 2, "gamma": 0.5}).fit(mutag[:30])
    state = kernel.fit(mutag[:30], 0)
    assert np.array_equal(t.transform(mutag[30:40]), kernel.pairwise(kernel.embed(mutag[30:40], state),
                                                                    kernel.embed(mutag[:30], state), state))


def test_job_file_runs(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    out = tmp_path / "wwl.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-wwl.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--json"], capture_output=True, text=True, cwd=ROOT,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    assert "positive definite (categorical WWL" in r.stderr


def test_embeddings_are_kept_by_stores(tmp_path, mutag):
    """NodeSets is a dataclass of arrays: ``gram.keep_embeddings`` stores it and reads it back."""
    from gramdist.engine.store.state import read_embedding, write_embedding

    kernel = WWLKernel(h=2, psd_check=0)
    state = kernel.fit(mutag[:12], 0)
    emb = kernel.embed(mutag[:12], state)
    assert write_embedding(tmp_path, "r0", emb, "x")
    back = read_embedding(tmp_path, "r0", "x")
    assert np.array_equal(kernel.pairwise(back, emb, state), kernel.pairwise(emb, emb, state))
