"""Faults: killed workers, a killed client, a full or read-only disk, a failing tile.

Every test runs a real job (WL on synthetic graphs, many small tiles so that a fault lands in
the middle of the tile phase: the test waits until the store shows some tiles written, then
strikes) and checks that either the job finishes with a Gram bitwise identical to an
undisturbed run, or it fails with one clear line and leaves a store that is not marked
complete and that a rerun finishes. Figures of these runs are in RELIABILITY.md.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import numpy as np
import psutil
import pytest
import zarr
from faultinject import preload_env
from test_deploy import (
    GRAMDIST,
    ROOT,
    DaskProcesses,
    chunks_written,
    last_json,
    one_error_line,
    reference_gram,
    run_cli,
    synthetic_job,
)

from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram
from gramdist.errors import StoreError, TileError
from gramdist.jobs import load_job

N_GRAPHS, TILE = 240, 10  # 24 x 24 chunks: 300 tiles, 576 chunk files


@pytest.fixture(scope="module")
def fault_job(tmp_path_factory):
    """(job path, its undisturbed Gram).

    The undisturbed Gram is computed in-process tile by tile with the engine's arithmetic
    (:func:`gramdist.testing.gram_by_tiles`); undisturbed engine runs are bitwise equal to it
    (tests/test_deploy.py checks that on real process clusters, tests/test_engine.py on MUTAG).
    """
    folder = tmp_path_factory.mktemp("faultjob")
    job = synthetic_job(folder / "faults.yaml", n_graphs=N_GRAPHS, tile=TILE, seed=11)
    return job, reference_gram(job)


def record(test: str, **figures) -> None:
    """Append figures for RELIABILITY.md to ``$GRAMDIST_RELIABILITY_LOG`` (JSON lines), if set."""
    path = os.environ.get("GRAMDIST_RELIABILITY_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": test, **figures}) + "\n")


def total_chunks(n: int = N_GRAPHS, tile: int = TILE) -> int:
    return (-(-n // tile)) ** 2


def start_run(job: Path, out: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """`gramdist run` in its own session (a kill of the session reaches its LocalCluster), with
    Python's fault handler on, so that :func:`finish` can get its threads' stacks if it hangs."""
    env = {**(os.environ if env is None else env), "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen([*GRAMDIST, "run", str(job), "--out", str(out), "--quiet", "--json", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env=env, start_new_session=True)


def wait_for_chunks(proc: subprocess.Popen, store: Path, at_least: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while True:
        n = chunks_written(store)
        if n >= at_least:
            return n
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended before {at_least} chunks were written ({n}):\n{err[-3000:]}")
        if time.time() > deadline:
            raise AssertionError(f"only {n} chunks written after {timeout} s")
        time.sleep(0.05)


def finish(proc: subprocess.Popen, timeout: float = 180, cluster: DaskProcesses | None = None) -> tuple[int, str, str]:
    """Wait for ``proc``; if it hangs, fail with what it was doing: the stacks of its threads
    (a process of :func:`start_run` dumps them on SIGABRT), and with a ``cluster`` the
    scheduler's view of the tasks and the tails of the cluster's logs."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        state = cluster_state(cluster) if cluster is not None else ""
        with contextlib.suppress(psutil.Error, subprocess.TimeoutExpired):
            psutil.Process(proc.pid).rlimit(psutil.RLIMIT_CORE, (0, 0))  # the stacks, not a core file
            proc.send_signal(signal.SIGABRT)
            proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # the session may have ended with the dump
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the run hung:\n{err[-12000:]}\n{state}") from None
    return proc.returncode, out, err


def cluster_state(cluster: DaskProcesses) -> str:
    """The scheduler's tasks counted by key prefix and state, what each worker is processing,
    and the tails of the cluster's logs, as text for a failure message."""

    def scheduler_tasks(dask_scheduler=None) -> dict:
        # nested, so that it travels by value: the scheduler cannot import this test module
        counts = Counter((ts.key.split("-")[0], ts.state) for ts in dask_scheduler.tasks.values())
        return {"tasks": {f"{p} {s}": n for (p, s), n in sorted(counts.items())},
                "workers": {ws.name: {"status": str(ws.status), "processing": sorted(t.key for t in ws.processing)}
                            for ws in dask_scheduler.workers.values()}}

    try:
        with cluster.client() as c:
            state = json.dumps(c.run_on_scheduler(scheduler_tasks), indent=1, default=str)
    except Exception as exc:  # noqa: BLE001 - a report on a failure already being raised
        state = f"(no scheduler state: {type(exc).__name__}: {exc})"
    logs = "\n".join(f"--- {name}.log\n{cluster.log(name)}" for name in cluster.procs)
    return f"scheduler: {state}\n{logs}"


