"""Feature stores: the engine's steps in the order of a ``gramdist features`` run.

A Gram store grows as N²; a feature store holds one row per graph. Two kinds:

* **Explicit** (kernels with ``has_feature_vectors``: WL, NSPDK, ODD_ST, SP and 19 others): each graph's exact
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
  is a product of fixed shape (:data:`~gramdist.engine.nystroem.PROJECTION_ROWS` rows,
  one BLAS thread), so the store is the same whatever the chunk size or number of workers,
  and a graph mapped later (``--from``) gets the same row it got here.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist._version import __version__
from gramdist.engine import feature_tasks as ft
from gramdist.engine import steps, tasks
from gramdist.engine.context import RunContext, progress_reporter
from gramdist.engine.executor import Executor
from gramdist.engine.nystroem import KMEANSPP_ROUNDS, NystroemSpec, NystroemState, d2_draw
from gramdist.engine.placement import Placement
from gramdist.engine.plan import GramPlan, fit_sample_indices, plan_gram, plan_job
from gramdist.engine.runner import compute_in_memory, plan_nodes, run_settings
from gramdist.engine.sinks import ChunkSink, FeatureStoreSink, RowsSink
from gramdist.engine.store import (
    ChunkGrid,
    FeatureMeta,
    FeatureStore,
    Location,
    StoreLock,
    as_location,
    creation_cut_short,
)
from gramdist.engine.window import Window, run_window
from gramdist.errors import JobError, StoreError
from gramdist.graphs import GraphBatch
from gramdist.jobs import GramSpec, Job

#: the default chunk: at least 8 chunks (work for every worker), at most this many graphs
MAX_DEFAULT_CHUNK = 4096


@dataclass
class FeaturePlan:
    """A resolved feature computation: the Gram plan's kernel, graphs and fit, cut into chunks."""

    gram: GramPlan
    grid: ChunkGrid
    nystroem: NystroemSpec | None
    from_store: str | None
    meta: FeatureMeta

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
def plan_features(job: Job, *, chunk_size: int | None = None, nystroem: NystroemSpec | None = None,
                  from_store: str | None = None) -> FeaturePlan:
    """Resolve and validate a (grid-free) feature job; nothing is computed.

    ``from_store``: a finished feature store whose fitted state (and Nyström basis) map this
    job's graphs, with no refit; its kernel must be the job's, and its normalisation and
    Nyström settings are used.
    """
    from gramdist.datasets.lazy import open_dataset

    if job.test:
        raise JobError("a feature job maps the graphs of its `dataset`; to map other graphs with this "
                       "job's fitted state, run `gramdist features` on a job for them with --from STORE")
    source = None
    if from_store:
        source = FeatureStore.open(from_store)
        if not source.complete:
            raise StoreError(f"{from_store}: --from needs a finished feature store")
        job = job.replace(gram=GramSpec(**{**job.gram.to_dict(), "normalize": source.normalize}))
        spec = source.nystroem_spec
        given = nystroem
        nystroem = NystroemSpec(**spec) if spec else None
        if given is not None and given != nystroem:
            raise JobError(f"--nystroem/--landmarks/--eig-cutoff differ from {from_store}'s ({spec}); "
                           "leave them out with --from")
    if nystroem is not None:
        nystroem.validate()
    gram = plan_job(job, loader=open_dataset)
    if source is not None and source.kernel != gram.meta.kernel:
        raise JobError(f"--from {from_store}: its kernel {source.kernel} is not this job's {gram.meta.kernel}")
    if source is not None:
        source.check_kernel_versions(gram.meta.kernel_versions)
    return feature_plan(gram, chunk_size=chunk_size, nystroem=nystroem, from_store=from_store)


