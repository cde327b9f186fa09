"""MLG kernel: gramdist through its CLI vs GraKeL's ``MultiscaleLaplacian``, same graphs.

    python benchmarks/bench_mlg.py [--datasets MUTAG PROTEINS] [--levels 2] [--accuracy]
                                   [--grakel-timeout 600]

Both tools get the same graphs with one-hot node-label features (GraKeL's MLG needs vector
node features: it is given exactly the one-hot vectors gramdist builds) and matched
parameters: ``levels`` levels of radius 1, 2, ... (GraKeL's ``L``; gramdist ``levels`` with
``radius: 1``, ``radius_growth: linear``), eta = 0.01 (GraKeL's default ``heta``),
gamma = 0.01, 50 sampled vertices (``n_samples``) and rank 10 (GraKeL's ``P``).

Measured per tool, each in a fresh process:

* end to end: wall time of the whole command (interpreter start, imports, file reading; for
  gramdist also the LocalCluster start-up and the Zarr writes), CPU time of the process tree
  (user + system, workers included: less sensitive than wall time to other load on the
  machine), and peak memory of the process tree (sampled every 20 ms);
* kernel phase: gramdist fit + embed + tiles (from the run's JSON timings); GraKeL
  ``fit_transform`` on graphs already converted to its input format.

GraKeL runs under ``timeout --grakel-timeout`` seconds (default 600): a run cut off is recorded
as timed out, with the speed-ups as lower bounds (``>``) computed from the time limit.

The Grams are not expected to agree entry by entry: the anchors are random samples, GraKeL
drops the 1/2 of the averaged inverse (its K(G, G) = 2^(-P/2)) and also projects the level-0
features. ``--accuracy`` adds a nested-CV accuracy of both Grams (GraKeL's cosine-normalised)
with the protocol of ``gramdist evaluate`` (10 folds, ``--repeats`` repetitions, inner 5-fold
selection of C in 10^-3..10^3) on the same folds. Results go to
``benchmarks/results/mlg.json`` and Markdown tables are printed.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, kernel_seconds, last_json_line, run_measured, save, this_command  # noqa: E402

GRAKEL_SCRIPT = r"""
import json, sys, time
import numpy as np
from gramdist.datasets import load_dataset
name, levels, n_samples, rank, eta, gamma, out = sys.argv[1:8]
g = load_dataset({"name": name, "node_attributes": "none"})
alphabet = np.unique(g.node_labels)
from grakel import Graph
from grakel.kernels import MultiscaleLaplacian
graphs = []
for i in range(len(g)):
    x = g[i]
    adj = np.asarray(x.adjacency().todense())
    np.fill_diagonal(adj, 0)
    feats = {v: (alphabet == lab).astype(float).tolist() for v, lab in enumerate(x.node_labels)}
    graphs.append(Graph(adj, node_labels=feats, graph_format="adjacency"))
t = time.perf_counter()
K = MultiscaleLaplacian(L=int(levels), P=int(rank), n_samples=int(n_samples), heta=float(eta), gamma=float(gamma),
                        random_state=0).fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""


