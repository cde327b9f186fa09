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
* ``M``: for each source ``j`` (in blocks of sources), BFS distances (SciPy, compiled), the
  number of shortest paths ``σ_j(v)`` from ``j`` (forward over the BFS levels of the
  shortest-path DAG) and ``des_j(v, l)``, the number of DAG paths of ``l`` edges going down
  from ``v`` (backward over the levels); then ``M_v[a, a + l] += σ_j(v) · des_j(v, l)`` with
  ``a = d(j, v)``. This is the occurrence/descendant recursion of the authors' code (GraKeL's
  ``od_vectors_dag``), vectorised over all sources of a block and all nodes: O(n·m·δ) per
  graph (δ its diameter + 1), memory O(block · n · δ).
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

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState, check_param
from gramdist.kernels.features.sparse_features import SparseFeatures, dot, sq_norms
from gramdist.kernels.hashing import combine, tag
from gramdist.kernels.shortest_path.paths import distance_rows, local_adjacency, local_codes

TAG_GH = tag("graphhopper")

#: entries of the per-block descendant array (sources × nodes × (δ+1)); bounds the memory
BLOCK_ENTRIES = 1 << 22


def tri(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Index of the upper-triangular cell ``(a, b)``, ``a <= b``: ``b(b+1)/2 + a`` (size-free)."""
    return b * (b + 1) // 2 + a


def path_position_counts(adj: sp.csr_matrix, node_code: np.ndarray, n_codes: int,
                         weights: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``Σ_{v: code(v) = c} w(v) · M_v`` of one graph, for each code ``c``.

    Parameters
    ----------
    adj : (n, n) CSR adjacency of the graph (unit weights, symmetric).
    node_code : (n,) int64 in ``0..n_codes-1`` (``arange(n)`` gives each node's own ``M_v``).
    weights : (n,) float64 or None (all 1).

    Returns
    -------
    (n_codes, T) float64 array whose column ``tri(a, b)`` holds the summed counts of shortest
    paths of length ``b`` with the node at position ``a``, and ``δ`` (diameter + 1), with
    ``T = δ(δ+1)/2``. Sums run in a fixed order (sources in increasing blocks, then
    ``bincount`` order), so the result depends only on the graph.
    """
    n = adj.shape[0]
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(adj.indptr))
    dst = adj.indices.astype(np.int64)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    diam = 0
    rows = max(1, BLOCK_ENTRIES // max(1, n * n))  # first guess; refined with the block's depth
    start = 0
    while start < n:
        stop = min(n, start + rows)
        dist = distance_rows(adj, np.arange(start, stop))
        reach = np.isfinite(dist)
        depth = int(dist[reach].max()) if reach.any() else 0
        width = depth + 1
        if (stop - start) * n * width > BLOCK_ENTRIES and stop - start > 1:
            rows = max(1, BLOCK_ENTRIES // (n * width))
            continue  # redo with fewer sources so the descendant array stays bounded
        diam = max(diam, depth)
        r = stop - start
        d = np.where(reach, dist, -1).astype(np.int64)
        # shortest-path DAG arcs of every source of the block: parent (j, v) -> child (j, c)
        dv = d[:, src]
        dc = d[:, dst]
        jj, arc = np.nonzero((dv >= 0) & (dc == dv + 1))
        parent = jj * n + src[arc]
        child = jj * n + dst[arc]
        level = dv[jj, arc]
        order = np.lexsort((child, level))
        parent, child, level = parent[order], child[order], level[order]
        lstart = np.searchsorted(level, np.arange(depth + 1))
        lend = np.searchsorted(level, np.arange(depth + 1), side="right")
        flat_d = d.ravel()
        # σ_j(v): number of shortest paths from j to v, forward over the levels
        sigma = np.zeros(r * n)
        sigma[np.arange(r) * n + np.arange(start, stop)] = 1.0
        for k in range(depth):
            s, e = lstart[k], lend[k]
            if s == e:
                continue
            c = child[s:e]
            first = np.concatenate([[0], np.flatnonzero(np.diff(c)) + 1])
            sigma[c[first]] = np.add.reduceat(sigma[parent[s:e]], first)
        # des_j(v, l): number of DAG paths of l edges down from v, backward over the levels
        des = np.zeros((r * n, width))
        des[reach.ravel(), 0] = 1.0
        porder = np.lexsort((parent, level))  # arcs by level, then parent
        pp, cc = parent[porder], child[porder]
        for k in range(depth - 1, -1, -1):
            s, e = lstart[k], lend[k]
            if s == e:
                continue
            p, c = pp[s:e], cc[s:e]
            h = depth - k  # children sit at level k + 1: des(child, l) = 0 for l >= depth - k
            first = np.concatenate([[0], np.flatnonzero(np.diff(p)) + 1])
            des[p[first], 1 : h + 1] += np.add.reduceat(des[c, :h], first, axis=0)
        pair, length = np.nonzero(des)
        a = flat_d[pair]
        v = pair % n
        w = sigma[pair] * des[pair, length]
        if weights is not None:
            w = w * weights[v]
        parts.append((node_code[v], tri(a, a + length), w))
        start = stop
    delta = diam + 1
    t_size = delta * (delta + 1) // 2
    out = np.zeros(n_codes * t_size)
    for code, t, w in parts:
        out += np.bincount(code * t_size + t, weights=w, minlength=n_codes * t_size)
    return out.reshape(n_codes, t_size), delta


@dataclass(eq=False)
class NodePaths:
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

    def __getstate__(self) -> dict:
        return {"node_ptr": self.node_ptr, "m": self.m, "x": self.x, "labels": self.labels}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._cache = {}

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
        check_param(isinstance(self.gamma, (int, float)) and not isinstance(self.gamma, bool)
                    and np.isfinite(self.gamma) and self.gamma > 0, n, "gamma",
                    f"must be a number > 0, got {self.gamma!r}")

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        attrs = {"fit_graphs": len(graphs)}
        if self.attributes != "none":
            attrs["n_attributes"] = int(self._attrs(graphs).shape[1])
        return KernelState(arrays={}, attrs=attrs)

    def _attrs(self, graphs: GraphBatch, state: KernelState | None = None) -> np.ndarray:
        if graphs.node_attrs is None or graphs.node_attrs.shape[1] == 0:
            raise JobError(f"kernel {self.name}: attributes={self.attributes!r} needs numerical node attributes, "
                           "but the graphs have none (check dataset.node_attributes)")
        p = None if state is None else state.attrs.get("n_attributes")
        if p is not None and graphs.node_attrs.shape[1] != p:
            raise JobError(f"kernel {self.name}: these graphs have {graphs.node_attrs.shape[1]} node attributes, "
                           f"the kernel was fitted with {p}")
        return np.ascontiguousarray(graphs.node_attrs, dtype=np.float64)

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
        labels = self._labels(graphs)
        code, n_codes, table = local_codes(graphs, labels)
        cum = np.concatenate([[0], np.cumsum(n_codes)])
        x = self._attrs(graphs, state) if self.attributes == "linear" else None
        starts = graphs.node_offsets[:-1] - graphs.node_offsets[0]
        rows, keys, vals = [], [], []
        for g in range(len(graphs)):
            n = int(graphs.nodes_per_graph[g])
            if n == 0:
                continue
            adj = local_adjacency(graphs, g)
            s = int(starts[g])
            lab_code = code[s : s + n]
            lab_tab = table[cum[g] : cum[g + 1]]
            if x is None:
                f, delta = path_position_counts(adj, lab_code, int(n_codes[g]))
                li, ti = np.nonzero(f)
                bb = np.floor((np.sqrt(8 * ti + 1) - 1) / 2).astype(np.int64)
                aa = ti - bb * (bb + 1) // 2
                rows.append(np.full(len(li), g, np.int64))
                keys.append(combine(TAG_GH, aa, bb, lab_tab[li]))
                vals.append(f[li, ti])
            else:
                m, delta = path_position_counts(adj, np.arange(n, dtype=np.int64), n)
                xg = x[s : s + n]
                p = xg.shape[1]
                t_size = m.shape[1]
                # F[label, t, i] = Σ_{v with label} M_v[t] · x_v[i], summed node after node
                f = np.zeros((int(n_codes[g]), t_size, p))
                for v in range(n):
                    f[lab_code[v]] += np.outer(m[v], xg[v])
                li, ti, ii = np.nonzero(f)
                bb = np.floor((np.sqrt(8 * ti + 1) - 1) / 2).astype(np.int64)
                aa = ti - bb * (bb + 1) // 2
                rows.append(np.full(len(li), g, np.int64))
                keys.append(combine(TAG_GH, aa, bb, lab_tab[li], ii))
                vals.append(f[li, ti, ii])
        if not rows:
            return SparseFeatures.empty(len(graphs))
        return SparseFeatures.from_pairs(np.concatenate(rows), np.concatenate(keys), np.concatenate(vals),
                                         len(graphs))

    def _node_paths(self, graphs: GraphBatch, state: KernelState) -> NodePaths:
        x = self._attrs(graphs, state)
        labels = self._labels(graphs)
        mats, t_max = [], 0
        for g in range(len(graphs)):
            n = int(graphs.nodes_per_graph[g])
            if n == 0:
                mats.append(sp.csr_matrix((0, 1)))
                continue
            m, _ = path_position_counts(local_adjacency(graphs, g), np.arange(n, dtype=np.int64), n)
            mats.append(sp.csr_matrix(m))
            t_max = max(t_max, m.shape[1])
        t_max = max(t_max, 1)
        m = sp.vstack([sp.csr_matrix(a, shape=(a.shape[0], t_max)) if a.shape[1] == t_max else
                       sp.csr_matrix((a.data, a.indices, a.indptr), shape=(a.shape[0], t_max)) for a in mats],
                      format="csr")
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


__all__ = ["GraphHopperKernel", "NodePaths", "path_position_counts", "tri"]