def feature_plan(gram: GramPlan, *, chunk_size: int | None = None, nystroem: NystroemSpec | None = None,
                 from_store: str | None = None) -> FeaturePlan:
    """The feature computation of a Gram plan's kernel, graphs and fit (what :func:`plan_features`
    builds once the job is resolved)."""
    if nystroem is None and not gram.kernel.has_feature_vectors:
        raise JobError(f"kernel {gram.kernel.name} has no explicit feature vectors; ask for Nyström features "
                       "with --nystroem M (M landmark graphs, e.g. 1000)")
    n = len(gram.cols)
    lazy = not isinstance(gram.cols, GraphBatch)
    sample = gram.fit.sample_size
    # a sample_size of at least n fits on all n graphs: no more than the user said may be held
    if lazy and not from_store and sample is None:
        raise JobError(f"the dataset is generated chunk by chunk ({n} graphs, never all in one process): set "
                       "fit.sample_size to the number of graphs the fit (and the landmarks) may hold in memory")
    chunk = int(chunk_size) if chunk_size is not None else default_chunk_size(n)
    if chunk < 1:
        raise JobError(f"--chunk-size must be >= 1, got {chunk}")
    m = gram.meta
    meta = FeatureMeta(gramdist_version=__version__, kernel=m.kernel, dataset=m.dataset,
                       dataset_checksum=m.dataset_checksum, fit=m.fit, normalize=m.normalize, chunk_size=chunk,
                       feature_kind="sparse" if nystroem is None else "nystroem",
                       nystroem_spec=asdict(nystroem) if nystroem else None,
                       from_store=str(Path(from_store).resolve()) if from_store else None, job=m.job,
                       kernel_versions=m.kernel_versions)
    return FeaturePlan(gram, ChunkGrid(n, chunk), nystroem, from_store, meta)


def feature_store_path(job: Job, out: str | None) -> str:
    """``--out``, else ``<job name>-features.zarr`` in the working directory."""
    return str(out) if out else f"{job.name or 'job'}-features.zarr"


def open_sink(plan: FeaturePlan, where: str | Location, overwrite: bool, *, create: bool = True, lock: Any = None
              ) -> FeatureStoreSink | None:
    """The store at ``location`` resumed (its job must be this one), or a new one (``create``);
    None when there is none and ``create`` is false."""
    location = as_location(where)
    store = None
    if creation_cut_short(location):  # a kill while it was laid out: nothing computed to resume
        overwrite = True
    if location.exists() and not overwrite and not location.is_empty_folder():
        store = FeatureStore.open(location, mode="r+")
        store.check_kernel_versions(plan.meta.kernel_versions)
        diff = store.fingerprint_mismatch(plan.meta.to_attrs())
        if diff:
            raise StoreError(f"{location}: store was made by a different job ({', '.join(diff)} differ); "
                             "choose another --out or pass --overwrite")
    if store is None:
        if not create:
            return None
        store = FeatureStore.create(location, plan.grid, plan.meta, y_dtype=_label_dtype(plan.graphs),
                                    compression_level=plan.gram.gram.compression_level, overwrite=overwrite)
    return FeatureStoreSink(store, plan.gram.gram.checkpoint_seconds, lock)


# ------------------------------------------------------------------------------------ runs
@dataclass(frozen=True)
class FeatureRequest:
    """What a ``gramdist features`` run asks for besides its job: the chunk size, Nyström
    settings (None: the kernel's explicit features), and a store whose state maps the graphs."""

    chunk_size: int | None = None
    nystroem: NystroemSpec | None = None
    from_store: str | None = None


def featurize_grid(job: Job, *, out: str | None = None, request: FeatureRequest | None = None,
                   placement: Placement | None = None, overwrite: bool = False,
                   context: RunContext | None = None) -> list[tuple[str, FeatureResult]]:
    """:func:`featurize_job` for a job, or for each setting of its grid into ``<out>/<setting>.zarr``
    (one cluster for all). Returns ``(setting name, result)`` pairs (name ``""`` without a grid)."""
    context = context or RunContext()
    placement = placement or Placement(cluster=job.cluster)
    folder = (out or f"{job.name}-features") if job.grid else feature_store_path(job, out)

    def one(sub: Job, path: str, where: Placement) -> FeatureResult:
        return featurize_job(sub, out=path, request=request, placement=where, overwrite=overwrite, context=context)

    return run_settings(job, folder, placement, one, context)


