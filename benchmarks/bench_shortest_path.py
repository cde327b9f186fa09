"""Shortest-path family (sp, wlsp, graphhopper, sp_attr, hgk_sp, hgk_wl): gramdist vs GraKeL vs C++.

    python benchmarks/bench_shortest_path.py [--kernels sp wlsp graphhopper] [--datasets NCI1 DD]
        [--attr-datasets ENZYMES PROTEINS] [--repeats 1] [--grakel-timeout 1800]

For each kernel and dataset, each tool in a fresh process:

* **gramdist end to end**: ``gramdist run JOB --out STORE`` (interpreter start, imports, reading,
  LocalCluster start-up, fit + embed + tiles, Zarr writes); its kernel phase (fit + embed +
  tiles) from the run's JSON timings. The job is ``jobs/<dataset>-<kernel>.yaml`` when it
  exists, else the kernel's ENZYMES job with ``--set dataset.name=<dataset>``.
* **GraKeL kernel phase** (same definition, see each kernel's docstring): ``fit_transform``
  timed inside its process on graphs already converted to its input format, killed after
  ``--grakel-timeout`` seconds (reported as a timeout). ``sp``: ``ShortestPath(with_labels=
  True)`` with Dijkstra (edge-dictionary input; adjacency-matrix input for graphs with
  isolated nodes, which its dictionary input drops); ``wlsp``: ``WeisfeilerLehman(n_iter=h,
  base_graph_kernel=ShortestPath)``; ``graphhopper``: ``GraphHopper(kernel_type="linear")`` on
  one-hot labels (= our Dirac kernel); ``sp_attr``: ``ShortestPathAttr`` with the same Gaussian
  as metric and no labels (``--set kernel.with_labels=false``); hash graph kernels: GraKeL has
  none (gramdist only).
* **TUDataset C++ baseline** (``sp`` only, when ``$GRAMDIST_TUDATASET_BASELINES`` names the
  folder of the built ``kernel_baselines`` module): end to end (process start, the module's own
  file reading, Gram) and the ``compute_shortestpath_dense`` call itself (load + Gram, the
  figure the issue quotes). Its definition differs from ours in documented ways (sp.py), so the
  Grams are compared by correlation only.

All Grams are cosine-normalised; the script reports the max abs difference to GraKeL's. The
node-attribute kernels run on ``--attr-datasets`` (NCI1 and D&D have no attributes).
Results go to ``benchmarks/results/shortest_path.json`` and Markdown tables are printed.
Timings are only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    ROOT,
    gramdist_cmd,
    kernel_seconds,
    last_json_line,
    median_of_runs,
    run_measured,
    save_rows,
)

ATTR_KERNELS = {"sp_attr", "hgk_sp", "hgk_wl"}

GRAKEL_SCRIPT = r"""
import json, sys, time
import numpy as np
from gramdist.datasets import load_dataset
kernel, name, out, params = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
from grakel import Graph
from grakel.kernels import GraphHopper, ShortestPath, ShortestPathAttr, WeisfeilerLehman
g = load_dataset(name)

def adjacency(x):
    a = np.zeros((x.n_nodes, x.n_nodes))
    a[x.edges[:, 0], x.edges[:, 1]] = a[x.edges[:, 1], x.edges[:, 0]] = 1
    np.fill_diagonal(a, 0)
    return a

def graph(x, labels):
    deg = np.bincount(x.edges.ravel(), minlength=x.n_nodes)
    if (deg == 0).any():  # GraKeL's edge-dictionary input drops isolated nodes
        return Graph(adjacency(x), node_labels=labels)
    adj = {v: [] for v in range(x.n_nodes)}
    for u, v in x.edges.tolist():
        if u != v:
            adj[u].append(v); adj[v].append(u)
    return Graph(adj, node_labels=labels, graph_format="dictionary")

if kernel in ("sp", "wlsp"):
    graphs = [graph(x, {v: int(l) for v, l in enumerate(x.node_labels)}) for x in g]
    base = (ShortestPath, {"algorithm_type": "dijkstra"})
    est = ShortestPath(with_labels=True, algorithm_type="dijkstra", normalize=True) if kernel == "sp" else \
        WeisfeilerLehman(n_iter=params.get("h", 3), base_graph_kernel=base, normalize=True)
elif kernel == "graphhopper":
    onehot = np.eye(int(g.node_labels.max()) + 1)
    graphs = [Graph(adjacency(x), node_labels={v: onehot[l] for v, l in enumerate(x.node_labels)}) for x in g]
    est = GraphHopper(kernel_type="linear", normalize=True)
