"""Stores in an object store (issue 33): ``s3://`` URLs against a real S3 API.

A local S3-compatible server (moto's standalone server, :class:`gramdist.testing.LocalS3`) is
started on 127.0.0.1 for the module (or the one ``.ci/run`` started, ``$GRAMDIST_TEST_S3_ENDPOINT``); every case runs the way a user would (the CLI in a
subprocess, or the Python front ends), and ends bitwise equal to the same job on a local folder.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_deploy import GRAMDIST, ROOT, one_error_line, run_cli, synthetic_job

from gramdist.engine.store import GramStore, Location, StoreBusyError, StoreLock, open_gram, verify
from gramdist.engine.store import info as store_info
from gramdist.engine.store.lock import LeaseLost, lock_file, read_lock
from gramdist.testing import LocalS3


@pytest.fixture(scope="module")
def s3():
    """The local S3 server, its settings in this process's environment (and so its children's)."""
    try:
        import moto  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("moto[server] and s3fs are needed (pip install -e '.[test]')")
    saved = {k: os.environ.get(k) for k in LocalS3().env}
    with LocalS3(bucket="gramdist-test", endpoint=os.environ.get("GRAMDIST_TEST_S3_ENDPOINT")) as server:
        os.environ.update(server.env)
        try:
            yield server
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


@pytest.fixture
def url(s3, request):
    """A fresh store URL in the test bucket."""
    return f"s3://{s3.bucket}/{request.node.name[:40]}-{uuid.uuid4().hex[:8]}/out.zarr"


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    return synthetic_job(tmp_path_factory.mktemp("s3job") / "j.yaml", n_graphs=90, tile=16, seed=7)


def cli_ok(*args, cwd=None):
    r = run_cli(*args, cwd=cwd)
    assert r.returncode == 0, r.stderr[-3000:]
    return r


def objects(url: str, under: str = "") -> list[str]:
    fs = Location(url).fs
    key = Location(url).key + (f"/{under}" if under else "")
    return fs.find(key) if fs.exists(key) else []


def tiles_recorded(url: str) -> int:
    """Tiles the store's done-mask records (0 while the store is being laid out)."""
    from gramdist.errors import StoreError

    try:
        return store_info(url)["tiles_done"]
    except StoreError:
        return 0


def local_run(job, tmp_path, *args):
    out = tmp_path / "local.zarr"
    cli_ok("run", str(job), "--out", str(out), "--quiet", *args)
    return out


