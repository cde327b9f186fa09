"""The engine's steps, each a function that a run, an append or a transformer calls in turn.

A Gram run is::

    plan = plan_gram(job, out)                    # resolve and validate: kernel, graphs, grid
    sink = open_sink(plan, ...)                   # the store (resumed or new), or memory
    state = obtain_state(ex, plan, sink)          # fit on the sample, or the stored state
    emb = embed(ex, plan, state, sink, todo)      # embeddings and K(g, g) of the chunks needed
    compute_tiles(ex, plan, state, emb, sink, todo)  # tiles, as their embeddings are ready
    finish(sink, ...)                             # diagonal, done-mask, ``complete``

Every step takes an :class:`~gramdist.engine.executor.Executor` (a Dask client or this
process) and a sink (:class:`StoreSink`, a Zarr store that tile tasks write into, or
:class:`MemorySink`, a Gram assembled in this process). The steps never branch on which
kernel they run: they only call the :class:`~gramdist.kernels.base.GraphKernel` contract
through :mod:`gramdist.engine.tasks`. Only :mod:`gramdist.engine.store` knows the Zarr layout.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist._version import __version__
from gramdist.engine import store as st
from gramdist.engine import tasks
from gramdist.engine.executor import Executor
from gramdist.errors import JobError, StoreError, TileError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.base import GraphKernel, KernelState

Log = Callable[[str], None]
#: ``progress`` of a run: a bar on stderr (True), nothing (False), or ``callback(done, total)``
Progress = bool | Callable[[int, int], None]

#: default seconds between saves of a store's done-mask (the job's ``gram.checkpoint_seconds``)
CHECKPOINT_SECONDS = 2.0


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ plan
@dataclass
class GramPlan:
    """A resolved Gram computation: nothing computed yet, everything validated.

    ``rows`` × ``cols`` graphs (the same batch when ``symmetric``); the state is fitted on
    ``cols`` (the training graphs) as ``fit`` says. ``attrs`` are the store attributes that
    identify the computation (see :data:`gramdist.engine.store.FINGERPRINT_KEYS`).
    """

    kernel: GraphKernel
    rows: GraphBatch
    cols: GraphBatch
    grid: st.TileGrid
    normalize: bool
    fit: dict[str, Any]
    attrs: dict[str, Any]
    compression_level: int = 1
    max_tiles_in_flight: int | None = None
    checkpoint_seconds: float = CHECKPOINT_SECONDS
    timings: dict[str, float] = field(default_factory=dict)
    #: the Gram's storage type (``gram.dtype``); tiles are computed in float64 and rounded once
    dtype: str = "float64"
    #: keep each chunk's embedding in the store (``gram.keep_embeddings``) for later appends
    keep_embeddings: bool = False

    @property
    def symmetric(self) -> bool:
        return self.grid.symmetric


def kernel_from_spec(spec: dict[str, Any]) -> GraphKernel:
    """The kernel a job's ``kernel:`` section names, its parameters validated."""
    spec = dict(spec)
    return make_kernel(spec.pop("name"), **spec)


