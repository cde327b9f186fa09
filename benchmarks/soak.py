"""Soak run: a full N x N WL Gram into Zarr on a 2-worker LocalCluster, then an append of 1 %.

    nice -n 10 python benchmarks/soak.py [--n-graphs 20000] [--tile 512] [--dtype float64]
        [--append-fraction 0.01] [--dd-mb 2048] [--workdir /tmp] [--name soak]
    nice -n 10 python benchmarks/soak.py --n-graphs 50000 --dtype float32 --name soak-50k-float32
    nice -n 10 python benchmarks/soak.py --n-graphs 100000 --dtype float32 --name soak-100k-float32

Runs ``gramdist run`` on the synthetic generator (``dataset.synthetic``: graphs of 10-30 nodes,
average degree 3, 10 node labels; WL h = 3, cosine-normalised) with ``cluster.n_workers = 2``,
while sampling every 0.2 s the RSS of every process of the run's tree (the client, the
nannies, the two workers). The generator makes ``N (1 + f)`` graphs; the store holds the first
``N`` (``dataset.limit``) and ``gramdist append`` then adds the last ``f N``
(``--append-fraction f``, 0 for none), sampled the same way. Before the run, ``dd`` writes
``--dd-mb`` MiB of zeros to the work folder with ``conv=fdatasync``: the disk's sequential write
rate, measured in the same run, beside the store's (raw Gram bytes and bytes on disk per second
of the tile phase). The run stops at once, saying so, when the work folder's free space is
below the raw Gram's size (N² × 4 or 8 bytes; LZ4 rarely saves more than a few percent on a
normalised Gram); ``--force`` runs anyway. Then it checks:

* the run completes (store complete, every tile in the done-mask);
* the peak RSS of every single process stays under ``--max-process-mb`` (2,000 MB);
* ``--sample`` (10,000) entries drawn uniformly at random (seed 0), recomputed directly from
  the graphs in this process (WL features of the two graphs, their dot product, cosine
  normalisation with the graphs' own self-similarities, rounded to the store's dtype), equal
  the stored ones bit for bit — after the run, and again over the grown store after the append.

It reports wall time, tiles per second (tile phase, from the run's own timings), raw and
on-disk MB/s beside dd's rate, peak memory per process and of the whole tree, the store's
size on disk, and the append's wall time and phases; writes ``benchmarks/results/<name>.json``;
and deletes the store (~3 GB for 20,000 float64 graphs, ~10 GB for 50,000 float32) unless
``--keep``. Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, gramdist_cmd, last_json_line, save  # noqa: E402


def generator(n_total: int) -> dict:
    return {"synthetic": {"n_graphs": n_total, "n_nodes": [10, 30], "avg_degree": 3.0, "n_labels": 10,
                          "attr_dim": 0, "seed": 0}}


def job_text(n_graphs: int, tile: int, h: int, dtype: str = "float64", n_total: int | None = None,
             keep: bool = False) -> str:
    spec = generator(n_total or n_graphs)
    if n_total and n_total > n_graphs:
        spec["limit"] = n_graphs
    return (
        f"# soak: {n_graphs} synthetic graphs, full WL Gram\n"
        f"dataset: {json.dumps(spec)}\n"
        f"kernel: {{name: wl, h: {h}}}\n"
        f"gram: {{tile_size: {tile}, normalize: true, dtype: {dtype}, keep_embeddings: {str(keep).lower()}}}\n"
        f"cluster: {{n_workers: 2, threads_per_worker: 1}}\n"
    )


def disk_rate(folder: Path, megabytes: int) -> dict:
    """The disk's sequential write rate: ``dd`` of zeros with ``conv=fdatasync`` (the data is
    on the disk when dd ends), timed here."""
    target = folder / "dd.bin"
    t0 = time.perf_counter()
    r = subprocess.run(["dd", "if=/dev/zero", f"of={target}", "bs=1M", f"count={megabytes}", "conv=fdatasync"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    target.unlink(missing_ok=True)
    return {"megabytes": megabytes, "seconds": round(wall, 2), "mb_per_s": round(megabytes * 2**20 / 1e6 / wall, 1),
            "dd_says": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "", "returncode": r.returncode}


def run_sampled(cmd: list[str], interval: float = 0.2) -> dict:
    """Run ``cmd``; peak RSS of each process of its tree (by pid) and of the tree at once."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    peaks: dict[int, dict] = {}
    tree_peak = [0]
    stop = threading.Event()

    def sample() -> None:
        root = psutil.Process(proc.pid)
        while not stop.is_set():
            try:
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            total = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    if p.pid not in peaks:
                        cmdline = " ".join(p.cmdline())
                        kind = ("client" if p.pid == proc.pid else
                                "resource-tracker" if "resource_tracker" in cmdline else
                                "worker" if "spawn_main" in cmdline else "other")
                        peaks[p.pid] = {"kind": kind, "peak_mb": 0.0, "cmd": cmdline[:120]}
                    peaks[p.pid]["peak_mb"] = max(peaks[p.pid]["peak_mb"], rss / 2**20)
                    total += rss
                except psutil.Error:
                    pass
            tree_peak[0] = max(tree_peak[0], total)
            time.sleep(interval)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    stop.set()
    th.join()
    return {"wall_s": wall, "returncode": proc.returncode, "stdout": out, "stderr": err,
            "processes": sorted(peaks.values(), key=lambda p: -p["peak_mb"]),
            "peak_tree_mb": tree_peak[0] / 2**20}


