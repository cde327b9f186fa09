"""Nyström features against the exact Gram: relative Frobenius error and nested-CV accuracy.

For each dataset and kernel: the exact Gram store (``gramdist run``) and its nested-CV
accuracy (SVC), then for each m the Nyström feature store (``gramdist features --nystroem m``),
``‖ΦΦᵀ − K‖_F / ‖K‖_F`` against that Gram, and its nested-CV accuracy (LinearSVC); for WL also
the exact explicit features (LinearSVC). Every step is a ``gramdist`` command run in a
subprocess (recorded with its CPU time) and skipped when its result is already in
``WORK/results.json``, so an interrupted run continues where it stopped. m larger than the fit
sample is capped to it (D&D: 1178 graphs, so m = 3000 becomes "all graphs").

    nice -n 19 python benchmarks/nystroem_fidelity.py --work /tmp/nys [--datasets NCI1 DD]
        [--kernels wl dm mlg] [--m 100 300 1000 3000] [--folds 10] [--repeats 3] [--workers 2]

Writes ``WORK/results.json`` and prints the table that REPRODUCTION.md shows.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GRAMDIST = [sys.executable, "-m", "gramdist.cli"]

#: (dataset, kernel) -> job file and overrides: every fit on all graphs, so that landmarks can
#: come from all of them; MLG with the rank its NCI1 job selects (20)
JOBS = {
    ("NCI1", "wl"): ("jobs/nci1-wl.yaml", ["fit.sample_size=null"]),
    ("NCI1", "dm"): ("jobs/nci1-dm.yaml", ["fit.sample_size=null"]),
    ("NCI1", "mlg"): ("jobs/nci1-mlg.yaml", ["kernel.rank=20"]),
    ("DD", "wl"): ("jobs/dd-wl.yaml", ["fit.sample_size=null"]),
    ("DD", "dm"): ("jobs/dd-dm.yaml", ["fit.sample_size=null"]),
    ("DD", "mlg"): ("jobs/nci1-mlg.yaml", ["kernel.rank=20", "dataset.name=DD", "gram.tile_size=295"]),
    ("MUTAG", "wl"): ("jobs/mutag-wl.yaml", ["kernel.h=3"]),  # a quick check of the script
    ("MUTAG", "dm"): ("jobs/mutag-dm.yaml", []),
}
N_GRAPHS = {"NCI1": 4110, "DD": 1178, "MUTAG": 188}


def run(cmd: list[str]) -> tuple[str, float]:
    """Run a gramdist command; (stdout, CPU seconds of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.time()
    proc = subprocess.run([*GRAMDIST, *cmd], capture_output=True, text=True, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): gramdist {' '.join(cmd)}\n{proc.stderr[-3000:]}")
    print(f"  gramdist {' '.join(cmd)}: {cpu:.0f} s CPU, {time.time() - t:.0f} s wall", flush=True)
    return proc.stdout, cpu


def sets(overrides: list[str]) -> list[str]:
    return [a for o in overrides for a in ("--set", o)]


def evaluate(store: Path, args: argparse.Namespace) -> dict:
    out, cpu = run(["evaluate", str(store), "--folds", str(args.folds), "--repeats", str(args.repeats),
                    "--workers", str(args.workers), "--json"])
    res = json.loads(out.strip().splitlines()[-1])
    return {"accuracy": res["accuracy_mean"], "std": res["accuracy_std"], "learner": res.get("learner", "svc"),
            "eval_cpu_s": cpu}


def rel_fro(features: Path, gram: Path) -> float:
    import gramdist

    k, _ = gramdist.open_gram(str(gram))
    phi, _ = gramdist.open_features(str(features))
    return float(np.linalg.norm(phi @ phi.T - k) / np.linalg.norm(k))


def explicit_bitwise(features: Path, gram: Path) -> bool:
    """Whether the explicit feature rows' dot products, normalised as the engine normalises a
    Gram block, are the Gram store's entries bit for bit."""
    import gramdist
    from gramdist.arrayops import normalize_block

    x, _ = gramdist.open_features(str(features), normalize=False)
    raw = (x @ x.T).toarray()
    d = np.diag(raw).copy()
    k, _ = gramdist.open_gram(str(gram))
    return bool(np.array_equal(normalize_block(raw, d, d), k))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    p.add_argument("--kernels", nargs="+", default=["wl", "dm", "mlg"])
    p.add_argument("--m", nargs="+", type=int, default=[100, 300, 1000, 3000])
    p.add_argument("--landmarks", default="kmeans++")
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--error-only", action="store_true", help="Nyström errors only, no evaluation")
    args = p.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    path = args.work / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}

    def save() -> None:
        path.write_text(json.dumps(results, indent=1))

    for ds in args.datasets:
        for kernel in args.kernels:
            job, overrides = JOBS[(ds, kernel)]
            name = f"{ds}-{kernel}"
            print(f"{name}: {job} {' '.join(overrides)}", flush=True)
            exact = args.work / f"{name}-exact.zarr"
            entry = results.setdefault(name, {"job": job, "overrides": overrides})
            if "exact" not in entry or ("accuracy" not in entry["exact"] and not args.error_only):
                if not exact.exists():
                    _, cpu = run(["run", job, *sets(overrides), "--out", str(exact), "--quiet"])
                    entry["exact"] = {"run_cpu_s": cpu}
                if not args.error_only:
                    entry["exact"] |= evaluate(exact, args)
                save()
            if kernel == "wl" and "explicit" not in entry and not args.error_only:
                store = args.work / f"{name}-features.zarr"
                _, cpu = run(["features", job, *sets(overrides), "--out", str(store), "--quiet"])
                entry["explicit"] = {"features_cpu_s": cpu, "bitwise_equal": explicit_bitwise(store, exact)} | evaluate(
                    store, args)
                save()
            for m in sorted({min(m, N_GRAPHS[ds]) for m in args.m}):
                key = f"m{m}" + ("" if args.landmarks == "kmeans++" else f"-{args.landmarks}")
                if key in entry:
                    continue
                store = args.work / f"{name}-{key}.zarr"
                _, cpu = run(["features", job, *sets(overrides), "--nystroem", str(m), "--landmarks", args.landmarks,
                              "--out", str(store), "--quiet"])
                info = json.loads(run(["info", str(store), "--json"])[0])
                entry[key] = {"m": m, "rank": info["nystroem"]["rank"], "features_cpu_s": cpu,
                              "rel_fro": rel_fro(store, exact), "disk_bytes": info["disk_bytes"]}
                if not args.error_only:
                    entry[key] |= evaluate(store, args)
                save()
                print(f"  {name} {key}: rank {entry[key]['rank']}, rel. Frobenius error {entry[key]['rel_fro']:.4f}"
                      + (f", accuracy {entry[key]['accuracy']:.2f} (exact {entry['exact']['accuracy']:.2f})"
                         if "accuracy" in entry[key] else ""), flush=True)
    print_table(results)


