"""Nested cross-validation of ``SVC(kernel="precomputed")`` on one or several Gram stores.

Protocol (the one the kernel papers use): for each of ``repeats`` repetitions, an outer
stratified ``folds``-fold split (shuffled with seed ``seed + repeat``); on each outer training
part, an inner stratified ``inner_folds``-fold CV selects the pair (store, C) with the best
mean inner accuracy — so several stores of the same graphs (one kernel at several
hyperparameter settings) are selected *inside* the training folds, never on test folds —
then an SVC with that pair is refitted on the whole outer training part and scored on the
outer test fold. Ties go to the earlier store and the smaller C.

Reported: ``accuracy_mean`` (mean over all outer folds of all repeats), ``accuracy_std``
(standard deviation over repeats of each repeat's mean accuracy, the figure papers quote for
"10 × 10-fold CV"), and the per-fold selections. Outer folds run as tasks on a Dask cluster;
each worker reads the Grams from the stores itself.

Resume. With ``out`` (``gramdist evaluate --out DIR``) each outer fold's result is saved as a
small JSON file as soon as the fold finishes, named by its repeat, its fold and a key of
everything that decides it (the candidates' names and content digests, the labels, the C
grid, the inner CV, the task, the split). A rerun reads the folds it finds and computes the
rest, so a 10 × 10-fold evaluation that runs for hours survives an interruption; a store
changed in between (an append, a rerun) has another digest, and its folds are recomputed.

Regression. A continuous target (``y`` with a value that is not a whole number, or
``task="regression"``) runs the same protocol with
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
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import GramStore, Location, is_gram_store, open_gram, open_store, store_version
from gramdist.errors import StoreError
from gramdist.kernels.base import as_jsonable

DEFAULT_C_GRID = tuple(10.0**k for k in range(-3, 4))


def find_stores(paths: list[str], is_store: Callable[[Path], bool] | None = None, kind: str = "") -> list[str]:
    """Expand folders of stores (a grid run's output) into the store paths, sorted.

    ``is_store`` tells a store of the wanted kind (default: a Gram store); ``kind`` names it
    in the error for a folder without any (e.g. ``"feature "``).
    """
    is_store = is_store or is_gram_store
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if is_store(path):  # a damaged store is one too: opening it says what is wrong
            out.append(str(path))
        elif path.is_dir():
            found = sorted(str(c) for c in path.iterdir() if is_store(c))
            if not found:
                raise StoreError(f"{p}: no gramdist {kind}stores found in this folder")
            out.extend(found)
        else:
            raise StoreError(f"{p}: no such store")
    return out


@lru_cache(maxsize=4)
def _load_version(path: str, version: Any) -> np.ndarray:
    k, _ = open_gram(path)
    return np.ascontiguousarray(k, dtype=np.float64)


def _load(path: str) -> np.ndarray:
    """The store's Gram as float64, loaded once per process for as long as the store is
    unchanged (an append or a rerun makes it load again)."""
    return _load_version(path, store_version(Location(path)))


_load.cache_clear = _load_version.cache_clear  # type: ignore[attr-defined]


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


class Task:
    """What the nested CV learns and how it scores: here classification by an SVC.

    ``params`` are the regularisation values the inner CV chooses from (C for the SVC);
    ``model(param)`` is an estimator taking a precomputed Gram; ``inner_score`` is maximised
    by the selection; ``outer_scores`` are reported per outer fold (the first is the headline).
    """

    name = "classification"

    def __init__(self, params: tuple[float, ...] = DEFAULT_C_GRID) -> None:
        self.params = tuple(params)

    def model(self, param: float) -> Any:
        from sklearn.svm import SVC

        return SVC(kernel="precomputed", C=param)

    def splitter(self, n_splits: int, seed: int) -> Any:
        from sklearn.model_selection import StratifiedKFold

        return StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)

    def inner_splitter(self, n_splits: int, seed: int) -> Any:
        """The splits of the inner selection (by default the same kind as the outer ones)."""
        return self.splitter(n_splits, seed)

    def max_splits(self, y: np.ndarray) -> int:
        """The most folds ``y`` allows (each class in every fold)."""
        return int(np.bincount(_codes(y)).min())

    def outer_limit(self, y: np.ndarray, free: np.ndarray) -> int:
        """The most outer folds over the graphs ``free`` (every class of ``y`` in every fold)."""
        return int(np.bincount(_codes(y)[free], minlength=len(np.unique(y))).min())

    def too_few(self, limit: int, why: str, folds: int) -> str:
        """The error when ``y`` allows only ``limit`` < ``folds`` outer folds."""
        return f"the smallest class has {limit} graphs{why}, fewer than --folds {folds}"

    def inner_score(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return float(np.mean(y_pred == y_true))

    def outer_scores(self, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
        return {"accuracy": float(np.mean(y_pred == y_true))}

    def summarise(self, fold_scores: list[dict[str, float]], repeats: int, folds: int
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The headline figures and the per-fold tables of :func:`evaluate`'s result."""
        acc = np.array([s["accuracy"] for s in fold_scores]).reshape(repeats, folds)
        return accuracy_spreads(acc), {"fold_accuracies": (acc * 100).round(4).tolist()}

    def describe(self) -> str:
        return "SVC"


def accuracy_spreads(acc: np.ndarray) -> dict[str, float]:
    """The mean accuracy and its spreads, in percent, from the (repeats, folds) accuracies.

    ``accuracy_std``: population standard deviation (ddof 0) of the per-repeat mean accuracies
    (the figure earlier REPRODUCTION rows quote); ``accuracy_std_sample``: the same with ddof 1
    (the "standard deviation over the runs" of the papers); ``accuracy_se``: its standard
    error over the repeats, ``accuracy_std_sample / sqrt(repeats)`` (what "standard errors"
    over repeated CV quote); ``accuracy_fold_std``: sample standard deviation over all outer
    folds (the only spread of a single repeat). NaN where undefined.
    """
    repeats = acc.shape[0]
    per_repeat = acc.mean(axis=1)
    sample = float(per_repeat.std(ddof=1) * 100) if repeats > 1 else float("nan")
    return {
        "accuracy_mean": float(acc.mean() * 100),
        "accuracy_std": float(per_repeat.std() * 100),
        "accuracy_std_sample": sample,
        "accuracy_se": sample / float(np.sqrt(repeats)) if repeats > 1 else float("nan"),
        "accuracy_fold_std": float(acc.std(ddof=1) * 100) if acc.size > 1 else float("nan"),
    }


def outer_fold(
    stores: tuple[str | GramSource, ...],
    y: np.ndarray,
    train: np.ndarray,
    test: np.ndarray,
    c_grid: tuple[float, ...],
    inner_folds: int,
    inner_seed: int,
    held: np.ndarray | None = None,
    task: Task | None = None,
    per_store: bool = False,
) -> dict[str, Any]:
    """Select (store, C) by inner CV on ``train``, refit, and score on ``test``.

    ``stores`` are store paths or :class:`GramSource` objects; ``c_grid`` the values of the
    task's regularisation parameter (C). ``held`` (bool, one per graph): graphs that stay in
    every inner training part and are never used for inner validation (the supervised-fit
    graphs, see the module docstring). ``per_store``: also score every store on ``test`` with
    its own inner-CV choice of C (result key ``per_store``: what each setting would give on
    its own, for plots).
    """
    task = task or Task(c_grid)
    sources = [as_source(s) for s in stores]
    y_tr = y[train]
    fixed = np.flatnonzero(held[train]) if held is not None else np.zeros(0, np.int64)
    free = np.setdiff1d(np.arange(len(train)), fixed)
    n_splits = max(2, min(inner_folds, task.max_splits(y_tr[free])))
    inner = [(np.sort(np.concatenate([fixed, free[a]])), free[b]) for a, b in
             task.inner_splitter(n_splits, inner_seed).split(free, y_tr[free])]
    best = (-np.inf, 0, c_grid[0])
    store_best = []
    for s, source in enumerate(sources):
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
    k_tr, k_te = sources[s].blocks(train, test)
    model = task.model(c).fit(k_tr, y_tr)
    scores = task.outer_scores(y[test], model.predict(k_te))
    headline = next(iter(scores))
    out = {**scores, "score": scores[headline], "store": sources[s].name, "C": c, "inner_accuracy": best[0],
           "inner_score": best[0]}
    if per_store:
        out["per_store"] = [_score_alone(source, task, c_s, inner_s, y, train, test)
                            for source, (inner_s, c_s) in zip(sources, store_best)]
    return out


def _score_alone(source: GramSource, task: Task, c: float, inner_score: float, y: np.ndarray,
                 train: np.ndarray, test: np.ndarray) -> dict[str, Any]:
    """One store refitted with its own best C and scored on the outer test graphs."""
    k_tr, k_te = source.blocks(train, test)
    scores = task.outer_scores(y[test], task.model(c).fit(k_tr, y[train]).predict(k_te))
    return {"store": source.name, "C": c, "inner_score": inner_score, **scores}


def _codes(y: np.ndarray) -> np.ndarray:
    return np.unique(y, return_inverse=True)[1]


def outer_splits(y: np.ndarray, held: np.ndarray, folds: int, repeats: int, seed: int,
                 test_size: float | None = None, task: Task | None = None
                 ) -> list[tuple[int, int, np.ndarray, np.ndarray, int]]:
    """The outer splits of a nested CV: ``(repeat, fold, train, test, inner_seed)`` tuples.

    Each repeat ``r`` is the task's ``folds``-fold split (stratified for classification)
    shuffled with seed ``seed + r``, or, with ``test_size`` (a fraction), one random split
    holding out that fraction (stratified for classification; ``folds`` is then 1 per repeat).
    The splits are drawn over the graphs not ``held``; the held graphs join every training
    part (see the module docstring).
    """
    from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit

    task = task or Task()
    free = np.flatnonzero(~held)
    fixed = np.flatnonzero(held)
    jobs = []
    for r in range(repeats):
        if test_size is None:
            splitter = task.splitter(folds, seed + r)
        elif task.name == "regression":
            splitter = ShuffleSplit(n_splits=1, test_size=test_size, random_state=seed + r)
        else:
            splitter = StratifiedShuffleSplit(n_splits=1, test_size=test_size, random_state=seed + r)
        for f, (train, test) in enumerate(splitter.split(np.zeros(len(free)), y[free])):
            jobs.append((r, f, np.sort(np.concatenate([fixed, free[train]])), np.sort(free[test]),
                         seed + 1000 * (r + 1) + f))
    return jobs


def check_folds(y: np.ndarray, held: np.ndarray, folds: int, test_size: float | None = None,
                task: Task | None = None) -> None:
    """:class:`StoreError` if the testable graphs cannot fill the outer folds (for
    classification: every class in every fold)."""
    task = task or Task()
    if test_size is not None:
        if not 0 < test_size < 1:
            raise StoreError(f"the test fraction must lie in (0, 1), got {test_size}")
        folds = 2  # every class needs a graph on both sides
    elif folds < 2:
        raise StoreError("--folds must be at least 2")
    limit = task.outer_limit(y, np.flatnonzero(~held))
    if limit < folds:
        n_held = int(held.sum())
        why = (f" after keeping the {n_held} graphs whose labels the kernel fit used out of the test folds; "
               "fit on a smaller sample (fit.sample_size)" if n_held else "")
        raise StoreError(task.too_few(limit, why, folds))


def run_folds(fn: Any, args: list[tuple[Any, ...]], client: Any = None) -> list[dict[str, Any]]:
    """``fn(*a)`` for every outer fold's arguments ``a``: tasks on ``client``'s cluster, or here."""
    if client is None:
        return [fn(*a) for a in args]
    return client.gather([client.submit(fn, *a, pure=False) for a in args])


def fold_paths(out: str | os.PathLike | None, common: str,
               jobs: list[tuple[int, int, np.ndarray, np.ndarray, int]]) -> list[str | None]:
    """Where each outer fold's result is saved: ``out/fold-rRR-fFF-<key>.json``, the key a hash
    of ``common`` (what every fold's result depends on: the candidates and their digests, the
    C grid, the inner CV, the task) and of the fold's own split and inner seed. ``out`` None:
    nothing is saved."""
    if out is None:
        return [None] * len(jobs)
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder}: not a folder; --out names the folder of the per-fold results")
    folder.mkdir(parents=True, exist_ok=True)
    paths: list[str | None] = []
    for r, f, train, test, inner_seed in jobs:
        h = hashlib.blake2b(digest_size=8)
        h.update(common.encode())
        h.update(train.tobytes())
        h.update(test.tobytes())
        h.update(str(inner_seed).encode())
        paths.append(str(folder / f"fold-r{r:02d}-f{f:02d}-{h.hexdigest()}.json"))
    return paths


