"""Functions the feature path runs on Dask workers: plain Python, no Dask imports.

Like :mod:`gramdist.engine.tasks`, each takes everything it needs as arguments and returns
only small results: a chunk task loads (or generates) its graphs, embeds them, writes its
rows into the feature store and returns a checksum, so nothing of a chunk outlives its task
and memory stays bounded whatever the number of graphs. In the command's own process, a
kernel that embeds in its forked workers has them compute only the chunk's embedding
(:func:`chunk_embedding`); a thread of the process takes the rows from it and writes them, so
that the forked workers never write to a store.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from gramdist.arrayops import normalize_block
from gramdist.engine import nystroem
from gramdist.engine.nystroem import NystroemState
from gramdist.engine.store import ChunkTarget
from gramdist.engine.tasks import embed_task
from gramdist.errors import TileError
from gramdist.graphs import GraphBatch, GraphChunk, load_chunk
from gramdist.kernels.base import GraphKernel, KernelState

#: squared distances below this fraction of K(x, x) + K(l, l) count as 0: the same graph
DUPLICATE_TOLERANCE = 1e-12


def worker_name() -> str:
    """``host:pid`` of the process running the task (to show how the work spread)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _counts(kernel: GraphKernel, emb: Any) -> dict[str, int]:
    if not kernel.has_embedding_counts:
        return {}
    return {str(k): int(v) for k, v in kernel.embedding_counts(emb).items()}


def chunk_error(i: int, batch: GraphBatch | None, exc: Exception) -> TileError:
    ids = "" if batch is None or not len(batch) else f" (graphs {batch.graph_ids[0]}..{batch.graph_ids[-1]})"
    return TileError(f"feature chunk {i} failed{ids}: {type(exc).__name__}: {exc}")


def _write_error(i: int, path: str, exc: OSError) -> TileError:
    return TileError(f"feature chunk {i}: cannot write to the store {path}: {exc.strerror or exc}; "
                     "rerun the command to resume once this is fixed")


def chunk_rows(i: int, fn: Any, kernel: GraphKernel, state: KernelState, graphs: GraphBatch | GraphChunk,
               *extra: Any) -> dict[str, Any]:
    """Rows of chunk ``i``, in memory: ``fn(kernel, state, batch, *extra)`` (:func:`sparse_rows`
    or :func:`nystroem_features`) on the chunk's graphs, read here if lazy, tagged with the
    chunk, the seconds taken and the worker; a failure names the chunk and its graphs."""
    return _computed_rows(i, fn, kernel, state, graphs, extra)[0]


def chunk_task(target: ChunkTarget, i: int, fn: Any, kernel: GraphKernel, state: KernelState,
               graphs: GraphBatch | GraphChunk, *extra: Any) -> dict[str, Any]:
    """Chunk ``i`` computed as :func:`chunk_rows` and written into ``target`` in one task, so
    that its rows never leave the worker; returns the small result the run records."""
    rows, batch = _computed_rows(i, fn, kernel, state, graphs, extra)
    t0 = time.perf_counter()
    try:
        if "features" in rows:
            checksum, nnz = target.write_dense(i, rows["features"], rows["diag"], batch), rows["features"].size
        else:
            checksum, nnz = target.write_sparse(i, rows, batch), len(rows["keys"])
    except OSError as exc:
        raise _write_error(i, target.path, exc) from None
    return {"chunk": i, "checksum": checksum, "nnz": int(nnz), "counts": rows["counts"],
            "seconds": rows["seconds"] + time.perf_counter() - t0, "worker": rows["worker"]}


def _computed_rows(i: int, fn: Any, kernel: GraphKernel, state: KernelState, graphs: GraphBatch | GraphChunk,
                   extra: tuple[Any, ...]) -> tuple[dict[str, Any], GraphBatch]:
    t0 = time.perf_counter()
    worker = worker_name()
    if extra and isinstance(extra[-1], WorkerEmbedding):  # the chunk's work was its embedding's
        worker, extra = extra[-1].worker, (*extra[:-1], extra[-1].embedding)
    batch = None
    try:
        batch = load_chunk(graphs)
        rows = fn(kernel, state, batch, *extra)
    except Exception as exc:
        raise chunk_error(i, batch, exc) from exc
    return {**rows, "chunk": i, "seconds": time.perf_counter() - t0, "worker": worker}, batch


@dataclass(frozen=True)
class WorkerEmbedding:
    """A chunk's embedding and the process that computed it: the run's summary names that
    process as the chunk's worker, not the thread that then took the rows."""

    embedding: Any
    worker: str


def chunk_embedding(i: int, kernel: GraphKernel, state: KernelState, batch: GraphBatch) -> WorkerEmbedding:
    """The embedding of chunk ``i``'s graphs alone (what a forked worker computes for the
    feature path; a thread then takes the rows from it); a failure names the chunk."""
    try:
        return WorkerEmbedding(embed_task(kernel, state, batch), worker_name())
    except Exception as exc:
        raise chunk_error(i, batch, exc) from exc


