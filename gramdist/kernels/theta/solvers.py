"""Numerical kernels of the θ family: the Lovász SDP, the one-class SVM, minimum-norm points.

Orthonormal representations (Lovász 1979; the paper's convention)
-----------------------------------------------------------------
Unit vectors ``u_i`` with ``u_i ⟂ u_j`` whenever i and j are *not* adjacent, and

    θ(G) = min_{c, U} max_i 1/(c·u_i)^2,   θ_S = min_c max_{i∈S} 1/(c·u_i)^2 (S ⊆ V, U fixed).

:func:`lovasz_representation` solves the dual SDP ``θ = min t`` s.t.
``S = t I - J + Σ_{ij∈E} y_ij (E_ij + E_ji) ⪰ 0`` with cvxopt's interior-point ``solvers.sdp``
(absolute, relative and feasibility tolerances ``tol``, default 1e-8, so θ is exact to
about 1e-8 relative). The kernels call these solvers under ``threadpool_limits(1)``, so that
results do not depend on a worker's BLAS thread count. Factoring ``S = VᵀV`` and putting ``u_i = (c + v_i)/√t`` with a unit
``c ⟂ v_i`` gives an optimal representation (``c·u_i = 1/√t`` for every i); only its Gram
matrix is needed, ``u_i·u_j = (1 + S_ij)/t``, i.e. **K = I + Y/t** (1 on the diagonal, 0 on
non-edges, ``y_ij/t`` on edges). GraKeL's ``LovaszTheta`` puts the free variables on the
non-edges instead, which is the representation of the complement graph (it returns 6 for
K_6, whose θ is 1); the tests check ours against θ(C_5) = √5, θ(Petersen) = 4 and against
GraKeL's SDP run on complements.

A subset's value is the minimum-norm point of the hull of its vectors: by minimax,
``max_{|c|=1} min_{i∈S} c·u_i = min_{λ∈Δ} |Σ λ_i u_i|``, so ``θ_S = 1 / min_{λ∈Δ} λᵀ K_S λ``.
:func:`simplex_min` computes that minimum exactly for small S by enumerating supports (the
minimiser is the affine minimiser ``K_T^{-1}1 / 1ᵀK_T^{-1}1`` of its support T; every
candidate in the simplex is evaluated on K itself, so an ill-conditioned support can only
lose, never win), after trying the whole support alone: where its affine minimiser is in the
simplex and certified stationary, it is the minimum and nothing is enumerated (see
:func:`simplex_min` for how often, and for the 1e-9-level cases where the two differ).

One-class SVM (Jethava et al. 2013)
-----------------------------------
``ω(K) = max_{α≥0} 2 Σ α_i - αᵀ K α`` on ``K = A/ρ + I``; at the optimum ``ω = Σ α_i``, and the
SVM-θ value of a subset is ``Σ_{i∈S} α_i``. :func:`one_class_svm` solves this non-negative QP
exactly (to the accuracy of its linear solves) by block principal pivoting (Júdice & Pires
1994; the NNLS variant of Kim & Park 2011): guess the support, solve ``K_FF α_F = 1``, swap
the indices violating ``α_F ≥ 0`` or ``(Kα - 1)_G ≥ 0``, with Murty's single-swap rule as the
backup that guarantees termination for positive definite K. ``ω(K) = 1/min_{β∈Δ} βᵀKβ`` and
``α = β/(βᵀKβ)`` — the problem libsvm's one-class SVM solves with ``ν = 1/n`` (the tests use it
as an oracle); GraKeL's ``SvmTheta`` runs libsvm with its default ``ν = 0.5``, another problem
(``Σα = n/2`` with ``α_i ≤ 1``).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from gramdist.errors import JobError
from gramdist.kernels.eigen import smallest_eigenvalues
from gramdist.lazy import deferred_import

# only graphs above DENSE_MAX nodes need them (one in NCI1): 35-70 ms of a run's start
sla = deferred_import("scipy.linalg")
spla = deferred_import("scipy.sparse.linalg")

#: graphs up to this many nodes use dense linear algebra in the SVM-θ solver (in stacks of
#: equal size); larger ones Lanczos for λ_min and SuperLU for the QP. Measured (2026-11-29, one
#: thread): D&D's embedding takes 2.10-2.12 s with any limit from 40 to 150 and 2.20 s at 200;
#: NCI1's 0.40 s at 100, 0.42 s at 64 and 0.56 s at 40 (its small graphs gain from stacks)
DENSE_MAX = 100
#: sparse K up to this many rows: one factorisation and the capacitance form (``_CapacitanceSolver``)
CAPACITANCE_MAX = 2000

#: ``solve(passive) -> (x, Kx - 1)`` with ``x_G = 0`` and ``K_FF x_F = 1`` (F passive, G the rest)
PassiveSolver = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def require_cvxopt() -> None:
    try:
        import cvxopt  # noqa: F401
    except ImportError:
        raise JobError("kernel lovasz_theta needs cvxopt for its semidefinite program: pip install cvxopt  "
                       "(or pip install 'gramdist[theta]')") from None


# --------------------------------------------------------------------------- Lovász SDP
def lovasz_representation(n: int, edges: np.ndarray, tol: float = 1e-8) -> tuple[float, np.ndarray, bool]:
    """θ(G) and the Gram matrix ``K = I + Y/t`` of an optimal orthonormal representation.

    Parameters
    ----------
    n : number of nodes; edges : (m, 2) distinct undirected edges, no self-loops.

    Returns ``(theta, K (n, n), converged)``; ``converged`` is cvxopt's ``status == "optimal"``.
    """
    if n == 0:
        return 0.0, np.zeros((0, 0)), True
    if n == 1 or len(edges) == 0:
        return float(n), np.eye(n), True
    from cvxopt import matrix, solvers, spmatrix

    edges = np.asarray(edges, dtype=np.int64)
    m = len(edges)
    lo, hi = np.minimum(edges[:, 0], edges[:, 1]), np.maximum(edges[:, 0], edges[:, 1])
    rows = [int(v) for v in lo * n + hi] + [i * n + i for i in range(n)]  # vec index col*n+row, lower half
    cols = list(range(m)) + [m] * n
    g = spmatrix(-1.0, rows, cols, (n * n, m + 1))
    h = matrix(-1.0, (n, n))
    c = matrix([0.0] * m + [1.0])
    opts = {"show_progress": False, "abstol": tol, "reltol": tol, "feastol": tol, "maxiters": 200}
    sol = solvers.sdp(c, Gs=[g], hs=[h], options=opts)
    if sol["x"] is None:
        raise RuntimeError(f"the Lovász SDP failed on a graph with {n} nodes: {sol['status']}")
    x = np.array(sol["x"]).ravel()
    t, y = float(x[-1]), x[:m]
    k = np.eye(n)
    k[lo, hi] = y / t
    k[hi, lo] = y / t
    return t, k, sol["status"] == "optimal"


# --------------------------------------------------------------------------- subset values
_SUPPORTS: dict[int, list[np.ndarray]] = {}


def _supports(m: int) -> list[np.ndarray]:
    """For k = 1..m, the (C(m,k), k) index arrays of all k-subsets of range(m)."""
    if m not in _SUPPORTS:
        _SUPPORTS[m] = [np.array(list(itertools.combinations(range(m), k)), dtype=np.int64) for k in range(1, m + 1)]
    return _SUPPORTS[m]


def simplex_min(ks: np.ndarray, ridge: float = 1e-12) -> np.ndarray:
    """(B,) ``min_{λ ∈ Δ} λᵀ K_b λ`` for a batch of small PSD matrices ``ks`` (B, m, m).

    Exact up to rounding: the minimum over supports T of the affine minimiser on T, when it
    lies in the simplex (``K_T + ridge·I`` solved per matrix by LAPACK, so a batch member's
    result does not depend on the others); candidates are evaluated on ``K`` itself.

    The whole support is tried first: where its affine minimiser lies in the simplex it is
    the minimum (the simplex lies in that affine hull), and the other supports are not
    enumerated. It must be certified: stationary, ``Kλ = (λᵀKλ)·1`` to 1e-12 relative (a
    near-singular ``K``, whose ridge solution may be a feasible point short of the minimum,
    fails that and is enumerated). On 200 NCI1 graphs' sampled subsets (sizes 2..8) 82 % are
    certified and the function takes 0.14 s instead of 1.46 s. 2.6 % of the values then differ
    from full enumeration's, by at most 1.1e-9 relative: Lovász's ``K`` is an SDP solution
    accurate to its 1e-8 tolerance and can be slightly indefinite, so a boundary point may lie
    that much below the stationary one, which is within the accuracy of ``K`` itself.
    """
    ks = np.asarray(ks, dtype=np.float64)
    b, m, _ = ks.shape
    if b == 0:
        return np.full(0, np.inf)
    lam, val = _affine_minimisers(ks, ridge)
    best = val
    with np.errstate(invalid="ignore"):
        # certified optimal: Kλ = (λᵀKλ)·1 to 1e-12 relative; a near-singular K, whose ridge
        # solution may be a feasible point short of the minimum, fails it and is enumerated
        grad = np.einsum("bij,bj->bi", ks, lam)
        certified = np.isfinite(val) & (val > 0) & (np.abs(grad - val[:, None]).max(axis=1) <= 1e-12 * val)
    rest = np.flatnonzero(~certified)
    if len(rest):
        sub = ks[rest]
        best[rest] = np.min([_support_values(sub, idx, ridge).min(axis=1) for idx in _supports(m)], axis=0)
    return best


def _affine_minimisers(flat: np.ndarray, ridge: float) -> tuple[np.ndarray, np.ndarray]:
    """``(λ, λᵀKλ)`` of the affine minimiser ``(K + ridge·I)⁻¹1 / 1ᵀ(K + ridge·I)⁻¹1`` of each
    (k, k) matrix of ``flat``; the value is ``inf`` where λ leaves the simplex."""
    k = flat.shape[1]
    x = np.linalg.solve(flat + ridge * np.eye(k), np.ones((len(flat), k, 1)))[:, :, 0]
    s = x.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = x / s[:, None]
    ok = np.isfinite(lam).all(axis=1) & (lam >= 0).all(axis=1)
    val = (lam[:, :, None] * flat * lam[:, None, :]).reshape(len(flat), k * k).sum(axis=1)
    return lam, np.where(ok, val, np.inf)


def _support_values(ks: np.ndarray, idx: np.ndarray, ridge: float) -> np.ndarray:
    """(B, C) ``λᵀKλ`` of the affine minimiser on each support ``idx[c]`` (C, k) of each
    matrix, ``inf`` where it leaves the simplex."""
    b, k = len(ks), idx.shape[1]
    flat = ks[:, idx[:, :, None], idx[:, None, :]].reshape(-1, k, k)  # (B·C, k, k)
    return _affine_minimisers(flat, ridge)[1].reshape(b, -1)


# --------------------------------------------------------------------------- one-class SVM
def min_eigenvalue(a: sp.csr_matrix) -> float:
    """Smallest eigenvalue of a symmetric sparse matrix: dense ``eigvalsh`` up to DENSE_MAX rows,
    else Lanczos (:func:`gramdist.kernels.eigen.smallest_eigenvalues`, the same bits as the
    embedding's batched call gives this matrix)."""
    n = a.shape[0]
    if n == 0:
        return 0.0
    if n <= DENSE_MAX:
        return float(sla.eigvalsh(a.toarray(), subset_by_index=(0, 0))[0])
    return float(smallest_eigenvalues(a, np.array([0, n]))[0])


def svm_theta_matrix(a: sp.spmatrix, margin: float) -> sp.spmatrix:
    """``K = A/ρ + I`` of a 0/1 adjacency with ``ρ = -λ_min(A)·(1 + margin)`` (K = I for a graph
    without edges): :func:`theta_matrix` of its edges."""
    n = a.shape[0]
    lam = min_eigenvalue(a)
    if a.nnz == 0 or lam >= 0:
        return sp.identity(n, format="csr")
    upper = sp.triu(a, k=1).tocoo()
    return theta_matrix(n, np.stack([upper.row, upper.col], axis=1), -lam * (1.0 + margin))


def theta_matrix(n: int, edges: np.ndarray, rho: float) -> sp.csc_matrix:
    """SVM-θ's ``K = A/ρ + I`` (n, n) of distinct edges ``(m, 2)`` without self-loops, as CSC
    with sorted indices: SuperLU's input. Its arrays are built here (entries sorted by row and
    column, which for a symmetric K are its CSC arrays): SciPy's COO conversion took 160 µs a
    graph."""
    diag = np.arange(n)
    rows = np.concatenate([edges[:, 0], edges[:, 1], diag])
    cols = np.concatenate([edges[:, 1], edges[:, 0], diag])
    values = np.concatenate([np.full(2 * len(edges), 1.0 / rho), np.ones(n)])
    order = np.argsort(rows * n + cols)
    indptr = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return sp.csc_matrix((values[order], cols[order].astype(np.int32), indptr), shape=(n, n))


def one_class_svm(k: np.ndarray | sp.spmatrix, tol: float = 1e-10, max_iter: int = 1000) -> np.ndarray:
    """α ≥ 0 maximising ``2·1ᵀα - αᵀKα`` for a positive definite K (module docstring).

    Each pivoting step needs the x with ``x_G = 0`` and ``K_FF x_F = 1`` for the passive set F
    and its complement G. A dense K (or a sparse one up to DENSE_MAX rows) solves ``K_FF`` by
    LAPACK each step; a sparse K up to CAPACITANCE_MAX rows is factored once
    (:class:`_CapacitanceSolver`); a larger one has ``K_FF`` factored each step (its G is too
    large to carry K⁻¹'s columns: 5,748 nodes, ~570 columns).
    """
    n = k.shape[0]
    if n == 0:
        return np.zeros(0)
    if sp.issparse(k) and n <= DENSE_MAX:
        k = k.toarray()
    if not sp.issparse(k):
        solve = _refactoring_solver(k, lambda f: np.linalg.solve(k[np.ix_(f, f)], np.ones(len(f))))
    elif n <= CAPACITANCE_MAX:
        solve = _CapacitanceSolver(k)
    else:
        k = k.tocsc()
        solve = _refactoring_solver(k, lambda f: _factor_spd(k[f][:, f]).solve(np.ones(len(f))))
    return _principal_pivoting(n, solve, tol, max_iter)


def _principal_pivoting(n: int, solve: PassiveSolver, tol: float, max_iter: int) -> np.ndarray:
    """Block principal pivoting on an n × n K, given its :data:`PassiveSolver` (only the
    gradient's G entries are read)."""
    passive = np.ones(n, dtype=bool)
    best, backup = n + 1, 3
    for _ in range(max_iter):
        x, grad = solve(passive)
        bad = (passive & (x < -tol)) | (~passive & (grad < -tol))
        n_bad = int(bad.sum())
        if n_bad == 0:
            return np.maximum(x, 0.0)
        if n_bad < best:
            best, backup = n_bad, 3
            passive ^= bad
        elif backup > 0:
            backup -= 1
            passive ^= bad
        else:
            i = int(np.flatnonzero(bad)[-1])
            passive[i] = ~passive[i]
    raise RuntimeError(f"one-class SVM (block principal pivoting) did not converge in {max_iter} iterations")


def _refactoring_solver(k: np.ndarray | sp.csc_matrix, solve_passive: Callable[[np.ndarray], np.ndarray]
                        ) -> PassiveSolver:
    """The :data:`PassiveSolver` that solves ``K_FF x_F = 1`` anew at each step
    (``solve_passive(F)``, F the passive indices) and takes the gradient from one product."""
    def solve(passive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        x = np.zeros(len(passive))
        f = np.flatnonzero(passive)
        if len(f):
            x[f] = solve_passive(f)
        return x, k @ x - 1.0
    return solve


def _factor_spd(k: sp.spmatrix):
    """SuperLU of a symmetric positive definite matrix: minimum degree on ``A + Aᵀ`` and no
    pivoting off the diagonal (SuperLU's setting for symmetric matrices): on D&D's K 25 % less
    time and 30 % less fill than its default COLAMD."""
    return spla.splu(k if sp.isspmatrix_csc(k) else sp.csc_matrix(k), permc_spec="MMD_AT_PLUS_A",
                     diag_pivot_thresh=0.0, options={"SymmetricMode": True})


class _CapacitanceSolver:
    """``x_G = 0``, ``K_FF x_F = 1`` from one factorisation of the whole K (Woodbury's
    capacitance form): with ``u = K⁻¹1`` and ``M = K⁻¹``, ``x = u - M_{:,G} c`` where
    ``M_GG c = u_G``. Then ``Kx = 1 - E_G c``: ``(Kx)_F = 1``, ``x_G = 0``, and the gradient
    ``Kx - 1`` is ``-c`` on G, with no product. The columns ``K⁻¹e_j`` are solved once, when
    j first leaves F, and kept. At the optimum ~10 % of a protein graph's nodes are in G, and
    the pivoting takes ~4.4 steps: on D&D's graphs of 100 to 2,000 nodes about 1.0 s against
    2.2 s for dense stacks up to 300 nodes and ``K_FF`` factored at each step above. ``M_GG`` is a principal block of the inverse of a
    positive definite K, so positive definite and no worse conditioned than K."""

    def __init__(self, k: sp.spmatrix) -> None:
        self._lu = _factor_spd(k)
        n = k.shape[0]
        self._u = self._lu.solve(np.ones(n))
        self._cols = np.zeros((n, 0))  # the columns K⁻¹e_j solved so far
        self._where = np.full(n, -1)  # j's column in _cols, -1 before it is solved

    def __call__(self, passive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = np.flatnonzero(~passive)
        grad = np.zeros(len(passive))
        if not len(g):
            return self._u.copy(), grad
        new = g[self._where[g] < 0]
        if len(new):
            e = np.zeros((len(passive), len(new)))
            e[new, np.arange(len(new))] = 1.0
            self._where[new] = np.arange(len(new)) + self._cols.shape[1]
            self._cols = np.hstack([self._cols, self._lu.solve(e)])
        m_g = self._cols[:, self._where[g]]  # K⁻¹[:, G]
        c = np.linalg.solve(m_g[g], self._u[g])
        x = self._u - m_g @ c
        x[g] = 0.0
        grad[g] = -c
        return x, grad


def one_class_svm_stack(k: np.ndarray, tol: float = 1e-10, max_iter: int = 1000) -> np.ndarray:
    """:func:`one_class_svm` for a stack of dense positive definite matrices ``k`` (B, n, n):
    (B, n) α, each row that of its own matrix.

    The same block principal pivoting, one iteration of every unfinished matrix at a time: the
    system of matrix ``b`` is ``k[b]`` with the rows and columns outside its passive set
    replaced by the identity and a right-hand side of 0 there, so those α are exactly 0 and
    the passive block is ``K_FF α_F = 1``. Every step is a per-matrix NumPy gufunc or
    elementwise operation, so a matrix's α never depends on the others in the stack. The
    first iteration (everything passive) is the very solve of :func:`one_class_svm`; later
    ones factor the padded matrix instead of ``K_FF``, which agrees to rounding (the tests
    compare the two).
    """
    b, n = k.shape[:2]
    out = np.zeros((b, n))
    passive = np.ones((b, n), dtype=bool)
    best = np.full(b, n + 1)
    backup = np.full(b, 3)
    todo = np.arange(b)
    eye = np.eye(n, dtype=bool)
    for _ in range(max_iter):
        if len(todo) == 0:
            return out
        kt, p = k[todo], passive[todo]
        outside = ~(p[:, :, None] & p[:, None, :])
        x = np.linalg.solve(np.where(outside, eye, kt), p[:, :, None].astype(np.float64))[:, :, 0]
        grad = np.matmul(kt, x[:, :, None])[:, :, 0] - 1.0
        bad = (p & (x < -tol)) | (~p & (grad < -tol))
        n_bad = bad.sum(axis=1)
        done = n_bad == 0
        out[todo[done]] = np.maximum(x[done], 0.0)
        improve = ~done & (n_bad < best[todo])
        retry = ~done & ~improve & (backup[todo] > 0)
        stuck = ~done & ~improve & ~retry
        best[todo[improve]] = n_bad[improve]
        backup[todo[improve]] = 3
        backup[todo[retry]] -= 1
        p ^= bad & (improve | retry)[:, None]
        rows = np.flatnonzero(stuck)  # Murty's rule: swap the last violating index alone
        p[rows, n - 1 - np.argmax(bad[rows, ::-1], axis=1)] ^= True
        passive[todo] = p
        todo = todo[~done]
    if len(todo) == 0:
        return out
    raise RuntimeError(f"one-class SVM (block principal pivoting) did not converge in {max_iter} iterations")


__all__ = ["DENSE_MAX", "lovasz_representation", "min_eigenvalue", "one_class_svm", "one_class_svm_stack",
           "require_cvxopt", "simplex_min", "svm_theta_matrix", "theta_matrix"]