def featurize_job(job: Job, *, out: str | None = None, request: FeatureRequest | None = None,
                  placement: Placement | None = None, overwrite: bool = False,
                  context: RunContext | None = None) -> FeatureResult:
    """Compute a (grid-free) job's features into a feature store; resume it if it exists.

    ``out``: the store (default ``<job name>-features.zarr``); ``request``: chunk size,
    Nyström settings, ``--from`` store; ``placement``, ``overwrite``, ``context``: as for
    :func:`gramdist.engine.runner.run_job`.
    """
    t_start = time.perf_counter()
    request = request or FeatureRequest()
    plan = plan_features(job, chunk_size=request.chunk_size, nystroem=request.nystroem,
                         from_store=request.from_store)
    return run_feature_plan(plan, feature_store_path(job, out),
                            placement or Placement(cluster=job.cluster),
                            overwrite=overwrite, context=context, t_start=t_start)


def _work(plan: FeaturePlan) -> int:
    """Kernel values a feature computation evaluates (what the placement weighs)."""
    n = plan.grid.n_graphs
    if plan.nystroem is None:
        return n * n
    pool = n if plan.gram.fit.sample_size is None else min(n, plan.gram.fit.sample_size)
    return (n + pool) * plan.nystroem.m


def run_feature_plan(plan: FeaturePlan, where: str | Location, placement: Placement, *, overwrite: bool = False,
                     context: RunContext | None = None, t_start: float | None = None) -> FeatureResult:
    """Compute ``plan`` into the feature store at ``where`` under its lock; resume it if it exists.

    What ``gramdist features`` does once its job is planned, and what
    :class:`gramdist.FeatureTransformer` with ``store=`` calls with its own plan; the executor
    starts only once the store is known to need work.
    """
    context = context or RunContext()
    location = as_location(where)
    t_start = time.perf_counter() if t_start is None else t_start
    steps.check_output_location(location, plan.grid.n_graphs, plan.nystroem.m if plan.nystroem else 16,
                                overwrite=overwrite)
    if plan.from_store and Location(plan.from_store) == location:
        raise StoreError(f"{location}: --from names the output store itself")
    with StoreLock(location, log=context.log) as lock:
        sink = open_sink(plan, location, overwrite, create=False, lock=lock)
        if sink is not None and sink.store.is_finished():
            context.log(f"{location}: already complete ({plan.grid.n_chunks} chunks)")
            n = plan.grid.n_chunks
            return FeatureResult(str(location), n, 0, n, True, timings=plan.gram.timings)
        t = time.perf_counter()
        with placement.executor(_work(plan), context.log, plan_nodes(plan.gram)) as ex:
            ex.warm_up(type(plan.kernel).__module__)
            plan.gram.timings["cluster_s"] = time.perf_counter() - t
            if sink is None:  # created only once a cluster is reached
                sink = open_sink(plan, location, overwrite, lock=lock)
            context.log(f"gramdist: {plan.kernel!r} features of {plan.grid.n_graphs} graphs in {plan.grid.n_chunks} "
                        f"chunks of {plan.grid.chunk}"
                        + (f", Nyström with {plan.nystroem.m} landmarks ({plan.nystroem.landmarks})"
                           if plan.nystroem else "")
                        + f", {ex.n_workers()} workers ({ex.n_threads()} threads); dashboard: {ex.dashboard()}")
            result = compute_features(ex, plan, sink, context)
        plan.gram.timings["total_s"] = time.perf_counter() - t_start
        sink.record_timings(plan.gram.timings)  # still under the lock: a released store is another writer's
    result.timings = plan.gram.timings
    return result


