"""Fit a streamed linear model on a training feature store, score it on test feature stores.

The protocol of a library with fixed splits (MOSES: 1.58 M training molecules, a random and a
scaffold test set), at a size where no Gram and no in-memory row matrix fits: ``gramdist
evaluate TRAIN.zarr --test RANDOM.zarr SCAFFOLD.zarr``.

* The learner is :mod:`~gramdist.evaluation.linear`'s streamed one: ridge regression
  (:class:`~gramdist.evaluation.linear.StreamedLinearRegressor`) for a continuous target, a
  linear SVM (:class:`~gramdist.evaluation.linear.StreamedLinearSVM`) for classes; rows are
  read chunk by chunk, hashed to ``2**hash_bits`` columns, never loaded whole.
* The penalty (``alpha`` for ridge, C for the SVM) is chosen on a validation part of the
  training store (``validation`` of its rows, drawn with ``seed``), by RMSE or accuracy;
  the model is then refitted on every training row and scores each test store once.
* The stores must come from one featurisation: the same kernel and parameters, normalisation
  and kind of rows (explicit or Nyström); Nyström rows must also share the fitted state
  (``fit.from_store``), which is checked through the state digest.

Returns RMSE, MAE and R² (regression) or accuracy (classification) per test store, with the
chosen penalty, the validation scores of every candidate and the seconds each step took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.engine.store import FeatureStore
from gramdist.errors import StoreError
from gramdist.evaluation.linear import (
    InMemoryChunks,
    RowSet,
    StreamedLinearRegressor,
    StreamedLinearSVM,
    default_hash_bits,
)
from gramdist.evaluation.regression import is_continuous

#: ridge penalties tried (per training row, sklearn's ``alpha``) and SVM Cs
ALPHA_GRID = (1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)


def _identity(store: FeatureStore) -> dict[str, Any]:
    """What must agree between the training store and a test store."""
    out = {"kernel": store.kernel, "normalize": store.normalize, "sparse": store.sparse}
    if not store.sparse:  # Nyström rows: the basis is the fitted state
        from gramdist.engine.store.state import state_digest

        out["state"] = state_digest(store.read_state())
    return out


def _check_pair(train: FeatureStore, test: FeatureStore) -> None:
    a, b = _identity(train), _identity(test)
    diff = [k for k in a if a[k] != b[k]]
    if diff:
        raise StoreError(f"{test.location}: not featurised as {train.location} ({', '.join(diff)} differ); make "
                         "the test store with the training job's kernel and fit.from_store")
    if test.labels() is None:
        raise StoreError(f"{test.location}: has no targets to score against")


def _metrics(y: np.ndarray, pred: np.ndarray, regression: bool) -> dict[str, float]:
    if not regression:
        return {"accuracy": float(100.0 * np.mean(pred == y))}
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    return {"rmse": float(np.sqrt(mean_squared_error(y, pred))), "mae": float(mean_absolute_error(y, pred)),
            "r2": float(r2_score(y, pred))}


def _model(regression: bool, penalty: float, settings: HoldoutSettings) -> Any:
    kw = {"epochs": settings.epochs, "hash_bits": settings.hash_bits, "seed": settings.seed}
    return StreamedLinearRegressor(alpha=penalty, **kw) if regression else StreamedLinearSVM(C=penalty, **kw)


@dataclass(frozen=True)
class Rows:
    """A set of rows to learn from or score: a feature store's path (or
    :class:`~gramdist.evaluation.linear.InMemoryChunks`), its targets and a name."""

    source: str | InMemoryChunks
    y: np.ndarray
    name: str


@dataclass(frozen=True)
class HoldoutSettings:
    """How the model is chosen and trained (see :func:`evaluate_feature_holdout`)."""

    regression: bool
    epochs: int = 5
    hash_bits: int = 20
    seed: int = 0
    validation: float = 0.1
    grid: tuple[float, ...] | None = None


def evaluate_feature_holdout(train: str, tests: list[str], *, epochs: int = 5, hash_bits: int | None = None,
                             seed: int = 0, validation: float = 0.1, grid: tuple[float, ...] | None = None,
                             task: str = "auto") -> dict[str, Any]:
    """Choose the penalty on a validation part of ``train``, refit on all of it, score ``tests``.

    Parameters
    ----------
    train : a feature store with targets (``y``), N rows.
    tests : feature stores made by the same featurisation (see the module docstring).
    epochs : passes of the streamed learner over its training rows.
    hash_bits : width of the hashed rows (default: by the training store's non-zeros).
    seed : the validation split, the learner's chunk and row orders and its SGD.
    validation : fraction of the training rows held out to choose the penalty.
    grid : penalties to try (default :data:`ALPHA_GRID` or :data:`C_GRID`).
    task : ``auto`` (regression when the targets are not whole numbers), ``regression`` or
        ``classification``.

    Returns
    -------
    dict : ``task``, ``penalty`` (its name and the chosen value), ``validation`` (score per
        candidate), ``tests`` (per test store: its path, graph count and metrics), ``seconds``.
    """
    store = FeatureStore.open(train)
    store.check_complete()
    y = store.labels()
    if y is None:
        raise StoreError(f"{train}: has no targets (y) to learn")
    others = [FeatureStore.open(t) for t in tests]
    for other in others:
        other.check_complete()
        _check_pair(store, other)
    regression = is_continuous(y) if task == "auto" else task == "regression"
    settings = HoldoutSettings(regression, epochs, hash_bits or default_hash_bits([train]), seed, validation, grid)
    return fit_and_score(Rows(str(store.location), np.asarray(y), Path(train).name),
                         [Rows(str(o.location), np.asarray(o.labels()), Path(str(o.location)).name) for o in others],
                         settings)


def fit_and_score(train: Rows, tests: list[Rows], settings: HoldoutSettings) -> dict[str, Any]:
    """The protocol on rows from anywhere (stores, or a baseline's rows in memory)."""
    t0 = time.perf_counter()
    regression, y = settings.regression, train.y
    grid = settings.grid or (ALPHA_GRID if regression else C_GRID)
    order = np.random.default_rng(settings.seed).permutation(len(y))
    n_val = max(1, int(round(settings.validation * len(y))))
    val, fit = np.sort(order[:n_val]), np.sort(order[n_val:])
    scores = []
    for penalty in grid:
        model = _model(regression, penalty, settings).fit(RowSet(train.source, fit), y[fit])
        scores.append({"penalty": penalty, **_metrics(y[val], model.predict(RowSet(train.source, val)), regression)})
    best = min(scores, key=lambda s: s["rmse"]) if regression else max(scores, key=lambda s: s["accuracy"])
    t_select = time.perf_counter()
    model = _model(regression, best["penalty"], settings).fit(RowSet(train.source, np.arange(len(y))), y)
    t_fit = time.perf_counter()
    results = [{"store": str(t.source) if isinstance(t.source, str) else None, "name": t.name,
                "graphs": int(len(t.y)),
                **_metrics(t.y, model.predict(RowSet(t.source, np.arange(len(t.y)))), regression)} for t in tests]
    t_end = time.perf_counter()
    return {"train": train.name, "train_graphs": int(len(y)), "task": "regression" if regression else "classification",
            "learner": "SGDRegressor (ridge), streamed" if regression else "SGDClassifier (hinge), streamed",
            "penalty": {"name": "alpha" if regression else "C", "value": best["penalty"]},
            "validation": {"fraction": settings.validation, "graphs": int(n_val), "scores": scores},
            "epochs": settings.epochs, "hash_bits": settings.hash_bits, "seed": settings.seed, "tests": results,
            "seconds": {"select": t_select - t0, "refit": t_fit - t_select, "score": t_end - t_fit}}
