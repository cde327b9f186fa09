"""Per-fold refits: the kernel's state is fitted on each outer training part only.

A Gram store is *transductive*: its state (DM pyramids, MLG anchors, the matching kernel's
NCA metric and representation set, ...) was fitted once on a sample of all graphs. Under
``gramdist evaluate --refit JOB`` the state is instead fitted, for every outer fold, on that
fold's training part alone; K(train, train) and K(test, train) are computed with it and the
SVM (and the job's grid setting) is selected by the inner CV on K(train, train) and tested on
K(test, train). This is the matching paper's protocol (NCA and the representation set learned
on each training fold) and the inductive protocol for every kernel whose fit learns from data.
The inner CV selects C (and the grid setting) on the outer part's state: the state is not
refitted per inner fold (as in the matching paper, whose inner loop only chooses C).

How it runs
-----------
* :class:`RefitSource` is a :class:`~gramdist.evaluation.nested_cv.GramSource`: its
  ``blocks(train, test)`` fits the state on ``train`` (the job's ``fit`` section applies to the
  training part: ``fit.sample_size`` draws from it, ``fit.seed`` seeds it) with
  :func:`gramdist.engine.steps.obtain_state`, then computes the Gram with that state by the
  engine's steps (:func:`gramdist.engine.runner.compute_in_memory`, in the process of the fold's
  task) and returns the two blocks. ``outer_fold`` asks each source for its blocks twice (inner
  selection, then the refit of the SVM): the last fold's blocks are kept.
* The outer folds are tasks on the Dask cluster (``--workers``/``--scheduler``): each fold
  refits, computes and selects on one worker, so folds run in parallel, one per worker thread.
* Resume: each finished fold writes its result (accuracy, chosen setting and C, seconds) as a
  small JSON file under the output folder (:func:`~gramdist.evaluation.nested_cv.fold_paths`,
  the machinery of every ``evaluate --out``), named by the repeat, the fold and a digest of
  everything that decides it (each setting's :meth:`RefitSource.digest`, the labels, the split,
  the C grid, the inner CV, the task). A rerun of the same command skips the folds whose file
  exists; an interrupted fold is recomputed. Options that do not change the Gram (tile size,
  compression, kept embeddings) are not in the key, so results survive them and new versions
  that add such options.

Where embeddings are reused
---------------------------
* Within a fold the Gram is computed over all graphs of the dataset with the fold's state, so
  every graph is embedded once for both blocks (K(test, test) is the only part not needed: 1 %
  of the pairs at 10 folds).
* Across folds: a fold whose fitted state is bitwise equal to one already used in this worker
  process (a kernel whose fit learns nothing from the data, e.g. NSPDK or ODD_ST, or a fit
  sample that does not depend on the fold) reuses that Gram instead of embedding again.
* The matching kernel's state holds the proximity vectors of its representation set (the
  training part): embedding the training graphs is a look-up; only test graphs are compared.

Nothing else is shared between folds: a DM pyramid, MLG anchors or an NCA metric fitted on
another training part would leak that part's graphs into this fold's kernel.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from typing import Any

import numpy as np

from gramdist.arrayops import digest_arrays
from gramdist.errors import JobError, StoreError
from gramdist.evaluation.nested_cv import (
    FoldSetup,
    GramSource,
    RunOptions,
    resume_record,
    run_outer_folds,
    summarise,
)
from gramdist.evaluation.protocols import Protocol
from gramdist.evaluation.tasks import Task
from gramdist.graphs import GraphBatch

#: Grams kept per worker process for reuse across folds with equal states
_GRAM_CACHE_SIZE = 2
_GRAMS: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
_DATASETS: dict[str, GraphBatch] = {}


def _dataset(spec: Any) -> GraphBatch:
    """The job's dataset, loaded once per process."""
    key = json.dumps(spec, sort_keys=True, default=str)
    if key not in _DATASETS:
        from gramdist.datasets import load_dataset

        _DATASETS[key] = load_dataset(spec)
    return _DATASETS[key]


def state_digest(state: Any) -> str:
    """A digest of a fitted :class:`~gramdist.kernels.base.KernelState` (arrays and attributes)."""
    attrs = json.dumps(state.attrs, sort_keys=True, default=str).encode()
    return hashlib.blake2b(digest_arrays(state.arrays).encode() + attrs, digest_size=16).hexdigest()


