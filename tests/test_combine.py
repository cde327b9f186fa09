"""Kernel combinations: weights selected in the inner CV (evaluate --combine) and combined stores."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest
from test_deploy import last_json, one_error_line, run_cli
from test_evaluate import make_store

from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram, verify
from gramdist.errors import StoreError
from gramdist.evaluation.combine import CombinedSource, combine_stores, evaluate_combined, weight_grid
from gramdist.evaluation.nested_cv import RunOptions, evaluate
from gramdist.evaluation.protocols import Protocol
from gramdist.jobs import validate_job
from gramdist.testing import min_eigenvalue_ratio


def test_weight_grid_is_the_simplex_with_single_kernels_first():
    grid = weight_grid(3, 4)
    assert len(grid) == 15 and len(set(grid)) == 15
    assert grid[:3] == [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    assert all(abs(sum(w) - 1) < 1e-12 and min(w) >= 0 for w in grid)
    assert (0.5, 0.25, 0.25) in grid and (0.25, 0.25, 0.5) in grid
    assert weight_grid(2, 2) == [(1.0, 0.0), (0.0, 1.0), (0.5, 0.5)]
    assert weight_grid(1, 3) == [(1.0,)]


def two_halves(n=120, seed=0):
    """Labels that need two kernels: y = x1 XOR-free sum of two signals, each kernel sees one."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n)
    b = rng.standard_normal(n)
    y = (a + b > 0).astype(int)
    xa = np.c_[a, 0.2 * rng.standard_normal(n)]
    xb = np.c_[b, 0.2 * rng.standard_normal(n)]
    return y, xa @ xa.T + 1.0, xb @ xb.T + 1.0


def test_a_combination_beats_each_kernel_when_each_sees_half_the_signal(tmp_path):
    y, ka, kb = two_halves()
    a = make_store(tmp_path / "a.zarr", ka, y)
    b = make_store(tmp_path / "b.zarr", kb, y)
    protocol = Protocol(folds=5, repeats=1, c_grid=(0.1, 1.0, 10.0, 100.0))
    singles = [evaluate([s], protocol)["accuracy_mean"] for s in (a, b)]
    both = evaluate([a, b], protocol)["accuracy_mean"]
    comb = evaluate_combined([a, b], protocol, steps=4)
    assert comb["accuracy_mean"] > max(singles + [both]) + 10, (singles, both, comb["accuracy_mean"])
    assert len(comb["weight_grid"]) == 5 and len(comb["weights"]) == 5
    assert all(0 < w[0] < 1 for w in comb["weights"])  # a mixture in every fold
    assert sum(c["folds"] for c in comb["weights_chosen"]) == 5
    # saved folds: a rerun reads them and reports the same weights
    first = evaluate_combined([a, b], protocol, RunOptions(out=tmp_path / "folds"), steps=4)
    again = evaluate_combined([a, b], protocol, RunOptions(out=tmp_path / "folds"), steps=4)
    assert first["weights"] == comb["weights"] and again["resumed_folds"] == 5 and again["weights"] == comb["weights"]


def test_combined_source_with_one_weight_is_the_normalised_store(tmp_path):
    y, ka, kb = two_halves(40)
    a = make_store(tmp_path / "a.zarr", ka, y)
    b = make_store(tmp_path / "b.zarr", kb, y)
    d = np.sqrt(np.diag(ka))
    only_a = CombinedSource((a, b), (1.0, 0.0))
    assert np.array_equal(only_a.gram(), ka / np.outer(d, d))
    half = CombinedSource((a, b), (0.5, 0.5)).gram()
    db = np.sqrt(np.diag(kb))
    assert np.allclose(half, 0.5 * ka / np.outer(d, d) + 0.5 * kb / np.outer(db, db), rtol=1e-14, atol=0)
    train, test = np.arange(0, 40, 2), np.arange(1, 40, 2)
    k_tr, k_te = CombinedSource((a, b), (0.25, 0.75)).blocks(train, test)
    full = CombinedSource((a, b), (0.25, 0.75)).gram()
    assert np.array_equal(k_tr, full[np.ix_(train, train)]) and np.array_equal(k_te, full[np.ix_(test, train)])