def plan_gram(kernel: GraphKernel, cols: GraphBatch, rows: GraphBatch | None = None, *,
              tile_size: int, normalize: bool, fit: dict[str, Any],
              dataset_spec: Any = None, test_spec: Any = None, job: dict[str, Any] | None = None,
              compression_level: int = 1, max_tiles_in_flight: int | None = None,
              checkpoint_seconds: float = CHECKPOINT_SECONDS, dtype: str = "float64",
              keep_embeddings: bool = False) -> GramPlan:
    """A :class:`GramPlan` for K(rows, cols); ``rows`` None means the symmetric K(cols, cols).

    ``dtype`` is the Gram's storage type, ``"float64"`` or ``"float32"`` (half the store and
    its I/O; each entry is the float64 value rounded to nearest). ``keep_embeddings`` keeps
    each chunk's embedding in the store, so that an append reads the old graphs' embeddings
    instead of computing them again.
    """
    if len(cols) == 0:
        raise JobError("the dataset has no graphs")
    symmetric = rows is None
    rows = cols if symmetric else rows
    if len(rows) == 0:
        raise JobError("the test dataset has no graphs")
    grid = st.TileGrid(len(rows), len(cols), int(tile_size), symmetric)
    cols_sum = cols.checksum()
    rows_sum = None if symmetric else rows.checksum()
    attrs = {
        "gramdist_version": __version__,
        "kernel": {"name": kernel.name, "params": kernel.get_params()},
        "dataset": _dataset_attrs(dataset_spec, cols, cols_sum),
        "dataset_checksum": cols_sum,
        "test_dataset": None if symmetric else _dataset_attrs(test_spec, rows, rows_sum),
        "test_checksum": rows_sum,
        "fit": {"sample_size": fit.get("sample_size"), "seed": fit.get("seed", 0),
                "from_store": fit.get("from_store")},
        "tile_size": int(tile_size),
        "normalize": bool(normalize),
        "symmetric": symmetric,
        "dtype": st.check_dtype(dtype),
        "keep_embeddings": bool(keep_embeddings),
        "job": job or {},
    }
    return GramPlan(kernel, rows, cols, grid, bool(normalize), dict(attrs["fit"]), attrs,
                    compression_level, max_tiles_in_flight, float(checkpoint_seconds), dtype=str(dtype),
                    keep_embeddings=bool(keep_embeddings))


def plan_job(job: dict[str, Any], *, loader: Callable[[Any], Any] | None = None) -> GramPlan:
    """Resolve and validate a (grid-free) job: its kernel, its graphs, its tile grid.

    ``loader`` turns the ``dataset:`` spec into graphs (default
    :func:`~gramdist.datasets.load_dataset`; streaming paths pass
    :func:`~gramdist.datasets.lazy.open_dataset`, whose datasets may be lazy).
    """
    from gramdist.datasets import load_dataset

    load_dataset = loader or load_dataset
    kernel = kernel_from_spec(job["kernel"])
    t = time.perf_counter()
    graphs = load_dataset(job["dataset"])
    test_graphs = load_dataset(job["test"]["dataset"]) if job.get("test") else None
    read_s = time.perf_counter() - t
    plan = plan_gram(
        kernel, graphs, test_graphs, tile_size=job["gram"]["tile_size"], normalize=job["gram"]["normalize"],
        fit=job["fit"], dataset_spec=job["dataset"], test_spec=(job.get("test") or {}).get("dataset"),
        job={k: v for k, v in job.items() if not k.startswith("_")},
        compression_level=job["gram"]["compression_level"],
        max_tiles_in_flight=job["cluster"].get("max_tiles_in_flight"),
        checkpoint_seconds=job["gram"].get("checkpoint_seconds", CHECKPOINT_SECONDS),
        dtype=job["gram"].get("dtype", "float64"),
        keep_embeddings=job["gram"].get("keep_embeddings", False),
    )
    plan.timings["read_s"] = read_s
    return plan


def _dataset_attrs(spec: Any, graphs: GraphBatch, checksum: str) -> dict[str, Any]:
    from gramdist.datasets import dataset_source

    attrs = {"spec": spec, "name": graphs.name, "n_graphs": len(graphs), "checksum": checksum}
    source = dataset_source(spec)  # a molecule file: its path, SHA-256 and conversion options
    if source is not None:
        attrs["source"] = source
    return attrs


def fit_sample_indices(n_graphs: int, sample_size: int | None, seed: int) -> np.ndarray:
    """Sorted indices of the fit sample: all graphs, or ``sample_size`` drawn with ``seed``."""
    if sample_size is None or sample_size >= n_graphs:
        return np.arange(n_graphs, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_graphs, size=sample_size, replace=False)).astype(np.int64)


