"""Closed-form Bhattacharyya kernel between Gaussians, batched over pairs.

Shared core of the power kernel (Shrivastava & Li, Eq. 3/4) and of the FLG/MLG kernels
(Kondor & Pan, Eq. 2-4). For two Gaussians p_a = N(mu_a, S_a), p_b = N(mu_b, S_b) in R^d,
the Bhattacharyya kernel ``K = integral sqrt(p_a(x) p_b(x)) dx`` is (Jebara & Kondor 2003)::

    K = |S_a|^-1/4 |S_b|^-1/4 |S_dag|^1/2 exp(-1/4 mu_a' S_a^-1 mu_a - 1/4 mu_b' S_b^-1 mu_b
                                              + 1/2 mu_dag' S_dag mu_dag),
    S_dag = (1/2 S_a^-1 + 1/2 S_b^-1)^-1,   mu_dag = 1/2 S_a^-1 mu_a + 1/2 S_b^-1 mu_b.

Since ``|S_dag| = |S_a| |S_b| / |S_bar|`` with ``S_bar = (S_a + S_b) / 2``, this equals the
classical Bhattacharyya coefficient, which we evaluate instead because it needs no inverse of
the (often nearly singular) S_a, S_b, only one Cholesky factorisation per pair::

    log K = 1/4 log|S_a| + 1/4 log|S_b| - 1/2 log|S_bar| - 1/8 (mu_a - mu_b)' S_bar^-1 (mu_a - mu_b).

For zero means (FLG, Kondor & Pan Eq. 4) the last term vanishes. ``K(p, p) = 1`` exactly in
exact arithmetic; here it is exactly ``1.0`` in floating point too, because ``S_bar`` of a pair
``(a, a)`` is bitwise ``S_a`` and the log-determinants are computed by the same routine (see
:func:`cholesky_logdet`). Positive semi-definiteness follows from the integral form.

Determinism: every per-pair quantity is computed by batched LAPACK calls that process each
matrix independently (``np.linalg.cholesky`` factorises the stacked matrices one by one in a
private buffer) and by element-wise NumPy arithmetic; sums over the small dimension ``d`` are
explicit loops, never reductions whose order could depend on the array shape. K(a, b) is
therefore bitwise the same whichever other pairs share the tile, and K(a, b) == K(b, a).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: pairs per batched Cholesky call are limited so that the stacked matrices stay near this size
_BLOCK_BYTES = 16 * 2**20


@dataclass
class GaussianEmbedding:
    """Gaussians N(mean_i, cov_i), one per graph, with precomputed log-determinants.

    Attributes
    ----------
    cov : (n, d, d) float64
        Symmetric positive definite covariance matrices (regularisation already applied).
    logdet : (n,) float64
        ``log|cov_i|`` from :func:`cholesky_logdet`.
    mean : (n, d) float64 or None
        Means; ``None`` for zero-mean Gaussians (FLG/MLG).
    """

    cov: np.ndarray
    logdet: np.ndarray
    mean: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.cov)

    def __getitem__(self, key: slice) -> GaussianEmbedding:
        return GaussianEmbedding(
            cov=self.cov[key], logdet=self.logdet[key], mean=None if self.mean is None else self.mean[key]
        )

    @property
    def dim(self) -> int:
        return int(self.cov.shape[1])


def cholesky_logdet(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Batched Cholesky factors and log-determinants of SPD matrices.

    Parameters
    ----------
    cov : (n, d, d) float64
        Symmetric positive definite matrices (only the lower triangle is read).

    Returns
    -------
    chol : (n, d, d) float64
        Lower-triangular factors with ``chol @ chol.T == cov``.
    logdet : (n,) float64
        ``2 * sum(log(diag(chol)))``, summed in index order by an explicit loop so that the
        value of one matrix never depends on the others in the batch.

    Raises
    ------
    ValueError
        If a matrix is not positive definite (names the first offending index).
    """
    cov = np.asarray(cov, dtype=np.float64)
    n, d = cov.shape[0], cov.shape[1]
    if d == 0:
        return np.zeros((n, 0, 0)), np.zeros(n)
    try:
        chol = np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        bad = next(i for i in range(n) if not _is_pd(cov[i]))
        raise ValueError(f"matrix {bad} of the batch is not positive definite; increase the regulariser") from None
    diag = np.log(np.diagonal(chol, axis1=1, axis2=2))
    acc = diag[:, 0].copy()
    for j in range(1, d):
        acc += diag[:, j]
    return chol, 2.0 * acc


def _is_pd(m: np.ndarray) -> bool:
    try:
        np.linalg.cholesky(m)
        return True
    except np.linalg.LinAlgError:
        return False


def gaussian_embedding(cov: np.ndarray, mean: np.ndarray | None = None) -> GaussianEmbedding:
    """Wrap covariances (and means) with their log-determinants; see :class:`GaussianEmbedding`."""
    cov = np.ascontiguousarray(cov, dtype=np.float64)
    _, logdet = cholesky_logdet(cov)
    if mean is not None:
        mean = np.ascontiguousarray(mean, dtype=np.float64)
    return GaussianEmbedding(cov=cov, logdet=logdet, mean=mean)


