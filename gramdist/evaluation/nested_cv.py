"""Nested cross-validation of ``SVC(kernel="precomputed")`` on one or several Gram stores.

Protocol (the one the kernel papers use; a :class:`~gramdist.evaluation.protocols.Protocol`
holds its numbers): for each of ``repeats`` repetitions, an outer stratified ``folds``-fold
split (shuffled with seed ``seed + repeat``); on each outer training part, an inner
stratified ``inner_folds``-fold CV selects the pair (store, C) with the best mean inner
accuracy — so several stores of the same graphs (one kernel at several
hyperparameter settings) are selected *inside* the training folds, never on test folds —
then an SVC with that pair is refitted on the whole outer training part and scored on the
outer test fold. Ties go to the earlier store and the smaller C.

Reported: ``accuracy_mean`` (mean over all outer folds of all repeats), ``accuracy_std``
(standard deviation over repeats of each repeat's mean accuracy, the figure papers quote for
"10 × 10-fold CV"), and the per-fold selections. Outer folds run as tasks on a Dask cluster;
each worker reads the Grams from the stores itself.

The objects: ``evaluate(stores, protocol, options)`` takes the
:class:`~gramdist.evaluation.protocols.Protocol` (what is measured) and :class:`RunOptions`
(how it runs: seed, task, resume folder, cluster). The protocol travels unchanged to the
folds: every outer fold is ``outer_fold(setup, fold)``, a :class:`Fold` (its split and inner
seed, from :func:`outer_splits`) under the :class:`FoldSetup` all folds share (candidates,
labels, protocol, task, held graphs).

Resume. With ``options.out`` (``gramdist evaluate --out DIR``) each outer fold's result is saved as a
small JSON file as soon as the fold finishes, named by its repeat, its fold and a key of
everything that decides it (the candidates' names and content digests, the labels, the C
grid, the inner CV, the task, the split). A rerun reads the folds it finds and computes the
rest, so a 10 × 10-fold evaluation that runs for hours survives an interruption; a store
changed in between (an append, a rerun) has another digest, and its folds are recomputed.

Regression. A continuous target (``y`` with a value that is not a whole number, or
``RunOptions(task="regression")``) runs the same protocol with
:class:`~gramdist.evaluation.regression.RegressionTask`: plain shuffled k-fold splits, kernel
ridge or SVR, RMSE and R² (``rmse_mean``, ``r2_mean``, ...). A fixed train/test split given as
two stores is :mod:`~gramdist.evaluation.holdout`.

Supervised fits. A kernel whose fit phase learns from class labels (e.g. the matching
kernel's NCA) lists the ``graph_ids`` of the graphs whose labels it used in its state
attributes under ``supervised_graph_ids``. Such graphs must never be scored: their labels
shaped the kernel. :func:`evaluate` therefore takes the union of these ids over the stores
and keeps those graphs in every training part (outer and inner); the stratified outer folds,
and the inner validation folds, are drawn over the remaining graphs only. The estimate is
then an honest one for graphs whose labels no part of the pipeline saw, over fewer test
graphs. The result reports how many graphs were held out of testing
(``supervised_fit_graphs``) and how many were tested (``test_graphs``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.context import Progress, progress_reporter
from gramdist.engine.store import GramStore, Location, is_gram_store, open_gram, open_store, store_version
from gramdist.errors import StoreError
from gramdist.evaluation.fold_loop import FoldClock, run_calls, stopped_early
from gramdist.evaluation.protocols import Protocol
from gramdist.evaluation.tasks import DEFAULT_C_GRID, Task
from gramdist.kernels.base import as_jsonable


def find_stores(paths: list[str], is_store: Callable[[Path], bool] | None = None, kind: str = "") -> list[str]:
    """Expand folders of stores (a grid run's output) into the store paths, sorted.

    ``is_store`` tells a store of the wanted kind (default: a Gram store); ``kind`` names it
    in the error for a folder without any (e.g. ``"feature "``).
    """
    is_store = is_store or is_gram_store
    out: list[str] = []
    for p in paths:
        path = Location(p)
        if is_store(path):  # a damaged store is one too: opening it says what is wrong
            out.append(str(path))
        elif path.is_folder():
            found = sorted(str(c) for c in path.children() if is_store(c))
            if not found:
                raise StoreError(f"{p}: no gramdist {kind}stores found in this folder")
            out.extend(found)
        else:
            raise StoreError(f"{p}: no such store")
    return out


#: the Grams one process keeps loaded take at most this fraction of its memory available
#: (with them): every fold reads every candidate store, so a grid's stores (h = 1..5: five)
#: must all stay, where a cache of a fixed count, smaller than the grid, reloaded each per fold
GRAM_CACHE_FRACTION = 0.5


class _GramCache:
    """Grams loaded in this process, least recently used dropped first past the byte budget
    (one is always kept: the one just loaded)."""

    def __init__(self) -> None:
        self.items: OrderedDict[tuple[str, Any], np.ndarray] = OrderedDict()

    def get(self, path: str, version: Any) -> np.ndarray:
        key = (path, version)
        if key in self.items:
            self.items.move_to_end(key)
            return self.items[key]
        k, _ = open_gram(path)
        gram = self.items[key] = np.ascontiguousarray(k, dtype=np.float64)
        self._trim()
        return gram

    def _trim(self) -> None:
        from gramdist.engine.sinks import available_memory

        held = sum(g.nbytes for g in self.items.values())
        free = available_memory()
        budget = GRAM_CACHE_FRACTION * ((free if free is not None else 2**31) + held)
        while len(self.items) > 1 and held > budget:
            _, dropped = self.items.popitem(last=False)
            held -= dropped.nbytes

    def cache_clear(self) -> None:
        self.items.clear()


_GRAMS = _GramCache()


def _load(path: str) -> np.ndarray:
    """The store's Gram as float64, loaded once per process for as long as the store is
    unchanged (an append or a rerun makes it load again)."""
    return _GRAMS.get(path, store_version(Location(path)))


_load.cache_clear = _GRAMS.cache_clear  # type: ignore[attr-defined]


def supervised_graph_ids(stores: list[str]) -> np.ndarray:
    """Union over the stores of the ``graph_ids`` whose class labels the kernel fit used
    (state attribute ``supervised_graph_ids``; absent for unsupervised kernels)."""
    ids: list[int] = []
    for s in stores:
        ids.extend(int(i) for i in GramStore.open(s).kernel_attrs().get("supervised_graph_ids", []))
    return np.unique(np.asarray(ids, dtype=np.int64))


def check_compatible(stores: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Labels and graph ids shared by all stores; :class:`StoreError` if they hold different graphs."""
    ref_y = ref_ids = None
    ref_sum = None
    for s in stores:
        store = GramStore.open(s)
        if not store.complete:
            raise StoreError(f"{s}: incomplete store; rerun its job before evaluating")
        if not store.symmetric:
            raise StoreError(f"{s}: rectangular (test x train) store; evaluate needs a square Gram")
        y = store.labels()
        if y is None:
            raise StoreError(f"{s}: the dataset has no class labels")
        ids = store.graph_ids()
        checksum = store.dataset_checksum
        if ref_y is None:
            ref_y, ref_ids, ref_sum = y, ids, checksum
        elif checksum != ref_sum or not np.array_equal(ids, ref_ids) or not np.array_equal(y, ref_y):
            raise StoreError(f"{s}: holds different graphs than {stores[0]}; stores must share one dataset")
    return ref_y, ref_ids


class GramSource:
    """Where one candidate kernel's Gram blocks come from, for the folds of a nested CV.

    ``blocks(train, test)`` returns ``K(train, train)`` and ``K(test, train)``. The base reads a
    finished store (loaded once per process); other sources — a weighted sum of stores, a
    kernel refitted on each outer training part — are subclasses in their own modules.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    def gram(self) -> np.ndarray:
        return _load(self.name)

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """K(train, train) of shape (n_train, n_train) and K(test, train) of shape (n_test, n_train),
        for the (n_train,) and (n_test,) graph indices ``train`` and ``test``."""
        k = self.gram()
        return k[np.ix_(train, train)], k[np.ix_(test, train)]

    def select(self, block: Any, rows: np.ndarray, cols: np.ndarray) -> Any:
        """What the model sees of ``rows`` (fitted on the training graphs ``cols``), taken from
        a block of :meth:`blocks`: here the Gram ``block[rows][:, cols]``. Sources of explicit
        features take the rows alone."""
        return block[np.ix_(rows, cols)]

    def digest(self) -> str:
        """Changes whenever what this source gives does: the key of its saved fold results
        (here the store's :meth:`~gramdist.engine.store.Store.digest`)."""
        return open_store(self.name).digest()


def as_source(candidate: str | GramSource) -> GramSource:
    """A store path becomes the :class:`GramSource` reading it; a source is kept as is."""
    return candidate if isinstance(candidate, GramSource) else GramSource(str(candidate))


# ------------------------------------------------------------------------------ the objects
@dataclass(frozen=True)
class RunOptions:
    """How one evaluation runs, beside the :class:`~gramdist.evaluation.protocols.Protocol`
    that says what it measures; none of these changes the protocol.

    Parameters
    ----------
    seed : int
        Seeds the outer splits (repeat ``r`` is shuffled with ``seed + r``) and, through each
        :class:`Fold`'s ``inner_seed``, the inner ones.
    task : str or Task
        ``"auto"`` (regression when a target is not a whole number, else the protocol's
        classification task), ``"classification"``, ``"regression"``, or a :class:`Task`
        used as given; see :func:`gramdist.evaluation.regression.resolve_task`.
    learner : {"krr", "svr"}
        The regression learner on a Gram (kernel ridge or SVR).
    per_store : bool
        Also score each candidate alone in every outer fold (result key ``per_store``, for
        plots).
    out : path, optional
        Folder of the per-outer-fold results (:func:`fold_paths`): a fold found there is read,
        not computed, so an interrupted evaluation resumes. None saves nothing.
    client : distributed.Client, optional
        Runs the outer folds as tasks on its cluster; None runs them in this process.
    progress : bool or callable
        A bar of the outer folds on stderr (True: done, rate, time left; the folds read from
        ``out`` count as done from the start), nothing (False), or ``callback(done, total)``
        after each fold computed.
    deadline : float, optional
        A ``time.monotonic()`` reading: start no outer fold expected to end after it (see
        :class:`~gramdist.evaluation.fold_loop.FoldClock`); the run then raises
        :class:`~gramdist.stopping.StoppedEarly` with the folds done saved under ``out``.
    """

    seed: int = 0
    task: str | Task = "auto"
    learner: str = "krr"
    per_store: bool = False
    out: str | os.PathLike | None = None
    client: Any = None
    progress: Progress = False
    deadline: float | None = None


@dataclass(frozen=True, eq=False)
class Fold:
    """One outer fold of a nested CV: its place, its split and the seed of its inner CV.

    Parameters
    ----------
    repeat, index : int
        The repetition and the fold within it (``selections``' ``repeat`` and ``fold``).
    train, test : ndarray of shape (n_train,) and (n_test,), int
        Sorted indices (into the labels) of the outer training part and of the test fold.
    inner_seed : int
        Seed of the inner splitter on ``train``.
    """

    repeat: int
    index: int
    train: np.ndarray
    test: np.ndarray
    inner_seed: int


@dataclass(frozen=True, eq=False)
class FoldSetup:
    """What every outer fold of one nested CV shares: the candidates, the labels, the protocol
    and the task. The folds of an evaluation are ``outer_fold(setup, fold)`` for each
    :class:`Fold` of :func:`outer_splits`.

    Parameters
    ----------
    candidates : tuple of GramSource or str
        What the inner CV selects among (with C); store paths become :class:`GramSource` s.
    y : ndarray of shape (n,)
        Class labels (or regression targets) of all graphs.
    protocol : Protocol
        Its ``c_grid`` and ``inner_folds`` are what the inner CV uses.
    task : Task, optional
        Default: the protocol's classification task (:meth:`Protocol.task`).
    held : ndarray of shape (n,), bool, optional
        Graphs kept in every training part (outer and inner) and never validated or tested on
        (the supervised-fit graphs, see the module docstring); default none.
    per_store : bool
        Also score each candidate alone on the test fold with its own inner-CV choice of C.
    """

    candidates: tuple[GramSource, ...]
    y: np.ndarray
    protocol: Protocol = field(default_factory=Protocol)
    task: Task | None = None
    held: np.ndarray | None = None
    per_store: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(as_source(c) for c in self.candidates))
        if self.task is None:
            object.__setattr__(self, "task", self.protocol.task())
        if self.held is None:
            object.__setattr__(self, "held", np.zeros(len(self.y), dtype=bool))

    def key(self) -> str:
        """What every saved fold depends on besides its split (the ``common`` of
        :func:`fold_paths`): the candidates' names and :meth:`GramSource.digest`, the labels and
        the held graphs, the C grid, the inner CV, the task and its settings."""
        from gramdist.arrayops import digest_arrays

        settings = {k: repr(v) for k, v in sorted(vars(self.task).items())}
        return json.dumps({"sources": [[s.name, s.digest()] for s in self.candidates],
                           "c_grid": list(self.protocol.c_grid), "inner_folds": self.protocol.inner_folds,
                           "task": [type(self.task).__name__, settings], "per_store": self.per_store,
                           "labels": digest_arrays({"y": np.asarray(self.y), "held": np.asarray(self.held)})},
                          sort_keys=True)


# ------------------------------------------------------------------------------ one fold
def outer_fold(setup: FoldSetup, fold: Fold) -> dict[str, Any]:
    """Select (candidate, C) by inner CV on ``fold.train``, refit, and score on ``fold.test``.

    The inner CV is ``setup.protocol.inner_folds`` folds (fewer when a class is too small, at
    least 2) of ``setup.task``'s inner splitter seeded with ``fold.inner_seed``, drawn over the
    training graphs that are not ``setup.held``; the held ones join every inner training part.
    Ties go to the earlier candidate and the smaller C.

    Returns
    -------
    dict
        The task's outer scores (``accuracy``, or ``rmse`` and ``r2``), ``score`` (the
        headline), ``store`` (the chosen candidate's name), ``C``, ``inner_score`` (its mean
        inner score; also as ``inner_accuracy``), and with ``setup.per_store`` ``per_store``:
        per candidate, its scores alone with its own best C.
    """
    task, c_grid = setup.task, setup.protocol.c_grid
    train, test = fold.train, fold.test
    y_tr = setup.y[train]
    inner = _inner_splits(setup, fold)
    best = (-np.inf, 0, c_grid[0])
    store_best = []
    for s, source in enumerate(setup.candidates):
        k_tr, _ = source.blocks(train, test)
        mine = (-np.inf, c_grid[0])
        for c in c_grid:
            scores = []
            for itr, ite in inner:
                model = task.model(c).fit(source.select(k_tr, itr, itr), y_tr[itr])
                scores.append(task.inner_score(y_tr[ite], model.predict(source.select(k_tr, ite, itr))))
            score = float(np.mean(scores))
            if score > best[0] + 1e-12:
                best = (score, s, c)
            if score > mine[0] + 1e-12:
                mine = (score, c)
        store_best.append(mine)
    _, s, c = best
    scores = _test_scores(setup, fold, setup.candidates[s], c)
    headline = next(iter(scores))
    out = {**scores, "score": scores[headline], "store": setup.candidates[s].name, "C": c,
           "inner_accuracy": best[0], "inner_score": best[0]}
    if setup.per_store:
        out["per_store"] = [{"store": source.name, "C": c_s, "inner_score": inner_s,
                             **_test_scores(setup, fold, source, c_s)}
                            for source, (inner_s, c_s) in zip(setup.candidates, store_best)]
    return out


def _inner_splits(setup: FoldSetup, fold: Fold) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inner (train, validation) splits of ``fold``: positions in ``fold.train``."""
    y_tr = setup.y[fold.train]
    fixed = np.flatnonzero(setup.held[fold.train])
    free = np.setdiff1d(np.arange(len(fold.train)), fixed)
    n_splits = max(2, min(setup.protocol.inner_folds, setup.task.max_splits(y_tr[free])))
    return [(np.sort(np.concatenate([fixed, free[a]])), free[b]) for a, b in
            setup.task.inner_splitter(n_splits, fold.inner_seed).split(free, y_tr[free])]


def _test_scores(setup: FoldSetup, fold: Fold, source: GramSource, c: float) -> dict[str, float]:
    """``source`` with C = ``c`` refitted on the outer training part, scored on the test fold."""
    k_tr, k_te = source.blocks(fold.train, fold.test)
    model = setup.task.model(c).fit(k_tr, setup.y[fold.train])
    return setup.task.outer_scores(setup.y[fold.test], model.predict(k_te))


# ------------------------------------------------------------------------------ the folds
def outer_splits(y: np.ndarray, held: np.ndarray, protocol: Protocol, seed: int = 0,
                 task: Task | None = None) -> list[Fold]:
    """The outer folds of a nested CV under ``protocol``, repeat by repeat.

    Each repeat ``r`` is the task's ``protocol.folds``-fold split (stratified for
    classification) shuffled with seed ``seed + r``, or, with ``protocol.test_size`` (a
    fraction), one random split holding out that fraction (stratified for classification; one
    fold per repeat). The splits are drawn over the graphs not ``held``; the held graphs join
    every training part (see the module docstring).

    Parameters
    ----------
    y : ndarray of shape (n,)
        Labels (or targets) of all graphs.
    held : ndarray of shape (n,), bool
        Graphs never tested.
    protocol : Protocol
    seed : int
    task : Task, optional
        Its splitter; default :class:`Task` (stratified k-fold).

    Returns
    -------
    list of Fold
        ``protocol.repeats`` times the folds of one repeat; fold ``f`` of repeat ``r`` has
        ``inner_seed = seed + 1000 * (r + 1) + f``.
    """
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    task = task or Task()
    free = np.flatnonzero(~held)
    fixed = np.flatnonzero(held)
    folds = []
    for r in range(protocol.repeats):
        if protocol.test_size is None:
            splitter = task.splitter(protocol.folds, seed + r)
        elif task.name == "regression":
            splitter = ShuffleSplit(n_splits=1, test_size=protocol.test_size, random_state=seed + r)
        else:
            splitter = StratifiedShuffleSplit(n_splits=1, test_size=protocol.test_size, random_state=seed + r)
        for f, (train, test) in enumerate(splitter.split(np.zeros(len(free)), y[free])):
            folds.append(Fold(r, f, np.sort(np.concatenate([fixed, free[train]])), np.sort(free[test]),
                              seed + 1000 * (r + 1) + f))
    return folds


def check_folds(y: np.ndarray, held: np.ndarray, protocol: Protocol, task: Task | None = None) -> None:
    """:class:`StoreError` if the testable graphs (``~held``, (n,) bool) cannot fill the outer
    folds of ``protocol`` (for classification: every class of the (n,) labels ``y`` in every
    fold)."""
    task = task or Task()
    folds = protocol.folds
    if protocol.test_size is not None:
        if not 0 < protocol.test_size < 1:
            raise StoreError(f"the test fraction must lie in (0, 1), got {protocol.test_size}")
        folds = 2  # every class needs a graph on both sides
    elif folds < 2:
        raise StoreError("--folds must be at least 2")
    limit = task.outer_limit(y, np.flatnonzero(~held))
    if limit < folds:
        n_held = int(held.sum())
        why = (f" after keeping the {n_held} graphs whose labels the kernel fit used out of the test folds; "
               "fit on a smaller sample (fit.sample_size)" if n_held else "")
        raise StoreError(task.too_few(limit, why, folds))


def fold_paths(out: str | os.PathLike | None, common: str, folds: list[Fold]) -> list[str | None]:
    """Where each outer fold's result is saved: ``out/fold-rRR-fFF-<key>.json``, the key a hash
    of ``common`` (what every fold's result depends on: :meth:`FoldSetup.key`) and of the
    fold's own split and inner seed. ``out`` None: nothing is saved."""
    if out is None:
        return [None] * len(folds)
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder}: not a folder; --out names the folder of the per-fold results")
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[str | None] = []
    for fold in folds:
        h = hashlib.blake2b(digest_size=8)
        h.update(common.encode())
        h.update(fold.train.tobytes())
        h.update(fold.test.tobytes())
        h.update(str(fold.inner_seed).encode())
        paths.append(str(folder / f"fold-r{fold.repeat:02d}-f{fold.index:02d}-{h.hexdigest()}.json"))
    return paths