@pytest.fixture(scope="module")
def mutag_stores(tmp_path_factory, dataset_dir_module):
    """WL (unnormalised and normalised) and DM stores of MUTAG."""
    from distributed import Client, LocalCluster

    folder = tmp_path_factory.mktemp("combine")
    jobs = {
        "wl-raw": {"kernel": {"name": "wl", "h": 2}, "gram": {"tile_size": 50, "normalize": False}},
        "wl-norm": {"kernel": {"name": "wl", "h": 2}, "gram": {"tile_size": 64, "normalize": True}},
        "dm": {"kernel": {"name": "dm", "h": 3, "t": 3, "b": 5, "descriptor_sample": 2000},
               "gram": {"tile_size": 64, "normalize": True, "dtype": "float32"}},
    }
    out = {}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        for name, spec in jobs.items():
            job = validate_job({"dataset": {"name": "MUTAG"}, **spec, "_job_name": name})
            run_job(job, out=str(folder / f"{name}.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
            out[name] = str(folder / f"{name}.zarr")
    return out


@pytest.fixture(scope="module")
def dataset_dir_module():
    from conftest import dataset_dir

    return dataset_dir("MUTAG")


def test_combined_store_equals_the_weighted_sum_and_is_checksummed(mutag_stores, tmp_path):
    s = mutag_stores
    # weight 1 on an unnormalised store: exactly the store the same job normalised would give
    one = tmp_path / "one.zarr"
    combine_stores([s["wl-raw"], s["dm"]], [1.0, 0.0], one, tile_size=64)
    assert np.array_equal(open_gram(one)[0], open_gram(s["wl-norm"])[0])
    mix = tmp_path / "mix.zarr"
    r = run_cli("combine", s["wl-raw"], s["dm"], s["wl-norm"], "--weights", "1/2,1/4,1/4", "--out", str(mix),
                "--tile-size", "40", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert last_json(r.stdout)["weights"] == [0.5, 0.25, 0.25]
    k, y = open_gram(mix)
    expected = CombinedSource((s["wl-raw"], s["dm"], s["wl-norm"]), (0.5, 0.25, 0.25)).gram()
    assert np.allclose(k, expected, rtol=1e-15, atol=1e-15) and np.array_equal(k, k.T)
    assert np.allclose(np.diag(k), 1.0) and min_eigenvalue_ratio(k) > -1e-10
    assert verify(mix)["problems"] == [] and len(y) == 188
    attrs = dict(__import__('zarr').open_group(str(mix), mode="r").attrs)
    assert attrs["combination"]["weights"] == [0.5, 0.25, 0.25]
    assert [p["kernel"]["name"] for p in attrs["combination"]["stores"]] == ["wl", "dm", "wl"]
    assert attrs["combination"]["stores"][1]["dtype"] == "float32" and store_info(mix)["tile_size"] == 40
    # it evaluates like any store, and cannot be appended to
    r = run_cli("evaluate", str(mix), "--workers", "0", "--folds", "3", "--repeats", "1", "--json")
    assert r.returncode == 0 and 50 < json.loads(r.stdout)["accuracy_mean"] <= 100
    line = one_error_line(run_cli("append", str(mix), "MUTAG"))
    assert "cannot be appended to" in line


def test_combine_refuses_bad_weights_and_other_graphs(mutag_stores, tmp_path):
    s = mutag_stores
    for weights in ("0.5,0.6", "1.5,-0.5", "1,0,0", "a,b"):
        line = one_error_line(run_cli("combine", s["wl-raw"], s["dm"], "--weights", weights, "--out",
                                      str(tmp_path / "x.zarr")))
        assert "--weights" in line or "weights for" in line, line
    y, ka, _ = two_halves(188)
    other = make_store(tmp_path / "other.zarr", ka, y, checksum="other")
    with pytest.raises(StoreError, match="different graphs"):
        combine_stores([s["wl-raw"], other], [0.5, 0.5], tmp_path / "y.zarr")


def test_evaluate_combine_through_the_cli(mutag_stores):
    s = mutag_stores
    r = run_cli("evaluate", s["wl-norm"], s["dm"], "--combine", "--weight-steps", "2", "--workers", "0",
                "--folds", "3", "--repeats", "1", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out["weight_grid"] == [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]
    assert sum(c["folds"] for c in out["weights_chosen"]) == 3
    assert all("weights" in sel for sel in out["selections"])
    text = run_cli("evaluate", s["wl-norm"], s["dm"], "--combine", "--weight-steps", "2", "--workers", "0",
                   "--folds", "3", "--repeats", "1").stdout
    assert "selected weights (wl-norm.zarr, dm.zarr; 3 candidates)" in text, text
