"""Test-then-train evaluation of an online learner on a graph stream (§4.2 of the paper).

For every element in stream order the learner first *predicts* (its score ``S(x_t)``), then
the label is revealed and the learner *learns* (Algorithms 1-3). Every ``sample_every``
examples (50 in the paper) the AUROC of the scores of the last ``window`` examples is
sampled; the run is summarised by the mean (and standard deviation) of these samples.

The window defaults to the sampling period, 50: the paper does not state its window, and the
authors' stream scripts (scikit-learn-graph) reset their counters every 50 examples, i.e.
non-overlapping blocks of 50 — which also matches the spread (± 0.09) of the paper's
Table 1. A longer ``window`` gives overlapping, smoother samples. A window holding a single
class has no AUROC and is skipped (reported as NaN in the curve, left out of the mean).

The budget is checked after every update: a learner whose model exceeds it raises.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist.stream.learners import Example
from gramdist.stream.source import StreamChunk


def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve (Mann-Whitney U with mid-ranks for ties); NaN if one class.

    ``labels`` are +1/-1. Equals ``sklearn.metrics.roc_auc_score(labels > 0, scores)``.
    """
    scores = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(labels) > 0
    n_pos = int(pos.sum())
    n_neg = len(pos) - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="stable")
    s = scores[order]
    ranks = np.empty(len(s), dtype=np.float64)
    # mid-ranks of tied runs
    starts = np.flatnonzero(np.concatenate([[True], s[1:] != s[:-1]]))
    ends = np.append(starts[1:], len(s))
    mid = (starts + ends + 1) / 2.0
    ranks[order] = np.repeat(mid, ends - starts)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


@dataclass
class StreamResult:
    """Outcome of one test-then-train run."""

    examples: int = 0
    updates: int = 0
    samples_at: list[int] = field(default_factory=list)  # stream positions (1-based) of samples
    samples_auroc: list[float] = field(default_factory=list)
    samples_model_size: list[int] = field(default_factory=list)
    samples_segment: list[int] = field(default_factory=list)
    peak_model_size: int = 0
    wall_seconds: float = 0.0  # whole loop, feature extraction included
    learn_seconds: float = 0.0  # predict + update only
    feature_wait_seconds: float = 0.0  # time the learner waited for features
    scores: np.ndarray | None = None
    labels: np.ndarray | None = None

    @property
    def auroc_mean(self) -> float:
        v = np.asarray(self.samples_auroc, dtype=np.float64)
        v = v[np.isfinite(v)]
        return float(v.mean()) if len(v) else float("nan")

    @property
    def auroc_std(self) -> float:
        v = np.asarray(self.samples_auroc, dtype=np.float64)
        v = v[np.isfinite(v)]
        return float(v.std()) if len(v) else float("nan")

    @property
    def seconds_per_example(self) -> float:
        return self.wall_seconds / self.examples if self.examples else float("nan")

    def summary(self) -> dict[str, Any]:
        return {
            "examples": self.examples,
            "updates": self.updates,
            "auroc_mean": self.auroc_mean,
            "auroc_std": self.auroc_std,
            "auroc_samples": len(self.samples_auroc),
            "seconds_per_example": self.seconds_per_example,
            "learn_seconds_per_example": self.learn_seconds / self.examples if self.examples else float("nan"),
            "examples_per_second": self.examples / self.wall_seconds if self.wall_seconds else float("nan"),
            "peak_model_size": self.peak_model_size,
            "wall_seconds": self.wall_seconds,
        }


def run_protocol(chunks: Iterable[StreamChunk], learner: Any, *, window: int = 50, sample_every: int = 50,
                 keep_scores: bool = True, progress: Any = None) -> StreamResult:
    """Predict-then-learn over ``chunks`` (featurised :class:`StreamChunk`), sampling AUROC.

    Parameters
    ----------
    chunks : iterable of StreamChunk with ``features`` and ``sq_norms`` set
    learner : a Primal/Mixed/Dual learner
    window, sample_every : int
        AUROC of the last ``window`` scores every ``sample_every`` examples.
    keep_scores : bool
        Keep every score and label in the result.
    progress : callable or None
        ``progress(examples_done)`` after each chunk.
    """
    res = StreamResult()
    scores: list[float] = []
    labels: list[int] = []
    needs_graph = getattr(learner, "kind", "") == "dual"
    budget = learner.budget
    t_start = time.perf_counter()
    feat_wait = 0.0
    it = iter(chunks)
    while True:
        t0 = time.perf_counter()
        chunk = next(it, None)
        feat_wait += time.perf_counter() - t0
        if chunk is None:
            break
        f = chunk.features
        ptr = f.indptr
        sizes = chunk.graphs.nodes_per_graph + chunk.graphs.edges_per_graph
        t_learn = time.perf_counter()
        for i in range(len(chunk.y)):
            a, b = ptr[i], ptr[i + 1]
            x = Example(f.keys[a:b], f.values[a:b], float(chunk.sq_norms[i]),
                        chunk.graphs[i : i + 1] if needs_graph else None, int(sizes[i]))
            y = int(chunk.y[i])
            s = learner.score(x)
            learner.update(x, y, s)
            size = learner.model_size
            if size > budget:
                raise AssertionError(f"model size {size} exceeds the budget {budget} at example {res.examples + 1}")
            res.peak_model_size = max(res.peak_model_size, size)
            scores.append(s)
            labels.append(y)
            res.examples += 1
            if res.examples % sample_every == 0:
                lo = max(0, res.examples - window)
                res.samples_at.append(res.examples)
                res.samples_auroc.append(auroc(np.asarray(scores[lo:]), np.asarray(labels[lo:])))
                res.samples_model_size.append(size)
                res.samples_segment.append(chunk.segment)
        res.learn_seconds += time.perf_counter() - t_learn
        if progress is not None:
            progress(res.examples)
    res.wall_seconds = time.perf_counter() - t_start
    res.feature_wait_seconds = feat_wait
    res.updates = learner.updates
    if keep_scores:
        res.scores = np.asarray(scores)
        res.labels = np.asarray(labels)
    return res


__all__ = ["StreamResult", "auroc", "run_protocol"]
