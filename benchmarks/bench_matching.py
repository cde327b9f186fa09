"""Adaptive matching kernel: end-to-end time and peak memory of its jobs (issue 5's speed targets).

    python benchmarks/bench_matching.py [--jobs jobs/mutag-matching.yaml jobs/nci1-matching.yaml]
                                        [--set KEY=VALUE ...]

Each job runs in a fresh ``gramdist run JOB --out TMP --json`` process (LocalCluster with the
job's default cluster: one worker process per core). Measured: wall time of the whole
command (interpreter start, imports, dataset reading, cluster start-up, fit, embedding,
tiles, Zarr writes), CPU seconds of the process tree (user + system, workers included: less
sensitive to other load than wall time), peak memory of the process tree (sampled every
20 ms, :mod:`common`), the run's own phase timings, and the 1-minute load average before and
after (the machine may be shared). Results go to ``benchmarks/results/matching.json``; a
Markdown table is printed. Targets: MUTAG ≤ 60 s, NCI1 ≤ 15 min end to end.

``--phases N`` measures instead, in this one process and with ``time.process_time`` (CPU
seconds, robust to a shared machine), the kernel phases of each job: the fit on the job's fit
sample, the embedding of ``N`` seeded graphs outside the representation set (0: all of them),
extrapolated to all of them, and all tiles; results go to ``matching_phases.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, last_json_line, run_measured, save  # noqa: E402

TARGETS_S = {"mutag-matching": 60.0, "nci1-matching": 900.0}


def phases(job_path: str, n_embed: int, overrides: list[str]) -> dict:
    """CPU seconds of fit, embedding (extrapolated from ``n_embed`` graphs) and tiles."""
    import time

    import numpy as np

    from gramdist.datasets import load_dataset
    from gramdist.engine.runner import fit_sample_indices
    from gramdist.jobs import load_job
    from gramdist.kernels import make_kernel

    job = load_job(job_path, overrides)
    kernel = make_kernel(job.kernel["name"], **{k: v for k, v in job.kernel.items() if k != "name"})
    graphs = load_dataset(job.dataset)
    fit_idx = fit_sample_indices(len(graphs), job.fit.sample_size, job.fit.seed)
    t0 = time.process_time()
    state = kernel.fit(graphs.take(fit_idx), seed=job.fit.seed)
    t_fit = time.process_time() - t0
    rest = np.flatnonzero(~np.isin(graphs.graph_ids, state.arrays["rep.graph_ids"]))
    sel = rest if not n_embed or n_embed >= len(rest) else np.sort(
        np.random.default_rng(1).choice(rest, n_embed, replace=False))
    t0 = time.process_time()
    emb = kernel.embed(graphs.take(sel), state)
    t_embed = (time.process_time() - t0) * len(rest) / len(sel)
    tile = job.gram.tile_size
    blocks = math.ceil(len(graphs) / tile)
    fake = type(emb)(np.random.default_rng(0).random((tile, emb.features.shape[1])), np.zeros(tile, np.int64))
    t0 = time.process_time()
    kernel.pairwise(fake, fake, state)
    t_tiles = (time.process_time() - t0) * blocks * (blocks + 1) / 2
    return {"job": job_path, "lambda": state.attrs.get("nca", {}).get("lambda"), "fit_cpu_s": t_fit,
            "embed_cpu_s": t_embed, "embedded_measured": int(len(sel)), "embedded_total": int(len(rest)),
            "tiles_cpu_s": t_tiles, "kernel_cpu_s": t_fit + t_embed + t_tiles,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "load_1min": os.getloadavg()[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", nargs="+", default=["jobs/mutag-matching.yaml"])
    ap.add_argument("--set", action="append", default=[], help="job override, passed to gramdist run")
    ap.add_argument("--phases", type=int, default=None, metavar="N",
                    help="measure the kernel phases' CPU time in-process instead (N graphs embedded; 0: all)")
    args = ap.parse_args()
    if args.phases is not None:
        res = [phases(job, args.phases, args.set) for job in args.jobs]
        save("matching_phases", {"rows": res})
        for r in res:
            print(json.dumps(r))
        return
    rows = []
    for job in args.jobs:
        name = Path(job).stem
        with tempfile.TemporaryDirectory(prefix="bench-matching-") as tmp:
            cmd = gramdist_cmd("run", job, "--out", str(Path(tmp) / f"{name}.zarr"), "--quiet", "--json")
            for item in args.set:
                cmd += ["--set", item]
            load_before = os.getloadavg()[0]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = run_measured(cmd)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            load_after = os.getloadavg()[0]
        if out["returncode"] != 0:
            raise SystemExit(f"{job} failed:\n{out['stderr'][-3000:]}")
        timings = last_json_line(out["stdout"])
        rows.append({
            "job": job, "set": args.set, "end_to_end_s": out["wall_s"],
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_total_mb": out["peak_total_mb"], "peak_process_mb": out["peak_process_mb"],
            "load_1min_before": load_before, "load_1min_after": load_after,
            "target_s": TARGETS_S.get(name), "run_json": timings,
        })
    save("matching", {"rows": rows})
    print("| job | end to end (s) | CPU (s) | peak memory, all processes (MB) | largest process (MB) | load avg | target |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in rows:
        target = f"≤ {r['target_s']:.0f} s" if r["target_s"] else "—"
        print(f"| `{r['job']}` | {r['end_to_end_s']:.1f} | {r['cpu_s']:.1f} | {r['peak_total_mb']:.0f} | "
              f"{r['peak_process_mb']:.0f} | {r['load_1min_before']:.1f} → {r['load_1min_after']:.1f} | {target} |")


if __name__ == "__main__":
    main()
