"""SVM-θ kernel: the one-class SVM against libsvm and cvxopt, hand-worked values, the sampled
kernel against its expectation, GraKeL's non-finite Gram, determinism, tiles, the engine."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.theta import solvers
from gramdist.kernels.theta.kernel import SvmThetaKernel, samples_per_size, simple_edge_lists, simple_edges
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


def batch(*graphs: nx.Graph) -> GraphBatch:
    return GraphBatch.from_graphs([np.array(list(g.edges()), dtype=np.int64).reshape(-1, 2) for g in graphs],
                                  [g.number_of_nodes() for g in graphs])


def k_matrix(g, margin: float = 1e-3) -> np.ndarray:
    a = np.zeros((g.n_nodes, g.n_nodes))
    a[g.edges[:, 0], g.edges[:, 1]] = a[g.edges[:, 1], g.edges[:, 0]] = 1
    np.fill_diagonal(a, 0)
    lam = np.linalg.eigvalsh(a)[0]
    return a / (-lam * (1 + margin)) + np.eye(len(a)) if lam < 0 else np.eye(len(a))


def feature(emb, d: int) -> float:
    keys, vals = emb.row(0)
    pos = np.searchsorted(keys, combine(tag("theta.size"), d))
    return float(vals[pos]) if pos < len(keys) and keys[pos] == combine(tag("theta.size"), d) else 0.0


# --------------------------------------------------------------------------- the one-class SVM
def test_alphas_match_libsvm_with_nu_one_over_n(mutag):
    """ω(K) = 1/min_{β∈Δ} βᵀKβ and α = β/(βᵀKβ); libsvm's one-class SVM with ν = 1/n solves
    exactly that simplex problem (its box α ≤ 1 cannot bind when Σα = 1)."""
    from sklearn.svm import OneClassSVM

    kernel = SvmThetaKernel()
    for i in range(0, 60, 6):
        g = mutag[i]
        k = k_matrix(g)
        svm = OneClassSVM(kernel="precomputed", nu=1.0 / g.n_nodes, tol=1e-12).fit(k)
        beta = np.zeros(g.n_nodes)
        beta[svm.support_] = svm.dual_coef_[0]
        ref = beta / (beta @ k @ beta)
        ours = kernel.alphas(g.n_nodes, simple_edges(mutag[i:i + 1], 0))
        assert np.allclose(ours, ref, rtol=1e-5, atol=1e-7)  # libsvm stops at a gradient tolerance
        assert ours.sum() == pytest.approx(2 * ours.sum() - ours @ k @ ours, rel=1e-12)  # ω = Σα at the optimum


def test_alphas_match_cvxopt_qp():
    cvxopt = pytest.importorskip("cvxopt")
    from cvxopt import matrix
    from cvxopt import solvers as cs

    rng = np.random.default_rng(0)
    for trial in range(8):
        n = int(rng.integers(3, 30))
        g = batch(nx.gnp_random_graph(n, float(rng.uniform(0.05, 0.5)), seed=trial))
        k = k_matrix(g[0])
        sol = cs.qp(matrix(2 * k), matrix(-2 * np.ones(n)), matrix(-np.eye(n)), matrix(np.zeros(n)),
                    options={"show_progress": False, "abstol": 1e-13, "reltol": 1e-13, "feastol": 1e-13})
        ours = SvmThetaKernel().alphas(n, simple_edges(g, 0))
        assert np.allclose(ours, np.array(sol["x"]).ravel(), atol=1e-6)
    assert cvxopt


def test_stacked_solver_matches_one_matrix_at_a_time():
    """one_class_svm_stack against one_class_svm on random positive definite matrices: ill
    conditioned enough (n = 30, ridge 1e-3) that Murty's single-swap backup runs too. Each row
    satisfies the KKT conditions, and a matrix's α are the same bits alone and in the stack."""
    rng = np.random.default_rng(3)
    for n, ridge in [(12, 0.05), (30, 1e-3)]:
        m = rng.normal(size=(300, n, n))
        k = m @ m.transpose(0, 2, 1) + ridge * np.eye(n)
        stacked = solvers.one_class_svm_stack(k)
        single = np.array([solvers.one_class_svm(x) for x in k])
        assert np.allclose(stacked, single, rtol=1e-9, atol=1e-9 * np.abs(single).max())
        grad = np.einsum("bij,bj->bi", k, stacked) - 1.0
        assert (stacked >= 0).all() and (grad >= -1e-8).all()
        assert np.abs(np.einsum("bi,bi->b", stacked, grad)).max() < 1e-7
        for i in (0, 17, 299):
            assert np.array_equal(solvers.one_class_svm_stack(k[i:i + 1])[0], stacked[i])
    assert solvers.one_class_svm_stack(np.zeros((0, 4, 4))).shape == (0, 4)


