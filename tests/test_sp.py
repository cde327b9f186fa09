"""Shortest-path kernel ``sp``: brute force, GraKeL, the TUDataset C++ baseline, the contract."""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sps

from gramdist.datasets import read_tu
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.allpairs import pair_pieces
from gramdist.kernels.shortest_path.sp import ShortestPathKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

INT_MAX = 2**31 - 1


def random_graphs(n: int, seed: int, max_nodes: int = 10, n_labels: int = 3, loops: bool = True) -> GraphBatch:
    """Random graphs with isolated nodes, several components and (optionally) self-loops."""
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        e = rng.integers(0, k, size=(int(rng.integers(0, 2 * k)), 2))
        if not loops:
            e = e[e[:, 0] != e[:, 1]]
        edges.append(e)
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def to_nx(g) -> nx.Graph:
    G = nx.Graph()
    G.add_nodes_from(range(g.n_nodes))
    G.add_edges_from(g.edges.tolist())
    return G


def gram_of_counters(feats: list[Counter]) -> np.ndarray:
    keys = {k: i for i, k in enumerate({k for f in feats for k in f})}
    rows = [i for i, f in enumerate(feats) for _ in f]
    cols = [keys[k] for f in feats for k in f]
    vals = [float(v) for f in feats for v in f.values()]
    m = sps.csr_matrix((vals, (rows, cols)), shape=(len(feats), max(1, len(keys))))
    return (m @ m.T).toarray()


def brute_force_sp(graphs: GraphBatch, with_labels: bool = True) -> np.ndarray:
    """Borgwardt & Kriegel with delta kernels, GraKeL's convention: ordered pairs u != v, finite d."""
    feats = []
    for g in graphs:
        lab = g.node_labels if (with_labels and g.node_labels is not None) else np.zeros(g.n_nodes, int)
        c = Counter()
        for u, dist in nx.all_pairs_shortest_path_length(to_nx(g)):
            for v, d in dist.items():
                if u != v:
                    c[(int(lab[u]), int(lab[v]), d) if with_labels else d] += 1
        feats.append(c)
    return gram_of_counters(feats)


def brute_force_cpp(graphs: GraphBatch, use_labels: bool = True) -> np.ndarray:
    """What the TUDataset C++ ``compute_shortestpath_dense`` computes (read from its source).

    Floyd–Warshall from a matrix with INT_MAX off the edges *and on the diagonal* (so a node's
    distance to itself is 2, 1 with a self-loop, INT_MAX when isolated); triples
    ``(l_i, l_j, d)`` and ``(l_j, l_i, d)`` for every ``i <= j``, unreachable pairs included;
    its filter ``dis > 0 and dis != INT_MAX`` tests the triple's first element, the label.
    """
    feats = []
    for g in graphs:
        n = g.n_nodes
        lab = g.node_labels if use_labels else np.ones(n, int)
        dist = dict(nx.all_pairs_shortest_path_length(to_nx(g)))
        loops = {int(u) for u, v in g.edges.tolist() if u == v}
        nonisolated = {int(x) for e in g.edges.tolist() for x in e if e[0] != e[1]} | loops
        c = Counter()
        for i in range(n):
            for j in range(i, n):
                if i == j:
                    d = 1 if i in loops else (2 if i in nonisolated else INT_MAX)
                else:
                    d = dist[i].get(j, INT_MAX)
                for a, b in ((lab[i], lab[j]), (lab[j], lab[i])):
                    if a > 0:
                        c[(int(a), int(b), d)] += 1
        feats.append(c)
    return gram_of_counters(feats)


def grakel_graphs(batch: GraphBatch) -> list:
    """GraKeL graphs from adjacency matrices (its edge-dictionary input loses isolated nodes)."""
    from grakel import Graph

    out = []
    for g in batch:
        a = np.zeros((g.n_nodes, g.n_nodes))
        a[g.edges[:, 0], g.edges[:, 1]] = 1
        a[g.edges[:, 1], g.edges[:, 0]] = 1
        np.fill_diagonal(a, 0)
        out.append(Graph(a, node_labels={i: int(x) for i, x in enumerate(g.node_labels)}))
    return out


