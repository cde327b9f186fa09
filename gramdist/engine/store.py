"""The Zarr v3 store a Gram job writes: layout, fingerprints, state, done-mask, reading.

Layout of a store (a Zarr v3 group on disk)::

    gram          (R, C) float64, chunks (T, T)  the Gram; symmetric stores have R == C
    diag          (R,)   float64  raw K(g, g) of the row graphs (before normalisation)
    diag_cols     (C,)   float64  raw K(g, g) of the column graphs (rectangular stores only)
    y, y_cols     (R,), (C,)      graph class labels when the dataset has them
    graph_ids, graph_ids_cols     identifiers of the graphs in their source
    tiles_done    (R/T, C/T) uint8  1 where the tile has been written (the resume record)
    tile_checksums (R/T, C/T) uint64  checksum of each written tile (:func:`tile_checksum`)
    fit_indices   (k,)   int64    indices (into the fit dataset) of the fit sample
    state/        group: the kernel's fitted arrays; its attributes hold the kernel's JSON state

Group attributes: ``gramdist_version``, ``kernel`` (name, params), ``dataset`` and
``test_dataset`` (spec, name, checksum, n_graphs), ``fit`` (seed, sample_size, from_store),
``tile_size``, ``normalize``, ``symmetric``, ``state_complete``, ``diag_complete``,
``complete``, ``job`` (the resolved job), ``stats``.

Only the client process writes attributes and the small arrays; workers write whole ``gram``
chunks, each tile task its own chunks, so writes never overlap. ``complete`` becomes true only
after the done-mask read back from disk is all ones. Each tile task returns the checksum of
what it wrote, which the client saves with the done-mask (checksums first), so a chunk later
lost or damaged on disk is caught on reading (:func:`open_gram`, :func:`verify_store`) instead
of being read as zeros. Nothing here unpickles anything.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import zarr
import zarr.codecs

from gramdist.errors import StoreError
from gramdist.kernels.base import KernelState, as_jsonable

# Attributes that must agree between a store and a job rerun into it.
FINGERPRINT_KEYS = ("kernel", "dataset_checksum", "test_checksum", "fit", "tile_size", "normalize", "symmetric")


@dataclass(frozen=True)
class TileGrid:
    """The tiles of an (R, C) Gram with square tiles of side ``tile``."""

    n_rows: int
    n_cols: int
    tile: int
    symmetric: bool

    @property
    def shape(self) -> tuple[int, int]:
        return (math.ceil(self.n_rows / self.tile), math.ceil(self.n_cols / self.tile))

    def row_range(self, i: int) -> tuple[int, int]:
        return i * self.tile, min((i + 1) * self.tile, self.n_rows)

    def col_range(self, j: int) -> tuple[int, int]:
        return j * self.tile, min((j + 1) * self.tile, self.n_cols)

    def tiles(self) -> list[tuple[int, int]]:
        """Tiles to compute, row-major; only j >= i when symmetric (mirrors fill the rest)."""
        r, c = self.shape
        if self.symmetric:
            return [(i, j) for i in range(r) for j in range(i, c)]
        return [(i, j) for i in range(r) for j in range(c)]


def create_store(
    path: str | os.PathLike,
    grid: TileGrid,
    attrs: dict[str, Any],
    *,
    compression_level: int = 1,
    overwrite: bool = False,
) -> zarr.Group:
    """Create a new store laid out for ``grid``; refuse to clobber an existing one."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise StoreError(f"{path}: already exists")
    root = zarr.open_group(str(path), mode="w" if overwrite else "w-", zarr_format=3)
    t = grid.tile
    # A tile larger than the Gram is one chunk of the Gram's size: a (T, T) chunk would make
    # every write allocate T*T floats (7 TiB for tile_size 10**6), whatever the Gram's size.
    chunks = (max(1, min(t, grid.n_rows)), max(1, min(t, grid.n_cols)))
    # Blosc LZ4 with byte shuffle: a float64 Gram's exponent bytes compress, its mantissas
    # hardly; measured here it writes a 2 MiB tile ~2x faster than Zstd level 1 (5.7 vs 13.6 ms,
    # multi-threaded) and stores it smaller (87% vs 92% of raw on a normalised WL Gram).
    compressors = (zarr.codecs.BloscCodec(cname="lz4", clevel=min(compression_level, 9), shuffle="shuffle",
                                          typesize=8)
                   if compression_level > 0 else None)
    root.create_array(
        "gram", shape=(grid.n_rows, grid.n_cols), chunks=chunks, dtype="float64", fill_value=0.0,
        compressors=compressors, config={"write_empty_chunks": True},
        dimension_names=("row_graph", "col_graph"),
    )
    root.create_array("tiles_done", shape=grid.shape, chunks=grid.shape, dtype="uint8", fill_value=0)
    root.create_array("tile_checksums", shape=grid.shape, chunks=grid.shape, dtype="uint64", fill_value=0)
    root.attrs.update(as_jsonable(attrs) | {"complete": False, "state_complete": False, "diag_complete": False})
    return root


