"""The eleven set distances against brute-force enumeration and their metric properties."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gramdist.kernels.matching import set_distances as sd

ALL = sd.SET_DISTANCES


# ------------------------------------------------------------ brute-force references
def _instances(D, wa, wb):
    """Instance-level matrix of two multisets (each element repeated by its count)."""
    ia = np.repeat(np.arange(D.shape[0]), wa)
    ib = np.repeat(np.arange(D.shape[1]), wb)
    return D[np.ix_(ia, ib)]


def _partial_matchings(m, n):
    """Every partial one-to-one matching between range(m) and range(n), as lists of pairs."""
    def rec(i, used):
        if i == m:
            yield []
            return
        yield from rec(i + 1, used)                      # i unmatched
        for j in range(n):
            if j not in used:
                for rest in rec(i + 1, used | {j}):
                    yield [(i, j)] + rest
    yield from rec(0, frozenset())


def _nearest(X, i, axis):
    """Index of the nearest element of the other set to element ``i`` (first on ties), by a loop."""
    best, arg = np.inf, -1
    for k in range(X.shape[1 - axis]):
        v = X[i, k] if axis == 0 else X[k, i]
        if v < best:
            best, arg = v, k
    return arg


def definition(name, X, normalize=True):
    """The paper's set distances from their definitions, by loops over the elements.

    Woźnica et al. (§3) write every measure as ``d_set(A, B) = Σ_{(a,b)∈F} d(a, b) / |F|`` for a
    measure-specific set of pairs ``F ⊆ A × B`` (definitions after Eiter & Mannila 1997). ``X``
    is the instance-level distance matrix (rows: the m elements of A, columns: the n of B).
    Each branch builds ``F`` as a list of pairs with explicit loops and sums over it; none uses
    the closed forms of the implementation.
    """
    m, n = X.shape
    M = sd.M_BOUND
    if name == "average":           # F = A x B
        F = [(i, j) for i in range(m) for j in range(n)]
    elif name == "single":          # F = {the closest pair}
        F = [min(((i, j) for i in range(m) for j in range(n)), key=lambda p: X[p])]
    elif name == "complete":        # F = {the farthest pair}
        F = [max(((i, j) for i in range(m) for j in range(n)), key=lambda p: X[p])]
    elif name == "smd":             # every element paired with its nearest neighbour in the other set
        F = [(i, _nearest(X, i, 0)) for i in range(m)] + [(_nearest(X, j, 1), j) for j in range(n)]
        if not normalize:           # Eiter & Mannila's form: half the sum
            return sum(X[p] for p in F) / 2
    elif name == "hausdorff":       # F = {the nearest-neighbour pair that is farthest apart}
        nn = [(i, _nearest(X, i, 0)) for i in range(m)] + [(_nearest(X, j, 1), j) for j in range(n)]
        F = [max(nn, key=lambda p: X[p])]
    elif name == "ribl":
        return 1.0 - ribl_similarity(M - X)
    elif name == "tanimoto":
        return tanimoto_definition(X)
    else:
        raise AssertionError(name)
    return sum(X[p] for p in F) / len(F)


def ribl_similarity(S):
    """RIBL's similarity of two sets from element similarities ``S`` (Emde & Wettschereck 1996;
    Horváth, Wrobel & Bohnebeck 2001): every element of the smaller set is matched with its most
    similar element of the larger one, and the summed similarity is divided by the size of the
    larger set. When both sets have the same size, which one is "the smaller" is arbitrary: the
    two orientations are averaged (the implementation's documented choice)."""
    m, n = S.shape

    def one_way(sim, small, large):     # elements of `small` (rows of sim) into `large`
        total = 0.0
        for i in range(small):
            best = -np.inf
            for j in range(large):
                best = max(best, sim[i][j])
            total += best
        return total / large

    if m < n:
        return one_way(S, m, n)
    if n < m:
        return one_way(S.T, n, m)
    return 0.5 * (one_way(S, m, n) + one_way(S.T, n, m))


def tanimoto_definition(X):
    """Tanimoto distance ``1 − |A∩B| / |A∪B|`` of two multisets, with the intersection made soft:
    ``|A∩B|`` is the largest total similarity ``Σ (M − d) / M`` of a one-to-one partial matching
    (enumerated), ``|A∪B| = m + n − |A∩B|``. For 0/1 distances it is the crisp multiset Tanimoto."""
    m, n = X.shape
    M = sd.M_BOUND
    c = max(sum((M - X[i, j]) / M for i, j in mu) for mu in _partial_matchings(m, n))
    return 1.0 - c / (m + n - c)


def brute(name, D, wa, wb, normalize=True):
    X = _instances(D, wa, wb)
    m, n = X.shape
    M = sd.M_BOUND
    if name in ("single", "complete", "average", "smd", "hausdorff", "ribl", "tanimoto"):
        return definition(name, X, normalize)
    if name in ("surjection", "fair_surjection"):
        Y = X if m >= n else X.T
        big, small = max(m, n), min(m, n)
        best = np.inf
        for f in itertools.product(range(small), repeat=big):
            cnt = np.bincount(f, minlength=small)
            if cnt.min() == 0:
                continue
            if name == "fair_surjection" and cnt.max() - cnt.min() > 1:
                continue
            best = min(best, sum(Y[i, f[i]] for i in range(big)))
        return best / big if normalize else best
    if name == "linking":
        pairs = [(i, j) for i in range(m) for j in range(n)]
        best = np.inf
        for mask in range(1, 1 << len(pairs)):
            chosen = [pairs[k] for k in range(len(pairs)) if mask >> k & 1]
            if {i for i, _ in chosen} != set(range(m)) or {j for _, j in chosen} != set(range(n)):
                continue
            best = min(best, sum(X[i, j] for i, j in chosen))
        return best / max(m, n) if normalize else best
    if name == "matching":
        best = min(sum(X[i, j] for i, j in mu) + M / 2 * (m + n - 2 * len(mu))
                   for mu in _partial_matchings(m, n))
        return best / max(m, n) if normalize else best
    raise AssertionError(name)


def _random_multisets(rng, max_distinct=3, max_mult=2, max_total=4, grid=None):
    while True:
        ta, tb = rng.integers(1, max_distinct + 1, size=2)
        wa = rng.integers(1, max_mult + 1, size=ta)
        wb = rng.integers(1, max_mult + 1, size=tb)
        if wa.sum() <= max_total and wb.sum() <= max_total:
            break
    D = rng.random((ta, tb))
    if grid:
        D = np.round(D * grid) / grid      # many ties, like the discrete labels of real data
    return D, wa, wb


# ------------------------------------------------------------------------ tests
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("normalize", [True, False])
def test_against_brute_force(name, normalize):
    rng = np.random.default_rng(7)
    for trial in range(40):
        D, wa, wb = _random_multisets(rng, grid=4 if trial % 2 else None)
        got = sd.set_distance(name, D, wa, wb, normalize=normalize)
        ref = brute(name, D, wa, wb, normalize=normalize)
        assert got == pytest.approx(ref, abs=1e-12), (name, D, wa, wb)


@pytest.mark.parametrize("name", ALL)
def test_multiplicities_equal_repeated_elements(name):
    rng = np.random.default_rng(3)
    for _ in range(10):
        D, wa, wb = _random_multisets(rng, max_total=5)
        X = _instances(D, wa, wb)
        assert sd.set_distance(name, D, wa, wb) == pytest.approx(sd.set_distance(name, X), abs=1e-12)


@pytest.mark.parametrize("name", ALL)
def test_to_many_matches_pairwise(name):
    rng = np.random.default_rng(11)
    T = 9
    Dfull = rng.random((4, T))
    wa = np.array([1, 2, 1, 3])
    # five multisets over the universe, including an empty one in the middle and at the end
    segs = [np.array([0, 3, 5]), np.array([], int), np.array([1]), np.array([2, 4, 6, 7, 8]), np.array([], int)]
    counts = [rng.integers(1, 3, size=len(s)) for s in segs]
    indptr = np.concatenate([[0], np.cumsum([len(s) for s in segs])])
    got = sd.set_distances_to_many(name, Dfull, wa, indptr, np.concatenate(segs), np.concatenate(counts))
    for s, (seg, cnt) in enumerate(zip(segs, counts)):
        if len(seg) == 0:
            expect = sd._empty_value(name, int(wa.sum()), 0, True)
        else:
            expect = sd.set_distance(name, Dfull[:, seg], wa, cnt)
        assert got[s] == pytest.approx(expect, abs=1e-12), (name, s)


def test_empty_conventions():
    for name in ALL:
        assert sd.set_distance(name, np.zeros((0, 0)), np.zeros(0, int), np.zeros(0, int)) == 0.0
        v = sd.set_distance(name, np.zeros((2, 0)), np.array([1, 1]), np.zeros(0, int))
        assert v == (0.5 if name == "matching" else 1.0)


def _point_multisets(rng, n_sets, pool):
    sets = []
    for _ in range(n_sets):
        k = rng.integers(1, 4)
        idx = rng.choice(len(pool), size=k, replace=False)
        sets.append((idx, rng.integers(1, 3, size=k)))
    return sets


def _dist(pool, A, B):
    """Bounded Euclidean metric min(|x - y|, 1) between distinct elements of A and B."""
    x, y = pool[A[0]], pool[B[0]]
    return np.minimum(np.linalg.norm(x[:, None] - y[None], axis=-1), 1.0)


@pytest.mark.parametrize("name,normalize", [("hausdorff", True), ("matching", False), ("tanimoto", True)])
def test_metric_properties(name, normalize):
    """Hausdorff, the raw matching distance and Tanimoto promise a metric: check the axioms."""
    rng = np.random.default_rng(5)
    pool = rng.random((8, 2)) * 1.2
    sets = _point_multisets(rng, 14, pool)

    def d(A, B):
        return sd.set_distance(name, _dist(pool, A, B), A[1], B[1], normalize=normalize)

    for A in sets:
        assert d(A, A) == pytest.approx(0.0, abs=1e-12)
    for A, B in itertools.combinations(sets, 2):
        assert d(A, B) == pytest.approx(d(B, A), abs=1e-12)
    for A, B, C in itertools.permutations(sets[:9], 3):
        assert d(A, C) <= d(A, B) + d(B, C) + 1e-12


@pytest.mark.parametrize("name", ALL)
def test_symmetry_and_identity(name):
    rng = np.random.default_rng(9)
    pool = rng.random((6, 2))
    sets = _point_multisets(rng, 8, pool)
    for A, B in itertools.combinations(sets, 2):
        assert sd.set_distance(name, _dist(pool, A, B), A[1], B[1]) == pytest.approx(
            sd.set_distance(name, _dist(pool, B, A), B[1], A[1]), abs=1e-12)
    if name not in ("complete", "average"):           # the others vanish on identical sets
        for A in sets:
            assert sd.set_distance(name, _dist(pool, A, A), A[1], A[1]) == pytest.approx(0.0, abs=1e-12)


def test_matching_normalised_is_not_a_metric():
    """The documented caveat: d_M / max(m, n) breaks the triangle inequality ({x}, {x,y}, {y})."""
    pts = np.array([[0.0, 0.0], [5.0, 0.0]])

    def d(A, B):
        return sd.matching(np.minimum(np.linalg.norm(pts[A][:, None] - pts[B][None], axis=-1), 1))

    assert d([0], [1]) > d([0], [0, 1]) + d([0, 1], [1])


def test_tanimoto_is_crisp_tanimoto_on_discrete_distances():
    a = np.array([0, 0, 1, 2])          # multisets of symbols with the 0/1 distance
    b = np.array([0, 1, 1, 3, 3])
    D = (a[:, None] != b[None, :]).astype(float)
    inter = sum(min(np.sum(a == s), np.sum(b == s)) for s in range(4))
    union = len(a) + len(b) - inter
    assert sd.tanimoto(D) == pytest.approx(1 - inter / union)


@pytest.mark.parametrize("k1,k2", [(4, 3), (8, 5)])   # enumerated, and the assignment fallback
def test_padded_matching_costs_agrees_with_assignment(k1, k2):
    rng = np.random.default_rng(2)
    Dc = rng.random((9, 8)) * 1.3                    # some entries above M = 1
    left = rng.integers(0, 9, size=(6, k1))
    right = rng.integers(0, 8, size=(5, k2))
    left[rng.random(left.shape) < 0.4] = -1          # padding: sets of 0..4 elements
    right[rng.random(right.shape) < 0.4] = -1
    got = sd.padded_matching_costs(Dc, left, right)
    for p in range(6):
        for q in range(5):
            a, b = left[p][left[p] >= 0], right[q][right[q] >= 0]
            if len(a) == 0 or len(b) == 0:
                ref = 0.5 * max(len(a), len(b))
            else:
                ref = sd.matching(Dc[np.ix_(a, b)], normalize=False)
            assert got[p, q] == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("name", ["matching", "tanimoto"])
def test_metric_shortcut_pairs_identical_elements_exactly(name):
    """With a metric, pairing elements at distance 0 first gives the exact optimum."""
    rng = np.random.default_rng(12)
    pts = rng.random((10, 2))
    pts[7] = pts[3]                                  # two distinct types at distance 0
    D = np.minimum(np.linalg.norm(pts[:, None] - pts[None], axis=-1), 1.0)
    for _ in range(20):
        ta = rng.choice(10, size=rng.integers(1, 6), replace=False)
        wa = rng.integers(1, 4, size=len(ta))
        segs = [np.sort(rng.choice(10, size=rng.integers(1, 6), replace=False)) for _ in range(4)]
        counts = [rng.integers(1, 4, size=len(sg)) for sg in segs]
        indptr = np.concatenate([[0], np.cumsum([len(sg) for sg in segs])])
        args = (name, D[ta], wa, indptr, np.concatenate(segs), np.concatenate(counts))
        fast = sd.set_distances_to_many(*args, metric=True)
        slow = sd.set_distances_to_many(*args, metric=False)
        np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)


def test_ribl_and_tanimoto_hand_worked():
    # RIBL, |A| = 3 > |B| = 1: b's best similarity 1 - 0.2 shared by the 3 elements of A
    D = np.array([[0.2], [0.5], [0.9]])
    assert sd.ribl(D) == pytest.approx(1 - 0.8 / 3) == pytest.approx(definition("ribl", D))
    # equal sizes: both orientations give (0.9 + 0.7) / 2 = 0.8, so d = 0.2
    D = np.array([[0.1, 0.7], [0.4, 0.3]])
    assert sd.ribl(D) == pytest.approx(0.2)
    # Tanimoto: the best matching pairs (0,0) and (1,1), overlap c = 0.9 + 0.7; 1 - c / (4 - c)
    assert sd.tanimoto(D) == pytest.approx(1 - 1.6 / 2.4) == pytest.approx(definition("tanimoto", D))
    # RIBL is not SMD: SMD averages all m + n nearest-neighbour distances of both sides
    D = np.array([[0.2], [0.5], [0.9]])
    assert sd.sum_of_minimum_distances(D) == pytest.approx((0.2 + 0.5 + 0.9 + 0.2) / 4)
    assert sd.ribl(D) != pytest.approx(sd.sum_of_minimum_distances(D))
