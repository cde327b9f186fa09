"""Worker processes forked by the ``gramdist`` executable (``gramdist.engine.processes``).

Every fork happens in a subprocess: this test process has threads of its own (Dask, Zarr), and
forking it is exactly what the module refuses to do.
"""

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from gramdist.engine import processes
from gramdist.engine.store import recorded_kernel_name

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the executable forks on Linux only")

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env={**os.environ, **(env or {})})


def test_a_library_never_forks(monkeypatch):
    monkeypatch.setattr(processes, "_FORK_ALLOWED", False)
    assert not processes.fork_possible(2)
    with processes.forked_workers(2) as workers:
        assert workers is None


def test_fork_needs_two_workers_one_thread_and_no_opt_out(monkeypatch):
    monkeypatch.setattr(processes, "_FORK_ALLOWED", True)
    monkeypatch.setattr(processes.threading, "active_count", lambda: 1)
    monkeypatch.delenv("GRAMDIST_FORK", raising=False)
    assert processes.fork_possible(2)
    assert not processes.fork_possible(1)
    monkeypatch.setenv("GRAMDIST_FORK", "0")
    assert not processes.fork_possible(2)
    monkeypatch.delenv("GRAMDIST_FORK")
    monkeypatch.setattr(processes.threading, "active_count", lambda: 3)
    assert not processes.fork_possible(2)  # a thread could hold a lock at the fork


