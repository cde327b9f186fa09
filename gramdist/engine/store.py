"""The Zarr v3 store a Gram job writes: layout, fingerprints, state, done-mask, reading.

Layout of a store (a Zarr v3 group on disk)::

    gram          (R, C) float64, chunks (T, T)  the Gram; symmetric stores have R == C
    diag          (R,)   float64  raw K(g, g) of the row graphs (before normalisation)
    diag_cols     (C,)   float64  raw K(g, g) of the column graphs (rectangular stores only)
    y, y_cols     (R,), (C,)      graph class labels when the dataset has them
    graph_ids, graph_ids_cols     identifiers of the graphs in their source
    tiles_done    (R/T, C/T) uint8  1 where the tile has been written (the resume record)
    fit_indices   (k,)   int64    indices (into the fit dataset) of the fit sample
    state/        group: the kernel's fitted arrays; its attributes hold the kernel's JSON state

Group attributes: ``gramdist_version``, ``kernel`` (name, params), ``dataset`` and
``test_dataset`` (spec, name, checksum, n_graphs), ``fit`` (seed, sample_size, from_store),
``tile_size``, ``normalize``, ``symmetric``, ``state_complete``, ``diag_complete``,
``complete``, ``job`` (the resolved job), ``stats``.

Only the client process writes attributes and the small arrays; workers write whole ``gram``
chunks, each tile task its own chunks, so writes never overlap. ``complete`` becomes true only
after the done-mask read back from disk is all ones. Nothing here unpickles anything.
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
    root.attrs.update(as_jsonable(attrs) | {"complete": False, "state_complete": False, "diag_complete": False})
    return root


def open_store(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """Open an existing store; :class:`StoreError` if it is not a gramdist store."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such store")
    try:
        root = zarr.open_group(str(path), mode=mode)
    except Exception as exc:  # zarr raises several types for a non-store folder
        raise StoreError(f"{path}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{path}: not a gramdist store (no gramdist_version attribute)")
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
    """Load the kernel state of a store (arrays and JSON attributes; no pickles)."""
    root = open_store(path)
    if not root.attrs.get("state_complete"):
        raise StoreError(f"{path}: the fitted state was never completely written")
    group = root["state"]
    names = group.attrs.get("arrays", [])
    arrays = {name: read_array(group, name, f"{path}/state") for name in names}
    return KernelState.from_store_parts(arrays, group.attrs.get("kernel_attrs", {}))


@lru_cache(maxsize=8)
def gram_array(path: str) -> zarr.Array:
    """The ``gram`` array of a store, opened once per worker process for tile writes."""
    return zarr.open_array(path, path="gram", mode="r+")


def read_done_mask(root: zarr.Group) -> np.ndarray:
    return np.asarray(root["tiles_done"][...], dtype=bool)


def write_done_mask(root: zarr.Group, mask: np.ndarray) -> None:
    root["tiles_done"][...] = mask.astype(np.uint8)


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
    as_dask : return K as a ``dask.array`` with the store's chunks instead of loading it.
    allow_incomplete : open a store whose job has not finished (missing tiles read as 0).

    Returns
    -------
    K : (R, C) float64 ndarray (or dask array); ``SVC(kernel="precomputed").fit(K, y)``.
    y : (R,) class labels of the row graphs, or None when the dataset has none.
    """
    root = open_store(store)
    if not allow_incomplete:
        # the flag and the done-mask must agree (as in store_info): a store whose flag was
        # copied without all of its tiles is not complete
        grid = TileGrid(root["gram"].shape[0], root["gram"].shape[1], root.attrs["tile_size"],
                        root.attrs["symmetric"])
        mask = read_done_mask(root)
        done = sum(int(mask[i, j]) for i, j in grid.tiles())
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
    y = read_array(root, "y", store, optional=True)
    return k, y


def store_info(store: str | os.PathLike) -> dict[str, Any]:
    """A JSON-ready summary of a store (what ``gramdist info`` prints)."""
    root = open_store(store)
    attrs = dict(root.attrs)
    grid = TileGrid(root["gram"].shape[0], root["gram"].shape[1], attrs["tile_size"], attrs["symmetric"])
    mask = read_done_mask(root)
    todo = grid.tiles()
    done = sum(int(mask[i, j]) for i, j in todo)
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