def sparse_rows(kernel: GraphKernel, state: KernelState, batch: GraphBatch, emb: Any = None) -> dict[str, Any]:
    """Explicit features of graphs: embed (unless ``emb``, their embedding, is given), take the
    kernel's feature rows and K(g, g).

    Returns a dict with ``indptr`` (G+1,), ``keys`` (nnz,) uint64 feature ids, ``values``
    (nnz,) float64, ``diag`` (G,) raw K(g, g) and ``counts`` (the kernel's counters): what a
    chunk task writes, and what :class:`gramdist.FeatureTransformer` keeps in memory.
    """
    emb = embed_task(kernel, state, batch) if emb is None else emb
    rows = kernel.feature_vectors(emb, state)
    if len(rows) != len(batch):
        raise RuntimeError(f"feature_vectors returned {len(rows)} rows for {len(batch)} graphs")
    diag = np.asarray(kernel.self_similarity(emb, state), dtype=np.float64)
    return {"indptr": rows.indptr, "keys": rows.keys, "values": rows.values, "diag": diag,
            "counts": _counts(kernel, emb)}


def nystroem_rows(kernel: GraphKernel, state: KernelState, emb: Any, diag: np.ndarray, landmarks: Any,
                  nys: NystroemState, normalize: bool) -> np.ndarray:
    """Φ(x) = Λ^{-1/2} Uᵀ K(L, x) of embedded graphs: (len(emb), k) float64.

    K(x, L) is cosine-normalised first when the job normalises (as the landmarks' Gram was).
    """
    k = np.array(kernel.pairwise(emb, landmarks, state), dtype=np.float64)
    if k.shape != (len(diag), len(nys.landmark_diag)):
        raise ValueError(f"pairwise returned shape {k.shape}, expected {(len(diag), len(nys.landmark_diag))}")
    if normalize:
        normalize_block(k, diag, nys.landmark_diag, out=k)
    phi = nystroem.project(k, nys.projection)
    if not np.all(np.isfinite(phi)):
        raise FloatingPointError("non-finite Nyström features")
    return phi


def nystroem_features(kernel: GraphKernel, state: KernelState, batch: GraphBatch, landmarks: Any,
                      nys: NystroemState, normalize: bool, emb: Any = None) -> dict[str, Any]:
    """Nyström features of graphs: embed (unless ``emb``, their embedding, is given), K(x, L)
    against the embedded ``landmarks``, project.

    Returns a dict with ``features`` (G, k) float64, ``diag`` (G,) raw K(g, g) and ``counts``:
    what a chunk task writes, and what :class:`gramdist.FeatureTransformer` returns.
    """
    emb = embed_task(kernel, state, batch) if emb is None else emb
    diag = np.asarray(kernel.self_similarity(emb, state), dtype=np.float64)
    phi = nystroem_rows(kernel, state, emb, diag, landmarks, nys, normalize)
    return {"features": phi, "diag": diag, "counts": _counts(kernel, emb)}


def load_nystroem_task(path: str) -> NystroemState:
    """The Nyström state read from the store: a recomputable way to share it with workers."""
    from gramdist.engine.store import FeatureStore

    return FeatureStore.open(path).read_nystroem()


def embed_landmarks_task(kernel: GraphKernel, state: KernelState, nys: NystroemState) -> Any:
    """Embeddings of the landmark graphs (computed once per worker that needs them)."""
    return embed_task(kernel, state, nys.landmarks)


def nystroem_basis_task(w: np.ndarray, cutoff: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`gramdist.engine.nystroem.basis` as a task."""
    return nystroem.basis(w, cutoff)


def squared_distance_task(kernel: GraphKernel, state: KernelState, emb_x: Any, diag_x: np.ndarray, emb_l: Any,
                          diag_l: np.ndarray, normalize: bool) -> np.ndarray:
    """(len(emb_x),) squared feature-space distance from each x to its nearest of the graphs
    ``emb_l``: ``min_l K(x, x) + K(l, l) - 2 K(x, l)`` (on the normalised kernel when asked)."""
    k = np.array(kernel.pairwise(emb_x, emb_l, state), dtype=np.float64)
    diag_x = np.asarray(diag_x, dtype=np.float64)
    diag_l = np.asarray(diag_l, dtype=np.float64)
    if normalize:
        normalize_block(k, diag_x, diag_l, out=k)
        diag_x, diag_l = (diag_x > 0).astype(np.float64), (diag_l > 0).astype(np.float64)
    scale = diag_x[:, None] + diag_l[None, :]
    d2 = scale - 2.0 * k
    d2[d2 <= DUPLICATE_TOLERANCE * scale] = 0.0  # the same graph up to rounding
    return d2.min(axis=1)


def distinct_task(kernel: GraphKernel, state: KernelState, emb: Any, diag: np.ndarray, normalize: bool) -> np.ndarray:
    """(len(emb),) bool: the graphs of ``emb`` not at distance 0 from an earlier one of them
    (first occurrences kept, in order)."""
    n = len(diag)
    d2 = np.stack([squared_distance_task(kernel, state, emb, diag, emb[j:j + 1], diag[j:j + 1], normalize)
                   for j in range(n)], axis=1)
    keep = np.ones(n, dtype=bool)
    for i in range(1, n):
        keep[i] = not np.any(d2[i, :i][keep[:i]] == 0.0)
    return keep
