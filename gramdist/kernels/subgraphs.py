"""Small connected induced subgraphs of many graphs: pattern tables, enumeration, canonical forms.

Shared by the graphlet kernel (``kernels/graphlets/``) and the CSM kernel (``kernels/csm/``).
Three parts, in this order:

**Pattern tables.** Lookup tables over the adjacency patterns of graphs on at most 6 nodes.

A graph on ``s`` nodes numbered ``0..s-1`` is coded by its **pattern**: an integer whose bit
``b(b-1)/2 + a`` is set when nodes ``a < b`` are adjacent. Pairs are ordered by their larger
node, so the pattern of the first ``j`` nodes of a set is the low ``j(j-1)/2`` bits of the
pattern of the whole set, and appending node ``j`` sets bits ``j(j-1)/2 .. j(j-1)/2 + j - 1``:
the enumerators grow patterns by OR-ing one block of bits per added node.

For every pattern of ``s`` nodes (``2^(s(s-1)/2)`` of them: 1024 for s = 5, 32768 for s = 6),
:func:`tables` precomputes, once per process, by brute force over the ``s!`` node orders:

* ``canon``: the canonical pattern of its isomorphism class (the smallest pattern over all
  node orders), so two patterns are isomorphic iff their ``canon`` agree;
* ``klass``: the class index, classes numbered by (connected first, then edge count, then
  canonical pattern) — stable, documented, and the same in every process;
* ``connected`` and ``noncut``: whether the graph is connected and, if so, the bit mask of the
  nodes whose removal leaves it connected (every connected graph on >= 2 nodes has at least
  two such nodes), which the enumerator uses to give each connected set one parent;
* ``sigma``: one node order that maps the pattern onto its canonical pattern
  (``canon_adj[i][j] == adj[sigma[i]][sigma[j]]``);
* per class, ``aut``: every automorphism of the canonical pattern (the node orders ``tau``
  with ``canon_adj[tau[i]][tau[j]] == canon_adj[i][j]``); the node orders of a pattern that
  give its canonical pattern are exactly ``sigma[tau]`` for ``tau`` in ``aut`` of its class.

Numbers of classes: 1, 2, 4, 11, 34, 156 graphs on 1..6 nodes, of which 1, 1, 2, 6, 21, 112
connected (OEIS A000088, A001349); the tests check them.

**Enumeration.** Connected induced subgraphs of every graph of a batch, enumerated level by level in NumPy.

:func:`connected_sets` lists, for ``s = 1..k``, every set of ``s`` nodes of a graph that induces
a connected subgraph — each set exactly once — as rows of an ``(R, s)`` array of global node
ids (in the order the nodes were added) with the adjacency pattern of the rows (bit layout of
the pattern tables above). It works on the whole batch at once: one step
extends every set of size ``s`` by every neighbour of its members, over the batch's CSR arcs.

**Each connected set once** (reverse search): the parent of a connected set ``S`` of size
``s + 1`` is ``S`` minus its largest node whose removal keeps ``S`` connected (its "non-cut"
nodes, read from a lookup table over the pattern of ``S``); ``S`` is produced only from its
parent, by adding that node. A candidate (set, neighbour ``w``) is produced once per set: from
the first member (in insertion order) adjacent to ``w``. So every connected set is produced
exactly once and every step is a vectorised filter, with no deduplication sort.

**Adjacency tests** between arbitrary node pairs of a graph go through a matrix per graph, one
byte per node pair for batches of up to :data:`BYTEMAP_LIMIT` pairs, else one bit (``n^2``
bits: 4 MB for D&D's largest graph of 5,748 nodes, 23 MB for all of D&D); a batch whose bit
matrices would exceed :data:`BITMAP_LIMIT_BITS` uses a binary search over the sorted edge keys
instead. Self-loops are ignored (graphlets are simple graphs); multi-edges are already
merged by :class:`~gramdist.graphs.GraphBatch`.

**Cost**: the number of connected sets of size ``<= k`` times ``s`` times the degree. For a graph
of maximum degree ``d`` there are at most ``n (e d)^(k-1)`` connected sets of size ``k``
(the paper's O(n d^(k-1)) bound), so sparse graphs are cheap and dense ones are not; the last
level is processed in slices of :data:`ROWS_PER_STEP` candidate rows, so memory is bounded by
the sets of size ``k - 1`` (which the caller can also consume slice by slice).

:func:`sample_subsets` draws uniform ``k``-subsets (without replacement inside a subset) of
each graph from a counter-based random stream keyed by (seed, the graph's content hash,
sample index, draw index): a graph gets the same samples in any batch, on any worker.

**Canonical labelled forms.** Canonical forms of small labelled subgraphs (node labels, optionally edge labels).

A node set with its adjacency pattern (see the pattern tables above) has
one unlabelled class; the node orders that map it onto the class's canonical pattern are
``sigma[tau]`` for the automorphisms ``tau`` of that pattern. Among these orders the
**canonical order** is the one whose sequence

    (label of node 0, ..., label of node s-1, label of edge e_1, ..., label of edge e_m)

(edges ``e_i`` of the canonical pattern in bit order; edge labels only when used) is
lexicographically smallest. Two labelled subgraphs are isomorphic (labels preserved) iff
they have the same class and the same smallest sequence, and the number of orders reaching
the minimum is the number of label-preserving automorphisms of the labelled subgraph.

:func:`labelled_forms` computes, vectorised over many sets, the canonical order, the number of
labelled automorphisms and a stable 64-bit key of the labelled isomorphism class.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

import numpy as np

from gramdist.arrayops import group_offsets, ranges
from gramdist.graphs import GraphBatch
from gramdist.kernels.hashing import combine, mix

# ================================================================== pattern tables
MAX_NODES = 6


def pair_index(a: int, b: int) -> int:
    """Bit of the pair of nodes ``a != b`` in a pattern."""
    if a > b:
        a, b = b, a
    return b * (b - 1) // 2 + a


def n_pairs(s: int) -> int:
    return s * (s - 1) // 2


@dataclass(frozen=True)
class PatternTables:
    """Lookup tables of the graphs on ``s`` nodes; see the module docstring."""

    s: int
    canon: np.ndarray        # (P,) int64 canonical pattern of each pattern
    klass: np.ndarray        # (P,) int64 class index of each pattern
    connected: np.ndarray    # (P,) bool
    noncut: np.ndarray       # (P,) int64 bit mask of non-cut nodes (0 if disconnected)
    sigma: np.ndarray        # (P, s) int8 a node order mapping the pattern onto its canon
    class_canon: np.ndarray  # (C,) int64 canonical pattern of each class
    class_connected: np.ndarray  # (C,) bool
    class_edges: np.ndarray  # (C,) int64 number of edges
    aut: tuple               # C arrays (|Aut|, s) int8: automorphisms of each canonical pattern

    @property
    def n_classes(self) -> int:
        return len(self.class_canon)

    @property
    def n_connected(self) -> int:
        return int(self.class_connected.sum())


def _adjacency_bits(s: int) -> np.ndarray:
    """(P, s, s) bool adjacency matrices of all patterns on ``s`` nodes."""
    p = np.arange(1 << n_pairs(s), dtype=np.int64)
    adj = np.zeros((len(p), s, s), dtype=bool)
    for b in range(s):
        for a in range(b):
            bit = ((p >> pair_index(a, b)) & 1).astype(bool)
            adj[:, a, b] = bit
            adj[:, b, a] = bit
    return adj


def _pattern_of(adj: np.ndarray) -> np.ndarray:
    """Patterns of a stack of (…, s, s) adjacency matrices."""
    s = adj.shape[-1]
    out = np.zeros(adj.shape[:-2], dtype=np.int64)
    for b in range(s):
        for a in range(b):
            out |= adj[..., a, b].astype(np.int64) << pair_index(a, b)
    return out


def _connected(adj: np.ndarray) -> np.ndarray:
    """(P,) bool: is each (P, s, s) adjacency connected (the empty graph on 0 nodes is not)."""
    s = adj.shape[-1]
    if s == 0:
        return np.zeros(adj.shape[0], dtype=bool)
    reach = np.zeros(adj.shape[:-1], dtype=bool)
    reach[:, 0] = True
    for _ in range(s):
        reach = reach | np.any(adj & reach[:, None, :], axis=2)
    return reach.all(axis=1)


@cache
def tables(s: int) -> PatternTables:
    """The lookup tables of the graphs on ``s`` nodes (1 <= s <= 6), computed once."""
    if not 1 <= s <= MAX_NODES:
        raise ValueError(f"pattern tables exist for 1..{MAX_NODES} nodes, not {s}")
    adj = _adjacency_bits(s)
    n_pat = adj.shape[0]
    perms = np.array(list(itertools.permutations(range(s))), dtype=np.int64)
    best = np.full(n_pat, np.iinfo(np.int64).max, dtype=np.int64)
    sigma = np.zeros((n_pat, s), dtype=np.int64)
    for perm in perms:
        code = _pattern_of(adj[:, perm][:, :, perm])
        better = code < best
        best[better] = code[better]
        sigma[better] = perm
    connected = _connected(adj)
    noncut = np.zeros(n_pat, dtype=np.int64)
    if s == 1:
        noncut[:] = 1
    else:
        for v in range(s):
            keep = [u for u in range(s) if u != v]
            sub = adj[:, keep][:, :, keep]
            noncut |= (_connected(sub) & connected).astype(np.int64) << v
    canon_codes = np.unique(best)
    edges = np.array([bin(int(c)).count("1") for c in canon_codes], dtype=np.int64)
    conn_of_class = connected[canon_codes]
    order = np.lexsort((canon_codes, edges, ~conn_of_class))
    class_canon = canon_codes[order]
    rank = np.argsort(class_canon)  # class indices in increasing canonical pattern
    klass = rank[np.searchsorted(class_canon[rank], best)]
    auts = []
    for c in class_canon:
        a = adj[c]
        ok = [perm for perm in perms if np.array_equal(a[perm][:, perm], a)]
        auts.append(np.array(ok, dtype=np.int8).reshape(-1, s))
    return PatternTables(
        s=s, canon=best, klass=klass.astype(np.int64), connected=connected, noncut=noncut,
        sigma=sigma.astype(np.int8), class_canon=class_canon, class_connected=conn_of_class[order],
        class_edges=edges[order], aut=tuple(auts))


def adjacency_of(pattern: int, s: int) -> np.ndarray:
    """(s, s) bool adjacency matrix of one pattern (for tests and reports)."""
    adj = np.zeros((s, s), dtype=bool)
    for b in range(s):
        for a in range(b):
            if (pattern >> pair_index(a, b)) & 1:
                adj[a, b] = adj[b, a] = True
    return adj


# ================================================================== enumeration
#: bit matrices of a batch above this many bits (512 MiB) fall back to binary searches
BITMAP_LIMIT_BITS = 1 << 32
#: up to this many node pairs (16 MiB) a batch keeps one byte per pair instead of one bit. Kept
#: small: each page of a fresh map costs a fault at its first write, and a map of D&D's first
#: chunk of 256 graphs (94 million pairs) took 0.1-0.2 s to fill as bytes, against 12 ms as bits
#: (2026-11-28: labelled 3-graphlets on D&D end to end 1.27 -> 1.21 s; 5-node graphlets over
#: 512 D&D graphs 7.2-7.8 s as bytes, 6.7-6.9 s as bits)
BYTEMAP_LIMIT = 1 << 24
#: candidate (set, neighbour) pairs handled per vectorised step (memory bound)
ROWS_PER_STEP = 1 << 21
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


class Adjacency:
    """Random-access adjacency tests ``u ~ v`` between global nodes of one batch.

    Self-loops are dropped. ``neighbours()`` gives the loop-free CSR arcs.
    """

    def __init__(self, graphs: GraphBatch) -> None:
        e = graphs.global_edges
        e = e[e[:, 0] != e[:, 1]]
        n = graphs.n_nodes
        # arcs sorted by (src, dst) as one int64 key: NumPy's vectorised sort, not a lexsort
        # (D&D's 1.7 million arcs: 0.08 -> 0.02 s)
        u, v = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64)
        arcs = np.sort(np.concatenate([u * n + v, v * n + u]))
        src, dst = np.divmod(arcs, max(n, 1))
        self.indptr = group_offsets(src, n)
        self.nbrs = dst.astype(np.int64)
        self.node_graph = graphs.node_graph
        sizes = graphs.nodes_per_graph.astype(np.int64)
        self.first = (graphs.node_offsets[:-1] - graphs.node_offsets[0]).astype(np.int64)
        self.sizes = sizes
        total_bits = int((sizes * sizes).sum())
        self.use_bitmap = total_bits <= BITMAP_LIMIT_BITS
        self.packed = total_bits > BYTEMAP_LIMIT
        if self.use_bitmap:
            self.base = np.zeros(len(sizes) + 1, dtype=np.int64)
            np.cumsum(sizes * sizes, out=self.base[1:])
            if self.packed:
                self.bits = np.zeros((total_bits + 7) // 8, dtype=np.uint8)
                if len(src):  # each (u, v) bit is set once: adding distinct powers of two is OR
                    idx = self._bit_index(src, dst)
                    np.add.at(self.bits, idx >> 3, (np.uint8(1) << (idx & 7).astype(np.uint8)))
            else:  # one byte per node pair: fewer operations per test
                self.bits = np.zeros(total_bits, dtype=bool)
                if len(src):
                    self.bits[self._bit_index(src, dst)] = True
        else:
            self.keys = arcs  # src * n + dst, sorted
            self.n = n

    def _bit_index(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        g = self.node_graph[u]
        return self.base[g] + (u - self.first[g]) * self.sizes[g] + (v - self.first[g])

    def context(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """Per-row constants for repeated tests inside the graphs of ``nodes``.

        With ``(c, n) = context(x)``, ``test(u, v, (c, n))`` tests ``u ~ v`` where ``u, v`` are
        in the graph of ``x`` (row by row), without looking the graph up again.
        """
        if not self.use_bitmap:
            return None
        g = self.node_graph[nodes]
        size = self.sizes[g]
        return self.base[g] - self.first[g] * size - self.first[g], size

    def test(self, u: np.ndarray, v: np.ndarray,
             ctx: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """(m,) bool: are global nodes ``u[i]`` and ``v[i]`` (same graph) adjacent."""
        u = np.asarray(u, dtype=np.int64)
        v = np.asarray(v, dtype=np.int64)
        if self.use_bitmap:
            idx = self._bit_index(u, v) if ctx is None else ctx[0] + u * ctx[1] + v
            if not self.packed:
                return self.bits[idx]
            return ((self.bits[idx >> 3] >> (idx & 7).astype(np.uint8)) & 1).astype(bool)
        key = u * self.n + v
        pos = np.searchsorted(self.keys, key)
        pos[pos == len(self.keys)] = 0
        return self.keys[pos] == key if len(self.keys) else np.zeros(len(u), dtype=bool)

    def degrees(self) -> np.ndarray:
        return np.diff(self.indptr)


def _extend(adj: Adjacency, sets: np.ndarray, pats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Children of the connected sets ``sets`` (R, j): (R', j+1) node rows and their patterns."""
    r_count, j = sets.shape
    child_tab = tables(j + 1)
    shift = n_pairs(j)
    out_sets, out_pats = [], []
    cols = [np.ascontiguousarray(sets[:, q]) for q in range(j)]
    for p in range(j):
        m = cols[p]
        start = adj.indptr[m]
        deg = adj.indptr[m + 1] - start
        rows = np.repeat(np.arange(r_count, dtype=np.int64), deg)
        w = adj.nbrs[ranges(start, deg)]
        if p:  # produced from the first member adjacent to w only: drop w adjacent to an earlier one
            ctx = adj.context(w)
            keep = np.ones(len(w), dtype=bool)
            for q in range(p):
                mq = cols[q][rows]
                keep &= (w != mq) & ~adj.test(w, mq, ctx)
            rows, w = rows[keep], w[keep]
        bits = np.full(len(w), np.int64(1) << p)
        if j > 1:
            ctx = adj.context(w)
            keep = np.ones(len(w), dtype=bool)
            for q in range(p + 1, j):
                mq = cols[q][rows]
                keep &= w != mq
                bits |= adj.test(w, mq, ctx).astype(np.int64) << q
            rows, w, bits = rows[keep], w[keep], bits[keep]
        pat = pats[rows] | (bits << shift)
        noncut = child_tab.noncut[pat]
        ok = (noncut >> j) & 1 == 1  # w must be a non-cut node of the child ...
        for q in range(j):  # ... and larger than every other non-cut node
            ok &= ~(((noncut >> q) & 1 == 1) & (cols[q][rows] > w))
        rows, w, pat = rows[ok], w[ok], pat[ok]
        out_sets.append(np.concatenate([sets[rows], w[:, None]], axis=1))
        out_pats.append(pat)
    return np.concatenate(out_sets), np.concatenate(out_pats)


