"""``gramdist verify [--repair]`` on a Gram store: find what is lost or damaged, restore what can be.

Checked: the group metadata (restored from the copy the store keeps), the metadata of the three
tile arrays (rewritten), the done-mask and the checksums (each rebuilt from the other and the
tiles on disk), every written tile (present, decodable, matching its checksum), and the arrays
beside the Gram. Damaged tiles are unmarked; rerunning the job (``gramdist append STORE`` for a
store grown by appends) recomputes exactly those.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import backup
from gramdist.engine.store.checksums import tile_checksum
from gramdist.engine.store.gram import GramStore
from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.groups import lost_metadata, present, read_array, zarr
from gramdist.engine.store.location import Location
from gramdist.engine.store.state import check_state_readable
from gramdist.engine.store.tiles import (
    checksum_format,
    chunk_exists,
    chunk_name,
    committing_message,
    create_record_array,
    create_tile_arrays,
    grid_of,
    mark_group_complete,
    read_record,
    record_message,
    tile_damage,
    write_done_mask,
)
from gramdist.errors import StoreError

_TILE_ARRAYS = ("gram", "tiles_done", "tile_checksums")


@dataclass
class _Check:
    store: Location
    repair: bool
    problems: list[str]
    repaired: list[str]

    def lost(self, line: str, repaired: str | None) -> None:
        self.problems.append(line)
        if self.repair and repaired:
            self.repaired.append(f"{self.store}: repaired: {repaired}")

    def report(self, damaged: list[tuple[int, int]], checked: int, verifiable: bool,
               legacy: str | None = None) -> dict[str, Any]:
        lines = list(self.problems)
        if not self.problems:
            lines.append(legacy or f"{self.store}: all {checked} written tiles are on disk and match their checksums")
        elif not self.repair:
            lines.append(f"{self.store}: {len(self.problems)} problem(s) found; `gramdist verify --repair "
                         f"{self.store}` repairs what can be repaired")
        lines += self.repaired
        return {"store": str(self.store), "verifiable": verifiable, "checked": checked,
                "damaged": [list(tl) for tl in damaged], "problems": list(self.problems),
                "repaired": list(self.repaired), "message": "\n".join(lines)}


def verify_gram_store(location: Location, *, repair: bool = False) -> dict[str, Any]:
    """Check a Gram store on disk; with ``repair``, restore what can be restored.

    Returns a JSON-ready dict: ``store``, ``verifiable`` (False for a store without
    checksums), ``checked`` (tiles compared), ``damaged`` (list of ``[i, j]``), ``problems``
    (one line each), ``repaired`` (lines), ``message`` (the lines ``gramdist verify`` prints).
    """
    if not location.exists():
        raise StoreError(f"{location}: no such store")
    check = _Check(location, repair, [], [])
    if not _group_metadata(location, check):
        return check.report([], 0, True)
    root = _open(location, repair)
    pending = root.attrs.get("pending_append")
    if pending and pending.get("state") == "committing":
        raise StoreError(committing_message(location, pending))
    checksummed = bool(root.attrs.get("checksummed"))
    grid, rewritten = _array_metadata(location, root, check, checksummed)
    if grid is None or (rewritten and not repair):
        return check.report([], 0, checksummed)
    if rewritten:
        root = zarr.open_group(location.zarr_store(), mode="r+")
    mask, sums, ok = _records(root, grid, check, location, rewritten)
    if not ok:
        return check.report([], 0, sums is not None)
    checked = grid.count_done(mask)
    bad = _tiles(root, grid, mask, check, location)
    _check_vectors(root, location, grid, check)
    if repair and check.problems:
        if mark_group_complete(root, grid):
            check.repaired.append(f"{location}: every tile is on disk and matches: the store is complete again")
        else:
            check.repaired.append(f"{location}: the store is incomplete now: "
                                  f"{GramStore(location, root, 'r+').rerun_hint()}")
    legacy = None
    if sums is None:
        legacy = (f"{location}: no tile checksums (made before gramdist recorded them): checked only that the "
                  f"{checked} written tiles are on disk and decode")
    elif checksum_format(root) < 2 or not root.attrs.get("vector_checksums"):
        legacy = (f"{location}: all {checked} written tiles are on disk and match their checksums, in the format of "
                  "gramdist 0.2, which cannot see two values swapped within a tile, nor a changed label, id or "
                  f"diagonal; `gramdist upgrade {location}` records checksums that do")
    report = check.report(sorted(bad), checked, sums is not None, legacy)
    if pending:  # not damage: the store as it stands was checked; the append's tiles are checked on commit
        report["message"] += (f"\n{location}: note: an append of {pending.get('n_graphs')} graphs ({pending['from'][0]} "
                              f"-> {pending['to'][0]}) is in progress or was interrupted; `gramdist append {location}` "
                              "finishes it")
    return report


def _open(location: Location, repair: bool) -> Any:
    try:
        root = zarr.open_group(location.zarr_store(), mode="r+" if repair else "r")
    except Exception as exc:  # noqa: BLE001 - zarr raises several types for a non-store folder
        raise StoreError(f"{location}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{location}: not a gramdist store (no gramdist_version attribute)")
    return root


def _group_metadata(location: Location, check: _Check) -> bool:
    """The group ``zarr.json``: restored from the kept copy when lost; False: stop here."""
    lost = lost_metadata(location)
    if not (lost and backup.looks_like_gram_store(location)):
        return True
    kept = backup.read_backup(location)
    check.lost(backup.group_metadata_message(location, lost), None if kept is None else
               f"restored the group metadata (zarr.json) from the copy kept in the store (saved "
               f"{backup.when(kept.get('saved'))}); the tiles are checked below")
    if not check.repair or kept is None:
        return False
    backup.restore_group_metadata(location, kept)
    return True


def _array_metadata(location: Location, root: Any, check: _Check, checksummed: bool) -> tuple[TileGrid | None, bool]:
    """The metadata of the tile arrays, rewritten when lost: ``(grid, whether any was lost)``;
    grid None when the Gram's shape cannot be known."""
    lost_arrays = {name: why for name in _TILE_ARRAYS
                   if (why := lost_metadata(location, name)) and (checksummed or location.child(name).is_dir())}
    grid = grid_of(root) if "gram" not in lost_arrays else _grid_from_vectors(root, location)
    for name, why in lost_arrays.items():
        line = backup.array_metadata_message(location, name, why)
        if grid is None:
            check.problems.append(line + "; it cannot be rewritten: the graph ids that give the Gram's shape are "
                                  "lost too; recompute the store with --overwrite")
            return None, True
        check.lost(line, f"rewrote {name}/zarr.json for the {grid.n_rows} x {grid.n_cols} Gram in tiles of {grid.tile}")
        if check.repair:
            job_gram = (root.attrs.get("job") or {}).get("gram") or {}
            _rewrite_array_metadata(location, name, grid, root.attrs.get("dtype") or "float64",
                                    int(job_gram.get("compression_level", 1)))
    return grid, bool(lost_arrays)


