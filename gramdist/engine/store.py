"""The Zarr v3 store a Gram job writes: layout, fingerprints, state, done-mask, reading.

Layout of a store (a Zarr v3 group on disk)::

    gram          (R, C) float64 or float32 (``dtype``), chunks (T, T)  the Gram; symmetric: R == C
    diag          (R,)   float64  raw K(g, g) of the row graphs (before normalisation)
    diag_cols     (C,)   float64  raw K(g, g) of the column graphs (rectangular stores only)
    y, y_cols     (R,), (C,)      graph class labels when the dataset has them
    graph_ids, graph_ids_cols     identifiers of the graphs in their source
    tiles_done    (R/T, C/T) uint8  1 where the tile has been written (the resume record)
    tile_checksums (R/T, C/T) uint64  checksum of each written tile (:func:`tile_checksum`)
    fit_indices   (k,)   int64    indices (into the fit dataset) of the fit sample
    state/        group: the kernel's fitted arrays; its attributes hold the kernel's JSON state

Every array names its dimensions (:data:`DIMENSIONS`), so ``xarray.open_zarr(store)`` gives the
Gram labelled by graph id on both axes (``graph_ids`` x ``graph_ids_cols``; a symmetric store
holds ``graph_ids_cols`` too), with ``y`` and ``diag`` along them as coordinates and the tile
bookkeeping on its own dimensions. Stores made before dimension names (gramdist 0.1.0) are
read as they are by gramdist; :func:`upgrade_store` (``gramdist upgrade``) adds the names.

Group attributes: ``gramdist_version``, ``kernel`` (name, params), ``dataset`` and
``test_dataset`` (spec, name, checksum, n_graphs), ``fit`` (seed, sample_size, from_store),
``tile_size``, ``normalize``, ``symmetric``, ``dtype`` (of the Gram; absent means float64),
``state_complete``, ``diag_complete``, ``complete``, ``job`` (the resolved job), ``stats``,
``checksummed`` (the store records tile checksums: their loss is damage, not an old store),
``appends`` (one record per append: source, graphs, checksum, rows), ``generation`` (bumped
when an append is committed) and, while an append runs, ``pending_append``. The attributes of
the group and the metadata of ``gram`` are copied into the attributes of ``tile_checksums``
(``backup``) when the store completes, so ``verify --repair`` can restore them if lost.

An append computes into a staging group ``pending_<token>/`` (its own ``gram`` of the grown
shape, done-mask, checksums, vectors): the main arrays keep describing the store as it was
until :func:`commit_pending` moves the new chunks in (see :mod:`gramdist.engine.append`).

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

from gramdist.arrayops import digest_arrays
from gramdist.errors import StoreError
from gramdist.kernels.base import GraphKernel, KernelState, as_jsonable
from gramdist.lazy import lazy_import

# imported on first use (with its codecs): a Gram computed in memory never touches a store
zarr = lazy_import("zarr")

#: Dimension names of the root arrays: the graph-indexed vectors share their axis of the Gram
#: and are named after the array of ids on it, which xarray makes the axis' index.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "gram": ("graph_ids", "graph_ids_cols"),
    "graph_ids": ("graph_ids",), "y": ("graph_ids",), "diag": ("graph_ids",),
    "graph_ids_cols": ("graph_ids_cols",), "y_cols": ("graph_ids_cols",), "diag_cols": ("graph_ids_cols",),
    "tiles_done": ("tile_row", "tile_col"), "tile_checksums": ("tile_row", "tile_col"),
    "fit_indices": ("fit_sample",),
}
#: the vectors along the Gram's axes, which xarray attaches to ``gram`` as coordinates
_GRAM_COORDINATES = "y diag y_cols diag_cols"

# Attributes that must agree between a store and a job rerun into it.
FINGERPRINT_KEYS = ("kernel", "dataset_checksum", "test_checksum", "fit", "tile_size", "normalize", "symmetric",
                    "dtype")
# What a fingerprint attribute means when a store made before it existed lacks it.
FINGERPRINT_DEFAULTS = {"dtype": "float64"}

#: the data types a Gram can be stored in (``gram.dtype``); tiles are computed in float64
GRAM_DTYPES = ("float64", "float32")


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


def check_dtype(dtype: str) -> str:
    """``dtype`` if gramdist can store a Gram in it, else :class:`StoreError`."""
    if str(dtype) not in GRAM_DTYPES:
        raise StoreError(f"gram.dtype must be one of {', '.join(GRAM_DTYPES)}, got {dtype!r}")
    return str(dtype)


def create_store(
    path: str | os.PathLike,
    grid: TileGrid,
    attrs: dict[str, Any],
    *,
    compression_level: int = 1,
    overwrite: bool = False,
    dtype: str | None = None,
) -> zarr.Group:
    """Create a new store laid out for ``grid``; refuse to clobber an existing one.

    ``dtype`` (default: ``attrs["dtype"]``, else float64) is the Gram's storage type.
    """
    path = Path(path)
    if path.exists() and not overwrite:
        raise StoreError(f"{path}: already exists")
    dtype = check_dtype(dtype or attrs.get("dtype") or "float64")
    root = zarr.open_group(str(path), mode="w" if overwrite else "w-", zarr_format=3)
    _create_tile_arrays(root, grid, dtype, compression_level)
    if attrs.get("keep_embeddings"):
        root.require_group(EMBEDDINGS)
    root.attrs.update(as_jsonable(attrs) | {"complete": False, "state_complete": False, "diag_complete": False,
                                            "dtype": dtype, "checksummed": True})
    return root


def _create_tile_arrays(group: zarr.Group, grid: TileGrid, dtype: str, compression_level: int,
                        overwrite: bool = False) -> None:
    """``gram``, ``tiles_done`` and ``tile_checksums`` laid out for ``grid`` in ``group``."""
    t = grid.tile
    # A tile larger than the Gram is one chunk of the Gram's size: a (T, T) chunk would make
    # every write allocate T*T floats (7 TiB for tile_size 10**6), whatever the Gram's size.
    chunks = (max(1, min(t, grid.n_rows)), max(1, min(t, grid.n_cols)))
    # Blosc LZ4 with byte shuffle: a float64 Gram's exponent bytes compress, its mantissas
    # hardly; measured here it writes a 2 MiB tile ~2x faster than Zstd level 1 (5.7 vs 13.6 ms,
    # multi-threaded) and stores it smaller (87% vs 92% of raw on a normalised WL Gram).
    compressors = (lazy_import("zarr.codecs").BloscCodec(cname="lz4", clevel=min(compression_level, 9),
                                                         shuffle="shuffle", typesize=np.dtype(dtype).itemsize)
                   if compression_level > 0 else None)
    group.create_array(
        "gram", shape=(grid.n_rows, grid.n_cols), chunks=chunks, dtype=dtype, fill_value=0.0,
        compressors=compressors, config={"write_empty_chunks": True},
        dimension_names=DIMENSIONS["gram"], attributes={"coordinates": _GRAM_COORDINATES}, overwrite=overwrite,
    )
    for name in ("tiles_done", "tile_checksums"):
        _create_record_array(group, name, grid, overwrite)


def _create_record_array(group: zarr.Group, name: str, grid: TileGrid, overwrite: bool = False) -> zarr.Array:
    """The done-mask or the checksums: one chunk, written at once (zeros), so that a chunk file
    that is gone later means lost data, never "nothing written yet"."""
    arr = group.create_array(name, shape=grid.shape, chunks=grid.shape, dtype="uint8" if name == "tiles_done"
                             else "uint64", fill_value=0, config={"write_empty_chunks": True}, overwrite=overwrite,
                             dimension_names=DIMENSIONS[name])
    arr[...] = 0
    return arr


def open_group(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """Open any gramdist store (a Gram store or a feature store) as a group, unchecked beyond
    its group metadata and ``gramdist_version``; :class:`StoreError` if it is not one."""
    path = Path(path)
    if not path.exists():
        raise StoreError(f"{path}: no such store")
    lost = _lost_metadata(path, "")
    if lost and _looks_like_store(path):
        raise StoreError(_group_metadata_message(path, lost))
    try:
        root = zarr.open_group(str(path), mode=mode)
    except Exception as exc:  # zarr raises several types for a non-store folder
        raise StoreError(f"{path}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{path}: not a gramdist store (no gramdist_version attribute)")
    return root


def open_store(path: str | os.PathLike, mode: str = "r") -> zarr.Group:
    """Open an existing Gram store; :class:`StoreError` if it is not a gramdist Gram store, or if
    its group metadata or the metadata of ``gram``/``tiles_done`` is lost (saying what is lost and
    whether ``gramdist verify --repair`` can restore it). A reader (``mode="r"``) is refused,
    in one line, while an append is being committed (its arrays are then changing)."""
    path = Path(path)
    root = open_group(path, mode)
    if root.attrs.get("store_kind", "gram") != "gram":
        raise StoreError(f"{path}: a {root.attrs['store_kind']} store, not a Gram store")
    for name in ("gram", "tiles_done", "tile_checksums"):
        lost = _lost_metadata(path, name)
        if lost and (path / name).is_dir():
            raise StoreError(_array_metadata_message(path, name, lost))
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
    pending = root.attrs.get("pending_append")
    if mode == "r" and pending and pending.get("state") == "committing":
        raise StoreError(committing_message(path, pending))
    return root


def store_version(path: str | os.PathLike) -> tuple[int, int]:
    """Changes whenever the store does (an append's commit, a rerun, ``--overwrite``): its
    ``generation`` and the time its group metadata was last written. For caches of its Gram."""
    try:
        meta = Path(path) / "zarr.json"
        generation = json.loads(meta.read_bytes()).get("attributes", {}).get("generation", 0)
        return int(generation), meta.stat().st_mtime_ns
    except (OSError, ValueError, AttributeError):
        return -1, -1


def store_digest(path: str | os.PathLike) -> str:
    """A digest of what a store holds, for keys of results computed from it (e.g. saved folds
    of a nested CV): its fingerprint attributes, ``generation``, shape, and its checksums (a
    Gram store's ``tile_checksums``, a feature store's ``chunk_checksums``), which change with
    every tile or chunk written. A store without checksums (before 0.2) is keyed by
    :func:`store_version` instead, which changes whenever the store does."""
    root = open_group(path)
    attrs = dict(root.attrs)
    keys = ("kernel", "dataset_checksum", "test_checksum", "fit", "normalize", "symmetric", "dtype", "generation",
            "n_graphs", "n_test", "store_kind", "feature_kind", "nystroem")
    values: dict[str, np.ndarray | None] = {
        "attrs": np.frombuffer(json.dumps({k: attrs.get(k) for k in keys}, sort_keys=True, default=str).encode(),
                               dtype=np.uint8)}
    for name in ("gram", "features", "tile_checksums", "chunk_checksums"):
        if name in root:
            values[f"{name}.shape"] = np.asarray(root[name].shape, dtype=np.int64)
    sums = [name for name in ("tile_checksums", "chunk_checksums") if name in root]
    if sums and attrs.get("checksummed", True):
        for name in sums:
            values[name] = np.asarray(root[name][...], dtype=np.uint64)
    else:
        values["version"] = np.asarray(store_version(path), dtype=np.int64)
    return digest_arrays(values)


def is_gramdist_store(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a gramdist store, damaged or not (its group metadata names gramdist,
    or is lost from a folder laid out as a store): :func:`open_store` then says what is wrong."""
    path = Path(path)
    if not path.is_dir():
        return False
    try:
        return "gramdist_version" in json.loads((path / "zarr.json").read_bytes()).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return _looks_like_store(path)


def _looks_like_store(path: Path) -> bool:
    return any((path / name).is_dir() for name in ("gram", "tiles_done", "tile_checksums"))


def _lost_metadata(path: Path, name: str) -> str | None:
    """'missing' or 'unreadable (why)' when the ``zarr.json`` of ``name`` ("" = the group) is
    lost or damaged; None when it parses."""
    meta = path / name / "zarr.json" if name else path / "zarr.json"
    try:
        doc = json.loads(meta.read_bytes())
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3 or "node_type" not in doc:
        return "unreadable (not Zarr v3 metadata)"
    return None


def _group_metadata_message(path: Path, lost: str) -> str:
    what = (f"{path}: the store's group metadata (zarr.json) is {lost}: its attributes (kernel, dataset, fit, "
            "completeness) are lost, so its Gram cannot be trusted as it stands")
    if _backup(path) is not None:
        return what + f"; `gramdist verify --repair {path}` restores them from the copy kept in the store"
    return what + " and no copy of them was kept; recompute it with `gramdist run JOB --overwrite`"


_ARRAY_ROLES = {
    "gram": "the Gram's shape, chunking and codec",
    "tiles_done": "the done-mask (which tiles are written)",
    "tile_checksums": "the tile checksums",
}


def _array_metadata_message(path: Path, name: str, lost: str) -> str:
    return (f"{path}: the metadata of the {name!r} array ({name}/zarr.json) is {lost}: {_ARRAY_ROLES[name]} "
            "cannot be read; the chunks on disk are not lost: `gramdist verify --repair "
            f"{path}` rewrites it and checks every tile against its checksum")


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
    return [k for k in FINGERPRINT_KEYS
            if stored.get(k, FINGERPRINT_DEFAULTS.get(k)) != new.get(k, FINGERPRINT_DEFAULTS.get(k))]


def write_vector(root: zarr.Group, name: str, values: np.ndarray) -> None:
    """(Over)write a small 1-D array (diag, labels, ids) written by the client only."""
    values = np.asarray(values)
    arr = root.create_array(name, shape=values.shape, chunks=(max(1, len(values)),), dtype=values.dtype,
                            fill_value=0, config={"write_empty_chunks": True}, overwrite=True,
                            dimension_names=DIMENSIONS.get(name))
    arr[...] = values


def write_graph_vectors(root: zarr.Group, rows: Any, cols: Any = None) -> None:
    """Class labels and ids of the row graphs, and the ids (and labels, when rectangular) of
    the column graphs: a symmetric store has ``graph_ids_cols`` too, to label both axes."""
    for batch, suffix in ((rows, ""), (cols, "_cols")):
        if batch is None:
            continue
        if batch.y is not None:
            write_vector(root, f"y{suffix}", batch.y)
        write_vector(root, f"graph_ids{suffix}", batch.graph_ids)
    if cols is None:
        write_vector(root, "graph_ids_cols", rows.graph_ids)


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


def read_col_labels(root: zarr.Group, where: str | os.PathLike) -> np.ndarray | None:
    """Class labels (or targets) of the column graphs: the row labels of a symmetric store."""
    if root.attrs.get("symmetric", True):
        return read_labels(root, where)
    return read_array(root, "y_cols", where, optional=True)


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
                                 dtype=value.dtype, fill_value=0, overwrite=True,
                                 dimension_names=_state_dimensions(name, value.ndim))
        if value.size:
            arr[...] = value
    group.attrs.update({"kernel_attrs": as_jsonable(state.attrs), "arrays": sorted(state.arrays)})
    write_vector(root, "fit_indices", np.asarray(fit_indices, dtype=np.int64))
    root.attrs["state_complete"] = True


