"""Conversion between NetworkX graphs and :class:`GraphBatch` (networkx is optional).

networkx is imported only inside :func:`to_networkx`; :func:`from_networkx` just walks the
graphs' ``nodes``/``edges`` views. Conventions:

* Nodes are numbered in ``G.nodes`` order. Directed graphs and multigraphs are read as simple
  undirected graphs: each ``{u, v}`` once, first occurrence (in ``G.edges`` order) wins; a
  self-loop is kept once. Edges are stored sorted by ``(u, v)`` within each graph, as
  :func:`~gramdist.datasets.tu.read_tu` does, so conversions round-trip exactly.
* Categorical labels that are all integers are kept as given; otherwise (strings, tuples, ...)
  they are encoded as their index in the sorted list of distinct values over all graphs
  (sorted by ``repr`` when the values are not mutually comparable).
* Numerical attributes may be scalars or equal-length sequences (width ``d``) and must be finite.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np

from gramdist.arrayops import group_offsets
from gramdist.errors import DatasetError, MissingExtraError
from gramdist.graphs import GraphBatch

__all__ = ["from_networkx", "to_networkx"]


def require_networkx() -> Any:
    """The ``networkx`` module, or a one-line hint naming the extra that installs it."""
    try:
        import networkx
    except ImportError:
        raise MissingExtraError('networkx graphs need networkx: pip install "gramdist[networkx]"') from None
    return networkx


def from_networkx(
    graphs: Iterable,
    node_label: str | None = "label",
    node_attr: str | None = None,
    edge_label: str | None = None,
    edge_attr: str | None = None,
    y: str | Sequence | np.ndarray | None = None,
    name: str = "networkx",
    codes: dict[str, dict] | None = None,
) -> GraphBatch:
    """Build a batch from NetworkX graphs.

    Parameters
    ----------
    graphs : iterable of networkx graphs
    node_label : str or None
        Node data key of the categorical node label; ``None`` for no node labels. Every node
        must have it.
    node_attr : str or None
        Node data key of the numerical attributes (scalar or sequence of floats).
    edge_label, edge_attr : str or None
        Edge data keys, likewise.
    y : str, array-like or None
        Graph class labels: a key of ``G.graph``, or one value per graph.
    name : str
        Name given to the batch.
    codes : dict or None
        Integer codes of non-integer labels learned from earlier graphs, ``{"node label":
        {value: code}, "edge label": {...}}``, extended in place with the values first seen
        here (codes after the known ones, in sorted order). Pass the mapping filled while
        converting the training graphs when converting test graphs, so that a label keeps its
        code; ``None`` codes each call's values from 0 on their own.

    Returns
    -------
    GraphBatch
        ``node_labels`` (N,) int64, ``node_attrs`` (N, d), ``edge_labels`` (E,),
        ``edge_attrs`` (E, d) where requested; ``y`` (G,); ``graph_ids`` 0..G-1.

    Raises
    ------
    DatasetError
        A node or edge lacks a requested key, attribute widths differ, or values are not finite.
    """
    graphs = list(graphs)
    if not graphs:
        raise DatasetError("from_networkx: no graphs given")
    raw = _Collected.of(graphs, (node_label, node_attr, edge_label, edge_attr))
    labels = _graph_labels_of(graphs, y)
    node_offsets, edge_offsets, edges, keep = _canonical_edges(raw)
    n_edges = np.diff(edge_offsets).tolist()
    ea_raw = raw.ea
    if ea_raw:
        flat = [a for vals in ea_raw for a in vals]
        kept = [flat[k] for k in keep.tolist()]
        ea_raw = [kept[a:b] for a, b in zip(edge_offsets[:-1].tolist(), edge_offsets[1:].tolist())]
    return GraphBatch(
        node_offsets=node_offsets,
        edge_offsets=edge_offsets,
        edges=edges,
        node_labels=None if node_label is None else _encode([raw.nl], "node label", codes)[0],
        node_attrs=None if node_attr is None else _stack(_floats(raw.na, raw.n_nodes, "node attribute")),
        edge_labels=None if edge_label is None else _encode([[raw.el[k] for k in keep.tolist()]], "edge label",
                                                            codes)[0],
        edge_attrs=None if edge_attr is None else _stack(_floats(ea_raw, n_edges, "edge attribute")),
        y=labels,
        name=name,
    )


@dataclass
class _Collected:
    """Every graph's nodes, arcs (edges as NetworkX lists them, duplicates included) and the
    requested raw values: node labels and edge labels flat, attributes one list per graph."""

    n_nodes: list[int] = field(default_factory=list)
    n_arcs: list[int] = field(default_factory=list)
    src: list[int] = field(default_factory=list)
    dst: list[int] = field(default_factory=list)
    nl: list = field(default_factory=list)
    na: list = field(default_factory=list)
    el: list = field(default_factory=list)
    ea: list = field(default_factory=list)

    @classmethod
    def of(cls, graphs: list, keys: tuple[str | None, ...]) -> _Collected:
        node_label, node_attr, edge_label, edge_attr = keys
        out = cls()
        for gi, g in enumerate(graphs):
            index = {v: i for i, v in enumerate(g.nodes)}
            out.n_nodes.append(len(index))
            # a comprehension, not list(): list() first asks the view's len, one more walk of the edges
            edge_data = [e for e in g.edges(data=True)]  # noqa: C416
            out.n_arcs.append(len(edge_data))
            out.src.extend(index[u] for u, _, _ in edge_data)
            out.dst.extend(index[v] for _, v, _ in edge_data)
            # the message's repr() only on a miss: these loops run over every node and edge
            if node_label is not None:
                out.nl.extend(_node_values(g, node_label, gi))
            if node_attr is not None:
                out.na.append(_node_values(g, node_attr, gi))
            if edge_label is not None:
                out.el.extend(_edge_values(edge_data, edge_label, gi))
            if edge_attr is not None:
                out.ea.append(_edge_values(edge_data, edge_attr, gi))
        return out


def _canonical_edges(raw: _Collected) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(node_offsets, edge_offsets, edges, keep)``: each {u, v} once (its first arc, whose
    index ``keep`` gives), sorted by (u, v) within each graph. One global key (graph, min, max)
    orders all graphs at once."""
    n_graphs = len(raw.n_nodes)
    node_offsets = np.zeros(n_graphs + 1, dtype=np.int64)
    np.cumsum(raw.n_nodes, out=node_offsets[1:])
    arc_graph = np.repeat(np.arange(n_graphs, dtype=np.int64), raw.n_arcs)
    u, v = np.asarray(raw.src, dtype=np.int64), np.asarray(raw.dst, dtype=np.int64)
    shift = node_offsets[:-1][arc_graph]
    lo, hi = np.minimum(u, v) + shift, np.maximum(u, v) + shift
    _, keep = np.unique(lo * max(1, int(node_offsets[-1])) + hi, return_index=True)
    edge_graph = arc_graph[keep]
    edges = np.stack([lo[keep], hi[keep]], axis=1) - node_offsets[:-1][edge_graph][:, None]
    return node_offsets, group_offsets(edge_graph, n_graphs), edges, keep