elif kernel == "sp_attr":
    gamma = params.get("gamma", 0.1)
    x_all = g.node_attrs
    mean, std = x_all.mean(0), np.where(x_all.std(0) > 0, x_all.std(0), 1.0)
    graphs = [graph(x, {v: (x.node_attrs[v] - mean) / std for v in range(x.n_nodes)}) for x in g]
    est = ShortestPathAttr(metric=lambda a, b: np.exp(-gamma * np.sum((a - b) ** 2)), algorithm_type="dijkstra",
                           normalize=True)
else:
    raise SystemExit(f"GraKeL has no {kernel}")
t = time.perf_counter()
K = est.fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""

CPP_SCRIPT = r"""
import json, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import numpy as np
import kernel_baselines as kb
t = time.perf_counter()
K = np.asarray(kb.compute_shortestpath_dense(sys.argv[2], True))
call_s = time.perf_counter() - t
d = np.sqrt(np.diag(K)); d[d == 0] = 1.0
np.save(sys.argv[3], K / np.outer(d, d))
print(json.dumps({"load_and_gram_s": call_s, "in_process_s": time.perf_counter() - t0}))
"""


def job_for(kernel: str, dataset: str) -> tuple[str, list[str]]:
    path = ROOT / "jobs" / f"{dataset.lower()}-{kernel}.yaml"
    if path.exists():
        return str(path.relative_to(ROOT)), []
    return f"jobs/enzymes-{kernel}.yaml", ["--set", f"dataset.name={dataset}"]


def job_params(job: str, sets: list[str]) -> dict:
    from gramdist.jobs import load_job

    return dict(load_job(ROOT / job, [s for s in sets if s != "--set"]).kernel)


def run_gramdist(kernel: str, dataset: str, store: Path, extra: list[str]) -> dict:
    job, sets = job_for(kernel, dataset)
    r = run_measured(gramdist_cmd("run", job, *sets, *extra, "--out", str(store), "--overwrite", "--quiet",
                                  "--json"))
    if r["returncode"]:
        raise SystemExit(f"gramdist {kernel} {dataset} failed:\n{r['stderr'][-3000:]}")
    t = last_json_line(r["stdout"])["timings"]
    return {"end_to_end_s": r["wall_s"], "kernel_s": kernel_seconds(t), "timings": t,
            "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"], "job": job, "sets": sets + extra}


def run_grakel(kernel: str, dataset: str, params: dict, out: Path, timeout: int) -> dict:
    cmd = ["timeout", str(timeout), sys.executable, "-c", GRAKEL_SCRIPT, kernel, dataset, str(out), json.dumps(params)]
    r = run_measured(cmd)
    if r["returncode"] == 124:
        return {"timeout_s": timeout, "end_to_end_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"]}
    if r["returncode"]:
        return {"error": r["stderr"][-2000:]}
    return {"kernel_s": last_json_line(r["stdout"])["kernel_s"], "end_to_end_s": r["wall_s"],
            "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"]}


def run_cpp(dataset: str, workdir: Path, out: Path) -> dict | None:
    folder = os.environ.get("GRAMDIST_TUDATASET_BASELINES")
    if not folder:
        return None
    from gramdist.datasets.resolve import resolve_dataset

    src = resolve_dataset(dataset, download=False)
    raw = workdir / "datasets" / dataset / dataset / "raw"  # the layout the C++ reader expects
    raw.mkdir(parents=True, exist_ok=True)
    for f in src.glob(f"{dataset}_*.txt"):
        if not (raw / f.name).exists():
            (raw / f.name).symlink_to(f.resolve())
    r = run_measured([sys.executable, "-c", CPP_SCRIPT, folder, dataset, str(out)], cwd=workdir)
    if r["returncode"]:
        return {"error": r["stderr"][-2000:]}
    inner = last_json_line(r["stdout"])
    return {"end_to_end_s": r["wall_s"], **inner, "peak_total_mb": r["peak_total_mb"]}


