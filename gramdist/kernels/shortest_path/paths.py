"""All-pairs shortest-path distances of every graph of a batch, as flat arrays of node pairs.

Shared by the shortest-path family (``sp``, ``sp_attr``, ``wlsp``), GraphHopper and the hash
graph kernel on shortest paths. Graphs are unweighted and undirected, so distances are
hop counts: each graph's rows are computed by breadth-first search from every source
(:func:`scipy.sparse.csgraph.shortest_path` with ``unweighted=True``, i.e. BFS order in
compiled code, O(n·(n+m)) per graph, not Floyd–Warshall's O(n³)). Self-loops do not change
a distance; nodes in different connected components are at infinite distance and such pairs
are left out; a node's distance to itself (0) is left out.

Memory stays bounded: a graph with ``n`` nodes is processed in blocks of source rows of
about ``max_pairs`` entries (``n`` sources at once for small graphs, so never an ``n × n``
matrix of a large graph in one piece), and small graphs are grouped into one piece so that
the counting code downstream runs vectorised over many graphs at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from gramdist.graphs import GraphBatch

#: entries of distance rows handled in one piece (a few tens of MB of temporaries)
MAX_PAIRS = 1 << 22


@dataclass
class PairPiece:
    """Ordered node pairs ``(u, v)``, ``u != v``, at finite distance, of some graphs of a batch.

    ``graph`` (k,) int64 graph index in the batch; ``u``, ``v`` (k,) int64 node indices in the
    batch (global, 0-based at the batch's first node); ``d`` (k,) int64 hop distance >= 1.
    Pairs are grouped by graph (graphs in increasing order), then by ``u``, then by ``v``.
    """

    graph: np.ndarray
    u: np.ndarray
    v: np.ndarray
    d: np.ndarray

    def __len__(self) -> int:
        return len(self.d)


def local_adjacency(graphs: GraphBatch, g: int) -> sp.csr_matrix:
    """Symmetric CSR adjacency (local indices, unit weights) of graph ``g`` of the batch."""
    indptr, nbrs, _ = graphs.arcs()
    s = int(graphs.node_offsets[g] - graphs.node_offsets[0])
    e = int(graphs.node_offsets[g + 1] - graphs.node_offsets[0])
    ip = indptr[s : e + 1] - indptr[s]
    idx = nbrs[indptr[s] : indptr[e]] - s
    return sp.csr_matrix((np.ones(len(idx)), idx, ip), shape=(e - s, e - s))


def distance_rows(adj: sp.csr_matrix, sources: np.ndarray) -> np.ndarray:
    """(len(sources), n) float64 hop distances from ``sources`` (inf where unreachable)."""
    return shortest_path(adj, method="D", directed=True, unweighted=True, indices=sources)


def source_blocks(n: int, max_pairs: int = MAX_PAIRS) -> list[tuple[int, int]]:
    """Consecutive ranges of source nodes of an ``n``-node graph, about ``max_pairs`` entries each."""
    rows = max(1, max_pairs // max(n, 1))
    return [(a, min(n, a + rows)) for a in range(0, n, rows)]


def _pairs_of_rows(dist: np.ndarray, first_source: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Local (u, v, d) of the finite off-diagonal entries of distance rows ``dist``."""
    ok = np.isfinite(dist)
    ok[np.arange(dist.shape[0]), np.arange(first_source, first_source + dist.shape[0])] = False
    r, c = np.nonzero(ok)
    return r + first_source, c, dist[r, c].astype(np.int64)


#: small graphs are solved together, as one block-diagonal matrix of at most this many nodes
GROUP_NODES = 256


def _group_pairs(graphs: GraphBatch, first: int, last: int) -> tuple[np.ndarray, ...]:
    """(g, u, v, d) of graphs ``first..last-1`` solved as one block-diagonal adjacency."""
    indptr, nbrs, _ = graphs.arcs()
    s = int(graphs.node_offsets[first] - graphs.node_offsets[0])
    e = int(graphs.node_offsets[last] - graphs.node_offsets[0])
    ip = indptr[s : e + 1] - indptr[s]
    adj = sp.csr_matrix((np.ones(int(ip[-1])), nbrs[indptr[s] : indptr[e]] - s, ip), shape=(e - s, e - s))
    dist = shortest_path(adj, method="D", directed=True, unweighted=True)
    gid = graphs.node_graph[s:e]
    ok = np.isfinite(dist)
    ok &= gid[:, None] == gid[None, :]
    np.fill_diagonal(ok, False)
    r, c = np.nonzero(ok)
    return gid[r], r + s, c + s, dist[r, c].astype(np.int64)


def pair_pieces(graphs: GraphBatch, max_pairs: int = MAX_PAIRS) -> Iterator[PairPiece]:
    """The ordered pairs of every graph of ``graphs``, in pieces of about ``max_pairs`` rows' entries.

    Consecutive small graphs (together at most ``GROUP_NODES`` nodes) are solved as one
    block-diagonal matrix (one BFS call instead of one per graph), and several such groups
    make one piece; a large graph (more than ``max_pairs`` entries) is split by blocks of
    sources, one piece per block (so one graph may span several consecutive pieces, always
    the same ones whatever other graphs share the batch). Within a piece, pairs are ordered
    by graph, then ``u``, then ``v``, and a graph's pairs never depend on the other graphs.
    """
    sizes = graphs.nodes_per_graph
    starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
    parts: list[tuple[np.ndarray, ...]] = []
    held = 0

    def flush() -> PairPiece:
        g = np.concatenate([p[0] for p in parts])
        u = np.concatenate([p[1] for p in parts])
        v = np.concatenate([p[2] for p in parts])
        d = np.concatenate([p[3] for p in parts])
        return PairPiece(g, u, v, d)

    g = 0
    n_graphs = len(graphs)
    while g < n_graphs:
        n = int(sizes[g])
        if n <= GROUP_NODES // 2:
            last, total = g, 0
            while last < n_graphs and sizes[last] <= GROUP_NODES // 2 and total + sizes[last] <= GROUP_NODES:
                total += int(sizes[last])
                last += 1
            part = _group_pairs(graphs, g, last)
            if len(part[0]):
                parts.append(part)
            held += int(np.sum(sizes[g:last] ** 2))
            g = last
            if held >= max_pairs:
                yield flush()
                parts, held = [], 0
            continue
        adj = local_adjacency(graphs, g)
        blocks = source_blocks(n, max_pairs)
        if len(blocks) > 1 and parts:
            # a graph split over several blocks gets one piece per block, whatever came
            # before it, so its partial sums never depend on the other graphs of the batch
            yield flush()
            parts, held = [], 0
        for a, b in blocks:
            u, v, d = _pairs_of_rows(distance_rows(adj, np.arange(a, b)), a)
            if len(d):
                parts.append((np.full(len(d), g, np.int64), u + starts[g], v + starts[g], d))
                held += (b - a) * n
            if held >= max_pairs or (len(blocks) > 1 and parts):
                yield flush()
                parts, held = [], 0
        g += 1
    if parts:
        yield flush()


def local_codes(graphs: GraphBatch, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-graph dense codes of node labels.

    Returns ``(code, n_codes, table)``: ``code`` (N,) int64 in ``0..n_codes[g]-1`` for the nodes
    of graph ``g`` (codes follow the sorted label values of that graph); ``n_codes`` (G,)
    int64; ``table`` (sum n_codes,) the label value of each (graph, code), graph after graph,
    so the label of code ``c`` of graph ``g`` is ``table[cum[g] + c]`` with
    ``cum = concatenate([[0], cumsum(n_codes)])``.
    """
    ng = graphs.node_graph
    order = np.lexsort((labels, ng))
    sl, sg = labels[order], ng[order]
    new = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        new[1:] = (sl[1:] != sl[:-1]) | (sg[1:] != sg[:-1])
    rank = np.cumsum(new) - 1  # global rank of each (graph, label)
    n_codes = np.bincount(sg[new], minlength=len(graphs)).astype(np.int64)
    cum = np.concatenate([[0], np.cumsum(n_codes)])
    code = np.empty(len(order), dtype=np.int64)
    code[order] = rank - cum[sg]
    return code, n_codes, sl[new]




def count_codes(graph: np.ndarray, code: np.ndarray, space: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct ``(graph, code)`` pairs of a piece and how often each occurs.

    ``graph`` (k,) nondecreasing graph indices, ``code`` (k,) int64 in ``0..space[graph]-1``,
    ``space`` (G,) int64 code-space size per graph of the batch. Uses one ``bincount`` over the
    concatenated code spaces of the piece's graphs when they are not much larger than the
    piece, else a sort. Returns ``(graph, code, count)`` sorted by graph then code; counts
    are int64 (exact).
    """
    if len(code) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    bounds = np.flatnonzero(np.diff(graph)) + 1
    first = np.concatenate([[0], bounds])
    gs = graph[first]
    off = np.concatenate([[0], np.cumsum(space[gs])])
    pos = np.repeat(np.arange(len(gs)), np.diff(np.append(first, len(graph))))
    comb = off[pos] + code
    total = int(off[-1])
    if total <= 4 * len(code) + (1 << 16):
        cnt = np.bincount(comb, minlength=total)
        nz = np.flatnonzero(cnt)
        counts = cnt[nz]
    else:
        s = np.sort(comb)
        new = np.empty(len(s), dtype=bool)
        new[0] = True
        np.not_equal(s[1:], s[:-1], out=new[1:])
        nz = s[new]
        counts = np.diff(np.append(np.flatnonzero(new), len(s)))
    p = np.searchsorted(off, nz, side="right") - 1
    return gs[p], nz - off[p], counts.astype(np.int64)




def labelled_distance_counts(graphs: GraphBatch, label_sets: list[np.ndarray | None],
                             max_pairs: int = MAX_PAIRS) -> list[tuple[np.ndarray, ...]]:
    """For each node labelling, the counts of ``(label(u), label(v), d(u, v))`` per graph.

    Every ordered pair ``(u, v)``, ``u != v``, at finite distance ``d`` counts once (so an
    unordered pair counts once under each orientation). ``label_sets`` holds (N,) integer
    label arrays (int64 or uint64), or ``None`` for "no labels" (only ``d`` counts).
    The distances are computed once and shared by all labellings.

    Returns one ``(graph, label_u, label_v, d, count)`` tuple of arrays per labelling (for
    ``None``: ``label_u``/``label_v`` are zeros). Each (graph, label_u, label_v, d) appears
    at most once per piece; a graph split over several pieces may repeat one, with the
    counts to be summed.
    """
    sizes = graphs.nodes_per_graph
    prepared = []
    for labels in label_sets:
        if labels is None:
            prepared.append(None)
            continue
        code, n_codes, table = local_codes(graphs, np.asarray(labels))
        cum = np.concatenate([[0], np.cumsum(n_codes)])
        prepared.append((code, n_codes, table, cum, n_codes * n_codes * sizes))
    out: list[list[tuple[np.ndarray, ...]]] = [[] for _ in label_sets]
    for piece in pair_pieces(graphs, max_pairs):
        for i, prep in enumerate(prepared):
            if prep is None:
                g, d, cnt = count_codes(piece.graph, piece.d, sizes)
                z = np.zeros(len(g), np.int64)
                out[i].append((g, z, z, d, cnt))
                continue
            code, n_codes, table, cum, space = prep
            L = n_codes[piece.graph]
            n = sizes[piece.graph]
            c = (code[piece.u] * L + code[piece.v]) * n + piece.d
            g, c, cnt = count_codes(piece.graph, c, space)
            L, n = n_codes[g], sizes[g]
            d = c % n
            t = c // n
            lu = table[cum[g] + t // L]
            lv = table[cum[g] + t % L]
            out[i].append((g, lu, lv, d, cnt))
    result = []
    for parts in out:
        if parts:
            result.append(tuple(np.concatenate([p[k] for p in parts]) for k in range(5)))
        else:
            z = np.zeros(0, np.int64)
            result.append((z, z, z, z, z))
    return result


__all__ = ["MAX_PAIRS", "GROUP_NODES", "PairPiece", "pair_pieces", "local_adjacency", "distance_rows", "source_blocks",
           "local_codes", "count_codes", "labelled_distance_counts"]
