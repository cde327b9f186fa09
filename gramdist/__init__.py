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


__all__ = [
    "DatasetError", "GramdistError", "Graph", "GraphBatch", "JobError", "StoreError", "TileError",
    "__version__", "append", "open_gram",
]
