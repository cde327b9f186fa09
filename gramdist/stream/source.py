"""Graph streams: segments of datasets with label rules, read lazily, featurised ahead.

A stream is the concatenation of *segments*. Each segment takes the graphs of one dataset (in
an order shuffled per segment when the stream has a ``shuffle_seed``, since TU files are
often sorted by class) and maps the dataset's class labels to ``+1/-1`` with a *label rule*:

* ``identity`` — graphs of the ``positive`` class (default: the largest label value) are
  ``+1``, all others ``-1``;
* ``flip`` — the opposite (a concept drift that inverts the target).

The paper's *Chemical* stream concatenates two NCI screens with two activity thresholds each
(four concepts). The TU copies of NCI1/NCI109 only carry the binary labels, so the drift here
is made with segments such as NCI1 (identity), NCI109 (identity), NCI1 (flip), NCI109 (flip).

Datasets are loaded when the stream reaches their first segment (and kept for later segments
using the same dataset). :class:`FeatureStream` cuts the stream into chunks, computes each
chunk's explicit features with the kernel's ``embed`` ahead of the learner — in a background
thread, or as tasks on a Dask client — and hands the learner one chunk at a time, in order.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState
from gramdist.kernels.sparse import SparseFeatures, sq_norms

LABEL_RULES = ("identity", "flip")


@dataclass
class Segment:
    """One piece of a stream: a dataset spec (as for ``load_dataset``) and a label rule."""

    dataset: Any
    label_rule: str = "identity"
    positive: int | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        if self.label_rule not in LABEL_RULES:
            raise ValueError(f"label_rule must be one of {LABEL_RULES}, got {self.label_rule!r}")


@dataclass
class StreamChunk:
    """Consecutive stream elements: graphs, +1/-1 labels, and where they come from."""

    graphs: GraphBatch
    y: np.ndarray
    segment: int
    start: int  # stream position of the first element
    features: SparseFeatures | None = None
    sq_norms: np.ndarray | None = None


@dataclass
class GraphStream:
    """A lazily read concatenation of segments.

    Parameters
    ----------
    segments : list of Segment
    shuffle_seed : int or None
        Shuffle the graphs of each segment (seeded by ``(shuffle_seed, segment index)``, so a
        dataset repeated in a later segment arrives in a different order); None keeps the
        file order.
    limit : int or None
        Stop after this many examples in total.
    loader : callable
        ``loader(spec) -> GraphBatch``; default :func:`gramdist.datasets.load_dataset`.
    """

    segments: list[Segment]
    shuffle_seed: int | None = 0
    limit: int | None = None
    loader: Any = None
    _cache: dict = field(default_factory=dict, repr=False)

    def _load(self, spec: Any) -> GraphBatch:
        key = json.dumps(spec, sort_keys=True, default=str)
        if key not in self._cache:
            if self.loader is None:
                from gramdist.datasets import load_dataset

                self._cache[key] = load_dataset(spec)
            else:
                self._cache[key] = self.loader(spec)
        return self._cache[key]

    def segment_data(self, i: int) -> tuple[GraphBatch, np.ndarray]:
        """(graphs in stream order, +1/-1 labels) of segment ``i`` (loads its dataset)."""
        seg = self.segments[i]
        batch = self._load(seg.dataset)
        if batch.y is None:
            raise ValueError(f"segment {i}: dataset {seg.dataset!r} has no class labels")
        n = len(batch) if seg.limit is None else min(seg.limit, len(batch))
        if self.shuffle_seed is not None:
            order = np.random.default_rng([int(self.shuffle_seed), i]).permutation(len(batch))[:n]
        else:
            order = np.arange(n)
        graphs = batch.take(order)
        labels = np.asarray(graphs.y)
        positive = seg.positive if seg.positive is not None else np.asarray(batch.y).max()
        y = np.where(labels == positive, 1, -1).astype(np.int64)
        if seg.label_rule == "flip":
            y = -y
        return graphs, y

    def chunks(self, size: int) -> Iterator[StreamChunk]:
        """Consecutive chunks of at most ``size`` elements (never spanning two segments)."""
        pos = 0
        for i in range(len(self.segments)):
            if self.limit is not None and pos >= self.limit:
                return
            graphs, y = self.segment_data(i)
            for lo in range(0, len(graphs), size):
                hi = min(lo + size, len(graphs))
                if self.limit is not None:
                    hi = min(hi, lo + self.limit - pos)
                if hi <= lo:
                    return
                yield StreamChunk(graphs[lo:hi], y[lo:hi], i, pos)
                pos += hi - lo


def featurize(kernel: GraphKernel, state: KernelState, graphs: GraphBatch,
              normalize: bool) -> tuple[SparseFeatures, np.ndarray]:
    """Explicit features of ``graphs`` (unit-norm rows if ``normalize``) and their K(x, x)."""
    feats = kernel.embed(graphs, state)
    if not isinstance(feats, SparseFeatures):
        raise TypeError(f"kernel {kernel.name!r} has no explicit sparse features")
    norms = sq_norms(feats)
    if normalize:
        scale = np.zeros_like(norms)
        nz = norms > 0
        scale[nz] = 1.0 / np.sqrt(norms[nz])
        feats = feats.scaled(scale)
        norms = sq_norms(feats)
    return feats, norms


class FeatureStream:
    """Chunks of a :class:`GraphStream` with their features, computed ahead of the learner.

    Parameters
    ----------
    stream : GraphStream
    kernel, state : the explicit-feature kernel and its fitted state
    chunk_size : int
        Graphs per feature-extraction task.
    prefetch : int
        Chunks computed ahead (>= 1); 0 computes each chunk when it is needed.
    normalize : bool
        Scale every feature vector to unit norm (cosine-normalised kernel).
    client : distributed.Client or None
        Run the feature extraction as Dask tasks on this client instead of a local thread.
    """

    def __init__(self, stream: GraphStream, kernel: GraphKernel, state: KernelState, chunk_size: int = 256,
                 prefetch: int = 2, normalize: bool = False, client: Any = None) -> None:
        self.stream = stream
        self.kernel = kernel
        self.state = state
        self.chunk_size = int(chunk_size)
        self.prefetch = int(prefetch)
        self.normalize = bool(normalize)
        self.client = client
        self.feature_seconds = 0.0  # time the consumer waited for features

    def _submit(self, pool: ThreadPoolExecutor | None, chunk: StreamChunk) -> Any:
        if self.client is not None:
            return self.client.submit(featurize, self.kernel, self.state, chunk.graphs, self.normalize,
                                      pure=False)
        if pool is not None:
            return pool.submit(featurize, self.kernel, self.state, chunk.graphs, self.normalize)
        return None

    def __iter__(self) -> Iterator[StreamChunk]:
        import time

        source = self.stream.chunks(self.chunk_size)
        if self.prefetch <= 0 and self.client is None:
            for chunk in source:
                t0 = time.perf_counter()
                chunk.features, chunk.sq_norms = featurize(self.kernel, self.state, chunk.graphs, self.normalize)
                self.feature_seconds += time.perf_counter() - t0
                yield chunk
            return
        pool = None if self.client is not None else ThreadPoolExecutor(max_workers=1)
        pending: deque = deque()
        depth = max(1, self.prefetch)
        try:
            for chunk in source:
                pending.append((chunk, self._submit(pool, chunk)))
                if len(pending) > depth:
                    yield self._finish(*pending.popleft())
            while pending:
                yield self._finish(*pending.popleft())
        finally:
            for _, fut in pending:
                fut.cancel()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def _finish(self, chunk: StreamChunk, fut: Any) -> StreamChunk:
        import time

        t0 = time.perf_counter()
        chunk.features, chunk.sq_norms = fut.result()
        self.feature_seconds += time.perf_counter() - t0
        return chunk


__all__ = ["FeatureStream", "GraphStream", "LABEL_RULES", "Segment", "StreamChunk", "featurize"]
