"""WWL, pyramid match, Lovász θ, SVM-θ and the core framework: gramdist vs GraKeL (and the WWL
authors' package), end to end.

    python benchmarks/bench_global.py [--datasets NCI1 DD] [--kernels wwl pyramid_match ...]
                                      [--limit-s 1800] [--repeats 1]

For each dataset and kernel, each tool runs in a fresh process:

* gramdist: ``gramdist run`` on a job file written for the run (end to end: interpreter,
  imports, reading, the LocalCluster, the store), its kernel phase = fit + embed + tiles
  from the run's JSON timings;
* the reference: its kernel phase (``fit_transform`` on graphs already read and converted)
  timed inside its process, and its end-to-end wall time; killed after ``--limit-s``
  seconds (30 minutes by default) and reported as a timeout.

``--repeats N`` runs the two tools N times each, in turn (ours, the reference, ours, ...), and
reports the median of each time and the largest peak memory; a timeout or an error is not
repeated.

References and what is compared (see each kernel's docstring for why they differ):

* ``wwl`` (categorical, h = 3): the authors' ``wwl`` package (``pairwise_wasserstein_distance``,
  one ``ot.emd2`` per pair), distances compared (exp(-D) on both sides).
* ``pyramid_match`` (L = 4, d = 6, labels): GraKeL ``PyramidMatch(L=5, d=6)``; GraKeL sums its
  levels inside its level loop, so values differ by definition (no agreement figure).
* ``svm_theta``: GraKeL ``SvmTheta`` (libsvm with ν = 0.5, only the size-2 feature enters its
  kernel): timing only.
* ``lovasz_theta``: GraKeL ``LovaszTheta`` (cvxopt; complement graph's SDP): timing only; not
  run on D&D, whose graphs exceed any reasonable SDP size (ours refuses above ``max_nodes``).
* ``core`` (base WL, h = 5): GraKeL ``CoreFramework(WeisfeilerLehman(n_iter=5))``, Grams
  compared (equal on MUTAG, PTC_MR, ENZYMES in the tests).

Results go to ``benchmarks/results/global.json`` and a Markdown table is printed. Timings are
only meaningful on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    DATASET_TILES,
    gramdist_cmd,
    kernel_seconds,
    last_json_line,
    median_of_runs,
    run_measured,
    save_rows,
)

KERNELS = {
    "wwl": {"name": "wwl", "h": 3, "gamma": 1.0, "node_features": "categorical", "psd_check": 0},
    "pyramid_match": {"name": "pyramid_match", "L": 4, "d": 6, "labels": True},
    "svm_theta": {"name": "svm_theta", "n_samples": 50, "subset_sizes": [2, 8], "base_kernel": "linear"},
    "lovasz_theta": {"name": "lovasz_theta", "n_samples": 50, "subset_sizes": [2, 8], "base_kernel": "linear"},
    "core": {"name": "core", "base": {"name": "wl", "h": 5}},
}
#: (kernel, dataset) pairs not run, with the reason printed in the table
SKIP = {("lovasz_theta", "DD"): "graphs up to 5,748 nodes: the Lovász SDP is out of reach for both tools"}

REFERENCE_SCRIPT = r"""
import json, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
name, kernel, out, here = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
sys.path.insert(0, here)
from gramdist.datasets import load_dataset
g = load_dataset(name)
if kernel == "wwl":
    import igraph as ig
    import wwl
    graphs = []
    for x in g:
        G = ig.Graph(n=x.n_nodes, edges=[tuple(map(int, e)) for e in x.edges])
        G.vs["label"] = [str(int(v)) for v in x.node_labels]
        graphs.append(G)
    t = time.perf_counter()
    K = np.exp(-wwl.pairwise_wasserstein_distance(graphs, num_iterations=3))
else:
    from common import grakel_labelled_graphs
    from grakel.kernels import (CoreFramework, LovaszTheta, PyramidMatch, SvmTheta, VertexHistogram,
                                WeisfeilerLehman)
    graphs = grakel_labelled_graphs(g)
    make = {"pyramid_match": lambda: PyramidMatch(L=5, d=6, with_labels=True),
            "svm_theta": lambda: SvmTheta(random_state=0),
            "lovasz_theta": lambda: LovaszTheta(random_state=0),
            "core": lambda: CoreFramework(base_graph_kernel=(WeisfeilerLehman, {"n_iter": 5,
                                                                                "base_graph_kernel": VertexHistogram}))}
    t = time.perf_counter()
    K = make[kernel]().fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""

#: which kernels' Grams are comparable with the reference's (un-normalised)
COMPARABLE = {"wwl", "core"}


