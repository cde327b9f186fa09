"""Neighbourhood Component Analysis over vectors of per-decomposition set distances (§3, Eq. 1).

Two graphs ``G_i, G_j`` are compared by the vector ``d_ij ∈ R^m`` of their set distances over
``m`` decompositions; a matrix ``A`` (``m × m``) combines them into

    d_A²(G_i, G_j) = d_ijᵀ Aᵀ A d_ij = ‖A d_ij‖²                                     (Eq. 1)

NCA (Goldberger, Roweis, Hinton & Salakhutdinov, NIPS 2005) chooses ``A`` to maximise the
expected leave-one-out accuracy of a stochastic nearest-neighbour rule on labelled graphs:
``p_ij = exp(−d_A²(i, j)) / Σ_{k≠i} exp(−d_A²(i, k))`` (``p_ii = 0``) and

    F(A) = Σ_i log Σ_{j ∈ C_i} p_ij,        C_i = {j ≠ i : y_j = y_i}

(the log form the paper uses). The paper writes the regularised objective as
``F(A) + λ‖A‖_F²``; a *maximised* objective needs the penalty subtracted for ``λ > 0`` to
regularise, so we maximise ``F(A) − λ‖A‖_F²`` (read as a sign slip). ``A`` is either a full
matrix or diagonal (``NCA_diag``: a weighted combination of the squared distances).

Gradient (derived from ``∂F_i/∂d_A²(i,j) = p_ij − [j∈C_i] p_ij / Σ_{k∈C_i} p_ik =: W_ij``)::

    ∂F/∂A = 2 A Σ_ij W_ij d_ij d_ijᵀ              (full)
    ∂F/∂a_k = 2 a_k Σ_ij W_ij d_ijk²              (diagonal, A = diag(a))

computed with log-sum-exp for stability, optimised by L-BFGS (SciPy). Points whose class has
no other member contribute nothing. The objective is not convex: we start from a multiple of
the identity whose scale maximises ``F`` on a coarse grid, plus a small perturbation drawn
from ``seed``, so results are deterministic per seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from threadpoolctl import threadpool_limits

MODES = ("full", "diag")


def _unpack(params: np.ndarray, m: int, mode: str) -> np.ndarray:
    return params.reshape(m, m) if mode == "full" else np.diag(params)


def _neighbour_terms(dist2: np.ndarray, same: np.ndarray, exclude_self: bool,
                     weights: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Per query row: ``log Σ_{j∈C_i} p_ij`` (−inf where C_i is empty), validity, and (with
    ``weights``) ``W_ij = p_ij − [j∈C_i] p_ij / Σ_{k∈C_i} p_ik`` (zero on invalid rows).

    Both log-sums are taken relative to their own row maxima, so neither underflows.
    """
    logits = -dist2
    if exclude_self:
        logits = logits.copy()
        np.fill_diagonal(logits, -np.inf)
    mx = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - mx)
    s_all = e.sum(axis=1)
    same_logits = np.where(same, logits, -np.inf)
    mx_s = same_logits.max(axis=1, keepdims=True)
    valid = np.isfinite(mx_s[:, 0]) & np.isfinite(mx[:, 0])
    mx_s = np.where(np.isfinite(mx_s), mx_s, 0.0)
    es = np.exp(same_logits - mx_s)
    s_same = es.sum(axis=1)
    with np.errstate(divide="ignore"):
        logp = (mx_s[:, 0] + np.log(s_same)) - (mx[:, 0] + np.log(s_all))
    logp[~valid] = -np.inf
    W = None
    if weights:
        W = e / s_all[:, None] - es / np.where(valid, s_same, 1.0)[:, None]
        W[~valid] = 0.0
    return logp, valid, W


@dataclass
class _Problem:
    """Upper-triangle pair vectors of a labelled sample, prepared once per optimisation."""

    n: int
    iu: tuple[np.ndarray, np.ndarray]
    flat: np.ndarray        # (P, m) d_ij for i < j, P = n(n-1)/2
    flat_sq: np.ndarray     # (P, m) its square
    same: np.ndarray        # (n, n) bool, False diagonal

    @classmethod
    def build(cls, pairs: np.ndarray, same: np.ndarray) -> _Problem:
        n = pairs.shape[0]
        iu = np.triu_indices(n, 1)
        # set distances are symmetric by definition: average the two orientations, which
        # differ at most by rounding, and work on each unordered pair once
        flat = np.ascontiguousarray(0.5 * (pairs[iu] + pairs.transpose(1, 0, 2)[iu]))
        return cls(n=n, iu=iu, flat=flat, flat_sq=flat * flat, same=same)

    def dist2(self, d2_pairs: np.ndarray) -> np.ndarray:
        out = np.zeros((self.n, self.n))
        out[self.iu] = d2_pairs
        return out + out.T


