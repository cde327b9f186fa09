"""The layout of gramdist's stores, declared once: every array and every group attribute.

A store is a Zarr v3 group. Its arrays are declared here as :class:`ArraySpec` (name,
dimensions, dtype, chunking) the way sgkit declares its variables, and its group attributes
as :class:`AttrSpec`; the rest of the store package creates, reads and checks them from
these declarations, and nothing outside the package names either (the architecture test
checks it). What a computation writes into the attributes arrives as a typed
:class:`GramMeta` or :class:`FeatureMeta`.

Gram store (``gramdist run``)::

    gram            (R, C) float64|float32, chunks (T, T)   the Gram; symmetric when R == C rows = cols
    diag, diag_cols (R,), (C,) float64                      raw K(g, g) of the rows / columns
    y, y_cols       (R,), (C,)                              class labels or targets, when known
    graph_ids, graph_ids_cols  (R,), (C,) int64             ids of the graphs in their source
    tiles_done      (R/T, C/T) uint8                        1 where a tile is written (resume record)
    tile_checksums  (R/T, C/T) uint64                       checksum of each written tile
    fit_indices     (k,) int64                              the fit sample, indices into the dataset
    state/          the kernel's fitted arrays; attributes: its JSON state
    embeddings/     kept embeddings of the chunks (``r<i>``, ``c<j>``)
    pending_<id>/   an append's staging group while it runs

Feature store (``gramdist features``): one row per graph, chunked by ``B`` graphs::

    graph_ids, y, diag (N,), chunks (B,)
    chunks_done, chunk_checksums (C,)                       the resume record and its checksums
    row_nnz (N,), indices/<i>, data/<i>, indptr (N+1,)      explicit features (CSR)
    features (N, k), nystroem/                              Nyström features and their basis
    fit_indices, state/                                     as in a Gram store
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gramdist.kernels.base import as_jsonable


@dataclass(frozen=True)
class ArraySpec:
    """One array of a store: its name, dimension names, dtype and chunking.

    ``dtype`` None: given by the data (labels) or by the store (the Gram's ``dtype``).
    ``chunks``: ``"tile"`` (T, T) tiles; ``"whole"`` one chunk; ``"graph"`` B graphs per chunk.
    """

    name: str
    dims: tuple[str, ...]
    dtype: str | None
    chunks: str
    doc: str


def _specs(*specs: ArraySpec) -> dict[str, ArraySpec]:
    return {s.name: s for s in specs}


GRAM_ARRAYS: dict[str, ArraySpec] = _specs(
    ArraySpec("gram", ("graph_ids", "graph_ids_cols"), None, "tile", "the Gram K(rows, cols)"),
    ArraySpec("diag", ("graph_ids",), "float64", "whole", "raw K(g, g) of the row graphs"),
    ArraySpec("diag_cols", ("graph_ids_cols",), "float64", "whole", "raw K(g, g) of the column graphs"),
    ArraySpec("y", ("graph_ids",), None, "whole", "class labels or targets of the row graphs"),
    ArraySpec("y_cols", ("graph_ids_cols",), None, "whole", "class labels or targets of the column graphs"),
    ArraySpec("graph_ids", ("graph_ids",), "int64", "whole", "ids of the row graphs in their source"),
    ArraySpec("graph_ids_cols", ("graph_ids_cols",), "int64", "whole", "ids of the column graphs"),
    ArraySpec("tiles_done", ("tile_row", "tile_col"), "uint8", "whole", "1 where a tile is written"),
    ArraySpec("tile_checksums", ("tile_row", "tile_col"), "uint64", "whole", "checksum of each written tile"),
    ArraySpec("fit_indices", ("fit_sample",), "int64", "whole", "indices of the fit sample in the dataset"),
)
FEATURE_ARRAYS: dict[str, ArraySpec] = _specs(
    ArraySpec("graph_ids", ("graph",), "int64", "graph", "ids of the graphs in their source"),
    ArraySpec("y", ("graph",), None, "graph", "class labels or targets"),
    ArraySpec("diag", ("graph",), "float64", "graph", "raw K(g, g)"),
    ArraySpec("row_nnz", ("graph",), "int64", "graph", "non-zeros of each CSR row"),
    ArraySpec("indptr", ("graph_edge",), "int64", "whole", "CSR row pointer (written at completion)"),
    ArraySpec("features", ("graph", "component"), "float64", "graph", "Nyström rows"),
    ArraySpec("chunks_done", ("chunk",), "uint8", "whole", "1 where a chunk is written"),
    ArraySpec("chunk_checksums", ("chunk",), "uint64", "whole", "checksum of everything a chunk wrote"),
    ArraySpec("fit_indices", ("fit_sample",), "int64", "whole", "indices of the fit sample in the dataset"),
)
#: groups of a store
STATE, EMBEDDINGS, NYSTROEM, PENDING_PREFIX = "state", "embeddings", "nystroem", "pending_"
#: the vectors along the Gram's axes, which xarray attaches to ``gram`` as coordinates
GRAM_COORDINATES = "y diag y_cols diag_cols"
#: the data types a Gram can be stored in (``gram.dtype``); tiles are computed in float64
GRAM_DTYPES = ("float64", "float32")
#: ``store_kind`` of a feature store (a Gram store has none, or ``"gram"``)
FEATURE_KIND = "features"


@dataclass(frozen=True)
class AttrSpec:
    """One group attribute: its name, what it means, and whether a rerun must match it."""

    name: str
    doc: str
    fingerprint: bool = False


def _attrs(*specs: AttrSpec) -> dict[str, AttrSpec]:
    return {s.name: s for s in specs}


_COMMON = (
    AttrSpec("gramdist_version", "the version that made the store"),
    AttrSpec("kernel", "name and parameters of the kernel", True),
    AttrSpec("kernel_versions", "versions of the kernels' definitions past 1, by name (absent: {}, all at 1; see "
                                "GraphKernel.version)", True),
    AttrSpec("dataset", "the dataset's spec, name, graph count and checksum"),
    AttrSpec("dataset_checksum", "content checksum of the (column) graphs", True),
    AttrSpec("fit", "sample_size, seed, from_store", True),
    AttrSpec("normalize", "cosine normalisation", True),
    AttrSpec("job", "the resolved job (not part of the fingerprint)"),
    AttrSpec("stats", "phase timings of the runs"),
    AttrSpec("complete", "every tile or chunk is on disk and checksummed"),
    AttrSpec("state_complete", "the fitted state is written"),
    AttrSpec("creating", "the store is being laid out (a creation cut short is replaced, never resumed)"),
)
GRAM_ATTRIBUTES: dict[str, AttrSpec] = _attrs(
    *_COMMON,
    AttrSpec("test_dataset", "the row graphs' dataset of a test x train store"),
    AttrSpec("test_checksum", "content checksum of the row graphs (test x train)", True),
    AttrSpec("tile_size", "side of a tile", True),
    AttrSpec("symmetric", "K(X, X) (upper tiles computed) rather than K(test, train)", True),
    AttrSpec("dtype", "the Gram's storage type (absent: float64)", True),
    AttrSpec("keep_embeddings", "chunks' embeddings kept for appends: true, false, or 'auto' (those small beside "
                                "the Gram, see gramdist.engine.store.state.KEEP_FRACTION)"),
    AttrSpec("diag_complete", "K(g, g) is written"),
    AttrSpec("checksummed", "tile checksums are recorded (their loss is damage)"),
    AttrSpec("appends", "one record per committed append"),
    AttrSpec("generation", "bumped by every committed append"),
    AttrSpec("pending_append", "the append running, while it runs"),
    AttrSpec("combination", "the stores and weights of a combined store"),
    AttrSpec("checksum_format", "how tiles are checksummed (absent: 1, the order-free sums of 0.1 and 0.2)"),
    AttrSpec("vector_checksums", "digests of the labels, ids, diagonal and fitted state when written"),
    AttrSpec("damaged_vectors", "labels or ids `verify --repair` found changed: the next run writes them again"),
    AttrSpec("store_kind", "absent or 'gram'"),
)
FEATURE_ATTRIBUTES: dict[str, AttrSpec] = _attrs(
    *_COMMON,
    AttrSpec("store_kind", "'features'"),
    AttrSpec("feature_kind", "'sparse' (explicit CSR rows) or 'nystroem'", True),
    AttrSpec("chunk_size", "graphs per chunk", True),
    AttrSpec("n_graphs", "graphs in the store"),
    AttrSpec("compression_level", "Blosc level of the chunks"),
    AttrSpec("nystroem_spec", "m, landmark rule and cutoff asked for", True),
    AttrSpec("nystroem", "the Nyström basis' summary (rank, eigenvalues kept)"),
    AttrSpec("nystroem_complete", "the Nyström basis is written"),
    AttrSpec("from_store", "the feature store whose state mapped these graphs", True),
    AttrSpec("nnz", "non-zeros of the CSR rows (written at completion)"),
    AttrSpec("checksum_format", "how chunks are checksummed (absent: 1, the order-free sums of 0.2)"),
    AttrSpec("vector_checksums", "digests of the fitted state, the Nyström basis and indptr when written"),
)
#: what a fingerprint attribute means when a store made before it existed lacks it
FINGERPRINT_DEFAULTS: dict[str, Any] = {"dtype": "float64", "kernel_versions": {}}


def fingerprint(specs: dict[str, AttrSpec]) -> tuple[str, ...]:
    return tuple(name for name, spec in specs.items() if spec.fingerprint)


def check_dtype(dtype: str) -> str:
    """``dtype`` if gramdist can store a Gram in it, else :class:`StoreError`."""
    from gramdist.errors import StoreError

    if str(dtype) not in GRAM_DTYPES:
        raise StoreError(f"gram.dtype must be one of {', '.join(GRAM_DTYPES)}, got {dtype!r}")
    return str(dtype)


@dataclass
class GramMeta:
    """What identifies a Gram computation, as its store records it (see :data:`GRAM_ATTRIBUTES`).

    ``dataset``/``test_dataset``: ``{spec, name, n_graphs, checksum[, source]}``; ``fit``:
    ``{sample_size, seed, from_store}``; ``kernel``: ``{name, params}``.
    """

    gramdist_version: str
    kernel: dict[str, Any]
    dataset: dict[str, Any]
    dataset_checksum: str
    fit: dict[str, Any]
    tile_size: int
    normalize: bool
    symmetric: bool
    dtype: str = "float64"
    test_dataset: dict[str, Any] | None = None
    test_checksum: str | None = None
    keep_embeddings: bool | str = False
    job: dict[str, Any] = field(default_factory=dict)
    kernel_versions: dict[str, int] = field(default_factory=dict)

    def to_attrs(self) -> dict[str, Any]:
        return as_jsonable(asdict(self))


@dataclass
class FeatureMeta:
    """What identifies a feature computation (see :data:`FEATURE_ATTRIBUTES`)."""

    gramdist_version: str
    kernel: dict[str, Any]
    dataset: dict[str, Any]
    dataset_checksum: str
    fit: dict[str, Any]
    normalize: bool
    chunk_size: int
    feature_kind: str
    nystroem_spec: dict[str, Any] | None = None
    from_store: str | None = None
    job: dict[str, Any] = field(default_factory=dict)
    kernel_versions: dict[str, int] = field(default_factory=dict)

    def to_attrs(self) -> dict[str, Any]:
        return as_jsonable(asdict(self))


ARRAY_NAMES = frozenset(GRAM_ARRAYS) | frozenset(FEATURE_ARRAYS)
ATTRIBUTE_NAMES = frozenset(GRAM_ATTRIBUTES) | frozenset(FEATURE_ATTRIBUTES)
