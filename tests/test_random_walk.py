"""Random-walk kernels against the explicit Kronecker product graph on small graphs, GraKeL's
RandomWalk / RandomWalkLabeled, and the contract; every solver against the others."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.linalg

from gramdist.graphs import GraphBatch
from gramdist.kernels.randomwalk.kernel import RandomWalkKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def random_graphs(n: int, seed: int, max_nodes: int = 7, n_labels: int = 2) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, elabels = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k + 1))
        e = rng.integers(0, k, size=(m, 2))
        e = e[e[:, 0] != e[:, 1]]
        edges.append(e)
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        elabels.append(rng.integers(0, 2, size=len(e)))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels)


def product_matrix(g, h, use_labels: bool, use_edge_labels: bool) -> np.ndarray:
    """The explicit adjacency of the direct product graph on the label-matching node pairs."""
    def adj(x):
        a = np.zeros((x.n_nodes, x.n_nodes))
        e = np.full((x.n_nodes, x.n_nodes), -1)
        for (u, v), lab in zip(x.edges.tolist(), x.edge_labels.tolist()):
            a[u, v] = a[v, u] = 1
            e[u, v] = e[v, u] = lab
        return a, e

    (a, ea), (b, eb) = adj(g), adj(h)
    nodes = [(i, j) for i in range(g.n_nodes) for j in range(h.n_nodes)
             if not use_labels or g.node_labels[i] == h.node_labels[j]]
    w = np.zeros((len(nodes), len(nodes)))
    for p, (i, j) in enumerate(nodes):
        for q, (k, m) in enumerate(nodes):
            if a[i, k] and b[j, m] and (not use_edge_labels or ea[i, k] == eb[j, m]):
                w[p, q] = 1.0
    return w


def brute_rw(graphs: GraphBatch, kind: str, lam: float, p: int = 3, use_labels: bool = True,
             use_edge_labels: bool = False) -> np.ndarray:
    gs = list(graphs)
    out = np.zeros((len(gs), len(gs)))
    for i, g in enumerate(gs):
        for j, h in enumerate(gs):
            w = product_matrix(g, h, use_labels, use_edge_labels)
            one = np.ones(len(w))
            if kind == "geometric":
                out[i, j] = one @ np.linalg.solve(np.eye(len(w)) - lam * w, one) if len(w) else 0.0
            elif kind == "exponential":
                out[i, j] = one @ scipy.linalg.expm(lam * w) @ one if len(w) else 0.0
            else:
                x, total = one.copy(), one.sum()
                for t in range(1, p + 1):
                    x = w @ x
                    total += lam ** t * x.sum()
                out[i, j] = total
    return out


CASES = [("geometric", 0.02, {}), ("exponential", 0.3, {}), ("p_step", 0.5, {"p": 4})]


@pytest.mark.parametrize("kind,lam,extra", CASES)
@pytest.mark.parametrize("labels", ["none", "nodes", "nodes+edges"])
def test_every_solver_matches_the_explicit_product_graph(kind, lam, extra, labels):
    graphs = random_graphs(10, seed=hash(kind) % 1000)
    use_labels = labels != "none"
    use_edge = labels == "nodes+edges"
    ref = brute_rw(graphs, kind, lam, use_labels=use_labels, use_edge_labels=use_edge, **extra)
    solvers = ["auto", "product"] + (["features"] if kind == "p_step" or not use_labels else []) \
        + (["spectral"] if kind != "p_step" and not use_labels else [])
    for solver in solvers:
        kern = RandomWalkKernel(kind=kind, lam=lam, use_labels=use_labels, use_edge_labels=use_edge,
                                solver=solver, **extra)
        kern.validate()
        got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 4)
        np.testing.assert_allclose(got, ref, rtol=1e-9, atol=0, err_msg=solver)


def test_hand_worked_example():
    # K2 (one edge) against itself: 1^T A^t 1 = 2 for every t, so the product graph (4 nodes)
    # has 1^T W^t 1 = 4: geometric 4 / (1 - lam), exponential 4 e^lam, p-step sum_{t<=p} 4 lam^t.
    g = GraphBatch.from_graphs([np.array([[0, 1]])], [2])
    lam = 0.1
    for kind, want in (("geometric", 4 / (1 - lam)), ("exponential", 4 * np.exp(lam)),
                       ("p_step", 4 * (1 + lam + lam ** 2 + lam ** 3))):
        kern = RandomWalkKernel(kind=kind, lam=lam)
        assert gram_by_tiles(kern, kern.fit(g, 0), g, 1)[0, 0] == pytest.approx(want, rel=1e-10)  # tol


def test_lambda_is_validated(mutag):
    from gramdist.errors import InputError, JobError

    kern = RandomWalkKernel(kind="geometric", lam=1 / 16)  # MUTAG's largest degree is 4
    with pytest.raises(JobError, match=r"lam must be below 1 / d_max\^2 = 0.0625"):
        kern.fit(mutag, 0)
    kern = RandomWalkKernel(kind="geometric", lam=0.1)
    star = GraphBatch.from_graphs([np.array([[0, 1], [0, 2], [0, 3], [0, 4]]), np.array([[0, 1]])], [5, 2],
                                  node_labels=[np.zeros(5), np.zeros(2)])
    state = kern.fit(star[1:], 0)  # degree 1: lam < 1 is enough for the fit sample
    emb = kern.embed(star, state)
    with pytest.raises(InputError, match="diverge"):
        kern.pairwise(emb, emb, state)
    RandomWalkKernel(kind="exponential", lam=5.0).fit(mutag, 0)  # always convergent
    for params, match in ((dict(kind="walk"), "kind"), (dict(lam=0), "lam"), (dict(p=-1), "p"),
                          (dict(solver="cg"), "solver"), (dict(kind="p_step", solver="spectral"), "solver"),
                          (dict(tol=2.0), "tol")):
        from gramdist.kernels import make_kernel

        with pytest.raises(JobError, match=match):
            make_kernel("random_walk", **params)
    with pytest.raises(JobError, match="solver"):
        RandomWalkKernel(solver="spectral").fit(mutag, 0)  # labelled
    with pytest.raises(JobError, match="solver"):
        RandomWalkKernel(solver="features").fit(mutag, 0)  # labelled geometric


def test_series_features_report_graphs_beyond_the_fitted_degree():
    g = GraphBatch.from_graphs([np.array([[0, 1]]), np.array([[0, 1], [0, 2], [0, 3]])], [2, 4])
    kern = RandomWalkKernel(kind="geometric", lam=0.05, use_labels=False)
    state = kern.fit(g[:1], 0)
    emb = kern.embed(g, state)
    counts = kern.embedding_counts(emb)
    assert counts == {"above_fit_degree": 1}
    import pickle  # the flag travels with the rows (workers, slices)

    assert kern.embedding_counts(pickle.loads(pickle.dumps(emb))) == counts
    assert kern.embedding_counts(emb[1:]) == counts and kern.embedding_counts(emb[:1]) == {"above_fit_degree": 0}
    assert "larger degree" in kern.report_embeddings(counts)[0]
    assert kern.report(state)[0].startswith("geometric random walk kernel")


# ------------------------------------------------------------------ GraKeL
def _subset(name, dataset_dir, max_nodes, n):
    from gramdist.datasets import read_tu

    g = read_tu(dataset_dir(name))
    return g[[i for i, x in enumerate(g) if x.n_nodes <= max_nodes][:n]]


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_grakel_random_walk_labeled_relation(name, dataset_dir):
    """RandomWalkLabeled keeps every node pair in its product graph (start vector of n n' ones) and
    masks only edges: pairs of differently labelled nodes add their t = 0 term 1 each, so
    K_grakel = K + n n' - |V_x|. Its exact ("baseline") solvers agree with that to rounding."""
    pytest.importorskip("grakel")
    from grakel.kernels import RandomWalkLabeled

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = _subset(name, dataset_dir, 13, 8)
    gk = grakel_labelled_graphs(graphs)
    n = graphs.nodes_per_graph
    vx = np.array([[np.sum(x.node_labels[:, None] == y.node_labels[None, :]) for y in graphs] for x in graphs])
    shift = np.outer(n, n) - vx
    d = int(max(np.diff(x.adjacency().indptr).max(initial=0) for x in graphs))
    lam = 0.5 / d ** 2
    for kind, extra, theirs_kw in (("geometric", {}, {}), ("exponential", {}, {}),
                                   ("p_step", {"p": 3}, {"p": 3})):
        kern = RandomWalkKernel(kind=kind, lam=lam, **extra)
        ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 5)
        theirs = RandomWalkLabeled(lamda=lam, method_type="baseline", kernel_type=kind if kind != "p_step"
                                   else "geometric", **theirs_kw).fit_transform(gk)
        np.testing.assert_allclose(ours + shift, theirs, rtol=1e-9, atol=0, err_msg=kind)


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_grakel_random_walk_unlabelled(name, dataset_dir):
    """RandomWalk (unlabelled): the same kernel. Its fast geometric mode runs conjugate gradients
    (at most 20 iterations, rtol 1e-6); its exponential / p-step modes are checked through the
    exact baseline (its spectral path fails on NumPy 2 with 1x1 arrays)."""
    pytest.importorskip("grakel")
    from grakel.kernels import RandomWalk

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = _subset(name, dataset_dir, 13, 8)
    gk = grakel_labelled_graphs(graphs)
    lam = 0.01
    for kind, extra, kw, rtol in (("geometric", {}, dict(kernel_type="geometric"), 1e-6),
                                  ("geometric", {}, dict(kernel_type="geometric", method_type="baseline"), 1e-9),
                                  ("exponential", {}, dict(kernel_type="exponential", method_type="baseline"), 1e-9),
                                  ("p_step", {"p": 4}, dict(kernel_type="geometric", p=4, method_type="baseline"),
                                   1e-12)):
        for solver in ("auto", "spectral") if kind != "p_step" else ("auto",):
            kern = RandomWalkKernel(kind=kind, lam=lam, use_labels=False, solver=solver, **extra)
            ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 5)
            theirs = RandomWalk(lamda=lam, **kw).fit_transform(gk)
            np.testing.assert_allclose(ours, theirs, rtol=rtol, atol=0, err_msg=f"{kind} {solver} {kw}")


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("params", [
    dict(kind="geometric", lam=0.01), dict(kind="exponential", lam=0.1),
    dict(kind="p_step", p=3, lam=0.5), dict(kind="p_step", p=2, lam=0.5, solver="product", use_edge_labels=True),
    dict(kind="geometric", lam=0.01, use_labels=False), dict(kind="exponential", lam=0.1, use_labels=False,
                                                             solver="spectral")])
