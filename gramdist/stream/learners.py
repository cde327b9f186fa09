"""Budget-aware online learners for graph streams (Da San Martino, Navarin & Sperduti 2016).

Three perceptron-style learners with the BPA-S step of Wang & Vucetic (2010), as in §4.2 of
the paper: an example ``x_t`` with score ``S(x_t)`` triggers an update when
``y_t S(x_t) <= beta`` (``beta = 1``), with step

    tau_t = min(C, (1 - y_t S(x_t)) / K(x_t, x_t)).

* :class:`DualLearner` (Algorithm 1) stores graphs with their ``y tau``; the score is
  ``sum_i y_i tau_i K(x_i, x_t)`` with the kernel evaluated *from the stored graphs* (their
  features are recomputed by the kernel at every score, as the dual algorithm does). Model
  size, Eq. (2): ``sum_j (|V_j| + |E_j| + 1)``.
* :class:`MixedLearner` (Algorithm 2) stores each example's sparse feature vector; model
  size, line 9: ``sum_j (1 + sigma |phi(G_j)|)`` with ``sigma = 2``. The score
  ``sum_j y_j tau_j <phi_j, phi_t>`` is computed as ``<sum_j y_j tau_j phi_j, phi_t>`` from a
  running aggregate (a time optimisation only: memory is accounted per stored example, and
  the aggregate equals the sum up to floating-point rounding).
* :class:`PrimalLearner` (Algorithm 3) keeps one sparse weight vector ``w``; model size
  ``sigma |w|`` with ``sigma`` set by the policy (2, 3 or 5; §3.1).

Removal rules. Dual/Mixed remove whole examples while ``|M| + |x_t| > B`` (Algorithm 1 line
8, Algorithm 2 line 9), so the model never exceeds ``B``; an example that alone exceeds ``B``
is not inserted. Primal: the features of ``x_t`` already in ``w`` are updated first; then, if
``sigma |w + phi(x_t)| > B``, the policy picks which features of the union are dropped:

* ``weight`` — the features with the smallest ``|w_i|`` after the update, new features
  included (a new feature whose weight is below every stored one is not inserted: §3.1);
  ties drop new features first;
* ``oldest`` — the least recently inserted/modified features; ties (features of the current
  example) drop new features first, then the smallest ``|w_i|``;
* ``fscore`` — the smallest incremental F-score (Eq. (4)); running sums are kept for the
  stored features and updated with every example of the stream (a feature entering ``w``
  starts its sums with the current example); ties drop new features first;
* ``random`` — uniformly random stored features not in ``x_t`` (removing those is what
  shrinks ``|w + phi(x_t)|``, Algorithm 3 line 8), then, if ``x_t`` alone is too big,
  random new features of ``x_t``.

Features whose weight becomes exactly 0 leave ``w``. All learners are deterministic given
``seed`` (used by the random policies and the tie-breaks of ``tau``).

Examples are :class:`Example` objects: a sparse feature vector (sorted uint64 keys, float64
values), ``K(x, x)``, the graph itself (a one-graph :class:`~gramdist.graphs.GraphBatch`) and
its size ``|V| + |E|``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.sparse import SparseFeatures, dot
from gramdist.stream.policies import EXAMPLE_POLICIES, FEATURE_POLICIES, PRIMAL_SIGMA, fscore, smallest


@dataclass
class Example:
    """One stream element as the learners see it.

    ``keys`` (k,) uint64 strictly increasing, ``values`` (k,) float64, ``sq_norm`` = K(x, x),
    ``graph`` a one-graph batch (needed by the Dual learner only), ``graph_size`` = |V| + |E|.
    """

    keys: np.ndarray
    values: np.ndarray
    sq_norm: float
    graph: GraphBatch | None = None
    graph_size: int = 0


def bpa_s_tau(y: int, score: float, kxx: float, C: float) -> float:
    """BPA-S step ``min(C, (1 - y S) / K(x, x))``; 0 when the loss or ``K(x, x)`` is 0."""
    loss = max(0.0, 1.0 - y * score)
    if kxx <= 0.0 or loss == 0.0:
        return 0.0
    return min(C, loss / kxx)


class _Learner:
    """Common parameters and bookkeeping."""

    kind = ""

    def __init__(self, budget: int, policy: str, C: float, beta: float, seed: int) -> None:
        self.budget = int(budget)
        self.policy = policy
        self.C = float(C)
        self.beta = float(beta)
        self.rng = np.random.default_rng(seed)
        self.t = 0  # examples seen
        self.updates = 0  # rounds with y S <= beta that changed the model

    @property
    def model_size(self) -> int:
        """Memory units of the current model, as the paper counts them."""
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        return {"model": self.kind, "policy": self.policy, "budget": self.budget, "C": self.C,
                "beta": self.beta}


# ---------------------------------------------------------------------------- Primal
class PrimalLearner(_Learner):
    """Algorithm 3: one sparse weight vector ``w`` under budget ``sigma |w| <= B``.

    Parameters
    ----------
    budget : int
        Memory budget ``B`` in memory units.
    policy : {"weight", "oldest", "fscore", "random"}
    C : float
        BPA-S aggressiveness.
    beta : float
        Update when ``y S <= beta``.
    sigma : int or None
        Memory units per feature; ``None`` takes the policy's value (2, 3, 5, 2).
    seed : int
        Seed of the random policy.
    """

    kind = "primal"

    def __init__(self, budget: int, policy: str = "weight", C: float = 0.01, beta: float = 1.0,
                 sigma: int | None = None, seed: int = 0) -> None:
        if policy not in FEATURE_POLICIES:
            raise ValueError(f"primal policy must be one of {FEATURE_POLICIES}, got {policy!r}")
        super().__init__(budget, policy, C, beta, seed)
        self.sigma = int(sigma if sigma is not None else PRIMAL_SIGMA[policy])
        self.capacity = self.budget // self.sigma
        self.keys = np.zeros(0, dtype=np.uint64)
        self.w = np.zeros(0, dtype=np.float64)
        self.stamp = np.zeros(0, dtype=np.int64)  # oldest: last insert/modify time
        self.stats = np.zeros((4, 0), dtype=np.float64)  # fscore: f+, f-, f2+, f2-
        self.n_pos = 0
        self.n_neg = 0
        # lookup of the last scored example (the model only changes in update, which clears it)
        self._last: tuple[Example, np.ndarray, np.ndarray] | None = None

    @property
    def model_size(self) -> int:
        return self.sigma * len(self.keys)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"sigma": self.sigma}

    def _lookup(self, x: Example) -> tuple[np.ndarray, np.ndarray]:
        if self._last is not None and self._last[0] is x:
            return self._last[1], self._last[2]
        pos = np.searchsorted(self.keys, x.keys)
        if len(self.keys):
            np.minimum(pos, len(self.keys) - 1, out=pos)
            hit = self.keys[pos] == x.keys
        else:
            hit = np.zeros(len(x.keys), dtype=bool)
        self._last = (x, pos, hit)
        return pos, hit

    def score(self, x: Example) -> float:
        pos, hit = self._lookup(x)
        return float(np.dot(self.w[pos[hit]], x.values[hit]))

    def update(self, x: Example, y: int, score: float) -> bool:
        """Learn from ``(x, y)`` after predicting ``score``; True if ``w`` changed."""
        self.t += 1
        pos, hit = self._lookup(x)
        self._last = None
        hp = pos[hit]
        if self.policy == "fscore":
            row = 0 if y > 0 else 1
            self.stats[row, hp] += x.values[hit]
            self.stats[row + 2, hp] += x.values[hit] ** 2
            if y > 0:
                self.n_pos += 1
            else:
                self.n_neg += 1
        if y * score > self.beta:
            return False
        tau = bpa_s_tau(y, score, x.sq_norm, self.C)
        if tau == 0.0:
            return False
        delta = (tau * y) * x.values
        self.w[hp] += delta[hit]
        self.stamp[hp] = self.t
        new = ~hit
        nk, nw = x.keys[new], delta[new]
        m, k = len(self.keys), len(nk)
        excess = m + k - self.capacity
        drop_old = np.zeros(0, dtype=np.int64)
        keep_new = np.ones(k, dtype=bool)
        if excess > 0:
            drop = self._select(hit_positions=hp, new_values=x.values[new], new_w=nw, y=y, excess=excess)
            drop_old = drop[drop < m]
            keep_new[drop[drop >= m] - m] = False
        # exact cancellations leave w
        zero = np.flatnonzero(self.w[hp] == 0.0)
        if len(zero):
            drop_old = np.union1d(drop_old, hp[zero])
        self._apply(drop_old, nk[keep_new], nw[keep_new], x.values[new][keep_new], y)
        self.updates += 1
        assert self.model_size <= self.budget
        return True

    def _select(self, hit_positions: np.ndarray, new_values: np.ndarray, new_w: np.ndarray, y: int,
                excess: int) -> np.ndarray:
        """Indices into [stored features, new features] to drop (``excess`` of them)."""
        m, k = len(self.keys), len(new_w)
        is_new = np.concatenate([np.zeros(m, np.int8), np.ones(k, np.int8)])
        if self.policy == "random":
            in_x = np.zeros(m, dtype=bool)
            in_x[hit_positions] = True
            pool = np.flatnonzero(~in_x)
            if excess <= len(pool):
                return self.rng.choice(pool, size=excess, replace=False).astype(np.int64)
            rest = self.rng.choice(k, size=excess - len(pool), replace=False) + m
            return np.concatenate([pool, rest]).astype(np.int64)
        absw = np.abs(np.concatenate([self.w, new_w]))
        if self.policy == "weight":
            return smallest(absw, excess, (-is_new,))
        if self.policy == "oldest":
            stamp = np.concatenate([self.stamp, np.full(k, self.t, np.int64)])
            return smallest(stamp.astype(np.float64), excess, (-is_new, absw))
        # fscore: sums of stored features already include x; new ones start with x
        stats = np.concatenate([self.stats, np.zeros((4, k))], axis=1)
        row = 0 if y > 0 else 1
        stats[row, m:] = new_values
        stats[row + 2, m:] = new_values ** 2
        f = fscore(stats[0], stats[1], stats[2], stats[3], self.n_pos, self.n_neg)
        return smallest(f, excess, (-is_new, absw))

    def _apply(self, drop_old: np.ndarray, nk: np.ndarray, nw: np.ndarray, nv: np.ndarray, y: int) -> None:
        if len(drop_old):
            keep = np.ones(len(self.keys), dtype=bool)
            keep[drop_old] = False
            self.keys, self.w, self.stamp = self.keys[keep], self.w[keep], self.stamp[keep]
            if self.policy == "fscore":
                self.stats = self.stats[:, keep]
        if len(nk):
            at = np.searchsorted(self.keys, nk)
            self.keys = np.insert(self.keys, at, nk)
            self.w = np.insert(self.w, at, nw)
            self.stamp = np.insert(self.stamp, at, self.t)
            if self.policy == "fscore":
                add = np.zeros((4, len(nk)))
                row = 0 if y > 0 else 1
                add[row], add[row + 2] = nv, nv ** 2
                self.stats = np.insert(self.stats, at, add, axis=1)


# ---------------------------------------------------------------------------- Mixed
class MixedLearner(_Learner):
    """Algorithm 2: stored sparse feature vectors, ``sum_j (1 + sigma |phi_j|) <= B``.

    Parameters as :class:`PrimalLearner`, with ``policy`` in {"oldest", "tau", "random"} and
    ``sigma`` (default 2) the memory units per stored feature.
    """

    kind = "mixed"

    def __init__(self, budget: int, policy: str = "tau", C: float = 0.01, beta: float = 1.0,
                 sigma: int | None = None, seed: int = 0) -> None:
        if policy not in EXAMPLE_POLICIES:
            raise ValueError(f"mixed policy must be one of {EXAMPLE_POLICIES}, got {policy!r}")
        super().__init__(budget, policy, C, beta, seed)
        self.sigma = int(sigma if sigma is not None else 2)
        self.examples: list[tuple[np.ndarray, np.ndarray, float]] = []  # (keys, values, y*tau)
        self.born: list[int] = []
        self.taus: list[float] = []
        self.sizes: list[int] = []
        self._size = 0
        # running aggregate sum_j y_j tau_j phi_j with per-key reference counts
        self.keys = np.zeros(0, dtype=np.uint64)
        self.w = np.zeros(0, dtype=np.float64)
        self.refs = np.zeros(0, dtype=np.int64)

    @property
    def model_size(self) -> int:
        return self._size

    @property
    def n_examples(self) -> int:
        return len(self.examples)

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"sigma": self.sigma}

    def score(self, x: Example) -> float:
        if not len(self.keys):
            return 0.0
        pos = np.minimum(np.searchsorted(self.keys, x.keys), len(self.keys) - 1)
        hit = self.keys[pos] == x.keys
        return float(np.dot(self.w[pos[hit]], x.values[hit]))

    def update(self, x: Example, y: int, score: float) -> bool:
        self.t += 1
        if y * score > self.beta:
            return False
        tau = bpa_s_tau(y, score, x.sq_norm, self.C)
        size = 1 + self.sigma * len(x.keys)
        if tau == 0.0 or size > self.budget:
            return False
        while self._size + size > self.budget:
            self._remove(_pick_example(self.policy, self.born, self.taus, self.rng))
        alpha = tau * y
        self.examples.append((x.keys, x.values, alpha))
        self.born.append(self.t)
        self.taus.append(tau)
        self.sizes.append(size)
        self._size += size
        self._add(x.keys, alpha * x.values, +1)
        self.updates += 1
        assert self.model_size <= self.budget
        return True

    def _remove(self, j: int) -> None:
        keys, values, alpha = self.examples.pop(j)
        self.born.pop(j)
        self.taus.pop(j)
        self._size -= self.sizes.pop(j)
        self._add(keys, -alpha * values, -1)

    def _add(self, keys: np.ndarray, values: np.ndarray, ref: int) -> None:
        pos = np.searchsorted(self.keys, keys)
        if len(self.keys):
            pc = np.minimum(pos, len(self.keys) - 1)
            hit = self.keys[pc] == keys
        else:
            pc, hit = pos, np.zeros(len(keys), dtype=bool)
        self.w[pc[hit]] += values[hit]
        self.refs[pc[hit]] += ref
        if ref < 0:
            gone = self.refs == 0
            if gone.any():
                keep = ~gone
                self.keys, self.w, self.refs = self.keys[keep], self.w[keep], self.refs[keep]
            return
        new = ~hit
        if new.any():
            at = pos[new]
            self.keys = np.insert(self.keys, at, keys[new])
            self.w = np.insert(self.w, at, values[new])
            self.refs = np.insert(self.refs, at, 1)


# ---------------------------------------------------------------------------- Dual
class DualLearner(_Learner):
    """Algorithm 1: stored graphs, ``sum_j (|V_j| + |E_j| + 1) <= B`` (Eq. (2)).

    Parameters
    ----------
    budget, policy, C, beta, seed
        As :class:`MixedLearner` (``policy`` in {"oldest", "tau", "random"}).
    featurize : callable
        ``featurize(graphs) -> SparseFeatures`` of a batch of stored graphs (the kernel's
        embedding, normalised the same way as the stream's examples). Called on the whole
        model at every score: the kernel is evaluated from the stored graphs.
    """

    kind = "dual"

    def __init__(self, budget: int, featurize, policy: str = "tau", C: float = 0.01,
                 beta: float = 1.0, seed: int = 0) -> None:
        if policy not in EXAMPLE_POLICIES:
            raise ValueError(f"dual policy must be one of {EXAMPLE_POLICIES}, got {policy!r}")
        super().__init__(budget, policy, C, beta, seed)
        self.featurize = featurize
        self.graphs: GraphBatch | None = None
        self.alpha: list[float] = []
        self.born: list[int] = []
        self.taus: list[float] = []
        self.sizes: list[int] = []
        self._size = 0

    @property
    def model_size(self) -> int:
        return self._size

    @property
    def n_examples(self) -> int:
        return len(self.alpha)

    def score(self, x: Example) -> float:
        if self.graphs is None or not self.alpha:
            return 0.0
        feats = self.featurize(self.graphs)  # from scratch, as a dual learner does
        xf = SparseFeatures(np.array([0, len(x.keys)]), x.keys, x.values)
        k = dot(feats, xf)[:, 0]
        return float(np.dot(np.asarray(self.alpha), k))

    def update(self, x: Example, y: int, score: float) -> bool:
        self.t += 1
        if y * score > self.beta:
            return False
        if x.graph is None:
            raise ValueError("the Dual learner needs the example's graph")
        tau = bpa_s_tau(y, score, x.sq_norm, self.C)
        size = x.graph_size + 1
        if tau == 0.0 or size > self.budget:
            return False
        alive = list(range(len(self.alpha)))
        while self._size + size > self.budget:
            j = _pick_example(self.policy, self.born, self.taus, self.rng)
            self.alpha.pop(j)
            self.born.pop(j)
            self.taus.pop(j)
            self._size -= self.sizes.pop(j)
            alive.pop(j)
        if self.graphs is not None and len(alive) < len(self.graphs):
            self.graphs = self.graphs.take(np.asarray(alive, dtype=np.int64)) if alive else None
        self.graphs = x.graph if self.graphs is None else GraphBatch.concat([self.graphs, x.graph])
        self.alpha.append(tau * y)
        self.born.append(self.t)
        self.taus.append(tau)
        self.sizes.append(size)
        self._size += size
        self.updates += 1
        assert self.model_size <= self.budget
        return True


def _pick_example(policy: str, born: list[int], taus: list[float], rng: np.random.Generator) -> int:
    """Index of the stored example to remove under an example policy."""
    if policy == "oldest":
        return int(np.argmin(born))
    if policy == "random":
        return int(rng.integers(len(born)))
    t = np.asarray(taus)
    ties = np.flatnonzero(t == t.min())
    return int(ties[0] if len(ties) == 1 else rng.choice(ties))


def make_learner(model: str, budget: int, policy: str, C: float, beta: float, sigma: int | None,
                 seed: int, featurize=None) -> _Learner:
    """Learner ``model`` in {"primal", "mixed", "dual"} with the given parameters."""
    if model == "primal":
        return PrimalLearner(budget, policy, C, beta, sigma, seed)
    if model == "mixed":
        return MixedLearner(budget, policy, C, beta, sigma, seed)
    if model == "dual":
        if sigma is not None:
            raise ValueError("the dual learner has no sigma (its size is Eq. (2))")
        return DualLearner(budget, featurize, policy, C, beta, seed)
    raise ValueError(f"unknown learner model {model!r}")


__all__ = ["DualLearner", "Example", "MixedLearner", "PrimalLearner", "bpa_s_tau", "make_learner"]
