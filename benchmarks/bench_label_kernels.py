"""Label-based kernels (WL edge, WL-OA, vertex/edge histograms, neighbourhood hash, Hadamard
code, propagation) on NCI1 and DD: gramdist through its CLI vs GraKeL, in one run.

    python benchmarks/bench_label_kernels.py [--datasets NCI1 DD] [--kernels wloa nh ...]
                                             [--attr-datasets ENZYMES PROTEINS] [--timeout 1800]

For each (kernel, dataset), each tool in a fresh process:

* gramdist end to end: ``gramdist run`` of the kernel's job file with ``dataset.name`` set
  (interpreter start, imports, reading, LocalCluster start-up, Zarr writes), peak memory of the
  process tree; kernel phase = fit + embed + tiles from the run's JSON timings;
* GraKeL: its kernel's ``fit_transform`` timed inside its process on graphs already converted
  (the kernel phase), and the wall time of the whole process (end to end); a run longer than
  ``--timeout`` seconds (30 minutes by default) is stopped and reported as a timeout;
* WL-OA also against the TUDataset C++ ``compute_wloa_dense`` (load + dense Gram, one process),
  when the folder holding its ``kernel_baselines`` module is named by the environment variable
  GRAMDIST_TUDATASET_BASELINES.

Both sides compute the same definition with the same parameters (GraKeL's iteration counts
translated: WL-OA ``n_iter = h``, Hadamard ``n_iter = h + 1``, propagation ``t_max + 1``) and
cosine-normalised Grams; the script reports the largest absolute difference of the two Grams.
It is 0 up to rounding where the definitions agree exactly; the known differences, documented
in the kernels' docstrings, are isolated nodes (NCI1 has 428: GraKeL drops them from WL-OA and
from Hadamard's iterations >= 1) and the randomised kernels (neighbourhood hash, propagation),
whose random bit labels / projections differ between the tools, so their Grams are not
compared entry by entry (``n/a``; the tests compare them exactly with our random draws injected
into GraKeL). GraKeL's ``NeighborhoodHash`` raises on isolated nodes, so it is given the graphs
without them (NCI1: 428 of 122,747 nodes). Results go to
``benchmarks/results/label_kernels.json`` and Markdown tables are printed.
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
from common import ROOT, gramdist_cmd, kernel_seconds, last_json_line, run_measured, save, this_command  # noqa: E402

# kernel -> job file, gramdist --set overrides, GraKeL class and parameters (normalize=True added),
# GraKeL input form, whether the Grams must agree entry by entry
KERNELS: dict[str, dict] = {
    "vertex_histogram": {"job": "mutag-vertex_histogram.yaml", "set": [],
                         "grakel": ("VertexHistogram", {}), "input": "labelled", "exact": True},
    "edge_histogram": {"job": "mutag-edge_histogram.yaml", "set": [],
                       "grakel": ("EdgeHistogram", {}), "input": "edge_labelled", "exact": True},
    "wl_edge": {"job": "mutag-wl_edge.yaml", "set": ["kernel.h=5"], "grakel": None, "exact": False},
    "wloa": {"job": "mutag-wloa.yaml", "set": ["kernel.h=5"],
             "grakel": ("WeisfeilerLehmanOptimalAssignment", {"n_iter": 5}), "input": "labelled",
             "exact": True},
    "nh": {"job": "mutag-nh.yaml", "set": ["kernel.R=3", "kernel.nh_type=simple", "kernel.bits=8"],
           "grakel": ("NeighborhoodHash", {"R": 3, "nh_type": "simple", "bits": 8, "random_state": 0}),
           "input": "no_isolated", "exact": False},
    "hadamard": {"job": "mutag-hadamard.yaml", "set": ["kernel.h=4"],
                 "grakel": ("HadamardCode", {"n_iter": 5}), "input": "pairs", "exact": True},
    "propagation": {"job": "mutag-propagation.yaml", "set": ["kernel.t_max=4", "kernel.w=0.01"],
                    "grakel": ("Propagation", {"t_max": 5, "w": 0.01, "M": "TV", "random_state": 0}),
                    "input": "labelled", "exact": False},
    "propagation_attr": {"job": "enzymes-propagation_attr.yaml",
                         "set": ["kernel.t_max=4", "kernel.w=4.0", "kernel.hashing=per_dimension"],
                         "grakel": ("PropagationAttr", {"t_max": 5, "w": 4.0, "M": "L1", "random_state": 0}),
                         "input": "attributed", "exact": False, "attributes": True},
}
TILE = {"NCI1": 1028, "DD": 256}

GRAKEL_SCRIPT = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import numpy as np
from gramdist.datasets import load_dataset
name, cls, params, kind, out = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
g = load_dataset({"name": name, "node_attributes": "all"} if kind == "attributed" else name)
from grakel import Graph
import grakel.kernels
graphs = []
for x in g:
    adj = {v: [] for v in range(x.n_nodes)}
    for u, v in x.edges.tolist():
        adj[u].append(v)
        if u != v:
            adj[v].append(u)
    if kind == "attributed":
        graphs.append(Graph(adj, node_labels={v: x.node_attrs[v].copy() for v in range(x.n_nodes)},
                            graph_format="dictionary"))
        continue
    labels = {v: int(lab) for v, lab in enumerate(x.node_labels)}
    if kind == "no_isolated":  # NeighborhoodHash raises on isolated nodes: leave them out
        adj = {v: n for v, n in adj.items() if n}
        labels = {v: labels[v] for v in adj}
        graphs.append(Graph(adj, node_labels=labels, graph_format="dictionary"))
    elif kind == "pairs":  # HadamardCode raises on Graph objects
        graphs.append([adj, labels])
    elif kind == "edge_labelled":  # one entry per undirected edge, as gramdist counts them
        elab = [0] * len(x.edges) if x.edge_labels is None else x.edge_labels.tolist()
        el = {(u, v): int(lab) for (u, v), lab in zip(x.edges.tolist(), elab)}
        graphs.append(Graph(list(el), node_labels=labels, edge_labels=el))
    else:
        graphs.append(Graph(adj, node_labels=labels, graph_format="dictionary"))
t = time.perf_counter()
K = getattr(grakel.kernels, cls)(normalize=True, **params).fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""

TUDATASET_SCRIPT = r"""
import json, os, sys, time
folder, name, h, out, work = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
t0 = time.perf_counter()
sys.path.insert(0, folder)
import numpy as np
import kernel_baselines as kb
os.chdir(work)
t = time.perf_counter()
K = np.asarray(kb.compute_wloa_dense(name, h, True, False), dtype=np.float64)
kernel_s = time.perf_counter() - t
d = np.sqrt(np.diag(K))
with np.errstate(divide="ignore", invalid="ignore"):
    K = np.nan_to_num(K / np.outer(d, d))
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""


