"""Feature stores: the engine's steps in the order of a ``gramdist features`` run.

A Gram store grows as N²; a feature store holds one row per graph. Two kinds:

* **Explicit** (kernels with ``has_feature_vectors``: WL, NSPDK, ODD_ST): each graph's exact
  sparse feature vector, written as CSR with the kernel's stable hashes as column ids. The
  dot products of the stored rows are the Gram of the same job, bit for bit.
* **Nyström** (any kernel, ``--nystroem m``): m landmark graphs L are drawn from the fit
  sample; K(L, L) is computed once (tiles on the workers, :func:`runner.compute_in_memory`),
  its eigenpairs with ``λ > eig_cutoff · λ_max`` are kept, and every graph is mapped to
  ``Φ(x) = Λ^{-1/2} Uᵀ K(L, x)``, a dense row of k ≤ m floats, so that ``Φ(x)·Φ(x')`` is the
  Nyström approximation ``K(x, L) K(L, L)⁺ K(L, x')`` of the kernel.

The sequence: plan (:func:`plan_features`) → store (new or resumed) → state
(:func:`steps.obtain_state`, or adopted from ``--from`` store) → Nyström basis (once) → one
task per chunk of graphs (load or generate the graphs, embed, write the rows, return a
checksum) with a bounded window in flight → ``complete``. Nothing of a chunk outlives its
task, and with a lazy dataset (:mod:`gramdist.datasets.lazy`) the client never holds the
graphs either, so memory stays bounded whatever N. An interrupted run resumes from the
chunks its done-mask records.

Fidelity choices of the Nyström features
----------------------------------------
* **Landmarks** come from the fit sample (``fit.sample_size``, drawn with ``fit.seed``), so a
  feature store never looks at graphs the fit did not see. ``uniform``: m of them without
  replacement. ``kmeans++`` (default): kernel k-means++ seeding (D² sampling in the kernel's
  feature space, ``d²(x, l) = K(x, x) + K(l, l) − 2K(x, l)``), the landmark rule of Oglic &
  Gärtner, *Nyström method with kernel K-means++ samples as landmarks* (ICML 2017). Chosen
  over approximate leverage scores because it needs nothing but the kernel's own
  ``pairwise`` (so it works for every kernel, PSD or not), costs one pass of m·|sample|
  kernel values in parallel blocks, and never picks a graph identical to a landmark
  (D² = 0, up to :data:`~gramdist.engine.feature_tasks.DUPLICATE_TOLERANCE`): molecule collections hold many duplicate graphs (NCI1's WL features have
  duplicates), which uniform sampling spends landmarks on. To run in parallel, the draws
  come in :data:`KMEANSPP_ROUNDS` rounds after the first, uniform one: each round draws
  ⌈m/rounds⌉ landmarks at once, without replacement, with probability ∝ D² to the landmarks
  of the previous rounds (Efraimidis–Spirakis keys), keeps the first of any draws of the
  same round that coincide, then updates D². When every sample
  graph coincides with a landmark, fewer than m landmarks are kept (recorded as ``m``).
* **Eigenvalue cutoff**: eigenpairs with ``λ ≤ eig_cutoff · λ_max`` are dropped (default
  :data:`DEFAULT_EIG_CUTOFF`). They carry rounding noise, and duplicate landmarks give
  exact zeros; keeping them would divide noise by √λ. Negative eigenvalues of a kernel that
  is not PSD are dropped too, so ΦΦᵀ is always PSD.
* **Normalisation before Nyström**: with ``gram.normalize`` the kernel is cosine-normalised
  *before* the projection — K(L, L) and every K(x, L) are divided by √(K(x, x) K(l, l)),
  as the Gram store is — so ΦΦᵀ approximates the normalised Gram the exact path gives.
  (Normalising Φ's rows afterwards would give a different kernel.) The raw K(x, x) of each
  graph is stored in ``diag``.
* **Bits**: a graph's Φ depends only on the graph, the state and the landmarks: ``pairwise``
  does not depend on the other graphs of a block (the kernel contract), and the projection
  is a product of fixed shape (:data:`~gramdist.engine.feature_tasks.PROJECTION_ROWS` rows,
  one BLAS thread), so the store is the same whatever the chunk size or number of workers,
  and a graph mapped later (``--from``) gets the same row it got here.
"""