def test_stacked_alphas_match_graph_by_graph():
    """alphas_stack (the embedding's path for graphs of up to DENSE_MAX nodes) against alphas
    per graph: random graphs of one size, with an edgeless one and a single edge among them."""
    rng = np.random.default_rng(5)
    kernel = SvmThetaKernel()
    for n in (2, 9, 40):
        graphs = [nx.gnp_random_graph(n, float(rng.uniform(0.05, 0.6)), seed=int(rng.integers(1 << 30)))
                  for _ in range(25)]
        graphs += [nx.empty_graph(n), nx.Graph([(0, 1)])]
        graphs[-1].add_nodes_from(range(n))
        edges = [np.array(sorted(g.edges()), dtype=np.int64).reshape(-1, 2) for g in graphs]
        stacked = kernel.alphas_stack(n, edges)
        for e, row in zip(edges, stacked):
            assert np.allclose(row, kernel.alphas(n, e), rtol=1e-11, atol=1e-13)
        assert stacked[-2].tolist() == [1.0] * n


def test_sparse_solver_path_agrees_with_the_dense_one(monkeypatch):
    g = nx.gnm_random_graph(90, 200, seed=2)
    edges = np.array(list(g.edges()))
    dense = SvmThetaKernel().alphas(90, edges)  # eigvalsh and LAPACK in a stack of one
    monkeypatch.setattr(solvers, "DENSE_MAX", 50)  # Lanczos for λ_min, SuperLU for the QP
    sparse = SvmThetaKernel().alphas(90, edges)
    assert np.allclose(dense, sparse, rtol=1e-8, atol=1e-12)
    assert sp.issparse(solvers.svm_theta_matrix(nx.to_scipy_sparse_array(g, format="csr"), 1e-3))


@pytest.mark.parametrize("n, m", [(150, 400), (700, 1600)])
def test_the_three_passive_solvers_give_the_same_alphas(monkeypatch, n, m):
    """one_class_svm on one K = A/ρ + I three ways: LAPACK on dense K_FF at each step, one
    SuperLU factorisation of K and K⁻¹'s columns (the capacitance form), SuperLU of K_FF at
    each step. The same α to rounding, and the KKT conditions hold."""
    g = nx.gnm_random_graph(n, m, seed=n)
    k = solvers.svm_theta_matrix(nx.to_scipy_sparse_array(g, format="csr", dtype=np.float64), 1e-3)
    dense = solvers.one_class_svm(k.toarray())
    capacitance = solvers.one_class_svm(k)
    monkeypatch.setattr(solvers, "CAPACITANCE_MAX", 10)
    refactored = solvers.one_class_svm(k)
    for alpha in (capacitance, refactored):
        assert np.allclose(alpha, dense, rtol=1e-9, atol=1e-12)
    grad = k @ capacitance - 1.0
    assert (capacitance >= 0).all() and (grad >= -1e-8).all() and abs(capacitance @ grad) < 1e-8
    assert 0 < (capacitance == 0).sum() < n  # the pivoting moved indices out of the passive set


def test_sparse_alphas_have_the_same_bits_alone_and_in_a_batch():
    """alphas_sparse (one Lanczos run for all of a chunk's large graphs) against one graph at a
    time: a graph's α do not depend on the others in its chunk."""
    rng = np.random.default_rng(11)
    graphs = [nx.gnm_random_graph(int(n), int(2.2 * n), seed=int(rng.integers(1 << 30))) for n in (120, 260, 180, 400)]
    graphs.insert(2, nx.empty_graph(130))
    kernel = SvmThetaKernel()
    sizes = [g.number_of_nodes() for g in graphs]
    edges = [np.array(sorted(g.edges()), dtype=np.int64).reshape(-1, 2) for g in graphs]
    together = kernel.alphas_sparse(sizes, edges)
    for n, e, row in zip(sizes, edges, together):
        assert np.array_equal(kernel.alphas(n, e), row)
    assert together[2].tolist() == [1.0] * 130


def test_hand_worked_values():
    # no edges: K = I, α = 1, a subset of size d sums to d; n = 3 gives sizes 2 and 3 (both
    # sampled), so K(G, G) = 2^2 + 3^2 = 13 exactly.
    kernel = SvmThetaKernel()
    graphs = batch(nx.empty_graph(3), nx.complete_graph(3), nx.path_graph(2))
    assert kernel.alphas(3, np.zeros((0, 2), np.int64)).tolist() == [1.0, 1.0, 1.0]
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 3)
    assert k[0, 0] == 13.0
    # K_3: λ_min(A) = -1, K = J/ρ + (1 - 1/ρ) I with ρ = 1.001: α_i = 1/(1 + 2/ρ), Σα ≈ θ(K_3) = 1
    alpha = kernel.alphas(3, simple_edges(graphs, 1))
    assert np.allclose(alpha, 1 / (1 + 2 / 1.001), rtol=1e-12)
    # K_2 with the margin: a unique, symmetric α (without it any α_1 + α_2 = 1 is optimal)
    a2 = kernel.alphas(2, simple_edges(graphs, 2))
    assert a2[0] == pytest.approx(a2[1], rel=1e-13) and a2.sum() == pytest.approx(2 / (1 + 1 / 1.001))


