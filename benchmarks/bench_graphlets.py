"""Graphlet kernel: gramdist end to end against GraKeL and the TUDataset C++ baseline.

    python benchmarks/bench_graphlets.py [--datasets NCI1 DD] [--variants connected5 labelled3]
                                         [--grakel-timeout 1800] [--tudataset PATH] [--repeats 1]

Variants (each on every dataset, each tool in a fresh process):

* ``connected5``: counts of the connected graphlets of 5 nodes, cosine-normalised
  (``jobs/<ds>-graphlet.yaml``) against GraKeL's ``GraphletSampling(k=5, normalize=True)``
  (its exact mode). GraKeL's counts differ on purpose (its ConSubg misses some sets and its
  binning adds 1 to classes first seen in earlier graphs, see ``kernels/graphlets/kernel.py``)
  and its Gram has NaN rows for graphs without a 5-node graphlet: the table gives the largest
  difference over the entries where GraKeL's value is finite, and the number of non-finite ones.
* ``labelled3``: the TUDataset baselines' labelled 3-node graphlets (``--set kernel.k=3
  kernel.use_labels=true``) against ``kernel_baselines.compute_graphlet_dense(ds, True,
  False)`` (load + Gram timed inside a fresh process; its Gram normalised here). Where a
  triangle and a wedge share a label sequence the C++ merges their features (no shape tag):
  the differences are reported, not hidden. GraKeL has no labelled graphlet kernel.
* ``all5`` / ``sampled5`` (optional): the paper's all-graphlet frequencies of 5 nodes, exact,
  and sampled with its bound (epsilon = delta = 0.1, 5,174 samples per graph), gramdist only.

gramdist: ``gramdist run`` (interpreter, LocalCluster, Zarr writes included) — wall time, peak
memory of the process tree, and the kernel phase (fit + embed + tiles from its JSON timings).
GraKeL: its kernel phase (``fit_transform`` on graphs already converted) timed inside its
process, the whole process under ``timeout --grakel-timeout`` (a timeout is reported as such).
``--repeats N``: gramdist and the C++ baseline are run N times each, in turn (gramdist, C++,
gramdist, ...), and the table gives the median of each and the ratio of the medians (every run
is in the JSON); GraKeL runs once. Results: ``benchmarks/results/graphlets.json`` and Markdown
tables on stdout. Timings taken on a
shared machine are indicative only; the lead's figures come from a quiet one.

``bench_randomwalk.py`` and ``bench_csm.py`` reuse the helpers of this file.
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
    save,
    this_command,
)

#: GraKeL's graphs from a dataset: node labels, edge labels when ``edge_labels`` (else none)
GRAKEL_PRELUDE = r"""
import json, sys, time, warnings
import numpy as np
warnings.filterwarnings("ignore")
from gramdist.datasets import load_dataset
from grakel import Graph
name, out = sys.argv[1], sys.argv[2]
g = load_dataset(name)
def grakel_graphs(batch, edge_labels=False):
    graphs = []
    for x in batch:
        adj = {v: [] for v in range(x.n_nodes)}
        el = {}
        labels = x.edge_labels if x.edge_labels is not None else np.zeros(len(x.edges), np.int64)
        for (u, v), lab in zip(x.edges.tolist(), labels.tolist()):
            adj[u].append(v)
            el[(u, v)] = int(lab)
            if u != v:
                adj[v].append(u)
                el[(v, u)] = int(lab)
        nl = {v: int(l) for v, l in enumerate(x.node_labels)}
        graphs.append(Graph(adj, node_labels=nl, edge_labels=el if edge_labels else None,
                            graph_format="dictionary"))
    return graphs
"""

GRAKEL_GRAPHLET = GRAKEL_PRELUDE + r"""
from grakel.kernels import GraphletSampling
graphs = grakel_graphs(g)
t = time.perf_counter()
K = GraphletSampling(k=5, normalize=True).fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""

