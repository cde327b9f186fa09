"""An append's staging group inside a Gram store, and its commit.

An append computes into ``pending_<id>/`` (its own ``gram`` of the grown shape, done-mask,
checksums, vectors and kept embeddings): the store's own arrays keep describing the store as
it was until :meth:`Staging.commit` moves the new chunks in. The store's ``pending_append``
attribute records the append while it runs (:class:`PendingAppend`), and ``appends`` one
:class:`AppendEntry` per committed append.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.groups import present, read_array, write_vector
from gramdist.engine.store.layout import EMBEDDINGS, GRAM_ARRAYS, PENDING_PREFIX
from gramdist.engine.store.tiles import (
    TileTarget,
    create_tile_arrays,
    grid_of,
    mark_group_complete,
    read_checksums,
    read_done_mask,
    write_done_mask,
)
from gramdist.kernels.base import as_jsonable

if TYPE_CHECKING:  # annotations only: the store module calls this one
    from gramdist.engine.store.gram import GramStore


@dataclass
class AppendEntry:
    """One committed append, as the store's ``appends`` records it."""

    source: Any
    name: str
    n_graphs: int
    checksum: str
    rows: list[int]
    gramdist_version: str


@dataclass
class RecordedSource:
    """Where some of a store's graphs came from: a dataset spec (None: given from Python) and
    the content checksum recorded when they were read; ``what`` names it in messages."""

    spec: Any
    checksum: str | None
    what: str


class PendingAppend:
    """The ``pending_append`` record of a store (an append running or interrupted)."""

    def __init__(self, record: dict[str, Any]) -> None:
        self.record = dict(record)

    group = property(lambda self: self.record.get("group"))
    state = property(lambda self: self.record.get("state"))
    source = property(lambda self: self.record.get("source"))
    checksum = property(lambda self: self.record.get("checksum"))
    n_graphs = property(lambda self: int(self.record.get("n_graphs", 0)))
    old_rows = property(lambda self: int(self.record["from"][0]))

    @property
    def committing(self) -> bool:
        return self.state == "committing"

    def describe(self) -> str:
        import json

        src = self.source
        return f"{self.record.get('n_graphs')} graphs from {json.dumps(src) if src is not None else 'Python'}"


# ------------------------------------------------------------------------------- what a store records
def row_sources(store: GramStore) -> list[RecordedSource]:
    """The sources of the store's row graphs, in order: its dataset (the test dataset of a
    test x train store), then each committed append's."""
    first = store.row_dataset
    out = [RecordedSource(first.get("spec"), first.get("checksum"),
                          "its dataset" if store.symmetric else "its test dataset")]
    for k, rec in enumerate(store.appends):
        out.append(RecordedSource(rec.get("source"), rec.get("checksum"), f"append {k + 1}'s source"))
    return out


def column_source(store: GramStore) -> RecordedSource:
    """The training graphs of a test x train store."""
    train = store.dataset or {}
    return RecordedSource(train.get("spec"), store.dataset_checksum, "its training dataset")


def recorded_checksums(store: GramStore) -> dict[str, str]:
    """Content checksum -> what it is, for every row source the store records."""
    known = {s.checksum: ("its dataset" if i == 0 else f"append {i}") for i, s in enumerate(row_sources(store))}
    known.pop(None, None)
    return known