def connected_sets(graphs: GraphBatch, k: int, adj: Adjacency | None = None,
                   min_size: int = 1) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """Every connected induced node set of size ``min_size..k`` of every graph of the batch.

    Yields ``(s, sets, patterns)`` slices, sizes in increasing order (several slices per size
    when the level is large): ``sets`` (R, s) int64 global node ids in insertion order,
    ``patterns`` (R,) int64 their adjacency patterns. The graph of a row is
    ``graphs.node_graph[sets[:, 0]]``. Rows of one graph appear in an order that depends only
    on that graph (and, for sizes past the first slice, on how the slices fell: sort them if a
    canonical order matters).
    """
    adj = adj or Adjacency(graphs)
    n = graphs.n_nodes
    level = np.arange(n, dtype=np.int64)[:, None]
    pats = np.zeros(n, dtype=np.int64)
    if min_size <= 1 and n:
        yield 1, level, pats
    deg = adj.degrees()
    for s in range(2, k + 1):
        # slice the parents so that each step's candidate pairs stay below ROWS_PER_STEP
        work = deg[level].sum(axis=1) if len(level) else np.zeros(0, dtype=np.int64)
        bounds = _slices(work, ROWS_PER_STEP)
        last = s == k
        children, child_pats = [], []
        for a, b in bounds:
            c, cp = _extend(adj, level[a:b], pats[a:b])
            if last:
                if s >= min_size and len(c):
                    yield s, c, cp
            else:
                children.append(c)
                child_pats.append(cp)
        if last:
            break
        level = np.concatenate(children) if children else np.zeros((0, s), dtype=np.int64)
        pats = np.concatenate(child_pats) if child_pats else np.zeros(0, dtype=np.int64)
        if s >= min_size and len(level):
            yield s, level, pats


