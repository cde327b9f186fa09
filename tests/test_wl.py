"""WL subtree kernel against an independent dictionary-based brute force."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gramdist.graphs import GraphBatch
from gramdist.kernels.features.wl import WLSubtreeKernel
from gramdist.testing import adjacency_lists, gram_by_tiles


def brute_force_wl(graphs: GraphBatch, h: int) -> np.ndarray:
    """Shervashidze et al.'s WL with explicit signature strings and a shared dictionary."""
    feats = [Counter() for _ in range(len(graphs))]
    labels = []
    for g in graphs:
        lab = [str(x) for x in (g.node_labels if g.node_labels is not None else [0] * g.n_nodes)]
        labels.append(lab)
    for gi in range(len(graphs)):
        for lab in labels[gi]:
            feats[gi][(0, lab)] += 1
    for it in range(1, h + 1):
        new_labels = []
        for gi, g in enumerate(graphs):
            adj = adjacency_lists(g)
            lab = labels[gi]
            new = ["(" + lab[v] + "|" + ",".join(sorted(lab[u] for u in adj[v])) + ")" for v in range(g.n_nodes)]
            new_labels.append(new)
            for s in new:
                feats[gi][(it, s)] += 1
        labels = new_labels
    n = len(graphs)
    k = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            k[i, j] = sum(c * feats[j].get(key, 0) for key, c in feats[i].items())
    return k


def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, 2 * k))
        e = rng.integers(0, k, size=(m, 2))
        edges.append(e)
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


@pytest.mark.parametrize("h", [0, 1, 3])
def test_matches_brute_force_on_random_graphs(h):
    graphs = random_graphs(25, seed=h)
    kernel = WLSubtreeKernel(h=h)
    state = kernel.fit(graphs, seed=0)
    assert np.array_equal(gram_by_tiles(kernel, state, graphs, 4), brute_force_wl(graphs, h))


def test_matches_brute_force_on_mutag(mutag):
    kernel = WLSubtreeKernel(h=3)
    state = kernel.fit(mutag, seed=0)
    k = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(k, brute_force_wl(mutag, 3))


def test_hand_worked_example():
    # Path P3, triangle, single edge, all labels equal; counts per iteration, by hand (h = 2):
    # P3 = {a:3 | end:2, mid:1 | end':2, mid':1}; triangle = {a:3 | mid:3 | tri:3};
    # K2 = {a:2 | end:2 | k2:2}. So K(P3,P3) = 9+4+1+4+1 = 19, K(P3,tri) = 9+3 = 12,
    # K(P3,K2) = 6+4 = 10, K(tri,tri) = 27, K(tri,K2) = 6, K(K2,K2) = 12.
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1], [1, 2], [2, 0]]),
                                     np.array([[0, 1]])], [3, 3, 2])
    kernel = WLSubtreeKernel(h=2)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k.tolist() == [[19, 12, 10], [12, 27, 6], [10, 6, 12]]


def test_node_permutation_invariance(mutag):
    rng = np.random.default_rng(1)
    g = mutag[5]
    perm = rng.permutation(g.n_nodes)
    inv = np.argsort(perm)
    permuted = GraphBatch.from_graphs([inv[g.edges]], [g.n_nodes], node_labels=[g.node_labels[perm]])
    kernel = WLSubtreeKernel(h=4)
    a = kernel.features(mutag[5:6])
    b = kernel.features(permuted)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.values, b.values)


def test_out_of_sample_graphs_get_in_sample_features(mutag):
    kernel = WLSubtreeKernel(h=3)
    small_state = kernel.fit(mutag[:20], seed=0)
    full_state = kernel.fit(mutag, seed=0)
    held_out = mutag[100:120]
    a = kernel.embed(held_out, small_state)
    b = kernel.embed(held_out, full_state)
    assert np.array_equal(a.keys, b.keys) and np.array_equal(a.values, b.values)
    assert kernel.unseen_fraction(a, small_state) > 0  # some labels were not in the sample
    assert kernel.unseen_fraction(b, full_state) == 0


def test_invalid_h_rejected():
    from gramdist.errors import JobError
    from gramdist.kernels import make_kernel

    with pytest.raises(JobError, match="h"):
        make_kernel("wl", h=-1)
    with pytest.raises(JobError, match="unknown parameter 'depth'"):
        make_kernel("wl", depth=2)
