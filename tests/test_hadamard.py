"""Hadamard code kernel: a literal Hadamard-matrix implementation, GraKeL's HadamardCode, and
the contract (tiles, out-of-sample, permutations, engine)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy.linalg import hadamard

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.testing import adjacency_lists, gram_by_tiles, min_eigenvalue_ratio, random_labelled_graphs

ROOT = Path(__file__).resolve().parents[1]


def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 5) -> GraphBatch:
    return random_labelled_graphs(n, seed, max_nodes, n_labels)


def brute_force_hadamard(graphs: GraphBatch, h: int) -> np.ndarray:
    """Kataoka & Inokuchi literally: rows of a Hadamard matrix as codes (Python ints, exact),
    x_i(v) = x_{i-1}(v) + Σ_{u ∈ N(v)} x_{i-1}(u), vertex histogram of the code tuples."""
    alphabet = sorted({int(x) for g in graphs for x in g.node_labels})
    size = 1 << max(0, (len(alphabet) - 1).bit_length())
    rows = hadamard(size).astype(object)
    row_of = {lab: rows[i] for i, lab in enumerate(alphabet)}
    feats = []
    for g in graphs:
        adj = adjacency_lists(g)
        x = [row_of[int(lab)].copy() for lab in g.node_labels]
        c = Counter()
        for i in range(h + 1):
            if i:
                x = [x[v] + sum((x[u] for u in adj[v]), np.zeros(size, dtype=object)) for v in range(g.n_nodes)]
            for v in range(g.n_nodes):
                c[(i, tuple(x[v]))] += 1
        feats.append(c)
    return np.array([[sum(n * b.get(k, 0) for k, n in a.items()) for b in feats] for a in feats], dtype=float)


@pytest.mark.parametrize("h", [0, 1, 3])
def test_matches_literal_hadamard_codes(h):
    graphs = random_graphs(25, seed=20 + h)
    kernel = make_kernel("hadamard", h=h)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 6), brute_force_hadamard(graphs, h))


def test_matches_literal_hadamard_codes_on_mutag(mutag):
    kernel = make_kernel("hadamard", h=3)
    assert np.array_equal(gram_by_tiles(kernel, None, mutag, 64), brute_force_hadamard(mutag, 3))


def test_hand_worked_example():
    # Labels a, b with Hadamard rows (1, 1), (1, -1). Path a-b-a: iteration 1 codes: end
    # (1,1)+(1,-1) = (2, 0) twice, middle (1,-1)+2(1,1) = (3, 1). Path b-a-b: ends (2, 0),
    # middle (3, -1). h = 1: K(aba, bab) = [a,b counts: 2*1 + 1*2] + [(2,0): 2*2] = 4 + 4 = 8;
    # K(aba, aba) = (4 + 1) + (4 + 1) = 10.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])] * 2, [3, 3],
                                    node_labels=[np.array([0, 1, 0]), np.array([1, 0, 1])])
    kernel = make_kernel("hadamard", h=1)
    assert gram_by_tiles(kernel, None, graphs, 1).tolist() == [[10, 8], [8, 10]]


def grakel_input(graphs: GraphBatch) -> list:
    """[adjacency dictionary, label dictionary] pairs: GraKeL's HadamardCode raises
    "unsupported label purpose" on ``Graph`` objects (it asks them for labels of purpose
    "auto"), but accepts these."""
    out = []
    for g in graphs:
        adj = {v: [] for v in range(g.n_nodes)}
        for u, v in g.edges.tolist():
            adj[u].append(v)
            if u != v:
                adj[v].append(u)
        out.append([adj, {v: int(lab) for v, lab in enumerate(g.node_labels)}])
    return out


def without_isolated_nodes(graphs: GraphBatch) -> GraphBatch:
    edges, sizes, labels = [], [], []
    for g in graphs:
        deg = np.bincount(g.edges.ravel(), minlength=g.n_nodes)
        keep = np.flatnonzero(deg > 0)
        new = np.full(g.n_nodes, -1)
        new[keep] = np.arange(len(keep))
        edges.append(new[g.edges])
        sizes.append(len(keep))
        labels.append(g.node_labels[keep])
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_equals_grakel(name, dataset_dir):
    pytest.importorskip("grakel")
    from grakel.kernels import HadamardCode

    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir(name))
    h = 3
    kernel = make_kernel("hadamard", h=h)
    ours = gram_by_tiles(kernel, None, graphs, 128)
    theirs = HadamardCode(n_iter=h + 1).fit_transform(grakel_input(graphs))  # n_iter = h + 1
    # GraKeL aggregates over its edge dictionary, which has no entry for an isolated node: such
    # nodes count at iteration 0 and are gone at iterations 1..h. So GraKeL's Gram is ours at
    # iteration 0 plus ours at iterations 1..h of the graphs without their isolated nodes.
    stripped = without_isolated_nodes(graphs)
    k0 = make_kernel("hadamard", h=0)
    expected = (gram_by_tiles(k0, None, graphs, 128) + gram_by_tiles(kernel, None, stripped, 128)
                - gram_by_tiles(k0, None, stripped, 128))
    assert np.array_equal(theirs, expected)
    clean = np.flatnonzero(stripped.nodes_per_graph == graphs.nodes_per_graph)
    assert np.array_equal(theirs[np.ix_(clean, clean)], ours[np.ix_(clean, clean)])
    assert (len(clean) < len(graphs)) == (name == "ENZYMES")


def test_tiles_psd_permutation_and_out_of_sample(mutag):
    kernel = make_kernel("hadamard", h=4)
    state = kernel.fit(mutag[:20], 0)
    a = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(a, gram_by_tiles(kernel, state, mutag, 13))
    assert min_eigenvalue_ratio(a) >= -1e-10
    new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:150], state)
    assert np.array_equal(kernel.pairwise(new, train, state), a[150:, :150])
    rng = np.random.default_rng(9)
    edges, sizes, labels = [], [], []
    for g in mutag:
        perm = rng.permutation(g.n_nodes)
        edges.append(np.argsort(perm)[g.edges])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[perm])
    permuted = GraphBatch.from_graphs(edges, sizes, node_labels=labels)
    assert np.array_equal(gram_by_tiles(kernel, state, permuted, 64), a)


def test_engine_and_job_file(mutag, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    from gramdist import GramTransformer, compute_gram
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram
    from gramdist.jobs import load_job

    dataset_dir("MUTAG")
    ref = gram_by_tiles(make_kernel("hadamard", h=2), None, mutag, 64)
    assert np.array_equal(compute_gram(mutag, kernel="hadamard", h=2), ref)
    k = GramTransformer(kernel="hadamard", kernel_params={"h": 2}).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k, ref[100:, :100])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        res = run_job(load_job(ROOT / "jobs" / "mutag-hadamard.yaml"), out=str(tmp_path / "k.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert res.complete and open_gram(tmp_path / "k.zarr")[0].shape == (188, 188)


def test_invalid_parameters():
    from gramdist.errors import JobError

    with pytest.raises(JobError, match="h"):
        make_kernel("hadamard", h=-2)
