"""Sparse explicit feature vectors shared by the explicit-feature kernels (WL, NSPDK, ODD_ST, SP, ...).

A :class:`SparseFeatures` holds one sparse vector per graph in CSR-like flat arrays::

    indptr  (G+1,) int64    features of graph g are keys[indptr[g]:indptr[g+1]]
    keys    (nnz,) uint64   feature ids (stable 64-bit hashes), strictly increasing per graph
    values  (nnz,) float64  feature values (counts or weights), never 0 after construction

It is the ``embed`` output of those kernels: it has ``len`` and slicing by graph, and a
graph's row depends only on the graph (never on which other graphs share the chunk).

:func:`dot` computes the block of dot products between two embeddings. Its arithmetic for a
pair (i, j) is fixed: the products ``a_i[k] * b_j[k]`` over the keys ``k`` common to both, added
one after the other in increasing key order, starting from 0.0. This is what SciPy's CSR
sparse product does when both operands have sorted column indices (``csr_matmat`` accumulates
row i of A entry by entry in column order), and the column of a key is its rank among the
sorted keys of ``b``, so column order is key order whatever other graphs are in the tile. The
result is therefore bitwise identical for any tile composition, and exact for integer counts
(below 2**53). :func:`sq_norms` uses the same sequential key-order sum (SciPy ``csr_matvec``),
so ``sq_norms(a)`` equals the diagonal of ``dot(a, a)`` bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from gramdist.arrayops import (
    common_positions,
    find_sorted,
    group_offsets,
    ranges,
    run_starts,
    stable_order,
    unique_sorted,
)
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import DerivedCache, GraphKernel, KernelState


@dataclass(eq=False)
class SparseFeatures(DerivedCache):
    """One sparse feature vector per graph; see the module docstring for the layout."""

    indptr: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.indptr = np.ascontiguousarray(self.indptr, dtype=np.int64)
        self.keys = np.ascontiguousarray(self.keys, dtype=np.uint64)
        self.values = np.ascontiguousarray(self.values, dtype=np.float64)
        if len(self.keys) != len(self.values) or self.indptr[-1] - self.indptr[0] != len(self.keys):
            raise ValueError("SparseFeatures: indptr, keys and values disagree in length")
        if self.indptr[0] != 0:
            self.indptr = self.indptr - self.indptr[0]

    # ------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return len(self.indptr) - 1

    @property
    def nnz(self) -> int:
        return len(self.keys)

    @property
    def row_lengths(self) -> np.ndarray:
        """(G,) int64 number of non-zero features of each graph."""
        return np.diff(self.indptr)

    @property
    def row_index(self) -> np.ndarray:
        """(nnz,) int64 graph (row) of each stored feature."""
        if "row_index" not in self._cache:
            self._cache["row_index"] = np.repeat(np.arange(len(self), dtype=np.int64), self.row_lengths)
        return self._cache["row_index"]

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, values) of graph ``i`` as views."""
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.keys[a:b], self.values[a:b]

    def _max_integer_sq_norm(self) -> float:
        """Largest row sum of squares if every value is an integer and that sum is below 2**53
        (so exact), else ``inf`` (cached).

        Every partial sum of a dot product of rows a_i, b_j is at most ||a_i|| ||b_j|| in
        magnitude (Cauchy-Schwarz on |a_i|, |b_j|). So ``a._max_integer_sq_norm() *
        b._max_integer_sq_norm()`` below 2**106 makes every partial sum an exact float64
        integer, and below 2**48 an exact float32 one (pyramid match on D&D, rows 0-511: a bound
        of 4.7e10 from the rows' L1 norms, 5.0e5 from their L2 norms: float32 dense products).
        """
        if "max_integer_sq_norm" not in self._cache:
            v = self.values
            val = 0.0
            if len(v) and np.all(np.floor(v) == v):
                val = float(np.max(sq_norms(self)))
                val = val if val < 2.0**53 else np.inf
            elif len(v):
                val = np.inf
            self._cache["max_integer_sq_norm"] = val
        return self._cache["max_integer_sq_norm"]

    def _sorted_keys(self) -> np.ndarray:
        """Sorted distinct keys of all rows (cached: an embedding meets many tiles)."""
        if "sorted_keys" not in self._cache:
            self._sort_keys()
        return self._cache["sorted_keys"]

    def _shared_keys(self) -> np.ndarray:
        """Sorted keys present in at least two rows (keys are distinct within a row, so a key's
        count of rows is its count of copies)."""
        if "shared_keys" not in self._cache:
            self._cache["shared_keys"] = self._sorted_keys()[self._key_rows() >= 2]
        return self._cache["shared_keys"]

    def _key_rows(self) -> np.ndarray:
        """Rows holding each key of :meth:`_sorted_keys` (cached; keys are distinct in a row)."""
        if "key_rows" not in self._cache:
            self._sort_keys()
        return self._cache["key_rows"]

    def _key_positions(self) -> np.ndarray:
        """(nnz,) position of each stored key in :meth:`_sorted_keys` (cached: a tile maps the
        sorted keys to its columns, a short search in order, and every entry follows by a
        gather, not a binary search of its own; int32, 4 bytes per entry, where it fits)."""
        if "key_positions" not in self._cache:
            u = self._sorted_keys()
            pos = np.searchsorted(u, self.keys)
            self._cache["key_positions"] = pos.astype(np.int32) if len(u) < 2**31 else pos
        return self._cache["key_positions"]

    def key_table(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, positions)``: the sorted distinct keys of all rows and, for each stored entry,
        the position of its key there (both cached: an embedding meets many tiles)."""
        return self._sorted_keys(), self._key_positions()

    def _mostly_frequent(self) -> bool:
        """At least SPLIT_SHARE of the entries are on keys 1/FREQUENT_SHARE of the rows hold."""
        held = self._key_rows()
        return bool(held[held * FREQUENT_SHARE >= len(self)].sum() >= SPLIT_SHARE * self.nnz)

    def _frequent_split(self, dtype: type) -> FrequentSplit:
        """This embedding cut into dense and CSR columns for exact integer tiles (cached, per
        dense dtype: an embedding meets many tiles); see :class:`FrequentSplit`."""
        name = f"frequent_split_{np.dtype(dtype).name}"
        if name not in self._cache:
            self._cache[name] = _frequent_split(self, dtype)
        return self._cache[name]

    def _sort_keys(self) -> None:
        s = np.sort(self.keys)
        starts = np.flatnonzero(run_starts(s))
        self._cache["key_rows"] = np.diff(starts, append=len(s))
        self._cache["sorted_keys"] = s[starts]

    # ------------------------------------------------------------ slicing
    def __getitem__(self, key: slice | int | np.ndarray | list) -> SparseFeatures:
        if isinstance(key, (int, np.integer)):
            i = int(key) + (len(self) if key < 0 else 0)
            key = slice(i, i + 1)
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                stop = max(stop, start)
                a, b = self.indptr[start], self.indptr[stop]
                return SparseFeatures(self.indptr[start : stop + 1] - a, self.keys[a:b].copy(),
                                      self.values[a:b].copy())
            key = np.arange(start, stop, step)
        return self.take(np.asarray(key, dtype=np.int64))

    def take(self, idx: np.ndarray) -> SparseFeatures:
        """Rows ``idx`` (any order, repeats allowed) as a new embedding."""
        idx = np.asarray(idx, dtype=np.int64)
        lens = self.row_lengths[idx]
        starts = self.indptr[idx]
        sel = ranges(starts, lens)
        indptr = np.zeros(len(idx) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return SparseFeatures(indptr, self.keys[sel], self.values[sel])

    @staticmethod
    def concat(parts: list[SparseFeatures]) -> SparseFeatures:
        """Rows of all ``parts`` one after the other."""
        if not parts:
            return SparseFeatures.empty(0)
        lens = np.concatenate([p.row_lengths for p in parts])
        indptr = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        return SparseFeatures(indptr, np.concatenate([p.keys for p in parts]),
                              np.concatenate([p.values for p in parts]))

    @staticmethod
    def empty(n_graphs: int) -> SparseFeatures:
        """``n_graphs`` all-zero vectors."""
        return SparseFeatures(np.zeros(n_graphs + 1, np.int64), np.zeros(0, np.uint64), np.zeros(0))

    # ------------------------------------------------------------ construction
    @classmethod
    def from_pairs(cls, graph_index: np.ndarray, keys: np.ndarray, values: np.ndarray | float,
                   n_graphs: int) -> SparseFeatures:
        """Build from (graph, key, value) triples in any order, summing duplicates.

        Parameters
        ----------
        graph_index : (m,) int
            Graph (row) of each triple, in ``0..n_graphs-1``.
        keys : (m,) uint64
            Feature ids.
        values : (m,) float64 or scalar
            Values; a scalar is broadcast (e.g. ``1.0`` for counts).
        n_graphs : int
            Number of rows of the result (graphs without triples get empty rows).

        Notes
        -----
        Triples are grouped by graph with a stable radix sort, then sorted by key inside each
        graph (stable, so duplicates are summed in their input order: deterministic for a
        given input). Entries summing to exactly 0 are dropped.
        """
        return cls._from_pairs(graph_index, keys, values, n_graphs, owned=False)

    @classmethod
    def _from_pairs(cls, graph_index: np.ndarray, keys: np.ndarray, values: np.ndarray | float,
                    n_graphs: int, owned: bool) -> SparseFeatures:
        """:meth:`from_pairs`; ``owned``: the arrays are the caller's to give away (sorted in
        place: no copy of a chunk's triples, which for the largest graphs is gigabytes)."""
        g = np.asarray(graph_index, dtype=np.int64).ravel()
        k = np.asarray(keys, dtype=np.uint64).ravel()
        if len(g) == 0:
            return cls.empty(n_graphs)
        v = values if np.ndim(values) == 0 else np.asarray(values, dtype=np.float64).ravel()
        indptr, k, v, moved = grouped_by_row(g, k, v, n_graphs)
        del g
        return cls._from_segments(indptr, k, v, owned or moved)

    @classmethod
    def from_segments(cls, indptr: np.ndarray, keys: np.ndarray, values: np.ndarray) -> SparseFeatures:
        """Build from each graph's (key, value) pairs ``keys[indptr[g]:indptr[g+1]]`` (any order
        inside a graph, duplicates summed as :meth:`from_pairs` does): ``from_pairs`` for
        triples that are already grouped by graph, without its grouping pass. ``keys`` and
        ``values`` are sorted in place: they must be the caller's to give away."""
        return cls._from_segments(np.asarray(indptr, dtype=np.int64), keys, values, owned=True)

    @classmethod
    def _from_segments(cls, indptr: np.ndarray, k: np.ndarray, v: np.ndarray | float,
                       owned: bool) -> SparseFeatures:
        """Rows from each graph's (key, value) pairs ``indptr[i]:indptr[i+1]``, unsorted and
        with duplicates: sorted by key (stable), duplicates summed in order, zeros dropped."""
        if len(k) == 0:
            return cls.empty(len(indptr) - 1)
        scalar = np.ndim(v) == 0
        k, sv = sort_segments(k, indptr, None if scalar else v, copy=not owned)
        new = run_starts(k)
        new[indptr[:-1][indptr[:-1] < len(k)]] = True  # a graph's first entry starts a group
        starts = None if new.all() else np.flatnonzero(new)
        del new  # a byte per pair: gone before the values are formed
        if starts is None:  # no duplicates: the sorted pairs are the rows (no copy of a large graph's)
            group_ptr = indptr
            vals = np.full(len(k), float(v)) if scalar else sv
        else:
            group_ptr = np.searchsorted(starts, indptr)  # every graph's first entry starts a group
            if scalar:
                vals = np.diff(np.append(starts, len(k))).astype(np.float64) * float(v)
            else:
                vals = _segment_sum_sequential(sv, starts)
            k = k[starts]
        nz = vals != 0.0
        if nz.all():
            return cls(group_ptr, k, vals)
        kept = np.concatenate([[0], np.cumsum(nz)])
        return cls(kept[group_ptr], k[nz], vals[nz])

    def scaled(self, factors: np.ndarray) -> SparseFeatures:
        """Each graph's vector multiplied by ``factors[g]`` ((G,) float64)."""
        f = np.asarray(factors, dtype=np.float64)
        return SparseFeatures(self.indptr.copy(), self.keys.copy(), self.values * f[self.row_index])

    def to_csr(self, columns: np.ndarray) -> sp.csr_matrix:
        """(G, len(columns)) CSR over the sorted unique key array ``columns``; other keys dropped."""
        return _as_csr(self, np.asarray(columns, dtype=np.uint64))

    def __repr__(self) -> str:
        return f"SparseFeatures({len(self)} graphs, {self.nnz} non-zeros)"


