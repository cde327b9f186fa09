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

1. lock the store (:class:`~gramdist.engine.lock.StoreLock`: one writer at a time);
2. load the new graphs (anything a job's ``dataset:`` accepts, or a ``GraphBatch``); an append
   whose content checksum the store already records says so and does nothing;
3. re-read the graphs already in the store from their recorded sources — the job's
   ``dataset`` and each earlier append's source — checking each against the content checksum
   recorded when it was read (or take them from ``base=``, checked the same way). The new
   tiles need the old graphs' embeddings, which the store does not keep: embeddings are
   kernel-specific objects with no pickle-free form in the kernel contract, and re-embedding
   costs O(N), which is small beside the O(M·N) tiles;
4. plan the grown Gram with the store's kernel, tile size, normalisation and dtype;
5. create a staging group (:func:`~gramdist.engine.store.create_pending`) holding the grown
   done-mask (kept tiles marked), checksums and graph vectors, and record it in the store's
   ``pending_append`` attribute;
6. :func:`~gramdist.engine.runner.compute_into_store` on a :class:`PendingSink`: tiles are
   written into the staging group; K(g, g) is recomputed for every graph (the old values must
   come out bitwise equal to the stored ones — a check that the re-read graphs and the kernel
   reproduce the store — before anything is committed);
7. commit (:func:`~gramdist.engine.store.commit_pending`): the new chunks replace the old ones,
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
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine import steps
from gramdist.engine import store as st
from gramdist.engine.executor import DaskExecutor, Executor, InlineExecutor
from gramdist.engine.lock import StoreLock
from gramdist.errors import DatasetError, StoreError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import as_jsonable


@dataclass
class AppendResult:
    """What an append did.

    ``added``: graphs appended (0 when there was nothing to do); ``n_rows``: row graphs of the
    store afterwards; ``tiles_total``: tiles of the grown Gram; ``tiles_computed``: computed by
    this call; ``tiles_kept``: already done (kept from the store, or by an interrupted attempt);
    ``nothing_to_do``: why nothing was computed, if so.
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


class PendingSink(steps.StoreSink):
    """The sink of an append: tiles, done-mask, checksums and K(g, g) go into the staging
    group; finishing checks the re-computed K(g, g) of the old graphs and commits."""

    def __init__(self, store_root: Any, pending: Any, name: str, path: str, grid: st.TileGrid,
                 checkpoint_seconds: float, old_rows: int) -> None:
        super().__init__(pending, path, grid, checkpoint_seconds)
        self.store_root = store_root
        self.name = name
        self.write_path = str(Path(path).resolve() / name)
        self.state_path = str(Path(path).resolve())  # the state is the store's own
        # the old chunks' embeddings are read from the store when it keeps them; every chunk
        # embedded now is kept (committed with the tiles), so the next append reads them all
        self.embeddings = (self.state_path if store_root.attrs.get("keep_embeddings") else None, self.write_path)
        self.old_rows = old_rows

    def store_diag(self, rows: np.ndarray, cols: np.ndarray) -> None:
        _check_reproduced(self.store_root, self.path, rows, cols, self.old_rows, self.grid.symmetric)
        super().store_diag(rows, cols)

    def finish(self) -> bool:
        self.flush()
        if not st.mark_complete(self.root, self.grid):
            return False
        return st.commit_pending(self.store_root, self.name, self.grid, dict(self.root.attrs["commit_attrs"]))

    def record_timings(self, timings: dict[str, float]) -> None:
        pass  # recorded with the append in the store's ``appends``


def _check_reproduced(root: Any, path: str, rows: np.ndarray, cols: np.ndarray, old_rows: int,
                      symmetric: bool) -> None:
    """The old graphs' K(g, g), recomputed from the re-read graphs, must equal the stored ones
    bit for bit: otherwise the tiles computed now would not fit the tiles kept."""
    if not root.attrs.get("diag_complete"):
        return  # the store's own diagonal was never stored (or was lost): nothing to compare
    old_rows_diag, old_cols_diag = st.read_diag(root)
    pairs = [("rows", rows[:old_rows], old_rows_diag[:old_rows])]
    if not symmetric:
        pairs.append(("columns", cols, old_cols_diag))
    for side, new, old in pairs:
        if len(new) != len(old) or not np.array_equal(new, old):
            differ = int(np.sum(new != old)) if len(new) == len(old) else "all"
            raise StoreError(
                f"{path}: re-embedding the store's graphs does not reproduce the K(g, g) stored with them "
                f"({differ} of {len(old)} {side} differ): the graphs re-read are not the ones the store was computed "
                "on, or the kernel's embedding is not reproducible; nothing was committed")


# ------------------------------------------------------------------------------------ sources
def _data_spec(data: Any) -> tuple[GraphBatch, Any]:
    """The new graphs and the spec recorded for them (None for a batch given from Python)."""
    from gramdist.datasets import load_dataset

    if isinstance(data, GraphBatch):
        return data, None
    if isinstance(data, os.PathLike) or (isinstance(data, str) and Path(data).expanduser().is_dir()):
        data = {"path": str(data)}
    spec = dict(data) if isinstance(data, Mapping) else data
    if isinstance(spec, dict) and "path" in spec:
        spec["path"] = str(Path(spec["path"]).expanduser().resolve())  # recorded: must not depend on the cwd
    return load_dataset(spec), spec


def _reread(spec: Any, checksum: str, what: str, store: str) -> GraphBatch:
    """The graphs of a recorded source, checked against the checksum recorded with them."""
    from gramdist.datasets import load_dataset

    if spec is None:
        raise StoreError(f"{store}: {what} came from Python (no recorded source) and cannot be re-read; "
                         "pass the store's current graphs as base=")
    try:
        batch = load_dataset(spec)
    except Exception as exc:  # noqa: BLE001 - DatasetError, JobError: say which source
        raise StoreError(f"{store}: cannot re-read {what} {json.dumps(spec)}: {exc}; pass the store's current "
                         "graphs with --base") from None
    if batch.checksum() != checksum:
        raise StoreError(f"{store}: {what} {json.dumps(spec)} no longer holds the graphs the store was computed "
                         f"on (content checksum {batch.checksum()}, recorded {checksum}); pass them with --base")
    return batch


def current_graphs(root: Any, store: str, base: Any = None) -> tuple[GraphBatch, GraphBatch | None]:
    """The graphs of a store as they are now: ``(rows, cols)``; ``cols`` is None for a
    symmetric store. Re-read from the recorded sources (or ``base``), each source and the whole
    checked against the content checksums the store recorded."""
    attrs = dict(root.attrs)
    symmetric = bool(attrs.get("symmetric", True))
    first = attrs.get("dataset") if symmetric else attrs.get("test_dataset")
    expected = attrs.get("dataset_checksum") if symmetric else attrs.get("test_checksum")
    if base is not None:
        rows, _ = _data_spec(base)
        if rows.checksum() != expected:
            raise StoreError(f"{store}: the graphs given as base (content checksum {rows.checksum()}) are not the "
                             f"store's (recorded {expected})")
    else:
        parts = [_reread((first or {}).get("spec"), (first or {}).get("checksum"),
                         "its dataset" if symmetric else "its test dataset", store)]
        for k, rec in enumerate(attrs.get("appends") or []):
            parts.append(_reread(rec.get("source"), rec.get("checksum"), f"append {k + 1}'s source", store))
        rows = parts[0] if len(parts) == 1 else GraphBatch.concat(parts)
        if rows.checksum() != expected:
            raise StoreError(f"{store}: its recorded sources re-read together (content checksum {rows.checksum()}) "
                             f"are not the graphs the store holds (recorded {expected}); pass them with --base")
    if symmetric:
        return rows, None
    train = attrs.get("dataset") or {}
    return rows, _reread(train.get("spec"), attrs.get("dataset_checksum"), "its training dataset", store)


def _concat(store: str, old: GraphBatch, new: GraphBatch, source: Any) -> GraphBatch:
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
def _plan(root: Any, rows: GraphBatch, cols: GraphBatch | None, *, max_tiles_in_flight: int | None = None
          ) -> steps.GramPlan:
    """The Gram of the store's computation over ``rows`` (× ``cols`` when rectangular)."""
    attrs = dict(root.attrs)
    job = attrs.get("job") or {}
    spec = job.get("kernel") or {"name": attrs["kernel"]["name"], **attrs["kernel"]["params"]}
    kernel = steps.kernel_from_spec(spec)
    if json.loads(json.dumps(as_jsonable({"name": kernel.name, "params": kernel.get_params()}))) != attrs["kernel"]:
        raise StoreError(f"{root.store}: cannot rebuild the store's kernel from its attributes")
    gram = job.get("gram") or {}
    plan = steps.plan_gram(
        kernel, cols if cols is not None else rows, None if cols is None else rows,
        tile_size=attrs["tile_size"], normalize=bool(attrs.get("normalize")), fit=attrs.get("fit") or {},
        dataset_spec=(attrs.get("dataset") or {}).get("spec"),
        test_spec=(attrs.get("test_dataset") or {}).get("spec"), job=job,
        compression_level=int(gram.get("compression_level", 1)),
        max_tiles_in_flight=max_tiles_in_flight or (job.get("cluster") or {}).get("max_tiles_in_flight"),
        checkpoint_seconds=float(gram.get("checkpoint_seconds", steps.CHECKPOINT_SECONDS)),
        dtype=attrs.get("dtype") or "float64")
    return plan


# ------------------------------------------------------------------------------------ append
def append(
    store: str | os.PathLike,
    data: Any = None,
    *,
    base: Any = None,
    client: Any = None,
    scheduler: str | None = None,
    n_workers: int | None = None,
    cluster: dict[str, Any] | None = None,
    cluster_overrides: dict[str, Any] | None = None,
    abort: bool = False,
    progress: steps.Progress = False,
    log: steps.Log | None = None,
) -> AppendResult:
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
    client : an existing ``distributed.Client``; else ``scheduler`` (an address), else a cluster
        as the store's job describes it (``n_workers`` overrides its size; ``n_workers=0`` runs
        in this process without Dask). ``cluster`` replaces the job's cluster section;
        ``cluster_overrides`` updates it (e.g. TLS ``security``). An append of at most
        :data:`SMALL_APPEND_ENTRIES` entries for which none of these names a cluster (and the
        job names no scheduler) runs in this process: a cluster would take longer to start.
    abort : discard an interrupted append instead of finishing it.
    progress, log : as for :func:`~gramdist.engine.runner.run_job`.

    Returns
    -------
    AppendResult
    """
    log = log or steps.stderr_log
    path = str(store)
    t_start = time.perf_counter()
    if cluster_overrides:
        cluster = {**((st.open_store(path, mode="r+").attrs.get("job") or {}).get("cluster") or {}),
                   **(cluster or {}), **cluster_overrides}
    st.open_store(path, mode="r+")  # a clear error before a lock file appears beside a store that is not there
    with StoreLock(path, log=log):
        root = st.open_store(path, mode="r+")
        if root.attrs.get("combination"):
            raise StoreError(f"{path}: a combination of stores (`gramdist combine`) cannot be appended to: append to "
                             "each of its stores, then combine them again")
        record = root.attrs.get("pending_append")
        stray = [n for n in st.pending_groups(path) if not record or n != record.get("group")]
        if stray:  # left by an append killed before it recorded its group, or after its commit
            for n in stray:
                st.discard_pending(root, n)
        if abort:
            if not record:
                return _nothing(root, path, "no append is pending")
            st.discard_pending(root)
            log(f"{path}: discarded the interrupted append of {_describe_source(record)}")
            return _nothing(root, path, "discarded the interrupted append")
        new = new_spec = None
        if data is not None:
            new, new_spec = _data_spec(data)
            if len(new) == 0:
                raise DatasetError(f"{_source_name(new_spec, new)}: no graphs to append")
        if record:
            return _resume_pending(root, path, record, new, new_spec, base, client, scheduler, n_workers, cluster,
                                   progress, log, t_start)
        if new is None:
            return _finish_store(root, path, base, client, scheduler, n_workers, cluster, progress, log, t_start)
        known = _recorded_checksums(root)
        if new.checksum() in known:
            why = (f"these {len(new)} graphs are already in the store ({known[new.checksum()]}, same content "
                   "checksum); nothing to do")
            log(f"{path}: {why}")
            return _nothing(root, path, why)
        return _start(root, path, new, new_spec, base, client, scheduler, n_workers, cluster, progress, log,
                      t_start)


def _describe_source(record: dict[str, Any]) -> str:
    src = record.get("source")
    return f"{record.get('n_graphs')} graphs from {json.dumps(src) if src is not None else 'Python'}"


def _nothing(root: Any, path: str, why: str) -> AppendResult:
    grid = st.store_grid(root)
    n = len(grid.tiles())
    return AppendResult(path, 0, grid.n_rows, n, 0, n, bool(root.attrs.get("complete")), why)


def _recorded_checksums(root: Any) -> dict[str, str]:
    attrs = dict(root.attrs)
    first = attrs.get("dataset") if attrs.get("symmetric", True) else attrs.get("test_dataset")
    known = {(first or {}).get("checksum"): "its dataset"}
    for k, rec in enumerate(attrs.get("appends") or []):
        known[rec.get("checksum")] = f"append {k + 1}"
    known.pop(None, None)
    return known


def _start(root: Any, path: str, new: GraphBatch, new_spec: Any, base: Any, client: Any, scheduler: str | None,
           n_workers: int | None, cluster: dict[str, Any] | None, progress: steps.Progress, log: steps.Log,
           t_start: float) -> AppendResult:
    if not root.attrs.get("state_complete"):
        raise StoreError(f"{path}: the store has no complete fitted state (its job never got that far); "
                         "rerun its job first")
    t = time.perf_counter()
    rows, cols = current_graphs(root, path, base)
    grown = _concat(path, rows, new, new_spec)
    read_s = time.perf_counter() - t
    old_grid = st.store_grid(root)
    if old_grid.n_rows != len(rows):
        raise StoreError(f"{path}: its Gram has {old_grid.n_rows} rows for {len(rows)} graphs")
    plan = _plan(root, grown, cols)
    plan.timings["read_s"] = read_s
    steps.check_output_location(path, plan.grid.n_rows - old_grid.n_rows, plan.grid.n_cols,
                                np.dtype(plan.dtype).itemsize)
    old_mask = st.read_done_mask(root)
    old_sums = st.read_checksums(root, path)
    mask = np.zeros(plan.grid.shape, dtype=bool)
    sums = np.zeros(plan.grid.shape, dtype=np.uint64)
    for tl in st.kept_tiles(old_grid, plan.grid):
        mask[tl] = old_mask[tl] and old_sums is not None  # a store without checksums: recompute, to record them
        sums[tl] = 0 if old_sums is None else old_sums[tl]
    vectors = {"graph_ids": grown.graph_ids}
    if grown.y is not None:
        vectors["y"] = grown.y
    checksum = new.checksum()
    name = f"{st.PENDING_PREFIX}{checksum[:12]}"
    entry = {"source": new_spec, "name": new.name, "n_graphs": len(new), "checksum": checksum,
             "rows": [old_grid.n_rows, plan.grid.n_rows], "gramdist_version": plan.attrs["gramdist_version"]}
    key = "dataset_checksum" if plan.symmetric else "test_checksum"
    commit_attrs = {key: grown.checksum(), "appends": list(root.attrs.get("appends") or []) + [entry],
                    "gramdist_version": plan.attrs["gramdist_version"], "keep_embeddings": True,
                    "checksummed": True}  # every record array is rewritten whole by the commit
    pending = st.create_pending(root, name, plan.grid, dtype=plan.dtype, compression_level=plan.compression_level,
                                mask=mask, checksums=sums, vectors=vectors)
    pending.attrs["commit_attrs"] = as_jsonable(commit_attrs)
    root.attrs["pending_append"] = as_jsonable({
        "state": "computing", "group": name, "from": [old_grid.n_rows, old_grid.n_cols],
        "to": [plan.grid.n_rows, plan.grid.n_cols], "source": new_spec, "n_graphs": len(new), "checksum": checksum,
        "started": time.time(), "host": socket.gethostname(), "pid": os.getpid()})
    log(f"gramdist: appending {len(new)} graphs to {path} ({old_grid.n_rows} -> {plan.grid.n_rows} rows)")
    return _compute(root, path, plan, pending, name, old_grid.n_rows, len(new), client, scheduler, n_workers,
                    cluster, progress, log, t_start)


def _resume_pending(root: Any, path: str, record: dict[str, Any], new: GraphBatch | None, new_spec: Any, base: Any,
                    client: Any, scheduler: str | None, n_workers: int | None, cluster: dict[str, Any] | None,
                    progress: steps.Progress, log: steps.Log, t_start: float) -> AppendResult:
    name = record["group"]
    if new is not None and new.checksum() != record.get("checksum"):
        raise StoreError(f"{path}: an interrupted append of {_describe_source(record)} is pending; finish it with "
                         f"`gramdist append {path}` (no data) or discard it with `gramdist append {path} --abort`, "
                         "then append these graphs")
    if name not in st.pending_groups(path):
        st.discard_pending(root)
        raise StoreError(f"{path}: the staging group of an interrupted append ({name}) is gone; the record was "
                         "dropped: run the append again")
    pending = root[name]
    grid = st.store_grid(pending)
    if record.get("state") == "committing":
        log(f"gramdist: finishing the commit of an interrupted append of {_describe_source(record)}")
        complete = st.commit_pending(root, name, grid, dict(pending.attrs["commit_attrs"]))
        n = len(grid.tiles())
        return AppendResult(path, int(record.get("n_graphs", 0)), grid.n_rows, n, 0, n, complete)
    if new is None:
        new, _ = _data_spec(record["source"]) if record.get("source") is not None else (None, None)
        if new is None or new.checksum() != record.get("checksum"):
            raise StoreError(f"{path}: the source of the interrupted append ({_describe_source(record)}) cannot be "
                             f"re-read with the same content; give the data again or `--abort`")
    t = time.perf_counter()
    rows, cols = current_graphs(root, path, base)
    grown = _concat(path, rows, new, record.get("source"))
    plan = _plan(root, grown, cols)
    plan.timings["read_s"] = time.perf_counter() - t
    if (plan.grid.n_rows, plan.grid.n_cols) != (grid.n_rows, grid.n_cols):
        raise StoreError(f"{path}: the interrupted append's staging group does not match its graphs; "
                         f"discard it with `gramdist append {path} --abort`")
    log(f"gramdist: resuming the append of {_describe_source(record)} to {path}")
    return _compute(root, path, plan, pending, name, int(record["from"][0]), len(new), client, scheduler, n_workers,
                    cluster, progress, log, t_start)


def _finish_store(root: Any, path: str, base: Any, client: Any, scheduler: str | None, n_workers: int | None,
                  cluster: dict[str, Any] | None, progress: steps.Progress, log: steps.Log,
                  t_start: float) -> AppendResult:
    """No data, nothing pending: compute the tiles the store's done-mask lacks (after
    ``verify --repair``), from the store's recorded sources."""
    grid = st.store_grid(root)
    if root.attrs.get("complete") and st.mark_complete(root, grid):
        n = len(grid.tiles())
        log(f"{path}: already complete ({n} tiles); nothing to do")
        return AppendResult(path, 0, grid.n_rows, n, 0, n, True, "the store is complete")
    if not root.attrs.get("state_complete"):
        raise StoreError(f"{path}: the store has no complete fitted state; rerun its job")
    t = time.perf_counter()
    rows, cols = current_graphs(root, path, base)
    plan = _plan(root, rows, cols)
    plan.timings["read_s"] = time.perf_counter() - t
    if (plan.grid.n_rows, plan.grid.n_cols) != (grid.n_rows, grid.n_cols):
        raise StoreError(f"{path}: its Gram is {grid.n_rows} x {grid.n_cols} for {plan.grid.n_rows} x "
                         f"{plan.grid.n_cols} graphs")
    entries = entries_to_compute(plan.grid, st.read_done_mask(root))
    with _executor(root, client, scheduler, n_workers, cluster, entries, log) as ex:
        ex.warm_up(type(plan.kernel).__module__)
        sink = steps.StoreSink(root, path, plan.grid, plan.checkpoint_seconds)
        from gramdist.engine.runner import compute_into_store

        result = compute_into_store(ex, plan, sink, progress, log)
    plan.timings["total_s"] = time.perf_counter() - t_start
    sink.record_timings(plan.timings)
    return AppendResult(path, 0, plan.grid.n_rows, result.tiles_total, result.tiles_computed,
                        result.tiles_already_done, result.complete, None, plan.timings, result.notes)


