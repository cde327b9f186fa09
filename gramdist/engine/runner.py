"""Run a Gram job into its store: the engine's steps in the order of a ``gramdist run``.

The orchestration keeps the client light: it holds the graphs it read, the fitted state for
as long as it takes to store it, the diagonal (N floats) and the done-mask; embeddings live on
the workers, and only a window of tile tasks exists at any time. Tile tasks write their own
Zarr chunks and return a tiny status; the client records finished tiles in the done-mask
(flushed every few seconds), so an interrupted job resumes where it stopped and a store is
marked complete only once every tile is on disk.

:func:`run_settings` is the one grid loop (a job, or each setting of its grid into
``<out>/<setting>.zarr`` on one cluster) that ``gramdist run`` and ``gramdist features`` share.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from gramdist.engine import steps
from gramdist.engine.context import RunContext
from gramdist.engine.executor import DaskExecutor, Executor
from gramdist.engine.placement import Placement
from gramdist.engine.plan import GramPlan, fit_sample_indices, plan_job
from gramdist.engine.sinks import MemorySink, StoreSink
from gramdist.engine.store import GramStore, Location, as_location
from gramdist.errors import StoreError
from gramdist.jobs import Job

# re-exported: the fit sample is part of a run's contract (tests and the stream module use it)
__all__ = ["MemoryResult", "RunResult", "compute_in_memory", "compute_into_store", "fit_in_memory",
           "fit_sample_indices", "run_grid", "run_job", "run_plan", "run_settings", "store_path_for"]

R = TypeVar("R")


@dataclass
class RunResult:
    """What a run did: where, how many tiles, and how long each phase took (seconds)."""

    store: str
    tiles_total: int
    tiles_computed: int
    tiles_already_done: int
    complete: bool
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def store_path_for(job: Job, out: str | None) -> str:
    """``--out``, else the job's ``output``, else ``<job name>.zarr`` in the working dir."""
    if out:
        return str(out)
    if job.output:
        return str(job.output)
    return f"{job.name or 'gram'}.zarr"


# ------------------------------------------------------------------------------------ grids
def run_settings(job: Job, folder: str, placement: Placement, run_one: Callable[[Job, str, Placement], R],
                 context: RunContext) -> list[tuple[str, R]]:
    """``run_one(job, out, placement)`` for a job, or for each setting of its grid into
    ``<folder>/<setting>.zarr``, all on one cluster. Returns ``(setting name, result)`` pairs;
    the name is ``""`` for a job without a grid (then ``folder`` is the store itself)."""
    from gramdist.jobs import expand_grid

    settings = expand_grid(job)
    if len(settings) == 1 and not settings[0][0]:
        return [("", run_one(settings[0][1], folder, placement))]
    Path(folder).mkdir(parents=True, exist_ok=True)
    results = []
    with _one_cluster(placement) as shared:
        for name, sub in settings:
            context.log(f"gramdist: grid setting {name}")
            results.append((name, run_one(sub, str(Path(folder) / f"{name}.zarr"), shared)))
    return results


@contextlib.contextmanager
def _one_cluster(placement: Placement) -> Iterator[Placement]:
    """The placement every setting of a grid uses. Each setting is placed by its own size, as a
    single job is (a grid of small Grams runs in this process); the cluster is connected at the
    first setting that needs one and serves every later one, and is closed after the grid."""
    if placement.client is not None or placement.in_process is True or placement.cluster.n_workers == 0:
        yield placement
        return
    from gramdist.engine.cluster import connect

    with contextlib.ExitStack() as stack:
        clients: list[Any] = []

        def connect_once() -> Any:
            if not clients:
                clients.append(stack.enter_context(connect(placement.cluster, placement.scheduler)))
            return clients[0]

        yield replace(placement, connect_once=connect_once)


def run_grid(job: Job, *, out: str | None = None, placement: Placement | None = None, overwrite: bool = False,
             context: RunContext | None = None) -> list[tuple[str, RunResult]]:
    """Run a job, or each setting of its grid into ``<out>/<setting>.zarr`` on one cluster."""
    context = context or RunContext()
    placement = placement or Placement(cluster=job.cluster)
    folder = out or job.output or (job.name or "gram") if job.grid else store_path_for(job, out)

    def one(sub: Job, path: str, where: Placement) -> RunResult:
        return run_job(sub, out=path, placement=where, overwrite=overwrite, context=context)

    return run_settings(job, str(folder), placement, one, context)


