"""The feature store (``gramdist features``): explicit CSR rows or Nyström rows, chunked by graph.

A feature store holds one row per graph, so its size grows linearly with N where a Gram
store grows as N². Graphs are cut into chunks of ``B`` consecutive graphs; chunk ``i`` is
computed and written by one task through a :class:`ChunkTarget`, so no two tasks write the
same Zarr chunk. Arrays and attributes are declared in :mod:`.layout`.

Checksums: each chunk task returns the sum, modulo 2⁶⁴, of the 64-bit words of everything it
wrote (its rows, values, diagonal, labels and ids); the client saves it with the done-mask
(checksums first). A chunk later lost on disk (Zarr reads a missing chunk as zeros) or
damaged no longer matches, which reading and :meth:`FeatureStore.verify` report.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gramdist.arrayops import rows_to_csr, unique_sorted, unit_rows
from gramdist.engine.nystroem import NystroemState
from gramdist.engine.store.base import Store, prepare_location
from gramdist.engine.store.checksums import CHECKSUM_FORMAT, array_digest, words_checksum
from gramdist.engine.store.grids import ChunkGrid
from gramdist.engine.store.groups import (
    as_location,
    blosc,
    create_root,
    open_root,
    read_array,
    store_kind,
    write_vector,
    zarr,
)
from gramdist.engine.store.layout import (
    FEATURE_ARRAYS,
    FEATURE_ATTRIBUTES,
    FEATURE_KIND,
    NYSTROEM,
    FeatureMeta,
)
from gramdist.engine.store.location import Location
from gramdist.errors import StoreError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import as_jsonable

_VECTORS = ("graph_ids", "y", "diag")
_BATCH_ARRAYS = ("node_offsets", "edge_offsets", "edges", "node_labels", "node_attrs", "edge_labels",
                 "edge_attrs", "y", "graph_ids")


# ------------------------------------------------------------------------------- worker writes
@dataclass(frozen=True)
class ChunkTarget:
    """Where a chunk task writes its rows: the feature store at ``path`` (picklable)."""

    path: str
    grid: ChunkGrid
    y_dtype: Any
    compression_level: int = 1
    lease: Any = None  # a :class:`~.lock.Lease` checked before every write
    checksum_format: int = CHECKSUM_FORMAT

    def _vectors(self, diag: np.ndarray, y: np.ndarray | None, graph_ids: np.ndarray) -> dict[str, Any]:
        # labels in the store's dtype, so that the checksum covers what is read back
        return {"diag": np.asarray(diag, np.float64),
                "y": None if self.y_dtype is None or y is None else np.asarray(y, dtype=self.y_dtype),
                "graph_ids": np.asarray(graph_ids, np.int64)}

    def _write_vectors(self, r0: int, r1: int, vectors: dict[str, np.ndarray | None]) -> None:
        for name, values in vectors.items():
            if values is not None:
                zarr.open_array(self.path, path=name, mode="r+", zarr_format=3)[r0:r1] = values

    def write_sparse(self, i: int, rows: dict[str, Any], batch: GraphBatch) -> int:
        """Write chunk ``i``'s CSR rows (``indptr``, ``keys``, ``values``, ``diag``) and vectors;
        returns their checksum."""
        if self.lease is not None:
            self.lease.check()
        r0, r1 = self.grid.range(i)
        row_nnz = np.diff(np.asarray(rows["indptr"], dtype=np.int64))
        keys = np.ascontiguousarray(rows["keys"], dtype=np.uint64)
        values = np.ascontiguousarray(rows["values"], dtype=np.float64)
        if len(row_nnz) != r1 - r0 or len(keys) != len(values) or int(row_nnz.sum()) != len(keys):
            raise ValueError(f"chunk {i}: {len(row_nnz)} rows for graphs {r0}..{r1 - 1}, {len(keys)} keys, "
                             f"{len(values)} values")
        comp = blosc(self.compression_level)
        for group, arr in (("indices", keys), ("data", values)):
            z = zarr.create_array(store=f"{self.path}/{group}/{i}", shape=arr.shape, chunks=(max(1, len(arr)),),
                                  dtype=arr.dtype, fill_value=0, compressors=comp, overwrite=True,
                                  config={"write_empty_chunks": True})
            if len(arr):
                z[...] = arr
        vec = self._vectors(rows["diag"], batch.y, batch.graph_ids) | {"row_nnz": row_nnz}
        self._write_vectors(r0, r1, vec)
        return words_checksum(keys, values, *vec.values(), fmt=self.checksum_format)

    def write_dense(self, i: int, phi: np.ndarray, diag: np.ndarray, batch: GraphBatch) -> int:
        """Write chunk ``i``'s Nyström rows and vectors; returns their checksum."""
        if self.lease is not None:
            self.lease.check()
        r0, r1 = self.grid.range(i)
        phi = np.ascontiguousarray(phi, dtype=np.float64)
        vec = self._vectors(diag, batch.y, batch.graph_ids)
        zarr.open_array(self.path, path="features", mode="r+", zarr_format=3)[r0:r1] = phi
        self._write_vectors(r0, r1, vec)
        return words_checksum(phi, *vec.values(), fmt=self.checksum_format)