from __future__ import annotations

import contextlib
import copy
import math
import time
from collections import Counter
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine import feature_store as fs
from gramdist.engine import feature_tasks as ft
from gramdist.engine import steps, tasks
from gramdist.engine import store as st
from gramdist.engine.cluster import connect
from gramdist.engine.executor import Executor
from gramdist.engine.lock import StoreLock
from gramdist.engine.runner import compute_in_memory, dask_executor
from gramdist.errors import JobError, StoreError, TileError
from gramdist.graphs import GraphBatch

#: relative eigenvalue cutoff of the Nyström basis (see the module docstring)
DEFAULT_EIG_CUTOFF = 1e-8
LANDMARK_RULES = ("kmeans++", "uniform")
#: rounds of parallel D² draws after the first landmark
KMEANSPP_ROUNDS = 32
#: the default chunk: at least 8 chunks (work for every worker), at most this many graphs
MAX_DEFAULT_CHUNK = 4096


@dataclass(frozen=True)
class NystroemSpec:
    """Nyström features with ``m`` landmarks (see the module docstring for each choice)."""

    m: int
    landmarks: str = "kmeans++"
    eig_cutoff: float = DEFAULT_EIG_CUTOFF

    def validate(self) -> None:
        if isinstance(self.m, bool) or not isinstance(self.m, int) or self.m < 1:
            raise JobError(f"--nystroem: the number of landmarks must be a positive integer, got {self.m!r}")
        if self.landmarks not in LANDMARK_RULES:
            raise JobError(f"--landmarks: one of {', '.join(LANDMARK_RULES)}, got {self.landmarks!r}")
        if not 0.0 <= self.eig_cutoff < 1.0:
            raise JobError(f"--eig-cutoff: must be in [0, 1), got {self.eig_cutoff!r}")


@dataclass
class FeaturePlan:
    """A resolved feature computation: the Gram plan's kernel, graphs and fit, cut into chunks."""

    gram: steps.GramPlan
    grid: fs.ChunkGrid
    nystroem: NystroemSpec | None
    from_store: str | None
    attrs: dict[str, Any]

    @property
    def kernel(self) -> Any:
        return self.gram.kernel

    @property
    def graphs(self) -> Any:
        return self.gram.cols

    @property
    def normalize(self) -> bool:
        return self.gram.normalize


@dataclass
class FeatureResult:
    """What a run did: where, how many chunks, rows per worker, phase timings (seconds)."""

    store: str
    chunks_total: int
    chunks_computed: int
    chunks_already_done: int
    complete: bool
    nnz: int = 0
    workers: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def default_chunk_size(n_graphs: int) -> int:
    """At least 8 chunks, 64 to :data:`MAX_DEFAULT_CHUNK` graphs each."""
    return int(min(MAX_DEFAULT_CHUNK, max(64, math.ceil(n_graphs / 8))))


def _label_dtype(graphs: Any) -> Any:
    y = getattr(graphs, "y", None)
    return y.dtype if y is not None else getattr(graphs, "y_dtype", None)


# ------------------------------------------------------------------------------------ plan
def plan_features(job: dict[str, Any], *, chunk_size: int | None = None, nystroem: NystroemSpec | None = None,
                  from_store: str | None = None) -> FeaturePlan:
    """Resolve and validate a (grid-free) feature job; nothing is computed.

    ``from_store``: a finished feature store whose fitted state (and Nyström basis) map this
    job's graphs, with no refit; its kernel must be the job's, and its normalisation and
    Nyström settings are used.
    """
    from gramdist.datasets.lazy import open_dataset

    if job.get("test"):
        raise JobError("a feature job maps the graphs of its `dataset`; to map other graphs with this "
                       "job's fitted state, run `gramdist features` on a job for them with --from STORE")
    job = copy.deepcopy(job)
    source_attrs: dict[str, Any] | None = None
    if from_store:
        source = fs.open_feature_store(from_store)
        if not source.attrs.get("complete"):
            raise StoreError(f"{from_store}: --from needs a finished feature store")
        source_attrs = dict(source.attrs)
        job["gram"]["normalize"] = bool(source_attrs.get("normalize"))
        spec = source_attrs.get("nystroem_spec")
        given = nystroem
        nystroem = NystroemSpec(**spec) if spec else None
        if given is not None and given != nystroem:
            raise JobError(f"--nystroem/--landmarks/--eig-cutoff differ from {from_store}'s ({spec}); "
                           "leave them out with --from")
    if nystroem is not None:
        nystroem.validate()
    gram = steps.plan_job(job, loader=open_dataset)
    if source_attrs is not None and source_attrs.get("kernel") != gram.attrs["kernel"]:
        raise JobError(f"--from {from_store}: its kernel {source_attrs.get('kernel')} is not this job's "
                       f"{gram.attrs['kernel']}")
    return feature_plan(gram, chunk_size=chunk_size, nystroem=nystroem, from_store=from_store)


