"""SparseFeatures.dot: exact values and bitwise independence of the tile composition."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.kernels import sparse as sf
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms


def random_features(rng: np.random.Generator, n_graphs: int, integer: bool, private: int = 12) -> SparseFeatures:
    """Rows mixing a few keys held by almost every graph (the dense part) and rare keys (up to
    ``private - 1`` of them a row)."""
    rows, keys, vals = [], [], []
    heavy = rng.integers(0, 2**63, size=6, dtype=np.uint64)
    for g in range(n_graphs):
        ks = np.concatenate([heavy[rng.random(6) < 0.9],
                             rng.integers(0, 2**63, size=rng.integers(0, private), dtype=np.uint64),
                             rng.choice(np.arange(1, 40, dtype=np.uint64), size=5, replace=False)])
        ks = np.unique(ks)
        rows.append(np.full(len(ks), g))
        keys.append(ks)
        vals.append(rng.integers(1, 50, size=len(ks)).astype(float) if integer else rng.random(len(ks)))
    return SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(keys), np.concatenate(vals), n_graphs)


def brute_dot(a: SparseFeatures, b: SparseFeatures) -> np.ndarray:
    """Dictionary dot products in Python integers/floats (key order), an independent reference."""
    out = np.zeros((len(a), len(b)))
    for i in range(len(a)):
        da = dict(zip(*a.row(i)))
        for j in range(len(b)):
            kb, vb = b.row(j)
            s = 0.0
            for k, v in sorted(zip(kb.tolist(), vb.tolist())):
                if k in da:
                    s += da[k] * v
            out[i, j] = s
    return out


@pytest.mark.parametrize("private", [12, 80])
@pytest.mark.parametrize("integer", [True, False])
def test_dot_equals_brute_force_and_is_tile_invariant(integer, private):
    # private=80: most entries on rare keys, so small blocks (each key frequent in one row)
    # are cut once and larger ones per tile, and tiles mix the two
    rng = np.random.default_rng(3)
    x = random_features(rng, 70, integer, private)
    assert (x._max_integer_sq_norm() < np.inf) == integer
    full = dot(x, x)
    ref = brute_dot(x, x)
    if integer:
        assert np.array_equal(full, ref)  # exact integers, whatever the summation order
    else:
        np.testing.assert_allclose(full, ref, rtol=1e-13)
    assert np.array_equal(np.diag(full), sq_norms(x))
    # the same entries, bitwise, from blocks of other shapes and compositions
    for cut in (1, 7, 33):
        for lo in range(0, 70, cut):
            for lo2 in range(0, 70, 2 * cut + 1):
                a, b = x[lo:lo + cut], x[lo2:lo2 + 2 * cut + 1]
                assert np.array_equal(dot(a, b), full[lo:lo + cut, lo2:lo2 + 2 * cut + 1])


@pytest.mark.parametrize("private", [12, 80], ids=["mostly-frequent", "mostly-private"])
def test_integer_path_uses_the_dense_product(monkeypatch, private):
    """Heavy keys go through the dense product: cut once per embedding where most entries are on
    frequent keys, per tile otherwise; a too-large bound falls back to the sequential sum."""
    rng = np.random.default_rng(5)
    x = random_features(rng, 40, integer=True, private=private)
    assert x._mostly_frequent() == (private == 12)
    splits, tile_cuts = [], []
    # the per-tile path is the one through _dot_integer (the once-cut also calls _split_columns)
    original_split, original_tile = sf._frequent_split, sf._dot_integer
    monkeypatch.setattr(sf, "_frequent_split", lambda *a: splits.append(original_split(*a)) or splits[-1])
    monkeypatch.setattr(sf, "_dot_integer", lambda *a: tile_cuts.append(1) or original_tile(*a))
    expected = brute_dot(x, x)
    for a, b in ((x, x[:]), (x, x)):
        assert np.array_equal(dot(a, b), expected)
    if private == 12:
        assert len(splits) == 2 and all(s.dense_t.shape[0] >= 4 for s in splits) and not tile_cuts
    else:
        assert tile_cuts and not splits
    big = SparseFeatures(x.indptr, x.keys, x.values * 2.0**27)  # squares above 2**53
    splits.clear()
    tile_cuts.clear()
    assert np.array_equal(dot(big, big[:]), expected * 2.0**54)
    assert not splits and not tile_cuts


def test_frequent_split_is_cut_once_per_embedding_and_within_its_budget():
    """The dense part holds the keys >= 1/16 of the rows hold, is cached on the embedding (its
    tiles reuse it) and stays within DENSE_BUDGET cells per stored entry; every part of the cut
    is the embedding's, no entry lost or doubled."""
    rng = np.random.default_rng(11)
    x = random_features(rng, 64, integer=True)
    s = x._frequent_split(np.float32)
    assert s is x._frequent_split(np.float32) and s.dense_t.dtype == np.float32
    held = np.bincount(x._key_positions(), minlength=len(x._sorted_keys()))
    assert np.array_equal(s.keys, x._sorted_keys()[held * sf.FREQUENT_SHARE >= len(x)])
    assert s.dense_t.size <= sf.DENSE_BUDGET * x.nnz
    assert np.array_equal(np.sort(np.concatenate([s.keys, s.rest_keys])), x._sorted_keys())
    rebuilt = np.concatenate([s.dense_t.T, s.rest.toarray()], axis=1)[:, np.argsort(np.concatenate([s.keys, s.rest_keys]))]
    assert np.array_equal(rebuilt, x.to_csr(x._sorted_keys()).toarray())
    # 8 of 128 keys a row: each key held by about 4 of the 64 rows, so at 1/16 about half the
    # keys would be dense at a sixteenth full, over budget; the cut falls back to keys held by >= 1/4
    n, keys = 64, np.arange(1, 129, dtype=np.uint64)
    g = np.concatenate([np.full(8, i) for i in range(n)])
    k = np.concatenate([rng.choice(keys, 8, replace=False) for _ in range(n)])
    y = SparseFeatures.from_pairs(g, k, 1.0, n)
    held_y = np.bincount(y._key_positions())
    assert np.count_nonzero(held_y * sf.FREQUENT_SHARE >= n) * n > sf.DENSE_BUDGET * y.nnz  # over at 1/16
    sy = y._frequent_split(np.float64)
    assert sy.dense_t.size <= sf.DENSE_BUDGET * y.nnz
    assert np.array_equal(sy.keys, y._sorted_keys()[held_y * sf.RARE_SHARE >= n])
    assert np.array_equal(dot(y, y), brute_dot(y, y)) and np.array_equal(dot(y[:30], y[20:]), brute_dot(y[:30], y[20:]))


