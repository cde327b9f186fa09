"""ODD_ST_h: two independent references, invariances, tiling, validation."""

from __future__ import annotations

import collections
from collections import deque

import numpy as np
import pytest
from test_nspdk import permute, random_batch

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.features.odd import ODDSTKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


def bfs_dag(g, v: int, h: int) -> tuple[dict, dict]:
    adj = collections.defaultdict(set)
    for a, b in g.edges.tolist():
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    dist, q = {v: 0}, deque([v])
    while q:
        u = q.popleft()
        if dist[u] < h:
            for w in adj[u]:
                if w not in dist:
                    dist[w] = dist[u] + 1
                    q.append(w)
    children = {u: [w for w in adj[u] if w in dist and dist[w] == dist[u] + 1] for u in dist}
    return dist, children


def odd_definition(g, h: int, lam: float) -> dict:
    """phi(G) from the module docstring's formula: every DAG, every cut depth j, every node."""
    lab = g.node_labels.tolist()
    feats: dict = collections.defaultdict(float)
    for v in range(g.n_nodes):
        dist, children = bfs_dag(g, v, h)

        def tree(u, j, dist=dist, children=children):
            if dist[u] == j:
                return (lab[u], ())
            return (lab[u], tuple(sorted(tree(w, j) for w in children[u])))

        def size(t):
            return 1 + sum(size(c) for c in t[1])

        for j in range(max(dist.values()) + 1):
            for u in dist:
                if dist[u] <= j:
                    t = tree(u, j)
                    feats[t] += lam ** (size(t) / 2)
    return dict(feats)


def odd_frequency_scheme(g, h: int, lam: float) -> dict:
    """The authors' bookkeeping (scikit-learn-graph ODDSTGraphKernel): per DAG node, one
    feature per truncation depth up to its height, weighted (frequency + 1) * sqrt(lam^size),
    a leaf's frequency being maxLevel - depth and a composite's the minimum over its children."""
    lab = g.node_labels.tolist()
    feats: dict = collections.defaultdict(float)
    for v in range(g.n_nodes):
        dist, children = bfs_dag(g, v, h)
        max_level = max(dist.values())
        enc: dict = {}
        freq: dict = {}
        sizes: dict = {}
        for u in sorted(dist, key=lambda x: -dist[x]):  # reverse topological order
            height = max((len(enc[c]) for c in children[u]), default=0)
            enc[u], freq[u] = [], []
            for depth in range(height + 1):
                if depth == 0:
                    e, f, s = (lab[u], ()), (max_level - dist[u] if height == 0 else 0), 1
                else:
                    kids = [(enc[c][min(len(enc[c]), depth) - 1], freq[c][min(len(freq[c]), depth) - 1])
                            for c in children[u]]
                    e = (lab[u], tuple(sorted(k[0] for k in kids)))
                    f = min(k[1] for k in kids)
                    s = 1 + sum(sizes[k[0]] for k in kids)
                sizes[e] = s
                enc[u].append(e)
                freq[u].append(f)
                feats[e] += (f + 1.0) * lam ** (s / 2)
    return dict(feats)


def gram_of(feats: list[dict]) -> np.ndarray:
    return np.array([[sum(v * fb.get(k, 0.0) for k, v in fa.items()) for fb in feats] for fa in feats])


@pytest.mark.parametrize("h,lam", [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0), (3, 0.8), (4, 1.6)])
def test_matches_both_references_random(h, lam):
    batch = random_batch(2, n_graphs=25, n_max=13, edge_labels=False)
    k = ODDSTKernel(h=h, lam=lam)
    f = k.features(batch)
    got = k.pairwise(f, f, None)
    defn = [odd_definition(g, h, lam) for g in batch]
    freq = [odd_frequency_scheme(g, h, lam) for g in batch]
    # the two references agree with each other feature by feature...
    for a, b in zip(defn, freq):
        assert a.keys() == b.keys()
        for key in a:
            assert a[key] == pytest.approx(b[key], rel=1e-12)
    # ...and with the vectorised kernel, value by value and feature count by feature count
    np.testing.assert_allclose(got, gram_of(defn), rtol=1e-12)
    assert np.diff(f.indptr).tolist() == [len(x) for x in defn]
    if lam == 1.0:
        assert np.array_equal(got, gram_of(defn))


def test_matches_reference_mutag(mutag):
    batch = mutag[:25]
    k = ODDSTKernel(h=3, lam=1.2)
    f = k.features(batch)
    np.testing.assert_allclose(k.pairwise(f, f, None),
                               gram_of([odd_definition(g, 3, 1.2) for g in batch]), rtol=1e-12)


def test_hand_worked_path():
    # path a-b-a (labels 0,1,0), h = 1. DAGs: from an end: end->mid (L=1); from mid: mid->{end,end}.
    # j=0: single nodes {0},{1},{0}; j=1 from an end: end->(mid) tree 0(1), plus mid leaf 1;
    # from mid: 1(0,0), two leaves 0.  lam = 1: counts below.
    g = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])], [3], node_labels=[np.array([0, 1, 0])])
    k = ODDSTKernel(h=1)
    f = k.features(g)
    # features: leaf0: 2 (j=0 ends) + 2 (j=1 from mid), leaf1: 1 (j=0 mid) + 2 (j=1 from ends),
    # 0(1): 2, 1(0,0): 1  ->  K = 16 + 9 + 4 + 1
    assert sorted(f.values.tolist()) == [1.0, 2.0, 3.0, 4.0]
    assert k.pairwise(f, f, None)[0, 0] == 30.0


def test_node_permutation_invariance(mutag):
    batch = mutag[:40]
    k = ODDSTKernel(h=3, lam=0.8)
    f1, f2 = k.features(batch), k.features(permute(batch, 3))
    assert np.array_equal(f1.indptr, f2.indptr) and np.array_equal(f1.keys, f2.keys)
    np.testing.assert_allclose(f1.values, f2.values, rtol=1e-14)


def test_tile_size_invariance_chunk_independence_psd(mutag):
    batch = mutag[:40]
    k = ODDSTKernel(h=3, lam=1.4)
    state = k.fit(batch, 0)
    ref = gram_by_tiles(k, state, batch, tile=40)
    for tile in (1, 6, 13):
        assert np.array_equal(gram_by_tiles(k, state, batch, tile=tile), ref)
    whole = k.features(batch)
    for i in (0, 11, 39):
        alone = k.features(batch[i : i + 1])
        assert np.array_equal(alone.keys, whole[i].keys) and np.array_equal(alone.values, whole[i].values)
    assert min_eigenvalue_ratio(ref) > -1e-10


def test_validation():
    with pytest.raises(JobError, match="h"):
        make_kernel("odd", h=-1)
    with pytest.raises(JobError, match="lam"):
        make_kernel("odd", lam=0)
    assert isinstance(make_kernel("odd", h=2, lam=1.2), ODDSTKernel)
