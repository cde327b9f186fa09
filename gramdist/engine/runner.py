"""Run a Gram job: fit on a sample, embed chunks on workers, compute tiles into Zarr.

The orchestration keeps the client light: it holds the graphs it read, the fitted state for
as long as it takes to store it, the diagonal (N floats) and the done-mask; embeddings live on
the workers, and only ``max_tiles_in_flight`` tile tasks exist at any time. Tile tasks write
their own Zarr chunks and return a tiny status; the client records finished tiles in the
``tiles_done`` mask (flushed every few seconds), so an interrupted job resumes where it
stopped and a store is marked complete only once every tile is on disk.
"""

from __future__ import annotations

import itertools
import math
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

import gramdist
from gramdist.datasets import load_dataset
from gramdist.engine import store as st
from gramdist.engine import tasks
from gramdist.engine.cluster import connect
from gramdist.errors import JobError, StoreError, TileError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.base import GraphKernel

# How often the client saves the done-mask (the env var lets tests make it frequent).
MASK_FLUSH_SECONDS = float(os.environ.get("GRAMDIST_MASK_FLUSH_SECONDS", "2.0"))


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


def fit_sample_indices(n_graphs: int, sample_size: int | None, seed: int) -> np.ndarray:
    """Sorted indices of the fit sample: all graphs, or ``sample_size`` drawn with ``seed``."""
    if sample_size is None or sample_size >= n_graphs:
        return np.arange(n_graphs, dtype=np.int64)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n_graphs, size=sample_size, replace=False)).astype(np.int64)


def _dataset_attrs(spec: Any, graphs: GraphBatch) -> dict[str, Any]:
    return {"spec": spec, "name": graphs.name, "n_graphs": len(graphs), "checksum": graphs.checksum()}


def _check_output_location(path: str, n_rows: int, n_cols: int) -> None:
    """Fail before any compute when the store cannot be written (a clear, early error)."""
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
    need = n_rows * n_cols * 8
    # A float64 Gram compresses, but rarely below a quarter of its size; below that, stop now.
    if free < need / 4 + (16 << 20):
        raise StoreError(
            f"{path}: not enough free disk space ({free / 2**20:.1f} MiB free; the job needs "
            f"{(need / 4 + (16 << 20)) / 2**20:.1f} MiB: a quarter of the {need / 2**20:.1f} MiB "
            "uncompressed Gram plus 16 MiB)"
        )


