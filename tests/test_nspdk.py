"""NSPDK: brute-force reference, invariances, tiling, cross-process stability."""

from __future__ import annotations

import collections
import hashlib
import math
import os
import subprocess
import sys

import networkx as nx
import numpy as np
import pytest

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.features.nspdk import NSPDKKernel, distance_patterns, neighbourhood_codes
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


# ---------------------------------------------------------------- helpers
def random_batch(seed: int, n_graphs: int = 25, n_max: int = 12, n_labels: int = 3,
                 edge_labels: bool = True) -> GraphBatch:
    rng = np.random.default_rng(seed)
    sizes, edges = [], []
    for _ in range(n_graphs):
        n = int(rng.integers(1, n_max))
        e = rng.integers(0, n, (int(rng.integers(0, 2 * n + 1)), 2))
        sizes.append(n)
        edges.append(e[e[:, 0] != e[:, 1]])
    return GraphBatch.from_graphs(
        edges, sizes, node_labels=[rng.integers(0, n_labels, n) for n in sizes],
        edge_labels=[rng.integers(0, 2, len(e)) for e in edges] if edge_labels else None)


def permute(batch: GraphBatch, seed: int) -> GraphBatch:
    """Same graphs with the nodes of each graph renumbered at random (edges shuffled too)."""
    rng = np.random.default_rng(seed)
    edges, labels, elabels = [], [], []
    for g in batch:
        p = rng.permutation(g.n_nodes)
        e = p[g.edges.astype(np.int64)]
        order = rng.permutation(len(e))
        e = e[order][:, ::-1] if len(e) else e
        edges.append(e)
        lab = np.empty(g.n_nodes, np.int64)
        lab[p] = g.node_labels
        labels.append(lab)
        elabels.append(g.edge_labels[order] if g.edge_labels is not None else None)
    return GraphBatch.from_graphs(edges, batch.nodes_per_graph, node_labels=labels,
                                  edge_labels=elabels if batch.edge_labels is not None else None)


def _nx_graph(g) -> nx.Graph:
    el = g.edge_labels.tolist() if g.edge_labels is not None else [0] * len(g.edges)
    G = nx.Graph()
    G.add_nodes_from(range(g.n_nodes))
    for (a, b), lb in zip(g.edges.tolist(), el):
        G.add_edge(a, b, label=lb)
    return G


def exact_code(G: nx.Graph, lab: list, v: int, rho: int) -> tuple:
    """Costa & De Grave's invariant of N_rho(v), as a plain (unhashed) canonical tuple.

    Ball from distances in the whole graph; distances between members inside the induced
    subgraph; vertex label = (distance from the root, label, sorted (distance, label) pairs over
    all members); subgraph = (radius, sorted vertex labels, sorted edges (lo, hi, edge label)).
    """
    ball = list(nx.single_source_shortest_path_length(G, v, cutoff=rho))
    sub = G.subgraph(ball)
    sd = dict(nx.all_pairs_shortest_path_length(sub))
    vl = {w: (sd[v][w], lab[w], tuple(sorted((sd[w][u], lab[u]) for u in ball))) for w in ball}
    edges = tuple(sorted((min(vl[a], vl[b]), max(vl[a], vl[b]), sub[a][b]["label"]) for a, b in sub.edges()))
    return rho, tuple(sorted(vl.values())), edges


def old_code(G: nx.Graph, lab: list, v: int, rho: int) -> tuple:
    """The coarser encoding of the previous version: (distance, label, neighbour multiset)."""
    dv = nx.single_source_shortest_path_length(G, v, cutoff=rho)
    nodes = []
    for w in dv:
        nbrs = tuple(sorted((dv[u], lab[u], G[w][u]["label"]) for u in G[w] if u in dv))
        nodes.append((dv[w], lab[w], nbrs))
    return tuple(sorted(nodes))


def nspdk_reference(g, r: int, d: int, normalize: bool, sorted_pairs: bool = False) -> dict:
    """Features of one graph straight from the definition (networkx BFS, canonical tuples).

    Every ordered root pair (v, w) at distance delta counts once under the key (code v, code w);
    ``sorted_pairs`` keys it by the sorted pair of codes instead, as Costa's reference
    implementations do."""
    G = _nx_graph(g)
    lab = g.node_labels.tolist()
    codes = {(v, rho): exact_code(G, lab, v, rho) for v in range(g.n_nodes) for rho in range(r + 1)}
    feats: collections.Counter = collections.Counter()
    for v in range(g.n_nodes):
        for w, delta in nx.single_source_shortest_path_length(G, v, cutoff=d).items():
            for rho in range(r + 1):
                pair = (codes[v, rho], codes[w, rho])
                feats[(rho, delta) + (tuple(sorted(pair)) if sorted_pairs else pair)] += 1
    if not normalize:
        return dict(feats)
    norms: dict = collections.defaultdict(float)
    for key, c in feats.items():
        norms[key[:2]] += c * c
    return {key: c / math.sqrt(norms[key[:2]]) for key, c in feats.items()}