# ------------------------------------------------------------------------------------ sinks
class StoreSink:
    """Tiles go into a Zarr store: tile tasks write their own chunks; this process keeps the
    done-mask and the checksums, saved every ``checkpoint_seconds`` and at the end."""

    #: the fitted state is written into ``root`` (and read back by the tasks from ``write_path``)
    keeps_state = True

    def __init__(self, root: Any, path: str, grid: st.TileGrid,
                 checkpoint_seconds: float = CHECKPOINT_SECONDS) -> None:
        self.root = root
        self.path = path
        self.grid = grid
        self.checkpoint_seconds = checkpoint_seconds
        self.write_path: str | None = str(Path(path).resolve())
        self.mask = st.read_done_mask(root)
        self.checksums = st.read_checksums(root, path)  # None for a store begun before them
        # a store that keeps its chunks' embeddings (gram.keep_embeddings) reads and adds to them
        self.embeddings = (self.write_path,) * 2 if root.attrs.get("keep_embeddings") else None
        self._last_flush = time.monotonic()

    def has_diag(self) -> bool:
        return bool(self.root.attrs.get("diag_complete"))

    def stored_diag(self) -> tuple[np.ndarray, np.ndarray]:
        return st.read_diag(self.root)

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None:
        st.write_diag(self.root, rows, None if self.grid.symmetric else cols)

    def tile_done(self, tile: tuple[int, int], checksum: int, block: np.ndarray | None) -> None:
        self.mask[tile] = True
        if self.checksums is not None:
            self.checksums[tile] = checksum

    def flush(self, force: bool = True) -> bool:
        """Save the done-mask (only if the last save is older than the interval, unless forced)."""
        if not force and time.monotonic() - self._last_flush <= self.checkpoint_seconds:
            return False
        st.write_done_mask(self.root, self.mask, self.checksums)
        self._last_flush = time.monotonic()
        return True

    def finish(self) -> bool:
        self.flush()
        return st.mark_complete(self.root, self.grid)

    def record_timings(self, timings: dict[str, float]) -> None:
        st.record_stats(self.root, timings)


class MemorySink:
    """Tiles come back to this process and are assembled into a NumPy Gram (with mirrors)."""

    write_path: str | None = None
    keeps_state = False

    def __init__(self, grid: st.TileGrid, dtype: str = "float64") -> None:
        self.grid = grid
        self.dtype = np.dtype(dtype)
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


Sink = StoreSink | MemorySink


def check_output_location(path: str, n_rows: int, n_cols: int, itemsize: int = 8) -> None:
    """Fail before any compute when the store cannot be written (a clear, early error);
    ``itemsize``: bytes per Gram entry (8 for float64, 4 for float32)."""
    target = Path(path).resolve()
    parent = target.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise StoreError(f"{path}: output location is not writable ({parent} is not a directory)")
    if not os.access(parent, os.W_OK):
        raise StoreError(f"{path}: output location is not writable ({parent})")
    if target.exists() and not os.access(target, os.W_OK):
        raise StoreError(f"{path}: store is not writable")
    free = shutil.disk_usage(parent).free
    need = n_rows * n_cols * itemsize
    # A float64 Gram compresses, but rarely below a quarter of its size; below that, stop now.
    if free < need / 4 + (16 << 20):
        raise StoreError(
            f"{path}: not enough free disk space ({free / 2**20:.1f} MiB free; the job needs "
            f"{(need / 4 + (16 << 20)) / 2**20:.1f} MiB: a quarter of the {need / 2**20:.1f} MiB "
            "uncompressed Gram plus 16 MiB)"
        )


