"""FLG and MLG kernels against dense brute-force references, invariances and the state."""

from __future__ import annotations

import json
import logging

import networkx as nx
import numpy as np
import pytest
import zarr

from gramdist.engine.placement import Placement
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.base import KernelState
from gramdist.kernels.gaussian.bhattacharyya import GaussianEmbedding, bhattacharyya
from gramdist.kernels.gaussian.mlg import (
    FLGKernel,
    MLGKernel,
    balls,
    flg_kernelized,
    nystrom_features,
    subgraph_classes,
    subgraph_covariances,
)
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


# ----------------------------------------------------------------------------- references
def dense_laplacian(g) -> np.ndarray:
    a = np.asarray(g.adjacency().todense())
    np.fill_diagonal(a, 0.0)  # a self-loop does not change the Laplacian
    return np.diag(a.sum(axis=1)) - a


def flg_dense(u1: np.ndarray, lap1: np.ndarray, u2: np.ndarray, lap2: np.ndarray, eta: float, gamma: float) -> float:
    """Definition 2 / Eq. (4) literally: explicit inverses in the full feature space."""
    m = u1.shape[1]
    s1 = u1.T @ np.linalg.inv(lap1 + eta * np.eye(len(lap1))) @ u1 + gamma * np.eye(m)
    s2 = u2.T @ np.linalg.inv(lap2 + eta * np.eye(len(lap2))) @ u2 + gamma * np.eye(m)
    num = np.linalg.det(np.linalg.inv(0.5 * np.linalg.inv(s1) + 0.5 * np.linalg.inv(s2))) ** 0.5
    return float(num / (np.linalg.det(s1) ** 0.25 * np.linalg.det(s2) ** 0.25))


def one_hot(labels: np.ndarray, alphabet: np.ndarray) -> np.ndarray:
    return (np.asarray(labels)[:, None] == np.asarray(alphabet)[None, :]).astype(float)