def test_integer_dense_product_in_float32_only_where_exact(monkeypatch):
    """Partial sums below 2**24 take the float32 dense product; larger ones float64; both exact."""
    dtypes = []
    original = sf._frequent_split
    monkeypatch.setattr(sf, "_frequent_split", lambda x, dt: dtypes.append(dt) or original(x, dt))

    def two(va: float, vb: float) -> tuple[SparseFeatures, SparseFeatures]:
        keys = np.array([7, 11], np.uint64)
        a = SparseFeatures(np.array([0, 2, 4]), np.tile(keys, 2), np.array([va, 1.0, va, 1.0]))
        b = SparseFeatures(np.array([0, 2, 4]), np.tile(keys, 2), np.array([vb, 2.0, vb, 2.0]))
        return a, b

    a, b = two(4094.0, 4095.0)  # |partial sums| <= ||a|| ||b||: (4094² + 1)(4095² + 4) < 2**48, float32
    assert np.array_equal(dot(a, b), np.full((2, 2), 4094.0 * 4095.0 + 2.0))
    assert dtypes and all(dt == np.float32 for dt in dtypes)
    dtypes.clear()
    a, b = two(8191.0, 4097.0)  # 33,558,529 is odd and above 2**25: float32 would round it
    assert np.array_equal(dot(a, b), np.full((2, 2), 8191.0 * 4097.0 + 2.0))
    assert dtypes and all(dt == np.float64 for dt in dtypes)
    # many small counts: an L1 bound (4096 * 4096 = 2**24) would rule float32 out, the L2 one
    # (||a|| ||b|| = 4096 < 2**24) lets it in, and the sums are still exact
    dtypes.clear()
    wide = SparseFeatures(np.array([0, 4096, 8192]), np.tile(np.arange(1, 4097, dtype=np.uint64), 2), np.ones(8192))
    assert np.array_equal(dot(wide, wide[:]), np.full((2, 2), 4096.0))
    assert dtypes and all(dt == np.float32 for dt in dtypes)


