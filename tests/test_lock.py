"""One writer per store, fenced: a second writer is refused naming the first; a stale lock is
taken over atomically with the next epoch; a writer stopped past its lease writes nothing more;
SIGTERM releases the lock. Real processes throughout."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import socket
import time

import numpy as np
import pytest
import zarr
from test_deploy import one_error_line, reference_gram, run_cli, synthetic_job
from test_faults import finish, start_run, wait_for_chunks

from gramdist import stopping
from gramdist.engine.placement import in_process_threads
from gramdist.engine.store import GramStore, open_gram, verify
from gramdist.engine.store import lock as lk


def test_second_run_on_the_same_store_is_refused_naming_the_first(tmp_path):
    job = synthetic_job(tmp_path / "busy.yaml", n_graphs=240, tile=10, seed=4)
    out = tmp_path / "busy.zarr"
    first = start_run(job, out, "--set", "cluster.n_workers=1")
    try:
        wait_for_chunks(first, out, 4)
        record = lk.read_lock(out)
        assert record["host"] == socket.gethostname() and record["pid"] == first.pid and record["epoch"] == 1
        line = one_error_line(run_cli("run", str(job), "--out", str(out), "--quiet"))
        assert f"{out}: being written by another run (host {socket.gethostname()}, process {first.pid}, since " in line
    finally:
        code, _, err = finish(first)
    assert code == 0, err[-2000:]
    assert not lk.lock_file(out).path.exists()  # released at the end, its heartbeat file too
    assert not list(tmp_path.glob("busy.zarr.lock*"))
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


def test_lock_of_a_killed_run_is_taken_over_with_a_note_and_the_next_epoch(tmp_path):
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


def _holder(store, token="x", host="elsewhere", pid=1, heartbeat=None, epoch=3):
    lk.lock_file(store).write({"token": token, "epoch": epoch, "host": host, "pid": pid, "since": time.time() - 500})
    lk.beat_file(store, token).write({"token": token, "heartbeat": time.time() if heartbeat is None else heartbeat})


def test_lock_of_another_host_is_stale_only_when_its_lease_ran_out(tmp_path):
    store = tmp_path / "remote.zarr"
    _holder(store)
    with pytest.raises(lk.StoreBusyError, match="host elsewhere, process 1"):
        lk.StoreLock(store).acquire()
    _holder(store, heartbeat=time.time() - lk.STALE_SECONDS - 5)
    notes = []
    with lk.StoreLock(store, log=notes.append) as mine:
        record = lk.read_lock(store)
        assert record["pid"] == os.getpid() and record["epoch"] == 4 and mine.epoch == 4
        assert not lk.beat_file(store, "x").exists()  # the dead holder's heartbeat is gone with it
    assert "no heartbeat for" in notes[0] and not lk.lock_file(store).exists()


def test_a_detached_job_takes_over_its_own_lock_only_when_stale(tmp_path):
    store = tmp_path / "job.zarr"
    _holder(store, host=socket.gethostname(), pid=os.getpid())  # alive, fresh: another job is refused
    with pytest.raises(lk.StoreBusyError):
        lk.StoreLock(store, job_id="abc").acquire()
    _holder(store, host=socket.gethostname(), pid=2**22 + 12345)  # its worker died
    notes = []
    with lk.StoreLock(store, job_id="abc", log=notes.append):
        assert lk.read_lock(store)["job_id"] == "abc"
    assert "is gone" in notes[0]


def test_a_restarted_detached_job_waits_for_its_own_lock_to_go_stale(tmp_path, monkeypatch):
    """Its orchestrator restarted on another worker before the old one is seen dead: the same
    job waits (up to one lease) and takes over once the lease ran out; another job never waits."""
    monkeypatch.setattr(lk, "STALE_SECONDS", 1.5)
    store = tmp_path / "own.zarr"
    lk.lock_file(store).write({"token": "x", "epoch": 2, "host": "elsewhere", "pid": 1, "since": time.time(),
                               "job_id": "abc"})
    lk.beat_file(store, "x").write({"token": "x", "heartbeat": time.time()})
    with pytest.raises(lk.StoreBusyError):
        lk.StoreLock(store, job_id="other").acquire()
    notes, t = [], time.monotonic()
    with lk.StoreLock(store, job_id="abc", log=notes.append) as mine:
        assert mine.epoch == 3 and time.monotonic() - t >= 1.0
    assert "no heartbeat for" in notes[0]


def test_unreadable_locks_are_one_line_never_a_traceback(tmp_path):
    store = tmp_path / "odd.zarr"
    lk.lock_file(store).path.write_text("[]")
    assert lk.read_lock(store) is None
    with pytest.raises(lk.StoreBusyError):  # written this instant by someone: not taken while fresh
        lk.StoreLock(store).acquire()
    lk.lock_file(store).write({"token": "t", "host": socket.gethostname(), "pid": "not a number", "since": "x"})
    lk.beat_file(store, "t").write({"heartbeat": "soon"})
    assert lk.is_stale(lk.read_lock(store)) is not None  # a pid that is no process: stale
    with lk.StoreLock(store, log=lambda m: None):
        pass


def test_heartbeat_keeps_a_long_run_fresh_and_touches_only_its_own_file(tmp_path, monkeypatch):
    monkeypatch.setattr(lk, "HEARTBEAT_SECONDS", 0.05)
    store = tmp_path / "beat.zarr"
    with lk.StoreLock(store) as mine:
        first = lk.read_lock(store)["heartbeat"]
        time.sleep(0.3)
        assert lk.read_lock(store)["heartbeat"] > first
        assert lk.lock_file(store).read()["token"] == mine.token and "heartbeat" not in lk.lock_file(store).read()


def _race(store: str, barrier, results, stale: bool) -> None:
    lock = lk.StoreLock(store, log=lambda m: None)
    barrier.wait()
    try:
        lock.acquire()
        results.put("won")
        barrier.wait()  # hold it until the other has tried
        lock.release()
    except lk.StoreBusyError:
        results.put("refused")
        barrier.wait()


def test_two_writers_started_together_exactly_one_writes(tmp_path):
    """100 rounds of two processes racing for one store: 50 for a free store, 50 for a store
    whose stale lock (a dead process) both try to take over. Exactly one wins every round."""
    ctx = mp.get_context("fork")
    for round_ in range(100):
        store = str(tmp_path / f"race{round_}.zarr")
        stale = round_ % 2 == 1
        if stale:
            _holder(store, host=socket.gethostname(), pid=2**22 + 4321, epoch=7)
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [ctx.Process(target=_race, args=(store, barrier, results, stale)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        outcome = sorted(results.get(timeout=5) for _ in range(2))
        assert outcome == ["refused", "won"], (round_, outcome)
        assert not lk.lock_file(store).exists()


def store_files(store) -> dict:
    """Each file of a store: its mtime and bytes. Temporary files (Zarr's ``<chunk>.<id>.partial``,
    the store's dot-named ones of ``Location.write_atomic``, which writes the Gram's chunks) are
    left out: a write stopped half way (SIGSTOP) holds one until it continues and renames it."""
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in store.rglob("*")
            if p.is_file() and not p.name.endswith(".partial") and not p.name.startswith(".")}


def test_a_writer_stopped_past_its_lease_writes_nothing_more(tmp_path):
    """SIGSTOP a run past its lease; a second run takes the store over and finishes it; SIGCONT
    the first: it stops at its next write with one line, and the store is the second run's."""
    job = synthetic_job(tmp_path / "stop.yaml", n_graphs=300, tile=10, seed=6)
    out = tmp_path / "stop.zarr"
    env = {**os.environ, "GRAMDIST_LEASE_SECONDS": "4"}
    first = start_run(job, out, "--set", "cluster.n_workers=0", env=env)  # in its process: SIGSTOP stops all
    try:
        wait_for_chunks(first, out, 6)
        os.killpg(first.pid, signal.SIGSTOP)
        time.sleep(5)  # past its lease
        second = run_cli("run", str(job), "--out", str(out), "--quiet", "--set", "cluster.n_workers=0", env=env)
        assert second.returncode == 0, second.stderr[-2000:]
        assert "took over the lock" in second.stderr and "no heartbeat for" in second.stderr
        files = store_files(out)
        os.killpg(first.pid, signal.SIGCONT)
        code, _, err = finish(first)
    finally:
        try:
            os.killpg(first.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    assert code == 2, err[-2000:]
    assert "gramdist: error:" in err and ("lease ran out" in err or "no longer holds the store" in err), err[-2000:]
    # a write already past its lease check when the process stopped may complete: one tile (and
    # its mirror) or one chunk of a vector per thread of the run, the same bits (every value is
    # deterministic); nothing after it. Every file of the store is the second run's, byte for byte
    after = store_files(out)
    changed = [p for p in after if after[p][0] != files.get(p, (None,))[0]]
    assert len(changed) <= 2 * in_process_threads() and all("c" in p.relative_to(out).parts for p in changed), changed
    assert {p: b for p, (_, b) in after.items()} == {p: b for p, (_, b) in files.items()}
    assert verify(out)["problems"] == []
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_release_the_lock_and_the_run_resumes(tmp_path, sig):
    job = synthetic_job(tmp_path / "term.yaml", n_graphs=240, tile=10, seed=4)
    out = tmp_path / "term.zarr"
    proc = start_run(job, out, "--set", "cluster.n_workers=1", "--set", "gram.checkpoint_seconds=0.05")
    wait_for_chunks(proc, out, 40)
    proc.send_signal(sig)
    code, _, err = finish(proc)
    assert code == 128 + sig, err[-2000:]
    assert f"stopped by {signal.Signals(sig).name}" in err
    assert not lk.lock_file(out).exists() and not list(tmp_path.glob("term.zarr.lock*"))
    saved = int(zarr.open_array(str(out / "tiles_done"), mode="r")[...].sum())  # what it recorded on its way out
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[-1])["tiles_already_done"] == saved > 0
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


