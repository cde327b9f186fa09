"""Stream sources, feature run-ahead, windowed AUROC and the test-then-train loop."""

from __future__ import annotations

import numpy as np
import pytest

from gramdist.graphs import GraphBatch
from gramdist.kernels.features.wl import WLSubtreeKernel
from gramdist.stream.learners import PrimalLearner
from gramdist.stream.protocol import auroc, run_protocol
from gramdist.stream.source import FeatureStream, GraphStream, Segment


def toy_dataset(n: int, seed: int, name: str) -> GraphBatch:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(2, 7, n)
    edges = [np.stack([np.arange(k - 1), np.arange(1, k)], 1) for k in sizes]  # paths
    labels = [rng.integers(0, 2, k) for k in sizes]
    y = np.array([int(lab.sum() * 2 > len(lab)) for lab in labels])  # majority label
    batch = GraphBatch.from_graphs(edges, sizes, node_labels=labels, y=y, graph_ids=np.arange(n))
    batch.name = name
    return batch


class Loader:
    def __init__(self):
        self.calls: list[str] = []
        self.data = {"A": toy_dataset(40, 0, "A"), "B": toy_dataset(25, 1, "B")}

    def __call__(self, spec):
        self.calls.append(spec)
        return self.data[spec]


def test_auroc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    for _ in range(20):
        s = rng.integers(0, 5, 60).astype(float)  # many ties
        y = rng.choice([1, -1], 60)
        assert auroc(s, y) == pytest.approx(roc_auc_score(y > 0, s), abs=1e-12)
    assert np.isnan(auroc(np.array([0.1, 0.2]), np.array([1, 1])))


def test_segments_label_rules_shuffle_and_lazy_loading():
    loader = Loader()
    stream = GraphStream([Segment("A"), Segment("B", limit=10), Segment("A", label_rule="flip")],
                         shuffle_seed=3, loader=loader)
    chunks = stream.chunks(16)
    first = next(chunks)
    assert loader.calls == ["A"]  # B not read yet
    rest = list(chunks)
    assert loader.calls == ["A", "B"]  # A reused from the cache for segment 3
    allc = [first, *rest]
    assert [c.segment for c in allc] == [0, 0, 0, 1, 2, 2, 2]  # chunks never span segments
    assert sum(len(c.y) for c in allc) == 40 + 10 + 40
    a = loader.data["A"]
    seg0 = [c for c in allc if c.segment == 0]
    seg2 = [c for c in allc if c.segment == 2]
    ids0 = np.concatenate([c.graphs.graph_ids for c in seg0])
    ids2 = np.concatenate([c.graphs.graph_ids for c in seg2])
    assert sorted(ids0.tolist()) == sorted(ids2.tolist()) == list(range(40))
    assert ids0.tolist() != ids2.tolist()  # each segment has its own order
    y0 = np.concatenate([c.y for c in seg0])
    assert np.array_equal(y0, np.where(a.y[ids0] == 1, 1, -1))  # identity: class 1 -> +1
    y2 = np.concatenate([c.y for c in seg2])
    assert np.array_equal(y2, np.where(a.y[ids2] == 1, -1, 1))  # flip
    # same seed -> same stream
    again = GraphStream([Segment("A"), Segment("B", limit=10), Segment("A", label_rule="flip")],
                        shuffle_seed=3, loader=Loader())
    assert np.array_equal(np.concatenate([c.graphs.graph_ids for c in again.chunks(7)]),
                          np.concatenate([c.graphs.graph_ids for c in allc]))


def test_stream_limit_and_positive_class():
    loader = Loader()
    stream = GraphStream([Segment("A", positive=0), Segment("B")], shuffle_seed=None, limit=45, loader=loader)
    chunks = list(stream.chunks(20))
    assert sum(len(c.y) for c in chunks) == 45
    a = loader.data["A"]
    assert np.array_equal(chunks[0].y, np.where(a.y[:20] == 0, 1, -1))


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_feature_run_ahead_gives_the_same_features(prefetch):
    loader = Loader()
    kernel = WLSubtreeKernel(h=2)
    stream = GraphStream([Segment("A"), Segment("B")], shuffle_seed=1, loader=loader)
    fs = FeatureStream(stream, kernel, None, chunk_size=9, prefetch=prefetch, normalize=True)
    chunks = list(fs)
    whole = GraphBatch.concat([c.graphs for c in chunks])
    ref = kernel.embed(whole, None)
    keys = np.concatenate([c.features.keys for c in chunks])
    assert np.array_equal(keys, ref.keys)
    norms = np.concatenate([c.sq_norms for c in chunks])
    np.testing.assert_allclose(norms, 1.0)


def test_feature_stream_on_dask_client():
    distributed = pytest.importorskip("distributed")
    loader = Loader()
    kernel = WLSubtreeKernel(h=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        stream = GraphStream([Segment("A"), Segment("B")], shuffle_seed=1, loader=loader)
        chunks = list(FeatureStream(stream, kernel, None, chunk_size=9, prefetch=2, client=client))
    stream = GraphStream([Segment("A"), Segment("B")], shuffle_seed=1, loader=Loader())
    ref = list(FeatureStream(stream, kernel, None, chunk_size=9, prefetch=0))
    assert all(np.array_equal(a.features.keys, b.features.keys) for a, b in zip(chunks, ref))


def test_protocol_predicts_before_learning_and_samples_auroc():
    loader = Loader()
    kernel = WLSubtreeKernel(h=1)

    class Spy(PrimalLearner):
        def __init__(self):
            super().__init__(budget=1000, policy="weight", C=0.5)
            self.seen: list[tuple[str, int]] = []

        def score(self, x):
            self.seen.append(("score", self.t))
            return super().score(x)

        def update(self, x, y, s):
            self.seen.append(("update", self.t))
            return super().update(x, y, s)

    lrn = Spy()
    stream = GraphStream([Segment("A"), Segment("B")], shuffle_seed=0, loader=loader)
    res = run_protocol(FeatureStream(stream, kernel, None, chunk_size=8), lrn, window=20, sample_every=10)
    assert lrn.seen[:4] == [("score", 0), ("update", 0), ("score", 1), ("update", 1)]
    assert res.examples == 65 and res.samples_at == [10, 20, 30, 40, 50, 60]
    # each sample is the AUROC of the last `window` scores
    for at, val in zip(res.samples_at, res.samples_auroc):
        lo = max(0, at - 20)
        ref = auroc(res.scores[lo:at], res.labels[lo:at])
        assert (np.isnan(val) and np.isnan(ref)) or val == ref
    assert res.samples_segment == [0, 0, 0, 0, 1, 1]
    assert 0 < res.peak_model_size <= 1000
    s = res.summary()
    assert s["examples"] == 65 and s["seconds_per_example"] > 0


def test_learning_beats_chance_on_a_learnable_stream():
    loader = Loader()
    loader.data["A"] = toy_dataset(400, 5, "A")
    stream = GraphStream([Segment("A")], shuffle_seed=0, loader=loader)
    res = run_protocol(FeatureStream(stream, WLSubtreeKernel(h=1), None, chunk_size=64),
                       PrimalLearner(budget=400, policy="weight", C=0.1), window=100, sample_every=50)
    assert res.auroc_mean > 0.75