def _objective(params: np.ndarray, prob: _Problem, mode: str, lam: float) -> tuple[float, np.ndarray]:
    m = prob.flat.shape[1]
    if mode == "full":
        A = params.reshape(m, m)
        Z = prob.flat @ A.T
        d2 = np.einsum("ij,ij->i", Z, Z)
    else:
        d2 = prob.flat_sq @ (params * params)
    logp, valid, W = _neighbour_terms(prob.dist2(d2), prob.same, exclude_self=True, weights=True)
    F = float(logp[valid].sum())
    w = W[prob.iu] + W.T[prob.iu]          # both orientations of each unordered pair
    if mode == "full":
        grad_F = 2.0 * A @ (prob.flat.T @ (prob.flat * w[:, None]))
        return -F + lam * float(np.sum(A * A)), (-grad_F + 2.0 * lam * A).ravel()
    a = params
    grad_F = 2.0 * a * (w @ prob.flat_sq)
    return -F + lam * float(a @ a), -grad_F + 2.0 * lam * a


def nca_objective(params: np.ndarray, pairs: np.ndarray, same: np.ndarray, mode: str,
                  lam: float) -> tuple[float, np.ndarray]:
    """Value and gradient of ``−F(A) + λ‖A‖_F²`` (the quantity L-BFGS minimises).

    Parameters
    ----------
    params : (m*m,) or (m,) float64
        ``A`` row-major (``mode="full"``) or its diagonal (``mode="diag"``).
    pairs : (n, n, m) float64
        ``d_ij`` for all ordered pairs of the ``n`` labelled graphs (the diagonal is ignored;
        ``d_ij`` and ``d_ji`` are averaged, see :class:`_Problem`).
    same : (n, n) bool
        ``y_i == y_j`` with a False diagonal.
    mode : {"full", "diag"}
    lam : float
        Frobenius regulariser λ >= 0.

    Returns
    -------
    (float, ndarray like params)
    """
    return _objective(np.asarray(params, dtype=np.float64), _Problem.build(pairs, same), mode, lam)


def nca_score(A: np.ndarray, pairs: np.ndarray, same: np.ndarray, exclude_self: bool) -> tuple[float, int]:
    """``(Σ_i log Σ_{j∈C_i} p_ij, number of contributing points)`` for query rows ``i``.

    ``pairs`` (nq, nr, m) holds distance vectors from ``nq`` query graphs to ``nr`` reference
    graphs; ``same`` (nq, nr) their class agreement. With ``exclude_self`` the queries are the
    references (square, diagonal ignored): this is ``F(A)``; without, it is the held-out
    log-likelihood of the queries under neighbours drawn from the references.
    """
    nq, nr, m = pairs.shape
    Z = pairs.reshape(nq * nr, m) @ A.T
    dist2 = np.einsum("ij,ij->i", Z, Z).reshape(nq, nr)
    logp, valid, _ = _neighbour_terms(dist2, same, exclude_self, weights=False)
    return float(logp[valid].sum()), int(valid.sum())


@dataclass
class NCAResult:
    """Learned ``A`` (m, m) and a summary: objective ``F`` before/after, iterations, λ."""

    A: np.ndarray
    lam: float
    objective_initial: float
    objective_final: float
    n_iter: int
    converged: bool
    message: str


def _same(y: np.ndarray) -> np.ndarray:
    same = y[:, None] == y[None, :]
    np.fill_diagonal(same, False)
    return same


