"""Lovász θ kernel: θ and its representation against known values, bounds and GraKeL's SDP on
complements; subset values against cvxopt's QP; the sampled kernel against exhaustive
enumeration; determinism, tiles, PSD, the engine."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.theta.kernel import LovaszThetaKernel, samples_per_size, simple_edges
from gramdist.kernels.theta.solvers import lovasz_representation, simplex_min
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

cvxopt = pytest.importorskip("cvxopt")
ROOT = Path(__file__).resolve().parents[1]


def batch(*graphs: nx.Graph) -> GraphBatch:
    return GraphBatch.from_graphs([np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2) for g in graphs],
                                  [g.number_of_nodes() for g in graphs])


def theta(g: nx.Graph) -> float:
    return lovasz_representation(g.number_of_nodes(), np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2))[0]


# --------------------------------------------------------------------------- θ and the representation
@pytest.mark.parametrize("graph,value", [(nx.cycle_graph(5), 5 ** 0.5), (nx.petersen_graph(), 4.0),
                                         (nx.complete_graph(6), 1.0), (nx.empty_graph(4), 4.0),
                                         (nx.cycle_graph(6), 3.0), (nx.path_graph(4), 2.0)])
def test_known_lovasz_numbers(graph, value):
    assert theta(graph) == pytest.approx(value, rel=1e-7)


def _chromatic(g: nx.Graph) -> int:
    """Chromatic number by backtracking (small graphs)."""
    n = g.number_of_nodes()

    def colour(v, col, k):
        if v == n:
            return True
        for c in range(k):
            if all(col.get(u) != c for u in g[v]):
                col[v] = c
                if colour(v + 1, col, k):
                    return True
                del col[v]
        return False

    return next(k for k in range(1, n + 1) if colour(0, {}, k))


def test_sandwich_theorem_on_random_graphs():
    """α(G) ≤ θ(G) ≤ χ(Ḡ), both sides by brute force."""
    rng = np.random.default_rng(0)
    for trial in range(12):
        n = int(rng.integers(3, 9))
        g = nx.gnp_random_graph(n, float(rng.uniform(0.2, 0.8)), seed=trial)
        alpha = max(len(s) for r in range(1, n + 1) for s in itertools.combinations(range(n), r)
                    if not any(g.has_edge(u, v) for u, v in itertools.combinations(s, 2)))
        chi = _chromatic(nx.complement(g))
        t = theta(g)
        assert alpha - 1e-6 <= t <= chi + 1e-6


def test_representation_is_orthonormal_and_optimal():
    g = nx.gnp_random_graph(9, 0.4, seed=3)
    t, k, ok = lovasz_representation(9, np.array(list(g.edges())))
    assert ok and np.array_equal(np.diag(k), np.ones(9))
    for u, v in itertools.combinations(range(9), 2):
        if not g.has_edge(u, v):
            assert k[u, v] == 0.0  # non-adjacent vertices get orthogonal vectors
    assert np.linalg.eigvalsh(k)[0] > -1e-6
    # the whole vertex set's value under its own representation is θ itself
    assert 1.0 / simplex_min(k[None])[0] == pytest.approx(t, rel=1e-6)


def test_theta_equals_grakels_sdp_on_the_complement(mutag):
    """GraKeL's LovaszTheta puts the SDP's free variables on non-edges: it computes θ of the
    complement (6 for K_6). On complements its θ is ours."""
    pytest.importorskip("grakel")
    from grakel.kernels.lovasz_theta import _calculate_lovasz_embeddings_

    kernel = LovaszThetaKernel()
    ours = kernel.theta(mutag[:25])
    for i, g in enumerate(mutag[:25]):
        a = np.zeros((g.n_nodes, g.n_nodes))
        a[g.edges[:, 0], g.edges[:, 1]] = a[g.edges[:, 1], g.edges[:, 0]] = 1
        _, t = _calculate_lovasz_embeddings_(1 - a - np.eye(g.n_nodes))
        assert t == pytest.approx(ours[i], rel=1e-6)
    _, t6 = _calculate_lovasz_embeddings_(np.ones((6, 6)) - np.eye(6))
    assert t6 == pytest.approx(6.0, rel=1e-6) and theta(nx.complete_graph(6)) == pytest.approx(1.0)


# --------------------------------------------------------------------------- subset values
def test_simplex_min_matches_cvxopt_qp():
    """min over the simplex of λᵀKλ: support enumeration against cvxopt's QP solver."""
    from cvxopt import matrix, solvers

    rng = np.random.default_rng(1)
    ks = []
    for m in (2, 3, 5, 8):
        for _ in range(5):
            x = rng.normal(size=(m, 3)) + np.array([2.0, 0, 0])
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            ks.append(x @ x.T)
    for k in ks:
        m = len(k)
        sol = solvers.qp(matrix(2 * k), matrix(np.zeros(m)), matrix(-np.eye(m)), matrix(np.zeros(m)),
                         matrix(np.ones((1, m))), matrix(1.0), options={"show_progress": False, "abstol": 1e-12,
                                                                        "reltol": 1e-12, "feastol": 1e-12})
        assert simplex_min(k[None])[0] == pytest.approx(sol["primal objective"], rel=1e-7, abs=1e-10)