def permuted(batch: GraphBatch, seed: int) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, attrs = [], [], [], []
    for g in batch:
        perm = rng.permutation(g.n_nodes)  # new node i is old node perm[i]
        inv = np.argsort(perm)
        edges.append(inv[g.edges])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[perm])
        attrs.append(None if g.node_attrs is None else g.node_attrs[perm])
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels,
                                  node_attrs=None if batch.node_attrs is None else attrs)


# ---------------------------------------------------------------- definition
@pytest.mark.parametrize("with_labels", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_matches_brute_force_on_random_graphs(with_labels, seed):
    graphs = random_graphs(30, seed)
    kernel = ShortestPathKernel(with_labels=with_labels)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 7)
    assert np.array_equal(k, brute_force_sp(graphs, with_labels))


def test_hand_worked_example():
    # P3 a-b-a (labels 0,1,0) and a triangle a,a,b.
    # P3 ordered pairs: (0,1,1)x2, (1,0,1)x2, (0,0,2)x2 -> vector {010:2, 101:2, 002:2}
    # triangle (labels 0,0,1): (0,0,1)x2, (0,1,1)x2, (1,0,1)x2 -> {001:2, 011:2, 101:2}
    # K(P3,P3) = 12, K(P3,tri) = 2*2 + 2*2 = 8, K(tri,tri) = 12.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1], [1, 2], [2, 0]])], [3, 3],
                                    node_labels=[np.array([0, 1, 0]), np.array([0, 0, 1])])
    kernel = ShortestPathKernel()
    assert gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1).tolist() == [[12, 8], [8, 12]]
    unl = ShortestPathKernel(with_labels=False)
    # unlabelled: P3 {1:4, 2:2}, triangle {1:6}: 20, 24, 36
    assert gram_by_tiles(unl, unl.fit(graphs, 0), graphs, 2).tolist() == [[20, 24], [24, 36]]


def test_no_labels_is_all_label_zero():
    g = random_graphs(12, 3)
    bare = GraphBatch(g.node_offsets, g.edge_offsets, g.edges)
    zero = GraphBatch(g.node_offsets, g.edge_offsets, g.edges, node_labels=np.zeros(g.n_nodes, np.int64))
    kernel = ShortestPathKernel()
    a = gram_by_tiles(kernel, kernel.fit(bare, 0), bare, 5)
    assert np.array_equal(a, gram_by_tiles(kernel, kernel.fit(zero, 0), zero, 5))
    u = ShortestPathKernel(with_labels=False)
    assert np.array_equal(a, gram_by_tiles(u, u.fit(g, 0), g, 5))


@pytest.mark.parametrize("max_pairs,group_nodes", [(50, 256), (50, 2), (1 << 22, 2), (300, 40)])
def test_grouping_and_source_blocks_give_the_same_features(max_pairs, group_nodes, monkeypatch):
    graphs = random_graphs(8, 5, max_nodes=40)
    kernel = ShortestPathKernel()
    whole = kernel.features(graphs)
    import gramdist.kernels.allpairs as paths

    monkeypatch.setattr(paths, "GROUP_NODES", group_nodes)
    monkeypatch.setattr(paths.pair_pieces, "__defaults__", (max_pairs,))
    if (max_pairs, group_nodes) == (50, 2):  # every graph with > 1 node split into blocks
        assert len(list(pair_pieces(graphs))) > len(graphs)
    split = kernel.features(graphs)
    assert np.array_equal(whole.keys, split.keys) and np.array_equal(whole.values, split.values)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_seidel_distances_equal_breadth_first_search(seed):
    """Seidel's algorithm on stacks of padded graphs (isolated nodes, several components,
    self-loops, paths with the largest diameter a size allows) against SciPy's BFS."""
    from scipy.sparse.csgraph import shortest_path

    from gramdist.kernels.allpairs import padded_adjacency, seidel_distances

    rng = np.random.default_rng(seed)
    sizes = [1, 2, 128, 127, 17, 64] + [int(x) for x in rng.integers(1, 129, size=20)]
    edges = [np.array([[i, i + 1] for i in range(sizes[2] - 1)] if k == 2 else
                      rng.integers(0, n, size=(int(rng.integers(0, 2 * n)), 2))).reshape(-1, 2)
             for k, n in enumerate(sizes)]
    graphs = GraphBatch.from_graphs(edges, sizes)
    for n_pad in (128, 136):
        dist = seidel_distances(padded_adjacency(graphs, np.arange(len(sizes)), n_pad))
        for g, n in enumerate(sizes):
            a = np.zeros((n, n))
            a[edges[g][:, 0], edges[g][:, 1]] = a[edges[g][:, 1], edges[g][:, 0]] = 1
            ref = shortest_path(a, unweighted=True, directed=False)
            ref[~np.isfinite(ref)] = 0
            assert np.array_equal(dist[g, :n, :n], ref)
            assert not dist[g, n:].any() and not dist[g, :, n:].any()
    assert dist[2, 0, 127] == 127  # the 128-node path (SEIDEL_MAX_NODES)