def reference_gram(batch: GraphBatch, r: int, d: int, normalize: bool) -> np.ndarray:
    feats = [nspdk_reference(g, r, d, normalize) for g in batch]
    return np.array([[sum(v * fb.get(k, 0.0) for k, v in fa.items()) for fb in feats] for fa in feats])


# ---------------------------------------------------------------- tests
@pytest.mark.parametrize("r,d,normalize", [(0, 0, False), (1, 2, False), (2, 3, True), (3, 4, False)])
def test_matches_brute_force_random(r, d, normalize):
    batch = random_batch(1)
    k = NSPDKKernel(r=r, d=d, normalize_blocks=normalize)
    f = k.embed(batch, k.fit(batch, 0))
    got = k.pairwise(f, f, None)
    ref = reference_gram(batch, r, d, normalize)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12)
    # same number of distinct features per graph: no merged or split neighbourhood codes
    assert np.diff(f.indptr).tolist() == [len(nspdk_reference(g, r, d, normalize)) for g in batch]
    if not normalize:
        assert np.array_equal(got, ref)  # integer counts: exact


def test_matches_brute_force_mutag(mutag):
    batch = mutag[:30]
    k = NSPDKKernel(r=2, d=3)
    f = k.embed(batch, k.fit(batch, 0))
    np.testing.assert_allclose(k.pairwise(f, f, None), reference_gram(batch, 2, 3, True), rtol=1e-12)


def test_codes_distinguish_edge_labels_and_structure():
    # a path a-b-c vs a triangle a-b-c: same node multiset, different neighbourhoods
    path = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])], [3], node_labels=[np.array([0, 0, 0])])
    tri = GraphBatch.from_graphs([np.array([[0, 1], [1, 2], [0, 2]])], [3], node_labels=[np.array([0, 0, 0])])
    k = NSPDKKernel(r=1, d=0, normalize_blocks=False)
    fp, ft = k.features(path), k.features(tri)
    # radius 0 (single labelled nodes) matches, radius 1 never does
    assert k.pairwise(fp, ft, None)[0, 0] == 9.0
    e1 = GraphBatch.from_graphs([np.array([[0, 1]])], [2], node_labels=[np.array([0, 1])],
                                edge_labels=[np.array([0])])
    e2 = GraphBatch.from_graphs([np.array([[0, 1]])], [2], node_labels=[np.array([0, 1])],
                                edge_labels=[np.array([1])])
    assert k.pairwise(k.features(e1), k.features(e2), None)[0, 0] == 2.0  # radius-0 only


