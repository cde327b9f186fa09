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

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import open_gram, open_store, read_graph_ids, read_kernel_attrs, read_labels
from gramdist.errors import StoreError

DEFAULT_C_GRID = tuple(10.0**k for k in range(-3, 4))


def find_stores(paths: list[str]) -> list[str]:
    """Expand folders of stores (a grid run's output) into the store paths, sorted."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if (path / "zarr.json").exists() and _is_gram_store(path):
            out.append(str(path))
        elif path.is_dir():
            found = sorted(str(c) for c in path.iterdir() if (c / "zarr.json").exists() and _is_gram_store(c))
            if not found:
                raise StoreError(f"{p}: no gramdist stores found in this folder")
            out.extend(found)
        else:
            raise StoreError(f"{p}: no such store")
    return out


def _is_gram_store(path: Path) -> bool:
    try:
        open_store(path)
        return True
    except StoreError:
        return False


@lru_cache(maxsize=4)
def _load(path: str) -> np.ndarray:
    k, _ = open_gram(path)
    return np.ascontiguousarray(k, dtype=np.float64)


def supervised_graph_ids(stores: list[str]) -> np.ndarray:
    """Union over the stores of the ``graph_ids`` whose class labels the kernel fit used
    (state attribute ``supervised_graph_ids``; absent for unsupervised kernels)."""
    ids: list[int] = []
    for s in stores:
        root = open_store(s)
        ids.extend(int(i) for i in read_kernel_attrs(root).get("supervised_graph_ids", []))
    return np.unique(np.asarray(ids, dtype=np.int64))


def check_compatible(stores: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Labels and graph ids shared by all stores; :class:`StoreError` if they hold different graphs."""
    ref_y = ref_ids = None
    ref_sum = None
    for s in stores:
        root = open_store(s)
        if not root.attrs.get("complete"):
            raise StoreError(f"{s}: incomplete store; rerun its job before evaluating")
        if not root.attrs.get("symmetric"):
            raise StoreError(f"{s}: rectangular (test x train) store; evaluate needs a square Gram")
        y = read_labels(root, s)
        if y is None:
            raise StoreError(f"{s}: the dataset has no class labels")
        ids = read_graph_ids(root, s)
        checksum = root.attrs.get("dataset_checksum")
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

    def max_splits(self, y: np.ndarray) -> int:
        """The most folds ``y`` allows (each class in every fold)."""
        return int(np.bincount(_codes(y)).min())

    def inner_score(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return float(np.mean(y_pred == y_true))

    def outer_scores(self, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
        return {"accuracy": float(np.mean(y_pred == y_true))}


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
) -> dict[str, Any]:
    """Select (store, C) by inner CV on ``train``, refit, and score on ``test``.

    ``stores`` are store paths or :class:`GramSource` objects; ``c_grid`` the values of the
    task's regularisation parameter (C). ``held`` (bool, one per graph): graphs that stay in
    every inner training part and are never used for inner validation (the supervised-fit
    graphs, see the module docstring).
    """
    task = task or Task(c_grid)
    sources = [as_source(s) for s in stores]
    y_tr = y[train]
    fixed = np.flatnonzero(held[train]) if held is not None else np.zeros(0, np.int64)
    free = np.setdiff1d(np.arange(len(train)), fixed)
    n_splits = max(2, min(inner_folds, task.max_splits(y_tr[free])))
    inner = [(np.sort(np.concatenate([fixed, free[a]])), free[b]) for a, b in
             task.splitter(n_splits, inner_seed).split(free, y_tr[free])]
    best = (-np.inf, 0, c_grid[0])
    for s, source in enumerate(sources):
        k_tr, _ = source.blocks(train, test)
        for c in c_grid:
            scores = []
            for itr, ite in inner:
                model = task.model(c).fit(k_tr[np.ix_(itr, itr)], y_tr[itr])
                scores.append(task.inner_score(y_tr[ite], model.predict(k_tr[np.ix_(ite, itr)])))
            score = float(np.mean(scores))
            if score > best[0] + 1e-12:
                best = (score, s, c)
    _, s, c = best
    k_tr, k_te = sources[s].blocks(train, test)
    model = task.model(c).fit(k_tr, y_tr)
    scores = task.outer_scores(y[test], model.predict(k_te))
    headline = next(iter(scores))
    return {**scores, "score": scores[headline], "store": sources[s].name, "C": c, "inner_accuracy": best[0],
            "inner_score": best[0]}


def _codes(y: np.ndarray) -> np.ndarray:
    return np.unique(y, return_inverse=True)[1]


def outer_splits(y: np.ndarray, held: np.ndarray, folds: int, repeats: int, seed: int,
                 test_size: float | None = None) -> list[tuple[int, int, np.ndarray, np.ndarray, int]]:
    """The outer splits of a nested CV: ``(repeat, fold, train, test, inner_seed)`` tuples.

    Each repeat ``r`` is a stratified ``folds``-fold split shuffled with seed ``seed + r``, or,
    with ``test_size`` (a fraction), one stratified random split holding out that fraction
    (``folds`` is then 1 per repeat). The splits are drawn over the graphs not ``held``; the
    held graphs join every training part (see the module docstring).
    """
    from sklearn.model_selection import StratifiedKFold, StratifiedShuffleSplit

    free = np.flatnonzero(~held)
    fixed = np.flatnonzero(held)
    jobs = []
    for r in range(repeats):
        if test_size is None:
            splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed + r)
        else:
            splitter = StratifiedShuffleSplit(n_splits=1, test_size=test_size, random_state=seed + r)
        for f, (train, test) in enumerate(splitter.split(np.zeros(len(free)), y[free])):
            jobs.append((r, f, np.sort(np.concatenate([fixed, free[train]])), np.sort(free[test]),
                         seed + 1000 * (r + 1) + f))
    return jobs