def _state_dimensions(name: str, ndim: int) -> tuple[str, ...]:
    """Each state array's own axes (``labels_0``, ...): the arrays share no axis."""
    return tuple(f"{name}_{k}" for k in range(ndim))


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


# ------------------------------------------------------------------------------- kept embeddings
#: group of a store holding the embeddings of its chunks (``gram.keep_embeddings``)
EMBEDDINGS = "embeddings"
#: the only package whose classes a kept embedding may be rebuilt as: the kernels' own
_KERNEL_PACKAGE = GraphKernel.__module__.rpartition(".")[0] + "."


def write_embedding(path: str | os.PathLike, name: str, emb: Any, checksum: str) -> bool:
    """Keep the embedding of one chunk of graphs (``name``: ``r<i>`` for row chunk i, ``c<j>``
    for column chunk j) in ``path/embeddings/name``, tagged with the content checksum of the
    chunk's graphs; False (nothing kept) when the embedding is not a dataclass of arrays.

    Embeddings are kernel objects; the only form kept is a dataclass defined in a
    ``gramdist.kernels`` module whose fields are arrays (or None): each field becomes an array,
    the class's dotted name an attribute. Nothing is pickled, and :func:`read_embedding`
    rebuilds only such dataclasses.
    """
    import dataclasses

    cls = type(emb)
    if not dataclasses.is_dataclass(emb) or not cls.__module__.startswith(_KERNEL_PACKAGE):
        return False
    values = {f.name: getattr(emb, f.name) for f in dataclasses.fields(emb) if f.init and not f.name.startswith("_")}
    if not all(v is None or isinstance(v, np.ndarray) for v in values.values()):
        return False
    group = zarr.open_group(str(Path(path) / EMBEDDINGS / name), mode="w", zarr_format=3)
    for key, value in values.items():
        if value is not None:
            value = np.ascontiguousarray(value)
            arr = group.create_array(key, shape=value.shape, chunks=tuple(max(1, d) for d in value.shape),
                                     dtype=value.dtype, fill_value=0, config={"write_empty_chunks": True})
            if value.size:
                arr[...] = value
    # written last: a group without it (a writer killed halfway) is never read
    group.attrs.update({"class": f"{cls.__module__}.{cls.__qualname__}", "checksum": checksum,
                        "none": [k for k, v in values.items() if v is None], "digest": digest_arrays(values),
                        "complete": True})
    return True


