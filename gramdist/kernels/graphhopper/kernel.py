"""GraphHopper kernel (Feragen, Kasenburg, Petersen, de Bruijne & Borgwardt, NIPS 2013).

Definition
----------
With ``P(G)`` the set of all shortest paths of ``G`` (every shortest path between every
ordered pair of nodes, the one-node paths included) and ``|π|`` the number of edges of a path,

    k(G, G') = Σ_{π ∈ P(G)} Σ_{π' ∈ P(G')} k_p(π, π'),
    k_p(π, π') = Σ_{j=0..|π|} k_n(π(j), π'(j))  if |π| = |π'|, else 0.

The paper's efficient form (its Eq. 3): for each node ``v`` let ``M_v`` be the δ × δ matrix whose
entry ``[a, b]`` counts the shortest paths of length ``b`` (edges) on which ``v`` is the node at
position ``a`` (0-based from the path's start); then

    k(G, G') = Σ_{v ∈ V} Σ_{v' ∈ V'} k_n(v, v') · <M_v, M_v'>.

Vertex kernels ``k_n`` (the paper's): the Dirac kernel on discrete labels (``with_labels``),
a ``linear`` ``<x, x'>`` or ``gaussian`` ``exp(-gamma·‖x - x'‖²)`` kernel on the attribute
vectors (``attributes``), and their product when both are used.

How it is computed
------------------
* ``M``: for each source ``j``, BFS distances (SciPy, compiled), the number of shortest paths
  ``σ_j(v)`` from ``j`` (forward over the BFS levels of the shortest-path DAG) and
  ``des_j(v, l)``, the number of DAG paths of ``l`` edges going down from ``v`` (backward over
  the levels); then ``M_v[a, a + l] += σ_j(v) · des_j(v, l)`` with ``a = d(j, v)``. This is the
  occurrence/descendant recursion of the authors' code (GraKeL's ``od_vectors_dag``),
  vectorised over flat blocks of (source, node) pairs: many small graphs at once (grouped by
  diameter, so the descendant rows, as wide as the block's diameter + 1, waste little), a
  large graph by blocks of sources. The DAG arcs need no lookup (the pair of the same source
  at a neighbour ``w`` of ``v`` is ``p + (w - v)``), and the sum over sources is one sparse
  product. O(n·m·δ) per graph (δ its diameter + 1), memory bounded by ``BLOCK_ENTRIES``.
* ``with_labels`` and/or ``attributes: linear`` (no Gaussian): the kernel has a finite feature
  map, ``F = Σ_v M_v ⊗ e_{label(v)} ⊗ x_v`` (the missing factors dropped), so ``embed``
  returns explicit sparse features keyed by hashes of ``(a, b, label, i)`` and ``pairwise`` is
  their dot product (integer counts with labels only: exact).
* ``attributes: gaussian``: ``embed`` keeps each node's ``M_v`` (sparse), its attributes and
  label; ``pairwise`` computes ``W = M M'^T`` (sparse product, exact integers) and
  ``Σ K ∘ W`` for one graph against all graphs of the tile's columns, every sum in a fixed
  order (bitwise independent of the tile; ``K(a, b)`` and ``K(b, a)`` may differ in the last bit).
  O(n·n'·(p + nnz(M_v))) per pair.

Choices the paper leaves open, and ours; relation to GraKeL
-----------------------------------------------------------
* Paths are directed (a path and its reverse are two elements of ``P``) and the one-node
  paths ``(v)`` count (``M_v[0, 0] = 1``): this is what the authors' code and GraKeL compute.
* Graphs are unweighted (hop lengths); edge labels and attributes are unused; nodes in
  different components are not joined by any path.
* Missing labels with ``with_labels``: all nodes label 0 (the Dirac factor is then 1).
  ``attributes`` other than ``none`` on graphs without attributes: ``JobError``.
* GraKeL's ``GraphHopper`` takes only attribute vectors (no discrete labels, no products);
  its ``gaussian`` is ``exp(-mu·‖x - x'‖²)`` with ``mu`` = our ``gamma`` (default 1), its
  ``linear`` our ``linear``. With ``with_labels: false`` our values equal GraKeL's
  (``tests/test_graphhopper.py``, to rounding); the Dirac kernel on labels equals GraKeL's
  ``linear`` on one-hot label vectors, which the tests use to check ``with_labels``. GraKeL
  builds ``M`` for a fixed ``δ`` from the fitted graphs and truncates to the smaller ``δ`` of
  the two graphs in ``transform``; the entries it drops are zero, so nothing differs.
  GraKeL's third kernel, ``bridge`` (``max(0, 1 - ‖x - x'‖/4)``), is not one of the paper's
  vertex kernels and is not offered.
* ``M`` counts can exceed 2^53 on large, highly symmetric graphs (the number of shortest
  paths grows exponentially with their length in grid-like graphs): they are float64 then,
  exact to rounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from gramdist.arrayops import group_offsets, ranges
from gramdist.graphs import GraphBatch
from gramdist.kernels.allpairs import distance_rows, local_adjacency, local_codes
from gramdist.kernels.base import (
    DerivedCache,
    GraphKernel,
    KernelState,
    check_param,
    check_real,
    node_attributes,
)
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.sparse import SparseFeatures, dot, sq_norms

TAG_GH = tag("graphhopper")

#: entries of the per-block descendant array (sources × nodes × (δ+1)); bounds the memory
BLOCK_ENTRIES = 1 << 22
#: small graphs are solved together, as one block-diagonal graph of at most this many nodes
GROUP_NODES = 128


def tri(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Index of the upper-triangular cell ``(a, b)``, ``a <= b``: ``b(b+1)/2 + a`` (size-free)."""
    return b * (b + 1) // 2 + a