class _SignalInDel:
    """Receives SIGTERM while Python runs its ``__del__``, where an exception is swallowed
    ("Exception ignored in ..."), as it is in the garbage collector's weakref callbacks."""

    def __del__(self) -> None:
        stopping.handle_signal(signal.SIGTERM, None)


def test_a_signal_whose_exception_was_swallowed_still_stops_the_run(tmp_path, monkeypatch, capsys):
    """CI once saw SIGHUP land in a ``WeakSet`` callback: its exception was printed and lost and
    the run finished with exit 0. The recorded request stops the run at the next task."""
    from gramdist.cli import main
    from gramdist.engine import window as window_mod

    job = synthetic_job(tmp_path / "swallow.yaml", n_graphs=120, tile=10, seed=3)
    out = tmp_path / "swallow.zarr"
    calls = []
    result = window_mod._result

    def result_then_signal(fut, what):
        calls.append(1)
        if len(calls) == 5:
            obj = _SignalInDel()
            del obj  # the exception raised in __del__ is swallowed here
        return result(fut, what)

    monkeypatch.setattr(window_mod, "_result", result_then_signal)
    code = main(["run", str(job), "--out", str(out), "--quiet", "--set", "cluster.n_workers=0",
                 "--set", "gram.checkpoint_seconds=100"])
    err = capsys.readouterr().err
    assert code == 128 + signal.SIGTERM, err[-2000:]
    assert "stopped by SIGTERM" in err and "Exception ignored" not in err, err[-2000:]
    assert not lk.lock_file(out).exists()
    saved = int(zarr.open_array(str(out / "tiles_done"), mode="r")[...].sum())
    assert 0 < saved < 78  # 12 x 12 tiles, the upper 78 of them
    monkeypatch.undo()
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[-1])["tiles_already_done"] == saved
    assert np.array_equal(open_gram(out)[0], reference_gram(job))


