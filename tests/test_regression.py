"""Regression targets in the nested CV and the fixed train/test protocol, checked against
scikit-learn run by hand on the same splits; the task is detected from the targets."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from test_evaluate import make_store

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.errors import StoreError
from gramdist.evaluation import RegressionTask, evaluate, evaluate_holdout, outer_fold
from gramdist.evaluation.nested_cv import DEFAULT_C_GRID, Fold, FoldSetup, RunOptions, Task
from gramdist.evaluation.protocols import HoldoutTask, Protocol, get_protocol
from gramdist.evaluation.regression import is_continuous, resolve_task


def linear_data(n=90, d=4, noise=0.1, seed=0):
    """Targets linear in features (plus an offset KRR cannot fit without centring), and the
    linear kernel of those features: kernel ridge should explain most of the variance."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    y = 5.0 + x @ rng.standard_normal(d) + noise * rng.standard_normal(n)
    return x, y, x @ x.T


def make_rect_store(path, k, y_rows, y_cols, train_attrs):
    from storeutil import matrix_store

    return matrix_store(path, k, y_rows, y_cols=y_cols, attrs=train_attrs,
                        diag=(np.ones(k.shape[0]), np.ones(k.shape[1])))


def test_task_detection():
    assert is_continuous(np.array([1.5, 2.0])) and not is_continuous(np.array([1.0, 2.0]))
    assert not is_continuous(np.array([0, 1, 1]))
    assert resolve_task("auto", np.array([0.25, 1.0]))[0].name == "regression"
    assert resolve_task("auto", np.array([0, 1]))[0].name == "classification"
    assert resolve_task("regression", np.array([0, 1, 2]))[0].name == "regression"
    with pytest.raises(StoreError, match="not class labels"):
        resolve_task("classification", np.array([0.5, 1.0]))
    with pytest.raises(StoreError, match="learner must be one of"):
        RegressionTask(learner="lasso")
    # a protocol's classification is its own task (one validation split for the power paper's)
    power = get_protocol("power")
    task, reason = resolve_task("auto", np.array([0, 1]), power)
    assert isinstance(task, HoldoutTask) and task.params == power.c_grid and reason == "detected: integer labels"
    with pytest.raises(StoreError, match="single validation split"):
        resolve_task("regression", np.array([0, 1]), power)
    assert resolve_task("regression", np.array([0, 1]), Protocol(c_grid=(1.0,)))[0].params == (1.0,)


@pytest.mark.parametrize("learner", ["krr", "svr"])
def test_outer_fold_matches_scikit_learn_by_hand(learner):
    """Selection of C by the inner KFold, refit and test scores equal a hand-written loop."""
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVR

    from gramdist.evaluation.nested_cv import GramSource

    class ArraySource(GramSource):
        def __init__(self, k):
            super().__init__("array")
            self.k = k

        def gram(self):
            return self.k

    _, y, k = linear_data()
    train, test = np.arange(70), np.arange(70, 90)
    task = RegressionTask(DEFAULT_C_GRID, learner)
    res = outer_fold(FoldSetup((ArraySource(k),), y, Protocol(inner_folds=5), task), Fold(0, 0, train, test, 7))

    def model(c):
        reg = KernelRidge(kernel="precomputed", alpha=1 / c) if learner == "krr" else SVR(kernel="precomputed", C=c)
        return TransformedTargetRegressor(regressor=reg, transformer=StandardScaler())

    best = None
    for c in DEFAULT_C_GRID:
        mse = []
        for a, b in KFold(5, shuffle=True, random_state=7).split(train):
            pred = model(c).fit(k[np.ix_(a, a)], y[a]).predict(k[np.ix_(b, a)])
            mse.append(np.mean((y[b] - pred) ** 2))
        if best is None or -np.mean(mse) > best[0] + 1e-12:
            best = (-np.mean(mse), c)
    pred = model(best[1]).fit(k[np.ix_(train, train)], y[train]).predict(k[np.ix_(test, train)])
    assert res["C"] == best[1] and res["inner_score"] == pytest.approx(best[0])
    assert res["rmse"] == pytest.approx(np.sqrt(np.mean((y[test] - pred) ** 2)))
    assert res["r2"] == pytest.approx(r2_score(y[test], pred))
    assert res["r2"] > 0.9  # the linear kernel of the features that make y


