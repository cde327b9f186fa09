"""Append graphs to a Gram store: only the entries that involve a new graph are computed.

Appending M graphs to a store of N computes the new rows against every graph and the new
block against itself — O(M·N) kernel evaluations, not O((N+M)²) — with the store's fitted
state (never refitted), and ends bitwise equal to a from-scratch ``gramdist run`` over the
N+M graphs that reuses the same state (``fit.from_store``): the grown Gram is cut into the
same tiles a from-scratch run would compute, every tile the old store holds unchanged is kept,
and the others are computed exactly as a from-scratch run computes them. Those are the tiles
with a new graph in their rows or columns, *including* the tiles straddling the old edge when
N is not a multiple of the tile size T: such a tile grows, and is recomputed whole (its old
part included), so it is the from-scratch tile bit for bit.

The sequence (the engine's steps; no step is copied):

1. lock the store (:class:`~gramdist.engine.store.StoreLock`: one writer at a time);
2. load the new graphs (anything a job's ``dataset:`` accepts, or a ``GraphBatch``); an append
   whose content checksum the store already records says so and does nothing;
3. re-read the graphs already in the store from their recorded sources — the job's
   ``dataset`` and each earlier append's source — checking each against the content checksum
   recorded when it was read (or take them from ``base=``, checked the same way). The new
   tiles need the old graphs' embeddings: read back from the store when it keeps them
   (``gram.keep_embeddings``, and every store after its first append), else computed again
   (O(N), small beside the O(M·N) tiles);
4. plan the grown Gram with the store's kernel, tile size, normalisation and dtype;
5. create a staging group (:func:`~gramdist.engine.store.staging.begin_append`) holding the
   grown done-mask (kept tiles marked), checksums and graph vectors, recorded in the store as
   its pending append;
6. :func:`~gramdist.engine.runner.compute_into_store` on a :class:`StagingSink`: tiles are
   written into the staging group; K(g, g) is recomputed for every graph (the old values must
   come out bitwise equal to the stored ones — a check that the re-read graphs and the kernel
   reproduce the store — before anything is committed);
7. commit (:meth:`~gramdist.engine.store.staging.Staging.commit`): the new chunks replace the old ones,
   the arrays and attributes grow, the append is recorded in ``appends``.

Until step 7 the store's own arrays are untouched: ``open_gram``, ``evaluate`` and ``info`` see
the store as it was (the last complete N graphs). During the commit (renames and small
rewrites) readers are told so in one line; an interrupted commit is finished by the next
``gramdist append``. An interrupted append (client or worker killed) resumes from its staging
done-mask when the same append runs again (or ``gramdist append STORE`` without data).

A rectangular store (test × train) grows in rows: the new graphs join the test graphs and are
computed against the training graphs, whose state the store holds.

``gramdist append STORE`` without data finishes what is unfinished: an interrupted append, or
the tiles ``gramdist verify --repair`` unmarked in a store grown by appends (whose graphs no
single job file names).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine import steps
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.plan import GramPlan, kernel_from_spec, plan_gram
from gramdist.engine.runner import compute_into_store, nodes_to_embed
from gramdist.engine.sinks import NOTHING_KNOWN, StoreSink, merged
from gramdist.engine.store import GramStore, Location, StoreLock, as_location, kept_tiles
from gramdist.engine.store.staging import (
    AppendEntry,
    PendingAppend,
    RecordedSource,
    Staging,
    begin_append,
    column_source,
    discard_pending,
    pending_groups,
    recorded_checksums,
    row_sources,
)
from gramdist.engine.tasks import new_entries
from gramdist.errors import DatasetError, StoreError
from gramdist.graphs import GraphBatch
from gramdist.jobs import FitSpec, GramSpec


@dataclass
class AppendResult:
    """What an append did.

    ``added``: graphs appended (0 when there was nothing to do); ``n_rows``: row graphs of the
    store afterwards; ``tiles_total``: tiles of the grown Gram; ``tiles_computed``: computed by
    this call; ``tiles_kept``: already done (kept from the store, or by an interrupted attempt);
    ``nothing_to_do``: why nothing was computed, if so; ``entries_computed``: kernel values
    computed by this call (a tile straddling the old edge computes only its new entries: an
    append of M graphs to N computes about M·(N + M) whatever the tile size).
    """

    store: str
    added: int
    n_rows: int
    tiles_total: int
    tiles_computed: int
    tiles_kept: int
    complete: bool
    nothing_to_do: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    entries_computed: int = 0


@dataclass
class _Append:
    """One append's context: the store (locked, open for writing), the graphs given as its
    current ones, where to run and how to report."""

    store: GramStore
    base: Any
    placement: Placement
    context: RunContext
    t_start: float
    lock: Any = None

    @property
    def location(self) -> Location:
        return self.store.location


class StagingSink(StoreSink):
    """The sink of an append: tiles, done-mask, checksums and K(g, g) go into the staging
    group; finishing checks the re-computed K(g, g) of the old graphs and commits."""

    def __init__(self, staging: Staging, checkpoint_seconds: float, old_rows: int, lock: Any = None) -> None:
        self.staging = staging
        self.old_rows = old_rows
        super().__init__(staging.store, checkpoint_seconds, lock)
        lease = None if lock is None else lock.lease()
        self.grid = staging.grid
        self.mask = staging.done_mask()
        self.checksums = staging.checksums()
        self.target = staging.tile_target(lease)
        self.embeddings = staging.embedding_cache(lease)
        self.known_parts = staging.known_parts()

    def known(self, tile: tuple[int, int]) -> tuple[tuple[int, int], int | None]:
        return self.known_parts.get(tile, NOTHING_KNOWN)

    def prepare(self, plan: Any) -> list[str]:
        return []  # the staging group's labels and ids come from the graphs re-read; the commit writes them

    def has_diag(self) -> bool:
        return self.staging.diag_complete

    def stored_diag(self) -> tuple[np.ndarray, np.ndarray]:
        return self.staging.read_diag()

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None:
        _check_reproduced(self.store, rows, cols, self.old_rows)
        self.staging.write_diag(rows, None if self.grid.symmetric else cols)

    def _save(self) -> None:
        self.mask, self.checksums = merged((self.staging.done_mask(), self.staging.checksums()),
                                           (self.mask, self.checksums))
        self.staging.save_progress(self.mask, self.checksums)

    def finish(self) -> bool:
        self.flush()
        if not self.staging.mark_complete():
            return False
        return self.staging.commit()  # fenced: never by a writer that lost the store

    def record_timings(self, timings: dict[str, float]) -> None:
        pass  # recorded with the append in the store's ``appends``


def _check_reproduced(store: GramStore, rows: np.ndarray, cols: np.ndarray, old_rows: int) -> None:
    """The old graphs' K(g, g), recomputed from the re-read graphs, must equal the stored ones
    bit for bit: otherwise the tiles computed now would not fit the tiles kept."""
    if not store.diag_complete:
        return  # the store's own diagonal was never stored (or was lost): nothing to compare
    old_rows_diag, old_cols_diag = store.read_diag()
    pairs = [("rows", rows[:old_rows], old_rows_diag[:old_rows])]
    if not store.symmetric:
        pairs.append(("columns", cols, old_cols_diag))
    for side, new, old in pairs:
        if len(new) != len(old) or not np.array_equal(new, old):
            differ = int(np.sum(new != old)) if len(new) == len(old) else "all"
            raise StoreError(
                f"{store.location}: re-embedding the store's graphs does not reproduce the K(g, g) stored with them "
                f"({differ} of {len(old)} {side} differ): the graphs re-read are not the ones the store was computed "
                "on, or the kernel's embedding is not reproducible; nothing was committed")


# ------------------------------------------------------------------------------------ sources
def _data_spec(data: Any) -> tuple[GraphBatch, Any]:
    """The new graphs and the spec recorded for them (None for a batch given from Python)."""
    from gramdist.datasets import load_dataset

    if isinstance(data, GraphBatch):
        return data.validate("the graphs to append"), None
    if isinstance(data, os.PathLike) or (isinstance(data, str) and Path(data).expanduser().is_dir()):
        data = {"path": str(data)}
    spec = dict(data) if isinstance(data, Mapping) else data
    if isinstance(spec, dict) and "path" in spec:
        spec["path"] = str(Path(spec["path"]).expanduser().resolve())  # recorded: must not depend on the cwd
    return load_dataset(spec), spec


def _reread(source: RecordedSource, store: Location) -> GraphBatch:
    """The graphs of a recorded source, checked against the checksum recorded with them."""
    from gramdist.datasets import load_dataset

    if source.spec is None:
        raise StoreError(f"{store}: {source.what} came from Python (no recorded source) and cannot be re-read; "
                         "pass the store's current graphs as base=")
    try:
        batch = load_dataset(source.spec, recorded=True)  # local files only: the store is data, not configuration
    except Exception as exc:  # noqa: BLE001 - DatasetError, JobError: say which source
        raise StoreError(f"{store}: cannot re-read {source.what} {json.dumps(source.spec)}: {exc}; pass the store's "
                         "current graphs with --base") from None
    if batch.checksum() != source.checksum:
        raise StoreError(f"{store}: {source.what} {json.dumps(source.spec)} no longer holds the graphs the store was "
                         f"computed on (content checksum {batch.checksum()}, recorded {source.checksum}); pass them "
                         "with --base")
    return batch


def current_graphs(store: GramStore, base: Any = None) -> tuple[GraphBatch, GraphBatch | None]:
    """The graphs of a store as they are now: ``(rows, cols)``; ``cols`` is None for a
    symmetric store. Re-read from the recorded sources (or ``base``), each source and the whole
    checked against the content checksums the store recorded."""
    expected = store.row_checksum
    if base is not None:
        rows, _ = _data_spec(base)
        if rows.checksum() != expected:
            raise StoreError(f"{store.location}: the graphs given as base (content checksum {rows.checksum()}) are not "
                             f"the store's (recorded {expected})")
    else:
        parts = [_reread(source, store.location) for source in row_sources(store)]
        rows = parts[0] if len(parts) == 1 else GraphBatch.concat(parts)
        if rows.checksum() != expected:
            raise StoreError(f"{store.location}: its recorded sources re-read together (content checksum "
                             f"{rows.checksum()}) are not the graphs the store holds (recorded {expected}); pass them "
                             "with --base")
    if store.symmetric:
        return rows, None
    return rows, _reread(column_source(store), store.location)


def _concat(store: Location, old: GraphBatch, new: GraphBatch, source: Any) -> GraphBatch:
    width = [None if b.node_attrs is None else b.node_attrs.shape[1] for b in (old, new)]
    if width[0] != width[1]:
        raise DatasetError(f"{_source_name(source, new)}: the new graphs have {width[1] or 'no'} node attribute "
                           f"column(s), the store's have {width[0] or 'none'}; give the new data the same "
                           "node_attributes option as the store's dataset")
    try:
        return GraphBatch.concat([old, new], name=old.name)
    except ValueError as exc:
        raise DatasetError(f"{_source_name(source, new)}: cannot be appended to {store}: {exc} (the store's graphs "
                           "and the new ones must carry the same labels and attributes)") from None


def _source_name(source: Any, batch: GraphBatch) -> str:
    return json.dumps(source) if source is not None else f"graphs {batch.name or '(from Python)'}"


# ------------------------------------------------------------------------------------ plan
def _plan(store: GramStore, rows: GraphBatch, cols: GraphBatch | None) -> GramPlan:
    """The Gram of the store's computation over ``rows`` (× ``cols`` when rectangular)."""
    job = store.job
    spec = job.get("kernel") or {"name": store.kernel["name"], **store.kernel["params"]}
    kernel = kernel_from_spec(spec)
    if json.loads(json.dumps({"name": kernel.name, "params": kernel.recorded_params()}, default=_plain)) != store.kernel:
        raise StoreError(f"{store.location}: cannot rebuild the store's kernel from its attributes")
    store.check_kernel_versions(kernel.definition_versions())  # kept embeddings and tiles of another version
    gram = job.get("gram") or {}
    spec_gram = GramSpec(tile_size=store.tile_size, normalize=store.normalize, dtype=store.dtype,
                         compression_level=int(gram.get("compression_level", 1)),
                         checkpoint_seconds=float(gram.get("checkpoint_seconds", GramSpec.checkpoint_seconds)))
    fit = store.fit or {}
    return plan_gram(kernel, cols if cols is not None else rows, None if cols is None else rows, gram=spec_gram,
                     fit=FitSpec(fit.get("sample_size"), fit.get("seed", 0), fit.get("from_store")),
                     specs=(None, None), job=job,  # the store keeps its dataset attrs: never re-read a recorded file here
                     max_in_flight=(job.get("cluster") or {}).get("max_tiles_in_flight"))