def open_existing_store(plan: GramPlan, path: str, overwrite: bool) -> Any | None:
    """The store at ``path`` if it exists and was made by this computation (to resume);
    None if there is none or ``overwrite`` replaces it; :class:`StoreError` if another job's."""
    if not Path(path).exists() or overwrite:
        return None
    root = st.open_store(path, mode="r+")
    diff = st.fingerprint_mismatch(root, plan.attrs)
    if diff:
        grown = (f"; it has grown by {len(root.attrs['appends'])} append(s) since its job ran: "
                 f"`gramdist append {path}` resumes it" if root.attrs.get("appends") else "")
        raise StoreError(
            f"{path}: store was made by a different job ({', '.join(diff)} differ){grown}; "
            "choose another --out or pass --overwrite"
        )
    if st.upgrade_store(path):  # a store of an older gramdist: its metadata, as this one writes it
        root = st.open_store(path, mode="r+")
    return root


def create_store(plan: GramPlan, path: str, overwrite: bool) -> Any:
    """A new store laid out for the plan, holding its attributes and the graphs' labels and ids."""
    root = st.create_store(path, plan.grid, plan.attrs, compression_level=plan.compression_level,
                           overwrite=overwrite, dtype=plan.dtype)
    st.write_graph_vectors(root, plan.rows, cols=None if plan.symmetric else plan.cols)
    return root


# ------------------------------------------------------------------------------------ state
def obtain_state(ex: Executor, plan: GramPlan, sink: Sink, log: Log) -> KernelState | None:
    """Fit the kernel on its sample, or copy ``fit.from_store``'s state, unless the store has
    one already. A store's state is written into it; returns the state for a memory sink
    (which keeps none) and None when the state lives in the store. Any sink with
    ``keeps_state`` (a Zarr ``root`` and a ``write_path``) keeps it the way a Gram store does."""
    if sink.keeps_state and sink.root.attrs.get("state_complete"):
        log("gramdist: reusing the fitted state found in the store")
        return None
    fit = plan.fit
    t = time.perf_counter()
    if fit.get("from_store"):
        source = st.open_store(fit["from_store"])
        if source.attrs.get("kernel") != plan.attrs["kernel"]:
            raise StoreError(f"fit.from_store {fit['from_store']}: kernel or parameters differ from this job")
        state = st.read_state(fit["from_store"])
        indices = st.read_fit_indices(source, fit["from_store"])
    else:
        indices = fit_sample_indices(len(plan.cols), fit.get("sample_size"), fit.get("seed", 0))
        sample = plan.cols.take(indices) if len(indices) < len(plan.cols) else plan.cols
        state = ex.submit(tasks.fit_task, plan.kernel, sample, fit.get("seed", 0), key=f"fit-{new_token()}").result()
    plan.timings["fit_s"] = time.perf_counter() - t
    log(f"gramdist: fitted on {len(indices)} graphs in {plan.timings['fit_s']:.2f} s")
    if sink.keeps_state:
        st.write_state(sink.root, state, indices)
        return None
    return state


def share_state(ex: Executor, sink: Sink, state: KernelState | None, token: str) -> Any:
    """A future of the state for the tasks: read from the store by a worker (recomputable if
    that worker dies), or shipped once from here."""
    if state is None:  # a sink may write tiles elsewhere than the store holding the state
        return ex.submit(tasks.load_state_task, getattr(sink, "state_path", sink.write_path), key=f"state-{token}")
    return ex.put(state, key=f"state-{token}")


# ------------------------------------------------------------------------------------ embed
@dataclass
class Embedded:
    """Futures of one computation's embeddings, K(g, g) and kernel counters, by chunk.

    ``rows[i]`` embeds row chunk ``i``; ``cols`` is ``rows`` itself when symmetric. ``ready``
    holds every future that must finish before the embed phase counts as done.
    """

    rows: dict[int, Any]
    cols: dict[int, Any]
    diag: dict[tuple[str, int], Any]
    counts: list[Any]
    uses: Counter
    started: float

    def col_side(self, symmetric: bool) -> str:
        return "r" if symmetric else "c"


