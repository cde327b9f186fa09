"""All-pairs shortest-path distances of every graph of a batch, as flat arrays of node pairs.

Shared by the shortest-path family (``sp``, ``sp_attr``, ``wlsp``), GraphHopper and the hash
graph kernel on shortest paths — hence here, beside ``hashing.py``, and not inside one family's
folder (kernel families do not import each other). Graphs are unweighted and undirected, so
distances are hop counts: each graph's rows are computed from every source by
:func:`scipy.sparse.csgraph.shortest_path` (``method="D"``, ``unweighted=True``: Dijkstra with
unit weights in compiled code, which settles the nodes in BFS order; O(n·(n+m)·log n) per
graph, not Floyd–Warshall's O(n³)). Self-loops do not change
a distance; nodes in different connected components are at infinite distance and such pairs
are left out; a node's distance to itself (0) is left out.

Memory stays bounded: a graph with ``n`` nodes is processed in blocks of source rows of
about ``max_pairs`` entries (never an ``n × n`` matrix of a large graph at once), and
consecutive small graphs (``GROUP_NODES`` nodes together) are solved by one BFS call on their
block-diagonal adjacency, so the per-call overhead of SciPy is paid per group, not per graph.
Counting ``(label(u), label(v), d)`` needs no list of pairs: with per-graph dense label codes,
a pair's code is a row term plus a column term plus the distance, summed over a whole block
by one broadcast addition and counted by one ``bincount`` (:func:`labelled_distance_counts`).
SciPy's search (about 100 ns per node pair) dominates large graphs such as D&D's.

Counting (:func:`iter_labelled_distance_counts`) takes graphs of at most ``SEIDEL_MAX_NODES``
nodes another way: padded to a multiple of 8 nodes and stacked, a few dozen at a time, their
distances come from Seidel's algorithm (:func:`seidel_distances`: about log2(diameter) pairs
of batched dense products in float32, exact for these sizes), and every pair of a run of such
graphs is coded and counted at once. On NCI1 (4,110 graphs, 126 of them above 64 nodes) the
labelled counts took 0.27 s this way against 0.52 s with one BFS call per group of graphs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import ranges
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
    return _shortest_path(adj, method="D", directed=True, unweighted=True, indices=sources)


def _shortest_path(adj: sp.csr_matrix, **kwargs: object) -> np.ndarray:
    # imported here, at the first graph Seidel's stacks do not take: csgraph brings
    # scipy.sparse.linalg and scipy.linalg (50 ms of a command's start), which NCI1 never needs
    from scipy.sparse.csgraph import shortest_path

    return shortest_path(adj, **kwargs)


def source_blocks(n: int, max_pairs: int = MAX_PAIRS) -> list[tuple[int, int]]:
    """Consecutive ranges of source nodes of an ``n``-node graph, about ``max_pairs`` entries each."""
    rows = max(1, max_pairs // max(n, 1))
    return [(a, min(n, a + rows)) for a in range(0, n, rows)]


#: small graphs are solved together, as one block-diagonal matrix of at most this many nodes
GROUP_NODES = 128


@dataclass
class DistanceBlock:
    """Hop distances from the batch nodes ``row0 .. row0+k-1`` to ``col0 .. col0+c-1`` (global,
    0-based at the batch's first node): ``dist`` (k, c) float64, ``inf`` wherever the pair does
    not count (a node and itself, nodes of different graphs or components)."""

    row0: int
    col0: int
    dist: np.ndarray


def distance_blocks(graphs: GraphBatch, max_pairs: int = MAX_PAIRS) -> Iterator[DistanceBlock]:
    """All-pairs distances of every graph, graph after graph, in blocks of bounded size.

    Consecutive graphs of at most ``GROUP_NODES / 2`` nodes are solved together as one
    block-diagonal adjacency of at most ``GROUP_NODES`` nodes (one BFS call instead of one
    per graph); a larger graph gets blocks of source rows of about ``max_pairs`` entries.
    Which block a pair falls in depends only on its graph's size and on the graphs grouped
    with it, never on arithmetic across graphs.
    """
    sizes = graphs.nodes_per_graph
    starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
    indptr, nbrs, _ = graphs.arcs()
    g, n_graphs = 0, len(graphs)
    while g < n_graphs:
        n = int(sizes[g])
        if n <= GROUP_NODES // 2:
            last, total = g, 0
            while last < n_graphs and sizes[last] <= GROUP_NODES // 2 and total + sizes[last] <= GROUP_NODES:
                total += int(sizes[last])
                last += 1
            s, e = int(starts[g]), int(starts[g]) + total
            if total > 1:
                ip = indptr[s : e + 1] - indptr[s]
                adj = sp.csr_matrix((np.ones(int(ip[-1])), nbrs[indptr[s] : indptr[e]] - s, ip), shape=(e - s, e - s))
                dist = _shortest_path(adj, method="D", directed=True, unweighted=True)
                if last - g > 1:
                    gid = graphs.node_graph[s:e]
                    dist[gid[:, None] != gid[None, :]] = np.inf
                np.fill_diagonal(dist, np.inf)
                yield DistanceBlock(s, s, dist)
            g = last
            continue
        yield from graph_distance_blocks(graphs, g, max_pairs)
        g += 1


def graph_distance_blocks(graphs: GraphBatch, g: int, max_pairs: int = MAX_PAIRS) -> Iterator[DistanceBlock]:
    """The distances of graph ``g`` alone, in blocks of source rows of about ``max_pairs`` entries."""
    adj = local_adjacency(graphs, g)
    n = int(graphs.nodes_per_graph[g])
    s = int(graphs.node_offsets[g] - graphs.node_offsets[0])
    for a, b in source_blocks(n, max_pairs):
        dist = distance_rows(adj, np.arange(a, b))
        dist[np.arange(b - a), np.arange(a, b)] = np.inf
        yield DistanceBlock(s + a, s, dist)


def pair_pieces(graphs: GraphBatch, max_pairs: int = MAX_PAIRS) -> Iterator[PairPiece]:
    """The ordered pairs of every graph of ``graphs``, in pieces of about ``max_pairs`` entries.

    Built on :func:`distance_blocks`: the blocks of small graphs are gathered into pieces of
    about ``max_pairs`` entries; a graph split over several source blocks gets one piece per
    block, whatever came before it, so its partial sums never depend on the other graphs of
    the batch. Within a piece, pairs are ordered by graph, then ``u``, then ``v``.
    """
    node_graph = graphs.node_graph
    parts: list[tuple[np.ndarray, ...]] = []
    held = 0

    def flush() -> PairPiece:
        return PairPiece(*(np.concatenate([p[i] for p in parts]) for i in range(4)))

    for block in distance_blocks(graphs, max_pairs):
        split = int(node_graph[block.row0]) == int(node_graph[block.col0 + block.dist.shape[1] - 1]) and \
            block.dist.shape[0] < block.dist.shape[1]  # a block of source rows of one large graph
        if split and parts:
            yield flush()
            parts, held = [], 0
        r, c = np.nonzero(np.isfinite(block.dist))
        if len(r):
            u = r + block.row0
            parts.append((node_graph[u], u, c + block.col0, block.dist[r, c].astype(np.int64)))
        held += block.dist.size
        if parts and (held >= max_pairs or split):
            yield flush()
            parts, held = [], 0
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




def _count_block(values: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values in ``0..total-1`` and their counts: a bincount when ``total`` is not much
    larger than ``len(values)``, else a sort."""
    if total <= 4 * len(values) + (1 << 16):
        cnt = np.bincount(values, minlength=total)
        nz = np.flatnonzero(cnt)
        return nz, cnt[nz]
    s = np.sort(values)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.not_equal(s[1:], s[:-1], out=new[1:])
    return s[new], np.diff(np.append(np.flatnonzero(new), len(s)))


def labelled_distance_counts(graphs: GraphBatch, label_sets: list[np.ndarray | None],
                             max_pairs: int = MAX_PAIRS) -> list[tuple[np.ndarray, ...]]:
    """For each node labelling, the counts of ``(label(u), label(v), d(u, v))`` per graph.

    Every ordered pair ``(u, v)``, ``u != v``, at finite distance ``d`` counts once (so an
    unordered pair counts once under each orientation). ``label_sets`` holds (N,) integer
    label arrays (int64 or uint64), or ``None`` for "no labels" (only ``d`` counts).
    The distances are computed once and shared by all labellings.

    Returns one ``(graph, label_u, label_v, d, count)`` tuple of arrays per labelling (for
    ``None``: ``label_u``/``label_v`` are zeros). A (graph, label_u, label_v, d) appears once
    per block; a graph split over several blocks may repeat one, with counts to be summed.
    Everything at once: :func:`iter_labelled_distance_counts` gives the same pieces block by
    block, for a caller that reduces them as they come.
    """
    out: list[list[tuple[np.ndarray, ...]]] = [[] for _ in label_sets]
    for _, i, piece in iter_labelled_distance_counts(graphs, label_sets, max_pairs):
        out[i].append(piece)
    result = []
    for parts in out:
        if parts:
            result.append(tuple(np.concatenate([q[j] for q in parts]) for j in range(5)))
        else:
            z = np.zeros(0, np.int64)
            result.append((z, z, z, z, z))
    return result


@dataclass
class _Coding:
    """One labelling's per-graph dense label codes (see :func:`local_codes`); ``table`` None: no
    labels (every node code 0, one code per graph)."""

    code: np.ndarray
    n_codes: np.ndarray
    table: np.ndarray | None
    cum: np.ndarray | None

    @classmethod
    def of(cls, graphs: GraphBatch, labels: np.ndarray | None) -> _Coding:
        if labels is None:
            return cls(np.zeros(graphs.n_nodes, np.int64), np.ones(len(graphs), np.int64), None, None)
        code, n_codes, table = local_codes(graphs, np.asarray(labels))
        return cls(code, n_codes, table, np.concatenate([[0], np.cumsum(n_codes)]))

    def spaces(self, gs: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """(len(gs) + 1,) offsets of the graphs' code spaces ``L_g² · n_g``, one after the other."""
        return np.concatenate([[0], np.cumsum(self.n_codes[gs] * self.n_codes[gs] * sizes[gs])])

    def decoded(self, values: np.ndarray, off: np.ndarray, gs: np.ndarray, sizes: np.ndarray
                ) -> tuple[np.ndarray, ...]:
        """``(graph, label_u, label_v, d, count)`` of the pair codes ``values`` (offsets ``off``
        over the graphs ``gs``), counted."""
        nz, cnt = _count_block(values, int(off[-1]))
        p = np.searchsorted(off, nz, side="right") - 1
        rem = nz - off[p]
        g = gs[p]
        n = sizes[g]
        d = rem % n
        if self.table is None:
            z = np.zeros(len(g), np.int64)
            return g, z, z, d, cnt
        t = rem // n
        L = self.n_codes[g]
        return g, self.table[self.cum[g] + t // L], self.table[self.cum[g] + t % L], d, cnt


def iter_labelled_distance_counts(graphs: GraphBatch, label_sets: list[np.ndarray | None],
                                  max_pairs: int = MAX_PAIRS) -> Iterator[tuple[int, int, tuple[np.ndarray, ...]]]:
    """The pieces of :func:`labelled_distance_counts` as they are counted:
    ``(complete, i, (graph, label_u, label_v, d, count))`` for labelling ``i``, where every
    graph below ``complete`` has had all its pieces before this one (pieces go graph after
    graph; the last graphs are complete when the iteration ends).

    Pairs are counted without listing them: with per-graph dense label codes ``c`` (``L_g`` of
    them) the code of a pair is ``off_g + (c(u)·L_g + c(v))·n_g + d``, so one broadcast
    addition and one ``bincount`` (or a sort, for large code spaces such as late WL labels)
    count a whole run of small graphs (:func:`seidel_distances`) or a block of source rows of
    a larger graph. Counts are exact integers, so how graphs are grouped never shows.
    """
    sizes = graphs.nodes_per_graph
    codings = [_Coding.of(graphs, labels) for labels in label_sets]
    small = sizes <= SEIDEL_MAX_NODES
    held = np.concatenate([[0], np.cumsum(np.where(small, _padded(sizes) ** 2, 0))])
    g, n_graphs = 0, len(graphs)
    while g < n_graphs:
        # a window of consecutive graphs with at most max_pairs padded entries of small ones (or
        # one graph): its small graphs first, in one piece, then its larger ones block by block
        last = min(n_graphs, max(g + 1, int(np.searchsorted(held, held[g] + max_pairs, side="right")) - 1))
        gs = np.arange(g, last)
        ids = gs[small[gs] & (sizes[gs] > 0)]  # a graph without nodes has no pair to count
        if len(ids):
            dist = [(b, seidel_distances(padded_adjacency(graphs, b, n_pad)))
                    for n_pad, b in _size_buckets(ids, sizes[ids])]
            for i, coding in enumerate(codings):
                yield g, i, _small_counts(graphs, ids, dist, coding)
        for h in gs[~small[gs]]:
            for block in graph_distance_blocks(graphs, int(h), max_pairs):
                for i, coding in enumerate(codings):
                    yield int(h), i, _block_counts(graphs, block, coding)
        g = last


def _block_counts(graphs: GraphBatch, block: DistanceBlock, coding: _Coding) -> tuple[np.ndarray, ...]:
    """The counted pairs of one :class:`DistanceBlock`."""
    sizes, node_graph = graphs.nodes_per_graph, graphs.node_graph
    k, c = block.dist.shape
    rows = np.arange(block.row0, block.row0 + k)
    cols = np.arange(block.col0, block.col0 + c)
    finite = np.isfinite(block.dist)
    rg, cg = node_graph[rows], node_graph[cols]
    g0 = int(rg[0])
    gs = np.arange(g0, int(cg[-1]) + 1)
    off = coding.spaces(gs, sizes)
    rterm = off[rg - g0] + coding.code[rows] * coding.n_codes[rg] * sizes[rg]
    cterm = coding.code[cols] * sizes[cg]
    values = np.add.outer(rterm, cterm)[finite] + block.dist[finite].astype(np.int64)
    return coding.decoded(values, off, gs, sizes)


def _small_counts(graphs: GraphBatch, gs: np.ndarray, dist: list[tuple[np.ndarray, np.ndarray]],
                  coding: _Coding) -> tuple[np.ndarray, ...]:
    """The counted pairs of the small graphs ``gs`` (increasing), whose distances ``dist`` come
    in stacks ``(graph ids, (B, n, n) distances, 0 = no pair)``."""
    sizes = graphs.nodes_per_graph
    base = graphs.node_offsets[0]
    off = coding.spaces(gs, sizes)
    parts = []
    for ids, d in dist:
        n_pad = d.shape[1]
        n, L = sizes[ids], coding.n_codes[ids]
        local = np.arange(n_pad)
        real = local[None, :] < n[:, None]
        nodes = np.where(real, graphs.node_offsets[ids][:, None] - base + local[None, :], 0)
        code = np.where(real, coding.code[nodes], 0)  # (B, n_pad)
        row = (off[np.searchsorted(gs, ids)][:, None] + code * (L * n)[:, None])[:, :, None]
        col = (code * n[:, None])[:, None, :]
        pair = d > 0
        parts.append((row + col)[pair] + d[pair].astype(np.int64))
    return coding.decoded(np.concatenate(parts), off, gs, sizes)


#: graphs of at most this many nodes get their distances from :func:`seidel_distances`
#: (NCI1's embedding: 0.165 s at 64, 0.156 s at 128, the same counts; its largest has 111)
SEIDEL_MAX_NODES = 128
#: padded entries of one stack of graphs in :func:`seidel_distances` (a few hundred KB per
#: float32 array, so the products and comparisons stay in cache)
SEIDEL_STACK_ENTRIES = 1 << 16


def _padded(n: np.ndarray) -> np.ndarray:
    """Nodes of graphs of ``n`` nodes once padded for :func:`seidel_distances`."""
    return np.maximum(8, -(-n // 8) * 8)


def _size_buckets(gs: np.ndarray, n: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """``(padded size, graph ids)`` stacks of the graphs ``gs`` (sizes ``n``), at most
    :data:`SEIDEL_STACK_ENTRIES` padded entries each (at least one graph)."""
    pads = _padded(n)
    for n_pad in np.unique(pads):
        ids = gs[pads == n_pad]
        step = max(1, SEIDEL_STACK_ENTRIES // int(n_pad) ** 2)
        for a in range(0, len(ids), step):
            yield int(n_pad), ids[a:a + step]


def padded_adjacency(graphs: GraphBatch, ids: np.ndarray, n_pad: int) -> np.ndarray:
    """(len(ids), n_pad, n_pad) float32 0/1 symmetric adjacency of the graphs ``ids`` (local
    node indices; nodes ``n_g..n_pad-1`` are isolated padding), zero diagonal."""
    adj = np.zeros((len(ids), n_pad, n_pad), np.float32)
    lo = graphs.edge_offsets[ids] - graphs.edge_offsets[0]
    counts = graphs.edges_per_graph[ids]
    e = graphs.edges[ranges(lo, counts)].astype(np.int64)
    b = np.repeat(np.arange(len(ids)), counts)
    adj[b, e[:, 0], e[:, 1]] = 1
    adj[b, e[:, 1], e[:, 0]] = 1
    diag = np.arange(n_pad)
    adj[:, diag, diag] = 0  # self-loops do not change a distance
    return adj


def seidel_distances(adj: np.ndarray) -> np.ndarray:
    """Hop distances of a stack of small undirected graphs by Seidel's algorithm.

    ``adj`` (B, n, n) float32 0/1 symmetric adjacency with a zero diagonal. Returns (B, n, n)
    float32 distances, 0 on the diagonal and between nodes of different components.

    Seidel (1995), unrolled: ``R_0 = A + I`` and ``R_{l+1} = [R_l R_l > 0]`` (reach within
    2^(l+1) hops) until nothing changes (``R_L``: each component a clique, distance 1 in the
    graph of ``R_L - I``); then, back down, ``D_l = 2 D_{l+1} - [D_{l+1} R_l < D_{l+1} ∘ 1ᵀR_l]``
    (a pair's distance is odd exactly when some neighbour of its end is closer in the
    half-distance, Seidel's lemma, written with ``R_l = A_l + I``). Pairs of different
    components keep 0 at every level (no path, no term), so the algorithm needs no connected
    graph. Every value is an integer below 2^24: float32 products are exact.
    """
    n = adj.shape[1]
    diag = np.arange(n)
    reach = adj.copy()
    reach[:, diag, diag] = 1
    levels = [reach]
    count = np.count_nonzero(reach)
    while True:
        wider = np.matmul(reach, reach) > 0.5
        now = np.count_nonzero(wider)
        if now == count:
            break
        reach, count = wider.astype(np.float32), now
        levels.append(reach)
    dist = levels.pop().copy()
    dist[:, diag, diag] = 0
    for reach in reversed(levels):
        closer = np.matmul(dist, reach) < dist * reach.sum(axis=1)[:, None, :]
        dist *= 2
        dist -= closer
    return dist


__all__ = ["MAX_PAIRS", "GROUP_NODES", "SEIDEL_MAX_NODES", "DistanceBlock", "distance_blocks", "graph_distance_blocks",
           "PairPiece", "pair_pieces", "local_adjacency", "distance_rows", "source_blocks", "padded_adjacency",
           "seidel_distances",
           "local_codes", "count_codes", "labelled_distance_counts",
           "iter_labelled_distance_counts"]
