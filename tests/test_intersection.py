"""Histogram intersection of sparse counts (``kernels.intersection``) against brute force."""

from __future__ import annotations

import numpy as np
import pytest

import gramdist.kernels.intersection as intersection
from gramdist.kernels.intersection import histogram_intersection, unary_features
from gramdist.kernels.sparse import SparseFeatures, dot


def as_features(counts: np.ndarray) -> SparseFeatures:
    r, c = np.nonzero(counts)
    return SparseFeatures.from_pairs(r, (c * 977 + 5).astype(np.uint64), counts[r, c].astype(float), len(counts))


def brute(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.minimum(a[:, None, :], b[None, :, :]).sum(axis=-1).astype(np.float64)


def random_counts(rng: np.random.Generator, n: int, keys: int) -> np.ndarray:
    # sparse, with a few large counts (the pairs above the dense thresholds)
    scale = rng.choice([1, 1, 3, 100], size=(n, keys))
    return rng.integers(0, 6, size=(n, keys)) * (rng.random((n, keys)) < 0.5) * scale


@pytest.mark.parametrize("share", [1, 4, 256, 10**9])  # all dense .. all paired
def test_matches_brute_force_whatever_the_dense_cut(monkeypatch, share):
    monkeypatch.setattr(intersection, "DENSE_SHARE", share)
    rng = np.random.default_rng(share)
    for _ in range(30):
        a = random_counts(rng, int(rng.integers(1, 30)), int(rng.integers(1, 25)))
        b = random_counts(rng, int(rng.integers(1, 30)), a.shape[1])
        fa, fb = as_features(a), as_features(b)
        assert np.array_equal(histogram_intersection(fa, fb), brute(a, b))
        assert np.array_equal(histogram_intersection(fa, fa), brute(a, a))


def test_keys_held_by_one_side_only_and_empty_rows():
    a = np.array([[3, 0, 0], [0, 0, 0], [1, 2, 0]])
    b = np.array([[0, 0, 7], [2, 5, 0]])
    got = histogram_intersection(as_features(a), as_features(b))
    assert got.tolist() == [[0.0, 2.0], [0.0, 0.0], [0.0, 3.0]]
    assert histogram_intersection(as_features(a), SparseFeatures.empty(2)).tolist() == [[0.0, 0.0]] * 3


def test_equals_the_unary_features_dot_product():
    rng = np.random.default_rng(5)
    a = random_counts(rng, 40, 12)
    rows, labels = np.nonzero(a)
    reps = a[rows, labels]
    psi = unary_features(np.repeat(rows, reps), np.repeat(labels, reps).astype(np.uint64), len(a), np.uint64(1))
    assert np.array_equal(histogram_intersection(as_features(a), as_features(a)), dot(psi, psi))


def test_large_counts_are_exact_in_float32_and_beyond():
    # a row total of 2^24 + 1 takes the float64 product: float32 would round it
    a = np.array([[2**24 + 1, 1], [2**24 - 1, 3]])
    got = histogram_intersection(as_features(a), as_features(a))
    assert got.tolist() == [[2**24 + 2, 2**24], [2**24, 2**24 + 2]]


@pytest.mark.parametrize("bad", [-1.0, 0.5, 2.0**32])
def test_refuses_what_is_not_a_count(bad):
    x = SparseFeatures.from_pairs(np.array([0]), np.array([1], np.uint64), np.array([bad]), 1)
    with pytest.raises(ValueError, match="non-negative integers"):
        histogram_intersection(x, x)