def run_job(
    job: dict[str, Any],
    *,
    out: str | None = None,
    scheduler: str | None = None,
    client: Any = None,
    overwrite: bool = False,
    progress: bool = True,
    stop_after_tiles: int | None = None,
    inject_failure: tuple[int, int] | None = None,
    log: Callable[[str], None] | None = None,
) -> RunResult:
    """Run one (grid-free) job into its store; resume it if the store exists.

    Parameters
    ----------
    job : a validated job dict (see :mod:`gramdist.jobs`).
    out : store path (overrides the job's ``output``).
    scheduler : address of an existing Dask scheduler (overrides ``cluster.scheduler``).
    client : an existing ``distributed.Client`` to use instead of connecting.
    overwrite : replace an existing store made by a different job.
    progress : show a progress bar on stderr.
    stop_after_tiles : stop (as if interrupted) after this many tiles — for budgeted runs and
        tests; the store stays resumable.
    inject_failure : make the tile with these indices raise (a testing hook).
    log : where to print status lines (default: stderr).
    """
    log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
    timings: dict[str, float] = {}
    t_start = time.perf_counter()

    kernel_spec = dict(job["kernel"])
    kernel = make_kernel(kernel_spec.pop("name"), **kernel_spec)
    t = time.perf_counter()
    graphs = load_dataset(job["dataset"])
    test_graphs = load_dataset(job["test"]["dataset"]) if job.get("test") else None
    timings["read_s"] = time.perf_counter() - t
    if len(graphs) == 0:
        raise JobError("the dataset has no graphs")
    symmetric = test_graphs is None
    rows = graphs if symmetric else test_graphs
    cols = graphs
    tile = int(job["gram"]["tile_size"])
    grid = st.TileGrid(len(rows), len(cols), tile, symmetric)
    path = store_path_for(job, out)
    fit = job["fit"]
    attrs = {
        "gramdist_version": gramdist.__version__,
        "kernel": {"name": kernel.name, "params": kernel.get_params()},
        "dataset": _dataset_attrs(job["dataset"], graphs),
        "dataset_checksum": graphs.checksum(),
        "test_dataset": None if symmetric else _dataset_attrs(job["test"]["dataset"], test_graphs),
        "test_checksum": None if symmetric else test_graphs.checksum(),
        "fit": {"sample_size": fit["sample_size"], "seed": fit["seed"], "from_store": fit.get("from_store")},
        "tile_size": tile,
        "normalize": bool(job["gram"]["normalize"]),
        "symmetric": symmetric,
        "job": {k: v for k, v in job.items() if not k.startswith("_")},
    }
    _check_output_location(path, grid.n_rows, grid.n_cols)

    if Path(path).exists() and not overwrite:
        root = st.open_store(path, mode="r+")
        diff = st.fingerprint_mismatch(root, attrs)
        if diff:
            raise StoreError(
                f"{path}: store was made by a different job ({', '.join(diff)} differ); "
                "choose another --out or pass --overwrite"
            )
        if root.attrs.get("complete") and st.mark_complete(root, grid):
            log(f"{path}: already complete ({len(grid.tiles())} tiles)")
            return RunResult(path, len(grid.tiles()), 0, len(grid.tiles()), True, timings)
    else:
        root = None

    own_client = client is None
    ctx = connect(job["cluster"], scheduler) if own_client else _nullcontext(client)
    t = time.perf_counter()
    with ctx as client:
        _warm_up(client, kernel)
        timings["cluster_s"] = time.perf_counter() - t
        if root is None:
            # created only once a cluster is reached: a refused connection leaves nothing behind
            root = _create(path, grid, attrs, job, rows, cols, symmetric, overwrite)
        link = _dashboard(client)
        n_threads = sum(client.nthreads().values()) or 1
        log(f"gramdist: {kernel!r} on {grid.n_rows}x{grid.n_cols} graphs, {len(grid.tiles())} tiles "
            f"of {tile}, {len(client.nthreads())} workers ({n_threads} threads); dashboard: {link}")
        result = _run_on_client(client, kernel, job, root, path, grid, rows, cols, n_threads,
                                progress, stop_after_tiles, inject_failure, timings, log)
    timings["total_s"] = time.perf_counter() - t_start
    stats = dict(root.attrs.get("stats", {}))
    stats.update({k: round(v, 4) for k, v in timings.items()})
    root.attrs["stats"] = stats
    result.timings = timings
    return result


def _create(path: str, grid: st.TileGrid, attrs: dict[str, Any], job: dict[str, Any], rows: GraphBatch,
            cols: GraphBatch, symmetric: bool, overwrite: bool) -> Any:
    """A new store with the job's attributes and the graphs' labels and ids."""
    root = st.create_store(path, grid, attrs, compression_level=job["gram"]["compression_level"],
                           overwrite=overwrite)
    if rows.y is not None:
        st.write_vector(root, "y", rows.y)
    st.write_vector(root, "graph_ids", rows.graph_ids)
    if not symmetric:
        if cols.y is not None:
            st.write_vector(root, "y_cols", cols.y)
        st.write_vector(root, "graph_ids_cols", cols.graph_ids)
    return root


class _nullcontext:
    def __init__(self, value: Any) -> None:
        self.value = value

    def __enter__(self) -> Any:
        return self.value

    def __exit__(self, *exc: object) -> None:
        return None