def check_folds(y: np.ndarray, held: np.ndarray, folds: int, test_size: float | None = None) -> None:
    """:class:`StoreError` if the classes of the testable graphs cannot fill the outer folds."""
    if test_size is not None:
        if not 0 < test_size < 1:
            raise StoreError(f"the test fraction must lie in (0, 1), got {test_size}")
        folds = 2  # every class needs a graph on both sides
    elif folds < 2:
        raise StoreError("--folds must be at least 2")
    free = np.flatnonzero(~held)
    counts = np.bincount(_codes(y)[free], minlength=len(np.unique(y)))
    smallest = int(counts.min())
    if smallest < folds:
        n_held = int(held.sum())
        why = (f" after keeping the {n_held} graphs whose labels the kernel fit used out of the test folds; "
               "fit on a smaller sample (fit.sample_size)" if n_held else "")
        raise StoreError(f"the smallest class has {smallest} graphs{why}, fewer than --folds {folds}")


def run_folds(fn: Any, args: list[tuple[Any, ...]], client: Any = None) -> list[dict[str, Any]]:
    """``fn(*a)`` for every outer fold's arguments ``a``: tasks on ``client``'s cluster, or here."""
    if client is None:
        return [fn(*a) for a in args]
    return client.gather([client.submit(fn, *a, pure=False) for a in args])


def summarise(results: list[dict[str, Any]], jobs: list[tuple[int, int, np.ndarray, np.ndarray, int]],
              repeats: int, **protocol: Any) -> dict[str, Any]:
    """Accuracy and its spreads over the outer folds of ``jobs`` (their ``results``), with the
    ``protocol`` keywords (``folds``, ``inner_folds``, ``test_size``, ``c_grid``) recorded.

    ``accuracy_std``: population standard deviation (ddof 0) of the per-repeat mean accuracies
    (the figure earlier REPRODUCTION rows quote); ``accuracy_std_sample``: the same with ddof 1
    (the "standard deviation over the runs" of the papers); ``accuracy_se``: its standard
    error over the repeats, ``accuracy_std_sample / sqrt(repeats)`` (what "standard errors"
    over repeated CV quote); ``accuracy_fold_std``: sample standard deviation over all outer
    folds (the only spread of a single repeat). All in percent; NaN where undefined.
    """
    acc = np.array([res["accuracy"] for res in results]).reshape(repeats, -1)
    per_repeat = acc.mean(axis=1)
    sample = float(per_repeat.std(ddof=1) * 100) if repeats > 1 else float("nan")
    folds, test_size = protocol.pop("folds", acc.shape[1]), protocol.get("test_size")
    return {
        **{k: (list(v) if k == "c_grid" else v) for k, v in protocol.items()},
        "folds": folds if test_size is None else 1,
        "repeats": repeats,
        "accuracy_mean": float(acc.mean() * 100),
        "accuracy_std": float(per_repeat.std() * 100),
        "accuracy_std_sample": sample,
        "accuracy_se": sample / float(np.sqrt(repeats)) if repeats > 1 else float("nan"),
        "accuracy_fold_std": float(acc.std(ddof=1) * 100) if acc.size > 1 else float("nan"),
        "fold_accuracies": (acc * 100).round(4).tolist(),
        "selections": [{"repeat": r, "fold": f, "store": res["store"], "C": res["C"]}
                       for (r, f, *_), res in zip(jobs, results)],
    }


def evaluate(
    stores: list[str],
    *,
    folds: int = 10,
    repeats: int = 10,
    seed: int = 0,
    inner_folds: int = 5,
    c_grid: tuple[float, ...] = DEFAULT_C_GRID,
    client: Any = None,
    test_size: float | None = None,
    task: Task | None = None,
) -> dict[str, Any]:
    """Nested CV accuracy of an SVC on the given stores; see the module docstring.

    Parameters
    ----------
    stores : paths of complete, square stores over the same graphs (grid outputs may be
        given as their folder; see :func:`find_stores`).
    folds, repeats, seed : outer stratified k-fold, repeated with seeds ``seed + r``.
    inner_folds : folds of the inner CV that selects (store, C).
    c_grid : candidate values of C.
    client : a ``distributed.Client`` to run the outer folds on; ``None`` runs them in this
        process (serially).
    test_size : instead of k folds, one stratified random split per repeat testing this
        fraction of the graphs (e.g. 0.2: the MLG paper's protocol); see :func:`outer_splits`.
    task : the :class:`Task` (learner, inner splitter, scores); default: SVC classification.

    Returns
    -------
    dict with ``accuracy_mean``, ``accuracy_std`` and the other spreads of :func:`summarise`,
    ``folds``, ``repeats``, ``fold_accuracies`` ((repeats, folds) nested list), ``selections``,
    ``stores``, ``supervised_fit_graphs`` (graphs kept out of the test folds because a kernel
    fit used their labels) and ``test_graphs``.
    """
    stores = find_stores(stores)
    y, ids = check_compatible(stores)
    held = np.isin(ids, supervised_graph_ids(stores))
    check_folds(y, held, folds, test_size)
    jobs = outer_splits(y, held, folds, repeats, seed, test_size)
    args = [(tuple(stores), y, tr, te, tuple(c_grid), inner_folds, s, held if held.any() else None, task)
            for _, _, tr, te, s in jobs]
    results = run_folds(outer_fold, args, client)
    return {
        **summarise(results, jobs, repeats, folds=folds, inner_folds=inner_folds, test_size=test_size,
                    c_grid=c_grid),
        "supervised_fit_graphs": int(held.sum()),
        "test_graphs": int((~held).sum()),
        "stores": [os.fspath(s) for s in stores],
    }
