"""A million graphs on one machine: feature stores end to end, timed at N = 10⁴, 10⁵, 10⁶.

    nice -n 10 python benchmarks/bench_million.py [--sizes 10000 100000 1000000]
        [--nystroem-sizes 10000 100000] [--gram-sizes 10000] [--three-workers 100000]
        [--workdir /tmp] [--keep] [--name million]

The graphs: the synthetic generator (``gramdist.datasets.make_synthetic``) in blocks of 10,000
(``dataset.synthetic.block_size``), so every worker generates the chunks it featurises and
no process ever holds all graphs. Molecule-sized, shaped after NCI1 (29.9 nodes, 32.3 edges,
37 atom labels per graph): 20–40 nodes (mean 30), average degree 2.2, 37 node labels drawn
uniformly (harder than real molecules, whose labels repeat: more distinct WL features per
graph, so a larger store), two classes with a weak label bias (``label_bias: 0.1``) so the
linear model has something to learn. For each N it runs, as fresh processes on the default
2-worker LocalCluster, sampling the RSS of every process of the tree every 0.2 s:

1. **WL exact features** (h = 5, normalised): ``gramdist features`` into a CSR feature store;
2. **a streamed linear model** on it: ``gramdist evaluate --learner sgd`` (SGD over the Zarr
   chunks with ``partial_fit``; nested CV with 5 outer folds × 1 repeat, 2 inner folds,
   C ∈ {1, 10}, 2 epochs, feature ids hashed into 2²⁰ columns);
3. at ``--nystroem-sizes``: **DM Nyström features** (m = 1000 k-means++ landmarks from a
   2,000-graph fit sample): ``gramdist features --nystroem 1000``;
4. at ``--gram-sizes``: **the exact path** for comparison, ``gramdist run`` (the N×N WL Gram
   in Zarr) and ``gramdist evaluate`` (SVC, the same CV protocol);
5. at ``--three-workers N``: the WL feature run on a real scheduler (``dask scheduler`` and
   three ``dask worker --nthreads 1`` processes), reporting the chunks each worker wrote;
6. at ``--grakel-sizes``: GraKeL's WL side by side on the same graphs, its exact Gram and its
   ``Nystroem=m`` option (uniform landmarks; it still returns the dense N×N approximation),
   each in a fresh process with a ``--grakel-timeout``.

Reported per step: wall seconds, CPU seconds of the whole process tree (``getrusage`` of the
waited children), peak RSS of the largest single process and of the tree, store size on disk;
targets: WL features + model at 10⁶ ≤ 15 min with every process ≤ 4 GB, DM Nyström at 10⁵
≤ 20 min. Writes ``benchmarks/results/<name>.json`` and ``<name>.png`` (time and memory
against N). ``--plot-only`` redraws the figure from the JSON. Not part of CI.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, gramdist_cmd, last_json_line, local_scheduler, save  # noqa: E402
from soak import run_sampled  # noqa: E402

BLOCK = 10_000
DATASET = ("{{synthetic: {{n_graphs: {n}, n_nodes: [20, 40], avg_degree: 2.2, n_labels: 37, attr_dim: 0, "
           "seed: 0, label_bias: 0.1, block_size: " + str(BLOCK) + "}}}}")


def wl_job(n: int, h: int, tile: int) -> str:
    return (f"# bench_million: WL on {n} synthetic molecule-sized graphs\n"
            f"dataset: {DATASET.format(n=n)}\n"
            f"kernel: {{name: wl, h: {h}}}\n"
            f"fit: {{sample_size: 1000, seed: 0}}\n"
            f"gram: {{tile_size: {tile}, normalize: true}}\n"
            f"cluster: {{n_workers: 2, threads_per_worker: 1}}\n")


def dm_job(n: int) -> str:
    return (f"# bench_million: DM on {n} synthetic molecule-sized graphs\n"
            f"dataset: {DATASET.format(n=n)}\n"
            f"kernel: {{name: dm, h: 10, eta: 0.5, t: 4, b: 10, descriptor_sample: 20000}}\n"
            f"fit: {{sample_size: 2000, seed: 0}}\n"
            f"gram: {{normalize: true}}\n"
            f"cluster: {{n_workers: 2, threads_per_worker: 1}}\n")


def measured(cmd: list[str]) -> dict:
    """Run ``cmd`` with the RSS sampler; add the CPU seconds of its whole (waited) tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_sampled(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if res["returncode"] != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{res['stderr'][-4000:]}")
    out = {"wall_s": round(res["wall_s"], 2),
           "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
           "peak_process_mb": round(max(p["peak_mb"] for p in res["processes"]), 1),
           "peak_tree_mb": round(res["peak_tree_mb"], 1)}
    try:
        out["summary"] = last_json_line(res["stdout"])
    except ValueError:
        pass
    print(f"  {' '.join(cmd[3:])}: {out['wall_s']} s wall, {out['cpu_s']} s CPU, largest process "
          f"{out['peak_process_mb']} MB", flush=True)
    return out


def info(store: Path) -> dict:
    out = subprocess.run(gramdist_cmd("info", str(store), "--json"), capture_output=True, text=True, cwd=ROOT,
                         check=True).stdout
    return json.loads(out)


SGD_EVAL = ["--learner", "sgd", "--folds", "5", "--repeats", "1", "--inner-folds", "2", "--c-min", "0",
            "--c-max", "1", "--epochs", "2", "--hash-bits", "20", "--json"]
SVC_EVAL = ["--folds", "5", "--repeats", "1", "--inner-folds", "2", "--c-min", "0", "--c-max", "1", "--json"]


def wl_features(work: Path, n: int, args: argparse.Namespace) -> dict:
    job = work / f"wl-{n}.yaml"
    job.write_text(wl_job(n, args.h, 1024))
    store = work / f"wl-{n}.zarr"
    feats = measured(gramdist_cmd("features", str(job), "--out", str(store), "--chunk-size", str(args.chunk),
                                  "--quiet", "--json"))
    meta = info(store)
    ev = measured(gramdist_cmd("evaluate", str(store), *SGD_EVAL))
    out = {"n": n, "features": feats, "evaluate": ev, "store_bytes": meta["disk_bytes"], "nnz": meta["nnz"],
           "accuracy": ev.get("summary", {}).get("accuracy_mean"),
           "end_to_end_wall_s": round(feats["wall_s"] + ev["wall_s"], 2),
           "end_to_end_cpu_s": round(feats["cpu_s"] + ev["cpu_s"], 2)}
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return out


def dm_nystroem(work: Path, n: int, args: argparse.Namespace) -> dict:
    job = work / f"dm-{n}.yaml"
    job.write_text(dm_job(n))
    store = work / f"dm-{n}.zarr"
    feats = measured(gramdist_cmd("features", str(job), "--out", str(store), "--nystroem", str(args.m),
                                  "--chunk-size", str(args.chunk), "--quiet", "--json"))
    meta = info(store)
    out = {"n": n, "m": args.m, "features": feats, "store_bytes": meta["disk_bytes"],
           "rank": (meta.get("nystroem") or {}).get("rank")}
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return out


def exact_gram(work: Path, n: int, args: argparse.Namespace) -> dict:
    job = work / f"wl-gram-{n}.yaml"
    job.write_text(wl_job(n, args.h, -(-n // 4)))  # a 4 x 4 grid of tiles
    store = work / f"wl-gram-{n}.zarr"
    run = measured(gramdist_cmd("run", str(job), "--out", str(store), "--quiet", "--json"))
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    ev = measured(gramdist_cmd("evaluate", str(store), *SVC_EVAL))
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    return {"n": n, "run": run, "evaluate": ev, "store_bytes": size,
            "accuracy": ev.get("summary", {}).get("accuracy_mean"),
            "end_to_end_wall_s": round(run["wall_s"] + ev["wall_s"], 2),
            "end_to_end_cpu_s": round(run["cpu_s"] + ev["cpu_s"], 2)}


GRAKEL_SCRIPT = r"""
import json, sys, time
import numpy as np
from gramdist.datasets import make_synthetic
n, h, nystroem = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
g = make_synthetic(n_graphs=n, n_nodes=(20, 40), avg_degree=2.2, n_labels=37, attr_dim=0, seed=0, label_bias=0.1,
                   block_size=10000)
from grakel import Graph, GraphKernel
graphs = []
for i in range(len(g)):
    x = g[i]
    adj = {v: [] for v in range(x.n_nodes)}
    for u, v in x.edges.tolist():
        adj[u].append(v)
        adj[v].append(u)
    graphs.append(Graph(adj, node_labels={v: int(l) for v, l in enumerate(x.node_labels)}, graph_format="dictionary"))
t = time.perf_counter()
kernel = [{"name": "weisfeiler_lehman", "n_iter": h}, {"name": "vertex_histogram"}]
K = GraphKernel(kernel=kernel, normalize=True, Nystroem=nystroem or False, random_state=0).fit_transform(graphs)
print(json.dumps({"kernel_s": time.perf_counter() - t, "shape": list(np.shape(K))}))
"""


def grakel(n: int, nystroem: int, args: argparse.Namespace) -> dict:
    """GraKeL's WL (h iterations, normalised) on the same graphs: the exact Gram, or with its
    ``Nystroem`` option (uniform landmarks; it returns the N x N approximated Gram)."""
    cmd = ["timeout", str(args.grakel_timeout), sys.executable, "-c", GRAKEL_SCRIPT, str(n), str(args.h), str(nystroem)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = run_sampled(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"n": n, "nystroem": nystroem, "wall_s": round(res["wall_s"], 2),
           "cpu_s": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 2),
           "peak_process_mb": round(max(p["peak_mb"] for p in res["processes"]), 1),
           "timed_out": res["returncode"] == 124}
    if res["returncode"] == 0:
        out |= last_json_line(res["stdout"])
    elif not out["timed_out"]:
        out["error"] = res["stderr"][-2000:]
    print(f"  GraKeL WL{' Nystroem=' + str(nystroem) if nystroem else ''}, N = {n}: {out['wall_s']} s wall, "
          f"{out['cpu_s']} s CPU, {out['peak_process_mb']} MB" + (" (timed out)" if out["timed_out"] else ""),
          flush=True)
    return out


def three_workers(work: Path, n: int, args: argparse.Namespace) -> dict:
    """The WL feature run on `dask scheduler` + three `dask worker` processes."""
    with local_scheduler(3, work) as addr:
        job = work / f"wl-3w-{n}.yaml"
        job.write_text(wl_job(n, args.h, 1024))
        store = work / f"wl-3w-{n}.zarr"
        run = measured(gramdist_cmd("features", str(job), "--out", str(store), "--scheduler", addr,
                                    "--chunk-size", str(args.chunk), "--quiet", "--json"))
    if not args.keep:
        shutil.rmtree(store, ignore_errors=True)
    workers = run.get("summary", {}).get("workers", {})
    print(f"  chunks per worker: {workers}", flush=True)
    return {"n": n, "features": run, "chunks_per_worker": workers}


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, cx, bx) = plt.subplots(1, 3, figsize=(15, 4.4))
    m = result["args"]["m"]
    series = [("WL features + streamed SGD (end to end)", result["wl"], "end_to_end", "o-"),
              ("WL features only", result["wl"], "features", "s--"),
              (f"DM Nyström features (m = {m})", result["dm"], "features", "^-"),
              ("exact WL Gram + SVC (end to end)", result["gram"], "end_to_end", "D")]
    for axis, unit, title in ((ax, "wall_s", "wall time (s)"), (cx, "cpu_s", "CPU time, all processes (s)")):
        for label, rows, key, style in series:
            if rows:
                get = (lambda r, u=unit: r[f"end_to_end_{u}"]) if key == "end_to_end" else (lambda r, k=key, u=unit: r[k][u])
                axis.plot([r["n"] for r in rows], [get(r) for r in rows], style, label=label)
        for r in result.get("grakel", []):
            if not r["timed_out"] and "kernel_s" in r:
                axis.plot([r["n"]], [r[unit]], "x" if r["nystroem"] else "+", ms=9, color="black",
                          label=f"GraKeL WL{' Nystroem=' + str(r['nystroem']) if r['nystroem'] else ' Gram'}")
        wl = result["wl"]
        if wl:
            n0, t0 = wl[0]["n"], wl[0][f"end_to_end_{unit}"]
            xs = [n0, max(r["n"] for r in wl)]
            axis.plot(xs, [t0 * x / n0 for x in xs], ":", color="grey", label="linear in N (from the first point)")
        if unit == "wall_s":
            axis.axhline(15 * 60, color="red", lw=0.8, ls="--", label="15 min")
        axis.set(xscale="log", yscale="log", xlabel="graphs N", ylabel=title, title=title + " against N")
        axis.legend(fontsize=7)
    for label, rows, key in (("WL features", result["wl"], "features"), ("streamed SGD", result["wl"], "evaluate"),
                             ("DM Nyström", result["dm"], "features"), ("exact Gram run", result["gram"], "run"),
                             ("exact Gram SVC", result["gram"], "evaluate")):
        if rows:
            bx.plot([r["n"] for r in rows], [r[key]["peak_process_mb"] for r in rows], "o-", label=label)
    for r in result.get("grakel", []):
        if not r["timed_out"] and "kernel_s" in r:
            bx.plot([r["n"]], [r["peak_process_mb"]], "x" if r["nystroem"] else "+", ms=9, color="black",
                    label=f"GraKeL WL{' Nystroem=' + str(r['nystroem']) if r['nystroem'] else ' Gram'}")
    bx.axhline(4096, color="red", lw=0.8, ls="--", label="4 GB per process")
    bx.set(xscale="log", xlabel="graphs N", ylabel="MB", title="peak RSS of the largest process")
    bx.legend(fontsize=7)
    fig.suptitle("gramdist feature stores on synthetic molecule-sized graphs, 2-worker LocalCluster", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="*", type=int, default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--nystroem-sizes", nargs="*", type=int, default=[10_000, 100_000])
    ap.add_argument("--gram-sizes", nargs="*", type=int, default=[10_000])
    ap.add_argument("--three-workers", type=int, default=100_000, help="N of the 3-worker run (0: skip)")
    ap.add_argument("--grakel-sizes", nargs="*", type=int, default=[10_000],
                    help="N at which GraKeL's WL runs side by side: exact, and with Nystroem=m")
    ap.add_argument("--grakel-timeout", type=int, default=3600, help="seconds per GraKeL run")
    ap.add_argument("--h", type=int, default=5)
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--chunk", type=int, default=4096, help="graphs per chunk")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    ap.add_argument("--name", default="million")
    ap.add_argument("--plot-only", action="store_true")
    args = ap.parse_args()
    if args.plot_only:
        result = json.loads((RESULTS / f"{args.name}.json").read_text())
        plot(result, RESULTS / f"{args.name}.png")
        return 0
    work = Path(tempfile.mkdtemp(prefix="gramdist-million-", dir=args.workdir))
    result: dict = {"args": vars(args), "load_avg_start": os.getloadavg(), "cpu_count": os.cpu_count(),
                    "wl": [], "dm": [], "gram": [], "grakel": [], "three_workers": None}
    try:
        for n in args.sizes:
            print(f"WL features + streamed SGD, N = {n}", flush=True)
            result["wl"].append(wl_features(work, n, args))
            save(args.name, result)
        for n in args.nystroem_sizes:
            print(f"DM Nyström features, N = {n}", flush=True)
            result["dm"].append(dm_nystroem(work, n, args))
            save(args.name, result)
        for n in args.gram_sizes:
            print(f"exact WL Gram + SVC, N = {n}", flush=True)
            result["gram"].append(exact_gram(work, n, args))
            save(args.name, result)
        for n in args.grakel_sizes:
            print(f"GraKeL WL, N = {n}", flush=True)
            for nys in (0, args.m):
                result["grakel"].append(grakel(n, nys, args))
                save(args.name, result)
        if args.three_workers:
            print(f"WL features on a scheduler with three workers, N = {args.three_workers}", flush=True)
            result["three_workers"] = three_workers(work, args.three_workers, args)
    finally:
        result["load_avg_end"] = os.getloadavg()
        save(args.name, result)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    plot(result, RESULTS / f"{args.name}.png")
    for r in result["wl"]:
        print(f"WL N={r['n']}: end to end {r['end_to_end_wall_s']} s wall ({r['end_to_end_cpu_s']} s CPU), store "
              f"{r['store_bytes'] / 2**20:.0f} MiB, {r['nnz']} non-zeros, accuracy {r['accuracy']}, largest process "
              f"{max(r['features']['peak_process_mb'], r['evaluate']['peak_process_mb'])} MB")
    for r in result["dm"]:
        print(f"DM Nyström N={r['n']}: {r['features']['wall_s']} s wall ({r['features']['cpu_s']} s CPU), rank "
              f"{r['rank']}, store {r['store_bytes'] / 2**20:.0f} MiB, largest process "
              f"{r['features']['peak_process_mb']} MB")
    for r in result["grakel"]:
        print(f"GraKeL WL{' Nystroem=' + str(r['nystroem']) if r['nystroem'] else ''} N={r['n']}: {r['wall_s']} s wall "
              f"({r['cpu_s']} s CPU), largest process {r['peak_process_mb']} MB"
              + (" (timed out)" if r["timed_out"] else ""))
    for r in result["gram"]:
        print(f"exact Gram N={r['n']}: {r['end_to_end_wall_s']} s wall ({r['end_to_end_cpu_s']} s CPU), store "
              f"{r['store_bytes'] / 2**20:.0f} MiB, accuracy {r['accuracy']}")
    print(f"saved {RESULTS / (args.name + '.json')} and .png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
