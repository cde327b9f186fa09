"""``gram.spill_embeddings``: the chunks' embeddings go to the store as they are made and the
tasks that use them (tiles, K(g, g), counters) read them back, so that a run holds references,
not every chunk's arrays (WL-SP on D&D: 12 GB of explicit vectors). The Gram is the same bits
in process and on Dask workers; a run stopped part way resumes from the kept embeddings; a
damaged one is embedded again; the job refuses ``keep_embeddings: false`` with it."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
from test_deploy import one_error_line, run_cli

from gramdist.engine import tasks
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import GramStore, KeptEmbedding, open_gram, verify
from gramdist.errors import StoreError
from gramdist.jobs import validate_job

QUIET = RunContext(log=lambda m: None)


def job(spill: bool, *, kernel: dict | None = None, n: int = 40, tile: int = 9) -> object:
    return validate_job({
        "dataset": {"synthetic": {"n_graphs": n, "n_nodes": [6, 14], "avg_degree": 2.5, "n_labels": 4,
                                  "attr_dim": 0, "seed": 7}},
        "kernel": kernel or {"name": "wlsp", "h": 2},
        "gram": {"tile_size": tile, "normalize": True, "spill_embeddings": spill},
        "_job_name": "spill"})


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as cl:
        yield cl


def count_loads(monkeypatch) -> list[str]:
    """The chunk of every kept embedding read back (tiles, K(g, g), counters)."""
    loads: list[str] = []
    load = KeptEmbedding.load

    def counting(self):
        loads.append(self.name)
        return load(self)

    monkeypatch.setattr(KeptEmbedding, "load", counting)
    return loads


@pytest.mark.parametrize("where", ["in_process", "cluster"])
@pytest.mark.parametrize("kernel", [{"name": "wlsp", "h": 2}, {"name": "sp"}, {"name": "graphhopper"}])
def test_spilled_embeddings_give_the_same_bits_and_tiles_hold_references(tmp_path, monkeypatch, client, where,
                                                                         kernel):
    placement = Placement(client=client) if where == "cluster" else Placement(in_process=True)
    run_job(job(False, kernel=kernel), out=str(tmp_path / "memory.zarr"), placement=placement, context=QUIET)
    loads = count_loads(monkeypatch)
    res = run_job(job(True, kernel=kernel), out=str(tmp_path / "spill.zarr"), placement=placement, context=QUIET)
    assert res.complete
    assert np.array_equal(open_gram(tmp_path / "spill.zarr")[0], open_gram(tmp_path / "memory.zarr")[0])
    # 5 x 5 tiles of 9, the upper 15: each reads its two chunks (a diagonal one, its one chunk
    # once), and each chunk's K(g, g) reads it once more
    assert len(loads) >= 2 * 10 + 5 + 5 and set(loads) == {f"r{i}" for i in range(5)}
    store = GramStore.open(tmp_path / "spill.zarr")
    assert store.keeps_embeddings
    assert sorted(p.name for p in (tmp_path / "spill.zarr" / "embeddings").iterdir() if p.is_dir()) == \
        [f"r{i}" for i in range(5)]
    assert verify(tmp_path / "spill.zarr")["problems"] == []


def test_an_interrupted_spilling_run_resumes_from_the_kept_embeddings(tmp_path, monkeypatch):
    """Stopped after three tiles, the rerun embeds nothing (each kept chunk is read once to
    check it) and its Gram is the uninterrupted run's."""
    where = Placement(in_process=True)
    run_job(job(False), out=str(tmp_path / "ref.zarr"), placement=where, context=QUIET)
    out = tmp_path / "s.zarr"

    def stop_after_three(done, total):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_job(job(True), out=str(out), placement=where, context=RunContext(log=lambda m: None,
                                                                            progress=stop_after_three))
    embedded = []
    embed_task = tasks.embed_task
    monkeypatch.setattr(tasks, "embed_task", lambda *a: embedded.append(1) or embed_task(*a))
    res = run_job(job(True), out=str(out), placement=where, context=QUIET)
    assert res.complete and res.tiles_already_done >= 3
    assert embedded == []
    assert np.array_equal(open_gram(out)[0], open_gram(tmp_path / "ref.zarr")[0])


def test_a_damaged_kept_embedding_is_embedded_again_and_a_lost_one_is_named(tmp_path):
    from gramdist.datasets import load_dataset
    from gramdist.engine.store import EmbeddingCache
    from gramdist.kernels import make_kernel

    out = tmp_path / "s.zarr"
    run_job(job(True), out=str(out), placement=Placement(in_process=True), context=QUIET)
    graphs = load_dataset(job(True).dataset)[:9]
    kernel = make_kernel("wlsp", h=2)
    state = kernel.fit(graphs, 0)
    cache = EmbeddingCache(str(out), str(out))
    kept = tasks.spilled_embed_task(kernel, state, graphs, cache, "r0", graphs.checksum())
    assert isinstance(kept, KeptEmbedding) and len(kept) == 9
    reference = kept.load()
    arrays = sorted(p for p in (out / "embeddings" / "r0").iterdir() if p.is_dir())
    shutil.rmtree(arrays[0])  # one of its arrays lost: read back as missing, so embedded again
    with pytest.raises(StoreError, match="kept embedding of chunk r0 is missing or damaged; rerun"):
        kept.load()
    again = tasks.spilled_embed_task(kernel, state, graphs, cache, "r0", graphs.checksum())
    assert again == kept
    assert np.array_equal(tasks.diag_task(kernel, state, again), kernel.self_similarity(reference, state))


def test_spill_with_keep_embeddings_false_is_one_line(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("dataset: {name: MUTAG}\nkernel: {name: wl}\n"
                    "gram: {spill_embeddings: true, keep_embeddings: false}\n")
    line = one_error_line(run_cli("run", str(path), "--out", str(tmp_path / "x.zarr")))
    assert "gram.spill_embeddings" in line and "keep_embeddings: false" in line
