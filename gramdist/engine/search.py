"""Kernel similarity search: the K library graphs most similar to each query graph.

The library is a finished store, of either kind:

* a **feature store** (``gramdist features``): the queries are mapped into its feature space
  with the store's own fitted state: the kernel's state, and the Nyström basis for Nyström
  stores (as ``gramdist features --from STORE`` maps new graphs); one task per library chunk
  reads its chunk (checked against its recorded checksum) and scores it by dot products;
* a **Gram store** (``gramdist run``, symmetric or test × train): the library is its graphs
  (the training graphs of a test × train store), re-read from the sources the store recorded
  and checked against their content checksums, as ``gramdist append`` re-reads them (or given
  as ``base``); the queries are embedded with the store's fitted state, and one task per tile
  row of library graphs takes its chunk's embedding (read back where the store keeps it, else
  computed) and evaluates the kernel itself against every query — the kernel values are the
  ones a test × train run with the store's state computes, bit for bit. Works for every
  kernel, explicit feature map or not.

Each task keeps its K best per query; the client merges the chunks' candidates. No task ever
holds more than one chunk × the queries, and the queries × library matrix is never formed.

What "most similar" means: the largest **normalised kernel value**
``K(q, x) / sqrt(K(q, q) K(x, x))`` (0 where either self-similarity is not positive, as in
a normalised Gram):

* explicit (CSR) stores: ``K`` is the exact kernel value, the dot product of the two sparse
  feature vectors; ``K(q, q)`` counts every feature of the query, also those no library graph
  has (so a value equals the query's entry in a normalised Gram with the library);
* Gram stores: ``K`` is the kernel value, ``K(q, q)`` and ``K(x, x)`` computed from the same
  embeddings (so the store's ``normalize`` setting changes nothing: its diagonal is not read);
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
def search_chunk_task(path: str, i: int, checksum: int, prenormalized: bool, queries: QueryRows,
                      top: int) -> dict[str, Any]:
    """Chunk ``i`` of a feature store: its ``top`` best rows per query, with their graph ids."""
    from gramdist.engine.store import FeatureStore

    chunk = FeatureStore.open(path).read_chunk(i, checksum)
    scores = chunk_scores(chunk, queries, prenormalized)
    rows, values = best_rows(scores, np.arange(chunk["start"], chunk["stop"], dtype=np.int64), top)
    ids = chunk["graph_ids"][rows - chunk["start"]]
    return {"chunk": i, "rows": rows, "values": values, "ids": ids}


@dataclass(frozen=True)
class EmbeddedQueries:
    """The queries of a Gram-store search, shipped once to every chunk task: the store's kernel
    and fitted state, the queries' embedding and their raw K(q, q)."""

    kernel: Any
    state: Any
    emb: Any
    diag: np.ndarray

    def __len__(self) -> int:
        return len(self.diag)


@dataclass(frozen=True)
class LibraryChunk:
    """One tile row of a Gram store's library graphs: rows ``start:start + len(graphs)``,
    the name its embedding is kept under in the store (``r<i>``/``c<j>``) and where."""

    i: int
    start: int
    graphs: Any
    name: str
    cache: Any


def gram_chunk_task(chunk: LibraryChunk, queries: EmbeddedQueries, top: int) -> dict[str, Any]:
    """A chunk of a Gram store's library: its ``top`` best rows per query, with their graph ids.

    The kernel values are computed queries × library (the orientation of a test × train run)
    and normalised per entry, so each equals that run's entry bit for bit."""
    from gramdist.engine.tasks import cached_embed_task, diag_task, pairwise_block

    kernel, state = queries.kernel, queries.state
    emb = cached_embed_task(kernel, state, chunk.graphs, chunk.cache, chunk.name, chunk.graphs.checksum())
    diag = diag_task(kernel, state, emb)
    scores = pairwise_block(kernel, state, queries.emb, emb, queries.diag, diag).T
    rows, values = best_rows(scores, np.arange(chunk.start, chunk.start + len(diag), dtype=np.int64), top)
    ids = np.asarray(chunk.graphs.graph_ids, np.int64)[rows - chunk.start]
    return {"chunk": chunk.i, "rows": rows, "values": values, "ids": ids}


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


def kernel_and_state(store: Any) -> tuple[Any, Any]:
    """The kernel a store recorded (its name and parameters) and its fitted state."""
    spec = store.kernel
    kernel = kernel_from_spec({"name": spec["name"], **spec["params"]})
    store.check_kernel_versions(kernel.definition_versions())  # its state and features are that version's
    return kernel, store.read_state()


class FeatureLibrary:
    """A feature store as a search library: chunk ``i`` is the store's chunk ``i``."""

    def __init__(self, path: str) -> None:
        from gramdist.engine.store import FeatureStore

        self.store = FeatureStore.open(path)
        self.store.check_complete()
        self.n_graphs, self.n_chunks = self.store.grid.n_graphs, self.store.grid.n_chunks
        self._sums = self.store.chunk_mask()[1]

    def nodes(self, queries: Any) -> int:
        """Nodes the search embeds, for placement: none past the queries' mapping (dot products)."""
        return 0

    def map_queries(self, graphs: Any) -> QueryRows:
        """The query graphs in the store's feature space, with the store's fitted state."""
        from gramdist.engine.feature_tasks import embed_landmarks_task, nystroem_features, sparse_rows

        store = self.store
        kernel, state = kernel_and_state(store)
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

    def task(self, i: int) -> tuple[Any, tuple[Any, ...]]:
        """Chunk ``i``'s task and its arguments (the queries and ``top`` follow)."""
        prenormalized = not self.store.sparse and self.store.normalize
        return search_chunk_task, (str(self.store.location), i, int(self._sums[i]), prenormalized)


