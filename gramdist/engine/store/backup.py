"""The copy of a Gram store's attributes it keeps, and what to say when metadata is lost.

When a store completes, its group attributes are copied into the attributes of both record
arrays (``tiles_done``, ``tile_checksums``), so ``verify --repair`` can restore a lost or
damaged group ``zarr.json``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from gramdist.engine.store.location import Location

_RECORDS = ("tile_checksums", "tiles_done")
_ARRAY_ROLES = {
    "gram": "the Gram's shape, chunking and codec",
    "tiles_done": "the done-mask (which tiles are written)",
    "tile_checksums": "the tile checksums",
}


def looks_like_gram_store(location: Location) -> bool:
    return any(location.child(name).is_dir() for name in ("gram", *_RECORDS))


def read_backup(location: Location) -> dict[str, Any] | None:
    """The copy of the group's attributes kept in the record arrays' metadata (None if none)."""
    for name in _RECORDS:
        try:
            doc = json.loads(location.read_file(name, "zarr.json"))
            backup = doc["attributes"]["backup"]
            if isinstance(backup, dict) and isinstance(backup.get("group"), dict):
                return backup
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return None


def save_backup(root: Any) -> None:
    """Copy the group's attributes into the attributes of both record arrays."""
    group = {k: v for k, v in dict(root.attrs).items() if k != "pending_append"}
    backup = {"group": group, "saved": time.time()}
    for name in _RECORDS:
        try:
            root[name].attrs["backup"] = backup
        except Exception:  # noqa: BLE001 - a copy is a convenience; never fail the run for it
            pass


def restore_group_metadata(location: Location, backup: dict[str, Any]) -> None:
    doc = {"zarr_format": 3, "node_type": "group", "attributes": backup["group"]}
    location.write_atomic(json.dumps(doc).encode(), "zarr.json")


def group_metadata_message(location: Location, lost: str) -> str:
    what = (f"{location}: the store's group metadata (zarr.json) is {lost}: its attributes (kernel, dataset, fit, "
            "completeness) are lost, so its Gram cannot be trusted as it stands")
    if read_backup(location) is not None:
        return what + f"; `gramdist verify --repair {location}` restores them from the copy kept in the store"
    return what + " and no copy of them was kept; recompute it with `gramdist run JOB --overwrite`"


def array_metadata_message(location: Location, name: str, lost: str) -> str:
    return (f"{location}: the metadata of the {name!r} array ({name}/zarr.json) is {lost}: {_ARRAY_ROLES[name]} "
            "cannot be read; the chunks on disk are not lost: `gramdist verify --repair "
            f"{location}` rewrites it and checks every tile against its checksum")


def when(t: Any) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(t))) if t else "at an unknown time"
