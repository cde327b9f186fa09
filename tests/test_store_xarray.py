"""Stores open in xarray: every array names its dimensions; older stores upgrade in place."""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from gramdist.cli import main
from gramdist.engine.runner import run_job
from gramdist.engine.store import GramStore, open_gram, verify
from gramdist.engine.store import info as store_info
from gramdist.jobs import load_job, validate_job

xr = pytest.importorskip("xarray")
OLD = Path(__file__).parent / "data" / "stores-0.1.0"


def open_dataset(store):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xarray notes that zarr v3 consolidated metadata is absent
        return xr.open_zarr(store, consolidated=False)


def synthetic_job(**extra):
    base = {"dataset": {"synthetic": {"n_graphs": 30, "n_nodes": [5, 10], "avg_degree": 2, "n_labels": 3, "seed": 1}},
            "kernel": {"name": "wl", "h": 2}, "gram": {"tile_size": 8, "normalize": True},
            "cluster": {"n_workers": 1}}
    return validate_job(base | extra)


def test_symmetric_store_is_labelled_by_graph_id_on_both_axes(tmp_path):
    path = run_job(synthetic_job(), out=str(tmp_path / "s.zarr")).store
    K, y = open_gram(path)
    ds = open_dataset(path)
    gram = ds["gram"]
    assert gram.dims == ("graph_ids", "graph_ids_cols")
    np.testing.assert_array_equal(gram.values, K)
    np.testing.assert_array_equal(gram["graph_ids"].values, np.arange(30))
    np.testing.assert_array_equal(gram["graph_ids_cols"].values, np.arange(30))
    np.testing.assert_array_equal(gram["y"].values, y)  # y and diag ride along the rows
    assert gram["diag"].dims == ("graph_ids",) and np.all(gram["diag"].values > 0)
    assert ds["tiles_done"].dims == ("tile_row", "tile_col") and np.triu(ds["tiles_done"].values).sum() == 10
    assert ds["fit_indices"].dims == ("fit_sample",)
    assert float(gram.sel(graph_ids=3, graph_ids_cols=3)) == pytest.approx(1.0)
    state = open_dataset_group(path, "state")
    assert state["labels"].dims == ("labels_0",)


def open_dataset_group(store, group):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_zarr(store, group=group, consolidated=False)


def test_test_by_train_store_labels_rows_and_columns(tmp_path):
    test = {"synthetic": {"n_graphs": 12, "n_nodes": [5, 10], "avg_degree": 2, "n_labels": 3, "seed": 9}}
    path = run_job(synthetic_job(test={"dataset": test}), out=str(tmp_path / "r.zarr")).store
    gram = open_dataset(path)["gram"]
    assert gram.shape == (12, 30)
    assert gram["y"].dims == ("graph_ids",) and gram["y_cols"].dims == ("graph_ids_cols",)
    assert gram["diag_cols"].shape == (30,)


def sha(k):
    return hashlib.sha256(np.ascontiguousarray(k).tobytes()).hexdigest()


def test_store_of_release_0_1_0_upgrades_without_touching_the_gram(tmp_path, capsys):
    store = tmp_path / "dm-complete.zarr"
    shutil.copytree(OLD / "dm-complete.zarr", store)
    expected = json.loads((OLD / "sha256.json").read_text())["dm-complete.zarr"]
    with pytest.raises(KeyError, match="dimension_names"):
        open_dataset(store)
    assert "gram" in store_info(store)["needs_upgrade"]
    assert main(["info", str(store)]) == 0
    assert f"`gramdist upgrade {store}` adds them" in capsys.readouterr().out
    chunks = {p: p.read_bytes() for p in (store / "gram").rglob("*") if p.is_file() and p.name != "zarr.json"}
    assert main(["upgrade", str(store)]) == 0
    assert "added dimension names to" in capsys.readouterr().out
    assert all(p.read_bytes() == b for p, b in chunks.items())  # metadata only
    assert sha(open_gram(store)[0]) == expected and verify(store)["damaged"] == []
    ds = open_dataset(store)
    assert ds["gram"].dims == ("graph_ids", "graph_ids_cols") and sha(ds["gram"].values) == expected
    assert store_info(store)["needs_upgrade"] == [] and GramStore.open(store, mode='r+').upgrade() == []
    assert main(["upgrade", str(store)]) == 0 and "already up to date" in capsys.readouterr().out


def test_resuming_an_old_store_upgrades_it(tmp_path):
    store = tmp_path / "wl-partial.zarr"
    shutil.copytree(OLD / "wl-partial.zarr", store)
    run_job(load_job(OLD / "wl-partial.yaml", ["cluster.n_workers=1"]), out=str(store))
    expected = json.loads((OLD / "sha256.json").read_text())["wl-partial.zarr"]
    assert sha(open_dataset(store)["gram"].values) == expected
