"""Histogram intersection as a dot product: the unary coding of counts.

For non-negative integer counts ``a`` and ``b``, ``min(a, b) = Σ_{k ≥ 1} [a ≥ k] · [b ≥ k]``.
So the histogram intersection ``Σ_σ min(c(G, σ), c(G', σ))`` is the dot product of the 0/1
vectors ``ψ(G)`` with one feature ``(σ, k)`` for each ``k = 1..c(G, σ)``: a finite, exact
feature map (Kriege et al. 2016 use it to show that histogram intersection is PSD). Each
node contributes exactly one feature: the ``k``-th node (in any order) carrying label ``σ``
in its graph gets feature ``(σ, k)``.

All values are 1 and all dot products are integers below 2^53, so
:func:`gramdist.kernels.sparse.dot` computes them exactly, in any order:
the pairwise block and the feature-store rows agree bit for bit, whatever the tiling.
"""

from __future__ import annotations

import numpy as np

from gramdist.arrayops import rank_in_runs, run_starts
from gramdist.kernels.hashing import combine
from gramdist.kernels.sparse import SparseFeatures


def unary_features(rows: np.ndarray, labels: np.ndarray, n_rows: int, salt: np.uint64) -> SparseFeatures:
    """Unary-coded count features of ``(row, label)`` occurrences.

    Parameters
    ----------
    rows : (m,) int
        Row (graph) of each occurrence, in ``0..n_rows-1``.
    labels : (m,) uint64
        Label of each occurrence (already a stable hash).
    n_rows : int
        Number of rows of the result.
    salt : uint64
        Family tag mixed into every feature id.

    Returns
    -------
    SparseFeatures whose row ``g`` has the features ``combine(salt, σ, k)``, ``k = 1..c(g, σ)``,
    each with value 1, so ``<ψ(g), ψ(g')> = Σ_σ min(c(g, σ), c(g', σ))``.
    """
    rows = np.asarray(rows, dtype=np.int64)
    labels = np.asarray(labels, dtype=np.uint64)
    if len(rows) == 0:
        return SparseFeatures.empty(n_rows)
    order = np.lexsort((labels, rows))
    r, lab = rows[order], labels[order]
    rank = (rank_in_runs(run_starts(r, lab)) + 1).astype(np.uint64)
    return SparseFeatures.from_pairs(r, combine(salt, lab, rank), 1.0, n_rows)