def checkpointed_fold(setup: FoldSetup, fold: Fold, path: str | None = None) -> dict[str, Any]:
    """:func:`outer_fold`, its result read from ``path`` if an earlier run finished the fold
    (``resumed: True``), else computed and saved there atomically, with ``seconds`` (the fold's
    time) and ``n_train``/``n_test``. ``path`` None: computed, not saved."""
    if path and os.path.exists(path):
        with open(path) as fh:
            return {**json.load(fh), "resumed": True}
    t0 = time.perf_counter()
    res = as_jsonable(outer_fold(setup, fold))
    res["seconds"] = time.perf_counter() - t0
    res["n_train"], res["n_test"] = int(len(fold.train)), int(len(fold.test))
    if path:
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(res, fh, sort_keys=True)
        os.replace(tmp, path)
    return {**res, "resumed": False}


def run_folds(setup: FoldSetup, folds: list[Fold], paths: list[str | None], client: Any = None,
              progress: Progress = False, clock: FoldClock | None = None) -> list[dict[str, Any]]:
    """:func:`checkpointed_fold` of every fold (saved at its path): tasks on ``client``'s
    cluster, at most one per worker thread at a time, or here, in order. ``progress``
    (:class:`RunOptions`) counts the folds computed on top of those already saved. ``clock``
    (:class:`~gramdist.evaluation.fold_loop.FoldClock`, given the saved folds' times) may stop
    the run between folds: :class:`~gramdist.stopping.StoppedEarly` is raised once the folds
    in flight have ended and been saved."""
    clock = clock or FoldClock()
    results: list[dict[str, Any] | None] = [
        checkpointed_fold(setup, fold, path) if path and os.path.exists(path) else None
        for fold, path in zip(folds, paths)]
    for res in results:
        if res is not None:
            clock.record(res)
    todo = [i for i, r in enumerate(results) if r is None]
    report = progress_reporter(progress, len(folds), len(folds) - len(todo), unit="fold")
    try:
        computed = run_calls([(checkpointed_fold, (setup, folds[i], paths[i])) for i in todo], client, clock, report)
    finally:
        report(None)
    for i, res in zip(todo, computed):
        results[i] = res
    if any(r is None for r in results):
        done = sum(r is not None for r in results)
        raise stopped_early(clock, done, len(folds), Path(paths[0]).parent if paths[0] else None)
    return results  # type: ignore[return-value]  # none is None past the check