def _flat_counts(level: np.ndarray, node: np.ndarray, indptr: np.ndarray,
                 nbrs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Path-position counts of a block of (source, node) pairs laid out row by row per graph.

    ``level`` (P,) int64: hop distance of pair ``p`` from its source (0 for the source itself,
    -1 if unreachable); ``node`` (P,) global node id of the pair's node. Pairs of one source
    are consecutive and in node order, so the pair of the same source at node ``w`` is
    ``p + (w - node[p])`` — the shortest-path DAG arcs need no lookup table. ``indptr`` /
    ``nbrs``: the batch's arcs (global node ids). The pairs are renumbered by level, so the
    arcs between two consecutive levels form one sparse matrix and each recursion step is a
    sparse product on a contiguous range of rows.

    Returns ``(v, t, w)``: for each node ``v`` and cell ``t = tri(a, b)`` the sum over the
    block's sources ``j`` of ``σ_j(v)·des_j(v, b - a)``, ``a = d(j, v)``.
    """
    reach = np.flatnonzero(level >= 0)
    if len(reach) == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0)
    # compact ids of the reachable pairs, ordered by level (stable): each level is a range
    by_level = reach[np.argsort(level[reach], kind="stable")]
    lev, vv = level[by_level], node[by_level]
    bound = np.searchsorted(lev, np.arange(int(lev[-1]) + 2))  # level k holds ids bound[k]:bound[k+1]
    mats = _level_arcs((by_level, vv, lev), len(level), bound, (indptr, nbrs))
    sigma, des = _paths_through(mats, bound)
    # Σ over the sources of σ_j(v)·des_j(v, ·), grouped by (v, a = level): one sparse product
    # (rows: the distinct (node, level) of the block, columns: its pairs) with the dense des
    width = len(bound) - 1
    v0 = int(vv.min())
    key = (vv - v0) * width + lev
    present = np.zeros((int(vv.max()) - v0 + 1) * width, dtype=bool)
    present[key] = True
    uniq = np.flatnonzero(present)  # distinct (node, level), sorted
    rank = np.cumsum(present) - 1
    s_mat = sp.csr_matrix((sigma, (rank[key], np.arange(len(by_level)))), shape=(len(uniq), len(by_level)))
    r = np.asarray(s_mat @ des)  # (distinct (v, a), width): column l = paths continuing l edges
    ri, length = np.nonzero(r)
    a = uniq[ri] % width
    v = uniq[ri] // width + v0
    return v, tri(a, a + length), r[ri, length]


def _level_arcs(pairs: tuple[np.ndarray, np.ndarray, np.ndarray], n_pairs: int, bound: np.ndarray,
                arcs: tuple[np.ndarray, np.ndarray]) -> list[sp.csr_matrix]:
    """The shortest-path DAG of a block, one sparse matrix per level: ``A_k[p, c] = 1`` for the
    arcs (j, v) -> (j, w) from level k to level k + 1 (w a neighbour of v one level further from
    j), rows and columns the compact ids of :func:`_flat_counts` (``pairs``: the pair, node and
    level of each compact id; ``bound``: the levels' id ranges)."""
    by_level, vv, lev = pairs
    indptr, nbrs = arcs
    depth = len(bound) - 2
    compact = np.full(n_pairs, -1, dtype=np.int64)
    compact[by_level] = np.arange(len(by_level))
    # parents come out sorted (by id, so by level), children grouped under their parent
    deg = indptr[vv + 1] - indptr[vv]
    parent = np.repeat(np.arange(len(by_level)), deg)
    nb = nbrs[ranges(indptr[vv], deg)]
    child = compact[by_level[parent] + (nb - vv[parent])]
    ok = child >= 0
    parent, child = parent[ok], child[ok]
    ok = lev[child] == lev[parent] + 1
    parent, child = parent[ok], child[ok]
    arc_bound = np.searchsorted(parent, bound)  # arcs whose parent is at level k
    mats = []
    for k in range(depth):
        s, e = arc_bound[k], arc_bound[k + 1]
        p0, c0 = bound[k], bound[k + 1]
        ptr = group_offsets(parent[s:e] - p0, c0 - p0)
        mats.append(sp.csr_matrix((np.ones(e - s), child[s:e] - c0, ptr), shape=(c0 - p0, bound[k + 2] - c0)))
    return mats


def _paths_through(mats: list[sp.csr_matrix], bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sigma, des)`` over the compact ids: σ_j(v), the shortest paths from the source j to v
    (forward over the levels), and des_j(v, l), the DAG paths of l edges down from v (backward),
    shape (pairs, depth + 1)."""
    depth = len(mats)
    n_r = int(bound[-1])
    sigma = np.zeros(n_r)
    sigma[: bound[1]] = 1.0
    for k in range(depth):
        sigma[bound[k + 1] : bound[k + 2]] = mats[k].T @ sigma[bound[k] : bound[k + 1]]
    des = np.zeros((n_r, depth + 1))
    des[:, 0] = 1.0
    for k in range(depth - 1, -1, -1):
        h = depth - k  # children sit at level k + 1: des(child, l) = 0 for l >= depth - k
        des[bound[k] : bound[k + 1], 1 : h + 1] += mats[k] @ des[bound[k + 1] : bound[k + 2], :h]
    return sigma, des


def _small_graph_levels(graphs: GraphBatch, first: int, last: int, indptr: np.ndarray,
                        nbrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(level, node) of all (source, node) pairs of graphs ``first..last-1``, graph after graph,
    row by row; BFS on groups of at most ``GROUP_NODES`` nodes at a time."""
    sizes = graphs.nodes_per_graph
    starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
    levels, nodes = [], []
    g = first
    while g < last:
        stop, total = g, 0
        while stop < last and total + sizes[stop] <= GROUP_NODES:
            total += int(sizes[stop])
            stop += 1
        if stop == g:  # one graph larger than a group
            stop, total = g + 1, int(sizes[g])
        s = int(starts[g])
        if total:
            ip = indptr[s : s + total + 1] - indptr[s]
            adj = sp.csr_matrix((np.ones(int(ip[-1])), nbrs[indptr[s] : indptr[s + total]] - s, ip),
                                shape=(total, total))
            dist = shortest_path(adj, method="D", directed=True, unweighted=True)
            gid = graphs.node_graph[s : s + total]
            same = gid[:, None] == gid[None, :]
            d = dist[same]  # each graph's n × n block, row by row, graph after graph
            levels.append(np.where(np.isfinite(d), d, -1).astype(np.int64))
            cols = np.broadcast_to(np.arange(s, s + total), (total, total))
            nodes.append(cols[same])
        g = stop
    if not levels:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(levels), np.concatenate(nodes)


def position_counts(graphs: GraphBatch) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``Σ_j σ_j(v)·des_j(v, l)`` of every node ``v`` of the batch by cell ``tri(a, a + l)``.

    Yields ``(v, t, w)`` blocks (global node ids, cells, float64 counts). Consecutive graphs
    whose pairs times their size fit ``BLOCK_ENTRIES`` form one block (the level loops then
    run once for many graphs); a larger graph is split into blocks of sources whose
    descendant arrays stay within ``BLOCK_ENTRIES``. A node may appear in several blocks of
    its graph (to be summed). Everything a graph gets depends only on that graph.
    """
    sizes = graphs.nodes_per_graph
    starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
    indptr, nbrs, _ = graphs.arcs()
    g, n_graphs = 0, len(graphs)
    while g < n_graphs:
        n = int(sizes[g])
        if n * n * n <= BLOCK_ENTRIES // 4:  # the whole graph's pairs × (diameter + 1) surely fit
            last, load = g, 0
            while last < n_graphs and sizes[last] ** 3 <= BLOCK_ENTRIES // 4 and load + sizes[last] ** 2 <= 2 * BLOCK_ENTRIES:
                load += int(sizes[last]) ** 2
                last += 1
            level, node = _small_graph_levels(graphs, g, last, indptr, nbrs)
            # blocks of graphs of similar diameter, so that the descendant rows (as wide as the
            # block's largest diameter + 1) waste little; a graph's counts do not depend on
            # the graphs sharing its block (exact integer sums of its own pairs only)
            npairs = sizes[g:last] ** 2
            pptr = np.concatenate([[0], np.cumsum(npairs)])
            seg = np.repeat(np.arange(last - g), npairs)
            diam = np.zeros(last - g, dtype=np.int64)
            np.maximum.at(diam, seg, level)
            order = np.argsort(diam, kind="stable")
            cost = npairs[order] * (diam[order] + 1)
            b0 = 0
            while b0 < len(order):
                b1, acc = b0, 0
                while b1 < len(order) and (b1 == b0 or acc + cost[b1] <= BLOCK_ENTRIES):
                    acc += int(cost[b1])
                    b1 += 1
                idx = ranges(pptr[order[b0:b1]], npairs[order[b0:b1]])
                yield _flat_counts(level[idx], node[idx], indptr, nbrs)
                b0 = b1
            g = last
            continue
        adj = local_adjacency(graphs, g)
        s = int(starts[g])
        ecc = distance_rows(adj, np.array([0]))
        width = 2 * int(ecc[np.isfinite(ecc)].max()) + 1  # >= diameter + 1 of 0's component
        start = 0
        while start < n:
            rows = max(1, BLOCK_ENTRIES // (n * width))
            stop = min(n, start + rows)
            dist = distance_rows(adj, np.arange(start, stop))
            depth = int(dist[np.isfinite(dist)].max())
            if depth + 1 > width and stop - start > 1:
                width = depth + 1
                continue  # fewer sources, so the descendant array stays bounded
            level = np.where(np.isfinite(dist), dist, -1).astype(np.int64).ravel()
            node = np.tile(np.arange(s, s + n), stop - start)
            yield _flat_counts(level, node, indptr, nbrs)
            start = stop
        g += 1


@dataclass(eq=False)
class NodePaths(DerivedCache):
    """GraphHopper's embedding for the Gaussian vertex kernel: per node ``M_v``, attributes, label.

    ``node_ptr`` (G+1,) node offsets; ``m`` CSR (N, T) with row ``v`` = ``M_v`` flattened by
    :func:`tri` (T = the largest of the chunk; columns past a graph's own size are empty);
    ``x`` (N, p) attributes; ``labels`` (N,) int64.
    """

    node_ptr: np.ndarray
    m: sp.csr_matrix
    x: np.ndarray
    labels: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.node_ptr) - 1

    def __getitem__(self, key: slice) -> NodePaths:
        start, stop, step = key.indices(len(self))
        if step != 1:
            raise IndexError("NodePaths supports contiguous slices only")
        stop = max(stop, start)
        n0, n1 = int(self.node_ptr[start]), int(self.node_ptr[stop])
        return NodePaths(self.node_ptr[start : stop + 1] - n0, self.m[n0:n1], self.x[n0:n1].copy(),
                         self.labels[n0:n1].copy())


class GraphHopperKernel(GraphKernel):
    """GraphHopper kernel: shortest paths compared node by node at equal positions.

    Parameters
    ----------
    with_labels : bool, default True
        Dirac kernel on discrete node labels (all nodes label 0 when the graphs have none).
    attributes : {"none", "linear", "gaussian"}, default "none"
        Kernel on the node attribute vectors, multiplied with the label kernel.
    gamma : float, default 1.0
        Gaussian width, ``exp(-gamma·‖x - x'‖²)`` (GraKeL's ``mu``).
    """

    name = "graphhopper"
    uses_node_attributes = True
    # a Python-level pass per graph in embed, 30x WL's cost per node: the NCI1 job took 5.1 s
    # in one process (embed 3.3 s), 3.7 s on two worker processes
    node_weight = 2.0

    def __init__(self, with_labels: bool = True, attributes: str = "none", gamma: float = 1.0) -> None:
        self.with_labels = with_labels
        self.attributes = attributes
        self.gamma = gamma

    @property
    def has_feature_vectors(self) -> bool:  # type: ignore[override]
        return self.attributes != "gaussian"

    def validate(self) -> None:
        n = self.name
        check_param(isinstance(self.with_labels, bool), n, "with_labels", f"must be true or false, got {self.with_labels!r}")
        check_param(self.attributes in ("none", "linear", "gaussian"), n, "attributes",
                    f"must be none, linear or gaussian, got {self.attributes!r}")
        check_real(self.gamma, n, "gamma", 0, lo_open=True)

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        attrs = {"fit_graphs": len(graphs)}
        if self.attributes != "none":
            attrs["n_attributes"] = int(self._attrs(graphs).shape[1])
        return KernelState(arrays={}, attrs=attrs)

    def _attrs(self, graphs: GraphBatch, state: KernelState | None = None) -> np.ndarray:
        p = None if state is None else state.attrs.get("n_attributes")
        x = node_attributes(graphs, self.name, f"attributes={self.attributes!r} needs", fitted_dim=p)
        return np.ascontiguousarray(x, dtype=np.float64)

    def _labels(self, graphs: GraphBatch) -> np.ndarray:
        if self.with_labels and graphs.node_labels is not None:
            return graphs.node_labels
        return np.zeros(graphs.n_nodes, np.int64)

    # ------------------------------------------------------------ embed
    def embed(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures | NodePaths:
        if self.attributes == "gaussian":
            return self._node_paths(graphs, state)
        return self._features(graphs, state)

    def _features(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        """F[label, a, b, i] = Σ_{v with label} M_v[a, b] · x_v[i] (x = 1 without attributes)."""
        labels = self._labels(graphs)
        code, n_codes, table = local_codes(graphs, labels)
        cum = np.concatenate([[0], np.cumsum(n_codes)])
        x = self._attrs(graphs, state) if self.attributes == "linear" else np.ones((graphs.n_nodes, 1))
        p = x.shape[1]
        node_graph = graphs.node_graph
        rows, keys, vals = [], [], []
        for v, t, w in position_counts(graphs):
            if len(v) == 0:
                continue
            t_size = int(t.max()) + 1
            group_code = cum[node_graph[v]] + code[v]  # (graph, label) of the node
            comb = group_code * t_size + t
            order = np.argsort(comb, kind="stable")  # stable: nodes stay in order within a group
            sc = comb[order]
            first = np.concatenate([[0], np.flatnonzero(np.diff(sc)) + 1])
            grp = np.empty(len(v), dtype=np.int64)
            grp[order] = np.repeat(np.arange(len(first)), np.diff(np.append(first, len(sc))))
            uniq = sc[first]
            gc, tt = uniq // t_size, uniq % t_size
            g = np.searchsorted(cum, gc, side="right") - 1
            bb = np.floor((np.sqrt(8 * tt + 1) - 1) / 2).astype(np.int64)
            aa = tt - bb * (bb + 1) // 2
            lab = table[gc]
            for i in range(p):
                vals.append(np.bincount(grp, weights=w * x[v, i], minlength=len(first)))
                keys.append(combine(TAG_GH, aa, bb, lab) if self.attributes == "none" else
                            combine(TAG_GH, aa, bb, lab, np.uint64(i)))
                rows.append(g)
        if not rows:
            return SparseFeatures.empty(len(graphs))
        return SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(keys), np.concatenate(vals),
                                         len(graphs))

    def _node_paths(self, graphs: GraphBatch, state: KernelState) -> NodePaths:
        x = self._attrs(graphs, state)
        labels = self._labels(graphs)
        parts = list(position_counts(graphs))
        v = np.concatenate([q[0] for q in parts]) if parts else np.zeros(0, np.int64)
        t = np.concatenate([q[1] for q in parts]) if parts else np.zeros(0, np.int64)
        w = np.concatenate([q[2] for q in parts]) if parts else np.zeros(0)
        t_max = int(t.max()) + 1 if len(t) else 1
        m = sp.coo_matrix((w, (v, t)), shape=(graphs.n_nodes, t_max)).tocsr()
        m.sum_duplicates()
        m.sort_indices()
        node_ptr = graphs.node_offsets - graphs.node_offsets[0]
        return NodePaths(node_ptr, m, x, np.asarray(labels, np.int64))

    # ------------------------------------------------------------ kernel values
    def feature_vectors(self, emb: SparseFeatures, state: KernelState) -> SparseFeatures:
        if not isinstance(emb, SparseFeatures):
            raise NotImplementedError("graphhopper has explicit features only without the Gaussian kernel")
        return emb

    def pairwise(self, a, b, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return dot(a, b)
        return self._gaussian_block(a, b)

    def self_similarity(self, a, state: KernelState) -> np.ndarray:
        if isinstance(a, SparseFeatures):
            return sq_norms(a)
        return np.array([self._gaussian_block(a[i : i + 1], a[i : i + 1])[0, 0] for i in range(len(a))])

    def _gaussian_block(self, a: NodePaths, b: NodePaths) -> np.ndarray:
        out = np.zeros((len(a), len(b)))
        nb = int(b.node_ptr[-1])
        if len(a) == 0 or nb == 0:
            return out
        t = max(a.m.shape[1], b.m.shape[1])
        mb = sp.csr_matrix((b.m.data, b.m.indices, b.m.indptr), shape=(nb, t))
        mbt = mb.T.tocsr()
        mbt.sort_indices()
        for i in range(len(a)):
            n0, n1 = int(a.node_ptr[i]), int(a.node_ptr[i + 1])
            if n1 == n0:
                continue
            ma = sp.csr_matrix((a.m[n0:n1].data, a.m[n0:n1].indices, a.m[n0:n1].indptr), shape=(n1 - n0, t))
            w = (ma @ mbt).toarray()  # (n, nb) <M_v, M_v'>: sums over the cells in cell order
            k = _gaussian(a.x[n0:n1], b.x, float(self.gamma))
            if self.with_labels:
                k *= a.labels[n0:n1, None] == b.labels[None, :]
            prod = k * w
            col = prod[0].copy()
            for r in range(1, n1 - n0):
                col += prod[r]
            out[i] = _segment_sums(col, b.node_ptr)
        return out


def _gaussian(xa: np.ndarray, xb: np.ndarray, gamma: float) -> np.ndarray:
    sq = np.zeros((len(xa), len(xb)))
    for j in range(xa.shape[1]):
        diff = xa[:, j, None] - xb[None, :, j]
        sq += diff * diff
    return np.exp(-gamma * sq)


def _segment_sums(values: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    m = sp.csr_matrix((values, np.zeros(len(values), dtype=np.int64), indptr), shape=(len(indptr) - 1, 1))
    return np.asarray(m @ np.ones(1), dtype=np.float64).ravel()


__all__ = ["GraphHopperKernel", "NodePaths", "position_counts", "tri"]
