"""The labelled geometric random walk on all of D&D, projected from random samples.

    python benchmarks/project_randomwalk_dd.py [--samples 40 80 160] [--seed 0]
    python benchmarks/project_randomwalk_dd.py --full     # and run all of D&D end to end (about 10 min)

The whole Gram (694,431 pairs of 1,178 graphs of up to 5,748 nodes) was not run end to end on
the 2-core machine; this script measures the kernel phase (fit, embed, every pair; in this
process, one core, ``GramTransformer``) on uniform random samples of D&D and projects it to all
pairs by a cost model, checked on the samples themselves: the label-block series multiplies,
at each step, a block of one graph's arcs between two labels by the other graph's nodes of that
label, so a pair's work is taken as ``sum_l (a_i(l) n_j(l) + n_i(l) a_j(l))`` (``a``: arcs
leaving nodes of label l, ``n``: nodes of label l), times the steps, which depend on lam and the
degrees only. The first two samples calibrate ``seconds = fixed + rate * units`` (the fixed part:
fit, thread start, the in-process engine); the third tests the model (its measured time against
the time the model predicts). The projection counts ``rate * units`` of all pairs, divided by
the workers (tiles are independent tasks). ``--full`` then runs the whole Gram as a user would
(``gramdist run jobs/dd-random_walk.yaml --set kernel.kind=geometric --set kernel.lam=...``, a
LocalCluster of two workers, tiles of 256) and records its wall time and the peak memory of all
its processes beside the projection. lam = 0.5 / d_max^2 as in
``bench_randomwalk.py``'s ``geometric`` variant. Results: ``benchmarks/results/randomwalk-dd-projection.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, last_json_line, run_measured, save  # noqa: E402


def label_histograms(g) -> tuple[np.ndarray, np.ndarray]:
    """(G, L) nodes of each label and (G, L) arcs leaving nodes of each label."""
    codes = np.unique(g.node_labels, return_inverse=True)[1]
    nodes = np.zeros((len(g), codes.max() + 1))
    np.add.at(nodes, (g.node_graph, codes), 1.0)
    arcs = np.zeros_like(nodes)
    e = g.edges + g.node_offsets[:-1][g.edge_graph][:, None]  # global node ids of each edge's ends
    for end in (0, 1):
        np.add.at(arcs, (g.node_graph[e[:, end]], codes[e[:, end]]), 1.0)
    return nodes, arcs


def pair_units(nodes: np.ndarray, arcs: np.ndarray) -> float:
    """The cost model summed over the pairs i <= j of the graphs given."""
    w = arcs @ nodes.T + nodes @ arcs.T  # (G, G)
    return float(np.triu(w).sum())


def timed_sample(g, idx: np.ndarray, lam: float) -> float:
    from gramdist import GramTransformer

    sub = g.take(np.sort(idx))
    t = time.perf_counter()
    GramTransformer("random_walk", kernel_params={"kind": "geometric", "lam": lam}, in_process=True).fit_transform(sub)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, nargs=3, default=[40, 80, 160])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--full", action="store_true", help="also run all of D&D end to end")
    args = ap.parse_args()
    from gramdist.datasets import load_dataset
    from gramdist.kernels.randomwalk.solvers import max_degrees

    g = load_dataset("DD")
    lam = 0.5 / float(max_degrees(g).max()) ** 2
    nodes, arcs = label_histograms(g)
    rng = np.random.default_rng(args.seed)
    rows = []
    for m in args.samples:
        idx = rng.choice(len(g), size=m, replace=False)
        seconds = timed_sample(g, idx, lam)
        rows.append({"graphs": m, "seconds": seconds, "units": pair_units(nodes[idx], arcs[idx])})
        print(f"sample of {m} graphs: {seconds:.1f} s")
    rate = (rows[1]["seconds"] - rows[0]["seconds"]) / (rows[1]["units"] - rows[0]["units"])
    fixed = rows[0]["seconds"] - rate * rows[0]["units"]
    predicted = fixed + rate * rows[2]["units"]
    total = rate * pair_units(nodes, arcs)
    out = {"lam": lam, "samples": rows, "fixed_s": fixed, "seconds_per_unit": rate,
           "model_check": {"predicted_s": predicted, "measured_s": rows[2]["seconds"]},
           "projected_one_core_s": total, "projected_2_workers_s": total / 2, "projected_16_workers_s": total / 16}
    print(f"model check: the third sample predicted {predicted:.1f} s, measured {rows[2]['seconds']:.1f} s "
          f"(fixed part {fixed:.1f} s)")
    print(f"all of D&D (lam = {lam:.3g}): {total:.0f} s on one core, {total / 2:.0f} s on 2 workers, "
          f"{total / 16:.0f} s on 16")
    if args.full:
        out["full_run"] = full_run(lam)
        print(f"all of D&D end to end: {out['full_run']['wall_s']:.0f} s, "
              f"{out['full_run']['peak_total_mb'] / 1024:.1f} GiB (all processes)")
    print(save("randomwalk-dd-projection", out))


def full_run(lam: float) -> dict:
    """``gramdist run`` of the geometric walk on all of D&D, timed end to end."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        r = run_measured(gramdist_cmd("run", "jobs/dd-random_walk.yaml", "--set", "kernel.kind=geometric",
                                      "--set", f"kernel.lam={lam!r}", "--out", f"{tmp}/dd-geometric.zarr",
                                      "--quiet", "--json"))
    if r["returncode"]:
        raise SystemExit(f"gramdist run failed: {r['stderr'].strip().splitlines()[-1:]}")
    return {"wall_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"],
            "timings": last_json_line(r["stdout"]).get("timings")}


if __name__ == "__main__":
    main()