def _records(root: Any, grid: TileGrid, check: _Check, location: Location, rewritten: bool
             ) -> tuple[np.ndarray, np.ndarray | None, bool]:
    """The done-mask and the checksums, each rebuilt from the other when lost."""
    mask, mask_problem = read_record(root, "tiles_done")
    sums, sums_problem = read_record(root, "tile_checksums")
    if sums_problem or mask_problem:
        name, problem = ("tile_checksums", sums_problem) if sums_problem else ("tiles_done", mask_problem)
        if sums_problem:
            sums, mask, dropped = _record_checksums_again(root, grid, mask)
            done = (f"recorded the checksums of {grid.count_done(mask)} tiles again from their values on disk "
                    f"(trusted as they are); unmarked {len(dropped)} missing or undecodable tile(s)")
        else:
            mask = _mask_from_checksums(root, grid, sums)
            done = (f"rebuilt the done-mask from the tile checksums: {grid.count_done(mask)} of {len(grid.tiles())} "
                    "tiles are on disk and match")
        check.lost(record_message(location, name, problem), done)
        if not check.repair:
            return mask, sums if (sums is not None or sums_problem) else None, False
        for rec in ("tiles_done", "tile_checksums"):  # whole again, with their chunk files
            if not present(root, rec) or read_record(root, rec)[1]:
                create_record_array(root, rec, grid, overwrite=True)
        root.attrs["complete"] = False
        write_done_mask(root, mask, sums)
        backup.save_backup(root)
    elif rewritten:
        backup.save_backup(root)  # rewritten record arrays carry no copy yet
    return np.asarray(mask, dtype=bool), sums, True