def feature_plan(gram: steps.GramPlan, *, chunk_size: int | None = None, nystroem: NystroemSpec | None = None,
                 from_store: str | None = None) -> FeaturePlan:
    """The feature computation of a Gram plan's kernel, graphs and fit (what :func:`plan_features`
    builds once the job is resolved)."""
    if nystroem is None and not gram.kernel.has_feature_vectors:
        raise JobError(f"kernel {gram.kernel.name} has no explicit feature vectors; ask for Nyström features "
                       "with --nystroem M (M landmark graphs, e.g. 1000)")
    n = len(gram.cols)
    lazy = not isinstance(gram.cols, GraphBatch)
    sample = gram.fit.get("sample_size")
    if lazy and not from_store and (sample is None or sample >= n):
        raise JobError(f"the dataset is generated chunk by chunk ({n} graphs, never all in one process): set "
                       "fit.sample_size to the number of graphs the fit (and the landmarks) may hold in memory")
    chunk = int(chunk_size) if chunk_size is not None else default_chunk_size(n)
    if chunk < 1:
        raise JobError(f"--chunk-size must be >= 1, got {chunk}")
    attrs = {k: gram.attrs[k] for k in ("gramdist_version", "kernel", "dataset", "dataset_checksum", "fit",
                                        "normalize", "job")}
    attrs |= {"chunk_size": chunk, "feature_kind": "sparse" if nystroem is None else "nystroem",
              "nystroem_spec": asdict(nystroem) if nystroem else None,
              "from_store": str(Path(from_store).resolve()) if from_store else None}
    return FeaturePlan(gram, fs.ChunkGrid(n, chunk), nystroem, from_store, attrs)


def feature_store_path(job: dict[str, Any], out: str | None) -> str:
    """``--out``, else ``<job name>-features.zarr`` in the working directory."""
    return str(out) if out else f"{job.get('_job_name') or 'job'}-features.zarr"


# ------------------------------------------------------------------------------------ sink
class FeatureSink:
    """A feature store being written: chunk tasks write their rows; this process keeps the
    done-mask and checksums, saved every ``checkpoint_seconds`` and at the end. It keeps the
    fitted state the way a Gram store does (``keeps_state``), so the engine's state step
    writes into it unchanged."""

    keeps_state = True

    def __init__(self, root: Any, path: str, grid: fs.ChunkGrid,
                 checkpoint_seconds: float = steps.CHECKPOINT_SECONDS) -> None:
        self.root = root
        self.path = path
        self.grid = grid
        self.write_path = str(Path(path).resolve())
        self.checkpoint_seconds = checkpoint_seconds
        self.mask, self.checksums = fs.read_chunk_mask(root)
        self._last_flush = time.monotonic()

    def chunk_done(self, i: int, checksum: int) -> None:
        self.mask[i] = True
        self.checksums[i] = np.uint64(checksum)

    def flush(self, force: bool = True) -> bool:
        if not force and time.monotonic() - self._last_flush <= self.checkpoint_seconds:
            return False
        fs.write_chunk_mask(self.root, self.mask, self.checksums)
        self._last_flush = time.monotonic()
        return True

    def finish(self) -> bool:
        self.flush()
        return fs.mark_complete(self.root)

    def record_timings(self, timings: dict[str, float]) -> None:
        fs.record_stats(self.root, timings)


