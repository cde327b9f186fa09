"""Neighbourhood hash kernel: a per-node brute force of the paper's hashes, GraKeL with our
initial bit labels injected, and the contract (tiles, seeds, out-of-sample, engine)."""

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
from gramdist.kernels.nhash.kernel import code_permutation, rot
from gramdist.testing import adjacency_lists, gram_by_tiles, min_eigenvalue_ratio, random_labelled_graphs

ROOT = Path(__file__).resolve().parents[1]


def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3) -> GraphBatch:
    return random_labelled_graphs(n, seed, max_nodes, n_labels)


def py_rot(x: int, o: int, bits: int) -> int:
    mask = (1 << bits) - 1
    o %= bits
    x &= mask
    return ((x << o) | (x >> (bits - o))) & mask if o else x


def brute_force_nh(graphs: GraphBatch, codes: dict, R: int, bits: int, count_sensitive: bool) -> np.ndarray:
    """Hido & Kashima with Python integers: per node ROT_1(own) xor the (count-sensitive) hash of
    the neighbours; κ = c / (n + n' - c) with c the multiset intersection; average of levels 1..R."""
    levels = []  # levels[g] = list of Counters, one per r
    for g in graphs:
        adj = adjacency_lists(g)
        lab = [codes[int(x)] for x in g.node_labels]
        per = []
        for _ in range(R):
            new = []
            for v in range(g.n_nodes):
                x = py_rot(lab[v], 1, bits)
                if count_sensitive:
                    for label, o in Counter(lab[u] for u in adj[v]).items():
                        x ^= py_rot(label ^ o, o, bits)
                else:
                    for u in adj[v]:
                        x ^= lab[u]
                new.append(x)
            lab = new
            per.append(Counter(lab))
        levels.append(per)
    n = len(graphs)
    k = np.zeros((n, n))
    sizes = graphs.nodes_per_graph
    for i in range(n):
        for j in range(n):
            total = 0.0
            for r in range(R):
                c = sum((levels[i][r] & levels[j][r]).values())
                den = sizes[i] + sizes[j] - c
                total += c / den if den else 0.0
            k[i, j] = total / R
    return k


@pytest.mark.parametrize("nh_type", ["simple", "count_sensitive"])
@pytest.mark.parametrize("bits", [8, 64])
def test_matches_brute_force_on_random_graphs(nh_type, bits):
    graphs = random_graphs(25, seed=bits)
    kernel = make_kernel("nh", R=3, nh_type=nh_type, bits=bits)
    state = kernel.fit(graphs, 11)
    codes = {lab: int(kernel.initial_codes(np.array([lab]), state)[0]) for lab in range(3)}
    ours = gram_by_tiles(kernel, state, graphs, 6)
    expected = brute_force_nh(graphs, codes, 3, bits, nh_type == "count_sensitive")
    np.testing.assert_allclose(ours, expected, rtol=1e-15, atol=0)


def test_initial_codes_are_a_seeded_bijection():
    for bits in (1, 3, 8, 13):
        x = np.arange(1 << bits, dtype=np.uint64)
        for seed in (0, 1, 2**40):
            y = code_permutation(x, bits, seed)
            assert np.array_equal(np.sort(y), x)  # a permutation of the b-bit words
        assert not np.array_equal(code_permutation(x, bits, 0), code_permutation(x, bits, 1)) or bits == 1
    x = np.arange(10_000, dtype=np.uint64)
    assert len(np.unique(code_permutation(x, 64, 5))) == len(x)
    # ROT on b bits against the integer reference
    vals = np.array([0, 1, 5, 200, 255], dtype=np.uint64)
    for o in range(0, 20):
        assert rot(vals, o, 8).tolist() == [py_rot(int(v), o, 8) for v in vals]
    big = np.array([0x8000000000000001, 3], dtype=np.uint64)
    assert rot(big, 1, 64).tolist() == [3, 6] and rot(big, 64, 64).tolist() == big.tolist()


def test_hand_worked_example():
    # Two single edges a-a and a-b, bits = 8, simple NH, R = 1. With codes l(a), l(b):
    # a-a: both nodes ROT(a) ^ a; a-b: ROT(a) ^ b and ROT(b) ^ a. The first graph's two labels
    # are equal, the second's differ from them (for distinct codes): c = 0, K = 0; K(G, G) = 1.
    graphs = GraphBatch.from_graphs([np.array([[0, 1]]), np.array([[0, 1]])], [2, 2],
                                    node_labels=[np.array([0, 0]), np.array([0, 1])])
    kernel = make_kernel("nh", R=1, bits=8)
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    # a graph against a copy with one extra isolated node labelled a: level-1 labels
    # {x, x} vs {x, x, ROT(a)}: c = 2, K = 2 / (2 + 3 - 2) = 2/3
    graphs = GraphBatch.from_graphs([np.array([[0, 1]]), np.array([[0, 1]])], [2, 3],
                                    node_labels=[np.array([0, 0]), np.array([0, 0, 0])])
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 2)
    assert k[0, 1] == 2 / 3


