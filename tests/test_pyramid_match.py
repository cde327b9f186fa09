"""Pyramid match kernel: brute force, a hand-worked example, GraKeL's documented relation,
explicit features, invariances, the engine."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.pyramid.kernel import PyramidMatchKernel, level_exponent, scale_exponent
from gramdist.kernels.pyramid.spectral import spectral_embedding
from gramdist.kernels.sparse import dot
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- reference
def adjacency(g) -> np.ndarray:
    a = np.zeros((g.n_nodes, g.n_nodes))
    a[g.edges[:, 0], g.edges[:, 1]] = 1
    a[g.edges[:, 1], g.edges[:, 0]] = 1
    return a


def brute_embedding(g, d: int) -> np.ndarray:
    """|eigenvectors| of the d largest |eigenvalues| (ties: positive first), by decreasing eigenvalue."""
    w, v = np.linalg.eigh(adjacency(g))
    scale = max(np.abs(w).max(), 1.0)
    idx = sorted(range(len(w)), key=lambda i: (-round(abs(w[i]) / scale * 1e9), -w[i]))[:d]
    idx = sorted(idx, key=lambda i: -w[i])
    return np.round(np.clip(np.abs(v[:, idx]), 0, 1) / 2.0**-32) * 2.0**-32


def histograms(u: np.ndarray, labels, levels: int) -> list[dict]:
    out = []
    for lev in range(levels + 1):
        k, h = 2**lev, {}
        for p in range(u.shape[0]):
            for q in range(u.shape[1]):
                cell = (labels[p], q, min(int(np.floor(u[p, q] * k)), k - 1))
                h[cell] = h.get(cell, 0) + 1
        out.append(h)
    return out


def level_intersections(hists: list[list[dict]]) -> np.ndarray:
    """(n, n, L+1) histogram intersections per level."""
    n, levels = len(hists), len(hists[0])
    out = np.zeros((n, n, levels))
    for lev in range(levels):
        cells = sorted({key for h in hists for key in h[lev]})
        col = {key: c for c, key in enumerate(cells)}
        dense = np.zeros((n, len(cells)))
        for i, h in enumerate(hists):
            for key, c in h[lev].items():
                dense[i, col[key]] = c
        for i in range(n):
            out[i, :, lev] = np.minimum(dense[i], dense).sum(axis=1)
    return out


def paper_formula(inter: np.ndarray) -> np.ndarray:
    L = inter.shape[-1] - 1
    return inter[..., L] + sum(2.0 ** -(L - q) * (inter[..., q] - inter[..., q + 1]) for q in range(L))


def grakel_formula(inter: np.ndarray) -> np.ndarray:
    """GraKeL's value: its weighted sum runs inside its loop over levels (see the kernel docstring)."""
    L = inter.shape[-1] - 1
    w = [2.0 ** -(L - q) for q in range(L + 1)]
    extra = sum(sum(w[q] * (inter[..., q] - inter[..., q + 1]) for q in range(p)) + w[p] * inter[..., p]
                for p in range(L))
    return paper_formula(inter) + extra


def brute_kernel(graphs: GraphBatch, L: int, d: int, labels: bool) -> np.ndarray:
    hists = [histograms(brute_embedding(g, d), list(g.node_labels) if labels else [0] * g.n_nodes, L)
             for g in graphs]
    return paper_formula(level_intersections(hists))


def random_graphs(n: int, seed: int, max_nodes: int = 12) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        e = rng.integers(0, k, size=(int(rng.integers(0, 2 * k)), 2))
        edges.append(e[e[:, 0] != e[:, 1]])
        sizes.append(k)
        labels.append(rng.integers(0, 3, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


# --------------------------------------------------------------------------- brute force
@pytest.mark.parametrize("L,d,labels", [(0, 3, False), (2, 4, True), (4, 6, True), (3, 6, False)])
def test_matches_brute_force_on_random_graphs(L, d, labels):
    graphs = random_graphs(20, seed=L + d)
    kernel = PyramidMatchKernel(L=L, d=d, labels=labels)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 6)
    assert np.array_equal(k, brute_kernel(graphs, L, d, labels))


def test_matches_brute_force_on_mutag(mutag):
    graphs = mutag[:60]
    kernel = PyramidMatchKernel(L=4, d=6, labels=True)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 25), brute_kernel(graphs, 4, 6, True))