class RowBuilder:
    """:meth:`SparseFeatures.from_pairs` for (graph, key, value) pieces that arrive graph after
    graph: a graph's rows are built as soon as the caller says no later piece can touch it
    (:meth:`close_before`), so memory holds the finished rows and the open graphs' raw pieces,
    never every triple of the batch at once. The result is bit for bit ``from_pairs`` of all
    pieces in their order of arrival (each graph's triples keep their relative order, which
    is all its duplicate sums depend on)."""

    def __init__(self, n_graphs: int) -> None:
        self.n_graphs = n_graphs
        self.closed = 0  # every graph below is built
        self.pending: tuple[list[np.ndarray], ...] = ([], [], [])  # graph, key, value pieces
        self.parts: list[SparseFeatures] = []

    def add(self, graph_index: np.ndarray, keys: np.ndarray, values: np.ndarray) -> None:
        for column, piece, dtype in zip(self.pending, (graph_index, keys, values), (np.int64, np.uint64, np.float64)):
            column.append(np.asarray(piece, dtype))

    def close_before(self, graph: int) -> None:
        """Build the rows of every graph below ``graph``: no further piece may name one."""
        graph = min(int(graph), self.n_graphs)
        if graph <= self.closed:
            return
        g, k, v = (self._joined(c) for c in range(3))  # each column's pieces freed as it is joined
        done = g < graph
        if not done.all():
            keep = ~done
            self.add(g[keep], k[keep], v[keep])
            g, k, v = g[done], k[done], v[done]
        g -= self.closed
        indptr, k, v, _ = grouped_by_row(g, k, v, graph - self.closed)
        del g  # before the sort: its bytes are the rows' own
        self.parts.append(SparseFeatures.from_segments(indptr, k, v))
        self.closed = graph

    def _joined(self, c: int) -> np.ndarray:
        """Column ``c``'s pending pieces as one array of our own (sorted in place later)."""
        pieces = self.pending[c]
        out = np.concatenate(pieces) if pieces else np.zeros(0, (np.int64, np.uint64, np.float64)[c])
        pieces.clear()
        return out

    def result(self) -> SparseFeatures:
        """All rows; each built part is dropped as it is copied in (peak: the result and one part)."""
        self.close_before(self.n_graphs)
        parts, self.parts = self.parts[::-1], []
        lens = np.concatenate([p.row_lengths for p in parts[::-1]]) if parts else np.zeros(self.n_graphs, np.int64)
        indptr = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        keys, values = np.empty(int(indptr[-1]), np.uint64), np.empty(int(indptr[-1]), np.float64)
        at = 0
        while parts:
            part = parts.pop()
            keys[at:at + part.nnz], values[at:at + part.nnz] = part.keys, part.values
            at += part.nnz
            del part
        return SparseFeatures(indptr, keys, values)