def test_evaluate_regression_keys_and_informative_store_wins(tmp_path):
    x, y, k = linear_data(n=60)
    noise = np.random.default_rng(5).standard_normal((60, 4))
    folder = tmp_path / "grid"
    folder.mkdir()
    make_store(folder / "a-noise.zarr", noise @ noise.T, y)
    make_store(folder / "b-good.zarr", k, y)
    grid = (0.1, 1.0, 10.0)
    res = evaluate([str(folder)], Protocol(folds=5, repeats=2, c_grid=grid), RunOptions(seed=0, per_store=True))
    assert res["task"] == "regression" and res["task_reason"] == "detected: non-integer targets"
    assert "accuracy_mean" not in res and np.array(res["fold_rmse"]).shape == (2, 5)
    assert res["r2_mean"] > 0.9 and res["rmse_mean"] < 0.5
    assert all(s["store"].endswith("b-good.zarr") for s in res["selections"])
    assert res["rmse_mean"] == pytest.approx(np.mean(res["fold_rmse"]), rel=1e-5)
    assert res["rmse_std"] == pytest.approx(np.std(np.mean(res["fold_rmse"], axis=1)), rel=1e-4, abs=1e-9)
    # a store used alone with its own C: for the selected store, exactly the fold's figure
    for fold, per in zip(np.ravel(res["fold_rmse"]), res["per_store"]):
        assert per[1]["rmse"] == pytest.approx(fold, abs=1e-6) and per[0]["rmse"] > per[1]["rmse"]
    again = evaluate([str(folder)], Protocol(folds=5, repeats=2, c_grid=grid), RunOptions(seed=0))
    assert again["fold_rmse"] == res["fold_rmse"]  # deterministic; per_store changes nothing


def test_regression_on_class_labels_when_asked_and_too_few_graphs(tmp_path):
    x, y, k = linear_data(n=30)
    ints = np.round(y).astype(np.int64)
    s = make_store(tmp_path / "s.zarr", k, ints)
    assert evaluate([s], Protocol(folds=3, repeats=1), RunOptions(task="regression"))["task_reason"] == "asked"
    with pytest.raises(StoreError, match="only 30 graphs, fewer than --folds 31"):
        evaluate([make_store(tmp_path / "f.zarr", k, y)], Protocol(folds=31, repeats=1))


def test_holdout_matches_a_hand_written_fit(tmp_path):
    from sklearn.compose import TransformedTargetRegressor
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.model_selection import KFold
    from sklearn.preprocessing import StandardScaler

    x, y, _ = linear_data(n=120, seed=3)
    tr, te = np.arange(90), np.arange(90, 120)
    k_tr, k_te = x[tr] @ x[tr].T, x[te] @ x[tr].T
    train = make_store(tmp_path / "train.zarr", k_tr, y[tr])
    attrs = {k: dict(__import__('zarr').open_group(str(train), mode='r').attrs)[k] for k in ("gramdist_version", "tile_size", "dataset_checksum",
                                                              "kernel")}
    test = make_rect_store(tmp_path / "test.zarr", k_te, y[te], y[tr], attrs)
    res = evaluate_holdout([train], [test], Protocol(inner_folds=4), RunOptions(seed=2))

    def model(c):
        return TransformedTargetRegressor(KernelRidge(kernel="precomputed", alpha=1 / c), transformer=StandardScaler())

    scores = {c: -np.mean([np.mean((y[b] - model(c).fit(k_tr[np.ix_(a, a)], y[a]).predict(k_tr[np.ix_(b, a)])) ** 2)
                           for a, b in KFold(4, shuffle=True, random_state=2).split(tr)]) for c in DEFAULT_C_GRID}
    c = max(DEFAULT_C_GRID, key=lambda c: (scores[c], -c))
    pred = model(c).fit(k_tr, y[tr]).predict(k_te)
    assert res["C"] == c and res["train_graphs"] == 90 and res["test_graphs"] == 30
    assert res["rmse"] == pytest.approx(np.sqrt(np.mean((y[te] - pred) ** 2))) and res["r2"] > 0.9

    other = make_rect_store(tmp_path / "other.zarr", k_te, y[te], y[tr], {**attrs, "kernel": {"name": "other"}})
    with pytest.raises(StoreError, match="its kernel differs"):
        evaluate_holdout([train], [other])
    with pytest.raises(StoreError, match="a square store"):
        evaluate_holdout([train], [train])