def _graph_labels_of(graphs: list, y: str | Sequence | np.ndarray | None) -> np.ndarray | None:
    """Class labels from a key of each ``G.graph`` or given one per graph (or None)."""
    if isinstance(y, str):
        y = [_get(g.graph, y, f"graph {gi}") for gi, g in enumerate(graphs)]
    if y is None:
        return None
    y = _graph_labels(y)
    if len(y) != len(graphs):
        raise DatasetError(f"from_networkx: {len(y)} labels in y for {len(graphs)} graphs")
    return y


def _node_values(g, key: str, gi: int) -> list:
    try:
        return [d[key] for _, d in g.nodes(data=True)]
    except KeyError:
        missing = next(v for v, d in g.nodes(data=True) if key not in d)
        raise DatasetError(f"from_networkx: graph {gi} node {missing!r} has no {key!r}") from None


def _edge_values(edge_data: list, key: str, gi: int) -> list:
    try:
        return [d[key] for _, _, d in edge_data]
    except KeyError:
        u, v = next((u, v) for u, v, d in edge_data if key not in d)
        raise DatasetError(f"from_networkx: graph {gi} edge ({u!r}, {v!r}) has no {key!r}") from None


def _graph_labels(values: Any) -> np.ndarray:
    """Graph labels as one array: all integers (int64), all real numbers (float64, finite) or
    all strings; anything else is a :class:`DatasetError`."""
    values = list(values) if not isinstance(values, np.ndarray) else values
    if isinstance(values, np.ndarray) and values.dtype != object:
        y = values
    elif all(isinstance(v, str) for v in values):
        return np.asarray(values, dtype=str)
    elif all(isinstance(v, Integral) and not isinstance(v, bool) for v in values):
        big = next((v for v in values if not -(2**63) <= int(v) < 2**63), None)
        if big is not None:
            raise DatasetError(f"from_networkx: graph label {big} does not fit in 64 bits")
        return np.asarray(values, dtype=np.int64)
    elif all(isinstance(v, Real) and not isinstance(v, bool) for v in values):
        y = np.asarray(values, dtype=np.float64)
    else:
        odd = [v for v in values if not isinstance(v, (str, Real)) or isinstance(v, bool)]
        got = f"got {odd[0]!r}" if odd else "got numbers and strings together"
        raise DatasetError(f"from_networkx: graph labels must be all numbers or all strings ({got})")
    if y.ndim != 1:
        raise DatasetError(f"from_networkx: y must hold one label per graph (got shape {y.shape})")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise DatasetError("from_networkx: graph labels must be finite")
    return y


