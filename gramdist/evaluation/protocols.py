"""What an evaluation measures (:class:`Protocol`), and the papers' protocols as presets.

A :class:`Protocol` is the one object every evaluation function takes for its folds,
repeats, inner CV and C grid (``evaluate(stores, protocol, options)``); it travels unchanged
to the outer folds. The presets below are the protocols of the papers gramdist reproduces.

Each paper measured its accuracies with its own protocol; the headline table of
REPRODUCTION.md compares each published figure with gramdist *under that protocol*
(``gramdist evaluate --protocol NAME``, or the job files under ``jobs/paper/``), next to the
project's tuned figures. A :class:`Protocol` fixes what the papers state:

========== ========================== ============ ================ ===================== ===========
name       outer split                repeats      inner selection  C grid                spread
========== ========================== ============ ================ ===================== ===========
``dm``     stratified 10-fold         10           9-fold CV        10^-3..10^3 (*)       std
``power``  stratified 10-fold         10           one 1/10 split   10^-7..10^7           std. error
``mlg``    stratified 80/20 split     10           10-fold CV       10^-3..10^3 (*)       std
``matching`` stratified 10-fold       1            10-fold CV       {0.1, 1, 10, 50}      none
``default`` stratified 10-fold        10           5-fold CV        10^-3..10^3           std
========== ========================== ============ ================ ===================== ===========

Sources (the papers in ``shared/papers``):

* ``dm`` — Su, Han, Harang & Yan (SDM 2016) §5.2: "10-fold nested cross-validation [...] In
  each fold, all hyper-parameters are optimized by an extra 9-fold cross-validation on the
  training data only. The whole process is repeated for 10 times, and the mean and standard
  deviation of the classification accuracy over the 10 runs are reported." (*) Its C range
  and hyperparameter grid are in its Appendix C, which our copy lacks: the C grid is ours.
* ``power`` — Shrivastava & Li §8: 10 folds; inside the 9 training folds, a further split
  into 10 parts, "use the first 9 parts to train the C-SVM and use the 10th part as
  validation set to find the best performing value of C from {10^-7, ..., 10^7}"; "repeated
  10 times randomizing over partitions"; "the mean classification accuracy and the standard
  errors". k = 5 fixed ("we haven't tuned anything except C").
* ``mlg`` — Kondor & Pan (NIPS 2016) §5: "We randomly selected 20% of each dataset to be used
  as a test set. On the other 80% we did 10 fold cross validation to select the parameters
  [...] and repeated this setup 10 times"; Table 1 is "Mean Accuracy ± Standard Deviation".
  (*) No C range is stated.
* ``matching`` — Woźnica, Kalousis & Hilario §4: "C is optimized in an inner 10-fold
  cross-validation loop over the set C = {0.1, 1, 10, 50}"; "accuracy is estimated using
  stratified 10-fold cross-validation" (once; no spread is published, McNemar tests instead).
  The kernel's NCA is learned on each training fold: evaluate it with ``--refit``
  (:mod:`gramdist.evaluation.refit`).

Choices where the papers are silent (documented here, applied by every preset): outer and
inner splits are stratified and shuffled with seeded generators (the MLG paper says
"randomly selected"; stratifying keeps the class proportions of each 20% test set); the
power paper's single validation split is the first fold of a stratified 10-fold split of the
training part; a standard deviation over runs is the sample standard deviation (ddof 1) of
the per-repeat mean accuracies, and a standard error is that divided by sqrt(repeats) (the
power paper does not say over what its standard errors are taken; over the 10 repetitions is
the reading consistent with its 0.10-0.48 values).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist.errors import JobError
from gramdist.evaluation.tasks import DEFAULT_C_GRID, Task


class HoldoutTask(Task):
    """SVC classification whose inner selection uses one validation split, not a full CV.

    The split is the first fold of the stratified ``n_splits``-fold split the base task would
    use: train on ``(n_splits - 1) / n_splits`` of the training part, validate on the rest
    (the power paper's protocol with ``n_splits = 10``).
    """

    name = "classification (single validation split)"

    def inner_splitter(self, n_splits: int, seed: int) -> Any:
        return _FirstSplit(self.splitter(n_splits, seed))


class _FirstSplit:
    """A scikit-learn splitter cut down to its first split."""

    def __init__(self, splitter: Any) -> None:
        self.splitter = splitter

    def split(self, x: Any, y: Any = None) -> Any:
        yield next(iter(self.splitter.split(x, y)))


@dataclass(frozen=True)
class Protocol:
    """What an evaluation measures: its outer splits, its inner selection and its C grid.

    One object for :func:`~gramdist.evaluation.nested_cv.evaluate` and every variant of it
    (:func:`~gramdist.evaluation.refit.evaluate_refit`,
    :func:`~gramdist.evaluation.linear.evaluate_features`,
    :func:`~gramdist.evaluation.combine.evaluate_combined`,
    :func:`~gramdist.evaluation.holdout.evaluate_holdout`), passed through to the outer folds
    (:class:`~gramdist.evaluation.nested_cv.FoldSetup`). ``Protocol()`` is gramdist's default
    (10 x stratified 10-fold, 5-fold inner CV, C in 10^-3..10^3); :data:`PROTOCOLS` holds the
    papers' presets (see the module docstring), and ``dataclasses.replace`` changes a field.

    Parameters
    ----------
    name, paper : str
        The protocol's name (``--protocol``) and where it comes from.
    folds : int
        Outer folds per repeat (stratified for classification); 1 with ``test_size``.
    repeats : int
        Repetitions of the outer split; repeat ``r`` is shuffled with seed ``seed + r``.
    inner_folds : int
        Folds of the inner CV that selects (store, C) on each outer training part.
    c_grid : tuple of float
        The values of C (the task's regularisation) the inner CV chooses from.
    test_size : float, optional
        Instead of ``folds`` folds, one random split per repeat testing this fraction of the
        graphs (the MLG paper's protocol).
    inner_holdout : bool
        Select on one validation split (the first fold of the inner split) instead of a full
        inner CV (the power paper's protocol): :meth:`task` is then a :class:`HoldoutTask`.
    spread : {"std", "se", "none"}
        The published spread: sample standard deviation of the per-repeat accuracies, its
        standard error over the repeats, or none (:meth:`spread_of`).
    notes : tuple of str
        Free-form remarks.
    """

    name: str = "custom"
    paper: str = "user-defined"
    folds: int = 10
    repeats: int = 10
    inner_folds: int = 5
    c_grid: tuple[float, ...] = DEFAULT_C_GRID
    test_size: float | None = None
    inner_holdout: bool = False
    spread: str = "std"
    notes: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        object.__setattr__(self, "c_grid", tuple(self.c_grid))  # a list from YAML or a caller

    def task(self) -> Task:
        """The classification task of this protocol: an SVC selected by the inner CV, or on one
        validation split with ``inner_holdout``."""
        return HoldoutTask(self.c_grid) if self.inner_holdout else Task(self.c_grid)

    def spread_of(self, result: dict[str, Any]) -> tuple[float, str]:
        """The spread of ``result`` that matches the paper's, and its name."""
        if self.spread == "se":
            return result["accuracy_se"], "standard error over repeats"
        if self.spread == "std":
            return result["accuracy_std_sample"], "std over repeats"
        return result["accuracy_fold_std"], "std over folds (the paper gives none)"

    def describe(self) -> str:
        outer = (f"{self.repeats} x stratified {int(round((1 - self.test_size) * 100))}/"
                 f"{int(round(self.test_size * 100))} split" if self.test_size is not None
                 else f"{self.repeats} x stratified {self.folds}-fold")
        inner = (f"one 1/{self.inner_folds} validation split" if self.inner_holdout
                 else f"{self.inner_folds}-fold inner CV")
        return f"{self.name} protocol ({self.paper}): {outer}, {inner}, C in {c_grid_text(self.c_grid)}"


def _powers(lo: int, hi: int) -> tuple[float, ...]:
    return tuple(10.0**k for k in range(lo, hi + 1))


def c_grid_text(c_grid: tuple[float, ...]) -> str:
    exps = np.log10(np.asarray(c_grid))
    if len(c_grid) > 2 and np.allclose(exps, np.round(exps)) and np.all(np.diff(np.round(exps)) == 1):
        return f"10^{int(round(exps[0]))}..10^{int(round(exps[-1]))}"
    return "{" + ", ".join(f"{c:g}" for c in c_grid) + "}"


PROTOCOLS: dict[str, Protocol] = {
    "default": Protocol("default", "gramdist's default", inner_folds=5),
    "dm": Protocol("dm", "Su et al. 2016, DM, Sec. 5.2", inner_folds=9),
    "power": Protocol("power", "Shrivastava & Li, power kernel, Sec. 8", inner_folds=10,
                      c_grid=_powers(-7, 7), inner_holdout=True, spread="se"),
    "mlg": Protocol("mlg", "Kondor & Pan 2016, MLG, Sec. 5", folds=1, inner_folds=10, test_size=0.2),
    "matching": Protocol("matching", "Woznica et al., adaptive matching, Sec. 4", repeats=1,
                         inner_folds=10, c_grid=(0.1, 1.0, 10.0, 50.0), spread="none"),
}


def get_protocol(name: str) -> Protocol:
    """The preset ``name``; :class:`JobError` naming the known ones otherwise."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise JobError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None


__all__ = ["HoldoutTask", "PROTOCOLS", "Protocol", "c_grid_text", "get_protocol"]