def check_sample(job_path: Path, store: Path, n_sample: int, seed: int = 0, dataset: dict | None = None) -> dict:
    """Recompute ``n_sample`` random entries directly and compare them with the store
    (``dataset``: the store's graphs when they are not the job's, e.g. after an append)."""
    import zarr

    from gramdist.arrayops import normalize_block
    from gramdist.datasets import load_dataset
    from gramdist.engine.store import read_state
    from gramdist.jobs import load_job
    from gramdist.kernels import make_kernel

    t0 = time.perf_counter()
    job = load_job(job_path)
    spec = dict(job.kernel)
    kernel = make_kernel(spec.pop("name"), **spec)
    graphs = load_dataset(dataset or job.dataset)
    state = read_state(store)
    n = len(graphs)
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, n_sample)
    cols = rng.integers(0, n, n_sample)
    gram = zarr.open_array(str(store / "gram"), mode="r")
    stored = np.asarray(gram.vindex[rows, cols])
    # The engine stores K(a, b) for a <= b and mirrors it; recompute the same way.
    lo, hi = np.minimum(rows, cols), np.maximum(rows, cols)
    need = np.unique(np.concatenate([lo, hi]))
    emb = kernel.embed(graphs.take(need), state)
    where = {int(g): k for k, g in enumerate(need)}
    diag = np.asarray(kernel.self_similarity(emb, state), dtype=np.float64)
    direct = np.empty(n_sample)
    for s in range(n_sample):
        a, b = where[int(lo[s])], where[int(hi[s])]
        raw = np.asarray(kernel.pairwise(emb[a:a + 1], emb[b:b + 1], state), dtype=np.float64)
        direct[s] = normalize_block(raw, diag[a:a + 1], diag[b:b + 1])[0, 0]
    direct = direct.astype(stored.dtype).astype(np.float64)  # a float32 store holds the rounded value
    stored = stored.astype(np.float64)
    diff = np.abs(direct - stored)
    return {"n": int(n_sample), "bitwise_equal": int((direct == stored).sum()),
            "max_abs_diff": float(diff.max()), "seconds": time.perf_counter() - t0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-graphs", type=int, default=20_000)
    ap.add_argument("--tile", type=int, default=512)
    ap.add_argument("--h", type=int, default=3)
    ap.add_argument("--sample", type=int, default=10_000)
    ap.add_argument("--max-process-mb", type=float, default=2000.0)
    ap.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    ap.add_argument("--append-fraction", type=float, default=0.01, help="then append this fraction (0: none)")
    ap.add_argument("--dd-mb", type=int, default=2048, help="MiB dd writes to measure the disk (0: skip)")
    ap.add_argument("--force", action="store_true", help="run even if the raw Gram exceeds the free space")
    ap.add_argument("--keep-embeddings", action=argparse.BooleanOptionalAction, default=True,
                    help="gram.keep_embeddings: the store keeps its chunks' embeddings, which the append reads")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the store")
    ap.add_argument("--name", default="soak", help="results/<name>.json")
    args = ap.parse_args()

    n = args.n_graphs
    n_total = n + int(round(n * args.append_fraction))
    itemsize = 4 if args.dtype == "float32" else 8
    raw_gb = n_total**2 * itemsize / 1e9
    free_gb = shutil.disk_usage(args.workdir).free / 1e9
    if raw_gb > free_gb and not args.force:
        print(f"soak: does not fit: {n_total} graphs in {args.dtype} are {raw_gb:.1f} GB raw, {args.workdir} has "
              f"{free_gb:.1f} GB free (--force to try anyway)", file=sys.stderr)
        return 2
    load_start = [round(x, 2) for x in os.getloadavg()]
    work = Path(tempfile.mkdtemp(prefix="gramdist-soak-", dir=args.workdir))
    job_path = work / "soak.yaml"
    job_path.write_text(job_text(n, args.tile, args.h, args.dtype, n_total, args.keep_embeddings))
    store = work / "soak.zarr"
    grown_sample = app = None
    try:
        dd = disk_rate(work, args.dd_mb) if args.dd_mb else None
        run = run_sampled(gramdist_cmd("run", str(job_path), "--out", str(store), "--quiet", "--json"))
        if run["returncode"] != 0:
            print(run["stderr"][-5000:], file=sys.stderr)
            return 1
        summary = last_json_line(run["stdout"])
        size_mb = sum(f.stat().st_size for f in store.rglob("*") if f.is_file()) / 2**20
        sample = check_sample(job_path, store, args.sample)
        info = json.loads(subprocess.run(gramdist_cmd("info", str(store), "--json"), capture_output=True,
                                         text=True, cwd=ROOT, check=True).stdout)
        if n_total > n:
            data = json.dumps({**generator(n_total), "skip": n})
            app = run_sampled(gramdist_cmd("append", str(store), data, "--workers", "2", "--quiet", "--json"))
            if app["returncode"] != 0:
                print(app["stderr"][-5000:], file=sys.stderr)
                return 1
            grown_sample = check_sample(job_path, store, args.sample, dataset=generator(n_total))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    t = summary["timings"]
    biggest = max(p["peak_mb"] for p in run["processes"])
    raw_mb = n**2 * itemsize / 1e6
    result = {
        "n_graphs": n, "entries": n**2, "dtype": args.dtype, "tile": args.tile, "h": args.h,
        "keep_embeddings": args.keep_embeddings,
        "tiles": summary["tiles_total"], "complete": bool(summary["complete"] and info["complete"]),
        "wall_s": round(run["wall_s"], 1), "timings": t,
        "tiles_per_s": round(summary["tiles_computed"] / t["tiles_s"], 2),
        "entries_per_s": round(n**2 / t["tiles_s"]),
        "raw_gram_mb": round(raw_mb, 1),
        "raw_mb_per_s": round(raw_mb / t["tiles_s"], 1),
        "on_disk_mb_per_s": round(size_mb * 2**20 / 1e6 / t["tiles_s"], 1),
        "disk_sequential_write": dd,
        "peak_process_mb": round(biggest, 1), "peak_tree_mb": round(run["peak_tree_mb"], 1),
        "processes": [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in p.items() if k != "cmd"}
                      for p in run["processes"]],
        "store_mb": round(size_mb, 1), "sample": sample,
        "under_limit": biggest < args.max_process_mb,
        "cpu": psutil.cpu_count(), "load_avg_start_end": [load_start, [round(x, 2) for x in os.getloadavg()]],
    }
    if app is not None:
        a = last_json_line(app["stdout"])
        result["append"] = {
            "added": n_total - n, "fraction": args.append_fraction, "wall_s": round(app["wall_s"], 1),
            "timings": a["timings"], "tiles_computed": a["tiles_computed"], "tiles_kept": a["tiles_kept"],
            "complete": a["complete"], "peak_process_mb": round(max(p["peak_mb"] for p in app["processes"]), 1),
            "peak_tree_mb": round(app["peak_tree_mb"], 1), "sample_after": grown_sample,
            "processes": [{k: (round(v, 1) if isinstance(v, float) else v) for k, v in p.items() if k != "cmd"}
                          for p in app["processes"]],
        }
    path = save(args.name, result)
    print(json.dumps({k: v for k, v in result.items() if k not in ("processes", "append")}, indent=2))
    print(f"per process peak RSS (MB): {[(p['kind'], p['peak_mb']) for p in result['processes']]}")
    if app is not None:
        print("append:", json.dumps({k: v for k, v in result["append"].items() if k != "processes"}))
    print(f"saved {path}")
    ok = result["complete"] and result["under_limit"] and sample["bitwise_equal"] == sample["n"]
    if app is not None:
        ok = ok and result["append"]["complete"] and grown_sample["bitwise_equal"] == grown_sample["n"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