def _plain(value: Any) -> Any:
    from gramdist.kernels.base import as_jsonable

    return as_jsonable(value)


# ------------------------------------------------------------------------------------ append
def append(store: str | os.PathLike | Location, data: Any = None, *, base: Any = None,
           placement: Placement | None = None, abort: bool = False,
           context: RunContext | None = None) -> AppendResult:
    """Append graphs to a Gram store, computing only the entries that involve them.

    Parameters
    ----------
    store : path of a store made by ``gramdist run`` (symmetric, or test × train: then the new
        graphs are test graphs).
    data : the new graphs: anything a job's ``dataset:`` accepts (a name, ``{path: ...}``,
        ``{synthetic: {...}}``, with ``limit``/``skip``/``node_attributes``), a path, or a
        :class:`~gramdist.graphs.GraphBatch`. None finishes what is unfinished (an interrupted
        append, or tiles that ``verify --repair`` unmarked).
    base : the store's current graphs, when their recorded sources cannot be re-read (moved
        files, a store made from Python); checked against the store's content checksum.
    placement : where to run (:class:`~gramdist.engine.placement.Placement`); default this
        process for a small append, else a LocalCluster. What the store recorded of its job's
        cluster is never used: a store is data, not configuration.
    abort : discard an interrupted append instead of finishing it.
    context : progress and log (:class:`~gramdist.engine.context.RunContext`).
    """
    context = context or RunContext()
    placement = placement or Placement(in_process="auto")
    location = as_location(store)
    t_start = time.perf_counter()
    GramStore.open(location, mode="r+")  # a clear error before a lock file appears beside a store that is not there
    with StoreLock(location, log=context.log) as lock:
        opened = GramStore.open(location, mode="r+")
        opened.fence(lock.check)  # from its first write to its last: never after the store is lost
        run = _Append(opened, base, placement, context, t_start, lock)
        return _append_locked(run, data, abort)