def run_outer_folds(setup: FoldSetup, options: RunOptions) -> tuple[list[Fold], list[dict[str, Any]]]:
    """Every outer fold of ``setup.protocol``: checked (:func:`check_folds`), drawn
    (:func:`outer_splits` with ``options.seed``), read from or saved under ``options.out`` and
    run on ``options.client``, stopped between folds at ``options.deadline`` or on SIGUSR1
    where the caller asked for that (:mod:`gramdist.evaluation.fold_loop`). Returns the folds and
    their results, in the same order."""
    check_folds(setup.y, setup.held, setup.protocol, setup.task)
    folds = outer_splits(setup.y, setup.held, setup.protocol, options.seed, setup.task)
    paths = fold_paths(options.out, setup.key() if options.out else "", folds)
    return folds, run_folds(setup, folds, paths, options.client, options.progress, FoldClock(options.deadline))


def summarise(results: list[dict[str, Any]], folds: list[Fold], protocol: Protocol,
              task: Task | None = None) -> dict[str, Any]:
    """The task's scores and their spreads over the outer ``folds`` (their ``results``; see
    :meth:`Task.summarise`), the protocol recorded (``inner_folds``, ``test_size``, ``c_grid``,
    ``folds``, ``repeats``), and each fold's selection."""
    task = task or Task()
    repeats = protocol.repeats
    head, per_fold = task.summarise(results, repeats, len(results) // repeats)
    return {
        "inner_folds": protocol.inner_folds,
        "test_size": protocol.test_size,
        "c_grid": list(protocol.c_grid),
        "folds": protocol.folds if protocol.test_size is None else 1,
        "repeats": repeats,
        **head,
        **per_fold,
        "selections": [{"repeat": fold.repeat, "fold": fold.index, "store": res["store"], "C": res["C"]}
                       for fold, res in zip(folds, results)],
    }


def resume_record(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``resumed_folds`` (how many of the :func:`checkpointed_fold` results were read back) and
    ``fold_seconds`` (each fold's time when it was computed)."""
    return {"resumed_folds": int(sum(bool(r.get("resumed")) for r in results)),
            "fold_seconds": [float(r.get("seconds", float("nan"))) for r in results]}


# ------------------------------------------------------------------------------ evaluations
def evaluate(stores: list[str], protocol: Protocol | None = None, options: RunOptions | None = None, *,
             candidates: list[GramSource] | None = None) -> dict[str, Any]:
    """Nested CV accuracy of an SVC (or RMSE and R² of a regression) on the given stores; see
    the module docstring.

    Parameters
    ----------
    stores : list of str
        Paths of complete, square stores over the same graphs (grid outputs may be given as
        their folder; see :func:`find_stores`).
    protocol : Protocol, optional
        Folds, repeats, inner CV, C grid; default ``Protocol()``.
    options : RunOptions, optional
        Seed, task, learner, per-store scores, resume folder, cluster; default ``RunOptions()``.
    candidates : list of GramSource, optional
        What the inner CV selects among instead of the stores themselves (e.g. weighted sums
        of them, :mod:`gramdist.evaluation.combine`).

    Returns
    -------
    dict
        :func:`cross_validate`'s.
    """
    stores = find_stores(stores)
    y, ids = check_compatible(stores)
    held = np.isin(ids, supervised_graph_ids(stores))
    return cross_validate(stores, y, held, protocol, options, candidates=candidates)


def cross_validate(sources: list[str | GramSource], y: np.ndarray, held: np.ndarray,
                   protocol: Protocol | None = None, options: RunOptions | None = None, *,
                   candidates: list[GramSource] | None = None) -> dict[str, Any]:
    """Nested CV over candidate ``sources`` of the same graphs: accuracy of an SVC (or RMSE
    and R² of a regression, or another :class:`Task`'s scores); see the module docstring.

    Parameters
    ----------
    sources : list of str or GramSource
        Store paths or sources, selected between in the inner CV.
    y : ndarray of shape (n,)
        Class labels (or targets).
    held : ndarray of shape (n,), bool
        Graphs kept in every training part and out of every test fold (the supervised-fit
        graphs).
    protocol : Protocol, optional
        What is measured (default ``Protocol()``); with ``test_size``, one random split per
        repeat instead of k folds (see :func:`outer_splits`).
    options : RunOptions, optional
        How it runs (default ``RunOptions()``). A fold saved under ``options.out`` is keyed by
        :meth:`FoldSetup.key` (the candidates' :meth:`GramSource.digest` — an append or a rerun
        changes it —, the labels, the C grid, the inner CV, the task) and by its split.
    candidates : list of GramSource, optional
        The sources the inner CV selects among (with C), e.g. weighted sums of the stores
        (:mod:`gramdist.evaluation.combine`); default: one per source.

    Returns
    -------
    dict
        ``accuracy_mean``, ``accuracy_std`` and the other spreads of :meth:`Task.summarise`
        (regression: ``rmse_mean``, ``rmse_std``, ``r2_mean``, ``r2_std``), the protocol
        (``folds``, ``repeats``, ``inner_folds``, ``test_size``, ``c_grid``),
        ``fold_accuracies`` ((repeats, folds) nested list; regression: ``fold_rmse``,
        ``fold_r2``), ``selections``, ``stores``, ``supervised_fit_graphs`` (graphs kept out of
        the test folds because a kernel fit used their labels), ``test_graphs``, ``task`` and
        ``task_reason`` (why that task), ``task_learner``, ``resumed_folds`` (read from
        ``out``), ``fold_seconds`` (each fold's time when it was computed) and, with
        ``per_store``, ``per_store``.
    """
    from gramdist.evaluation.regression import resolve_task

    protocol = protocol or Protocol()
    options = options or RunOptions()
    task, reason = resolve_task(options.task, y, protocol, options.learner)
    setup = FoldSetup(tuple(candidates if candidates is not None else sources), y, protocol, task, held,
                      options.per_store)
    folds, results = run_outer_folds(setup, options)
    extra = {"per_store": [res["per_store"] for res in results]} if options.per_store else {}
    return {
        **summarise(results, folds, protocol, task),
        "supervised_fit_graphs": int(held.sum()),
        "test_graphs": int((~held).sum()),
        "stores": [as_source(s).name for s in sources],
        "task": task.name,
        "task_reason": reason,
        "task_learner": task.describe(),
        **resume_record(results),
        **extra,
    }


__all__ = ["DEFAULT_C_GRID", "Fold", "FoldSetup", "GramSource", "RunOptions", "Task", "check_folds",
           "checkpointed_fold", "cross_validate", "evaluate", "find_stores", "fold_paths", "outer_fold",
           "outer_splits", "run_folds", "run_outer_folds", "summarise"]