def checkpointed_fold(path: str | None, stores: tuple[str | GramSource, ...], y: np.ndarray, train: np.ndarray,
                      test: np.ndarray, c_grid: tuple[float, ...], inner_folds: int, inner_seed: int,
                      held: np.ndarray | None = None, task: Task | None = None, per_store: bool = False
                      ) -> dict[str, Any]:
    """:func:`outer_fold`, its result read from ``path`` if an earlier run finished the fold
    (``resumed: True``), else computed and saved there atomically, with ``seconds`` (the fold's
    time) and ``n_train``/``n_test``. ``path`` None: computed, not saved."""
    if path and os.path.exists(path):
        with open(path) as fh:
            return {**json.load(fh), "resumed": True}
    t0 = time.perf_counter()
    res = as_jsonable(outer_fold(stores, y, train, test, c_grid, inner_folds, inner_seed, held, task, per_store))
    res["seconds"] = time.perf_counter() - t0
    res["n_train"], res["n_test"] = int(len(train)), int(len(test))
    if path:
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w") as fh:
            json.dump(res, fh, sort_keys=True)
        os.replace(tmp, path)
    return {**res, "resumed": False}


def summarise(results: list[dict[str, Any]], jobs: list[tuple[int, int, np.ndarray, np.ndarray, int]],
              repeats: int, task: Task | None = None, **protocol: Any) -> dict[str, Any]:
    """The task's scores and their spreads over the outer folds of ``jobs`` (their
    ``results``; see :meth:`Task.summarise`), the ``protocol`` keywords (``folds``,
    ``inner_folds``, ``test_size``, ``c_grid``) recorded, and each fold's selection."""
    task = task or Task()
    per_repeat = len(results) // repeats
    folds, test_size = protocol.pop("folds", per_repeat), protocol.get("test_size")
    head, per_fold = task.summarise(results, repeats, per_repeat)
    return {
        **{k: (list(v) if k == "c_grid" else v) for k, v in protocol.items()},
        "folds": folds if test_size is None else 1,
        "repeats": repeats,
        **head,
        **per_fold,
        "selections": [{"repeat": r, "fold": f, "store": res["store"], "C": res["C"]}
                       for (r, f, *_), res in zip(jobs, results)],
    }