def test_holdout_classification_scores_accuracy(tmp_path):
    from sklearn.svm import SVC

    rng = np.random.default_rng(1)
    y = np.repeat([0, 1], 40)
    x = (y[:, None] * 2.0 - 1.0) + 0.8 * rng.standard_normal((80, 3))
    tr, te = np.arange(0, 80, 2), np.arange(1, 80, 2)
    train = make_store(tmp_path / "train.zarr", x[tr] @ x[tr].T, y[tr])
    attrs = {k: dict(__import__('zarr').open_group(str(train), mode='r').attrs)[k] for k in ("gramdist_version", "tile_size", "dataset_checksum",
                                                              "kernel")}
    test = make_rect_store(tmp_path / "test.zarr", x[te] @ x[tr].T, y[te], y[tr], attrs)
    res = evaluate_holdout([train], [test], Protocol(inner_folds=3, c_grid=(0.1, 1.0)))
    pred = SVC(kernel="precomputed", C=res["C"]).fit(x[tr] @ x[tr].T, y[tr]).predict(x[te] @ x[tr].T)
    assert res["task"] == "classification" and res["accuracy"] == pytest.approx(100 * np.mean(pred == y[te]))


def test_holdout_pairs_grid_stores_by_name():
    from gramdist.evaluation.holdout import pair_stores

    assert pair_stores(["a/x.zarr"], ["b/y.zarr"]) == [("a/x.zarr", "b/y.zarr")]
    assert pair_stores(["a/h-1.zarr", "a/h-2.zarr"], ["b/h-2.zarr", "b/h-1.zarr"]) == \
        [("a/h-1.zarr", "b/h-1.zarr"), ("a/h-2.zarr", "b/h-2.zarr")]
    with pytest.raises(StoreError, match="no test store for h-2.zarr; no training store for h-3.zarr"):
        pair_stores(["a/h-1.zarr", "a/h-2.zarr"], ["b/h-1.zarr", "b/h-3.zarr"])


def test_classification_task_is_unchanged_by_default():
    assert Task().name == "classification" and isinstance(resolve_task("auto", np.array([1, 2]))[0], Task)


# --------------------------------------------------------------- molecules, through the CLI
def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gramdist.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def test_cli_regression_on_molecules_nested_and_holdout(tmp_path):
    from chemdata import freesolv_rows, require_rdkit, write_csv

    require_rdkit()
    rows = freesolv_rows(160)
    write_csv(tmp_path / "train.csv", [{"smiles": r["smiles"], "dG": r["expt"]} for r in rows[:120]])
    write_csv(tmp_path / "test.csv", [{"smiles": r["smiles"], "dG": r["expt"]} for r in rows[120:]])
    from distributed import Client

    from gramdist.engine.runner import run_job
    from gramdist.jobs import load_job

    train = f"{{smiles: {tmp_path / 'train.csv'}, target: dG}}"
    common = "kernel: {name: wl, h: 2}\ngram: {tile_size: 64, normalize: true}\n"
    (tmp_path / "train.yaml").write_text(f"dataset: {train}\n{common}")
    (tmp_path / "test.yaml").write_text(
        f"dataset: {train}\ntest: {{dataset: {{smiles: {tmp_path / 'test.csv'}, target: dG}}}}\n{common}")
    with Client(processes=False, n_workers=1, threads_per_worker=1, dashboard_address=None) as client:
        for job in ("train", "test"):
            run_job(load_job(tmp_path / f"{job}.yaml"), out=str(tmp_path / f"{job}.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    r = _cli("evaluate", "train.zarr", "--folds", "3", "--repeats", "1", "--workers", "0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "task: regression (detected: non-integer targets); KernelRidge (alpha = 1/C) on the standardised target"
    assert lines[1].startswith("RMSE: ") and "(1 x 3-fold nested CV, 1 store(s), C in 10^-3..10^3)" in lines[1]
    r = _cli("evaluate", "train.zarr", "--folds", "3", "--repeats", "1", "--workers", "0", "--json",
             "--learner", "svr", cwd=tmp_path)
    res = json.loads(r.stdout)
    assert res["task"] == "regression" and 0 < res["rmse_mean"] and res["r2_mean"] <= 1
    r = _cli("evaluate", "train.zarr", "--test", "test.zarr", "--workers", "0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].startswith("test: RMSE ") and "on 40 graphs (fitted on 120;" in r.stdout
    r = _cli("evaluate", "train.zarr", "--task", "classification", "--workers", "0", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip() == \
        "gramdist: error: the targets are not class labels (some are not whole numbers); use --task regression"