# ------------------------------------------------------------------------------- Nyström state
def write_batch(group: Any, batch: GraphBatch) -> None:
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
    group.update_attributes({"arrays": present, "name": batch.name})


def read_batch(group: Any, where: str) -> GraphBatch:
    arrays = {name: read_array(group, name, where) for name in group.attrs.get("arrays", [])}
    return GraphBatch(**arrays, name=group.attrs.get("name", ""))


# ------------------------------------------------------------------------------- the store
class FeatureStore(Store):
    """A feature store; open with :meth:`open`, make with :meth:`create`."""

    KIND = FEATURE_KIND
    ARRAYS = FEATURE_ARRAYS
    ATTRIBUTES = FEATURE_ATTRIBUTES

    @classmethod
    def create(cls, where: str | Location, grid: ChunkGrid, meta: FeatureMeta, *, y_dtype: Any = None,
               compression_level: int = 1, overwrite: bool = False) -> FeatureStore:
        """A new, empty feature store for ``grid``; refuses to clobber an existing one.

        A sparse store lays out CSR rows; a Nyström store's ``features`` array is created by
        :meth:`write_nystroem`, once the rank is known. ``y_dtype`` None: no labels.
        """
        location = as_location(where)
        prepare_location(location, overwrite)
        root = create_root(location, meta.to_attrs() | {
            "store_kind": FEATURE_KIND, "chunk_size": grid.chunk, "n_graphs": grid.n_graphs,
            "compression_level": compression_level, "complete": False, "state_complete": False,
            "nystroem_complete": False, "checksum_format": CHECKSUM_FORMAT})
        comp = blosc(compression_level)
        b = max(1, min(grid.chunk, grid.n_graphs))
        sparse = meta.feature_kind == "sparse"
        vectors = ["graph_ids", "diag"] + (["y"] if y_dtype is not None else []) + (["row_nnz"] if sparse else [])
        if sparse:
            root.require_group("indices")
            root.require_group("data")
        for name in vectors:
            spec = FEATURE_ARRAYS[name]
            root.create_array(name, shape=(grid.n_graphs,), chunks=(b,), dtype=spec.dtype or np.dtype(y_dtype),
                              fill_value=0, compressors=comp, config={"write_empty_chunks": True})
        n = max(1, grid.n_chunks)
        for name in ("chunks_done", "chunk_checksums"):
            root.create_array(name, shape=(grid.n_chunks,), chunks=(n,), dtype=FEATURE_ARRAYS[name].dtype,
                              fill_value=0)
        store = cls(location, root, "r+")
        store.finish_creation()
        return store

    @classmethod
    def open(cls, where: str | Location, mode: str = "r") -> FeatureStore:
        """An existing feature store; :class:`StoreError` if ``where`` is not one."""
        location = as_location(where)
        root = open_root(location, mode)
        if root.attrs.get("store_kind") != FEATURE_KIND:
            raise StoreError(f"{location}: a Gram store, not a feature store (made by `gramdist run`, not "
                             "`gramdist features`)")
        return cls(location, root, mode)

    # -------------------------------------------------------------- typed attributes
    @property
    def grid(self) -> ChunkGrid:
        return ChunkGrid(int(self._attr("n_graphs")), int(self._attr("chunk_size")))

    @property
    def sparse(self) -> bool:
        return self._attr("feature_kind") == "sparse"

    @property
    def feature_kind(self) -> str:
        return str(self._attr("feature_kind"))

    @property
    def nystroem_complete(self) -> bool:
        return bool(self._attr("nystroem_complete"))

    @property
    def nystroem_spec(self) -> dict[str, Any] | None:
        return self._attr("nystroem_spec")

    @property
    def checksum_format(self) -> int:
        return int(self._attr("checksum_format", 1))

    @property
    def n_components(self) -> int:
        """Width of a Nyström store's rows (0 before its basis is written, or for CSR rows)."""
        return int(self.root["features"].shape[1]) if "features" in self.root else 0

    @property
    def nnz(self) -> int:
        return int(self._attr("nnz") or 0)

    @property
    def compression_level(self) -> int:
        return int(self._attr("compression_level", 1))

    def label_dtype(self) -> Any:
        """The dtype of the store's labels (None when it has none)."""
        return self.root["y"].dtype if "y" in self.root else None

    # -------------------------------------------------------------- progress
    def chunk_mask(self) -> tuple[np.ndarray, np.ndarray]:
        """(done (C,) bool, checksums (C,) uint64)."""
        return (np.asarray(self.root["chunks_done"][...], dtype=bool),
                np.asarray(self.root["chunk_checksums"][...], dtype=np.uint64))

    def save_progress(self, done: np.ndarray, checksums: np.ndarray) -> None:
        """Save the done-mask, the checksums first (a chunk marked done always has its checksum)."""
        self._check_fence()
        self.root["chunk_checksums"][...] = checksums
        self.root["chunks_done"][...] = done.astype(np.uint8)

    def mark_complete(self) -> bool:
        """Set ``complete`` iff every chunk is done on disk (and, for CSR, write ``indptr`` first)."""
        self._check_fence()
        done, _ = self.chunk_mask()
        ok = bool(done.all()) and self.state_complete
        if not self.sparse:
            ok = ok and self.nystroem_complete
        if ok and self.sparse:
            row_nnz = np.asarray(self.root["row_nnz"][...], dtype=np.int64)
            indptr = np.zeros(len(row_nnz) + 1, dtype=np.int64)
            np.cumsum(row_nnz, out=indptr[1:])
            self._write_vector("indptr", indptr)
            self._set(nnz=int(indptr[-1]))
        if ok:  # every byte on disk before the flag says so
            self.location.sync()
        self._set(complete=ok)
        return ok

    def is_finished(self) -> bool:
        return self.complete and self.mark_complete()

    def chunk_target(self, lease: Any = None) -> ChunkTarget:
        return ChunkTarget(self.location.resolved(), self.grid, self.label_dtype(), self.compression_level, lease,
                           self.checksum_format)

    # -------------------------------------------------------------- Nyström
    def write_nystroem(self, state: NystroemState) -> None:
        """Persist the Nyström state and lay out the ``features`` array (N, k); then mark it complete."""
        group = self.root.require_group(NYSTROEM)
        for name in ("landmark_indices", "landmark_diag", "eigenvalues"):
            write_vector(group, name, getattr(state, name))
        write_vector(group, "landmark_graph_ids", state.landmarks.graph_ids)
        proj = np.ascontiguousarray(state.projection, dtype=np.float64)
        arr = group.create_array("projection", shape=proj.shape, chunks=tuple(max(1, s) for s in proj.shape),
                                 dtype=np.float64, fill_value=0.0, overwrite=True)
        arr[...] = proj
        write_batch(group.require_group("landmarks"), state.landmarks)
        group.update_attributes(as_jsonable(state.attrs))
        self._record_digest(NYSTROEM, _nystroem_digest(state))
        n, chunk_rows = self.grid.n_graphs, self.grid.chunk
        self.root.create_array("features", shape=(n, state.rank), chunks=(max(1, min(chunk_rows, n)),
                                                                          max(1, state.rank)),
                               dtype="float64", fill_value=0.0, compressors=blosc(self.compression_level),
                               config={"write_empty_chunks": True}, dimension_names=FEATURE_ARRAYS["features"].dims,
                               overwrite=True)
        self._set(nystroem=as_jsonable(state.attrs), nystroem_complete=True)

    def read_nystroem(self) -> NystroemState:
        """The Nyström state (to map its chunks, or new graphs later)."""
        if not self.nystroem_complete:
            raise StoreError(f"{self.location}: no complete Nyström state (a sparse store, or its run stopped early)")
        group = self.root[NYSTROEM]
        where = f"{self.location}/{NYSTROEM}"
        return NystroemState(
            landmarks=read_batch(group["landmarks"], f"{where}/landmarks"),
            landmark_indices=read_array(group, "landmark_indices", where),
            landmark_diag=read_array(group, "landmark_diag", where),
            eigenvalues=read_array(group, "eigenvalues", where),
            projection=read_array(group, "projection", where),
            attrs=dict(group.attrs),
        )

    def adopt(self, source: FeatureStore, *, nystroem: bool) -> None:
        """Copy ``source``'s fitted state (and Nyström basis) into this store (``--from``)."""
        if not self.state_complete:
            self.write_state(source.read_state(), source.fit_indices())
        if nystroem and not self.nystroem_complete:
            self.write_nystroem(source.read_nystroem())

    # -------------------------------------------------------------- reading
    def check_complete(self) -> None:
        done, _ = self.chunk_mask()
        if not self.complete or not done.all():
            raise StoreError(f"{self.location}: incomplete feature store ({int(done.sum())} of {len(done)} chunks "
                             "written); rerun its `gramdist features` command to finish it")

    def read_chunk(self, i: int, checksum: int | None = None, handles: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
        """Chunk ``i``: a dict with ``start``, ``stop`` and either ``indptr`` (local, from 0),
        ``keys``, ``values`` (CSR rows) or ``features`` (dense rows), plus ``diag``, ``y`` and
        ``graph_ids``; checked against ``checksum`` when given (:class:`StoreError` if damaged).
        ``handles``: a dict kept by a caller that reads many chunks, holding the opened arrays."""
        root, grid = self.root, self.grid
        r0, r1 = grid.range(i)
        handles = {} if handles is None else handles
        for name in (*_VECTORS, "row_nnz", "features"):
            if name not in handles:
                handles[name] = root[name] if name in root else None
        vec = {name: None if handles[name] is None else np.asarray(handles[name][r0:r1]) for name in _VECTORS}
        part: dict[str, Any] = {"start": r0, "stop": r1, **vec}
        if self.sparse:
            row_nnz = np.asarray(handles["row_nnz"][r0:r1], dtype=np.int64)
            keys = self._read(f"indices/{i}").astype(np.uint64, copy=False)
            values = self._read(f"data/{i}").astype(np.float64, copy=False)
            indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
            np.cumsum(row_nnz, out=indptr[1:])
            part |= {"indptr": indptr, "keys": keys, "values": values}
            words = (keys, values, vec["diag"], vec["y"], vec["graph_ids"], row_nnz)
        else:
            part["features"] = np.asarray(handles["features"][r0:r1], dtype=np.float64)
            words = (part["features"], vec["diag"], vec["y"], vec["graph_ids"])
        if checksum is not None and words_checksum(*words, fmt=self.checksum_format) != checksum:
            raise StoreError(_damage_message(self.location, grid, [i]) + f"; run `gramdist verify --repair "
                             f"{self.location}` and rerun its `gramdist features` command to recompute them")
        return part

    def iter_chunks(self, *, verify: bool = True) -> Iterator[dict[str, Any]]:
        """The chunks of a complete store, one at a time (bounded memory: what a streamed
        learner reads); see :meth:`read_chunk` for what each holds."""
        self.check_complete()
        _, sums = self.chunk_mask()
        handles: dict[str, Any] = {}
        for i in range(self.grid.n_chunks):
            yield self.read_chunk(i, int(sums[i]) if verify else None, handles)

    def columns(self) -> np.ndarray:
        """Sorted distinct feature ids (uint64) of a CSR store: the columns of :meth:`read_features`."""
        keys = [c["keys"] for c in self.iter_chunks(verify=False)]
        return unique_sorted(np.concatenate(keys) if keys else np.zeros(0, np.uint64))

    def read_features(self, *, normalize: bool | None = None, columns: np.ndarray | None = None,
                      as_dask: bool = False) -> tuple[Any, np.ndarray | None]:
        """``(X, y)``; see :func:`open_features`."""
        self.check_complete()
        if as_dask:
            if self.sparse:
                raise StoreError(f"{self.location}: as_dask is for Nyström stores; stream CSR chunks with iter_chunks")
            import dask.array as da

            return da.from_zarr(str(self.location), component="features"), self.labels()
        parts = list(self.iter_chunks())
        y = np.concatenate([p["y"] for p in parts]) if "y" in self.root else None
        if not self.sparse:
            return np.concatenate([p["features"] for p in parts]), y
        keys = np.concatenate([p["keys"] for p in parts])
        values = np.concatenate([p["values"] for p in parts])
        indptr = self._read("indptr")
        cols = unique_sorted(keys) if columns is None else np.asarray(columns, dtype=np.uint64)
        if normalize is None:
            normalize = self.normalize
        if normalize:
            values = unit_rows(indptr, values, np.concatenate([p["diag"] for p in parts]))
        return rows_to_csr(indptr, keys, values, cols), y

    # -------------------------------------------------------------- verify / info
    def verify(self, *, repair: bool = False) -> dict[str, Any]:
        """Check every written chunk against its checksum (``gramdist verify``). With
        ``repair``, damaged chunks are unmarked and the store marked incomplete, so rerunning
        its command recomputes just those. ``checked`` and ``damaged`` count chunks."""
        grid = self.grid
        done, sums = self.chunk_mask()
        checked = int(done.sum())
        bad = []
        for i in np.flatnonzero(done):
            try:
                self.read_chunk(int(i), int(sums[i]))
            except StoreError:  # damaged, or a chunk's arrays missing altogether
                bad.append(int(i))
        message = f"{self.location}: all {checked} written chunks match their checksums"
        problems = self._digest_problems()
        if self.checksum_format < 2:
            message += (" (in the format of gramdist 0.2, which cannot see two values swapped within a chunk; "
                        f"`gramdist upgrade {self.location}` records checksums that do)")
        if bad:
            message = _damage_message(self.location, grid, bad)
            if repair:
                done[bad] = False
                self._set(complete=False)
                self.save_progress(done, sums)
                message += "; unmarked them: rerun its `gramdist features` command to recompute them"
            else:
                message += "; run `gramdist verify --repair` and rerun its `gramdist features` command"
        if problems:
            message = "\n".join([*problems, message])
        return {"store": str(self.location), "verifiable": True, "checked": checked, "damaged": bad,
                "message": message, "problems": ([message] if bad else []) + problems, "repaired": []}

    def _digest_problems(self) -> list[str]:
        """The fitted state, the Nyström basis and ``indptr`` against the digests recorded with them."""
        from gramdist.engine.store.state import state_digest

        out = []
        for name, digest in sorted(self.vector_checksums.items()):
            try:
                if name == "state":
                    now = state_digest(self.read_state())
                elif name == NYSTROEM:
                    now = _nystroem_digest(self.read_nystroem())
                else:
                    now = array_digest(np.asarray(self.root[name][...]))
            except Exception as exc:  # noqa: BLE001
                out.append(f"{self.location}: {name} cannot be read ({type(exc).__name__}: {exc})")
                continue
            if now != digest:
                out.append(f"{self.location}: {name} does not match the checksum recorded when it was written: it was "
                           "changed on disk; recompute the store with --overwrite to restore it")
        return out

    def upgrade_checksums(self) -> list[str]:
        """``gramdist upgrade`` of an older feature store: each written chunk checked with its
        old (order-free) checksum, then re-recorded in the format that sees every value; a chunk
        that fails is unmarked. Returns what was done, one line each."""
        from gramdist.engine.store.state import state_digest

        if self.checksum_format >= 2 and self.vector_checksums:
            return []
        done, sums = self.chunk_mask()
        bad = []
        for i in np.flatnonzero(done):
            try:
                part = self.read_chunk(int(i), int(sums[i]))
            except StoreError:
                bad.append(int(i))
                continue
            words = ((part["keys"], part["values"], part["diag"], part["y"], part["graph_ids"],
                      np.diff(part["indptr"])) if self.sparse else
                     (part["features"], part["diag"], part["y"], part["graph_ids"]))
            sums[i] = words_checksum(*words)
        done[bad] = False
        self._set(checksum_format=CHECKSUM_FORMAT)
        self.save_progress(done, sums)
        if self.state_complete:
            self._record_digest("state", state_digest(self.read_state()))
        if self.nystroem_complete:
            self._record_digest(NYSTROEM, _nystroem_digest(self.read_nystroem()))
        if "indptr" in self.root:
            self._record_digest("indptr", array_digest(np.asarray(self.root["indptr"][...])))
        lines = [f"re-recorded the checksums of {int(done.sum())} chunks in the format that sees every value"]
        if bad:
            self._set(complete=False)
            lines.append(f"unmarked {len(bad)} chunk(s) that failed their old check: rerun its `gramdist features` "
                         "command to recompute them")
        return lines

    def info(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``gramdist info`` prints)."""
        attrs = self.attributes()
        done, _ = self.chunk_mask()
        shape = [attrs["n_graphs"], int(self.root["features"].shape[1])] if "features" in self.root \
            else [attrs["n_graphs"], None]
        return {
            "store": str(self.location), "store_kind": FEATURE_KIND, "feature_kind": attrs["feature_kind"],
            "complete": self.complete and bool(done.all()),
            "chunks_done": int(done.sum()), "chunks_total": len(done), "chunk_size": attrs["chunk_size"],
            "shape": shape, "nnz": attrs.get("nnz"), "normalize": attrs.get("normalize"),
            "kernel": attrs.get("kernel"), "kernel_versions": self.kernel_versions, "dataset": attrs.get("dataset"),
            "fit": attrs.get("fit"),
            "nystroem": attrs.get("nystroem"), "from_store": attrs.get("from_store"),
            "disk_bytes": self.disk_bytes(), "gramdist_version": attrs.get("gramdist_version"),
            "stats": attrs.get("stats", {}),
        }


def _nystroem_digest(state: NystroemState) -> str:
    from gramdist.arrayops import digest_arrays

    return digest_arrays({"landmark_indices": state.landmark_indices, "landmark_diag": state.landmark_diag,
                          "eigenvalues": state.eigenvalues, "projection": state.projection,
                          "landmarks": np.asarray(state.landmarks.checksum().encode())})


def _damage_message(path: Any, grid: ChunkGrid, bad: list[int]) -> str:
    shown = ", ".join(f"{i} (graphs {grid.range(i)[0]}..{grid.range(i)[1] - 1})" for i in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{path}: {len(bad)} chunk(s) do not match the checksum recorded when they were written "
            f"(lost or damaged on disk): chunk {shown}{more}")


def is_feature_store(where: str | Location) -> bool:
    """Whether ``where`` is a gramdist feature store (cheap: reads the group's attributes)."""
    return store_kind(as_location(where)) == "features"


def open_features(path: str, *, normalize: bool | None = None, columns: np.ndarray | None = None,
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
        training store's columns, so that a test store lines up); default the store's own
        distinct ids. Features outside ``columns`` are dropped.
    as_dask : Nyström stores only: a lazy ``dask.array`` (N, k) with the store's chunks
        (not checked against the checksums: run ``gramdist verify``).

    Returns
    -------
    X : (N, F) ``scipy.sparse.csr_matrix`` float64 (CSR stores; F distinct feature ids,
        in increasing id order), or (N, k) float64 ndarray (Nyström stores).
    y : (N,) class labels, or None.
    """
    return FeatureStore.open(path).read_features(normalize=normalize, columns=columns, as_dask=as_dask)
