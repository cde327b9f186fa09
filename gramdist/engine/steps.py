"""The engine's steps, each a function that a run, an append or a transformer calls in turn.

A Gram run is::

    plan = plan_job(job)                                 # plan.py: kernel, graphs, grid
    sink = StoreSink(store) | MemorySink(grid)           # sinks.py: where tiles go
    state, state_f, emb = fit_and_embed(ex, plan, sink, ctx, todo, ...)  # the fit (or the stored
                                                         # state), embeddings and K(g, g) of the chunks needed
    compute_tiles(ex, plan, state_f, emb, sink, todo, ...)  # tiles, as their embeddings are ready
    finish(plan, sink, tiles, ctx)                       # diagonal, done-mask, ``complete``

Every step takes an :class:`~gramdist.engine.executor.Executor` (a Dask client or this
process) and a :class:`~gramdist.engine.sinks.Sink`. The steps never branch on which kernel
they run: they only call the :class:`~gramdist.kernels.base.GraphKernel` contract through
:mod:`gramdist.engine.tasks`. Only :mod:`gramdist.engine.store` knows a store's layout.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist.engine import tasks
from gramdist.engine.context import RunContext, progress_reporter
from gramdist.engine.executor import Executor
from gramdist.engine.plan import GramPlan, fit_sample_indices
from gramdist.engine.sinks import Sink
from gramdist.engine.store import (
    GramStore,
    Location,
    Store,
    check_replaceable,
    creation_cut_short,
    open_store,
)
from gramdist.engine.window import Watched, Window, run_window
from gramdist.errors import StoreError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import KernelState


def new_token() -> str:
    """A short random suffix that keeps one computation's task keys apart from another's."""
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------------------------ stores
def check_output_location(location: Location, n_rows: int, n_cols: int, itemsize: int = 8,
                          overwrite: bool = False) -> None:
    """Fail before any compute (and before a lock file appears) when the store cannot be
    written: not replaceable (see :func:`~gramdist.engine.store.check_replaceable`), not
    writable, or not enough disk; ``itemsize``: bytes per Gram entry (8, or 4 for float32)."""
    check_replaceable(location, overwrite)
    problem = location.writable_problem()
    if problem:
        raise StoreError(f"{location}: output location is not writable ({problem})")
    free = location.free_bytes()
    if free is None:  # an object store: no disk to run out of
        return
    need = n_rows * n_cols * itemsize
    # A float64 Gram compresses, but rarely below a quarter of its size; below that, stop now.
    if free < need / 4 + (16 << 20):
        raise StoreError(
            f"{location}: not enough free disk space ({free / 2**20:.1f} MiB free; the job needs "
            f"{(need / 4 + (16 << 20)) / 2**20:.1f} MiB: a quarter of the {need / 2**20:.1f} MiB "
            "uncompressed Gram plus 16 MiB)"
        )


def open_existing_store(plan: GramPlan, location: Location, overwrite: bool) -> GramStore | None:
    """The store at ``location`` if it exists and was made by this computation (to resume);
    None if there is none or ``overwrite`` replaces it; :class:`StoreError` if another job's."""
    if not location.exists() or overwrite or location.is_empty_folder() or creation_cut_short(location):
        return None
    store = GramStore.open(location, mode="r+")
    store.check_kernel_versions(plan.meta.kernel_versions)
    diff = store.fingerprint_mismatch(plan.meta.to_attrs())
    if diff:
        grown = (f"; it has grown by {len(store.appends)} append(s) since its job ran: "
                 f"`gramdist append {location}` resumes it" if store.appends else "")
        raise StoreError(f"{location}: store was made by a different job ({', '.join(diff)} differ){grown}; "
                         "choose another --out or pass --overwrite")
    if store.upgrade():  # a store of an older gramdist: its metadata, as this one writes it
        store = store.reopen()
    return store


def create_store(plan: GramPlan, location: Location, overwrite: bool) -> GramStore:
    """A new store laid out for the plan, holding its attributes and the graphs' labels and ids."""
    store = GramStore.create(location, plan.grid, plan.meta, compression_level=plan.gram.compression_level,
                             overwrite=overwrite or creation_cut_short(location), finish=False)
    store.write_graph_vectors(plan.rows, cols=None if plan.symmetric else plan.cols)
    store.finish_creation()
    return store