@pytest.mark.parametrize("seidel_max,max_pairs", [(0, 1 << 22), (64, 1 << 22), (128, 1 << 22), (64, 300), (16, 2000)])
def test_small_graph_stacks_and_source_blocks_count_the_same(seidel_max, max_pairs, monkeypatch):
    """The counts of small graphs (Seidel, in windows of ``max_pairs`` padded entries) and of
    larger ones (BFS by source rows) agree, however graphs are windowed and stacked."""
    import gramdist.kernels.allpairs as paths

    graphs = random_graphs(60, 9, max_nodes=90)
    labels = [graphs.node_labels, None]
    monkeypatch.setattr(paths, "SEIDEL_MAX_NODES", 0)
    whole = paths.labelled_distance_counts(graphs, labels)
    monkeypatch.setattr(paths, "SEIDEL_MAX_NODES", seidel_max)
    monkeypatch.setattr(paths, "SEIDEL_STACK_ENTRIES", 5000)
    split = paths.labelled_distance_counts(graphs, labels, max_pairs)

    def counted(piece):
        out = Counter()
        for row in zip(*(c.tolist() for c in piece)):
            out[row[:4]] += row[4]
        return out

    for a, b in zip(whole, split):
        assert counted(a) == counted(b)
    closed = 0  # no piece may name a graph that an earlier piece declared complete
    for complete, _, piece in paths.iter_labelled_distance_counts(graphs, labels, max_pairs):
        closed = max(closed, complete)
        assert len(piece[0]) == 0 or piece[0].min() >= closed


# ---------------------------------------------------------------- GraKeL
@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
@pytest.mark.parametrize("with_labels", [True, False])
def test_equals_grakel(name, with_labels, dataset_dir):
    grakel = pytest.importorskip("grakel")
    graphs = read_tu(dataset_dir(name))
    kernel = ShortestPathKernel(with_labels=with_labels)
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 256)
    theirs = grakel.ShortestPath(with_labels=with_labels, algorithm_type="floyd_warshall").fit_transform(
        grakel_graphs(graphs))
    assert np.array_equal(ours, theirs)  # integer counts: bit for bit


# ---------------------------------------------------------------- TUDataset C++
def _baselines():
    folder = os.environ.get("GRAMDIST_TUDATASET_BASELINES")
    if not folder:
        pytest.skip("GRAMDIST_TUDATASET_BASELINES not set (folder of the built kernel_baselines module)")
    sys.path.insert(0, folder)
    try:
        return importlib.import_module("kernel_baselines")
    except ImportError as exc:
        pytest.skip(f"kernel_baselines not importable from {folder}: {exc}")
    finally:
        sys.path.remove(folder)


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_relation_to_tudataset_cpp_baseline(name, dataset_dir, tmp_path, monkeypatch):
    kb = _baselines()
    src = Path(dataset_dir(name))
    raw = tmp_path / "datasets" / name / name / "raw"  # the layout the C++ reader expects
    raw.mkdir(parents=True)
    for f in src.glob(f"{name}_*.txt"):
        (raw / f.name).symlink_to(f.resolve())
    monkeypatch.chdir(tmp_path)
    graphs = read_tu(src)
    for use_labels in (True, False):
        cpp = np.asarray(kb.compute_shortestpath_dense(name, use_labels))
        # our reading of the C++ code is exact ...
        assert np.array_equal(cpp, brute_force_cpp(graphs, use_labels))
    # ... and differs from the kernel's definition (GraKeL's, ours) only as documented in sp.py
    kernel = ShortestPathKernel()
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 256), brute_force_sp(graphs))


