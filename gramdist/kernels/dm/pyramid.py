"""Vocabulary-guided (VG) pyramid of the DM kernel: construction (Algorithm 1) and descent.

A pyramid partitions descriptor space into ``t`` levels of bins by hierarchical k-means with
branching ``b``. Bins are numbered level by level and parent-major, so the parents of the
non-root bins never decrease with the bin id and the children of a bin are contiguous ids
(``child_start[j] : child_start[j] + n_children[j]``, derived from ``parent``). Several
pyramids (one per SC iteration) are concatenated into one :class:`Pyramid` with ``roots[r]``
the root of the r-th. Array layout (``B`` bins in all, descriptors of dimension ``D``)::

    centres    (B, D) float64   bin centres c
    parent     (B,)   int64     parent bin id, -1 for a root
    level      (B,)   int64     0 for roots ... t-1 for leaves
    diameter   (B,)   float64   s, bounded as in Algorithm 1 lines 9-10
    roots      (R,)   int64     root bin of each pyramid

Choices where the paper is silent or garbled (documented and tested):

* Root (lines 3-4): the extracted text reads ``c = 2 x mean`` and ``s = max ||x - c||``; the
  "2x" belongs to the diameter bound, as in line 9, so ``c = mean`` and
  ``s = 2 max ||x - c||``.
* k-means runs on the distinct descriptors of a bin weighted by their multiplicity (the
  descriptor multiset), seeded by weighted k-means++ from ``rng`` and iterated (Lloyd, in
  float32) until no assignment changes, the centre shift falls below scikit-learn's
  tolerance, or ``max_iter`` rounds. A bin with fewer than ``b`` distinct
  descriptors gets one child per distinct descriptor; clusters that end empty are dropped.
  So a bin has between 1 and ``b`` children and every non-leaf bin has at least one.
* Descriptors are routed (Algorithm 2) to the nearest child centre in float64. Candidate
  distances come from one float32 BLAS product per parent bin; rows whose best two children
  are closer than a rounding bound are re-decided by float64 elementwise distances (first
  index on ties), so a descriptor's bin never depends on which other descriptors were
  routed with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from gramdist.arrayops import unique_rows

_TOL = 1e-4  # k-means centre-shift tolerance, relative to the data variance
_FALLBACK_ROWS = 4096  # rows re-decided in float64 at a time


@dataclass
class Pyramid:
    """Concatenated VG pyramids; see the module docstring for the layout."""

    centres: np.ndarray
    parent: np.ndarray
    level: np.ndarray
    diameter: np.ndarray
    roots: np.ndarray

    _NAMES = ("centres", "parent", "level", "diameter", "roots")

    @property
    def n_bins(self) -> int:
        return len(self.parent)

    @cached_property
    def n_children(self) -> np.ndarray:
        """(B,) int64 number of children of each bin."""
        return np.bincount(self.parent[self.parent >= 0], minlength=self.n_bins)

    @cached_property
    def child_start(self) -> np.ndarray:
        """(B,) int64 id of the first child of each bin (meaningless where n_children is 0)."""
        ids = np.flatnonzero(self.parent >= 0)
        first = np.searchsorted(self.parent[ids], np.arange(self.n_bins))
        return ids[np.minimum(first, max(len(ids) - 1, 0))] if len(ids) else np.zeros(self.n_bins, np.int64)

    @property
    def weight(self) -> np.ndarray:
        """(B,) bin weight w = 1 / (1 + s)."""
        return 1.0 / (1.0 + self.diameter)

    @property
    def match_coef(self) -> np.ndarray:
        """(B,) w(bin) - w(parent) (parent weight 0 for a root): Eq. (4.1) telescoped."""
        w = self.weight
        p = np.where(self.parent >= 0, w[np.maximum(self.parent, 0)], 0.0)
        return w - p

    def arrays(self, prefix: str = "") -> dict[str, np.ndarray]:
        """The arrays by name, for a :class:`~gramdist.kernels.base.KernelState`."""
        return {prefix + k: getattr(self, k) for k in self._NAMES}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str = "") -> Pyramid:
        return cls(**{k: np.asarray(arrays[prefix + k]) for k in cls._NAMES})

    @staticmethod
    def concat(parts: list[Pyramid]) -> Pyramid:
        """One pyramid holding ``parts`` in order, bin ids shifted accordingly."""
        shifts = np.cumsum([0] + [p.n_bins for p in parts[:-1]])
        return Pyramid(
            centres=np.concatenate([p.centres for p in parts]),
            parent=np.concatenate([np.where(p.parent >= 0, p.parent + s, -1) for p, s in zip(parts, shifts)]),
            level=np.concatenate([p.level for p in parts]),
            diameter=np.concatenate([p.diameter for p in parts]),
            roots=np.concatenate([p.roots + s for p, s in zip(parts, shifts)]).astype(np.int64),
        )


# --------------------------------------------------------------------------- fitting
def fit_pyramid(x: np.ndarray, t: int, b: int, rng: np.random.Generator, max_iter: int) -> Pyramid:
    """Build one pyramid (Algorithm 1) on the descriptor multiset ``x`` (S, D), S >= 1."""
    pts, mult = _distinct_rows(x)
    w = mult.astype(np.float64)
    c0 = (w @ pts) / w.sum()
    s0 = 2.0 * float(np.sqrt(((pts - c0) ** 2).sum(1)).max())
    centres, parent, level, diam = [c0[None, :]], [np.array([-1])], [np.array([0])], [np.array([s0])]
    n_bins = 1
    owner = np.zeros(len(pts), dtype=np.int64)  # bin of each distinct point at the current level
    first_of_level = 0  # id of the first bin of the level being split
    for lvl in range(1, t):
        order = np.argsort(owner, kind="stable")
        bins_here, starts = np.unique(owner[order], return_index=True)
        ends = np.append(starts[1:], len(order))
        new_owner = np.empty_like(owner)
        lvl_c, lvl_p, lvl_s = [], [], []
        next_id = n_bins
        for p, a, e in zip(bins_here, starts, ends):
            idx = order[a:e]
            cent, lab = _kmeans(pts[idx], w[idx], min(b, len(idx)), rng, max_iter)
            used = np.unique(lab)  # drop clusters that ended empty
            remap = np.full(len(cent), -1, dtype=np.int64)
            remap[used] = np.arange(len(used))
            cent, lab = cent[used], remap[lab]
            dist = np.sqrt(((pts[idx] - cent[lab]) ** 2).sum(1))
            rad = np.zeros(len(cent))
            np.maximum.at(rad, lab, dist)
            s_parent = diam[-1][p - first_of_level]
            lvl_c.append(cent)
            lvl_p.append(np.full(len(cent), p, dtype=np.int64))
            lvl_s.append(np.minimum(2.0 * rad, s_parent))  # Algorithm 1, lines 9-10
            new_owner[idx] = next_id + lab
            next_id += len(cent)
        first_of_level = n_bins
        centres.append(np.concatenate(lvl_c))
        parent.append(np.concatenate(lvl_p))
        level.append(np.full(len(parent[-1]), lvl, dtype=np.int64))
        diam.append(np.concatenate(lvl_s))
        n_bins += len(parent[-1])
        owner = new_owner
    return Pyramid(
        centres=np.ascontiguousarray(np.concatenate(centres)),
        parent=np.concatenate(parent).astype(np.int64),
        level=np.concatenate(level).astype(np.int64),
        diameter=np.concatenate(diam).astype(np.float64),
        roots=np.zeros(1, dtype=np.int64),
    )


def _distinct_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``x`` (in byte order) and their multiplicities."""
    x = np.ascontiguousarray(x, dtype=np.float64) + 0.0  # -0.0 -> 0.0, so equal rows have equal bytes
    first, inverse = unique_rows(x)
    return x[first], np.bincount(inverse, minlength=len(first))


