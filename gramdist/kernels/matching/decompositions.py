"""Walk and tree decompositions of labelled graphs and their distances (Woźnica et al., §2–3).

Label vectors
-------------
Every vertex and edge carries a label vector: the one-hot code of its categorical label
(over the alphabet of the fit sample) followed by its numerical attributes, min–max scaled
to ``[0, 1]`` with the fit sample's ranges (values outside are clipped). ``dim(lab(x))`` is
the length of that vector (the one-hot part counts ``max(|alphabet|, 2)`` so that two
different labels, at squared distance 2, never exceed it). A categorical label unseen in
the fit sample is treated as a new letter of the alphabet (squared distance 2 from every
known label). Hence
``d_lab²(x, y) = 2·[cat(x) ≠ cat(y)] + Σ_j (attr_j(x) − attr_j(y))²`` and
``0 ≤ d_lab² ≤ dim``. A kind (vertex or edge) without labels or attributes has ``dim = 0``.

The unfolding: walks and trees from every node
----------------------------------------------
Both decompositions are read off one structure, the *unfolding* of the graph from every
node ``v``: level 1 holds ``[v]``; a prefix ending at a vertex ``u`` is extended by every
edge of ``u`` except the one it arrived by (no tottering); a prefix ending at an edge
``(u, w)`` is extended by ``w`` unless ``w`` is already on the prefix (no node is repeated).
Following the paper, the *length* of a walk counts its vertices and edges, so odd levels end
at vertices and even levels at edges (walks "may end on an edge").

* **Walks of length l** (the multiset ``W(G)^l``) are the level-``l`` prefixes, from every
  start node. A walk ending on an edge may use an edge that closes a ring (its far end is not
  part of the walk, so no node is repeated).
* **The tree of height h rooted at v** is the unfolding from ``v`` truncated at level ``h``:
  vertices have their outgoing edges as children (``δ(v)``), an edge has its far endpoint as
  its only child (``δ(e)``), and leaves are the elements at level ``h`` (edges when ``h`` is
  even), dead ends, and edges that close a ring. ``T(G)^h`` holds one tree per node.

Per-node cap
------------
The number of prefixes grows combinatorially with the level on dense graphs. With
``cap`` set, whenever one root has more than ``cap`` prefixes at a level, ``cap`` of them are
kept, chosen uniformly at random by a stable hash of (seed, level, the local ids of the
prefix's elements): a choice that depends only on the graph and the seed, never on which
other graphs are processed alongside. Deeper levels grow only from kept prefixes (trees stay
consistent). :attr:`Unfolding.capped_roots` counts, per graph, the roots where this happened.

Distances
---------
Walk distance (equal lengths, aligned element by element)::

    d_W²(W_i, W_j) = Σ_k d_lab²(lab(W_i[k]), lab(W_j[k])) / N,   N = Σ_k dim(lab(W[k]))

so ``0 ≤ d_W ≤ 1`` (``d_W = 0`` when ``N = 0``). Tree distance, recursively for two
elements ``x, y`` at the same level (``N' = dim(lab(x)) + 1``)::

    d_t²(x, y) = (d_lab²(x, y) + d_M²(δ(x), δ(y))) / N'   if δ(x) ≠ ∅ and δ(y) ≠ ∅
               = d_lab²(x, y) / N'                         if both are empty
               = (d_lab²(x, y) + 1) / N'                   if exactly one is empty

with ``d_M`` the matching distance of Ramon & Bruynooghe (``M = 1``) between the children,
normalised by ``max(|δ(x)|, |δ(y)|)`` so that it lies in ``[0, 1]`` and ``d_t ≤ 1`` at every
level; ``d_T(T_i, T_j) = d_t(root(T_i), root(T_j))``.

Types
-----
Distances depend only on label content, so elements are deduplicated into *types* before
any distance is computed: a walk type is its sequence of label codes; a tree-node type of
remaining depth ``r`` is ``(label, multiset of its children's types of depth r − 1)``. The
distance between two types is computed once however many walks or subtrees share them —
this is what makes the kernel affordable on molecules, whose labels are discrete. All the
arithmetic on a pair of types is element-wise (or exact integer sums), so a distance does not
depend on which other types are computed alongside.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gramdist.arrayops import group_offsets
from gramdist.graphs import GraphBatch
from gramdist.kernels.hashing import mix
from gramdist.kernels.matching.set_distances import padded_matching_costs

_STEP = np.uint64(0xD6E8FEB86659FD93)


def _chain(key: np.ndarray, value: np.ndarray) -> np.ndarray:
    """Hash step ``mix(key * K + mix(value))`` (wrapping uint64)."""
    with np.errstate(over="ignore"):
        return mix(key * _STEP + mix(value))


# ------------------------------------------------------------------------ labels
@dataclass
class LabelEncoding:
    """Label-vector layout learned on the fit sample (see the module docstring).

    ``node_alphabet``/``edge_alphabet`` are the sorted categorical labels seen (``None`` when
    the graphs have none); ``*_lo``/``*_hi`` the attribute ranges used for min–max scaling.
    """

    node_alphabet: np.ndarray | None = None
    edge_alphabet: np.ndarray | None = None
    node_lo: np.ndarray | None = None
    node_hi: np.ndarray | None = None
    edge_lo: np.ndarray | None = None
    edge_hi: np.ndarray | None = None

    @classmethod
    def fit(cls, graphs: GraphBatch) -> LabelEncoding:
        def rng(a: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
            if a is None or a.shape[1] == 0:
                return None, None
            if len(a) == 0:
                return np.zeros(a.shape[1]), np.ones(a.shape[1])
            return a.min(axis=0), a.max(axis=0)

        nlo, nhi = rng(graphs.node_attrs)
        elo, ehi = rng(graphs.edge_attrs)
        return cls(
            node_alphabet=None if graphs.node_labels is None else np.unique(graphs.node_labels),
            edge_alphabet=None if graphs.edge_labels is None else np.unique(graphs.edge_labels),
            node_lo=nlo, node_hi=nhi, edge_lo=elo, edge_hi=ehi,
        )

    # dimensions -------------------------------------------------------------
    @staticmethod
    def _cat_dim(alpha: np.ndarray | None) -> int:
        return 0 if alpha is None else max(len(alpha), 2)

    @property
    def node_attr_dim(self) -> int:
        return 0 if self.node_lo is None else len(self.node_lo)

    @property
    def edge_attr_dim(self) -> int:
        return 0 if self.edge_lo is None else len(self.edge_lo)

    @property
    def node_dim(self) -> int:
        """``dim(lab(v))`` of every vertex."""
        return self._cat_dim(self.node_alphabet) + self.node_attr_dim

    @property
    def edge_dim(self) -> int:
        """``dim(lab(e))`` of every edge."""
        return self._cat_dim(self.edge_alphabet) + self.edge_attr_dim

    # encoding ---------------------------------------------------------------
    @staticmethod
    def _codes(raw: np.ndarray | None, alpha: np.ndarray | None, n: int, what: str) -> np.ndarray:
        """Alphabet index of each label; unseen labels get distinct indices >= len(alpha)."""
        if alpha is None:
            return np.zeros(n, np.int64)
        if raw is None:
            raise ValueError(f"the fit sample had {what} labels but these graphs have none")
        pos = np.searchsorted(alpha, raw)
        pos_c = np.minimum(pos, max(len(alpha) - 1, 0))
        known = (pos < len(alpha)) & (alpha[pos_c] == raw) if len(alpha) else np.zeros(len(raw), bool)
        out = pos_c.astype(np.int64)
        if not known.all():
            _, inv = np.unique(raw[~known], return_inverse=True)
            out[~known] = len(alpha) + inv
        return out

    @staticmethod
    def _scale(a: np.ndarray | None, lo: np.ndarray | None, hi: np.ndarray | None, n: int) -> np.ndarray:
        if lo is None:
            return np.zeros((n, 0))
        if a is None or a.shape[1] != len(lo):
            raise ValueError(f"expected {len(lo)} attribute columns, got {None if a is None else a.shape[1]}")
        span = np.where(hi > lo, hi - lo, 1.0)
        return np.clip((a - lo) / span, 0.0, 1.0)

    def encode(self, graphs: GraphBatch) -> EncodedLabels:
        """Categorical codes and scaled attributes of every vertex and edge of ``graphs``."""
        return EncodedLabels(
            node_cat=self._codes(graphs.node_labels, self.node_alphabet, graphs.n_nodes, "node"),
            node_attr=self._scale(graphs.node_attrs, self.node_lo, self.node_hi, graphs.n_nodes),
            edge_cat=self._codes(graphs.edge_labels, self.edge_alphabet, graphs.n_edges, "edge"),
            edge_attr=self._scale(graphs.edge_attrs, self.edge_lo, self.edge_hi, graphs.n_edges),
        )

    # persistence -------------------------------------------------------------
    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = {}
        for name in ("node_alphabet", "edge_alphabet", "node_lo", "node_hi", "edge_lo", "edge_hi"):
            v = getattr(self, name)
            if v is not None:
                out[f"{prefix}{name}"] = np.asarray(v)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> LabelEncoding:
        kw = {}
        for name in ("node_alphabet", "edge_alphabet", "node_lo", "node_hi", "edge_lo", "edge_hi"):
            v = arrays.get(f"{prefix}{name}")
            kw[name] = None if v is None else np.asarray(v)
        return cls(**kw)


@dataclass
class EncodedLabels:
    """Label codes of one batch: ``*_cat`` (n,) int64 alphabet indices, ``*_attr`` (n, d) in [0, 1]."""

    node_cat: np.ndarray
    node_attr: np.ndarray
    edge_cat: np.ndarray
    edge_attr: np.ndarray


# --------------------------------------------------------------------- unfolding
@dataclass
class Level:
    """Prefixes of one level: element (global vertex id on odd levels, global edge id on even
    levels), the index of the parent prefix in the previous level (-1 on level 1) and the root."""

    elem: np.ndarray
    parent: np.ndarray
    root: np.ndarray


@dataclass
class Unfolding:
    """Levels 1..L of the unfolding of every node of a batch (see the module docstring)."""

    levels: list[Level]
    capped_roots: np.ndarray       # (G,) int64: roots of each graph whose prefixes were capped
    node_graph: np.ndarray         # (N,) graph index of each node

    def graph_of(self, k: int) -> np.ndarray:
        """Graph index of every prefix of level ``k`` (1-based)."""
        return self.node_graph[self.levels[k - 1].root]

    def trace(self, k: int) -> np.ndarray:
        """(F_k, k) element ids along every level-``k`` prefix, from the root."""
        F = len(self.levels[k - 1].elem)
        out = np.empty((F, k), dtype=np.int64)
        idx = np.arange(F)
        for j in range(k, 0, -1):
            lev = self.levels[j - 1]
            out[:, j - 1] = lev.elem[idx]
            idx = lev.parent[idx]
        return out


def unfold(graphs: GraphBatch, max_level: int, cap: int | None = None, seed: int = 0) -> Unfolding:
    """Unfold every node of ``graphs`` to ``max_level`` levels (vectorised over the batch).

    Parameters
    ----------
    graphs : GraphBatch
    max_level : int
        Number of levels (the longest walk length / tree height needed), >= 1.
    cap : int or None
        Per-node cap: at most ``cap`` prefixes per root and level (see the module docstring).
    seed : int
        Seed of the cap's random choice.

    Returns
    -------
    Unfolding
    """
    n = graphs.n_nodes
    indptr, nbrs, eids = graphs.arcs()
    node_graph = graphs.node_graph
    node_base = (graphs.node_offsets[:-1] - graphs.node_offsets[0])[node_graph]
    node_local = np.arange(n, dtype=np.int64) - node_base
    edge_graph = graphs.edge_graph
    edge_local = np.arange(graphs.n_edges, dtype=np.int64) - (graphs.edge_offsets[:-1] - graphs.edge_offsets[0])[edge_graph]

    root = np.arange(n, dtype=np.int64)
    lev = Level(elem=root.copy(), parent=np.full(n, -1, np.int64), root=root)
    levels = [lev]
    path = root[:, None].copy()           # vertices on each prefix
    prev_edge = np.full(n, -1, np.int64)  # edge each vertex prefix arrived by
    last_vertex = root.copy()
    target = np.zeros(0, np.int64)        # far endpoint of edge prefixes
    key = _chain(mix(np.uint64(int(seed) % 2**64)) + np.zeros(n, np.uint64), node_local)
    capped = np.zeros(n, bool)

    for k in range(2, max_level + 1):
        F = len(lev.elem)
        if k % 2 == 0:                    # vertex prefixes -> edge prefixes
            v = last_vertex
            deg = indptr[v + 1] - indptr[v]
            f = np.repeat(np.arange(F), deg)
            within = np.arange(len(f)) - np.repeat(np.cumsum(deg) - deg, deg)
            arc = indptr[v][f] + within
            e, u = eids[arc], nbrs[arc]
            keep = e != prev_edge[f]
            f, e, u = f[keep], e[keep], u[keep]
            new = Level(elem=e, parent=f, root=lev.root[f])
            new_key = _chain(key[f] ^ np.uint64(2 * k), edge_local[e])
            path, last_vertex, prev_edge, target = path[f], last_vertex[f], e, u
        else:                             # edge prefixes -> vertex prefixes
            on_path = (path == target[:, None]).any(axis=1)
            f = np.flatnonzero(~on_path)
            u = target[f]
            new = Level(elem=u, parent=f, root=lev.root[f])
            new_key = _chain(key[f] ^ np.uint64(2 * k + 1), node_local[u])
            path = np.concatenate([path[f], u[:, None]], axis=1)
            last_vertex, prev_edge, target = u, prev_edge[f], np.zeros(0, np.int64)
        if cap is not None and len(new.elem):
            over = np.bincount(new.root, minlength=n) > cap
            if over.any():
                sel = _capped_selection(new.root, new_key, over, cap)
                new = Level(elem=new.elem[sel], parent=new.parent[sel], root=new.root[sel])
                new_key = new_key[sel]
                path, last_vertex, prev_edge = path[sel], last_vertex[sel], prev_edge[sel]
                if len(target):
                    target = target[sel]
                capped |= over
        levels.append(new)
        lev, key = new, new_key

    capped_roots = np.bincount(node_graph[capped], minlength=graphs.n_graphs).astype(np.int64)
    return Unfolding(levels=levels, capped_roots=capped_roots, node_graph=node_graph)


def _capped_selection(roots: np.ndarray, keys: np.ndarray, over: np.ndarray, cap: int) -> np.ndarray:
    """Indices of the prefixes a level keeps: all of a root within its cap; of a root ``over``
    it, the ``cap`` with the smallest seeded keys (a random choice that does not depend on the
    batch the root's graph is in)."""
    cand = np.flatnonzero(over[roots])
    order = cand[np.lexsort((keys[cand], roots[cand]))]
    r_sorted = roots[order]
    first = np.searchsorted(r_sorted, r_sorted, side="left")
    keep = np.ones(len(roots), bool)
    keep[order[(np.arange(len(order)) - first) >= cap]] = False
    return np.flatnonzero(keep)


# --------------------------------------------------------------------------- walks
@dataclass
class Multisets:
    """Multisets of types per graph: graph ``g`` holds ``types[indptr[g]:indptr[g+1]]``
    (distinct, increasing) with multiplicities ``counts[...]``."""

    indptr: np.ndarray
    types: np.ndarray
    counts: np.ndarray

    def of(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        sl = slice(self.indptr[g], self.indptr[g + 1])
        return self.types[sl], self.counts[sl]

    @classmethod
    def build(cls, graph: np.ndarray, inv: np.ndarray, n_types: int, n_graphs: int) -> Multisets:
        key = graph.astype(np.int64) * max(n_types, 1) + inv
        uk, cnt = np.unique(key, return_counts=True)
        g = uk // max(n_types, 1)
        indptr = group_offsets(g, n_graphs)
        return cls(indptr=indptr, types=uk - g * max(n_types, 1), counts=cnt.astype(np.int64))


@dataclass
class WalkTypes:
    """Distinct walks of one length ``l`` and the multiset of each graph.

    ``cat`` (T, l) int64: label code at each position (vertex codes at positions 0, 2, …;
    edge codes at 1, 3, …); ``attr`` (T, A) float64: the scaled attributes of the positions
    concatenated (vertex attributes of position 0, edge attributes of position 1, …).
    """

    length: int
    cat: np.ndarray
    attr: np.ndarray
    sets: Multisets


def _rows_unique(cols: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of the int64 matrix whose columns are ``cols`` (exact, by lexicographic
    sort). Returns (index of one row per unique row, inverse), unique rows in lexicographic
    order of the columns."""
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not cols:
        return np.zeros(1, np.int64), np.zeros(n, np.int64)
    cols = [np.asarray(c, dtype=np.int64) for c in cols]
    order = np.lexsort(cols[::-1])
    new = np.zeros(n, bool)
    new[0] = True
    for c in cols:
        cs = c[order]
        new[1:] |= cs[1:] != cs[:-1]
    group = np.cumsum(new) - 1
    inv = np.empty(n, np.int64)
    inv[order] = group
    return order[new], inv


def walk_types(unf: Unfolding, enc: EncodedLabels, length: int, n_graphs: int) -> WalkTypes:
    """Deduplicated walks of ``length`` over the batch with each graph's multiset."""
    seq = unf.trace(length)
    F = len(seq)
    cat = np.empty((F, length), np.int64)
    attrs = []
    for j in range(length):
        if j % 2 == 0:
            cat[:, j] = enc.node_cat[seq[:, j]]
            attrs.append(enc.node_attr[seq[:, j]])
        else:
            cat[:, j] = enc.edge_cat[seq[:, j]]
            attrs.append(enc.edge_attr[seq[:, j]])
    attr = np.concatenate(attrs, axis=1) if attrs else np.zeros((F, 0))
    cols = [cat[:, j] for j in range(length)] + [attr[:, j].view(np.int64) for j in range(attr.shape[1])]
    first, inv = _rows_unique(cols, F)
    sets = Multisets.build(unf.graph_of(length), inv, len(first), n_graphs)
    return WalkTypes(length=length, cat=cat[first], attr=attr[first], sets=sets)


def walk_distances(left: WalkTypes, right_cat: np.ndarray, right_attr: np.ndarray,
                   le: LabelEncoding) -> np.ndarray:
    """(T_left, T_right) walk distances ``d_W`` between two sets of walk types of one length.

    The categorical part counts mismatching positions through a 0/1 product (exact integer
    sums, whatever the shapes); the attribute part is summed column by column.
    """
    length = left.length
    nl, nr = len(left.cat), len(right_cat)
    n_v = (length + 1) // 2
    n_e = length // 2
    N = n_v * le.node_dim + n_e * le.edge_dim
    if N == 0 or nl == 0 or nr == 0:
        return np.zeros((nl, nr))
    d2 = np.zeros((nl, nr))
    for j in range(length):
        alpha = le.node_alphabet if j % 2 == 0 else le.edge_alphabet
        if alpha is None:
            continue
        a = left.cat[:, j]
        b = right_cat[:, j]
        d2 += 2.0 * (a[:, None] != b[None, :])
    for j in range(left.attr.shape[1]):
        diff = left.attr[:, j][:, None] - right_attr[:, j][None, :]
        d2 += diff * diff
    return np.sqrt(np.minimum(d2 / N, 1.0))


# --------------------------------------------------------------------------- trees
@dataclass
class TypeTable:
    """Tree-node types of one kind and remaining depth ``r``.

    ``cat`` (n,) int64 label codes; ``attr`` (n, d) scaled attributes; ``children`` (n, K)
    int64 types of depth ``r − 1`` of the other kind, sorted, padded with -1 (K = 0 at r = 1).
    """

    cat: np.ndarray
    attr: np.ndarray
    children: np.ndarray

    def __len__(self) -> int:
        return len(self.cat)


@dataclass
class TreeTypes:
    """All tree-node types needed for the heights ``heights`` and the root multisets.

    ``tables[(kind, r)]`` with kind ``"v"`` (vertex) or ``"e"`` (edge); ``roots[h]`` is the
    multiset of root types (vertex types of depth ``h``) of each graph.
    """

    heights: tuple[int, ...]
    tables: dict[tuple[str, int], TypeTable] = field(default_factory=dict)
    roots: dict[int, Multisets] = field(default_factory=dict)
    #: type of the tree of height h rooted at each node of the batch (not persisted)
    root_type: dict[int, np.ndarray] = field(default_factory=dict)


def _kind(level: int) -> str:
    return "v" if level % 2 == 1 else "e"


def needed_depths(heights: tuple[int, ...]) -> dict[tuple[str, int], list[int]]:
    """For each (kind, depth) the unfolding levels whose nodes need a type of that depth."""
    out: dict[tuple[str, int], list[int]] = {}
    for h in sorted(set(heights)):
        for k in range(1, h + 1):
            out.setdefault((_kind(k), h - k + 1), [])
            if k not in out[(_kind(k), h - k + 1)]:
                out[(_kind(k), h - k + 1)].append(k)
    return out


def tree_types(unf: Unfolding, enc: EncodedLabels, heights: tuple[int, ...], n_graphs: int) -> TreeTypes:
    """Tree-node types of the batch for the trees of ``heights`` (see the module docstring)."""
    heights = tuple(sorted(set(int(h) for h in heights)))
    out = TreeTypes(heights=heights)
    if not heights:
        return out
    need = needed_depths(heights)
    kids = _children(unf, max(heights))
    # type ids: tid[(k, r)] for every prefix of level k
    tid: dict[tuple[int, int], np.ndarray] = {}
    for r in range(1, max(r for _, r in need) + 1):
        for kind in ("v", "e"):
            levels = need.get((kind, r))
            if not levels:
                continue
            table, inv = _type_table(unf, enc, (kind, r, levels), kids, tid)
            out.tables[(kind, r)] = table
            off = 0
            for k in levels:
                size = len(unf.levels[k - 1].elem)
                tid[(k, r)] = inv[off:off + size]
                off += size
    for h in heights:
        out.roots[h] = Multisets.build(unf.graph_of(1), tid[(1, h)], len(out.tables[("v", h)]), n_graphs)
        out.root_type[h] = tid[(1, h)]
    return out


def _children(unf: Unfolding, depth: int) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Children of each prefix at level k (k < ``depth``): ``(ptr, order)``, a CSR over the
    prefixes of level k + 1 (``order`` sorts them by parent, stably)."""
    kids = {}
    for k in range(1, depth):
        par = unf.levels[k].parent
        kids[k] = (group_offsets(par, len(unf.levels[k - 1].elem)), np.argsort(par, kind="stable"))
    return kids


def _type_table(unf: Unfolding, enc: EncodedLabels, what: tuple[str, int, list[int]],
                kids: dict[int, tuple[np.ndarray, np.ndarray]],
                tid: dict[tuple[int, int], np.ndarray]) -> tuple[TypeTable, np.ndarray]:
    """The distinct types of depth ``r`` of the vertex (``kind`` "v") or edge ("e") prefixes of
    ``levels`` (``what`` = (kind, r, levels)): own label and attributes, then the sorted types of
    depth r - 1 of their children (from ``tid``). Returns the table and each prefix's type id,
    the levels' prefixes one after the other."""
    kind, r, levels = what
    cat_parts, attr_parts, child_parts, sizes = [], [], [], []
    K = 0
    for k in levels:
        elem = unf.levels[k - 1].elem
        cat_parts.append((enc.node_cat if kind == "v" else enc.edge_cat)[elem])
        attr_parts.append((enc.node_attr if kind == "v" else enc.edge_attr)[elem])
        sizes.append(len(elem))
        if r > 1:
            ptr, order = kids[k]
            cnt = np.diff(ptr)
            K = max(K, int(cnt.max()) if len(cnt) else 0)
            child_parts.append((ptr, tid[(k + 1, r - 1)][order], cnt))
    cat, attr = np.concatenate(cat_parts), np.concatenate(attr_parts)
    total = len(cat)
    ch = np.full((total, K), -1, np.int64)
    if r > 1 and K:
        off = 0
        for (ptr, ctypes, cnt), size in zip(child_parts, sizes):
            # sorted children per parent: sort by (parent, type)
            parent = np.repeat(np.arange(size), cnt)
            o = np.lexsort((ctypes, parent))
            rank = np.arange(len(o)) - ptr[:-1][parent[o]]
            ch[off + parent[o], rank] = ctypes[o]
            off += size
    cols = [cat] + [attr[:, j].view(np.int64) for j in range(attr.shape[1])] + [ch[:, j] for j in range(K)]
    first, inv = _rows_unique(cols, total)
    return TypeTable(cat=cat[first], attr=attr[first], children=ch[first]), inv


def _label_d2(a: TypeTable, b: TypeTable, has_cat: bool) -> np.ndarray:
    d2 = np.zeros((len(a), len(b)))
    if has_cat:
        d2 += 2.0 * (a.cat[:, None] != b.cat[None, :])
    for j in range(a.attr.shape[1]):
        diff = a.attr[:, j][:, None] - b.attr[:, j][None, :]
        d2 += diff * diff
    return d2


def tree_distances(left: TreeTypes, right: TreeTypes, le: LabelEncoding) -> dict[tuple[str, int], np.ndarray]:
    """``d_t`` between all left and right types of every needed (kind, depth).

    Returns ``{(kind, r): (n_left, n_right) float64}``; ``("v", h)`` holds the tree distances
    ``d_T`` between root types of height ``h``.
    """
    need = needed_depths(left.heights)
    out: dict[tuple[str, int], np.ndarray] = {}
    max_r = max((r for _, r in need), default=0)
    for r in range(1, max_r + 1):
        for kind in ("v", "e"):
            if (kind, r) not in need:
                continue
            A, B = left.tables[(kind, r)], right.tables[(kind, r)]
            dim = le.node_dim if kind == "v" else le.edge_dim
            has_cat = (le.node_alphabet if kind == "v" else le.edge_alphabet) is not None
            d2 = _label_d2(A, B, has_cat)
            if r > 1:
                child = out[("e" if kind == "v" else "v", r - 1)]
                na = (A.children >= 0).sum(axis=1)
                nb = (B.children >= 0).sum(axis=1)
                both = (na[:, None] > 0) & (nb[None, :] > 0)
                S = ((na[:, None] > 0) != (nb[None, :] > 0)).astype(np.float64)
                if both.any():
                    raw = padded_matching_costs(child, A.children, B.children)
                    dm = raw / np.maximum(np.maximum(na[:, None], nb[None, :]), 1)
                    S = np.where(both, dm * dm, S)
                d2 += S
            out[(kind, r)] = np.sqrt(np.minimum(d2 / (dim + 1), 1.0))
    return out


__all__ = [
    "LabelEncoding", "EncodedLabels", "Level", "Unfolding", "unfold", "Multisets", "WalkTypes",
    "walk_types", "walk_distances", "TypeTable", "TreeTypes", "tree_types", "tree_distances",
    "needed_depths",
]