def _append_locked(run: _Append, data: Any, abort: bool) -> AppendResult:
    store, path = run.store, run.location
    if store.combination:
        raise StoreError(f"{path}: a combination of stores (`gramdist combine`) cannot be appended to: append to "
                         "each of its stores, then combine them again")
    pending = PendingAppend(store.pending_append) if store.pending_append else None
    for name in pending_groups(store):  # left by an append killed before it recorded its group, or after its commit
        if pending is None or name != pending.group:
            discard_pending(store, name)
    if abort:
        if pending is None:
            return _nothing(store, "no append is pending")
        if pending.committing:  # chunks may have moved already: only finishing it leaves a whole store
            run.context.log(f"{path}: the append of {pending.describe()} was being committed; --abort cannot undo "
                            "a commit that has begun, so it is finished instead")
            return _resume_pending(run, pending, None)
        discard_pending(store)
        run.context.log(f"{path}: discarded the interrupted append of {pending.describe()}")
        return _nothing(store, "discarded the interrupted append")
    new = new_spec = None
    if data is not None:
        new, new_spec = _data_spec(data)
        if len(new) == 0:
            raise DatasetError(f"{_source_name(new_spec, new)}: no graphs to append")
    if pending is not None:
        return _resume_pending(run, pending, new)
    if new is None:
        return _finish_store(run)
    known = recorded_checksums(store)
    if new.checksum() in known:
        if not store.complete:  # in, but the store was left unfinished (a repair, a kill): finish it
            return _finish_store(run)
        why = f"these {len(new)} graphs are already in the store ({known[new.checksum()]}, same content checksum); " \
              "nothing to do"
        run.context.log(f"{path}: {why}")
        return _nothing(store, why)
    return _start(run, new, new_spec)


