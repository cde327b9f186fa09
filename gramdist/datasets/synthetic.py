"""Random attributed graphs as in the DM paper's scaling experiment (Su et al., SDM 2016, §5.1).

The paper: "We randomly generate undirected graphs based on two parameters: the number of
graphs N, and the number of nodes n. The default values are N=10 and n=200. Average node degree
is set to 5 [...]. n nodes are first generated, then edges are randomly inserted until a certain
number is reached. We additionally experiment on graphs with varying density
sigma = 2m / (n(n-1)) [...]. Node categorical and numerical attributes are randomly generated."

:func:`make_synthetic` follows that: each graph has ``n_nodes`` nodes and
``m = round(avg_degree * n / 2)`` edges (or ``m = round(density * n (n-1) / 2)``), inserted as
uniformly random distinct node pairs (no self-loops, no multi-edges) until ``m`` is reached,
i.e. a uniform ``G(n, m)`` graph. Node labels are uniform on ``0..n_labels-1`` and node
attributes standard normal. The paper's runtime experiment gives no class labels; ours are
uniform on ``0..n_classes-1`` and, by default, independent of the graphs. For tests that need
a learnable task, ``attr_shift`` adds ``attr_shift * y`` to every node attribute and
``label_bias`` sets each node label to ``y % n_labels`` with that probability.

Everything is drawn from ``np.random.default_rng(seed)`` with array-wide draws (no Python loop
per graph), so the same arguments always give the same batch.

The arguments are one :class:`SyntheticSpec` (``make_synthetic(spec)``, or its fields as
keywords: ``make_synthetic(n_graphs=40, seed=7)``).

Blocks (for collections too large for one process): with ``block_size`` set, graphs
``b*block_size .. (b+1)*block_size - 1`` are drawn as one batch from
``np.random.default_rng([seed, b])``, so any block can be generated alone, on any worker,
by :func:`synthetic_block` (what :class:`gramdist.datasets.lazy.LazySynthetic` does), and
``make_synthetic(..., block_size=B)`` is the concatenation of its blocks (graph ids
``0..n_graphs-1`` in order). A blocked collection is a different draw from the unblocked one.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from gramdist.graphs import GraphBatch

__all__ = ["SyntheticSpec", "make_synthetic", "synthetic_block"]


@dataclass(frozen=True)
class SyntheticSpec:
    """What decides a synthetic collection: the arguments of :func:`make_synthetic` (DM §5.1).

    The same spec always makes the same graphs. Values are kept as given (a job's YAML
    numbers stay ints or floats), and checked when graphs are drawn.

    Parameters
    ----------
    n_graphs : int
        Number of graphs ``G`` (paper default 10).
    n_nodes : int or (int, int)
        Nodes per graph (paper default 200), or an inclusive range drawn uniformly per graph.
    avg_degree : float
        Average node degree; each graph gets ``round(avg_degree * n / 2)`` edges (paper: 5).
        Ignored when ``density`` is given.
    n_labels : int
        Size of the node label alphabet; 0 gives no node labels.
    attr_dim : int
        Node attribute dimensions; 0 gives no node attributes.
    seed : int
        Seed of ``np.random.default_rng``.
    density : float, optional
        Edge density ``sigma = 2m / (n (n-1))`` in [0, 1], instead of ``avg_degree``.
    n_classes : int
        Number of graph classes; ``y`` is uniform on ``0..n_classes-1``.
    attr_shift, label_bias : float
        Class signal for tests (default none, as in the paper): attributes get
        ``+ attr_shift * y``; each node label becomes ``y % n_labels`` with probability
        ``label_bias``.
    block_size : int, optional
        Draw the graphs in independent blocks of this many (see the module docstring), so
        that :func:`synthetic_block` can generate any block alone.
    """

    n_graphs: int = 10
    n_nodes: int | tuple[int, int] = 200
    avg_degree: float = 5.0
    n_labels: int = 10
    attr_dim: int = 1
    seed: int = 0
    density: float | None = None
    n_classes: int = 2
    attr_shift: float = 0.0
    label_bias: float = 0.0
    block_size: int | None = None

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        """The field names, in order: the keys a job's ``dataset: {synthetic: {...}}`` takes."""
        return tuple(f.name for f in fields(cls))

    def draws(self) -> dict[str, Any]:
        """The fields that shape each graph (all but ``n_graphs``, ``seed`` and ``block_size``),
        as given."""
        return {k: getattr(self, k) for k in self.keys() if k not in ("n_graphs", "seed", "block_size")}


