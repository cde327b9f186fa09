"""Shared benchmark plumbing: run a command, sample the peak memory of its process tree.

Peak memory is sampled every 20 ms with psutil over the process and all its descendants
(Dask worker processes included): ``peak_total_mb`` is the largest sum over the tree seen at
one instant, ``peak_process_mb`` the largest single process.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def run_measured(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> dict:
    """Run ``cmd``; return wall seconds, peak memory of its tree, stdout, stderr, returncode."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env or os.environ.copy(), cwd=cwd or ROOT)
    peak = {"total": 0, "single": 0}
    stop = threading.Event()

    def sample() -> None:
        # Listing a process tree scans all of /proc (about 3 ms of CPU here): refreshed every
        # 0.25 s, not at every 20 ms sample, so the observer does not take a tenth of a core
        # from a tool that uses them all (the workers it tracks live for the whole run).
        root = psutil.Process(proc.pid)
        procs: list = [root]
        listed = 0.0
        while not stop.is_set():
            try:
                if time.monotonic() - listed > 0.25:
                    procs = [root, *root.children(recursive=True)]
                    listed = time.monotonic()
                rss = []
                for p in procs:
                    try:
                        rss.append(p.memory_info().rss)
                    except psutil.Error:
                        pass
                peak["total"] = max(peak["total"], sum(rss))
                peak["single"] = max(peak["single"], max(rss, default=0))
            except psutil.Error:
                pass
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    return {"wall_s": wall, "peak_total_mb": peak["total"] / 2**20, "peak_process_mb": peak["single"] / 2**20,
            "stdout": out, "stderr": err, "returncode": proc.returncode}


def gramdist_cmd(*args: str) -> list[str]:
    """``gramdist ARGS`` in a fresh interpreter, reading the package's bytecode as an installed
    package does (see :func:`compile_package`)."""
    compile_package()
    return [sys.executable, "-m", "gramdist.cli", *args]


def compile_package() -> None:
    """Write the bytecode of ``gramdist/`` once per benchmark process. A pip install writes it, and
    an editable one on its first import, unless ``PYTHONDONTWRITEBYTECODE`` is set (as on the
    development machine): then every timed run compiled ~55 modules from source, 0.13 s that
    no user pays (measured 2026-11-28 with cProfile: ``builtins.compile`` from importlib)."""
    global _COMPILED
    if not _COMPILED:
        import compileall

        compileall.compile_dir(ROOT / "gramdist", quiet=1)
        _COMPILED = True


_COMPILED = False


def top_k_overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean |A ∩ B| / K over the rows of two (Q, K) arrays of top-K ids."""
    return float(np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(a, b)]))


#: the tile sizes of the datasets' own job files (``jobs/nci1-*.yaml``, ``jobs/dd-*.yaml``), for
#: benches that run a MUTAG job on another dataset: MUTAG's tiles of 64 would make NCI1 2,145 tiles
DATASET_TILES = {"NCI1": 1028, "DD": 256}


def tile_set(dataset: str) -> list[str]:
    """``--set`` of the dataset's own tile size, if it has a job of its own."""
    return [f"gram.tile_size={DATASET_TILES[dataset]}"] if dataset in DATASET_TILES else []


def this_command() -> str:
    """The command line that runs this benchmark, as its results record it."""
    return " ".join(["python", f"benchmarks/{Path(sys.argv[0]).name}", *sys.argv[1:]])


def save(name: str, payload: dict) -> Path:
    """``benchmarks/results/<name><$GRAMDIST_BENCH_SUFFIX>.json``: the suffix keeps a partial
    rerun (another dataset, one variant) from replacing the file that BENCHMARKS.md cites."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}{os.environ.get('GRAMDIST_BENCH_SUFFIX', '')}.json"
    path.write_text(json.dumps(payload, indent=2))
    return path


def save_rows(name: str, rows: list[dict], n_cases: int) -> Path:
    """:func:`save` of a table measured row by row, called after every row so that a run cut
    short (GraKeL's timeouts take minutes a case) keeps what it measured: ``complete`` is false
    until the last of ``n_cases`` rows is in."""
    return save(name, {"command": this_command(), "complete": len(rows) == n_cases, "results": rows})


def last_json_line(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError(f"no JSON line in output:\n{text[-2000:]}")


def median_of_runs(runs: list[dict]) -> dict:
    """One tool's figures from repeated runs: the median of each time (each ``*_s`` number; every
    run's kept in ``<key>_runs``), the largest peak memory, the rest from the last run."""
    out = dict(runs[-1])
    for key in [k for k, v in runs[-1].items() if k.endswith("_s") and isinstance(v, float)]:
        if len(runs) > 1 and all(isinstance(r.get(key), float) for r in runs):
            out[key] = float(np.median([r[key] for r in runs]))
            out[key + "_runs"] = [round(r[key], 3) for r in runs]
    for key in ("peak_total_mb", "peak_process_mb"):
        if all(key in r for r in runs):
            out[key] = max(r[key] for r in runs)
    return out


def kernel_seconds(timings: dict) -> float:
    """A ``gramdist run``'s kernel phase from its JSON timings: fit + embed + tiles, or, where a
    kernel embeds during its fit (``embeds_without_state``: the phases overlap), the run's wall
    time less reading, the cluster start and the finish, whichever is smaller."""
    phases = timings.get("fit_s", 0) + timings["embed_s"] + timings["tiles_s"]
    if "total_s" not in timings:
        return phases
    span = timings["total_s"] - timings.get("read_s", 0) - timings.get("cluster_s", 0) - timings.get("finish_s", 0)
    return min(phases, span)


def grakel_labelled_graphs(batch) -> list:
    """GraKeL ``Graph`` objects of a :class:`~gramdist.graphs.GraphBatch`: the same graphs (isolated
    nodes included, a self-loop once) with the same integer node labels, as WL compares them."""
    from grakel import Graph

    graphs = []
    for x in batch:
        adj = {v: [] for v in range(x.n_nodes)}  # isolated nodes still count
        for u, v in x.edges.tolist():
            adj[u].append(v)
            if u != v:
                adj[v].append(u)
        labels = {v: int(lab) for v, lab in enumerate(x.node_labels)}
        graphs.append(Graph(adj, node_labels=labels, graph_format="dictionary"))
    return graphs


def wait_for_workers(addr: str, n: int, seconds: float = 120.0) -> None:
    """Return once the scheduler at ``addr`` has ``n`` workers (it may not listen yet)."""
    from distributed import Client

    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with Client(addr, timeout="5s") as client:
                client.wait_for_workers(n, timeout=max(1.0, deadline - time.time()))
            return
        except (OSError, TimeoutError):
            time.sleep(0.5)
    raise TimeoutError(f"{addr}: no {n} workers after {seconds:.0f} s")


@contextlib.contextmanager
def local_scheduler(n_workers: int, cwd: Path, memory_limit: str = "3GB"):
    """A `dask scheduler` and ``n_workers`` `dask worker` processes (one thread each) on
    127.0.0.1, as a user starts them; yields the scheduler's address, stops them after."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    addr = f"tcp://127.0.0.1:{port}"
    dask = str(Path(sys.executable).parent / "dask")
    commands = [[dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"]]
    commands += n_workers * [[dask, "worker", addr, "--nthreads", "1", "--memory-limit", memory_limit,
                              "--no-dashboard"]]
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd) for c in commands]
    try:
        wait_for_workers(addr, n_workers)
        yield addr
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