# ------------------------------------------------------------------------------------ state
@dataclass
class PendingFit:
    """A fit that :func:`start_fit` submitted (its future) or read (``state``), with its
    sample's indices and start time."""

    future: Any
    indices: np.ndarray
    started: float
    state: KernelState | None = None

    def result(self) -> KernelState:
        return self.state if self.future is None else self.future.result()


def start_fit(ex: Executor, plan: GramPlan, sink: Any, ctx: RunContext) -> PendingFit | None:
    """Submit the kernel's fit on its sample, or read ``fit.from_store``'s state; None when the
    sink's store has a state already. The fit runs in the pool (in process) where the kernel
    ``embeds_without_state``, so that :func:`fit_and_embed` can embed beside it."""
    store: Store | None = sink.state_store
    if store is not None and store.state_complete:
        ctx.log("gramdist: reusing the fitted state found in the store")
        return None
    started = time.perf_counter()
    if plan.fit.from_store:
        source = open_store(plan.fit.from_store)
        if source.kernel != plan.meta.kernel:
            raise StoreError(f"fit.from_store {plan.fit.from_store}: kernel or parameters differ from this job")
        source.check_kernel_versions(plan.meta.kernel_versions)
        return PendingFit(None, source.fit_indices(), started, source.read_state())
    indices = fit_sample_indices(len(plan.cols), plan.fit.sample_size, plan.fit.seed)
    whole = len(indices) == len(plan.cols) and isinstance(plan.cols, GraphBatch)  # a lazy dataset loads its sample
    sample = plan.cols if whole else plan.cols.take(indices)
    future = ex.submit(tasks.fit_task, plan.kernel, sample, plan.fit.seed, key=f"fit-{new_token()}",
                       pooled=plan.kernel.embeds_without_state)
    return PendingFit(future, indices, started)


def finish_fit(pending: PendingFit | None, plan: GramPlan, sink: Any, ctx: RunContext) -> KernelState | None:
    """Wait for a :func:`start_fit`; a store's state is written into it and None returned (it
    lives in the store), a sink without a store gets the state returned."""
    if pending is None:
        return None
    state = pending.result()
    plan.timings["fit_s"] = time.perf_counter() - pending.started
    ctx.log(f"gramdist: fitted on {len(pending.indices)} graphs in {plan.timings['fit_s']:.2f} s")
    store: Store | None = sink.state_store
    if store is not None:
        store.write_state(state, pending.indices)
        return None
    return state


def obtain_state(ex: Executor, plan: GramPlan, sink: Any, ctx: RunContext) -> KernelState | None:
    """Fit the kernel on its sample, or copy ``fit.from_store``'s state, unless the sink's store
    has one already. A store's state is written into it and None returned (it lives in the
    store); a sink without a store gets the state returned."""
    return finish_fit(start_fit(ex, plan, sink, ctx), plan, sink, ctx)


def share_state(ex: Executor, sink: Any, state: KernelState | None, token: str) -> Any:
    """A future of the state for the tasks: read from the sink's store by a worker (recomputable
    if that worker dies), or shipped once from here."""
    if state is None:
        return ex.submit(tasks.load_state_task, sink.state_store.location.resolved(), key=f"state-{token}")
    return ex.put(state, key=f"state-{token}")


def fit_and_embed(ex: Executor, plan: GramPlan, sink: Any, ctx: RunContext, todo: list[tuple[int, int]],
                  token: str, cache: ColumnCache | None = None) -> tuple[KernelState | None, Any, Embedded]:
    """:func:`obtain_state`, :func:`share_state` and :func:`embed` in one: the state (None when
    it lives in the sink's store), its future for the tasks, and the embeddings.

    A kernel that ``embeds_without_state`` (its embedding is a fixed function of each graph,
    such as WL's hashed labels) has its chunks embedded while the fit runs, given an empty
    state: core(WL) on D&D spends 2 s fitting its label dictionary over every core, which its
    embeddings do not read. Every other kernel's embeddings wait for the fitted state.
    """
    pending = start_fit(ex, plan, sink, ctx)
    beside_fit = pending is not None and plan.kernel.embeds_without_state
    if beside_fit:
        # a task, not scattered data: a worker that dies holding it leaves it recomputable
        no_state = ex.submit(tasks.empty_state_task, key=f"no-state-{token}")
        emb = embed(ex, plan, no_state, sink, todo, token, cache)
    state = finish_fit(pending, plan, sink, ctx)
    state_f = share_state(ex, sink, state, token)
    if not beside_fit:
        emb = embed(ex, plan, state_f, sink, todo, token, cache)
    return state, state_f, emb


