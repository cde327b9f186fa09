"""gramdist: distributed Gram matrices between graphs, tiled into Zarr on Dask."""

from __future__ import annotations

from gramdist._version import __version__
from gramdist.errors import DatasetError, GramdistError, JobError, StoreError, TileError
from gramdist.graphs import Graph, GraphBatch


def open_gram(store: str, *, as_dask: bool = False, allow_incomplete: bool = False):
    """Open a finished Gram store: ``(K, y)`` ready for ``SVC(kernel="precomputed")``.

    See :func:`gramdist.engine.store.open_gram`.
    """
    from gramdist.engine.store import open_gram as _open

    return _open(store, as_dask=as_dask, allow_incomplete=allow_incomplete)


__all__ = [
    "DatasetError", "GramdistError", "Graph", "GraphBatch", "JobError", "StoreError", "TileError",
    "__version__", "open_gram",
]