def test_hand_worked_example():
    # d = 2, L = 2, no labels. K2: both eigenvectors have |components| 1/sqrt2 -> 2 points at
    # (.707, .707). Star S3 (centre 0): eigenvalues +-sqrt3 carry |components| 1/sqrt2 (centre)
    # and 1/sqrt6 = .408 (leaves) -> centre (.707, .707), 3 leaves (.408, .408).
    # Per dimension: level 0 I = min(2, 4) = 2; level 1 (cells of 1/2): K2 in cell 1, S3 has
    # 1 point there -> I = 1; level 2 (cells of 1/4): .707 -> cell 2, .408 -> cell 1 -> I = 1.
    # Two dimensions: I = (4, 2, 2), k = I2 + (I1 - I2)/2 + (I0 - I1)/4 = 2 + 0 + 0.5 = 2.5.
    graphs = GraphBatch.from_graphs([np.array([[0, 1]]), np.array([[0, 1], [0, 2], [0, 3]])], [2, 4])
    kernel = PyramidMatchKernel(L=2, d=2, labels=False)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1)
    assert k.tolist() == [[4.0, 2.5], [2.5, 8.0]]


def test_graphs_smaller_than_d_match_only_in_their_dimensions():
    graphs = GraphBatch.from_graphs([np.zeros((0, 2)), np.array([[0, 1], [1, 2]])], [1, 3])
    u = spectral_embedding(graphs, 4)
    assert np.isnan(u[0, 1:]).all() and not np.isnan(u[0, 0]) and np.isnan(u[1:, 3]).all()
    kernel = PyramidMatchKernel(L=1, d=4, labels=False)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k[0, 0] == 1.0 and k[1, 1] == 9.0  # 1 point in 1 dimension; 3 points in 3


def test_large_graphs_use_arpack_with_the_same_bins():
    rng = np.random.default_rng(0)
    e = rng.integers(0, 60, size=(150, 2))
    graphs = GraphBatch.from_graphs([e[e[:, 0] != e[:, 1]]], [60])
    dense = spectral_embedding(graphs, 6)
    sparse = spectral_embedding(graphs, 6, dense_max=10)
    assert np.allclose(dense, sparse, atol=1e-9)
    for lev in range(6):
        assert np.array_equal(np.floor(dense * 2**lev), np.floor(sparse * 2**lev))


def test_both_eigensolvers_run_with_one_blas_thread(monkeypatch):
    """ARPACK's Ritz vectors cost 2-3 times the CPU under OpenBLAS's own threads (spectral.py):
    the dense and the ARPACK path both run with one BLAS thread, whatever the caller's limit."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import gramdist.kernels.pyramid.spectral as spectral

    seen = []

    def blas_threads() -> list[int]:
        return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]

    def recording(solver):
        def call(*args, **kwargs):
            seen.append(blas_threads())
            return solver(*args, **kwargs)
        return call

    monkeypatch.setattr(spectral, "eigsh", recording(spectral.eigsh))
    monkeypatch.setattr(spectral.np.linalg, "eigh", recording(np.linalg.eigh))
    rng = np.random.default_rng(1)
    big, small = rng.integers(0, 40, size=(100, 2)), rng.integers(0, 8, size=(12, 2))
    graphs = GraphBatch.from_graphs([big[big[:, 0] != big[:, 1]], small[small[:, 0] != small[:, 1]]], [40, 8])
    with threadpool_limits(2, user_api="blas"):
        if not blas_threads() or max(blas_threads()) < 2:
            pytest.skip("this NumPy's BLAS cannot run two threads here")
        spectral_embedding(graphs, 6, dense_max=10)
    assert len(seen) == 2 and all(n == [1] * len(n) for n in seen)


def test_only_chunks_for_arpack_go_to_forked_workers():
    # ARPACK's loop holds the GIL; batched dense eigh does not, and stays in the threads
    from gramdist.kernels.pyramid.spectral import DENSE_MAX

    k = PyramidMatchKernel()
    small = random_graphs(5, 0)
    ring = np.stack([np.arange(DENSE_MAX + 1), np.roll(np.arange(DENSE_MAX + 1), 1)], axis=1)
    big = GraphBatch.concat([small, GraphBatch.from_graphs([ring], [DENSE_MAX + 1],
                                                        node_labels=[np.zeros(DENSE_MAX + 1, dtype=int)])])
    assert k.embeds_in_processes
    assert not k.embeds_in_worker_process(small)
    assert k.embeds_in_worker_process(big)
    assert not k.embeds_in_worker_process(small[0:0])


# --------------------------------------------------------------------------- GraKeL
def _grakel_embedding(g, d: int) -> np.ndarray:
    """GraKeL's PyramidMatch embedding, as its parse_input computes it."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import eigs

    a = adjacency(g)
    if a.shape[0] > d + 1:
        lam, u = eigs(csr_matrix(a), k=d, ncv=10 * d)
        u = u[:, lam.argsort()[::-1]]
    else:
        lam, u = np.linalg.eig(a)
        u = u[:, lam.argsort()[::-1]][:, :d]
    return np.absolute(u)