def _nothing(store: GramStore, why: str) -> AppendResult:
    grid = store.grid
    n = len(grid.tiles())
    return AppendResult(str(store.location), 0, grid.n_rows, n, 0, n, store.complete, why)


def _start(run: _Append, new: GraphBatch, new_spec: Any) -> AppendResult:
    store, path = run.store, run.location
    if not store.state_complete:
        raise StoreError(f"{path}: the store has no complete fitted state (its job never got that far); "
                         "rerun its job first")
    t = time.perf_counter()
    rows, cols = current_graphs(store, run.base)
    grown = _concat(path, rows, new, new_spec)
    read_s = time.perf_counter() - t
    old_grid = store.grid
    if old_grid.n_rows != len(rows):
        raise StoreError(f"{path}: its Gram has {old_grid.n_rows} rows for {len(rows)} graphs")
    plan = _plan(store, grown, cols)
    plan.timings["read_s"] = read_s
    steps.check_output_location(path, plan.grid.n_rows - old_grid.n_rows, plan.grid.n_cols,
                                np.dtype(plan.dtype).itemsize)
    staging = begin_append(store, plan.grid, **_kept(store, plan), graphs=grown,
                           entry=AppendEntry(new_spec, new.name, len(new), new.checksum(),
                                             [old_grid.n_rows, plan.grid.n_rows], plan.meta.gramdist_version),
                           grown_checksum=grown.checksum())
    run.context.log(f"gramdist: appending {len(new)} graphs to {path} ({old_grid.n_rows} -> {plan.grid.n_rows} rows)")
    return _compute(run, plan, staging, old_grid.n_rows, len(new))


