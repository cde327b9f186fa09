"""Appends: only the entries of the new graphs are computed, and the grown store is bitwise the
store a from-scratch run over all the graphs gives with the same fitted state (``fit.from_store``).

The graphs are the synthetic generator's (no dataset files): the store holds the first N
(``limit: N``), the append brings the next M (``skip: N``), the reference run all N + M.
Interruptions (a progress callback raising, a killed client, a killed worker), re-appends and
readers during an append are tested on real stores; faults through real processes.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_deploy import GRAMDIST, ROOT, DaskProcesses, last_json, one_error_line, run_cli

from gramdist.engine.append import append
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import GramStore, StoreLock, open_gram, verify
from gramdist.engine.store import info as store_info
from gramdist.engine.store.staging import pending_groups
from gramdist.errors import DatasetError, StoreError
from gramdist.jobs import validate_job
from gramdist.kernels import make_kernel

QUIET = {"log": lambda m: None}


def synthetic(n_total: int, seed: int = 3, attr_dim: int = 0) -> dict:
    return {"n_graphs": n_total, "n_nodes": [6, 12], "avg_degree": 2.5, "n_labels": 4, "attr_dim": attr_dim,
            "seed": seed}


def job(n_total: int, *, limit: int | None = None, tile: int = 7, kernel: dict | None = None,
        normalize: bool = True, dtype: str = "float64", from_store: str | None = None, test: dict | None = None,
        attr_dim: int = 0, checkpoint: float = 2.0, keep: bool | str = False) -> dict:
    ds = {"synthetic": synthetic(n_total, attr_dim=attr_dim)}
    if limit is not None:
        ds["limit"] = limit
    spec = {"dataset": ds, "kernel": kernel or {"name": "wl", "h": 2},
            "gram": {"tile_size": tile, "normalize": normalize, "dtype": dtype, "checkpoint_seconds": checkpoint,
                     "keep_embeddings": keep},
            "fit": {"sample_size": 10, "seed": 1, "from_store": from_store}, "_job_name": "append"}
    if test is not None:
        spec["test"] = {"dataset": test}
    return validate_job(spec)


def new_graphs(n_total: int, n_old: int, attr_dim: int = 0) -> dict:
    return {"synthetic": synthetic(n_total, attr_dim=attr_dim), "skip": n_old}


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as cl:
        yield cl


def base_and_reference(tmp_path: Path, client, n: int, m: int, **kw) -> tuple[Path, np.ndarray]:
    """A store of the first ``n`` graphs, and the Gram of a from-scratch run over ``n + m``
    graphs with that store's fitted state."""
    base = tmp_path / "base.zarr"
    run_job(job(n + m, limit=n, **kw), out=str(base), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    ref = tmp_path / "ref.zarr"
    run_job(job(n + m, from_store=str(base), **kw), out=str(ref), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    return base, open_gram(ref)[0]


@pytest.mark.parametrize("n, m, tile, workers", [
    (30, 12, 7, "inline"),   # N not a multiple of T: the straddling tiles grow
    (28, 3, 7, "cluster"),   # N a multiple of T, M < T
    (28, 40, 7, "inline"),   # M > T, several new tile rows
    (5, 20, 7, "cluster"),   # N < T: the store's only chunk was smaller than a tile
    (21, 1, 7, "inline"),    # one graph
])
def test_append_is_bitwise_a_from_scratch_run(tmp_path, client, n, m, tile, workers):
    base, reference = base_and_reference(tmp_path, client, n, m, tile=tile)
    old = open_gram(base)[0]
    where = Placement(client=client) if workers == "cluster" else Placement(in_process=True)
    res = append(base, new_graphs(n + m, n), placement=where, context=RunContext(log=lambda m: None))
    grown, y = open_gram(base)
    assert res.complete and res.added == m and res.n_rows == n + m
    assert grown.shape == (n + m, n + m) and np.array_equal(grown, reference)
    assert np.array_equal(grown[:n, :n], old)
    # only the tiles with a new graph in them were computed: the kept ones are the old store's
    # tiles that neither straddle nor grow
    n_old_full = n // tile
    assert res.tiles_kept == n_old_full * (n_old_full + 1) // 2
    assert res.tiles_computed == res.tiles_total - res.tiles_kept
    info = store_info(base)
    assert info["complete"] and info["shape"] == [n + m, n + m]
    assert [a["n_graphs"] for a in info["appends"]] == [m] and info["appends"][0]["rows"] == [n, n + m]
    ids = zarr.open_group(str(base), mode="r")["graph_ids"][...]
    assert np.array_equal(ids, np.arange(n + m)) and len(y) == n + m
    assert verify(base)["problems"] == []


def _entries_by_hand(n: int, m: int, tile: int) -> int:
    """Kernel values an append of m graphs to n must compute, counted entry by entry: every
    value of an upper tile in a new row or column; on a diagonal tile (computed whole and
    mirrored) the values in a new column."""
    total = n + m
    count = 0
    for i in range(0, total, tile):
        for j in range(i, total, tile):
            for r in range(i, min(i + tile, total)):
                for c in range(j, min(j + tile, total)):
                    count += (c >= n) if i == j else (r >= n or c >= n)
    return count


@pytest.mark.parametrize("n, m, tile", [(30, 12, 7), (37, 3, 10), (20, 1, 6)])
def test_a_straddling_tile_computes_only_its_new_entries(tmp_path, client, monkeypatch, n, m, tile):
    """Whatever T, the values computed are the new rows and columns only (about M·(N + M)),
    counted by the command and by the kernel's own calls; the Gram is the from-scratch one."""
    from gramdist.kernels.features.wl import WLSubtreeKernel

    base, reference = base_and_reference(tmp_path, client, n, m, tile=tile)
    computed = []
    real = WLSubtreeKernel.pairwise

    def pairwise(self, a, b, state):
        computed.append(len(a) * len(b))
        return real(self, a, b, state)

    monkeypatch.setattr(WLSubtreeKernel, "pairwise", pairwise)
    res = append(base, new_graphs(n + m, n), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert res.entries_computed == sum(computed) == _entries_by_hand(n, m, tile)
    assert res.entries_computed <= m * (n + m) + tile * m  # never a whole straddling tile
    assert np.array_equal(open_gram(base)[0], reference)


def test_a_damaged_old_tile_is_never_carried_into_a_grown_one(tmp_path, client):
    """The known part of a straddling tile is checked against its recorded checksum before it
    is merged: a value changed there stops the append with one line pointing to verify."""
    base, _ = base_and_reference(tmp_path, client, 30, 12, tile=7)
    arr = zarr.open_array(str(base / "gram"), mode="r+")
    arr[28, 29] = arr[28, 29] + 1e-9  # tile (4, 4) straddles the old edge (28..34)
    with pytest.raises(Exception, match=r"tile \(4, 4\) does not match the checksum"):
        append(base, new_graphs(42, 30), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))


@pytest.mark.parametrize("kernel, normalize, dtype", [
    ({"name": "dm", "h": 2, "t": 3, "b": 4, "descriptor_sample": 200}, False, "float64"),
    ({"name": "wl", "h": 3}, True, "float32"),
])
def test_append_other_kernels_and_float32(tmp_path, client, kernel, normalize, dtype):
    base, reference = base_and_reference(tmp_path, client, 23, 17, tile=6, kernel=kernel, normalize=normalize,
                                         dtype=dtype)
    res = append(base, new_graphs(40, 23), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    grown = open_gram(base)[0]
    assert res.complete and grown.dtype == np.dtype(dtype) and np.array_equal(grown, reference)
    assert verify(base)["problems"] == []


def test_two_appends_then_a_third_reread_all_sources(tmp_path, client):
    """Each append re-reads the store's dataset and every earlier append's source."""
    base, reference = base_and_reference(tmp_path, client, 20, 25, tile=8)
    spec = synthetic(45)
    for lo, hi in ((20, 26), (26, 31), (31, 45)):
        res = append(base, {"synthetic": spec, "skip": lo, "limit": hi - lo}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
        assert res.complete and res.n_rows == hi
    assert np.array_equal(open_gram(base)[0], reference)
    assert [a["rows"] for a in store_info(base)["appends"]] == [[20, 26], [26, 31], [31, 45]]


def count_embedded(monkeypatch) -> list[int]:
    """Graphs embedded (not read from the store) by tasks run in this process."""
    from gramdist.engine import tasks

    counted: list[int] = []
    real = tasks.embed_task

    def embed_task(kernel, state, graphs):
        counted.append(len(graphs))
        return real(kernel, state, graphs)

    monkeypatch.setattr(tasks, "embed_task", embed_task)
    return counted


@pytest.mark.parametrize("keep", [False, True])
def test_kept_embeddings_spare_the_old_graphs(tmp_path, client, monkeypatch, keep):
    """A store that keeps its chunks' embeddings (gram.keep_embeddings: true) appends without
    embedding its old graphs again, and keeps the new ones; one that does not (false) embeds
    every graph at every append and keeps nothing. Either way the bits are the from-scratch
    run's; a damaged kept embedding is embedded again."""
    base, reference = base_and_reference(tmp_path, client, 30, 20, tile=6, keep=keep)
    from gramdist.engine import tasks

    counted, nodes = count_embedded(monkeypatch), []
    placed = []  # the node count the placement weighs: only the graphs embedded, not those read back
    real_executor = Placement.executor
    monkeypatch.setattr(Placement, "executor", lambda self, n, log=None, n_nodes=0: (
        placed.append(n_nodes), real_executor(self, n, log, n_nodes))[1])
    spy = tasks.embed_task
    monkeypatch.setattr(tasks, "embed_task", lambda k, s, g: (nodes.append(g.n_nodes), spy(k, s, g))[1])
    append(base, {**new_graphs(50, 30), "limit": 9}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))  # 30 -> 39: chunk 5 straddles
    assert sum(counted) == (39 if not keep else 9)
    # the store's kernel (WL) weighs each node as its node_weight: half (one linear pass)
    assert placed == [int(sum(nodes) * make_kernel("wl").node_weight)] and sum(nodes) > 0
    monkeypatch.setattr(tasks, "embed_task", spy)
    counted.clear()
    embeddings = base / "embeddings"
    if keep:
        (embeddings / "r2" / "zarr.json").write_text("{garbled")  # a damaged entry: embedded again
        values = zarr.open_array(str(embeddings / "r3" / next(iter(
            p.name for p in (embeddings / "r3").iterdir() if p.is_dir()))), mode="r+")
        values[0] = values[0] + 1  # decodable, but not what was kept: embedded again
    append(base, {**new_graphs(50, 30), "skip": 39}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))  # 39 -> 50
    # kept: chunks 2 and 3 again, the straddling chunk 6, 42..47, 48..49; not kept: all 50
    assert sorted(counted) == ([2, 6, 6, 6, 6] if keep else [2] + [6] * 8)
    assert np.array_equal(open_gram(base)[0], reference)
    kept = sorted(p.name for p in embeddings.iterdir() if p.is_dir()) if embeddings.exists() else []
    assert kept == ([f"r{i}" for i in range(9)] if keep else [])


@pytest.mark.parametrize("fraction, kept", [(1e6, True), (1e-9, False)])
def test_auto_keeps_an_embedding_only_when_small_beside_the_gram(tmp_path, client, monkeypatch, fraction, kept):
    """The default (keep_embeddings: auto) keeps a chunk's embedding when its arrays take at
    most KEEP_FRACTION of the chunk's Gram rows; the store records the setting, and an append
    reads back what was kept."""
    from gramdist.engine.store import state

    monkeypatch.setattr(state, "KEEP_FRACTION", fraction)
    base, reference = base_and_reference(tmp_path, client, 30, 12, tile=6, keep="auto")
    assert GramStore.open(base).attributes()["keep_embeddings"] == "auto"
    has = (base / "embeddings").exists() and any(p.is_dir() for p in (base / "embeddings").iterdir())
    counted = count_embedded(monkeypatch)
    append(base, new_graphs(42, 30), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert has == kept and sum(counted) == (12 if kept else 42)
    assert np.array_equal(open_gram(base)[0], reference)


def test_a_kernel_cheaper_to_embed_than_to_read_keeps_nothing(tmp_path, client, monkeypatch):
    """Vertex histograms embed in one pass over the labels (``embedding_worth_keeping = False``):
    a store asked to keep embeddings keeps none of them and an append embeds every graph."""
    base, reference = base_and_reference(tmp_path, client, 20, 6, tile=8, keep=True,
                                         kernel={"name": "vertex_histogram"})
    assert not any((base / "embeddings").glob("r*"))
    counted = count_embedded(monkeypatch)
    append(base, new_graphs(26, 20), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert sum(counted) == 26 and not any((base / "embeddings").glob("r*"))
    assert np.array_equal(open_gram(base)[0], reference)


def test_keep_budget_rule():
    from gramdist.engine.store.state import KEEP_FRACTION, keep_budget

    assert keep_budget(True, 100, 5000, 8) is None and keep_budget(False, 100, 5000, 8) == 0
    assert keep_budget("auto", 100, 5000, 8) == int(KEEP_FRACTION * 100 * 5000 * 8)
    assert keep_budget("auto", 100, 5000, 4) == keep_budget("auto", 100, 5000, 8) // 2



def test_an_embedding_kept_under_its_old_class_name_still_reads(tmp_path):
    """0.2.0 stores name ``SparseFeatures`` under ``kernels/features/sparse_features``: read as
    the class that moved to ``kernels/sparse``; an unknown class is still refused (re-embedded)."""
    from gramdist.engine.store.state import read_embedding, write_embedding
    from gramdist.kernels.sparse import SparseFeatures

    emb = SparseFeatures(indptr=np.array([0, 2, 3]), keys=np.array([4, 9, 4], dtype=np.uint64),
                         values=np.array([1.0, 2.0, 3.0]))
    assert write_embedding(str(tmp_path), "r0", emb, "c")
    group = zarr.open_group(str(tmp_path / "embeddings" / "r0"), mode="r+")
    group.attrs["class"] = "gramdist.kernels.features.sparse_features.SparseFeatures"
    back = read_embedding(str(tmp_path), "r0", "c")
    assert isinstance(back, SparseFeatures) and np.array_equal(back.keys, emb.keys)
    group.attrs["class"] = "gramdist.kernels.features.gone.SparseFeatures"
    assert read_embedding(str(tmp_path), "r0", "c") is None

def test_reappending_the_same_graphs_does_nothing(tmp_path, client):
    base, reference = base_and_reference(tmp_path, client, 20, 6, tile=8)
    append(base, new_graphs(26, 20), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    before = {p: p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()}
    lines = []
    again = append(base, new_graphs(26, 20), placement=Placement(in_process=True), context=RunContext(log=lines.append))
    assert again.added == 0 and again.tiles_computed == 0 and "already in the store (append 1" in again.nothing_to_do
    assert any("nothing to do" in line for line in lines)
    assert {p: p.stat().st_mtime_ns for p in base.rglob("*") if p.is_file()} == before
    # the store's own dataset is recognised too
    first = append(base, {"synthetic": synthetic(26), "limit": 20}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert "already in the store (its dataset" in first.nothing_to_do
    r = run_cli("append", str(base), json.dumps(new_graphs(26, 20)), "--json", "--quiet")
    assert r.returncode == 0 and last_json(r.stdout)["nothing_to_do"], r.stderr
    assert np.array_equal(open_gram(base)[0], reference)


def stop_after(n_tiles):
    def callback(done, total):
        if done >= n_tiles:
            raise KeyboardInterrupt
    return callback


def test_interrupted_append_reads_as_before_and_resumes(tmp_path, client):
    base, reference = base_and_reference(tmp_path, client, 30, 25, tile=6)
    old = open_gram(base)[0]
    progress_before = store_info(base)["tiles_done"]
    with pytest.raises(KeyboardInterrupt):
        append(base, new_graphs(55, 30), placement=Placement(client=client), context=RunContext(progress=stop_after(progress_before + 9), log=lambda m: None))
    # the store reads as it was: the last complete N, bitwise
    k, y = open_gram(base)
    assert np.array_equal(k, old) and len(y) == 30
    info = store_info(base)
    assert info["complete"] and info["shape"] == [30, 30]
    assert info["pending_append"]["state"] == "computing" and info["pending_append"]["to"] == [55, 55]
    assert 0 < info["pending_append"]["tiles_done"] < info["pending_append"]["tiles_total"]
    text = run_cli("info", str(base)).stdout
    assert "pending:   append of 25 graphs (30 -> 55 rows) in progress or interrupted" in text
    assert verify(base)["problems"] == []
    # another append is refused until this one is finished or discarded
    with pytest.raises(StoreError, match="an interrupted append of 25 graphs .* is pending"):
        append(base, new_graphs(60, 55), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    # the same append (or none) resumes it; a stray staging group (an append killed before it
    # recorded its group) is removed without touching the pending one
    (base / "pending_0123456789ab").mkdir()
    res = append(base, None, placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert res.complete and res.tiles_kept == progress_before + 9
    assert res.tiles_computed == res.tiles_total - res.tiles_kept
    assert np.array_equal(open_gram(base)[0], reference)
    assert pending_groups(GramStore.open(base)) == [] and store_info(base)["pending_append"] is None


def test_abort_discards_an_interrupted_append(tmp_path, client):
    base, _ = base_and_reference(tmp_path, client, 20, 10, tile=6)
    old = open_gram(base)[0]
    with pytest.raises(KeyboardInterrupt):
        append(base, new_graphs(30, 20), placement=Placement(in_process=True), context=RunContext(progress=stop_after(12), log=lambda m: None))
    res = append(base, abort=True, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert res.nothing_to_do == "discarded the interrupted append"
    assert pending_groups(GramStore.open(base)) == [] and store_info(base)["pending_append"] is None
    assert np.array_equal(open_gram(base)[0], old)


def test_readers_during_a_commit_fail_in_one_line_and_the_next_append_finishes_it(tmp_path, client, monkeypatch):
    """A commit killed halfway (after the chunks moved, before the arrays grew): readers are
    told in one line; the next `gramdist append` finishes the commit, bitwise."""
    base, reference = base_and_reference(tmp_path, client, 24, 9, tile=8)
    from gramdist.engine.store import staging

    real = staging._copy_array_files

    def dies_after_the_chunks_moved(location, source, target):
        if target in ("tile_checksums", "tiles_done"):  # the store's own records, not the staging group's
            raise KeyboardInterrupt  # the process dies here
        return real(location, source, target)

    monkeypatch.setattr(staging, "_copy_array_files", dies_after_the_chunks_moved)
    with pytest.raises(KeyboardInterrupt):
        append(base, new_graphs(33, 24), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    monkeypatch.setattr(staging, "_copy_array_files", real)
    with pytest.raises(StoreError, match="is being committed; read it again in a moment"):
        open_gram(base)
    for args in (("evaluate", str(base), "--workers", "0", "--folds", "2", "--repeats", "1"), ("info", str(base))):
        line = one_error_line(run_cli(*args))
        assert "an append (24 -> 33 graphs) is being committed; read it again in a moment" in line, line
    res = append(base, None, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert res.complete and res.tiles_computed == 0
    assert np.array_equal(open_gram(base)[0], reference)
    assert verify(base)["problems"] == []


def test_rectangular_store_grows_in_rows(tmp_path, client):
    test_all = {"synthetic": {**synthetic(35), "seed": 9}}
    base = tmp_path / "rect.zarr"
    run_job(job(50, test={**test_all, "limit": 20}, tile=8), out=str(base), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    ref = tmp_path / "ref.zarr"
    run_job(job(50, test=test_all, tile=8, from_store=str(base)), out=str(ref), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    res = append(base, {**test_all, "skip": 20}, placement=Placement(client=client), context=RunContext(log=lambda m: None))
    grown = open_gram(base)[0]
    assert res.complete and grown.shape == (35, 50)
    assert np.array_equal(grown, open_gram(ref)[0])
    assert store_info(base)["test_dataset"]["n_graphs"] == 20 and verify(base)["problems"] == []


def test_moved_sources_are_named_and_base_replaces_them(tmp_path, client, dataset_dir):
    """A store whose dataset folder moved: the append says which source cannot be re-read;
    --base gives the graphs (checked against the store's checksum)."""
    src = tmp_path / "data" / "MUTAG"
    shutil.copytree(dataset_dir("MUTAG"), src)
    spec = {"dataset": {"path": str(src), "limit": 150}, "kernel": {"name": "wl", "h": 2},
            "gram": {"tile_size": 64, "normalize": True}, "_job_name": "m"}
    base = tmp_path / "m.zarr"
    run_job(validate_job(spec), out=str(base), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    moved = tmp_path / "moved" / "MUTAG"
    moved.parent.mkdir()
    src.rename(moved)
    with pytest.raises(StoreError, match=r"cannot re-read its dataset .*MUTAG.*pass the store's current graphs"):
        append(base, {"path": str(moved), "skip": 150}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    line = one_error_line(run_cli("append", str(base), f"{{path: {moved}, skip: 150}}"))
    assert "cannot re-read its dataset" in line
    with pytest.raises(StoreError, match="are not the store's"):
        append(base, {"path": str(moved), "skip": 150}, base={"path": str(moved), "limit": 149}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    res = append(base, {"path": str(moved), "skip": 150}, base={"path": str(moved), "limit": 150}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert res.complete and res.n_rows == 188
    full = tmp_path / "full.zarr"
    run_job(validate_job({**spec, "dataset": {"path": str(moved)}, "fit": {"from_store": str(base)}}), out=str(full), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert np.array_equal(open_gram(base)[0], open_gram(full)[0])


def test_incompatible_new_graphs_are_refused_in_one_line(tmp_path, client):
    base, _ = base_and_reference(tmp_path, client, 20, 5, tile=8)
    with pytest.raises(DatasetError, match="node attribute column"):
        append(base, {"synthetic": synthetic(25, attr_dim=2), "skip": 20}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    line = one_error_line(run_cli("append", str(base), "{synthetic: {n_graphs: 3, n_nodes: 5, n_labels: 0, "
                                  "attr_dim: 0, avg_degree: 2}}"))
    assert "cannot be appended" in line and "node_labels" in line, line
    line = one_error_line(run_cli("append", str(tmp_path / "nowhere.zarr"), "MUTAG"))
    assert "no such store" in line
    assert not (tmp_path / "nowhere.zarr.lock").exists()


def test_a_second_writer_is_refused_and_info_names_the_first(tmp_path, client):
    """Real processes: while this process holds the lock, `gramdist append` (and `verify
    --repair`) in another process are refused naming this one, exit 2; `info` shows it."""
    base, _ = base_and_reference(tmp_path, client, 20, 5, tile=8)
    with StoreLock(base):
        line = one_error_line(run_cli("append", str(base), json.dumps(new_graphs(25, 20))))
        assert f"{base}: being written by another run (host {os.uname().nodename}, process {os.getpid()}, since " in line
        line = one_error_line(run_cli("verify", "--repair", str(base)))
        assert "being written by another run" in line
        text = run_cli("info", str(base)).stdout
        assert "writer:    " in text and f"process {os.getpid()}" in text
        assert store_info(base)["writer"]["pid"] == os.getpid()
    assert store_info(base)["writer"] is None


# ------------------------------------------------------------------------------ real processes
def start_append(store: Path, data: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen([*GRAMDIST, "append", str(store), json.dumps(data), "--quiet", "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)


def pending_done(store: Path) -> int:
    try:
        rec = zarr.open_group(str(store), mode="r").attrs.get("pending_append") or {}
        return int(np.asarray(zarr.open_array(str(store / rec["group"] / "tiles_done"), mode="r")[...]).sum())
    except Exception:
        return 0


def wait_for_pending(proc: subprocess.Popen, store: Path, at_least: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while (n := pending_done(store)) < at_least:
        if proc.poll() is not None:
            raise AssertionError(f"the append ended first:\n{proc.communicate()[1][-3000:]}")
        if time.time() > deadline:
            raise AssertionError(f"only {n} tiles in the staging mask after {timeout} s")
        time.sleep(0.05)
    return n


@pytest.fixture(scope="module")
def big_store(tmp_path_factory, client):
    """240 graphs in tiles of 10, to which 120 are appended: 366 tiles to compute, enough to
    strike in the middle (made once; each test appends to its own copy)."""
    return base_and_reference(tmp_path_factory.mktemp("big"), client, 240, 120, tile=10, checkpoint=0.2)


@pytest.fixture
def big_base(big_store, tmp_path):
    store, reference = big_store
    copy = tmp_path / "base.zarr"
    shutil.copytree(store, copy)
    return copy, reference


def test_client_killed_mid_append_then_rerun(big_base, tmp_path):
    base, reference = big_base
    old = open_gram(base)[0]
    proc = start_append(base, new_graphs(360, 240), "--workers", "2")
    # the staging done-mask is saved every 2 s: wait for a saved part, then kill everything
    at_kill = wait_for_pending(proc, base, 300 + 40)  # 300 tiles are kept from the store
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert np.array_equal(open_gram(base)[0], old)  # the store as it was
    info = json.loads(run_cli("info", str(base), "--json").stdout)
    assert info["pending_append"]["state"] == "computing" and info["writer"]["stale"]
    r = run_cli("append", str(base), json.dumps(new_graphs(360, 240)), "--quiet", "--json", "--workers", "2")
    assert r.returncode == 0, r.stderr[-3000:]
    s = last_json(r.stdout)
    assert s["complete"] and s["tiles_kept"] >= at_kill and s["tiles_computed"] == s["tiles_total"] - s["tiles_kept"]
    assert "took over the lock" in r.stderr
    assert np.array_equal(open_gram(base)[0], reference)


def test_worker_killed_mid_append(big_base, tmp_path):
    base, reference = big_base
    cluster = DaskProcesses(tmp_path / "cluster")
    try:
        pids = cluster.start("w0", "w1")
        proc = start_append(base, new_graphs(360, 240), "--scheduler", cluster.address)
        wait_for_pending(proc, base, 300 + 80)
        os.kill(pids["w0"], signal.SIGKILL)
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        assert last_json(out)["complete"]
        assert np.array_equal(open_gram(base)[0], reference)
    finally:
        cluster.close()


def test_a_process_that_read_the_store_sees_it_grown(tmp_path, client):
    """Grams cached by evaluate (and by combinations) are keyed by the store's version: after an
    append, the same process reads the grown store, not the cached old one."""
    from gramdist.evaluation.combine import normalised_gram
    from gramdist.evaluation.nested_cv import _load, evaluate
    from gramdist.evaluation.protocols import Protocol

    base, reference = base_and_reference(tmp_path, client, 30, 10, tile=8)
    assert _load(str(base)).shape == (30, 30) and normalised_gram(str(base)).shape == (30, 30)
    assert evaluate([str(base)], Protocol(folds=2, repeats=1))["test_graphs"] == 30
    append(base, new_graphs(40, 30), placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    assert np.array_equal(_load(str(base)), reference) and normalised_gram(str(base)).shape == (40, 40)
    assert evaluate([str(base)], Protocol(folds=2, repeats=1))["test_graphs"] == 40
