"""Detached jobs: `gramdist submit`, `status`, `cancel`, and their faults, with real processes.

Each fault test starts a real cluster (a `dask scheduler` and `dask worker` processes on
127.0.0.1, as in tests/test_faults.py) whose workers load ``tilegate.py``: every tile sleeps a
little and waits while a gate file exists, so a test can hold a job in the middle of its tile
phase, strike (kill the submitter, the orchestrator's worker, the scheduler; submit again;
cancel), and let it go on. Every case ends with a Gram bitwise equal to a local `gramdist run`
of the same job. Figures of these runs are in RELIABILITY.md ("Submitted jobs").
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distributed import Client, LocalCluster
from test_deploy import (
    GRAMDIST,
    ROOT,
    DaskProcesses,
    chunks_written,
    last_json,
    one_error_line,
    run_cli,
    synthetic_job,
)
from test_faults import record
from tilegate import preload_env

import gramdist
import gramdist.jobs
from gramdist.engine import detached
from gramdist.engine.cluster import plain_tcp_warning, warn_plain_tcp
from gramdist.engine.jobrecord import JobStatus, job_status, read_record, status_from_record
from gramdist.engine.placement import Placement
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram, verify

N_GRAPHS, TILE = 160, 10  # 16 x 16 chunks: 136 tiles, 256 chunk files
TILES = 136


@pytest.fixture(scope="module")
def job_and_local(tmp_path_factory):
    """(job file, the Gram of a local run of it: `gramdist run`'s run_job on an in-process cluster)."""
    from gramdist.engine.runner import run_job
    from gramdist.jobs import load_job

    folder = tmp_path_factory.mktemp("submitjob")
    job = synthetic_job(folder / "detached.yaml", n_graphs=N_GRAPHS, tile=TILE, seed=13)
    out = folder / "local.zarr"
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0", silence_logs=logging.ERROR) as lc, \
            Client(lc) as client:
        assert run_job(load_job(job), out=str(out), placement=Placement(client=client)).complete
    return job, open_gram(out)[0]


class GatedCluster(DaskProcesses):
    """A process cluster whose tiles take ``seconds`` each and wait while ``gate`` exists."""

    def __init__(self, tmp: Path, n_workers: int = 2, seconds: float = 0.03) -> None:
        self.gate = Path(tmp) / "gate"
        super().__init__(Path(tmp) / "cluster", env=preload_env(self.gate, seconds))
        self.n_workers = n_workers

    def start(self) -> str:
        self.start_scheduler()
        for i in range(self.n_workers):
            self.start_worker(f"w{i}")
        self.wait_for_workers(self.n_workers)
        return self.address

    def hold(self) -> None:
        self.gate.touch()

    def release(self) -> None:
        self.gate.unlink(missing_ok=True)


@pytest.fixture
def cluster(tmp_path):
    c = GatedCluster(tmp_path)
    try:
        c.start()
        yield c
    finally:
        c.release()
        c.close()


def submit_cli(job: Path, out: Path, address: str, *args: str, timeout: float = 120) -> dict:
    r = run_cli("submit", str(job), "--scheduler", address, "--out", str(out), "--json", *args, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return last_json(r.stdout)


def wait_until(store: Path, states: tuple[str, ...], timeout: float = 120) -> JobStatus:
    deadline = time.time() + timeout
    while True:
        status = job_status(store)
        if status.state in states:
            return status
        if time.time() > deadline:
            raise AssertionError(f"{store}: still {status.summary()} after {timeout} s; {status.messages[-5:]}")
        time.sleep(0.2)


def wait_for_chunks(store: Path, at_least: int, timeout: float = 120) -> int:
    deadline = time.time() + timeout
    while (n := chunks_written(store)) < at_least:
        if time.time() > deadline:
            raise AssertionError(f"only {n} chunks written after {timeout} s: {job_status(store).summary()}")
        time.sleep(0.05)
    return n


def held_mid_run(cluster: GatedCluster, store: Path, fraction: float = 0.25) -> None:
    """Let the job write part of its tiles, then hold the rest (the tiles in flight wait)."""
    wait_for_chunks(store, int(2 * TILES * fraction))
    cluster.hold()
    time.sleep(0.5)  # tiles already past the gate finish
    assert not store_info(store)["complete"]


# ----------------------------------------------------------------------------- faults
def test_submitter_killed_job_completes_and_a_second_submit_is_refused(cluster, job_and_local, tmp_path):
    """`gramdist submit` returns within seconds; its process killed at once, the job goes on. A
    second submit of the same job to the same store while it runs exits 2 naming the job; the
    scheduler lists the job; `status --watch` follows it to the end; the Gram is bitwise the
    local run's."""
    job, local = job_and_local
    out = tmp_path / "detached.zarr"
    cluster.hold()  # the job starts and then waits at its first tiles
    t0 = time.perf_counter()
    proc = subprocess.Popen([*GRAMDIST, "submit", str(job), "--scheduler", cluster.address, "--out", str(out),
                             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            start_new_session=True)
    line = proc.stdout.readline()
    os.killpg(proc.pid, signal.SIGKILL)  # the submitter dies right after it answered
    proc.wait(timeout=30)
    submit_s = time.perf_counter() - t0
    answer = json.loads(line)
    job_id = answer["job_id"]
    assert answer["store"] == str(out) and answer["state"] == "running" and job_id.startswith("gramdist-detached-")
    assert answer["dashboard"].startswith("http://")

    status = job_status(out)
    assert status.state == "running" and status.job_id == job_id and status.orchestrator["pid"] > 0
    # a second submit of the same job to the same store while it runs: refused, naming the job
    again = run_cli("submit", str(job), "--scheduler", cluster.address, "--out", str(out))
    line2 = one_error_line(again)
    assert f"being written by job {job_id}" in line2 and "gramdist status" in line2, line2
    listing = run_cli("status", "--scheduler", cluster.address)
    assert listing.returncode == 0 and job_id in listing.stdout and "running" in listing.stdout, listing.stdout

    cluster.release()
    watch = run_cli("status", str(out), "--watch", "--interval", "0.3", timeout=180)
    assert watch.returncode == 0, watch.stdout + watch.stderr[-2000:]
    assert "complete" in watch.stdout
    final = job_status(out)
    record("submitter_killed", submit_s=round(submit_s, 2), tiles_total=final.tiles_total,
           second_submit=line2)
    assert final.state == "complete" and final.tiles_done == final.tiles_total == TILES
    assert np.array_equal(open_gram(out)[0], local)


def test_orchestrator_worker_killed_job_continues_on_another_worker(job_and_local, tmp_path):
    """SIGKILL the worker running the orchestrator (nanny and worker: it does not come back).
    Dask runs the orchestrator again on another worker, which takes over the store's lock
    (held under the job's id) and resumes from the done-mask: the job completes without a
    person, and status tells how it went."""
    job, local = job_and_local
    cluster = GatedCluster(tmp_path, n_workers=3)
    try:
        cluster.start()
        out = tmp_path / "killed.zarr"
        # the done-mask saved every 0.2 s: part of it is on disk when the orchestrator dies
        job_id = submit_cli(job, out, cluster.address, "--set", "gram.checkpoint_seconds=0.2")["job_id"]
        held_mid_run(cluster, out, fraction=0.4)
        victim = job_status(out).orchestrator["name"]
        cluster.kill_worker(victim)
        t_kill = time.perf_counter()
        time.sleep(1)
        done_at_kill = store_info(out)["tiles_done"]  # what the dead orchestrator had saved
        assert 0 < done_at_kill < TILES
        cluster.release()
        final = wait_until(out, ("complete", "failed", "cancelled"), timeout=180)
        assert final.state == "complete", final.summary()
        after = read_record(out)
        record("orchestrator_worker_killed", tiles_total=TILES, tiles_in_mask_at_kill=done_at_kill,
               completed_s_after_kill=round(time.perf_counter() - t_kill, 2), restarts=after["restarts"],
               restarted_computed=after["progress"]["computed"], messages=after["messages"][-4:])
        assert after["job_id"] == job_id and after["restarts"] == 1
        assert after["progress"]["computed"] == TILES - done_at_kill  # resumed from the done-mask
        assert after["orchestrator"]["name"] != victim
        assert any("orchestrator restarted on worker" in m for m in after["messages"]), after["messages"]
        assert any("took over the lock" in m for m in after["messages"]), after["messages"]
        assert np.array_equal(open_gram(out)[0], local)
        assert verify(out)["damaged"] == []
    finally:
        cluster.release()
        cluster.close()


def test_scheduler_restarted_status_stopped_and_submitting_again_resumes(job_and_local, tmp_path):
    """Kill the scheduler mid-job: its workers close, the orchestrator with them. `status`
    (from the store alone, no cluster left) says stopped and why. A new scheduler and workers;
    submitting again resumes: only the tiles the done-mask lacks are computed."""
    job, local = job_and_local
    cluster = GatedCluster(tmp_path)
    try:
        cluster.start()
        out = tmp_path / "restarted.zarr"
        first = submit_cli(job, out, cluster.address)["job_id"]
        held_mid_run(cluster, out)
        os.killpg(cluster.procs["scheduler"].pid, signal.SIGKILL)
        stopped = wait_until(out, ("stopped",), timeout=60)
        r = run_cli("status", str(out), "--json")
        shown = json.loads(r.stdout)
        assert shown["state"] == "stopped" and shown["job_id"] == first, shown
        assert ("lost the connection to its scheduler" in shown["reason"]
                or "its orchestrator" in shown["reason"]), shown["reason"]  # whichever was first
        assert "submit the job again" in shown["reason"]
        done = store_info(out)["tiles_done"]
        assert 0 < done < TILES
        cluster.release()
        for name in [n for n in cluster.procs if n != "scheduler"]:  # the workers end with their scheduler
            cluster.procs[name].wait(timeout=60)
        cluster.start()  # a new scheduler and new workers
        second = submit_cli(job, out, cluster.address)["job_id"]
        assert second != first
        final = wait_until(out, ("complete", "failed", "stopped"))
        assert final.state == "complete", final.summary()
        computed = read_record(out)["progress"]["computed"]
        record("scheduler_restarted", tiles_total=TILES, tiles_in_mask_at_stop=done, resubmit_computed=computed,
               stopped_reason=stopped.reason)
        assert computed == TILES - done  # resumed: only the missing tiles
        assert np.array_equal(open_gram(out)[0], local)
    finally:
        cluster.release()
        cluster.close()


def test_cancel_by_store_and_by_id_then_resume(cluster, job_and_local, tmp_path):
    """`gramdist cancel STORE` stops the job at its next tile: the tiles written stay valid
    (`verify` passes), the store is not complete; `gramdist.submit(...)` resumes it, is cancelled
    again by id through the scheduler (`cancel ID --scheduler`; ``.wait()`` raises), and
    `gramdist run` finishes it, computing only the missing tiles: the Gram is bitwise the local
    run's."""
    job, local = job_and_local
    out = tmp_path / "cancel.zarr"
    job_id = submit_cli(job, out, cluster.address)["job_id"]
    held_mid_run(cluster, out)
    r = run_cli("cancel", str(out), "--wait", "0", "--json")
    assert r.returncode == 1, r.stderr  # asked, not yet stopped: its tiles are held
    assert json.loads(r.stdout)["cancel_requested"] is True
    assert job_status(out).cancel_requested
    assert "cancel requested" in run_cli("status", str(out)).stdout
    cluster.release()
    cancelled = wait_until(out, ("cancelled", "complete"))
    assert cancelled.state == "cancelled" and cancelled.job_id == job_id and "cancelled by" in cancelled.reason
    assert not Path(f"{out}.lock").exists()  # the lock is freed
    report = verify(out)
    assert report["damaged"] == [] and 0 < report["checked"] < TILES
    assert store_info(out)["complete"] is False
    assert "cancelled" in run_cli("cancel", str(out)).stdout  # cancelling again: it has ended

    cluster.hold()
    handle = gramdist.submit(str(job), out=str(out), scheduler=cluster.address)
    assert handle.state == "running" and handle.status().state == "running"
    r = run_cli("cancel", handle.job_id, "--scheduler", cluster.address, "--wait", "0")
    assert r.returncode == 1, r.stderr
    cluster.release()
    with pytest.raises(detached.DetachedJobError, match="cancelled"):
        handle.wait(timeout=120)
    assert handle.status().state == "cancelled"
    listing = run_cli("status", "--scheduler", cluster.address, "--json")
    states = {json.loads(ln)["job_id"]: json.loads(ln)["state"] for ln in listing.stdout.splitlines()}
    assert states[job_id] == "cancelled" and states[handle.job_id] == "cancelled", states

    done = store_info(out)["tiles_done"]
    r = run_cli("run", str(job), "--scheduler", cluster.address, "--out", str(out), "--quiet", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert last_json(r.stdout)["tiles_computed"] == TILES - done  # `run` resumes a cancelled job too
    assert job_status(out).state == "complete"  # the store is the truth, whoever finished it
    assert np.array_equal(open_gram(out)[0], local)


def test_submitted_grid_writes_one_store_per_setting(cluster, tmp_path, capsys):
    """A grid job submitted once: one orchestrator runs its settings in turn (run_grid), the
    record beside the folder follows all of them, and a setting's store leads to it."""
    from test_deploy import reference_gram

    job = synthetic_job(tmp_path / "grid.yaml", n_graphs=40, tile=10)
    folder = tmp_path / "grid"
    handle = gramdist.submit(gramdist.jobs.load_job(job, ["kernel.h=1,2"]), out=str(folder),
                             scheduler=cluster.address)
    final = handle.wait(timeout=180)
    assert final.state == "complete" and final.tiles_done == final.tiles_total == 2 * 10
    assert [(s["name"], s["complete"]) for s in final.settings] == [("h-1", True), ("h-2", True)]
    setting = job_status(folder / "h-2.zarr")
    assert setting.job_id == handle.job_id and setting.store == str(folder)
    rc, text, _ = cli(capsys, "status", str(folder))
    assert rc == 0 and "h-1: 10/10 complete" in text and "h-2: 10/10 complete" in text, text
    for h in (1, 2):
        ref = reference_gram(synthetic_job(tmp_path / f"h{h}.yaml", n_graphs=40, tile=10, h=h))
        assert np.array_equal(open_gram(folder / f"h-{h}.zarr")[0], ref)


# ----------------------------------------------------------------------------- refusals
def cli(capsys, *args: str) -> tuple[int, str, str]:
    """`gramdist ARGS` in this process: (exit status, stdout, stderr)."""
    from gramdist.cli import main

    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


def error_line(capsys, *args: str) -> str:
    rc, _, err = cli(capsys, *args)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("gramdist: error: "), (rc, err)
    return err.strip()


def test_submit_refuses_a_store_the_workers_cannot_write(tmp_path, capsys):
    """The store location is checked from every worker before anything is submitted: a path
    no worker can write is one line, exit 2, naming the worker's host."""
    job = synthetic_job(tmp_path / "job.yaml", n_graphs=20)
    blocked = tmp_path / "ro"
    blocked.mkdir()
    blocked.chmod(0o500)
    target = "/proc/gramdist/x.zarr" if os.geteuid() == 0 else str(blocked / "sub" / "x.zarr")
    with LocalCluster(n_workers=1, processes=False, protocol="tcp", host="127.0.0.1", dashboard_address=":0",
                      silence_logs=logging.ERROR) as lc:
        try:
            line = error_line(capsys, "submit", str(job), "--scheduler", lc.scheduler_address, "--out", target)
        finally:
            blocked.chmod(0o700)
    assert "cannot be written from 1 of 1 workers" in line and "file system the workers share" in line, line
    assert not list(tmp_path.rglob("*.job.json"))


def test_submit_needs_a_lasting_scheduler(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    job = synthetic_job(tmp_path / "job.yaml", n_graphs=20)
    assert "needs a running Dask scheduler that outlives this process" in error_line(capsys, "submit", str(job))
    jq = synthetic_job(tmp_path / "jq.yaml", n_graphs=20, extra="cluster: {jobqueue: {kind: slurm, cores: 1, memory: 1GB}}\n")
    line = error_line(capsys, "submit", str(jq))
    assert "cluster.jobqueue starts the Dask scheduler inside this process" in line and "dask-cluster.slurm" in line
    assert "not found" in error_line(capsys, "submit", str(job), "--scheduler-file", str(tmp_path / "none.json"))


# ----------------------------------------------------------------------------- status from files
def _record(**kw) -> dict:
    base = {"job_id": "gramdist-x-000000", "state": "running", "since": 1000.0, "heartbeat": time.time(),
            "orchestrator": {"host": "elsewhere", "pid": 1, "worker": "tcp://10.0.0.2:4000", "name": "w3"},
            "stores": [["", "/nonexistent/x.zarr"]]}
    return {**base, **kw}


def test_status_rate_and_eta_from_the_record():
    """41 tiles computed by this orchestrator between t = 100 s (the first) and t = 120 s: 40 in
    20 s = 2 tiles/s; 60 of 160 done, so the 100 left take 50 s (asked at t = 121 s)."""
    progress = {"computed": 41, "first_at": 100.0, "at": 120.0, "done": 60, "total": 160}
    s = status_from_record(_record(progress=progress, heartbeat=121.0), "/nonexistent/x.zarr", now=121.0)
    assert s.state == "running" and s.rate == pytest.approx(2.0) and s.eta_s == pytest.approx(50.0)
    assert (s.tiles_done, s.tiles_total) == (60, 160)
    assert "60/160 tiles (37.5 %), 2.00 tiles/s, ETA 50 s" in s.summary()
    # 40 s later, no new tile (the heartbeat says the orchestrator lives): no ETA, a note instead
    s = status_from_record(_record(progress=progress, heartbeat=155.0), "/nonexistent/x.zarr", now=160.0)
    assert s.state == "running" and s.eta_s is None and s.reason == "no tile finished for 40 s"


def test_status_says_stopped_when_the_orchestrator_is_gone():
    import socket

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    here = _record(orchestrator={"host": socket.gethostname(), "pid": dead_pid, "name": "w0"})
    s = status_from_record(here, "/nonexistent/x.zarr")
    assert s.state == "stopped" and f"process {dead_pid} is gone" in s.reason and "submit the job again" in s.reason
    silent = _record(heartbeat=time.time() - 600)  # another host: only the heartbeat tells
    s = status_from_record(silent, "/nonexistent/x.zarr")
    assert s.state == "stopped" and "no heartbeat for" in s.reason
    assert status_from_record(_record(), "/nonexistent/x.zarr").state == "running"
    for state in ("failed", "cancelled", "complete", "queued"):
        assert status_from_record(_record(state=state, heartbeat=0), "/x").state == state


def test_status_of_stores_no_job_was_submitted_to(tmp_path, capsys):
    """Complete, stopped (incomplete, nobody writing it), written by a `gramdist run` (its
    lock), and no store at all: one line, exit 2."""
    from gramdist.engine.runner import run_job
    from gramdist.engine.store import GramStore, StoreLock
    from gramdist.jobs import load_job

    job = synthetic_job(tmp_path / "j.yaml", n_graphs=30)
    out = tmp_path / "plain.zarr"
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0", silence_logs=logging.ERROR) as lc, \
            Client(lc) as client:
        assert run_job(load_job(job), out=str(out), placement=Placement(client=client)).complete
    assert job_status(out).state == "complete"
    rc, text, _ = cli(capsys, "status", str(out))
    assert rc == 0 and "state:        complete" in text and "tiles:        3/3 (100.0 %)" in text, text
    with StoreLock(out):
        s = job_status(out)
        assert s.state == "running" and "written by `gramdist run`" in s.reason
        assert "only submitted jobs can be cancelled" in error_line(capsys, "cancel", str(out))
    GramStore.open(out, mode="r+").save_progress(np.zeros((2, 2), dtype=bool))
    s = job_status(out)
    assert s.state == "stopped" and s.tiles_done == 0 and "run or submit its job again" in s.reason
    assert "no such store, and no job submitted to it" in error_line(capsys, "status", str(tmp_path / "none.zarr"))


# ----------------------------------------------------------------------------- plain TCP warning
def test_plain_tcp_to_a_remote_address_warns_once(capsys, monkeypatch):
    import distributed

    from gramdist.engine.cluster import connect

    assert plain_tcp_warning("tcp://127.0.0.1:8786") is None
    assert plain_tcp_warning("tcp://localhost:8786") is None
    assert plain_tcp_warning("tcp://[::1]:8786") is None
    assert plain_tcp_warning("tls://10.1.2.3:8786") is None
    assert "plain TCP to tcp://10.1.2.3:8786" in plain_tcp_warning("tcp://10.1.2.3:8786")
    assert plain_tcp_warning("10.1.2.3:8786")  # no scheme means tcp

    def refused(*args, **kwargs):
        raise OSError("connection refused (test)")

    monkeypatch.setattr(distributed, "Client", refused)
    for _ in range(2):  # connect as `run` and `submit` do: the warning comes once
        with pytest.raises(gramdist.JobError, match="cannot connect"), connect({}, "tcp://10.9.8.7:8786"):
            pass
    warn_plain_tcp("tcp://10.9.8.7:8786")
    err = capsys.readouterr().err
    assert err.count("gramdist: warning: sending the job over plain TCP to tcp://10.9.8.7:8786") == 1, err
    with pytest.raises(gramdist.JobError), connect({}, "tcp://127.0.0.1:1", timeout="1s"):
        pass
    assert "warning" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- certificates
def test_certs_command_writes_a_ca_and_signed_certificates(tmp_path):
    pytest.importorskip("cryptography")
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    d = tmp_path / "certs"
    r = run_cli("certs", str(d))
    assert r.returncode == 0, r.stderr
    assert "--tls-dir" in r.stdout and "docker-compose.tls.yml" in r.stdout and "ca.key" not in r.stdout.split("kubectl")[1]
    names = {p.name for p in d.iterdir()}
    assert names == {f"{n}.{e}" for n in ("ca", "scheduler", "worker", "client") for e in ("pem", "key")}
    assert (d.stat().st_mode & 0o777) == 0o700
    assert all((d / f"{n}.key").stat().st_mode & 0o777 == 0o600 for n in ("ca", "scheduler", "worker", "client"))
    ca = x509.load_pem_x509_certificate((d / "ca.pem").read_bytes())
    for name in ("scheduler", "worker", "client"):
        cert = x509.load_pem_x509_certificate((d / f"{name}.pem").read_bytes())
        cert.verify_directly_issued_by(ca)  # raises unless the CA signed it
        assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    first_ca = (d / "ca.pem").read_bytes()
    first_client = (d / "client.pem").read_bytes()
    r = run_cli("certs", str(d), "--client", "alice")  # another user: same CA, nothing replaced
    assert r.returncode == 0, r.stderr
    assert (d / "ca.pem").read_bytes() == first_ca and (d / "client.pem").read_bytes() == first_client
    alice = x509.load_pem_x509_certificate((d / "alice.pem").read_bytes())
    alice.verify_directly_issued_by(ca)
    assert isinstance(alice.public_key(), ec.EllipticCurvePublicKey)
    assert "ca, scheduler, worker" in one_error_line(run_cli("certs", str(d), "--client", "worker"))


def test_certs_without_cryptography_says_which_extra(monkeypatch, tmp_path, capsys):
    import builtins

    real_import = builtins.__import__

    def no_crypto(name, *args, **kwargs):
        if name.startswith("cryptography"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_crypto)
    from gramdist.cli import main

    assert main(["certs", str(tmp_path / "c")]) == 2
    assert capsys.readouterr().err.strip() == ("gramdist: error: making certificates needs the cryptography "
                                               "package: pip install 'gramdist[tls]'")