def _compute(root: Any, path: str, plan: steps.GramPlan, pending: Any, name: str, old_rows: int, added: int,
             client: Any, scheduler: str | None, n_workers: int | None, cluster: dict[str, Any] | None,
             progress: steps.Progress, log: steps.Log, t_start: float) -> AppendResult:
    from gramdist.engine.runner import compute_into_store

    t = time.perf_counter()
    entries = entries_to_compute(plan.grid, st.read_done_mask(pending))
    with _executor(root, client, scheduler, n_workers, cluster, entries, log) as ex:
        ex.warm_up(type(plan.kernel).__module__)
        plan.timings["cluster_s"] = time.perf_counter() - t
        sink = PendingSink(root, pending, name, path, plan.grid, plan.checkpoint_seconds, old_rows)
        # the entry's timings go in before the commit copies it into ``appends``
        result = compute_into_store(ex, plan, sink, progress, log)
    plan.timings["total_s"] = time.perf_counter() - t_start
    if result.complete:
        _record_append_timings(root, plan.timings)
    return AppendResult(path, added, plan.grid.n_rows, result.tiles_total, result.tiles_computed,
                        result.tiles_already_done, result.complete, None, plan.timings, result.notes)


def _record_append_timings(root: Any, timings: dict[str, float]) -> None:
    appends = list(root.attrs.get("appends") or [])
    if appends:
        appends[-1] = dict(appends[-1]) | {"timings": {k: round(v, 4) for k, v in timings.items()}}
        root.attrs["appends"] = appends


