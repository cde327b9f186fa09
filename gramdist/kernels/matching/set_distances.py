"""The eleven set distances of the adaptive matching kernels (Woźnica, Kalousis & Hilario).

A set distance compares two finite *multisets* ``A`` (``m`` elements) and ``B`` (``n``
elements) of objects through a matrix of element distances ``D[a, b] = d(a, b) >= 0``. Every
function here takes the distances between the *distinct* elements, ``D`` of shape
``(ta, tb)``, and their multiplicities ``wa`` ``(ta,)`` and ``wb`` ``(tb,)`` (positive integers;
``None`` means all ones), so that ``m = wa.sum()`` and ``n = wb.sum()``. A multiset behaves
exactly like the list in which each element is repeated ``w`` times.

The paper (§3) writes them all as a normalised sum over a set of specific pairs
``F ⊆ A × B``: ``d_set(A, B) = Σ_{(a,b)∈F} d(a, b) / |F|``, with a different ``F`` for each
measure; the definitions follow Eiter & Mannila (1997, "Distance measures for point sets
and their computation", Acta Informatica 34) and Ramon & Bruynooghe (2001, "A polynomial
time computable metric between point sets", Acta Informatica 37). ``normalize=True`` (the
default, the paper's form) divides the measures defined as sums by a tie-independent
``|F|``; ``normalize=False`` gives the sums of the original references (used by the tests of
metric properties). Element distances are assumed bounded by ``M = 1`` (true for the walk
and tree distances of :mod:`gramdist.kernels.matching.decompositions`); ``M`` is the cost bound of the
matching distance and the penalty of RIBL.

========================  ======================================================  ============
name                      definition (m >= n where the orientation matters)         normalised by
========================  ======================================================  ============
``single``                min_{a,b} d(a,b)                                         (|F| = 1)
``complete``              max_{a,b} d(a,b)                                         (|F| = 1)
``average``               Σ_{a,b} d(a,b) / (m n)                                    (|F| = mn)
``smd``                   ½ (Σ_a min_b d + Σ_b min_a d)  [Eiter & Mannila]          m + n
``hausdorff``             max(max_a min_b d, max_b min_a d)                         (|F| = 1)
``ribl``                  (Σ_{b∈B} min_{a∈A} d(a,b) + M (m − n)) / m                (built in)
``tanimoto``              1 − c / (m + n − c),  c = max_matching Σ (M − d) / M      (built in)
``surjection``            min over surjections η: A→B of Σ_a d(a, η(a))             m
``fair_surjection``       same, each b has ⌊m/n⌋ or ⌈m/n⌉ preimages                  m
``linking``               min over linkings R (every a and b in a pair) Σ_R d       max(m, n)
``matching``              min over partial matchings Σ d + (M/2)·#unmatched         max(m, n)
========================  ======================================================  ============

Each function's docstring states its definition and the choices made where the sources
leave room. Surjections, fair surjections, linkings and matchings are solved exactly as
assignment problems with :func:`scipy.optimize.linear_sum_assignment` (Eiter & Mannila's
reductions); the tests check each against brute-force enumeration.

Empty multisets: two empty multisets are at distance 0. When exactly one is empty there are
no pairs; every element of the other is then charged the maximal element distance ``M``
(so the normalised value is 1), except for ``matching`` whose own definition charges
``M/2`` per unmatched element (normalised value ½), and ``tanimoto`` (1).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import permutations

import numpy as np
from scipy.optimize import linear_sum_assignment

#: The bound on element distances assumed by ``matching``, ``ribl`` and ``tanimoto``.
M_BOUND = 1.0

SET_DISTANCES = (
    "single", "complete", "average", "smd", "hausdorff", "ribl",
    "tanimoto", "surjection", "fair_surjection", "linking", "matching",
)

#: Distances that need one assignment problem per pair of multisets (slower).
ASSIGNMENT_BASED = frozenset({"tanimoto", "surjection", "fair_surjection", "linking", "matching"})


# ------------------------------------------------------------------------ helpers
def _prep(D: np.ndarray, wa: np.ndarray | None, wb: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2:
        raise ValueError(f"D must be 2-D, got shape {D.shape}")
    wa = np.ones(D.shape[0], np.int64) if wa is None else np.asarray(wa, dtype=np.int64)
    wb = np.ones(D.shape[1], np.int64) if wb is None else np.asarray(wb, dtype=np.int64)
    if wa.shape != (D.shape[0],) or wb.shape != (D.shape[1],):
        raise ValueError("multiplicities must match the shape of D")
    if (wa <= 0).any() or (wb <= 0).any():
        raise ValueError("multiplicities must be positive")
    return D, wa, wb


def _expand(D: np.ndarray, wa: np.ndarray, wb: np.ndarray) -> np.ndarray:
    """Instance-level (m, n) matrix: each distinct element repeated by its multiplicity."""
    return D[np.repeat(np.arange(D.shape[0]), wa)][:, np.repeat(np.arange(D.shape[1]), wb)]


def _empty_value(name: str, m: int, n: int, normalize: bool) -> float:
    """Value when at least one multiset is empty (see the module docstring)."""
    k = max(m, n)
    if k == 0:
        return 0.0
    if name == "matching":
        return 0.5 if normalize else 0.5 * M_BOUND * k
    if name in ("single", "complete", "average", "hausdorff", "ribl", "tanimoto") or normalize:
        return M_BOUND
    return 0.5 * M_BOUND * k if name == "smd" else M_BOUND * k


def _lsa_cost(C: np.ndarray) -> float:
    r, c = linear_sum_assignment(C)
    return float(C[r, c].sum())


# ------------------------------------------------------------- the eleven distances
def single_linkage(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                   normalize: bool = True) -> float:
    """Single linkage: ``d_SL(A, B) = min_{a∈A, b∈B} d(a, b)``; F is the closest pair."""
    D, wa, wb = _prep(D, wa, wb)
    if D.size == 0:
        return _empty_value("single", int(wa.sum()), int(wb.sum()), normalize)
    return float(D.min())


def complete_linkage(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                     normalize: bool = True) -> float:
    """Complete linkage: ``d_CL(A, B) = max_{a∈A, b∈B} d(a, b)``; F is the farthest pair."""
    D, wa, wb = _prep(D, wa, wb)
    if D.size == 0:
        return _empty_value("complete", int(wa.sum()), int(wb.sum()), normalize)
    return float(D.max())


def average_linkage(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                    normalize: bool = True) -> float:
    """Average linkage: ``d_AL(A, B) = Σ_{a∈A} Σ_{b∈B} d(a, b) / (|A| |B|)``; F = A × B.

    The mean over all pairs (with multiplicities); it is the average by definition, so
    ``normalize`` has no effect.
    """
    D, wa, wb = _prep(D, wa, wb)
    if D.size == 0:
        return _empty_value("average", int(wa.sum()), int(wb.sum()), normalize)
    return float(wa @ D @ wb) / float(wa.sum() * wb.sum())


def sum_of_minimum_distances(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                             normalize: bool = True) -> float:
    """Sum of minimum distances (Eiter & Mannila 1997).

    ``d_SMD(A, B) = ½ (Σ_{a∈A} min_{b∈B} d(a, b) + Σ_{b∈B} min_{a∈A} d(a, b))``: F pairs every
    element with its nearest neighbour in the other set (``|F| = m + n`` pairs counted with
    multiplicity). ``normalize=True`` gives the paper's ``Σ_F d / |F|``, i.e. the two sums
    divided by ``m + n``; ``normalize=False`` gives Eiter & Mannila's ½(…).
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("smd", m, n, normalize)
    total = float(wa @ D.min(axis=1)) + float(wb @ D.min(axis=0))
    return total / (m + n) if normalize else 0.5 * total


