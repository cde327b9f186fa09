"""Kernel similarity search: the K library graphs most similar to each query graph.

The library is a finished feature store (``gramdist features``). The queries are mapped into
its feature space with the store's own fitted state: the kernel's state, and the Nyström basis
for Nyström stores (as ``gramdist features --from STORE`` maps new graphs). Then one task per
library chunk, on the workers, reads its chunk (checked against its recorded checksum),
scores it against every query and keeps its K best per query; the client merges the chunks'
candidates. No task ever holds more than one chunk × the queries, and the queries × library
matrix is never formed.

What "most similar" means: the largest **normalised kernel value**
``K(q, x) / sqrt(K(q, q) K(x, x))`` (0 where either self-similarity is not positive, as in
a normalised Gram):

* explicit (CSR) stores: ``K`` is the exact kernel value, the dot product of the two sparse
  feature vectors; ``K(q, q)`` counts every feature of the query, also those no library graph
  has (so a value equals the query's entry in a normalised Gram with the library);
* Nyström stores: ``K`` is the Nyström approximation ``Φ(q)·Φ(x)``. A store made with
  ``gram.normalize: true`` already approximates the normalised kernel and its values are used
  as they are; otherwise they are cosine-normalised with the Nyström self-similarities
  ``|Φ(q)|²`` and ``|Φ(x)|²``, so that the ranking compares like with like.

Ties are broken by the library row (the earlier row first), so the result is the same bits
whatever the chunks, the workers or the order tasks finish in. A library with fewer than K
graphs gives rows of -1 and values of NaN past its size.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist.arrayops import normalize_block, rows_to_csr, unique_sorted
from gramdist.engine.context import RunContext, progress_reporter
from gramdist.engine.placement import Placement
from gramdist.engine.plan import kernel_from_spec
from gramdist.engine.window import Window, run_window
from gramdist.errors import InputError, StoreError


@dataclass(frozen=True)
class QueryRows:
    """The queries in the library's feature space, built once and shipped to every chunk task:
    raw ``diag`` K(q, q); for explicit stores ``columns`` (the queries' distinct feature ids,
    sorted: only they can add to a product) and ``matrix`` (Q, len(columns)) CSR; for Nyström
    stores dense ``features`` (Q, k)."""

    diag: np.ndarray
    columns: np.ndarray | None = None
    matrix: Any = None
    features: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.diag)


@dataclass(frozen=True)
class SearchResult:
    """The ``top`` library graphs of each query, best first.

    ``rows`` (Q, top) int64: library rows (-1 past the library's size); ``ids`` (Q, top)
    int64: their graph ids; ``values`` (Q, top) float64: their normalised kernel values
    (NaN past the library's size); ``query_ids`` (Q,): the queries' graph ids.
    """

    rows: np.ndarray
    ids: np.ndarray
    values: np.ndarray
    query_ids: np.ndarray
    store: str
    timings: dict[str, float] = field(default_factory=dict)


# ------------------------------------------------------------------------------ the maths
def best_rows(scores: np.ndarray, rows: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` best of each column of ``scores`` (n, Q): ``(rows (k, Q), values (k, Q))``,
    k = min(top, n), by value descending then row ascending. NaN scores rank last."""
    n, q = scores.shape
    k = min(top, n)
    out_rows = np.empty((k, q), dtype=np.int64)
    out_vals = np.empty((k, q), dtype=np.float64)
    if k == 0:
        return out_rows, out_vals
    ranked = np.where(np.isnan(scores), -np.inf, scores)
    kth = -np.partition(-ranked, k - 1, axis=0)[k - 1]  # each column's k-th largest value
    for j in range(q):
        cand = np.flatnonzero(ranked[:, j] >= kth[j])  # ties with the k-th included, then cut
        order = np.lexsort((rows[cand], -ranked[cand, j]))[:k]
        out_rows[:, j] = rows[cand[order]]
        out_vals[:, j] = scores[cand[order], j]
    return out_rows, out_vals


def chunk_scores(chunk: dict[str, Any], queries: QueryRows, prenormalized: bool) -> np.ndarray:
    """Normalised kernel values of a chunk's rows against the queries: (rows, Q) float64."""
    if queries.features is not None:
        phi = chunk["features"]
        raw = phi @ queries.features.T
        if prenormalized:
            return raw
        return normalize_block(raw, np.einsum("ij,ij->i", phi, phi), queries.diag)
    x = rows_to_csr(chunk["indptr"], chunk["keys"], chunk["values"], queries.columns)
    raw = (x @ queries.matrix.T).toarray()
    return normalize_block(raw, chunk["diag"], queries.diag)


def merge_best(parts: list[tuple[np.ndarray, np.ndarray]], n_queries: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` best of the chunks' candidates: ``(rows (Q, top), values (Q, top))``."""
    rows = np.concatenate([p[0] for p in parts]) if parts else np.zeros((0, n_queries), np.int64)
    vals = np.concatenate([p[1] for p in parts]) if parts else np.zeros((0, n_queries))
    out_rows = np.full((n_queries, top), -1, dtype=np.int64)
    out_vals = np.full((n_queries, top), np.nan)
    for j in range(n_queries):
        order = np.lexsort((rows[:, j], -np.where(np.isnan(vals[:, j]), -np.inf, vals[:, j])))[:top]
        out_rows[j, : len(order)] = rows[order, j]
        out_vals[j, : len(order)] = vals[order, j]
    return out_rows, out_vals


# ------------------------------------------------------------------------------ the tasks
def search_chunk_task(path: str, i: int, checksum: int, queries: QueryRows, top: int,
                      prenormalized: bool) -> dict[str, Any]:
    """Chunk ``i`` of the library: its ``top`` best rows per query, with their graph ids."""
    from gramdist.engine.store import FeatureStore

    chunk = FeatureStore.open(path).read_chunk(i, checksum)
    scores = chunk_scores(chunk, queries, prenormalized)
    rows, values = best_rows(scores, np.arange(chunk["start"], chunk["stop"], dtype=np.int64), top)
    ids = chunk["graph_ids"][rows - chunk["start"]]
    return {"chunk": i, "rows": rows, "values": values, "ids": ids}


def map_queries(store: Any, graphs: Any) -> QueryRows:
    """The query graphs in the store's feature space, with the store's fitted state."""
    from gramdist.engine.feature_tasks import embed_landmarks_task, nystroem_features, sparse_rows

    spec = store.kernel
    kernel = kernel_from_spec({"name": spec["name"], **spec["params"]})
    state = store.read_state()
    if store.sparse:
        rows = sparse_rows(kernel, state, graphs)
        columns = unique_sorted(np.asarray(rows["keys"], np.uint64))
        matrix = rows_to_csr(np.asarray(rows["indptr"], np.int64), np.asarray(rows["keys"], np.uint64),
                             np.asarray(rows["values"], np.float64), columns)
        return QueryRows(diag=rows["diag"], columns=columns, matrix=matrix)
    nys = store.read_nystroem()
    landmarks = embed_landmarks_task(kernel, state, nys)
    phi = nystroem_features(kernel, state, graphs, landmarks, nys, store.normalize)["features"]
    return QueryRows(diag=np.einsum("ij,ij->i", phi, phi), features=phi)


# ------------------------------------------------------------------------------ the driver
def query_graphs(lib: Any, queries: Any) -> Any:
    """``queries`` (anything :func:`~gramdist.datasets.inputs.as_graph_batch` reads) as graphs
    in the form the store's dataset had: molecules converted with the options its dataset
    recorded (aromaticity, charges, hydrogens...), node attributes selected as it selected
    them (unless ``queries`` is itself a dataset mapping, which says its own)."""
    import copy
    from collections.abc import Mapping

    from gramdist.datasets import select_node_attributes
    from gramdist.datasets.inputs import as_graph_batch
    from gramdist.datasets.molecules import CONVERSION_OPTIONS

    spec = (lib.dataset or {}).get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    options = {k: spec[k] for k in CONVERSION_OPTIONS if k in spec}
    batch = copy.copy(as_graph_batch(queries, input_options=options))  # never alter the caller's batch
    if not isinstance(queries, Mapping) and "node_attributes" in spec:
        batch = select_node_attributes(batch, spec["node_attributes"])
    return batch


def search(store: str, queries: Any, *, top: int = 10, placement: Placement | None = None,
           context: RunContext | None = None) -> SearchResult:
    """The ``top`` library graphs of ``store`` most similar to each query graph.

    Parameters
    ----------
    store : a finished feature store (explicit or Nyström rows).
    queries : Q graphs: a GraphBatch, networkx graphs, SMILES (a list, or a .smi/.csv/.sdf
        file), a TU folder, a dataset name or a ``dataset:`` mapping (see :func:`query_graphs`).
    top : K, at least 1.
    placement : where the chunk tasks run (default: this process for a small library, else a
        LocalCluster, as every command decides).

    Returns
    -------
    SearchResult with (Q, top) arrays.
    """
    from gramdist.engine.store import FeatureStore, is_feature_store

    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError(f"top: expected a positive integer, got {top!r}")
    if not is_feature_store(store):
        raise StoreError(f"{store}: not a feature store; search runs on the rows of `gramdist features` "
                         "(explicit or --nystroem M)")
    context = context or RunContext()
    t0 = time.perf_counter()
    lib = FeatureStore.open(store)
    lib.check_complete()
    graphs = query_graphs(lib, queries)
    rows = map_queries(lib, graphs)
    t_map = time.perf_counter()
    return _run(lib, rows, graphs, top, placement or Placement(), context, {"map_s": t_map - t0})


def _run(lib: Any, queries: QueryRows, graphs: Any, top: int, placement: Placement, context: RunContext,
         timings: dict[str, float]) -> SearchResult:
    t0 = time.perf_counter()
    _, sums = lib.chunk_mask()
    n_chunks, path = lib.grid.n_chunks, str(lib.location)
    prenormalized = not lib.sparse and lib.normalize
    parts: dict[int, dict[str, Any]] = {}
    n_entries = lib.grid.n_graphs * len(queries)
    token = uuid.uuid4().hex[:12]  # task keys only: two searches on one cluster never share one
    with placement.executor(n_entries, context.log) as ex:
        q_f = ex.put(queries, key=f"search-queries-{token}")

        def submit(i: int) -> Any:
            return ex.submit(search_chunk_task, path, i, int(sums[i]), q_f, top, prenormalized,
                             key=f"search-{token}-{i}")

        window = Window(ex, submit, lambda res: parts.__setitem__(res["chunk"], res),
                        progress_reporter(context.progress, n_chunks, 0, unit="chunk"), context.log, what="chunk")
        run_window(window, range(n_chunks))
    ordered = [parts[i] for i in range(n_chunks)]
    rows, values = merge_best([(p["rows"], p["values"]) for p in ordered], len(queries), top)
    ids = _ids_of(rows, ordered)
    timings["chunks_s"] = time.perf_counter() - t0
    return SearchResult(rows=rows, ids=ids, values=values, query_ids=np.asarray(graphs.graph_ids, np.int64),
                        store=str(lib.location), timings=timings)


def _ids_of(rows: np.ndarray, parts: list[dict[str, Any]]) -> np.ndarray:
    """The graph ids of library rows, from the chunks' own (row, id) pairs."""
    known_rows = np.concatenate([p["rows"].ravel() for p in parts]) if parts else np.zeros(0, np.int64)
    known_ids = np.concatenate([p["ids"].ravel() for p in parts]) if parts else np.zeros(0, np.int64)
    order = np.argsort(known_rows, kind="stable")
    known_rows, known_ids = known_rows[order], known_ids[order]
    ids = np.full(rows.shape, -1, dtype=np.int64)
    hit = rows >= 0
    ids[hit] = known_ids[np.searchsorted(known_rows, rows[hit])]
    return ids