def _tiles(root: Any, grid: TileGrid, mask: np.ndarray, check: _Check, location: Location
           ) -> dict[tuple[int, int], str]:
    bad = tile_damage(root, grid, mask, where=location)
    for tl, why in sorted(bad.items()):
        check.lost(f"{location}: {grid.label(tl)}: {why}", None)
    if bad and check.repair:
        for tl in bad:
            mask[tl] = False
        root.attrs["complete"] = False
        write_done_mask(root, mask)
        check.repaired.append(f"{location}: repaired: unmarked {len(bad)} damaged tile(s)")
    return bad


def _rewrite_array_metadata(location: Location, name: str, grid: TileGrid, dtype: str, compression_level: int) -> None:
    """Write ``name/zarr.json`` as gramdist creates it for ``grid``, leaving its chunks alone
    (they are checked afterwards: a chunk the rewritten metadata cannot decode is damage)."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = zarr.open_group(tmp, mode="w", zarr_format=3)
        create_tile_arrays(scratch, grid, dtype, compression_level)
        data = (Path(tmp) / name / "zarr.json").read_bytes()
    location.write_atomic(data, name, "zarr.json")


def _grid_from_vectors(root: Any, location: Location) -> TileGrid | None:
    """The tile grid of a store whose ``gram`` metadata is lost, from its graph vectors."""
    try:
        n_rows = len(read_array(root, "graph_ids", location))
        n_cols = n_rows if root.attrs.get("symmetric", True) else len(read_array(root, "graph_ids_cols", location))
    except StoreError:
        return None
    return TileGrid(n_rows, n_cols, int(root.attrs["tile_size"]), bool(root.attrs.get("symmetric", True)))


def _check_vectors(root: Any, location: Location, grid: TileGrid, check: _Check) -> None:
    """Arrays beside the Gram that are lost, or changed since written (their digests): what each
    means, and its repair. The next run of the job (or ``gramdist append STORE``) recomputes the
    diagonal or refits the state (the same bits: the fit is seeded), and writes the graphs'
    labels and ids again from the graphs it reads."""
    attrs = dict(root.attrs)
    digests = _changed_digests(root, location)
    sizes = {"diag": grid.n_rows, "diag_cols": None if grid.symmetric else grid.n_cols, "y": grid.n_rows,
             "y_cols": grid.n_cols, "graph_ids": grid.n_rows, "graph_ids_cols": grid.n_cols, "fit_indices": None}
    for name, n in sizes.items():
        if name.endswith("_cols") and grid.symmetric and name != "graph_ids_cols":
            continue
        if name.startswith("diag") and not attrs.get("diag_complete"):
            continue
        if name.startswith("y") and not present(root, name) and name not in digests:
            continue  # a dataset without labels
        if name == "fit_indices" and not attrs.get("state_complete"):
            continue  # a store without a fit (a combination)
        if name == "graph_ids_cols" and not present(root, name) and name not in (attrs.get("vector_checksums") or {}):
            continue  # stores of 0.1 have none
        problem = _vector_problem(root, name, n) or digests.get(name)
        if problem:
            _repair_vector(root, location, name, problem, check)
    if attrs.get("state_complete"):
        why = check_state_readable(root, location) or digests.get("state")
        if why:
            _repair_vector(root, location, "state", why, check)
    _check_embeddings(location, check)


_MEANINGS = {
    "y": "the class labels (what `gramdist evaluate` learns)", "y_cols": "the training graphs' class labels",
    "diag": "the raw K(g, g) of the rows", "diag_cols": "the raw K(g, g) of the columns",
    "graph_ids": "the graph ids", "graph_ids_cols": "the column graphs' ids", "fit_indices": "the fit sample",
    "state": "the fitted state",
}


def _repair_vector(root: Any, location: Location, name: str, problem: str, check: _Check) -> None:
    hint = f"the next run of its job (or `gramdist append {location}`)"
    if name.startswith("diag"):
        line, done = ("the Gram can still be trusted, but new tiles cannot be normalised without it",
                      f"marked K(g, g) to be recomputed by {hint}")
        changes = {"diag_complete": False}
    elif name in ("state", "fit_indices"):
        line, done = ("the Gram can still be trusted, but the store cannot be resumed or appended to as it stands",
                      f"marked the fitted state to be fitted again (seeded: the same state) by {hint}")
        changes = {"state_complete": False}
    else:
        line, done = ("the Gram can still be trusted, but what is learned or matched on it would be wrong",
                      f"marked {name} to be written again from the graphs by {hint}")
        changes = {"damaged_vectors": sorted({*(root.attrs.get("damaged_vectors") or []), name})}
    check.lost(f"{location}: {name} ({_MEANINGS[name]}) {problem}: {line}", done)
    if check.repair:
        root.update_attributes({**changes, "complete": False})


def _changed_digests(root: Any, location: Location) -> dict[str, str]:
    """The arrays (and the fitted state) whose values no longer match the digests recorded when
    they were written, with what is wrong."""
    from gramdist.engine.store.checksums import array_digest
    from gramdist.engine.store.state import read_state_group, state_digest

    out = {}
    for name, digest in sorted((root.attrs.get("vector_checksums") or {}).items()):
        try:
            if name == "state":
                now = state_digest(read_state_group(root["state"], f"{location}/state"))
            else:
                now = array_digest(np.asarray(root[name][...]))
        except Exception:  # noqa: BLE001 - missing or undecodable: reported as such
            continue
        if now != digest:
            out[name] = "does not match the checksum recorded when it was written (changed on disk)"
    return out


def _check_embeddings(location: Location, check: _Check) -> None:
    """Kept embeddings are a cache checked on reading; a damaged one is reported, and removed by
    ``--repair`` (the next append embeds that chunk again)."""
    from gramdist.engine.store.layout import EMBEDDINGS
    from gramdist.engine.store.location import remove_tree
    from gramdist.engine.store.state import embedding_problem

    folder = location.child(EMBEDDINGS)
    if not folder.is_dir():
        return
    for chunk in sorted(p for p in folder.iterdir() if p.is_dir()):
        problem = embedding_problem(chunk)
        if problem:
            check.lost(f"{location}: the kept embedding {EMBEDDINGS}/{chunk.name} {problem}",
                       f"removed the damaged kept embedding {EMBEDDINGS}/{chunk.name} (the next append embeds it again)")
            if check.repair:
                remove_tree(chunk)


def _vector_problem(root: Any, name: str, n: int | None) -> str | None:
    if not present(root, name):
        return "is missing"
    try:
        values = np.asarray(root[name][...])
    except Exception as exc:  # noqa: BLE001
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if n is not None and len(values) != n:
        return f"has {len(values)} entries for {n} graphs"
    if root.attrs.get("checksummed") and len(values) and not chunk_exists(root, name, (0,)):
        return f"is missing (its chunk file {chunk_name(root, name, (0,))} is gone)"
    return None


def _tile_on_disk(root: Any, grid: TileGrid, tile: tuple[int, int]) -> np.ndarray | None:
    """The tile's values if its chunk (and its mirror's, agreeing with it) are on disk and
    decode; None otherwise."""
    i, j = tile
    places = [(i, j)] + ([(j, i)] if grid.symmetric and i != j else [])
    blocks = []
    for ci, cj in places:
        if not chunk_exists(root, "gram", (ci, cj)):
            return None
        (r0, r1), (c0, c1) = grid.row_range(ci), grid.col_range(cj)
        try:
            blocks.append(np.asarray(root["gram"][r0:r1, c0:c1]))
        except Exception:  # noqa: BLE001
            return None
    if len(blocks) == 2 and not np.array_equal(blocks[0], blocks[1].T):
        return None
    return blocks[0]


def _mask_from_checksums(root: Any, grid: TileGrid, sums: np.ndarray) -> np.ndarray:
    mask = np.zeros(grid.shape, dtype=bool)
    fmt = checksum_format(root)
    for tl in grid.tiles():
        block = _tile_on_disk(root, grid, tl)
        mask[tl] = block is not None and tile_checksum(block, fmt) == int(sums[tl])
    return mask


def _record_checksums_again(root: Any, grid: TileGrid, mask: np.ndarray | None
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
        sums[tl] = tile_checksum(block, checksum_format(root))
        kept[tl] = True
    return sums, kept, dropped
