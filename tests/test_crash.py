"""The crash harness (issue #29): a run, an append (its commit included), a repair and a combine
are SIGKILLed at random moments, then resumed (or the append aborted); every time the store must
verify clean and end bitwise equal to an uninterrupted run (or, after an abort, to the untouched
original). CI kills each operation at a few points; ``pytest -m slow`` at 50 or more each."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gramdist.engine.store import open_gram, verify

HERE = Path(__file__).parent
ROOT = HERE.parent
N_CI, N_SLOW = 4, 50
SYNTH = {"n_graphs": 72, "n_nodes": [6, 14], "avg_degree": 2.5, "n_labels": 4, "attr_dim": 0, "seed": 11}


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(*args), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _argv(*args: str) -> list[str]:
    code = (f"import sys; sys.path.insert(0, {str(HERE)!r}); import crashhooks; "
            "from gramdist.cli import main; sys.exit(main())")
    return [sys.executable, "-c", code, *args]


def killed_at(delay: float, *args: str) -> None:
    """Start the command, SIGKILL it (its whole session) after ``delay`` seconds."""
    proc = subprocess.Popen(_argv(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def write_job(folder: Path, limit: int | None = None, h: int = 2) -> Path:
    path = folder / f"job-{limit}-{h}.yaml"
    ds = {"synthetic": SYNTH, **({"limit": limit} if limit else {})}
    path.write_text(f"dataset: {json.dumps(ds)}\nkernel: {{name: wl, h: {h}}}\n"
                    "gram: {tile_size: 6, normalize: true, checkpoint_seconds: 0.05}\ncluster: {n_workers: 0}\n")
    return path


def timed(*args: str) -> float:
    t = time.perf_counter()
    r = cli(*args)
    assert r.returncode == 0, r.stderr[-2000:]
    return time.perf_counter() - t


def same(a: Path, b: Path) -> None:
    assert verify(a)["problems"] == [], verify(a)["message"]
    (ka, ya), (kb, yb) = open_gram(a), open_gram(b)
    assert np.array_equal(ka, kb) and np.array_equal(ya, yb)


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    folder = tmp_path_factory.mktemp("crash")
    jobs = {"full": write_job(folder), "part": write_job(folder, limit=50), "h1": write_job(folder, h=1)}
    stores = {}
    for name, job in jobs.items():
        stores[name] = folder / f"{name}.zarr"
        assert cli("run", str(job), "--out", str(stores[name]), "--quiet").returncode == 0
    stores["combined"] = folder / "combined.zarr"
    assert cli("combine", str(stores["full"]), str(stores["h1"]), "--weights", "0.5,0.5",
               "--out", str(stores["combined"])).returncode == 0
    return folder, jobs, stores


def points(n: int, duration: float, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    return sorted(rng.uniform(0.3, 0.3 + duration, size=n).tolist())  # 0.3 s: the interpreter's start


def _harness(n: int, bases, tmp_path):
    folder, jobs, stores = bases
    outcomes = {"run": 0, "append": 0, "append --abort": 0, "repair": 0, "combine": 0}
    new = json.dumps({"synthetic": SYNTH, "skip": 50})

    # a run, killed and resumed
    t_run = timed("run", str(jobs["full"]), "--out", str(tmp_path / "t.zarr"), "--quiet")
    for k, at in enumerate(points(n, t_run, 1)):
        out = tmp_path / f"run{k}.zarr"
        killed_at(at, "run", str(jobs["full"]), "--out", str(out), "--quiet")
        assert cli("run", str(jobs["full"]), "--out", str(out), "--quiet").returncode == 0
        same(out, stores["full"])
        outcomes["run"] += 1
        shutil.rmtree(out)

    # an append, killed (its commit included), then finished or aborted
    shutil.copytree(stores["part"], tmp_path / "a.zarr")
    t_app = timed("append", str(tmp_path / "a.zarr"), new, "--quiet")
    for k, at in enumerate(points(n, t_app, 2)):
        out = tmp_path / f"app{k}.zarr"
        shutil.copytree(stores["part"], out)
        killed_at(at, "append", str(out), new, "--quiet")
        if k % 3 == 2:  # abort: back to the original, or forward when the commit had begun
            r = cli("append", str(out), "--abort", "--quiet")
            assert r.returncode == 0, r.stderr[-2000:]
            rolled = "cannot undo a commit" in r.stderr or open_gram(out)[0].shape[0] == 72
            same(out, stores["full"] if rolled else stores["part"])
            outcomes["append --abort"] += 1
        else:
            r = cli("append", str(out), new, "--quiet")
            assert r.returncode == 0, r.stderr[-2000:]
            same(out, stores["full"])
            outcomes["append"] += 1
        shutil.rmtree(out)

    # a repair of damaged tiles, killed, then repaired again and recomputed
    def damaged(out: Path) -> None:
        shutil.copytree(stores["full"], out)
        for chunk in ("0/3", "2/5", "4/4"):
            (out / "gram" / "c" / chunk).write_bytes(b"garbage")

    damaged(tmp_path / "r.zarr")
    t = time.perf_counter()
    cli("verify", "--repair", str(tmp_path / "r.zarr"))  # exits 1: it reports what it found
    t_rep = time.perf_counter() - t
    for k, at in enumerate(points(n, t_rep, 3)):
        out = tmp_path / f"rep{k}.zarr"
        damaged(out)
        killed_at(at, "verify", "--repair", str(out))
        cli("verify", "--repair", str(out))
        assert cli("run", str(jobs["full"]), "--out", str(out), "--quiet").returncode == 0
        same(out, stores["full"])
        outcomes["repair"] += 1
        shutil.rmtree(out)

    # a combine, killed, then run again (it replaces its own partial output)
    t_comb = timed("combine", str(stores["full"]), str(stores["h1"]), "--weights", "0.5,0.5",
                   "--out", str(tmp_path / "c.zarr"))
    for k, at in enumerate(points(n, t_comb, 4)):
        out = tmp_path / f"comb{k}.zarr"
        killed_at(at, "combine", str(stores["full"]), str(stores["h1"]), "--weights", "0.5,0.5", "--out", str(out))
        r = cli("combine", str(stores["full"]), str(stores["h1"]), "--weights", "0.5,0.5", "--out", str(out),
                "--overwrite")
        assert r.returncode == 0, r.stderr[-2000:]
        same(out, stores["combined"])
        outcomes["combine"] += 1
        shutil.rmtree(out)
    return outcomes


def test_killed_at_random_points_everything_resumes_bitwise(bases, tmp_path):
    outcomes = _harness(N_CI, bases, tmp_path)
    assert outcomes["run"] == N_CI and outcomes["repair"] == N_CI and outcomes["combine"] == N_CI


@pytest.mark.slow
def test_killed_at_fifty_points_each(bases, tmp_path):
    outcomes = _harness(N_SLOW, bases, tmp_path)
    (ROOT / "benchmarks" / "results").mkdir(exist_ok=True)
    (ROOT / "benchmarks" / "results" / "crash_harness.json").write_text(json.dumps(outcomes, indent=1))
    assert sum(outcomes.values()) >= 4 * N_SLOW