def open_sink(plan: FeaturePlan, path: str, overwrite: bool, *, create: bool = True) -> FeatureSink | None:
    """The store at ``path`` resumed (its job must be this one), or a new one (``create``);
    None when there is none and ``create`` is false."""
    root = None
    if Path(path).exists() and not overwrite:
        root = fs.open_feature_store(path, mode="r+")
        diff = fs.fingerprint_mismatch(root, plan.attrs)
        if diff:
            raise StoreError(f"{path}: store was made by a different job ({', '.join(diff)} differ); "
                             "choose another --out or pass --overwrite")
    if root is None:
        if not create:
            return None
        root = fs.create_feature_store(path, plan.grid, plan.attrs, sparse=plan.nystroem is None,
                                       y_dtype=_label_dtype(plan.graphs),
                                       compression_level=plan.gram.compression_level, overwrite=overwrite)
    return FeatureSink(root, path, plan.grid, plan.gram.checkpoint_seconds)


# ------------------------------------------------------------------------------------ runs
def featurize_grid(job: dict[str, Any], *, out: str | None = None, **kwargs: Any) -> list[tuple[str, FeatureResult]]:
    """:func:`featurize_job` for a job, or for each setting of its grid into ``<out>/<setting>.zarr``
    (one cluster for all). Returns ``(setting name, result)`` pairs (name ``""`` without a grid)."""
    from gramdist.jobs import expand_grid

    settings = expand_grid(job)
    if len(settings) == 1 and not settings[0][0]:
        return [("", featurize_job(settings[0][1], out=out, **kwargs))]
    folder = Path(out or f"{job['_job_name']}-features")
    folder.mkdir(parents=True, exist_ok=True)
    client, scheduler = kwargs.pop("client", None), kwargs.pop("scheduler", None)
    log = kwargs.get("log") or steps.stderr_log
    results = []
    with (connect(job["cluster"], scheduler) if client is None else contextlib.nullcontext(client)) as client:
        for name, sub in settings:
            log(f"gramdist: grid setting {name}")
            results.append((name, featurize_job(sub, out=str(folder / f"{name}.zarr"), client=client, **kwargs)))
    return results


def featurize_job(job: dict[str, Any], *, out: str | None = None, scheduler: str | None = None, client: Any = None,
                  overwrite: bool = False, progress: steps.Progress = True, log: steps.Log | None = None,
                  chunk_size: int | None = None, nystroem: NystroemSpec | None = None,
                  from_store: str | None = None) -> FeatureResult:
    """Compute a (grid-free) job's features into a feature store; resume it if it exists.

    Parameters
    ----------
    job : a validated job dict (see :mod:`gramdist.jobs`).
    out : store path (default ``<job name>-features.zarr``).
    scheduler, client : as :func:`gramdist.engine.runner.run_job`.
    overwrite : replace an existing store made by a different job.
    progress : a progress bar (True), none (False) or ``callback(done, total)`` per chunk.
    chunk_size : graphs per chunk (one task, one Zarr chunk); default :func:`default_chunk_size`.
    nystroem : Nyström features with these settings; None: the kernel's explicit features.
    from_store : map the graphs with this finished feature store's state and basis (no refit).
    """
    log = log or steps.stderr_log
    t_start = time.perf_counter()
    plan = plan_features(job, chunk_size=chunk_size, nystroem=nystroem, from_store=from_store)
    return run_feature_plan(plan, feature_store_path(job, out), dask_executor(job["cluster"], scheduler, client),
                            overwrite=overwrite, progress=progress, log=log, t_start=t_start)


