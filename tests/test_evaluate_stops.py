"""An evaluation stopped between outer folds: at a time limit or on SIGUSR1, every fold
started finished and saved, the rest left to a rerun that ends where an undisturbed run does."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from types import SimpleNamespace

import numpy as np
import pytest
from test_deploy import GRAMDIST, ROOT, one_error_line, run_cli
from test_evaluate import informative_and_noise, make_store
from test_faults import finish, session_processes

from gramdist import stopping
from gramdist.evaluation import fold_loop, nested_cv
from gramdist.evaluation.fold_loop import FoldClock
from gramdist.evaluation.nested_cv import RunOptions, evaluate
from gramdist.evaluation.protocols import Protocol

PROTOCOL = Protocol(folds=4, repeats=1, inner_folds=3, c_grid=(0.1, 10.0))


@pytest.fixture
def store(tmp_path):
    y, good, noise = informative_and_noise(seed=7)
    return make_store(tmp_path / "a.zarr", noise + 0.5 * good, y)


@contextlib.contextmanager
def maybe_cluster(on_cluster: bool):
    """None, or a client of two one-thread workers in this process (so that a patched fold and
    a signal to this process reach them)."""
    if not on_cluster:
        yield None
        return
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        client.wait_for_workers(2)  # a busy machine may not have both registered yet
        yield client


def test_the_clock_estimates_a_fold_by_the_90th_percentile_and_stops_before_the_deadline(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(fold_loop, "time", SimpleNamespace(monotonic=lambda: now[0]))
    clock = FoldClock(deadline=160.0)
    assert clock.estimate() is None and clock.may_start()  # nothing known: start while before the deadline
    clock.seconds.extend([10.0] * 9 + [50.0, float("nan")])
    assert clock.estimate() == 50.0  # the higher neighbour at the 90th percentile of the ten known
    assert clock.may_start()  # 100 + 50 <= 160
    now[0] = 111.0
    assert not clock.may_start() and clock.stopped == "time"
    now[0] = 0.0
    assert not clock.may_start()  # a stop is final
    now[0] = 100.0
    late = FoldClock(deadline=99.0)
    assert not late.may_start() and late.stopped == "time"  # past the deadline even with nothing known
    assert FoldClock().may_start()


@pytest.mark.parametrize("on_cluster", [False, True])
def test_a_deadline_stops_between_folds_and_a_rerun_ends_as_an_undisturbed_run(tmp_path, store, monkeypatch,
                                                                                on_cluster):
    """Each fold takes 100 s of a fake clock (the folds' own ``seconds`` read it too); a
    deadline at 250 s: in process folds 1 and 2 run (the third, at 200 + 100, would end past
    it); on two workers the first two, and a third if the first to end leaves the clock at 100
    with 100 s known, never the fourth."""
    undisturbed = evaluate([store], PROTOCOL, RunOptions(seed=2))
    now = [0.0]
    real = nested_cv.outer_fold

    def slow_fold(setup, fold):
        res = real(setup, fold)
        now[0] += 100.0
        return res

    clock = SimpleNamespace(monotonic=lambda: now[0], perf_counter=lambda: now[0])
    monkeypatch.setattr(fold_loop, "time", clock)
    monkeypatch.setattr(nested_cv, "time", clock)
    monkeypatch.setattr(nested_cv, "outer_fold", slow_fold)
    out = tmp_path / "folds"
    with maybe_cluster(on_cluster) as client:
        with pytest.raises(stopping.StoppedEarly) as stop:
            evaluate([store], PROTOCOL, RunOptions(seed=2, out=out, client=client, deadline=250.0))
        saved = sorted(out.glob("fold-*.json"))
        assert len(saved) in ((2, 3) if on_cluster else (2,))
        assert stop.value.status == 3
        assert str(stop.value).startswith("stopped at the time limit (the next fold would take about 100 s)"
                                          if not on_cluster else "stopped at the time limit (the next fold would")
        assert str(stop.value).endswith(f"{len(saved)} of 4 folds saved in {out}; run the same command again to "
                                        "resume")
        again = evaluate([store], PROTOCOL, RunOptions(seed=2, out=out, client=client))
    assert again["resumed_folds"] == len(saved)
    assert again["fold_accuracies"] == undisturbed["fold_accuracies"]
    assert again["selections"] == undisturbed["selections"]


@pytest.mark.parametrize("on_cluster", [False, True])
def test_sigusr1_finishes_the_folds_in_flight_and_starts_no_more(tmp_path, store, monkeypatch, on_cluster):
    """SIGUSR1 arrives while the first fold runs (on two workers, once the second has begun
    too): in process that fold ends and is saved; on two workers the two folds in flight end
    and are saved; no other fold starts."""
    real, started = nested_cv.outer_fold, []

    def signalled_fold(setup, fold):
        started.append(fold.index)
        if fold.index == 0:
            deadline = time.time() + 30
            while on_cluster and len(started) < 2 and time.time() < deadline:
                time.sleep(0.01)  # a signal before fold 1 is submitted would rightly keep it from starting
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.2)  # fold 1 is under way meanwhile
        return real(setup, fold)

    monkeypatch.setattr(nested_cv, "outer_fold", signalled_fold)
    out = tmp_path / "folds"
    with maybe_cluster(on_cluster) as client, stopping.finish_in_flight_on():
        with pytest.raises(stopping.StoppedEarly) as stop:
            evaluate([store], PROTOCOL, RunOptions(seed=2, out=out, client=client))
    expected = 2 if on_cluster else 1
    assert sorted(started) == list(range(expected))
    assert len(list(out.glob("fold-*.json"))) == expected
    assert stop.value.status == 128 + signal.SIGUSR1
    assert str(stop.value) == (f"stopped by SIGUSR1 after the folds in flight: {expected} of 4 folds saved in {out}; "
                               "run the same command again to resume")
    assert stopping.finish_requested() is None  # the request ends with the block


def test_sigusr1_outside_the_block_keeps_its_previous_handler():
    seen = []
    previous = signal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))
    try:
        with stopping.finish_in_flight_on():
            os.kill(os.getpid(), signal.SIGUSR1)
            assert stopping.finish_requested() == signal.SIGUSR1 and seen == []
        os.kill(os.getpid(), signal.SIGUSR1)
        assert seen == [signal.SIGUSR1] and stopping.finish_requested() is None
    finally:
        signal.signal(signal.SIGUSR1, previous)


def cli_store(tmp_path):
    y, good, noise = informative_and_noise(n=200, seed=3)
    return make_store(tmp_path / "cli.zarr", noise + 0.3 * good, y)


def test_cli_sigusr1_to_the_whole_session_stops_in_one_line_and_the_rerun_completes(tmp_path):
    """SLURM's ``--signal=USR1`` reaches every process of the job: the LocalCluster's workers
    ignore it, the command finishes the folds in flight, says what it saved in one line and
    exits 138, nothing left running; the same command completes to the undisturbed figures."""
    s, out = cli_store(tmp_path), tmp_path / "folds"
    args = ("evaluate", s, "--folds", "10", "--repeats", "5", "--inner-folds", "3", "--json", "--quiet")
    proc = subprocess.Popen([*GRAMDIST, *args, "--workers", "2", "--out", str(out)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 120
    while not list(out.glob("fold-*.json")) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGUSR1)
    code, _, err = finish(proc)
    saved = len(list(out.glob("fold-*.json")))
    assert code == 128 + signal.SIGUSR1, err[-3000:]
    assert err.strip().splitlines()[-1] == (f"gramdist: stopped by SIGUSR1 after the folds in flight: {saved} of 50 "
                                            f"folds saved in {out}; run the same command again to resume")
    assert "Traceback" not in err and 1 <= saved < 50
    deadline = time.time() + 10
    while session_processes(proc.pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not session_processes(proc.pid), "processes of the stopped evaluation survived"
    resumed = run_cli(*args, "--workers", "2", "--out", str(out))
    plain = run_cli(*args, "--workers", "0")
    assert resumed.returncode == 0 and plain.returncode == 0, resumed.stderr[-3000:] + plain.stderr[-3000:]
    first, second = json.loads(resumed.stdout.splitlines()[-1]), json.loads(plain.stdout.splitlines()[-1])
    assert first["resumed_folds"] == saved
    assert first["accuracy_mean"] == second["accuracy_mean"] and first["selections"] == second["selections"]


def test_cli_time_limit_needs_out_and_stops_with_status_3(tmp_path):
    s, out = cli_store(tmp_path), tmp_path / "folds"
    line = one_error_line(run_cli("evaluate", s, "--time-limit", "1h", "--workers", "0"))
    assert "--time-limit" in line and "--out" in line
    r = run_cli("evaluate", s, "--time-limit", "1x", "--workers", "0")
    assert r.returncode == 2 and "not a duration" in r.stderr
    # a limit shorter than the start: no fold is begun, and the line says so
    r = run_cli("evaluate", s, "--folds", "3", "--repeats", "1", "--time-limit", "0.001s", "--workers", "0",
                "--out", str(out))
    assert r.returncode == 3, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == ("gramdist: stopped at the time limit (the time limit has passed): "
                                                 f"0 of 3 folds saved in {out}; run the same command again to resume")
    r = run_cli("evaluate", s, "--folds", "3", "--repeats", "1", "--time-limit", "1h", "--workers", "0",
                "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert np.isfinite(json.loads(r.stdout.splitlines()[-1])["accuracy_mean"])


def test_a_worker_that_joins_while_the_folds_run_is_given_one_at_once(tmp_path, store, monkeypatch):
    """Folds go to the cluster one per worker thread; a worker that joins later (an adaptive
    cluster, a batch queue's worker) gets one within the loop's poll, not when a fold ends."""
    import threading

    from distributed import Client, LocalCluster

    undisturbed = evaluate([store], PROTOCOL, RunOptions(seed=2))
    real, started, release = nested_cv.outer_fold, [], threading.Event()

    def held_fold(setup, fold):
        started.append(fold.index)
        release.wait(timeout=60)
        return real(setup, fold)

    monkeypatch.setattr(nested_cv, "outer_fold", held_fold)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        result: dict = {}
        run = threading.Thread(target=lambda: result.update(
            evaluate([store], PROTOCOL, RunOptions(seed=2, client=client))))
        run.start()
        deadline = time.time() + 30
        while not started and time.time() < deadline:
            time.sleep(0.05)
        cluster.scale(2)
        while len(started) < 2 and time.time() < deadline:
            time.sleep(0.05)
        assert started == [0, 1]  # fold 1 began on the new worker while fold 0 was still held
        release.set()
        run.join(timeout=60)
    assert result["fold_accuracies"] == undisturbed["fold_accuracies"]


def test_cli_time_limit_on_feature_stores_stops_and_resumes_to_the_undisturbed_result(tmp_path):
    """Feature stores share the Gram stores' fold loop: the same stop (exit 3, one line), and a
    rerun with a long limit ends where a run without one does."""
    store, out = tmp_path / "syn.zarr", tmp_path / "folds"
    r = run_cli("features", "jobs/synthetic-wl.yaml", "--out", str(store), "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    args = ("evaluate", str(store), "--folds", "3", "--repeats", "2", "--workers", "0", "--json", "--quiet")
    r = run_cli(*args, "--time-limit", "0.001s", "--out", str(out))
    assert r.returncode == 3, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == ("gramdist: stopped at the time limit (the time limit has passed): "
                                                 f"0 of 6 folds saved in {out}; run the same command again to resume")
    limited = run_cli(*args, "--time-limit", "1h", "--out", str(out))
    plain = run_cli(*args)
    assert limited.returncode == 0 and plain.returncode == 0, limited.stderr[-3000:] + plain.stderr[-3000:]
    first, second = json.loads(limited.stdout.splitlines()[-1]), json.loads(plain.stdout.splitlines()[-1])
    assert first["learner"] == second["learner"] == "svm"
    assert first["accuracy_mean"] == second["accuracy_mean"] and first["selections"] == second["selections"]


def test_cli_refit_time_limit_needs_out(tmp_path):
    """``--refit`` keeps its folds in ``--out`` as the stores do: a limit without it would stop
    with nothing saved, so it is refused before any fit."""
    line = one_error_line(run_cli("evaluate", "--refit", "jobs/synthetic-wl.yaml", "--time-limit", "1h",
                                  "--workers", "0"))
    assert "--time-limit" in line and "--out" in line


def test_the_stop_line_gives_a_short_fold_in_tenths_of_a_second():
    clock = FoldClock(deadline=0.0)
    clock.seconds.append(0.34)
    assert clock.estimate() == 0.34
    assert "the next fold would take about 0.3 s" in str(fold_loop.stopped_early(clock, 1, 6, "f"))