# ---------------------------------------------------------------- products
def dot(a: SparseFeatures, b: SparseFeatures) -> np.ndarray:
    """(len(a), len(b)) float64 dot products <a_i, b_j>.

    Each entry is the sequential sum, in increasing key order, of the products over common
    keys: bitwise independent of the other rows of ``a`` and ``b`` (see module docstring).
    Integer operands whose every partial sum is exact may add in any order (the same bits):
    where most of their entries are on keys that many rows hold (pyramid match's unary
    codes), each operand is cut once into dense and CSR columns (:func:`_dot_split`);
    otherwise a tile takes the keys both hold, so operands with mostly private features
    (e.g. NSPDK on large graphs) cost two sorts and a merge, not a full key mapping.
    """
    out = np.zeros((len(a), len(b)), dtype=np.float64)
    if a.nnz == 0 or b.nnz == 0:
        return out
    bound = a._max_integer_sq_norm() * b._max_integer_sq_norm()  # of every partial sum, squared
    # float32 where every partial sum is below 2**24, so exact in float32 too: half the
    # dense product's time and memory (pyramid match's D&D tiles: 80 -> 40 ms a product)
    dtype = np.float32 if bound < 2.0**48 else np.float64
    exact = bound < 2.0**106
    if exact and a._mostly_frequent() and (a is b or b._mostly_frequent()):
        fa = a._frequent_split(dtype)
        _dot_split(fa, fa if a is b else b._frequent_split(dtype), out)
    else:
        _dot_common_keys(a, b, out, dtype if exact else None)
    if a is b:
        np.fill_diagonal(out, sq_norms(a))
    return out


