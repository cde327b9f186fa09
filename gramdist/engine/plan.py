"""A Gram computation resolved and validated before anything runs: :class:`GramPlan`.

:func:`plan_job` resolves a job file's (grid-free) :class:`~gramdist.jobs.Job`: its kernel,
its graphs and its tile grid; :func:`plan_gram` builds a plan from objects (the Python front
ends, appends, per-fold refits). The plan's :class:`~gramdist.engine.store.GramMeta` is what a
store records of the computation (its fingerprint among it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist._version import __version__
from gramdist.engine.store import GramMeta, TileGrid, check_dtype
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.jobs import FitSpec, GramSpec, Job
from gramdist.kernels import make_kernel
from gramdist.kernels.base import GraphKernel


@dataclass
class GramPlan:
    """A resolved Gram computation: nothing computed yet, everything validated.

    ``rows`` × ``cols`` graphs (the same batch when ``symmetric``); the state is fitted on
    ``cols`` (the training graphs) as ``fit`` says; ``gram`` says how the Gram is cut and
    stored; ``meta`` is what its store records; ``max_in_flight`` fixes the tiles in flight
    (None: twice the cluster's threads).
    """

    kernel: GraphKernel
    rows: GraphBatch
    cols: GraphBatch
    grid: TileGrid
    fit: FitSpec
    gram: GramSpec
    meta: GramMeta
    max_in_flight: int | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def symmetric(self) -> bool:
        return self.grid.symmetric

    @property
    def normalize(self) -> bool:
        return self.gram.normalize

    @property
    def dtype(self) -> str:
        return self.gram.dtype


def kernel_from_spec(spec: dict[str, Any]) -> GraphKernel:
    """The kernel a job's ``kernel:`` section names, its parameters validated."""
    spec = dict(spec)
    return make_kernel(spec.pop("name"), **spec)


def plan_gram(kernel: GraphKernel, cols: GraphBatch, rows: GraphBatch | None = None, *, gram: GramSpec,
              fit: FitSpec | None = None, specs: tuple[Any, Any] = (None, None), job: dict[str, Any] | None = None,
              max_in_flight: int | None = None) -> GramPlan:
    """A :class:`GramPlan` for K(rows, cols); ``rows`` None means the symmetric K(cols, cols).

    ``gram``: tile size, normalisation, storage type (``"float64"``, or ``"float32"``: half the
    store and its I/O, each entry the float64 value rounded to nearest), compression, kept
    embeddings; ``specs``: the dataset specs of the columns and rows as a store records them;
    ``job``: the job mapping a store records (not part of its fingerprint).
    """
    fit = fit or FitSpec()
    if len(cols) == 0:
        raise JobError("the dataset has no graphs")
    if gram.tile_size < 1:
        raise JobError(f"gram.tile_size must be >= 1, got {gram.tile_size}")
    symmetric = rows is None
    rows = cols if symmetric else rows
    if len(rows) == 0:
        raise JobError("the test dataset has no graphs")
    grid = TileGrid(len(rows), len(cols), int(gram.tile_size), symmetric)
    cols_sum = cols.checksum()
    rows_sum = None if symmetric else rows.checksum()
    meta = GramMeta(
        gramdist_version=__version__, kernel={"name": kernel.name, "params": kernel.recorded_params()},
        dataset=_dataset_attrs(specs[0], cols, cols_sum), dataset_checksum=cols_sum,
        fit=fit.to_dict(), tile_size=int(gram.tile_size), normalize=bool(gram.normalize), symmetric=symmetric,
        dtype=check_dtype(gram.dtype), test_dataset=None if symmetric else _dataset_attrs(specs[1], rows, rows_sum),
        test_checksum=rows_sum, keep_embeddings=gram.keep_embeddings, job=job or {},
        kernel_versions=kernel.definition_versions())
    return GramPlan(kernel, rows, cols, grid, fit, gram, meta, max_in_flight)


def plan_job(job: Job, *, loader: Callable[[Any], Any] | None = None) -> GramPlan:
    """Resolve and validate a (grid-free) job: its kernel, its graphs, its tile grid.

    ``loader`` turns the ``dataset:`` spec into graphs (default
    :func:`~gramdist.datasets.load_dataset`; streaming paths pass
    :func:`~gramdist.datasets.lazy.open_dataset`, whose datasets may be lazy).
    """
    from gramdist.datasets import load_dataset

    load = loader or load_dataset
    kernel = kernel_from_spec(job.kernel)
    t = time.perf_counter()
    graphs = load(job.dataset)
    test_graphs = load(job.test_dataset) if job.test else None
    read_s = time.perf_counter() - t
    plan = plan_gram(kernel, graphs, test_graphs, gram=job.gram, fit=job.fit, specs=(job.dataset, job.test_dataset),
                     job=job.to_dict(), max_in_flight=job.cluster.max_tiles_in_flight)
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
