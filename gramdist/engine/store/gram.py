"""The Gram store (``gramdist run``): its tiles, done-mask and checksums, vectors and reading.

Layout and attributes are declared in :mod:`.layout` (:data:`~.layout.GRAM_ARRAYS`,
:data:`~.layout.GRAM_ATTRIBUTES`). Every array names its dimensions, so
``xarray.open_zarr(store)`` gives the Gram labelled by graph id on both axes, with ``y`` and
``diag`` along them. Stores made before dimension names (gramdist 0.1.0) are read as they are;
:mod:`.upgrade` adds the names.

Only the client process writes attributes and the small arrays; workers write whole ``gram``
chunks through a :class:`~.tiles.TileTarget`, each tile task its own chunks, so writes never
overlap (:mod:`.tiles`: the tile arrays and their records). ``complete`` becomes true only
after the done-mask read back from disk is all ones. Each tile task returns the checksum of
what it wrote, which the client saves with the done-mask (checksums first), so a chunk later
lost or damaged on disk is caught on reading (:meth:`GramStore.read_gram`,
:func:`~.repair.verify_gram_store`) instead of being read as zeros.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gramdist.engine.store import backup
from gramdist.engine.store.base import Store, prepare_location
from gramdist.engine.store.checksums import CHECKSUM_FORMAT, tile_checksum
from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.groups import (
    as_location,
    create_root,
    keep_empty,
    lost_metadata,
    open_root,
    read_array,
    store_kind,
    zarr,
)
from gramdist.engine.store.layout import (
    EMBEDDINGS,
    GRAM_ARRAYS,
    GRAM_ATTRIBUTES,
    GramMeta,
    check_dtype,
)
from gramdist.engine.store.location import Location
from gramdist.engine.store.tiles import (
    TileTarget,
    checksum_format,
    committing_message,
    create_tile_arrays,
    damage_message,
    grid_of,
    mark_group_complete,
    read_checksums,
    read_done_mask,
    tile_damage,
    write_done_mask,
)
from gramdist.errors import StoreError
from gramdist.graphs import GraphBatch


# ------------------------------------------------------------------------------- the store
class GramStore(Store):
    """A Gram store; open with :meth:`open`, make with :meth:`create`."""

    KIND = "gram"
    ARRAYS = GRAM_ARRAYS
    ATTRIBUTES = GRAM_ATTRIBUTES

    # -------------------------------------------------------------- making and opening
    @classmethod
    def create(cls, where: str | Location, grid: TileGrid, meta: GramMeta | dict[str, Any], *,
               compression_level: int = 1, overwrite: bool = False, finish: bool = True) -> GramStore:
        """A new store laid out for ``grid``. An existing one is refused, or with ``overwrite``
        replaced if it is a gramdist store or an empty folder (never anything else).
        ``finish`` False: the caller writes more before :meth:`finish_creation`."""
        location = as_location(where)
        attrs = meta.to_attrs() if isinstance(meta, GramMeta) else dict(meta)
        dtype = check_dtype(attrs.get("dtype") or "float64")
        prepare_location(location, overwrite)
        root = create_root(location, attrs | {
            "complete": False, "state_complete": False, "diag_complete": False, "dtype": dtype,
            "checksummed": True, "checksum_format": CHECKSUM_FORMAT})
        create_tile_arrays(root, grid, dtype, compression_level)
        if attrs.get("keep_embeddings"):
            root.require_group(EMBEDDINGS)
        store = cls(location, root, "r+")
        if finish:
            store.finish_creation()
        return store

    @classmethod
    def open(cls, where: str | Location, mode: str = "r") -> GramStore:
        """An existing Gram store; :class:`StoreError` if it is not one, if its group metadata or
        the metadata of ``gram``/``tiles_done`` is lost (saying what is lost and whether
        ``gramdist verify --repair`` restores it). A reader (``mode="r"``) is refused, in one
        line, while an append is being committed (its arrays are then changing)."""
        location = as_location(where)
        root = open_root(location, mode)
        kind = root.attrs.get("store_kind", "gram")
        if kind != "gram":
            raise StoreError(f"{location}: a {kind} store, not a Gram store")
        for name in ("gram", "tiles_done", "tile_checksums"):
            lost = lost_metadata(location, name)
            if lost and location.child(name).is_dir():
                raise StoreError(backup.array_metadata_message(location, name, lost))
        try:
            missing = [name for name in ("gram", "tiles_done") if name not in root]
            for name in ("gram", "tiles_done"):
                if name not in missing:
                    root[name]  # parse the metadata now: unknown codecs or data types fail here
        except Exception as exc:  # zarr refuses what it cannot decode (e.g. pickle codecs): say so
            raise StoreError(f"{location}: unreadable store metadata ({type(exc).__name__}: {exc})") from None
        if missing:  # e.g. a copy cut short: never a KeyError traceback later
            raise StoreError(f"{location}: not a complete gramdist store (no {' or '.join(missing)} array); "
                             "rerun its job with --overwrite")
        store = cls(location, root, mode)
        if mode == "r" and store.committing:
            raise StoreError(committing_message(location, store.pending_append))
        return store

    def reopen(self, mode: str | None = None) -> GramStore:
        return type(self).open(self.location, mode or self.mode)

    # -------------------------------------------------------------- typed attributes
    @property
    def grid(self) -> TileGrid:
        return grid_of(self.root)

    @property
    def symmetric(self) -> bool:
        return bool(self._attr("symmetric", True))

    @property
    def tile_size(self) -> int:
        return int(self._attr("tile_size"))

    @property
    def dtype(self) -> str:
        return str(self.root["gram"].dtype)

    @property
    def diag_complete(self) -> bool:
        return bool(self._attr("diag_complete"))

    @property
    def checksum_format(self) -> int:
        return checksum_format(self.root)

    @property
    def keeps_embeddings(self) -> bool:
        """Whether the store keeps (some of) its chunks' embeddings: ``keep_embeddings`` true or "auto"."""
        return bool(self._attr("keep_embeddings"))

    def embedding_budget(self, grid: TileGrid | None = None) -> int | None:
        """The most bytes a kept chunk embedding may take (None: no limit; see ``keep_budget``)."""
        from gramdist.engine.store.state import keep_budget

        grid = grid or self.grid
        return keep_budget(self._attr("keep_embeddings"), grid.tile, grid.n_cols, np.dtype(self.dtype).itemsize)

    @property
    def checksummed(self) -> bool:
        return bool(self._attr("checksummed"))

    @property
    def damaged_vectors(self) -> list[str]:
        """Labels or ids ``verify --repair`` found changed, to be written again from the graphs."""
        return list(self._attr("damaged_vectors") or [])

    def restore_graph_vectors(self, rows: GraphBatch, cols: GraphBatch | None = None) -> list[str]:
        """Write the labels and ids ``verify --repair`` marked, from the graphs; returns their names."""
        names = self.damaged_vectors
        if names:
            self.write_graph_vectors(rows, cols)
            self._set(damaged_vectors=None)
        return names

    @property
    def appends(self) -> list[dict[str, Any]]:
        return list(self._attr("appends") or [])

    @property
    def pending_append(self) -> dict[str, Any] | None:
        return self._attr("pending_append") or None

    @property
    def committing(self) -> bool:
        return bool((self.pending_append or {}).get("state") == "committing")

    @property
    def generation(self) -> int:
        return int(self._attr("generation", 0))

    @property
    def combination(self) -> dict[str, Any] | None:
        return self._attr("combination")

    @property
    def test_dataset(self) -> dict[str, Any] | None:
        return self._attr("test_dataset")

    @property
    def test_checksum(self) -> str | None:
        return self._attr("test_checksum")

    @property
    def row_dataset(self) -> dict[str, Any]:
        """The dataset record of the row graphs (the test graphs of a test x train store)."""
        return dict((self.dataset if self.symmetric else self.test_dataset) or {})

    @property
    def row_checksum(self) -> str | None:
        return self.dataset_checksum if self.symmetric else self.test_checksum

    @property
    def compression_level(self) -> int:
        return int((self.job.get("gram") or {}).get("compression_level", 1))

    def record_attrs(self, **values: Any) -> None:
        """Set attributes a run records (``appends``, ``keep_embeddings``...), by name."""
        unknown = set(values) - set(GRAM_ATTRIBUTES)
        if unknown:
            raise ValueError(f"not Gram store attributes: {sorted(unknown)}")
        self._set(**values)

    def mark_incomplete(self) -> None:
        self._set(complete=False)

    # -------------------------------------------------------------- vectors
    def write_graph_vectors(self, rows: GraphBatch, cols: GraphBatch | None = None) -> None:
        """Class labels and ids of the row graphs, and the ids (and labels, when rectangular) of
        the column graphs: a symmetric store has ``graph_ids_cols`` too, to label both axes."""
        for batch, suffix in ((rows, ""), (cols, "_cols")):
            if batch is None:
                continue
            if batch.y is not None:
                self._write_vector(f"y{suffix}", batch.y)
            self._write_vector(f"graph_ids{suffix}", batch.graph_ids)
        if cols is None:
            self._write_vector("graph_ids_cols", rows.graph_ids)

    def copy_graph_vectors(self, source: GramStore) -> None:
        """The labels and ids of ``source`` (same graphs) into this store."""
        names = ("y", "graph_ids") if self.symmetric else ("y", "graph_ids", "y_cols", "graph_ids_cols")
        for name in names:
            values = source._read(name, optional=True)
            if values is not None:
                self._write_vector(name, values)

    def write_diag(self, rows: np.ndarray, cols: np.ndarray | None = None) -> None:
        """Store the raw K(g, g) of the row graphs (and of the columns when rectangular)."""
        self._write_vector("diag", rows)
        if cols is not None:
            self._write_vector("diag_cols", cols)
        self._set(diag_complete=True)

    def read_diag(self) -> tuple[np.ndarray, np.ndarray]:
        """The raw K(g, g) of the row graphs and of the column graphs (the same array when symmetric)."""
        rows = np.asarray(self.root["diag"][...])
        return rows, rows if self.symmetric else np.asarray(self.root["diag_cols"][...])

    def col_labels(self) -> np.ndarray | None:
        """Class labels of the column graphs: the row labels of a symmetric store."""
        return self.labels() if self.symmetric else self._read("y_cols", optional=True)

    def col_graph_ids(self) -> np.ndarray:
        return self.graph_ids() if self.symmetric else self._read("graph_ids_cols")

    # -------------------------------------------------------------- progress
    def done_mask(self) -> np.ndarray:
        """The done-mask; :class:`StoreError` saying so when it is lost or cannot be decoded."""
        return read_done_mask(self.root)

    def checksums(self) -> np.ndarray | None:
        """The per-tile checksums, None for a store made before they were recorded."""
        return read_checksums(self.root, self.location)

    def save_progress(self, mask: np.ndarray, checksums: np.ndarray | None = None) -> None:
        self._check_fence()
        write_done_mask(self.root, mask, checksums)

    def tiles_done(self) -> int:
        return self.grid.count_done(self.done_mask())

    def mark_complete(self) -> bool:
        """Set ``complete`` iff every tile is on disk (done-mask) and the diagonal is stored.
        Kept embeddings are durable when written (``state.write_embedding``): only their
        folders are synced here. (One left unsynced by an interrupted run of gramdist 0.2 is
        still a cache checked by its digest when read: lost, it is embedded again.)"""
        self._check_fence()
        return mark_group_complete(self.root, self.grid, durable=(EMBEDDINGS,))

    def is_finished(self) -> bool:
        """Marked complete, and the done-mask on disk agrees (what a rerun checks first)."""
        return self.complete and self.mark_complete()

    def tile_target(self, lease: Any = None) -> TileTarget:
        g = self.grid
        return TileTarget(self.location.resolved(), (g.n_rows, g.n_cols), self.dtype, lease, self.checksum_format)

    def write_tile(self, tile: tuple[int, int], block: np.ndarray) -> int:
        """Write tile ``(i, j)`` (and its mirror) from this process in the store's dtype; its checksum."""
        arr = keep_empty(self.root["gram"])
        block = np.asarray(block).astype(arr.dtype, copy=False)
        grid = self.grid
        (r0, r1), (c0, c1) = grid.row_range(tile[0]), grid.col_range(tile[1])
        arr[r0:r1, c0:c1] = block
        if grid.symmetric and tile[0] != tile[1]:
            arr[c0:c1, r0:r1] = block.T
        return tile_checksum(block, self.checksum_format)

    def read_block(self, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
        """``gram[r0:r1, c0:c1]`` as stored (check the store first: :meth:`verify`)."""
        return np.asarray(self.root["gram"][rows[0]:rows[1], cols[0]:cols[1]])

    def rerun_hint(self) -> str:
        """How to recompute unmarked tiles: the job, or ``gramdist append STORE`` for a store
        grown by appends (whose graphs no single job file names)."""
        if self.appends:
            return f"`gramdist append {self.location}` recomputes them (a store grown by appends)"
        return "rerun its job to recompute them"

    def damaged(self, mask: np.ndarray, gram: np.ndarray | None = None) -> dict[tuple[int, int], str]:
        return tile_damage(self.root, self.grid, mask, gram, self.location)

    # -------------------------------------------------------------- reading
    def read_gram(self, *, as_dask: bool = False, allow_incomplete: bool = False) -> tuple[Any, np.ndarray | None]:
        """``(K, y)``, every tile checked against its checksum (not with ``as_dask``)."""
        if self.committing:
            raise StoreError(committing_message(self.location, self.pending_append))
        grid = self.grid
        mask = self.done_mask()
        if not allow_incomplete:
            # the flag and the done-mask must agree: a store whose flag was copied without all
            # of its tiles is not complete
            done = grid.count_done(mask)
            if not self.complete or done < len(grid.tiles()):
                raise StoreError(f"{self.location}: incomplete store ({done} of {len(grid.tiles())} tiles written); "
                                 + ("`gramdist append STORE` finishes it" if self.appends
                                    else "rerun the job to finish it"))
        if as_dask:
            import dask.array as da

            k = da.from_zarr(str(self.location), component="gram")
        else:
            try:
                k = np.asarray(self.root["gram"][...])
            except Exception as exc:  # noqa: BLE001 - name the tiles rather than the codec's error
                bad = self.damaged(mask)
                if not bad:
                    raise StoreError(f"{self.location}: cannot read array 'gram' ({type(exc).__name__}: {exc})") from None
                raise StoreError(damage_message(self.location, grid, bad, self.rerun_hint())) from None
            bad = self.damaged(mask, k)  # one pass over the loaded Gram: cheap next to reading it
            if bad:
                raise StoreError(damage_message(self.location, grid, bad, self.rerun_hint()))
        return k, self.labels()

    # -------------------------------------------------------------- the rest, by concern
    def info(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``gramdist info`` prints): as the store was before an
        append that is running, with the append under ``pending_append``."""
        from gramdist.engine.store.lock import current_writer
        from gramdist.engine.store.staging import pending_progress
        from gramdist.engine.store.upgrade import missing_dimension_names, outdated_checksums

        grid = self.grid
        done = self.tiles_done()
        pending = self.pending_append
        if pending:
            pending = dict(pending)
            progress = pending_progress(self, pending)
            if progress is not None:
                pending["tiles_done"], pending["tiles_total"] = progress
        return {
            "store": str(self.location), "complete": self.complete and done == len(grid.tiles()),
            "shape": [grid.n_rows, grid.n_cols], "dtype": self.dtype, "tile_size": self.tile_size,
            "tiles_done": done, "tiles_total": len(grid.tiles()), "symmetric": self.symmetric,
            "normalize": self._attr("normalize"), "kernel": self.kernel, "kernel_versions": self.kernel_versions,
            "dataset": self.dataset,
            "test_dataset": self.test_dataset, "appends": self.appends, "pending_append": pending,
            "writer": current_writer(self.location), "fit": self.fit, "gramdist_version": self.gramdist_version,
            "stats": self.stats, "needs_upgrade": missing_dimension_names(self),
            "checksum_format": self.checksum_format if self.checksummed else None,
            "outdated_checksums": outdated_checksums(self),
        }

    def verify(self, *, repair: bool = False) -> dict[str, Any]:
        from gramdist.engine.store.repair import verify_gram_store

        return verify_gram_store(self.location, repair=repair)

    def upgrade(self) -> list[str]:
        """Dimension names an older store lacks (what a resumed run adds; metadata only)."""
        from gramdist.engine.store.upgrade import upgrade_gram_store

        return upgrade_gram_store(self)

    def upgrade_checksums(self) -> list[str]:
        """``gramdist upgrade``: checksums that see every value (see :mod:`.upgrade`)."""
        from gramdist.engine.store.upgrade import upgrade_checksums

        return upgrade_checksums(self)

    def embedding_cache(self, lease: Any = None) -> Any:
        """Where a run reads kept embeddings from and keeps new ones: this store, if it keeps them."""
        from gramdist.engine.store.state import EmbeddingCache

        mine = self.location.resolved() if self.keeps_embeddings else None
        return EmbeddingCache(mine, mine, lease, self.embedding_budget())

    @classmethod
    def create_combination(cls, where: str | Location, sources: list[GramStore], weights: list[float],
                           grid: TileGrid, *, dtype: str, overwrite: bool) -> GramStore:
        """A store for Σ w_k K̃_k of ``sources`` (same graphs): its attributes record the
        combination and take the dataset attributes of the first source; its labels and ids
        are the first source's. It holds no fitted state."""
        import gramdist

        first = sources[0]
        provenance = {
            "weights": [float(x) for x in weights],
            "stores": [{"path": s.location.resolved(), "kernel": s.kernel, "normalize": s.normalize, "dtype": s.dtype,
                        "appends": len(s.appends)} for s in sources],
            "normalised": "each store cosine-normalised with its stored K(g, g) before the sum",
        }
        attrs = {
            "gramdist_version": gramdist.__version__, "combination": provenance,
            "kernel": {"name": "combination", "params": {"weights": provenance["weights"],
                                                         "kernels": [p["kernel"] for p in provenance["stores"]]}},
            "dataset": first.dataset, "dataset_checksum": first.dataset_checksum,
            "test_dataset": first.test_dataset, "test_checksum": first.test_checksum,
            "fit": None, "tile_size": grid.tile, "normalize": True,
            "symmetric": grid.symmetric, "dtype": check_dtype(dtype), "job": {},
        }
        store = cls.create(where, grid, attrs, overwrite=overwrite, finish=False)
        store.copy_graph_vectors(first)
        store.finish_creation()
        return store


def is_gram_store(where: str | Location) -> bool:
    """Whether ``where`` is a gramdist Gram store, damaged or not."""
    return store_kind(as_location(where)) == "gram"


def open_gram(store: str | os.PathLike, *, as_dask: bool = False,
              allow_incomplete: bool = False) -> tuple[Any, np.ndarray | None]:
    """Open a Gram store for SVM training: ``(K, y)``.

    While an append runs, the store reads as it was before it (the last complete N graphs);
    during the moment the append commits, a :class:`StoreError` says so (a read that overlaps
    a commit is retried). A damaged tile raises a :class:`StoreError` naming it.

    Parameters
    ----------
    store : path of the store.
    as_dask : return K as a ``dask.array`` with the store's chunks instead of loading it
        (its tiles are then not checked against their checksums: run ``gramdist verify``).
    allow_incomplete : open a store whose job has not finished (missing tiles read as 0).

    Returns
    -------
    K : (R, C) ndarray (or dask array) of the store's dtype (float64, or float32 for a
        ``gram.dtype: float32`` store); ``SVC(kernel="precomputed").fit(K, y)``.
    y : (R,) class labels of the row graphs, or None when the dataset has none.
    """
    location = as_location(store)
    for _ in range(3):
        before = _generation(location)
        k, y = GramStore.open(location).read_gram(as_dask=as_dask, allow_incomplete=allow_incomplete)
        if as_dask or _generation(location) == before:
            return k, y
    raise StoreError(f"{store}: an append committed while it was being read, three times; read it again")


def _generation(location: Location) -> Any:
    try:
        attrs = dict(zarr.open_group(location.zarr_store(), mode="r", zarr_format=3).attrs)
    except Exception:  # noqa: BLE001 - being rewritten this instant: counts as a change
        return None
    return (attrs.get("generation", 0), bool((attrs.get("pending_append") or {}).get("state") == "committing"))


__all__ = ["GramStore", "TileTarget", "is_gram_store", "open_gram", "read_array"]
