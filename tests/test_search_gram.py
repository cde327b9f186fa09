"""Kernel similarity search from a Gram store (``gramdist search GRAM_STORE``): the library is
the store's graphs, re-read from its recorded sources, and the kernel is evaluated with its
fitted state. Checked against brute force (a test × train Gram computed in memory), for an
explicit kernel, one without a finite feature map (DM) and one on attributes; tile, kept
embeddings and worker invariance; appended and test × train stores; refusals."""

from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest
from test_deploy import one_error_line, run_cli
from test_search import HERE, QUIET, brute_force, client, top_of  # noqa: F401 - client is a fixture

from gramdist.engine import tasks
from gramdist.engine.append import append
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.search import search
from gramdist.engine.store import GramStore
from gramdist.errors import StoreError
from gramdist.jobs import validate_job

DM = {"name": "dm", "h": 3, "t": 2, "b": 4, "eta": 0.5}


def gram_store(path, kernel: dict, dataset: dict, *, tile: int = 40, test: dict | None = None, **gram) -> str:
    job = {"dataset": dataset, "kernel": kernel, "gram": {"tile_size": tile, "normalize": False, **gram},
           "_job_name": "t"}
    if test is not None:
        job["test"] = {"dataset": test}
    run_job(validate_job(job), out=str(path), placement=HERE, context=QUIET)
    return str(path)


@pytest.mark.parametrize("kernel", [{"name": "wl", "h": 3}, DM, {"name": "sp"}], ids=["wl", "dm", "sp"])
def test_gram_store_search_is_the_brute_force_top_k(tmp_path, dataset_dir, kernel):
    dataset_dir("MUTAG")
    lib, queries = {"name": "MUTAG", "limit": 150}, {"name": "MUTAG", "skip": 150}
    want_rows, want_vals = top_of(brute_force(kernel, lib, queries), 7)
    for tile in (40, 150):  # a last partial tile row, and one chunk
        store = gram_store(tmp_path / f"g{tile}.zarr", kernel, lib, tile=tile)
        res = search(store, queries, top=7, placement=HERE, context=QUIET)
        assert np.array_equal(res.values, want_vals)  # bit for bit: the kernel's own values, normalised per entry
        assert np.array_equal(res.rows, want_rows)
        assert np.array_equal(res.ids, GramStore.open(store).graph_ids()[res.rows])  # the library's own ids


def test_attributed_graphs_search_from_a_graphhopper_store(tmp_path, dataset_dir):
    dataset_dir("ENZYMES")
    kernel = {"name": "graphhopper", "with_labels": True, "attributes": "gaussian", "gamma": 0.001}
    lib = {"name": "ENZYMES", "limit": 90, "node_attributes": "all"}
    queries = {"name": "ENZYMES", "skip": 590, "node_attributes": "all"}
    store = gram_store(tmp_path / "gh.zarr", kernel, lib, tile=32)
    res = search(store, queries, top=5, placement=HERE, context=QUIET)
    want_rows, want_vals = top_of(brute_force(kernel, lib, queries), 5)
    assert np.array_equal(res.values, want_vals) and np.array_equal(res.rows, want_rows)


def test_kept_embeddings_are_read_back_not_recomputed(tmp_path, dataset_dir, monkeypatch):
    dataset_dir("MUTAG")
    lib, queries = {"name": "MUTAG", "limit": 150}, {"name": "MUTAG", "skip": 150, "limit": 9}
    kept = gram_store(tmp_path / "kept.zarr", DM, lib, keep_embeddings=True)
    plain = gram_store(tmp_path / "plain.zarr", DM, lib, keep_embeddings=False)
    embedded = []
    real = tasks.embed_task
    monkeypatch.setattr(tasks, "embed_task", lambda k, s, g: embedded.append(len(g)) or real(k, s, g))
    a = search(kept, queries, top=4, placement=HERE, context=QUIET)
    assert embedded == [9]  # the queries only: the library's four chunks were read back
    embedded.clear()
    b = search(plain, queries, top=4, placement=HERE, context=QUIET)
    assert sorted(embedded) == [9, 30, 40, 40, 40]  # in process, the pool's threads embed in any order
    assert np.array_equal(a.values, b.values) and np.array_equal(a.rows, b.rows)
    assert not any(p.name.startswith("search") for p in (tmp_path / "kept.zarr").rglob("*"))  # nothing written