@dataclass
class ColumnCache:
    """Futures of the column graphs' chunk embeddings and K(g, g), kept across computations
    that share the fitted state, the column graphs and the tile size (a transformer's training
    graphs: embedded once at ``fit``, reused by every ``transform``). :func:`embed` takes a
    chunk from here when it has it and puts there every column chunk it submits."""

    tile: int
    chunks: dict[int, Any] = field(default_factory=dict)
    diag: dict[int, Any] = field(default_factory=dict)


def embed(ex: Executor, plan: GramPlan, state_f: Any, sink: Sink, todo: list[tuple[int, int]],
          token: str, cache: ColumnCache | None = None) -> Embedded:
    """Submit the embeddings of every chunk a tile in ``todo`` needs (every chunk when the
    diagonal is still to compute), their K(g, g), and the kernel's counters; column chunks
    (rows too when symmetric) come from ``cache`` where it holds them."""
    grid, kernel = plan.grid, plan.kernel
    n_row_chunks, n_col_chunks = grid.shape
    need_diag = not sink.has_diag()
    row_needed = set(range(n_row_chunks)) if need_diag else {i for i, _ in todo}
    col_needed = set(range(n_col_chunks)) if need_diag else {j for _, j in todo}
    if grid.symmetric:
        row_needed |= col_needed
    if cache is not None and cache.tile != grid.tile:
        raise ValueError(f"column cache of tile {cache.tile} used with tile {grid.tile}")

    kept = getattr(sink, "embeddings", None)  # (read from, keep in): a store keeping its embeddings

    def submit(batch: GraphBatch, rng: tuple[int, int], tag: str) -> Any:
        chunk = batch[rng[0]:rng[1]]
        if kept is not None:
            return ex.submit(tasks.cached_embed_task, kernel, state_f, chunk, kept[0], kept[1], tag,
                             chunk.checksum(), key=f"embed-{tag}-{token}", spread=True)
        return ex.submit(tasks.embed_task, kernel, state_f, chunk, key=f"embed-{tag}-{token}", spread=True)

    def column(j: int, tag: str) -> Any:
        if cache is None:
            return submit(plan.cols, grid.col_range(j), tag)
        if j not in cache.chunks:
            cache.chunks[j] = submit(plan.cols, grid.col_range(j), tag)
        return cache.chunks[j]

    started = time.perf_counter()
    if grid.symmetric:
        rows = {i: column(i, f"r{i}") for i in sorted(row_needed)}
        cols = rows
    else:
        rows = {i: submit(plan.rows, grid.row_range(i), f"r{i}") for i in sorted(row_needed)}
        cols = {j: column(j, f"c{j}") for j in sorted(col_needed)}
    # K(g, g) of each chunk stays a future that tiles take as an argument: a tile starts as
    # soon as its two embeddings are ready instead of after a gather of the whole diagonal
    diag: dict[tuple[str, int], Any] = {}
    if need_diag:
        for side, embs in (("r", rows), ("c", {} if grid.symmetric else cols)):
            cached = cache is not None and (side == "c" or grid.symmetric)
            for c in sorted(embs):
                if cached and c in cache.diag:
                    diag[(side, c)] = cache.diag[c]
                    continue
                diag[(side, c)] = ex.submit(tasks.diag_task, kernel, state_f, embs[c], key=f"diag-{side}{c}-{token}")
                if cached:
                    cache.diag[c] = diag[(side, c)]
    counts = []
    if kernel.has_embedding_counts:
        counts = [ex.submit(tasks.embedding_counts_task, kernel, f, key=f"counts-{side}{c}-{token}")
                  for side, embs in (("r", rows), ("c", {} if grid.symmetric else cols))
                  for c, f in sorted(embs.items())]
    # release each embedding as soon as no remaining tile needs it
    uses: Counter = Counter()
    col_side = "r" if grid.symmetric else "c"
    for i, j in todo:
        uses[("r", i)] += 1
        uses[(col_side, j)] += 1
    for side, embs in (("r", rows), ("c", {} if grid.symmetric else cols)):
        for c in list(embs):
            if uses[(side, c)] == 0:
                del embs[c]
    return Embedded(rows, cols, diag, counts, uses, started)


