"""The command line as a user runs it: run, info, evaluate, errors, a real Dask cluster."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gramdist.engine.store import open_gram

ROOT = Path(__file__).resolve().parents[1]
GRAMDIST = [sys.executable, "-m", "gramdist.cli"]


def run_cli(*args, cwd=None, timeout=240, env=None):
    return subprocess.run([*GRAMDIST, *args], capture_output=True, text=True, cwd=cwd or ROOT,
                          timeout=timeout, env=env)


def test_synthetic_job_run_info_evaluate(tmp_path):
    out = tmp_path / "syn.zarr"
    r = run_cli("run", "jobs/synthetic-wl.yaml", "--out", str(out), "--set", "cluster.n_workers=2",
                "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["complete"] and summary["tiles_computed"] == summary["tiles_total"]
    assert "dashboard" in r.stderr
    info = run_cli("info", str(out), "--json")
    assert info.returncode == 0, info.stderr
    data = json.loads(info.stdout)
    assert data["complete"] and data["kernel"]["name"] == "wl"
    ev = run_cli("evaluate", str(out), "--folds", "3", "--repeats", "1", "--workers", "0", "--json", "--quiet")
    assert ev.returncode == 0, ev.stderr
    assert "fold" not in ev.stderr  # --quiet: no progress bar
    res = json.loads(ev.stdout)
    assert set(res) >= {"accuracy_mean", "accuracy_std", "folds", "repeats"} and res["folds"] == 3
    assert 0 <= res["accuracy_mean"] <= 100
    # --out keeps each fold: the same command again reads them all, and says so
    folds = tmp_path / "folds"
    first = run_cli("evaluate", str(out), "--folds", "3", "--repeats", "1", "--workers", "0", "--out", str(folds))
    assert first.returncode == 0, first.stderr
    assert len(list(folds.glob("fold-r00-f0*.json"))) == 3 and "read from" not in first.stdout
    assert "folds: 100%" in first.stderr and "3/3" in first.stderr  # the bar of the outer folds
    again = run_cli("evaluate", str(out), "--folds", "3", "--repeats", "1", "--workers", "0", "--out", str(folds))
    assert again.returncode == 0, again.stderr
    assert f"3 of 3 folds read from {folds}" in again.stdout
    assert again.stdout.splitlines()[0] == first.stdout.splitlines()[0]


def test_grid_run_and_evaluate_folder(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    out = tmp_path / "grid"
    r = run_cli("run", "jobs/mutag-wl.yaml", "--set", "kernel.h=1,3", "--out", str(out),
                "--set", "cluster.n_workers=1", "--quiet")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["h-1.zarr", "h-3.zarr"]
    ev = run_cli("evaluate", str(out), "--folds", "5", "--repeats", "1", "--workers", "0", "--json")
    assert ev.returncode == 0, ev.stderr
    res = json.loads(ev.stdout)
    assert len(res["stores"]) == 2
    assert {Path(s["store"]).name for s in res["selections"]} <= {"h-1.zarr", "h-3.zarr"}
    assert res["accuracy_mean"] > 75  # WL on MUTAG is well above the majority class (66.5 %)


@pytest.mark.parametrize("args, match", [
    (["run", "nope.yaml"], "job file not found"),
    (["run", "jobs/mutag-wl.yaml", "--set", "kernel.depth=3"], "unknown parameter 'depth'"),
    (["run", "jobs/mutag-wl.yaml", "--set", "dataset.name=NOPE_NOT_A_DATASET",
      "--set", "cluster.n_workers=1"], "NOPE_NOT_A_DATASET"),
    (["info", "/nonexistent/store.zarr"], "no such store"),
    (["run", "jobs/mutag-dm.yaml", "--set", "kernel.t=2.5"],
     "kernel dm: parameter t must be an integer >= 1, got 2.5"),
    (["run", "jobs/mutag-graphlet.yaml", "--set", "kernel.k=6"],
     "kernel graphlet: parameter k must be an integer in 3..5, got 6"),
    (["run", "jobs/mutag-matching.yaml", "--set", "kernel.gamma=.inf"],
     "kernel matching: parameter gamma must be null or a finite number > 0, got inf"),
])
def test_errors_are_one_line_and_exit_2(args, match, tmp_path):
    env = dict(os.environ, GRAMDIST_TU_URL="http://127.0.0.1:9/{name}.zip", GRAMDIST_CACHE=str(tmp_path))
    r = run_cli(*args, env=env)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gramdist: error:") and match in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def dask_cluster(tmp_path):
    """A real cluster: `dask scheduler` and two `dask worker` processes on 127.0.0.1."""
    port = _free_port()
    addr = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--dashboard-address", ":0"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)]
    for _ in range(2):
        procs.append(subprocess.Popen([dask, "worker", addr, "--nthreads", "1", "--nworkers", "1",
                                       "--memory-limit", "2GB", "--no-dashboard"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      start_new_session=True, cwd=tmp_path))
    try:
        from distributed import Client

        deadline = time.time() + 60
        while True:
            try:
                with Client(addr, timeout="5s") as c:
                    c.wait_for_workers(2, timeout=30)
                break
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        yield addr
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def test_job_on_existing_cluster_via_scheduler_flag(dask_cluster, tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    out = tmp_path / "remote.zarr"
    r = run_cli("run", "jobs/mutag-wl.yaml", "--scheduler", dask_cluster, "--out", str(out),
                "--set", "gram.tile_size=40", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "2 workers" in r.stderr
    k, y = open_gram(out)
    import yaml

    from gramdist.kernels.features.wl import WLSubtreeKernel
    from gramdist.kernels.sparse import dot

    h = yaml.safe_load((ROOT / "jobs" / "mutag-wl.yaml").read_text())["kernel"]["h"]
    f = WLSubtreeKernel(h).features(mutag)
    expected = dot(f, f)
    if yaml.safe_load((ROOT / "jobs" / "mutag-wl.yaml").read_text()).get("gram", {}).get("normalize"):
        d = np.sqrt(np.diag(expected))
        expected = expected / d[:, None] / d[None, :]
    np.testing.assert_allclose(k, expected, rtol=1e-15)
    assert np.array_equal(y, mutag.y)


def test_a_task_whose_workers_all_died_is_one_line(monkeypatch, capsys, tmp_path):
    """Dask's KilledWorker (a task that killed every worker it ran on, e.g. a fit past the
    workers' memory) is one line naming the task and what to change, exit 2, no traceback."""
    from distributed.scheduler import KilledWorker

    from gramdist import cli
    from gramdist.engine import runner

    def dies(*args, **kwargs):
        raise KilledWorker("fit-66ee07af", "tcp://127.0.0.1:1", 3)

    monkeypatch.setattr(runner, "run_grid", dies)
    job = tmp_path / "j.yaml"
    job.write_text("dataset: {name: MUTAG}\nkernel: {name: wl}\n")
    assert cli.main(["run", str(job), "--out", str(tmp_path / "s.zarr"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gramdist: error: every Dask worker that ran task 'fit-66ee07af' (fit)")
    assert "fit.sample_size" in err[0] and "Traceback" not in err[0]