# ------------------------------------------------------------------------------------ embed
@dataclass
class Embedded:
    """Futures of one computation's embeddings, K(g, g) and kernel counters, by chunk.

    ``rows[i]`` embeds row chunk ``i``; ``cols`` is ``rows`` itself when symmetric; ``diag``
    maps ``(side, chunk)`` to a future of that chunk's K(g, g); ``uses`` counts the tiles still
    to use each embedding (released at 0); ``order``: the :func:`chunk_tag` of each chunk
    embedded here (not taken from a cache), in the order they were submitted; ``keeps``: the
    tasks keeping embeddings in the store, which the tile step waits for.
    """

    rows: dict[int, Any]
    cols: dict[int, Any]
    diag: dict[tuple[str, int], Any]
    counts: list[Any]
    uses: Counter
    started: float
    order: list[str] = field(default_factory=list)
    keeps: list[Any] = field(default_factory=list)

    def col_side(self, symmetric: bool) -> str:
        return "r" if symmetric else "c"

    def sides(self, symmetric: bool) -> tuple[tuple[str, dict[int, Any]], ...]:
        return (("r", self.rows), ("c", {} if symmetric else self.cols))


@dataclass
class ColumnCache:
    """Futures of the column graphs' chunk embeddings and K(g, g), kept across computations
    that share the fitted state, the column graphs and the tile size (a transformer's training
    graphs: embedded once at ``fit``, reused by every ``transform``). :func:`embed` takes a
    chunk from here when it has it and puts there every column chunk it submits."""

    tile: int
    chunks: dict[int, Any] = field(default_factory=dict)
    diag: dict[int, Any] = field(default_factory=dict)


def embeds_in_worker(kernel: Any, chunk: Any) -> bool:
    """Whether a chunk's embedding may go to the command's forked workers (a lazy chunk, not
    yet read, stays here)."""
    return isinstance(chunk, GraphBatch) and kernel.embeds_in_worker_process(chunk)


def embedding_lane(kernel: Any) -> dict[str, bool]:
    """How a kernel's per-chunk tasks run in process: in the pool where its embeddings release
    the GIL, else in the background thread (see :class:`InlineExecutor`)."""
    pooled = bool(kernel.embeds_in_threads)
    return {"pooled": pooled, "background": not pooled}


@dataclass
class _Embedder:
    """Submits the embedding tasks of one computation (see :func:`embed`)."""

    ex: Executor
    plan: GramPlan
    state_f: Any
    sink: Any
    token: str
    cache: ColumnCache | None
    order: list[str] = field(default_factory=list)  # chunk tags in the order they were submitted
    keeps: list[Any] = field(default_factory=list)  # futures of the tasks keeping embeddings

    def submit(self, batch: GraphBatch, rng: tuple[int, int], tag: str) -> Any:
        chunk = batch[rng[0]:rng[1]]
        key = f"embed-{tag}-{self.token}"
        where = embedding_lane(self.plan.kernel)
        self.order.append(tag)
        cache = self.sink.embeddings
        if cache is None:
            return self.ex.submit(tasks.embed_task, self.plan.kernel, self.state_f, chunk, key=key, spread=True,
                                  processes=embeds_in_worker(self.plan.kernel, chunk), **where)
        checksum = chunk.checksum()
        # keep=False: the task only reads the store, so it may run in a forked worker
        fut = self.ex.submit(tasks.cached_embed_task, self.plan.kernel, self.state_f, chunk, cache, tag, checksum,
                             False, key=key, spread=True, processes=embeds_in_worker(self.plan.kernel, chunk), **where)
        if self.plan.kernel.embedding_worth_keeping:
            # kept by a task of its own, in the pool: not on the way from one embedding to the
            # next (NCI1 shortest path: 4 x 18 ms of Zarr writes off the embedding thread)
            self.keeps.append(self.ex.submit(tasks.keep_embedding_task, cache, tag, fut, checksum,
                                             key=f"keep-{tag}-{self.token}", pooled=True))
        return fut

    def column(self, j: int, tag: str) -> Any:
        rng = self.plan.grid.col_range(j)
        if self.cache is None:
            return self.submit(self.plan.cols, rng, tag)
        if j not in self.cache.chunks:
            self.cache.chunks[j] = self.submit(self.plan.cols, rng, tag)
        return self.cache.chunks[j]

    def diag(self, side: str, c: int, emb: Any) -> Any:
        # K(g, g) of each chunk stays a future that tiles take as an argument: a tile starts as
        # soon as its two embeddings are ready instead of after a gather of the whole diagonal
        cached = self.cache is not None and (side == "c" or self.plan.symmetric)
        if cached and c in self.cache.diag:
            return self.cache.diag[c]
        # run where the embedding it takes runs: inline, it would wait for that embedding here
        fut = self.ex.submit(tasks.diag_task, self.plan.kernel, self.state_f, emb, key=f"diag-{side}{c}-{self.token}",
                             **embedding_lane(self.plan.kernel))
        if cached:
            self.cache.diag[c] = fut
        return fut