class RefitSource(GramSource):
    """One kernel setting (a grid-free job) refitted on each outer training part.

    Parameters
    ----------
    name : the setting's name in the selections (a grid setting's name, or the job's).
    job : a validated, grid-free :class:`~gramdist.jobs.Job` (``dataset``, ``kernel``, ``fit``, ``gram``).
    """

    def __init__(self, name: str, job: Any) -> None:
        super().__init__(name)
        if job.test:
            raise JobError(f"{name}: --refit computes K(test, train) per fold itself; drop the job's 'test' section")
        self.job = job
        self._last: tuple[bytes, tuple[np.ndarray, np.ndarray]] | None = None
        self.last_fit_seconds = 0.0

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "job": self.job}

    def __setstate__(self, d: dict[str, Any]) -> None:
        self.__init__(d["name"], d["job"])

    def graphs(self) -> GraphBatch:
        return _dataset(self.job.dataset)

    def digest(self) -> str:
        """What decides this setting's Gram on a given training part: the dataset (its spec and
        content checksum), the kernel with every parameter (defaults included, so that a
        changed default is a changed key), the fit's seed and sample, and the Gram's normalisation.
        Tile size, compression, dtype, checkpoints and kept embeddings do not enter: the refit
        computes its float64 Gram in memory, and the engine's Gram does not depend on the
        others."""
        from gramdist.engine.plan import kernel_from_spec

        kernel = kernel_from_spec(self.job.kernel)
        spec = {"dataset": self.job.dataset, "checksum": self.graphs().checksum(),
                "kernel": {"name": kernel.name, **kernel.get_params()},
                "fit": self.job.fit.to_dict(), "normalize": self.job.gram.normalize}
        return hashlib.blake2b(json.dumps(spec, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()

    def gram(self) -> np.ndarray:
        raise StoreError(f"{self.name}: a refitted kernel has no single Gram; ask for blocks(train, test)")

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = np.asarray(train, np.int64).tobytes() + b"|" + np.asarray(test, np.int64).tobytes()
        if self._last is not None and self._last[0] == key:
            return self._last[1]
        gram = self.fold_gram(np.asarray(train, np.int64), np.asarray(test, np.int64))
        blocks = (gram[np.ix_(train, train)], gram[np.ix_(test, train)])
        self._last = (key, blocks)
        return blocks

    def fold_gram(self, train: np.ndarray, test: np.ndarray) -> np.ndarray:
        """The (N, N) Gram of all graphs under the state fitted on ``train`` only."""
        from dataclasses import replace

        from gramdist.engine import steps
        from gramdist.engine.context import RunContext, silent
        from gramdist.engine.executor import InlineExecutor
        from gramdist.engine.plan import kernel_from_spec, plan_gram
        from gramdist.engine.runner import compute_in_memory
        from gramdist.engine.sinks import MemorySink
        from gramdist.jobs import GramSpec

        t0 = time.perf_counter()
        graphs = self.graphs()
        job = self.job
        ex = InlineExecutor()
        quiet = RunContext(log=silent)
        gram = GramSpec(tile_size=job.gram.tile_size, normalize=job.gram.normalize)
        fit = replace(job.fit, from_store=None)
        train_plan = plan_gram(kernel_from_spec(job.kernel), graphs.take(train), gram=gram, fit=fit)
        state = steps.obtain_state(ex, train_plan, MemorySink(train_plan.grid), quiet)
        leaked = np.intersect1d(np.asarray(state.attrs.get("supervised_graph_ids", []), np.int64),
                                graphs.graph_ids[test])
        if len(leaked):  # the fit saw only the training part; this guards that contract
            raise StoreError(f"{self.name}: the refitted state used the labels of {len(leaked)} test graphs")
        key = (self.digest(), state_digest(state))
        if key in _GRAMS:
            _GRAMS.move_to_end(key)
            gram = _GRAMS[key]
        else:
            plan = plan_gram(kernel_from_spec(job.kernel), graphs, gram=gram, fit=fit)
            gram = np.ascontiguousarray(compute_in_memory(ex, plan, state=state, context=quiet).gram)
            _GRAMS[key] = gram
            while len(_GRAMS) > _GRAM_CACHE_SIZE:
                _GRAMS.popitem(last=False)
        self.last_fit_seconds = time.perf_counter() - t0
        return gram


def refit_sources(job: Any) -> list[RefitSource]:
    """One :class:`RefitSource` per setting of a (validated) job's grid."""
    from gramdist.jobs import expand_grid

    base = job.name or "job"
    return [RefitSource(name or base, sub) for name, sub in expand_grid(job)]


def evaluate_refit(sources: list[RefitSource], protocol: Protocol | None = None,
                   options: RunOptions | None = None) -> dict[str, Any]:
    """Nested CV with the kernel refitted on every outer training part; see the module docstring.

    Parameters
    ----------
    sources : list of RefitSource
        The candidate settings, selected in the inner CV like stores.
    protocol : Protocol, optional
        As :func:`gramdist.evaluation.nested_cv.evaluate`'s; default ``Protocol()``.
    options : RunOptions, optional
        ``seed``, ``out`` (the folder of the per-fold results: resume), ``client``,
        ``per_store``; ``task`` is the protocol's classification task unless a :class:`Task`
        is given (a refit is a classification). Default ``RunOptions()``.

    Returns
    -------
    dict
        The dict of ``evaluate`` (``stores`` lists the settings), plus ``refit: True``,
        ``resumed_folds`` (folds read from ``out``) and ``fold_seconds`` (per fold, as measured
        when it was computed).
    """
    protocol = protocol or Protocol()
    options = options or RunOptions()
    if not sources:
        raise JobError("--refit needs at least one kernel setting")
    graphs = sources[0].graphs()
    for s in sources[1:]:
        if s.graphs().checksum() != graphs.checksum():
            raise JobError(f"{s.name}: the settings of a refit must share one dataset")
    if graphs.y is None:
        raise JobError(f"{sources[0].name}: the dataset has no class labels")
    if not isinstance(options.task, Task) and options.task not in ("auto", "classification"):
        raise JobError(f"--refit evaluates a classification, not task {options.task!r}")
    task = options.task if isinstance(options.task, Task) else protocol.task()
    y = np.asarray(graphs.y)
    setup = FoldSetup(tuple(sources), y, protocol, task, per_store=options.per_store)
    folds, results = run_outer_folds(setup, options)
    extra = {"per_store": [res["per_store"] for res in results]} if options.per_store else {}
    return {
        **summarise(results, folds, protocol, task),
        "supervised_fit_graphs": 0,
        "test_graphs": int(len(y)),
        "stores": [s.name for s in sources],
        "refit": True,
        **resume_record(results),
        **extra,
    }


__all__ = ["RefitSource", "evaluate_refit", "refit_sources", "state_digest"]