def print_table(results: dict) -> None:
    print("| dataset | kernel | exact Gram, SVC | m | rank | ‖ΦΦᵀ−K‖_F/‖K‖_F | Nyström, LinearSVC | Δ (points) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, entry in results.items():
        ds, kernel = name.split("-", 1)
        ex = entry.get("exact")
        if not ex:
            continue
        exact = f"{ex['accuracy']:.2f} ± {ex['std']:.2f}" if "accuracy" in ex else "—"
        rows = [(k, v) for k, v in entry.items() if k.startswith("m")]
        for key, v in sorted(rows, key=lambda kv: (kv[1]["m"], kv[0])):
            acc = f"{v['accuracy']:.2f} ± {v['std']:.2f}" if "accuracy" in v else "—"
            delta = f"{v['accuracy'] - ex['accuracy']:+.2f}" if "accuracy" in v and "accuracy" in ex else "—"
            print(f"| {ds} | {kernel} | {exact} | {v['m']}{key[len(str(v['m'])) + 1:]} | {v['rank']} | "
                  f"{v['rel_fro']:.4f} | {acc} | {delta} |")
        if "explicit" in entry:
            v = entry["explicit"]
            same = {True: "0 (bitwise)", False: "NOT bitwise", None: "not checked"}[v.get("bitwise_equal")]
            print(f"| {ds} | {kernel} | {ex['accuracy']:.2f} ± {ex['std']:.2f} | explicit | — | {same} | "
                  f"{v['accuracy']:.2f} ± {v['std']:.2f} | {v['accuracy'] - ex['accuracy']:+.2f} |")


if __name__ == "__main__":
    main()