CPP_GRAPHLET = r"""
import json, os, sys, time
t0 = time.perf_counter()
lib, work, name, out = sys.argv[1:5]
sys.path.insert(0, lib)
import numpy as np
import kernel_baselines as kb
os.chdir(work)
t = time.perf_counter()
K = kb.compute_graphlet_dense(name, True, False)
kernel_s = time.perf_counter() - t
np.save(out, np.asarray(K, dtype=np.float64))
print(json.dumps({"kernel_s": kernel_s}))
"""


# ------------------------------------------------------------------ helpers (shared)
def run_gramdist(job: str, sets: list[str], store: Path) -> dict:
    """``gramdist run job --set ...`` in a fresh process: wall time, peak memory, JSON timings."""
    args = ["run", job, "--out", str(store), "--overwrite", "--quiet", "--json"]
    for s in sets:
        args += ["--set", s]
    r = run_measured(gramdist_cmd(*args))
    if r["returncode"]:
        return {"error": r["stderr"][-2000:]}
    t = last_json_line(r["stdout"])["timings"]
    return {"end_to_end_s": r["wall_s"], "kernel_s": kernel_seconds(t),
            "timings": t, "peak_total_mb": r["peak_total_mb"], "peak_process_mb": r["peak_process_mb"]}


def run_external(script: str, args: list[str], timeout_s: float) -> dict:
    """A Python snippet in a fresh process under ``timeout``; its last JSON line merged in."""
    r = run_measured(["timeout", str(int(timeout_s)), sys.executable, "-c", script, *args])
    if r["returncode"] == 124:
        return {"timeout": True, "end_to_end_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"]}
    if r["returncode"]:
        return {"error": r["stderr"][-2000:], "end_to_end_s": r["wall_s"]}
    out = {"end_to_end_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"],
           "peak_process_mb": r["peak_process_mb"]}
    out.update(last_json_line(r["stdout"]))
    return out


def normalised(k: np.ndarray) -> np.ndarray:
    """Cosine normalisation with 0 where a diagonal entry is not positive (gramdist's rule)."""
    d = np.sqrt(np.clip(np.diag(k), 0, None))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = k / np.outer(d, d)
    out[~(d > 0)] = 0.0
    out[:, ~(d > 0)] = 0.0
    return out


def differences(ours: np.ndarray, theirs: np.ndarray) -> dict:
    """Largest difference over the entries where ``theirs`` is finite, and how many are not."""
    finite = np.isfinite(theirs)
    diff = np.abs(ours - np.where(finite, theirs, 0.0))[finite]
    return {"max_abs_difference": float(diff.max()) if diff.size else 0.0,
            "non_finite_in_reference": int((~finite).sum())}


def open_store(store: Path) -> np.ndarray:
    from gramdist import open_gram

    return np.asarray(open_gram(store)[0])