def test_few_keys_go_key_by_key_with_the_sparse_products_bits(monkeypatch):
    """Non-integer features over a handful of keys (SVM-θ's subset sizes): the key-by-key dense
    path gives the sequential key-order sums bit for bit (against brute force and against the
    sparse product), negative values and missing keys included; an infinite value keeps the
    sparse product (its missing keys must not turn into NaN)."""
    rng = np.random.default_rng(8)
    n_graphs = 150  # more rows than one band
    keys = np.array([3, 10, 12, 40, 41, 77, 90], np.uint64)
    rows, ks, vals = [], [], []
    for g in range(n_graphs):
        held = keys[rng.random(len(keys)) < 0.7]
        rows.append(np.full(len(held), g))
        ks.append(held)
        vals.append(rng.normal(size=len(held)) * 10.0 ** rng.integers(-3, 4, len(held)))
    x = SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(ks), np.concatenate(vals), n_graphs)
    used = []
    original = sf._add_key_by_key
    monkeypatch.setattr(sf, "_add_key_by_key", lambda *a: used.append(1) or original(*a))
    a, b = x[:90], x[40:]
    got = dot(a, b)
    assert used
    assert np.array_equal(got, brute_dot(a, b))
    cols = np.unique(np.concatenate([a.keys, b.keys]))
    sparse_out = np.zeros_like(got)
    sf._add_sparse_product(a.to_csr(cols), b.to_csr(cols), sparse_out)
    assert np.array_equal(got, sparse_out)
    used.clear()
    inf = SparseFeatures(x.indptr, x.keys, np.where(np.arange(x.nnz) == 0, np.inf, x.values))
    assert not np.isnan(dot(inf[:90], inf[40:])[1:]).any() and not used


def test_embeddings_travel_without_their_derived_cache():
    """DerivedCache: a pickled embedding (what Dask ships) keeps every field, subclasses' own
    included, and arrives with an empty cache."""
    import pickle

    from gramdist.kernels.core.kernel import CoreFeatures
    from gramdist.kernels.theta.kernel import ThetaFeatures

    base = dict(indptr=np.array([0, 2, 3]), keys=np.array([1, 5, 2], dtype=np.uint64), values=np.array([1.0, 2.0, 3.0]))
    for emb, extra in ((ThetaFeatures(**base, not_converged=np.array([0, 1])), "not_converged"),
                       (CoreFeatures(**base, counts={"cores": 3}), "counts")):
        emb._cache["derived"] = np.arange(10)
        back = pickle.loads(pickle.dumps(emb))
        assert back._cache == {} and np.array_equal(back.keys, emb.keys)
        assert np.array_equal(getattr(back, extra), getattr(emb, extra)) if extra != "counts" else back.counts == emb.counts


def _same(a: SparseFeatures, b: SparseFeatures) -> bool:
    return (np.array_equal(a.indptr, b.indptr) and np.array_equal(a.keys, b.keys)
            and np.array_equal(a.values, b.values))


def test_row_builder_is_from_pairs_of_every_piece_bit_for_bit():
    """Pieces arriving graph after graph, closed as they complete: duplicates across pieces
    summed in arrival order, exact zeros dropped, empty graphs kept, the caller's arrays untouched."""
    rng = np.random.default_rng(3)
    n_graphs, pieces, closes = 9, [], []
    g = 0
    for _ in range(30):
        span = rng.integers(0, 2)  # a piece covers the open graph, sometimes the next one too
        m = int(rng.integers(0, 40))
        rows = np.sort(rng.integers(g, min(g + span + 1, n_graphs), m))
        keys = rng.integers(0, 12, m).astype(np.uint64)
        vals = rng.normal(size=m).round(1)
        vals[rng.random(m) < 0.1] = 0.0
        pieces.append((rows, keys, vals))
        closes.append(g)
        g = min(g + int(rng.integers(0, 2)), n_graphs - 1)
    builder = sf.RowBuilder(n_graphs)
    copies = [tuple(a.copy() for a in p) for p in pieces]
    for p, c in zip(pieces, closes):
        builder.close_before(c)
        builder.add(*p)
    got = builder.result()
    want = SparseFeatures.from_pairs(*(np.concatenate([p[j] for p in pieces]) for j in range(3)), n_graphs)
    assert _same(got, want) and len(got) == n_graphs
    assert all(np.array_equal(a, b) for p, c in zip(pieces, copies) for a, b in zip(p, c))


@pytest.mark.parametrize("pool", [8, 1 << 40])
def test_from_segments_is_from_pairs_of_grouped_triples(pool):
    """Triples already grouped by graph: the same rows, bit for bit, with duplicate keys (a
    small key pool: summed in order, zeros dropped) and without (a large one), segments long
    enough (>= 64 per graph) for the per-graph sorts and short ones for the global sort."""
    rng = np.random.default_rng(11)
    for per_graph in (3, 300):
        n_graphs = 7
        lens = rng.integers(0, 2 * per_graph, n_graphs)
        lens[2] = 0
        g = np.repeat(np.arange(n_graphs), lens)
        keys = rng.integers(0, pool, len(g)).astype(np.uint64)
        vals = rng.normal(size=len(g)).round(1)
        want = SparseFeatures.from_pairs(g, keys, vals, n_graphs)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        assert _same(SparseFeatures.from_segments(indptr, keys.copy(), vals.copy()), want)


