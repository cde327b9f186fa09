"""Run a Gram job into its store: the engine's steps in the order of a ``gramdist run``.

The orchestration keeps the client light: it holds the graphs it read, the fitted state for
as long as it takes to store it, the diagonal (N floats) and the done-mask; embeddings live on
the workers, and only ``max_tiles_in_flight`` tile tasks exist at any time. Tile tasks write
their own Zarr chunks and return a tiny status; the client records finished tiles in the
``tiles_done`` mask (flushed every few seconds), so an interrupted job resumes where it
stopped and a store is marked complete only once every tile is on disk.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine import steps
from gramdist.engine import store as st
from gramdist.engine.cluster import connect
from gramdist.engine.executor import DaskExecutor, Executor
from gramdist.engine.lock import StoreLock

# re-exported: the fit sample is part of a run's contract (tests and the stream module use it)
fit_sample_indices = steps.fit_sample_indices


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


def store_path_for(job: dict[str, Any], out: str | None) -> str:
    """``--out``, else the job's ``output``, else ``<job name>.zarr`` in the working dir."""
    if out:
        return str(out)
    if job.get("output"):
        return str(job["output"])
    return f"{job.get('_job_name') or 'gram'}.zarr"


def run_grid(job: dict[str, Any], *, out: str | None = None, scheduler: str | None = None, client: Any = None,
             overwrite: bool = False, progress: steps.Progress = True,
             log: steps.Log | None = None, job_id: str | None = None) -> list[tuple[str, RunResult]]:
    """Run a job, or each setting of its grid into ``<out>/<setting>.zarr`` on one cluster.

    Returns ``(setting name, result)`` pairs; the name is ``""`` for a job without a grid.
    ``job_id``: see :func:`run_job`.
    """
    from gramdist.jobs import expand_grid

    log = log or steps.stderr_log
    settings = expand_grid(job)
    if len(settings) == 1 and not settings[0][0]:
        return [("", run_job(settings[0][1], out=out, scheduler=scheduler, client=client, overwrite=overwrite,
                             progress=progress, log=log, job_id=job_id))]
    folder = Path(out or job.get("output") or f"{job['_job_name']}")
    folder.mkdir(parents=True, exist_ok=True)
    results = []
    with (connect(job["cluster"], scheduler) if client is None else _given(client)) as client:
        for name, sub in settings:
            log(f"gramdist: grid setting {name}")
            results.append((name, run_job(sub, out=str(folder / f"{name}.zarr"), client=client,
                                          overwrite=overwrite, progress=progress, log=log, job_id=job_id)))
    return results


def run_job(
    job: dict[str, Any],
    *,
    out: str | None = None,
    scheduler: str | None = None,
    client: Any = None,
    overwrite: bool = False,
    progress: steps.Progress = True,
    log: steps.Log | None = None,
    job_id: str | None = None,
) -> RunResult:
    """Run one (grid-free) job into its store; resume it if the store exists.

    Parameters
    ----------
    job : a validated job dict (see :mod:`gramdist.jobs`).
    out : store path (overrides the job's ``output``).
    scheduler : address of an existing Dask scheduler (overrides ``cluster.scheduler``).
    client : an existing ``distributed.Client`` to use instead of connecting.
    overwrite : replace an existing store made by a different job.
    progress : a progress bar on stderr (True), none (False), or ``callback(done, total)``
        called after each tile (an exception it raises stops the run, resumably).
    log : where to print status lines (default: stderr).
    job_id : the id of the detached job (``gramdist submit``) this run is; its store lock
        carries it, so that the job's orchestrator restarted on another worker takes over
        the lock its dead predecessor left (see :mod:`gramdist.engine.detached`).
    """
    log = log or steps.stderr_log
    t_start = time.perf_counter()
    plan = steps.plan_job(job)
    return run_plan(plan, store_path_for(job, out), dask_executor(job["cluster"], scheduler, client),
                    overwrite=overwrite, progress=progress, log=log, t_start=t_start, job_id=job_id)


def run_plan(plan: steps.GramPlan, path: str, executor: AbstractContextManager[Executor], *,
             overwrite: bool = False, progress: steps.Progress = True, log: steps.Log | None = None,
             t_start: float | None = None, job_id: str | None = None) -> RunResult:
    """Compute ``plan`` into the store at ``path`` under its lock; resume it if it exists.

    What ``gramdist run`` does once its job is planned, and what the Python front end
    (:class:`gramdist.GramTransformer` with ``store=``) calls with its own plan.

    Parameters
    ----------
    plan : the computation (:func:`gramdist.engine.steps.plan_gram` or ``plan_job``).
    path : the store.
    executor : a context manager yielding the :class:`Executor` to run on; entered only once
        the store is known to need work (a complete store is not recomputed).
    overwrite, progress, log, job_id : as for :func:`run_job`.
    t_start : when the run started (for the ``total_s`` timing; default now).
    """
    log = log or steps.stderr_log
    t_start = time.perf_counter() if t_start is None else t_start
    steps.check_output_location(path, plan.grid.n_rows, plan.grid.n_cols, np.dtype(plan.dtype).itemsize)
    with StoreLock(path, job_id=job_id, log=log):
        return _run_locked(plan, path, executor, overwrite, progress, log, t_start)


