"""Nyström features: the settings, the fitted basis, and its arithmetic (no Zarr, no Dask).

Shared by feature stores (:mod:`gramdist.engine.featurize`) and
:class:`gramdist.FeatureTransformer`, which therefore import the same constants. m landmark
graphs L are drawn from the fit sample; K(L, L) is computed once, its eigenpairs with
``λ > eig_cutoff · λ_max`` are kept, and every graph is mapped to ``Φ(x) = Λ^{-1/2} Uᵀ K(L, x)``,
a dense row of k ≤ m floats, so that ``Φ(x)·Φ(x')`` is the Nyström approximation
``K(x, L) K(L, L)⁺ K(L, x')``. See :mod:`gramdist.engine.featurize` for the fidelity choices.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch

#: relative eigenvalue cutoff of the Nyström basis
DEFAULT_EIG_CUTOFF = 1e-8
LANDMARK_RULES = ("kmeans++", "uniform")
#: rounds of parallel D² draws after the first landmark
KMEANSPP_ROUNDS = 32
#: rows per matrix product when projecting onto the basis: every product has this shape (the
#: last block is padded with zeros), so a graph's features never depend on which other graphs
#: share its chunk (BLAS may round differently for other shapes)
PROJECTION_ROWS = 64


@dataclass(frozen=True)
class NystroemSpec:
    """Nyström features with ``m`` landmarks chosen by ``landmarks``, eigenvalues kept above
    ``eig_cutoff`` times the largest."""

    m: int
    landmarks: str = "kmeans++"
    eig_cutoff: float = DEFAULT_EIG_CUTOFF

    def validate(self) -> None:
        if isinstance(self.m, bool) or not isinstance(self.m, int) or self.m < 1:
            raise JobError(f"--nystroem: the number of landmarks must be a positive integer, got {self.m!r}")
        if self.landmarks not in LANDMARK_RULES:
            raise JobError(f"--landmarks: one of {', '.join(LANDMARK_RULES)}, got {self.landmarks!r}")
        if isinstance(self.eig_cutoff, bool) or not isinstance(self.eig_cutoff, (int, float, np.floating)) \
                or not 0.0 <= self.eig_cutoff < 1.0:
            raise JobError(f"--eig-cutoff: must be in [0, 1), got {self.eig_cutoff!r}")


@dataclass
class NystroemState:
    """What maps a graph to its Nyström features: landmarks, their K(l, l), the projection."""

    landmarks: GraphBatch
    landmark_indices: np.ndarray
    landmark_diag: np.ndarray
    eigenvalues: np.ndarray
    projection: np.ndarray
    attrs: dict[str, Any]

    @property
    def rank(self) -> int:
        return int(self.projection.shape[1])


def project(k: np.ndarray, projection: np.ndarray) -> np.ndarray:
    """``k @ projection`` ((n, m) @ (m, r)) in products of :data:`PROJECTION_ROWS` rows each,
    on one BLAS thread: each row's result is the same bits whatever the other rows."""
    n, m = k.shape
    out = np.empty((n, projection.shape[1]), dtype=np.float64)
    block = np.zeros((PROJECTION_ROWS, m), dtype=np.float64)
    with threadpool_limits(limits=1):
        for a in range(0, n, PROJECTION_ROWS):
            b = min(a + PROJECTION_ROWS, n)
            block[: b - a] = k[a:b]
            block[b - a:] = 0.0
            out[a:b] = (block @ projection)[: b - a]
    return out


def basis(w: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of K(L, L) and the projection onto its top eigenpairs.

    Returns ``(eigenvalues, projection)``: all m eigenvalues in decreasing order, and the
    (m, k) matrix ``U_k Λ_k^{-1/2}`` over the k eigenpairs with ``λ > cutoff * λ_max``. Each
    eigenvector's sign is fixed (its largest-magnitude entry positive), and LAPACK runs on
    one thread, so the same K(L, L) always gives the same bits.
    """
    w = np.asarray(w, dtype=np.float64)
    with threadpool_limits(limits=1):
        lam, u = np.linalg.eigh(w)
    lam, u = lam[::-1].copy(), u[:, ::-1].copy()
    if not len(lam) or not lam[0] > 0:
        raise JobError("Nyström: K(landmarks, landmarks) has no positive eigenvalue (all landmark graphs "
                       "have zero self-similarity?)")
    keep = lam > cutoff * lam[0]
    u = u[:, keep]
    flip = u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])] < 0
    u[:, flip] *= -1.0
    return lam, u / np.sqrt(lam[keep])


def d2_draw(rng: np.random.Generator, d2: np.ndarray, k: int) -> np.ndarray:
    """``k`` distinct indices drawn with probability ∝ ``d2`` (Efraimidis–Spirakis: the k
    largest ``log(u) / w``); fewer when fewer have ``d2 > 0``."""
    cand = np.flatnonzero(d2 > 0)
    if len(cand) <= k:
        return cand
    keys = np.log(rng.random(len(cand))) / d2[cand]
    return np.sort(cand[np.argpartition(-keys, k - 1)[:k]])
