"""Bring an older store up to date (``gramdist upgrade``): metadata only, never the data.

Stores of gramdist 0.1.0 lack the dimension names xarray needs (and a symmetric store's
``graph_ids_cols``); :func:`upgrade_gram_store` adds them. The Gram's chunks, the done-mask and
the checksums are not touched, so the store resumes and verifies as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from gramdist.engine.store.layout import GRAM_ARRAYS, GRAM_COORDINATES
from gramdist.engine.store.state import state_array_names, state_dimensions


def missing_dimension_names(store: Any) -> list[str]:
    """Arrays of a Gram store whose metadata lacks the dimension names this version writes,
    and ``graph_ids_cols`` when a symmetric store lacks it."""
    root = store.root
    out = []
    wanted = [*((f"state/{name}", None) for name in state_array_names(root)),
              *((name, spec.dims) for name, spec in GRAM_ARRAYS.items())]
    for path, dims in wanted:
        try:
            if path not in root:
                if path == "graph_ids_cols" and "graph_ids" in root:
                    out.append(path)
                continue
            arr = root[path]
            want = dims or state_dimensions(path.split("/", 1)[1], arr.ndim)
            if tuple(arr.metadata.dimension_names or ()) != want:
                out.append(path)
        except Exception:  # noqa: BLE001 - metadata zarr cannot decode: reported where it is read
            continue
    return sorted(out)


def upgrade_gram_store(store: Any) -> list[str]:
    """Give every array of an older store the dimension names of this version; returns the
    arrays changed (none for a current store). The caller holds the store's lock when a job
    might be writing into it; ``store`` is open for writing."""
    todo = missing_dimension_names(store)
    root = store.root
    for name in todo:
        if name == "graph_ids_cols" and name not in root:
            store._write_vector(name, store.graph_ids())
            continue
        if name.startswith("state/"):
            dims = state_dimensions(name.split("/", 1)[1], root[name].ndim)
        else:
            dims = GRAM_ARRAYS[name].dims
        extra = {"coordinates": GRAM_COORDINATES} if name == "gram" else {}
        _set_dimension_names(store.location.child(name, "zarr.json"), dims, extra)
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