#: an append computing at most this many Gram entries, with no cluster named (no client, no
#: scheduler, no jobqueue, no ``n_workers``), runs in this process: starting a LocalCluster
#: would cost more than it saves (about 2-4 s; 10**7 DM entries are ~5 s of one core)
SMALL_APPEND_ENTRIES = 10**7


def entries_to_compute(grid: st.TileGrid, mask: Any) -> int:
    """Gram entries of the tiles ``mask`` does not mark done (mirrors not counted)."""
    total = 0
    for i, j in grid.tiles():
        if not mask[i, j]:
            (r0, r1), (c0, c1) = grid.row_range(i), grid.col_range(j)
            total += (r1 - r0) * (c1 - c0)
    return total


class _executor:
    """Where the tasks of an append run: a client given, a scheduler, the job's cluster, or
    this process (``n_workers=0``, or a small append with no cluster named: see
    :data:`SMALL_APPEND_ENTRIES`)."""

    def __init__(self, root: Any, client: Any, scheduler: str | None, n_workers: int | None,
                 cluster: dict[str, Any] | None, entries: int | None = None, log: steps.Log | None = None) -> None:
        from gramdist.jobs import DEFAULTS

        job = root.attrs.get("job") or {}
        self.spec = dict(DEFAULTS["cluster"]) | dict(cluster or job.get("cluster") or {})
        self.named = bool(n_workers is not None or cluster or scheduler or self.spec.get("scheduler")
                          or self.spec.get("jobqueue") or os.environ.get("DASK_SCHEDULER_ADDRESS"))
        if n_workers is not None:
            self.spec["n_workers"] = n_workers
        self.client, self.scheduler = client, scheduler
        self.entries, self.log = entries, log
        self._ctx: Any = None

    def __enter__(self) -> Executor:
        if self.client is not None:
            ex: Executor = DaskExecutor(self.client)
        elif self.spec.get("n_workers") == 0 and not (self.scheduler or self.spec.get("scheduler")):
            return InlineExecutor()
        elif not self.named and self.entries is not None and self.entries <= SMALL_APPEND_ENTRIES:
            if self.log:
                self.log(f"gramdist: a small append ({self.entries:,} Gram entries): computing in this process "
                         "(--workers N for a cluster)")
            return InlineExecutor()
        else:
            from gramdist.engine.cluster import connect

            self._ctx = connect(self.spec, self.scheduler)
            ex = DaskExecutor(self._ctx.__enter__())
        return ex

    def __exit__(self, *exc: Any) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