def _dot_common_keys(a: SparseFeatures, b: SparseFeatures, out: np.ndarray, exact_dtype: type | None) -> None:
    """``out += A @ B.T`` through CSR matrices over the keys both hold; ``exact_dtype``: the
    dense dtype of :func:`_dot_integer` where every partial sum is exact, else None."""
    if a is b:
        # off-diagonal entries only need keys held by >= 2 graphs; the diagonal is the
        # full sequential sum, i.e. sq_norms (the same arithmetic as the general case)
        common = a._shared_keys()
    else:
        ua, ub = a._sorted_keys(), b._sorted_keys()
        if len(ua) > len(ub):
            ua, ub = ub, ua
        common = ua[find_sorted(ub, ua)[1]]  # the smaller, sorted, into the larger: a merge in practice
    if not len(common):
        return
    ma = _as_csr(a, common)
    mb = ma if a is b else _as_csr(b, common)
    if exact_dtype is not None:
        _dot_integer(ma, mb, out, exact_dtype)
    elif len(common) <= FEW_KEYS and np.isfinite(ma.data).all() and np.isfinite(mb.data).all():
        _add_key_by_key(ma, mb, out)
    else:
        _add_sparse_product(ma, mb, out)


# A common key whose pair count ca * cb reaches 1/DENSE_SHARE of the tile goes to the dense
# product: BLAS does those multiply-adds ~30x faster than the sparse product walks them.
DENSE_SHARE = 256