class _ChunkSubmitter:
    """Submits the chunk tasks of a feature computation: explicit rows, or Nyström rows."""

    def __init__(self, ex: Executor, plan: FeaturePlan, state_f: Any, sink: ChunkSink, nys_f: Any = None,
                 graphs: Any = None) -> None:
        self.ex, self.plan, self.state_f, self.sink = ex, plan, state_f, sink
        self.graphs = plan.graphs if graphs is None else graphs
        self.token = steps.new_token()
        self.nys_f = nys_f
        self.land_f = None
        if nys_f is not None:
            self.land_f = ex.submit(ft.embed_landmarks_task, plan.kernel, state_f, nys_f, key=f"landmarks-{self.token}")

    def __call__(self, i: int) -> Any:
        a, b = self.plan.grid.range(i)
        chunk, kernel, target = self.graphs[a:b], self.plan.kernel, self.sink.target
        key = f"{'features' if self.nys_f is None else 'nystroem'}-{i}-{self.token}"
        fn, extra = ((ft.sparse_rows, ()) if self.nys_f is None
                     else (ft.nystroem_features, (self.land_f, self.nys_f, self.plan.normalize)))
        where = steps.embedding_lane(kernel)
        if self.ex.forks() and steps.embeds_in_worker(kernel, chunk):
            # a forked worker embeds; the rows are taken from the embedding (and written) in
            # the pool, so the workers never write to a store (gramdist.engine.processes)
            emb = self.ex.submit(ft.chunk_embedding, i, kernel, self.state_f, chunk, key=f"embed-{key}",
                                 processes=True, **where)
            extra, where = (*extra, emb), {"pooled": True}
        if target is None:
            return self.ex.submit(ft.chunk_rows, i, fn, kernel, self.state_f, chunk, *extra, key=key, spread=True,
                                  **where)
        return self.ex.submit(ft.chunk_task, target, i, fn, kernel, self.state_f, chunk, *extra, key=key,
                              spread=True, retries=1, **where)


def run_chunks(ex: Executor, submit: Any, sink: ChunkSink, todo: list[int], context: RunContext,
               already: int = 0) -> dict[str, Any]:
    """Chunk tasks through the engine's window, each recorded in ``sink`` as it finishes."""
    n_chunks = len(sink.mask)
    out: dict[str, Any] = {"computed": 0, "nnz": 0, "counts": Counter(), "workers": Counter()}

    def record(res: dict[str, Any]) -> None:
        sink.chunk_done(res["chunk"], res)
        out["computed"] += 1
        out["nnz"] += res.get("nnz", 0)
        out["counts"].update(res["counts"])
        if "worker" in res:
            out["workers"][res["worker"]] += 1

    window = Window(ex, submit, record, progress_reporter(context.progress, n_chunks, already, unit="chunk"),
                    context.log, sink=sink, what="feature")
    run_window(window, todo)
    return out


def compute_features(ex: Executor, plan: FeaturePlan, sink: FeatureStoreSink, context: RunContext) -> FeatureResult:
    """State, Nyström basis, chunks and completion of ``plan`` into an open store: every chunk
    the done-mask lacks is computed."""
    store = sink.store
    if plan.from_store:
        store.adopt(FeatureStore.open(plan.from_store), nystroem=plan.nystroem is not None)
        context.log(f"gramdist: mapping with the fitted state{' and Nyström basis' if plan.nystroem else ''} of "
                    f"{plan.from_store} (no refit)")
    else:
        steps.obtain_state(ex, plan.gram, sink, context)
    token = steps.new_token()
    state_f = steps.share_state(ex, sink, None, token)
    nys_f = None
    if plan.nystroem is not None:
        if not store.nystroem_complete:
            t = time.perf_counter()
            store.write_nystroem(nystroem_basis(ex, plan, store.read_state(), state_f, context))
            plan.gram.timings["nystroem_s"] = time.perf_counter() - t
        nys_f = ex.submit(ft.load_nystroem_task, store.location.resolved(), key=f"nystroem-{token}")
    todo = [i for i in range(plan.grid.n_chunks) if not sink.mask[i]]
    already = plan.grid.n_chunks - len(todo)
    t = time.perf_counter()
    report = run_chunks(ex, _ChunkSubmitter(ex, plan, state_f, sink, nys_f), sink, todo, context, already)
    plan.gram.timings["chunks_s"] = secs = time.perf_counter() - t
    tiles = steps.TileReport(report["computed"], report["counts"], {}, counted=bool(report["counts"]))
    complete, notes = steps.finish(plan.gram, sink, tiles, context)
    spread = ", ".join(f"{w} {c}" for w, c in sorted(report["workers"].items()))
    context.log(f"gramdist: {report['computed']} chunks computed ({already} already done) in {secs:.2f} s"
                + (f" (chunks per worker: {spread})" if spread else "")
                + f"; store {store.location} {'complete' if complete else 'INCOMPLETE (rerun to resume)'}")
    return FeatureResult(str(store.location), plan.grid.n_chunks, report["computed"], already, complete,
                         report["nnz"], dict(report["workers"]), plan.gram.timings, notes)