def three_node_sets(graphs: GraphBatch, adj: Adjacency | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The connected 3-node sets of every graph, faster than :func:`connected_sets` for k = 3.

    Every pair of neighbours ``a < b`` of a centre ``c`` is a wedge ``(c, a, b)`` (pattern 3:
    ``c`` adjacent to both) when ``a`` and ``b`` are not adjacent, and a triangle (pattern 7)
    when they are, kept once, from its smallest node. Rows are in that order, so their patterns
    are the canonical ones. Yields ``(3, sets, patterns)`` slices like :func:`connected_sets`.
    """
    for c, a, b, closed in neighbour_pairs(graphs, adj):
        keep = ~closed | (c < a)
        rows = np.stack([c[keep], a[keep], b[keep]], axis=1)
        pats = np.where(closed[keep], 7, 3).astype(np.int64)
        if len(rows):
            yield 3, rows, pats


def neighbour_pairs(graphs: GraphBatch,
                    adj: Adjacency | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Every pair of neighbours ``a < b`` of every centre ``c``, in slices of about
    :data:`ROWS_PER_STEP` pairs: ``(c, a, b, closed)``, (m,) int64 global node ids and (m,) bool
    ``a ~ b``. Centres come in increasing order, so a triangle appears three times (once per
    centre) and a wedge once."""
    adj = adj or Adjacency(graphs)
    deg = adj.degrees()
    pairs = deg * (deg - 1) // 2
    for lo, hi in _slices(pairs, ROWS_PER_STEP):
        c0 = np.arange(lo, hi, dtype=np.int64)
        d = deg[lo:hi]
        arcs = ranges(adj.indptr[lo:hi], d)
        centre = np.repeat(c0, d)
        pos = arcs - adj.indptr[centre]
        later = deg[centre] - 1 - pos           # partners after each arc in the centre's list
        first = np.repeat(arcs, later)
        second = ranges(arcs + 1, later)
        a, b, c = adj.nbrs[first], adj.nbrs[second], np.repeat(centre, later)
        if len(c):
            yield c, a, b, adj.test(a, b, adj.context(c))


def _slices(work: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """Consecutive (a, b) ranges of rows whose summed ``work`` stays near ``budget``."""
    if len(work) == 0:
        return []
    csum = np.cumsum(work)
    cuts = np.searchsorted(csum, np.arange(budget, int(csum[-1]), budget), side="right")
    edges = np.unique(np.concatenate([[0], cuts, [len(work)]]))
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:]) if b > a]