def test_nci1_gram_search_against_brute_force_and_worker_invariance(tmp_path, dataset_dir, client):  # noqa: F811
    dataset_dir("NCI1")
    kernel = {"name": "wl", "h": 3}
    lib, queries = {"name": "NCI1", "limit": 2000}, {"name": "NCI1", "skip": 4000}
    store = gram_store(tmp_path / "nci1.zarr", kernel, lib, tile=300)
    here = search(store, queries, top=10, placement=HERE, context=QUIET)
    there = search(store, queries, top=10, placement=Placement(client=client), context=QUIET)
    for a, b in ((here.rows, there.rows), (here.values, there.values), (here.ids, there.ids)):
        assert np.array_equal(a, b)
    want_rows, want_vals = top_of(brute_force(kernel, lib, queries), 10)
    assert np.array_equal(here.values, want_vals) and np.array_equal(here.rows, want_rows)


def test_appended_and_test_by_train_stores(tmp_path, dataset_dir):
    """An appended store's library is all its graphs, read from each recorded source; a test x
    train store's library is its training graphs."""
    dataset_dir("MUTAG")
    kernel, queries = {"name": "wl", "h": 2}, {"name": "MUTAG", "skip": 170}
    grown = gram_store(tmp_path / "grown.zarr", kernel, {"name": "MUTAG", "limit": 100}, tile=32)
    append(grown, {"name": "MUTAG", "skip": 100, "limit": 60}, placement=HERE, context=QUIET)
    res = search(grown, queries, top=6, placement=HERE, context=QUIET)
    # the store's state was fitted on its first 100 graphs: the brute force reuses it
    j = validate_job({"dataset": {"name": "MUTAG", "limit": 160}, "kernel": kernel, "fit": {"from_store": grown},
                      "gram": {"tile_size": 64, "normalize": True}, "test": {"dataset": queries}, "_job_name": "t"})
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_job
    from gramdist.engine.runner import compute_in_memory

    want = compute_in_memory(InlineExecutor(), plan_job(j), context=QUIET).gram
    want_rows, want_vals = top_of(want, 6)
    assert np.array_equal(res.values, want_vals) and np.array_equal(res.rows, want_rows)

    rect = gram_store(tmp_path / "rect.zarr", kernel, {"name": "MUTAG", "limit": 120}, tile=50,
                      test={"name": "MUTAG", "skip": 120, "limit": 30})
    res = search(rect, queries, top=6, placement=HERE, context=QUIET)
    want_rows, want_vals = top_of(brute_force(kernel, {"name": "MUTAG", "limit": 120}, queries), 6)
    assert np.array_equal(res.values, want_vals) and np.array_equal(res.rows, want_rows)


def test_moved_sources_need_base_and_combinations_are_refused(tmp_path, dataset_dir):
    src = dataset_dir("MUTAG")
    moved = tmp_path / "MUTAG"
    shutil.copytree(src, moved)
    kernel, queries = {"name": "wl", "h": 2}, {"name": "MUTAG", "skip": 180}
    store = gram_store(tmp_path / "g.zarr", kernel, {"path": str(moved), "limit": 80}, tile=32)
    want = search(store, queries, top=3, placement=HERE, context=QUIET)
    shutil.move(moved, tmp_path / "elsewhere")
    with pytest.raises(StoreError, match="--base"):
        search(store, queries, top=3, placement=HERE, context=QUIET)
    base = {"path": str(tmp_path / "elsewhere"), "limit": 80}
    got = search(store, queries, top=3, placement=HERE, context=QUIET, base=base)
    assert np.array_equal(got.values, want.values) and np.array_equal(got.ids, want.ids)
    wrong = {"path": str(tmp_path / "elsewhere"), "limit": 81}
    with pytest.raises(StoreError, match="are not the store's"):
        search(store, queries, top=3, placement=HERE, context=QUIET, base=wrong)

    out = tmp_path / "hits.csv"
    r = run_cli("search", store, "{name: MUTAG, skip: 180}", "--top", "3", "--base",
                f"{{path: {tmp_path / 'elsewhere'}, limit: 80}}", "--out", str(out), "--quiet", "--workers", "0")
    assert r.returncode == 0, r.stderr
    with open(out, newline="") as f:
        assert [float(row["value"]) for row in csv.DictReader(f)] == want.values.ravel().tolist()
    assert "--base" in one_error_line(run_cli("search", store, "{name: MUTAG, skip: 180}", "--workers", "0"))

    mix = tmp_path / "mix.zarr"
    other = gram_store(tmp_path / "h.zarr", {"name": "wl", "h": 1}, {"name": "MUTAG", "limit": 80}, tile=32)
    gram_store(tmp_path / "h2.zarr", kernel, {"name": "MUTAG", "limit": 80}, tile=32)
    r = run_cli("combine", other, str(tmp_path / "h2.zarr"), "--weights", "1/2,1/2", "--out", str(mix))
    assert r.returncode == 0, r.stderr
    assert "a combination of stores" in one_error_line(run_cli("search", str(mix), "MUTAG", "--workers", "0"))
