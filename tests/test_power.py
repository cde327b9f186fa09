"""Power kernel: Algorithm 1 / Definition 1 reference, invariance, integral, PSD, tiles."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.gaussian.bhattacharyya import bhattacharyya
from gramdist.kernels.gaussian.power import (
    PowerKernel,
    power_gaussians,
    power_summary_reference,
    unique_gaussians,
    walk_totals,
)
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def random_graphs(n: int, seed: int, max_nodes: int = 12) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes = [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        edges.append(rng.integers(0, k, size=(int(rng.integers(0, 2 * k + 1)), 2)))
        sizes.append(k)
    return GraphBatch.from_graphs(edges, sizes)


def structure(graphs: GraphBatch) -> GraphBatch:
    """The graphs without labels or attributes (the power kernel ignores them)."""
    return GraphBatch(node_offsets=graphs.node_offsets, edge_offsets=graphs.edge_offsets, edges=graphs.edges)


def permuted(graphs: GraphBatch, seed: int) -> GraphBatch:
    """Every graph with its nodes renumbered by a random permutation (edge order shuffled too)."""
    rng = np.random.default_rng(seed)
    edges, sizes = [], []
    for g in graphs:
        perm = rng.permutation(g.n_nodes)
        e = perm[g.edges]
        edges.append(e[rng.permutation(len(e))][:, ::-1])
        sizes.append(g.n_nodes)
    return GraphBatch.from_graphs(edges, sizes)


def test_walk_totals_are_exact() -> None:
    graphs = random_graphs(20, 0)
    s = walk_totals(graphs, 4)
    for i, g in enumerate(graphs):
        a = np.asarray(g.adjacency().todense(), dtype=object)
        v = np.ones(g.n_nodes, dtype=object)
        for t in range(9):
            assert s[i, t] == int(v.sum())
            v = a.dot(v)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_matches_algorithm_1_and_definition_1(mutag, k: int) -> None:
    graphs = GraphBatch.concat([structure(mutag[:40]), random_graphs(20, 1)])
    mean, cov = power_gaussians(graphs, k)
    for i, g in enumerate(graphs):
        s = power_summary_reference(g.adjacency(), k)
        mu = s.mean(axis=0)
        c = (s - mu).T @ (s - mu) / g.n_nodes
        assert np.allclose(mean[i], mu, rtol=1e-12, atol=1e-15)
        assert np.allclose(cov[i], c, rtol=1e-9, atol=1e-15 + 1e-12 * np.abs(c).max())
    assert np.array_equal(cov, cov.transpose(0, 2, 1))


def test_isomorphic_graphs_have_bitwise_identical_embeddings(mutag) -> None:
    graphs = GraphBatch.concat([structure(mutag), random_graphs(30, 2)])
    kern = PowerKernel(k=5, ridge=1e-6)
    state = kern.fit(graphs, 0)
    a = kern.embed(graphs, state)
    b = kern.embed(permuted(graphs, 7), state)
    assert np.array_equal(a.cov, b.cov) and np.array_equal(a.mean, b.mean) and np.array_equal(a.logdet, b.logdet)
    k = kern.pairwise(a, b, state)
    assert np.array_equal(np.diag(k), np.ones(len(graphs)))


@pytest.mark.parametrize(("k", "ridge"), [(5, 1e-8), (5, 1e-4), (7, 1e-2)])
def test_self_similarity_is_one_and_gram_is_psd(mutag, k: int, ridge: float) -> None:
    kern = make_kernel("power", k=k, ridge=ridge)
    state = kern.fit(mutag, 0)
    emb = kern.embed(mutag, state)
    assert np.array_equal(kern.self_similarity(emb, state), np.ones(len(mutag)))
    k = gram_by_tiles(kern, state, mutag, tile=64)
    assert np.array_equal(np.diag(k), np.ones(len(mutag)))
    assert np.array_equal(k, gram_by_tiles(kern, state, mutag, tile=64, normalize=True))
    assert min_eigenvalue_ratio(k) > -1e-12
    assert 0 < k.min() and k.max() <= 1


def test_gram_is_bitwise_independent_of_tile_size(mutag) -> None:
    kern = PowerKernel(k=5, ridge=1e-5)
    state = kern.fit(mutag, 0)
    ref = gram_by_tiles(kern, state, mutag, tile=188)
    for tile in (7, 17, 50):
        assert np.array_equal(gram_by_tiles(kern, state, mutag, tile=tile), ref)


def test_pairwise_on_distinct_gaussians_is_bitwise_the_full_block(mutag) -> None:
    kern = PowerKernel(k=5, ridge=1e-8)
    state = kern.fit(mutag, 0)
    emb = kern.embed(mutag, state)
    uniq, inverse = unique_gaussians(emb)
    assert 100 < len(uniq) < len(mutag)  # MUTAG has isomorphic (and co-spectral) duplicates
    assert np.array_equal(uniq.cov[inverse], emb.cov) and np.array_equal(uniq.mean[inverse], emb.mean)
    assert np.array_equal(uniq.logdet[inverse], emb.logdet)
    a, b = emb[:120], emb[60:]
    assert np.array_equal(kern.pairwise(a, b, state), bhattacharyya(a, b))


@pytest.mark.parametrize("k", [1, 2])
def test_agrees_with_numerical_integration(mutag, k: int) -> None:
    kern = PowerKernel(k=k, ridge=1e-3)
    state = kern.fit(mutag, 0)
    emb = kern.embed(mutag[[0, 5, 17]], state)
    got = kern.pairwise(emb, emb, state)

    def pdf(x: np.ndarray, i: int) -> np.ndarray:
        diff = x - emb.mean[i]
        sol = np.linalg.solve(emb.cov[i], diff.T).T
        return np.exp(-0.5 * np.sum(diff * sol, axis=-1)) / np.sqrt((2 * np.pi) ** k * np.linalg.det(emb.cov[i]))

    for i, j in [(0, 1), (0, 2), (1, 2)]:
        lo = np.minimum(emb.mean[i], emb.mean[j]) - 12 * np.sqrt(np.maximum(np.diag(emb.cov[i]), np.diag(emb.cov[j])))
        hi = np.maximum(emb.mean[i], emb.mean[j]) + 12 * np.sqrt(np.maximum(np.diag(emb.cov[i]), np.diag(emb.cov[j])))
        if k == 1:
            def f(x: float, i: int = i, j: int = j) -> float:
                return np.sqrt(pdf(np.array([[x]]), i) * pdf(np.array([[x]]), j))[0]

            ref, _ = integrate.quad(f, lo[0], hi[0], epsabs=1e-14, epsrel=1e-11, limit=200)
            assert got[i, j] == pytest.approx(ref, rel=1e-8)
        else:
            t0, t1 = np.linspace(lo[0], hi[0], 1201), np.linspace(lo[1], hi[1], 1201)
            xx, yy = np.meshgrid(t0, t1, indexing="ij")
            pts = np.stack([xx.ravel(), yy.ravel()], axis=1)
            vals = np.sqrt(pdf(pts, i) * pdf(pts, j)).reshape(xx.shape)
            ref = integrate.trapezoid(integrate.trapezoid(vals, t1, axis=1), t0)
            assert got[i, j] == pytest.approx(ref, rel=1e-5)


def test_degenerate_graphs() -> None:
    graphs = GraphBatch.from_graphs(
        [np.zeros((0, 2)), np.zeros((0, 2)), np.array([[0, 1]]), np.array([[0, 1], [1, 2], [2, 0]]), np.array([[0, 0]])],
        [0, 3, 2, 3, 1],
    )
    kern = PowerKernel(k=3, ridge=1e-3)
    state = kern.fit(graphs, 0)
    emb = kern.embed(graphs, state)
    assert np.all(np.isfinite(emb.cov)) and np.all(np.isfinite(emb.mean))
    # edgeless graphs: x^(1) = 0 and 0/0 is defined as 0 afterwards; regular graphs: Sigma = 0
    assert np.array_equal(emb.mean[0], np.zeros(3)) and np.array_equal(emb.mean[1], np.zeros(3))
    assert np.array_equal(emb.cov[3], 1e-3 * np.eye(3))
    assert np.allclose(emb.mean[3], [2 / 3, 2 / 3, 2 / 3])
    k = kern.pairwise(emb, emb, state)
    assert np.array_equal(np.diag(k), np.ones(5)) and np.all(np.isfinite(k))
    assert k[0, 1] == 1.0  # the empty graph and an edgeless graph both summarise to N(0, ridge I)


@pytest.mark.parametrize("params", [{"k": 0}, {"k": 2.5}, {"k": 40}, {"ridge": 0.0}, {"ridge": -1.0},
                                    {"ridge": float("nan")}, {"ridge": True}])
def test_invalid_parameters(params: dict) -> None:
    with pytest.raises(JobError, match="kernel power: parameter"):
        make_kernel("power", **params)
