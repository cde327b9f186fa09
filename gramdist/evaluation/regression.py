"""Regression on Gram stores: a continuous target (a measured property) with the nested CV.

:class:`RegressionTask` is the :class:`~gramdist.evaluation.tasks.Task` for a continuous
``y``; everything else — outer folds (plain, shuffled ``KFold`` instead of stratified), the
inner CV that selects the store (kernel setting) and the regularisation, the refit — is the
nested CV of :mod:`~gramdist.evaluation.nested_cv`.

Learners, on the precomputed Gram:

* ``"krr"`` (default): ``KernelRidge(kernel="precomputed", alpha=1/C)``. The grid is given as
  C like the SVM's, so a larger C is weaker regularisation for every learner.
* ``"svr"``: ``SVR(kernel="precomputed", C=C, epsilon=0.1)``.

Kernel ridge has no intercept and the SVR's ε is absolute, so both are fitted on the target
standardised with the mean and standard deviation of their own training part
(``TransformedTargetRegressor`` with a ``StandardScaler``); predictions are mapped back, and
scores are in the target's units. The inner CV maximises −MSE (pooled as the mean over the
inner folds); each outer fold reports RMSE and R² (``sklearn.metrics.r2_score`` on the fold's
test graphs); ``evaluate`` reports their means over all outer folds and the standard
deviations over repeats of each repeat's mean, as for accuracy.

:func:`resolve_task` picks the task: ``"auto"`` is regression when some target is not a whole
number (the molecule loaders give such targets as float64; class labels are integers), else
classification.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from gramdist.errors import StoreError
from gramdist.evaluation.protocols import Protocol
from gramdist.evaluation.tasks import DEFAULT_C_GRID, Task

LEARNERS = ("krr", "svr")
TASKS = ("auto", "classification", "regression")
SVR_EPSILON = 0.1


def is_continuous(y: np.ndarray) -> bool:
    """True when ``y`` has a value that is not a whole number (a regression target)."""
    y = np.asarray(y)
    if not np.issubdtype(y.dtype, np.floating):
        return False
    return bool(np.any(y != np.round(y)))


class RegressionTask(Task):
    """Kernel ridge or SVR on the precomputed Gram, scored by RMSE and R²."""

    name = "regression"

    def __init__(self, params: tuple[float, ...] = DEFAULT_C_GRID, learner: str = "krr") -> None:
        super().__init__(params)
        if learner not in LEARNERS:
            raise StoreError(f"learner must be one of {', '.join(LEARNERS)}, got {learner!r}")
        self.learner = learner

    def model(self, param: float) -> Any:
        from sklearn.compose import TransformedTargetRegressor
        from sklearn.kernel_ridge import KernelRidge
        from sklearn.preprocessing import StandardScaler
        from sklearn.svm import SVR

        reg = (KernelRidge(kernel="precomputed", alpha=1.0 / param) if self.learner == "krr"
               else SVR(kernel="precomputed", C=param, epsilon=SVR_EPSILON))
        return TransformedTargetRegressor(regressor=reg, transformer=StandardScaler())

    def splitter(self, n_splits: int, seed: int) -> Any:
        from sklearn.model_selection import KFold

        return KFold(n_splits=n_splits, shuffle=True, random_state=seed)

    def max_splits(self, y: np.ndarray) -> int:
        return len(y)

    def outer_limit(self, y: np.ndarray, free: np.ndarray) -> int:
        return len(free)

    def too_few(self, limit: int, why: str, folds: int) -> str:
        return f"only {limit} graphs{why}, fewer than --folds {folds}"

    def inner_score(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return -float(np.mean((np.asarray(y_true, np.float64) - y_pred) ** 2))

    def outer_scores(self, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
        from sklearn.metrics import r2_score

        y_true = np.asarray(y_true, np.float64)
        rmse = float(np.sqrt(np.mean((y_true - y_pred) ** 2)))
        r2 = float(r2_score(y_true, y_pred)) if len(y_true) > 1 else float("nan")
        return {"rmse": rmse, "r2": r2}

    def summarise(self, fold_scores: list[dict[str, float]], repeats: int, folds: int
                  ) -> tuple[dict[str, Any], dict[str, Any]]:
        head: dict[str, Any] = {}
        per_fold: dict[str, Any] = {}
        for key in ("rmse", "r2"):
            values = np.array([s[key] for s in fold_scores]).reshape(repeats, folds)
            head[f"{key}_mean"] = float(values.mean())
            head[f"{key}_std"] = float(values.mean(axis=1).std())
            per_fold[f"fold_{key}"] = values.round(6).tolist()
        return head, per_fold

    def describe(self) -> str:
        return ("KernelRidge (alpha = 1/C)" if self.learner == "krr" else f"SVR (epsilon {SVR_EPSILON})") + \
            " on the standardised target"


def resolve_task(task: str | Task, y: np.ndarray, protocol: Protocol | None = None,
                 learner: str = "krr") -> tuple[Task, str]:
    """The task to run and why.

    Parameters
    ----------
    task : str or Task
        A :class:`Task` (used as given), or one of ``"auto"``, ``"classification"``,
        ``"regression"``.
    y : ndarray of shape (n,)
        The labels or targets; ``"auto"`` is regression when one is not a whole number.
    protocol : Protocol, optional
        Gives the C grid, and the classification task (:meth:`Protocol.task`: a full inner CV,
        or one validation split); default ``Protocol()``.
    learner : {"krr", "svr"}
        The regression learner.

    Returns
    -------
    (Task, str)
        The task and the reason (``"given"``, ``"asked"``, ``"detected: ..."``).
    """
    if isinstance(task, Task):
        return task, "given"
    if task not in TASKS:
        raise StoreError(f"--task must be one of {', '.join(TASKS)}, got {task!r}")
    protocol = protocol or Protocol()
    continuous = is_continuous(y)
    if task == "classification" and continuous:
        raise StoreError("the targets are not class labels (some are not whole numbers); use --task regression")
    if task == "regression" or (task == "auto" and continuous):
        if protocol.inner_holdout:
            raise StoreError(f"the {protocol.name} protocol's single validation split is for classification; "
                             "it does not apply to a regression")
        return (RegressionTask(protocol.c_grid, learner),
                "asked" if task == "regression" else "detected: non-integer targets")
    if learner != "krr":
        raise StoreError("--learner is for regression; classification uses an SVC")
    return protocol.task(), ("asked" if task == "classification" else "detected: integer labels")
