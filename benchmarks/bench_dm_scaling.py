"""DM kernel scaling on the DM paper's synthetic graphs (Su et al. 2016, §5.1 / Figure 1), and
D&D end to end through the CLI.

    python benchmarks/bench_dm_scaling.py [--quick] [--repeats 3] [--skip-dd]

Synthetic part (in-process, one thread: ``fit_threads = 1`` and one BLAS thread; no Dask):
the paper's generator (N = 10 graphs of n = 200 nodes, average degree 5, random node labels
and one numerical attribute; DM with h = 10, t = 4, b = 10) with one parameter varied at a
time:

* n, nodes per graph (graph size grows linearly with n at a fixed average degree), with the
  default k-means sample of 20000 descriptors (``n``) and on all descriptors (``n_all``);
* h, the number of SC iterations;
* sigma, the edge density 2m / (n (n - 1)) at n = 200 (so m grows linearly with sigma);
* N, the number of graphs.

Each point reports fit, embed and Gram CPU seconds (``time.process_time``, the best of
``--repeats`` runs; CPU time is robust to other processes sharing the machine, wall time is
kept in the JSON), and for every series and phase the least-squares line with its R^2. What
to expect: embed (SC propagation O(h m L), routing O(h n t b D)) is linear in n, m and h; the
fit's k-means sees at most ``descriptor_sample`` = 20000 descriptors, so it grows with n only
until N n reaches that cap and then stays flat; the Gram of N graphs has N^2 / 2 pairs, so
the N series shows where the quadratic pair term starts to matter. Embed + Gram (the work
that scales with the data once the pyramids are fitted) gets its own line and R^2 in the
table and the plot.

D&D part: ``gramdist run jobs/dd-dm.yaml`` in a fresh process (read -> fit -> embed -> Gram in
Zarr, Dask LocalCluster on this machine), wall time and peak memory of the process tree
(workers included), with the run's own phase timings and the load average of the machine.

Results: ``benchmarks/results/dm_scaling.json``, ``dm_scaling.csv``, ``dm_scaling.png`` and
``dm_dd.json``; a Markdown table is printed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread, as on a Dask worker

import argparse  # noqa: E402
import csv  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, gramdist_cmd, last_json_line, run_measured, save  # noqa: E402

from gramdist.datasets import make_synthetic  # noqa: E402
from gramdist.kernels.dm.kernel import DescriptorMatchingKernel  # noqa: E402

DEFAULTS = {"n_graphs": 10, "n_nodes": 200, "avg_degree": 5.0, "h": 10, "density": None}
# series name -> (varied setting, values, extra kernel parameters)
SERIES = {
    "n": ("n_nodes", [100, 200, 400, 800, 1600, 3200], {}),
    "n_all": ("n_nodes", [100, 200, 400, 800, 1600], {"descriptor_sample": None}),
    "h": ("h", [1, 2, 4, 6, 8, 10, 15, 20], {}),
    "sigma": ("density", [0.025, 0.05, 0.1, 0.2, 0.4], {}),
    "N": ("n_graphs", [10, 20, 40, 80, 160], {}),
}
QUICK = {"n": [100, 200, 400, 800], "n_all": [100, 200, 400], "h": [1, 2, 4, 8], "sigma": [0.025, 0.05, 0.1, 0.2],
         "N": [10, 20, 40]}


def one_point(setting: dict, repeats: int, extra: dict) -> dict:
    graphs = make_synthetic(n_graphs=setting["n_graphs"], n_nodes=setting["n_nodes"],
                            avg_degree=setting["avg_degree"], density=setting["density"],
                            n_labels=10, attr_dim=1, seed=0)
    kernel = DescriptorMatchingKernel(**{"h": setting["h"], "eta": 0.5, "t": 4, "b": 10, "fit_threads": 1, **extra})
    best: dict[str, float] = {}
    for _ in range(repeats):
        times = {}
        c, w = time.process_time(), time.perf_counter()
        state = kernel.fit(graphs, seed=0)
        times["fit_cpu_s"], times["fit_wall_s"] = time.process_time() - c, time.perf_counter() - w
        c, w = time.process_time(), time.perf_counter()
        emb = kernel.embed(graphs, state)
        times["embed_cpu_s"], times["embed_wall_s"] = time.process_time() - c, time.perf_counter() - w
        c, w = time.process_time(), time.perf_counter()
        kernel.pairwise(emb, emb, state)
        times["gram_cpu_s"], times["gram_wall_s"] = time.process_time() - c, time.perf_counter() - w
        times["embed_gram_cpu_s"] = times["embed_cpu_s"] + times["gram_cpu_s"]
        times["total_cpu_s"] = times["fit_cpu_s"] + times["embed_gram_cpu_s"]
        times["total_wall_s"] = times["fit_wall_s"] + times["embed_wall_s"] + times["gram_wall_s"]
        if not best or times["total_cpu_s"] < best["total_cpu_s"]:
            best = times
    return {**setting, "nodes": graphs.n_nodes, "edges": graphs.n_edges, **{k: round(v, 4) for k, v in best.items()}}


def linear_fit(x: np.ndarray, y: np.ndarray) -> dict:
    slope, intercept = np.polyfit(x, y, 1)
    pred = slope * x + intercept
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum()) or 1.0
    return {"slope": float(slope), "intercept": float(intercept), "r2": 1.0 - ss_res / ss_tot}


def synthetic(quick: bool, repeats: int) -> dict:
    out = {}
    for name, (key, values, extra) in SERIES.items():
        values = QUICK[name] if quick else values
        points = []
        for v in values:
            setting = dict(DEFAULTS, **{key: v})
            if key == "density":
                setting["avg_degree"] = None
            points.append(one_point(setting, repeats, extra))
            print(f"  {name}={v}: {points[-1]['total_cpu_s']:.3f} s CPU", file=sys.stderr, flush=True)
        xs = np.array([p["edges"] / p["n_graphs"] if name == "sigma" else p[key] for p in points], dtype=float)
        out[name] = {"param": key, "kernel": extra, "points": points,
                     "linear": {part: linear_fit(xs, np.array([p[f"{part}_cpu_s"] for p in points]))
                                for part in ("fit", "embed", "gram", "embed_gram", "total")}}
    return out


def dd_end_to_end(workdir: Path) -> dict:
    store = workdir / "dd-dm.zarr"
    load_before = os.getloadavg()
    res = run_measured(gramdist_cmd("run", "jobs/dd-dm.yaml", "--out", str(store), "--overwrite",
                                    "--quiet", "--json"))
    if res["returncode"] != 0:
        raise SystemExit(f"gramdist run failed:\n{res['stderr'][-3000:]}")
    summary = last_json_line(res["stdout"])
    return {"wall_s": round(res["wall_s"], 2), "peak_total_mb": round(res["peak_total_mb"]),
            "peak_process_mb": round(res["peak_process_mb"]), "timings": summary["timings"],
            "loadavg_before": [round(v, 2) for v in load_before],
            "loadavg_after": [round(v, 2) for v in os.getloadavg()], "cpu_count": os.cpu_count()}


def write_csv(results: dict, path: Path) -> None:
    rows = [dict(series=name, **p) for name, s in results.items() for p in s["points"]]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = {"n": "nodes per graph n", "n_all": "n, k-means on all descriptors", "h": "SC iterations h",
              "sigma": "edges per graph m (n = 200)", "N": "number of graphs N"}
    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6))
    for ax, (name, s) in zip(np.atleast_1d(axes), results.items()):
        pts = s["points"]
        x = np.array([p["edges"] / p["n_graphs"] if name == "sigma" else p[s["param"]] for p in pts], dtype=float)
        for part, style in (("fit", ":"), ("embed", "--"), ("gram", "-.")):
            ax.plot(x, [p[f"{part}_cpu_s"] for p in pts], style, label=part, alpha=0.7)
        ax.plot(x, [p["total_cpu_s"] for p in pts], "o-", color="k", label="total")
        ax.plot(x, [p["embed_gram_cpu_s"] for p in pts], "s-", color="tab:blue", label="embed + Gram")
        for part, colour in (("total", "tab:red"), ("embed_gram", "tab:cyan")):
            f = s["linear"][part]
            ax.plot(x, f["slope"] * x + f["intercept"], "-", color=colour, alpha=0.5,
                    label=f"line through {part.replace('_', ' + ')}, R² = {f['r2']:.3f}")
        ax.set_xlabel(labels[name])
        ax.set_ylabel("CPU seconds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("DM kernel on synthetic graphs (N = 10, n = 200, degree 5, h = 10, t = 4, b = 10 unless varied)",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def markdown(results: dict, dd: dict | None) -> str:
    lines = ["| series | value | nodes | edges | fit s | embed s | Gram s | embed + Gram s | total CPU s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, s in results.items():
        for p in s["points"]:
            lines.append(f"| {name} | {p[s['param']]} | {p['nodes']} | {p['edges']} | {p['fit_cpu_s']:.3f} | "
                         f"{p['embed_cpu_s']:.3f} | {p['gram_cpu_s']:.3f} | {p['embed_gram_cpu_s']:.3f} | "
                         f"{p['total_cpu_s']:.3f} |")
    lines.append("")
    lines.append("| series (x) | phase | slope (CPU s per unit of x) | intercept s | R² of a line |")
    lines.append("|---|---|---|---|---|")
    for name, s in results.items():
        unit = "edges per graph" if name == "sigma" else s["param"]
        for part, f in s["linear"].items():
            lines.append(f"| {name} ({unit}) | {part} | {f['slope']:.3g} | {f['intercept']:.3f} | {f['r2']:.4f} |")
    if dd:
        t = dd["timings"]
        lines += ["", "| D&D end to end | wall s | read s | cluster s | fit s | embed s | tiles s | peak MB (tree) | load avg |",
                  "|---|---|---|---|---|---|---|---|---|",
                  f"| gramdist run jobs/dd-dm.yaml | {dd['wall_s']:.1f} | {t.get('read_s', 0):.1f} | "
                  f"{t.get('cluster_s', 0):.1f} | {t.get('fit_s', 0):.1f} | {t.get('embed_s', 0):.1f} | "
                  f"{t.get('tiles_s', 0):.1f} | {dd['peak_total_mb']} | {dd['loadavg_before'][0]} |"]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer, smaller points (a smoke run)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-dd", action="store_true", help="only the synthetic series")
    ap.add_argument("--skip-synthetic", action="store_true", help="only D&D end to end")
    args = ap.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    results = {}
    if not args.skip_synthetic:
        results = synthetic(args.quick, args.repeats)
        save("dm_scaling", {"defaults": DEFAULTS, "series": results, "cpu_count": os.cpu_count(),
                            "loadavg": os.getloadavg()})
        write_csv(results, RESULTS / "dm_scaling.csv")
        plot(results, RESULTS / "dm_scaling.png")
    dd = None
    if not args.skip_dd:
        with tempfile.TemporaryDirectory() as tmp:
            dd = dd_end_to_end(Path(tmp))
        save("dm_dd", dd)
    print(markdown(results, dd))


if __name__ == "__main__":
    main()
