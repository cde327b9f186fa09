"""Exact counts of the disconnected graphlets from the counts of connected ones.

The paper's graphlet set for size ``k`` holds every graph on ``k`` nodes (4, 11 and 34 classes
for k = 3, 4, 5), disconnected ones included; enumerating all ``C(n, k)`` node sets is out of
reach for large graphs (``C(5748, 5) ~ 5e16``). The paper counts the disconnected graphlets of
bounded-degree graphs from connected counts with hand-derived identities per class; this
module derives such identities mechanically, for any class of size ``k <= 5``, by
inclusion–exclusion:

An induced copy of a disconnected class ``H`` with components ``C_1..C_r`` is a tuple of
induced copies ``T_i`` of ``C_i`` that are pairwise *separated* (disjoint and non-adjacent),
counted once per ordering of equal components. With ``O(T)`` the graph on ``1..r`` joining
``i, j`` when ``T_i, T_j`` overlap or are adjacent, ``[O edgeless] = sum_{F ⊆ E(O)} (-1)^|F|``;
grouping the pairs ``F`` by their connected components (blocks ``B`` of a set partition
``pi`` of ``1..r``) gives

    #separated tuples = sum_pi prod_{B in pi} Phi(B),
    Phi(B) = sum_J psi(J; (C_i)_{i in B}) N(J)        (Phi({i}) = N(C_i)),

where ``J`` runs over the *connected* classes of at most ``sum_{i in B} |C_i|`` nodes, ``N(J)``
is the number of connected induced copies of ``J`` in the graph (what the enumerator counts),
and ``psi(J; ...) = sum over covers of V(J) by induced copies T_i of C_i of
sum_{F connected spanning subgraph of O(T)} (-1)^|F|`` is a constant computed once by brute
force on ``J``'s canonical pattern (the union of a block's sets is connected, so it is one
connected induced subgraph ``J`` of the graph). Evaluated with Python integers, the counts are
exact. The tests check them against enumerating all ``k``-sets of small random graphs.
"""

from __future__ import annotations

import itertools
from functools import cache

import numpy as np

from gramdist.kernels.subgraphs import adjacency_of, pair_index, tables


def _components(adj: np.ndarray) -> list[list[int]]:
    s = len(adj)
    seen, comps = set(), []
    for v in range(s):
        if v in seen:
            continue
        stack, comp = [v], []
        seen.add(v)
        while stack:
            u = stack.pop()
            comp.append(u)
            for w in np.flatnonzero(adj[u]):
                if int(w) not in seen:
                    seen.add(int(w))
                    stack.append(int(w))
        comps.append(sorted(comp))
    return comps


def _pattern(adj: np.ndarray, nodes: list[int]) -> int:
    p = 0
    for b in range(len(nodes)):
        for a in range(b):
            if adj[nodes[a], nodes[b]]:
                p |= 1 << pair_index(a, b)
    return p


def _class_of(adj: np.ndarray, nodes: list[int]) -> tuple[int, int]:
    """(size, class index) of the subgraph of ``adj`` induced by ``nodes``."""
    s = len(nodes)
    return s, int(tables(s).klass[_pattern(adj, nodes)])


@cache
def _phi(n: int, edges: frozenset) -> int:
    """sum over the connected spanning edge subsets F of the graph ``(range(n), edges)`` of (-1)^|F|."""
    edges = sorted(edges)
    total = 0
    for m in range(len(edges) + 1):
        for sub in itertools.combinations(edges, m):
            adj = np.zeros((n, n), dtype=bool)
            for a, b in sub:
                adj[a, b] = adj[b, a] = True
            if len(_components(adj)) == 1:
                total += (-1) ** m
    return total


@cache
def _psi(j_size: int, j_class: int, block: tuple) -> int:
    """psi(J; C_B): ``block`` a tuple of (size, class) of connected classes."""
    tab = tables(j_size)
    adj = adjacency_of(int(tab.class_canon[j_class]), j_size)
    copies = []
    for size, klass in block:
        copies.append([frozenset(c) for c in itertools.combinations(range(j_size), size)
                       if _class_of(adj, list(c)) == (size, klass)])
    full = frozenset(range(j_size))
    total = 0
    for tup in itertools.product(*copies):
        if frozenset().union(*tup) != full:
            continue
        r = len(tup)
        o_edges = set()
        for i in range(r):
            for k in range(i + 1, r):
                a, b = tup[i], tup[k]
                if a & b or any(adj[u, v] for u in a for v in b):
                    o_edges.add((i, k))
        total += _phi(r, frozenset(o_edges))
    return total


def _set_partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for part in _set_partitions(rest):
        out.append([[first], *part])
        for i in range(len(part)):
            out.append(part[:i] + [[first, *part[i]]] + part[i + 1:])
    return out


@cache
def disconnected_formulas(k: int) -> tuple:
    """For each disconnected class of size ``k``: (class index, divisor, terms).

    ``terms`` is a list of partitions, each a list of blocks, each block a dict
    ``{(size, class): coefficient}`` over connected classes; the count of the class is
    ``sum_terms prod_blocks (sum coefficient * N(size, class)) / divisor``.
    """
    tab = tables(k)
    out = []
    for c in range(tab.n_classes):
        if tab.class_connected[c]:
            continue
        adj = adjacency_of(int(tab.class_canon[c]), k)
        comps = [_class_of(adj, comp) for comp in _components(adj)]
        divisor = 1
        for key in set(comps):
            divisor *= int(np.prod(np.arange(1, comps.count(key) + 1)))
        terms = []
        for part in _set_partitions(list(range(len(comps)))):
            blocks = []
            for block in part:
                members = tuple(comps[i] for i in block)
                if len(members) == 1:
                    blocks.append({members[0]: 1})
                    continue
                total = sum(size for size, _ in members)
                coef = {}
                for js in range(max(size for size, _ in members), total + 1):
                    jt = tables(js)
                    for jc in range(jt.n_classes):
                        if not jt.class_connected[jc]:
                            continue
                        v = _psi(js, jc, members)
                        if v:
                            coef[(js, jc)] = v
                blocks.append(coef)
            terms.append(blocks)
        out.append((c, divisor, terms))
    return tuple(out)


def all_counts(connected: dict[int, np.ndarray], k: int) -> np.ndarray:
    """(G, n_classes(k)) exact counts of every class of size ``k`` (as Python-int objects).

    ``connected[s]`` is the (G, n_classes(s)) integer array of connected-class counts of size
    ``s`` for ``s = 1..k`` (disconnected columns ignored).
    """
    tab = tables(k)
    g = len(connected[1])
    out = np.zeros((g, tab.n_classes), dtype=object)
    out[:, : tab.n_connected] = connected[k][:, : tab.n_connected].astype(object)
    cols = {(s, c): connected[s][:, c].astype(object) for s in connected
            for c in range(tables(s).n_connected)}
    for c, divisor, terms in disconnected_formulas(k):
        acc = np.zeros(g, dtype=object)
        for blocks in terms:
            prod = np.ones(g, dtype=object)
            for coef in blocks:
                val = np.zeros(g, dtype=object)
                for key, w in coef.items():
                    val = val + w * cols[key]
                prod = prod * val
            acc = acc + prod
        out[:, c] = acc // divisor
    return out


__all__ = ["disconnected_formulas", "all_counts"]
