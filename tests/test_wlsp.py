"""WL shortest-path kernel ``wlsp``: brute force with explicit WL signatures, GraKeL, the contract."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from test_sp import grakel_graphs, gram_of_counters, permuted, random_graphs, to_nx

from gramdist.datasets import read_tu
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.shortest_path.sp import ShortestPathKernel
from gramdist.kernels.shortest_path.wlsp import WLShortestPathKernel
from gramdist.testing import adjacency_lists, gram_by_tiles, min_eigenvalue_ratio


def brute_force_wlsp(graphs: GraphBatch, h: int) -> np.ndarray:
    """Σ_i SP(G_i, G'_i) with WL signatures as nested strings (no hashing)."""
    feats = [Counter() for _ in range(len(graphs))]
    labels = [[str(x) for x in g.node_labels] for g in graphs]
    dists = [dict(nx.all_pairs_shortest_path_length(to_nx(g))) for g in graphs]
    adjs = []
    for g in graphs:
        adj = adjacency_lists(g)
        adjs.append(adj)
    for it in range(h + 1):
        if it:
            labels = [["(" + lab[v] + "|" + ",".join(sorted(lab[u] for u in adj[v])) + ")" for v in range(len(lab))]
                      for lab, adj in zip(labels, adjs)]
        for gi, (lab, dist) in enumerate(zip(labels, dists)):
            for u, row in dist.items():
                for v, d in row.items():
                    if u != v:
                        feats[gi][(it, lab[u], lab[v], d)] += 1
    return gram_of_counters(feats)


@pytest.mark.parametrize("h", [0, 1, 3])
def test_matches_brute_force_on_random_graphs(h):
    graphs = random_graphs(25, seed=10 + h)
    kernel = WLShortestPathKernel(h=h)
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 6), brute_force_wlsp(graphs, h))


def test_h0_is_the_sp_kernel(mutag):
    a, b = WLShortestPathKernel(h=0), ShortestPathKernel()
    assert np.array_equal(gram_by_tiles(a, a.fit(mutag, 0), mutag, 64), gram_by_tiles(b, b.fit(mutag, 0), mutag, 64))


def test_hand_worked_example():
    # Path P3 with all labels equal. Iteration 0: {(a,a,1):4, (a,a,2):2} -> 16 + 4 = 20.
    # Iteration 1: ends e (1 neighbour), middle m: pairs (e,m,1)x2, (m,e,1)x2, (e,e,2)x2 -> 12.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])], [3], node_labels=[np.zeros(3, int)])
    kernel = WLShortestPathKernel(h=1)
    assert gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1).tolist() == [[32.0]]


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_equals_grakel_wl_framework_with_sp_base(name, dataset_dir):
    grakel = pytest.importorskip("grakel")
    graphs = read_tu(dataset_dir(name))
    h = 1 if name == "ENZYMES" else 3  # GraKeL needs ~50 s for ENZYMES at h = 2
    kernel = WLShortestPathKernel(h=h)
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 256)
    base = (grakel.ShortestPath, {"algorithm_type": "floyd_warshall"})
    theirs = grakel.WeisfeilerLehman(n_iter=h, base_graph_kernel=base).fit_transform(grakel_graphs(graphs))
    assert np.array_equal(ours, theirs)


def test_contract(mutag):
    kernel = WLShortestPathKernel(h=2)
    state = kernel.fit(mutag[:90], 0)
    k = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(k, gram_by_tiles(kernel, state, mutag, 11))
    assert np.array_equal(k, gram_by_tiles(kernel, state, permuted(mutag, 1), 64))
    assert min_eigenvalue_ratio(k) >= -1e-10
    new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:90], state)
    assert np.array_equal(kernel.pairwise(new, train, state), k[150:, :90])
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(k)[150:])


def test_registered_validated_and_through_the_engine(mutag, tmp_path):
    import json
    import subprocess

    from gramdist import GramTransformer, compute_gram, open_gram
    from gramdist.errors import JobError

    with pytest.raises(JobError, match="h"):
        make_kernel("wlsp", h=-1)
    kernel = WLShortestPathKernel(h=3)
    ref = gram_by_tiles(kernel, kernel.fit(mutag, 0), mutag, 64)
    assert np.array_equal(np.asarray(compute_gram(mutag, kernel="wlsp", h=3, normalize=False)), ref)
    assert np.array_equal(GramTransformer(kernel="wlsp", kernel_params={"h": 3}).fit(mutag[:100]).transform(mutag[100:]),
                          ref[100:, :100])
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "w.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-wlsp.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--quiet", "--json"], cwd=root, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    assert open_gram(out)[0].shape == (188, 188)