def hausdorff(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
              normalize: bool = True) -> float:
    """Hausdorff distance: ``d_H(A, B) = max(max_a min_b d(a, b), max_b min_a d(a, b))``.

    F is the single pair realising the larger of the two directed distances. A metric on
    finite sets when ``d`` is a metric (multiplicities do not matter).
    """
    D, wa, wb = _prep(D, wa, wb)
    if D.size == 0:
        return _empty_value("hausdorff", int(wa.sum()), int(wb.sum()), normalize)
    return float(max(D.min(axis=1).max(), D.min(axis=0).max()))


def ribl(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
         normalize: bool = True) -> float:
    """RIBL set distance (Emde & Wettschereck 1996; Horváth, Wrobel & Bohnebeck 2001).

    RIBL's set similarity maps every element of the *smaller* set to its most similar
    element of the larger one and divides the summed similarity by the size of the larger
    set. With similarity ``M − d`` this is, for ``m = |A| > n = |B|``::

        d_RIBL(A, B) = (Σ_{b∈B} min_{a∈A} d(a, b) + M (m − n)) / m

    i.e. F = {(nn_A(b), b)} and each of the ``m − n`` unmatched elements of the larger set
    costs ``M``. The definition is asymmetric when ``m = n`` (which set is "the smaller"
    is then arbitrary); we use the mean of both orientations,
    ``(Σ_b min_a d + Σ_a min_b d) / (2m)``, so that ``d_RIBL`` is symmetric. The value is
    normalised by construction; ``normalize`` has no effect.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("ribl", m, n, normalize)
    to_a = float(wb @ D.min(axis=0))  # Σ_b min_a d
    to_b = float(wa @ D.min(axis=1))  # Σ_a min_b d
    if m > n:
        return (to_a + M_BOUND * (m - n)) / m
    if n > m:
        return (to_b + M_BOUND * (n - m)) / n
    return (to_a + to_b) / (2 * m)


def surjection(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
               normalize: bool = True) -> float:
    """Surjection distance (Eiter & Mannila 1997).

    For ``m >= n`` (else the roles swap): ``d_S(A, B) = min_η Σ_{a∈A} d(a, η(a))`` over all
    surjections ``η: A → B``; F is the graph of the optimal η, ``|F| = m``. Solved as an
    ``m × m`` assignment: the ``n`` columns of ``B`` must each receive one element, and
    ``m − n`` extra columns let any other element go to its nearest ``b`` (cost ``min_b d``).
    ``normalize=True`` divides by ``m``.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("surjection", m, n, normalize)
    total = _surjection_raw(_expand(D, wa, wb))
    return total / max(m, n) if normalize else total