def test_sampled_features_are_within_their_error_of_the_expectation():
    """E[Σ_{i∈S} α_i] over uniform d-subsets is d·mean(α); the per-size means of 600 samples
    are within 4 standard errors of it."""
    g = nx.gnp_random_graph(14, 0.3, seed=7)
    graphs = batch(g)
    kernel = SvmThetaKernel(n_samples=600, subset_sizes=[2, 5])
    emb = kernel.embed(graphs, kernel.fit(graphs, seed=1))
    alpha = kernel.alphas(14, simple_edges(graphs, 0))
    plan = samples_per_size(14, 2, 5, 600)
    for d in range(2, 6):
        var = d * alpha.var() * (14 - d) / 13  # variance of a d-subset sum without replacement
        assert abs(feature(emb, d) - d * alpha.mean()) <= 4 * np.sqrt(var / plan[d])


# --------------------------------------------------------------------------- GraKeL
def test_grakel_gram_is_not_finite_where_ours_is(dataset_dir):
    """GraKeL's SvmTheta compares graphs with ``np.inner(x, y)[0, 0]`` of its (7, 1) feature
    columns: only the size-2 feature, which gets no sample once C(n, 2) is a small share of the
    subsets (n >= 12 or so): the diagonal is 0 and normalize=True divides 0 by 0."""
    pytest.importorskip("grakel")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import grakel_labelled_graphs
    from grakel.kernels import SvmTheta

    from gramdist import compute_gram
    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir("NCI1"))[:40]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = SvmTheta(normalize=True, random_state=0).fit_transform(grakel_labelled_graphs(graphs))
    assert not np.isfinite(theirs).all()
    ours = compute_gram(graphs, kernel="svm_theta", normalize=True)
    assert np.isfinite(ours).all() and np.allclose(np.diag(ours), 1.0)


# --------------------------------------------------------------------------- contract
@pytest.mark.parametrize("base", ["linear", "rbf"])
def test_determinism_tiles_and_psd(mutag, base):
    graphs = mutag[:50]
    kernel = SvmThetaKernel(base_kernel=base)
    state = kernel.fit(graphs, seed=3)
    a = gram_by_tiles(kernel, state, graphs, 50)
    assert np.array_equal(a, gram_by_tiles(kernel, state, graphs, 7))
    assert np.array_equal(a, gram_by_tiles(kernel, kernel.fit(graphs, seed=3), graphs, 1))
    assert not np.array_equal(a, gram_by_tiles(kernel, kernel.fit(graphs, seed=4), graphs, 50))
    assert min_eigenvalue_ratio(a) >= -1e-10


def test_a_graph_gets_the_same_embedding_in_any_chunk(mutag):
    """Every graph of a chunk, embedded alone: the same bits (MUTAG's graphs share node counts,
    so the chunk's stacks of equal-size graphs hold several of them)."""
    kernel = SvmThetaKernel(base_kernel="rbf")
    state = kernel.fit(mutag, 0)
    whole = kernel.embed(mutag[:60], state)
    assert len(set(mutag.nodes_per_graph[:60].tolist())) < 40
    for i in range(60):
        alone = kernel.embed(mutag[i:i + 1], state)
        assert np.array_equal(whole[i:i + 1].values, alone.values, equal_nan=True)


def test_fit_then_transform_rows(mutag):
    from gramdist import GramTransformer, compute_gram

    full = compute_gram(mutag[:40], kernel="svm_theta", seed=2)
    t = GramTransformer(kernel="svm_theta", seed=2).fit(mutag[:30])
    assert np.array_equal(t.transform(mutag[30:40]), full[30:40, :30])


@pytest.mark.parametrize("params", [{"n_samples": 0}, {"subset_sizes": [0, 3]}, {"subset_sizes": [2]},
                                    {"base_kernel": "cosine"}, {"gamma": -1.0}, {"rho_margin": 0}])
def test_invalid_parameters(params):
    with pytest.raises(JobError, match="kernel svm_theta: parameter"):
        make_kernel("svm_theta", **params)


def test_job_file_runs(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    out = tmp_path / "st.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-svm_theta.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--json"], capture_output=True, text=True, cwd=ROOT,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]