def evaluate(stores: list[str], **protocol: Any) -> dict[str, Any]:
    """Nested CV accuracy of an SVC (or RMSE and R² of a regression) on the given stores; see
    the module docstring.

    ``stores``: paths of complete, square stores over the same graphs (grid outputs may be
    given as their folder; see :func:`find_stores`); ``protocol``: the keyword arguments of
    :func:`cross_validate` (``folds``, ``repeats``, ``seed``, ``inner_folds``, ``c_grid``,
    ``test_size``, ``client``, ``task``, ``learner``, ``per_store``, ``candidates``). Returns
    :func:`cross_validate`'s dict.
    """
    stores = find_stores(stores)
    y, ids = check_compatible(stores)
    held = np.isin(ids, supervised_graph_ids(stores))
    return cross_validate(stores, y, held, **protocol)


def cross_validate(
    sources: list[str | GramSource],
    y: np.ndarray,
    held: np.ndarray,
    *,
    folds: int = 10,
    repeats: int = 10,
    seed: int = 0,
    inner_folds: int = 5,
    c_grid: tuple[float, ...] = DEFAULT_C_GRID,
    test_size: float | None = None,
    client: Any = None,
    task: str | Task = "auto",
    learner: str = "krr",
    per_store: bool = False,
    candidates: list[GramSource] | None = None,
    out: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Nested CV over candidate ``sources`` of the same graphs: accuracy of an SVC (or RMSE
    and R² of a regression, or another :class:`Task`'s scores); see the module docstring.

    Parameters
    ----------
    sources : store paths or :class:`GramSource` objects, selected between in the inner CV.
    y : (N,) class labels (or targets).
    held : (N,) bool, graphs kept in every training part and out of every test fold (the
        supervised-fit graphs).
    folds, repeats, seed : outer k-fold (stratified for classification), repeated with seeds
        ``seed + r``.
    inner_folds : folds of the inner CV that selects (source, C).
    c_grid : candidate values of C.
    test_size : instead of k folds, one random split per repeat testing this fraction of the
        graphs (e.g. 0.2: the MLG paper's protocol); see :func:`outer_splits`.
    client : a ``distributed.Client`` to run the outer folds on; ``None`` runs them in this
        process (serially).
    task : ``"auto"`` (regression when a target is not a whole number), ``"classification"``,
        ``"regression"`` or a :class:`Task` (e.g. a paper's protocol, a linear model on feature
        stores); see :mod:`gramdist.evaluation.regression`.
    learner : the regression learner, ``"krr"`` or ``"svr"``.
    per_store : also score each source alone in every outer fold (result key ``per_store``).
    candidates : the :class:`GramSource` objects the inner CV selects among (with C), e.g.
        weighted sums of the stores (:mod:`gramdist.evaluation.combine`); default: one per source.
    out : folder of the per-outer-fold results (:func:`fold_paths`): a fold found there is read,
        not computed, so an interrupted evaluation resumes. A fold's key covers the candidates'
        :meth:`GramSource.digest` (an append or a rerun changes it), the labels, the C grid,
        the inner CV and the task, and the split itself; None saves nothing.

    Returns
    -------
    dict with ``accuracy_mean``, ``accuracy_std`` and the other spreads of
    :meth:`Task.summarise` (regression: ``rmse_mean``, ``rmse_std``, ``r2_mean``, ``r2_std``),
    ``folds``, ``repeats``, ``fold_accuracies`` ((repeats, folds) nested list; regression:
    ``fold_rmse``, ``fold_r2``), ``selections``, ``stores``, ``supervised_fit_graphs`` (graphs
    kept out of the test folds because a kernel fit used their labels), ``test_graphs``,
    ``task`` and ``task_reason`` (why that task), ``resumed_folds`` (read from ``out``) and
    ``fold_seconds`` (each fold's time when it was computed).
    """
    from gramdist.evaluation.regression import resolve_task

    task, reason = resolve_task(task, y, tuple(c_grid), learner)
    stores = list(sources)
    check_folds(y, held, folds, test_size, task)
    jobs = outer_splits(y, held, folds, repeats, seed, test_size, task)
    chosen_from = tuple(as_source(c) for c in (candidates if candidates is not None else stores))
    paths = fold_paths(out, fold_key(chosen_from, y, held, c_grid, inner_folds, task, per_store) if out else "", jobs)
    args = [(path, chosen_from, y, tr, te, tuple(c_grid), inner_folds, s, held if held.any() else None, task, per_store)
            for path, (_, _, tr, te, s) in zip(paths, jobs)]
    results = run_folds(checkpointed_fold, args, client)
    extra = {"per_store": [res["per_store"] for res in results]} if per_store else {}
    return {
        **summarise(results, jobs, repeats, task, folds=folds, inner_folds=inner_folds, test_size=test_size,
                    c_grid=c_grid),
        "supervised_fit_graphs": int(held.sum()),
        "test_graphs": int((~held).sum()),
        "stores": [as_source(s).name for s in stores],
        "task": task.name,
        "task_reason": reason,
        "task_learner": task.describe(),
        **resume_record(results),
        **extra,
    }


def resume_record(results: list[dict[str, Any]]) -> dict[str, Any]:
    """``resumed_folds`` (how many of the :func:`checkpointed_fold` results were read back) and
    ``fold_seconds`` (each fold's time when it was computed)."""
    return {"resumed_folds": int(sum(bool(r.get("resumed")) for r in results)),
            "fold_seconds": [float(r.get("seconds", float("nan"))) for r in results]}


def fold_key(sources: tuple[GramSource, ...], y: np.ndarray, held: np.ndarray, c_grid: tuple[float, ...],
             inner_folds: int, task: Task, per_store: bool = False) -> str:
    """What every saved fold of a nested CV depends on besides its split (the ``common`` of
    :func:`fold_paths`): the candidates' names and :meth:`GramSource.digest`, the labels and the
    held graphs, the C grid, the inner CV, the task and its settings."""
    from gramdist.arrayops import digest_arrays

    settings = {k: repr(v) for k, v in sorted(vars(task).items())}
    return json.dumps({"sources": [[s.name, s.digest()] for s in sources], "c_grid": list(c_grid),
                       "inner_folds": inner_folds, "task": [type(task).__name__, settings], "per_store": per_store,
                       "labels": digest_arrays({"y": np.asarray(y), "held": np.asarray(held)})}, sort_keys=True)
