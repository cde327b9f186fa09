"""The Zarr v3 store of a feature job: explicit CSR rows or Nyström features, chunked by graph.

A feature store holds one row per graph, so its size grows linearly with N where a Gram
store grows as N². It is written by :mod:`gramdist.engine.featurize`; this module is the only
one that knows its array names. Graphs are cut into chunks of ``B`` consecutive graphs
(``chunk_size``); chunk ``i`` (graphs ``i*B .. min(N, (i+1)*B) - 1``) is computed and written
by one task, so no two tasks write the same Zarr chunk.

Layout (a Zarr v3 group on disk)::

    graph_ids        (N,) int64, chunks (B,)     ids of the graphs in their source
    y                (N,), chunks (B,)           class labels, when the dataset has them
    diag             (N,) float64, chunks (B,)   raw K(g, g) (before any normalisation)
    chunks_done      (C,) uint8                  1 where chunk i is written: the resume record
    chunk_checksums  (C,) uint64                 checksum of everything chunk i wrote
    fit_indices, state/                          the kernel's fitted state (as in a Gram store)

  explicit features (``feature_kind: "sparse"``, kernels with ``has_feature_vectors``)::

    row_nnz          (N,) int64, chunks (B,)     non-zeros of each graph's row
    indices/<i>      (nnz_i,) uint64             feature ids (the kernel's stable hashes) of the
                                                 rows of chunk i, row after row, increasing in a row
    data/<i>         (nnz_i,) float64            the feature values, aligned with indices/<i>
    indptr           (N+1,) int64                CSR row pointer, written when every chunk is done

  Nyström features (``feature_kind: "nystroem"``, any kernel)::

    features         (N, k) float64, chunks (B, k)  Φ(x) = Λ^{-1/2} Uᵀ K(L, x), one row per graph
    nystroem/landmark_indices   (m,) int64     landmark positions in the dataset
    nystroem/landmark_graph_ids (m,) int64     their graph ids
    nystroem/landmark_diag      (m,) float64   raw K(l, l)
    nystroem/eigenvalues        (m,) float64   all eigenvalues of K(L, L), decreasing
    nystroem/projection         (m, k) float64 U_k Λ_k^{-1/2}: Φ(x) = projectionᵀ K(L, x)
    nystroem/landmarks/         the landmark graphs themselves (GraphBatch arrays), so that new
                                graphs are mapped later from this store alone, with no refit

Group attributes: ``gramdist_version``, ``store_kind: "features"``, ``feature_kind``,
``kernel``, ``dataset``, ``dataset_checksum``, ``fit``, ``normalize``, ``chunk_size``,
``n_graphs``, ``nystroem`` (m, landmark rule, eigenvalue cutoff, rank k, seed; None for
sparse), ``from_store``, ``state_complete``, ``nystroem_complete``, ``complete``, ``nnz``,
``job``, ``stats``. The ``nystroem`` group's attributes hold its JSON part.

Checksums: each chunk task returns the sum, modulo 2⁶⁴, of the 64-bit words of everything it
wrote (its rows, values, diagonal, labels and ids; byte strings padded with zeros to whole
words); the client saves it with the done-mask (checksums first). A chunk later lost on disk
(Zarr reads a missing chunk as zeros) or damaged no longer matches, which
:func:`open_features` and :func:`verify_features` report. Nothing here is a pickle.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import open_group, read_array, write_vector
from gramdist.errors import StoreError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import as_jsonable
from gramdist.lazy import lazy_import

# imported on first use, as in store.py: features computed in memory never touch a store
zarr = lazy_import("zarr")

STORE_KIND = "features"
#: attributes that must agree between a feature store and a job rerun into it
FINGERPRINT_KEYS = ("kernel", "dataset_checksum", "fit", "normalize", "chunk_size", "feature_kind",
                    "nystroem_spec", "from_store")
_VECTORS = ("graph_ids", "y", "diag")
_BATCH_ARRAYS = ("node_offsets", "edge_offsets", "edges", "node_labels", "node_attrs", "edge_labels",
                 "edge_attrs", "y", "graph_ids")


@dataclass(frozen=True)
class ChunkGrid:
    """``n_graphs`` graphs cut into chunks of ``chunk`` consecutive graphs."""

    n_graphs: int
    chunk: int

    @property
    def n_chunks(self) -> int:
        return math.ceil(self.n_graphs / self.chunk)

    def range(self, i: int) -> tuple[int, int]:
        return i * self.chunk, min((i + 1) * self.chunk, self.n_graphs)


def _compressors(level: int) -> Any:
    # as the Gram store: Blosc LZ4 with byte shuffle (counts and ids compress well)
    return (lazy_import("zarr.codecs").BloscCodec(cname="lz4", clevel=min(level, 9), shuffle="shuffle", typesize=8)
            if level > 0 else None)


# ------------------------------------------------------------------------------ create / open
def create_feature_store(path: str | os.PathLike, grid: ChunkGrid, attrs: dict[str, Any], *, sparse: bool,
                         y_dtype: Any = None, compression_level: int = 1, overwrite: bool = False) -> zarr.Group:
    """A new, empty feature store for ``grid``; refuses to clobber an existing one.

    ``sparse`` lays out CSR rows, else Nyström features (whose ``features`` array is created
    by :func:`write_nystroem`, once the rank is known). ``y_dtype`` None: no labels.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise StoreError(f"{path}: already exists")
    root = zarr.open_group(str(path), mode="w" if overwrite else "w-", zarr_format=3)
    comp = _compressors(compression_level)
    b = max(1, min(grid.chunk, grid.n_graphs))
    vectors = {"graph_ids": np.int64, "diag": np.float64}
    if y_dtype is not None:
        vectors["y"] = np.dtype(y_dtype)
    if sparse:
        vectors["row_nnz"] = np.int64
        root.require_group("indices")
        root.require_group("data")
    for name, dtype in vectors.items():
        root.create_array(name, shape=(grid.n_graphs,), chunks=(b,), dtype=dtype, fill_value=0,
                          compressors=comp, config={"write_empty_chunks": True})
    n = max(1, grid.n_chunks)
    root.create_array("chunks_done", shape=(grid.n_chunks,), chunks=(n,), dtype="uint8", fill_value=0)
    root.create_array("chunk_checksums", shape=(grid.n_chunks,), chunks=(n,), dtype="uint64", fill_value=0)
    root.attrs.update(as_jsonable(attrs) | {
        "store_kind": STORE_KIND, "feature_kind": "sparse" if sparse else "nystroem",
        "chunk_size": grid.chunk, "n_graphs": grid.n_graphs, "compression_level": compression_level,
        "complete": False, "state_complete": False, "nystroem_complete": False})
    return root