def test_tasks_run_in_the_workers_and_a_dead_worker_falls_back_to_threads():
    r = run_python("""
        import os
        from gramdist.engine import processes
        from gramdist.engine.executor import InlineExecutor

        PARENT = os.getpid()

        def where(x):
            return x * 2, os.getpid()

        def double(x):
            return x * 2

        def die_unless_parent(x):
            if os.getpid() != PARENT:
                os._exit(1)  # a worker killed (for memory, say) while it runs the task
            return x + 1, os.getpid()

        processes.allow_fork()
        with processes.forked_workers(2) as workers:
            assert workers is not None
            ex = InlineExecutor(2, workers=workers)
            first = ex.submit(where, 21, key="a", processes=True)
            value, pid = first.result()
            assert value == 42 and pid != PARENT, (value, pid)
            # an input still running in the pool is awaited, then its value shipped
            chained = ex.submit(double, ex.submit(double, 1, key="b", processes=True), key="c", processes=True)
            assert chained.result() == 4
            dead = ex.submit(die_unless_parent, 1, key="d", processes=True)
            assert dead.result() == (2, PARENT), dead.result()
            # the pool is broken now: later tasks run in the threads at once
            assert ex.submit(where, 5, key="e", processes=True).result() == (10, PARENT)
            ex.close()
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_workers_die_with_the_command():
    # the parent exits without closing them (os._exit skips every cleanup): PR_SET_PDEATHSIG
    r = run_python("""
        import os, sys
        from gramdist.engine import processes

        processes.allow_fork()
        workers = processes.ForkedWorkers(2)
        pids = [p.pid for p in workers._pool._processes.values()]
        print(" ".join(map(str, pids)), flush=True)
        os._exit(0)
    """)
    assert r.returncode == 0, r.stderr
    pids = [int(p) for p in r.stdout.split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in pids if Path(f"/proc/{p}").exists() and "Z" not in _state(p)]
        time.sleep(0.05)
    assert not alive, f"workers {alive} outlived their parent"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0]
    except (OSError, IndexError):
        return "Z"


def _run_svm_theta(out: Path, fork: str) -> subprocess.CompletedProcess:
    # the executable's path (entry_point), with the node threshold lowered so that the built-in
    # MUTAG qualifies; two threads whatever the machine's cores
    return run_python(f"""
        import sys
        import gramdist.engine.placement as placement
        from gramdist.cli import entry_point

        placement.FORKED_MIN_NODES = 0
        sys.argv = ["gramdist", "run", "jobs/mutag-svm_theta.yaml", "--set", "kernel.base_kernel=linear",
                    "--set", "gram.tile_size=50", "--out", {str(out)!r}, "--json"]
        entry_point()
    """, env={"GRAMDIST_FORK": fork, "GRAMDIST_THREADS": "2"}, timeout=300)


def test_run_with_forked_workers_writes_the_same_store(tmp_path):
    forked, threads = _run_svm_theta(tmp_path / "f.zarr", "1"), _run_svm_theta(tmp_path / "t.zarr", "0")
    for r in (forked, threads):
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.splitlines()[-1])["complete"]
    assert "embeddings in 2 forked processes" in forked.stderr
    assert "forked processes" not in threads.stderr
    a, b = zarr.open_group(tmp_path / "f.zarr", mode="r"), zarr.open_group(tmp_path / "t.zarr", mode="r")
    for name in ("gram", "diag", "tile_checksums"):
        assert np.array_equal(np.asarray(a[name][...]), np.asarray(b[name][...])), name


def _gramdist(fork: str, *argv: str) -> subprocess.CompletedProcess:
    # any command through the executable's path, the node threshold lowered (built-in MUTAG)
    return run_python(f"""
        import os
        import sys
        import gramdist.engine.placement as placement
        from gramdist.cli import entry_point

        placement.FORKED_MIN_NODES = 0
        print(f"command pid {{os.getpid()}}", file=sys.stderr, flush=True)
        sys.argv = ["gramdist", *{list(argv)!r}]
        entry_point()
    """, env={"GRAMDIST_FORK": fork, "GRAMDIST_THREADS": "2"}, timeout=300)


def _features_svm_theta(out: Path, fork: str, *extra: str) -> subprocess.CompletedProcess:
    return _gramdist(fork, "features", "jobs/mutag-svm_theta.yaml", "--set", "kernel.base_kernel=linear",
                     "--chunk-size", "50", "--out", str(out), "--json", *extra)


def _arrays(group, prefix=""):
    for name, member in group.members():
        if isinstance(member, zarr.Group):
            yield from _arrays(member, f"{prefix}{name}/")
        else:
            yield f"{prefix}{name}", np.asarray(member[...])


@pytest.mark.parametrize("extra", [(), ("--nystroem", "20")], ids=["explicit", "nystroem"])
def test_features_with_forked_workers_write_the_same_store(tmp_path, extra):
    # the workers embed, a thread of the command takes the rows and writes them
    forked = _features_svm_theta(tmp_path / "f.zarr", "1", *extra)
    threads = _features_svm_theta(tmp_path / "t.zarr", "0", *extra)
    for r in (forked, threads):
        assert r.returncode == 0, r.stderr
        summary = json.loads(r.stdout.splitlines()[-1])
        assert summary["complete"] and summary["chunks_computed"] == 4
    assert "embeddings in 2 forked processes" in forked.stderr
    assert "forked processes" not in threads.stderr
    # the summary's workers are the processes that embedded: the forked ones, or the command
    for r, by_command in ((forked, False), (threads, True)):
        command = r.stderr.split("command pid ")[1].split()[0]
        pids = {w.rsplit(":", 1)[1] for w in json.loads(r.stdout.splitlines()[-1])["workers"]}
        assert (pids == {command}) == by_command, (pids, command)
    a = dict(_arrays(zarr.open_group(tmp_path / "f.zarr", mode="r")))
    b = dict(_arrays(zarr.open_group(tmp_path / "t.zarr", mode="r")))
    assert a.keys() == b.keys() and ("features" in a) == bool(extra)
    for name in a:
        assert np.array_equal(a[name], b[name]), name


def test_append_with_forked_workers_equals_a_run_over_all_graphs(tmp_path):
    job = ["jobs/mutag-svm_theta.yaml", "--set", "kernel.base_kernel=linear", "--set", "gram.tile_size=50"]
    stores = {}
    for fork in ("1", "0"):
        store = str(tmp_path / f"a{fork}.zarr")
        first = _gramdist(fork, "run", *job, "--set", "dataset.limit=120", "--out", store, "--quiet")
        assert first.returncode == 0, first.stderr
        added = _gramdist(fork, "append", store, "{name: MUTAG, skip: 120}", "--quiet", "--json")
        assert added.returncode == 0, added.stderr
        assert json.loads(added.stdout.splitlines()[-1])["added"] == 68
        assert ("forked processes" in added.stderr) == (fork == "1"), added.stderr
        stores[fork] = zarr.open_group(store, mode="r")
    # what the command reads to decide on forking, before any thread (no Zarr, no fsspec)
    assert recorded_kernel_name(str(tmp_path / "a1.zarr")) == "svm_theta"
    assert recorded_kernel_name(tmp_path / "missing.zarr") is None
    assert recorded_kernel_name("s3://bucket/store.zarr") is None
    full = _gramdist("0", "run", *job, "--out", str(tmp_path / "full.zarr"), "--quiet")
    assert full.returncode == 0, full.stderr
    stores["full"] = zarr.open_group(tmp_path / "full.zarr", mode="r")
    for name in ("gram", "diag", "tile_checksums"):
        want = np.asarray(stores["full"][name][...])
        assert np.array_equal(np.asarray(stores["1"][name][...]), want), name
        assert np.array_equal(np.asarray(stores["0"][name][...]), want), name


def test_the_command_forks_only_for_kernels_that_ask_and_runs_here(tmp_path):
    from gramdist.cli.common import embedding_processes, job_kernel_names
    from gramdist.engine.placement import Placement
    from gramdist.jobs import load_job

    svm = load_job(ROOT / "jobs/mutag-svm_theta.yaml", [])
    wl = load_job(ROOT / "jobs/mutag-wl.yaml", [])
    here = Placement()
    assert embedding_processes(job_kernel_names(svm), here) >= 1
    assert embedding_processes(job_kernel_names(wl), here) == 0
    assert embedding_processes(job_kernel_names(svm), here.with_workers(2)) == 0  # a LocalCluster's workers embed
    assert embedding_processes(job_kernel_names(svm), Placement(scheduler="tcp://127.0.0.1:8786")) == 0
    assert embedding_processes(job_kernel_names(svm), Placement(in_process=False)) == 0
    grid = load_job(ROOT / "jobs/mutag-wl.yaml", ["kernel.name=wl,svm_theta"])
    assert embedding_processes(job_kernel_names(grid), here) >= 1
