"""Feature stores of MOSES's training molecules against their number (issue 34 item 2).

    pip install --no-deps molsets
    python benchmarks/bench_moses.py [--sizes 10000 100000 1000000 0]          # WL h = 3
    python benchmarks/bench_moses.py --job jobs/moses-nspdk-features.yaml --target-min 30
    python benchmarks/bench_moses.py --job jobs/moses-dm-nystroem.yaml --nystroem 1000 \
        --sizes 10000 100000 --target-min 15
    python benchmarks/bench_moses.py --job ... --sizes 100000 --scheduler-workers 3   # the chunks' spread

For each size N (0: all 1,584,663), ``gramdist features`` of the job with ``dataset.limit=N``
in a fresh process (SMILES read in blocks on the workers, 2 workers), timed end to end with the
peak memory of the whole process tree and of its largest process, and the store's size on disk.
Results: ``benchmarks/results/moses.json`` and ``moses.png`` for the WL job (time and peak memory
against N), ``moses-<job name>.json``/``.png`` for any other job.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, gramdist_cmd, last_json_line, local_scheduler, run_measured, save  # noqa: E402


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def run(job: Path, n: int, workdir: Path, nystroem: int | None = None, scheduler: str | None = None) -> dict:
    store = workdir / f"moses-{n}.zarr"
    args = ["features", str(job), "--out", str(store), "--quiet", "--json"]
    if scheduler:
        args += ["--scheduler", scheduler]
    args += ["--set", f"dataset.limit={n}" if n else "dataset.limit=null"]
    if nystroem:
        args += ["--nystroem", str(nystroem)]
    r = run_measured(gramdist_cmd(*args))
    if r["returncode"]:
        raise SystemExit(r["stderr"][-2000:])
    summary = last_json_line(r["stdout"])
    with open(store / "zarr.json") as f:
        n_graphs = json.load(f)["attributes"]["dataset"]["n_graphs"]
    return {"n": n_graphs, "wall_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"],
            "peak_process_mb": r["peak_process_mb"], "store_mb": folder_mb(store), "timings": summary["timings"],
            "chunks_per_worker": summary.get("workers")}


def plot(rows: list[dict], path: Path, title: str, target_min: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["n"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.loglog(n, [r["wall_s"] for r in rows], "o-", label="gramdist features, end to end")
    a.loglog(n, [r["n"] / rows[-1]["n"] * rows[-1]["wall_s"] for r in rows], ":", color="grey",
             label="linear in N (through the largest)")
    a.axhline(60 * target_min, color="tab:red", lw=0.8, label=f"issue 34's target: {target_min:g} minutes")
    a.set(xlabel="molecules (MOSES training set)", ylabel="seconds")
    a.set_title(f"{title}, 2 workers", fontsize=10)
    a.legend(fontsize=8)
    b.semilogx(n, [r["peak_process_mb"] for r in rows], "o-", label="largest process")
    b.semilogx(n, [r["peak_total_mb"] for r in rows], "s-", label="all processes")
    b.axhline(2048, color="tab:red", lw=0.8, label="target: no process above 2 GB")
    b.set(xlabel="molecules", ylabel="peak memory (MB)", title="peak memory: a block's, not the library's")
    b.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def measure(job: Path, sizes: list[int], nystroem: int | None, scheduler: str | None = None) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("GRAMDIST_BENCH_TMP")) as tmp:
        for n in sizes:
            rows.append(run(job, n, Path(tmp), nystroem, scheduler))
            r = rows[-1]
            print(f"{r['n']:>9,} molecules  {r['wall_s']:7.1f} s  largest process {r['peak_process_mb']:6.0f} MB  "
                  f"all {r['peak_total_mb']:6.0f} MB  store {r['store_mb']:7.1f} MB  chunks per worker "
                  f"{r['chunks_per_worker']}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000, 0])
    ap.add_argument("--job", default=str(ROOT / "jobs" / "moses-wl-features.yaml"))
    ap.add_argument("--nystroem", type=int, default=None, metavar="M", help="Nyström features with M landmarks")
    ap.add_argument("--target-min", type=float, default=10, help="the issue's time target, drawn on the plot")
    ap.add_argument("--replot", action="store_true", help="redraw the plot from the saved results, run nothing")
    ap.add_argument("--scheduler-workers", type=int, default=0, metavar="W",
                    help="run on a `dask scheduler` with W `dask worker` processes (the chunks' spread is "
                         "recorded; the measured tree is the client's only); results <name>-w<W>.json, no plot")
    args = ap.parse_args()
    job = Path(args.job)
    name = "moses" if job.stem == "moses-wl-features" else f"moses-{job.stem.removeprefix('moses-')}"
    if args.scheduler_workers:
        with tempfile.TemporaryDirectory() as tmp, local_scheduler(args.scheduler_workers, Path(tmp)) as addr:
            rows = measure(job, args.sizes, args.nystroem, addr)
        save(f"{name}-w{args.scheduler_workers}", {"job": args.job, "nystroem": args.nystroem, "rows": rows})
        return
    if args.replot:
        rows = json.loads((RESULTS / f"{name}.json").read_text())["rows"]
    else:
        rows = measure(job, args.sizes, args.nystroem)
        save(name, {"job": args.job, "nystroem": args.nystroem, "rows": rows})
    kernel = yaml.safe_load(job.read_text())["kernel"]
    title = ", ".join(f"{k} = {v}" for k, v in kernel.items() if k != "name" and k != "descriptor_sample")
    title = f"{kernel['name'].upper()} ({title})" + (f" Nyström m = {args.nystroem}" if args.nystroem else " features")
    plot(rows, RESULTS / f"{name}.png", title, args.target_min)


if __name__ == "__main__":
    main()