@pytest.mark.parametrize("name,count", [("MUTAG", 80), ("PTC_MR", 120), ("ENZYMES", 80)])
@pytest.mark.parametrize("labels", [False, True])
def test_grakel_relation(dataset_dir, name, count, labels):
    """GraKeL's PyramidMatch(L = ours + 1) equals the paper's formula plus its in-loop partial
    sums (``grakel_formula``), exactly, on every pair of graphs that GraKeL embeds into the
    same histograms as we do. The others: eigenvalues of multiplicity > 1 (a basis choice),
    GraKeL's small-graph branch (n <= d+1: algebraic instead of magnitude order), and above
    all components that are exactly on a bin boundary (1/2 is common in molecules), which
    GraKeL bins by ARPACK's last bits and we by the exact value (snapped to 2^-32): GraKeL's
    own eigenvectors, snapped, give our histograms on every graph with a simple spectrum."""
    pytest.importorskip("grakel")
    from grakel.kernels import PyramidMatch

    from gramdist.datasets import read_tu

    L, d = 3, 6
    graphs = read_tu(dataset_dir(name))[:count]
    ours_h, same = [], []
    for g in graphs:
        lab = list(g.node_labels) if labels else [0] * g.n_nodes
        ours_h.append(histograms(brute_embedding(g, d), lab, L))
        raw = _grakel_embedding(g, d)
        # ARPACK starts from a random vector: a component within 1e-8 of a bin boundary may
        # fall either side in GraKeL's own call, so such graphs are not compared
        scaled = raw[:, :, None] * 2.0 ** np.arange(1, L + 1)
        fragile = np.any((np.abs(scaled - np.round(scaled)) < 1e-8) & (np.round(scaled) > 0)
                         & (np.round(scaled) < 2.0 ** np.arange(1, L + 1)))
        # nor graphs with a repeated eigenvalue among the selected: ARPACK's basis of its
        # eigenspace changes from call to call
        w = np.linalg.eigvalsh(adjacency(g))
        top = w[np.argsort(-np.abs(w), kind="stable")[:d]]
        repeated = any(np.sum(np.abs(w - x) < 1e-6) > 1 for x in top)
        same.append(histograms(raw, lab, L) == ours_h[-1] and not fragile and not repeated)
        w = np.sort(np.linalg.eigvalsh(adjacency(g)))
        if g.n_nodes > d + 1 and np.min(np.diff(w)) > 1e-6:
            snapped = np.round(raw / 2.0**-32) * 2.0**-32
            assert histograms(snapped, lab, L) == ours_h[-1]
    same = np.array(same)
    assert same.mean() > 0.4  # first 120 graphs: MUTAG 97 %, ENZYMES 92 %, PTC_MR 52 % (small graphs, boundaries)
    inter = level_intersections(ours_h)
    kernel = PyramidMatchKernel(L=L, d=d, labels=labels)
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 64)
    assert np.array_equal(ours, paper_formula(inter))
    x = [[adjacency(g), {i: int(v) for i, v in enumerate(g.node_labels)}] if labels else [adjacency(g)]
         for g in graphs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = PyramidMatch(L=L + 1, d=d, with_labels=labels).fit_transform(x)
    ok = np.ix_(same, same)
    assert np.allclose(theirs[ok], grakel_formula(inter)[ok], rtol=1e-12, atol=0)
    assert not np.allclose(theirs[ok], ours[ok])  # GraKeL's extra terms are not rounding


# --------------------------------------------------------------------------- contract
@pytest.mark.parametrize("L", [3, 4])
def test_feature_vectors_give_the_gram_bit_for_bit(mutag, L):
    kernel = PyramidMatchKernel(L=L, d=6)
    state = kernel.fit(mutag, 0)
    emb = kernel.embed(mutag[:50], state)
    fv = kernel.feature_vectors(emb, state)
    assert kernel.has_feature_vectors
    gram = kernel.pairwise(emb, emb, state)
    assert np.array_equal(dot(fv, fv), gram)
    assert np.array_equal(kernel.self_similarity(emb, state), np.diag(gram))
    assert np.all(np.diff(fv.keys[fv.indptr[0]:fv.indptr[1]]) > 0)
    # the explicit features of a block are its rows of the whole embedding's
    part = kernel.feature_vectors(emb[10:20], state)
    assert np.array_equal(part.keys, fv[10:20].keys) and np.array_equal(part.values, fv[10:20].values)


@pytest.mark.parametrize(("L", "per_node"), [(0, 1), (1, 4), (2, 4), (3, 7), (4, 7), (5, 10)])
def test_features_per_node_and_dimension(mutag, L, per_node):
    """One unary feature where c_l · 2^S is an even power of two, two where odd (module
    docstring): at L = 4, e = 2, 2, 3, 4, 5. The embedding holds one count per cell instead."""
    graphs = mutag[:20]
    kernel = PyramidMatchKernel(L=L, d=6)
    state = kernel.fit(graphs, 0)
    emb = kernel.embed(graphs, state)
    assert all(graphs.nodes_per_graph >= 6)
    assert kernel.feature_vectors(emb, state).indptr[-1] == graphs.n_nodes * 6 * per_node
    assert sum(1 + level_exponent(level, L) % 2 for level in range(L + 1)) == per_node
    assert scale_exponent(L) % 2 == 0
    # counts: every node in one cell per dimension and level, each count times 2^e
    level = (emb.keys & 31).astype(np.int64)
    exps = np.array([level_exponent(q, L) for q in range(L + 1)])
    assert np.bincount(level, weights=emb.values / 2.0 ** exps[level]).tolist() == [graphs.n_nodes * 6] * (L + 1)
    assert emb.nnz < graphs.n_nodes * 6 * (L + 1)


def test_tile_size_invariance_and_psd(mutag):
    kernel = PyramidMatchKernel()
    state = kernel.fit(mutag, 0)
    a = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(a, gram_by_tiles(kernel, state, mutag, 9))
    assert min_eigenvalue_ratio(a) >= -1e-10


def test_node_permutation_invariance(mutag):
    """Invariant where the selected eigenvalues are simple; documented as basis-dependent otherwise."""
    rng = np.random.default_rng(2)
    kernel = PyramidMatchKernel(L=4, d=6)
    checked = 0
    for i in range(40):
        g = mutag[i]
        w = np.linalg.eigvalsh(adjacency(g))
        if np.min(np.diff(np.sort(w))) < 1e-6:
            continue
        perm = rng.permutation(g.n_nodes)
        inv = np.argsort(perm)
        p = GraphBatch.from_graphs([inv[g.edges]], [g.n_nodes], node_labels=[g.node_labels[perm]])
        a, b = kernel.features(mutag[i:i + 1]), kernel.features(p)
        assert np.array_equal(a.keys, b.keys) and np.array_equal(a.values, b.values)
        checked += 1
    assert checked >= 10


def test_fit_then_transform_rows(mutag):
    from gramdist import GramTransformer

    full = gramdist_gram(mutag[:40])
    t = GramTransformer(kernel="pyramid_match").fit(mutag[:30])
    assert np.array_equal(t.transform(mutag[30:40]), full[30:40, :30])


def gramdist_gram(graphs):
    import gramdist

    return gramdist.compute_gram(graphs, kernel="pyramid_match")


@pytest.mark.parametrize("params", [{"L": -1}, {"L": 21}, {"d": 0}, {"labels": "yes"}, {"d": 2.5}])
def test_invalid_parameters(params):
    with pytest.raises(JobError, match="kernel pyramid_match: parameter"):
        make_kernel("pyramid_match", **params)


def test_engine_and_job_file(tmp_path, mutag, dataset_dir):
    kernel = PyramidMatchKernel()
    ref = gram_by_tiles(kernel, kernel.fit(mutag[:40], 0), mutag[:40], 40)
    assert np.array_equal(gramdist_gram(mutag[:40]), ref)
    dataset_dir("MUTAG")
    out = tmp_path / "pm.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-pyramid_match.yaml", "--out",
                        str(out), "--set", "cluster.n_workers=1", "--json"], capture_output=True, text=True,
                       cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