def read_embedding(path: str | os.PathLike, name: str, checksum: str) -> Any | None:
    """The embedding kept for chunk ``name`` if it was made from graphs with this content
    checksum; None when there is none, it is for other graphs, or it cannot be read."""
    import dataclasses
    import importlib

    folder = Path(path) / EMBEDDINGS / name
    if not (folder / "zarr.json").is_file():
        return None
    try:
        group = zarr.open_group(str(folder), mode="r")
        attrs = dict(group.attrs)
        if not attrs.get("complete") or attrs.get("checksum") != checksum:
            return None
        module, _, qualname = str(attrs["class"]).rpartition(".")
        if not module.startswith(_KERNEL_PACKAGE):
            return None
        cls = getattr(importlib.import_module(module), qualname)
        if not dataclasses.is_dataclass(cls):
            return None
        fields = {f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")}
        values = {k: None for k in attrs.get("none", [])}
        values.update({k: np.asarray(group[k][...]) for k in fields - set(values)})
        if attrs.get("digest") != digest_arrays(values):  # damaged on disk but decodable: embed again
            return None
        return cls(**values)
    except Exception:  # noqa: BLE001 - a damaged cache entry: the chunk is embedded again
        return None


def _move_folders(source: Path, target: Path) -> None:
    """Move every folder under ``source`` to ``target`` (replacing one of the same name)."""
    import shutil

    if not source.is_dir():
        return
    target.mkdir(parents=True, exist_ok=True)
    if not (target / "zarr.json").exists() and (source / "zarr.json").exists():
        shutil.copyfile(source / "zarr.json", target / "zarr.json")
    for child in source.iterdir():
        if child.is_dir():
            if (target / child.name).exists():
                shutil.rmtree(target / child.name)
            os.replace(child, target / child.name)


@lru_cache(maxsize=8)
def _open_gram_array(path: str, inode: int, mtime_ns: int) -> zarr.Array:
    return _keep_empty(zarr.open_array(path, path="gram", mode="r+"))


def _keep_empty(arr: zarr.Array) -> zarr.Array:
    """``arr`` writing every chunk, even one equal to the fill value everywhere: Zarr's
    default skips (and deletes) such chunks, which would make an all-zero tile, or a done-mask
    of zeros, indistinguishable from a lost chunk file. The setting is not persisted in the
    metadata, so every writer opens the array through here."""
    return arr.with_config({"write_empty_chunks": True})


def gram_array(path: str, layout: tuple[int, int, str] | None = None) -> zarr.Array:
    """The ``gram`` array at ``path`` (a store, or an append's staging group), opened once per
    worker process for tile writes.

    ``layout`` is ``(rows, columns, dtype)`` as the caller expects it: a cached array that
    differs (the store grew by an append, or ``--overwrite`` remade it in another type while a
    long-lived worker kept the old one open) is opened again rather than written through stale
    metadata. The cache is keyed by the identity of the array's metadata file too: a process
    that outlives one store (the Python front end's shared cluster) never writes with the
    chunking or codecs of an earlier store made at the same path.
    """
    meta = os.stat(Path(path) / "gram" / "zarr.json")
    arr = _open_gram_array(path, meta.st_ino, meta.st_mtime_ns)
    if layout is not None and (tuple(arr.shape), str(arr.dtype)) != (tuple(layout[:2]), str(layout[2])):
        _open_gram_array.cache_clear()
        arr = _open_gram_array(path, meta.st_ino, meta.st_mtime_ns)
    return arr


def _where(root: zarr.Group) -> Path:
    """The folder of ``root`` (a store or one of its groups) on disk."""
    return Path(root.store.root) / root.path if root.path else Path(root.store.root)


def _chunk_exists(root: zarr.Group, name: str, chunk: tuple[int, int]) -> bool:
    return (_where(root) / name / root[name].metadata.encode_chunk_key(chunk)).is_file()


def _chunk_name(root: zarr.Group, name: str, chunk: tuple[int, int]) -> str:
    return f"{name}/{root[name].metadata.encode_chunk_key(chunk)}"


def _read_record(root: zarr.Group, name: str) -> tuple[np.ndarray | None, str | None]:
    """``(values, None)`` of the done-mask or the checksums, ``(None, None)`` when a store made
    before checksums has none, ``(None, what is wrong)`` when it is lost or undecodable."""
    checksummed = bool(root.attrs.get("checksummed"))
    try:
        present = name in root
    except Exception:  # noqa: BLE001 - zarr's lookup parses the metadata
        present = False
    if not present:
        return None, ("is missing" if checksummed or name == "tiles_done" else None)
    try:
        values = np.asarray(root[name][...])
    except Exception as exc:  # noqa: BLE001 - a codec error, a truncated chunk
        return None, f"cannot be decoded ({type(exc).__name__}: {exc})"
    # stores that record checksums write both records whole from the start: no chunk is lost data
    if checksummed and not _chunk_exists(root, name, (0, 0)):
        return None, f"is missing (its chunk file {_chunk_name(root, name, (0, 0))} is gone)"
    return values, None


def _record_message(where: str | os.PathLike, name: str, problem: str) -> str:
    if name == "tiles_done":
        return (f"{where}: the done-mask (tiles_done) {problem}: which tiles are written is unknown, so the store "
                f"cannot be read or resumed as it stands; `gramdist verify --repair {where}` rebuilds it from the "
                "tile checksums")
    return (f"{where}: the tile checksums (tile_checksums) {problem}: the Gram's tiles can no longer be checked; "
            f"`gramdist verify --repair {where}` records them again from the tiles that are on disk and decode "
            "(trusting their values; a symmetric store's mirrors must agree) and unmarks the others")


def read_done_mask(root: zarr.Group) -> np.ndarray:
    """The done-mask; :class:`StoreError` saying so when it is lost or cannot be decoded."""
    mask, problem = _read_record(root, "tiles_done")
    if problem:
        raise StoreError(_record_message(_where(root), "tiles_done", problem))
    return np.asarray(mask, dtype=bool)


def read_checksums(root: zarr.Group, where: str | os.PathLike = "store") -> np.ndarray | None:
    """The per-tile checksums, or None for a store made before they were recorded;
    :class:`StoreError` naming ``where`` if they are lost or cannot be decoded."""
    sums, problem = _read_record(root, "tile_checksums")
    if problem:
        raise StoreError(_record_message(where, "tile_checksums", problem))
    return None if sums is None else sums.astype(np.uint64)


def write_done_mask(root: zarr.Group, mask: np.ndarray, checksums: np.ndarray | None = None) -> None:
    """Save the done-mask; the checksums of its tiles first, so a tile marked done on disk
    always has its checksum there too."""
    if checksums is not None:
        _keep_empty(root["tile_checksums"])[...] = checksums
    _keep_empty(root["tiles_done"])[...] = mask.astype(np.uint8)


def tile_checksum(block: np.ndarray) -> int:
    """Checksum of a block as stored: the sum of the 64-bit patterns of its values, widened
    to float64, modulo 2**64.

    Integer arithmetic, so the value is exact and independent of the summation order, the
    machine and the block's orientation (a mirrored tile has its source's checksum). A float32
    Gram's values widen to float64 exactly and one-to-one, so the same sum serves both types: a
    changed float32 word changes its widened word and so the sum. A chunk that is missing (read
    as zeros) or has a changed word no longer matches.
    """
    words = np.ascontiguousarray(block, dtype=np.float64).view(np.uint64)
    return int(np.add.reduce(words, axis=None, dtype=np.uint64))


def _tile_label(grid: TileGrid, tile: tuple[int, int]) -> str:
    (r0, r1), (c0, c1) = grid.row_range(tile[0]), grid.col_range(tile[1])
    return f"tile ({tile[0]}, {tile[1]}): rows {r0}..{r1 - 1}, columns {c0}..{c1 - 1}"


def tile_damage(root: zarr.Group, grid: TileGrid, mask: np.ndarray, gram: np.ndarray | None = None,
                where: str | os.PathLike = "store") -> dict[tuple[int, int], str]:
    """Tiles marked done in ``mask`` that are damaged on disk, with what is wrong.

    A tile is damaged when its chunk (or its mirror's) is missing, cannot be decoded
    (truncated, overwritten header), or holds values that no longer match the checksum
    recorded when it was written. ``gram`` is the store's Gram if already loaded (else each
    tile is read from disk). A store made before checksums were recorded is checked for
    undecodable chunks only.
    """
    sums = read_checksums(root, where)
    arr = root["gram"]
    bad: dict[tuple[int, int], str] = {}
    for i, j in grid.tiles():
        if not mask[i, j]:
            continue
        places = [(i, j)] + ([(j, i)] if grid.symmetric and i != j else [])
        for ci, cj in places:
            (r0, r1), (c0, c1) = grid.row_range(ci), grid.col_range(cj)
            chunk = _chunk_name(root, "gram", (ci, cj))
            try:
                block = np.asarray(arr[r0:r1, c0:c1] if gram is None else gram[r0:r1, c0:c1])
            except Exception as exc:  # noqa: BLE001 - codec errors come in several types
                bad[(i, j)] = f"chunk {chunk} cannot be decoded ({type(exc).__name__}: {exc})"
                break
            # a chunk file that is absent reads as zeros: damage unless the tile was all zeros
            # (stores before 0.2 did not write such tiles), which its checksum tells
            if sums is not None and tile_checksum(block) != int(sums[i, j]):
                bad[(i, j)] = (f"chunk {chunk} does not match the checksum recorded when the tile was written"
                               if _chunk_exists(root, "gram", (ci, cj)) else
                               f"chunk {chunk} is missing (it reads as zeros)")
                break
    return bad


def damaged_tiles(root: zarr.Group, grid: TileGrid, mask: np.ndarray, gram: np.ndarray | None = None,
                  where: str | os.PathLike = "store") -> list[tuple[int, int]] | None:
    """The tiles :func:`tile_damage` finds, sorted; None for a store without checksums."""
    if read_checksums(root, where) is None:
        return None
    return sorted(tile_damage(root, grid, mask, gram, where))


def rerun_hint(root: zarr.Group, store: str | os.PathLike) -> str:
    """How to recompute unmarked tiles: the job, or ``gramdist append STORE`` for a store grown
    by appends (whose graphs no single job file names)."""
    if root.attrs.get("appends"):
        return f"`gramdist append {store}` recomputes them (a store grown by appends)"
    return "rerun its job to recompute them"


def _damage_message(store: str | os.PathLike, grid: TileGrid, bad: dict[tuple[int, int], str], hint: str) -> str:
    shown = "; ".join(f"{_tile_label(grid, tl)} ({why})" for tl, why in sorted(bad.items())[:3])
    more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    return (f"{store}: {len(bad)} tile(s) damaged on disk (a chunk lost, undecodable, or not matching the "
            f"checksum recorded when it was written): {shown}{more}; run `gramdist verify --repair {store}`, then {hint}")


# ------------------------------------------------------------------------------- metadata copies
def _backup(path: Path) -> dict[str, Any] | None:
    """The copy of the group's attributes kept in the record arrays' metadata (None if none)."""
    for name in ("tile_checksums", "tiles_done"):
        try:
            doc = json.loads((path / name / "zarr.json").read_bytes())
            backup = doc["attributes"]["backup"]
            if isinstance(backup, dict) and isinstance(backup.get("group"), dict):
                return backup
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def save_backup(root: zarr.Group) -> None:
    """Copy the group's attributes into the attributes of both record arrays, so that
    ``verify --repair`` can restore a lost or damaged group ``zarr.json``."""
    import time

    group = {k: v for k, v in dict(root.attrs).items() if k != "pending_append"}
    backup = {"group": group, "saved": time.time()}
    for name in ("tile_checksums", "tiles_done"):
        try:
            root[name].attrs["backup"] = backup
        except Exception:  # noqa: BLE001 - a copy is a convenience; never fail the run for it
            pass


def _write_file_atomic(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def _restore_group_metadata(path: Path, backup: dict[str, Any]) -> None:
    doc = {"zarr_format": 3, "node_type": "group", "attributes": backup["group"]}
    _write_file_atomic(path / "zarr.json", json.dumps(doc).encode())


def _rewrite_array_metadata(path: Path, name: str, grid: TileGrid, dtype: str, compression_level: int) -> None:
    """Write ``name/zarr.json`` as gramdist creates it for ``grid``, leaving its chunks alone
    (they are checked afterwards: a chunk the rewritten metadata cannot decode is damage)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        scratch = zarr.open_group(tmp, mode="w", zarr_format=3)
        _create_tile_arrays(scratch, grid, dtype, compression_level)
        data = (Path(tmp) / name / "zarr.json").read_bytes()
    (path / name).mkdir(parents=True, exist_ok=True)
    _write_file_atomic(path / name / "zarr.json", data)


def _grid_from_vectors(root: zarr.Group, path: Path) -> TileGrid | None:
    """The tile grid of a store whose ``gram`` metadata is lost, from its graph vectors."""
    try:
        n_rows = len(read_array(root, "graph_ids", path))
        n_cols = n_rows if root.attrs.get("symmetric", True) else len(read_array(root, "graph_ids_cols", path))
    except StoreError:
        return None
    return TileGrid(n_rows, n_cols, int(root.attrs["tile_size"]), bool(root.attrs.get("symmetric", True)))


# ------------------------------------------------------------------------------- verify and repair
@dataclass
class _Verification:
    store: Path
    repair: bool
    problems: list[str]
    repaired: list[str]

    def lost(self, line: str, repaired: str | None) -> None:
        self.problems.append(line)
        if self.repair and repaired:
            self.repaired.append(f"{self.store}: repaired: {repaired}")


def verify_store(store: str | os.PathLike, *, repair: bool = False) -> dict[str, Any]:
    """Check a store on disk (what ``gramdist verify`` does): its metadata, its done-mask and
    checksums, every written tile (present, decodable, matching its checksum), and the arrays
    beside the Gram.

    With ``repair``: a lost group ``zarr.json`` is restored from the copy kept in the store; a
    lost ``zarr.json`` of ``gram``, ``tiles_done`` or ``tile_checksums`` is rewritten; a lost
    done-mask is rebuilt from the checksums (a tile counts as written when its chunks are on
    disk, decode and match); lost checksums are recorded again from the tiles on disk that
    decode (and, in a symmetric store, agree with their mirror), the others unmarked; damaged
    tiles are unmarked; a lost diagonal is marked to be recomputed. The store is complete again
    only if nothing had to be unmarked; otherwise rerunning its job (``gramdist append STORE``
    for a store grown by appends) recomputes exactly the unmarked tiles.

    Returns a JSON-ready dict: ``store``, ``verifiable`` (False for a store without
    checksums), ``checked`` (tiles compared), ``damaged`` (list of ``[i, j]``), ``problems``
    (one line each), ``repaired`` (lines), ``message`` (the lines ``gramdist verify`` prints).
    """
    path = Path(store)
    if not path.exists():
        raise StoreError(f"{store}: no such store")
    check = _Verification(path, repair, [], [])
    lost = _lost_metadata(path, "")
    if lost and _looks_like_store(path):
        backup = _backup(path)
        check.lost(_group_metadata_message(path, lost), None if backup is None else
                   f"restored the group metadata (zarr.json) from the copy kept in the store (saved "
                   f"{_when(backup.get('saved'))}); the tiles are checked below")
        if not repair or backup is None:
            return _verification_report(check, [], 0, True)
        _restore_group_metadata(path, backup)
    try:
        root = zarr.open_group(str(path), mode="r+" if repair else "r")
    except Exception as exc:  # noqa: BLE001 - zarr raises several types for a non-store folder
        raise StoreError(f"{store}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{store}: not a gramdist store (no gramdist_version attribute)")
    pending = root.attrs.get("pending_append")
    if pending and pending.get("state") == "committing":
        raise StoreError(committing_message(store, pending))
    checksummed = bool(root.attrs.get("checksummed"))

    # the metadata of the three tile arrays
    lost_arrays = {name: why for name in ("gram", "tiles_done", "tile_checksums")
                   if (why := _lost_metadata(path, name)) and (checksummed or (path / name).is_dir())}
    grid = _grid_of(root) if "gram" not in lost_arrays else _grid_from_vectors(root, path)
    for name, why in lost_arrays.items():
        line = _array_metadata_message(path, name, why)
        if grid is None:
            check.problems.append(line + "; it cannot be rewritten: the graph ids that give the Gram's shape are "
                                  "lost too; recompute the store with --overwrite")
            return _verification_report(check, [], 0, checksummed)
        check.lost(line, f"rewrote {name}/zarr.json for the {grid.n_rows} x {grid.n_cols} Gram in tiles of {grid.tile}")
        if repair:
            job_gram = (root.attrs.get("job") or {}).get("gram") or {}
            _rewrite_array_metadata(path, name, grid, root.attrs.get("dtype") or "float64",
                                    int(job_gram.get("compression_level", 1)))
    if lost_arrays:
        if not repair:
            return _verification_report(check, [], 0, checksummed)
        root = zarr.open_group(str(path), mode="r+")

    # the done-mask and the checksums
    mask, mask_problem = _read_record(root, "tiles_done")
    sums, sums_problem = _read_record(root, "tile_checksums")
    if sums_problem or mask_problem:
        name, problem = ("tile_checksums", sums_problem) if sums_problem else ("tiles_done", mask_problem)
        if sums_problem:
            sums, mask, dropped = _record_checksums_again(root, grid, mask)
            done = f"recorded the checksums of {_count_done(mask, grid)} tiles again from their values on disk " \
                   f"(trusted as they are); unmarked {len(dropped)} missing or undecodable tile(s)"
        else:
            mask = _mask_from_checksums(root, grid, sums)
            done = (f"rebuilt the done-mask from the tile checksums: {_count_done(mask, grid)} of {len(grid.tiles())} "
                    "tiles are on disk and match")
        check.lost(_record_message(path, name, problem), done)
        if not repair:
            return _verification_report(check, [], 0, sums is not None or bool(sums_problem))
        for rec in ("tiles_done", "tile_checksums"):  # whole again, with their chunk files
            if not _present(root, rec) or _read_record(root, rec)[1]:
                _create_record_array(root, rec, grid, overwrite=True)
        root.attrs["complete"] = False
        write_done_mask(root, mask, sums)
        save_backup(root)
    elif lost_arrays:
        save_backup(root)  # rewritten record arrays carry no copy yet
    mask = np.asarray(mask, dtype=bool)

    # the tiles
    checked = _count_done(mask, grid)
    bad = tile_damage(root, grid, mask, where=store)
    for tl, why in sorted(bad.items()):
        check.lost(f"{store}: {_tile_label(grid, tl)}: {why}", None)
    if bad and repair:
        for tl in bad:
            mask[tl] = False
        root.attrs["complete"] = False
        write_done_mask(root, mask)
        check.repaired.append(f"{store}: repaired: unmarked {len(bad)} damaged tile(s)")

    # the arrays beside the Gram
    _check_vectors(root, path, grid, check)
    if repair and check.problems:
        if mark_complete(root, grid):
            check.repaired.append(f"{store}: every tile is on disk and matches: the store is complete again")
        else:
            check.repaired.append(f"{store}: the store is incomplete now: {rerun_hint(root, store)}")
    legacy = None
    if sums is None:
        legacy = (f"{store}: no tile checksums (made before gramdist recorded them): checked only that the "
                  f"{checked} written tiles are on disk and decode")
    report = _verification_report(check, sorted(bad), checked, sums is not None, legacy)
    if pending:  # not damage: the store as it stands was checked; the append's tiles are checked on commit
        report["message"] += (f"\n{store}: note: an append of {pending.get('n_graphs')} graphs ({pending['from'][0]} -> "
                              f"{pending['to'][0]}) is in progress or was interrupted; `gramdist append {store}` "
                              "finishes it")
    return report


def _when(t: Any) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(t))) if t else "at an unknown time"


def _check_vectors(root: zarr.Group, path: Path, grid: TileGrid, check: _Verification) -> None:
    """Lost arrays beside the Gram: what each loss means, and the repairs that exist."""
    attrs = dict(root.attrs)
    if attrs.get("diag_complete"):
        for name, n in (("diag", grid.n_rows), ("diag_cols", None if grid.symmetric else grid.n_cols)):
            if n is None:
                continue
            problem = _vector_problem(root, name, n)
            if problem:
                check.lost(f"{path}: the raw K(g, g) ({name}) {problem}: the Gram can still be trusted, but new tiles "
                           "cannot be normalised without it", "marked K(g, g) to be recomputed by the next run of the "
                           f"job (or `gramdist append {path}`)")
                if check.repair:
                    root.attrs.update({"diag_complete": False, "complete": False})
    for name, n, meaning in (
        ("y", grid.n_rows, "the class labels: the Gram can still be trusted, but `gramdist evaluate` needs them"),
        ("graph_ids", grid.n_rows, "the graph ids: the Gram can still be trusted, but nothing can be appended and "
                                   "stores cannot be matched with each other"),
        ("fit_indices", None, "the fit sample's indices: the Gram can still be trusted"),
    ):
        if (name == "y" and not _present(root, name)) or (name == "fit_indices" and not attrs.get("state_complete")):
            continue  # a dataset without labels; a store without a fit (a combination)
        problem = _vector_problem(root, name, n)
        if problem:
            check.problems.append(f"{path}: {name} {problem}: {meaning}; recompute the store with --overwrite to "
                                  "restore it")
    if attrs.get("state_complete"):
        try:
            read_state(path)
        except StoreError as exc:
            check.problems.append(f"{path}: the fitted state cannot be read ({exc}): the Gram can still be trusted, "
                                  "but the store can no longer be resumed or appended to")


def _present(root: zarr.Group, name: str) -> bool:
    try:
        return name in root
    except Exception:  # noqa: BLE001
        return (_where(root) / name).exists()


def _vector_problem(root: zarr.Group, name: str, n: int | None) -> str | None:
    if not _present(root, name):
        return "is missing"
    try:
        values = np.asarray(root[name][...])
    except Exception as exc:  # noqa: BLE001
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if n is not None and len(values) != n:
        return f"has {len(values)} entries for {n} graphs"
    if root.attrs.get("checksummed") and len(values) and not _chunk_exists(root, name, (0,)):
        return f"is missing (its chunk file {_chunk_name(root, name, (0,))} is gone)"
    return None


def _tile_on_disk(root: zarr.Group, grid: TileGrid, tile: tuple[int, int]) -> np.ndarray | None:
    """The tile's values if its chunk (and its mirror's, agreeing with it) are on disk and
    decode; None otherwise."""
    i, j = tile
    places = [(i, j)] + ([(j, i)] if grid.symmetric and i != j else [])
    blocks = []
    for ci, cj in places:
        if not _chunk_exists(root, "gram", (ci, cj)):
            return None
        (r0, r1), (c0, c1) = grid.row_range(ci), grid.col_range(cj)
        try:
            blocks.append(np.asarray(root["gram"][r0:r1, c0:c1]))
        except Exception:  # noqa: BLE001
            return None
    if len(blocks) == 2 and not np.array_equal(blocks[0], blocks[1].T):
        return None
    return blocks[0]


def _mask_from_checksums(root: zarr.Group, grid: TileGrid, sums: np.ndarray) -> np.ndarray:
    mask = np.zeros(grid.shape, dtype=bool)
    for tl in grid.tiles():
        block = _tile_on_disk(root, grid, tl)
        mask[tl] = block is not None and tile_checksum(block) == int(sums[tl])
    return mask


def _record_checksums_again(root: zarr.Group, grid: TileGrid, mask: np.ndarray | None
                            ) -> tuple[np.ndarray, np.ndarray, list[tuple[int, int]]]:
    """Checksums of the tiles on disk that decode (those the mask marks, or every tile when the
    mask is lost too); the new mask and the tiles dropped."""
    sums = np.zeros(grid.shape, dtype=np.uint64)
    kept = np.zeros(grid.shape, dtype=bool)
    dropped = []
    for tl in grid.tiles():
        if mask is not None and not mask[tl]:
            continue
        block = _tile_on_disk(root, grid, tl)
        if block is None:
            if mask is not None:
                dropped.append(tl)
            continue
        sums[tl] = tile_checksum(block)
        kept[tl] = True
    return sums, kept, dropped


def _verification_report(check: _Verification, damaged: list[tuple[int, int]], checked: int, verifiable: bool,
                         legacy: str | None = None) -> dict[str, Any]:
    store = check.store
    lines = list(check.problems)
    if not check.problems:
        lines.append(legacy or f"{store}: all {checked} written tiles are on disk and match their checksums")
    elif not check.repair:
        lines.append(f"{store}: {len(check.problems)} problem(s) found; `gramdist verify --repair {store}` repairs "
                     "what can be repaired")
    lines += check.repaired
    return {"store": str(store), "verifiable": verifiable, "checked": checked,
            "damaged": [list(tl) for tl in damaged], "problems": list(check.problems),
            "repaired": list(check.repaired), "message": "\n".join(lines)}


def _count_done(mask: np.ndarray, grid: TileGrid) -> int:
    """Tiles of ``grid`` (the ones computed) marked done in ``mask``."""
    return sum(int(mask[i, j]) for i, j in grid.tiles())


def _grid_of(root: zarr.Group) -> TileGrid:
    return TileGrid(root["gram"].shape[0], root["gram"].shape[1], root.attrs["tile_size"],
                    root.attrs["symmetric"])


def store_grid(root: zarr.Group) -> TileGrid:
    """The tile grid of an open store (its Gram's shape, tile size, symmetry)."""
    return _grid_of(root)


def mark_complete(root: zarr.Group, grid: TileGrid) -> bool:
    """Set ``complete`` iff every tile is marked done on disk and the diagonal is stored; a
    store that completes keeps a copy of its attributes (:func:`save_backup`)."""
    mask = read_done_mask(root)
    done = bool(root.attrs.get("diag_complete")) and all(mask[i, j] for i, j in grid.tiles())
    root.attrs["complete"] = bool(done)
    if done and "tile_checksums" in root:
        save_backup(root)
    return done


# ------------------------------------------------------------------------------- blocks
def read_block(root: zarr.Group, rows: tuple[int, int], cols: tuple[int, int]) -> np.ndarray:
    """``gram[r0:r1, c0:c1]`` as stored (check the store first: :func:`verify_store`)."""
    return np.asarray(root["gram"][rows[0]:rows[1], cols[0]:cols[1]])


def write_tile(root: zarr.Group, grid: TileGrid, tile: tuple[int, int], block: np.ndarray) -> int:
    """Write tile ``(i, j)`` (and its mirror in a symmetric store) from this process, in the
    store's dtype; return its :func:`tile_checksum` for the done-mask's record."""
    arr = _keep_empty(root["gram"])
    block = np.asarray(block).astype(arr.dtype, copy=False)
    (r0, r1), (c0, c1) = grid.row_range(tile[0]), grid.col_range(tile[1])
    arr[r0:r1, c0:c1] = block
    if grid.symmetric and tile[0] != tile[1]:
        arr[c0:c1, r0:r1] = block.T
    return tile_checksum(block)


# ------------------------------------------------------------------------------- reading
def committing_message(store: str | os.PathLike, pending: dict[str, Any]) -> str:
    a, b = pending.get("from", ["?"])[0], pending.get("to", ["?"])[0]
    return (f"{store}: an append ({a} -> {b} graphs) is being committed; read it again in a moment (if that append "
            f"was interrupted, `gramdist append {store}` finishes it)")


def _generation(store: str | os.PathLike) -> Any:
    try:
        attrs = dict(zarr.open_group(str(store), mode="r").attrs)
    except Exception:  # noqa: BLE001 - being rewritten this instant: counts as a change
        return None
    return (attrs.get("generation", 0), bool((attrs.get("pending_append") or {}).get("state") == "committing"))


def open_gram(
    store: str | os.PathLike, *, as_dask: bool = False, allow_incomplete: bool = False
) -> tuple[Any, np.ndarray | None]:
    """Open a Gram store for SVM training: ``(K, y)``.

    While an append runs, the store reads as it was before it (the last complete N graphs);
    during the moment the append commits, a :class:`StoreError` says so (a read that overlaps
    a commit is retried). A damaged tile raises a :class:`StoreError` naming it.

    Parameters
    ----------
    store : path of the store.
    as_dask : return K as a ``dask.array`` with the store's chunks instead of loading it
        (its tiles are then not checked against their checksums: run :func:`verify_store`).
    allow_incomplete : open a store whose job has not finished (missing tiles read as 0).

    Returns
    -------
    K : (R, C) ndarray (or dask array) of the store's dtype (float64, or float32 for a
        ``gram.dtype: float32`` store); ``SVC(kernel="precomputed").fit(K, y)``.
    y : (R,) class labels of the row graphs, or None when the dataset has none.
    """
    for _ in range(3):
        before = _generation(store)
        k, y = _read_gram(store, as_dask, allow_incomplete)
        if as_dask or _generation(store) == before:
            return k, y
    raise StoreError(f"{store}: an append committed while it was being read, three times; read it again")


def _read_gram(store: str | os.PathLike, as_dask: bool, allow_incomplete: bool) -> tuple[Any, np.ndarray | None]:
    root = open_store(store)
    pending = root.attrs.get("pending_append")
    if pending and pending.get("state") == "committing":
        raise StoreError(committing_message(store, pending))
    grid = _grid_of(root)
    mask = read_done_mask(root)
    if not allow_incomplete:
        # the flag and the done-mask must agree (as in store_info): a store whose flag was
        # copied without all of its tiles is not complete
        done = _count_done(mask, grid)
        if not root.attrs.get("complete") or done < len(grid.tiles()):
            raise StoreError(
                f"{store}: incomplete store ({done} of {len(grid.tiles())} tiles written); "
                + ("`gramdist append STORE` finishes it" if root.attrs.get("appends") else "rerun the job to finish it")
            )
    if as_dask:
        import dask.array as da

        k = da.from_zarr(str(store), component="gram")
    else:
        try:
            k = np.asarray(root["gram"][...])
        except Exception as exc:  # noqa: BLE001 - name the tiles rather than the codec's error
            bad = tile_damage(root, grid, mask, where=store)
            if not bad:
                raise StoreError(f"{store}: cannot read array 'gram' ({type(exc).__name__}: {exc})") from None
            raise StoreError(_damage_message(store, grid, bad, rerun_hint(root, store))) from None
        bad = tile_damage(root, grid, mask, k, store)  # one pass over the loaded Gram: cheap next to reading it
        if bad:
            raise StoreError(_damage_message(store, grid, bad, rerun_hint(root, store)))
    y = read_array(root, "y", store, optional=True)
    return k, y


def missing_dimension_names(store: str | os.PathLike) -> list[str]:
    """Arrays of a store whose metadata lacks the dimension names this version writes (stores
    of gramdist 0.1.0), and ``graph_ids_cols`` when a symmetric store lacks it."""
    root = open_store(store)
    out = []
    for path, dims in [*((f"state/{name}", None) for name in _state_array_names(root)), *DIMENSIONS.items()]:
        try:
            if path not in root:
                if path == "graph_ids_cols" and "graph_ids" in root:
                    out.append(path)
                continue
            arr = root[path]
            want = dims or _state_dimensions(path.split("/", 1)[1], arr.ndim)
            if tuple(arr.metadata.dimension_names or ()) != want:
                out.append(path)
        except Exception:  # noqa: BLE001 - metadata zarr cannot decode: reported where it is read, not here
            continue
    return sorted(out)


def _state_array_names(root: zarr.Group) -> list[str]:
    try:
        return list(root["state"].attrs.get("arrays", [])) if "state" in root else []
    except Exception:  # noqa: BLE001 - an undecodable state group: read_state reports it
        return []


def upgrade_store(store: str | os.PathLike) -> list[str]:
    """Give every array of an older store the dimension names of this version, so that
    ``xarray.open_zarr`` reads it; returns the arrays changed (none for a current store).

    Only metadata changes (each array's ``zarr.json``, rewritten atomically), plus a symmetric
    store's ``graph_ids_cols`` (a copy of ``graph_ids``) when it lacks one: the Gram's chunks,
    the done-mask and the checksums are not touched, so the store resumes and verifies as before.
    The caller holds the store's lock when a job might be writing into it.
    """
    todo = missing_dimension_names(store)
    root = open_store(store, mode="r+")
    for name in todo:
        if name == "graph_ids_cols" and name not in root:
            write_vector(root, name, read_graph_ids(root, store))
            continue
        if name.startswith("state/"):
            dims = _state_dimensions(name.split("/", 1)[1], root[name].ndim)
        else:
            dims = DIMENSIONS[name]
        extra = {"coordinates": _GRAM_COORDINATES} if name == "gram" else {}
        _set_dimension_names(Path(store) / name / "zarr.json", dims, extra)
    return todo


def _set_dimension_names(meta_path: Path, dims: tuple[str, ...], attributes: dict[str, Any]) -> None:
    """Set ``dimension_names`` (and merge ``attributes``) in an array's Zarr v3 metadata file."""
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta["dimension_names"] = list(dims)
    if attributes:
        meta["attributes"] = {**meta.get("attributes", {}), **attributes}
    tmp = meta_path.with_name(meta_path.name + ".upgrade")
    tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
    os.replace(tmp, meta_path)


def store_info(store: str | os.PathLike) -> dict[str, Any]:
    """A JSON-ready summary of a store (what ``gramdist info`` prints): as it was before an
    append that is running, with the append under ``pending_append``."""
    from gramdist.engine.lock import current_writer

    root = open_store(store)
    attrs = dict(root.attrs)
    grid = _grid_of(root)
    todo = grid.tiles()
    done = _count_done(read_done_mask(root), grid)
    pending = attrs.get("pending_append")
    if pending:
        pending = dict(pending)
        progress = _pending_progress(root, pending)
        if progress is not None:
            pending["tiles_done"], pending["tiles_total"] = progress
    return {
        "store": str(store),
        "complete": bool(attrs.get("complete")) and done == len(todo),
        "shape": list(root["gram"].shape),
        "dtype": str(root["gram"].dtype),
        "tile_size": attrs["tile_size"],
        "tiles_done": done,
        "tiles_total": len(todo),
        "symmetric": attrs["symmetric"],
        "normalize": attrs.get("normalize"),
        "kernel": attrs.get("kernel"),
        "dataset": attrs.get("dataset"),
        "test_dataset": attrs.get("test_dataset"),
        "appends": attrs.get("appends", []),
        "pending_append": pending,
        "writer": current_writer(store),
        "fit": attrs.get("fit"),
        "gramdist_version": attrs.get("gramdist_version"),
        "stats": attrs.get("stats", {}),
        "needs_upgrade": missing_dimension_names(store),
    }


# ------------------------------------------------------------------------------- growing: appends
#: prefix of an append's staging group inside the store
PENDING_PREFIX = "pending_"


def kept_tiles(old: TileGrid, new: TileGrid) -> list[tuple[int, int]]:
    """Tiles of ``old`` that ``new`` (the grown grid) holds with the same rows and columns:
    those an append keeps. A tile straddling the old edge grows, so it is not kept."""
    r, c = old.shape
    return [(i, j) for i, j in new.tiles() if i < r and j < c
            and old.row_range(i) == new.row_range(i) and old.col_range(j) == new.col_range(j)]


def pending_groups(path: str | os.PathLike) -> list[str]:
    """Names of the staging groups in a store folder (normally none, or one while an append runs)."""
    p = Path(path)
    return sorted(c.name for c in p.iterdir() if c.is_dir() and c.name.startswith(PENDING_PREFIX)) if p.is_dir() else []


def create_pending(root: zarr.Group, name: str, grid: TileGrid, *, dtype: str, compression_level: int,
                   mask: np.ndarray, checksums: np.ndarray, vectors: dict[str, np.ndarray]) -> zarr.Group:
    """A staging group for an append: the grown Gram (empty), its done-mask and checksums
    (the kept tiles already marked), and the grown graph vectors (``y``, ``graph_ids``)."""
    path = _where(root) / name
    if path.exists():
        import shutil

        shutil.rmtree(path)
    group = root.create_group(name)
    _create_tile_arrays(group, grid, dtype, compression_level)
    group.require_group(EMBEDDINGS)
    write_done_mask(group, mask, checksums)
    for key, values in vectors.items():
        write_vector(group, key, values)
    # the state lives in the main store: the staging group never fits one
    group.attrs.update({"checksummed": True, "state_complete": True, "diag_complete": False,
                        "tile_size": grid.tile, "symmetric": grid.symmetric})
    return group


def _pending_progress(root: zarr.Group, pending: dict[str, Any]) -> tuple[int, int] | None:
    try:
        group = root[pending["group"]]
        grid = _grid_of(group)
        return _count_done(read_done_mask(group), grid), len(grid.tiles())
    except Exception:  # noqa: BLE001 - a staging group being created or removed this instant
        return None


def discard_pending(root: zarr.Group, name: str | None = None) -> list[str]:
    """Remove staging groups (``name``, or every one) and the ``pending_append`` record if it
    names one of them."""
    import shutil

    path = _where(root)
    names = [name] if name else pending_groups(path)
    for n in names:
        shutil.rmtree(path / n, ignore_errors=True)
    record = root.attrs.get("pending_append")
    if record is not None and (name is None or record.get("group") == name):
        root.attrs["pending_append"] = None
    return names


def commit_pending(root: zarr.Group, name: str, grid: TileGrid, attrs: dict[str, Any]) -> bool:
    """Make a finished append's staging group the store; idempotent, so an interrupted commit
    is finished by running it again.

    Order: mark the record ``committing`` (readers then refuse the store with one line, and a
    read that overlaps is retried); move the new chunks over the old ones (files renamed on the
    same file system: a chunk is always whole); replace the ``gram`` metadata with the grown
    one; rewrite the done-mask, checksums and vectors from the staging copies (kept until the
    end); update the attributes (``attrs``), drop the record; remove the staging group.
    Returns whether the grown store is complete.
    """
    import shutil

    path = _where(root)
    group = root[name]
    record = dict(root.attrs.get("pending_append") or {})
    record["state"] = "committing"
    generation = int(root.attrs.get("generation", 0)) + 1
    root.attrs.update({"pending_append": record, "generation": generation, "complete": False})
    source, target = path / name / "gram", path / "gram"
    _move_chunks(source, target)
    _move_folders(path / name / EMBEDDINGS, path / EMBEDDINGS)
    _write_file_atomic(target / "zarr.json", (source / "zarr.json").read_bytes())
    mask = read_done_mask(group)
    sums = read_checksums(group, path / name)
    for rec in ("tiles_done", "tile_checksums"):
        _create_record_array(root, rec, grid, overwrite=True)
    write_done_mask(root, mask, sums)
    for vec in ("diag", "diag_cols", "y", "graph_ids"):
        if _present(group, vec):
            write_vector(root, vec, read_array(group, vec, path / name))
    root.attrs.update(as_jsonable(attrs) | {"generation": generation + 1, "pending_append": None,
                                            "diag_complete": bool(group.attrs.get("diag_complete"))})
    complete = mark_complete(root, grid)
    shutil.rmtree(path / name, ignore_errors=True)
    return complete


def _move_chunks(source: Path, target: Path) -> None:
    """Rename every chunk file under ``source/c`` to the same place under ``target/c``."""
    base = source / "c"
    if not base.is_dir():
        return
    for folder, _dirs, files in os.walk(base):
        rel = Path(folder).relative_to(source)
        for f in files:
            if f.endswith(".partial"):  # left by a writer killed mid-write: never a chunk
                (Path(folder) / f).unlink(missing_ok=True)
                continue
            (target / rel).mkdir(parents=True, exist_ok=True)
            os.replace(Path(folder) / f, target / rel / f)