def is_feature_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a gramdist feature store (cheap: reads the group's attributes)."""
    try:
        return open_group(path).attrs.get("store_kind") == STORE_KIND
    except StoreError:
        return False


def open_feature_store(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """An existing feature store; :class:`StoreError` if ``path`` is not one."""
    root = open_group(path, mode)
    if root.attrs.get("store_kind") != STORE_KIND:
        raise StoreError(f"{path}: a Gram store, not a feature store (made by `gramdist run`, not "
                         "`gramdist features`)")
    return root


def grid_of(root: zarr.Group) -> ChunkGrid:
    return ChunkGrid(int(root.attrs["n_graphs"]), int(root.attrs["chunk_size"]))


def fingerprint_mismatch(root: zarr.Group, attrs: dict[str, Any]) -> list[str]:
    """Names of fingerprint attributes that differ between ``root`` and ``attrs``."""
    stored = dict(root.attrs)
    new = json.loads(json.dumps(as_jsonable(attrs)))
    return [k for k in FINGERPRINT_KEYS if stored.get(k) != new.get(k)]


def record_stats(root: zarr.Group, timings: dict[str, float]) -> None:
    stats = dict(root.attrs.get("stats", {}))
    stats.update({k: round(v, 4) for k, v in timings.items()})
    root.attrs["stats"] = stats


# ------------------------------------------------------------------------------ done-mask
def read_chunk_mask(root: zarr.Group) -> tuple[np.ndarray, np.ndarray]:
    """(done (C,) bool, checksums (C,) uint64)."""
    return (np.asarray(root["chunks_done"][...], dtype=bool),
            np.asarray(root["chunk_checksums"][...], dtype=np.uint64))


def write_chunk_mask(root: zarr.Group, done: np.ndarray, checksums: np.ndarray) -> None:
    """Save the done-mask, the checksums first (a chunk marked done always has its checksum)."""
    root["chunk_checksums"][...] = checksums
    root["chunks_done"][...] = done.astype(np.uint8)


def words_checksum(*arrays: np.ndarray | None) -> int:
    """Sum modulo 2⁶⁴ of the 64-bit words of the arrays' bytes (each zero-padded to whole words)."""
    total = 0
    for a in arrays:
        if a is None:
            continue
        raw = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        pad = (-len(raw)) % 8
        if pad:
            raw = np.concatenate([raw, np.zeros(pad, np.uint8)])
        total += int(np.add.reduce(raw.view(np.uint64), dtype=np.uint64))
    return total % (1 << 64)


def mark_complete(root: zarr.Group) -> bool:
    """Set ``complete`` iff every chunk is done on disk (and, for CSR, write ``indptr`` first)."""
    done, _ = read_chunk_mask(root)
    ok = bool(done.all()) and bool(root.attrs.get("state_complete"))
    if root.attrs.get("feature_kind") == "nystroem":
        ok = ok and bool(root.attrs.get("nystroem_complete"))
    if ok and root.attrs.get("feature_kind") == "sparse":
        row_nnz = np.asarray(root["row_nnz"][...], dtype=np.int64)
        indptr = np.zeros(len(row_nnz) + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
        write_vector(root, "indptr", indptr)
        root.attrs["nnz"] = int(indptr[-1])
    root.attrs["complete"] = ok
    return ok


# ------------------------------------------------------------------------------ chunk writes (workers)
def _write_vectors(path: str, r0: int, r1: int, vectors: dict[str, np.ndarray | None]) -> None:
    for name, values in vectors.items():
        if values is None:
            continue
        arr = zarr.open_array(path, path=name, mode="r+")
        arr[r0:r1] = values


def _vectors(diag: np.ndarray, y: np.ndarray | None, graph_ids: np.ndarray, y_dtype: Any) -> dict[str, Any]:
    # labels in the store's dtype, so that the checksum covers what is read back
    return {"diag": np.asarray(diag, np.float64),
            "y": None if y_dtype is None or y is None else np.asarray(y, dtype=y_dtype),
            "graph_ids": np.asarray(graph_ids, np.int64)}


def write_sparse_chunk(path: str, grid: ChunkGrid, i: int, indptr: np.ndarray, keys: np.ndarray,
                       values: np.ndarray, diag: np.ndarray, y: np.ndarray | None, graph_ids: np.ndarray,
                       y_dtype: Any, compression_level: int = 1) -> int:
    """Write chunk ``i``'s CSR rows and vectors (a worker); returns their checksum."""
    r0, r1 = grid.range(i)
    row_nnz = np.diff(np.asarray(indptr, dtype=np.int64))
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    values = np.ascontiguousarray(values, dtype=np.float64)
    if len(row_nnz) != r1 - r0 or len(keys) != len(values) or int(row_nnz.sum()) != len(keys):
        raise ValueError(f"chunk {i}: {len(row_nnz)} rows for graphs {r0}..{r1 - 1}, {len(keys)} keys, "
                         f"{len(values)} values")
    comp = _compressors(compression_level)
    for group, arr in (("indices", keys), ("data", values)):
        z = zarr.create_array(store=f"{path}/{group}/{i}", shape=arr.shape, chunks=(max(1, len(arr)),),
                              dtype=arr.dtype, fill_value=0, compressors=comp, overwrite=True,
                              config={"write_empty_chunks": True})
        if len(arr):
            z[...] = arr
    vec = _vectors(diag, y, graph_ids, y_dtype) | {"row_nnz": row_nnz}
    _write_vectors(path, r0, r1, vec)
    return words_checksum(keys, values, *vec.values())


def write_dense_chunk(path: str, grid: ChunkGrid, i: int, phi: np.ndarray, diag: np.ndarray,
                      y: np.ndarray | None, graph_ids: np.ndarray, y_dtype: Any) -> int:
    """Write chunk ``i``'s Nyström rows and vectors (a worker); returns their checksum."""
    r0, r1 = grid.range(i)
    phi = np.ascontiguousarray(phi, dtype=np.float64)
    vec = _vectors(diag, y, graph_ids, y_dtype)
    zarr.open_array(path, path="features", mode="r+")[r0:r1] = phi
    _write_vectors(path, r0, r1, vec)
    return words_checksum(phi, *vec.values())


# ------------------------------------------------------------------------------ Nyström state
@dataclass
class NystroemState:
    """What maps a graph to its Nyström features: landmarks, their K(l, l), the projection."""

    landmarks: GraphBatch
    landmark_indices: np.ndarray
    landmark_diag: np.ndarray
    eigenvalues: np.ndarray
    projection: np.ndarray
    attrs: dict[str, Any]

    @property
    def rank(self) -> int:
        return int(self.projection.shape[1])


def write_batch(group: zarr.Group, batch: GraphBatch) -> None:
    """A GraphBatch as arrays of ``group`` (its name in the attributes)."""
    present = []
    for name in _BATCH_ARRAYS:
        value = getattr(batch, name)
        if value is None:
            continue
        value = np.ascontiguousarray(value)
        arr = group.create_array(name, shape=value.shape, chunks=value.shape if value.size else None,
                                 dtype=value.dtype, fill_value=0, overwrite=True)
        if value.size:
            arr[...] = value
        present.append(name)
    group.attrs.update({"arrays": present, "name": batch.name})


def read_batch(group: zarr.Group, where: str) -> GraphBatch:
    arrays = {name: read_array(group, name, where) for name in group.attrs.get("arrays", [])}
    return GraphBatch(**arrays, name=group.attrs.get("name", ""))


def write_nystroem(root: zarr.Group, state: NystroemState, chunk_rows: int, compression_level: int = 1) -> None:
    """Persist the Nyström state and lay out the ``features`` array (N, k); then mark it complete."""
    group = root.require_group("nystroem")
    for name in ("landmark_indices", "landmark_diag", "eigenvalues"):
        write_vector(group, name, getattr(state, name))
    write_vector(group, "landmark_graph_ids", state.landmarks.graph_ids)
    proj = np.ascontiguousarray(state.projection, dtype=np.float64)
    arr = group.create_array("projection", shape=proj.shape, chunks=tuple(max(1, s) for s in proj.shape),
                             dtype=np.float64, fill_value=0.0, overwrite=True)
    arr[...] = proj
    write_batch(group.require_group("landmarks"), state.landmarks)
    group.attrs.update(as_jsonable(state.attrs))
    n = int(root.attrs["n_graphs"])
    root.create_array("features", shape=(n, state.rank), chunks=(max(1, min(chunk_rows, n)), max(1, state.rank)),
                      dtype="float64", fill_value=0.0, compressors=_compressors(compression_level),
                      config={"write_empty_chunks": True}, dimension_names=("graph", "component"),
                      overwrite=True)
    root.attrs["nystroem"] = as_jsonable(state.attrs)
    root.attrs["nystroem_complete"] = True


def read_nystroem(path: str | os.PathLike) -> NystroemState:
    """The Nyström state of a feature store (to map its chunks, or new graphs later)."""
    root = open_feature_store(path)
    if not root.attrs.get("nystroem_complete"):
        raise StoreError(f"{path}: no complete Nyström state (a sparse store, or its run stopped early)")
    group = root["nystroem"]
    where = f"{path}/nystroem"
    return NystroemState(
        landmarks=read_batch(group["landmarks"], f"{where}/landmarks"),
        landmark_indices=read_array(group, "landmark_indices", where),
        landmark_diag=read_array(group, "landmark_diag", where),
        eigenvalues=read_array(group, "eigenvalues", where),
        projection=read_array(group, "projection", where),
        attrs=dict(group.attrs),
    )


# ------------------------------------------------------------------------------ reading
def _check_complete(root: zarr.Group, path: str | os.PathLike) -> None:
    done, _ = read_chunk_mask(root)
    if not root.attrs.get("complete") or not done.all():
        raise StoreError(f"{path}: incomplete feature store ({int(done.sum())} of {len(done)} chunks written); "
                         "rerun its `gramdist features` command to finish it")


def _chunk_parts(root: zarr.Group, path: str | os.PathLike, i: int) -> tuple[np.ndarray, np.ndarray]:
    return (read_array(root, f"indices/{i}", path).astype(np.uint64, copy=False),
            read_array(root, f"data/{i}", path).astype(np.float64, copy=False))


def iter_chunks(path: str | os.PathLike, *, verify: bool = True) -> Iterator[dict[str, Any]]:
    """The chunks of a complete store, one at a time (bounded memory: what a streamed learner
    reads); see :func:`read_chunk` for what each holds."""
    root = open_feature_store(path)
    _check_complete(root, path)
    _, sums = read_chunk_mask(root)
    handles: dict[str, Any] = {}
    for i in range(grid_of(root).n_chunks):
        yield read_chunk(root, path, i, int(sums[i]) if verify else None, handles)


def open_complete(path: str | os.PathLike) -> tuple[zarr.Group, np.ndarray]:
    """A complete feature store and its chunk checksums (for :func:`read_chunk`)."""
    root = open_feature_store(path)
    _check_complete(root, path)
    return root, read_chunk_mask(root)[1]


def read_chunk(root: zarr.Group, path: str | os.PathLike, i: int, checksum: int | None = None,
               handles: dict[str, Any] | None = None) -> dict[str, Any]:
    """Chunk ``i``: a dict with ``start``, ``stop`` and either ``indptr`` (local, from 0),
    ``keys``, ``values`` (CSR rows) or ``features`` (dense rows), plus ``diag``, ``y`` and
    ``graph_ids``; checked against ``checksum`` when given (:class:`StoreError` if damaged).
    ``handles``: a dict kept by a caller that reads many chunks, holding the opened arrays."""
    grid = grid_of(root)
    r0, r1 = grid.range(i)
    handles = {} if handles is None else handles
    for name in (*_VECTORS, "row_nnz", "features"):
        if name not in handles:
            handles[name] = root[name] if name in root else None
    vec = {name: None if handles[name] is None else np.asarray(handles[name][r0:r1]) for name in _VECTORS}
    part: dict[str, Any] = {"start": r0, "stop": r1, **vec}
    if root.attrs["feature_kind"] == "sparse":
        row_nnz = np.asarray(handles["row_nnz"][r0:r1], dtype=np.int64)
        keys, values = _chunk_parts(root, path, i)
        indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
        np.cumsum(row_nnz, out=indptr[1:])
        part |= {"indptr": indptr, "keys": keys, "values": values}
        words = (keys, values, vec["diag"], vec["y"], vec["graph_ids"], row_nnz)
    else:
        part["features"] = np.asarray(handles["features"][r0:r1], dtype=np.float64)
        words = (part["features"], vec["diag"], vec["y"], vec["graph_ids"])
    if checksum is not None and words_checksum(*words) != checksum:
        raise StoreError(_damage_message(path, grid, [i]) + f"; run `gramdist verify --repair {path}` and rerun "
                         "its `gramdist features` command to recompute them")
    return part


def feature_columns(path: str | os.PathLike) -> np.ndarray:
    """Sorted distinct feature ids (uint64) of a CSR store: the columns of :func:`open_features`."""
    keys = [c["keys"] for c in iter_chunks(path, verify=False)]
    return _unique(np.concatenate(keys) if keys else np.zeros(0, np.uint64))


def _unique(x: np.ndarray) -> np.ndarray:
    x = np.sort(x)
    if len(x):
        x = x[np.concatenate([[True], x[1:] != x[:-1]])]
    return x


def rows_to_csr(indptr: np.ndarray, keys: np.ndarray, values: np.ndarray, columns: np.ndarray) -> Any:
    """CSR rows with feature ids ``keys`` as a ``scipy.sparse.csr_matrix`` over ``columns``
    (sorted distinct uint64 ids; features not among them are dropped)."""
    import scipy.sparse as sp

    n = len(indptr) - 1
    pos = np.searchsorted(columns, keys)
    pos[pos == len(columns)] = 0
    hit = columns[pos] == keys if len(columns) else np.zeros(len(keys), bool)
    if not hit.all():
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr))[hit]
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
        pos, values = pos[hit], values[hit]
    idx_dtype = np.int32 if len(columns) < 2**31 and len(pos) < 2**31 else np.int64
    m = sp.csr_matrix((values, pos.astype(idx_dtype), indptr.astype(idx_dtype)), shape=(n, len(columns)))
    m.has_sorted_indices = True  # keys increase within a row and the column map is monotonic
    return m


def open_features(path: str | os.PathLike, *, normalize: bool | None = None, columns: np.ndarray | None = None,
                  as_dask: bool = False) -> tuple[Any, np.ndarray | None]:
    """Open a finished feature store for a linear model: ``(X, y)``.

    Parameters
    ----------
    path : the store.
    normalize : CSR stores only: scale each row to unit norm (``x / sqrt(K(x, x))``), so that
        ``X Xᵀ`` is the cosine-normalised Gram. None: as the job's ``gram.normalize`` said.
        Nyström rows already approximate the job's (normalised or raw) kernel; they are
        returned as stored.
    columns : CSR stores only: sorted uint64 feature ids to use as the columns (e.g. the
        training store's :func:`feature_columns`, so that a test store lines up); default the
        store's own distinct ids. Features outside ``columns`` are dropped.
    as_dask : Nyström stores only: a lazy ``dask.array`` (N, k) with the store's chunks
        (not checked against the checksums: run :func:`verify_features`).

    Returns
    -------
    X : (N, F) ``scipy.sparse.csr_matrix`` float64 (CSR stores; F distinct feature ids,
        in increasing id order), or (N, k) float64 ndarray (Nyström stores).
    y : (N,) class labels, or None.
    """
    root = open_feature_store(path)
    _check_complete(root, path)
    sparse = root.attrs["feature_kind"] == "sparse"
    if as_dask:
        if sparse:
            raise StoreError(f"{path}: as_dask is for Nyström stores; stream CSR chunks with iter_chunks")
        import dask.array as da

        return da.from_zarr(str(path), component="features"), read_array(root, "y", path, optional=True)
    parts = list(iter_chunks(path))
    y = np.concatenate([p["y"] for p in parts]) if "y" in root else None
    if not sparse:
        return np.concatenate([p["features"] for p in parts]), y
    keys = np.concatenate([p["keys"] for p in parts])
    values = np.concatenate([p["values"] for p in parts])
    indptr = read_array(root, "indptr", path)
    cols = _unique(keys) if columns is None else np.asarray(columns, dtype=np.uint64)
    if normalize is None:
        normalize = bool(root.attrs.get("normalize"))
    if normalize:
        values = unit_rows(indptr, values, np.concatenate([p["diag"] for p in parts]))
    return rows_to_csr(indptr, keys, values, cols), y


def unit_rows(indptr: np.ndarray, values: np.ndarray, diag: np.ndarray) -> np.ndarray:
    """CSR row values scaled to unit norm: each row's values times ``1 / sqrt(K(x, x))``
    (0 where K(x, x) is not positive), so that dot products are cosine-normalised."""
    with np.errstate(divide="ignore"):
        scale = np.where(diag > 0, 1.0 / np.sqrt(diag), 0.0)
    return values * np.repeat(scale, np.diff(indptr))


def label_dtype(root: zarr.Group) -> Any:
    """The dtype of the store's labels (None when it has none)."""
    return root["y"].dtype if "y" in root else None


def read_labels(path: str | os.PathLike) -> tuple[np.ndarray | None, np.ndarray]:
    """(y or None, graph_ids) of a feature store."""
    root = open_feature_store(path)
    return read_array(root, "y", path, optional=True), read_array(root, "graph_ids", path)


def read_kernel_attrs(path: str | os.PathLike) -> dict[str, Any]:
    root = open_feature_store(path)
    return dict(root["state"].attrs.get("kernel_attrs", {})) if "state" in root else {}


# ------------------------------------------------------------------------------ verify / info
def _damage_message(path: str | os.PathLike, grid: ChunkGrid, bad: list[int]) -> str:
    shown = ", ".join(f"{i} (graphs {grid.range(i)[0]}..{grid.range(i)[1] - 1})" for i in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{path}: {len(bad)} chunk(s) do not match the checksum recorded when they were written "
            f"(lost or damaged on disk): chunk {shown}{more}")


def verify_features(path: str | os.PathLike, *, repair: bool = False) -> dict[str, Any]:
    """Check every written chunk against its checksum (``gramdist verify`` on a feature store).

    With ``repair``, damaged chunks are unmarked and the store marked incomplete, so rerunning
    its command recomputes just those. Returns the same JSON-ready dict as
    :func:`gramdist.engine.store.verify_store` (``checked`` and ``damaged`` count chunks).
    """
    root = open_feature_store(path, mode="r+" if repair else "r")
    grid = grid_of(root)
    done, sums = read_chunk_mask(root)
    checked = int(done.sum())
    bad = []
    for i in np.flatnonzero(done):
        try:
            read_chunk(root, path, int(i), int(sums[i]))
        except StoreError:  # damaged, or a chunk's arrays missing altogether
            bad.append(int(i))
    message = f"{path}: all {checked} written chunks match their checksums"
    if bad:
        message = _damage_message(path, grid, bad)
        if repair:
            done[bad] = False
            root.attrs["complete"] = False
            write_chunk_mask(root, done, sums)
            message += "; unmarked them: rerun its `gramdist features` command to recompute them"
        else:
            message += "; run `gramdist verify --repair` and rerun its `gramdist features` command"
    return {"store": str(path), "verifiable": True, "checked": checked,
            "damaged": bad, "message": message}


def disk_bytes(path: str | os.PathLike) -> int:
    """Bytes the store takes on disk (its files' sizes)."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())


def feature_info(path: str | os.PathLike) -> dict[str, Any]:
    """A JSON-ready summary of a feature store (what ``gramdist info`` prints)."""
    root = open_feature_store(path)
    attrs = dict(root.attrs)
    done, _ = read_chunk_mask(root)
    shape = [attrs["n_graphs"], int(root["features"].shape[1])] if "features" in root else [attrs["n_graphs"], None]
    return {
        "store": str(path), "store_kind": STORE_KIND, "feature_kind": attrs["feature_kind"],
        "complete": bool(attrs.get("complete")) and bool(done.all()),
        "chunks_done": int(done.sum()), "chunks_total": len(done), "chunk_size": attrs["chunk_size"],
        "shape": shape, "nnz": attrs.get("nnz"), "normalize": attrs.get("normalize"),
        "kernel": attrs.get("kernel"), "dataset": attrs.get("dataset"), "fit": attrs.get("fit"),
        "nystroem": attrs.get("nystroem"), "from_store": attrs.get("from_store"),
        "disk_bytes": disk_bytes(path), "gramdist_version": attrs.get("gramdist_version"),
        "stats": attrs.get("stats", {}),
    }