def _kept(store: GramStore, plan: GramPlan) -> dict[str, np.ndarray]:
    """The grown done-mask and checksums with the store's unchanged tiles already marked."""
    old_mask, old_sums = store.done_mask(), store.checksums()
    mask = np.zeros(plan.grid.shape, dtype=bool)
    sums = np.zeros(plan.grid.shape, dtype=np.uint64)
    for tl in kept_tiles(store.grid, plan.grid):
        mask[tl] = old_mask[tl] and old_sums is not None  # a store without checksums: recompute, to record them
        sums[tl] = 0 if old_sums is None else old_sums[tl]
    return {"mask": mask, "checksums": sums}


def _resume_pending(run: _Append, pending: PendingAppend, new: GraphBatch | None) -> AppendResult:
    store, path = run.store, run.location
    if new is not None and new.checksum() != pending.checksum:
        raise StoreError(f"{path}: an interrupted append of {pending.describe()} is pending; finish it with "
                         f"`gramdist append {path}` (no data) or discard it with `gramdist append {path} --abort`, "
                         "then append these graphs")
    if pending.group not in pending_groups(store):
        discard_pending(store)
        raise StoreError(f"{path}: the staging group of an interrupted append ({pending.group}) is gone; the record "
                         "was dropped: run the append again")
    staging = Staging(store, pending.group)
    grid = staging.grid
    if pending.committing:
        run.context.log(f"gramdist: finishing the commit of an interrupted append of {pending.describe()}")
        complete = staging.commit()
        n = len(grid.tiles())
        return AppendResult(str(path), pending.n_graphs, grid.n_rows, n, 0, n, complete)
    if new is None:
        from gramdist.datasets import load_dataset

        new = load_dataset(pending.source, recorded=True) if pending.source is not None else None
        if new is None or new.checksum() != pending.checksum:
            raise StoreError(f"{path}: the source of the interrupted append ({pending.describe()}) cannot be re-read "
                             "with the same content; give the data again or `--abort`")
    t = time.perf_counter()
    rows, cols = current_graphs(store, run.base)
    plan = _plan(store, _concat(path, rows, new, pending.source), cols)
    plan.timings["read_s"] = time.perf_counter() - t
    if (plan.grid.n_rows, plan.grid.n_cols) != (grid.n_rows, grid.n_cols):
        raise StoreError(f"{path}: the interrupted append's staging group does not match its graphs; "
                         f"discard it with `gramdist append {path} --abort`")
    run.context.log(f"gramdist: resuming the append of {pending.describe()} to {path}")
    return _compute(run, plan, staging, pending.old_rows, len(new))