def _obtain_state(client: Any, kernel: Any, job: dict[str, Any], root: Any, path: str,
                  cols: GraphBatch, timings: dict[str, float], log: Callable[[str], None]) -> None:
    """Fit the kernel (or copy the state of ``fit.from_store``) unless the store has it."""
    if root.attrs.get("state_complete"):
        log("gramdist: reusing the fitted state found in the store")
        return
    fit = job["fit"]
    t = time.perf_counter()
    if fit.get("from_store"):
        source = st.open_store(fit["from_store"])
        if source.attrs.get("kernel") != root.attrs.get("kernel"):
            raise StoreError(f"fit.from_store {fit['from_store']}: kernel or parameters differ from this job")
        state = st.read_state(fit["from_store"])
        indices = np.asarray(source["fit_indices"][...])
    else:
        indices = fit_sample_indices(len(cols), fit["sample_size"], fit["seed"])
        sample = cols.take(indices) if len(indices) < len(cols) else cols
        state = client.submit(tasks.fit_task, kernel, sample, fit["seed"], pure=False).result()
    st.write_state(root, state, indices)
    timings["fit_s"] = time.perf_counter() - t
    log(f"gramdist: fitted on {len(indices)} graphs in {timings['fit_s']:.2f} s")


def _run_on_client(client: Any, kernel: Any, job: dict[str, Any], root: Any, path: str,
                   grid: st.TileGrid, rows: GraphBatch, cols: GraphBatch, n_threads: int,
                   progress: bool, stop_after_tiles: int | None,
                   inject_failure: tuple[int, int] | None, timings: dict[str, float],
                   log: Callable[[str], None]) -> RunResult:
    from distributed import as_completed
    from tqdm import tqdm

    _obtain_state(client, kernel, job, root, path, cols, timings, log)
    token = uuid.uuid4().hex[:8]
    abs_path = str(Path(path).resolve())
    state_f = client.submit(tasks.load_state_task, abs_path, key=f"state-{token}")

    all_tiles = grid.tiles()
    mask = st.read_done_mask(root)
    checksums = st.read_checksums(root, path)  # None for a store begun before they were recorded
    todo = [tl for tl in all_tiles if not mask[tl]]
    already = len(all_tiles) - len(todo)
    if stop_after_tiles is not None:
        todo = todo[:stop_after_tiles]

    n_row_chunks, n_col_chunks = grid.shape
    need_diag = not root.attrs.get("diag_complete")
    row_needed = set(range(n_row_chunks)) if need_diag else {i for i, _ in todo}
    col_needed = set(range(n_col_chunks)) if need_diag else {j for _, j in todo}
    if grid.symmetric:
        row_needed |= col_needed

    # Embeddings are spread over the workers by a soft hint: left to itself the scheduler
    # runs them all where the state lives, and every tile then follows its embeddings to
    # that one worker while the others wait for work stealing.
    workers = sorted(client.nthreads())
    spread = itertools.count()

    def submit_embed(batch: GraphBatch, rng: tuple[int, int], tag: str) -> Any:
        hint = [workers[next(spread) % len(workers)]] if workers else None
        return client.submit(tasks.embed_task, kernel, state_f, batch[rng[0]:rng[1]],
                             key=f"embed-{tag}-{token}", workers=hint, allow_other_workers=True)

    t = time.perf_counter()
    emb_rows = {i: submit_embed(rows, grid.row_range(i), f"r{i}") for i in sorted(row_needed)}
    if grid.symmetric:
        emb_cols = emb_rows
    else:
        emb_cols = {j: submit_embed(cols, grid.col_range(j), f"c{j}") for j in sorted(col_needed)}

    # K(g, g) of each chunk stays a future that the tiles take as an argument: a tile starts
    # as soon as its two embeddings are ready instead of after a gather of the whole diagonal,
    # which the client collects alongside the tiles and stores before marking completion.
    col_side = "r" if grid.symmetric else "c"
    diag_futs: dict[tuple[str, int], Any] = {}
    if need_diag:
        for side, embs in (("r", emb_rows), ("c", emb_cols if not grid.symmetric else {})):
            for c in sorted(embs):
                diag_futs[(side, c)] = client.submit(tasks.diag_task, kernel, state_f, embs[c],
                                                     key=f"diag-{side}{c}-{token}")
    else:
        diag_rows = np.asarray(root["diag"][...])
        diag_cols = diag_rows if grid.symmetric else np.asarray(root["diag_cols"][...])
    # counters a kernel reports about the graphs it embedded (e.g. caps hit), gathered like the diagonal
    count_futs = []
    if type(kernel).embedding_counts is not GraphKernel.embedding_counts:
        count_futs = [client.submit(tasks.embedding_counts_task, kernel, f, key=f"counts-{side}{c}-{token}")
                      for side, embs in (("r", emb_rows), ("c", {} if grid.symmetric else emb_cols))
                      for c, f in sorted(embs.items())]
    counts: Counter = Counter()
    count_keys = {f.key for f in count_futs}
    # what must finish before the embed phase counts as done (its timing only)
    ready_futs = list({f.key: f for f in (*emb_rows.values(), *emb_cols.values(),
                                          *diag_futs.values(), *count_futs)}.values())
    del count_futs
    waiting = {f.key for f in ready_futs}
    diag_keys = {f.key: sc for sc, f in diag_futs.items()}
    diag_parts: dict[tuple[str, int], np.ndarray] = {}

    # Release each embedding as soon as no remaining tile needs it.
    uses: Counter = Counter()
    for i, j in todo:
        uses[("r", i)] += 1
        uses[("c" if not grid.symmetric else "r", j)] += 1
    for i in list(emb_rows):
        if uses[("r", i)] == 0:
            del emb_rows[i]
    if not grid.symmetric:
        for j in list(emb_cols):
            if uses[("c", j)] == 0:
                del emb_cols[j]

    normalize = bool(job["gram"]["normalize"])
    in_flight = job["cluster"].get("max_tiles_in_flight") or max(4, 2 * n_threads)
    bar = tqdm(total=len(all_tiles), initial=already, unit="tile", disable=not progress,
               desc="tiles", file=sys.stderr, dynamic_ncols=True)

    def submit_tile(tl: tuple[int, int]) -> Any:
        i, j = tl
        r0, r1 = grid.row_range(i)
        c0, c1 = grid.col_range(j)
        ids = ((int(rows.graph_ids[r0]), int(rows.graph_ids[r1 - 1])),
               (int(cols.graph_ids[c0]), int(cols.graph_ids[c1 - 1])))
        if not normalize:
            d_rows = d_cols = None
        elif diag_futs:
            d_rows, d_cols = diag_futs[("r", i)], diag_futs[(col_side, j)]
        else:
            d_rows, d_cols = diag_rows[r0:r1], diag_cols[c0:c1]
        return client.submit(
            tasks.tile_task, kernel, state_f, emb_rows[i], emb_cols[j], d_rows, d_cols,
            path if os.path.isabs(path) else abs_path, grid, tl, ids, inject_failure,
            key=f"tile-{i}-{j}-{token}", retries=1,
        )

    pending = iter(todo)
    queue = as_completed([submit_tile(tl) for tl in _take(pending, in_flight)])
    queue.update(ready_futs)
    del ready_futs  # the queue holds them until each is yielded
    computed = 0
    last_flush = time.monotonic()
    try:
        for fut in queue:
            if fut.key in waiting:
                waiting.discard(fut.key)
                if fut.key in diag_keys:
                    diag_parts[diag_keys[fut.key]] = np.asarray(fut.result(), dtype=np.float64)
                    if len(diag_parts) == len(diag_keys):
                        _store_diag(root, grid, diag_parts, log)
                elif fut.key in count_keys:
                    counts.update(fut.result())
                elif fut.status == "error":
                    fut.result()  # the embedding's own error, named by its task
                if not waiting:
                    timings["embed_s"] = time.perf_counter() - t
                continue
            try:
                (i, j), _secs, checksum = fut.result()
            except TileError:
                raise
            except Exception as exc:  # a worker-side error not wrapped (e.g. KilledWorker)
                raise TileError(f"tile task {fut.key} failed: {type(exc).__name__}: {exc}") from exc
            mask[i, j] = True
            if checksums is not None:
                checksums[i, j] = checksum
            computed += 1
            bar.update(1)
            fut.release()
            for key in (("r", i), ("c" if not grid.symmetric else "r", j)):
                uses[key] -= 1
                if uses[key] == 0:
                    (emb_rows if key[0] == "r" else emb_cols).pop(key[1], None)
            for tl in _take(pending, 1):
                queue.add(submit_tile(tl))
            if time.monotonic() - last_flush > MASK_FLUSH_SECONDS:
                st.write_done_mask(root, mask, checksums)
                last_flush = time.monotonic()
                if not job["cluster"].get("max_tiles_in_flight"):
                    # workers that joined since the start (HPC jobs leaving the queue) widen the window
                    want = max(4, 2 * sum(client.nthreads().values()))
                    if want > in_flight:
                        for tl in _take(pending, want - in_flight):
                            queue.add(submit_tile(tl))
                        log(f"gramdist: {len(client.nthreads())} workers now; {want} tiles in flight")
                        in_flight = want
    except BaseException:
        queue.clear()
        try:
            st.write_done_mask(root, mask, checksums)
        except OSError as exc:  # e.g. the disk is full: report the first error, not this one
            log(f"gramdist: warning: could not save the done-mask ({exc}); tiles finished since "
                "its last save will be recomputed")
        bar.close()
        raise
    st.write_done_mask(root, mask, checksums)
    bar.close()
    # the phases split the wall time: tiles_s counts from the moment every embedding was ready
    timings.setdefault("embed_s", 0.0)
    timings["tiles_s"] = time.perf_counter() - t - timings["embed_s"]
    complete = st.mark_complete(root, grid)
    notes = _notes(kernel, abs_path) + list(kernel.report_embeddings(dict(counts)) if count_keys else [])
    for note in notes:
        log(f"gramdist: note: {note}")
    rate = computed / timings["tiles_s"] if timings["tiles_s"] > 0 else float("nan")
    log(f"gramdist: {computed} tiles computed ({already} already done) in {timings['tiles_s']:.2f} s "
        f"({rate:.1f} tiles/s); store {path} {'complete' if complete else 'INCOMPLETE (rerun to resume)'}")
    return RunResult(path, len(all_tiles), computed, already, complete, timings, notes)