def test_segment_order_is_the_stable_argsort():
    """Distinct keys take the fast introsort, repeated ones the stable sort: both give the
    permutation of ``np.argsort(kind="stable")`` (equal keys keep their order)."""
    rng = np.random.default_rng(2)
    for pool in (5, 1 << 62):
        keys = rng.integers(0, pool, 5000).astype(np.uint64)
        assert np.array_equal(sf._segment_order(keys), np.argsort(keys, kind="stable"))


def test_wlsp_streamed_features_equal_the_collected_ones_with_graphs_over_several_blocks():
    from gramdist.datasets import load_dataset
    from gramdist.kernels import allpairs
    from gramdist.kernels.hashing import combine
    from gramdist.kernels.relabel import wl_labels
    from gramdist.kernels.shortest_path.wlsp import TAG_WLSP, WLShortestPathKernel

    graphs = load_dataset("ENZYMES")[:60]  # graphs of up to 96 nodes: above 64, split into blocks of rows
    labels = wl_labels(graphs, 2)
    blocks = list(allpairs.distance_blocks(graphs, max_pairs=256))
    assert len(blocks) > len({int(graphs.node_graph[b.row0]) for b in blocks})  # some graph spans blocks
    collected = allpairs.labelled_distance_counts(graphs, labels, max_pairs=256)
    g = np.concatenate([c[0] for c in collected])
    keys = np.concatenate([combine(TAG_WLSP, np.uint64(i), c[1], c[2], c[3]) for i, c in enumerate(collected)])
    vals = np.concatenate([c[4].astype(np.float64) for c in collected])
    want = SparseFeatures.from_pairs(g, keys, vals, len(graphs))
    builder = sf.RowBuilder(len(graphs))
    for complete, it, (gi, lu, lv, d, cnt) in allpairs.iter_labelled_distance_counts(graphs, labels, max_pairs=256):
        builder.add(gi, combine(TAG_WLSP, np.uint64(it), lu, lv, d), cnt.astype(np.float64))
        builder.close_before(complete)
    streamed = builder.result()
    assert _same(streamed, want)
    assert _same(WLShortestPathKernel(2).features(graphs), want)


def _features_of(rng: np.random.Generator, n_graphs: int, pool: int, per_graph: int) -> SparseFeatures:
    keys = rng.integers(0, 2**63, size=pool, dtype=np.uint64)
    rows = [np.unique(rng.choice(keys, size=per_graph)) for _ in range(n_graphs)]
    return SparseFeatures.from_pairs(np.repeat(np.arange(n_graphs), [len(r) for r in rows]), np.concatenate(rows),
                                     rng.random(sum(len(r) for r in rows)), n_graphs)


@pytest.mark.parametrize("shape", ["repeated keys", "private keys", "mixed"])
def test_to_csr_keeps_the_entries_of_the_given_columns(shape, monkeypatch):
    """A CSR over given sorted columns (what a tile builds over its common keys) holds exactly the
    entries whose key is a column, at that column, for columns that are none, some, all and more
    than the rows' keys, by each of the three ways to find the columns (keys repeated across
    graphs: a gather through the cached key positions; mostly private keys and few columns: a
    bitmap prefilter; else a search per entry); the same again once positions are cached."""
    rng = np.random.default_rng(8)
    x = {"repeated keys": lambda: _features_of(rng, 60, 25, 12),
         "private keys": lambda: _features_of(rng, 40, 10**6, 60),
         "mixed": lambda: random_features(rng, 25, integer=False)}[shape]()
    every = x._sorted_keys()
    few = every[::40]
    choices = [np.zeros(0, dtype=np.uint64), few, every[::3], every,
               np.union1d(every, rng.integers(0, 2**63, size=50, dtype=np.uint64))]
    prefiltered = []
    original = sf._few_columns
    monkeypatch.setattr(sf, "_few_columns", lambda *a: prefiltered.append(len(a[1])) or original(*a))
    for _ in range(2):
        for cols in choices:
            m = x.to_csr(cols).toarray()
            want = np.zeros((len(x), len(cols)))
            for i in range(len(x)):
                for k, v in zip(*x.row(i)):
                    at = np.searchsorted(cols, k)
                    if at < len(cols) and cols[at] == k:
                        want[i, at] = v
            assert np.array_equal(m, want)
    assert ("key_positions" in x._cache) == (shape == "repeated keys")
    if shape != "mixed":
        assert (len(few) in prefiltered) == (shape == "private keys")
