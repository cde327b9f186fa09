"""What a nested CV learns and how it scores: :class:`Task` (classification by an SVC).

A task is the learner side of an evaluation, independent of where the Gram blocks come from
(:class:`~gramdist.evaluation.nested_cv.GramSource`) and of the protocol that splits the
graphs (:class:`~gramdist.evaluation.protocols.Protocol`). Other tasks subclass it:
:class:`~gramdist.evaluation.regression.RegressionTask` (a continuous target),
:class:`~gramdist.evaluation.protocols.HoldoutTask` (one validation split instead of an inner
CV), :class:`~gramdist.evaluation.linear.LinearTask` (a linear SVM on feature rows).

This module imports neither the stores nor the protocols, so that both can import it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: the C values an inner CV chooses from by default: 10^-3 .. 10^3
DEFAULT_C_GRID = tuple(10.0**k for k in range(-3, 4))


class Task:
    """What the nested CV learns and how it scores: here classification by an SVC.

    Parameters
    ----------
    params : tuple of float
        The regularisation values the inner CV chooses from (C for the SVC).

    Notes
    -----
    ``model(param)`` is an estimator taking a precomputed Gram; ``inner_score`` is maximised
    by the selection; ``outer_scores`` are reported per outer fold (the first is the headline).
    A task's attributes (``vars(task)``) enter the key of saved fold results, so a subclass
    keeps every setting that changes its scores as an attribute.
    """

    name = "classification"

    def __init__(self, params: tuple[float, ...] = DEFAULT_C_GRID) -> None:
        self.params = tuple(params)

    def model(self, param: float) -> Any:
        """An unfitted estimator on a precomputed (n_fit, n_fit) Gram, regularised by ``param``."""
        from sklearn.svm import SVC

        return SVC(kernel="precomputed", C=param)

    def splitter(self, n_splits: int, seed: int) -> Any:
        """The scikit-learn splitter of the outer folds (stratified, shuffled with ``seed``)."""
        from sklearn.model_selection import StratifiedKFold

        return StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=seed)

    def inner_splitter(self, n_splits: int, seed: int) -> Any:
        """The splits of the inner selection (by default the same kind as the outer ones)."""
        return self.splitter(n_splits, seed)

    def max_splits(self, y: np.ndarray) -> int:
        """The most folds the (n,) labels ``y`` allow (each class in every fold)."""
        return int(np.bincount(_codes(y)).min())

    def outer_limit(self, y: np.ndarray, free: np.ndarray) -> int:
        """The most outer folds over the graphs ``free`` ((m,) indices into the (n,) labels
        ``y``): every class of ``y`` in every fold."""
        return int(np.bincount(_codes(y)[free], minlength=len(np.unique(y))).min())

    def too_few(self, limit: int, why: str, folds: int) -> str:
        """The error when ``y`` allows only ``limit`` < ``folds`` outer folds."""
        return f"the smallest class has {limit} graphs{why}, fewer than --folds {folds}"

    def inner_score(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        """The score the inner selection maximises, from (m,) true and predicted labels."""
        return float(np.mean(y_pred == y_true))

    def outer_scores(self, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
        """The scores of one outer fold, from its (m,) true and predicted labels; the first is
        the headline."""
        return {"accuracy": float(np.mean(y_pred == y_true))}

    def summarise(self, fold_scores: list[dict[str, float]], repeats: int, folds: int
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The headline figures and the per-fold tables of an evaluation's result, from the
        ``repeats * folds`` outer folds' :meth:`outer_scores` (repeat-major)."""
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


def nan_as_none(value: Any) -> Any:
    """``value`` (nested dicts, lists, floats) with NaN floats as None: strict JSON, where an
    undefined spread (one repeat) is ``null``, not ``NaN``."""
    if isinstance(value, float):
        return None if value != value else value
    if isinstance(value, dict):
        return {k: nan_as_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [nan_as_none(v) for v in value]
    return value


def _codes(y: np.ndarray) -> np.ndarray:
    """(n,) int codes 0..k-1 of the (n,) labels ``y``."""
    return np.unique(y, return_inverse=True)[1]


__all__ = ["DEFAULT_C_GRID", "Task", "accuracy_spreads"]