def timed(cmd: list[str], timeout: int) -> dict:
    """``run_measured`` under coreutils ``timeout``: exit status 124 is a timeout."""
    r = run_measured(["timeout", str(timeout), *cmd])
    r["timed_out"] = r["returncode"] == 124
    return r


def ours(kernel: str, dataset: str, workdir: Path) -> dict:
    spec = KERNELS[kernel]
    store = workdir / f"{dataset}-{kernel}.zarr"
    sets = [f"dataset.name={dataset}", *spec["set"]]
    if dataset in TILE:
        sets.append(f"gram.tile_size={TILE[dataset]}")
    args = ["run", str(ROOT / "jobs" / spec["job"]), "--out", str(store), "--overwrite", "--quiet", "--json"]
    for s in sets:
        args += ["--set", s]
    r = run_measured(gramdist_cmd(*args))
    if r["returncode"]:
        raise SystemExit(r["stderr"])
    t = last_json_line(r["stdout"])["timings"]
    from gramdist import open_gram

    return {"end_to_end_s": r["wall_s"], "kernel_s": kernel_seconds(t),
            "timings": t, "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"],
            "gram": np.asarray(open_gram(store)[0])}


def grakel(kernel: str, dataset: str, workdir: Path, timeout: int) -> dict | None:
    spec = KERNELS[kernel]
    if spec["grakel"] is None:
        return None
    out = workdir / f"{dataset}-{kernel}-grakel.npy"
    cls, params = spec["grakel"]
    r = timed([sys.executable, "-c", GRAKEL_SCRIPT, dataset, cls, json.dumps(params), spec["input"], str(out)],
              timeout)
    if r["timed_out"]:
        return {"timed_out": True, "end_to_end_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"]}
    if r["returncode"]:
        return {"error": r["stderr"][-500:], "end_to_end_s": r["wall_s"]}
    return {"end_to_end_s": r["wall_s"], "kernel_s": last_json_line(r["stdout"])["kernel_s"],
            "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"], "gram": np.load(out)}


def tudataset_wloa(dataset: str, workdir: Path, timeout: int) -> dict | None:
    """TUDataset C++ ``compute_wloa_dense`` (h = 5), when its module folder is configured."""
    folder = os.environ.get("GRAMDIST_TUDATASET_BASELINES")
    if not folder:
        return None
    src = Path(os.environ.get("GRAMDIST_DATA", ROOT.parent / "shared" / "datasets")) / dataset
    raw = workdir / "tud" / "datasets" / dataset / dataset / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    for f in src.glob(f"{dataset}_*.txt"):
        if not (raw / f.name).exists():
            (raw / f.name).symlink_to(f.resolve())
    out = workdir / f"{dataset}-wloa-tud.npy"
    r = timed([sys.executable, "-c", TUDATASET_SCRIPT, folder, dataset, "5", str(out), str(workdir / "tud")], timeout)
    if r["timed_out"]:
        return {"timed_out": True, "end_to_end_s": r["wall_s"]}
    if r["returncode"]:
        return {"error": r["stderr"][-500:], "end_to_end_s": r["wall_s"]}
    return {"end_to_end_s": r["wall_s"], "kernel_s": last_json_line(r["stdout"])["kernel_s"],
            "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"], "gram": np.load(out)}