# ------------------------------------------------------------------------------- the staging group
class Staging:
    """An append's staging group (``pending_<id>/``) of ``store``."""

    def __init__(self, store: GramStore, name: str) -> None:
        self.store = store
        self.name = name
        self.group = store.root[name]

    @property
    def folder(self) -> str:
        return str(self.store.location.join(self.name).resolved())

    @property
    def grid(self) -> TileGrid:
        return grid_of(self.group)

    @property
    def diag_complete(self) -> bool:
        return bool(self.group.attrs.get("diag_complete"))

    def done_mask(self) -> np.ndarray:
        return read_done_mask(self.group)

    def checksums(self) -> np.ndarray | None:
        return read_checksums(self.group, self.folder)

    def save_progress(self, mask: np.ndarray, checksums: np.ndarray | None = None) -> None:
        self.store._check_fence()
        write_done_mask(self.group, mask, checksums)

    def write_diag(self, rows: np.ndarray, cols: np.ndarray | None = None) -> None:
        self.store._check_fence()
        write_vector(self.group, "diag", rows, GRAM_ARRAYS["diag"].dims)
        if cols is not None:
            write_vector(self.group, "diag_cols", cols, GRAM_ARRAYS["diag_cols"].dims)
        self.group.attrs["diag_complete"] = True

    def read_diag(self) -> tuple[np.ndarray, np.ndarray]:
        rows = np.asarray(self.group["diag"][...])
        return rows, rows if self.grid.symmetric else np.asarray(self.group["diag_cols"][...])

    def mark_complete(self) -> bool:
        self.store._check_fence()
        return mark_group_complete(self.group, self.grid)

    def tile_target(self, lease: Any = None) -> TileTarget:
        g = self.grid
        return TileTarget(self.folder, (g.n_rows, g.n_cols), str(self.group["gram"].dtype), lease,
                          self.store.checksum_format, prior=self.store.location.resolved())

    def known_parts(self) -> dict[tuple[int, int], tuple[tuple[int, int], int | None]]:
        """The tiles of the grown Gram that straddle the store's old edge: for each, the rows ×
        columns its old tile holds and that tile's recorded checksum (None: a store without)."""
        old, new = self.store.grid, self.grid
        sums = self.store.checksums()
        out = {}
        for i, j in new.tiles():
            if i >= old.shape[0] or j >= old.shape[1]:
                continue
            (r0, r1), (c0, c1) = new.row_range(i), new.col_range(j)
            a, b = old.row_range(i)[1] - r0, old.col_range(j)[1] - c0
            if (a, b) != (r1 - r0, c1 - c0):
                out[(i, j)] = ((a, b), None if sums is None else int(sums[i, j]))
        return out

    def embedding_cache(self, lease: Any = None) -> Any:
        """The store's kept embeddings are read (when it keeps them); the chunks embedded now are
        kept in the staging group (committed with the tiles) under the store's setting, so the
        next append reads them."""
        from gramdist.engine.store.state import EmbeddingCache

        if not self.store.keeps_embeddings:  # gram.keep_embeddings: false
            return None
        here = self.store.location.resolved()
        return EmbeddingCache(here, self.folder, lease, self.store.embedding_budget(self.grid))

    def progress(self) -> tuple[int, int]:
        grid = self.grid
        return grid.count_done(self.done_mask()), len(grid.tiles())

    def commit(self) -> bool:
        """Make the finished staging group the store; idempotent, so an interrupted commit is
        finished by running it again.

        Order: mark the record ``committing`` (readers then refuse the store with one line, and
        a read that overlaps is retried); move the new chunks over the old ones (files renamed on
        the same file system: a chunk is always whole); replace the ``gram`` metadata with the
        grown one; rewrite the done-mask, checksums and vectors from the staging copies (kept
        until the end); update the attributes and mark the store complete; drop the record;
        remove the staging group.
        Returns whether the grown store is complete.
        """
        self.store._check_fence()
        root, group, grid = self.store.root, self.group, self.grid
        location, name = self.store.location, self.name
        record = dict(root.attrs.get("pending_append") or {})
        record["state"] = "committing"
        generation = int(root.attrs.get("generation", 0)) + 1
        root.update_attributes({"pending_append": record, "generation": generation, "complete": False})
        _move_chunks(location, f"{name}/gram", "gram")
        _move_folders(location, f"{name}/{EMBEDDINGS}", EMBEDDINGS)
        location.copy_file(f"{name}/gram/zarr.json", "gram/zarr.json")
        # the grown done-mask and checksums, copied file by file (each replaced whole) so that
        # the store never lacks them: an overwrite would delete them first
        for rec in ("tile_checksums", "tiles_done"):
            _copy_array_files(location, f"{name}/{rec}", rec)
        for vec in ("diag", "diag_cols", "y", "graph_ids", "graph_ids_cols"):
            if present(group, vec):
                self.store._write_vector(vec, read_array(group, vec, self.folder))
        root.update_attributes(as_jsonable(dict(group.attrs["commit_attrs"])) | {
            "generation": generation + 1, "diag_complete": bool(group.attrs.get("diag_complete"))})
        # the chunks and embeddings renamed in were synced with the staging group (or when the store
        # completed before): only the folders and the files rewritten here need syncing
        complete = mark_group_complete(root, grid, durable=("gram/c", EMBEDDINGS))
        # the record goes last: a commit killed before this point is finished by the next run
        root.attrs["pending_append"] = None
        location.remove_child(name)
        return complete