# ------------------------------------------------------------------------------------ tiles
@dataclass
class TileReport:
    """What the tile step did: tiles computed, the kernel's counters, phase timings."""

    computed: int
    counts: Counter
    timings: dict[str, float]
    counted: bool = False  # whether any chunk's counters were gathered


def compute_tiles(ex: Executor, plan: GramPlan, state_f: Any, emb: Embedded, sink: Sink,
                  todo: list[tuple[int, int]], token: str, *, already: int = 0,
                  progress: Progress = False, log: Log = stderr_log) -> TileReport:
    """Run the tiles of ``todo`` with a bounded window in flight, recording each in ``sink``
    as it finishes; gather K(g, g) and the counters alongside and store the diagonal.

    On any error or interruption the sink's done-mask is saved before re-raising, so a rerun
    resumes from every tile that finished.
    """
    grid, kernel = plan.grid, plan.kernel
    col_side = emb.col_side(grid.symmetric)
    if not emb.diag and plan.normalize:
        diag_rows, diag_cols = sink.stored_diag()
    n_threads = ex.n_threads()
    in_flight = plan.max_tiles_in_flight or max(4, 2 * n_threads)
    timings: dict[str, float] = {}

    def submit_tile(tl: tuple[int, int]) -> Any:
        i, j = tl
        r0, r1 = grid.row_range(i)
        c0, c1 = grid.col_range(j)
        ids = ((int(plan.rows.graph_ids[r0]), int(plan.rows.graph_ids[r1 - 1])),
               (int(plan.cols.graph_ids[c0]), int(plan.cols.graph_ids[c1 - 1])))
        if not plan.normalize:
            d_rows = d_cols = None
        elif emb.diag:
            d_rows, d_cols = emb.diag[("r", i)], emb.diag[(col_side, j)]
        else:
            d_rows, d_cols = diag_rows[r0:r1], diag_cols[c0:c1]
        return ex.submit(tasks.tile_task, kernel, state_f, emb.rows[i], emb.cols[j], d_rows, d_cols,
                         sink.write_path, grid, tl, ids, plan.dtype, key=f"tile-{i}-{j}-{token}", retries=1)

    ready = list({f.key: f for f in (*emb.rows.values(), *emb.cols.values(), *emb.diag.values(),
                                     *emb.counts)}.values())
    waiting = {f.key for f in ready}
    diag_keys = {f.key: sc for sc, f in emb.diag.items()}
    count_keys = {f.key for f in emb.counts}
    emb.counts = []
    diag_parts: dict[tuple[str, int], np.ndarray] = {}
    counts: Counter = Counter()
    report = progress_reporter(progress, len(grid.tiles()), already)

    pending = iter(todo)
    queue = ex.as_completed([submit_tile(tl) for tl in take_next(pending, in_flight)])
    queue.update(ready)
    del ready  # the queue holds them until each is yielded
    computed = 0
    try:
        for fut in queue:
            if fut.key in waiting:
                waiting.discard(fut.key)
                if fut.key in diag_keys:
                    diag_parts[diag_keys[fut.key]] = np.asarray(fut.result(), dtype=np.float64)
                    if len(diag_parts) == len(diag_keys):
                        _store_diag(sink, grid, diag_parts, log)
                elif fut.key in count_keys:
                    counts.update(fut.result())
                elif fut.status == "error":
                    fut.result()  # the embedding's own error, named by its task
                if not waiting:
                    timings["embed_s"] = time.perf_counter() - emb.started
                continue
            try:
                (i, j), _secs, checksum, block = fut.result()
            except TileError:
                raise
            except Exception as exc:  # a worker-side error not wrapped (e.g. KilledWorker)
                raise TileError(f"tile task {fut.key} failed: {type(exc).__name__}: {exc}") from exc
            sink.tile_done((i, j), checksum, block)
            computed += 1
            report(1)
            fut.release()
            for key in (("r", i), (col_side, j)):
                emb.uses[key] -= 1
                if emb.uses[key] == 0:
                    (emb.rows if key[0] == "r" else emb.cols).pop(key[1], None)
            for tl in take_next(pending, 1):
                queue.add(submit_tile(tl))
            if sink.flush(force=False) and not plan.max_tiles_in_flight:
                # workers that joined since the start (HPC jobs leaving the queue) widen the window
                want = max(4, 2 * ex.n_threads())
                if want > in_flight:
                    for tl in take_next(pending, want - in_flight):
                        queue.add(submit_tile(tl))
                    log(f"gramdist: {ex.n_workers()} workers now; {want} tiles in flight")
                    in_flight = want
    except BaseException:
        queue.clear()
        try:
            sink.flush()
        except OSError as exc:  # e.g. the disk is full: report the first error, not this one
            log(f"gramdist: warning: could not save the done-mask ({exc}); tiles finished since "
                "its last save will be recomputed")
        report(None)
        raise
    report(None)
    # the phases split the wall time: tiles_s counts from the moment every embedding was ready
    timings.setdefault("embed_s", 0.0)
    timings["tiles_s"] = time.perf_counter() - emb.started - timings["embed_s"]
    return TileReport(computed, counts, timings, counted=bool(count_keys))