def _dot_integer(ma: sp.csr_matrix, mb: sp.csr_matrix, out: np.ndarray,
                 dense_dtype: type = np.float64) -> None:
    """``out = ma @ mb.T`` for integer-valued operands whose every partial sum is < 2**53.

    Then every product and every partial sum is an exact float64 integer, so the result does
    not depend on the order of the additions: keys shared by many graphs of both operands
    (WL's early-iteration labels) go through a dense BLAS product, the rest through the
    sparse product, and the two parts are added — bitwise the same as the sequential sum.
    ``dense_dtype`` float32 (the caller's choice where every partial sum is < 2**24, so
    exact in float32 too) halves the dense product's time and memory (pyramid match's D&D
    tiles: 256 x 34,531 dense columns, 80 -> 40 ms per product).
    """
    n_keys = ma.shape[1]
    ca = np.bincount(ma.indices, minlength=n_keys).astype(np.float64)
    cb = ca if mb is ma else np.bincount(mb.indices, minlength=n_keys).astype(np.float64)
    dense = ca * cb * DENSE_SHARE >= float(ma.shape[0]) * float(mb.shape[0])
    n_dense = int(np.count_nonzero(dense))
    if n_dense == 0:
        _add_sparse_product(ma, mb, out)
        return
    da, sa = _split_columns(ma, dense, n_dense, dense_dtype)
    db, sb = (da, sa) if mb is ma else _split_columns(mb, dense, n_dense, dense_dtype)
    if da.dtype == out.dtype:
        np.matmul(da, db.T, out=out)
    else:
        out[:] = da @ db.T
    if sa.nnz and sb.nnz:
        _add_sparse_product(sa, sb, out)


#: A key held by at least 1/FREQUENT_SHARE of an embedding's rows goes to its dense part (the
#: ``DENSE_SHARE`` of a tile when two such keys meet); 1/RARE_SHARE where the dense part would
#: outgrow DENSE_BUDGET. An embedding is cut once (``FrequentSplit``) when at least
#: SPLIT_SHARE of its entries are on frequent keys: pyramid match 0.86 (D&D, rows of 256),
#: WL-OA 0.14 and WL 0.24 (tiles of those gained nothing or lost: WL-OA on D&D 1.27 -> 1.36 s,
#: the per-embedding key search costing more than the per-tile cuts it saves)
FREQUENT_SHARE, RARE_SHARE = 16, 4
SPLIT_SHARE = 0.5
#: the dense part's cells at most this many times the embedding's stored entries: 16 bytes a
#: stored entry in float32, as much as its key and value (1/RARE_SHARE guarantees it)
DENSE_BUDGET = 4


@dataclass(frozen=True)
class FrequentSplit:
    """An integer embedding cut once for all its tiles: the keys at least 1/16 of its rows hold
    as a dense ``(f, G)`` array (a key's row: a tile gathers whole rows, contiguous), the
    others as a CSR ``(G, r)`` matrix.

    ``keys`` (f,) and ``rest_keys`` (r,) are the sorted keys of the dense rows and of the CSR
    columns. Cut per tile instead, the two operands of every tile paid for it again: on D&D in
    tiles of 256, pyramid match made 25 cuts of ~4 M entries each for its 15 tiles, now 5.
    An embedding met by tiles of both dense dtypes keeps one cut of each."""

    keys: np.ndarray
    dense_t: np.ndarray
    rest_keys: np.ndarray
    rest: sp.csr_matrix


