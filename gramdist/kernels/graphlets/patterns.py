"""Lookup tables over the adjacency patterns of graphs on at most 6 nodes.

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
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cache

import numpy as np

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


__all__ = ["MAX_NODES", "PatternTables", "tables", "pair_index", "n_pairs", "adjacency_of"]