def _surjection_raw(X: np.ndarray) -> float:
    if X.shape[0] < X.shape[1]:
        X = X.T
    m, n = X.shape
    C = np.concatenate([X, np.repeat(X.min(axis=1, keepdims=True), m - n, axis=1)], axis=1)
    return _lsa_cost(C)


def fair_surjection(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                    normalize: bool = True) -> float:
    """Fair surjection distance (Eiter & Mannila 1997).

    As :func:`surjection` (``m >= n``), restricted to *fair* surjections: every ``b`` has
    ``⌊m/n⌋`` or ``⌈m/n⌉`` preimages. Assignment formulation: with ``m = q n + r``, each
    ``b`` gets ``q`` mandatory columns and one optional column; ``n − r`` dummy rows (cost 0
    on optional columns, forbidden on mandatory ones) absorb the unused optional columns,
    so exactly ``r`` elements of ``B`` receive ``q + 1``. ``normalize=True`` divides by ``m``.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("fair_surjection", m, n, normalize)
    total = _fair_surjection_raw(_expand(D, wa, wb))
    return total / max(m, n) if normalize else total


def _fair_surjection_raw(X: np.ndarray) -> float:
    if X.shape[0] < X.shape[1]:
        X = X.T
    m, n = X.shape
    q, r = divmod(m, n)
    C = np.repeat(X, q, axis=1)
    if r:
        top = np.concatenate([C, X], axis=1)
        dummy = np.concatenate([np.full((n - r, n * q), np.inf), np.zeros((n - r, n))], axis=1)
        C = np.concatenate([top, dummy], axis=0)
    rows, cols = linear_sum_assignment(C)
    real = rows < m
    return float(C[rows[real], cols[real]].sum())


def linking(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
            normalize: bool = True) -> float:
    """Link distance (Eiter & Mannila 1997).

    ``d_L(A, B) = min_R Σ_{(a,b)∈R} d(a, b)`` over all *linkings* ``R ⊆ A × B``: relations in
    which every element of ``A`` and of ``B`` appears in at least one pair (a minimum-cost edge
    cover of the complete bipartite graph). Solved as the ``(m+n) × (m+n)`` assignment
    ``[[D, diag(min_b d(a,b))], [diag(min_a d(a,b)), 0]]`` (∞ off the diagonals): an element
    not matched one-to-one is linked to its nearest neighbour. ``|F|`` of the optimal linking
    depends on how ties are broken, so ``normalize=True`` divides by its tie-free lower bound
    ``max(m, n)``.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("linking", m, n, normalize)
    total = _linking_raw(_expand(D, wa, wb))
    return total / max(m, n) if normalize else total