def chunk_tag(side: str, index: int, symmetric: bool) -> str:
    """The name of a chunk's embedding task and of its kept embedding in a store: ``r{i}`` for
    row chunks (and the column chunks of a symmetric Gram, which are the same), ``c{j}``."""
    return f"r{index}" if side == "r" or symmetric else f"c{index}"


def embedded_chunks(plan: GramPlan) -> Iterator[tuple[str, GraphBatch]]:
    """Every chunk of graphs ``plan`` embeds, with its :func:`chunk_tag`."""
    grid = plan.grid
    for c in range(grid.shape[1]):
        yield chunk_tag("c", c, plan.symmetric), plan.cols[slice(*grid.col_range(c))]
    if not plan.symmetric:
        for r in range(grid.shape[0]):
            yield chunk_tag("r", r, False), plan.rows[slice(*grid.row_range(r))]


def embed(ex: Executor, plan: GramPlan, state_f: Any, sink: Any, todo: list[tuple[int, int]], token: str,
          cache: ColumnCache | None = None) -> Embedded:
    """Submit the embeddings of every chunk a tile in ``todo`` needs (every chunk when the
    diagonal is still to compute), their K(g, g), and the kernel's counters; column chunks
    (rows too when symmetric) come from ``cache`` where it holds them."""
    grid, kernel = plan.grid, plan.kernel
    if cache is not None and cache.tile != grid.tile:
        raise ValueError(f"column cache of tile {cache.tile} used with tile {grid.tile}")
    need_diag = not sink.has_diag()
    row_needed = set(range(grid.shape[0])) if need_diag else {i for i, _ in todo}
    col_needed = set(range(grid.shape[1])) if need_diag else {j for _, j in todo}
    emb = _Embedder(ex, plan, state_f, sink, token, cache)
    out = Embedded({}, {}, {}, [], Counter(), time.perf_counter(), emb.order, emb.keeps)

    def with_diag(side: str, c: int, fut: Any) -> Any:
        # each chunk's K(g, g) right after its embedding: a tile that normalises waits for both
        if need_diag:
            out.diag[(side, c)] = emb.diag(side, c, fut)
        return fut

    if grid.symmetric:
        out.rows = out.cols = {i: with_diag("r", i, emb.column(i, chunk_tag("r", i, True)))
                               for i in sorted(row_needed | col_needed)}
    else:
        out.rows = {i: with_diag("r", i, emb.submit(plan.rows, grid.row_range(i), chunk_tag("r", i, False)))
                    for i in sorted(row_needed)}
        out.cols = {j: with_diag("c", j, emb.column(j, chunk_tag("c", j, False))) for j in sorted(col_needed)}
    if kernel.has_embedding_counts:
        out.counts = [ex.submit(tasks.embedding_counts_task, kernel, f, key=f"counts-{side}{c}-{token}",
                                **embedding_lane(kernel))
                      for side, embs in out.sides(grid.symmetric) for c, f in sorted(embs.items())]
    _count_uses(out, todo, grid.symmetric)
    return out