def test_a_store_fenced_by_a_lost_lock_refuses_every_write_of_this_process(tmp_path):
    """The client's own writes (the diagonal, the fitted state, progress, completion, timings,
    vectors) are fenced as the workers' tiles are: once the lock is another's, each is refused
    with :class:`LeaseLost` and no file of the store changes."""
    job = synthetic_job(tmp_path / "fence.yaml", n_graphs=30, tile=10, seed=2)
    out = tmp_path / "fence.zarr"
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--set", "cluster.n_workers=0")
    assert r.returncode == 0, r.stderr[-2000:]
    store = GramStore.open(out, mode="r+")
    diag, _ = store.read_diag()
    state, indices, mask = store.read_state(), store.fit_indices(), store.done_mask()
    with lk.StoreLock(out, log=lambda m: None) as mine:
        store.fence(mine.check)
        store.record_stats({"fenced_s": 1.0})  # held: written
        assert store.stats["fenced_s"] == 1.0
        _holder(out, token="another", host=socket.gethostname(), pid=os.getpid(), epoch=9)  # taken over
        lk._checked.clear()  # as if RECHECK_SECONDS had passed
        files = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
        writes = {"stats": lambda: store.record_stats({"fenced_s": 2.0}), "diag": lambda: store.write_diag(diag),
                  "state": lambda: store.write_state(state, indices), "progress": lambda: store.save_progress(mask),
                  "complete": store.mark_complete, "finish": store.finish_creation}
        for name, write in writes.items():
            with pytest.raises(lk.LeaseLost, match="no longer holds the store"):
                write()
                pytest.fail(f"{name} was written by a writer that lost the store")
        assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == files
    assert GramStore.open(out).stats["fenced_s"] == 1.0