@pytest.mark.parametrize("rank", [1, 3, None])
def test_simplex_min_whole_support_shortcut_equals_full_enumeration(rank):
    """The certified whole-support shortcut gives full enumeration's minimum: on well-conditioned
    K (the shortcut taken) to rounding, on rank-deficient K (where a ridge solution is a
    feasible point short of the minimum, so the certificate must refuse it) exactly."""
    import itertools

    rng = np.random.default_rng(7)
    for m in (2, 4, 6):
        v = rng.normal(size=(200, m, rank or m)) + 0.5
        ks = v @ v.transpose(0, 2, 1)
        ours = simplex_min(ks)
        for k, got in zip(ks, ours):
            want = np.inf
            for size in range(1, m + 1):
                for t in itertools.combinations(range(m), size):
                    # the affine minimiser on T from its KKT system [K -1; 1ᵀ 0] (singular K too)
                    kt = k[np.ix_(t, t)]
                    kkt = np.block([[kt, -np.ones((size, 1))], [np.ones((1, size)), np.zeros((1, 1))]])
                    rhs = np.r_[np.zeros(size), 1.0]
                    sol = np.linalg.lstsq(kkt, rhs, rcond=None)[0]
                    lam = sol[:size]
                    if (lam >= -1e-12).all() and np.allclose(kkt @ sol, rhs, atol=1e-9):
                        want = min(want, float(lam @ kt @ lam))
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


def test_subset_value_is_the_smallest_enclosing_cone():
    """θ_S = min_c max_{i∈S} 1/(c·u_i)^2: maximise t subject to c·u_i ≥ t and |c| ≤ 1 (SLSQP)."""
    from scipy.optimize import minimize

    g = nx.cycle_graph(7)
    t, k, _ = lovasz_representation(7, np.array(list(g.edges())))
    w, v = np.linalg.eigh(k)
    u = (v * np.sqrt(np.clip(w, 0, None))).T  # columns: vectors u_i, u_i·u_j = K_ij
    kernel = LovaszThetaKernel()
    for subset in ([0, 1], [0, 2], [0, 2, 4], [1, 2, 3, 5], list(range(7))):
        s = np.array(subset)
        ours = kernel._subset_values(k, s[None])[0]
        c0 = u[:, s].mean(axis=1)
        x0 = np.append(c0 / np.linalg.norm(c0), 0.0)
        us = u[:, s]
        cons = [{"type": "ineq", "fun": lambda x, us=us: x[:-1] @ us - x[-1]},
                {"type": "ineq", "fun": lambda x: 1.0 - x[:-1] @ x[:-1]}]
        res = minimize(lambda x: -x[-1], x0, constraints=cons, method="SLSQP",
                       options={"ftol": 1e-14, "maxiter": 1000})
        assert res.success
        assert ours == pytest.approx(1.0 / res.x[-1] ** 2, rel=1e-6)
        assert ours <= t * (1 + 1e-7)


# --------------------------------------------------------------------------- the sampled kernel
def test_sampled_features_are_within_their_error_of_the_exhaustive_means():
    """Linear base kernel: the feature of size d is the mean θ_S over sampled S (independent
    uniform d-subsets); against the mean over all C(n, d) subsets, within 4 standard errors.
    (The representation is one optimum of the SDP among many: the same canonical edge list
    gives the same one.)"""
    g = nx.gnp_random_graph(9, 0.35, seed=5)
    graphs = batch(g)
    kernel = LovaszThetaKernel(n_samples=400, subset_sizes=[2, 4])
    state = kernel.fit(graphs, seed=3)
    emb = kernel.embed(graphs, state)
    t, k, _ = lovasz_representation(9, simple_edges(graphs, 0))
    plan = samples_per_size(9, 2, 4, 400)
    for d in (2, 3, 4):
        allsub = np.array(list(itertools.combinations(range(9), d)))
        vals = kernel._subset_values(k, allsub)
        exact, sd = vals.mean(), vals.std()
        key_row = emb.row(0)
        from gramdist.kernels.hashing import combine, tag

        got = key_row[1][np.searchsorted(key_row[0], combine(tag("theta.size"), d))]
        s = plan[d]
        assert sd > 0 and abs(got - exact) <= 4 * sd / np.sqrt(s)


