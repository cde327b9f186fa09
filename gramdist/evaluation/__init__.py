"""Evaluation of Gram stores: nested cross-validation of kernel machines.

* ``nested_cv.py`` — :func:`evaluate`: repeated stratified k-fold nested CV of
  ``SVC(kernel="precomputed")`` over one or several stores, selecting (store, C) in the
  inner CV; outer folds run as tasks on a Dask cluster. Every evaluation takes two objects:
  a :class:`~gramdist.evaluation.protocols.Protocol` (what is measured: folds, repeats,
  inner CV, C grid) and :class:`~gramdist.evaluation.nested_cv.RunOptions` (how it runs:
  seed, task, resume folder, cluster); each outer fold is a
  :class:`~gramdist.evaluation.nested_cv.Fold` run under a
  :class:`~gramdist.evaluation.nested_cv.FoldSetup` (what all folds share). Its two
  extension points: :class:`~gramdist.evaluation.nested_cv.GramSource` (where a candidate's
  Gram blocks come from: a store, a weighted sum of stores, a kernel refitted per fold) and
  :class:`~gramdist.evaluation.tasks.Task` (what is learned and how it is scored).

* ``regression.py`` — :class:`~gramdist.evaluation.regression.RegressionTask`: a continuous
  target (kernel ridge or SVR, RMSE and R²), and the choice of task (``"auto"`` detects it).
* ``holdout.py`` — :func:`~gramdist.evaluation.holdout.evaluate_holdout`: selection by CV on a
  training store, one score on a K(test, train) store.

Each protocol variant (another learner, a combination of stores, per-fold refits) is a module
of its own here that reuses the fold machinery of ``nested_cv``:

* ``protocols.py`` — the papers' evaluation protocols as presets (``--protocol``);
* ``refit.py`` — :class:`~gramdist.evaluation.refit.RefitSource`, a kernel refitted on each
  outer training part, and :func:`~gramdist.evaluation.refit.evaluate_refit` (``--refit``).
"""

from gramdist.evaluation.holdout import evaluate_holdout
from gramdist.evaluation.nested_cv import Fold, FoldSetup, RunOptions, evaluate, find_stores, outer_fold
from gramdist.evaluation.protocols import PROTOCOLS, Protocol, get_protocol
from gramdist.evaluation.regression import RegressionTask
from gramdist.evaluation.tasks import Task

__all__ = ["PROTOCOLS", "Fold", "FoldSetup", "Protocol", "RegressionTask", "RunOptions", "Task", "evaluate",
           "evaluate_holdout", "find_stores", "get_protocol", "outer_fold"]