def test_tiles_psd_out_of_sample_permutations(mutag, params):
    graphs = mutag[:60]
    kern = RandomWalkKernel(**params)
    kern.validate()
    state = kern.fit(graphs[:20], 0)
    a = gram_by_tiles(kern, state, graphs, 25)
    assert np.array_equal(a, gram_by_tiles(kern, state, graphs, 8))
    assert min_eigenvalue_ratio(a) >= -1e-10
    new, train = kern.embed(graphs[45:], state), kern.embed(graphs[:45], state)
    assert np.array_equal(kern.pairwise(train, new, state).T, a[45:, :45])
    np.testing.assert_allclose(kern.pairwise(new, train, state), a[45:, :45], rtol=1e-13)
    assert np.array_equal(kern.self_similarity(new, state), np.diag(a)[45:])
    assert kern.has_feature_vectors == (params["kind"] == "p_step" and params.get("solver", "auto") == "auto")
    rng = np.random.default_rng(2)
    parts = []
    for g in graphs:
        p = rng.permutation(g.n_nodes)
        parts.append((np.argsort(p)[g.edges], g.n_nodes, g.node_labels[p], g.edge_labels))
    permuted = GraphBatch.from_graphs([x[0] for x in parts], [x[1] for x in parts],
                                      node_labels=[x[2] for x in parts], edge_labels=[x[3] for x in parts])
    np.testing.assert_allclose(gram_by_tiles(kern, state, permuted, 25), a, rtol=1e-11)


