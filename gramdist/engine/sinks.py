"""Where a computation's results go: the :class:`Sink` of tiles and the :class:`ChunkSink` of
feature chunks, declared once, with their implementations.

Tiles go into a Gram store (:class:`StoreSink`), an append's staging group
(:class:`StagingSink`, in :mod:`gramdist.engine.append`), or this process's memory
(:class:`MemorySink`). Feature chunks go into a feature store (:class:`FeatureStoreSink`) or
memory (:class:`RowsSink`). The engine's steps only call these methods; only the store
package knows what a store holds.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np

from gramdist.engine.store import (
    ChunkTarget,
    EmbeddingCache,
    FeatureStore,
    GramStore,
    Store,
    TileGrid,
    TileTarget,
)

#: default seconds between saves of a store's done-mask (the job's ``gram.checkpoint_seconds``)
CHECKPOINT_SECONDS = 2.0


class Sink(Protocol):
    """Where tiles go.

    ``mask``: tiles recorded done; ``target``: where tile tasks write (None: their blocks come
    back to :meth:`tile_done`); ``embeddings``: kept embeddings to read and write (None: none);
    ``state_store``: the store holding the fitted state (None: the state stays in memory).
    """

    grid: TileGrid
    mask: np.ndarray
    target: TileTarget | None
    embeddings: EmbeddingCache | None
    state_store: Store | None

    def has_diag(self) -> bool: ...

    def stored_diag(self) -> tuple[np.ndarray, np.ndarray]: ...

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None: ...

    def tile_done(self, tile: tuple[int, int], checksum: int, block: np.ndarray | None) -> None: ...

    def known(self, tile: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
        """The leading rows × columns of ``tile`` the target already holds, and their recorded
        checksum: ``((0, 0), None)`` but for a tile an append grows."""
        ...

    def flush(self, force: bool = True) -> bool: ...

    def finish(self) -> bool: ...

    def record_timings(self, timings: dict[str, float]) -> None: ...


#: what :meth:`Sink.known` says of a tile computed whole
NOTHING_KNOWN: tuple[tuple[int, int], None] = ((0, 0), None)


class ChunkSink(Protocol):
    """Where feature chunks go: ``mask`` of chunks done; ``target`` where chunk tasks write
    (None: their rows come back to :meth:`chunk_done`)."""

    mask: np.ndarray
    target: ChunkTarget | None
    state_store: Store | None

    def chunk_done(self, i: int, result: dict[str, Any]) -> None: ...

    def flush(self, force: bool = True) -> bool: ...

    def finish(self) -> bool: ...

    def record_timings(self, timings: dict[str, float]) -> None: ...


class _Throttled:
    """Saves progress at most every ``checkpoint_seconds`` unless forced."""

    def __init__(self, checkpoint_seconds: float) -> None:
        self.checkpoint_seconds = checkpoint_seconds
        self._last_flush = time.monotonic()

    def flush(self, force: bool = True) -> bool:
        if not force and time.monotonic() - self._last_flush <= self.checkpoint_seconds:
            return False
        self._save()
        self._last_flush = time.monotonic()
        return True

    def _save(self) -> None:
        raise NotImplementedError


def merged(disk: tuple[np.ndarray, np.ndarray | None], mine: tuple[np.ndarray, np.ndarray | None]
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """The done-mask and checksums to save: what is on disk, plus what this writer finished
    (its checksums win for its own tiles). A save never unmarks what another writer recorded."""
    (disk_mask, disk_sums), (mask, sums) = disk, mine
    out_mask = np.asarray(disk_mask, dtype=bool) | np.asarray(mask, dtype=bool)
    if sums is None or disk_sums is None:
        return out_mask, sums
    return out_mask, np.where(mask, sums, disk_sums).astype(np.uint64)


class StoreSink(_Throttled):
    """Tiles go into a Gram store: tile tasks write their own chunks; this process keeps the
    done-mask and the checksums, saved every ``checkpoint_seconds`` and at the end. With the
    store's ``lock``, every save and every tile write first checks this run still holds it."""

    def __init__(self, store: GramStore, checkpoint_seconds: float = CHECKPOINT_SECONDS, lock: Any = None) -> None:
        super().__init__(checkpoint_seconds)
        self.store = store
        self.lock = lock
        lease = None if lock is None else lock.lease()
        if lock is not None:
            store.fence(lock.check)  # the diagonal, state, attributes: never after the store is lost
        self.grid = store.grid
        self.mask = store.done_mask()
        self.checksums = store.checksums()  # None for a store begun before them
        self.target: TileTarget | None = store.tile_target(lease)
        # a store that keeps its chunks' embeddings (gram.keep_embeddings) reads and adds to them
        self.embeddings: EmbeddingCache | None = store.embedding_cache(lease) if store.keeps_embeddings else None
        self.state_store: Store | None = store

    def prepare(self, plan: Any) -> list[str]:
        """Before the tiles: labels and ids that ``verify --repair`` marked, written again."""
        return self.store.restore_graph_vectors(plan.rows, None if plan.symmetric else plan.cols)

    def has_diag(self) -> bool:
        return self.store.diag_complete

    def stored_diag(self) -> tuple[np.ndarray, np.ndarray]:
        return self.store.read_diag()

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None:
        self.store.write_diag(rows, None if self.grid.symmetric else cols)

    def known(self, tile: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
        return NOTHING_KNOWN

    def tile_done(self, tile: tuple[int, int], checksum: int, block: np.ndarray | None) -> None:
        self.mask[tile] = True
        if self.checksums is not None:
            self.checksums[tile] = checksum

    def _save(self) -> None:
        self.mask, self.checksums = merged((self.store.done_mask(), self.store.checksums()),
                                           (self.mask, self.checksums))
        self.store.save_progress(self.mask, self.checksums)

    def finish(self) -> bool:
        self.flush()
        return self.store.mark_complete()

    def record_timings(self, timings: dict[str, float]) -> None:
        self.store.record_stats(timings)


class MemorySink:
    """Tiles come back to this process and are assembled into a NumPy Gram (with mirrors)."""

    target = None
    embeddings = None
    state_store = None

    def __init__(self, grid: TileGrid, dtype: str = "float64") -> None:
        self.grid = grid
        self.dtype = np.dtype(dtype)
        check_fits_in_memory(grid.n_rows * grid.n_cols * self.dtype.itemsize)
        # one tile covering the Gram is the Gram: kept as computed, not copied into a fresh
        # array (for NCI1's 4110 graphs the copy's page faults cost more than WL's arithmetic)
        self._whole = grid.shape == (1, 1)
        self.gram = None if self._whole else np.zeros((grid.n_rows, grid.n_cols), dtype=self.dtype)
        self.mask = np.zeros(grid.shape, dtype=bool)
        self.diag_rows: np.ndarray | None = None
        self.diag_cols: np.ndarray | None = None

    def has_diag(self) -> bool:
        return self.diag_rows is not None

    def stored_diag(self) -> tuple[np.ndarray, np.ndarray]:
        return self.diag_rows, self.diag_cols

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None:
        self.diag_rows, self.diag_cols = rows, cols

    def known(self, tile: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
        return NOTHING_KNOWN

    def tile_done(self, tile: tuple[int, int], checksum: int, block: np.ndarray | None) -> None:
        i, j = tile
        if self._whole:
            self.gram = block.astype(self.dtype, copy=False)  # float32: rounded once, as in a store
            self.mask[tile] = True
            return
        (r0, r1), (c0, c1) = self.grid.row_range(i), self.grid.col_range(j)
        self.gram[r0:r1, c0:c1] = block
        if self.grid.symmetric and i != j:
            self.gram[c0:c1, r0:r1] = block.T
        self.mask[tile] = True

    def flush(self, force: bool = True) -> bool:
        return False

    def finish(self) -> bool:
        return self.has_diag() and all(self.mask[t] for t in self.grid.tiles())

    def record_timings(self, timings: dict[str, float]) -> None:
        pass


def available_memory() -> int | None:
    """Bytes of memory available to this process now (Linux's MemAvailable), or None if unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_fits_in_memory(nbytes: int) -> None:
    """:class:`~gramdist.errors.StoreError` in one line when a Gram of ``nbytes`` cannot be held
    here (before anything is computed), pointing to a store, which holds it on disk tile by tile."""
    from gramdist.errors import StoreError

    free = available_memory()
    if free is not None and nbytes > free:
        raise StoreError(f"the Gram needs {nbytes / 2**30:.1f} GiB in memory and {free / 2**30:.1f} GiB are available; "
                         "write it to a store instead (store= in Python, `gramdist run` on the command line)")


class FeatureStoreSink(_Throttled):
    """A feature store being written: chunk tasks write their rows; this process keeps the
    done-mask and checksums, saved every ``checkpoint_seconds`` and at the end. The fitted
    state is kept in the store, as a Gram store keeps it."""

    def __init__(self, store: FeatureStore, checkpoint_seconds: float = CHECKPOINT_SECONDS, lock: Any = None) -> None:
        super().__init__(checkpoint_seconds)
        self.store = store
        self.lock = lock
        if lock is not None:
            store.fence(lock.check)
        self.mask, self.checksums = store.chunk_mask()
        self.target: ChunkTarget | None = store.chunk_target(None if lock is None else lock.lease())
        self.state_store: Store | None = store

    def chunk_done(self, i: int, result: dict[str, Any]) -> None:
        self.mask[i] = True
        self.checksums[i] = np.uint64(result["checksum"])

    def _save(self) -> None:
        self.mask, self.checksums = merged(self.store.chunk_mask(), (self.mask, self.checksums))
        self.store.save_progress(self.mask, self.checksums)

    def finish(self) -> bool:
        self.flush()
        return self.store.mark_complete()

    def record_timings(self, timings: dict[str, float]) -> None:
        self.store.record_stats(timings)


class RowsSink:
    """Feature chunks come back to this process: each chunk's rows, kept in chunk order."""

    target = None
    state_store = None

    def __init__(self, n_chunks: int) -> None:
        self.mask = np.zeros(n_chunks, dtype=bool)
        self.parts: list[dict[str, Any] | None] = [None] * n_chunks

    def chunk_done(self, i: int, result: dict[str, Any]) -> None:
        self.mask[i] = True
        self.parts[i] = result

    def flush(self, force: bool = True) -> bool:
        return False

    def finish(self) -> bool:
        return bool(self.mask.all())

    def record_timings(self, timings: dict[str, float]) -> None:
        pass
