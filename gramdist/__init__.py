"""gramdist: distributed Gram matrices between graphs, tiled into Zarr on Dask."""

from __future__ import annotations

from gramdist._version import __version__
from gramdist.errors import DatasetError, GramdistError, InputError, JobError, StoreError, TileError
from gramdist.graphs import Graph, GraphBatch


def open_gram(store: str, *, as_dask: bool = False, allow_incomplete: bool = False):
    """Open a finished Gram store: ``(K, y)`` ready for ``SVC(kernel="precomputed")``.

    See :func:`gramdist.engine.store.open_gram`.
    """
    from gramdist.engine.store import open_gram as _open

    return _open(store, as_dask=as_dask, allow_incomplete=allow_incomplete)


def submit(job, *, out: str | None = None, scheduler: str | None = None, client=None, overwrite: bool = False,
           wait: float = 30.0):
    """Submit a job (a job file or a job dict) to run on a Dask cluster without this process.

    Returns a handle with ``.job_id``, ``.store``, ``.status()``, ``.wait()`` and ``.cancel()``.
    See :func:`gramdist.engine.detached.submit`.
    """
    from gramdist.engine.detached import submit as _submit

    return _submit(job, out=out, scheduler=scheduler, client=client, overwrite=overwrite, wait=wait)


def __getattr__(name: str):
    # the scikit-learn front end, imported on first use so that ``import gramdist`` stays light
    if name in ("GramTransformer", "compute_gram"):
        from gramdist import estimator

        return getattr(estimator, name)
    if name == "FeatureTransformer":
        from gramdist.feature_transformer import FeatureTransformer

        return FeatureTransformer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def append(store: str, data=None, *, base=None, client=None, scheduler: str | None = None,
           n_workers: int | None = None, progress: bool = False):
    """Append graphs to a Gram store, computing only the entries that involve them; returns an
    :class:`~gramdist.engine.append.AppendResult`.

    ``data``: anything a job's ``dataset:`` accepts, or a ``GraphBatch``; None finishes an
    interrupted append. ``n_workers=0`` runs in this process. See
    :func:`gramdist.engine.append.append`.
    """
    from gramdist.engine.append import append as _append

    return _append(store, data, base=base, client=client, scheduler=scheduler, n_workers=n_workers,
                   progress=progress)


def open_features(store: str, *, normalize: bool | None = None, columns=None, as_dask: bool = False):
    """Open a finished feature store: ``(X, y)`` for a linear model.

    ``X`` is a ``scipy.sparse.csr_matrix`` (explicit features; columns are the kernel's
    feature ids in increasing order, see ``gramdist.engine.feature_store.feature_columns``) or
    an (N, k) ndarray (Nyström features). See :func:`gramdist.engine.feature_store.open_features`.
    """
    from gramdist.engine.feature_store import open_features as _open

    return _open(store, normalize=normalize, columns=columns, as_dask=as_dask)


__all__ = [
    "DatasetError", "FeatureTransformer", "GramTransformer", "GramdistError", "Graph", "GraphBatch", "InputError", "JobError",
    "StoreError", "TileError", "__version__", "append", "compute_gram", "open_features", "open_gram", "submit",
]
