"""gramdist's stores: one object per store, the only code that knows their layout.

* :class:`GramStore` (``gramdist run``: the N×N Gram in tiles) and :class:`FeatureStore`
  (``gramdist features``: one row per graph), both :class:`~.base.Store`: a Zarr v3 group at a
  :class:`~.location.Location`, its attributes behind typed properties, its fitted state.
* ``layout.py`` — every array and attribute, declared once (:class:`~.layout.ArraySpec`,
  :class:`~.layout.AttrSpec`), and the typed metadata a computation hands over
  (:class:`~.layout.GramMeta`, :class:`~.layout.FeatureMeta`).
* ``groups.py`` — a store's Zarr group beneath the store objects: recognised from its
  metadata, created, opened, its small arrays read and written, its chunks' codec.
* ``location.py`` — where a store lives (a local folder) and the sidecars beside it, and what
  makes its files durable (``sync_tree``); the one seam for another storage backend.
* ``grids.py`` — tiles and chunks; ``checksums.py`` — tile and chunk checksums;
  ``tiles.py`` — a Gram's tile arrays, done-mask and checksum records, damage, and the
  workers' :class:`~.tiles.TileTarget`.
* ``state.py`` — the fitted state and kept embeddings; ``backup.py`` — the attributes' copy;
  ``repair.py`` — verify and repair; ``staging.py`` — an append's staging group and commit;
  ``upgrade.py`` — older stores brought up to date; ``lock.py`` — one writer per store.

Workers write through picklable targets (:class:`~.tiles.TileTarget`,
:class:`~.features.ChunkTarget`, :class:`~.state.EmbeddingCache`); everything else goes
through the store objects. Nothing here unpickles anything.
"""

from __future__ import annotations

from typing import Any

from gramdist.engine.store.base import Store, check_replaceable, store_version
from gramdist.engine.store.checksums import tile_checksum, words_checksum
from gramdist.engine.store.features import ChunkTarget, FeatureStore, is_feature_store, open_features
from gramdist.engine.store.gram import GramStore, is_gram_store, open_gram
from gramdist.engine.store.grids import ChunkGrid, TileGrid, kept_tiles
from gramdist.engine.store.groups import as_location, creation_cut_short, group_attributes, store_kind
from gramdist.engine.store.layout import GRAM_DTYPES, FeatureMeta, GramMeta, check_dtype
from gramdist.engine.store.location import Location, Sidecar
from gramdist.engine.store.lock import Lease, LeaseLost, StoreBusyError, StoreLock, current_writer
from gramdist.engine.store.state import EmbeddingCache, load_state
from gramdist.engine.store.tiles import TileTarget
from gramdist.errors import StoreError
from gramdist.urls import is_url


def open_store(where: Any, mode: str = "r") -> GramStore | FeatureStore:
    """The store at ``where``, of whichever kind it is; :class:`StoreError` if none."""
    location = as_location(where)
    kind = store_kind(location)
    if kind == "features":
        return FeatureStore.open(location, mode)
    if kind is None and not location.exists():
        raise StoreError(f"{location}: no such store")
    return GramStore.open(location, mode)


def is_store(where: Any) -> bool:
    """Whether ``where`` is a gramdist store of either kind (damaged ones count)."""
    return store_kind(as_location(where)) is not None


def verify(where: Any, *, repair: bool = False) -> dict[str, Any]:
    """``gramdist verify``: check (and with ``repair`` mend) a store of either kind."""
    from gramdist.engine.store.repair import verify_gram_store

    location = as_location(where)
    if store_kind(location) == "features":
        return FeatureStore.open(location, "r+" if repair else "r").verify(repair=repair)
    return verify_gram_store(location, repair=repair)


def info(where: Any) -> dict[str, Any]:
    """``gramdist info``: a JSON-ready summary of a store of either kind."""
    return open_store(where).info()


def recorded_kernel_name(where: Any) -> str | None:
    """The name of the kernel a local store records, from its metadata file alone: no Zarr, so
    no thread started (``gramdist append`` forks its workers before any thread). None for a
    store in an object store, or metadata that cannot be read (opening the store says why)."""
    if getattr(where, "remote", False) or is_url(str(where)):
        return None  # not even a Location made: an object store's starts fsspec's thread
    kernel = (group_attributes(as_location(where)) or {}).get("kernel")
    name = kernel.get("name") if isinstance(kernel, dict) else None
    return name if isinstance(name, str) else None


def read_state(where: Any) -> Any:
    """The fitted state of the store at ``where`` (either kind)."""
    return open_store(where).read_state()


__all__ = [
    "ChunkGrid", "ChunkTarget", "Lease", "LeaseLost", "check_replaceable", "creation_cut_short", "EmbeddingCache", "FeatureMeta", "FeatureStore", "GRAM_DTYPES", "GramMeta", "GramStore",
    "Location", "Sidecar", "Store", "StoreBusyError", "StoreError", "StoreLock", "TileGrid", "TileTarget", "check_dtype",
    "current_writer", "info", "is_feature_store", "is_gram_store", "is_store", "kept_tiles", "load_state", "open_features",
    "open_gram", "open_store", "read_state", "recorded_kernel_name", "store_version", "tile_checksum", "verify", "words_checksum",
]