def bench(dataset: str, kernel: str, workdir: Path, limit_s: int, reference: bool = True, repeats: int = 1) -> dict:
    row: dict = {"dataset": dataset, "kernel": kernel, "params": KERNELS[kernel]}
    if (kernel, dataset) in SKIP:
        row["skipped"] = SKIP[kernel, dataset]
        return row
    job = {"dataset": {"name": dataset}, "kernel": KERNELS[kernel], "fit": {"seed": 0},
           "gram": {"tile_size": DATASET_TILES.get(dataset, 256), "normalize": False}}  # the dataset's jobs' tiles
    job_path = workdir / f"{dataset.lower()}-{kernel}.yaml"
    job_path.write_text(yaml.safe_dump(job))
    store = workdir / f"{dataset}-{kernel}.zarr"
    tool = "wwl package" if kernel == "wwl" else "grakel"
    row["reference"] = tool
    ref_out = workdir / f"{dataset}-{kernel}-ref.npy"
    ours_runs, ref_runs = [], []
    for _ in range(repeats):  # in turn, so that a drift of the machine's speed hits both
        ours_runs.append(_ours(job_path, store, limit_s))
        if reference:
            ref_runs.append(_reference(dataset, kernel, ref_out, limit_s))
        if any("timeout_s" in r or "error" in r for r in ours_runs + ref_runs):
            break  # a timeout or an error is the figure: not repeated
    row["gramdist"] = median_of_runs(ours_runs)
    if not ref_runs:  # --gramdist-only: the reference's figure comes from an earlier run
        return row
    row[tool] = median_of_runs(ref_runs)
    if "kernel_s" in row["gramdist"] and "kernel_s" in row[tool]:
        row["kernel_speedup"] = row[tool]["kernel_s"] / row["gramdist"]["kernel_s"]
        row["end_to_end_speedup"] = row[tool]["end_to_end_s"] / row["gramdist"]["end_to_end_s"]
        if kernel in COMPARABLE:
            from gramdist import open_gram

            row["max_abs_difference"] = float(np.max(np.abs(np.asarray(open_gram(store)[0]) - np.load(ref_out))))
    return row


def _ours(job_path: Path, store: Path, limit_s: int) -> dict:
    ours = run_measured(["timeout", str(limit_s), *gramdist_cmd("run", str(job_path), "--out", str(store),
                                                                "--overwrite", "--quiet", "--json")])
    if ours["returncode"] == 124:
        return {"timeout_s": limit_s}
    if ours["returncode"]:
        raise SystemExit(ours["stderr"])
    t = last_json_line(ours["stdout"])["timings"]
    return {"end_to_end_s": ours["wall_s"], "kernel_s": kernel_seconds(t), "timings": t,
            "peak_total_mb": ours["peak_total_mb"], "peak_process_mb": ours["peak_process_mb"]}


def _reference(dataset: str, kernel: str, ref_out: Path, limit_s: int) -> dict:
    theirs = run_measured(["timeout", str(limit_s), sys.executable, "-c", REFERENCE_SCRIPT, dataset, kernel,
                           str(ref_out), str(Path(__file__).resolve().parent)])
    if theirs["returncode"] == 124:
        return {"timeout_s": limit_s}
    if theirs["returncode"]:
        return {"error": theirs["stderr"].strip().splitlines()[-1] if theirs["stderr"].strip() else "failed"}
    return {"end_to_end_s": theirs["wall_s"], "kernel_s": last_json_line(theirs["stdout"])["kernel_s"],
            "peak_total_mb": theirs["peak_total_mb"], "peak_process_mb": theirs["peak_process_mb"]}


def _fmt(x: dict, key: str) -> str:
    if "timeout_s" in x:
        return f"timeout ({x['timeout_s']} s)"
    if "error" in x:
        return "error"
    return f"{x[key]:.2f}" if key in x else "–"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    ap.add_argument("--limit-s", type=int, default=1800, help="time limit per run (default 30 minutes)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each tool, in turn; the medians are reported (every run's kept in the JSON)")
    ap.add_argument("--gramdist-only", action="store_true",
                    help="run gramdist alone (a reference's figure, e.g. a 30-minute timeout, kept from an earlier run)")
    args = ap.parse_args()
    rows = []
    cases = [(ds, kernel) for ds in args.datasets for kernel in args.kernels]
    with tempfile.TemporaryDirectory() as tmp:
        for ds, kernel in cases:
            rows.append(bench(ds, kernel, Path(tmp), args.limit_s, not args.gramdist_only, args.repeats))
            save_rows("global", rows, len(cases))
            print(f"{ds} {kernel}: done", file=sys.stderr)
    print("| dataset | kernel | tool | end to end (s) | kernel phase (s) | peak memory, all processes (MB) |")
    print("|---|---|---|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| {r['dataset']} | {r['kernel']} | – | skipped: {r['skipped']} | | |")
            continue
        for tool in ("gramdist", r["reference"]):
            x = r.get(tool, {})
            mem = f"{x['peak_total_mb']:.0f}" if "peak_total_mb" in x else "–"
            print(f"| {r['dataset']} | {r['kernel']} | {tool} | {_fmt(x, 'end_to_end_s')} | {_fmt(x, 'kernel_s')} | {mem} |")
    print()
    print("| dataset | kernel | kernel-phase speed-up | end-to-end speed-up | max abs difference of the Grams |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        if "kernel_speedup" in r:
            diff = f"{r['max_abs_difference']:.1e}" if "max_abs_difference" in r else "n/a (different definitions)"
            print(f"| {r['dataset']} | {r['kernel']} | {r['kernel_speedup']:.1f}x | {r['end_to_end_speedup']:.1f}x | {diff} |")
    print(json.dumps({"rows": len(rows)}), file=sys.stderr)


if __name__ == "__main__":
    main()