def without_isolated_graphs(graphs: GraphBatch) -> GraphBatch:
    deg = np.bincount(graphs.global_edges.ravel(), minlength=graphs.n_nodes)
    iso = np.bincount(graphs.node_graph[deg == 0], minlength=len(graphs))
    return graphs[np.flatnonzero(iso == 0)]


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
@pytest.mark.parametrize("nh_type", ["simple", "count_sensitive"])
def test_equals_grakel_with_our_bit_labels(name, nh_type, dataset_dir):
    """GraKeL draws the initial words with ``random_state.choice``; a RandomState whose
    ``choice`` returns our words (in the order GraKeL assigns them) makes it compute our Gram.
    GraKeL fails on graphs with isolated nodes ("vertex not inside edge dictionary"): ENZYMES
    is compared on its 592 graphs without any."""
    pytest.importorskip("grakel")
    from grakel.kernels import NeighborhoodHash

    from gramdist.datasets import read_tu

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = without_isolated_graphs(read_tu(dataset_dir(name)))
    kernel = make_kernel("nh", R=3, nh_type=nh_type, bits=8)
    state = kernel.fit(graphs, 5)
    ours = gram_by_tiles(kernel, state, graphs, 100)
    labels: set = set()
    for g in graphs:  # the same set, built the same way, iterates in GraKeL's order
        labels |= set(int(v) for v in g.node_labels)
    order = list(labels)
    words = kernel.initial_codes(np.array(order), state)

    class OurWords(np.random.RandomState):
        def choice(self, a, size=None, replace=True, p=None):
            assert size == len(order) and not replace
            return np.array(words, dtype=np.int64)

    gk = NeighborhoodHash(R=3, nh_type=nh_type, bits=8, random_state=OurWords(0))
    theirs = gk.fit_transform(grakel_labelled_graphs(graphs))
    assert gk._labels_hash_dict == {lab: int(w) for lab, w in zip(order, words)}
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=0)


def test_tiles_psd_seed_permutation_and_out_of_sample(mutag):
    kernel = make_kernel("nh", R=3, nh_type="count_sensitive")
    state = kernel.fit(mutag[:40], 3)
    a = gram_by_tiles(kernel, state, mutag, 64)
    assert np.array_equal(a, gram_by_tiles(kernel, state, mutag, 29))
    assert np.array_equal(np.diag(a), np.ones(len(mutag)))
    assert min_eigenvalue_ratio(a) >= -1e-10
    # the state is only the seed: same seed, same bits; another seed, other words, almost the same Gram
    assert np.array_equal(gram_by_tiles(kernel, kernel.fit(mutag, 3), mutag, 64), a)
    other = kernel.hashed_labels(mutag[:5], kernel.fit(mutag, 4))[0]
    assert not np.array_equal(other, kernel.hashed_labels(mutag[:5], state)[0])
    assert np.abs(gram_by_tiles(kernel, kernel.fit(mutag, 4), mutag, 64) - a).max() < 1e-9
    new, train = kernel.embed(mutag[150:], state), kernel.embed(mutag[:150], state)
    assert np.array_equal(kernel.pairwise(new, train, state), a[150:, :150])
    assert np.array_equal(kernel.self_similarity(new, state), np.diag(a)[150:])
    rng = np.random.default_rng(7)
    edges, sizes, labels = [], [], []
    for g in mutag:
        perm = rng.permutation(g.n_nodes)
        edges.append(np.argsort(perm)[g.edges])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[perm])
    permuted = GraphBatch.from_graphs(edges, sizes, node_labels=labels)
    assert np.array_equal(gram_by_tiles(kernel, state, permuted, 64), a)
    assert not kernel.has_feature_vectors  # a ratio: no finite feature map


def test_empty_graph_and_no_labels():
    graphs = GraphBatch.from_graphs([np.zeros((0, 2), int), np.array([[0, 1]])], [0, 2])
    kernel = make_kernel("nh")
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 1)
    assert k.tolist() == [[0.0, 0.0], [0.0, 1.0]]


def test_engine_and_job_file(mutag, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    from gramdist import GramTransformer, compute_gram
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import open_gram
    from gramdist.jobs import load_job

    dataset_dir("MUTAG")
    kernel = make_kernel("nh", R=2)
    ref = gram_by_tiles(kernel, kernel.fit(mutag, 0), mutag, 64)
    assert np.array_equal(compute_gram(mutag, kernel="nh", R=2, seed=0), ref)
    k = GramTransformer(kernel="nh", kernel_params={"R": 2}, seed=0).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k, ref[100:, :100])
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        res = run_job(load_job(ROOT / "jobs" / "mutag-nh.yaml"), out=str(tmp_path / "k.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert res.complete and open_gram(tmp_path / "k.zarr")[0].shape == (188, 188)


def test_invalid_parameters():
    from gramdist.errors import JobError

    with pytest.raises(JobError, match="nh_type"):
        make_kernel("nh", nh_type="fancy")
    with pytest.raises(JobError, match="bits"):
        make_kernel("nh", bits=65)
    with pytest.raises(JobError, match="R"):
        make_kernel("nh", R=0)
