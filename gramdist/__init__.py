"""gramdist: distributed Gram matrices between graphs, tiled into Zarr on Dask.

The Python API: :class:`GramTransformer` and :class:`FeatureTransformer` (scikit-learn),
:func:`compute_gram`, :func:`open_gram` and :func:`open_features` (read a finished store),
:func:`append` (grow a Gram store), :func:`search` (the most similar graphs of a feature
store or a Gram store), :func:`submit` (a job on a cluster, detached). Where work
runs is a :class:`Placement` (a client, a scheduler, a cluster section, ``in_process``); how a
run reports is a :class:`RunContext` (progress, log). Both are what the engine itself takes.
"""

from __future__ import annotations

from typing import Any

from gramdist._version import __version__
from gramdist.errors import DatasetError, GramdistError, InputError, JobError, StoreError, TileError


def open_gram(store: str, *, as_dask: bool = False, allow_incomplete: bool = False) -> tuple[Any, Any]:
    """Open a finished Gram store: ``(K, y)`` ready for ``SVC(kernel="precomputed")``.

    See :func:`gramdist.engine.store.open_gram`.
    """
    from gramdist.engine.store import open_gram as _open

    return _open(store, as_dask=as_dask, allow_incomplete=allow_incomplete)


def open_features(store: str, *, normalize: bool | None = None, columns: Any = None,
                  as_dask: bool = False) -> tuple[Any, Any]:
    """Open a finished feature store: ``(X, y)`` for a linear model.

    ``X`` is a ``scipy.sparse.csr_matrix`` (explicit features; columns are the kernel's
    feature ids in increasing order) or an (N, k) ndarray (Nyström features). See
    :func:`gramdist.engine.store.open_features`.
    """
    from gramdist.engine.store import open_features as _open

    return _open(store, normalize=normalize, columns=columns, as_dask=as_dask)


def append(store: str, data: Any = None, *, base: Any = None, placement: Any = None, abort: bool = False,
           context: Any = None) -> Any:
    """Append graphs to a Gram store, computing only the entries that involve them; returns an
    :class:`~gramdist.engine.append.AppendResult`.

    ``data``: anything a job's ``dataset:`` accepts, or a ``GraphBatch``; None finishes an
    interrupted append. ``placement``: where to run (:class:`Placement`; default this process
    for a small append, else a LocalCluster; ``Placement(in_process=True)`` always here);
    ``abort``: discard an interrupted append; ``context``: progress and log (:class:`RunContext`).
    See :func:`gramdist.engine.append.append`.
    """
    from gramdist.engine.append import append as _append

    return _append(store, data, base=base, placement=placement, abort=abort, context=context)


def submit(job: Any, *, out: str | None = None, scheduler: str | None = None, client: Any = None,
           overwrite: bool = False, wait: float | None = None) -> Any:
    """Submit a job (a job file or a :class:`~gramdist.jobs.Job`) to run on a Dask cluster
    without this process.

    Returns a handle with ``.job_id``, ``.store``, ``.status()``, ``.wait()`` and ``.cancel()``.
    ``wait``: seconds to wait for the job to start (default
    :data:`gramdist.engine.detached.WAIT_SECONDS`). See :func:`gramdist.engine.detached.submit`.
    """
    from gramdist.engine.detached import WAIT_SECONDS
    from gramdist.engine.detached import submit as _submit

    return _submit(job, out=out, scheduler=scheduler, client=client, overwrite=overwrite,
                   wait=WAIT_SECONDS if wait is None else wait)


def search(store: str, queries: Any, *, top: int = 10, placement: Any = None, context: Any = None,
           base: Any = None) -> Any:
    """The ``top`` graphs of a store most similar to each query graph (largest normalised
    kernel value), chunk by chunk on the workers; returns a
    :class:`~gramdist.engine.search.SearchResult` with (Q, top) ``ids``, ``rows`` and ``values``.

    ``store``: a feature store (its rows), or a Gram store (its graphs, re-read from the
    sources it recorded, or ``base``; the kernel evaluated with its fitted state).
    ``queries``: a GraphBatch, networkx graphs, SMILES (a list or a file), a TU folder, a
    dataset name or a ``dataset:`` mapping. See :func:`gramdist.engine.search.search`.
    """
    from gramdist.engine.search import search as _search

    return _search(store, queries, top=top, placement=placement, context=context, base=base)


def __getattr__(name: str) -> Any:
    # the front ends, the graph containers and the engine's parameter objects, imported on
    # first use so that ``import gramdist`` stays light (the command line needs that: see
    # :func:`gramdist.lazy.defer_numpy_extras`)
    if name in ("Graph", "GraphBatch"):
        from gramdist import graphs

        return getattr(graphs, name)
    if name in ("GramTransformer", "compute_gram"):
        from gramdist import estimator

        return getattr(estimator, name)
    if name == "FeatureTransformer":
        from gramdist.feature_transformer import FeatureTransformer

        return FeatureTransformer
    if name == "Placement":
        from gramdist.engine.placement import Placement

        return Placement
    if name == "RunContext":
        from gramdist.engine.context import RunContext

        return RunContext
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DatasetError", "FeatureTransformer", "GramTransformer", "GramdistError", "Graph", "GraphBatch", "InputError",
    "JobError", "Placement", "RunContext", "StoreError", "TileError", "__version__", "append", "compute_gram",
    "open_features", "open_gram", "search", "submit",
]