def _store_diag(sink: Sink, grid: st.TileGrid, parts: dict[tuple[str, int], np.ndarray], log: Log) -> None:
    """Hand the gathered K(g, g) chunks to the sink as the row (and column) diagonal."""
    n_row_chunks, n_col_chunks = grid.shape
    diag_rows = np.concatenate([parts[("r", c)] for c in range(n_row_chunks)])
    diag_cols = diag_rows if grid.symmetric else np.concatenate([parts[("c", c)] for c in range(n_col_chunks)])
    sink.store_diag(diag_rows, diag_cols)
    if np.any(diag_rows < 0) or np.any(diag_cols < 0):
        log("gramdist: warning: some K(g, g) < 0; the kernel is not PSD on these graphs")


def progress_reporter(progress: Progress, total: int, initial: int, unit: str = "tile") -> Callable[[int | None], None]:
    """``report(n)`` after n more tiles (or other ``unit``), ``report(None)`` at the end."""
    if callable(progress):
        done = [initial]

        def call(n: int | None) -> None:
            if n is not None:
                done[0] += n
                progress(done[0], total)

        return call
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit=unit, disable=not progress, desc=f"{unit}s",
               file=sys.stderr, dynamic_ncols=True)
    return lambda n: bar.close() if n is None else bar.update(n)


def take_next(it: Any, n: int) -> list[Any]:
    """Up to ``n`` more items of the iterator ``it``."""
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


def new_token() -> str:
    """A short random suffix that keeps one computation's task keys apart from another's."""
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------------ finish
def finish(plan: GramPlan, sink: Sink, tiles: TileReport, log: Log,
           state: KernelState | None = None) -> tuple[bool, list[str]]:
    """Save the done-mask, mark the store complete iff every tile and the diagonal are there,
    and collect the kernel's notes for the user (``state``: the fitted state when the sink
    keeps none). Returns ``(complete, notes)``."""
    complete = sink.finish()
    notes: list[str] = []
    notes += list(plan.kernel.report(state if state is not None else st.read_state(sink.path)))
    if tiles.counted:
        notes += list(plan.kernel.report_embeddings(dict(tiles.counts)) or [])
    for note in notes:
        log(f"gramdist: note: {note}")
    return complete, notes
