"""The Bhattacharyya core against the textbook inverse form and numerical integration."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate

from gramdist.kernels.gaussian.bhattacharyya import (
    GaussianEmbedding,
    bhattacharyya,
    gaussian_embedding,
    log_bhattacharyya,
    log_bhattacharyya_reference,
    log_bhattacharyya_self,
    logdet,
)


def random_spd(rng: np.random.Generator, n: int, d: int, scale: float = 1.0) -> np.ndarray:
    x = rng.standard_normal((n, d, d + 2)) * scale
    return x @ x.transpose(0, 2, 1) / (d + 2) + 0.05 * scale**2 * np.eye(d)


def gaussian_pdf(x: np.ndarray, mu: np.ndarray, cov: np.ndarray) -> np.ndarray:
    d = len(mu)
    diff = x - mu
    sol = np.linalg.solve(cov, diff.T).T
    return np.exp(-0.5 * np.sum(diff * sol, axis=1)) / np.sqrt((2 * np.pi) ** d * np.linalg.det(cov))


@pytest.mark.parametrize("with_mean", [False, True])
@pytest.mark.parametrize("d", [1, 3, 6, 10])
def test_matches_inverse_form(with_mean: bool, d: int) -> None:
    rng = np.random.default_rng(d)
    cov = random_spd(rng, 6, d)
    mean = rng.standard_normal((6, d)) if with_mean else None
    emb = gaussian_embedding(cov, mean)
    got = log_bhattacharyya(emb, emb)
    for i in range(6):
        for j in range(6):
            ref = log_bhattacharyya_reference(cov[i], cov[j], None if mean is None else mean[i],
                                              None if mean is None else mean[j])
            assert got[i, j] == pytest.approx(ref, abs=1e-10)


def test_one_dimensional_integral() -> None:
    rng = np.random.default_rng(1)
    for _ in range(5):
        mu = rng.standard_normal(2) * 2
        var = rng.uniform(0.1, 3.0, 2)
        emb = gaussian_embedding(var.reshape(2, 1, 1), mu.reshape(2, 1))

        def f(x: float, mu: np.ndarray = mu, var: np.ndarray = var) -> float:
            return np.sqrt(np.exp(-0.5 * (x - mu[0]) ** 2 / var[0]) / np.sqrt(2 * np.pi * var[0])
                           * np.exp(-0.5 * (x - mu[1]) ** 2 / var[1]) / np.sqrt(2 * np.pi * var[1]))

        ref, _ = integrate.quad(f, -np.inf, np.inf, epsabs=1e-13, epsrel=1e-12)
        assert bhattacharyya(emb[:1], emb[1:])[0, 0] == pytest.approx(ref, rel=1e-9)


def test_two_dimensional_integral() -> None:
    rng = np.random.default_rng(2)
    cov = random_spd(rng, 2, 2)
    mu = rng.standard_normal((2, 2)) * 0.5
    emb = gaussian_embedding(cov, mu)
    # tensor Gauss-Hermite-free brute force: fine grid over +-9 sd, trapezoid rule
    sd = np.sqrt(max(cov[0].max(), cov[1].max()))
    t = np.linspace(-9 * sd, 9 * sd, 801)
    xx, yy = np.meshgrid(t, t, indexing="ij")
    pts = np.stack([xx.ravel(), yy.ravel()], axis=1)
    vals = np.sqrt(gaussian_pdf(pts, mu[0], cov[0]) * gaussian_pdf(pts, mu[1], cov[1])).reshape(xx.shape)
    ref = integrate.trapezoid(integrate.trapezoid(vals, t, axis=1), t)
    assert bhattacharyya(emb[:1], emb[1:])[0, 0] == pytest.approx(ref, rel=1e-6)


@pytest.mark.parametrize("with_mean", [False, True])
def test_self_is_exactly_one_symmetric_and_bounded(with_mean: bool) -> None:
    rng = np.random.default_rng(3)
    cov = random_spd(rng, 30, 4, scale=1e-3)
    emb = gaussian_embedding(cov, rng.standard_normal((30, 4)) * 1e-3 if with_mean else None)
    k = bhattacharyya(emb, emb)
    assert np.array_equal(np.diag(k), np.ones(30))
    assert np.array_equal(log_bhattacharyya_self(emb), np.zeros(30))
    assert np.array_equal(k, k.T)
    assert k.max() <= 1.0 and k.min() >= 0
    assert np.linalg.eigvalsh(k)[0] > -1e-12 * np.trace(k)


@pytest.mark.parametrize("d", [2, 5, 9])  # element-wise (d <= 8) and LAPACK paths
def test_blocks_are_bitwise_independent_of_the_rest_of_the_tile(d: int) -> None:
    rng = np.random.default_rng(4)
    emb = gaussian_embedding(random_spd(rng, 40, d), rng.standard_normal((40, d)))
    full = log_bhattacharyya(emb, emb)
    for r0, r1, c0, c1 in [(0, 1, 0, 40), (3, 17, 21, 22), (39, 40, 5, 33)]:
        assert np.array_equal(log_bhattacharyya(emb[r0:r1], emb[c0:c1]), full[r0:r1, c0:c1])
    assert np.array_equal(full, full.T)
    assert np.array_equal(np.diag(full), np.zeros(40))


@pytest.mark.parametrize("d", [2, 9])
def test_not_positive_definite_is_reported(d: int) -> None:
    bad = np.eye(d)
    bad[0, 1] = bad[1, 0] = 2.0
    cov = np.stack([np.eye(d), bad])
    with pytest.raises(ValueError, match="matrix 1"):
        logdet(cov)


@pytest.mark.parametrize("d", [1, 3, 8, 9, 12])
def test_logdet_and_mismatches(d: int) -> None:
    rng = np.random.default_rng(5)
    cov = random_spd(rng, 4, d)
    assert np.allclose(logdet(cov), np.linalg.slogdet(cov)[1], atol=1e-12)
    a = gaussian_embedding(cov)
    with pytest.raises(ValueError, match="dimension"):
        log_bhattacharyya(a, GaussianEmbedding(np.ones((4, d + 1, d + 1)), a.logdet))
    with pytest.raises(ValueError, match="means"):
        log_bhattacharyya(a, gaussian_embedding(cov, np.zeros((4, d))))


@pytest.mark.parametrize("with_mean", [False, True])
@pytest.mark.parametrize("d", [9, 12, 16])
def test_soa_max_dim_moves_the_element_wise_threshold(with_mean: bool, d: int) -> None:
    """``soa_max_dim`` selects the element-wise path for larger d: same values as LAPACK up to
    rounding, and the element-wise guarantees (K(p, p) = 1 exactly, tile independence, symmetry)."""
    rng = np.random.default_rng(6 + d)
    cov = random_spd(rng, 25, d)
    mean = rng.standard_normal((25, d)) if with_mean else None
    lapack = log_bhattacharyya(gaussian_embedding(cov, mean), gaussian_embedding(cov, mean))
    emb = gaussian_embedding(cov, mean, soa_max_dim=16)
    assert np.allclose(emb.logdet, np.linalg.slogdet(cov)[1], rtol=0, atol=1e-12)
    full = log_bhattacharyya(emb, emb, soa_max_dim=16)
    assert np.allclose(full, lapack, rtol=0, atol=1e-12)
    assert np.array_equal(np.diag(full), np.zeros(25)) and np.array_equal(full, full.T)
    assert np.array_equal(log_bhattacharyya_self(emb, soa_max_dim=16), np.zeros(25))
    assert np.array_equal(bhattacharyya(emb[3:9], emb[11:12], soa_max_dim=16), np.exp(full[3:9, 11:12]))
    bad = np.eye(d)
    bad[0, 1] = bad[1, 0] = 2.0
    with pytest.raises(ValueError, match="matrix 1"):
        logdet(np.stack([np.eye(d), bad]), soa_max_dim=16)