def bench(kernel: str, dataset: str, workdir: Path, args: argparse.Namespace) -> dict:
    from gramdist import open_gram

    extra = ["--set", "kernel.with_labels=false"] if kernel == "sp_attr" else []
    store = workdir / f"{dataset}-{kernel}.zarr"
    row = {"kernel": kernel, "dataset": dataset, "gramdist": run_gramdist(kernel, dataset, store, extra)}
    k_ours = np.asarray(open_gram(store)[0])
    job, sets = job_for(kernel, dataset)
    params = job_params(job, sets)
    if kernel not in {"hgk_sp", "hgk_wl"}:
        gk_out = workdir / f"{dataset}-{kernel}-grakel.npy"
        row["grakel"] = run_grakel(kernel, dataset, params, gk_out, args.grakel_timeout)
        if "kernel_s" in row["grakel"]:
            row["max_abs_difference_grakel"] = float(np.max(np.abs(k_ours - np.load(gk_out))))
            row["kernel_speedup_grakel"] = row["grakel"]["kernel_s"] / row["gramdist"]["kernel_s"]
    if kernel == "sp":
        cpp_out = workdir / f"{dataset}-cpp.npy"
        cpp = run_cpp(dataset, workdir, cpp_out)
        if cpp is not None:
            row["cpp"] = cpp
            if "load_and_gram_s" in cpp:
                k_cpp = np.load(cpp_out)
                row["correlation_cpp"] = float(np.corrcoef(k_ours.ravel(), k_cpp.ravel())[0, 1])
                row["end_to_end_speedup_cpp"] = cpp["end_to_end_s"] / row["gramdist"]["end_to_end_s"]
                row["speedup_cpp_call_vs_gramdist_end_to_end"] = cpp["load_and_gram_s"] / row["gramdist"]["end_to_end_s"]
    return row


def medians(runs: list[dict]) -> dict:
    """One row from repeated runs of :func:`bench`: each tool's median times, and the speed-ups
    recomputed from those medians (the runs alternate the tools, so a drift hits them all)."""
    row = dict(runs[-1])
    for tool in ("gramdist", "grakel", "cpp"):
        if tool in row:
            row[tool] = median_of_runs([r[tool] for r in runs])
    ours = row["gramdist"]
    if "kernel_speedup_grakel" in row:
        row["kernel_speedup_grakel"] = row["grakel"]["kernel_s"] / ours["kernel_s"]
    if "end_to_end_speedup_cpp" in row:
        row["end_to_end_speedup_cpp"] = row["cpp"]["end_to_end_s"] / ours["end_to_end_s"]
        row["speedup_cpp_call_vs_gramdist_end_to_end"] = row["cpp"]["load_and_gram_s"] / ours["end_to_end_s"]
    return row


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "—" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernels", nargs="+", default=["sp", "wlsp", "graphhopper", "sp_attr", "hgk_sp", "hgk_wl"])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--attr-datasets", nargs="+", default=["ENZYMES", "PROTEINS"],
                    help="datasets for the node-attribute kernels (sp_attr, hgk_*)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--grakel-timeout", type=int, default=1800)
    args = ap.parse_args()
    cases = [(kernel, ds) for kernel in args.kernels
             for ds in (args.attr_datasets if kernel in ATTR_KERNELS else args.datasets)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kernel, ds in cases:
            runs = [bench(kernel, ds, Path(tmp), args) for _ in range(args.repeats)]
            rows.append(medians(runs))
            save_rows("shortest_path", rows, len(cases))
            print(f"{kernel} {ds}: done", file=sys.stderr)
    print("| kernel | dataset | gramdist end to end (s) | gramdist kernel phase (s) | GraKeL kernel phase (s) "
          "| speed-up (kernel phases) | max abs diff vs GraKeL | gramdist peak MB (all processes) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        g, gk = r["gramdist"], r.get("grakel", {})
        gk_s = (f"timeout ({gk['timeout_s']} s)" if "timeout_s" in gk else
                ("error" if "error" in gk else fmt(gk.get("kernel_s"))))
        print(f"| {r['kernel']} | {r['dataset']} | {g['end_to_end_s']:.2f} | {g['kernel_s']:.2f} | {gk_s if gk else 'n/a'} | "
              f"{fmt(r.get('kernel_speedup_grakel'), '.1f')} | {fmt(r.get('max_abs_difference_grakel'), '.1e')} | "
              f"{g['peak_total_mb']:.0f} |")
    cpp_rows = [r for r in rows if "cpp" in r and "load_and_gram_s" in r["cpp"]]
    if cpp_rows:
        print()
        print("| dataset | gramdist end to end (s) | C++ end to end (s) | C++ load + Gram call (s) | speed-up end to end "
              "| correlation of the Grams |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in cpp_rows:
            print(f"| {r['dataset']} | {r['gramdist']['end_to_end_s']:.2f} | {r['cpp']['end_to_end_s']:.2f} | "
                  f"{r['cpp']['load_and_gram_s']:.2f} | {r['end_to_end_speedup_cpp']:.1f}x | {r['correlation_cpp']:.4f} |")


if __name__ == "__main__":
    main()
