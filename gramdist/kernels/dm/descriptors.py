"""Stochastic Cascade (SC) node descriptors of the DM kernel (Su et al. 2016, §4.1).

For a label alphabet ``l_1..l_L`` the SC descriptor of node ``v`` at iteration ``r`` is
``(A_1^(r)(v), ..., A_L^(r)(v))`` with

* ``A_i^(0)(v) = 1`` if ``v`` carries label ``l_i`` else ``0``;
* ``A_i^(r+1)(v) = 1`` if ``A_i^(r)(v) = 1``, else ``1 - prod_{u in N(v)} (1 - eta A_i^(r)(u))``.

The product over neighbours is evaluated for the whole batch at once as
``-expm1(adjacency @ log1p(-eta A))``: one sparse-times-dense product per iteration, with
``log1p`` and ``expm1`` evaluated only on the non-zero entries (most entries are zero, and a
zero contributes exactly 0 to the sum and to the result). SciPy
sums each row in the order of its (sorted) column indices, so a node's descriptor is the
same float64 value whatever other graphs share the batch. A self-loop makes a node its own
neighbour (it appears once in the adjacency).

Numerical node attributes are appended to every iteration's descriptor after min-max scaling
to [0, 1] with ranges learned at fit (values outside are clipped; a constant column maps to
0). Datasets that have numerical *edge* attributes but no node attributes get, for each
node, the mean of its incident edges' attributes (a self-loop counts once); isolated nodes
get the fitted minimum, i.e. 0 after scaling.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from gramdist.graphs import GraphBatch


def label_alphabet(graphs: GraphBatch) -> np.ndarray:
    """Sorted distinct node labels of ``graphs``; ``[0]`` when the graphs are unlabelled."""
    if graphs.node_labels is None:
        return np.zeros(1, dtype=np.int64)
    return np.unique(graphs.node_labels)


def one_hot_labels(graphs: GraphBatch, alphabet: np.ndarray) -> np.ndarray:
    """(N, L) float64 indicator of each node's label in ``alphabet``.

    Unlabelled graphs all carry ``alphabet[0]``; a label absent from the alphabet (not seen at
    fit) gives an all-zero row, so such a node propagates nothing.
    """
    n, n_labels = graphs.n_nodes, len(alphabet)
    out = np.zeros((n, n_labels), dtype=np.float64)
    if graphs.node_labels is None:
        out[:, 0] = 1.0
        return out
    lab = graphs.node_labels
    pos = np.minimum(np.searchsorted(alphabet, lab), n_labels - 1)
    known = alphabet[pos] == lab
    out[np.flatnonzero(known), pos[known]] = 1.0
    return out


def raw_node_attributes(graphs: GraphBatch) -> np.ndarray | None:
    """(N, K) numerical node attributes, or edge attributes aggregated onto nodes, or None.

    Node attributes win when present. Otherwise each node gets the mean of the attributes of
    its incident edges (NaN for an isolated node, turned into 0 by :func:`scale_attributes`).
    """
    if graphs.node_attrs is not None and graphs.node_attrs.shape[1] > 0:
        return graphs.node_attrs
    if graphs.edge_attrs is None or graphs.edge_attrs.shape[1] == 0:
        return None
    e = graphs.global_edges
    loop = e[:, 0] == e[:, 1]
    ends = np.concatenate([e[:, 0], e[~loop, 1]])
    vals = np.concatenate([graphs.edge_attrs, graphs.edge_attrs[~loop]])
    n = graphs.n_nodes
    deg = np.bincount(ends, minlength=n).astype(np.float64)
    sums = np.stack([np.bincount(ends, weights=vals[:, k], minlength=n) for k in range(vals.shape[1])], 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / deg[:, None]


def attribute_ranges(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-column (min, max) of ``raw`` (K columns), ignoring NaN; (0, 0) for empty columns."""
    if raw.shape[0] == 0:
        return np.zeros(raw.shape[1]), np.zeros(raw.shape[1])
    nan = np.isnan(raw)
    lo = np.where(nan, np.inf, raw).min(0)
    hi = np.where(nan, -np.inf, raw).max(0)
    bad = ~np.isfinite(lo) | ~np.isfinite(hi)
    lo[bad], hi[bad] = 0.0, 0.0
    return lo, hi


def scale_attributes(raw: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(N, K) attributes mapped to [0, 1] by the fitted ranges, clipped; NaN and constant columns -> 0."""
    span = hi - lo
    safe = np.where(span > 0, span, 1.0)
    out = (raw - lo) / safe
    out[:, span <= 0] = 0.0
    out = np.clip(out, 0.0, 1.0)
    out[np.isnan(out)] = 0.0
    return out


def sc_iterations(graphs: GraphBatch, alphabet: np.ndarray, eta: float, h: int) -> Iterator[np.ndarray]:
    """Yield the (N, L) SC descriptors of every node of ``graphs`` for r = 0, 1, ..., h.

    Each yielded array is a fresh float64 array (safe to keep).
    """
    a = one_hot_labels(graphs, alphabet)
    adj = graphs.adjacency()
    yield a
    for _ in range(h):
        # log(1 - eta A) (-inf when eta A = 1), evaluated only where A != 0 (a masked ufunc,
        # no index arrays): early on most entries are zero, and log1p/expm1 would dominate;
        # zeros stay (-)0 and contribute exactly 0
        log_keep = a * -eta
        with np.errstate(divide="ignore"):
            np.log1p(log_keep, out=log_keep, where=log_keep != 0)
        new = adj @ log_keep
        np.expm1(new, out=new, where=new != 0)
        np.subtract(0.0, new, out=new)  # -x, and +0.0 for either zero: no negative zeros
        np.copyto(new, 1.0, where=a == 1.0)
        a = new
        yield a