def session_processes(sid: int) -> list[psutil.Process]:
    procs = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid:
                procs.append(p)
        except (ProcessLookupError, PermissionError, psutil.Error):
            pass
    return procs


# ----------------------------------------------------------------------------- workers
def test_worker_process_killed_mid_job(fault_job, tmp_path):
    """SIGKILL one of two worker processes (its nanny restarts it): same Gram, bit for bit."""
    job, undisturbed = fault_job
    cluster = DaskProcesses(tmp_path / "cluster")
    try:
        pids = cluster.start("w0", "w1")
        out = tmp_path / "k1.zarr"
        t0 = time.perf_counter()
        proc = start_run(job, out, "--scheduler", cluster.address)
        at_kill = wait_for_chunks(proc, out, total_chunks() // 5)
        t_kill = time.perf_counter() - t0
        os.kill(pids["w0"], signal.SIGKILL)
        assert proc.poll() is None and at_kill < total_chunks()  # the kill landed mid-job
        rc, stdout, stderr = finish(proc, cluster=cluster)
        record("worker_process_killed", chunks_total=total_chunks(), chunks_at_kill=at_kill,
               kill_at_s=round(t_kill, 2), run_s=round(time.perf_counter() - t0, 2),
               tiles_s=last_json(stdout)["timings"].get("tiles_s") if rc == 0 else None)
        assert rc == 0, stderr[-3000:]
        summary = last_json(stdout)
        assert summary["complete"] and summary["tiles_computed"] == summary["tiles_total"]
        assert not psutil.pid_exists(pids["w0"]) or psutil.Process(pids["w0"]).status() == psutil.STATUS_ZOMBIE
        assert np.array_equal(open_gram(out)[0], undisturbed)
        assert store_info(out)["complete"]
        cluster.wait_for_workers(2)
        assert cluster.worker_pids()["w0"] != pids["w0"]  # the nanny started a new process
    finally:
        cluster.close()


def test_two_of_three_workers_killed_at_different_times(fault_job, tmp_path):
    """Kill two of three workers outright (nanny and worker), at ~15 % and ~50 % of the tiles:
    the last worker finishes the job, and the Gram is bitwise the undisturbed one."""
    job, undisturbed = fault_job
    cluster = DaskProcesses(tmp_path / "cluster")
    try:
        cluster.start_scheduler()
        for name in ("w0", "w1", "w2"):
            cluster.start_worker(name)
        cluster.wait_for_workers(3)
        out = tmp_path / "k2.zarr"
        t0 = time.perf_counter()
        proc = start_run(job, out, "--scheduler", cluster.address)
        first = wait_for_chunks(proc, out, total_chunks() * 15 // 100)
        cluster.kill_worker("w1")
        t1 = time.perf_counter() - t0
        second = wait_for_chunks(proc, out, max(first + 50, total_chunks() // 2))
        cluster.kill_worker("w2")
        t2 = time.perf_counter() - t0
        assert proc.poll() is None and second < total_chunks()
        rc, stdout, stderr = finish(proc, cluster=cluster)
        record("two_of_three_killed", chunks_total=total_chunks(), chunks_at_kills=[first, second],
               kills_at_s=[round(t1, 2), round(t2, 2)], run_s=round(time.perf_counter() - t0, 2))
        assert rc == 0, stderr[-3000:]
        assert last_json(stdout)["complete"]
        assert np.array_equal(open_gram(out)[0], undisturbed)
        with cluster.client() as c:
            assert [str(w["name"]) for w in c.scheduler_info(n_workers=-1)["workers"].values()] == ["w0"]
    finally:
        cluster.close()


# ----------------------------------------------------------------------------- client
def test_client_killed_then_rerun_resumes(fault_job, tmp_path):
    """SIGKILL `gramdist run` and its embedded LocalCluster mid-job; the store is reported
    incomplete everywhere; the same command resumes, computing only the tiles not in the
    done-mask, and the Gram is bitwise the undisturbed one."""
    job, undisturbed = fault_job
    out = tmp_path / "client.zarr"
    args = ("--set", "cluster.n_workers=2")
    t0 = time.perf_counter()
    # save the done-mask every 0.2 s (default 2 s) so that part of it is on disk at the kill
    # even where the whole job takes only a second or two
    proc = start_run(job, out, *args, "--set", "gram.checkpoint_seconds=0.2")
    at_kill = wait_for_chunks(proc, out, total_chunks() // 4)
    deadline = time.time() + 60
    while True:  # wait until the client has flushed part of the done-mask
        try:
            flushed = int(np.asarray(zarr.open_array(str(out / "tiles_done"), mode="r")[...]).sum())
        except Exception:
            flushed = 0
        if flushed > 0 or time.time() > deadline or proc.poll() is not None:
            break
        time.sleep(0.05)
    at_kill = max(at_kill, chunks_written(out))
    os.killpg(proc.pid, signal.SIGKILL)
    t_kill = time.perf_counter() - t0
    proc.communicate()
    assert flushed > 0, "the done-mask was never flushed before the kill"
    deadline = time.time() + 10
    while session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not session_processes(proc.pid), "workers of the killed run survived"

    info = json.loads(run_cli("info", str(out), "--json").stdout)
    done = info["tiles_done"]
    assert info["complete"] is False and 0 < done < info["tiles_total"]
    text = run_cli("info", str(out)).stdout
    assert "INCOMPLETE" in text
    with pytest.raises(StoreError, match="incomplete"):
        open_gram(out)
    line = one_error_line(run_cli("evaluate", str(out), "--folds", "3", "--repeats", "1", "--workers", "0"))
    assert "incomplete" in line

    t0 = time.perf_counter()
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    summary = last_json(r.stdout)
    record("client_killed", tiles_total=summary["tiles_total"], chunks_at_kill=at_kill,
           chunks_total=total_chunks(), tiles_in_mask_at_kill=done, kill_at_s=round(t_kill, 2),
           rerun_tiles_computed=summary["tiles_computed"], rerun_s=round(time.perf_counter() - t0, 2))
    assert summary["tiles_already_done"] == done
    assert summary["tiles_computed"] == summary["tiles_total"] - done  # only the missing tiles
    assert summary["complete"] and store_info(out)["complete"]
    assert np.array_equal(open_gram(out)[0], undisturbed)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_to_the_whole_session_stops_the_run_in_one_line_and_it_resumes(fault_job, tmp_path, sig):
    """What a terminal sends to every process of its session: SIGINT (Ctrl-C), SIGHUP (the
    terminal closed); SIGTERM to the group as a batch system does. The LocalCluster's workers
    ignore them (``engine/worker_setup.py``) and so does multiprocessing's resource tracker
    (``cluster._resource_tracker_ignoring_session_signals``); the command saves the done-mask, closes its
    cluster and says so in one line, with no worker's traceback and no tracker warning; nothing
    is left running; the same command resumes to the undisturbed Gram."""
    job, undisturbed = fault_job
    out = tmp_path / "signalled.zarr"
    args = ("--set", "cluster.n_workers=2")
    proc = start_run(job, out, *args, "--set", "gram.checkpoint_seconds=0.2")
    wait_for_chunks(proc, out, total_chunks() // 4)
    os.killpg(proc.pid, sig)
    code, _, err = finish(proc)
    assert code == 128 + sig, err[-3000:]
    expected = ("gramdist: interrupted; run the same command again to resume" if sig == signal.SIGINT
                else f"gramdist: stopped by {signal.Signals(sig).name}; run the same command again to resume")
    assert err.strip().splitlines()[-1] == expected, err[-3000:]
    assert "Traceback" not in err and "Warning" not in err, err[-3000:]
    deadline = time.time() + 10
    while session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not session_processes(proc.pid), "processes of the stopped run survived"
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json", *args)
    assert r.returncode == 0, r.stderr[-3000:]
    assert last_json(r.stdout)["tiles_already_done"] > 0
    assert np.array_equal(open_gram(out)[0], undisturbed)


def test_store_with_complete_flag_but_missing_tiles_is_not_complete(fault_job, tmp_path):
    """A store whose metadata says complete but whose done-mask lacks a tile (e.g. a copy cut
    short) is incomplete for `info` and for `open_gram`; one cut before its arrays existed is
    refused with a clear error, not a traceback."""
    from distributed import Client, LocalCluster

    small = synthetic_job(tmp_path / "small.yaml", n_graphs=100, tile=10)
    src = tmp_path / "complete.zarr"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        assert run_job(load_job(small), out=str(src), placement=Placement(client=client)).complete
    bad = tmp_path / "copy.zarr"
    shutil.copytree(src, bad)
    mask = zarr.open_array(str(bad / "tiles_done"), mode="r+")
    m = np.asarray(mask[...])
    m[3, 7] = 0
    mask[...] = m
    assert zarr.open_group(str(bad), mode="r").attrs["complete"] is True
    assert store_info(bad)["complete"] is False
    with pytest.raises(StoreError, match="incomplete"):
        open_gram(bad)
    assert "INCOMPLETE" in run_cli("info", str(bad)).stdout

    cut = tmp_path / "cut.zarr"
    shutil.copytree(src, cut, ignore=shutil.ignore_patterns("tiles_done", "c"))
    shutil.rmtree(cut / "gram")
    for args in (("info", str(cut)), ("evaluate", str(cut), "--workers", "0")):
        line = one_error_line(run_cli(*args))
        assert "not a complete gramdist store" in line or "no gramdist stores found" in line, line
    with pytest.raises(StoreError):
        open_gram(cut)
    with pytest.raises(StoreError):
        store_info(cut)


# ----------------------------------------------------------------------------- damaged chunks
def _complete_small_store(tmp_path: Path, name: str = "complete.zarr", **job_kw) -> tuple[Path, Path]:
    from distributed import Client, LocalCluster

    job = synthetic_job(tmp_path / f"{name}.yaml", n_graphs=100, tile=10, **job_kw)
    out = tmp_path / name
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        assert run_job(load_job(job), out=str(out), placement=Placement(client=client)).complete
    return job, out


def test_chunk_lost_after_completion_is_caught_repaired_and_recomputed(tmp_path):
    """Zarr reads a missing chunk as its fill value: a chunk file lost after the job (a copy cut
    short, a cleanup script) would silently give zeros. Each tile's checksum, recorded when it
    was written, catches it in `open_gram` (and so in `evaluate`) and in `gramdist verify`;
    `verify --repair` unmarks the tile and a rerun recomputes exactly that tile."""
    from gramdist.engine.store import verify

    job, out = _complete_small_store(tmp_path)
    reference = reference_gram(job)
    assert np.array_equal(open_gram(out)[0], reference)
    report = verify(out)
    assert report["verifiable"] and report["checked"] == 55 and report["damaged"] == []
    assert run_cli("verify", str(out)).returncode == 0

    # tile (2, 6) is stored twice: rows 20..29 x columns 60..69 and its mirror; lose the mirror
    (out / "gram" / "c" / "6" / "2").unlink()
    with pytest.raises(StoreError, match=r"tile \(2, 6\): rows 20\.\.29, columns 60\.\.69"):
        open_gram(out)
    r = run_cli("verify", str(out))
    assert r.returncode == 1 and "tile (2, 6): rows 20..29, columns 60..69: chunk gram/c/6/2 is missing" in r.stdout, \
        r.stdout
    ev = one_error_line(run_cli("evaluate", str(out), "--workers", "0", "--repeats", "1"))
    assert "(2, 6)" in ev and "verify --repair" in ev, ev

    repaired = verify(out, repair=True)
    assert repaired["damaged"] == [[2, 6]]
    info = store_info(out)
    assert info["complete"] is False and info["tiles_done"] == 54
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    s = last_json(r.stdout)
    assert s["complete"] and s["tiles_computed"] == 1 and s["tiles_already_done"] == 54
    assert np.array_equal(open_gram(out)[0], reference)
    assert verify(out)["damaged"] == []


def test_changed_value_in_a_chunk_is_caught_and_old_stores_still_open(tmp_path):
    """One changed float in a diagonal tile fails the check; a store made before checksums
    were recorded (no ``tile_checksums`` array) opens as before and `verify` says it cannot
    check it (exit 0)."""
    from gramdist.engine.store import verify

    job, out = _complete_small_store(tmp_path)
    gram = zarr.open_array(str(out / "gram"), mode="r+")
    gram[33, 35] = np.nextafter(gram[33, 35], 2.0)  # one ulp, inside diagonal tile (3, 3)
    with pytest.raises(StoreError, match=r"tile \(3, 3\)"):
        open_gram(out)
    assert verify(out)["damaged"] == [[3, 3]]

    old = tmp_path / "old.zarr"
    shutil.copytree(out, old)
    shutil.rmtree(old / "tile_checksums")
    del zarr.open_group(str(old), mode="r+").attrs["checksummed"]  # as written before checksums existed
    assert open_gram(old)[0].shape == (100, 100)
    r = run_cli("verify", str(old))
    assert r.returncode == 0 and "no tile checksums" in r.stdout, r.stdout


def test_rectangular_store_records_and_verifies_checksums(tmp_path):
    """test x train stores have no mirrors: every tile is checked in its one place."""
    from gramdist.engine.store import verify

    test_set = "test:\n  dataset: {synthetic: {n_graphs: 30, n_nodes: [8, 16], avg_degree: 2.5, n_labels: 5, seed: 6}}\n"
    job = synthetic_job(tmp_path / "rect.yaml", n_graphs=100, tile=10, extra=test_set)
    rect = tmp_path / "rect.zarr"
    r = run_cli("run", str(job), "--out", str(rect), "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    info = store_info(rect)
    assert info["symmetric"] is False and info["shape"] == [30, 100]
    report = verify(rect)
    assert report["verifiable"] and report["damaged"] == [] and report["checked"] == info["tiles_total"] == 30
    (rect / "gram" / "c" / "2" / "5").unlink()
    assert verify(rect)["damaged"] == [[2, 5]]


# ----------------------------------------------------------------------------- failing tile
def test_failing_tile_through_cli_names_tile_and_graphs_and_resumes(tmp_path):
    job = synthetic_job(tmp_path / "fail.yaml", n_graphs=200, tile=20, seed=2)
    out = tmp_path / "fail.zarr"
    env = {**os.environ, **preload_env((3, 5))}
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--set", "cluster.n_workers=2", env=env)
    # the embedded workers also log the failed task (distributed's "Compute Failed" record)
    line = one_error_line(r, worker_logs=True)
    record("failing_tile", message=line)
    # synthetic graph ids are 0..N-1: tile (3, 5) holds rows 60..79 and columns 100..119
    assert ("tile (3, 5) failed (row graphs 60..79, column graphs 100..119): "
            "FloatingPointError: injected failure") in line, line
    info = store_info(out)
    assert info["complete"] is False and info["tiles_done"] < info["tiles_total"]
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json", "--set", "cluster.n_workers=2")
    assert r.returncode == 0, r.stderr[-3000:]
    s = last_json(r.stdout)
    assert s["complete"] and s["tiles_computed"] == s["tiles_total"] - s["tiles_already_done"]
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


# ----------------------------------------------------------------------------- disk
def _mount_tmpfs(path: Path, options: str) -> bool:
    """Mount a tmpfs (needs root and a sandbox that allows it); False when impossible."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        return False
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def _umount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Fill the file system holding ``folder`` to the last byte."""
    filler = folder / "filler.bin"
    block = b"\0" * (1 << 20)
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            chunk = block[:size]
            try:
                while True:
                    f.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def test_disk_too_small_fails_before_any_compute(tmp_path, fault_job):
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "size=8m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the simulated ENOSPC test covers this")
    try:
        job, _ = fault_job
        t0 = time.perf_counter()
        line = one_error_line(run_cli("run", str(job), "--out", str(mnt / "g.zarr"), "--set", "cluster.n_workers=1"))
        assert "not enough free disk space" in line
        record("disk_too_small", message=line, seconds=round(time.perf_counter() - t0, 2))
        assert "dashboard" not in line and time.perf_counter() - t0 < 20
        assert list(mnt.iterdir()) == []  # nothing written, no store
    finally:
        _umount(mnt)


def test_disk_fills_up_during_the_job_real_tmpfs(fault_job, tmp_path):
    """A real full disk (a 48 MiB tmpfs that another process fills once tiles are being
    written): one clear error, a store not marked complete; after space is freed the rerun
    resumes and the Gram is bitwise the undisturbed one."""
    job, undisturbed = fault_job
    mnt = tmp_path / "disk"
    if not _mount_tmpfs(mnt, "size=48m"):
        pytest.skip("cannot mount a tmpfs here (needs root); the simulated ENOSPC test covers this")
    try:
        out = mnt / "g.zarr"
        args = ("--set", "cluster.n_workers=2")
        proc = start_run(job, out, *args)
        wait_for_chunks(proc, out, total_chunks() // 10)
        filler = _fill(mnt)
        rc, stdout, stderr = finish(proc)
        assert rc == 2, stderr[-3000:]
        r = subprocess.CompletedProcess(proc.args, rc, stdout, stderr)
        line = one_error_line(r, worker_logs=True)
        assert "No space left on device" in line, line
        info = store_info(out)
        record("disk_filled_mid_job", message=line, tiles_done=info["tiles_done"], tiles_total=info["tiles_total"],
               warnings=[ln for ln in stderr.splitlines() if ln.startswith("gramdist: warning")])
        root = zarr.open_group(str(out), mode="r")
        assert root.attrs["complete"] is False
        assert store_info(out)["complete"] is False
        filler.unlink()
        r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json", *args)
        assert r.returncode == 0, r.stderr[-3000:]
        assert last_json(r.stdout)["complete"]
        assert np.array_equal(open_gram(out)[0], undisturbed)
        # the atomic chunk writes (Zarr's *.partial, the store's dot-named temporaries) left no debris
        assert not list(out.rglob("*.partial")) and not list((out / "gram").rglob(".*"))
    finally:
        _umount(mnt)


def test_enospc_on_chunk_writes_simulated(fault_job, tmp_path, monkeypatch):
    """Without root: chunk writes fail with ENOSPC after 100 chunks (in-process workers, so
    the patch reaches them). The job fails with a TileError naming the cause, the store is not
    complete, and a rerun once the 'disk' has space finishes with the undisturbed Gram."""
    from distributed import Client, LocalCluster

    from gramdist.engine.store.location import Location

    job, undisturbed = fault_job
    out = tmp_path / "sim.zarr"
    real_put = Location.write_atomic  # every Gram chunk of a local store is written through it
    writes = {"n": 0}

    def full_disk_put(self, data, *parts):
        path = str(self.child(*parts))
        if "/gram/c/" in path:
            writes["n"] += 1
            if writes["n"] > 100:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return real_put(self, data, *parts)

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        monkeypatch.setattr(Location, "write_atomic", full_disk_put)
        with pytest.raises(TileError, match="No space left on device") as err:
            run_job(load_job(job), out=str(out), placement=Placement(client=client))
        record("enospc_simulated", message=str(err.value), tiles_done=store_info(out)["tiles_done"])
        assert writes["n"] > 100
        assert store_info(out)["complete"] is False
        assert zarr.open_group(str(out), mode="r").attrs["complete"] is False
        monkeypatch.setattr(Location, "write_atomic", real_put)
        res = run_job(load_job(job), out=str(out), placement=Placement(client=client))
    assert res.complete and res.tiles_already_done + res.tiles_computed == res.tiles_total
    assert np.array_equal(open_gram(out)[0], undisturbed)


def test_unwritable_output_fails_before_compute(fault_job, tmp_path):
    job, _ = fault_job
    target = tmp_path / "ro"
    if os.geteuid() == 0:
        if not _mount_tmpfs(target, "ro,size=1m"):
            pytest.skip("root, and no read-only file system can be mounted here")
    else:
        target.mkdir()
        target.chmod(0o500)
    try:
        line = one_error_line(run_cli("run", str(job), "--out", str(target / "sub" / "g.zarr"),
                                      "--set", "cluster.n_workers=1"))
        assert "not writable" in line
        record("unwritable_output", message=line)
        assert list(target.iterdir()) == []
    finally:
        if os.geteuid() == 0:
            _umount(target)
        else:
            target.chmod(0o700)