def _run_locked(plan: steps.GramPlan, path: str, executor: AbstractContextManager[Executor], overwrite: bool,
                progress: steps.Progress, log: steps.Log, t_start: float) -> RunResult:
    root = steps.open_existing_store(plan, path, overwrite)
    if root is not None and root.attrs.get("complete") and st.mark_complete(root, plan.grid):
        n = len(plan.grid.tiles())
        log(f"{path}: already complete ({n} tiles)")
        return RunResult(path, n, 0, n, True, plan.timings)

    t = time.perf_counter()
    with executor as ex:
        ex.warm_up(type(plan.kernel).__module__)
        plan.timings["cluster_s"] = time.perf_counter() - t
        if root is None:
            # created only once a cluster is reached: a refused connection leaves nothing behind
            root = steps.create_store(plan, path, overwrite)
        log(f"gramdist: {plan.kernel!r} on {plan.grid.n_rows}x{plan.grid.n_cols} graphs, "
            f"{len(plan.grid.tiles())} tiles of {plan.grid.tile}, {ex.n_workers()} workers "
            f"({ex.n_threads()} threads); dashboard: {ex.dashboard()}")
        sink = steps.StoreSink(root, path, plan.grid, plan.checkpoint_seconds)
        result = compute_into_store(ex, plan, sink, progress, log)
    plan.timings["total_s"] = time.perf_counter() - t_start
    sink.record_timings(plan.timings)
    result.timings = plan.timings
    return result


@contextlib.contextmanager
def dask_executor(cluster_spec: dict[str, Any], scheduler: str | None = None,
                  client: Any = None) -> Iterator[Executor]:
    """A :class:`DaskExecutor` on ``client`` (kept open), else on the cluster the job's
    ``cluster:`` section names (:func:`gramdist.engine.cluster.connect`, closed afterwards)."""
    with (connect(cluster_spec, scheduler) if client is None else _given(client)) as c:
        yield DaskExecutor(c)


def compute_into_store(ex: Executor, plan: steps.GramPlan, sink: steps.StoreSink, progress: steps.Progress,
                       log: steps.Log) -> RunResult:
    """State, embeddings, tiles and completion of ``plan`` into an open store: every tile the
    done-mask lacks is computed."""
    steps.obtain_state(ex, plan, sink, log)
    token = steps.new_token()
    state_f = steps.share_state(ex, sink, None, token)
    all_tiles = plan.grid.tiles()
    todo = [tl for tl in all_tiles if not sink.mask[tl]]
    already = len(all_tiles) - len(todo)
    emb = steps.embed(ex, plan, state_f, sink, todo, token)
    tiles = steps.compute_tiles(ex, plan, state_f, emb, sink, todo, token, already=already,
                                progress=progress, log=log)
    plan.timings.update(tiles.timings)
    complete, notes = steps.finish(plan, sink, tiles, log)
    rate = tiles.computed / tiles.timings["tiles_s"] if tiles.timings["tiles_s"] > 0 else float("nan")
    log(f"gramdist: {tiles.computed} tiles computed ({already} already done) in {tiles.timings['tiles_s']:.2f} s "
        f"({rate:.1f} tiles/s); store {sink.path} {'complete' if complete else 'INCOMPLETE (rerun to resume)'}")
    return RunResult(sink.path, len(all_tiles), tiles.computed, already, complete, plan.timings, notes)


@dataclass
class MemoryResult:
    """A Gram computed into memory: ``gram`` (R, C), the raw K(g, g) of both sides, the state."""

    gram: Any
    diag_rows: Any
    diag_cols: Any
    state: Any
    notes: list[str] = field(default_factory=list)


def compute_in_memory(ex: Executor, plan: steps.GramPlan, *, state: Any = None, progress: steps.Progress = False,
                      log: steps.Log | None = None, cache: steps.ColumnCache | None = None) -> MemoryResult:
    """The same steps as :func:`compute_into_store`, the tiles assembled in this process.

    ``state`` given skips the fit (e.g. K(test, train) with the state fitted on train);
    ``cache`` holds column-chunk embeddings computed earlier with that state (and receives
    the ones computed now).
    """
    log = log or steps.stderr_log
    sink = steps.MemorySink(plan.grid, plan.dtype)
    if state is None:
        state = steps.obtain_state(ex, plan, sink, log)
    token = steps.new_token()
    state_f = steps.share_state(ex, sink, state, token)
    todo = plan.grid.tiles()
    emb = steps.embed(ex, plan, state_f, sink, todo, token, cache)
    tiles = steps.compute_tiles(ex, plan, state_f, emb, sink, todo, token, progress=progress, log=log)
    plan.timings.update(tiles.timings)
    _, notes = steps.finish(plan, sink, tiles, log, state=state)
    return MemoryResult(sink.gram, sink.diag_rows, sink.diag_cols, state, notes)


def fit_in_memory(ex: Executor, plan: steps.GramPlan, *, log: steps.Log | None = None,
                  cache: steps.ColumnCache | None = None) -> Any:
    """The fitted state of ``plan`` (fitted on its column graphs as ``plan.fit`` says), and,
    given a ``cache``, the column graphs embedded into it with their K(g, g): what a
    transformer's ``fit`` does before any tile."""
    log = log or steps.stderr_log
    sink = steps.MemorySink(plan.grid)
    state = steps.obtain_state(ex, plan, sink, log)
    if cache is not None:
        token = steps.new_token()
        state_f = steps.share_state(ex, sink, state, token)
        cols_only = [(0, j) for j in range(plan.grid.shape[1])]  # the chunks a full row of tiles needs
        steps.embed(ex, plan, state_f, sink, cols_only, token, cache)
        for f in (*cache.chunks.values(), *cache.diag.values()):
            if f.status == "error":
                f.result()  # the embedding's own error, now rather than at the first transform
    return state


class _given:
    """A client the caller owns: used as is, never closed here."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: object) -> None:
        return None


def n_tiles(n_rows: int, n_cols: int, tile: int, symmetric: bool) -> int:
    """Number of tiles a job computes (upper triangle only when symmetric)."""
    r, c = math.ceil(n_rows / tile), math.ceil(n_cols / tile)
    return r * (r + 1) // 2 if symmetric else r * c
