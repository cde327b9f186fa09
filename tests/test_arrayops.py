"""Array primitives the engine and the kernels share: normalisation, mirroring, stable grouping."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.arrayops import mirror_upper, normalize_block, stable_order


@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (130, 300), (300, 129)])
def test_normalize_block_matches_the_definition(shape):
    rng = np.random.default_rng(0)
    block = rng.random(shape)
    dr, dc = rng.random(shape[0]) + 0.1, rng.random(shape[1]) + 0.1
    expected = np.array([[block[i, j] / (np.sqrt(dr[i]) * np.sqrt(dc[j])) for j in range(shape[1])]
                         for i in range(shape[0])])
    assert np.array_equal(normalize_block(block, dr, dc), expected)
    inplace = block.copy()
    assert normalize_block(inplace, dr, dc, out=inplace) is inplace
    assert np.array_equal(inplace, expected)


def test_normalize_block_zeroes_graphs_without_a_positive_self_similarity():
    block = np.array([[0.0, 0.0, 0.0], [0.0, 4.0, 2.0], [0.0, 2.0, -1.0]])
    diag = np.array([0.0, 4.0, -1.0])  # an empty graph, a normal one, a non-PSD kernel's
    out = normalize_block(block, diag, diag)
    assert np.array_equal(out, [[0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])


def test_normalize_block_leaves_a_non_finite_kernel_value_visible():
    # an overflowing kernel must fail its tile, not be silently stored as 0
    out = normalize_block(np.array([[np.inf, 1.0]]), np.array([1.0]), np.array([1.0, 1.0]))
    assert np.isinf(out[0, 0]) and out[0, 1] == 1.0


def test_normalized_symmetric_block_is_bitwise_symmetric():
    rng = np.random.default_rng(1)
    x = rng.random((300, 20))
    k = x @ x.T
    k = mirror_upper(k)
    out = normalize_block(k, np.diag(k).copy(), np.diag(k).copy())
    assert np.array_equal(out, out.T)


@pytest.mark.parametrize("n", [1, 2, 127, 128, 129, 300])
def test_mirror_upper_copies_the_upper_triangle(n):
    a = np.random.default_rng(n).random((n, n))
    expected = np.triu(a) + np.triu(a, 1).T
    assert np.array_equal(mirror_upper(a.copy()), expected)


def test_batch_arcs_list_each_nodes_neighbours_sorted_with_their_edges():
    """``GraphBatch.arcs`` against a plain sort of (source, neighbour, edge) triples: multi-edges
    keep their edges in edge order, a self-loop is one arc, isolated nodes have none."""
    from gramdist.graphs import GraphBatch

    rng = np.random.default_rng(3)
    sizes = np.array([5, 1, 7, 4])
    edges, counts = [], []
    for n in sizes:
        e = rng.integers(0, n, size=(2 * n, 2))
        e = np.vstack([e, e[:2]])  # repeated edges
        edges.append(e)
        counts.append(len(e))
    batch = GraphBatch(node_offsets=np.concatenate([[0], np.cumsum(sizes)]),
                       edge_offsets=np.concatenate([[0], np.cumsum(counts)]), edges=np.vstack(edges))
    indptr, nbrs, ids = batch.arcs()
    ge = batch.global_edges
    forward = [(u, v, i) for i, (u, v) in enumerate(ge.tolist())]
    backward = [(v, u, i) for i, (u, v) in enumerate(ge.tolist()) if u != v]
    got = list(zip(np.repeat(np.arange(batch.n_nodes), np.diff(indptr)).tolist(), nbrs.tolist(), ids.tolist()))
    # every arc once, by source then neighbour; equal pairs keep the forward arcs first, each
    # in edge order (Python's sort is stable), the order the kernels have always seen
    assert got == sorted(forward + backward, key=lambda t: (t[0], t[1]))
    assert np.diff(indptr).tolist() == np.bincount([t[0] for t in got], minlength=batch.n_nodes).tolist()


@pytest.mark.parametrize("n_ids, dtype", [(n, dt) for dt in (np.int64, np.int32, np.uint16)
                                            for n in (1, 2, 1178, 1 << 16, (1 << 16) + 1, 1 << 20, 1 << 33)
                                            if n - 1 <= np.iinfo(dt).max])
def test_stable_order_is_the_stable_argsort(n_ids, dtype):
    """16-bit radix passes give exactly NumPy's stable argsort: ties keep their order (many
    repeated ids), ids up to 33 bits take three passes, narrower dtypes work as they are."""
    rng = np.random.default_rng(n_ids % 1000)
    ids = rng.integers(0, n_ids, size=50_000).astype(dtype)
    ids[:1000] = ids[0]  # a long run of ties
    assert np.array_equal(stable_order(ids, n_ids), np.argsort(ids, kind="stable"))
    assert stable_order(ids[:0], n_ids).shape == (0,)


def test_run_starts_of_tuples_and_ranks_in_runs():
    from gramdist.arrayops import rank_in_runs, run_starts

    a = np.array([0, 0, 0, 1, 1, 2])
    b = np.array([5, 5, 6, 6, 6, 6])
    assert run_starts(a).tolist() == [True, False, False, True, False, True]
    assert run_starts(a, b).tolist() == [True, False, True, True, False, True]
    assert rank_in_runs(run_starts(a, b)).tolist() == [0, 1, 0, 0, 1, 0]
    assert run_starts(np.zeros(0), np.zeros(0)).tolist() == [] and rank_in_runs(np.zeros(0, bool)).tolist() == []
