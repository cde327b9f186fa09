"""Extreme eigenvalues of sparse symmetric matrices: ARPACK with less overhead per step, and
Lanczos run on many small matrices at once.

ARPACK (``scipy.sparse.linalg.eigsh``) on one sparse symmetric matrix
----------------------------------------------------------------------

``eigsh`` wraps a sparse matrix in a ``LinearOperator`` whose ``matvec`` checks and reshapes its
argument and reaches the CSR product through five Python calls: 18 µs per ARPACK step, against
2–3 µs for the product itself on a D&D protein graph (about 110–190 steps per graph). The
operator here calls the CSR product directly: the same products, so the same eigenpairs bit for
bit (pyramid match on D&D: 1.79 -> 1.58 s for its 438 graphs above 300 nodes).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import ranges
from gramdist.lazy import deferred_import

# imported at the first ARPACK or tridiagonal call: graphs small enough for dense solvers
# (almost all of NCI1's) never need them, and they are 20-50 ms of a run's start
spla = deferred_import("scipy.sparse.linalg")
sla = deferred_import("scipy.linalg")

#: Lanczos steps before the first convergence check of :func:`smallest_eigenvalues`, and between checks
FIRST_CHECK = 40
CHECK_EVERY = 12


@functools.cache
def _csr_operator() -> type:
    """The operator class, made at first use (its base class is SciPy's ``LinearOperator``)."""

    class CsrOperator(spla.LinearOperator):
        """A CSR matrix as a LinearOperator whose ``matvec`` is the bare product (ARPACK passes
        1-D float64 vectors of the right length, so the base class's checks have nothing to do)."""

        def __init__(self, a: sp.csr_matrix) -> None:
            self._a = a
            super().__init__(np.float64, a.shape)

        def matvec(self, x: np.ndarray) -> np.ndarray:
            return self._a @ x

        def _matvec(self, x: np.ndarray) -> np.ndarray:
            return self._a @ x

    return CsrOperator


def eigsh(a: sp.spmatrix, **kwargs: Any) -> Any:
    """``scipy.sparse.linalg.eigsh(a, **kwargs)`` for a real symmetric sparse ``a`` in standard
    mode (no ``sigma``, no ``M``), through the direct operator above."""
    return spla.eigsh(_csr_operator()(sp.csr_matrix(a, dtype=np.float64)), **kwargs)


def smallest_eigenvalues(a: sp.spmatrix, offsets: np.ndarray, tol: float = 1e-12) -> np.ndarray:
    """(B,) smallest eigenvalue of each diagonal block of a block-diagonal symmetric ``a``.

    Parameters
    ----------
    a : (N, N) sparse, symmetric, zero outside the blocks.
    offsets : (B + 1,) int, the blocks' first rows and N; every block non-empty.
    tol : a block is done when its Ritz pair's residual ``β_s |y_s|`` is at most
        ``tol · max(|θ|, ε^(2/3))`` (ARPACK's test: an eigenvalue lies that close to θ).

    Plain Lanczos, every block in lockstep: one sparse product and a few segmented sums per
    step for all blocks, instead of one ARPACK loop (or a dense ``eigvalsh``) per matrix. On
    D&D's 1,034 graphs above 100 nodes this takes 0.55-0.65 s, against 1.3 s for dense
    ``eigvalsh`` up to 300 nodes and ARPACK above, one graph at a time. The start vector is
    ``linspace(1, 2, n)`` of each block (ARPACK's ``v0`` before). There is no
    reorthogonalisation: in floating point it only makes copies of converged Ritz values
    (Paige), and the smallest Ritz value is never below the smallest eigenvalue (so
    ``θ ≥ λ_min``, to rounding). A block is checked with LAPACK's tridiagonal solver first
    after :data:`FIRST_CHECK` steps (or as many as it has rows), then where its residual's rate
    since its last check says it will have converged (:data:`CHECK_EVERY` on after the first),
    and at once where its Krylov space is exhausted (``β = 0``). Finished blocks are dropped
    from the product as the run goes. Each block's numbers come from its own rows and segments
    only, so its eigenvalue has the same bits alone or among any others (tested).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    if np.any(np.diff(offsets) <= 0):
        raise ValueError("every block needs at least one row")
    a = sp.csr_matrix(a, dtype=np.float64)
    if not a.has_sorted_indices:  # a copy: the caller's matrix is left as it is
        a = a.sorted_indices()
    return _BlockLanczos(a, offsets).run(float(tol))


class _BlockLanczos:
    """The state of :func:`smallest_eigenvalues`: the blocks still running (``ids``, their rows
    of ``a``, their Lanczos vectors) and every block's tridiagonal coefficients so far."""

    def __init__(self, a: sp.csr_matrix, offsets: np.ndarray) -> None:
        b = len(offsets) - 1
        self.sizes = np.diff(offsets)
        self.ids = np.arange(b)
        self.a, self.starts = a, offsets[:-1].copy()
        self.seg = np.repeat(self.ids, self.sizes)
        v = np.concatenate([np.linspace(1.0, 2.0, int(n)) for n in self.sizes]) if b else np.zeros(0)
        self.v = v / np.sqrt(np.add.reduceat(v * v, self.starts))[self.seg] if b else v
        self.v_prev = np.zeros_like(self.v)
        self.beta_prev = np.zeros(b)
        self.alphas = np.zeros((64, b))  # row s - 1: α_s of every block (of the running ones)
        self.betas = np.zeros((64, b))
        self.next_check = np.minimum(self.sizes, FIRST_CHECK)
        self.last = np.zeros((b, 2))  # (step, residual) of each block's last check
        self.finished = np.zeros(b, dtype=bool)

    def run(self, tol: float) -> np.ndarray:
        out = np.full(len(self.sizes), np.nan)
        step = 0
        while not self.finished.all():
            step += 1
            self._step(step)
            due = self.next_check[self.ids] <= step
            if due.any():
                self._check(step, tol, due, out)
        return out

    def _step(self, step: int) -> None:
        """One Lanczos step of every running block: ``w = A v - β v_prev``, ``α = w·v``,
        ``w -= α v``, ``β = |w|``, ``v = w / β``."""
        seg, starts = self.seg, self.starts
        w = self.a @ self.v
        w -= self.beta_prev[seg] * self.v_prev
        alpha = np.add.reduceat(w * self.v, starts)
        w -= alpha[seg] * self.v
        beta = np.sqrt(np.add.reduceat(w * w, starts))
        if step > len(self.alphas):
            self.alphas = np.concatenate([self.alphas, np.zeros_like(self.alphas)])
            self.betas = np.concatenate([self.betas, np.zeros_like(self.betas)])
        self.alphas[step - 1, self.ids] = alpha
        self.betas[step - 1, self.ids] = beta
        # β = 0: the Krylov space is exhausted and T exact; checked at once (its next steps
        # would append zeros to T, eigenvalues that are not the block's)
        self.next_check[self.ids[(beta == 0) & ~self.finished[self.ids]]] = step
        self.v_prev, self.v = self.v, w / np.where(beta > 0, beta, 1.0)[seg]
        self.beta_prev = beta

    def _check(self, step: int, tol: float, due: np.ndarray, out: np.ndarray) -> None:
        """Finish the ``due`` blocks whose smallest Ritz value has converged, drop them from the
        run, and set the others' next check where their residual's rate since their last check
        says it will have converged (at least 4 and at most ``2 · CHECK_EVERY`` steps on)."""
        for b in self.ids[due].tolist():
            theta, last = _lowest_ritz_pair(self.alphas[:step, b], self.betas[:step - 1, b])
            residual = self.betas[step - 1, b] * abs(last)
            target = tol * max(abs(theta), _EPS23)
            if residual <= target:
                out[b], self.finished[b], self.next_check[b] = theta, True, _NEVER
                continue
            if step > 10 * self.sizes[b] + 100:
                raise RuntimeError(f"Lanczos did not converge in {step} steps on a block of {self.sizes[b]} rows")
            self.next_check[b] = step + _steps_to(target, residual, step, *self.last[b])
            self.last[b] = step, residual
        running = ~self.finished[self.ids]
        if self.sizes[self.ids[running]].sum() < _COMPACT * len(self.v):
            self._keep(running)

    def _keep(self, keep: np.ndarray) -> None:
        """Go on with the running blocks ``keep`` only: their rows of ``a`` (the same rows, so
        the same products), vectors and segments."""
        n = self.sizes[self.ids]
        rows = ranges(self.starts[keep], n[keep])
        new_starts = np.concatenate([[0], np.cumsum(n[keep])[:-1]]).astype(np.int64)
        row_len = np.diff(self.a.indptr)[rows]
        nnz = ranges(self.a.indptr[rows], row_len)
        shift = np.repeat(np.repeat(self.starts[keep] - new_starts, n[keep]), row_len)
        indptr = np.concatenate([[0], np.cumsum(row_len)])
        self.a = sp.csr_matrix((self.a.data[nnz], self.a.indices[nnz] - shift, indptr), shape=(len(rows),) * 2)
        self.ids, self.starts = self.ids[keep], new_starts
        self.seg = np.repeat(np.arange(len(self.ids)), n[keep])
        self.v, self.v_prev = self.v[rows], self.v_prev[rows]
        self.beta_prev = self.beta_prev[keep]


def _lowest_ritz_pair(d: np.ndarray, e: np.ndarray) -> tuple[float, float]:
    """The smallest eigenvalue of the symmetric tridiagonal matrix (diagonal ``d``, off-diagonal
    ``e``) and the last entry of its unit eigenvector: LAPACK's bisection (``dstebz``) and
    inverse iteration (``dstein``), what ``scipy.linalg.eigh_tridiagonal(select="i")`` calls,
    without its checks (a third of its time at these sizes)."""
    if len(d) == 1:  # a 1 × 1 block, or one whose first step had β = 0
        return float(d[0]), 1.0
    m, w, block, split, info = sla.lapack.dstebz(d, e, 2, 0.0, 0.0, 1, 1, 0.0, "B")
    if info == 0 and m == 1:
        z, info = sla.lapack.dstein(d, e, w[:1], block, split)
    if info != 0 or m != 1:
        raise RuntimeError(f"LAPACK's tridiagonal eigensolver failed (info {info}) on a Lanczos matrix of size {len(d)}")
    return float(w[0]), float(z[-1, 0])


def _steps_to(target: float, residual: float, step: int, last_step: float, last_residual: float) -> int:
    """Steps until ``residual`` reaches ``target`` at the geometric rate it fell at since the
    last check (``CHECK_EVERY`` without one, or when it did not fall), within [4, 2·CHECK_EVERY]."""
    if last_step == 0 or not 0 < residual < last_residual:
        return CHECK_EVERY
    rate = math.log(residual / last_residual) / (step - last_step)  # < 0
    return int(min(max(math.ceil(math.log(target / residual) / rate), 4), 2 * CHECK_EVERY))


#: the finished blocks are dropped from the product once the running ones hold less than this
#: share of its rows (each drop copies the rows kept)
_COMPACT = 0.6
_NEVER = np.iinfo(np.int64).max
_EPS23 = np.finfo(np.float64).eps ** (2 / 3)


__all__ = ["eigsh", "smallest_eigenvalues"]