def run_feature_plan(plan: FeaturePlan, path: str, executor: AbstractContextManager[Executor], *,
                     overwrite: bool = False, progress: steps.Progress = True, log: steps.Log | None = None,
                     t_start: float | None = None) -> FeatureResult:
    """Compute ``plan`` into the feature store at ``path`` under its lock; resume it if it exists.

    What ``gramdist features`` does once its job is planned, and what
    :class:`gramdist.FeatureTransformer` with ``store=`` calls with its own plan.
    ``executor``: a context manager yielding the :class:`Executor`, entered only once the
    store is known to need work (see :func:`gramdist.engine.runner.run_plan`).
    """
    log = log or steps.stderr_log
    t_start = time.perf_counter() if t_start is None else t_start
    steps.check_output_location(path, plan.grid.n_graphs, plan.nystroem.m if plan.nystroem else 16)
    with StoreLock(path, log=log):
        sink = open_sink(plan, path, overwrite, create=False)
        if sink is not None and sink.root.attrs.get("complete") and fs.mark_complete(sink.root):
            log(f"{path}: already complete ({plan.grid.n_chunks} chunks)")
            n = plan.grid.n_chunks
            return FeatureResult(path, n, 0, n, True, timings=plan.gram.timings)
        t = time.perf_counter()
        with executor as ex:
            ex.warm_up(type(plan.kernel).__module__)
            plan.gram.timings["cluster_s"] = time.perf_counter() - t
            if sink is None:  # created only once a cluster is reached
                sink = open_sink(plan, path, overwrite)
            log(f"gramdist: {plan.kernel!r} features of {plan.grid.n_graphs} graphs in {plan.grid.n_chunks} "
                f"chunks of {plan.grid.chunk}"
                + (f", Nyström with {plan.nystroem.m} landmarks ({plan.nystroem.landmarks})" if plan.nystroem else "")
                + f", {ex.n_workers()} workers ({ex.n_threads()} threads); dashboard: {ex.dashboard()}")
            result = compute_features(ex, plan, sink, progress=progress, log=log)
    plan.gram.timings["total_s"] = time.perf_counter() - t_start
    sink.record_timings(plan.gram.timings)
    result.timings = plan.gram.timings
    return result


def compute_features(ex: Executor, plan: FeaturePlan, sink: FeatureSink, *, progress: steps.Progress = False,
                     log: steps.Log | None = None) -> FeatureResult:
    """State, Nyström basis, chunks and completion of ``plan`` into an open store: every chunk
    the done-mask lacks is computed."""
    log = log or steps.stderr_log
    if plan.from_store:
        _adopt(plan, sink, log)
    else:
        steps.obtain_state(ex, plan.gram, sink, log)
    token = steps.new_token()
    state_f = steps.share_state(ex, sink, None, token)
    kernel, grid = plan.kernel, plan.grid
    if plan.nystroem is not None and not sink.root.attrs.get("nystroem_complete"):
        t = time.perf_counter()
        fit_nystroem(ex, plan, sink, state_f, token, log)
        plan.gram.timings["nystroem_s"] = time.perf_counter() - t
    y_dtype = fs.label_dtype(sink.root)
    if plan.nystroem is None:
        def submit(i: int) -> Any:
            r0, r1 = grid.range(i)
            return ex.submit(ft.sparse_chunk_task, kernel, state_f, plan.graphs[r0:r1], sink.write_path, grid, i,
                             y_dtype, plan.gram.compression_level, key=f"features-{i}-{token}", spread=True,
                             retries=1)
    else:
        nys_f = ex.submit(ft.load_nystroem_task, sink.write_path, key=f"nystroem-{token}")
        land_f = ex.submit(ft.embed_landmarks_task, kernel, state_f, nys_f, key=f"landmarks-{token}")

        def submit(i: int) -> Any:
            r0, r1 = grid.range(i)
            return ex.submit(ft.nystroem_chunk_task, kernel, state_f, plan.graphs[r0:r1], land_f, nys_f,
                             sink.write_path, grid, i, plan.normalize, y_dtype, key=f"nystroem-{i}-{token}",
                             spread=True, retries=1)

    todo = [i for i in range(grid.n_chunks) if not sink.mask[i]]
    already = grid.n_chunks - len(todo)
    t = time.perf_counter()
    report = _run_chunks(ex, plan, sink, todo, submit, already, progress, log)
    plan.gram.timings["chunks_s"] = time.perf_counter() - t
    tiles = steps.TileReport(report["computed"], report["counts"], {}, counted=bool(report["counts"]))
    complete, notes = steps.finish(plan.gram, sink, tiles, log)
    secs = plan.gram.timings["chunks_s"]
    spread = ", ".join(f"{w} {c}" for w, c in sorted(report["workers"].items()))
    log(f"gramdist: {report['computed']} chunks computed ({already} already done) in {secs:.2f} s"
        + (f" (chunks per worker: {spread})" if spread else "")
        + f"; store {sink.path} {'complete' if complete else 'INCOMPLETE (rerun to resume)'}")
    return FeatureResult(sink.path, grid.n_chunks, report["computed"], already, complete, report["nnz"],
                         dict(report["workers"]), plan.gram.timings, notes)