def features_in_memory(ex: Executor, plan: FeaturePlan, graphs: GraphBatch, state: Any,
                       basis: NystroemState | None, context: RunContext, chunk: int | None = None
                       ) -> list[dict[str, Any]]:
    """The rows of ``graphs`` in chunks of ``chunk`` (default :func:`default_chunk_size`) on
    ``ex`` with ``plan``'s kernel and normalisation (``basis`` for Nyström rows), in chunk
    order: each chunk's ``indptr``, ``keys``, ``values`` or ``features``, ``diag`` and
    ``counts``. What :class:`gramdist.FeatureTransformer` returns without a store."""
    grid = ChunkGrid(len(graphs), chunk or default_chunk_size(len(graphs)))
    plan = FeaturePlan(plan.gram, grid, plan.nystroem, plan.from_store, plan.meta)
    token = steps.new_token()
    state_f = ex.put(state, key=f"state-{token}")
    nys_f = None if basis is None else ex.put(basis, key=f"nystroem-{token}")
    sink = RowsSink(grid.n_chunks)
    run_chunks(ex, _ChunkSubmitter(ex, plan, state_f, sink, nys_f, graphs), sink, list(range(grid.n_chunks)), context)
    return list(sink.parts)


# ------------------------------------------------------------------------------------ Nyström
def nystroem_basis(ex: Executor, plan: FeaturePlan, state: Any, state_f: Any, context: RunContext) -> NystroemState:
    """Landmarks, K(L, L), its top eigenpairs and the projection of ``plan`` with the fitted
    ``state`` (``state_f``: its future on ``ex``), in memory: what a feature store writes, and
    what :class:`gramdist.FeatureTransformer` keeps."""
    spec, fit, kernel = plan.nystroem, plan.gram.fit, plan.kernel
    pool = fit_sample_indices(len(plan.graphs), fit.sample_size, fit.seed)
    m = min(spec.m, len(pool))
    if m < spec.m:
        context.note(f"Nyström: {spec.m} landmarks asked, the fit sample has {len(pool)} graphs: using {m}")
    if spec.landmarks == "uniform":
        rng = np.random.default_rng([fit.seed, 0x4E59, 1])
        chosen = np.sort(rng.choice(pool, size=m, replace=False))
    else:
        chosen = kmeanspp_landmarks(ex, plan, state_f, pool, m, context)
    landmarks = plan.graphs.take(chosen)
    lplan = plan_gram(kernel, landmarks, gram=GramSpec(tile_size=max(16, math.ceil(len(chosen) / 4)),
                                                       normalize=plan.normalize), fit=fit)
    gram = compute_in_memory(ex, lplan, state=state, context=context.quiet())
    lam, proj = ex.submit(ft.nystroem_basis_task, gram.gram, spec.eig_cutoff, key=f"basis-{steps.new_token()}"
                          ).result()
    attrs = {"m": int(len(chosen)), "m_requested": spec.m, "landmarks": spec.landmarks,
             "eig_cutoff": spec.eig_cutoff, "rank": int(proj.shape[1]), "seed": fit.seed,
             "normalize": plan.normalize, "landmark_pool": int(len(pool)),
             "lambda_max": float(lam[0]), "lambda_kept_min": float(lam[proj.shape[1] - 1])}
    nys = NystroemState(landmarks, chosen.astype(np.int64), np.asarray(gram.diag_rows, np.float64), lam, proj, attrs)
    context.log(f"gramdist: Nyström basis: {len(chosen)} landmarks ({spec.landmarks}) from a fit sample of "
                f"{len(pool)}; rank {proj.shape[1]} (eigenvalues > {spec.eig_cutoff:g} x the largest, {lam[0]:.4g})")
    return nys


