"""Hash graph kernels ``hgk_wl`` and ``hgk_sp``: the framework against brute-force base kernels,
seeds, convergence in the number of iterations, the contract."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_sp import brute_force_sp, permuted
from test_sp_attr import attributed_graphs
from test_wl import brute_force_wl

from gramdist.datasets import read_tu
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.hashgraph.kernel import HashSPKernel, HashWLKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def brute_force_hgk(graphs: GraphBatch, state, kernel) -> np.ndarray:
    """(1/I) Σ_i k_base(h_i(G), h_i(G')) with the state's LSH draws, the base kernel by brute force."""
    x = graphs.node_attrs
    if "attr_mean" in state.arrays:
        x = (x - state.arrays["attr_mean"]) / state.arrays["attr_scale"]
    total = np.zeros((len(graphs), len(graphs)))
    proj, offs = state.arrays["projections"], state.arrays["offsets"]
    for r, b in zip(proj, offs):
        hashed = np.floor((x @ r + b) / kernel.bin_width).astype(np.int64)
        if kernel.with_labels:
            hashed = hashed * 1000 + graphs.node_labels  # any injective pairing
        relabelled = GraphBatch(graphs.node_offsets, graphs.edge_offsets, graphs.edges, node_labels=hashed)
        total += brute_force_wl(relabelled, kernel.h) if kernel.name == "hgk_wl" else brute_force_sp(relabelled)
    return total / len(proj)


@pytest.mark.parametrize("cls", [HashWLKernel, HashSPKernel])
@pytest.mark.parametrize("with_labels", [False, True])
def test_matches_brute_force_framework(cls, with_labels):
    graphs = attributed_graphs(16, seed=5, max_nodes=8, dim=3)
    kernel = cls(iterations=5, bin_width=0.7, with_labels=with_labels)
    state = kernel.fit(graphs, seed=3)
    k = gram_by_tiles(kernel, state, graphs, 5)
    assert np.allclose(k, brute_force_hgk(graphs, state, kernel), rtol=1e-12, atol=1e-12)
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 16))
    assert np.array_equal(k, gram_by_tiles(kernel, state, permuted(graphs, 1), 7))  # integer counts × 1/I
    assert min_eigenvalue_ratio(k) >= -1e-10


@pytest.mark.parametrize("name", ["hgk_wl", "hgk_sp"])
def test_same_seed_same_bits_any_chunking(name, dataset_dir):
    enz = read_tu(dataset_dir("ENZYMES"))[:60]
    kernel = make_kernel(name, iterations=6)
    a = kernel.embed(enz, kernel.fit(enz, seed=11))
    state = kernel.fit(enz, seed=11)
    parts = [kernel.embed(enz[i : i + 7], state) for i in range(0, 60, 7)]
    for i, p in enumerate(parts):
        ref = a[i * 7 : i * 7 + len(p)]
        assert np.array_equal(p.keys, ref.keys) and np.array_equal(p.values, ref.values)
    other = kernel.embed(enz, kernel.fit(enz, seed=12))
    assert not (len(other.keys) == len(a.keys) and np.array_equal(other.values, a.values))
    assert np.array_equal(kernel.fit(enz, 11).arrays["projections"], state.arrays["projections"])


@pytest.mark.parametrize("cls", [HashWLKernel, HashSPKernel])
def test_error_shrinks_like_one_over_sqrt_iterations(cls, dataset_dir):
    """K_I is a mean of I i.i.d. Grams, so two independent draws differ by ~√2·σ/√I: from I = 2 to
    I = 32 the relative spread shrinks ~4× (measured 3.2× for hgk_sp, 4.8× for hgk_wl)."""
    enz = read_tu(dataset_dir("ENZYMES"))[:50]

    def spread(iterations):
        grams = []
        for seed in range(4):
            kernel = cls(iterations=iterations)
            grams.append(gram_by_tiles(kernel, kernel.fit(enz, seed), enz, 50))
        return np.mean([np.linalg.norm(grams[a] - grams[b]) / np.linalg.norm(grams[a])
                        for a in range(4) for b in range(a + 1, 4)])

    assert spread(32) < 0.5 * spread(2)


def test_needs_attributes_and_validates(mutag):
    with pytest.raises(JobError, match="numerical node attributes"):
        HashWLKernel().fit(mutag, 0)
    with pytest.raises(JobError, match="iterations"):
        make_kernel("hgk_sp", iterations=0)
    with pytest.raises(JobError, match="bin_width"):
        make_kernel("hgk_wl", bin_width=0)
    with pytest.raises(JobError, match="h"):
        make_kernel("hgk_wl", h=-2)


@pytest.mark.parametrize("name", ["hgk_wl", "hgk_sp"])
def test_through_the_engine(name, dataset_dir, tmp_path):
    from gramdist import GramTransformer, compute_gram, open_gram

    enz = read_tu(dataset_dir("ENZYMES"))[:40]
    kernel = make_kernel(name, iterations=4)
    state = kernel.fit(enz[:30], seed=0)
    full = gram_by_tiles(kernel, state, enz, 64)
    new, train = kernel.embed(enz[30:], state), kernel.embed(enz[:30], state)
    assert np.array_equal(kernel.pairwise(new, train, state), full[30:, :30])
    fv = kernel.feature_vectors(new, state)
    assert np.array_equal(kernel.pairwise(fv, fv, state), full[30:, 30:])
    got = compute_gram(enz, kernel=name, iterations=4, normalize=False, seed=5)
    assert np.array_equal(np.asarray(got), gram_by_tiles(kernel, kernel.fit(enz, 5), enz, 64))
    gt = GramTransformer(kernel=name, kernel_params={"iterations": 4}, seed=5).fit(enz[:30])
    assert gt.transform(enz[30:]).shape == (10, 30)
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "h.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", f"jobs/enzymes-{name}.yaml", "--out", str(out),
                        "--set", "dataset.limit=40", "--set", "cluster.n_workers=1", "--quiet", "--json"], cwd=root,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    assert open_gram(out)[0].shape == (40, 40)