def _run_chunks(ex: Executor, plan: FeaturePlan, sink: FeatureSink, todo: list[int], submit: Any, already: int,
                progress: steps.Progress, log: steps.Log) -> dict[str, Any]:
    """Chunk tasks with a bounded window in flight, each recorded in ``sink`` as it finishes;
    on any error or interruption the done-mask is saved before re-raising."""
    in_flight = max(4, 2 * ex.n_threads())
    report = steps.progress_reporter(progress, plan.grid.n_chunks, already, unit="chunk")
    out: dict[str, Any] = {"computed": 0, "nnz": 0, "counts": Counter(), "workers": Counter()}
    pending = iter(todo)
    queue = ex.as_completed([submit(i) for i in steps.take_next(pending, in_flight)])
    try:
        for fut in queue:
            try:
                res = fut.result()
            except TileError:
                raise
            except Exception as exc:  # a worker-side error not wrapped (e.g. KilledWorker)
                raise TileError(f"feature task {fut.key} failed: {type(exc).__name__}: {exc}") from exc
            sink.chunk_done(res["chunk"], res["checksum"])
            out["computed"] += 1
            out["nnz"] += res["nnz"]
            out["counts"].update(res["counts"])
            out["workers"][res["worker"]] += 1
            fut.release()
            report(1)
            for i in steps.take_next(pending, 1):
                queue.add(submit(i))
            sink.flush(force=False)
    except BaseException:
        queue.clear()
        try:
            sink.flush()
        except OSError as exc:
            log(f"gramdist: warning: could not save the done-mask ({exc}); chunks finished since its last "
                "save will be recomputed")
        report(None)
        raise
    report(None)
    return out


def _adopt(plan: FeaturePlan, sink: FeatureSink, log: steps.Log) -> None:
    """Copy the fitted state (and the Nyström basis) of ``plan.from_store`` into the store."""
    source = plan.from_store
    if not sink.root.attrs.get("state_complete"):
        indices = st.read_fit_indices(fs.open_feature_store(source), source)
        st.write_state(sink.root, st.read_state(source), indices)
    if plan.nystroem is not None and not sink.root.attrs.get("nystroem_complete"):
        fs.write_nystroem(sink.root, fs.read_nystroem(source), plan.grid.chunk, plan.gram.compression_level)
    log(f"gramdist: mapping with the fitted state{' and Nyström basis' if plan.nystroem else ''} of {source} "
        "(no refit)")


# ------------------------------------------------------------------------------------ Nyström
def fit_nystroem(ex: Executor, plan: FeaturePlan, sink: FeatureSink, state_f: Any, token: str,
                 log: steps.Log) -> fs.NystroemState:
    """Landmarks, K(L, L), its top eigenpairs and the projection, written into the store."""
    nys = nystroem_basis(ex, plan, st.read_state(sink.path), state_f, token, log)
    fs.write_nystroem(sink.root, nys, plan.grid.chunk, plan.gram.compression_level)
    return nys


def nystroem_basis(ex: Executor, plan: FeaturePlan, state: Any, state_f: Any, token: str,
                   log: steps.Log) -> fs.NystroemState:
    """Landmarks, K(L, L), its top eigenpairs and the projection of ``plan`` with the fitted
    ``state`` (``state_f``: its future on ``ex``), in memory: what :func:`fit_nystroem` writes
    into a store, and what :class:`gramdist.FeatureTransformer` keeps."""
    spec, fit, kernel = plan.nystroem, plan.gram.fit, plan.kernel
    seed = int(fit.get("seed", 0))
    pool = steps.fit_sample_indices(len(plan.graphs), fit.get("sample_size"), seed)
    m = min(spec.m, len(pool))
    if m < spec.m:
        log(f"gramdist: note: Nyström: {spec.m} landmarks asked, the fit sample has {len(pool)} graphs: using {m}")
    if spec.landmarks == "uniform":
        rng = np.random.default_rng([seed, 0x4E59, 1])
        chosen = np.sort(rng.choice(pool, size=m, replace=False))
    else:
        chosen = kmeanspp_landmarks(ex, plan, state_f, pool, m, seed, token, log)
    landmarks = plan.graphs.take(chosen)
    lplan = steps.plan_gram(kernel, landmarks, tile_size=max(16, math.ceil(len(chosen) / 4)),
                            normalize=plan.normalize, fit=fit)
    gram = compute_in_memory(ex, lplan, state=state, log=lambda _msg: None)
    lam, proj = ex.submit(ft.nystroem_basis_task, gram.gram, spec.eig_cutoff, key=f"basis-{token}").result()
    attrs = {"m": int(len(chosen)), "m_requested": spec.m, "landmarks": spec.landmarks,
             "eig_cutoff": spec.eig_cutoff, "rank": int(proj.shape[1]), "seed": seed,
             "normalize": plan.normalize, "landmark_pool": int(len(pool)),
             "lambda_max": float(lam[0]), "lambda_kept_min": float(lam[proj.shape[1] - 1])}
    nys = fs.NystroemState(landmarks, chosen.astype(np.int64), np.asarray(gram.diag_rows, np.float64), lam, proj,
                           attrs)
    log(f"gramdist: Nyström basis: {len(chosen)} landmarks ({spec.landmarks}) from a fit sample of {len(pool)}; "
        f"rank {proj.shape[1]} (eigenvalues > {spec.eig_cutoff:g} x the largest, {lam[0]:.4g})")
    return nys