def _linking_raw(X: np.ndarray) -> float:
    m, n = X.shape
    top_right = np.full((m, m), np.inf)
    np.fill_diagonal(top_right, X.min(axis=1))
    bottom_left = np.full((n, n), np.inf)
    np.fill_diagonal(bottom_left, X.min(axis=0))
    C = np.block([[X, top_right], [bottom_left, np.zeros((n, m))]])
    return _lsa_cost(C)


def _matching_raw(X: np.ndarray) -> float:
    """Ramon–Bruynooghe matching cost of an instance-level (m, n) matrix, ``M = M_BOUND``."""
    m, n = X.shape
    k = max(m, n)
    # Pairing a with b costs min(d, M): never worse than leaving both unmatched (M/2 + M/2),
    # so a perfect assignment on the padded square matrix is an optimal partial matching.
    C = np.zeros((k, k))
    C[:m, :n] = np.minimum(X, M_BOUND)
    C[:m, n:] = 0.5 * M_BOUND
    C[m:, :n] = 0.5 * M_BOUND
    return _lsa_cost(C)


def matching(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
             normalize: bool = True) -> float:
    """Matching distance (Ramon & Bruynooghe 2001).

    ``d_M(A, B) = min_μ [Σ_{(a,b)∈μ} d(a, b) + (M/2) (|A| + |B| − 2|μ|)]`` over all partial
    one-to-one matchings ``μ``; each unmatched element costs ``M/2``. With ``d`` a metric
    bounded by ``M`` it is a metric on multisets (``normalize=False``). Solved as one
    ``max(m, n)``-square assignment (pairs cost ``min(d, M)``, dummies ``M/2``).
    ``normalize=True`` divides by ``max(m, n)``, which maps it into ``[0, 1]`` (this is the
    ``d_M`` used inside the tree distance); the normalised form is not a metric.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("matching", m, n, normalize)
    total = _matching_raw(_expand(D, wa, wb))
    return total / max(m, n) if normalize else total


def tanimoto(D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
             normalize: bool = True) -> float:
    """Tanimoto set distance, soft version (our formulation; see below).

    The Tanimoto (Jaccard) distance of crisp sets is ``1 − |A∩B| / |A∪B| =
    (|A| + |B| − 2|A∩B|) / (|A| + |B| − |A∩B|)``. Secondary sources disagree on how the
    relational-learning literature cited by the paper extends it to sets of objects with a
    graded distance, so we state ours: the intersection size is the *fuzzy overlap*
    ``c = max_μ Σ_{(a,b)∈μ} (M − d(a, b)) / M`` over partial one-to-one matchings ``μ``
    (``M = 1``), giving::

        d_T(A, B) = (m + n − 2c) / (m + n − c) = 4 d_M / (m + n + 2 d_M)

    with ``d_M`` the raw :func:`matching` distance (``c = (m + n)/2 − d_M``). It equals the
    crisp Tanimoto distance of multisets when ``d`` is 0/1, lies in ``[0, 1]``, and is the
    Steinhaus transform of the metric ``d_M`` about the empty set, hence itself a metric.
    Normalised by construction; ``normalize`` has no effect.
    """
    D, wa, wb = _prep(D, wa, wb)
    m, n = int(wa.sum()), int(wb.sum())
    if D.size == 0:
        return _empty_value("tanimoto", m, n, normalize)
    dm = _matching_raw(_expand(D, wa, wb))
    return 4.0 * dm / (m + n + 2.0 * dm)


def _matching_raw_reduced(D: np.ndarray, wa: np.ndarray, tb: np.ndarray, wb: np.ndarray) -> float:
    """Raw matching cost between multisets (``D[:, tb]``, counts ``wa``/``wb``) after pairing,
    at cost 0, as many elements at distance exactly 0 as possible (see ``metric``)."""
    sub = D[:, tb]
    ca = wa.astype(np.int64).copy()
    cb = wb.astype(np.int64).copy()
    for a, b in zip(*np.nonzero(sub == 0.0)):
        k = min(ca[a], cb[b])
        ca[a] -= k
        cb[b] -= k
    ra, rb = np.flatnonzero(ca), np.flatnonzero(cb)
    if len(ra) == 0 or len(rb) == 0:
        return 0.5 * M_BOUND * float(ca.sum() + cb.sum())
    X = sub[np.repeat(ra, ca[ra])][:, np.repeat(rb, cb[rb])]
    return _matching_raw(X)


#: Raw (un-normalised) instance-level solvers of the assignment-based distances; for
#: "tanimoto" the raw matching cost, from which d_T = 4 d_M / (m + n + 2 d_M).
_RAW: dict[str, Callable[[np.ndarray], float]] = {
    "surjection": _surjection_raw,
    "fair_surjection": _fair_surjection_raw,
    "linking": _linking_raw,
    "matching": _matching_raw,
    "tanimoto": _matching_raw,
}

SET_DISTANCE_FUNCTIONS: dict[str, Callable[..., float]] = {
    "single": single_linkage,
    "complete": complete_linkage,
    "average": average_linkage,
    "smd": sum_of_minimum_distances,
    "hausdorff": hausdorff,
    "ribl": ribl,
    "tanimoto": tanimoto,
    "surjection": surjection,
    "fair_surjection": fair_surjection,
    "linking": linking,
    "matching": matching,
}


def set_distance(name: str, D: np.ndarray, wa: np.ndarray | None = None, wb: np.ndarray | None = None,
                 normalize: bool = True) -> float:
    """The set distance ``name`` (one of :data:`SET_DISTANCES`) between two multisets."""
    try:
        fn = SET_DISTANCE_FUNCTIONS[name]
    except KeyError:
        raise ValueError(f"unknown set distance {name!r}; known: {', '.join(SET_DISTANCES)}") from None
    return fn(D, wa, wb, normalize)


# ------------------------------------------------- one multiset against many (vectorised)
class ManySets:
    """``p`` multisets over a universe, prepared once for :func:`set_distances_to_many`.

    ``B_s`` holds universe elements ``types[indptr[s]:indptr[s+1]]`` (distinct within a
    segment) with multiplicities ``counts[...]``; segments may be empty.
    """

    def __init__(self, indptr: np.ndarray, types: np.ndarray, counts: np.ndarray) -> None:
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.types = np.asarray(types, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64)
        csum = np.concatenate([[0], np.cumsum(self.counts)])
        self.sizes = csum[self.indptr[1:]] - csum[self.indptr[:-1]]
        self.nonempty = np.flatnonzero(np.diff(self.indptr) > 0)
        self.starts = self.indptr[:-1][self.nonempty]
        self.n = self.sizes[self.nonempty].astype(np.float64)
        self.fcounts = self.counts.astype(np.float64)
        self._expanded: dict[int, np.ndarray] = {}

    def expanded(self, s: int) -> np.ndarray:
        """Universe index of every *instance* of ``B_s`` (elements repeated by multiplicity)."""
        if s not in self._expanded:
            sl = slice(self.indptr[s], self.indptr[s + 1])
            self._expanded[s] = np.repeat(self.types[sl], self.counts[sl])
        return self._expanded[s]

    def __len__(self) -> int:
        return len(self.indptr) - 1


def set_distances_to_many(
    name: str,
    D: np.ndarray,
    wa: np.ndarray,
    indptr: np.ndarray | ManySets,
    types: np.ndarray | None = None,
    counts: np.ndarray | None = None,
    normalize: bool = True,
    metric: bool = False,
) -> np.ndarray:
    """Set distance between one multiset ``A`` and each of ``p`` multisets ``B_s``.

    Parameters
    ----------
    name : str
        One of :data:`SET_DISTANCES`.
    D : (ta, T) float64
        Element distances from the distinct elements of ``A`` to a universe of ``T`` elements.
    wa : (ta,) int
        Multiplicities of ``A``'s elements.
    indptr, types, counts : (p+1,), (E,), (E,) int, or a :class:`ManySets` as ``indptr``
        ``B_s`` holds universe elements ``types[indptr[s]:indptr[s+1]]`` (distinct within a
        segment) with multiplicities ``counts[...]``; segments may be empty.
    normalize : bool
        As in :func:`set_distance`.
    metric : bool
        Declare that ``D`` comes from a (pseudo-)metric bounded by ``M``. ``matching`` and
        ``tanimoto`` then first pair elements at distance exactly 0 (exact for a metric: an
        exchange argument with the triangle inequality shows some optimal matching pairs
        them) and solve the assignment only for the rest: much smaller problems when two
        graphs share most of their walks.

    Returns
    -------
    (p,) float64
        ``set_distance(name, D[:, B_s], wa, counts_s)`` for every ``s``. The linkage-type
        measures are vectorised over all ``B_s``; the assignment-based ones loop over ``s``.
    """
    B = indptr if isinstance(indptr, ManySets) else ManySets(indptr, types, counts)
    if name not in SET_DISTANCE_FUNCTIONS:
        raise ValueError(f"unknown set distance {name!r}; known: {', '.join(SET_DISTANCES)}")
    D = np.asarray(D, dtype=np.float64)
    wa = np.asarray(wa, dtype=np.int64)
    m = int(wa.sum())
    out = np.empty(len(B), dtype=np.float64)
    idx = B.nonempty if m > 0 else np.zeros(0, np.int64)
    if len(idx) < len(B):
        empty = np.ones(len(B), bool)
        empty[idx] = False
        for s in np.flatnonzero(empty):
            out[s] = _empty_value(name, m, int(B.sizes[s]), normalize)
    if len(idx) == 0:
        return out
    if name in ASSIGNMENT_BASED:
        out[idx] = _assignments_to_many(name, D, wa, B, idx, (normalize, metric))
    else:
        out[idx] = _linkages_to_many(name, D, wa, B, normalize)
    return out


def _assignments_to_many(name: str, D: np.ndarray, wa: np.ndarray, B: ManySets, idx: np.ndarray,
                         flags: tuple[bool, bool]) -> np.ndarray:
    """An assignment-based set distance from ``A`` to each non-empty ``B_s`` of ``idx``, one
    assignment problem each; ``flags`` = (normalize, metric) of :func:`set_distances_to_many`."""
    normalize, metric = flags
    m = int(wa.sum())
    raw = _RAW[name]
    reduce_zero = metric and name in ("matching", "tanimoto")
    if not reduce_zero:
        Xa = D[np.repeat(np.arange(D.shape[0]), wa)]       # instance rows of A, once
    out = np.empty(len(idx), dtype=np.float64)
    for i, s in enumerate(idx):
        n_s = int(B.sizes[s])
        if reduce_zero:
            total = _matching_raw_reduced(D, wa, B.types[B.indptr[s]:B.indptr[s + 1]],
                                          B.counts[B.indptr[s]:B.indptr[s + 1]])
        else:
            total = raw(Xa[:, B.expanded(s)])
        if name == "tanimoto":
            out[i] = 4.0 * total / (m + n_s + 2.0 * total)
        elif normalize:
            out[i] = total / max(m, n_s)
        else:
            out[i] = total
    return out


def _linkages_to_many(name: str, D: np.ndarray, wa: np.ndarray, B: ManySets, normalize: bool) -> np.ndarray:
    """A linkage-type set distance from ``A`` to every non-empty ``B_s`` at once (segment
    reductions over the entries of ``B``)."""
    m = int(wa.sum())
    starts, n = B.starts, B.n
    fa = wa.astype(np.float64)
    if name == "average":
        colsum = (fa @ D)[B.types]                             # Σ_a wa d(a, b) per entry
        return np.add.reduceat(colsum * B.fcounts, starts) / (m * n)
    colmin = D.min(axis=0)[B.types]                            # (E,): min_a d(a, b)
    if name == "complete":
        return np.maximum.reduceat(D.max(axis=0)[B.types], starts)
    if name == "single":
        return np.minimum.reduceat(colmin, starts)
    rowmin = np.minimum.reduceat(D[:, B.types], starts, axis=1)  # (ta, p'): min_b d(a, b) per B_s
    if name == "hausdorff":
        return np.maximum(rowmin.max(axis=0), np.maximum.reduceat(colmin, starts))
    to_b = fa @ rowmin                                         # Σ_a min_b d
    to_a = np.add.reduceat(colmin * B.fcounts, starts)         # Σ_b min_a d
    if name == "smd":
        return (to_b + to_a) / (m + n) if normalize else 0.5 * (to_b + to_a)
    if name == "ribl":
        big = np.maximum(m, n)
        return np.where(m > n, (to_a + M_BOUND * (m - n)) / big,
                        np.where(n > m, (to_b + M_BOUND * (n - m)) / big, (to_a + to_b) / (2.0 * m)))
    raise AssertionError(name)


# ------------------------------------------- small matchings, vectorised over many pairs
_PERMUTATIONS: dict[int, np.ndarray] = {}
#: Largest neighbourhood size solved by enumerating permutations (6! = 720); beyond it, one
#: assignment problem per pair.
MAX_ENUMERATED = 6


def padded_matching_costs(Dc: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Raw Ramon–Bruynooghe matching cost (``M = 1``) between all pairs of small padded sets.

    Parameters
    ----------
    Dc : (nl, nr) float64
        Element distances between two universes (values above ``M`` count as ``M``).
    left : (P, K1) int
        ``P`` sets of left-universe elements, padded with -1.
    right : (Q, K2) int
        ``Q`` sets of right-universe elements, padded with -1.

    Returns
    -------
    (P, Q) float64
        ``min_μ Σ_{(a,b)∈μ} min(d(a, b), M) + (M/2)·#unmatched`` for every pair of sets.

    Both sides are padded to ``K = max(K1, K2)`` slots; pairing two real elements costs
    ``min(d, M)``, a real element with a padding slot ``M/2``, two padding slots 0. A perfect
    assignment of the ``K × K`` matrix is then an optimal partial matching (``K`` is at least
    both set sizes and pairs never cost more than two unmatched elements), and the minimum is
    taken over all ``K!`` permutations, vectorised over the pairs (meant for neighbourhoods
    in trees: ``K`` is at most the maximum degree; above :data:`MAX_ENUMERATED` each pair is
    solved as an assignment problem instead). Each entry's sums run in a fixed order.
    """
    P, K1 = left.shape
    Q, K2 = right.shape
    K = max(K1, K2)
    if K == 0:
        return np.zeros((P, Q))
    if K > MAX_ENUMERATED:
        # high-degree nodes: K! permutations are too many; one assignment problem per pair
        out = np.empty((P, Q))
        for p in range(P):
            a = left[p][left[p] >= 0]
            for q in range(Q):
                b = right[q][right[q] >= 0]
                out[p, q] = 0.5 * M_BOUND * max(len(a), len(b)) if len(a) == 0 or len(b) == 0 \
                    else _matching_raw(Dc[np.ix_(a, b)])
        return out
    L = np.full((P, K), -1, np.int64)
    L[:, :K1] = left
    R = np.full((Q, K), -1, np.int64)
    R[:, :K2] = right
    # C[p, i, q, j]: cost of pairing slot i of left set p with slot j of right set q
    C = np.minimum(Dc[np.maximum(L, 0)[:, :, None, None], np.maximum(R, 0)[None, None, :, :]], M_BOUND)
    lpad = (L < 0)[:, :, None, None]
    rpad = (R < 0)[None, None, :, :]
    C = np.where(lpad & rpad, 0.0, np.where(lpad | rpad, 0.5 * M_BOUND, C))
    if K not in _PERMUTATIONS:
        _PERMUTATIONS[K] = np.array(list(permutations(range(K))), dtype=np.int64)
    best = None
    for perm in _PERMUTATIONS[K]:
        acc = C[:, 0, :, perm[0]].copy()
        for i in range(1, K):
            acc += C[:, i, :, perm[i]]
        best = acc if best is None else np.minimum(best, acc, out=best)
    return best


__all__ = [
    "M_BOUND", "SET_DISTANCES", "ASSIGNMENT_BASED", "SET_DISTANCE_FUNCTIONS", "set_distance",
    "set_distances_to_many", "single_linkage", "complete_linkage", "average_linkage",
    "sum_of_minimum_distances", "hausdorff", "ManySets", "ribl", "tanimoto", "surjection", "fair_surjection",
    "linking", "matching", "padded_matching_costs",
]