def _warm_up(client: Any, kernel: Any) -> None:
    """Import the kernel code on every worker now (best effort: a failure shows up later, in
    the task that needs the import, with its own message)."""
    try:
        client.run(tasks.warm_up, type(kernel).__module__)
    except Exception:  # noqa: BLE001 - warming is an optimisation only
        pass


def _dashboard(client: Any) -> str:
    """The dashboard address, or why there is none (it needs bokeh)."""
    import importlib.util

    link = getattr(client, "dashboard_link", None)
    if importlib.util.find_spec("bokeh") is None:
        return f"unavailable here (install gramdist[dashboard] for {link})"
    return str(link)


def _store_diag(root: Any, grid: st.TileGrid, parts: dict[tuple[str, int], np.ndarray],
                log: Callable[[str], None]) -> None:
    """Write the gathered K(g, g) chunks as ``diag`` (and ``diag_cols``)."""
    n_row_chunks, n_col_chunks = grid.shape
    diag_rows = np.concatenate([parts[("r", c)] for c in range(n_row_chunks)])
    st.write_vector(root, "diag", diag_rows)
    if grid.symmetric:
        diag_cols = diag_rows
    else:
        diag_cols = np.concatenate([parts[("c", c)] for c in range(n_col_chunks)])
        st.write_vector(root, "diag_cols", diag_cols)
    root.attrs["diag_complete"] = True
    if np.any(diag_rows < 0) or np.any(diag_cols < 0):
        log("gramdist: warning: some K(g, g) < 0; the kernel is not PSD on these graphs")


def _notes(kernel: Any, store_path: str) -> list[str]:
    """Messages the kernel wants a user to see about its fitted state (e.g. caps hit)."""
    report = getattr(kernel, "report", None)
    if report is None:
        return []
    return list(report(st.read_state(store_path)) or [])


def _take(it: Any, n: int) -> list[Any]:
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


def n_tiles(n_rows: int, n_cols: int, tile: int, symmetric: bool) -> int:
    """Number of tiles a job computes (upper triangle only when symmetric)."""
    r, c = math.ceil(n_rows / tile), math.ceil(n_cols / tile)
    return r * (r + 1) // 2 if symmetric else r * c
