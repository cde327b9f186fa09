"""Stores made by hand for tests of the readers (evaluation, plots): a given Gram matrix
written through the store package, as the engine's client writes one."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from gramdist.engine.store import GramStore, TileGrid
from gramdist.kernels.base import KernelState


def matrix_store(path, k, y_rows, *, y_cols=None, attrs=None, complete=True, diag=None):
    """A one-tile Gram store holding ``k`` (rows labelled ``y_rows``; rectangular when
    ``y_cols`` is given), its done-mask and checksum recorded, complete unless told not."""
    r, c = k.shape
    symmetric = y_cols is None
    grid = TileGrid(r, c, max(r, c), symmetric)
    meta = {"gramdist_version": "test", "tile_size": max(r, c), "symmetric": symmetric, "kernel": {"name": "test"},
            **(attrs or {})}
    store = GramStore.create(path, grid, meta)
    rows = SimpleNamespace(y=np.asarray(y_rows), graph_ids=np.arange(r))
    cols = None if symmetric else SimpleNamespace(y=np.asarray(y_cols), graph_ids=np.arange(c))
    store.write_graph_vectors(rows, cols)
    checksum = store.write_tile((0, 0), k)
    store.write_state(KernelState(), np.arange(r))  # a kernel that learns nothing
    if complete:
        d_rows = np.diag(k).copy() if diag is None else diag[0]
        store.write_diag(d_rows, None if symmetric else (np.ones(c) if diag is None else diag[1]))
        store.save_progress(np.ones((1, 1), bool), np.array([[checksum]], dtype=np.uint64))
        store.mark_complete()
    return str(path)