# ------------------------------------------------------------------------------------ one job
def run_job(job: Job, *, out: str | None = None, placement: Placement | None = None, overwrite: bool = False,
            context: RunContext | None = None) -> RunResult:
    """Run one (grid-free) job into its store; resume it if the store exists.

    Parameters
    ----------
    job : a validated job (see :mod:`gramdist.jobs`).
    out : store path (overrides the job's ``output``).
    placement : where to run (:class:`~gramdist.engine.placement.Placement`; default the job's
        ``cluster:`` section, on a cluster).
    overwrite : replace an existing store made by a different job.
    context : progress, log and detached job id (:class:`~gramdist.engine.context.RunContext`).
    """
    t_start = time.perf_counter()
    placement = placement or Placement(cluster=job.cluster)
    plan = plan_job(job)
    return run_plan(plan, store_path_for(job, out), placement, overwrite=overwrite, context=context, t_start=t_start)


def run_plan(plan: GramPlan, where: str | Location, placement: Placement, *, overwrite: bool = False,
             context: RunContext | None = None, t_start: float | None = None) -> RunResult:
    """Compute ``plan`` into the store at ``where`` under its lock; resume it if it exists.

    What ``gramdist run`` does once its job is planned, and what the Python front end
    (:class:`gramdist.GramTransformer` with ``store=``) calls with its own plan. The executor
    is started only once the store is known to need work (a complete store is not recomputed).
    """
    context = context or RunContext()
    location = as_location(where)
    t_start = time.perf_counter() if t_start is None else t_start
    steps.check_output_location(location, plan.grid.n_rows, plan.grid.n_cols, 8 if plan.dtype == "float64" else 4,
                                overwrite)
    if plan.fit.from_store and Location(plan.fit.from_store) == location:
        raise StoreError(f"{location}: fit.from_store names the output store itself; its state would be replaced")
    from gramdist.engine.store import StoreLock

    with StoreLock(location, job_id=context.job_id, log=context.log) as lock:
        return _run_locked(plan, lock, placement, overwrite, context, t_start)


def _run_locked(plan: GramPlan, lock: Any, placement: Placement, overwrite: bool, context: RunContext,
                t_start: float) -> RunResult:
    location = lock.store
    store = steps.open_existing_store(plan, location, overwrite)
    if store is not None and store.is_finished():
        n = len(plan.grid.tiles())
        context.log(f"{location}: already complete ({n} tiles)")
        return RunResult(str(location), n, 0, n, True, plan.timings)
    todo = plan.grid.n_rows * plan.grid.n_cols if store is None else _entries_left(store)
    t = time.perf_counter()
    with placement.executor(todo, context.log, plan_nodes(plan)) as ex:
        ex.warm_up(type(plan.kernel).__module__)
        plan.timings["cluster_s"] = time.perf_counter() - t
        if store is None:
            # created only once a cluster is reached: a refused connection leaves nothing behind
            store = steps.create_store(plan, location, overwrite)
        context.log(f"gramdist: {plan.kernel!r} on {plan.grid.n_rows}x{plan.grid.n_cols} graphs, "
                    f"{len(plan.grid.tiles())} tiles of {plan.grid.tile}, {ex.n_workers()} workers "
                    f"({ex.n_threads()} threads); dashboard: {ex.dashboard()}")
        sink = StoreSink(store, plan.gram.checkpoint_seconds, lock)
        result = compute_into_store(ex, plan, sink, context)
    plan.timings["total_s"] = time.perf_counter() - t_start
    sink.record_timings(plan.timings)  # still under the lock: a released store is another writer's
    result.timings = plan.timings
    return result


def nodes_to_embed(plan: GramPlan, embeddings: Any) -> int:
    """Nodes of the graphs a run embeds: a chunk whose embedding the store keeps for these very
    graphs (an append's old graphs) is read back, so it weighs nothing in the placement."""
    if embeddings is None or not plan.kernel.embedding_worth_keeping:
        return plan_nodes(plan)
    nodes = sum(int(getattr(chunk, "n_nodes", 0)) for tag, chunk in steps.embedded_chunks(plan)
                if not embeddings.keeps(tag, chunk.checksum()))
    return plan.kernel.placement_nodes(nodes)


def plan_nodes(plan: GramPlan) -> int:
    """Nodes of the graphs a plan embeds (0 when not known: a dataset generated chunk by chunk),
    each weighed by the kernel's ``node_weight``: what the placement's in-process limit counts."""
    nodes = sum(int(getattr(b, "n_nodes", 0)) for b in ((plan.cols,) if plan.symmetric else (plan.rows, plan.cols)))
    return plan.kernel.placement_nodes(nodes)


