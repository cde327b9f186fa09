"""gramdist: distributed Gram matrices between graphs, tiled into Zarr on Dask."""

from __future__ import annotations

from gramdist.errors import DatasetError, GramdistError, JobError, StoreError, TileError
from gramdist.graphs import Graph, GraphBatch

__version__ = "0.1.0"


def open_gram(store: str, *, as_dask: bool = False, allow_incomplete: bool = False):
    """Open a finished Gram store: ``(K, y)`` ready for ``SVC(kernel="precomputed")``.

    See :func:`gramdist.engine.store.open_gram`.
    """
    from gramdist.engine.store import open_gram as _open

    return _open(store, as_dask=as_dask, allow_incomplete=allow_incomplete)


def open_features(store: str, *, normalize: bool | None = None, columns=None, as_dask: bool = False):
    """Open a finished feature store: ``(X, y)`` for a linear model.

    ``X`` is a ``scipy.sparse.csr_matrix`` (explicit features; columns are the kernel's
    feature ids in increasing order, see ``gramdist.engine.feature_store.feature_columns``) or
    an (N, k) ndarray (Nyström features). See :func:`gramdist.engine.feature_store.open_features`.
    """
    from gramdist.engine.feature_store import open_features as _open

    return _open(store, normalize=normalize, columns=columns, as_dask=as_dask)


__all__ = [
    "DatasetError", "GramdistError", "Graph", "GraphBatch", "JobError", "StoreError", "TileError",
    "__version__", "open_features", "open_gram",
]