def open_group(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """Open any gramdist store (a Gram store or a feature store) as a group, unchecked beyond
    its ``gramdist_version``; :class:`StoreError` if it is not one."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such store")
    try:
        root = zarr.open_group(str(path), mode=mode)
    except Exception as exc:  # zarr raises several types for a non-store folder
        raise StoreError(f"{path}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{path}: not a gramdist store (no gramdist_version attribute)")
    return root


def open_store(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """Open an existing Gram store; :class:`StoreError` if it is not a gramdist Gram store."""
    path = Path(path)
    root = open_group(path, mode)
    if root.attrs.get("store_kind", "gram") != "gram":
        raise StoreError(f"{path}: a {root.attrs['store_kind']} store, not a Gram store")
    try:
        missing = [name for name in ("gram", "tiles_done") if name not in root]
        for name in ("gram", "tiles_done"):
            if name not in missing:
                root[name]  # parse the metadata now: unknown codecs or data types fail here
    except Exception as exc:  # zarr refuses what it cannot decode (e.g. pickle codecs): say so
        raise StoreError(f"{path}: unreadable store metadata ({type(exc).__name__}: {exc})") from None
    if missing:  # e.g. a copy cut short: never a KeyError traceback later
        raise StoreError(f"{path}: not a complete gramdist store (no {' or '.join(missing)} array); "
                         "rerun its job with --overwrite")
    return root


def read_array(group: zarr.Group, name: str, where: str | os.PathLike, optional: bool = False) -> Any:
    """``group[name]`` as NumPy (None if ``optional`` and absent); :class:`StoreError` when it
    is missing or cannot be decoded."""
    try:
        if optional and name not in group:
            return None
        return np.asarray(group[name][...])
    except Exception as exc:
        raise StoreError(f"{where}: cannot read array {name!r} ({type(exc).__name__}: {exc})") from None


def fingerprint_mismatch(root: zarr.Group, attrs: dict[str, Any]) -> list[str]:
    """Names of fingerprint attributes that differ between ``root`` and ``attrs``."""
    stored = dict(root.attrs)
    new = json.loads(json.dumps(as_jsonable(attrs)))
    return [k for k in FINGERPRINT_KEYS if stored.get(k) != new.get(k)]


def write_vector(root: zarr.Group, name: str, values: np.ndarray) -> None:
    """(Over)write a small 1-D array (diag, labels, ids) written by the client only."""
    values = np.asarray(values)
    arr = root.create_array(name, shape=values.shape, chunks=(max(1, len(values)),), dtype=values.dtype,
                            fill_value=0, overwrite=True)
    arr[...] = values


def write_graph_vectors(root: zarr.Group, rows: Any, cols: Any = None) -> None:
    """Class labels and ids of the row graphs (and of the column graphs of a rectangular store)."""
    for batch, suffix in ((rows, ""), (cols, "_cols")):
        if batch is None:
            continue
        if batch.y is not None:
            write_vector(root, f"y{suffix}", batch.y)
        write_vector(root, f"graph_ids{suffix}", batch.graph_ids)


def write_diag(root: zarr.Group, rows: np.ndarray, cols: np.ndarray | None = None) -> None:
    """Store the raw K(g, g) of the row graphs (and of the columns when rectangular)."""
    write_vector(root, "diag", rows)
    if cols is not None:
        write_vector(root, "diag_cols", cols)
    root.attrs["diag_complete"] = True


def read_diag(root: zarr.Group) -> tuple[np.ndarray, np.ndarray]:
    """The stored raw K(g, g) of the row graphs and of the column graphs (the same array for
    a symmetric store)."""
    rows = np.asarray(root["diag"][...])
    return rows, rows if root.attrs.get("symmetric", True) else np.asarray(root["diag_cols"][...])


def read_labels(root: zarr.Group, where: str | os.PathLike) -> np.ndarray | None:
    """Class labels (or targets) of the row graphs; None when the dataset has none."""
    return read_array(root, "y", where, optional=True)  # not `"y" in root`: zarr's lookup can raise


def read_graph_ids(root: zarr.Group, where: str | os.PathLike) -> np.ndarray:
    return read_array(root, "graph_ids", where)


def read_fit_indices(root: zarr.Group, where: str | os.PathLike) -> np.ndarray:
    return read_array(root, "fit_indices", where)


def read_kernel_attrs(root: zarr.Group) -> dict[str, Any]:
    """The JSON part of the fitted state ({} when the store has no state yet)."""
    return dict(root["state"].attrs.get("kernel_attrs", {})) if "state" in root else {}


def record_stats(root: zarr.Group, timings: dict[str, float]) -> None:
    """Merge a run's phase timings (seconds) into the ``stats`` attribute."""
    stats = dict(root.attrs.get("stats", {}))
    stats.update({k: round(v, 4) for k, v in timings.items()})
    root.attrs["stats"] = stats


def write_state(root: zarr.Group, state: KernelState, fit_indices: np.ndarray) -> None:
    """Persist the kernel state as arrays + JSON attributes, then mark it complete."""
    group = root.require_group("state")
    for name, value in state.arrays.items():
        value = np.ascontiguousarray(value)
        arr = group.create_array(name, shape=value.shape, chunks=value.shape if value.size else None,
                                 dtype=value.dtype, fill_value=0, overwrite=True)
        if value.size:
            arr[...] = value
    group.attrs.update({"kernel_attrs": as_jsonable(state.attrs), "arrays": sorted(state.arrays)})
    write_vector(root, "fit_indices", np.asarray(fit_indices, dtype=np.int64))
    root.attrs["state_complete"] = True


def read_state(path: str | os.PathLike) -> KernelState:
    """Load the kernel state of a store, Gram or feature store (arrays and JSON attributes;
    no pickles)."""
    root = open_group(path)
    if not root.attrs.get("state_complete"):
        raise StoreError(f"{path}: the fitted state was never completely written")
    try:
        group = root["state"]
    except Exception as exc:  # missing, or metadata zarr refuses to decode
        raise StoreError(f"{path}: cannot read the fitted state ({type(exc).__name__}: {exc})") from None
    names = group.attrs.get("arrays", [])
    arrays = {name: read_array(group, name, f"{path}/state") for name in names}
    return KernelState.from_store_parts(arrays, group.attrs.get("kernel_attrs", {}))


@lru_cache(maxsize=8)
def gram_array(path: str) -> zarr.Array:
    """The ``gram`` array of a store, opened once per worker process for tile writes."""
    return zarr.open_array(path, path="gram", mode="r+")


def read_done_mask(root: zarr.Group) -> np.ndarray:
    return np.asarray(root["tiles_done"][...], dtype=bool)


def read_checksums(root: zarr.Group, where: str | os.PathLike = "store") -> np.ndarray | None:
    """The per-tile checksums, or None for a store made before they were recorded;
    :class:`StoreError` naming ``where`` if they cannot be decoded."""
    sums = read_array(root, "tile_checksums", where, optional=True)
    return None if sums is None else sums.astype(np.uint64)


def write_done_mask(root: zarr.Group, mask: np.ndarray, checksums: np.ndarray | None = None) -> None:
    """Save the done-mask; the checksums of its tiles first, so a tile marked done on disk
    always has its checksum there too."""
    if checksums is not None:
        root["tile_checksums"][...] = checksums
    root["tiles_done"][...] = mask.astype(np.uint8)


def tile_checksum(block: np.ndarray) -> int:
    """Checksum of a float64 block: the sum of its 64-bit patterns modulo 2**64.

    Integer arithmetic, so the value is exact and independent of the summation order, the
    machine and the block's orientation (a mirrored tile has its source's checksum). A chunk
    that is missing (read as zeros) or has a changed word no longer matches.
    """
    words = np.ascontiguousarray(block, dtype=np.float64).view(np.uint64)
    return int(np.add.reduce(words, axis=None, dtype=np.uint64))


def damaged_tiles(root: zarr.Group, grid: TileGrid, mask: np.ndarray, gram: np.ndarray | None = None,
                  where: str | os.PathLike = "store") -> list[tuple[int, int]] | None:
    """Tiles marked done in ``mask`` whose stored values (and mirror) no longer match their checksum.

    ``gram`` is the store's Gram if already loaded (else each tile is read from disk). Returns
    None when the store has no checksums to check against (made by an older gramdist).
    """
    sums = read_checksums(root, where)
    if sums is None:
        return None
    source = root["gram"] if gram is None else gram
    bad = []
    for i, j in grid.tiles():
        if not mask[i, j]:
            continue
        (r0, r1), (c0, c1) = grid.row_range(i), grid.col_range(j)
        regions = [(slice(r0, r1), slice(c0, c1))]
        if grid.symmetric and i != j:
            regions.append((slice(c0, c1), slice(r0, r1)))
        if any(tile_checksum(np.asarray(source[region])) != int(sums[i, j]) for region in regions):
            bad.append((i, j))
    return bad


def _damage_message(store: str | os.PathLike, grid: TileGrid, bad: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"({i}, {j}): rows {grid.row_range(i)[0]}..{grid.row_range(i)[1] - 1}, "
                      f"columns {grid.col_range(j)[0]}..{grid.col_range(j)[1] - 1}" for i, j in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{store}: {len(bad)} tile(s) do not match the checksum recorded when they were written "
            f"(a chunk lost or damaged on disk): tile {shown}{more}")


def verify_store(store: str | os.PathLike, *, repair: bool = False) -> dict[str, Any]:
    """Check every written tile of a store against its checksum (what ``gramdist verify`` does).

    With ``repair``, damaged tiles are unmarked in the done-mask and the store is marked
    incomplete, so rerunning its job recomputes just those tiles.

    Returns a JSON-ready dict: ``store``, ``checked`` (tiles compared), ``damaged`` (list of
    ``[i, j]``), ``verifiable`` (False for a store without checksums), ``message``.
    """
    root = open_store(store, mode="r+" if repair else "r")
    grid = _grid_of(root)
    mask = read_done_mask(root)
    bad = damaged_tiles(root, grid, mask, where=store)
    if bad is None:
        return {"store": str(store), "verifiable": False, "checked": 0, "damaged": [],
                "message": f"{store}: no tile checksums (made before gramdist recorded them); nothing to verify"}
    checked = _count_done(mask, grid)
    message = f"{store}: all {checked} written tiles match their checksums"
    if bad:
        message = _damage_message(store, grid, bad)
        if repair:
            for tl in bad:
                mask[tl] = False
            root.attrs["complete"] = False
            write_done_mask(root, mask)
            message += "; unmarked them: rerun the job to recompute them"
        else:
            message += "; run `gramdist verify --repair` and rerun the job to recompute them"
    return {"store": str(store), "verifiable": True, "checked": checked,
            "damaged": [list(tl) for tl in bad], "message": message}


def _count_done(mask: np.ndarray, grid: TileGrid) -> int:
    """Tiles of ``grid`` (the ones computed) marked done in ``mask``."""
    return sum(int(mask[i, j]) for i, j in grid.tiles())


def _grid_of(root: zarr.Group) -> TileGrid:
    return TileGrid(root["gram"].shape[0], root["gram"].shape[1], root.attrs["tile_size"],
                    root.attrs["symmetric"])


def mark_complete(root: zarr.Group, grid: TileGrid) -> bool:
    """Set ``complete`` iff every tile is marked done on disk and the diagonal is stored."""
    mask = read_done_mask(root)
    done = bool(root.attrs.get("diag_complete")) and all(mask[i, j] for i, j in grid.tiles())
    root.attrs["complete"] = bool(done)
    return done


def open_gram(
    store: str | os.PathLike, *, as_dask: bool = False, allow_incomplete: bool = False
) -> tuple[Any, np.ndarray | None]:
    """Open a Gram store for SVM training: ``(K, y)``.

    Parameters
    ----------
    store : path of the store.
    as_dask : return K as a ``dask.array`` with the store's chunks instead of loading it
        (its tiles are then not checked against their checksums: run :func:`verify_store`).
    allow_incomplete : open a store whose job has not finished (missing tiles read as 0).

    Returns
    -------
    K : (R, C) float64 ndarray (or dask array); ``SVC(kernel="precomputed").fit(K, y)``.
    y : (R,) class labels of the row graphs, or None when the dataset has none.
    """
    root = open_store(store)
    grid = _grid_of(root)
    mask = read_done_mask(root)
    if not allow_incomplete:
        # the flag and the done-mask must agree (as in store_info): a store whose flag was
        # copied without all of its tiles is not complete
        done = _count_done(mask, grid)
        if not root.attrs.get("complete") or done < len(grid.tiles()):
            raise StoreError(
                f"{store}: incomplete store ({done} of {len(grid.tiles())} tiles written); "
                "rerun the job to finish it"
            )
    if as_dask:
        import dask.array as da

        k = da.from_zarr(str(store), component="gram")
    else:
        k = read_array(root, "gram", store)
        bad = damaged_tiles(root, grid, mask, k, store)  # one pass over the loaded Gram: cheap next to reading it
        if bad:
            raise StoreError(_damage_message(store, grid, bad) + "; run `gramdist verify --repair "
                             f"{store}` and rerun the job to recompute them")
    y = read_array(root, "y", store, optional=True)
    return k, y


def store_info(store: str | os.PathLike) -> dict[str, Any]:
    """A JSON-ready summary of a store (what ``gramdist info`` prints)."""
    root = open_store(store)
    attrs = dict(root.attrs)
    grid = _grid_of(root)
    todo = grid.tiles()
    done = _count_done(read_done_mask(root), grid)
    return {
        "store": str(store),
        "complete": bool(attrs.get("complete")) and done == len(todo),
        "shape": list(root["gram"].shape),
        "tile_size": attrs["tile_size"],
        "tiles_done": done,
        "tiles_total": len(todo),
        "symmetric": attrs["symmetric"],
        "normalize": attrs.get("normalize"),
        "kernel": attrs.get("kernel"),
        "dataset": attrs.get("dataset"),
        "test_dataset": attrs.get("test_dataset"),
        "fit": attrs.get("fit"),
        "gramdist_version": attrs.get("gramdist_version"),
        "stats": attrs.get("stats", {}),
    }
