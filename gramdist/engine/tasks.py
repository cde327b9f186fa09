"""Functions the engine runs on Dask workers: plain Python, no Dask imports.

Each takes everything it needs as arguments (kernel object, state, graphs or embeddings, the
store path) and returns only small results, so tasks are cheap to ship, recomputable after a
worker dies, and idempotent: rewriting a tile with the same values is harmless.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gramdist.arrayops import mirror_upper, normalize_block
from gramdist.datasets.lazy import GraphChunk, load_chunk
from gramdist.engine.store import (
    TileGrid,
    gram_array,
    read_embedding,
    read_state,
    tile_checksum,
    write_embedding,
)
from gramdist.errors import TileError
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import GraphKernel, KernelState


def warm_up(kernel_module: str) -> None:
    """Import the kernel's module and the store's codecs in a worker ahead of the first task.

    Run once per worker right after connecting (its time is counted as cluster start-up):
    otherwise the first fit, embed and tile tasks each pay a cold import of SciPy, Zarr and
    the kernel code, serialised behind one another.
    """
    import importlib

    importlib.import_module(kernel_module)
    import scipy.sparse  # noqa: F401
    import zarr.codecs  # noqa: F401


def fit_task(kernel: GraphKernel, sample: GraphBatch, seed: int) -> KernelState:
    """Learn the kernel's state on the fit sample."""
    return kernel.fit(sample, seed)


def load_state_task(store_path: str) -> KernelState:
    """Read the fitted state from the store: a recomputable way to share it with workers."""
    return read_state(store_path)


def embed_task(kernel: GraphKernel, state: KernelState, graphs: GraphBatch | GraphChunk) -> Any:
    """Embeddings of one chunk of graphs (a lazy dataset's chunk is loaded here, on the worker)."""
    graphs = load_chunk(graphs)
    emb = kernel.embed(graphs, state)
    if len(emb) != len(graphs):
        raise RuntimeError(f"{type(kernel).__name__}.embed returned {len(emb)} rows for {len(graphs)} graphs")
    return emb


def cached_embed_task(kernel: GraphKernel, state: KernelState, graphs: GraphBatch, source: str | None,
                      target: str | None, name: str, checksum: str) -> Any:
    """The embedding of one chunk: read from the store at ``source`` if it keeps one made from
    these graphs (``checksum``), else computed and, when ``target`` is given, kept there (best
    effort: a chunk that cannot be kept is embedded again next time)."""
    if source is not None:
        emb = read_embedding(source, name, checksum)
        if emb is not None and len(emb) == len(graphs):
            return emb
    emb = embed_task(kernel, state, graphs)
    if target is not None:
        try:
            write_embedding(target, name, emb, checksum)
        except Exception:  # noqa: BLE001 - keeping it is an optimisation: never fail the chunk for it
            pass
    return emb


def diag_task(kernel: GraphKernel, state: KernelState, emb: Any) -> np.ndarray:
    """K(g, g) for the graphs of one embedded chunk."""
    return np.asarray(kernel.self_similarity(emb, state), dtype=np.float64)


def embedding_counts_task(kernel: GraphKernel, emb: Any) -> dict[str, int]:
    """The kernel's counters over one embedded chunk (see ``GraphKernel.embedding_counts``)."""
    return {str(k): int(v) for k, v in kernel.embedding_counts(emb).items()}


def tile_task(
    kernel: GraphKernel,
    state: KernelState,
    emb_rows: Any,
    emb_cols: Any,
    diag_rows: np.ndarray | None,
    diag_cols: np.ndarray | None,
    store_path: str | None,
    grid: TileGrid,
    tile: tuple[int, int],
    graph_ids: tuple[tuple[int, int], tuple[int, int]],
    dtype: str = "float64",
) -> tuple[tuple[int, int], float, int, np.ndarray | None]:
    """Compute tile ``(i, j)``, write it (and its mirror) into the store at ``store_path``.

    Returns the tile, the seconds it took, the :func:`~gramdist.engine.store.tile_checksum`
    of the values written, which the client records with the done-mask, and the block itself
    when ``store_path`` is None (a Gram assembled in memory) else None.

    Diagonal tiles of a symmetric Gram are symmetrised from their upper triangle so that the
    stored matrix is exactly symmetric. ``diag_rows``/``diag_cols`` given means normalise.
    Everything is computed in float64; a ``float32`` Gram is rounded once, at the end (the
    checksum is of the rounded values, as stored).
    """
    t0 = time.perf_counter()
    i, j = tile
    try:
        block = np.asarray(kernel.pairwise(emb_rows, emb_cols, state), dtype=np.float64)
        expected = (len(emb_rows), len(emb_cols))
        if block.shape != expected:
            raise ValueError(f"pairwise returned shape {block.shape}, expected {expected}")
        if not block.flags.writeable:  # the steps below work in place
            block = block.copy()
        if diag_rows is not None:
            normalize_block(block, diag_rows, diag_cols, out=block)
        if grid.symmetric and i == j:
            # a kernel's K_ab and K_ba can differ in the last bit (summation order)
            mirror_upper(block)
        if not np.all(np.isfinite(block)):
            raise FloatingPointError("non-finite kernel values")
        if dtype != "float64":
            block = block.astype(dtype)
            if not np.all(np.isfinite(block)):
                raise FloatingPointError(f"kernel values overflow {dtype}")
    except Exception as exc:
        (r0, r1), (c0, c1) = graph_ids
        raise TileError(
            f"tile ({i}, {j}) failed (row graphs {r0}..{r1}, column graphs {c0}..{c1}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if store_path is None:
        return tile, time.perf_counter() - t0, tile_checksum(block), block
    r0, r1 = grid.row_range(i)
    c0, c1 = grid.col_range(j)
    try:
        gram = gram_array(store_path, (grid.n_rows, grid.n_cols, dtype))
        gram[r0:r1, c0:c1] = block
        if grid.symmetric and i != j:
            gram[c0:c1, r0:r1] = block.T
    except OSError as exc:  # a full disk, a store made read-only or removed mid-job
        raise TileError(f"tile ({i}, {j}): cannot write to the store {store_path}: "
                        f"{exc.strerror or exc}; rerun the job to resume once this is fixed") from None
    return tile, time.perf_counter() - t0, tile_checksum(block), None
