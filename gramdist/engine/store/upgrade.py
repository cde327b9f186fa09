"""Bring an older store up to date (``gramdist upgrade``): metadata and checksums, never the data.

* Stores of gramdist 0.1.0 lack the dimension names xarray needs (and a symmetric store's
  ``graph_ids_cols``): added.
* Stores of 0.1 and 0.2 record checksums that cannot see everything (format 1, see
  :mod:`.checksums`), or none: every written tile is checked with what the store has (format 1
  checksums, else only that it decodes, and agrees with its mirror), then recorded in format 2,
  with digests of the labels, ids, diagonal and fitted state. A tile that fails its old check is
  unmarked (the store is then incomplete and its job recomputes it). The Gram's values are not
  touched.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

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


def outdated_checksums(store: Any) -> bool:
    return store.checksum_format < 2 or not store.vector_checksums


def upgrade_checksums(store: Any) -> list[str]:
    """Re-record an older Gram store's checksums in format 2 (see the module docstring); returns
    what was done, one line each."""
    from gramdist.engine.store.checksums import CHECKSUM_FORMAT, tile_checksum
    from gramdist.engine.store.state import state_digest
    from gramdist.engine.store.tiles import create_record_array, tile_damage

    if not outdated_checksums(store):
        return []
    grid, root = store.grid, store.root
    mask = store.done_mask()
    bad = tile_damage(root, grid, mask, where=store.location)  # format 1, or decoding only without checksums
    if not store.checksummed:
        create_record_array(root, "tile_checksums", grid, overwrite=True)
    sums = np.zeros(grid.shape, dtype=np.uint64)
    for tl in grid.tiles():
        if mask[tl] and tl not in bad:
            (r0, r1), (c0, c1) = grid.row_range(tl[0]), grid.col_range(tl[1])
            sums[tl] = tile_checksum(store.read_block((r0, r1), (c0, c1)), CHECKSUM_FORMAT)
        else:
            mask[tl] = False
    store._set(checksum_format=CHECKSUM_FORMAT, checksummed=True)
    store.save_progress(mask, sums)
    for name in ("y", "y_cols", "diag", "diag_cols", "graph_ids", "graph_ids_cols", "fit_indices"):
        if name in root and not (name.startswith("diag") and not store.diag_complete):
            store._record_digest(name, _digest(root[name]))
    if store.state_complete:
        store._record_digest("state", state_digest(store.read_state()))
    lines = [f"re-recorded the checksums of {grid.count_done(mask)} tiles in the format that sees every value, and "
             "the digests of the labels, ids, diagonal and fitted state"]
    if bad:
        store.mark_incomplete()
        lines.append(f"unmarked {len(bad)} tile(s) that failed their old check; {store.rerun_hint()}")
    else:
        store.mark_complete()
    return lines


def _digest(arr: Any) -> str:
    from gramdist.engine.store.checksums import array_digest

    return array_digest(np.asarray(arr[...]))


def upgrade_gram_store(store: Any) -> list[str]:
    """Give every array of an older store the dimension names of this version; returns the
    arrays changed (none for a current store). The caller holds the store's lock when a job
    might be writing into it; ``store`` is open for writing. (Checksums: :func:`upgrade_checksums`.)"""
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
        _set_dimension_names(store.location, name, dims, extra)
    return todo


def _set_dimension_names(location: Any, name: str, dims: tuple[str, ...], attributes: dict[str, Any]) -> None:
    """Set ``dimension_names`` (and merge ``attributes``) in array ``name``'s Zarr v3 metadata file."""
    meta = json.loads(location.child(name, "zarr.json").read_text(encoding="utf-8"))
    meta["dimension_names"] = list(dims)
    if attributes:
        meta["attributes"] = {**meta.get("attributes", {}), **attributes}
    location.write_atomic(json.dumps(meta, indent=2).encode("utf-8"), name, "zarr.json")