def _frequent_split(x: SparseFeatures, dtype: type) -> FrequentSplit:
    u, held = x._sorted_keys(), x._key_rows()
    frequent = held * FREQUENT_SHARE >= len(x)
    if len(x) * np.count_nonzero(frequent) > DENSE_BUDGET * x.nnz:
        frequent = held * RARE_SHARE >= len(x)
    own = sp.csr_matrix((x.values, x._key_positions(), x.indptr), shape=(len(x), len(u)))  # over its own keys
    dense, rest = _split_columns(own, frequent, int(np.count_nonzero(frequent)), dtype)
    return FrequentSplit(u[frequent], np.ascontiguousarray(dense.T), u[~frequent], rest)


def _columns(m: sp.csr_matrix, idx: np.ndarray) -> sp.csr_matrix:
    return m if len(idx) == m.shape[1] else m[:, idx]


def _rows(d: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return d if len(idx) == d.shape[0] else np.take(d, idx, axis=0)


def _dot_split(fa: FrequentSplit, fb: FrequentSplit, out: np.ndarray) -> None:
    """``out = A @ B.T`` for integer operands whose every partial sum is < 2**53 (< 2**24 for a
    float32 dense part): every product and partial sum is then an exact integer, so the
    result does not depend on the order of the additions, and the four parts (dense and CSR
    columns of each side) are added in any grouping, bitwise the sequential sum."""
    if fa is fb:  # a key is dense or CSR in both operands: no cross terms
        out[:] = fa.dense_t.T @ fa.dense_t
        if fa.rest.nnz:
            _add_sparse_product(fa.rest, fa.rest, out)
        return
    ia, ib = common_positions(fa.keys, fb.keys)
    if len(ia):
        out[:] = _rows(fa.dense_t, ia).T @ _rows(fb.dense_t, ib)
    ja, jb = common_positions(fa.keys, fb.rest_keys)  # frequent in a, rare in b
    if len(ja):
        out += (_columns(fb.rest, jb) @ fa.dense_t[ja]).T
    ka, kb = common_positions(fa.rest_keys, fb.keys)  # rare in a, frequent in b
    if len(ka):
        out += _columns(fa.rest, ka) @ fb.dense_t[kb]
    la, lb = common_positions(fa.rest_keys, fb.rest_keys)
    if len(la):
        _add_sparse_product(_columns(fa.rest, la), _columns(fb.rest, lb), out)


#: Non-integer operands with at most this many common keys go key by key through dense outer
#: products (SVM-θ's 7 subset sizes: an NCI1 tile of 1,028² in 5 ms against 12 ms).
FEW_KEYS = 16
_BAND = 64  # rows of ``out`` per band: a band of a 1,028-column tile is 0.5 MiB, in cache


def _add_key_by_key(ma: sp.csr_matrix, mb: sp.csr_matrix, out: np.ndarray) -> None:
    """``out += ma @ mb.T`` for finite operands with few columns, one column (key) at a time.

    Each entry of a zero ``out`` receives its products in increasing key order, one rounding
    per product and one per addition: the sparse product's arithmetic. A key that one of the
    two graphs lacks adds ±0.0, which leaves every sum (and the +0.0 start) as it was; with an
    infinite value it would add NaN, hence the caller's finiteness check.
    """
    da = ma.toarray()
    db_t = np.ascontiguousarray(mb.toarray().T)
    band = np.empty((_BAND, out.shape[1]))
    for r in range(0, out.shape[0], _BAND):
        rows = out[r:r + _BAND]
        prod = band[:len(rows)]
        for c in range(da.shape[1]):
            np.multiply(da[r:r + _BAND, c, None], db_t[c], out=prod)
            rows += prod


def _add_sparse_product(ma: sp.csr_matrix, mb: sp.csr_matrix, out: np.ndarray) -> None:
    """``out += ma @ mb.T`` through SciPy's sparse product.

    A (ga x U) times B^T (U x gb): csr_matmat walks row i of A in column (= key) order, so
    each entry is the sequential key-order sum (see the module docstring).
    """
    # a dense add, not a scatter of the COO triples: ~30 % faster for a 1028² NCI1 tile, and
    # the same bits (each entry gets its product once; the others add +0.0)
    out += (ma @ mb.T.tocsr()).toarray()


def _split_columns(m: sp.csr_matrix, dense: np.ndarray, n_dense: int,
                   dtype: type = np.float64) -> tuple[np.ndarray, sp.csr_matrix]:
    """``m``'s ``dense`` columns as a dense ``dtype`` array and the other columns as a CSR matrix."""
    rows = np.repeat(np.arange(m.shape[0], dtype=np.int64), np.diff(m.indptr))
    is_dense = dense[m.indices]
    new_col = np.where(dense, np.cumsum(dense) - 1, np.cumsum(~dense) - 1)[m.indices]
    d = np.zeros((m.shape[0], n_dense), dtype=dtype)
    d[rows[is_dense], new_col[is_dense]] = m.data[is_dense]
    keep = ~is_dense
    indptr = group_offsets(rows[keep], m.shape[0])
    s = sp.csr_matrix((m.data[keep], new_col[keep], indptr), shape=(m.shape[0], m.shape[1] - n_dense))
    return d, s


def sorted_unique(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct values of a uint64 array (sort + mask; ``np.unique`` is slow in NumPy 2.4)."""
    return unique_sorted(keys)


def grouped_by_row(g: np.ndarray, k: np.ndarray, v: np.ndarray | float,
                   n_graphs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | float, bool]:
    """``(indptr, k, v, moved)``: the pairs grouped by row ``g`` (a stable radix sort, skipped
    when already grouped; ``moved``: new arrays were made) and each row's segment."""
    moved = False
    if len(g) > 1 and np.any(g[1:] < g[:-1]):
        order = stable_order(g, n_graphs)
        g, k = g[order], k[order]
        v = v if np.ndim(v) == 0 else v[order]
        moved = True
    indptr = group_offsets(g, n_graphs)
    return indptr, k, v, moved


def sort_segments(keys: np.ndarray, indptr: np.ndarray, values: np.ndarray | None = None,
                  copy: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """Sort ``keys`` inside each segment ``indptr[i]:indptr[i+1]``, permuting ``values`` alike.

    Stable (equal keys keep their order). Segments are sorted one by one when they are large
    (SIMD ``np.sort`` on contiguous slices is much faster than one global argsort of 64-bit
    keys); many small segments use one global stable argsort on (segment, key). ``copy=False``
    sorts the given arrays in place where it can (they must be uint64 / float64).
    """
    as_array = np.array if copy else np.asarray  # numpy 2's copy=False raises where a cast must copy
    keys = as_array(keys, dtype=np.uint64)
    values = None if values is None else as_array(values, dtype=np.float64)
    n_seg = len(indptr) - 1
    if len(keys) == 0 or n_seg == 0:
        return keys, values
    if len(keys) < 64 * n_seg:  # small segments: global sort
        seg = np.repeat(np.arange(n_seg, dtype=np.int64), np.diff(indptr))
        order = np.argsort(keys, kind="stable")
        order = order[stable_order(seg[order], n_seg)]
        return keys[order], (None if values is None else values[order])
    for i in range(n_seg):
        lo, hi = int(indptr[i]), int(indptr[i + 1])
        if hi - lo < 2:
            continue
        if values is None:
            keys[lo:hi].sort()
        else:
            o = _segment_order(keys[lo:hi])
            keys[lo:hi] = keys[lo:hi][o]
            values[lo:hi] = values[lo:hi][o]
    return keys, values


def _segment_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")``: where the keys are distinct (checked on a SIMD
    ``np.sort`` of them), NumPy's default introsort gives the same permutation, 5x faster for
    uint64 (pyramid match's D&D features: 16 M distinct keys, 0.76 -> 0.2 s)."""
    s = np.sort(keys)
    if len(s) > 1 and np.any(s[1:] == s[:-1]):
        return np.argsort(keys, kind="stable")
    return np.argsort(keys)


def sq_norms(a: SparseFeatures) -> np.ndarray:
    """(len(a),) float64 squared norms, bitwise equal to ``np.diag(dot(a, a))``."""
    if a.nnz == 0:
        return np.zeros(len(a))
    m = sp.csr_matrix((a.values * a.values, np.zeros(a.nnz, dtype=np.int64), a.indptr),
                      shape=(len(a), 1))
    # csr_matvec: sequential sum in stored (key) order starting at 0.0, same as csr_matmat.
    return np.asarray(m @ np.ones(1), dtype=np.float64).ravel()


def _as_csr(x: SparseFeatures, cols: np.ndarray) -> sp.csr_matrix:
    """x as a CSR over the sorted unique keys ``cols`` (keys not in ``cols`` dropped).

    Three ways to find each entry's column, by the shape of the features:

    * keys repeated across graphs (at most a quarter as many distinct keys as entries: labelled
      graphlets, shortest paths, histograms): the distinct keys, sorted, are looked up in
      ``cols`` and each entry takes its column by a gather through
      :meth:`SparseFeatures._key_positions` (D&D's labelled 3-graphlet tiles: 6,800 distinct
      keys for 400,000 entries; 0.43 -> 0.29 s of CPU against a search per entry);
    * mostly private keys and few columns (WL-like features: the core framework over WL on D&D,
      2 million distinct keys, 24,000-41,000 columns): a bitmap on the keys' top bits picks the
      candidate entries (a ~3% false-positive rate) and only those are searched;
    * otherwise a binary search per entry.
    """
    if len(cols) == 0:
        return sp.csr_matrix((len(x), 0))
    u = x._sorted_keys()
    if len(u) * 4 <= len(x.keys):
        pos, found = find_sorted(cols, u)
        column = np.where(found, pos, -1)[x._key_positions()]
        entries = np.flatnonzero(column >= 0)
        column = column[entries]
    elif len(cols) * 8 < len(x.keys):
        entries, column = _few_columns(x.keys, cols)
    else:
        pos, found = find_sorted(cols, x.keys)
        entries = np.flatnonzero(found)
        column = pos[entries]
    if len(entries) == len(x.keys):
        indptr, idx, data = x.indptr, column, x.values
    else:
        idx, data = column, x.values[entries]
        indptr = group_offsets(x.row_index[entries], len(x))
    m = sp.csr_matrix((data, idx, indptr), shape=(len(x), len(cols)))
    m.has_sorted_indices = True  # keys sorted within a row and cols sorted => indices sorted
    return m


def _few_columns(keys: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(entries, column)``: the indices of the ``keys`` found in the sorted ``cols`` and their
    positions there, the binary search run only on the entries a bitmap of the columns' top bits
    lets through."""
    bits = int(min(24, max(10, np.ceil(np.log2(len(cols) + 1)) + 5)))
    shift = np.uint64(64 - bits)
    table = np.zeros(1 << bits, dtype=bool)
    table[(cols >> shift).view(np.int64)] = True  # < 2^24 after the shift: no copy needed
    cand = np.flatnonzero(table[(keys >> shift).view(np.int64)])
    pos, hit = find_sorted(cols, keys[cand])
    return cand[hit], pos[hit]


def _segment_sum_sequential(v: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Sum of each segment ``v[starts[i]:starts[i+1]]`` added left to right.

    Uses a CSR mat-vec (sequential accumulation) rather than ``np.add.reduceat`` whose
    summation order is an implementation detail.
    """
    indptr = np.append(starts, len(v)).astype(np.int64)
    m = sp.csr_matrix((v, np.zeros(len(v), dtype=np.int64), indptr), shape=(len(starts), 1))
    return np.asarray(m @ np.ones(1), dtype=np.float64).ravel()


class SparseFeatureKernel(GraphKernel):
    """Base of the sparse explicit-feature kernels (WL, NSPDK, ODD_ST, SP, ...): K(a, b) = <phi(a), phi(b)>.

    Subclasses implement :meth:`features`; ``embed`` returns those features, ``pairwise`` is
    their exact :func:`dot` and ``self_similarity`` their :func:`sq_norms`. The default
    ``fit`` learns nothing: features are stable hashes of each graph alone.

    ``feature_vectors`` (the contract's explicit-feature hook) returns the embedding itself:
    feature stores write these rows as CSR with the hashes as column ids. Their dot products
    computed by SciPy's CSR product (``X @ X.T``, columns in key order) add the same products
    in the same order as :func:`dot`, so they equal the Gram bit for bit (and integer counts,
    as WL's, are exact in any order).
    """

    has_feature_vectors = True
    embeds_without_state = True  # embed is features(graphs); self_similarity is sq_norms

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # a subclass with its own embed, self_similarity or feature_vectors may read the
        # state: it embeds after the fit unless it says otherwise itself
        super().__init_subclass__(**kwargs)
        own = vars(cls)
        if {"embed", "self_similarity", "feature_vectors"} & own.keys() and "embeds_without_state" not in own:
            cls.embeds_without_state = False

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        raise NotImplementedError

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        return KernelState(arrays={}, attrs={"fit_graphs": len(graphs)})

    def embed(self, graphs: GraphBatch, state: KernelState) -> SparseFeatures:
        return self.features(graphs)

    def pairwise(self, a: SparseFeatures, b: SparseFeatures, state: KernelState) -> np.ndarray:
        return dot(a, b)

    def self_similarity(self, a: SparseFeatures, state: KernelState) -> np.ndarray:
        return sq_norms(a)

    def feature_vectors(self, emb: SparseFeatures, state: KernelState) -> SparseFeatures:
        return emb


__all__ = ["RowBuilder", "SparseFeatureKernel", "SparseFeatures", "grouped_by_row", "dot", "sq_norms", "sorted_unique", "sort_segments"]
