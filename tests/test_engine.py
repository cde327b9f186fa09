"""The engine: tiling, mirroring, workers, resume, rectangular mode, normalisation, failures."""

from __future__ import annotations

import logging
import subprocess
import sys

import numpy as np
import pytest
import zarr
from faultinject import FailTile

from gramdist.datasets import load_dataset
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import GramStore, open_gram, read_state
from gramdist.engine.store import info as store_info
from gramdist.errors import StoreError, TileError
from gramdist.jobs import FitSpec, GramSpec, validate_job
from gramdist.kernels.features.wl import WLSubtreeKernel
from gramdist.kernels.sparse import dot


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR) as c:
        with Client(c) as cl:
            yield cl


def mutag_job(**gram):
    return validate_job({"dataset": {"name": "MUTAG"}, "kernel": {"name": "wl", "h": 3},
                         "gram": {"tile_size": 64, **gram}, "_job_name": "mutag-wl"})


def reference(mutag, h=3):
    f = WLSubtreeKernel(h).features(mutag)
    return dot(f, f)


def test_gram_bitwise_identical_for_tile_sizes(client, tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    grams = []
    for t in (7, 64, len(mutag)):
        res = run_job(mutag_job(tile_size=t), out=str(tmp_path / f"t{t}.zarr"), placement=Placement(client=client))
        assert res.complete
        grams.append(open_gram(res.store)[0])
    assert np.array_equal(grams[0], grams[1]) and np.array_equal(grams[1], grams[2])
    assert np.array_equal(grams[0], reference(mutag))
    assert np.array_equal(grams[0], grams[0].T)


def test_gram_identical_for_one_and_two_workers(client, tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    dataset_dir("MUTAG")
    job = mutag_job(tile_size=32, normalize=True)
    a = run_job(job, out=str(tmp_path / "two.zarr"), placement=Placement(client=client))
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR) as c:
        with Client(c) as one:
            b = run_job(job, out=str(tmp_path / "one.zarr"), placement=Placement(client=one))
    assert np.array_equal(open_gram(a.store)[0], open_gram(b.store)[0])


def test_store_layout_and_attributes(client, tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    res = run_job(mutag_job(tile_size=50), out=str(tmp_path / "s.zarr"), placement=Placement(client=client))
    root = zarr.open_group(res.store, mode="r")
    assert root["gram"].shape == (188, 188) and root["gram"].chunks == (50, 50)
    assert root["tiles_done"].shape == (4, 4)
    mask = root["tiles_done"][...]
    assert np.array_equal(mask, np.triu(np.ones((4, 4), dtype=np.uint8)))  # upper triangle only
    assert np.array_equal(root["y"][...], mutag.y)
    assert np.array_equal(root["graph_ids"][...], mutag.graph_ids)
    assert np.array_equal(root["diag"][...], np.diag(reference(mutag)))
    attrs = dict(root.attrs)
    assert attrs["complete"] and attrs["kernel"] == {"name": "wl", "params": {"h": 3}}
    assert attrs["dataset"]["checksum"] == mutag.checksum() and attrs["dataset"]["n_graphs"] == 188
    assert attrs["fit"]["seed"] == 0 and attrs["normalize"] is False
    state = read_state(res.store)
    assert state.arrays["labels"].dtype == np.uint64 and len(state.arrays["labels"]) > 0
    assert np.array_equal(root["fit_indices"][...], np.arange(188))
    # every persisted file is JSON metadata or a Zarr chunk: nothing to unpickle
    for f in (tmp_path / "s.zarr").rglob("*"):
        assert not f.name.endswith((".pkl", ".pickle"))


def stop_after(n_tiles):
    """A progress callback that interrupts the run (as Ctrl-C would) after ``n_tiles`` tiles."""
    def callback(done, total):
        if done >= n_tiles:
            raise KeyboardInterrupt
    return callback


def test_resume_computes_only_missing_tiles(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    job = mutag_job(tile_size=20)
    path = str(tmp_path / "r.zarr")
    with pytest.raises(KeyboardInterrupt):
        run_job(job, out=path, placement=Placement(client=client), context=RunContext(progress=stop_after(17)))
    first = store_info(path)
    assert first["tiles_done"] == 17 and not first["complete"]
    assert store_info(path)["complete"] is False
    with pytest.raises(StoreError, match="incomplete"):
        open_gram(path)
    second = run_job(job, out=path, placement=Placement(client=client))
    assert second.tiles_already_done == 17 and second.tiles_computed == first["tiles_total"] - 17
    assert second.complete
    full = run_job(job, out=str(tmp_path / "full.zarr"), placement=Placement(client=client))
    assert np.array_equal(open_gram(path)[0], open_gram(full.store)[0])
    third = run_job(job, out=path, placement=Placement(client=client))
    assert third.tiles_computed == 0


def test_store_without_its_diagonal_is_not_complete_and_resumes(client, tmp_path, dataset_dir):
    # the diagonal is gathered while tiles run: a job stopped before it was stored has every
    # tile but must neither count as complete nor recompute tiles on resume
    dataset_dir("MUTAG")
    job = mutag_job(tile_size=40, normalize=True)
    path = str(tmp_path / "d.zarr")
    run_job(job, out=path, placement=Placement(client=client))
    gram = open_gram(path)[0]
    root = zarr.open_group(path, mode="r+")
    diag = root["diag"][...]
    root.attrs["diag_complete"] = False
    root["diag"][...] = 0.0
    assert not GramStore.open(path, mode="r+").mark_complete()
    assert store_info(path)["complete"] is False
    again = run_job(job, out=path, placement=Placement(client=client))
    assert again.complete and again.tiles_computed == 0
    assert np.array_equal(zarr.open_group(path, mode="r")["diag"][...], diag)
    assert np.array_equal(open_gram(path)[0], gram)


def test_rerun_into_store_of_other_job_is_refused(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    path = str(tmp_path / "x.zarr")
    run_job(mutag_job(), out=path, placement=Placement(client=client))
    other = validate_job({"dataset": {"name": "MUTAG"}, "kernel": {"name": "wl", "h": 2},
                          "gram": {"tile_size": 64}})
    with pytest.raises(StoreError, match="kernel"):
        run_job(other, out=path, placement=Placement(client=client))


def test_normalized_gram_has_unit_diagonal(client, tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    res = run_job(mutag_job(tile_size=40, normalize=True), out=str(tmp_path / "n.zarr"), placement=Placement(client=client))
    k = open_gram(res.store)[0]
    ref = reference(mutag)
    d = np.sqrt(np.diag(ref))
    np.testing.assert_allclose(k, ref / d[:, None] / d[None, :], rtol=1e-15, atol=0)
    np.testing.assert_allclose(np.diag(k), 1.0, rtol=1e-15)


def test_rectangular_test_by_train(client, tmp_path, mutag, dataset_dir):
    folder = dataset_dir("MUTAG")
    job = validate_job({
        "dataset": {"path": str(folder), "limit": 150},
        "test": {"dataset": {"synthetic": {"n_graphs": 30, "n_nodes": 15, "avg_degree": 2.0,
                                           "n_labels": 7, "attr_dim": 0, "seed": 3}}},
        "kernel": {"name": "wl", "h": 2}, "gram": {"tile_size": 16, "normalize": True},
    })
    res = run_job(job, out=str(tmp_path / "rect.zarr"), placement=Placement(client=client))
    k, _ = open_gram(res.store)
    assert k.shape == (30, 150)
    train = load_dataset(job.dataset)
    test = load_dataset(job.test_dataset)
    kern = WLSubtreeKernel(2)
    ft, fr = kern.features(test), kern.features(train)
    raw = dot(ft, fr)
    expected = raw / np.sqrt(np.diag(dot(ft, ft)))[:, None] / np.sqrt(np.diag(dot(fr, fr)))[None, :]
    np.testing.assert_allclose(k, expected, rtol=1e-15)
    root = zarr.open_group(res.store, mode="r")
    assert root["tiles_done"][...].all() and "diag_cols" in root


def test_failing_tile_names_tile_and_graphs_and_store_stays_resumable(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    job = mutag_job(tile_size=50)
    path = str(tmp_path / "f.zarr")
    client.register_plugin(FailTile((1, 2)))
    try:
        with pytest.raises(TileError, match=r"tile \(1, 2\) failed \(row graphs 51\.\.100, column graphs 101\.\.150\)"):
            run_job(job, out=path, placement=Placement(client=client))
    finally:
        client.unregister_worker_plugin(FailTile.name)
    assert store_info(path)["complete"] is False
    res = run_job(job, out=path, placement=Placement(client=client))
    assert res.complete and res.tiles_already_done >= 1


def test_output_under_a_file_fails_before_compute(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError, match="not writable"):
        run_job(mutag_job(), out=str(blocker / "g.zarr"), placement=Placement(client=client))
    assert not (tmp_path / "file" / "g.zarr").exists()


def test_unwritable_output_fails_before_compute(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        import os

        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(StoreError, match="not writable"):
            run_job(mutag_job(), out=str(locked / "g.zarr"), placement=Placement(client=client))
    finally:
        locked.chmod(0o700)


def test_fit_sample_is_seeded(client, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    job = validate_job({"dataset": {"name": "MUTAG"}, "kernel": {"name": "wl", "h": 2},
                        "fit": {"sample_size": 40, "seed": 7}, "gram": {"tile_size": 100}})
    a = run_job(job, out=str(tmp_path / "a.zarr"), placement=Placement(client=client))
    b = run_job(job, out=str(tmp_path / "b.zarr"), placement=Placement(client=client))
    ia = zarr.open_group(a.store, mode="r")["fit_indices"][...]
    ib = zarr.open_group(b.store, mode="r")["fit_indices"][...]
    assert len(ia) == 40 and np.array_equal(ia, ib)
    assert np.array_equal(open_gram(a.store)[0], open_gram(b.store)[0])


def test_embedded_cluster_workers_keep_malloc_adaptive(monkeypatch):
    """The embedded LocalCluster's workers get the malloc settings that avoid a page fault per
    NumPy temporary (Dask's default trim threshold alone makes WL features ~3x slower)."""
    import os

    from gramdist.engine.cluster import connect, worker_malloc_environ

    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert worker_malloc_environ()["distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_"] == 64 << 20
    with connect({"n_workers": 1, "threads_per_worker": 1}) as cl:
        env = cl.run(lambda: (os.environ.get("MALLOC_MMAP_THRESHOLD_"), os.environ.get("MALLOC_TRIM_THRESHOLD_")))
    assert list(env.values()) == [(str(64 << 20), str(64 << 20))]
    # a user's own setting wins
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_" not in worker_malloc_environ()


def test_worker_preloads_keep_the_users_and_add_the_signal_setup():
    """The LocalCluster's workers load gramdist's signal set-up after the user's configured
    preloads, which an explicit ``preload=`` would otherwise replace (the fault-injection
    tests load theirs that way)."""
    import dask

    from gramdist.engine.cluster import worker_preloads

    ours = "gramdist.engine.worker_setup"
    with dask.config.set({"distributed.worker.preload": [], "distributed.worker.preload-argv": []}):
        assert worker_preloads() == {"preload": [ours], "preload_argv": []}
    with dask.config.set({"distributed.worker.preload": "mine.py", "distributed.worker.preload-argv": ["--x", "1"]}):
        assert worker_preloads() == {"preload": ["mine.py", ours], "preload_argv": ["--x", "1"]}
    with dask.config.set({"distributed.worker.preload": ["a", "b"], "distributed.worker.preload-argv": [["--x"], []]}):
        assert worker_preloads() == {"preload": ["a", "b", ours], "preload_argv": [["--x"], [], []]}


_KILLED_WORKER_SCRIPT = """
import pathlib, sys, time
from gramdist.engine.cluster import connect

def read_then_wait(store, started):
    import zarr
    zarr.open_array(store, mode="r")[...]  # a Blosc chunk: numcodecs makes its lock
    pathlib.Path(started).touch()
    time.sleep(60)  # a long libsvm fit, say: still running when the cluster closes

store, started = sys.argv[1:]
with connect({"n_workers": 1, "threads_per_worker": 1}) as client:
    task = client.submit(read_then_wait, store, started)  # held: a released future is cancelled
    while not pathlib.Path(started).exists():
        time.sleep(0.05)
print("closed", flush=True)
"""


def test_a_worker_killed_inside_a_task_leaves_no_semaphore_behind(tmp_path):
    """A worker still inside a task when the command closes its cluster (Ctrl-C during a long
    ``evaluate`` fold) is killed by its nanny. It had read a Blosc chunk, for which numcodecs
    made a ``multiprocessing.Lock``; the resource tracker then printed "There appear to be 1
    leaked semaphore objects" under the command's last line. The workers' preload gives Blosc a
    lock that needs no cleanup (``worker_setup._blosc_lock_without_a_name``)."""
    from zarr.codecs import BloscCodec

    store = tmp_path / "blosc.zarr"
    array = zarr.create_array(store, shape=(64, 64), chunks=(32, 32), dtype="f8", compressors=BloscCodec())
    array[...] = np.arange(64 * 64, dtype="f8").reshape(64, 64)
    r = subprocess.run([sys.executable, "-c", _KILLED_WORKER_SCRIPT, str(store), str(tmp_path / "started")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "closed", r.stderr[-3000:]
    assert "leaked" not in r.stderr and "Warning" not in r.stderr, r.stderr[-3000:]


@pytest.mark.parametrize("normalize", [False, True])
def test_in_process_and_in_memory_steps_give_the_store_bits(client, tmp_path, mutag, dataset_dir, normalize):
    """The engine's steps run in this process (InlineExecutor) or on the cluster, into memory
    or into a store: one Gram, bit for bit, symmetric and test x train."""
    from gramdist.engine.executor import DaskExecutor, InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory

    dataset_dir("MUTAG")
    stored = open_gram(run_job(mutag_job(tile_size=50, normalize=normalize), out=str(tmp_path / "s.zarr"), placement=Placement(client=client)).store)[0]
    fit = {"sample_size": None, "seed": 0}
    kernel = WLSubtreeKernel(3)
    inline = compute_in_memory(InlineExecutor(), plan_gram(kernel, mutag, fit=FitSpec(**fit), gram=GramSpec(tile_size=50, normalize=normalize)), context=RunContext(log=lambda m: None))
    on_cluster = compute_in_memory(DaskExecutor(client), plan_gram(kernel, mutag, fit=FitSpec(**fit), gram=GramSpec(tile_size=30, normalize=normalize)), context=RunContext(log=lambda m: None))
    assert np.array_equal(inline.gram, stored) and np.array_equal(on_cluster.gram, stored)
    assert np.array_equal(inline.diag_rows, np.diag(reference(mutag)))
    # K(test, train) with the state fitted on train: the rows of the symmetric Gram
    rect = compute_in_memory(InlineExecutor(), plan_gram(kernel, mutag, mutag[150:], fit=FitSpec(**fit), gram=GramSpec(tile_size=16, normalize=normalize)), state=inline.state, context=RunContext(log=lambda m: None))
    assert np.array_equal(rect.gram, stored[150:])
    # in a pool of three threads of this process: the same bits
    pooled = InlineExecutor(3)
    try:
        threaded = compute_in_memory(pooled, plan_gram(kernel, mutag, fit=FitSpec(**fit), gram=GramSpec(tile_size=20, normalize=normalize)), context=RunContext(log=lambda m: None))
    finally:
        pooled.close()
    assert np.array_equal(threaded.gram, stored)


@pytest.mark.parametrize("name, pooled", [("pyramid_match", True), ("svm_theta", True), ("core", True), ("sp", False)])
def test_embeddings_run_in_the_pool_only_where_the_kernel_says(mutag, dataset_dir, monkeypatch, name, pooled):
    """In process, a kernel that declares ``embeds_in_threads`` (LAPACK, NumPy over whole
    chunks) has its chunks embedded in the pool's threads, others one at a time in the one
    background thread (with one thread in all: at their submit, in the calling thread); the
    Gram is the one of a single thread, bit for bit."""
    import threading

    from gramdist.engine import tasks
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory
    from gramdist.kernels import make_kernel

    dataset_dir("MUTAG")
    kernel = make_kernel(name)
    assert kernel.embeds_in_threads is pooled

    def gram(threads: int) -> tuple[np.ndarray, set[str]]:
        where: set[str] = set()
        real = tasks.embed_task
        monkeypatch.setattr(tasks, "embed_task", lambda k, s, g: (where.add(threading.current_thread().name),
                                                                   real(k, s, g))[1])
        ex = InlineExecutor(threads)
        try:
            plan = plan_gram(kernel, mutag, fit=FitSpec(seed=0), gram=GramSpec(tile_size=40, normalize=True))
            return compute_in_memory(ex, plan, context=RunContext(log=lambda m: None)).gram, where
        finally:
            ex.close()
            monkeypatch.setattr(tasks, "embed_task", real)

    one, where_one = gram(1)
    two, where_two = gram(2)
    assert np.array_equal(one, two)
    assert where_one == {threading.current_thread().name}
    if pooled:
        assert where_two and all(n.startswith("gramdist_") for n in where_two)
    else:
        assert len(where_two) == 1 and where_two.pop().startswith("gramdist-background")


def test_tiles_start_while_later_chunks_are_still_embedding(mutag, dataset_dir, monkeypatch):
    """In process with two threads, the tiles of the chunks embedded first run before the last
    chunk's embedding starts: here that embedding waits until tile (0, 0) is written, which
    would never happen (the wait times out) if every embedding had to finish first."""
    import threading

    from gramdist.engine import tasks
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory
    from gramdist.kernels import make_kernel

    dataset_dir("MUTAG")
    first_tile = threading.Event()
    waited: list[bool] = []
    real_embed, real_tile = tasks.embed_task, tasks.tile_task

    last_chunk = mutag.graph_ids[150]  # the first graph of the last chunk of 188 in tiles of 50

    def embed(kernel, state, graphs):
        if graphs.graph_ids[0] == last_chunk:
            waited.append(first_tile.wait(timeout=30))
        return real_embed(kernel, state, graphs)

    def tile(*args):
        out = real_tile(*args)
        if out[0] == (0, 0):
            first_tile.set()
        return out

    monkeypatch.setattr(tasks, "embed_task", embed)
    monkeypatch.setattr(tasks, "tile_task", tile)
    plan = plan_gram(make_kernel("sp"), mutag, fit=FitSpec(seed=0), gram=GramSpec(tile_size=50, normalize=True))
    ex = InlineExecutor(2)
    try:
        two = compute_in_memory(ex, plan, context=RunContext(log=lambda m: None)).gram
    finally:
        ex.close()
    assert waited == [True]
    monkeypatch.setattr(tasks, "embed_task", real_embed)
    monkeypatch.setattr(tasks, "tile_task", real_tile)
    one = compute_in_memory(InlineExecutor(1), plan, context=RunContext(log=lambda m: None)).gram
    assert np.array_equal(one, two)


def test_tiles_are_taken_in_the_order_their_embeddings_are_ready():
    from gramdist.engine.steps import in_embedding_order
    from gramdist.engine.store import TileGrid

    grid = TileGrid(40, 40, 10, symmetric=True)
    assert in_embedding_order(grid.tiles(), ["r0", "r1", "r2", "r3"], True) == [
        (0, 0), (0, 1), (1, 1), (0, 2), (1, 2), (2, 2), (0, 3), (1, 3), (2, 3), (3, 3)]
    # test x train with the training chunks cached (not embedded here): the row chunks' order
    rect = TileGrid(20, 30, 10, symmetric=False)
    assert in_embedding_order(rect.tiles(), ["r1", "r0"], False) == [(1, 0), (1, 1), (1, 2), (0, 0), (0, 1), (0, 2)]
    # a resumed run embeds only what its remaining tiles need; nothing is dropped or repeated
    todo = [(0, 3), (2, 2), (1, 3)]
    assert in_embedding_order(todo, ["r3", "r2", "r0", "r1"], True) == [(2, 2), (0, 3), (1, 3)]


def test_pooled_in_process_executor_holds_blas_to_one_thread_and_cancels_on_close():
    """Pooled tasks (tiles), with futures among their inputs, run in the pool, others at once in
    the calling thread; BLAS runs single-threaded while the pool lives (the pool's threads are the parallelism) and gets its own count back on close;
    close waits for the running tasks and drops the queued ones."""
    import threading
    import time

    import sklearn.cluster  # noqa: F401 - loads OpenMP, whose thread count is per thread
    from threadpoolctl import threadpool_info

    from gramdist.engine.executor import InlineExecutor

    before = [i["num_threads"] for i in threadpool_info()]
    ex = InlineExecutor(2)
    a = ex.submit(lambda: 2, key="a", pooled=True)
    b = ex.submit(lambda x: x * 3, a, key="b", pooled=True)
    assert b.result() == 6 and b.status == "finished"
    assert ex.submit(lambda: {i["num_threads"] for i in threadpool_info()}, key="blas", pooled=True).result() <= {1}
    failing = ex.submit(lambda: 1 / 0, key="bad", pooled=True)
    with pytest.raises(ZeroDivisionError):
        failing.result()
    assert failing.status == "error"
    ex.close()  # in the thread that started the pool, as the placement does (OpenBLAS takes a
    # larger thread count back only from there)
    assert [i["num_threads"] for i in threadpool_info()] == before
    ex = InlineExecutor(2)  # a fresh pool starts a thread for each of its first two tasks
    gate, started = threading.Event(), threading.Semaphore(0)

    def busy() -> bool:
        started.release()
        return gate.wait(10)

    running = [ex.submit(busy, key=f"busy{i}", pooled=True) for i in range(2)]
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    queued = ex.submit(lambda: "ran", key="queued", pooled=True)
    assert ex.submit(threading.get_ident, key="here").result() == threading.get_ident()  # not pooled: at once, here
    opener = threading.Timer(0.3, gate.set)
    opener.start()
    t0 = time.perf_counter()
    ex.close()
    assert time.perf_counter() - t0 >= 0.25  # it waited for the running tasks
    assert all(f.result() is True for f in running)
    assert queued._future.cancelled()
    assert [i["num_threads"] for i in threadpool_info()] == before


def test_pooled_tasks_enter_the_pool_only_once_their_inputs_are_done():
    """A pooled task waiting on an unfinished input holds no thread of the pool: two of them
    waiting on a background task leave both threads to a task that is ready; they run once
    the input is done, with its value, or fail with its error; on close, one whose input was
    still queued is cancelled with it (without a deadlock: the pool cancels under its lock)."""
    import threading

    from gramdist.engine.executor import InlineExecutor

    ex = InlineExecutor(2)
    gate = threading.Event()
    slow = ex.submit(lambda: gate.wait(10) and 5, key="slow", background=True)
    dependents = [ex.submit(lambda x, k=k: x + k, slow, key=f"dep{k}", pooled=True) for k in range(2)]
    ready = ex.submit(lambda: "ready", key="ready", pooled=True)
    assert ready._future.result(timeout=5) == "ready" and not gate.is_set()
    assert all(d.status == "pending" for d in dependents)
    gate.set()
    assert [d.result() for d in dependents] == [5, 6]
    bad = ex.submit(lambda: 1 / 0, key="bad", background=True)
    after = ex.submit(lambda x: x, bad, key="after", pooled=True)
    with pytest.raises(ZeroDivisionError):
        after.result()
    hold, started = threading.Event(), threading.Semaphore(0)
    busy = [ex.submit(lambda: started.release() or hold.wait(10), key=f"busy{i}", pooled=True) for i in range(2)]
    assert started.acquire(timeout=10) and started.acquire(timeout=10)
    queued = ex.submit(lambda: 7, key="queued", pooled=True)  # behind the two busy tasks
    waiting = ex.submit(lambda x: x, queued, key="waiting", pooled=True)  # not in the pool yet
    threading.Timer(0.3, hold.set).start()
    closing = threading.Thread(target=ex.close)  # close cancels `queued`, then `waiting`
    closing.start()
    closing.join(timeout=20)
    assert not closing.is_alive(), "close() hung"
    assert all(b.result() is True for b in busy)
    assert queued._future.cancelled() and waiting._future.cancelled()


@pytest.mark.parametrize("threads", [1, 3])
def test_in_process_executor_reports_a_failing_tile_like_the_cluster(mutag, dataset_dir, monkeypatch, threads):
    import faultinject

    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory

    dataset_dir("MUTAG")
    faultinject.install((1, 2))
    try:
        plan = plan_gram(WLSubtreeKernel(3), mutag, fit=FitSpec(**{"seed": 0}), gram=GramSpec(tile_size=50, normalize=False))
        ex = InlineExecutor(threads)
        with pytest.raises(TileError, match=r"tile \(1, 2\) failed \(row graphs 51\.\.100, column graphs 101\.\.150\)"):
            compute_in_memory(ex, plan, context=RunContext(log=lambda m: None))
    finally:
        ex.close()
        faultinject.uninstall()


def test_in_process_phases_count_every_tile_as_a_tile(mutag, dataset_dir, monkeypatch):
    """In process every embedding is done before the first tile starts: the embed phase ends
    there, and every tile's time is in ``tiles_s`` (the window's first tiles once went into
    ``embed_s``, so ``gramdist run`` printed 0.00 s for a six-tile MUTAG Gram)."""
    import time

    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory

    pairwise = WLSubtreeKernel.pairwise

    def slow(self, a, b, state):
        time.sleep(0.3)
        return pairwise(self, a, b, state)

    monkeypatch.setattr(WLSubtreeKernel, "pairwise", slow)
    dataset_dir("MUTAG")
    plan = plan_gram(WLSubtreeKernel(3), mutag, fit=FitSpec(seed=0), gram=GramSpec(tile_size=50, normalize=False))
    compute_in_memory(InlineExecutor(), plan, context=RunContext(log=lambda m: None))
    assert len(plan.grid.tiles()) == 10
    assert plan.timings["tiles_s"] >= 10 * 0.3 * 0.95
    assert plan.timings["embed_s"] < 4 * 0.3  # not the window's first four tiles


def test_auto_placement_weighs_nodes_by_the_kernel(mutag, monkeypatch):
    """``in_process: auto`` counts a node as the kernel's ``node_weight``: WL keeps NCI1-sized
    work in this process, Lovász θ (an SDP per graph, GIL held) sends even MUTAG to worker
    processes, and the random walk weighs more only where its tiles solve product systems."""
    from gramdist.engine.placement import IN_PROCESS_MAX_NODES
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import plan_nodes
    from gramdist.kernels import make_kernel

    def nodes(kernel):
        return plan_nodes(plan_gram(kernel, mutag, fit=FitSpec(seed=0), gram=GramSpec(tile_size=64)))

    wl = nodes(WLSubtreeKernel(3))
    assert wl == mutag.n_nodes // 2  # one linear pass per graph: half a node each
    assert nodes(make_kernel("sp")) == nodes(make_kernel("odd")) == mutag.n_nodes
    assert nodes(make_kernel("lovasz_theta")) == 100 * mutag.n_nodes > IN_PROCESS_MAX_NODES
    assert nodes(make_kernel("random_walk", kind="geometric")) == 10 * mutag.n_nodes
    assert nodes(make_kernel("random_walk", kind="p_step")) == mutag.n_nodes
    assert nodes(make_kernel("random_walk", kind="p_step", solver="product")) == 10 * mutag.n_nodes
    assert nodes(make_kernel("core", base={"name": "lovasz_theta"})) == 100 * mutag.n_nodes
    assert nodes(make_kernel("core", base={"name": "wl"})) == wl
    assert nodes(make_kernel("core", base={"name": "sp"})) == mutag.n_nodes
    assert nodes(make_kernel("matching")) == 10 * mutag.n_nodes
    assert nodes(make_kernel("graphhopper")) == nodes(make_kernel("wlsp")) == 2 * mutag.n_nodes
    import gramdist.engine.placement as placement

    monkeypatch.setattr(placement, "_active_client", lambda: None)  # other tests' client may be active
    auto = Placement()
    assert auto.runs_here(mutag.n_graphs ** 2, wl)
    assert not auto.runs_here(mutag.n_graphs ** 2, nodes(make_kernel("lovasz_theta")))
    # D&D (1,178 graphs, 334,925 nodes): WL in this process, shortest paths on workers
    dd_entries, dd_nodes = 1178 ** 2, 334_925
    assert auto.runs_here(dd_entries, int(dd_nodes * WLSubtreeKernel(3).node_weight))
    assert not auto.runs_here(dd_entries, int(dd_nodes * make_kernel("sp").node_weight))


def _same_embedding(a, b) -> bool:
    import dataclasses

    if isinstance(a, list):
        return len(a) == len(b) and all(_same_embedding(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_same_embedding(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a) if not f.name.startswith("_"))
    return a == b


def test_kernels_that_embed_without_state_embed_the_same_bits_without_it(mutag, dataset_dir):
    """Every kernel declaring ``embeds_without_state`` (the engine then embeds beside the fit,
    with an empty state) gives the same embedding, K(g, g) and counters with and without its
    fitted state; the declaration is inherited only where ``embed`` is not overridden."""
    from gramdist.kernels import KERNELS, make_kernel
    from gramdist.kernels.base import KernelState

    dataset_dir("MUTAG")
    graphs = mutag[:60]
    kernels = [make_kernel(name) for name in KERNELS] + [make_kernel("core", base={"name": "wl", "h": 3})]
    stateless = [k for k in kernels if k.embeds_without_state]
    assert {"wl", "wloa", "sp", "core"} <= {k.name for k in stateless}
    assert not {"pyramid_match", "propagation", "graphlet", "dm"} & {k.name for k in stateless}
    for kernel in stateless:
        state = kernel.fit(graphs, 0)
        with_state, without = kernel.embed(graphs, state), kernel.embed(graphs, KernelState())
        assert _same_embedding(with_state, without), kernel.name
        assert np.array_equal(kernel.self_similarity(with_state, state), kernel.self_similarity(without, KernelState()))
        if kernel.has_embedding_counts:
            assert kernel.embedding_counts(with_state) == kernel.embedding_counts(without), kernel.name


@pytest.mark.parametrize("name, beside", [("wl", True), ("core", True), ("pyramid_match", False)])
def test_embeddings_run_beside_the_fit_only_where_the_kernel_says(mutag, dataset_dir, monkeypatch, name, beside):
    """In process on two threads, a kernel that ``embeds_without_state`` has its chunks embedded
    while its fit runs (the fit waits here until an embedding has started); any other kernel's
    embeddings wait for the fitted state. The Gram is the one of a single thread, bit for bit."""
    import threading

    from gramdist.engine import tasks
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.plan import plan_gram
    from gramdist.engine.runner import compute_in_memory
    from gramdist.kernels import make_kernel

    dataset_dir("MUTAG")
    kernel = make_kernel(name)
    assert kernel.embeds_without_state is beside

    def gram(threads: int) -> tuple[np.ndarray, bool]:
        embedding = threading.Event()
        seen: list[bool] = []
        real_fit, real_embed = tasks.fit_task, tasks.embed_task
        monkeypatch.setattr(tasks, "embed_task", lambda k, s, g: (embedding.set(), real_embed(k, s, g))[1])
        monkeypatch.setattr(tasks, "fit_task", lambda k, g, seed: (
            seen.append(embedding.wait(timeout=10 if beside and threads > 1 else 0.5)), real_fit(k, g, seed))[1])
        ex = InlineExecutor(threads)
        try:
            plan = plan_gram(kernel, mutag, fit=FitSpec(seed=0), gram=GramSpec(tile_size=40, normalize=True))
            return compute_in_memory(ex, plan, context=RunContext(log=lambda m: None)).gram, seen == [True]
        finally:
            ex.close()
            monkeypatch.setattr(tasks, "fit_task", real_fit)
            monkeypatch.setattr(tasks, "embed_task", real_embed)

    one, _ = gram(1)
    two, overlapped = gram(2)
    assert np.array_equal(one, two)
    assert overlapped is beside


def test_grid_settings_are_placed_by_size_and_share_one_cluster(tmp_path, mutag, dataset_dir, monkeypatch):
    """A grid's settings are placed one by one as single jobs are: small Grams in this process
    (no cluster started for a grid of MUTAG Grams); a cluster, when a setting needs one, is
    connected once and serves every later setting. Each store holds its setting's Gram."""
    import contextlib

    from gramdist.engine import cluster, placement
    from gramdist.engine.runner import run_grid

    dataset_dir("MUTAG")
    connects = []
    real = cluster.connect

    @contextlib.contextmanager
    def counted(*args, **kwargs):
        connects.append(args)
        with real(*args, **kwargs) as client:
            yield client

    monkeypatch.setattr(cluster, "connect", counted)
    monkeypatch.setattr(placement, "_active_client", lambda: None)  # another test's client is not ours
    job = validate_job({"dataset": {"name": "MUTAG"}, "kernel": {"name": "wl", "h": 1}, "gram": {"tile_size": 64},
                        "grid": {"kernel.h": [1, 2, 3]}, "_job_name": "mutag-wl"})
    quiet = RunContext(log=lambda m: None, progress=False)
    results = run_grid(job, out=str(tmp_path / "auto"), context=quiet)
    assert [name for name, _ in results] == ["h-1", "h-2", "h-3"] and not connects
    for h in (1, 2, 3):
        assert np.array_equal(open_gram(str(tmp_path / "auto" / f"h-{h}.zarr"))[0], reference(mutag, h))
    on_workers = Placement(cluster=job.cluster).with_workers(2)
    run_grid(job, out=str(tmp_path / "workers"), placement=on_workers, context=quiet)
    assert len(connects) == 1
    assert np.array_equal(open_gram(str(tmp_path / "workers" / "h-3.zarr"))[0], reference(mutag, 3))


def test_an_embedding_is_kept_once_by_its_own_task(tmp_path, monkeypatch):
    """``keep_embedding_task`` writes a chunk's embedding unless one of the same graphs is kept
    already (read back by the embedding task: not written again); what it wrote reads back equal."""
    from gramdist.engine import tasks
    from gramdist.engine.store.state import EmbeddingCache
    from gramdist.kernels.sparse import SparseFeatures

    emb = SparseFeatures.from_pairs(np.array([0, 0, 1]), np.array([3, 9, 3], dtype=np.uint64), np.array([1.0, 2.0, 5.0]), 2)
    cache = EmbeddingCache(str(tmp_path), str(tmp_path))
    assert tasks.keep_embedding_task(cache, "r0", emb, "sum-a")
    back = cache.get("r0", "sum-a")
    assert np.array_equal(back.keys, emb.keys) and np.array_equal(back.values, emb.values)
    writes = []
    monkeypatch.setattr(EmbeddingCache, "put", lambda self, *a: writes.append(a) or True)
    assert not tasks.keep_embedding_task(cache, "r0", emb, "sum-a")  # kept already
    assert tasks.keep_embedding_task(cache, "r0", emb, "sum-b")  # other graphs: kept anew
    assert [a[2] for a in writes] == ["sum-b"]