def test_alphas_follow_a_node_permutation(mutag):
    """α is unique (K positive definite), so permuting the nodes permutes α; the sampled subsets
    follow node indices, so the kernel itself is permutation invariant in distribution only."""
    rng = np.random.default_rng(4)
    kernel = SvmThetaKernel()
    for i in range(5):
        g = mutag[i]
        perm = rng.permutation(g.n_nodes)
        p = GraphBatch.from_graphs([np.argsort(perm)[g.edges]], [g.n_nodes])
        a = kernel.alphas(g.n_nodes, simple_edges(mutag[i:i + 1], 0))
        b = kernel.alphas(g.n_nodes, simple_edges(p, 0))
        assert np.allclose(b, a[perm], rtol=1e-10, atol=1e-13)


def test_simple_edge_lists_match_simple_edges_graph_by_graph(mutag):
    """The batched edge lists (one sort) equal the per-graph ``simple_edges``: self-loops and
    repeated or reversed edges dropped, pairs lo < hi in sorted order, empty graphs empty."""
    odd = GraphBatch(node_offsets=np.array([0, 3, 3, 5]), edge_offsets=np.array([0, 6, 6, 8]),
                     edges=np.array([[0, 1], [1, 0], [2, 2], [2, 1], [1, 2], [0, 0], [1, 0], [0, 1]]))
    for batch in (mutag, mutag[7:40], odd):
        offsets, pairs = simple_edge_lists(batch)
        assert len(offsets) == len(batch) + 1
        for g in range(len(batch)):
            expected = simple_edges(batch, g)
            got = pairs[offsets[g]:offsets[g + 1]]
            assert got.dtype == expected.dtype and np.array_equal(got, expected), g
    offsets, pairs = simple_edge_lists(odd)
    assert pairs[offsets[0]:offsets[1]].tolist() == [[0, 1], [1, 2]] and offsets[1] == offsets[2]
    assert pairs[offsets[2]:offsets[3]].tolist() == [[0, 1]]


def test_batched_subset_sums_equal_the_per_graph_ones(mutag, monkeypatch):
    """SvmThetaKernel._size_values (all subsets of one size at once, on the packed α) against
    the per-graph _subset_values that the base class loops over: the same bits."""
    from gramdist.kernels.theta.kernel import _ThetaKernel

    kernel = SvmThetaKernel(base_kernel="rbf")
    state = kernel.fit(mutag, 0)
    batched = kernel.embed(mutag[:80], state)
    monkeypatch.setattr(SvmThetaKernel, "_packed", _ThetaKernel._packed)
    monkeypatch.setattr(SvmThetaKernel, "_size_values", _ThetaKernel._size_values)
    looped = kernel.embed(mutag[:80], state)
    assert np.array_equal(batched.values, looped.values, equal_nan=True)
    assert np.array_equal(batched.counts, looped.counts)


def test_sampled_subsets_follow_the_documented_draw(mutag):
    """The subsets, written out graph by graph as the module docstring defines them: a
    generator seeded by the fit's seed and the graph's hash, one argsort of uniforms for all the
    sizes' rows (in increasing size, :func:`samples_per_size` of each), the first d of each row
    sorted, the value the sum of α over it in index order. The chunk's vectorised draw must
    give these bits, and the NaN padding and counts around them."""
    from gramdist.kernels.theta.kernel import graph_hashes

    seed = (7 << 32) | 5
    kernel = SvmThetaKernel(base_kernel="rbf", subset_sizes=[3, 9], n_samples=40)
    graphs = mutag[:50]
    emb = kernel.embed(graphs, kernel.fit(graphs, seed))
    offsets, pairs = simple_edge_lists(graphs)
    expected = np.full((len(graphs), 7, 40), np.nan)
    counts = np.zeros((len(graphs), 7), dtype=np.int64)
    for g, h in enumerate(graph_hashes(graphs).tolist()):
        n = int(graphs.nodes_per_graph[g])
        plan = samples_per_size(n, 3, 9, 40)
        rng = np.random.default_rng([5, 7, h & 0xFFFFFFFF, h >> 32])
        order = np.argsort(rng.random((sum(plan.values()), n)), axis=1)
        alpha = kernel.alphas(n, pairs[offsets[g]:offsets[g + 1]])
        row = 0
        for d in sorted(plan):
            for k in range(plan[d]):
                value = 0.0
                for node in np.sort(order[row, :d]):
                    value += alpha[node]
                expected[g, d - 3, k] = value
                row += 1
            counts[g, d - 3] = plan[d]
    assert np.array_equal(emb.counts, counts)
    assert np.array_equal(emb.values, expected, equal_nan=True)
