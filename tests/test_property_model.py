"""A property model on feature stores (issue 34, item 3): RDKit descriptors as targets, the
streamed ridge learner, ``gramdist evaluate TRAIN --test …`` on feature stores — on a slice of
MOSES run as a user runs it, and against independent references (RDKit's own descriptor values,
scikit-learn's closed-form ridge on the same rows)."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from test_deploy import one_error_line, run_cli

from gramdist.datasets import load_dataset
from gramdist.engine.store import FeatureStore
from gramdist.evaluation.feature_holdout import HoldoutSettings, Rows, fit_and_score
from gramdist.evaluation.linear import InMemoryChunks, RowSet, StreamedLinearRegressor

pytest.importorskip("rdkit")
ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "jobs" / "moses-logp.yaml"


def moses() -> Path:
    spec = importlib.util.find_spec("moses")
    if spec is None:
        if os.environ.get("CI") == "true":
            pytest.fail("molsets is a test dependency under CI (pip install --no-deps molsets)")
        pytest.skip("needs MOSES's files: pip install --no-deps molsets")
    return Path(list(spec.submodule_search_locations)[0]) / "dataset" / "data"


def test_a_descriptor_target_is_rdkits_value_per_molecule(tmp_path):
    from rdkit import Chem
    from rdkit.Chem import Descriptors

    smiles = ["CCO", "c1ccccc1O", "CC(=O)Nc1ccc(O)cc1", "C[N+](C)(C)C", "OC(=O)CCC(=O)O"]
    batch = load_dataset({"smiles": smiles, "target": {"descriptor": "MolLogP"}})
    assert batch.y.dtype == np.float64
    assert np.array_equal(batch.y, [Descriptors.MolLogP(Chem.MolFromSmiles(s)) for s in smiles])
    csv_file = tmp_path / "m.csv"
    csv_file.write_text("smiles\n" + "\n".join(smiles) + "\n")
    whole = load_dataset({"smiles": str(csv_file), "target": {"descriptor": "NumHDonors"}})
    assert whole.y.dtype == np.float64 and list(whole.y) == [1.0, 1.0, 2.0, 0.0, 2.0]  # counts stay a regression target
    from gramdist.datasets.lazy import open_dataset

    lazy = open_dataset({"smiles": str(csv_file), "target": {"descriptor": "NumHDonors"}, "block_size": 2})
    assert np.array_equal(lazy.load(0, 5).y, whole.y) and lazy.y_dtype == np.float64
    plain = open_dataset({"smiles": str(csv_file), "block_size": 2})
    assert lazy.checksum() != plain.checksum()  # the target is part of what a store records


@pytest.mark.parametrize("target, pattern", [({"descriptor": "MolLogQ"}, "no RDKit descriptor 'MolLogQ'"),
                                             ({"descriptor": "MolLogP", "x": 1}, "a computed target is")])
def test_a_bad_descriptor_is_one_line(tmp_path, target, pattern):
    job = tmp_path / "j.yaml"
    job.write_text(json.dumps({"dataset": {"smiles": ["CCO", "CCN"], "target": target}, "kernel": {"name": "wl", "h": 1}}))
    assert pattern in one_error_line(run_cli("features", str(job), "--out", str(tmp_path / "f.zarr")))


def test_streamed_ridge_is_sklearns_sgd_on_the_rows_in_its_seeded_order():
    """One chunk, one epoch: the streamed learner is exactly scikit-learn's SGDRegressor fed the
    rows in the order its seed draws, on the targets less their mean; and it learns (R² against
    scikit-learn's closed-form ridge on the same rows)."""
    from sklearn.linear_model import Ridge, SGDRegressor

    rng = np.random.default_rng(0)
    x = sp.random(3000, 64, density=0.2, random_state=1, format="csr")
    y = x @ rng.normal(size=64) + 0.01 * rng.normal(size=3000) + 3.0
    rows = RowSet(InMemoryChunks(x, 5000), np.arange(3000))
    streamed = StreamedLinearRegressor(alpha=1e-6, epochs=1, seed=7).fit(rows, y)
    order = np.random.default_rng(7)
    order.permutation(1)  # the order of the (one) chunk
    perm = order.permutation(3000)
    ref = SGDRegressor(loss="squared_error", penalty="l2", alpha=1e-6, average=True, random_state=7)
    ref.partial_fit(x[perm], (y - y.mean())[perm])
    assert np.array_equal(streamed.predict(rows), ref.predict(x) + y.mean())
    many = StreamedLinearRegressor(alpha=1e-6, epochs=30, seed=0).fit(RowSet(InMemoryChunks(x, 500), np.arange(3000)), y)
    pred = many.predict(RowSet(InMemoryChunks(x, 500), np.arange(3000)))
    exact = Ridge(alpha=1e-6 * 3000).fit(x, y).predict(x)
    assert 1 - np.mean((pred - exact) ** 2) / np.var(exact) > 0.9


def test_fit_and_score_picks_the_penalty_on_validation_rows_only():
    rng = np.random.default_rng(3)
    x = sp.random(2000, 40, density=0.3, random_state=2, format="csr")
    y = x @ rng.normal(size=40)
    test_x = sp.random(500, 40, density=0.3, random_state=4, format="csr")
    result = fit_and_score(Rows(InMemoryChunks(x), y, "train"),
                           [Rows(InMemoryChunks(test_x), test_x @ np.zeros(40), "zeros")],
                           HoldoutSettings(True, epochs=3, hash_bits=10, seed=0, grid=(1e-6, 1e2)))
    assert [s["penalty"] for s in result["validation"]["scores"]] == [1e-6, 1e2]
    assert result["penalty"]["value"] == 1e-6  # a huge penalty predicts the mean: worse on validation
    assert result["validation"]["graphs"] == 200 and result["tests"][0]["graphs"] == 500


def test_moses_slice_logp_from_wl_features_end_to_end(tmp_path):
    """The shipped job on the first molecules of MOSES's three files, as a user runs it: three
    feature stores, then `evaluate TRAIN --test RANDOM SCAFFOLD`; logP is nearly additive over
    atoms, so WL features predict it well out of sample on both splits."""
    moses()
    stores = {}
    for name, rel, limit in (("train", "train.csv.gz", 3000), ("random", "test.csv.gz", 600),
                             ("scaffold", "test_scaffolds.csv.gz", 600)):
        stores[name] = tmp_path / f"{name}.zarr"
        r = run_cli("features", str(JOB), "--out", str(stores[name]), "--quiet", "--set", f"dataset.smiles=dataset/data/{rel}",
                    "--set", f"dataset.limit={limit}", "--set", "fit.sample_size=500", "--set", "cluster.n_workers=1")
        assert r.returncode == 0, r.stderr[-2000:]
    with gzip.open(moses() / "test_scaffolds.csv.gz", "rt") as f:
        first = [row["SMILES"] for _, row in zip(range(600), csv.DictReader(f))]
    from rdkit import Chem
    from rdkit.Chem import Descriptors

    assert np.array_equal(FeatureStore.open(stores["scaffold"]).labels(),
                          [Descriptors.MolLogP(Chem.MolFromSmiles(s)) for s in first])
    r = run_cli("evaluate", str(stores["train"]), "--test", str(stores["random"]), str(stores["scaffold"]), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["task"] == "regression" and result["train_graphs"] == 3000
    scores = {t["name"]: t for t in result["tests"]}
    assert scores["random.zarr"]["r2"] > 0.8 and scores["scaffold.zarr"]["r2"] > 0.8, scores
    text = run_cli("evaluate", str(stores["train"]), "--test", str(stores["random"])).stdout
    assert "test random.zarr: RMSE" in text and "R²" in text


def test_a_test_store_featurised_differently_is_one_line(tmp_path):
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    for out, h in ((a, 2), (b, 3)):
        job = tmp_path / f"j{h}.yaml"
        job.write_text(json.dumps({"dataset": {"smiles": ["CCO", "CCN", "c1ccccc1", "CC(=O)O"],
                                               "target": {"descriptor": "MolLogP"}}, "kernel": {"name": "wl", "h": h}}))
        assert run_cli("features", str(job), "--out", str(out), "--quiet").returncode == 0
    line = one_error_line(run_cli("evaluate", str(a), "--test", str(b)))
    assert f"{b}: not featurised as {a} (kernel differ)" in line