def isolated_nodes(dataset: str) -> int:
    """Nodes without neighbours in ``dataset`` (where GraKeL's WL-OA and Hadamard code differ)."""
    from gramdist.datasets import load_dataset

    g = load_dataset(dataset)
    return int(np.count_nonzero(np.bincount(g.global_edges.ravel(), minlength=g.n_nodes) == 0))


def bench(kernel: str, dataset: str, workdir: Path, timeout: int) -> dict:
    row: dict = {"kernel": kernel, "dataset": dataset}
    mine = ours(kernel, dataset, workdir)
    theirs = grakel(kernel, dataset, workdir, timeout)
    k_ours = mine.pop("gram")
    row["gramdist"] = mine
    if theirs is not None:
        k_theirs = theirs.pop("gram", None)
        row["grakel"] = theirs
        if "kernel_s" in theirs:
            row["kernel_speedup"] = theirs["kernel_s"] / mine["kernel_s"]
            row["end_to_end_speedup"] = theirs["end_to_end_s"] / mine["end_to_end_s"]
            row["max_abs_difference"] = (float(np.max(np.abs(k_ours - k_theirs))) if KERNELS[kernel]["exact"]
                                         else None)
            row["isolated_nodes"] = isolated_nodes(dataset)
    if kernel == "wloa":
        tud = tudataset_wloa(dataset, workdir, timeout)
        if tud is not None:
            k_tud = tud.pop("gram", None)
            row["tudataset"] = tud
            if "end_to_end_s" in tud and k_tud is not None:
                row["tudataset_end_to_end_speedup"] = tud["end_to_end_s"] / mine["end_to_end_s"]
                row["tudataset_max_abs_difference"] = float(np.max(np.abs(k_ours - k_tud)))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--attr-datasets", nargs="+", default=["ENZYMES", "PROTEINS"],
                    help="datasets for propagation_attr (NCI1 and DD have no node attributes)")
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    ap.add_argument("--timeout", type=int, default=1800, help="seconds each GraKeL run may take")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kernel in args.kernels:
            datasets = args.attr_datasets if KERNELS[kernel].get("attributes") else args.datasets
            for ds in datasets:
                rows.append(bench(kernel, ds, Path(tmp), args.timeout))
                print(f"{kernel} {ds}: done", file=sys.stderr)
    save("label_kernels", {"command": this_command(),
                           "results": rows})
    print("| kernel | dataset | tool | end to end (s) | kernel phase (s) | peak memory, all processes (MB) |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        for tool in ("gramdist", "grakel", "tudataset"):
            x = r.get(tool)
            if x is None:
                continue
            if x.get("timed_out"):
                print(f"| {r['kernel']} | {r['dataset']} | {tool} | timeout (> {args.timeout} s) | | |")
            elif "error" in x:
                print(f"| {r['kernel']} | {r['dataset']} | {tool} | error: {x['error'].splitlines()[-1]} | | |")
            else:
                print(f"| {r['kernel']} | {r['dataset']} | {tool} | {x['end_to_end_s']:.2f} | "
                      f"{x['kernel_s']:.2f} | {x.get('peak_total_mb', float('nan')):.0f} |")
    print()
    print("| kernel | dataset | kernel-phase speed-up | end-to-end speed-up | "
          "max abs difference of the normalised Grams |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        if "kernel_speedup" in r:
            diff = r["max_abs_difference"]
            note = ""
            if diff is not None and diff > 1e-12 and r.get("isolated_nodes"):
                note = f" ({r['isolated_nodes']} isolated nodes: GraKeL drops them, see the kernel's docstring)"
            print(f"| {r['kernel']} | {r['dataset']} | {r['kernel_speedup']:.1f}x | {r['end_to_end_speedup']:.1f}x | "
                  f"{'n/a (random)' if diff is None else f'{diff:.1e}'}{note} |")
        if "tudataset_end_to_end_speedup" in r:
            k_tud = r["tudataset"]["kernel_s"] / r["gramdist"]["kernel_s"]
            print(f"| {r['kernel']} | {r['dataset']} vs TUDataset C++ (load + Gram) | {k_tud:.1f}x | "
                  f"{r['tudataset_end_to_end_speedup']:.1f}x | {r['tudataset_max_abs_difference']:.1e} "
                  "(its colours collide for small label values, see wloa/kernel.py) |")


if __name__ == "__main__":
    main()