# ------------------------------------------------------------------------------- every store kind
def test_run_info_verify_evaluate_plot_at_a_url_equal_a_local_folder(job, url, tmp_path):
    local = local_run(job, tmp_path)
    cli_ok("run", str(job), "--out", url, "--quiet", cwd=tmp_path)
    assert np.array_equal(open_gram(url)[0], open_gram(local)[0])
    assert np.array_equal(open_gram(url)[1], open_gram(local)[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["local.zarr"]  # nothing local named "s3:"
    info = json.loads(cli_ok("info", url, "--json").stdout)
    assert info["complete"] and info["store"] == url
    assert "match their checksums" in cli_ok("verify", url).stdout
    acc = [cli_ok("evaluate", s, "--repeats", "2").stdout.strip().splitlines()[-1] for s in (url, str(local))]
    assert acc[0] == acc[1]
    cli_ok("plot", url, "--out", str(tmp_path / "k.png"))
    assert (tmp_path / "k.png").stat().st_size > 1000
    assert not objects(url + ".lock") and not Location(url).sidecar(".lock").exists()  # the lock is released


def test_a_store_in_a_bucket_is_plain_zarr_to_readers_that_know_nothing_of_gramdist(job, url, tmp_path):
    import xarray

    cli_ok("run", str(job), "--out", url, "--quiet")
    k = open_gram(url)[0]
    group = zarr.open_group(url, mode="r")
    assert np.array_equal(group["gram"][...], k)
    ds = xarray.open_zarr(url, consolidated=False)
    assert np.array_equal(ds["gram"].values, k)


def test_feature_store_and_both_transformers_at_a_url(job, url, tmp_path):
    from gramdist import FeatureTransformer, GramTransformer, open_features
    from gramdist.datasets import load_dataset
    from gramdist.jobs import load_job

    local = tmp_path / "f.zarr"
    cli_ok("features", str(job), "--out", str(local), "--quiet")
    cli_ok("features", str(job), "--out", url, "--quiet")
    assert (open_features(url)[0] != open_features(str(local))[0]).nnz == 0
    assert verify(url)["problems"] == []
    graphs = load_dataset(load_job(str(job)).dataset)
    base = url.rsplit("/", 1)[0]
    k = GramTransformer(kernel="wl", kernel_params={"h": 2}, store=f"{base}/gt.zarr").fit_transform(graphs)
    k_local = GramTransformer(kernel="wl", kernel_params={"h": 2}, store=str(tmp_path / "gt.zarr")).fit_transform(graphs)
    assert np.array_equal(np.asarray(k), np.asarray(k_local))
    x = FeatureTransformer(kernel="wl", kernel_params={"h": 2}, store=f"{base}/ft.zarr").fit_transform(graphs)
    assert x.shape[0] == len(graphs) and Location(f"{base}/ft.zarr").exists()


# ------------------------------------------------------------------------------- the guarantees
def test_a_killed_run_resumes_to_the_same_bits(url, tmp_path):
    job = synthetic_job(tmp_path / "big.yaml", n_graphs=400, tile=10, seed=11)  # 820 tiles
    local = local_run(job, tmp_path)
    proc = subprocess.Popen([*GRAMDIST, "run", str(job), "--out", url, "--quiet", "--set", "cluster.n_workers=1"],
                            cwd=ROOT, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while tiles_recorded(url) < 50:
        assert proc.poll() is None and time.time() < deadline, proc.stderr.read().decode(errors="replace")[-3000:]
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert not store_info(url)["complete"]
    assert read_lock(url) is not None  # the killed writer's lock is still there ...
    r = cli_ok("run", str(job), "--out", url, "--json", "--quiet")
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["complete"] and 0 < summary["tiles_computed"] < summary["tiles_total"]
    assert "took over the lock" in r.stderr  # ... and is taken over: its process is gone
    assert np.array_equal(open_gram(url)[0], open_gram(local)[0])
    assert verify(url)["problems"] == []


def test_metadata_read_while_it_is_replaced_is_the_old_or_the_new_never_damaged(url):
    """A reader of a store's zarr.json while a writer replaces it (the run setting an attribute
    while a worker opens the store) gets one whole version. Through s3fs's file objects, a PUT
    between their HEAD and their ``If-Match`` GET failed the read with 412, and the store was
    reported as having lost its metadata (CI, 2026-12-02)."""
    from gramdist.engine.store.groups import group_attributes, lost_metadata

    location = Location(url)
    docs = [json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {"gramdist_version": "x", "pad": "p" * n}})
            .encode() for n in (10, 3000)]
    location.write_atomic(docs[0], "zarr.json")
    stop = threading.Event()

    def rewrite() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            location.write_atomic(docs[i % 2], "zarr.json")

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        seen = [(lost_metadata(location), group_attributes(location)) for _ in range(150)]
    finally:
        stop.set()
        writer.join()
    assert {lost for lost, _ in seen} == {None}
    assert all(attrs is not None for _, attrs in seen)  # None: the read failed
    assert {len(attrs["pad"]) for _, attrs in seen} <= {10, 3000}


def test_one_writer_a_second_is_refused_racing_writers_get_exactly_one(url):
    with StoreLock(url):
        with pytest.raises(StoreBusyError, match="being written by another run") as info:
            StoreLock(url).acquire()
        line = str(info.value)
        assert url in line
    assert read_lock(url) is None  # released: removed only because it was ours
    winners, barrier = [], threading.Barrier(6)

    def contend() -> None:
        lock = StoreLock(url)
        barrier.wait()
        try:
            lock.acquire()
        except StoreBusyError:
            return
        winners.append(lock)

    threads = [threading.Thread(target=contend) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(winners) == 1
    winners[0].release()


def test_a_stale_lease_is_taken_over_with_the_next_epoch_and_its_holder_fenced(url):
    lock = lock_file(url)
    old_token = uuid.uuid4().hex
    lock.create({"token": old_token, "epoch": 4, "host": "another-machine", "pid": 1, "since": time.time() - 3600})
    # its holder, on another machine, stopped an hour ago: no heartbeat since
    with StoreLock(url, log=lambda m: None) as new:
        assert new.epoch == 5 and read_lock(url)["token"] == new.token
        from gramdist.engine.store.lock import Lease

        with pytest.raises(LeaseLost, match="no longer holds the store"):
            Lease(url, old_token).check()  # the old holder, waking up, stops before its next write
        new.lease().check()


def test_a_released_lock_is_never_someone_elses(url):
    """A writer whose lease was taken over releases nothing: the conditional delete (If-Match
    on the lock's ETag) refuses, and the new holder keeps its lock."""
    first = StoreLock(url).acquire()
    first._stop.set()  # its heartbeat stops, as if suspended ...
    record = read_lock(url)
    lock_file(url).write(record | {"since": 0})  # ... and its lease ran out long ago
    Location(url).sidecar(f".lock.{first.token}").write({"token": first.token, "heartbeat": 0})
    second = StoreLock(url, log=lambda m: None).acquire()
    assert second.epoch == 2
    first.release()
    assert read_lock(url)["token"] == second.token
    second.release()
    assert read_lock(url) is None


def test_a_damaged_object_is_found_repaired_and_recomputed(job, url, tmp_path):
    local = local_run(job, tmp_path)
    cli_ok("run", str(job), "--out", url, "--quiet")
    chunk = sorted(objects(url, "gram/c"))[3]
    fs = Location(url).fs
    fs.pipe_file(chunk, b"not a blosc chunk")
    r = run_cli("verify", url)
    assert r.returncode != 0 and "gram" in r.stdout + r.stderr
    r = run_cli("verify", url, "--repair")
    assert "unmarked 1 damaged tile" in r.stdout and "rerun its job" in r.stdout, r.stdout + r.stderr
    assert not store_info(url)["complete"]
    r = cli_ok("run", str(job), "--out", url, "--json", "--quiet")
    assert json.loads(r.stdout.strip().splitlines()[-1])["tiles_computed"] >= 1
    assert np.array_equal(open_gram(url)[0], open_gram(local)[0])
    assert verify(url)["problems"] == []


def test_overwrite_replaces_a_store_in_a_bucket_but_never_other_objects(job, url):
    fs = Location(url).fs
    precious = url.rsplit("/", 1)[0] + "/thesis.zarr"
    fs.pipe_file(Location(precious).key + "/chapter1.tex", b"years of work")
    line = one_error_line(run_cli("run", str(job), "--out", precious, "--overwrite", "--quiet"))
    assert "not a gramdist store (a folder of other files)" in line
    assert fs.cat_file(Location(precious).key + "/chapter1.tex") == b"years of work"
    cli_ok("run", str(job), "--out", url, "--quiet")
    cli_ok("run", str(job), "--out", url, "--quiet", "--overwrite", "--set", "kernel.h=1")
    assert GramStore.open(url).kernel["params"]["h"] == 1


def grown_job(tmp_path, n_graphs: int, limit: int | None = None):
    job = synthetic_job(tmp_path / f"grow-{n_graphs}-{limit}.yaml", n_graphs=n_graphs, tile=16, seed=5,
                        extra="fit: {sample_size: 20, seed: 1}\n")
    if limit is not None:
        job.write_text(job.read_text().replace("seed: 5}", f"seed: 5}}, limit: {limit}"))
    return job


def test_an_append_grows_a_store_in_a_bucket_as_it_grows_a_local_one(url, tmp_path):
    job = grown_job(tmp_path, 80, limit=50)
    local = local_run(job, tmp_path)
    cli_ok("run", str(job), "--out", url, "--quiet")
    new = "{synthetic: {n_graphs: 80, n_nodes: [8, 16], avg_degree: 2.5, n_labels: 5, attr_dim: 0, seed: 5}, skip: 50}"
    for store in (url, str(local)):
        cli_ok("append", store, new, "--quiet")
    k = open_gram(url)[0]
    assert k.shape == (80, 80) and np.array_equal(k, open_gram(local)[0])
    assert verify(url)["problems"] == [] and Location(url).folders() == sorted(
        n for n in Location(url).folders() if not n.startswith("pending"))


def test_a_commit_cut_short_in_a_bucket_is_refused_to_readers_and_finished_by_the_next_append(
        url, tmp_path, monkeypatch):
    from gramdist.engine.append import append
    from gramdist.engine.context import RunContext
    from gramdist.engine.placement import Placement
    from gramdist.engine.store import staging
    from gramdist.errors import StoreError

    job = grown_job(tmp_path, 70, limit=40)
    local = local_run(job, tmp_path)
    cli_ok("run", str(job), "--out", url, "--quiet")
    new = {"synthetic": {"n_graphs": 70, "n_nodes": [8, 16], "avg_degree": 2.5, "n_labels": 5, "attr_dim": 0,
                         "seed": 5}, "skip": 40}
    real = staging._copy_array_files

    def dies_after_the_chunks_moved(location, source, target):
        if target in ("tile_checksums", "tiles_done"):
            raise KeyboardInterrupt  # the process dies here, the grown chunks already in place
        return real(location, source, target)

    monkeypatch.setattr(staging, "_copy_array_files", dies_after_the_chunks_moved)
    quiet = RunContext(log=lambda m: None)
    with pytest.raises(KeyboardInterrupt):
        append(url, new, placement=Placement(in_process=True), context=quiet)
    monkeypatch.setattr(staging, "_copy_array_files", real)
    with pytest.raises(StoreError, match="is being committed; read it again in a moment"):
        open_gram(url)
    assert "is being committed" in one_error_line(run_cli("info", url))
    res = append(url, None, placement=Placement(in_process=True), context=quiet)
    assert res.complete and res.tiles_computed == 0
    cli_ok("append", str(local), json.dumps(new), "--quiet")
    assert np.array_equal(open_gram(url)[0], open_gram(local)[0])
    assert verify(url)["problems"] == []


# ------------------------------------------------------------------------------- a cluster, no shared folder
def test_a_detached_job_on_two_workers_writes_straight_to_the_bucket(job, url, tmp_path):
    """`gramdist submit --out s3://…` to a cluster of two `dask worker` processes, each in a
    folder of its own (nothing shared but the bucket): the workers pass the submit's probe
    (they can write the bucket), write the tiles themselves, and the Gram is the local run's."""
    from test_deploy import DaskProcesses

    local = local_run(job, tmp_path)
    cluster = DaskProcesses(tmp_path / "cluster")
    try:
        cluster.start_scheduler()
        for name in ("w0", "w1"):
            (tmp_path / name).mkdir()
            cluster.start_worker(name, extra=["--local-directory", str(tmp_path / name)])
        with cluster.client() as c:
            c.wait_for_workers(2, timeout=60)
        r = cli_ok("submit", str(job), "--scheduler", cluster.address, "--out", url, "--json")
        answer = json.loads(r.stdout.strip().splitlines()[-1])
        assert answer["store"] == url
        watch = run_cli("status", url, "--watch", "--interval", "0.3", timeout=180)
        assert watch.returncode == 0 and "complete" in watch.stdout, watch.stdout + watch.stderr[-2000:]
        assert Location(url).sidecar(".job.json").read()["state"] == "complete"
    finally:
        cluster.close()
    assert np.array_equal(open_gram(url)[0], open_gram(local)[0])
    assert verify(url)["problems"] == []


def test_submit_is_refused_when_the_workers_cannot_write_the_bucket(job, s3, tmp_path):
    from test_deploy import DaskProcesses

    cluster = DaskProcesses(tmp_path / "cluster", env={"AWS_SECRET_ACCESS_KEY": ""} | {"AWS_ACCESS_KEY_ID": ""})
    try:
        cluster.start("w0")
        url = f"s3://no-such-bucket-{uuid.uuid4().hex[:6]}/x.zarr"
        line = one_error_line(run_cli("submit", str(job), "--scheduler", cluster.address, "--out", url))
        assert "cannot be written from 1 of 1 workers" in line and "bucket" in line, line
    finally:
        cluster.close()


# ------------------------------------------------------------------------------- datasets in a bucket
def test_datasets_in_a_bucket_a_tu_folder_a_data_root_and_a_smiles_file(s3, tmp_path, monkeypatch, dataset_dir):
    """A TU folder by ``dataset.path``, a name found under an ``s3://`` root of $GRAMDIST_DATA,
    a gzipped CSV of SMILES: each read as its local copy is, fetched once into the cache."""
    import gzip

    from gramdist.datasets import load_dataset
    from gramdist.datasets.tu import read_tu

    monkeypatch.setenv("GRAMDIST_CACHE", str(tmp_path / "cache"))
    mutag = dataset_dir("MUTAG")
    fs = Location(f"s3://{s3.bucket}/x/y.zarr").fs
    root = f"{s3.bucket}/datasets-{uuid.uuid4().hex[:6]}"
    for f in sorted(mutag.iterdir()):
        fs.put_file(str(f), f"{root}/MUTAG/{f.name}")
    local = read_tu(mutag)
    by_path = load_dataset({"path": f"s3://{root}/MUTAG"})
    assert by_path.checksum() == local.checksum() and len(by_path) == 188
    monkeypatch.setenv("GRAMDIST_DATA", f"s3://{root}:{tmp_path / 'nothing-here'}")
    assert load_dataset({"name": "MUTAG"}).checksum() == local.checksum()
    cached = list((tmp_path / "cache").rglob("MUTAG_A.txt"))
    assert len(cached) == 1  # the same objects: one copy
    csv = b"smiles,y\nCCO,1\nc1ccccc1,0\nCC(=O)O,1\n"
    fs.pipe_file(f"{root}/mols.csv.gz", gzip.compress(csv))
    (tmp_path / "mols.csv").write_bytes(csv)
    remote = load_dataset({"smiles": f"s3://{root}/mols.csv.gz", "target": "y"})
    assert remote.checksum() == load_dataset({"smiles": str(tmp_path / "mols.csv"), "target": "y"}).checksum()
    with pytest.raises(Exception, match="no such file or folder"):
        load_dataset({"path": f"s3://{root}/NOPE"})
    with pytest.raises(Exception, match="not fetched from a URL"):
        load_dataset({"path": f"s3://{root}/MUTAG"}, recorded=True)


def test_the_local_server_removes_the_log_it_made(s3, tmp_path):
    # its own server (not the module's, which may be one given by CI): started and stopped here
    with LocalS3(bucket="gramdist-log-test") as server:
        log = Path(server.log_path)
        assert log.is_file() and log.name.startswith("gramdist-s3-")
        assert server.requests() >= 1  # the bucket's creation
    assert not log.exists()
    kept = tmp_path / "s3.log"
    with LocalS3(bucket="gramdist-log-test", log=str(kept)):
        pass
    assert kept.is_file()  # a log the caller named is the caller's
