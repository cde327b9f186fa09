"""Nested cross-validation of linear models on feature stores (``gramdist evaluate F.zarr``).

The protocol, the folds and the output are :mod:`~gramdist.evaluation.nested_cv`'s (it runs
:func:`~gramdist.evaluation.nested_cv.cross_validate`): repeated stratified outer folds, an
inner CV on each training part selecting (store, C), a refit, a score on the test fold.
Only the learner changes, from an SVC on a Gram to a linear model on the rows:

* ``svm`` — ``LinearSVC(C, loss="hinge")`` on the rows loaded in memory (a CSR matrix over
  the store's feature ids, or the dense Nyström array). The hinge loss and C are the SVC's;
  liblinear also regularises the intercept (``intercept_scaling=1``), the one difference from
  ``SVC(kernel="precomputed")`` on the Gram ``X Xᵀ``.
* ``sgd`` — for stores that do not fit in memory: ``SGDClassifier(loss="hinge",
  alpha=1/(C·n))`` (the same objective as the SVM's, C per training graph) trained with
  ``partial_fit`` over the store's chunks, read one at a time (chunks in a seeded random
  order each epoch, rows shuffled within a chunk, :data:`SGD_BATCH_ROWS` rows a call), for
  ``epochs`` passes; predictions stream the same way. Memory: a batch, the model and at most
  :data:`CHUNK_CACHE_BYTES` of decoded chunks kept between passes, whatever N. CSR rows are seen through the hashing trick (Weinberger et al. 2009): feature
  id ``k`` goes to column ``k mod 2^hash_bits`` with sign ``+1`` or ``-1`` from its top bit, so
  the model has a fixed width whatever the number of distinct ids (the ids are already
  uniform 64-bit hashes). The store itself keeps the exact ids.
* ``auto`` (default) — ``svm`` when the rows fit in :data:`MEMORY_BUDGET` bytes, else ``sgd``.

CSR rows are cosine-normalised when the job normalised (``gram.normalize``), so the linear
kernel on them is the normalised Gram; Nyström rows are used as stored (their normalisation
came before the projection).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier
from sklearn.svm import LinearSVC

from gramdist.engine.store import FeatureStore, is_feature_store, open_features
from gramdist.errors import StoreError
from gramdist.evaluation.nested_cv import GramSource, RunOptions, cross_validate, find_stores
from gramdist.evaluation.protocols import Protocol
from gramdist.evaluation.tasks import DEFAULT_C_GRID, Task

LEARNERS = ("auto", "svm", "sgd")
#: bytes of rows (and the learner's copy of them) above which ``auto`` streams with SGD
MEMORY_BUDGET = 1 << 30
#: bytes of decoded chunks a streaming process keeps between passes (the first chunks)
CHUNK_CACHE_BYTES = 256 << 20
#: rows per ``partial_fit`` call of the streamed learner (several chunks' rows at a time)
SGD_BATCH_ROWS = 16384


# ------------------------------------------------------------------------------ stores
def find_feature_stores(paths: list[str]) -> list[str]:
    """Expand folders of feature stores (a grid's output) into store paths, sorted."""
    return find_stores(paths, is_store=is_feature_store, kind="feature ")


def check_compatible(stores: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Labels and graph ids shared by all stores; :class:`StoreError` if they differ."""
    ref = None
    for s in stores:
        store = FeatureStore.open(s)
        if not store.complete:
            raise StoreError(f"{s}: incomplete feature store; rerun its `gramdist features` command first")
        y, ids = store.labels(), store.graph_ids()
        if y is None:
            raise StoreError(f"{s}: the dataset has no class labels")
        key = (store.dataset_checksum, ids, y)
        if ref is None:
            ref = key
        elif key[0] != ref[0] or not np.array_equal(ids, ref[1]) or not np.array_equal(y, ref[2]):
            raise StoreError(f"{s}: holds different graphs than {stores[0]}; stores must share one dataset")
    return ref[2], ref[1]


def in_memory_bytes(store: str) -> int:
    """Rough bytes of a store's rows in memory plus the learner's own copy."""
    fstore = FeatureStore.open(store)
    if fstore.sparse:
        return fstore.nnz * 28  # CSR (12 B per entry) + liblinear's nodes (16 B)
    return fstore.grid.n_graphs * fstore.n_components * 16


# ------------------------------------------------------------------------------ in memory
@lru_cache(maxsize=4)
def _load(path: str) -> Any:
    x, _ = open_features(path)
    return x


class FeatureSource(GramSource):
    """One store's rows, loaded once per process; the model sees the rows of each part."""

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[Any, Any]:
        x = _load(self.name)
        return x[train], x[test]

    def select(self, block: Any, rows: np.ndarray, cols: np.ndarray) -> Any:
        return block[rows]


# ------------------------------------------------------------------------------ streamed
class InMemoryChunks:
    """Rows already in memory (a CSR or dense matrix: a baseline's fingerprints) seen the way
    a streamed learner sees a store: ``grid`` (chunks of ``chunk_rows``) and ``chunk(i)``."""

    def __init__(self, x: Any, chunk_rows: int = 20000) -> None:
        from gramdist.engine.store import ChunkGrid

        self.x = x
        self.grid = ChunkGrid(x.shape[0], chunk_rows)

    def chunk(self, i: int) -> Any:
        r0, r1 = self.grid.range(i)
        return self.x[r0:r1]


class RowSet:
    """Graphs ``rows`` (row indices) of a store that is never loaded whole (``path``), or of
    :class:`InMemoryChunks`."""

    def __init__(self, path: str | InMemoryChunks, rows: np.ndarray) -> None:
        self.path = path
        self.rows = np.asarray(rows, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.rows)


class StreamedSource(GramSource):
    """A store read chunk by chunk: parts are :class:`RowSet` s, the learner streams them."""

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[RowSet, RowSet]:
        return RowSet(self.name, train), RowSet(self.name, test)

    def select(self, block: RowSet, rows: np.ndarray, cols: np.ndarray) -> RowSet:
        return RowSet(block.path, block.rows[rows])


class _ChunkReader:
    """Chunks of one store as model inputs (hashed CSR or dense), the first ones cached."""

    def __init__(self, path: str, hash_bits: int) -> None:
        if not 1 <= hash_bits <= 31:
            raise StoreError(f"--hash-bits must be in 1..31, got {hash_bits}")
        self.path = path
        self.hash_bits = hash_bits
        self.store = FeatureStore.open(path)
        self.store.check_complete()
        self.sums = self.store.chunk_mask()[1]
        self.grid = self.store.grid
        self.normalize = self.store.normalize and self.store.sparse
        self.cache: dict[int, Any] = {}
        self.cached_bytes = 0
        self.verified: set[int] = set()  # chunks checked against their checksum in this process
        self.handles: dict[str, Any] = {}

    def chunk(self, i: int) -> Any:
        if i in self.cache:
            return self.cache[i]
        checksum = None if i in self.verified else int(self.sums[i])
        part = self.store.read_chunk(i, checksum, handles=self.handles)
        self.verified.add(i)
        x = part["features"] if "features" in part else self._hashed(part)
        size = x.nbytes if isinstance(x, np.ndarray) else x.data.nbytes + x.indices.nbytes + x.indptr.nbytes
        if self.cached_bytes + size <= CHUNK_CACHE_BYTES:
            self.cache[i] = x
            self.cached_bytes += size
        return x

    def _hashed(self, part: dict[str, Any]) -> Any:
        """CSR rows over ``2**hash_bits`` signed hashed columns. A row may hold a column twice
        (two ids in one bucket): linear models add the two, as summing them would."""
        import scipy.sparse as sp

        keys, values, indptr = part["keys"], part["values"], part["indptr"]
        cols = (keys & np.uint64((1 << self.hash_bits) - 1)).astype(np.int32)
        values = np.where((keys >> np.uint64(63)).astype(bool), -values, values)
        if self.normalize:
            with np.errstate(divide="ignore"):
                scale = np.where(part["diag"] > 0, 1.0 / np.sqrt(part["diag"]), 0.0)
            values *= np.repeat(scale, np.diff(indptr))
        idx = np.int32 if len(values) < 2**31 else np.int64
        return sp.csr_matrix((values, cols.astype(idx, copy=False), indptr.astype(idx)),
                             shape=(len(indptr) - 1, 1 << self.hash_bits))


@lru_cache(maxsize=2)
def _reader(path: str, hash_bits: int) -> _ChunkReader:
    return _ChunkReader(path, hash_bits)


class _StreamedLinear:
    """What the streamed learners share: the rows of a store read chunk by chunk, ``epochs``
    passes in a seeded order of chunks and of rows within each, ``SGD_BATCH_ROWS`` rows a
    ``partial_fit``; predictions streamed the same way."""

    epochs: int
    hash_bits: int
    seed: int

    def _members(self, rows: RowSet) -> tuple[Any, list[tuple[int, np.ndarray, np.ndarray]]]:
        """Per chunk holding some of ``rows``: (chunk, local rows, positions in ``rows``)."""
        reader = rows.path if isinstance(rows.path, InMemoryChunks) else _reader(rows.path, self.hash_bits)
        order = np.argsort(rows.rows, kind="stable")
        srows = rows.rows[order]
        out = []
        for i in range(reader.grid.n_chunks):
            r0, r1 = reader.grid.range(i)
            lo, hi = np.searchsorted(srows, [r0, r1])
            if hi > lo:
                out.append((i, srows[lo:hi] - r0, order[lo:hi]))
        return reader, out

    def _stream(self, rows: RowSet, y: np.ndarray) -> None:
        reader, parts = self._members(rows)
        rng = np.random.default_rng(self.seed)
        for _ in range(self.epochs):
            xs, ys, n = [], [], 0
            for p in rng.permutation(len(parts)):
                i, local, pos = parts[p]
                perm = rng.permutation(len(local))
                xs.append(reader.chunk(i)[local[perm]])
                ys.append(y[pos[perm]])
                n += len(local)
                if n >= SGD_BATCH_ROWS:
                    self._partial_fit(xs, ys)
                    xs, ys, n = [], [], 0
            if xs:
                self._partial_fit(xs, ys)

    def _partial_fit(self, xs: list[Any], ys: list[np.ndarray]) -> None:
        """One ``partial_fit`` on the rows of several chunks, in order: each call also costs
        time in proportion to the model's width (2^hash_bits), so :data:`SGD_BATCH_ROWS` rows
        a call rather than a chunk's (the same updates, in the same order)."""
        import scipy.sparse as sp

        x = xs[0] if len(xs) == 1 else np.concatenate(xs) if isinstance(xs[0], np.ndarray) else sp.vstack(xs, "csr")
        self._update(x, np.concatenate(ys))

    def _update(self, x: Any, y: np.ndarray) -> None:
        raise NotImplementedError

    def _apply(self, rows: RowSet, function: Any) -> np.ndarray:
        """``function`` of each chunk's rows among ``rows``, in the order of ``rows``."""
        reader, parts = self._members(rows)
        out = None
        for i, local, pos in parts:
            d = function(reader.chunk(i)[local])
            if out is None:
                out = np.zeros((len(rows),) + d.shape[1:])
            out[pos] = d
        return out if out is not None else np.zeros(0)


class StreamedLinearSVM(_StreamedLinear):
    """A linear SVM trained by SGD over a store's chunks (see the module docstring).

    Parameters
    ----------
    C : float
        The SVM's C (``alpha = 1 / (C n)`` for n training graphs).
    epochs : int
        Passes over the training graphs.
    hash_bits : int
        Width ``2**hash_bits`` of the hashed CSR rows.
    seed : int
        Seeds the chunk and row orders and the SGD.
    """

    def __init__(self, C: float = 1.0, epochs: int = 5, hash_bits: int = 20, seed: int = 0) -> None:
        self.C = C
        self.epochs = epochs
        self.hash_bits = hash_bits
        self.seed = seed

    def fit(self, rows: RowSet, y: np.ndarray) -> StreamedLinearSVM:
        y = np.asarray(y)
        self.classes_ = np.unique(y)
        self.model_ = SGDClassifier(loss="hinge", alpha=1.0 / (self.C * max(1, len(y))), average=True,
                                    random_state=self.seed)
        self._stream(rows, y)
        return self

    def _update(self, x: Any, y: np.ndarray) -> None:
        self.model_.partial_fit(x, y, classes=self.classes_)

    def decision_function(self, rows: RowSet) -> np.ndarray:
        return self._apply(rows, self.model_.decision_function)

    def predict(self, rows: RowSet) -> np.ndarray:
        d = self.decision_function(rows)
        idx = (d > 0).astype(np.int64) if d.ndim == 1 else d.argmax(axis=1)
        return self.classes_[idx]


class StreamedLinearRegressor(_StreamedLinear):
    """Ridge regression trained by SGD over a store's chunks: ``SGDRegressor(loss="squared_error",
    penalty="l2", alpha, average=True)`` on ``y`` less its training mean (added back to the
    predictions), so the intercept starts where the targets are.

    Parameters
    ----------
    alpha : float
        The L2 penalty per training graph (sklearn's ``alpha``).
    epochs, hash_bits, seed : as :class:`StreamedLinearSVM`'s.
    """

    def __init__(self, alpha: float = 1e-6, epochs: int = 5, hash_bits: int = 20, seed: int = 0) -> None:
        self.alpha = alpha
        self.epochs = epochs
        self.hash_bits = hash_bits
        self.seed = seed

    def fit(self, rows: RowSet, y: np.ndarray) -> StreamedLinearRegressor:
        from sklearn.linear_model import SGDRegressor

        y = np.asarray(y, dtype=np.float64)
        self.mean_ = float(y.mean()) if len(y) else 0.0
        self.model_ = SGDRegressor(loss="squared_error", penalty="l2", alpha=self.alpha, average=True,
                                   random_state=self.seed)
        self._stream(rows, y - self.mean_)
        return self

    def _update(self, x: Any, y: np.ndarray) -> None:
        self.model_.partial_fit(x, y)

    def predict(self, rows: RowSet) -> np.ndarray:
        return self._apply(rows, self.model_.predict) + self.mean_


# ------------------------------------------------------------------------------ task
class QuietLinearSVC(LinearSVC):
    """LinearSVC without liblinear's convergence warnings: at the grid's largest C the dual
    solver often stops at ``max_iter``; the inner CV judges that model like any other."""

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> QuietLinearSVC:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            return super().fit(X, y, sample_weight)


class LinearTask(Task):
    """Classification by a linear SVM on feature rows: in memory or streamed (``learner``)."""

    def __init__(self, params: tuple[float, ...] = DEFAULT_C_GRID, learner: str = "svm", epochs: int = 5,
                 hash_bits: int = 20, seed: int = 0) -> None:
        super().__init__(params)
        self.learner = learner
        self.epochs = epochs
        self.hash_bits = hash_bits
        self.seed = seed

    def model(self, param: float) -> Any:
        if self.learner == "sgd":
            return StreamedLinearSVM(C=param, epochs=self.epochs, hash_bits=self.hash_bits, seed=self.seed)
        return QuietLinearSVC(C=param, loss="hinge", dual=True, random_state=self.seed)


def choose_learner(stores: list[str], learner: str) -> str:
    """``svm`` or ``sgd`` for ``learner`` (``auto``: by the rows' size, see :data:`MEMORY_BUDGET`)."""
    if learner not in LEARNERS:
        raise StoreError(f"--learner: one of {', '.join(LEARNERS)}, got {learner!r}")
    if learner != "auto":
        return learner
    return "sgd" if max(in_memory_bytes(s) for s in stores) > MEMORY_BUDGET else "svm"


def default_hash_bits(stores: list[str]) -> int:
    """Columns for the hashed rows: the next power of two above the largest store's non-zeros,
    within 2^10..2^20 (each ``partial_fit`` costs time in proportion to the width)."""
    nnz = max(FeatureStore.open(s).nnz for s in stores)
    return int(min(20, max(10, math.ceil(math.log2(max(nnz, 2))))))


def evaluate_features(stores: list[str], protocol: Protocol | None = None, options: RunOptions | None = None, *,
                      learner: str = "auto", epochs: int = 5, hash_bits: int | None = None) -> dict[str, Any]:
    """Nested CV of a linear SVM on feature stores; :func:`nested_cv.cross_validate`'s protocol
    and dict, plus ``learner`` (``svm`` or ``sgd``, see the module docstring).

    Parameters
    ----------
    stores : list of str
        Feature stores (or folders of them) over the same graphs; several are selected
        between in the inner CV, as Gram stores are.
    protocol : Protocol, optional
        Folds, repeats, inner CV and C grid, as for Gram stores (default ``Protocol()``). The
        inner selection is a k-fold CV of the linear learner: ``inner_holdout`` does not apply.
    options : RunOptions, optional
        ``seed`` (also the learner's), ``out``, ``client``; the task is the linear learner's
        classification (``task`` may only be ``"auto"`` or ``"classification"``).
    learner : {"auto", "svm", "sgd"}
    epochs, hash_bits : int
        Of the streamed ``sgd`` learner; ``hash_bits`` None: enough columns for the store's
        non-zeros, from 2^10 to 2^20 (:func:`default_hash_bits`).
    """
    protocol = protocol or Protocol()
    options = options or RunOptions()
    if isinstance(options.task, Task) or options.task not in ("auto", "classification"):
        raise StoreError("feature stores are evaluated by a linear classifier; the task is not an option")
    stores = find_feature_stores(stores)
    y, ids = check_compatible(stores)
    chosen = choose_learner(stores, learner)
    supervised = [int(i) for s in stores for i in FeatureStore.open(s).kernel_attrs().get("supervised_graph_ids", [])]
    held = np.isin(ids, np.asarray(supervised, dtype=np.int64))
    source = StreamedSource if chosen == "sgd" else FeatureSource
    if hash_bits is None:
        hash_bits = default_hash_bits(stores)
    task = LinearTask(protocol.c_grid, learner=chosen, epochs=epochs, hash_bits=hash_bits, seed=options.seed)
    return cross_validate([source(s) for s in stores], y, held, protocol, replace(options, task=task)) | {
        "learner": chosen}
