"""Budget maintenance policies of Da San Martino, Navarin & Sperduti (Neurocomputing 2016, §3.1).

Two families:

* *example* policies for the Dual and Mixed learners, which remove whole stored examples:
  ``random`` (uniform), ``oldest`` (first inserted), ``tau`` (smallest ``tau``; ties broken
  uniformly at random, as the paper says);
* *feature* policies for the Primal learner, which remove single features of ``w``:
  ``random``, ``weight`` (smallest ``|w_i|``), ``oldest`` (least recently inserted/modified)
  and ``fscore`` (smallest incremental F-score, Eq. (4)).

Each feature policy implies the memory occupancy ``sigma`` of one feature (Algorithm 3 counts
``sigma * |w|`` memory units): 2 for random and weight (index, weight), 3 for oldest (plus a
time stamp) and 5 for the F-score (index and the four running sums; the paper counts 5).
"""

from __future__ import annotations

import numpy as np

EXAMPLE_POLICIES = ("random", "oldest", "tau")
FEATURE_POLICIES = ("random", "weight", "oldest", "fscore")
#: memory units per stored feature of the Primal model, by policy (§3.1)
PRIMAL_SIGMA = {"random": 2, "weight": 2, "oldest": 3, "fscore": 5}


def smallest(priority: np.ndarray, count: int, tiebreak: tuple[np.ndarray, ...] = ()) -> np.ndarray:
    """Indices of the ``count`` entries with the smallest ``priority``.

    Ties at the boundary are resolved by the ``tiebreak`` arrays, earlier ones first, smaller
    values removed first (as in ``np.lexsort`` with the last key primary); remaining ties by
    index. Linear time apart from sorting the tied entries.

    Parameters
    ----------
    priority : (n,) float
    count : int, 0 <= count <= n
    tiebreak : tuple of (n,) arrays

    Returns
    -------
    (count,) int64 indices (in no particular order).
    """
    n = len(priority)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    if count >= n:
        return np.arange(n, dtype=np.int64)
    t = np.partition(priority, count - 1)[count - 1]
    below = np.flatnonzero(priority < t)
    tied = np.flatnonzero(priority == t)
    need = count - len(below)
    if need < len(tied):
        keys = [tied] + [np.asarray(tb)[tied] for tb in reversed(tiebreak)]
        tied = tied[np.lexsort(keys)][:need]
    return np.concatenate([below, tied]).astype(np.int64)


def fscore(fp: np.ndarray, fn: np.ndarray, f2p: np.ndarray, f2n: np.ndarray,
           n_pos: int, n_neg: int) -> np.ndarray:
    """Incremental F-score of Eq. (4) from the running sums of each feature.

    Parameters
    ----------
    fp, fn : (m,) float
        Sums of the feature's values over the positive / negative examples seen so far.
    f2p, f2n : (m,) float
        Sums of the squared values.
    n_pos, n_neg : int
        Numbers of positive / negative examples seen so far.

    Returns
    -------
    (m,) float64 F-scores. Conventions where Eq. (4) is undefined: a class with no example
    has average 0 and a class with fewer than two examples contributes no variance
    (``D = 0``); a zero denominator gives ``+inf`` when the numerator is positive (perfectly
    separating feature) and 0 otherwise.
    """
    fp, fn, f2p, f2n = (np.asarray(a, dtype=np.float64) for a in (fp, fn, f2p, f2n))
    avg_p = fp / n_pos if n_pos else np.zeros_like(fp)
    avg_n = fn / n_neg if n_neg else np.zeros_like(fn)
    tot = n_pos + n_neg
    avg = (fp + fn) / tot if tot else np.zeros_like(fp)
    num = (avg_p - avg) ** 2 + (avg_n - avg) ** 2
    d_p = (f2p - 2 * avg_p * fp + n_pos * avg_p ** 2) / (n_pos - 1) if n_pos > 1 else np.zeros_like(fp)
    d_n = (f2n - 2 * avg_n * fn + n_neg * avg_n ** 2) / (n_neg - 1) if n_neg > 1 else np.zeros_like(fn)
    den = np.maximum(d_p, 0.0) + np.maximum(d_n, 0.0)  # clamp rounding below 0
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / den
    out[den == 0] = np.where(num[den == 0] > 0, np.inf, 0.0)
    return out


__all__ = ["EXAMPLE_POLICIES", "FEATURE_POLICIES", "PRIMAL_SIGMA", "fscore", "smallest"]