def print_rows(rows: list[dict]) -> None:
    print("| dataset | variant | tool | end to end (s) | kernel phase (s) | peak memory, all processes (MB) |"
          " speed-up (end to end) | max abs difference | note |")
    print("|---|---|---|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ours = r["gramdist"]
        for tool in ["gramdist", *[t for t in ("grakel", "tudataset") if t in r]]:
            x = r[tool]
            if "timeout" in x:
                print(f"| {r['dataset']} | {r['variant']} | {tool} | timeout ({x['end_to_end_s']:.0f}) | — | "
                      f"{x.get('peak_total_mb', 0):.0f} | > {x['end_to_end_s'] / ours['end_to_end_s']:.1f}x | — | |")
                continue
            if "error" in x:
                print(f"| {r['dataset']} | {r['variant']} | {tool} | error | — | — | — | — | "
                      f"{x['error'].strip().splitlines()[-1][:80] if x['error'].strip() else ''} |")
                continue
            speed = "" if tool == "gramdist" else f"{x['end_to_end_s'] / ours['end_to_end_s']:.1f}x"
            diff = "" if tool == "gramdist" else f"{x.get('max_abs_difference', float('nan')):.1e}"
            note = x.get("note", "")
            print(f"| {r['dataset']} | {r['variant']} | {tool} | {x['end_to_end_s']:.2f} | {x.get('kernel_s', 0):.2f} | "
                  f"{x.get('peak_total_mb', 0):.0f} | {speed} | {diff} | {note} |")


# ------------------------------------------------------------------ this benchmark
VARIANTS = {
    "connected5": ["kernel.k=5", "kernel.graphlets=connected", "kernel.values=count", "kernel.method=exact"],
    "labelled3": ["kernel.k=3", "kernel.graphlets=connected", "kernel.values=count", "kernel.method=exact",
                  "kernel.use_labels=true"],
    "all5": ["kernel.k=5", "kernel.graphlets=all", "kernel.values=frequency", "kernel.method=exact"],
    "sampled5": ["kernel.k=5", "kernel.graphlets=all", "kernel.values=frequency", "kernel.method=sampling"],
}


def bench(dataset: str, variant: str, workdir: Path, grakel_timeout: float, tudataset: str | None,
          repeats: int = 1) -> dict:
    store = workdir / f"{dataset}-{variant}.zarr"
    row = {"dataset": dataset, "variant": variant, "sets": VARIANTS[variant]}
    own = ROOT / "jobs" / f"{dataset.lower()}-graphlet.yaml"  # the dataset's job: its tile size
    job, sets = (str(own), []) if own.is_file() else ("jobs/mutag-graphlet.yaml", [f"dataset.name={dataset}"])
    cpp = variant == "labelled3" and tudataset
    ours_runs, cpp_runs = [], []
    cpp_npy = workdir / f"{dataset}-cpp.npy"
    work = str(Path(tudataset).resolve().parent) if cpp else ""  # the HOWTO's layout: lib/ beside datasets/
    for _ in range(repeats):  # in turn, so that a drift of the machine's speed hits both
        ours_runs.append(run_gramdist(job, [*sets, "gram.normalize=true", *VARIANTS[variant]], store))
        if "error" in ours_runs[-1]:
            raise SystemExit(ours_runs[-1]["error"])
        if cpp:
            cpp_runs.append(run_external(CPP_GRAPHLET, [tudataset, work, dataset, str(cpp_npy)], grakel_timeout))
    row["gramdist"] = median_of_runs(ours_runs)
    ours = open_store(store)
    if variant == "connected5":
        npy = workdir / f"{dataset}-grakel.npy"
        row["grakel"] = run_external(GRAKEL_GRAPHLET, [dataset, str(npy)], grakel_timeout)
        if npy.exists():
            row["grakel"].update(differences(ours, np.load(npy)))
            row["grakel"]["note"] = f"{row['grakel']['non_finite_in_reference']} non-finite entries"
    if cpp:
        row["tudataset"] = median_of_runs(cpp_runs)
        if cpp_npy.exists():
            row["tudataset"].update(differences(ours, normalised(np.load(cpp_npy))))
            row["tudataset"]["note"] = "C++ merges triangles and wedges with one label sequence"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--variants", nargs="+", default=["connected5", "labelled3"], choices=sorted(VARIANTS))
    ap.add_argument("--grakel-timeout", type=float, default=1800.0)
    ap.add_argument("--tudataset", default=os.environ.get("GRAMDIST_TUDATASET_BASELINES"),
                    help="folder of the kernel_baselines module (default $GRAMDIST_TUDATASET_BASELINES)")
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of gramdist and of the C++ baseline, in turn; the table gives medians")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            for v in args.variants:
                rows.append(bench(ds, v, Path(tmp), args.grakel_timeout, args.tudataset, args.repeats))
                print(f"{ds} {v}: done", file=sys.stderr)
    saved = save("graphlets", {"command": this_command(), "results": rows})
    print_rows(rows)
    print(json.dumps({"saved": str(saved)}))


if __name__ == "__main__":
    main()