def measured(cmd: list[str], allow_timeout: bool = False) -> dict:
    """:func:`run_measured` plus the CPU seconds of the process tree (user + system).

    With ``allow_timeout``, exit status 124 (coreutils ``timeout``) is returned as
    ``timed_out: True`` instead of aborting the benchmark.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run_measured(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out["cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    out["timed_out"] = allow_timeout and out["returncode"] == 124
    if out["returncode"] and not out["timed_out"]:
        raise SystemExit(out["stderr"][-4000:])
    return out


def nested_accuracy(k: np.ndarray, y: np.ndarray, repeats: int) -> float:
    """Accuracy (%) with the protocol of ``gramdist evaluate`` on one in-memory Gram."""
    from sklearn.model_selection import StratifiedKFold
    from sklearn.svm import SVC

    accs = []
    for r in range(repeats):
        outer = StratifiedKFold(n_splits=10, shuffle=True, random_state=r)
        for f, (tr, te) in enumerate(outer.split(np.zeros(len(y)), y)):
            inner = list(StratifiedKFold(n_splits=5, shuffle=True, random_state=1000 * (r + 1) + f).split(tr, y[tr]))
            best = (-1.0, 1.0)
            for c in (10.0**e for e in range(-3, 4)):
                score = np.mean([np.mean(SVC(kernel="precomputed", C=c).fit(k[np.ix_(tr[a], tr[a])], y[tr[a]])
                                         .predict(k[np.ix_(tr[b], tr[a])]) == y[tr[b]]) for a, b in inner])
                if score > best[0] + 1e-12:
                    best = (score, c)
            clf = SVC(kernel="precomputed", C=best[1]).fit(k[np.ix_(tr, tr)], y[tr])
            accs.append(np.mean(clf.predict(k[np.ix_(te, tr)]) == y[te]))
    return float(np.mean(accs) * 100)


def bench(dataset: str, args: argparse.Namespace, workdir: Path) -> dict:
    store = workdir / f"{dataset}.zarr"
    job = workdir / f"{dataset}-mlg.yaml"
    job.write_text(
        f"dataset: {{name: {dataset}, node_attributes: none}}\n"
        f"kernel: {{name: mlg, levels: {args.levels}, radius: 1, radius_growth: linear, eta: {args.eta!r},"
        f" gamma: {args.gamma!r}, n_samples: {args.n_samples}, rank: {args.rank}, node_features: labels}}\n"
        "fit: {seed: 0}\n"
        "gram: {tile_size: 256, normalize: false}\n"
    )
    cmd = gramdist_cmd("run", str(job), "--out", str(store), "--overwrite", "--quiet", "--json")
    ours = measured(cmd)
    t = last_json_line(ours["stdout"])["timings"]
    ours_kernel = kernel_seconds(t)
    gk_out = workdir / f"{dataset}-grakel.npy"
    theirs = measured(["timeout", str(args.grakel_timeout), sys.executable, "-c", GRAKEL_SCRIPT, dataset,
                       str(args.levels), str(args.n_samples), str(args.rank), str(args.eta), str(args.gamma),
                       str(gk_out)], allow_timeout=True)
    # timed out: the kernel phase took at least the time limit minus the conversion before it
    theirs_kernel = float(args.grakel_timeout) if theirs["timed_out"] else last_json_line(theirs["stdout"])["kernel_s"]
    row = {
        "dataset": dataset, "levels": args.levels, "eta": args.eta, "gamma": args.gamma,
        "n_samples": args.n_samples, "rank": args.rank,
        "gramdist": {"end_to_end_s": ours["wall_s"], "cpu_s": ours["cpu_s"], "kernel_s": ours_kernel, "timings": t,
                     "peak_total_mb": ours["peak_total_mb"], "peak_process_mb": ours["peak_process_mb"]},
        "grakel": {"end_to_end_s": theirs["wall_s"], "cpu_s": theirs["cpu_s"], "kernel_s": theirs_kernel,
                   "peak_total_mb": theirs["peak_total_mb"], "peak_process_mb": theirs["peak_process_mb"],
                   "timed_out": theirs["timed_out"], "timeout_s": args.grakel_timeout},
        "kernel_speedup": theirs_kernel / ours_kernel,
        "end_to_end_speedup": theirs["wall_s"] / ours["wall_s"],
        "cpu_ratio": theirs["cpu_s"] / ours["cpu_s"],
    }
    from gramdist import open_gram

    k_ours, _ = open_gram(store)
    if theirs["timed_out"]:
        return row
    k_theirs = np.load(gk_out)
    row["grakel_diagonal"] = [float(np.min(np.diag(k_theirs))), float(np.max(np.diag(k_theirs)))]
    if args.accuracy:
        from gramdist.datasets import load_dataset
        from gramdist.testing import normalize_block

        y = load_dataset({"name": dataset, "node_attributes": "none"}).y
        d = np.diag(k_theirs)
        row["accuracy"] = {"gramdist": nested_accuracy(np.asarray(k_ours), y, args.repeats),
                           "grakel": nested_accuracy(normalize_block(k_theirs, d, d), y, args.repeats),
                           "repeats": args.repeats}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["MUTAG", "PROTEINS"])
    ap.add_argument("--levels", type=int, default=2)
    ap.add_argument("--eta", type=float, default=0.01)
    ap.add_argument("--gamma", type=float, default=0.01)
    ap.add_argument("--n-samples", type=int, default=50)
    ap.add_argument("--rank", type=int, default=10)
    ap.add_argument("--accuracy", action="store_true", help="also a nested-CV accuracy of both Grams")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--grakel-timeout", type=int, default=600, help="seconds before a GraKeL run is cut off")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            rows.append(bench(ds, args, Path(tmp)))
            print(f"{ds}: done", file=sys.stderr)
    save("mlg", {"command": this_command(),
                 "load_average": list(os.getloadavg()), "results": rows})
    print("| dataset | tool | end to end (s) | CPU, all processes (s) | kernel phase (s) | "
          "peak memory, all processes (MB) | peak memory, largest process (MB) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        for tool in ("gramdist", "grakel"):
            x = r[tool]
            cut = ">" if x.get("timed_out") else ""
            print(f"| {r['dataset']} | {tool} | {cut}{x['end_to_end_s']:.1f} | {x['cpu_s']:.1f} | {cut}{x['kernel_s']:.1f} | "
                  f"{x['peak_total_mb']:.0f} | {x['peak_process_mb']:.0f} |")
    print()
    print("| dataset | kernel-phase speed-up | end-to-end speed-up | CPU-time ratio | accuracy gramdist / GraKeL (%) |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        acc = r.get("accuracy")
        acc_s = f"{acc['gramdist']:.1f} / {acc['grakel']:.1f}" if acc else "-"
        cut = ">" if r["grakel"].get("timed_out") else ""
        print(f"| {r['dataset']} | {cut}{r['kernel_speedup']:.1f}x | {cut}{r['end_to_end_speedup']:.1f}x | "
              f"{cut}{r['cpu_ratio']:.1f}x | {acc_s} |")


if __name__ == "__main__":
    main()