def kmeanspp_landmarks(ex: Executor, plan: FeaturePlan, state_f: Any, pool: np.ndarray, m: int, seed: int,
                       token: str, log: steps.Log) -> np.ndarray:
    """Kernel k-means++ seeding over the fit sample ``pool``: sorted indices of ≤ m landmarks.

    See the module docstring: a uniform first landmark, then :data:`KMEANSPP_ROUNDS` rounds
    of D² draws; the sample's embeddings stay on the workers between rounds.
    """
    kernel = plan.kernel
    sample = plan.graphs.take(pool)
    n = len(pool)
    part = max(64, math.ceil(n / 16))  # fixed by n alone: d² does not depend on it anyway
    bounds = [(a, min(a + part, n)) for a in range(0, n, part)]
    embs = [ex.submit(tasks.embed_task, kernel, state_f, sample[a:b], key=f"kmpp-embed-{p}-{token}", spread=True)
            for p, (a, b) in enumerate(bounds)]
    diags = [ex.submit(tasks.diag_task, kernel, state_f, e, key=f"kmpp-diag-{p}-{token}") for p, e in enumerate(embs)]
    diag = np.concatenate([np.asarray(f.result(), dtype=np.float64) for f in diags])
    rng = np.random.default_rng([seed, 0x4E59, 2])
    chosen = np.zeros(n, dtype=bool)
    d2 = np.full(n, np.inf)
    per_round = max(1, math.ceil((m - 1) / KMEANSPP_ROUNDS))
    new = np.array([rng.integers(n)])
    for r in range(m):
        drawn = new
        emb_new = ex.submit(tasks.embed_task, kernel, state_f, sample.take(drawn), key=f"kmpp-new-{r}-{token}")
        if len(new) > 1:  # two draws of one round may be the same graph: keep the first
            new = new[ex.submit(ft.distinct_task, kernel, state_f, emb_new, diag[new], plan.normalize,
                                key=f"kmpp-distinct-{r}-{token}").result()]
        chosen[new] = True
        left = m - int(chosen.sum())
        if left <= 0:
            break
        futs = [ex.submit(ft.squared_distance_task, kernel, state_f, embs[p], diag[a:b], emb_new, diag[drawn],
                          plan.normalize, key=f"kmpp-d2-{r}-{p}-{token}") for p, (a, b) in enumerate(bounds)]
        d2 = np.minimum(d2, np.concatenate([f.result() for f in futs]))
        d2[chosen] = 0.0
        new = _d2_draw(rng, d2, min(per_round, left))
        if not len(new):
            log(f"gramdist: note: Nyström: every graph of the fit sample coincides with one of the "
                f"{int(chosen.sum())} landmarks chosen; keeping those (of {m} asked)")
            break
    return np.sort(pool[chosen])


def _d2_draw(rng: np.random.Generator, d2: np.ndarray, k: int) -> np.ndarray:
    """``k`` distinct indices drawn with probability ∝ ``d2`` (Efraimidis–Spirakis: the k
    largest ``log(u) / w``); fewer when fewer have ``d2 > 0``."""
    cand = np.flatnonzero(d2 > 0)
    if len(cand) <= k:
        return cand
    keys = np.log(rng.random(len(cand))) / d2[cand]
    return np.sort(cand[np.argpartition(-keys, k - 1)[:k]])
