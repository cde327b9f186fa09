"""Vertex and edge histogram kernels: brute force, GraKeL, the contract and the engine."""

from __future__ import annotations

import logging
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


def random_graphs(n: int, seed: int, max_nodes: int = 9) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, elabels = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, 4, size=k))
        elabels.append(rng.integers(0, 3, size=m))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels)


def brute(counts: list[Counter]) -> np.ndarray:
    return np.array([[sum(c * b.get(k, 0) for k, c in a.items()) for b in counts] for a in counts], dtype=float)


def test_vertex_and_edge_histograms_by_brute_force():
    graphs = random_graphs(30, seed=1)
    vh, eh = make_kernel("vertex_histogram"), make_kernel("edge_histogram")
    v_counts = [Counter(g.node_labels.tolist()) for g in graphs]
    e_counts = [Counter(g.edge_labels.tolist()) for g in graphs]
    assert np.array_equal(gram_by_tiles(vh, vh.fit(graphs, 0), graphs, 7), brute(v_counts))
    assert np.array_equal(gram_by_tiles(eh, eh.fit(graphs, 0), graphs, 7), brute(e_counts))
    # without labels (or told to ignore them): |V||V'| and |E||E'|
    n, m = graphs.nodes_per_graph.astype(float), graphs.edges_per_graph.astype(float)
    vh0, eh0 = make_kernel("vertex_histogram", use_labels=False), make_kernel("edge_histogram", use_edge_labels=False)
    assert np.array_equal(gram_by_tiles(vh0, None, graphs, 7), np.outer(n, n))
    assert np.array_equal(gram_by_tiles(eh0, None, graphs, 7), np.outer(m, m))
    bare = GraphBatch(graphs.node_offsets, graphs.edge_offsets, graphs.edges)
    assert np.array_equal(gram_by_tiles(vh, None, bare, 7), np.outer(n, n))
    assert np.array_equal(gram_by_tiles(eh, None, bare, 7), np.outer(m, m))


def test_hand_worked_example():
    # G1: labels [0, 0, 1], edges (0,1) label 5, (1,2) label 5; G2: labels [0, 1, 1], edge (0,2) label 5,
    # (1,2) label 6. Vertex: K(G1,G2) = 2*1 + 1*2 = 4; edge: K(G1,G2) = 2*1 = 2.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 2], [1, 2]])], [3, 3],
                                    node_labels=[np.array([0, 0, 1]), np.array([0, 1, 1])],
                                    edge_labels=[np.array([5, 5]), np.array([5, 6])])
    assert gram_by_tiles(make_kernel("vertex_histogram"), None, graphs, 1).tolist() == [[5, 4], [4, 5]]
    assert gram_by_tiles(make_kernel("edge_histogram"), None, graphs, 1).tolist() == [[4, 2], [2, 2]]


def grakel_graphs(batch: GraphBatch, both_directions: bool) -> list:
    from grakel import Graph

    out = []
    for g in batch:
        edge_labels = {}
        for (u, v), lab in zip(g.edges.tolist(), g.edge_labels.tolist()):
            edge_labels[(u, v)] = lab
            if both_directions and u != v:
                edge_labels[(v, u)] = lab
        out.append(Graph(list(edge_labels), node_labels=dict(enumerate(g.node_labels.tolist())),
                         edge_labels=edge_labels))
    return out


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_equals_grakel(name, dataset_dir):
    pytest.importorskip("grakel")
    from grakel.kernels import EdgeHistogram, VertexHistogram

    from gramdist.datasets import read_tu

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = read_tu(dataset_dir(name))
    vh = make_kernel("vertex_histogram")
    assert np.array_equal(gram_by_tiles(vh, None, graphs, 100),
                          VertexHistogram().fit_transform(grakel_labelled_graphs(graphs)))
    if graphs.edge_labels is None:  # ENZYMES: no edge labels; GraKeL's EdgeHistogram needs them
        return
    eh = make_kernel("edge_histogram")
    ours = gram_by_tiles(eh, None, graphs, 100)
    # one dictionary entry per undirected edge: GraKeL's Gram is ours; both directions (as
    # GraKeL's own TU reader gives): counts doubled, Gram four times ours
    assert np.array_equal(EdgeHistogram().fit_transform(grakel_graphs(graphs, False)), ours)
    assert np.array_equal(EdgeHistogram().fit_transform(grakel_graphs(graphs, True)), 4 * ours)


def test_tiles_psd_permutation_and_out_of_sample(mutag):
    for name in ("vertex_histogram", "edge_histogram"):
        kernel = make_kernel(name)
        state = kernel.fit(mutag[:30], 0)
        a, b = gram_by_tiles(kernel, state, mutag, 64), gram_by_tiles(kernel, state, mutag, 17)
        assert np.array_equal(a, b) and min_eigenvalue_ratio(a) >= -1e-10
        new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:150], state)
        assert np.array_equal(kernel.pairwise(new, train, state), a[150:, :150])
        rng = np.random.default_rng(2)
        edges, sizes, labels, elabels = [], [], [], []
        for g in mutag:
            perm = rng.permutation(g.n_nodes)
            order = rng.permutation(len(g.edges))
            edges.append(np.argsort(perm)[g.edges[order]][:, ::-1])
            sizes.append(g.n_nodes)
            labels.append(g.node_labels[perm])
            elabels.append(g.edge_labels[order])
        permuted = GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels)
        assert np.array_equal(gram_by_tiles(kernel, state, permuted, 64), a)


def test_engine_and_job_files(mutag, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    from gramdist import GramTransformer, compute_gram
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram
    from gramdist.jobs import load_job

    dataset_dir("MUTAG")
    for name in ("vertex_histogram", "edge_histogram"):
        ref = gram_by_tiles(make_kernel(name), None, mutag, 64)
        assert np.array_equal(compute_gram(mutag, kernel=name), ref)
        k = GramTransformer(kernel=name).fit(mutag[:100]).transform(mutag[100:])
        assert np.array_equal(k, ref[100:, :100])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        for name in ("vertex_histogram", "edge_histogram"):
            res = run_job(load_job(ROOT / "jobs" / f"mutag-{name}.yaml"), out=str(tmp_path / f"{name}.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
            assert res.complete
            k, _ = open_gram(tmp_path / f"{name}.zarr")
            assert k.shape == (188, 188)


def test_invalid_parameters():
    from gramdist.errors import JobError

    with pytest.raises(JobError, match="use_labels"):
        make_kernel("vertex_histogram", use_labels="yes")
    with pytest.raises(JobError, match="use_edge_labels"):
        make_kernel("edge_histogram", use_edge_labels=1)