def test_through_the_engine(mutag, dataset_dir, tmp_path):
    import gramdist
    from gramdist import FeatureTransformer, GramTransformer

    dataset_dir("MUTAG")
    kern = RandomWalkKernel(kind="p_step", p=3, lam=0.5)
    ref = gram_by_tiles(kern, kern.fit(mutag, 0), mutag, 188)
    assert np.array_equal(gramdist.compute_gram(mutag, kernel="random_walk", kind="p_step", p=3, lam=0.5), ref)
    k2 = GramTransformer(kernel="random_walk", kernel_params={"kind": "p_step", "p": 3, "lam": 0.5},
                         tile_size=40).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k2, ref[100:, :100])
    x = FeatureTransformer(kernel="random_walk", kernel_params={"kind": "p_step", "p": 3, "lam": 0.5}
                           ).fit_transform(mutag)
    np.testing.assert_allclose((x @ x.T).toarray(), ref, rtol=1e-14)
    root = os.path.join(os.path.dirname(__file__), "..")
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-random_walk.yaml", "--out",
                        str(tmp_path / "r.zarr"), "--quiet", "--json"], cwd=root, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    from gramdist.engine.store import open_gram

    stored, _ = open_gram(tmp_path / "r.zarr")
    kern = RandomWalkKernel(kind="geometric", lam=0.01)
    ref = gram_by_tiles(kern, kern.fit(mutag, 0), mutag, 188)
    d = np.sqrt(np.diag(ref))
    np.testing.assert_allclose(np.asarray(stored), ref / np.outer(d, d), rtol=1e-13)
