"""NCA over vectors of set distances: gradient, objective, and learning on a toy problem."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.kernels.matching import nca


def _toy(n=60, m=6, informative=2, seed=0):
    """Distance vectors of n points: decomposition ``informative`` separates two classes,
    the others are noise of the same scale."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    pos = rng.random((n, m))
    pos[:, informative] = 0.35 * y + 0.3 * rng.random(n)
    pairs = np.abs(pos[:, None, :] - pos[None, :, :])
    return pairs, y


def _same(y):
    s = y[:, None] == y[None, :]
    np.fill_diagonal(s, False)
    return s


def _brute_F(A, pairs, y):
    """F(A) = Σ_i log Σ_{j∈C_i} p_ij straight from the definition (loops)."""
    n = len(y)
    total = 0.0
    for i in range(n):
        w = np.array([np.exp(-np.sum((A @ pairs[i, j]) ** 2)) if j != i else 0.0 for j in range(n)])
        p = w / w.sum()
        total += np.log(sum(p[j] for j in range(n) if j != i and y[j] == y[i]))
    return total


@pytest.mark.parametrize("mode", ["full", "diag"])
@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_gradient_matches_finite_differences(mode, lam):
    pairs, y = _toy(n=16, m=4)
    rng = np.random.default_rng(1)
    m = pairs.shape[2]
    x = rng.normal(size=m * m if mode == "full" else m) * 1.5
    f, g = nca.nca_objective(x, pairs, _same(y), mode, lam)
    num = np.empty_like(x)
    h = 1e-6
    for k in range(len(x)):
        e = np.zeros_like(x)
        e[k] = h
        num[k] = (nca.nca_objective(x + e, pairs, _same(y), mode, lam)[0]
                  - nca.nca_objective(x - e, pairs, _same(y), mode, lam)[0]) / (2 * h)
    np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_objective_matches_definition():
    pairs, y = _toy(n=12, m=3)
    A = np.random.default_rng(2).normal(size=(3, 3))
    f, _ = nca.nca_objective(A.ravel(), pairs, _same(y), "full", 0.25)
    assert -f == pytest.approx(_brute_F(A, pairs, y) - 0.25 * np.sum(A * A), rel=1e-10)
    assert nca.nca_score(A, pairs, _same(y), exclude_self=True)[0] == pytest.approx(_brute_F(A, pairs, y), rel=1e-10)


def test_no_underflow_with_far_neighbours():
    pairs, y = _toy(n=20, m=3)
    A = 200.0 * np.eye(3)                        # every exp(-d²) underflows to 0 in a naive sum
    f, g = nca.nca_objective(A.ravel(), pairs, _same(y), "full", 0.0)
    assert np.isfinite(f) and np.all(np.isfinite(g))


@pytest.mark.parametrize("mode", ["full", "diag"])
def test_learning_improves_objective_and_finds_the_informative_decomposition(mode):
    pairs, y = _toy(n=60, m=6, informative=2)
    res = nca.fit_nca(pairs, y, mode=mode, lam=0.0, max_iter=200, seed=0)
    assert res.objective_final > res.objective_initial + 5.0
    # the weight of the informative decomposition dominates: column norms of A
    weight = np.linalg.norm(res.A, axis=0)
    assert np.argmax(weight) == 2
    assert weight[2] > 2 * np.max(np.delete(weight, 2))
    # and fresh points get a better held-out likelihood with the learned A than with c·I
    rng = np.random.default_rng(9)
    yt = np.tile([0, 1], 20)
    pos = rng.random((40, 6))
    pos[:, 2] = 0.35 * yt + 0.3 * rng.random(40)
    pairs_all = np.abs(pos[:, None, :] - pos[None, :, :])
    cross = pairs_all[:20][:, 20:]
    same = yt[:20][:, None] == yt[20:][None, :]
    c = nca.initial_matrix(pairs, y, mode, 0)
    A0 = c if mode == "full" else np.diag(c)
    assert (nca.nca_score(res.A, cross, same, exclude_self=False)[0]
            > nca.nca_score(A0, cross, same, exclude_self=False)[0] + 2.0)


def test_deterministic_given_seed():
    pairs, y = _toy(n=30, m=4)
    a = nca.fit_nca(pairs, y, "full", 0.1, 50, seed=3).A
    b = nca.fit_nca(pairs, y, "full", 0.1, 50, seed=3).A
    assert np.array_equal(a, b)


def test_select_lambda_prefers_regularisation_on_noise():
    rng = np.random.default_rng(4)
    n, m = 40, 8
    y = np.repeat([0, 1], n // 2)
    pos = rng.random((n, m))                    # labels independent of everything
    pairs = np.abs(pos[:, None, :] - pos[None, :, :])
    lam, scores = nca.select_lambda(pairs, y, [0.0, 10.0], "full", folds=4, max_iter=100, seed=0)
    assert len(scores) == 2 and all(np.isfinite(scores))
    assert lam == 10.0