def _entries_left(store: GramStore) -> int:
    grid, mask = store.grid, store.done_mask()
    return sum(grid.entries(tl) for tl in grid.tiles() if not mask[tl])


def compute_into_store(ex: Executor, plan: GramPlan, sink: Any, context: RunContext) -> RunResult:
    """State, embeddings, tiles and completion of ``plan`` into an open store (any sink that
    keeps its state in a store): every tile the done-mask lacks is computed."""
    restored = sink.prepare(plan)
    if restored:
        context.log(f"gramdist: wrote {', '.join(restored)} again from the graphs (verify --repair found them changed)")
    token = steps.new_token()
    all_tiles = plan.grid.tiles()
    todo = [tl for tl in all_tiles if not sink.mask[tl]]
    already = len(all_tiles) - len(todo)
    _, state_f, emb = steps.fit_and_embed(ex, plan, sink, context, todo, token)
    tiles = steps.compute_tiles(ex, plan, state_f, emb, sink, todo, token, context)
    plan.timings.update(tiles.timings)
    complete, notes = steps.finish(plan, sink, tiles, context)
    secs = tiles.timings["tiles_s"]
    rate = tiles.computed / secs if secs > 0 else float("nan")
    where = sink.state_store.location
    context.log(f"gramdist: {tiles.computed} tiles computed ({already} already done) in {secs:.2f} s "
                f"({rate:.1f} tiles/s); store {where} {'complete' if complete else 'INCOMPLETE (rerun to resume)'}")
    return RunResult(str(where), len(all_tiles), tiles.computed, already, complete, plan.timings, notes)


# ------------------------------------------------------------------------------------ in memory
@dataclass
class MemoryResult:
    """A Gram computed into memory: ``gram`` (R, C), the raw K(g, g) of both sides, the state."""

    gram: Any
    diag_rows: Any
    diag_cols: Any
    state: Any
    notes: list[str] = field(default_factory=list)


def compute_in_memory(ex: Executor, plan: GramPlan, *, state: Any = None, context: RunContext | None = None,
                      cache: steps.ColumnCache | None = None) -> MemoryResult:
    """The same steps as :func:`compute_into_store`, the tiles assembled in this process.

    ``state`` given skips the fit (e.g. K(test, train) with the state fitted on train);
    ``cache`` holds column-chunk embeddings computed earlier with that state (and receives
    the ones computed now).
    """
    context = context or RunContext()
    sink = MemorySink(plan.grid, plan.dtype)
    token = steps.new_token()
    todo = plan.grid.tiles()
    if state is None:
        state, state_f, emb = steps.fit_and_embed(ex, plan, sink, context, todo, token, cache)
    else:
        state_f = steps.share_state(ex, sink, state, token)
        emb = steps.embed(ex, plan, state_f, sink, todo, token, cache)
    tiles = steps.compute_tiles(ex, plan, state_f, emb, sink, todo, token, context)
    plan.timings.update(tiles.timings)
    _, notes = steps.finish(plan, sink, tiles, context, state=state)
    return MemoryResult(sink.gram, sink.diag_rows, sink.diag_cols, state, notes)


def fit_in_memory(ex: Executor, plan: GramPlan, *, context: RunContext | None = None,
                  cache: steps.ColumnCache | None = None) -> Any:
    """The fitted state of ``plan`` (fitted on its column graphs as ``plan.fit`` says), and,
    given a ``cache``, the column graphs embedded into it with their K(g, g): what a
    transformer's ``fit`` does before any tile."""
    context = context or RunContext()
    sink = MemorySink(plan.grid)
    if cache is None:
        return steps.obtain_state(ex, plan, sink, context)
    cols_only = [(0, j) for j in range(plan.grid.shape[1])]  # the chunks a full row of tiles needs
    state, _, _ = steps.fit_and_embed(ex, plan, sink, context, cols_only, steps.new_token(), cache)
    for f in (*cache.chunks.values(), *cache.diag.values()):
        if f.status == "error":
            f.result()  # the embedding's own error, now rather than at the first transform
    return state


def warm(ex: Executor, module: str) -> Executor:
    """``ex`` with the kernel's module imported on its workers (a no-op in process)."""
    if isinstance(ex, DaskExecutor):
        ex.warm_up(module)
    return ex