def _finish_store(run: _Append) -> AppendResult:
    """No data, nothing pending: compute the tiles the store's done-mask lacks (after
    ``verify --repair``), from the store's recorded sources."""
    store, path = run.store, run.location
    grid = store.grid
    if store.is_finished():
        n = len(grid.tiles())
        run.context.log(f"{path}: already complete ({n} tiles); nothing to do")
        return AppendResult(str(path), 0, grid.n_rows, n, 0, n, True, "the store is complete")
    if not store.state_complete:
        raise StoreError(f"{path}: the store has no complete fitted state; rerun its job")
    t = time.perf_counter()
    rows, cols = current_graphs(store, run.base)
    plan = _plan(store, rows, cols)
    plan.timings["read_s"] = time.perf_counter() - t
    if (plan.grid.n_rows, plan.grid.n_cols) != (grid.n_rows, grid.n_cols):
        raise StoreError(f"{path}: its Gram is {grid.n_rows} x {grid.n_cols} for {plan.grid.n_rows} x "
                         f"{plan.grid.n_cols} graphs")
    sink = StoreSink(store, plan.gram.checkpoint_seconds, run.lock)
    entries = entries_to_compute(plan.grid, sink.mask)
    result = _run_on(run, plan, sink, entries)
    sink.record_timings(plan.timings)
    return AppendResult(str(path), 0, plan.grid.n_rows, result.tiles_total, result.tiles_computed,
                        result.tiles_already_done, result.complete, None, plan.timings, result.notes, entries)


def _compute(run: _Append, plan: GramPlan, staging: Staging, old_rows: int, added: int) -> AppendResult:
    sink = StagingSink(staging, plan.gram.checkpoint_seconds, old_rows, run.lock)
    entries = entries_to_compute(plan.grid, sink.mask, sink)
    partial = sum(1 for tl in sink.known_parts if not sink.mask[tl])
    run.context.log(f"gramdist: {entries:,} kernel values to compute for {added} new graphs"
                    + (f" ({partial} tile(s) on the old edge computed in part)" if partial else ""))
    result = _run_on(run, plan, sink, entries)
    if result.complete:
        _record_append_timings(run.store, plan.timings)
    return AppendResult(str(run.location), added, plan.grid.n_rows, result.tiles_total, result.tiles_computed,
                        result.tiles_already_done, result.complete, None, plan.timings, result.notes, entries)


def _run_on(run: _Append, plan: GramPlan, sink: StoreSink, entries: int) -> Any:
    """The steps into ``sink`` on the executor the placement gives for ``entries`` values."""
    t = time.perf_counter()
    nodes = nodes_to_embed(plan, sink.embeddings)  # old chunks kept in the store are read, not embedded
    here = run.placement.runs_here(entries, nodes) and not run.placement.names_a_cluster()
    with run.placement.executor(entries, run.context.log, nodes) as ex:
        if here:
            forked = ", the embeddings in the command's forked processes" if ex.forks() else ""
            run.context.log(f"gramdist: a small append ({entries:,} Gram entries): computing in this process{forked} "
                            "(--workers N for a cluster)")
        ex.warm_up(type(plan.kernel).__module__)
        plan.timings["cluster_s"] = time.perf_counter() - t
        result = compute_into_store(ex, plan, sink, run.context)
    plan.timings["total_s"] = time.perf_counter() - run.t_start
    return result


def _record_append_timings(store: GramStore, timings: dict[str, float]) -> None:
    appends = store.appends
    if appends:
        appends[-1] = dict(appends[-1]) | {"timings": {k: round(v, 4) for k, v in timings.items()}}
        store.record_attrs(appends=appends)


def entries_to_compute(grid: Any, mask: Any, sink: Any = None) -> int:
    """Kernel values the tiles ``mask`` does not mark done need (mirrors not counted; of a
    tile ``sink`` knows in part, only the rest)."""
    return sum(new_entries(grid, tl, sink.known(tl)[0] if sink is not None else (0, 0))
               for tl in grid.tiles() if not mask[tl])