# ---------------------------------------------------------------- contract
def test_permutation_invariance_psd_and_tile_invariance(mutag):
    kernel = ShortestPathKernel()
    state = kernel.fit(mutag, 0)
    k = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(k, gram_by_tiles(kernel, state, mutag, 13))
    assert np.array_equal(k, gram_by_tiles(kernel, state, permuted(mutag, 0), 50))
    assert min_eigenvalue_ratio(k) >= -1e-10
    kn = gram_by_tiles(kernel, state, mutag, 17, normalize=True)
    assert np.array_equal(kn, gram_by_tiles(kernel, state, mutag, 64, normalize=True))


def test_fit_then_embed_new_graphs_equals_rows_of_full_gram(mutag):
    kernel = ShortestPathKernel()
    state = kernel.fit(mutag[:100], seed=0)
    full = gram_by_tiles(kernel, kernel.fit(mutag, 0), mutag, 64)
    new = kernel.embed(mutag[150:188], state)
    train = kernel.embed(mutag[:100], state)
    assert np.array_equal(kernel.pairwise(new, train, state), full[150:188, :100])
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(full)[150:188])
    fv = kernel.feature_vectors(new, state)
    assert np.array_equal(kernel.pairwise(fv, fv, state), full[150:188, 150:188])


def test_registered_and_validated():
    from gramdist.errors import JobError

    assert isinstance(make_kernel("sp", with_labels=False), ShortestPathKernel)
    with pytest.raises(JobError, match="with_labels"):
        make_kernel("sp", with_labels="yes")


def test_compute_gram_and_transformer(mutag):
    from gramdist import GramTransformer, compute_gram

    kernel = ShortestPathKernel()
    ref = gram_by_tiles(kernel, kernel.fit(mutag, 0), mutag, 64)
    assert np.array_equal(np.asarray(compute_gram(mutag, kernel="sp", normalize=False)), ref)
    gt = GramTransformer(kernel="sp").fit(mutag[:120])
    assert np.array_equal(gt.transform(mutag[120:]), ref[120:, :120])


def test_job_file_runs(tmp_path):
    import json
    import subprocess

    from gramdist import open_gram

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "mutag-sp.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-sp.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--quiet", "--json"], cwd=root, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    k, _ = open_gram(out)
    assert k.shape == (188, 188) and np.allclose(np.diag(k), 1.0)


@pytest.mark.parametrize("with_labels", [True, False])
def test_graphs_without_nodes_have_no_paths(with_labels):
    """A graph with no nodes (alone in its batch, or beside others) counts nothing; it once
    made Seidel's stacks index an empty label array (found by the property tests)."""
    from gramdist.kernels import make_kernel

    kernel = make_kernel("sp", with_labels=with_labels)
    alone = GraphBatch.from_graphs([np.zeros((0, 2), dtype=np.int64)], [0], node_labels=[np.zeros(0, dtype=np.int64)])
    state = kernel.fit(alone, 0)
    assert kernel.pairwise(kernel.embed(alone, state), kernel.embed(alone, state), state).tolist() == [[0.0]]
    mixed = GraphBatch.from_graphs([np.array([[0, 1]]), np.zeros((0, 2), dtype=np.int64), np.array([[0, 1], [1, 2]])],
                                   [2, 0, 3], node_labels=[np.array([0, 1]), np.zeros(0, dtype=np.int64), np.array([1, 1, 0])])
    state = kernel.fit(mixed, 0)
    k = kernel.pairwise(kernel.embed(mixed, state), kernel.embed(mixed, state), state)
    assert k[1].tolist() == [0.0, 0.0, 0.0] and k[:, 1].tolist() == [0.0, 0.0, 0.0]
    assert k[0, 0] > 0 and k[2, 2] > 0
