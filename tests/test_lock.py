"""One writer per store: a second `gramdist run` is refused naming the first; a lock left by a
killed run is taken over. Real processes throughout."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import numpy as np
from test_deploy import one_error_line, reference_gram, run_cli, synthetic_job
from test_faults import finish, start_run, wait_for_chunks

from gramdist.engine.store import lock as lk
from gramdist.engine.store import open_gram


def test_second_run_on_the_same_store_is_refused_naming_the_first(tmp_path):
    job = synthetic_job(tmp_path / "busy.yaml", n_graphs=240, tile=10, seed=4)
    out = tmp_path / "busy.zarr"
    first = start_run(job, out, "--set", "cluster.n_workers=1")
    try:
        wait_for_chunks(first, out, 4)
        record = lk.read_lock(out)
        assert record["host"] == socket.gethostname() and record["pid"] == first.pid
        line = one_error_line(run_cli("run", str(job), "--out", str(out), "--quiet"))
        assert f"{out}: being written by another run (host {socket.gethostname()}, process {first.pid}, since " in line
    finally:
        code, _, err = finish(first)
    assert code == 0, err[-2000:]
    assert not lk.lock_file(out).path.exists()  # released at the end
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


def test_lock_of_a_killed_run_is_taken_over_with_a_note(tmp_path):
    job = synthetic_job(tmp_path / "stale.yaml", n_graphs=240, tile=10, seed=4)
    out = tmp_path / "stale.zarr"
    proc = start_run(job, out, "--set", "cluster.n_workers=1")
    wait_for_chunks(proc, out, 4)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert lk.read_lock(out)["pid"] == proc.pid  # left behind
    r = run_cli("run", str(job), "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"took over the lock of {out} left by host {socket.gethostname()}, process {proc.pid}" in r.stderr
    assert f"its process {proc.pid} is gone" in r.stderr
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


def test_lock_of_another_host_is_stale_only_without_heartbeat(tmp_path, monkeypatch):
    store = tmp_path / "remote.zarr"
    record = {"host": "elsewhere", "pid": 1, "since": time.time() - 500, "heartbeat": time.time(), "token": "x"}
    lk.lock_file(store).path.write_text(json.dumps(record))
    try:
        lk.StoreLock(store).acquire()
        raise AssertionError("a live lock of another host was taken")
    except lk.StoreBusyError as exc:
        assert "host elsewhere, process 1" in str(exc)
    record["heartbeat"] = time.time() - lk.STALE_SECONDS - 5
    lk.lock_file(store).path.write_text(json.dumps(record))
    notes = []
    with lk.StoreLock(store, log=notes.append):
        assert lk.read_lock(store)["pid"] == os.getpid()
    assert "no heartbeat for" in notes[0] and not lk.lock_file(store).path.exists()


def test_a_detached_job_takes_over_its_own_lock(tmp_path):
    store = tmp_path / "job.zarr"
    with lk.StoreLock(store, job_id="abc"):
        record = lk.read_lock(store)
        record["pid"], record["host"] = 999999, "worker-that-died"
        lk.lock_file(store).path.write_text(json.dumps(record))
        notes = []
        with lk.StoreLock(store, job_id="abc", log=notes.append):
            assert "it belongs to this job" in notes[0]


def test_heartbeat_keeps_a_long_run_fresh(tmp_path, monkeypatch):
    monkeypatch.setattr(lk, "HEARTBEAT_SECONDS", 0.05)
    store = tmp_path / "beat.zarr"
    with lk.StoreLock(store):
        first = lk.read_lock(store)["heartbeat"]
        time.sleep(0.3)
        assert lk.read_lock(store)["heartbeat"] > first