def _log_pairs(
    sbar: np.ndarray, ld_a: np.ndarray, ld_b: np.ndarray, diff: np.ndarray | None
) -> np.ndarray:
    """log K for m pairs given ``S_bar`` (m, d, d), both logdets (m,) and ``mu_a - mu_b`` (m, d)."""
    m, d = sbar.shape[0], sbar.shape[1]
    if d == 0:
        return np.zeros(m)
    chol, ld_bar = cholesky_logdet(sbar)
    out = (0.25 * ld_a + 0.25 * ld_b) - 0.5 * ld_bar
    if diff is not None:
        # forward substitution chol z = diff and quad = |z|^2, explicit loops over d
        z = np.empty((d, m))
        quad = np.zeros(m)
        for j in range(d):
            acc = diff[:, j].copy()
            for i in range(j):
                acc -= chol[:, j, i] * z[i]
            z[j] = acc / chol[:, j, j]
            quad += z[j] * z[j]
        out -= 0.125 * quad
    return out


def log_bhattacharyya(a: GaussianEmbedding, b: GaussianEmbedding) -> np.ndarray:
    """Log Bhattacharyya kernel between all pairs.

    Parameters
    ----------
    a, b : GaussianEmbedding
        ``len(a)`` and ``len(b)`` Gaussians of the same dimension ``d``; both with means or
        both without.

    Returns
    -------
    (len(a), len(b)) float64 array of ``log K(a_i, b_j)`` (always <= 0 up to rounding).
    """
    if a.dim != b.dim:
        raise ValueError(f"dimension mismatch: {a.dim} vs {b.dim}")
    if (a.mean is None) != (b.mean is None):
        raise ValueError("both embeddings must have means, or neither")
    na, nb, d = len(a), len(b), a.dim
    out = np.empty((na, nb))
    if na == 0 or nb == 0:
        return out
    rows = max(1, _BLOCK_BYTES // max(1, nb * d * d * 8))
    for r0 in range(0, na, rows):
        r1 = min(na, r0 + rows)
        k = r1 - r0
        sbar = (0.5 * (a.cov[r0:r1, None] + b.cov[None])).reshape(k * nb, d, d)
        ld_a = np.repeat(a.logdet[r0:r1], nb)
        ld_b = np.tile(b.logdet, k)
        diff = None
        if a.mean is not None:
            diff = (a.mean[r0:r1, None] - b.mean[None]).reshape(k * nb, d)
        out[r0:r1] = _log_pairs(sbar, ld_a, ld_b, diff).reshape(k, nb)
    return out


def log_bhattacharyya_aligned(a: GaussianEmbedding, b: GaussianEmbedding) -> np.ndarray:
    """``log K(a_i, b_i)`` for aligned pairs (``len(a) == len(b)``), same arithmetic as above."""
    if len(a) != len(b) or a.dim != b.dim:
        raise ValueError("aligned pairs need embeddings of the same length and dimension")
    out = np.empty(len(a))
    d = a.dim
    rows = max(1, _BLOCK_BYTES // max(1, d * d * 8))
    for r0 in range(0, len(a), rows):
        r1 = min(len(a), r0 + rows)
        sbar = 0.5 * (a.cov[r0:r1] + b.cov[r0:r1])
        diff = None if a.mean is None else a.mean[r0:r1] - b.mean[r0:r1]
        out[r0:r1] = _log_pairs(sbar, a.logdet[r0:r1], b.logdet[r0:r1], diff)
    return out


def bhattacharyya(a: GaussianEmbedding, b: GaussianEmbedding) -> np.ndarray:
    """``exp`` of :func:`log_bhattacharyya`: the (len(a), len(b)) kernel block."""
    return np.exp(log_bhattacharyya(a, b))


def log_bhattacharyya_self(a: GaussianEmbedding) -> np.ndarray:
    """``log K(a_i, a_i)`` by the same arithmetic as :func:`log_bhattacharyya` (exactly 0)."""
    return log_bhattacharyya_aligned(a, a)


def log_bhattacharyya_reference(
    cov_a: np.ndarray, cov_b: np.ndarray, mu_a: np.ndarray | None = None, mu_b: np.ndarray | None = None
) -> float:
    """Textbook Jebara-Kondor form with explicit inverses, for tests only (one pair)."""
    d = cov_a.shape[0]
    mu_a = np.zeros(d) if mu_a is None else mu_a
    mu_b = np.zeros(d) if mu_b is None else mu_b
    ia, ib = np.linalg.inv(cov_a), np.linalg.inv(cov_b)
    s_dag = np.linalg.inv(0.5 * ia + 0.5 * ib)
    mu_dag = 0.5 * ia @ mu_a + 0.5 * ib @ mu_b
    ld = lambda m: np.linalg.slogdet(m)[1]  # noqa: E731
    return float(
        -0.25 * ld(cov_a) - 0.25 * ld(cov_b) + 0.5 * ld(s_dag)
        - 0.25 * mu_a @ ia @ mu_a - 0.25 * mu_b @ ib @ mu_b + 0.5 * mu_dag @ s_dag @ mu_dag
    )
