"""Online learners: BPA-S step, budget accounting, policies, primal/dual equivalence."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.graphs import GraphBatch
from gramdist.kernels.features.wl import WLSubtreeKernel
from gramdist.kernels.sparse import SparseFeatures, sq_norms
from gramdist.stream.learners import (
    DualLearner,
    Example,
    MixedLearner,
    PrimalLearner,
    bpa_s_tau,
    make_learner,
)
from gramdist.stream.policies import PRIMAL_SIGMA, fscore, smallest


def make_example(keys, values, graph=None, graph_size=0) -> Example:
    keys = np.asarray(keys, dtype=np.uint64)
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(keys)
    return Example(keys[order], values[order], float(values @ values), graph, graph_size)


def random_graph_stream(seed: int, n: int = 120):
    """Small random labelled graphs, their WL features, and +1/-1 labels tied to a label count."""
    rng = np.random.default_rng(seed)
    sizes, edges, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(3, 9))
        e = rng.integers(0, k, (int(rng.integers(k - 1, 2 * k)), 2))
        sizes.append(k)
        edges.append(e[e[:, 0] != e[:, 1]])
        labels.append(rng.integers(0, 3, k))
    y = np.array([1 if (lab == 0).sum() > len(lab) / 3 else -1 for lab in labels])
    batch = GraphBatch.from_graphs(edges, sizes, node_labels=labels, y=y)
    kernel = WLSubtreeKernel(h=2)
    feats = kernel.embed(batch, kernel.fit(batch, 0))
    return batch, feats, y, kernel


def examples_of(batch: GraphBatch, feats: SparseFeatures) -> list[Example]:
    norms = sq_norms(feats)
    out = []
    for i in range(len(batch)):
        k, v = feats.row(i)
        g = batch[i : i + 1]
        out.append(Example(k, v, float(norms[i]), g, int(g.n_nodes + g.n_edges)))
    return out


# ---------------------------------------------------------------- step and F-score
def test_bpa_s_tau():
    assert bpa_s_tau(1, 0.2, 4.0, C=1.0) == pytest.approx(0.8 / 4.0)
    assert bpa_s_tau(1, 0.2, 4.0, C=0.01) == 0.01  # capped by C
    assert bpa_s_tau(-1, 0.5, 2.0, C=1.0) == pytest.approx(1.5 / 2.0)
    assert bpa_s_tau(1, 1.5, 2.0, C=1.0) == 0.0  # no loss
    assert bpa_s_tau(1, 0.0, 0.0, C=1.0) == 0.0  # empty example


def test_incremental_fscore_equals_batch_eq3():
    rng = np.random.default_rng(0)
    X = rng.poisson(1.0, (40, 6)).astype(float)
    y = rng.choice([1, -1], 40)
    pos, neg = X[y > 0], X[y < 0]
    # Eq. (3) straight from the data
    avg, avg_p, avg_n = X.mean(0), pos.mean(0), neg.mean(0)
    num = (avg_p - avg) ** 2 + (avg_n - avg) ** 2
    den = ((pos - avg_p) ** 2).sum(0) / (len(pos) - 1) + ((neg - avg_n) ** 2).sum(0) / (len(neg) - 1)
    # Eq. (4) from running sums updated one example at a time
    s = np.zeros((4, 6))
    for xi, yi in zip(X, y):
        r = 0 if yi > 0 else 1
        s[r] += xi
        s[r + 2] += xi ** 2
    got = fscore(s[0], s[1], s[2], s[3], len(pos), len(neg))
    np.testing.assert_allclose(got, num / den, rtol=1e-10)


def test_fscore_degenerate_cases():
    f = fscore(np.array([2.0, 0.0]), np.array([0.0, 0.0]), np.array([4.0, 0.0]), np.array([0.0, 0.0]), 1, 1)
    assert f[0] == np.inf and f[1] == 0.0


def test_smallest_with_tiebreaks():
    pr = np.array([3.0, 1.0, 1.0, 2.0, 1.0])
    new = np.array([0, 0, 1, 0, 1])
    assert sorted(smallest(pr, 1, (-new,)).tolist()) == [2]  # ties: new first, then lowest index
    assert sorted(smallest(pr, 2, (-new,)).tolist()) == [2, 4]
    assert sorted(smallest(pr, 4, (-new,)).tolist()) == [1, 2, 3, 4]
    assert smallest(pr, 0).tolist() == []


# ---------------------------------------------------------------- primal policies
def test_primal_weight_policy_keeps_largest_weights():
    lrn = PrimalLearner(budget=8, policy="weight", C=10.0)  # sigma 2 -> 4 features
    assert lrn.capacity == 4
    x1 = make_example([1, 2, 3], [1.0, 2.0, 3.0])
    lrn.update(x1, 1, lrn.score(x1))
    tau1 = 1.0 / 14.0
    np.testing.assert_allclose(lrn.w, tau1 * np.array([1, 2, 3]))
    # x2 shares feature 3 and brings 3 new ones: union 6 > 4, drop the 2 smallest |w|
    x2 = make_example([3, 10, 11, 12], [1.0, 5.0, 0.5, 4.0])
    s = lrn.score(x2)
    assert s == pytest.approx(3 * tau1)
    lrn.update(x2, 1, s)
    tau2 = (1 - s) / x2.sq_norm
    w = {1: tau1, 2: 2 * tau1, 3: 3 * tau1 + tau2, 10: 5 * tau2, 11: 0.5 * tau2, 12: 4 * tau2}
    keep = sorted(w, key=lambda k: -abs(w[k]))[:4]
    assert lrn.keys.tolist() == sorted(keep)
    np.testing.assert_allclose(lrn.w, [w[k] for k in sorted(keep)])
    assert lrn.model_size == 8


def test_primal_new_feature_below_all_weights_not_inserted():
    lrn = PrimalLearner(budget=4, policy="weight", C=10.0)  # 2 features
    big = make_example([1, 2], [3.0, 3.0])
    lrn.update(big, 1, 0.0)
    tiny = make_example([5], [0.01])
    lrn.update(tiny, 1, lrn.score(tiny))  # its weight 0.01 * tau < 3 / 18
    assert lrn.keys.tolist() == [1, 2]


def test_primal_oldest_policy_drops_least_recently_used():
    lrn = PrimalLearner(budget=9, policy="oldest", C=10.0)  # sigma 3 -> 3 features
    for keys in ([1], [2], [3]):
        x = make_example(keys, [1.0])
        lrn.update(x, 1, lrn.score(x))
    x = make_example([1], [1.0])  # touch feature 1 again (a mistake: y S = -1)
    lrn.update(x, -1, lrn.score(x))
    x = make_example([4], [1.0])
    lrn.update(x, -1, lrn.score(x))
    assert lrn.keys.tolist() == [1, 3, 4]  # 2 was the least recently used
    assert lrn.model_size == 9


def test_primal_random_policy_removes_features_not_in_example():
    lrn = PrimalLearner(budget=6, policy="random", C=10.0, seed=3)  # 3 features
    x = make_example([1, 2, 3], [1.0, 1.0, 1.0])
    lrn.update(x, 1, 0.0)
    x2 = make_example([3, 4], [1.0, 1.0])
    lrn.update(x2, -1, lrn.score(x2))
    assert 3 in lrn.keys.tolist() and 4 in lrn.keys.tolist() and len(lrn.keys) == 3


def test_primal_fscore_policy_prefers_discriminative_features():
    lrn = PrimalLearner(budget=10, policy="fscore", C=10.0)  # sigma 5 -> 2 features
    # feature 1 appears in positives only, feature 2 in both classes
    for k in range(6):
        y = 1 if k % 2 == 0 else -1
        keys = [1, 2] if y > 0 else [2]
        x = make_example(keys, [1.0] * len(keys))
        lrn.update(x, y, lrn.score(x))
    x = make_example([7], [1.0])  # a new feature seen once, in a negative example
    lrn.update(x, -1, lrn.score(x))
    assert 1 in lrn.keys.tolist()
    assert lrn.model_size <= 10


def test_sigma_by_policy_and_override():
    assert {p: PrimalLearner(100, p).sigma for p in PRIMAL_SIGMA} == {"random": 2, "weight": 2, "oldest": 3,
                                                                       "fscore": 5}
    assert PrimalLearner(100, "weight", sigma=7).capacity == 14


# ---------------------------------------------------------------- budgets on a real stream
@pytest.mark.parametrize("model,policy", [("primal", "weight"), ("primal", "oldest"), ("primal", "fscore"),
                                          ("primal", "random"), ("mixed", "tau"), ("mixed", "oldest"),
                                          ("mixed", "random"), ("dual", "tau"), ("dual", "oldest"),
                                          ("dual", "random")])
def test_budget_never_exceeded(model, policy):
    batch, feats, y, kernel = random_graph_stream(1, n=150)
    budget = 150
    lrn = make_learner(model, budget, policy, C=0.1, beta=1.0, sigma=None, seed=0,
                       featurize=lambda g: kernel.embed(g, None))
    sizes = []
    for x, yi in zip(examples_of(batch, feats), y):
        lrn.update(x, int(yi), lrn.score(x))
        assert lrn.model_size <= budget
        sizes.append(lrn.model_size)
    assert max(sizes) > budget * 0.6  # the budget is actually used (and so enforced)
    assert lrn.updates > 20


def test_dual_and_mixed_accounting():
    batch, feats, y, kernel = random_graph_stream(2, n=30)
    ex = examples_of(batch, feats)
    dual = DualLearner(10**9, lambda g: kernel.embed(g, None))
    mixed = MixedLearner(10**9)
    for x in ex:
        dual.update(x, 1, -5.0)  # always a mistake: every example is stored
        mixed.update(x, 1, -5.0)
    assert dual.model_size == sum(e.graph_size + 1 for e in ex)  # Eq. (2)
    assert mixed.model_size == sum(1 + 2 * len(e.keys) for e in ex)  # Alg. 2 line 9
    assert dual.n_examples == mixed.n_examples == len(ex)
    assert len(dual.graphs) == len(ex)


def test_tau_and_oldest_remove_the_right_example():
    batch, feats, y, kernel = random_graph_stream(3, n=4)
    ex = examples_of(batch, feats)
    sizes = [e.graph_size + 1 for e in ex]
    dual = DualLearner(sum(sizes[:3]), lambda g: kernel.embed(g, None), policy="oldest", C=10.0)
    for e in ex[:3]:
        dual.update(e, 1, -5.0)
    dual.update(ex[3], 1, -5.0)
    assert dual.born[0] >= 2  # example 1 (the oldest) left first
    taus = [0.5, 0.01, 0.3]
    mixed = MixedLearner(sum(1 + 2 * len(e.keys) for e in ex[:3]), policy="tau", C=10.0)
    for e, t in zip(ex[:3], taus):
        mixed.update(e, 1, 1.0 - t * e.sq_norm)  # gives tau = t
    np.testing.assert_allclose(mixed.taus, taus)
    mixed.update(ex[3], 1, 0.0)
    assert 0.01 not in [round(t, 10) for t in mixed.taus]


# ---------------------------------------------------------------- equivalence without budget
def test_primal_mixed_dual_agree_without_budget():
    """With an unlimited budget the three algorithms are the same BPA-S perceptron."""
    batch, feats, y, kernel = random_graph_stream(4, n=120)
    ex = examples_of(batch, feats)
    learners = [PrimalLearner(10**9, "weight", C=0.05), MixedLearner(10**9, "tau", C=0.05),
                DualLearner(10**9, lambda g: kernel.embed(g, None), "tau", C=0.05)]
    scores = np.zeros((3, len(ex)))
    for t, (x, yi) in enumerate(zip(ex, y)):
        for j, lrn in enumerate(learners):
            scores[j, t] = lrn.score(x)
            lrn.update(x, int(yi), scores[j, t])
    np.testing.assert_allclose(scores[1], scores[0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(scores[2], scores[0], rtol=1e-9, atol=1e-12)
    assert learners[0].updates == learners[1].updates == learners[2].updates > 30


def test_deterministic_given_seed():
    batch, feats, y, kernel = random_graph_stream(5, n=100)
    ex = examples_of(batch, feats)
    runs = []
    for _ in range(2):
        lrn = PrimalLearner(60, "random", C=0.1, seed=11)
        scores = []
        for x, yi in zip(ex, y):
            scores.append(lrn.score(x))
            lrn.update(x, int(yi), scores[-1])
        runs.append((scores, lrn.keys.tolist()))
    assert runs[0] == runs[1]