def test_node_permutation_invariance(mutag):
    batch = mutag[:40]
    k = NSPDKKernel(r=3, d=4)
    f1, f2 = k.features(batch), k.features(permute(batch, 7))
    assert np.array_equal(f1.indptr, f2.indptr)
    assert np.array_equal(f1.keys, f2.keys)
    np.testing.assert_allclose(f1.values, f2.values, rtol=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_node_permutation_invariance_dense_random(seed):
    # denser graphs than molecules: many cycles, so subgraph distances differ from graph ones
    batch = random_batch(10 + seed, n_graphs=15, n_max=16, n_labels=2)
    k = NSPDKKernel(r=3, d=3)
    ref = k.features(batch)
    for p in range(3):
        got = k.features(permute(batch, 100 * seed + p))
        assert np.array_equal(got.indptr, ref.indptr) and np.array_equal(got.keys, ref.keys)
        assert np.array_equal(got.values, ref.values)


def _codes(edge_lists: list, sizes: list, r: int) -> list[np.ndarray]:
    """Neighbourhood codes (r+1, n_g) of each graph, unlabelled nodes and edges."""
    batch = GraphBatch.from_graphs([np.array(e) for e in edge_lists], sizes,
                                   node_labels=[np.zeros(n, np.int64) for n in sizes])
    codes = neighbourhood_codes(batch, r, distance_patterns(batch.adjacency(), r))
    return np.split(codes, np.cumsum(sizes)[:-1], axis=1)


def test_distances_are_measured_inside_the_neighbourhood_subgraph():
    # In the 6-cycle the radius-2 ball of node 0 is the path 2-1-0-5-4 (node 3 is at distance 3):
    # inside that subgraph d(2, 4) = 4, in the whole cycle 2. The rooted subgraph is the path on
    # 5 nodes rooted at its centre, so both must get the same code (an invariant of N_2(v)).
    c6 = [(i, (i + 1) % 6) for i in range(6)]
    p5 = [(0, 1), (1, 2), (2, 3), (3, 4)]
    cyc, path = _codes([c6, p5], [6, 5], 2)
    assert len(set(cyc[2].tolist())) == 1  # all nodes of the cycle alike
    assert cyc[2, 0] == path[2, 2] and cyc[1, 0] == path[1, 2]
    assert path[2, 2] not in (path[2, 1], path[2, 0])
    # and the kernel sees it: radius-2 self pairs of C6 and P5 share exactly the centre's code
    k = NSPDKKernel(r=2, d=0, normalize_blocks=False)
    b = GraphBatch.from_graphs([np.array(c6), np.array(p5)], [6, 5],
                               node_labels=[np.zeros(6, np.int64), np.zeros(5, np.int64)])
    f = k.features(b)
    rad2 = [f.keys[f.indptr[i]:f.indptr[i + 1]] for i in range(2)]
    rad2 = [x[(x & np.uint64(0xFF)) == 2] for x in rad2]
    assert len(np.intersect1d(rad2[0], rad2[1])) == 1
    # the reference agrees
    G, P = nx.cycle_graph(6), nx.path_graph(5)
    nx.set_edge_attributes(G, 0, "label")
    nx.set_edge_attributes(P, 0, "label")
    assert exact_code(G, [0] * 6, 0, 2) == exact_code(P, [0] * 5, 2, 2)


def test_separates_neighbourhoods_that_the_old_encoding_conflated():
    # root 0; 1, 2 at distance 1; 3, 4 below 1 and 5, 6 below 2. Graph A joins 3-5 and 4-6,
    # graph B joins 3-4 and 5-6: every node has the same (distance, neighbour distances), so
    # the previous (distance, label, neighbour multiset) encoding could not tell them apart,
    # but d(3, 4) is 3 in A and 1 in B, so the distance-vector labels differ.
    base = [(0, 1), (0, 2), (1, 3), (1, 4), (2, 5), (2, 6)]
    ea, eb = base + [(3, 5), (4, 6)], base + [(3, 4), (5, 6)]
    ga, gb = nx.Graph(ea), nx.Graph(eb)
    nx.set_edge_attributes(ga, 0, "label")
    nx.set_edge_attributes(gb, 0, "label")
    assert not nx.is_isomorphic(ga, gb)
    lab = [0] * 7
    assert old_code(ga, lab, 0, 2) == old_code(gb, lab, 0, 2)
    assert exact_code(ga, lab, 0, 2) != exact_code(gb, lab, 0, 2)
    ca, cb = _codes([ea, eb], [7, 7], 2)
    assert ca[1, 0] == cb[1, 0]  # radius 1: the same star
    assert ca[2, 0] != cb[2, 0]


@pytest.mark.parametrize("switch, d, batch", [
    ("_F32_MAX_BALL", 2, "mutag"),     # every dense batch in float64
    ("_DENSE_MAX_BALL", 2, "random6"),  # every ball through csgraph BFS
    ("_TABLE_MAX", 3, "random4"),       # binary search instead of the dense ball table
])
def test_fallback_paths_give_the_same_features(switch, d, batch, mutag, monkeypatch):
    """Each fallback (float64 distances, per-ball BFS, searched lookup) equals the main path."""
    import gramdist.kernels.features.nspdk as mod

    graphs = {"mutag": lambda: mutag[:15], "random6": lambda: random_batch(6, n_graphs=10, n_max=14),
              "random4": lambda: random_batch(4, n_graphs=12, n_max=14)}[batch]()
    ref = mod.NSPDKKernel(r=3, d=d).features(graphs)
    monkeypatch.setattr(mod, switch, 0)
    got = mod.NSPDKKernel(r=3, d=d).features(graphs)
    assert np.array_equal(got.keys, ref.keys) and np.array_equal(got.values, ref.values)


def test_big_ball_matches_brute_force():
    # a wheel with 36 spokes plus chords: radius-2 balls hold every node, s > 8 size classes
    n = 37
    edges = [(0, i) for i in range(1, n)] + [(i, i % (n - 1) + 1) for i in range(1, n)]
    edges += [(i, i + 7) for i in range(1, n - 7, 5)]
    rng = np.random.default_rng(5)
    batch = GraphBatch.from_graphs([np.array(edges)], [n], node_labels=[rng.integers(0, 3, n)],
                                   edge_labels=[rng.integers(0, 2, len(edges))])
    k = NSPDKKernel(r=2, d=1, normalize_blocks=False)
    f = k.features(batch)
    ref = nspdk_reference(batch[0], 2, 1, False)
    assert np.array_equal(k.pairwise(f, f, None), reference_gram(batch, 2, 1, False))
    assert len(f.keys) == len(ref)


def test_embedding_independent_of_chunk(mutag):
    batch = mutag[:30]
    k = NSPDKKernel(r=2, d=2)
    whole = k.features(batch)
    for i in (0, 7, 29):
        alone = k.features(batch[i : i + 1])
        row = whole[i : i + 1]
        assert np.array_equal(alone.keys, row.keys) and np.array_equal(alone.values, row.values)


def test_tile_size_invariance_and_psd(mutag):
    batch = mutag[:45]
    k = NSPDKKernel(r=2, d=3)
    state = k.fit(batch, 0)
    ref = gram_by_tiles(k, state, batch, tile=45)
    for tile in (1, 8, 17):
        # bitwise: K(a, b) is the same arithmetic whatever else is in the tile
        assert np.array_equal(gram_by_tiles(k, state, batch, tile=tile), ref)
    # (normalised Grams differ in the last bit only through the order of the two divisions
    # in normalize_block for mirrored entries)
    norm = gram_by_tiles(k, state, batch, tile=8, normalize=True)
    np.testing.assert_allclose(norm, gram_by_tiles(k, state, batch, tile=45, normalize=True), rtol=1e-15)
    assert min_eigenvalue_ratio(norm) > -1e-10
    np.testing.assert_allclose(np.diag(norm), 1.0)


def test_block_normalisation():
    batch = random_batch(3, n_graphs=10)
    k = NSPDKKernel(r=2, d=2)
    f = k.features(batch)
    # each non-empty (radius, distance) block has unit norm, so K(G, G) = #non-empty blocks
    raw = NSPDKKernel(r=2, d=2, normalize_blocks=False).features(batch)
    for i in range(len(batch)):
        blocks = {int(x) for x in (raw[i].keys & np.uint64(0xFF))}
        assert k.self_similarity(f[i : i + 1], None)[0] == pytest.approx(len(blocks), rel=1e-12)


def test_small_blocks_give_same_features(mutag, monkeypatch):
    import gramdist.kernels.features.nspdk as mod

    batch = mutag[:20]
    k = NSPDKKernel(r=2, d=3)
    ref = k.features(batch)
    monkeypatch.setattr(mod, "BLOCK_NODES", 50)  # forces many internal blocks
    got = k.features(batch)
    assert np.array_equal(got.keys, ref.keys) and np.array_equal(got.values, ref.values)


_CHILD = """
import hashlib, sys
import numpy as np
from gramdist.datasets import read_tu
from gramdist.kernels.features.nspdk import NSPDKKernel, distance_patterns, neighbourhood_codes
from gramdist.kernels.features.odd import ODDSTKernel
b = read_tu(sys.argv[1])[:25]
h = hashlib.sha256()
for k in (NSPDKKernel(r=2, d=3), ODDSTKernel(h=3, lam=0.8)):
    f = k.features(b)
    h.update(f.indptr.tobytes()); h.update(f.keys.tobytes()); h.update(f.values.tobytes())
print(h.hexdigest())
"""


def test_same_features_in_processes_with_different_hash_seeds(dataset_dir):
    folder = str(dataset_dir("MUTAG"))
    digests = set()
    for seed in ("0", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        out = subprocess.run([sys.executable, "-c", _CHILD, folder], env=env, check=True,
                             capture_output=True, text=True)
        digests.add(out.stdout.strip())
    assert len(digests) == 1
    # and the parent process agrees too
    from gramdist.datasets import read_tu
    from gramdist.kernels.features.odd import ODDSTKernel

    b = read_tu(folder)[:25]
    h = hashlib.sha256()
    for k in (NSPDKKernel(r=2, d=3), ODDSTKernel(h=3, lam=0.8)):
        f = k.features(b)
        h.update(f.indptr.tobytes())
        h.update(f.keys.tobytes())
        h.update(f.values.tobytes())
    assert digests == {h.hexdigest()}


def test_empty_and_edgeless_graphs():
    batch = GraphBatch.from_graphs([np.zeros((0, 2)), np.zeros((0, 2))], [1, 3],
                                   node_labels=[np.array([2]), np.array([2, 2, 5])])
    k = NSPDKKernel(r=2, d=2, normalize_blocks=False)
    f = k.features(batch)
    # edgeless: only (rho, 0) self pairs; radius 0 and 1, 2 codes coincide per label
    assert k.pairwise(f, f, None).tolist() == [[3.0, 6.0], [6.0, 3 * (4 + 1)]]


def test_validation():
    with pytest.raises(JobError, match="r"):
        make_kernel("nspdk", r=-1)
    with pytest.raises(JobError, match="normalize_blocks"):
        make_kernel("nspdk", normalize_blocks="yes")
    with pytest.raises(JobError, match="unknown parameter"):
        make_kernel("nspdk", h=2)
    assert isinstance(make_kernel("nspdk", r=1, d=2), NSPDKKernel)


# ---------------------------------------------------------------- the shared sparse embedding
def test_sparse_features_from_pairs_dot_and_slicing():
    import pickle

    from gramdist.kernels.hashing import mix
    from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms

    rng = np.random.default_rng(0)
    n_graphs, m = 40, 6000
    g = rng.integers(0, n_graphs - 1, m)  # the last graph stays empty
    ids = rng.integers(0, 400, m)
    k = mix(ids)  # a bijection: spread 64-bit keys, one per id
    v = rng.integers(1, 4, m).astype(float)
    f = SparseFeatures.from_pairs(g, k, v, n_graphs)
    dense = np.zeros((n_graphs, 400))
    np.add.at(dense, (g, ids), v)
    full = dot(f, f)
    assert np.array_equal(full, dense @ dense.T)  # integer values: exact
    assert np.array_equal(sq_norms(f), np.diag(full))
    assert all(np.all(f.row(i)[0][1:] > f.row(i)[0][:-1]) for i in range(n_graphs))  # sorted rows
    # any pair of row subsets gives bitwise the same entries, scalar counts likewise
    w = rng.random(m)
    fw = SparseFeatures.from_pairs(g, k, w, n_graphs)
    ref = dot(fw, fw)
    for a, b in [(slice(0, 7), slice(3, 40)), (slice(5, 6), slice(5, 6)), (slice(10, 30), slice(0, 40))]:
        assert np.array_equal(dot(fw[a], fw[b]), ref[a, b])
    idx = np.array([5, 2, 2, 39])
    assert np.array_equal(dot(fw.take(idx), fw), ref[idx])
    assert np.array_equal(dot(SparseFeatures.concat([fw[:10], fw[10:]]), fw), ref)
    assert np.array_equal(SparseFeatures.from_pairs(g, k, 1.0, n_graphs).values,
                          SparseFeatures.from_pairs(g, k, np.ones(m), n_graphs).values)
    fw._sorted_keys()
    clone = pickle.loads(pickle.dumps(fw))
    assert clone._cache == {} and np.array_equal(dot(clone, clone), ref)


def test_ordered_pairs_weigh_identical_pairs_twice_against_the_reference_implementation():
    """K_ordered = (K_reference + K_same) / 2 per (radius, distance) block: the documented
    difference between the paper's ordered relation (implemented) and the sorted-pair keys of
    the reference implementations."""
    batch = random_batch(4, n_graphs=12, n_max=10, n_labels=2)
    r, d = 2, 3
    kern = NSPDKKernel(r=r, d=d, normalize_blocks=False)
    f = kern.embed(batch, kern.fit(batch, 0))
    ours = kern.pairwise(f, f, None)
    ref = [nspdk_reference(g, r, d, False, sorted_pairs=True) for g in batch]
    ordered = [nspdk_reference(g, r, d, False) for g in batch]
    n = len(batch)
    k_ref, k_same = np.zeros((n, n)), np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            k_ref[i, j] = sum(c * ref[j].get(key, 0) for key, c in ref[i].items())
            k_same[i, j] = sum(c * ordered[j].get(key, 0) for key, c in ordered[i].items() if key[2] == key[3])
    np.testing.assert_array_equal(ours, (k_ref + k_same) / 2)
    # the weighting differs on real pairs of different neighbourhoods: the kernels are not equal
    assert np.any(k_ref != ours) and np.all(k_ref >= ours)