# ------------------------------------------------------------------ sampling
def graph_hashes(graphs: GraphBatch) -> np.ndarray:
    """(G,) uint64 stable hash of each graph's structure (node count and edge list as stored).

    Depends only on the graph, never on its position in a batch; node labels are not
    included (the samples of the unlabelled graphlet kernel depend only on the structure).
    """
    e = graphs.edges.astype(np.int64)
    eg = graphs.edge_graph
    pos = np.arange(len(e), dtype=np.int64) - (graphs.edge_offsets[:-1] - graphs.edge_offsets[0])[eg]
    h_edges = mix(combine(pos, e[:, 0], e[:, 1])) if len(e) else np.zeros(0, dtype=np.uint64)
    from gramdist.kernels.hashing import segment_sum_u64

    sums = segment_sum_u64(h_edges, eg, len(graphs))
    return combine(graphs.nodes_per_graph.astype(np.int64), graphs.edges_per_graph.astype(np.int64), sums)


def sample_subsets(graphs: GraphBatch, k: int, m: int, seed: int,
                   which: np.ndarray | None = None,
                   hashes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``m`` uniform random ``k``-subsets of every graph with at least ``k`` nodes.

    Returns ``(graph_index, sets)``: (G'·m,) int64 and (G'·m, k) int64 global node ids (distinct
    within a row). Draw ``i`` of sample ``t`` of graph ``g`` is the top 53 bits of output
    ``t k + i`` of a splitmix64 stream seeded with ``combine(seed, hash(g))``, scaled to
    ``[0, n - i)``, made distinct from the earlier
    draws by skipping over them in increasing order: a uniform ordered sample without
    replacement, a pure function of (seed, graph content, t). ``which`` restricts the draws to
    some graphs (indices into the batch); ``hashes`` passes precomputed :func:`graph_hashes`.
    """
    n = graphs.nodes_per_graph.astype(np.int64)
    which = np.arange(len(graphs), dtype=np.int64) if which is None else np.asarray(which, dtype=np.int64)
    eligible = which[n[which] >= k]
    if len(eligible) == 0 or m == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, k), dtype=np.int64)
    hashes = graph_hashes(graphs) if hashes is None else hashes
    state = combine(np.uint64(seed & 0xFFFFFFFFFFFFFFFF), hashes[eligible])
    g = np.repeat(eligible, m)
    counter = np.tile(np.arange(m, dtype=np.uint64) * np.uint64(k), len(eligible))
    base = np.repeat(state, m)
    ng = n[g]
    chosen = np.zeros((len(g), k), dtype=np.int64)
    for i in range(k):
        with np.errstate(over="ignore"):  # splitmix64: mix(state + counter * golden)
            z = base + (counter + np.uint64(i)) * _GOLDEN
        u = (mix(z) >> np.uint64(11)).astype(np.float64)
        x = np.floor(u * (2.0 ** -53) * (ng - i)).astype(np.int64)
        x = np.minimum(x, ng - i - 1)
        if i:
            prev = np.sort(chosen[:, :i], axis=1)
            for j in range(i):  # skip the already chosen values, smallest first
                x += x >= prev[:, j]
        chosen[:, i] = x
    first = (graphs.node_offsets[:-1] - graphs.node_offsets[0])[g]
    return g, chosen + first[:, None]


def subset_patterns(adj: Adjacency, sets: np.ndarray) -> np.ndarray:
    """(R,) adjacency patterns of node rows ``sets`` (R, s)."""
    s = sets.shape[1]
    pat = np.zeros(len(sets), dtype=np.int64)
    ctx = adj.context(sets[:, 0]) if len(sets) else None
    for b in range(s):
        for a in range(b):
            pat |= adj.test(sets[:, a], sets[:, b], ctx).astype(np.int64) << (b * (b - 1) // 2 + a)
    return pat


# ================================================================== canonical forms
_ROWS = 1 << 16  # rows per vectorised step (rows x automorphisms x sequence length)


class EdgeLabels:
    """Label of the edge between two global nodes of a batch (both directions)."""

    def __init__(self, graphs: GraphBatch) -> None:
        e = graphs.global_edges
        lab = graphs.edge_labels
        n = max(graphs.n_nodes, 1)
        keys = np.concatenate([e[:, 0] * n + e[:, 1], e[:, 1] * n + e[:, 0]])
        labels = np.concatenate([lab, lab])
        order = np.argsort(keys, kind="stable")
        self.keys, self.labels, self.n = keys[order], labels[order], n
        self.values = np.unique(self.labels)
        self.ranks = np.searchsorted(self.values, self.labels)  # order-preserving small integers

    def _pos(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        key = np.asarray(u, dtype=np.int64) * self.n + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self.keys, key)
        pos = np.minimum(pos, len(self.keys) - 1)
        if len(self.keys) == 0 or not np.all(self.keys[pos] == key):
            raise ValueError("edge label asked for a pair of nodes that is not an edge")
        return pos

    def __call__(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        return self.labels[self._pos(u, v)]

    def rank(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """The rank of the label among the batch's edge labels (same order as the labels)."""
        return self.ranks[self._pos(u, v)]


def labelled_forms(sets: np.ndarray, patterns: np.ndarray, node_labels: np.ndarray,
                   edge_labels: EdgeLabels | None, salt: np.uint64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Canonical labelled forms of node sets.

    Parameters
    ----------
    sets : (R, s) int64 global node ids; patterns : (R,) their adjacency patterns.
    node_labels : (N,) int64 labels of the batch's nodes.
    edge_labels : edge-label lookup, or None to ignore edge labels.
    salt : uint64 mixed into the keys (a feature family tag).

    Returns
    -------
    keys : (R,) uint64 key of each set's labelled isomorphism class,
        ``combine(salt, s, canonical pattern, sequence...)``.
    order : (R, s) int64 the set's nodes in canonical order.
    n_aut : (R,) int64 number of label-preserving automorphisms.
    """
    r_count, s = sets.shape
    tab = tables(s)
    klass = tab.klass[patterns]
    ranks = _LabelRanks.of(node_labels, edge_labels)
    keys = np.zeros(r_count, dtype=np.uint64)
    order = np.zeros((r_count, s), dtype=np.int64)
    n_aut = np.zeros(r_count, dtype=np.int64)
    for c in np.unique(klass):
        rows_c = np.flatnonzero(klass == c)
        aut = tab.aut[c].astype(np.int64)  # (A, s)
        canon = int(tab.class_canon[c])
        edges = [(a, b) for b in range(s) for a in range(b) if (canon >> pair_index(a, b)) & 1]
        if s == 3 and canon == 3:  # the path on 3 nodes, the bulk of k = 3: closed form
            keys[rows_c], order[rows_c], n_aut[rows_c] = _paths3(sets[rows_c], patterns[rows_c], node_labels,
                                                                 edge_labels, salt)
            continue
        smallest = ranks.smallest_packed if ranks.packs(s, len(edges)) else ranks.smallest
        step = max(1, _ROWS // max(1, len(aut)))
        for lo in range(0, len(rows_c), step):
            rows = rows_c[lo:lo + step]
            sig = tab.sigma[patterns[rows]].astype(np.int64)       # (r, s)
            orders = sig[:, aut]                                   # (r, A, s): position i <- sig[aut[a, i]]
            nodes = np.take_along_axis(sets[rows][:, None, :], orders, axis=2)  # (r, A, s)
            cand, chosen, seq = smallest(nodes, edges)
            order[rows] = chosen
            n_aut[rows] = cand.sum(axis=1)
            keys[rows] = combine(salt, np.int64(s), np.int64(canon), *seq)
    return keys, order, n_aut


@dataclass
class _LabelRanks:
    """The labels of a batch as order-preserving ranks, to pack a whole label sequence into one
    int64 when it fits (``bits_n`` per node label, ``bits_e`` per edge label)."""

    node_labels: np.ndarray
    edge_labels: EdgeLabels | None
    node_rank: np.ndarray
    bits_n: int
    bits_e: int

    @classmethod
    def of(cls, node_labels: np.ndarray, edge_labels: EdgeLabels | None) -> _LabelRanks:
        node_values = np.unique(node_labels)
        bits_n = max(1, int(len(node_values) - 1).bit_length())
        bits_e = 0 if edge_labels is None else max(1, int(len(edge_labels.values) - 1).bit_length())
        return cls(node_labels, edge_labels, np.searchsorted(node_values, node_labels), bits_n, bits_e)

    def packs(self, s: int, n_edges: int) -> bool:
        return s * self.bits_n + n_edges * self.bits_e <= 62

    def smallest_packed(self, nodes: np.ndarray, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, list]:
        """``(cand, chosen, seq)`` of :meth:`smallest`, the sequence of ranks packed into one
        integer: its minimum is the smallest sequence (fixed-width fields, most significant first)."""
        s = nodes.shape[2]
        code = np.zeros(nodes.shape[:2], dtype=np.int64)
        for i in range(s):
            code = (code << self.bits_n) | self.node_rank[nodes[:, :, i]]
        if self.edge_labels is not None:
            for a, b in edges:
                code = (code << self.bits_e) | self.edge_labels.rank(nodes[:, :, a], nodes[:, :, b])
        cand = code == code.min(axis=1, keepdims=True)
        chosen = nodes[np.arange(len(nodes)), np.argmax(cand, axis=1)]
        seq = [self.node_labels[chosen[:, i]] for i in range(s)]
        if self.edge_labels is not None:
            seq += [self.edge_labels(chosen[:, a], chosen[:, b]) for a, b in edges]
        return cand, chosen, seq

    def smallest(self, nodes: np.ndarray, edges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, list]:
        """For node orders ``nodes`` (r, A, s) of r sets: ``cand`` (r, A), the orders whose label
        sequence (node labels, then the edges' labels) is the smallest; ``chosen`` (r, s), the first
        of them; ``seq``, that sequence column by column."""
        cols = [self.node_labels[nodes[:, :, i]] for i in range(nodes.shape[2])]
        if self.edge_labels is not None:
            cols += [self.edge_labels(nodes[:, :, a], nodes[:, :, b]) for a, b in edges]
        cand = np.ones(nodes.shape[:2], dtype=bool)
        big = np.iinfo(np.int64).max
        for col in cols:
            v = np.where(cand, col, big)
            cand &= v == v.min(axis=1, keepdims=True)
        pick, best = np.arange(len(nodes)), np.argmax(cand, axis=1)
        return cand, nodes[pick, best], [col[pick, best] for col in cols]


def _paths3(sets: np.ndarray, patterns: np.ndarray, node_labels: np.ndarray, edge_labels: EdgeLabels | None,
            salt: np.uint64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`labelled_forms` of paths on 3 nodes without expanding the automorphisms.

    In canonical order the centre is node 0 and the canonical edges are (0, 1), (0, 2), so the
    smallest sequence puts the ends in increasing (label, edge label) order; the two orders tie
    (two automorphisms) when the ends carry equal labels.
    """
    sig = tables(3).sigma[patterns].astype(np.int64)
    nodes = np.take_along_axis(sets, sig, axis=1)  # (centre, end, end)
    lc, lx, ly = (node_labels[nodes[:, i]] for i in range(3))
    if edge_labels is not None:
        ex, ey = edge_labels(nodes[:, 0], nodes[:, 1]), edge_labels(nodes[:, 0], nodes[:, 2])
    else:
        ex = ey = np.zeros(len(sets), dtype=np.int64)
    swap = (lx > ly) | ((lx == ly) & (ex > ey))
    tie = (lx == ly) & (ex == ey)
    first, second = np.where(swap, nodes[:, 2], nodes[:, 1]), np.where(swap, nodes[:, 1], nodes[:, 2])
    order = np.stack([nodes[:, 0], first, second], axis=1)
    l1, l2 = np.where(swap, ly, lx), np.where(swap, lx, ly)
    seq = [lc, l1, l2]
    if edge_labels is not None:
        seq += [np.where(swap, ey, ex), np.where(swap, ex, ey)]
    return combine(salt, np.int64(3), np.int64(3), *seq), order, (1 + tie).astype(np.int64)


__all__ = ["MAX_NODES", "PatternTables", "tables", "pair_index", "n_pairs", "adjacency_of", "Adjacency",
           "connected_sets", "three_node_sets", "neighbour_pairs", "sample_subsets", "subset_patterns", "graph_hashes",
           "BITMAP_LIMIT_BITS", "BYTEMAP_LIMIT", "ROWS_PER_STEP", "EdgeLabels", "labelled_forms"]
