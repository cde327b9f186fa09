"""Functions the engine runs on Dask workers: plain Python, no Dask imports.

Each takes everything it needs as arguments (kernel object, state, graphs or embeddings, the
store path) and returns only small results, so tasks are cheap to ship, recomputable after a
worker dies, and idempotent: rewriting a tile with the same values is harmless.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from gramdist.arrayops import mirror_upper, normalize_block
from gramdist.engine.store import EmbeddingCache, TileGrid, TileTarget, load_state, tile_checksum
from gramdist.errors import TileError
from gramdist.graphs import GraphBatch, GraphChunk, load_chunk
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


def empty_state_task() -> KernelState:
    """The empty state the embeddings of a kernel that ``embeds_without_state`` take while its
    fit runs (a task, so that it is recomputed if the worker holding it dies)."""
    return KernelState()


def load_state_task(store_path: str) -> KernelState:
    """Read the fitted state from the store: a recomputable way to share it with workers."""
    return load_state(store_path)


def embed_task(kernel: GraphKernel, state: KernelState, graphs: GraphBatch | GraphChunk) -> Any:
    """Embeddings of one chunk of graphs (a lazy dataset's chunk is loaded here, on the worker)."""
    graphs = load_chunk(graphs)
    emb = kernel.embed(graphs, state)
    if len(emb) != len(graphs):
        raise RuntimeError(f"{type(kernel).__name__}.embed returned {len(emb)} rows for {len(graphs)} graphs")
    return emb


def cached_embed_task(kernel: GraphKernel, state: KernelState, graphs: GraphBatch, cache: EmbeddingCache,
                      name: str, checksum: str, keep: bool = True) -> Any:
    """The embedding of one chunk: read from ``cache`` if it keeps one made from these graphs
    (``checksum``), else computed and (``keep``) kept there (best effort: a chunk that cannot be
    kept is embedded again next time); ``keep=False`` leaves that to :func:`keep_embedding_task`.
    A kernel whose embedding is not worth keeping (``embedding_worth_keeping``: cheaper to
    compute than to read back) is always embedded."""
    if not kernel.embedding_worth_keeping:
        return embed_task(kernel, state, graphs)
    emb = cache.get(name, checksum)
    if emb is not None and len(emb) == len(graphs):
        return emb
    emb = embed_task(kernel, state, graphs)
    if keep:
        cache.put(name, emb, checksum)
    return emb


def keep_embedding_task(cache: EmbeddingCache, name: str, emb: Any, checksum: str) -> bool:
    """Keep the embedding of chunk ``name`` in ``cache`` unless one of these graphs is kept there
    already (then :func:`cached_embed_task` read it back); whether it was written. A kept
    embedding that cannot be read is therefore not replaced here: the chunk is embedded again
    at each run until ``gramdist verify --repair`` removes it."""
    if cache.keeps(name, checksum):
        return False
    return cache.put(name, emb, checksum)


def diag_task(kernel: GraphKernel, state: KernelState, emb: Any) -> np.ndarray:
    """K(g, g) for the graphs of one embedded chunk."""
    return np.asarray(kernel.self_similarity(emb, state), dtype=np.float64)


def embedding_counts_task(kernel: GraphKernel, emb: Any) -> dict[str, int]:
    """The kernel's counters over one embedded chunk (see ``GraphKernel.embedding_counts``)."""
    return {str(k): int(v) for k, v in kernel.embedding_counts(emb).items()}


@dataclass(frozen=True)
class TileSpec:
    """What a tile task computes: tile ``(i, j)`` of ``grid``, in ``dtype``, written to
    ``target`` (None: returned), with the graph ids of its first and last rows and columns
    (to name it in an error). ``known``: its leading rows and columns whose values the target
    already holds (a tile an append grows: only the rest is computed, see :func:`tile_block`)."""

    grid: TileGrid
    tile: tuple[int, int]
    target: TileTarget | None
    dtype: str
    graph_ids: tuple[tuple[int, int], tuple[int, int]]
    known: tuple[int, int] = (0, 0)
    known_checksum: int | None = None


def pairwise_block(kernel: GraphKernel, state: KernelState, emb_rows: Any, emb_cols: Any,
                   diag_rows: np.ndarray | None, diag_cols: np.ndarray | None) -> np.ndarray:
    """``(len(emb_rows), len(emb_cols))`` float64 kernel values, normalised when the diagonals are given."""
    block = np.asarray(kernel.pairwise(emb_rows, emb_cols, state), dtype=np.float64)
    expected = (len(emb_rows), len(emb_cols))
    if block.shape != expected:
        raise ValueError(f"pairwise returned shape {block.shape}, expected {expected}")
    if not block.flags.writeable:  # the steps below work in place
        block = block.copy()
    if diag_rows is not None:
        normalize_block(block, diag_rows, diag_cols, out=block)
    return block


def tile_block(kernel: GraphKernel, state: KernelState, embs: tuple[Any, Any],
               diags: tuple[np.ndarray | None, np.ndarray | None], spec: TileSpec) -> np.ndarray:
    """The tile's float64 values before symmetrisation and rounding.

    A tile with ``spec.known = (a, b)`` holds its first ``a`` rows × ``b`` columns already
    (an append growing a tile that straddled the old edge): those are read back from the
    target, and only the new entries are computed — the new rows against every column, the
    old rows against the new columns (on a diagonal tile only the new columns: the lower
    triangle is the mirror of the upper). Each kernel value is computed by the same arithmetic
    whatever the block it is computed in (the kernels' tile-size invariance), and normalising
    is per entry, so the tile is bitwise the one a from-scratch run computes whole.
    """
    (emb_rows, emb_cols), (d_rows, d_cols) = embs, diags
    a, b = spec.known
    n_rows, n_cols = len(emb_rows), len(emb_cols)
    if a == 0 or b == 0 or (a, b) == (n_rows, n_cols):
        return pairwise_block(kernel, state, emb_rows, emb_cols, d_rows, d_cols)
    block = np.empty((n_rows, n_cols), dtype=np.float64)
    block[:a, :b] = spec.target.read_known(spec.grid, spec.tile, (a, b), spec.known_checksum)

    def part(r: slice, c: slice) -> None:
        block[r, c] = pairwise_block(kernel, state, emb_rows[r], emb_cols[c], None if d_rows is None else d_rows[r],
                                     None if d_cols is None else d_cols[c])

    if spec.grid.symmetric and spec.tile[0] == spec.tile[1]:
        part(slice(0, n_rows), slice(b, n_cols))  # the upper triangle's new entries; the mirror fills the rest
        return block
    if a < n_rows:
        part(slice(a, n_rows), slice(0, n_cols))
    if b < n_cols:
        part(slice(0, a), slice(b, n_cols))
    return block


def new_entries(grid: TileGrid, tile: tuple[int, int], known: tuple[int, int]) -> int:
    """Kernel values :func:`tile_block` computes for ``tile`` with ``known`` rows × columns held."""
    (r0, r1), (c0, c1) = grid.row_range(tile[0]), grid.col_range(tile[1])
    n_rows, n_cols = r1 - r0, c1 - c0
    a, b = known
    if a == 0 or b == 0:
        return n_rows * n_cols
    if grid.symmetric and tile[0] == tile[1]:
        return n_rows * (n_cols - b)
    return n_rows * n_cols - a * b


def tile_task(kernel: GraphKernel, state: KernelState, emb_rows: Any, emb_cols: Any,
              diag_rows: np.ndarray | None, diag_cols: np.ndarray | None,
              spec: TileSpec) -> tuple[tuple[int, int], float, int, np.ndarray | None]:
    """Compute a tile, write it (and its mirror) to ``spec.target``.

    Returns the tile, the seconds it took, the :func:`~gramdist.engine.store.tile_checksum`
    of the values written, which the client records with the done-mask, and the block itself
    when there is no target (a Gram assembled in memory) else None.

    Diagonal tiles of a symmetric Gram are symmetrised from their upper triangle so that the
    stored matrix is exactly symmetric. ``diag_rows``/``diag_cols`` given means normalise.
    Everything is computed in float64; a ``float32`` Gram is rounded once, at the end (the
    checksum is of the rounded values, as stored).
    """
    t0 = time.perf_counter()
    grid, tile, dtype = spec.grid, spec.tile, spec.dtype
    i, j = tile
    try:
        block = tile_block(kernel, state, (emb_rows, emb_cols), (diag_rows, diag_cols), spec)
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
        (r0, r1), (c0, c1) = spec.graph_ids
        raise TileError(
            f"tile ({i}, {j}) failed (row graphs {r0}..{r1}, column graphs {c0}..{c1}): "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    if spec.target is None:
        return tile, time.perf_counter() - t0, tile_checksum(block), block
    try:
        checksum = spec.target.write(grid, tile, block)
    except OSError as exc:  # a full disk, a store made read-only or removed mid-job
        raise TileError(f"tile ({i}, {j}): cannot write to the store {spec.target.path}: "
                        f"{exc.strerror or exc}; rerun the job to resume once this is fixed") from None
    return tile, time.perf_counter() - t0, checksum, None