def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3, attrs: int = 0) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, feats = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        edges.append(rng.integers(0, k, size=(int(rng.integers(0, 2 * k + 1)), 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        feats.append(rng.standard_normal((k, attrs)) * 3 + 1)
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, node_attrs=feats if attrs else None)


def permuted(graphs: GraphBatch, seed: int) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for g in graphs:
        perm = rng.permutation(g.n_nodes)  # old node i becomes perm[i]
        e = perm[g.edges]
        edges.append(e[rng.permutation(len(e))])
        lab = np.empty(g.n_nodes, dtype=np.int64)
        lab[perm] = g.node_labels
        labels.append(lab)
        sizes.append(g.n_nodes)
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def mlg_reference(kern: MLGKernel, state: KernelState, graphs: GraphBatch) -> np.ndarray:
    """MLG Gram by per-vertex loops: networkx balls, dense inverses, slogdet, no batching."""
    arr = state.arrays
    eta, gamma = kern.eta, kern.gamma
    feats = [one_hot(g.node_labels, arr["base.labels"]) for g in graphs]
    ld = lambda m: np.linalg.slogdet(m)[1]  # noqa: E731
    for level in range(1, kern.levels + 1):
        r = state.attrs["radii"][level - 1]
        a_cov, proj = arr[f"level{level}.cov"], arr[f"level{level}.proj"]
        new = []
        for g, x in zip(graphs, feats):
            nxg = nx.Graph()
            nxg.add_nodes_from(range(g.n_nodes))
            nxg.add_edges_from(g.edges.tolist())
            adj0 = np.asarray(g.adjacency().todense())
            np.fill_diagonal(adj0, 0.0)
            out = np.zeros((g.n_nodes, proj.shape[1]))
            for v in range(g.n_nodes):
                ball = sorted(nx.single_source_shortest_path_length(nxg, v, cutoff=r))
                sub = adj0[np.ix_(ball, ball)]
                lap = np.diag(sub.sum(axis=1)) - sub  # Laplacian of the induced subgraph
                s = x[ball].T @ np.linalg.inv(lap + eta * np.eye(len(ball))) @ x[ball] + gamma * np.eye(x.shape[1])
                kv = np.array([np.exp(0.25 * ld(s) + 0.25 * ld(sa) - 0.5 * ld(0.5 * (s + sa))) for sa in a_cov])
                out[v] = proj.T @ kv
            new.append(out)
        feats = new
    covs = [x.T @ np.linalg.inv(dense_laplacian(g) + eta * np.eye(g.n_nodes)) @ x + gamma * np.eye(x.shape[1])
            for g, x in zip(graphs, feats)]
    n = len(graphs)
    k = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            k[i, j] = np.exp(0.25 * ld(covs[i]) + 0.25 * ld(covs[j]) - 0.5 * ld(0.5 * (covs[i] + covs[j])))
    return k


# ----------------------------------------------------------------------------- FLG
@pytest.mark.parametrize("eta,gamma", [(0.1, 0.01), (1.0, 0.5)])
def test_flg_equals_dense_definition(mutag, eta: float, gamma: float) -> None:
    graphs = mutag[:15]
    kern = FLGKernel(eta=eta, gamma=gamma)
    state = kern.fit(mutag, 0)
    got = gram_by_tiles(kern, state, graphs, tile=4)
    alphabet = state.arrays["base.labels"]
    for i in range(15):
        for j in range(i, 15):
            gi, gj = graphs[i], graphs[j]
            ref = flg_dense(one_hot(gi.node_labels, alphabet), dense_laplacian(gi),
                            one_hot(gj.node_labels, alphabet), dense_laplacian(gj), eta, gamma)
            assert got[i, j] == pytest.approx(ref, rel=1e-9)


def test_flg_with_attributes_equals_dense_definition() -> None:
    graphs = random_graphs(12, 3, attrs=2)
    kern = FLGKernel(node_features="both", attr_weight=0.5, eta=0.3, gamma=0.1)
    state = kern.fit(graphs, 0)
    got = gram_by_tiles(kern, state, graphs, tile=5)
    mean, scale = graphs.node_attrs.mean(axis=0), graphs.node_attrs.std(axis=0)
    feats = [np.hstack([one_hot(g.node_labels, [0, 1, 2]), (g.node_attrs - mean) / scale * 0.5]) for g in graphs]
    for i in range(12):
        for j in range(12):
            ref = flg_dense(feats[i], dense_laplacian(graphs[i]), feats[j], dense_laplacian(graphs[j]), 0.3, 0.1)
            assert got[i, j] == pytest.approx(ref, rel=1e-9)
    with pytest.raises(JobError, match="needs numerical node attributes"):
        FLGKernel(node_features="attributes").fit(random_graphs(3, 0), 0)
    # graphs embedded with the state must carry the width it was fitted with
    with pytest.raises(JobError, match="node_features='both' needs numerical node attributes, but the graphs have"):
        kern.embed(random_graphs(3, 0), state)
    with pytest.raises(JobError, match="these graphs have 3 node attributes, the kernel was fitted with 2"):
        kern.embed(random_graphs(3, 0, attrs=3), state)


def test_kernelized_form_equals_explicit_form(mutag) -> None:
    """Proposition 2 (eigendecomposition of the joint vertex Gram) = Definition 2."""
    alphabet = np.unique(mutag.node_labels)
    for i, j in [(0, 1), (2, 7), (10, 10)]:
        gi, gj = mutag[i], mutag[j]
        ui, uj = one_hot(gi.node_labels, alphabet), one_hot(gj.node_labels, alphabet)
        u = np.vstack([ui, uj])
        got = flg_kernelized(u @ u.T, gi.n_nodes, dense_laplacian(gi), dense_laplacian(gj), 0.1, 0.01)
        ref = flg_dense(ui, dense_laplacian(gi), uj, dense_laplacian(gj), 0.1, 0.01)
        assert got == pytest.approx(ref, rel=1e-8)


def test_full_rank_base_projection_is_exact(mutag) -> None:
    """Proposition 1: projecting onto (a basis of) the span of the features changes nothing."""
    exact = FLGKernel()
    low = FLGKernel(base_rank=50, n_samples=1000)  # the sample is every vertex
    graphs = mutag[:30]
    k0 = gram_by_tiles(exact, exact.fit(graphs, 0), graphs, tile=30)
    state = low.fit(graphs, 0)
    assert state.arrays["base.proj"].shape[1] == len(np.unique(graphs.node_labels))
    assert np.allclose(gram_by_tiles(low, state, graphs, tile=30), k0, rtol=1e-9, atol=1e-12)


# ----------------------------------------------------------------------------- building blocks
def test_balls_match_breadth_first_search() -> None:
    graphs = random_graphs(8, 4, max_nodes=12)
    adj = graphs.adjacency()
    g = nx.Graph()
    g.add_nodes_from(range(graphs.n_nodes))
    g.add_edges_from(graphs.global_edges.tolist())
    for r in (0, 1, 2, 3):
        indptr, indices = balls(adj, r)
        for v in range(graphs.n_nodes):
            assert indices[indptr[v] : indptr[v + 1]].tolist() == sorted(nx.single_source_shortest_path_length(g, v, r))
        centers = np.array([5, 0, 5])
        p2, i2 = balls(adj, r, centers)
        for c, v in enumerate(centers):
            assert i2[p2[c] : p2[c + 1]].tolist() == indices[indptr[v] : indptr[v + 1]].tolist()


def test_subgraph_covariances_match_dense_induced_laplacians() -> None:
    graphs = random_graphs(10, 5, max_nodes=10)
    graphs = GraphBatch.concat([graphs, GraphBatch.from_graphs([np.array([[0, 0], [0, 1]])], [3], node_labels=[[0, 1, 2]])])
    adj = graphs.adjacency()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((graphs.n_nodes, 3))
    dense = np.asarray(adj.todense())
    np.fill_diagonal(dense, 0)
    indptr, indices = balls(adj, 2)
    got = subgraph_covariances(adj, indptr, indices, x, 0.2, 0.05)
    for v in range(graphs.n_nodes):
        ball = indices[indptr[v] : indptr[v + 1]]
        sub = dense[np.ix_(ball, ball)]
        lap = np.diag(sub.sum(axis=1)) - sub + 0.2 * np.eye(len(ball))
        ref = x[ball].T @ np.linalg.inv(lap) @ x[ball] + 0.05 * np.eye(3)
        assert np.allclose(got[v], ref, rtol=1e-11, atol=1e-13)
        assert np.array_equal(got[v], got[v].T)


def test_subgraph_classes_are_an_exact_shortcut(mutag) -> None:
    """Subgraphs in one class have bitwise equal covariances; distinct inputs, distinct classes."""
    graphs = mutag[:40]
    adj = graphs.adjacency()
    x = one_hot(graphs.node_labels, np.unique(mutag.node_labels))
    row_ids = np.unique(graphs.node_labels, return_inverse=True)[1].ravel()
    for r in (1, 2):
        indptr, indices = balls(adj, r)
        cov = subgraph_covariances(adj, indptr, indices, x, 0.1, 0.01)
        first, inverse = subgraph_classes(adj, indptr, indices, row_ids)
        assert len(first) < graphs.n_nodes and np.array_equal(first[inverse[first]], first)
        assert np.array_equal(cov, cov[first][inverse])
        assert np.array_equal(np.unique(inverse), np.arange(len(first)))
        # representatives differ in their inputs: size, member labels or local arcs
        sig = {(tuple(row_ids[indices[indptr[v]:indptr[v + 1]]]),
                tuple(np.asarray(adj[indices[indptr[v]:indptr[v + 1]]][:, indices[indptr[v]:indptr[v + 1]]]
                                 .todense()).ravel())) for v in first}
        assert len(sig) == len(first)


# ----------------------------------------------------------------------------- MLG
@pytest.fixture(scope="module")
def mlg_fitted(mutag):
    kern = MLGKernel(levels=2, radius=1, n_samples=25, rank=6)
    return kern, kern.fit(mutag[:80], seed=3)


def test_mlg_equals_per_vertex_reference(mutag, mlg_fitted) -> None:
    kern, state = mlg_fitted
    graphs = mutag[[0, 3, 90, 150, 187]]  # two fit graphs, three never seen in fit
    got = gram_by_tiles(kern, state, graphs, tile=2)
    assert np.allclose(got, mlg_reference(kern, state, graphs), rtol=1e-8, atol=1e-12)


def test_mlg_properties(mutag, mlg_fitted) -> None:
    kern, state = mlg_fitted
    graphs = mutag[:60]
    ref = gram_by_tiles(kern, state, graphs, tile=60)
    # tile-size invariance, bitwise
    for tile in (1, 7, 25):
        assert np.array_equal(gram_by_tiles(kern, state, graphs, tile=tile), ref)
    # normalised by construction: K(G, G) = 1 exactly, normalisation is a no-op
    assert np.array_equal(np.diag(ref), np.ones(60))
    assert np.array_equal(kern.self_similarity(kern.embed(graphs, state), state), np.ones(60))
    assert np.array_equal(gram_by_tiles(kern, state, graphs, tile=16, normalize=True), ref)
    assert min_eigenvalue_ratio(ref) > -1e-12
    # an embedding depends on the graph only, not on its chunk
    whole = kern.embed(graphs, state)
    for i in (0, 31, 59):
        alone = kern.embed(graphs[i : i + 1], state)
        assert np.array_equal(alone.cov, whole.cov[i : i + 1]) and np.array_equal(alone.logdet, whole.logdet[i : i + 1])


def test_mlg_permutation_invariance(mutag, mlg_fitted) -> None:
    kern, state = mlg_fitted
    graphs = mutag[100:130]
    a = kern.embed(graphs, state)
    b = kern.embed(permuted(graphs, 11), state)
    k_ab = kern.pairwise(a, b, state)
    assert np.allclose(np.diag(k_ab), 1.0, rtol=0, atol=1e-9)
    assert np.allclose(k_ab, kern.pairwise(a, a, state), rtol=1e-8, atol=1e-12)


def test_nystrom_features_reproduce_the_anchor_gram(mutag) -> None:
    """With every eigenpair kept, the anchors' own features satisfy F F' = K~ (Section 4.1)."""
    kern = MLGKernel(levels=1, radius=1, n_samples=12, rank=12, min_eig_ratio=0.0, eta=0.5)
    state = kern.fit(mutag[:30], seed=0)
    anchors = GaussianEmbedding(state.arrays["level1.cov"], state.arrays["level1.logdet"])
    proj = state.arrays["level1.proj"]
    k_anchor = bhattacharyya(anchors, anchors)
    assert len(anchors) == 12 and proj.shape[0] == 12
    f = nystrom_features(anchors.cov, anchors, proj)
    assert np.allclose(f @ f.T, k_anchor, rtol=1e-7, atol=1e-9)


def test_fit_is_deterministic_and_state_is_serialisable(mutag) -> None:
    kern = make_kernel("mlg", levels=2, n_samples=15, rank=5, radius_growth="double", radius=2)
    s1, s2, s3 = kern.fit(mutag, 5), kern.fit(mutag, 5), kern.fit(mutag, 6)
    assert s1.arrays.keys() == s2.arrays.keys()
    assert all(np.array_equal(s1.arrays[k], s2.arrays[k]) for k in s1.arrays)
    assert not np.array_equal(s1.arrays["level1.cov"], s3.arrays["level1.cov"])
    assert s1.attrs["radii"] == [2, 4]
    restored = KernelState.from_store_parts({k: np.array(v) for k, v in s1.arrays.items()}, json.loads(json.dumps(s1.attrs)))
    graphs = mutag[:10]
    assert np.array_equal(gram_by_tiles(kern, restored, graphs, 4), gram_by_tiles(kern, s1, graphs, 4))


def test_unseen_labels_and_degenerate_graphs(mutag) -> None:
    kern = MLGKernel(levels=1, n_samples=10, rank=4)
    state = kern.fit(mutag[:20], 0)
    odd = GraphBatch.from_graphs(
        [np.zeros((0, 2)), np.zeros((0, 2)), np.array([[0, 1]]), np.array([[0, 1], [1, 1]])],
        [0, 2, 2, 2], node_labels=[[], [99, 0], [99, 99], [0, 1]],
    )
    emb = kern.embed(odd, state)
    k = kern.pairwise(emb, emb, state)
    assert np.all(np.isfinite(k)) and np.array_equal(np.diag(k), np.ones(4))


def test_engine_gram_same_for_one_and_two_workers(tmp_path, mutag, dataset_dir) -> None:
    """Through the engine and the Zarr store: the fitted state (anchors and bases, fitted on a
    sample of 60 graphs) is read back and applied to the 128 graphs never seen in fit; the Gram
    is bitwise the same for 1 worker with tiles of 32 and 2 workers with tiles of 50, and equals
    the Gram computed in-process from the stored state."""
    from distributed import Client, LocalCluster

    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram, read_state
    from gramdist.jobs import validate_job

    dataset_dir("MUTAG")
    grams = {}
    kernel = {"name": "mlg", "levels": 2, "radius": 1, "n_samples": 20, "rank": 5}
    for workers, tile in [(1, 32), (2, 50)]:
        job = validate_job({"dataset": {"name": "MUTAG", "node_attributes": "none"}, "kernel": dict(kernel),
                            "fit": {"sample_size": 60, "seed": 7}, "gram": {"tile_size": tile},
                            "_job_name": "mutag-x"})
        with LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0",
                          silence_logs=logging.ERROR) as c, Client(c) as client:
            res = run_job(job, out=str(tmp_path / f"w{workers}-t{tile}.zarr"), placement=Placement(client=client))
        assert res.complete
        grams[workers, tile] = np.asarray(open_gram(res.store)[0])
    assert np.array_equal(grams[1, 32], grams[2, 50])
    kern = make_kernel("mlg", **{k: v for k, v in kernel.items() if k != "name"})
    state = read_state(res.store)
    assert len(np.asarray(zarr.open_group(res.store, mode="r")["fit_indices"])) == 60
    assert np.array_equal(gram_by_tiles(kern, state, mutag, tile=50), grams[2, 50])
    assert np.array_equal(np.diag(grams[1, 32]), np.ones(len(mutag)))


@pytest.mark.parametrize("name,params", [
    ("flg", {"eta": 0}), ("flg", {"gamma": -1.0}), ("flg", {"node_features": "edges"}), ("flg", {"base_rank": 0}),
    ("flg", {"attr_weight": -1}), ("mlg", {"levels": 0}), ("mlg", {"radius": 0}), ("mlg", {"rank": 0}),
    ("mlg", {"radius_growth": "cubic"}), ("mlg", {"n_samples": 1}), ("mlg", {"min_eig_ratio": 1.5}),
    ("mlg", {"levels": True}),
])
def test_invalid_parameters(name: str, params: dict) -> None:
    with pytest.raises(JobError, match=f"kernel {name}: parameter"):
        make_kernel(name, **params)


# ----------------------------------------------------------------------------- Sec. 4.1 construction
def _ball_covariances(graphs: GraphBatch, x: np.ndarray, r: int, eta: float, gamma: float) -> np.ndarray:
    """Every vertex's subgraph Gaussian by the definition: the ball of radius r (breadth-first
    search in its graph), the Laplacian of the induced subgraph, S = X' (L + eta I)^-1 X + gamma I."""
    out = []
    for gi, g in enumerate(graphs):
        nxg = nx.Graph()
        nxg.add_nodes_from(range(g.n_nodes))
        nxg.add_edges_from(g.edges.tolist())
        adj = np.asarray(g.adjacency().todense())
        np.fill_diagonal(adj, 0.0)
        xg = x[graphs.node_offsets[gi]:graphs.node_offsets[gi + 1]]
        for v in range(g.n_nodes):
            ball = sorted(nx.single_source_shortest_path_length(nxg, v, cutoff=r))
            sub = adj[np.ix_(ball, ball)]
            lap = np.diag(sub.sum(axis=1)) - sub
            out.append(xg[ball].T @ np.linalg.inv(lap + eta * np.eye(len(ball))) @ xg[ball]
                       + gamma * np.eye(x.shape[1]))
    return np.array(out)


def _kappa(s1: np.ndarray, s2: np.ndarray) -> float:
    """The FLG kernel of two zero-mean Gaussians (Eq. 4), from log-determinants."""
    ld = lambda m: np.linalg.slogdet(m)[1]  # noqa: E731
    return float(np.exp(0.25 * ld(s1) + 0.25 * ld(s2) - 0.5 * ld(0.5 * (s1 + s2))))


def _anchor_vertices(anchors: np.ndarray, covs: np.ndarray) -> list[int]:
    """The vertex whose subgraph Gaussian each anchor is (vertices have distinct Gaussians here)."""
    out = []
    for a in anchors:
        hit = np.flatnonzero(np.abs(covs - a).max(axis=(1, 2)) <= 1e-9 * (1 + np.abs(a).max()))
        assert len(hit) == 1
        out.append(int(hit[0]))
    return out


@pytest.fixture(scope="module")
def attributed() -> GraphBatch:
    # cycles and paths of 6..9 vertices (no two vertices share a ball of radius 1 or 2) with
    # real-valued attributes: every vertex's subgraph Gaussian is distinct, so anchors name vertices
    rng = np.random.default_rng(21)
    sizes = [6, 7, 8, 9, 6, 7]
    edges = [np.array([(i, (i + 1) % k) for i in range(k if j < 4 else k - 1)]) for j, k in enumerate(sizes)]
    return GraphBatch.from_graphs(edges, sizes, node_attrs=[rng.standard_normal((k, 2)) for k in sizes])


def _base(graphs: GraphBatch) -> np.ndarray:
    a = graphs.node_attrs
    return (a - a.mean(axis=0)) / a.std(axis=0)  # the kernel's standardised attributes, weight 1


def test_anchor_sampling_is_uniform_without_replacement_and_fresh_per_level(attributed) -> None:
    """Sec. 4.1: N~ vertices sampled from the fit graphs; here uniformly, without replacement,
    anew at each level (the kernel's documented choices), checked over 150 seeds (30 for level 2)."""
    from scipy.stats import chi2

    graphs, n_samples = attributed, 8
    n = graphs.n_nodes
    kern = MLGKernel(levels=2, radius=1, n_samples=n_samples, rank=4, eta=0.5, gamma=0.1,
                     node_features="attributes")
    cov1 = _ball_covariances(graphs, _base(graphs), 1, 0.5, 0.1)
    counts = np.zeros(n)
    same_sets = 0
    for seed in range(150):
        state = kern.fit(graphs, seed)
        level1 = _anchor_vertices(state.arrays["level1.cov"], cov1)
        assert len(set(level1)) == n_samples  # no vertex twice
        counts[level1] += 1
        if seed >= 30:  # level 2 (a costlier reference) on the first 30 seeds
            continue
        cov2 = _ball_covariances(graphs, kern._level_features(graphs, state.arrays, 1), 2, 0.5, 0.1)
        level2 = _anchor_vertices(state.arrays["level2.cov"], cov2)
        assert len(set(level2)) == n_samples
        same_sets += set(level1) == set(level2)
    # each vertex is an anchor with probability n_samples / n: a chi-square test at 0.1 %
    p = n_samples / n
    stat = float((((counts - 150 * p) ** 2) / (150 * p * (1 - p))).sum())
    assert stat < chi2.ppf(0.999, n - 1)
    assert counts.min() > 0
    assert same_sets <= 1  # a fresh draw per level, not the level-1 vertices again


@pytest.mark.parametrize("rank,ratio", [(4, 1e-6), (12, 0.05), (8, 0.0)])
def test_rank_cut_off_and_features_follow_the_papers_projection(attributed, rank, ratio) -> None:
    """The level's basis is the top min(P^, #{lambda >= ratio lambda_max}) eigenpairs of the anchor
    Gram K~_ij = kappa(v~_i, v~_j), and a vertex's features are lambda_i^-1/2 sum_l [u_i]_l kappa(v, v~_l)."""
    graphs = attributed
    kern = MLGKernel(levels=1, radius=1, n_samples=12, rank=rank, min_eig_ratio=ratio, eta=0.5, gamma=0.1,
                     node_features="attributes")
    state = kern.fit(graphs, 4)
    covs = _ball_covariances(graphs, _base(graphs), 1, 0.5, 0.1)
    anchors = covs[_anchor_vertices(state.arrays["level1.cov"], covs)]
    k_tilde = np.array([[_kappa(a, b) for b in anchors] for a in anchors])
    lam, u = np.linalg.eigh(k_tilde)
    lam, u = lam[::-1], u[:, ::-1]
    kept = min(rank, int(np.sum(lam >= max(ratio, 1e-12) * lam[0])))
    proj = state.arrays["level1.proj"]
    assert proj.shape == (12, kept)
    if ratio == 0.05:
        assert kept < rank  # the eigenvalue cut-off binds before the rank
    u, lam = u[:, :kept], lam[:kept]
    # the same basis (signs aside): equal projectors U diag(1/lambda) U'
    np.testing.assert_allclose(proj @ proj.T, (u / lam) @ u.T, rtol=1e-6, atol=1e-8 / lam[-1])
    # features of every vertex, anchors or not, from the paper's formula (sign-free: F F')
    k_va = np.array([[_kappa(c, a) for a in anchors] for c in covs])
    ref = k_va @ (u / np.sqrt(lam))
    got = kern._level_features(graphs, state.arrays, 1)
    np.testing.assert_allclose(got @ got.T, ref @ ref.T, rtol=1e-7, atol=1e-9)