def _count_uses(emb: Embedded, todo: list[tuple[int, int]], symmetric: bool) -> None:
    """Count each embedding's tiles, and release at once those no tile needs."""
    col_side = emb.col_side(symmetric)
    for i, j in todo:
        emb.uses[("r", i)] += 1
        emb.uses[(col_side, j)] += 1
    for side, embs in emb.sides(symmetric):
        for c in list(embs):
            if emb.uses[(side, c)] == 0:
                del embs[c]


# ------------------------------------------------------------------------------------ tiles
@dataclass
class TileReport:
    """What the tile step did: tiles computed, the kernel's counters, phase timings."""

    computed: int
    counts: Counter
    timings: dict[str, float]
    counted: bool = False  # whether any chunk's counters were gathered


class _TileLoop:
    """The tile step's state: submits tiles, records them, handles the watched embeddings."""

    def __init__(self, ex: Executor, plan: GramPlan, state_f: Any, emb: Embedded, sink: Sink, token: str,
                 ctx: RunContext) -> None:
        self.ex, self.plan, self.state_f, self.emb, self.sink, self.token, self.ctx = (
            ex, plan, state_f, emb, sink, token, ctx)
        self.col_side = emb.col_side(plan.symmetric)
        self.diag_keys = {f.key: sc for sc, f in emb.diag.items()}
        self.count_keys = {f.key for f in emb.counts}
        self.keep_keys = {f.key for f in emb.keeps}
        self.diag_parts: dict[tuple[str, int], np.ndarray] = {}
        self.counts: Counter = Counter()
        self.waiting = set()
        self.timings: dict[str, float] = {}
        self.stored_diag = sink.stored_diag() if not emb.diag and plan.normalize else None

    def watched(self) -> Watched:
        futures = list({f.key: f for f in (*self.emb.rows.values(), *self.emb.cols.values(),
                                           *self.emb.diag.values(), *self.emb.counts)}.values())
        self.waiting = {f.key for f in futures}
        futures += self.emb.keeps
        self.emb.counts, self.emb.keeps = [], []
        return Watched(futures, self.handle)

    def handle(self, fut: Any) -> None:
        """An embedding, a chunk's K(g, g), its counters or the keeping of its embedding finished."""
        if fut.key in self.keep_keys:
            fut.result()  # best effort, but a lost lease stops the run
            return
        self.waiting.discard(fut.key)
        if fut.key in self.diag_keys:
            self.diag_parts[self.diag_keys[fut.key]] = np.asarray(fut.result(), dtype=np.float64)
            if len(self.diag_parts) == len(self.diag_keys):
                _store_diag(self.sink, self.plan.grid, self.diag_parts, self.ctx)
        elif fut.key in self.count_keys:
            self.counts.update(fut.result())
        elif fut.status == "error":
            fut.result()  # the embedding's own error, named by its task
        if not self.waiting:
            self.timings["embed_s"] = time.perf_counter() - self.emb.started

    def submit(self, tl: tuple[int, int]) -> Any:
        grid, plan, emb = self.plan.grid, self.plan, self.emb
        i, j = tl
        (r0, r1), (c0, c1) = grid.row_range(i), grid.col_range(j)
        ids = ((int(plan.rows.graph_ids[r0]), int(plan.rows.graph_ids[r1 - 1])),
               (int(plan.cols.graph_ids[c0]), int(plan.cols.graph_ids[c1 - 1])))
        if not plan.normalize:
            d_rows = d_cols = None
        elif emb.diag:
            d_rows, d_cols = emb.diag[("r", i)], emb.diag[(self.col_side, j)]
        else:
            d_rows, d_cols = self.stored_diag[0][r0:r1], self.stored_diag[1][c0:c1]
        known, known_sum = self.sink.known(tl)
        spec = tasks.TileSpec(grid, tl, self.sink.target, plan.dtype, ids, known, known_sum)
        return self.ex.submit(tasks.tile_task, plan.kernel, self.state_f, emb.rows[i], emb.cols[j], d_rows, d_cols,
                              spec, key=f"tile-{i}-{j}-{self.token}", retries=1, pooled=True)

    def record(self, result: tuple[tuple[int, int], float, int, np.ndarray | None]) -> None:
        (i, j), _secs, checksum, block = result
        self.sink.tile_done((i, j), checksum, block)
        for key in (("r", i), (self.col_side, j)):
            self.emb.uses[key] -= 1
            if self.emb.uses[key] == 0:
                (self.emb.rows if key[0] == "r" else self.emb.cols).pop(key[1], None)


