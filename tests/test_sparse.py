"""SparseFeatures.dot: exact values and bitwise independence of the tile composition."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.kernels import sparse as sf
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms


def random_features(rng: np.random.Generator, n_graphs: int, integer: bool) -> SparseFeatures:
    """Rows mixing a few keys held by almost every graph (the dense part) and rare keys."""
    rows, keys, vals = [], [], []
    heavy = rng.integers(0, 2**63, size=6, dtype=np.uint64)
    for g in range(n_graphs):
        ks = np.concatenate([heavy[rng.random(6) < 0.9],
                             rng.integers(0, 2**63, size=rng.integers(0, 12), dtype=np.uint64),
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


@pytest.mark.parametrize("integer", [True, False])
def test_dot_equals_brute_force_and_is_tile_invariant(integer):
    rng = np.random.default_rng(3)
    x = random_features(rng, 70, integer)
    assert (x._max_integer_l1() < np.inf) == integer
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


def test_integer_path_uses_the_dense_product(monkeypatch):
    """Heavy keys go through the dense product; a too-large bound falls back to the sequential one."""
    rng = np.random.default_rng(5)
    x = random_features(rng, 40, integer=True)
    calls = []
    original = sf._split_columns
    monkeypatch.setattr(sf, "_split_columns", lambda *a: calls.append(1) or original(*a))
    expected = brute_dot(x, x)
    assert np.array_equal(dot(x, x[:]), expected)
    assert calls, "heavy keys should have used the dense product"
    big = SparseFeatures(x.indptr, x.keys, x.values * 2.0**27)  # L1 products above 2**53
    calls.clear()
    assert np.array_equal(dot(big, big[:]), expected * 2.0**54)
    assert not calls


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