def begin_append(store: GramStore, grid: TileGrid, *, mask: np.ndarray, checksums: np.ndarray,
                 graphs: Any, entry: AppendEntry, grown_checksum: str) -> Staging:
    """Create the staging group of an append of ``entry`` growing ``store`` to ``grid``: the
    grown Gram (empty), its done-mask and checksums (the kept tiles already marked) and the grown
    row graphs' labels and ids (``graphs``: the store's graphs and the new ones); record it in the
    store's ``pending_append``."""
    vectors = {"graph_ids": graphs.graph_ids}
    if grid.symmetric:  # the column axis is the row axis: its ids grow with it
        vectors["graph_ids_cols"] = graphs.graph_ids
    if graphs.y is not None:
        vectors["y"] = graphs.y
    name = f"{PENDING_PREFIX}{entry.checksum[:12]}"
    store.location.remove_child(name)
    group = store.root.create_group(name)
    create_tile_arrays(group, grid, store.dtype, store.compression_level)
    group.require_group(EMBEDDINGS)
    write_done_mask(group, mask, checksums)
    for key, values in vectors.items():
        write_vector(group, key, values, GRAM_ARRAYS[key].dims)
    key = "dataset_checksum" if grid.symmetric else "test_checksum"
    commit_attrs = {key: grown_checksum, "appends": store.appends + [asdict(entry)],
                    "gramdist_version": entry.gramdist_version, "damaged_vectors": None,
                    "checksummed": True}  # every record array is rewritten whole by the commit
    # the state lives in the main store: the staging group never fits one
    group.update_attributes({"checksummed": True, "state_complete": True, "diag_complete": False,
                        "tile_size": grid.tile, "symmetric": grid.symmetric, "checksum_format": store.checksum_format,
                        "commit_attrs": as_jsonable(commit_attrs)})
    old = store.grid
    store.root.attrs["pending_append"] = as_jsonable({
        "state": "computing", "group": name, "from": [old.n_rows, old.n_cols], "to": [grid.n_rows, grid.n_cols],
        "source": entry.source, "n_graphs": entry.n_graphs, "checksum": entry.checksum,
        "started": time.time(), "host": socket.gethostname(), "pid": os.getpid()})
    return Staging(store, name)


def pending_groups(store: GramStore) -> list[str]:
    """Names of the staging groups in a store folder (normally none, or one while an append runs)."""
    return [n for n in store.location.folders() if n.startswith(PENDING_PREFIX)]


def discard_pending(store: GramStore, name: str | None = None) -> list[str]:
    """Remove staging groups (``name``, or every one) and the ``pending_append`` record if it
    names one of them."""
    names = [name] if name else pending_groups(store)
    for n in names:
        store.location.remove_child(n)
    record = store.root.attrs.get("pending_append")
    if record is not None and (name is None or record.get("group") == name):
        store.root.attrs["pending_append"] = None
    return names


def pending_progress(store: GramStore, pending: dict[str, Any]) -> tuple[int, int] | None:
    try:
        return Staging(store, pending["group"]).progress()
    except Exception:  # noqa: BLE001 - a staging group being created or removed this instant
        return None


def _move_chunks(location: Any, source: str, target: str) -> None:
    """Move every chunk file under ``source/c`` to the same place under ``target/c``."""
    for rel in location.files(f"{source}/c"):
        if rel.endswith(".partial"):  # left by a writer killed mid-write: never a chunk
            location.remove_child(f"{source}/c/{rel}")
            continue
        location.move_file(f"{source}/c/{rel}", f"{target}/c/{rel}")


def _copy_array_files(location: Any, source: str, target: str) -> None:
    """Copy an array's files over another's, its chunks first and its metadata last, each file
    replaced atomically; the source stays (a rerun of the commit copies it again)."""
    for rel in sorted(location.files(source), key=lambda f: f.rsplit("/", 1)[-1] == "zarr.json"):
        location.copy_file(f"{source}/{rel}", f"{target}/{rel}")


def _move_folders(location: Any, source: str, target: str) -> None:
    """Move every folder under ``source`` to ``target`` (replacing one of the same name), and
    ``source``'s group metadata when ``target`` has none."""
    files = location.files(source)
    if not files:
        return
    if "zarr.json" in files and not location.child(target, "zarr.json").is_file():
        location.copy_file(f"{source}/zarr.json", f"{target}/zarr.json")
    for child in location.folders(source):
        location.move_folder(f"{source}/{child}", f"{target}/{child}")
