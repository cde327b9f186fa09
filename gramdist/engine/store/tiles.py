"""A Gram's tile arrays, beneath :class:`~.gram.GramStore`: ``gram`` laid out in chunks of one
tile, the done-mask (``tiles_done``) and the tile checksums (``tile_checksums``), written whole
from the start; reading those records, finding damaged tiles, marking a group complete; and
:class:`TileTarget`, through which a worker writes its tile. The same code serves a store's
root group and an append's staging group (:mod:`.staging`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from gramdist.engine.store import backup, chunkfiles
from gramdist.engine.store.checksums import CHECKSUM_FORMAT, tile_checksum
from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.groups import blosc, keep_empty, present, zarr
from gramdist.engine.store.layout import GRAM_ARRAYS, GRAM_COORDINATES
from gramdist.engine.store.location import Location, sync_files, sync_tree
from gramdist.errors import StoreError


# ------------------------------------------------------------------------------- layout
def create_tile_arrays(group: Any, grid: TileGrid, dtype: str, compression_level: int,
                       overwrite: bool = False) -> None:
    """``gram``, ``tiles_done`` and ``tile_checksums`` laid out for ``grid`` in ``group``."""
    t = grid.tile
    # A tile larger than the Gram is one chunk of the Gram's size: a (T, T) chunk would make
    # every write allocate T*T floats (7 TiB for tile_size 10**6), whatever the Gram's size.
    chunks = (max(1, min(t, grid.n_rows)), max(1, min(t, grid.n_cols)))
    group.create_array(
        "gram", shape=(grid.n_rows, grid.n_cols), chunks=chunks, dtype=dtype, fill_value=0.0,
        compressors=blosc(compression_level, np.dtype(dtype).itemsize), config={"write_empty_chunks": True},
        dimension_names=GRAM_ARRAYS["gram"].dims, attributes={"coordinates": GRAM_COORDINATES}, overwrite=overwrite,
    )
    for name in ("tiles_done", "tile_checksums"):
        create_record_array(group, name, grid, overwrite)


def create_record_array(group: Any, name: str, grid: TileGrid, overwrite: bool = False) -> Any:
    """The done-mask or the checksums: one chunk, written at once (zeros), so that a chunk file
    that is gone later means lost data, never "nothing written yet"."""
    spec = GRAM_ARRAYS[name]
    arr = group.create_array(name, shape=grid.shape, chunks=grid.shape, dtype=spec.dtype, fill_value=0,
                             config={"write_empty_chunks": True}, overwrite=overwrite, dimension_names=spec.dims)
    arr[...] = 0
    return arr


def folder_of(group: Any) -> Any:
    """The folder of ``group`` (a store or one of its groups): a ``Path`` on disk, or a
    ``upath.UPath`` in an object store."""
    from pathlib import Path

    store = group.store
    if hasattr(store, "root"):  # zarr's LocalStore
        base = Path(store.root)
        return base / group.path if group.path else base
    return Location(store.fs.unstrip_protocol(store.path)).child(group.path)  # its FsspecStore: a bucket


def chunk_exists(group: Any, name: str, chunk: tuple[int, ...]) -> bool:
    return (folder_of(group) / name / group[name].metadata.encode_chunk_key(chunk)).is_file()


def chunk_name(group: Any, name: str, chunk: tuple[int, ...]) -> str:
    return f"{name}/{group[name].metadata.encode_chunk_key(chunk)}"


def grid_of(group: Any) -> TileGrid:
    return TileGrid(group["gram"].shape[0], group["gram"].shape[1], group.attrs["tile_size"],
                    group.attrs["symmetric"])


# ------------------------------------------------------------------------------- records
def read_record(group: Any, name: str) -> tuple[np.ndarray | None, str | None]:
    """``(values, None)`` of the done-mask or the checksums, ``(None, None)`` when a store made
    before checksums has none, ``(None, what is wrong)`` when it is lost or undecodable."""
    checksummed = bool(group.attrs.get("checksummed"))
    if not present(group, name):
        return None, ("is missing" if checksummed or name == "tiles_done" else None)
    try:
        values = np.asarray(group[name][...])
    except Exception as exc:  # noqa: BLE001 - a codec error, a truncated chunk
        return None, f"cannot be decoded ({type(exc).__name__}: {exc})"
    # stores that record checksums write both records whole from the start: no chunk is lost data
    if checksummed and not chunk_exists(group, name, (0, 0)):
        return None, f"is missing (its chunk file {chunk_name(group, name, (0, 0))} is gone)"
    return values, None


def record_message(where: Any, name: str, problem: str) -> str:
    if name == "tiles_done":
        return (f"{where}: the done-mask (tiles_done) {problem}: which tiles are written is unknown, so the store "
                f"cannot be read or resumed as it stands; `gramdist verify --repair {where}` rebuilds it from the "
                "tile checksums")
    return (f"{where}: the tile checksums (tile_checksums) {problem}: the Gram's tiles can no longer be checked; "
            f"`gramdist verify --repair {where}` records them again from the tiles that are on disk and decode "
            "(trusting their values; a symmetric store's mirrors must agree) and unmarks the others")


def read_done_mask(group: Any) -> np.ndarray:
    mask, problem = read_record(group, "tiles_done")
    if problem:
        raise StoreError(record_message(folder_of(group), "tiles_done", problem))
    return np.asarray(mask, dtype=bool)


def read_checksums(group: Any, where: Any) -> np.ndarray | None:
    sums, problem = read_record(group, "tile_checksums")
    if problem:
        raise StoreError(record_message(where, "tile_checksums", problem))
    return None if sums is None else sums.astype(np.uint64)


def write_done_mask(group: Any, mask: np.ndarray, checksums: np.ndarray | None = None) -> None:
    """Save the done-mask; the checksums of its tiles first, so a tile marked done on disk
    always has its checksum there too."""
    if checksums is not None:
        keep_empty(group["tile_checksums"])[...] = checksums
    keep_empty(group["tiles_done"])[...] = mask.astype(np.uint8)


def mark_group_complete(group: Any, grid: TileGrid, durable: tuple[str, ...] = ()) -> bool:
    """Set ``complete`` iff every tile is marked done on disk, the diagonal and the fitted state
    are stored and no label or id awaits rewriting; a store that completes is synced to disk and
    keeps a copy of its attributes. ``durable``: subfolders whose files are on disk already (see
    :func:`sync_tree`)."""
    mask = read_done_mask(group)
    attrs = group.attrs
    whole = (bool(attrs.get("diag_complete")) and not attrs.get("damaged_vectors")
             and bool(attrs.get("state_complete") or attrs.get("combination")))
    done = whole and all(mask[i, j] for i, j in grid.tiles())
    if done:  # every byte on disk before the flag says so
        sync_tree(folder_of(group), durable=durable)
    group.attrs["complete"] = bool(done)
    if done and "tile_checksums" in group:
        backup.save_backup(group)
        sync_tree(folder_of(group), files=False)
    return done


# ------------------------------------------------------------------------------- damage
def tile_damage(group: Any, grid: TileGrid, mask: np.ndarray, gram: np.ndarray | None = None,
                where: Any = "store") -> dict[tuple[int, int], str]:
    """Tiles marked done in ``mask`` that are damaged on disk, with what is wrong.

    A tile is damaged when its chunk (or its mirror's) is missing, cannot be decoded, or holds
    values that no longer match the checksum recorded when it was written. ``gram`` is the
    Gram if already loaded. A store made before checksums is checked for undecodable chunks only.
    """
    sums = read_checksums(group, where)
    fmt = checksum_format(group)
    arr = group["gram"]
    bad: dict[tuple[int, int], str] = {}
    for i, j in grid.tiles():
        if not mask[i, j]:
            continue
        places = [(i, j)] + ([(j, i)] if grid.symmetric and i != j else [])
        for ci, cj in places:
            (r0, r1), (c0, c1) = grid.row_range(ci), grid.col_range(cj)
            chunk = chunk_name(group, "gram", (ci, cj))
            try:
                block = np.asarray(arr[r0:r1, c0:c1] if gram is None else gram[r0:r1, c0:c1])
            except Exception as exc:  # noqa: BLE001 - codec errors come in several types
                bad[(i, j)] = f"chunk {chunk} cannot be decoded ({type(exc).__name__}: {exc})"
                break
            # a chunk file that is absent reads as zeros: damage unless the tile was all zeros
            # (stores before 0.2 did not write such tiles), which its checksum tells; a mirror
            # is checked transposed, so one that disagrees with its tile is damage too
            if sums is not None and tile_checksum(block if (ci, cj) == (i, j) else block.T, fmt) != int(sums[i, j]):
                what = "its mirror of the tile" if (ci, cj) != (i, j) else "the tile"
                bad[(i, j)] = (f"chunk {chunk} ({what}) does not match the checksum recorded when the tile was written"
                               if chunk_exists(group, "gram", (ci, cj)) else
                               f"chunk {chunk} is missing (it reads as zeros)")
                break
    return bad


def checksum_format(group: Any) -> int:
    """The checksum format of a store or staging group (1 for stores made before 0.3)."""
    return int(group.attrs.get("checksum_format", 1))


def damage_message(store: Any, grid: TileGrid, bad: dict[tuple[int, int], str], hint: str) -> str:
    shown = "; ".join(f"{grid.label(tl)} ({why})" for tl, why in sorted(bad.items())[:3])
    more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{store}: {len(bad)} tile(s) damaged on disk (a chunk lost, undecodable, or not matching the "
            f"checksum recorded when it was written): {shown}{more}; run `gramdist verify --repair {store}`, then {hint}")


def committing_message(store: Any, pending: dict[str, Any]) -> str:
    a, b = pending.get("from", ["?"])[0], pending.get("to", ["?"])[0]
    return (f"{store}: an append ({a} -> {b} graphs) is being committed; read it again in a moment (if that append "
            f"was interrupted, `gramdist append {store}` finishes it)")


# ------------------------------------------------------------------------------- worker writes
@lru_cache(maxsize=8)
def _open_gram_array(path: str, version: tuple[Any, ...]) -> Any:
    """``version``: of the array's metadata (inode and mtime, or an object's ETag): a store
    replaced at the same path is opened anew."""
    return keep_empty(zarr.open_array(_zarr_store(path), path="gram", mode="r+", zarr_format=3))


@lru_cache(maxsize=4)
def _open_prior_array(path: str, version: tuple[Any, ...]) -> Any:
    return zarr.open_array(_zarr_store(path), path="gram", mode="r", zarr_format=3)


def _zarr_store(path: str) -> Any:
    return Location(path).zarr_store()


@dataclass(frozen=True)
class TileTarget:
    """Where a tile task writes its tile: the ``gram`` array of a store (or of an append's
    staging group) at ``path``, of ``shape`` and ``dtype``. Picklable; opened once per worker.
    ``prior``: the store an append grows, whose Gram holds the known part of the tiles that
    straddle its old edge (:meth:`read_known`).

    The array is cached per process, keyed by the identity of its metadata file and checked
    against the expected layout: a worker that outlives one store never writes with the
    chunking or codecs of an earlier store made at the same path.
    """

    path: str
    shape: tuple[int, int]
    dtype: str
    lease: Any = None  # a :class:`~.lock.Lease` checked before every write (None: unfenced)
    checksum_format: int = CHECKSUM_FORMAT
    prior: str | None = None

    def read_known(self, grid: TileGrid, tile: tuple[int, int], known: tuple[int, int],
                   checksum: int | None) -> np.ndarray:
        """The first ``known`` rows × columns of ``tile`` as ``prior`` holds them — the whole of
        its old tile — checked against that tile's recorded ``checksum`` (damage is never
        carried into a tile checksummed anew), as float64 (a float32 store's values widen
        exactly, so rounding them again gives the same bits)."""
        arr = _open_prior_array(self.prior, Location(self.prior).version("gram", "zarr.json"))
        r0, c0 = grid.row_range(tile[0])[0], grid.col_range(tile[1])[0]
        old = np.asarray(arr[r0:r0 + known[0], c0:c0 + known[1]])
        if checksum is not None and tile_checksum(old, self.checksum_format) != checksum:
            raise StoreError(f"{self.prior}: its tile ({tile[0]}, {tile[1]}) does not match the checksum recorded "
                             f"when it was written; run gramdist verify --repair {self.prior}, then append again")
        return old.astype(np.float64)

    def array(self) -> Any:
        version = self._version()
        arr = _open_gram_array(self.path, version)
        if (tuple(arr.shape), str(arr.dtype)) != (tuple(self.shape), str(self.dtype)):
            _open_gram_array.cache_clear()
            arr = _open_gram_array(self.path, version)
        return arr

    def _version(self) -> tuple[Any, ...]:
        """What identifies the store's Gram array for the cache of opened arrays: its metadata
        file's inode and mtime (a stat); in a bucket, where that is a request per tile, the
        writer's lease (one writer per lease: the store is not replaced under it)."""
        location = Location(self.path)
        if location.remote and self.lease is not None:
            return (self.lease.token,)
        return location.version("gram", "zarr.json")

    def write(self, grid: TileGrid, tile: tuple[int, int], block: np.ndarray) -> int:
        """Write ``block`` as tile ``(i, j)`` (and its mirror when symmetric); its checksum.
        :class:`~.lock.LeaseLost` first if this run no longer holds the store."""
        if self.lease is not None:
            self.lease.check()
        rows, cols = grid.row_range(tile[0]), grid.col_range(tile[1])
        gram, location = self.array(), Location(self.path)
        pieces = [(tile, (rows, cols), block)]
        if grid.symmetric and tile[0] != tile[1]:
            pieces.append((tile[::-1], (cols, rows), block.T))
        by_zarr = []
        for chunk, region, values in pieces:
            if not chunkfiles.write_chunk(gram, location, chunk, region, values):
                (r0, r1), (c0, c1) = region
                gram[r0:r1, c0:c1] = values
                by_zarr.append(chunk)
        sync_files(folder_of(gram), [gram.metadata.encode_chunk_key(c) for c in by_zarr])
        return tile_checksum(block, self.checksum_format)