class GramLibrary:
    """A Gram store as a search library: its (column) graphs, one chunk per tile row."""

    def __init__(self, path: str, base: Any = None) -> None:
        from gramdist.engine.append import current_graphs
        from gramdist.engine.store import GramStore
        from gramdist.engine.store.state import EmbeddingCache

        store = self.store = GramStore.open(path)
        if store.committing:
            raise StoreError(f"{path}: an append is being committed; search it once `gramdist append {path}` "
                             "has finished")
        if store.combination or not store.state_complete:
            raise StoreError(f"{path}: holds no fitted kernel state ("
                             + ("a combination of stores" if store.combination else "its run did not finish fitting")
                             + "); search needs a store made by `gramdist run` or `gramdist features`")
        rows, cols = current_graphs(store, base)
        self.graphs = rows if cols is None else cols
        self.n_graphs, self.tile = len(self.graphs), store.tile_size
        self.n_chunks = -(-self.n_graphs // self.tile)
        self.tag = "r" if store.symmetric else "c"  # the name a run keeps the chunk's embedding under
        kept = str(store.location.resolved()) if store.keeps_embeddings else None
        self.cache = EmbeddingCache(kept, None)  # read-only: a search never writes to the store

    def nodes(self, queries: Any) -> int:
        """Nodes the search embeds, for placement: the library's and the queries'."""
        return int(self.graphs.n_nodes) + int(queries.n_nodes)

    def map_queries(self, graphs: Any) -> EmbeddedQueries:
        """The queries embedded with the store's fitted state, with their raw K(q, q)."""
        from gramdist.engine.tasks import diag_task, embed_task

        kernel, state = kernel_and_state(self.store)
        emb = embed_task(kernel, state, graphs)
        return EmbeddedQueries(kernel, state, emb, diag_task(kernel, state, emb))

    def task(self, i: int) -> tuple[Any, tuple[Any, ...]]:
        start = i * self.tile
        chunk = self.graphs[start:min(start + self.tile, self.n_graphs)]
        return gram_chunk_task, (LibraryChunk(i, start, chunk, f"{self.tag}{i}", self.cache),)


def open_library(store: str, base: Any = None) -> FeatureLibrary | GramLibrary:
    """The search library of ``store``: a feature store or a Gram store."""
    from gramdist.engine.store import is_feature_store, is_gram_store

    if is_feature_store(store):
        if base is not None:
            raise InputError("base: only for a Gram store (a feature store holds its rows)")
        return FeatureLibrary(store)
    if is_gram_store(store):
        return GramLibrary(store, base)
    raise StoreError(f"{store}: not a gramdist store; search runs on a feature store (`gramdist features`) or a "
                     "Gram store (`gramdist run`)")


def search(store: str, queries: Any, *, top: int = 10, placement: Placement | None = None,
           context: RunContext | None = None, base: Any = None) -> SearchResult:
    """The ``top`` library graphs of ``store`` most similar to each query graph.

    Parameters
    ----------
    store : a finished feature store (explicit or Nyström rows), or a Gram store with its
        fitted state (its graphs, or a test × train store's training graphs, are the library).
    queries : Q graphs: a GraphBatch, networkx graphs, SMILES (a list, or a .smi/.csv/.sdf
        file), a TU folder, a dataset name or a ``dataset:`` mapping (see :func:`query_graphs`).
    top : K, at least 1.
    placement : where the chunk tasks run (default: this process for a small library, else a
        LocalCluster, as every command decides).
    base : a Gram store's graphs, when the sources it recorded cannot be re-read (moved files,
        a store made from Python): anything a job's ``dataset:`` accepts, or a GraphBatch,
        checked against the store's content checksum.

    Returns
    -------
    SearchResult with (Q, top) arrays.
    """
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise InputError(f"top: expected a positive integer, got {top!r}")
    context = context or RunContext()
    t0 = time.perf_counter()
    lib = open_library(store, base)
    t_lib = time.perf_counter()
    graphs = query_graphs(lib.store, queries)
    rows = lib.map_queries(graphs)
    timings = {"library_s": t_lib - t0, "map_s": time.perf_counter() - t_lib}
    return _run(lib, rows, graphs, top, placement or Placement(), context, timings)


def _run(lib: FeatureLibrary | GramLibrary, queries: Any, graphs: Any, top: int, placement: Placement,
         context: RunContext, timings: dict[str, float]) -> SearchResult:
    t0 = time.perf_counter()
    parts: dict[int, dict[str, Any]] = {}
    n_entries = lib.n_graphs * len(queries)
    token = uuid.uuid4().hex[:12]  # task keys only: two searches on one cluster never share one
    with placement.executor(n_entries, context.log, lib.nodes(graphs)) as ex:
        q_f = ex.put(queries, key=f"search-queries-{token}")

        def submit(i: int) -> Any:
            fn, args = lib.task(i)
            return ex.submit(fn, *args, q_f, top, key=f"search-{token}-{i}")

        window = Window(ex, submit, lambda res: parts.__setitem__(res["chunk"], res),
                        progress_reporter(context.progress, lib.n_chunks, 0, unit="chunk"), context.log,
                        what="chunk")
        run_window(window, range(lib.n_chunks))
    ordered = [parts[i] for i in range(lib.n_chunks)]
    rows, values = merge_best([(p["rows"], p["values"]) for p in ordered], len(queries), top)
    ids = _ids_of(rows, ordered)
    timings["chunks_s"] = time.perf_counter() - t0
    return SearchResult(rows=rows, ids=ids, values=values, query_ids=np.asarray(graphs.graph_ids, np.int64),
                        store=str(lib.store.location), timings=timings)


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
