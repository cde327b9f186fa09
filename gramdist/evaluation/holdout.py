"""Fit on a training set, score on a test set given as its own store: K(test, train).

The protocol when a dataset ships a fixed train/test split (e.g. the solubility SDF pair):
``gramdist run`` writes the square K(train, train) store and, with the job's ``test:``
section, the rectangular K(test, train) store, the kernel fitted on the same training graphs.
:func:`evaluate_holdout` then selects (store, C) by a ``inner_folds``-fold CV on the training
graphs only, refits on all of them and scores the test graphs once.

It reuses :func:`~gramdist.evaluation.nested_cv.outer_fold` unchanged: one
:class:`~gramdist.evaluation.nested_cv.Fold` whose training and test graphs are numbered
``0..n_train-1`` and ``n_train..n_train+n_test-1``, and a
:class:`HoldoutSource` (a :class:`~gramdist.evaluation.nested_cv.GramSource`) serves the
training block from the square store and the test block from the rectangular one.

Several settings (a grid run's folders) pair by store name: ``TRAIN/h-3.zarr`` with
``TEST/h-3.zarr``. A pair must come from one computation: the same kernel and parameters, fit
and normalisation, and the test store's columns must be the training store's graphs (the
dataset checksum); otherwise a :class:`~gramdist.errors.StoreError` names the difference.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import GramStore, open_gram
from gramdist.errors import StoreError
from gramdist.evaluation.nested_cv import (
    Fold,
    FoldSetup,
    GramSource,
    RunOptions,
    check_compatible,
    find_stores,
    outer_fold,
)
from gramdist.evaluation.protocols import Protocol


class HoldoutSource(GramSource):
    """Blocks for graphs numbered train first, then test: K(train, train) from ``train``'s
    square store, K(test, train) from ``test``'s rectangular store."""

    def __init__(self, train: str, test: str, n_train: int) -> None:
        super().__init__(train)
        self.test_store = test
        self.n_train = n_train

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if len(train) and train.max() >= self.n_train:
            raise ValueError("holdout: a training index points into the test graphs")
        k_test = _load_rect(self.test_store)
        return self.gram()[np.ix_(train, train)], k_test[np.ix_(test - self.n_train, train)]


def _load_rect(path: str) -> np.ndarray:
    k, _ = open_gram(path)
    return np.ascontiguousarray(k, dtype=np.float64)


def pair_stores(train: list[str], test: list[str]) -> list[tuple[str, str]]:
    """``(train store, test store)`` pairs: one of each, or matched by store name."""
    if len(train) == 1 and len(test) == 1:
        return [(train[0], test[0])]
    by_name = {Path(t).name: t for t in test}
    missing = [Path(s).name for s in train if Path(s).name not in by_name]
    if missing or len(by_name) != len(train):
        extra = sorted(set(by_name) - {Path(s).name for s in train})
        raise StoreError(f"--test: the test stores must match the training stores by name "
                         f"(no test store for {', '.join(missing) or '-'}; no training store for {', '.join(extra) or '-'})")
    return [(s, by_name[Path(s).name]) for s in train]


def check_pair(train: str, test: str) -> np.ndarray:
    """The test graphs' targets, once ``test`` is checked to be K(test, train) of ``train``'s run."""
    tr, te = GramStore.open(train), GramStore.open(test)
    if not te.complete:
        raise StoreError(f"{test}: incomplete store; rerun its job before evaluating")
    if te.symmetric:
        raise StoreError(f"{test}: a square store; --test needs the K(test, train) store of a job with a test: section")
    for what, mine, theirs in (("kernel", tr.kernel, te.kernel), ("fit", tr.fit, te.fit),
                               ("normalisation", tr.normalize, te.normalize),
                               ("training graphs", tr.dataset_checksum, te.dataset_checksum)):
        if mine != theirs:
            raise StoreError(f"{test}: its {what} differs from {train}'s; the test store must come from the same "
                             "kernel, fit and training graphs")
    y = te.labels()
    if y is None:
        raise StoreError(f"{test}: the test graphs have no labels or targets")
    return y


def evaluate_holdout(train_stores: list[str], test_stores: list[str], protocol: Protocol | None = None,
                     options: RunOptions | None = None) -> dict[str, Any]:
    """Select (store, C) by CV on the training graphs, refit, score the test graphs once.

    Parameters
    ----------
    train_stores : list of str
        Square K(train, train) stores (or folders of them).
    test_stores : list of str
        Their K(test, train) stores, one per training store (paired by name).
    protocol : Protocol, optional
        Its ``inner_folds`` and ``c_grid`` (and ``inner_holdout``) make the selection on the
        training graphs; the outer split is the given test set. Default ``Protocol()``.
    options : RunOptions, optional
        ``seed`` (of the selection's splits), ``task``, ``learner``. Default ``RunOptions()``.

    Returns
    -------
    dict
        The task's scores on the test graphs (``accuracy`` in %, or ``rmse`` and ``r2``),
        ``store`` and ``test_store`` (the chosen pair), ``C``, ``inner_score`` (the selection
        CV's best mean score), ``train_graphs``, ``test_graphs``, ``inner_folds``, ``c_grid``,
        ``stores`` (training stores), ``task``, ``task_reason``, ``task_learner``.
    """
    from gramdist.evaluation.regression import resolve_task

    protocol = protocol or Protocol()
    options = options or RunOptions()
    train_stores = find_stores(train_stores)
    pairs = pair_stores(train_stores, find_stores(test_stores))
    y_train, _ = check_compatible(train_stores)
    tests = [check_pair(a, b) for a, b in pairs]
    y_test = tests[0]
    if any(not np.array_equal(t, y_test) for t in tests[1:]):
        raise StoreError("--test: the test stores hold different test graphs")
    y = np.concatenate([y_train, y_test])
    task, reason = resolve_task(options.task, y, protocol, options.learner)
    n_train, n_test = len(y_train), len(y_test)
    setup = FoldSetup(tuple(HoldoutSource(a, b, n_train) for a, b in pairs), y, protocol, task)
    res = outer_fold(setup, Fold(0, 0, np.arange(n_train), n_train + np.arange(n_test), options.seed))
    scores = {k: res[k] for k in ("accuracy", "rmse", "r2") if k in res}
    if "accuracy" in scores:
        scores["accuracy"] *= 100
    chosen = dict(pairs)[res["store"]]
    return {**scores, "store": res["store"], "test_store": chosen, "C": res["C"], "inner_score": res["inner_score"],
            "train_graphs": n_train, "test_graphs": n_test, "inner_folds": protocol.inner_folds,
            "c_grid": list(protocol.c_grid), "stores": [os.fspath(s) for s in train_stores], "task": task.name,
            "task_reason": reason, "task_learner": task.describe()}