def initial_matrix(pairs: np.ndarray, y: np.ndarray, mode: str, seed: int) -> np.ndarray:
    """Start of the optimisation: ``c·I`` plus a 1% perturbation drawn from ``seed``.

    ``c`` maximises ``F(c·I)`` over a log-spaced grid around the scale at which the mean
    ``d_A²`` over pairs is 1 (a cheap 1-D search that puts the softmax at a sensible width).
    """
    n, _, m = pairs.shape
    off = ~np.eye(n, dtype=bool)
    mean_sq = float(np.mean(np.sum(pairs[off] ** 2, axis=-1))) if n > 1 else 0.0
    c0 = 1.0 / np.sqrt(mean_sq) if mean_sq > 0 else 1.0
    same = _same(np.asarray(y))
    best_c, best_f = c0, -np.inf
    for c in c0 * 2.0 ** np.arange(-2, 6):
        f = nca_score(c * np.eye(m), pairs, same, exclude_self=True)[0]
        if f > best_f + 1e-12:
            best_c, best_f = c, f
    rng = np.random.default_rng(seed)
    if mode == "full":
        return best_c * (np.eye(m) + 0.01 * rng.standard_normal((m, m)))
    return best_c * (np.ones(m) + 0.01 * rng.standard_normal(m))


def fit_nca(pairs: np.ndarray, y: np.ndarray, mode: str = "full", lam: float = 0.0,
            max_iter: int = 200, seed: int = 0) -> NCAResult:
    """Learn ``A`` by L-BFGS on ``F(A) − λ‖A‖_F²``.

    Parameters
    ----------
    pairs : (n, n, m) float64
        Distance vectors between the ``n`` labelled graphs.
    y : (n,)
        Class labels.
    mode : {"full", "diag"}
    lam : float
        λ >= 0.
    max_iter : int
        L-BFGS iteration limit.
    seed : int
        Seed of the initial perturbation.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    n, _, m = pairs.shape
    same = _same(np.asarray(y))
    x0 = initial_matrix(pairs, y, mode, seed)
    x0 = x0.ravel() if mode == "full" else x0
    f0 = nca_score(_unpack(x0, m, mode), pairs, same, exclude_self=True)[0]
    prob = _Problem.build(pairs, same)
    with threadpool_limits(1):   # tall-skinny products: BLAS threads only contend
        res = minimize(_objective, x0, args=(prob, mode, lam), jac=True, method="L-BFGS-B",
                       options={"maxiter": int(max_iter)})
    A = _unpack(res.x, m, mode)
    f1 = nca_score(A, pairs, same, exclude_self=True)[0]
    return NCAResult(A=np.ascontiguousarray(A, dtype=np.float64), lam=float(lam), objective_initial=f0,
                     objective_final=f1, n_iter=int(res.nit), converged=bool(res.success),
                     message=str(res.message))


def select_lambda(pairs: np.ndarray, y: np.ndarray, lambdas: list[float], mode: str = "full",
                  folds: int = 5, max_iter: int = 200, seed: int = 0) -> tuple[float, list[float]]:
    """Choose λ by stratified k-fold cross-validation inside the labelled graphs.

    For each λ and fold, ``A`` is learned on the other folds and scored by the held-out
    log-likelihood ``Σ log Σ_{j∈C_i} p_ij`` of the fold's graphs, with neighbours drawn from
    the training folds only (the quantity NCA maximises, measured out of sample). Returns the
    λ with the highest mean score (the first of the list on ties) and the mean score per λ.
    """
    y = np.asarray(y)
    n = len(y)
    rng = np.random.default_rng(seed)
    fold_of = np.empty(n, np.int64)
    for cls in np.unique(y):
        idx = np.flatnonzero(y == cls)
        idx = idx[rng.permutation(len(idx))]
        fold_of[idx] = np.arange(len(idx)) % folds
    scores = []
    for lam in lambdas:
        total, count = 0.0, 0
        for f in range(folds):
            tr, va = np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)
            if len(va) == 0 or len(np.unique(y[tr])) < 2:
                continue
            res = fit_nca(pairs[np.ix_(tr, tr)], y[tr], mode, lam, max_iter, seed)
            s, c = nca_score(res.A, pairs[np.ix_(va, tr)], y[va][:, None] == y[tr][None, :], exclude_self=False)
            total += s
            count += c
        scores.append(total / max(count, 1))
    best = int(np.argmax(scores))
    return float(lambdas[best]), [float(s) for s in scores]


__all__ = ["MODES", "nca_objective", "nca_score", "NCAResult", "initial_matrix", "fit_nca", "select_lambda"]
