"""Primal vs Mixed vs Dual on the NCI drift stream (the central comparison of Da San Martino,
Navarin & Sperduti 2016), one plot with the three AUROC curves.

    python benchmarks/bench_stream.py [--budget 10000] [--kernel wl] [--limit N]

Runs the three shipped jobs ``jobs/nci-stream-{primal,mixed,dual}.yaml`` (WL h = 3, BPA-S with
C = 0.01; Primal with the *weight* policy, Mixed and Dual with the *tau* policy) in this
process, one after the other, and also Primal with the *oldest*/*fscore* policies and Mixed /
Dual with *oldest*. Each run is test-then-train over NCI1, NCI109, NCI1 (labels flipped),
NCI109 (flipped): 16,474 graphs; AUROC over windows of 50 examples sampled every 50.

Writes ``benchmarks/results/stream-<budget>.json`` (table, timings) and
``benchmarks/results/stream-<budget>.png`` (three curves), and prints a Markdown table.
Timings include feature extraction (WL features computed chunk by chunk ahead of the learner
in a background thread), so ``examples/s`` is the end-to-end stream throughput.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from common import RESULTS, save, this_command  # noqa: E402

from gramdist.jobs import load_job  # noqa: E402
from gramdist.stream.run import execute, plot_curves, validate_stream_job  # noqa: E402

MAIN = [("primal", "weight"), ("mixed", "tau"), ("dual", "tau")]
EXTRA = [("primal", "oldest"), ("primal", "fscore"), ("mixed", "oldest"), ("dual", "oldest")]


def run(model: str, policy: str, budget: int, kernel: str, limit: int | None) -> tuple[dict, object]:
    job_file = ROOT / "jobs" / (f"nci-stream-{model}.yaml" if kernel == "wl" else f"nci-stream-{model}-{kernel}.yaml")
    overrides = [f"learner.budget={budget}", f"learner.policy={policy}"]
    if limit:
        overrides.append(f"stream.limit={limit}")
    job = validate_stream_job(load_job(job_file, overrides))
    t0 = time.perf_counter()
    result, learner, _ = execute(job)
    wall = time.perf_counter() - t0
    row = {"model": model, "policy": policy, "budget": budget, "kernel": job["kernel"],
           **result.summary(), "run_seconds_incl_setup": wall,
           "final_model_size": learner.model_size,
           "examples_in_model": getattr(learner, "n_examples", None),
           "features_in_model": len(learner.keys) if model == "primal" else None}
    return row, result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=10000)
    ap.add_argument("--kernel", default="wl", help="wl (default) or nspdk (primal only)")
    ap.add_argument("--limit", type=int, default=None, help="only the first N examples (smoke test)")
    ap.add_argument("--no-extra", action="store_true", help="skip the oldest/fscore policies")
    args = ap.parse_args()
    runs = MAIN if args.kernel == "wl" else [("primal", "weight")]
    if args.kernel == "wl" and not args.no_extra:
        runs = MAIN + EXTRA
    rows, curves = [], {}
    for model, policy in runs:
        row, res = run(model, policy, args.budget, args.kernel, args.limit)
        rows.append(row)
        if (model, policy) in MAIN:
            curves[f"{model} ({policy})"] = res
        print(json.dumps({k: row[k] for k in ("model", "policy", "auroc_mean", "seconds_per_example")}),
              file=sys.stderr, flush=True)
    tag = f"stream-{args.kernel}-{args.budget}" if args.kernel != "wl" else f"stream-{args.budget}"
    png = RESULTS / f"{tag}.png"
    RESULTS.mkdir(parents=True, exist_ok=True)
    plot_curves(curves, png, title=f"NCI drift stream (NCI1, NCI109, both flipped), {args.kernel}, "
                                   f"budget {args.budget}")
    save(tag, {"command": this_command(), "results": rows,
               "plot": str(png.relative_to(ROOT))})
    print("| learner | policy | mean AUROC (± sd) | s / example | examples / s | peak model size |"
          " stored examples / features |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        stored = r["examples_in_model"] if r["examples_in_model"] is not None else r["features_in_model"]
        print(f"| {r['model']} | {r['policy']} | {r['auroc_mean']:.3f} ± {r['auroc_std']:.3f} | "
              f"{r['seconds_per_example']:.5f} | {r['examples_per_second']:.0f} | {r['peak_model_size']} | {stored} |")
    print(f"\nplot: {png}")


if __name__ == "__main__":
    main()