def compute_tiles(ex: Executor, plan: GramPlan, state_f: Any, emb: Embedded, sink: Sink,
                  todo: list[tuple[int, int]], token: str, ctx: RunContext) -> TileReport:
    """Run the tiles of ``todo`` through the engine's window, recording each in ``sink`` as it
    finishes; gather K(g, g) and the counters alongside and store the diagonal.

    On any error or interruption the sink's done-mask is saved before re-raising, so a rerun
    resumes from every tile that finished.
    """
    loop = _TileLoop(ex, plan, state_f, emb, sink, token, ctx)
    total = len(plan.grid.tiles())
    window = Window(ex, loop.submit, loop.record, progress_reporter(ctx.progress, total, total - len(todo)),
                    ctx.log, sink=sink, width=plan.max_in_flight, what="tile", watched=loop.watched())
    computed = run_window(window, in_embedding_order(todo, emb.order, plan.symmetric))
    # the phases split the wall time: tiles_s counts from the moment every embedding was ready
    timings = loop.timings
    timings.setdefault("embed_s", 0.0)
    timings["tiles_s"] = time.perf_counter() - emb.started - timings["embed_s"]
    return TileReport(computed, loop.counts, timings, counted=bool(loop.count_keys))


def in_embedding_order(todo: list[tuple[int, int]], order: list[str], symmetric: bool) -> list[tuple[int, int]]:
    """``todo`` with each tile placed by the later of its two chunks in the embeddings'
    submission ``order`` (chunks not in it, taken from a cache, count as first), then row-major:
    the tiles that can start first come first (NCI1 in 4 chunks: (0, 0) after one chunk's
    embedding, (0, 1) and (1, 1) after two), where row-major order would hold a thread waiting
    on chunk 3 for tile (0, 3). Each tile's values do not depend on when it runs."""
    rank = {tag: n for n, tag in enumerate(order)}

    def ready(tl: tuple[int, int]) -> int:
        return max(rank.get(chunk_tag("r", tl[0], symmetric), -1), rank.get(chunk_tag("c", tl[1], symmetric), -1))

    return sorted(todo, key=lambda tl: (ready(tl), tl))


def _store_diag(sink: Sink, grid: Any, parts: dict[tuple[str, int], np.ndarray], ctx: RunContext) -> None:
    """Hand the gathered K(g, g) chunks to the sink as the row (and column) diagonal."""
    n_row_chunks, n_col_chunks = grid.shape
    diag_rows = np.concatenate([parts[("r", c)] for c in range(n_row_chunks)])
    diag_cols = diag_rows if grid.symmetric else np.concatenate([parts[("c", c)] for c in range(n_col_chunks)])
    sink.store_diag(diag_rows, diag_cols)
    if np.any(diag_rows < 0) or np.any(diag_cols < 0):
        ctx.log("gramdist: warning: some K(g, g) < 0; the kernel is not PSD on these graphs")


# ------------------------------------------------------------------------------------ finish
def finish(plan: GramPlan, sink: Any, tiles: TileReport, ctx: RunContext,
           state: KernelState | None = None) -> tuple[bool, list[str]]:
    """Save the done-mask, mark the store complete iff every tile and the diagonal are there,
    and collect the kernel's notes for the user (``state``: the fitted state when the sink
    keeps none). Returns ``(complete, notes)``; the time to save and mark (an append's commit
    included) is ``plan.timings["finish_s"]``."""
    t = time.perf_counter()
    complete = sink.finish()
    plan.timings["finish_s"] = time.perf_counter() - t
    notes = list(plan.kernel.report(state if state is not None else sink.state_store.read_state()))
    if tiles.counted:
        notes += list(plan.kernel.report_embeddings(dict(tiles.counts)) or [])
    for note in notes:
        ctx.note(note)
    return complete, notes
