"""WL edge kernel against a brute force with explicit WL signature strings; the contract."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.testing import adjacency_lists, gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


def random_graphs(n: int, seed: int, max_nodes: int = 9, edge_labels: bool = True) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, elabels = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, 3, size=k))
        elabels.append(rng.integers(0, 2, size=m))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels if edge_labels else None)


def brute_force_wl_edge(graphs: GraphBatch, h: int, use_edge_labels: bool) -> np.ndarray:
    """Shervashidze et al.'s WL sequence with string signatures; edge features
    (i, sorted endpoint labels, edge label) counted per graph, then dot products."""
    feats = []
    for g in graphs:
        adj = adjacency_lists(g)
        lab = [str(x) for x in (g.node_labels if g.node_labels is not None else [0] * g.n_nodes)]
        c = Counter()
        for i in range(h + 1):
            if i:
                lab = ["(" + lab[v] + "|" + ",".join(sorted(lab[u] for u in adj[v])) + ")" for v in range(g.n_nodes)]
            for e, (u, v) in enumerate(g.edges):
                el = g.edge_labels[e] if (use_edge_labels and g.edge_labels is not None) else None
                c[(i, tuple(sorted((lab[u], lab[v]))), el)] += 1
        feats.append(c)
    return np.array([[sum(x * b.get(k, 0) for k, x in a.items()) for b in feats] for a in feats], dtype=float)


@pytest.mark.parametrize("h", [0, 1, 3])
@pytest.mark.parametrize("use_edge_labels", [True, False])
def test_matches_brute_force_on_random_graphs(h, use_edge_labels):
    graphs = random_graphs(25, seed=h)
    kernel = make_kernel("wl_edge", h=h, use_edge_labels=use_edge_labels)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 6),
                          brute_force_wl_edge(graphs, h, use_edge_labels))


def test_matches_brute_force_on_mutag(mutag):
    kernel = make_kernel("wl_edge", h=2)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(mutag, 0), mutag, 64), brute_force_wl_edge(mutag, 2, True))


def test_hand_worked_example():
    # P3 (a-a-a) and the triangle, all labels equal, no edge labels, h = 1.
    # Iteration 0: P3 has 2 edges (a, a), the triangle 3: K(P3, tri) = 6.
    # Iteration 1: P3's edges are both {(a|a), (a|a,a)}; the triangle's {(a|a,a), (a|a,a)}: 0.
    # K(P3, P3) = 4 + 4 = 8, K(tri, tri) = 9 + 9 = 18.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1], [1, 2], [2, 0]])], [3, 3])
    kernel = make_kernel("wl_edge", h=1)
    assert gram_by_tiles(kernel, None, graphs, 1).tolist() == [[8, 6], [6, 18]]


def test_tiles_psd_permutation_and_out_of_sample(mutag):
    kernel = make_kernel("wl_edge", h=3)
    state = kernel.fit(mutag[:30], 0)
    a = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(a, gram_by_tiles(kernel, state, mutag, 19))
    assert min_eigenvalue_ratio(a) >= -1e-10
    new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:150], state)
    assert np.array_equal(kernel.pairwise(new, train, state), a[150:, :150])
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(a)[150:])
    rng = np.random.default_rng(4)
    edges, sizes, labels, elabels = [], [], [], []
    for g in mutag:
        perm = rng.permutation(g.n_nodes)
        order = rng.permutation(len(g.edges))
        edges.append(np.argsort(perm)[g.edges[order]])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[perm])
        elabels.append(g.edge_labels[order])
    permuted = GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels)
    assert np.array_equal(gram_by_tiles(kernel, state, permuted, 64), a)


def test_engine_and_job_file(mutag, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    from gramdist import GramTransformer, compute_gram
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram
    from gramdist.jobs import load_job

    dataset_dir("MUTAG")
    ref = gram_by_tiles(make_kernel("wl_edge", h=2), None, mutag, 64)
    assert np.array_equal(compute_gram(mutag, kernel="wl_edge", h=2), ref)
    k = GramTransformer(kernel="wl_edge", kernel_params={"h": 2}).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k, ref[100:, :100])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        res = run_job(load_job(ROOT / "jobs" / "mutag-wl_edge.yaml"), out=str(tmp_path / "k.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert res.complete and open_gram(tmp_path / "k.zarr")[0].shape == (188, 188)


def test_invalid_parameters():
    from gramdist.errors import JobError

    with pytest.raises(JobError, match="h"):
        make_kernel("wl_edge", h=1.5)
    with pytest.raises(JobError, match="use_edge_labels"):
        make_kernel("wl_edge", use_edge_labels="no")