def make_synthetic(spec: SyntheticSpec | None = None, /, **params: Any) -> GraphBatch:
    """Random undirected graphs with categorical and numerical node attributes (DM §5.1).

    Parameters
    ----------
    spec : SyntheticSpec, optional
        The collection; default ``SyntheticSpec()`` (the paper's defaults).
    **params
        Fields of :class:`SyntheticSpec` (``n_graphs``, ``n_nodes``, ``avg_degree``,
        ``n_labels``, ``attr_dim``, ``seed``, ``density``, ``n_classes``, ``attr_shift``,
        ``label_bias``, ``block_size``), replacing those of ``spec``:
        ``make_synthetic(n_graphs=40, n_nodes=(5, 12), seed=7)``.

    Returns
    -------
    GraphBatch
        ``G`` graphs named ``"synthetic"``; edges of each graph sorted by ``(u, v)``;
        ``node_labels`` (N,) int64 or None, ``node_attrs`` (N, attr_dim) float64 or None,
        ``y`` (G,) int64, ``graph_ids`` 0..G-1.

    Raises
    ------
    ValueError
        On out-of-range arguments (more edges than a simple graph can hold, etc.).
    TypeError
        On a keyword that is not a field of :class:`SyntheticSpec`.
    """
    if spec is not None and not isinstance(spec, SyntheticSpec):
        raise TypeError(f"make_synthetic takes a SyntheticSpec or its fields as keywords, got {spec!r}")
    spec = replace(spec, **params) if spec is not None else SyntheticSpec(**params)
    if spec.n_graphs < 1:
        raise ValueError(f"n_graphs must be >= 1, got {spec.n_graphs}")
    if spec.block_size is not None:
        if int(spec.block_size) < 1:
            raise ValueError(f"block_size must be >= 1, got {spec.block_size}")
        blocked = replace(spec, block_size=int(spec.block_size))
        n_blocks = -(-spec.n_graphs // blocked.block_size)
        return GraphBatch.concat([synthetic_block(blocked, b) for b in range(n_blocks)], name="synthetic")
    return _draw(np.random.default_rng(spec.seed), spec.n_graphs, spec)


def synthetic_block(spec: SyntheticSpec, block: int) -> GraphBatch:
    """Block ``block`` of ``make_synthetic(spec)`` (``spec.block_size`` set).

    Graphs ``block*block_size`` up to ``min(n_graphs, (block+1)*block_size) - 1`` (their
    ``graph_ids``), drawn from ``np.random.default_rng([seed, block])``.
    """
    start = block * spec.block_size
    if not 0 <= start < spec.n_graphs:
        raise ValueError(f"block {block} of {spec.block_size} graphs is outside 0..{spec.n_graphs - 1}")
    batch = _draw(np.random.default_rng([spec.seed, block]), min(spec.block_size, spec.n_graphs - start), spec)
    batch.graph_ids = batch.graph_ids + start
    return batch


def _draw(rng: np.random.Generator, n_graphs: int, spec: SyntheticSpec) -> GraphBatch:
    """``n_graphs`` graphs drawn from ``rng`` as ``spec`` shapes them (its ``n_graphs``,
    ``seed`` and ``block_size`` aside)."""
    if spec.n_labels < 0 or spec.attr_dim < 0 or spec.n_classes < 1:
        raise ValueError("n_labels and attr_dim must be >= 0 and n_classes >= 1")
    if not 0.0 <= spec.label_bias <= 1.0:
        raise ValueError(f"label_bias must be in [0, 1], got {spec.label_bias}")
    sizes = _sizes(rng, n_graphs, spec.n_nodes)
    n_edges = _edge_counts(sizes, spec)
    y = rng.integers(0, spec.n_classes, size=n_graphs)
    edges, edge_counts = _random_simple_edges(rng, sizes, n_edges)
    node_offsets = np.concatenate([[0], np.cumsum(sizes)])
    node_labels, node_attrs = _node_data(rng, np.repeat(y, sizes), spec)
    return GraphBatch(
        node_offsets=node_offsets,
        edge_offsets=np.concatenate([[0], np.cumsum(edge_counts)]),
        edges=edges,
        node_labels=node_labels,
        node_attrs=node_attrs,
        y=y.astype(np.int64),
        graph_ids=np.arange(n_graphs, dtype=np.int64),
        name="synthetic",
    )


def _sizes(rng: np.random.Generator, n_graphs: int, n_nodes: int | tuple[int, int]) -> np.ndarray:
    """(n_graphs,) int64 nodes per graph: ``n_nodes``, or drawn uniformly from its range."""
    if isinstance(n_nodes, (tuple, list)):
        lo, hi = (int(v) for v in n_nodes)
        if not 1 <= lo <= hi:
            raise ValueError(f"n_nodes range must satisfy 1 <= lo <= hi, got {n_nodes}")
        return rng.integers(lo, hi + 1, size=n_graphs)
    if int(n_nodes) < 1:
        raise ValueError(f"n_nodes must be >= 1, got {n_nodes}")
    return np.full(n_graphs, int(n_nodes), dtype=np.int64)


def _edge_counts(sizes: np.ndarray, spec: SyntheticSpec) -> np.ndarray:
    """(G,) int64 edges per graph of (G,) ``sizes`` nodes, by ``spec.density`` or ``spec.avg_degree``."""
    max_edges = sizes * (sizes - 1) // 2
    if spec.density is not None:
        if not 0.0 <= spec.density <= 1.0:
            raise ValueError(f"density must be in [0, 1], got {spec.density}")
        return np.rint(spec.density * max_edges).astype(np.int64)
    if spec.avg_degree < 0:
        raise ValueError(f"avg_degree must be >= 0, got {spec.avg_degree}")
    n_edges = np.rint(spec.avg_degree * sizes / 2).astype(np.int64)
    if np.any(n_edges > max_edges):
        raise ValueError(f"avg_degree {spec.avg_degree} needs more edges than a simple graph of "
                         f"{int(sizes[np.argmax(n_edges > max_edges)])} nodes holds")
    return n_edges


def _node_data(rng: np.random.Generator, node_y: np.ndarray, spec: SyntheticSpec
               ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Node labels ((N,) int64) and attributes ((N, attr_dim) float64), each None when the spec
    has none, for nodes whose graphs have the (N,) classes ``node_y``."""
    n_total = len(node_y)
    node_labels = None
    if spec.n_labels:
        node_labels = rng.integers(0, spec.n_labels, size=n_total)
        if spec.label_bias:
            biased = rng.random(n_total) < spec.label_bias
            node_labels[biased] = node_y[biased] % spec.n_labels
    node_attrs = None
    if spec.attr_dim:
        node_attrs = rng.standard_normal((n_total, spec.attr_dim)) + spec.attr_shift * node_y[:, None]
    return node_labels, node_attrs


def _random_simple_edges(
    rng: np.random.Generator, sizes: np.ndarray, n_edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``n_edges[g]`` distinct uniformly random pairs ``u < v`` of ``sizes[g]`` nodes, per graph.

    Insertion with rejection of repeats, run in rounds over all graphs at once: each round draws
    exactly as many random pairs as each graph still lacks and inserts those not present yet.
    A round can never overshoot, so this is the sequential "insert random edges until ``m`` is
    reached" process, batched (the result is a uniform ``G(n, m)`` graph). Dense graphs draw the
    complement (the pairs *not* to insert) so that few rounds are needed.

    Returns ``(edges (E, 2) int32 local endpoints sorted by (u, v) within each graph,
    counts (G,) int64)``.
    """
    sizes = sizes.astype(np.int64)
    max_edges = sizes * (sizes - 1) // 2
    complement = n_edges > max_edges // 2
    target = np.where(complement, max_edges - n_edges, n_edges)
    n_max = int(sizes.max())
    stride = n_max * n_max  # key = graph * stride + u * n_max + v: unique per (graph, u, v)

    kept = np.zeros(0, dtype=np.int64)  # sorted keys of the pairs inserted so far
    have = np.zeros(len(sizes), dtype=np.int64)
    while True:
        short = np.flatnonzero(have < target)
        if not len(short):
            break
        g = np.repeat(short, target[short] - have[short])
        n = sizes[g]
        u = rng.integers(0, n)
        v = rng.integers(0, n - 1)
        v = v + (v >= u)  # uniform over ordered pairs u != v, hence over unordered pairs
        new = np.sort(g * stride + np.minimum(u, v) * n_max + np.maximum(u, v))
        new = new[np.concatenate([[True], new[1:] != new[:-1]])]  # (np.unique's hash path is slower)
        pos = np.searchsorted(kept, new)
        present = pos < len(kept)
        present[present] = kept[pos[present]] == new[present]
        kept = np.insert(kept, pos[~present], new[~present])  # sorted merge
        have = np.bincount(kept // stride, minlength=len(sizes))

    if complement.any():
        # dense graphs: all their pairs minus the drawn ones
        graph = kept // stride
        dense = np.flatnonzero(complement)
        all_keys = _all_pair_keys(sizes[dense], dense, n_max, stride)
        drop = np.isin(all_keys, kept[complement[graph]])
        kept = np.sort(np.concatenate([kept[~complement[graph]], all_keys[~drop]]))
    graph = kept // stride
    rest = kept - graph * stride
    edges = np.stack([rest // n_max, rest % n_max], axis=1).astype(np.int32)
    return edges, np.bincount(graph, minlength=len(sizes)).astype(np.int64)


def _all_pair_keys(sizes: np.ndarray, graphs: np.ndarray, n_max: int, stride: int) -> np.ndarray:
    """Keys of every pair u < v of each listed graph (only used for dense graphs)."""
    parts = []
    for n in np.unique(sizes):  # one vectorised block per distinct size
        iu, iv = np.triu_indices(int(n), k=1)
        gs = graphs[sizes == n]
        parts.append((gs[:, None] * stride + (iu * n_max + iv)[None, :]).ravel())
    return np.concatenate(parts)