def _stack(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros((0, 1))


def _get(data: dict, key: str, where: str):
    try:
        return data[key]
    except KeyError:
        raise DatasetError(f"from_networkx: {where} has no {key!r}") from None


def _encode(per_graph: list[list], what: str, codes: dict[str, dict] | None = None) -> list[np.ndarray]:
    """Integer codes per graph: integers as given, anything else by sorted distinct value
    (after the codes already in ``codes[what]``, which is extended in place)."""
    flat = [v for vals in per_graph for v in vals]
    known = {} if codes is None else codes.setdefault(what, {})
    if not known and all(isinstance(v, Integral) and not isinstance(v, bool) for v in flat):
        big = next((v for v in flat if not -(2**63) <= int(v) < 2**63), None)
        if big is not None:
            raise DatasetError(f"from_networkx: {what} {big} does not fit in 64 bits; give labels below 2**63 "
                               "(or strings, which get codes)")
        return [np.asarray(vals, dtype=np.int64) for vals in per_graph]
    distinct = set(flat) - known.keys()
    try:
        ordered = sorted(distinct)
    except TypeError:
        ordered = sorted(distinct, key=repr)
    known.update({v: len(known) + i for i, v in enumerate(ordered)})
    return [np.array([known[v] for v in vals], dtype=np.int64) for vals in per_graph]


def _floats(per_graph: list[list], counts: list[int], what: str) -> list[np.ndarray]:
    out, width = [], None
    for vals, n in zip(per_graph, counts):
        try:
            a = np.asarray(vals, dtype=np.float64).reshape(n, -1) if n else None
        except (ValueError, TypeError):
            raise DatasetError(f"from_networkx: {what} values must be numbers or equal-length sequences") from None
        if a is None:
            continue
        if width is not None and a.shape[1] != width:
            raise DatasetError(f"from_networkx: {what} width {a.shape[1]} differs from {width}")
        width = a.shape[1]
        if not np.isfinite(a).all():
            raise DatasetError(f"from_networkx: {what} values must be finite")
        out.append(a)
    width = width or 1
    it = iter(out)
    return [next(it) if n else np.zeros((0, width)) for n in counts]


def to_networkx(batch: GraphBatch) -> list:
    """One ``networkx.Graph`` per graph of ``batch``.

    Nodes are ``0..n-1``; node data ``label`` (int) and ``attr`` (list of float) where the batch
    has them, edge data likewise, graph data ``label`` (y) and ``graph_id``. So
    ``from_networkx(to_networkx(b), "label", "attr", "label", "attr", y="label")`` rebuilds
    ``b`` (up to ``graph_ids`` and ``name``).
    """
    nx = require_networkx()

    out = []
    for g in batch:
        G = nx.Graph(graph_id=g.graph_id)
        if g.y is not None:
            G.graph["label"] = g.y
        nodes = {i: {} for i in range(g.n_nodes)}
        if g.node_labels is not None:
            for i, lab in enumerate(g.node_labels.tolist()):
                nodes[i]["label"] = lab
        if g.node_attrs is not None:
            for i, row in enumerate(g.node_attrs.tolist()):
                nodes[i]["attr"] = row
        G.add_nodes_from(nodes.items())
        edata = [{} for _ in range(len(g.edges))]
        if g.edge_labels is not None:
            for d, lab in zip(edata, g.edge_labels.tolist()):
                d["label"] = lab
        if g.edge_attrs is not None:
            for d, row in zip(edata, g.edge_attrs.tolist()):
                d["attr"] = row
        G.add_edges_from((u, v, d) for (u, v), d in zip(g.edges.tolist(), edata))
        out.append(G)
    return out
