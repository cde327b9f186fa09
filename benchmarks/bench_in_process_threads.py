"""In-process runs with one thread per core against one task at a time, NCI1 end to end.

    python benchmarks/bench_in_process_threads.py [--repeats 5] [--jobs KIND ...]

``gramdist run`` of each job on NCI1 (4,110 graphs: in the command's own process by the
placement's rule) with ``GRAMDIST_THREADS=1`` (every task in the calling thread, as before the
pool) and with the default (one thread per core), alternating the two so that a change of load
hits both; the medians of the wall times, the ratio, the phases of the median run and the peak
memory of the process. Each pair of stores is compared bit for bit. Results:
``benchmarks/results/in_process_threads.json`` and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from common import gramdist_cmd, last_json_line, run_measured, save, this_command  # noqa: E402

#: job file and --set overrides of each row (the NCI1 jobs of the README's kernel table)
JOBS = {
    "wl": ("jobs/nci1-wl.yaml", []),
    "sp": ("jobs/nci1-sp.yaml", []),
    "graphlet": ("jobs/nci1-graphlet.yaml", []),
    "vertex_histogram": ("jobs/mutag-vertex_histogram.yaml", ["dataset.name=NCI1", "gram.tile_size=1028"]),
    "hadamard": ("jobs/mutag-hadamard.yaml", ["dataset.name=NCI1", "gram.tile_size=1028"]),
    "core": ("jobs/mutag-core.yaml", ["dataset.name=NCI1", "gram.tile_size=1028"]),
    "pyramid_match": ("jobs/mutag-pyramid_match.yaml", ["dataset.name=NCI1", "gram.tile_size=1028"]),
    "random_walk": ("jobs/nci1-random_walk.yaml", []),
    "dm": ("jobs/nci1-dm.yaml", []),
    # D&D, forced into this process (the placement's choice since the one-pass weights)
    "core_dd": ("jobs/mutag-core.yaml", ["dataset.name=DD", "gram.tile_size=256", "cluster.n_workers=0"]),
}


def run_once(job: str, sets: list[str], store: Path, threads: str | None) -> dict:
    env = dict(os.environ)
    env.pop("GRAMDIST_THREADS", None)
    if threads is not None:
        env["GRAMDIST_THREADS"] = threads
    cmd = gramdist_cmd("run", job, "--out", str(store), "--overwrite", "--quiet", "--json",
                       *[a for s in sets for a in ("--set", s)])
    r = run_measured(cmd, env=env)
    if r["returncode"]:
        raise SystemExit(r["stderr"][-2000:])
    return {"wall_s": r["wall_s"], "peak_process_mb": r["peak_process_mb"],
            "timings": last_json_line(r["stdout"])["timings"]}


def same_bits(a: Path, b: Path) -> bool:
    from gramdist import open_gram

    x, y = np.asarray(open_gram(a)[0]), np.asarray(open_gram(b)[0])
    return x.shape == y.shape and bool(np.array_equal(x.view(np.uint64), y.view(np.uint64)))


def bench(kind: str, repeats: int, workdir: Path) -> dict:
    job, sets = JOBS[kind]
    runs: dict[str, list[dict]] = {"one": [], "pool": []}
    for _ in range(repeats):
        runs["one"].append(run_once(job, sets, workdir / "one.zarr", "1"))
        runs["pool"].append(run_once(job, sets, workdir / "pool.zarr", None))
    row = {"kernel": kind, "job": job, "sets": sets, "threads": os.cpu_count(),
           "same_bits": same_bits(workdir / "one.zarr", workdir / "pool.zarr")}
    for name, rs in runs.items():
        walls = [r["wall_s"] for r in rs]
        median = sorted(rs, key=lambda r: r["wall_s"])[len(rs) // 2]
        row[name] = {"walls_s": walls, "median_s": statistics.median(walls),
                     "peak_process_mb": max(r["peak_process_mb"] for r in rs), "median_timings": median["timings"]}
    row["speedup"] = row["one"]["median_s"] / row["pool"]["median_s"]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--jobs", nargs="+", default=list(JOBS), choices=list(JOBS))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.jobs:
            rows.append(bench(kind, args.repeats, Path(tmp)))
            print(f"{kind}: done", file=sys.stderr)
    save("in_process_threads", {"command": this_command(),
                                "results": rows})
    print("| kernel | one task at a time (s) | one thread per core (s) | speed-up | embed / tiles, one (s) |"
          " embed / tiles, pool (s) | peak MB, one / pool | same bits |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        one, pool = r["one"], r["pool"]
        split = [f"{x['median_timings']['embed_s']:.2f} / {x['median_timings']['tiles_s']:.2f}" for x in (one, pool)]
        print(f"| `{r['kernel']}` | {one['median_s']:.2f} | {pool['median_s']:.2f} | {r['speedup']:.2f}× | {split[0]} |"
              f" {split[1]} | {one['peak_process_mb']:.0f} / {pool['peak_process_mb']:.0f} | {r['same_bits']} |")
    print(json.dumps({"rows": len(rows)}), file=sys.stderr)


if __name__ == "__main__":
    main()