def _kmeans(x: np.ndarray, w: np.ndarray, k: int, rng: np.random.Generator,
            max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """Weighted k-means on distinct points ``x`` (n, D); returns (centres (k, D), labels (n,)).

    Lloyd iterations stop when no label changes, when the summed squared centre shift falls
    below ``_TOL`` times the mean per-dimension variance (scikit-learn's criterion), or after
    ``max_iter`` rounds. Labels are the (float64) nearest returned centres.
    """
    n = len(x)
    if k >= n:
        return x.copy(), np.arange(n)
    # weighted k-means++ seeding
    chosen = [_draw(rng, w)]
    d2 = ((x - x[chosen[0]]) ** 2).sum(1)
    for _ in range(1, k):
        p = w * d2
        if p.sum() <= 0:  # distinct points make this unreachable; stay safe
            p = (d2 > 0).astype(np.float64)
        j = _draw(rng, p)
        chosen.append(j)
        d2 = np.minimum(d2, ((x - x[j]) ** 2).sum(1))
    cent = x[chosen].copy()
    wtot = w.sum()
    mean = (w @ x) / wtot
    tol = _TOL * float(w @ ((x - mean) ** 2).sum(1)) / wtot / x.shape[1]
    # Lloyd rounds in float32 (the fit only has to be deterministic, not exact); the returned
    # labels are the float64 nearest centres
    x32 = x.astype(np.float32)
    member = np.zeros((k, n), dtype=np.float32)  # weighted membership: centre sums in one product
    cols = np.arange(n)
    w32 = w.astype(np.float32)
    lab = None
    for _ in range(max_iter):
        c32 = cent.astype(np.float32)
        new = np.argmax(x32 @ c32.T - 0.5 * (c32 * c32).sum(1), axis=1)
        if lab is not None and np.array_equal(new, lab):
            break
        lab = new
        wsum = np.bincount(lab, weights=w, minlength=k)
        member[:] = 0.0
        member[lab, cols] = w32
        sums = (member @ x32).astype(np.float64)
        keep = wsum > 0  # an empty cluster keeps its centre
        moved = sums[keep] / wsum[keep, None]
        shift = float(((moved - cent[keep]) ** 2).sum())
        cent[keep] = moved
        if shift <= tol:
            break
    lab = np.argmin((cent * cent).sum(1)[None, :] - 2.0 * (x @ cent.T), axis=1)
    return cent, lab


def _draw(rng: np.random.Generator, p: np.ndarray) -> int:
    """Index drawn with probability proportional to ``p`` (non-negative, positive sum)."""
    c = np.cumsum(p)
    return int(min(np.searchsorted(c, rng.random() * c[-1], side="right"), len(p) - 1))


# --------------------------------------------------------------------------- descent
def _best_and_gap(score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each column of ``score`` (k, n): the row of its largest entry (the first on ties)
    and the gap between its largest and second-largest entries (0 on ties)."""
    top = score[0].copy()
    second = np.full_like(top, -np.inf)
    best = np.zeros(score.shape[1], dtype=np.int64)
    for j in range(1, len(score)):
        v = score[j]
        np.maximum(second, np.minimum(v, top), out=second)
        best[v > top] = j
        np.maximum(top, v, out=top)
    return best, top - second


def descend(x: np.ndarray, pyr: Pyramid, root: int, t: int) -> np.ndarray:
    """Bins of descriptors ``x`` (n, D) at levels 1..t-1 of the pyramid rooted at ``root``.

    Returns an (n, t-1) int64 array of global bin ids (Algorithm 2 without the root).

    Descriptors must be non-negative (SC values and scaled attributes lie in [0, 1]). Rows
    are regrouped by parent bin level by level so that each parent's rows are one contiguous
    block, scored against its children by one float32 BLAS product ``x.c - |c|^2 / 2`` (the
    nearest child has the largest score). For non-negative data the error of a float32 score
    (rounding of x, c and the product) is below ``(D + 3) u (|x| max|c| + max|c|^2 / 2)``
    with u = 2^-24, so when the best two scores are further apart than twice that bound the
    float32 winner is the float64 nearest centre; the other rows are re-decided with float64
    elementwise distances (first index on exact ties). A descriptor's bin is thus its nearest
    centre in float64, whatever block it was scored in.
    """
    n, d = x.shape
    out = np.empty((n, max(t - 1, 0)), dtype=np.int64)
    if n == 0 or t <= 1:
        return out
    child_start, n_children = pyr.child_start, pyr.n_children
    cent64 = pyr.centres
    cn = (cent64 * cent64).sum(1)
    cent_aug = np.hstack([cent64, cn[:, None]]).astype(np.float32)  # scores x.c - |c|^2/2
    cnorm = np.sqrt(cn)
    rel = 2.5 * 2.0 * (d + 3) * 2.0**-24  # twice the per-score bound, with slack
    xs = np.empty((n, d + 1), dtype=np.float32)  # rows in grouped order, then a -1/2 column
    xs[:, :d] = x
    xs[:, d] = -0.5
    xnorm = np.sqrt(np.einsum("ij,ij->i", x, x))
    perm = np.arange(n)  # xs[i] is x[perm[i]]
    cur = np.full(n, root, dtype=np.int64)  # parent bin of xs[i], grouped ascending
    for lvl in range(1, t):
        starts = np.flatnonzero(np.r_[True, cur[1:] != cur[:-1]])
        ends = np.append(starts[1:], n)
        nxt = np.empty(n, dtype=np.int64)
        for a, e in zip(starts, ends):
            p = cur[a]
            c0 = int(child_start[p])
            c1 = c0 + int(n_children[p])
            if c1 - c0 == 1:
                nxt[a:e] = c0
                continue
            best, gap = _best_and_gap(cent_aug[c0:c1] @ xs[a:e].T)
            cmax = float(cnorm[c0:c1].max())
            tol = rel * (xnorm[perm[a:e]] * cmax + 0.5 * cmax * cmax)
            amb = np.flatnonzero(gap <= tol)
            for lo in range(0, len(amb), _FALLBACK_ROWS):  # in slices, to bound memory
                part = amb[lo:lo + _FALLBACK_ROWS]
                diff = x[perm[a + part]][:, None, :] - cent64[None, c0:c1, :]
                best[part] = np.argmin((diff * diff).sum(-1), axis=1)
            nxt[a:e] = c0 + best
        out[perm, lvl - 1] = nxt
        if lvl < t - 1:
            # children are numbered parent-major, so sorting by child keeps parents contiguous
            lo_bin = int(nxt.min())
            key = nxt - lo_bin
            if int(key.max()) < 2**16:  # NumPy's stable sort of 16-bit keys is a radix sort
                key = key.astype(np.uint16)
            order = np.argsort(key, kind="stable")
            xs, perm, cur = xs[order], perm[order], nxt[order]
    return out