@dataclass
class _KMeansPP:
    """The fit sample's embeddings on the workers and each graph's D² to the landmarks so far."""

    ex: Executor
    plan: FeaturePlan
    state_f: Any
    sample: Any
    bounds: list[tuple[int, int]]
    embs: list[Any]
    diag: np.ndarray
    token: str

    def embed(self, r: int, drawn: np.ndarray) -> Any:
        return self.ex.submit(tasks.embed_task, self.plan.kernel, self.state_f, self.sample.take(drawn),
                              key=f"kmpp-new-{r}-{self.token}")

    def distances(self, r: int, emb_new: Any, drawn: np.ndarray) -> np.ndarray:
        """The D² of every sample graph to the ``drawn`` graphs (embedded as ``emb_new``)."""
        futs = [self.ex.submit(ft.squared_distance_task, self.plan.kernel, self.state_f, self.embs[p], self.diag[a:b],
                               emb_new, self.diag[drawn], self.plan.normalize, key=f"kmpp-d2-{r}-{p}-{self.token}")
                for p, (a, b) in enumerate(self.bounds)]
        return np.concatenate([f.result() for f in futs])

    def distinct(self, r: int, emb_new: Any, drawn: np.ndarray) -> np.ndarray:
        """The graphs of ``drawn`` not equal to an earlier one of the same round."""
        keep = self.ex.submit(ft.distinct_task, self.plan.kernel, self.state_f, emb_new, self.diag[drawn],
                              self.plan.normalize, key=f"kmpp-distinct-{r}-{self.token}").result()
        return drawn[keep]


def _kmeanspp_sample(ex: Executor, plan: FeaturePlan, state_f: Any, pool: np.ndarray) -> _KMeansPP:
    kernel, token = plan.kernel, steps.new_token()
    sample = plan.graphs.take(pool)
    n = len(pool)
    part = max(64, math.ceil(n / 16))  # fixed by n alone: d² does not depend on it anyway
    bounds = [(a, min(a + part, n)) for a in range(0, n, part)]
    embs = [ex.submit(tasks.embed_task, kernel, state_f, sample[a:b], key=f"kmpp-embed-{p}-{token}", spread=True)
            for p, (a, b) in enumerate(bounds)]
    diags = [ex.submit(tasks.diag_task, kernel, state_f, e, key=f"kmpp-diag-{p}-{token}") for p, e in enumerate(embs)]
    diag = np.concatenate([np.asarray(f.result(), dtype=np.float64) for f in diags])
    return _KMeansPP(ex, plan, state_f, sample, bounds, embs, diag, token)


def kmeanspp_landmarks(ex: Executor, plan: FeaturePlan, state_f: Any, pool: np.ndarray, m: int,
                       context: RunContext) -> np.ndarray:
    """Kernel k-means++ seeding over the fit sample ``pool``: sorted indices of ≤ m landmarks.

    See the module docstring: a uniform first landmark, then :data:`~gramdist.engine.nystroem.KMEANSPP_ROUNDS`
    rounds of D² draws; the sample's embeddings stay on the workers between rounds.
    """
    km = _kmeanspp_sample(ex, plan, state_f, pool)
    n = len(pool)
    rng = np.random.default_rng([plan.gram.fit.seed, 0x4E59, 2])
    chosen = np.zeros(n, dtype=bool)
    d2 = np.full(n, np.inf)
    per_round = max(1, math.ceil((m - 1) / KMEANSPP_ROUNDS))
    new = np.array([rng.integers(n)])
    for r in range(m):
        drawn = new
        emb_new = km.embed(r, drawn)
        if len(new) > 1:  # two draws of one round may be the same graph: keep the first
            new = km.distinct(r, emb_new, new)
        chosen[new] = True
        left = m - int(chosen.sum())
        if left <= 0:
            break
        d2 = np.minimum(d2, km.distances(r, emb_new, drawn))
        d2[chosen] = 0.0
        new = d2_draw(rng, d2, min(per_round, left))
        if not len(new):
            context.note(f"Nyström: every graph of the fit sample coincides with one of the {int(chosen.sum())} "
                         f"landmarks chosen; keeping those (of {m} asked)")
            break
    return np.sort(pool[chosen])