def test_samples_are_spread_like_grakel():
    pytest.importorskip("grakel")
    from grakel.tools import distribute_samples

    for n in (2, 5, 9, 30, 300):  # (GraKeL divides by zero for n = 1; we give it no sample)
        assert samples_per_size(n, 2, 8, 50) == {int(k): int(v) for k, v in distribute_samples(n, (2, 8), 50).items()}


def test_determinism_tiles_and_psd(mutag):
    graphs = mutag[:24]
    kernel = LovaszThetaKernel(n_samples=20)
    state = kernel.fit(graphs, seed=11)
    a = gram_by_tiles(kernel, state, graphs, 24)
    assert np.array_equal(a, gram_by_tiles(kernel, kernel.fit(graphs, seed=11), graphs, 7))
    assert not np.array_equal(a, gram_by_tiles(kernel, kernel.fit(graphs, seed=12), graphs, 24))
    assert min_eigenvalue_ratio(a) >= -1e-10
    rbf = LovaszThetaKernel(n_samples=20, base_kernel="rbf", gamma=0.5)
    st = rbf.fit(graphs, 11)
    b = gram_by_tiles(rbf, st, graphs, 24)
    assert np.array_equal(b, gram_by_tiles(rbf, st, graphs, 5)) and min_eigenvalue_ratio(b) >= -1e-10
    assert not rbf.has_feature_vectors and kernel.has_feature_vectors


def test_fit_then_embed_new_graphs(mutag):
    kernel = LovaszThetaKernel(n_samples=15)
    state = kernel.fit(mutag[:20], seed=2)
    full = gram_by_tiles(kernel, state, mutag[:30], 8)
    block = kernel.pairwise(kernel.embed(mutag[20:30], state), kernel.embed(mutag[:20], state), state)
    assert np.array_equal(block, full[20:, :20])


def test_small_graphs_and_limits():
    graphs = batch(nx.empty_graph(1), nx.path_graph(3))
    kernel = LovaszThetaKernel()
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1)
    assert k[0].tolist() == [0.0, 0.0] and np.isfinite(k).all() and k[1, 1] > 0
    with pytest.raises(JobError, match="max_nodes=5"):
        big = batch(nx.path_graph(6))
        LovaszThetaKernel(max_nodes=5).embed(big, LovaszThetaKernel().fit(big, 0))


@pytest.mark.parametrize("params", [{"n_samples": 0}, {"subset_sizes": [3, 2]}, {"subset_sizes": [2, 11]},
                                    {"base_kernel": "poly"}, {"gamma": 0}, {"sdp_tol": 2}, {"max_nodes": 0}])
def test_invalid_parameters(params):
    with pytest.raises(JobError, match="kernel lovasz_theta: parameter"):
        make_kernel("lovasz_theta", **params)


def test_engine_and_job_file(tmp_path, mutag, dataset_dir):
    import gramdist

    kernel = LovaszThetaKernel(n_samples=10)
    k = gramdist.compute_gram(mutag[:20], kernel="lovasz_theta", n_samples=10, seed=5)
    assert np.array_equal(k, gram_by_tiles(kernel, kernel.fit(mutag[:20], 5), mutag[:20], 20))
    dataset_dir("MUTAG")
    out = tmp_path / "lt.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-lovasz_theta.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--set", "kernel.n_samples=5", "--set", "dataset.limit=40",
                        "--json"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]


def test_theta_is_invariant_to_node_order(mutag):
    rng = np.random.default_rng(1)
    kernel = LovaszThetaKernel()
    for i in range(4):
        g = mutag[i]
        perm = rng.permutation(g.n_nodes)
        p = GraphBatch.from_graphs([np.argsort(perm)[g.edges]], [g.n_nodes])
        assert kernel.theta(p)[0] == pytest.approx(kernel.theta(mutag[i:i + 1])[0], rel=1e-7)
