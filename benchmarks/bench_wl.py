"""WL subtree (h = 5) on NCI1 and DD: gramdist through its CLI vs GraKeL, in one run.

    python benchmarks/bench_wl.py [--datasets NCI1 DD] [--h 5] [--repeats 3]

For each dataset it measures, each tool in a fresh process:

* end to end: wall time of the whole command (interpreter start, imports, file reading,
  for gramdist also the LocalCluster start-up and the Zarr writes), and peak memory of the
  process tree (workers included);
* kernel phase: features + Gram (+ store writes for gramdist); process start-up and file
  reading excluded for both. For gramdist: fit + embed + tiles from the run's JSON timings
  (cluster start-up, which includes importing gramdist on the workers, is excluded as
  GraKeL's imports are); for GraKeL: ``WeisfeilerLehman(...).fit_transform`` timed inside its process, on graphs
  already read and converted to its input format.

Both compute the cosine-normalised WL Gram and the script checks they agree (GraKeL's
``n_iter`` is the number of relabelling iterations, gramdist's ``h``: checked equal on MUTAG). Each tool
runs ``--repeats`` times per dataset, alternating, and the medians are reported. Results go
to ``benchmarks/results/wl.json`` and a Markdown table is printed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    gramdist_cmd,
    kernel_seconds,
    last_json_line,
    median_of_runs,
    run_measured,
    save,
    this_command,
)

GRAKEL_SCRIPT = r"""
import json, sys, time
import numpy as np
from gramdist.datasets import load_dataset
name, h, out, here = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, here)
from common import grakel_labelled_graphs
g = load_dataset(name)
from grakel.kernels import WeisfeilerLehman, VertexHistogram
graphs = grakel_labelled_graphs(g)
t = time.perf_counter()
K = WeisfeilerLehman(n_iter=h, base_graph_kernel=VertexHistogram, normalize=True).fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""


def bench(dataset: str, h: int, workdir: Path) -> dict:
    store = workdir / f"{dataset}.zarr"
    ours = run_measured(gramdist_cmd("run", f"jobs/{dataset.lower()}-wl.yaml", "--set", f"kernel.h={h}",
                                     "--out", str(store), "--overwrite", "--quiet", "--json"))
    if ours["returncode"]:
        raise SystemExit(ours["stderr"])
    t = last_json_line(ours["stdout"])["timings"]
    ours_kernel = kernel_seconds(t)
    gk_out = workdir / f"{dataset}-grakel.npy"
    theirs = run_measured([sys.executable, "-c", GRAKEL_SCRIPT, dataset, str(h), str(gk_out),
                           str(Path(__file__).resolve().parent)])
    if theirs["returncode"]:
        raise SystemExit(theirs["stderr"])
    theirs_kernel = last_json_line(theirs["stdout"])["kernel_s"]
    from gramdist import open_gram

    k_ours, _ = open_gram(store)
    k_theirs = np.load(gk_out)
    agree = float(np.max(np.abs(k_ours - k_theirs)))
    return {
        "dataset": dataset, "h": h,
        "gramdist": {"end_to_end_s": ours["wall_s"], "kernel_s": ours_kernel, "timings": t,
                     "peak_total_mb": ours["peak_total_mb"], "peak_process_mb": ours["peak_process_mb"]},
        "grakel": {"end_to_end_s": theirs["wall_s"], "kernel_s": theirs_kernel,
                   "peak_total_mb": theirs["peak_total_mb"], "peak_process_mb": theirs["peak_process_mb"]},
        "kernel_speedup": theirs_kernel / ours_kernel,
        "end_to_end_speedup": theirs["wall_s"] / ours["wall_s"],
        "max_abs_difference": agree,
    }


def median_run(runs: list[dict]) -> dict:
    """One row from repeated runs: each tool's median times and largest peak memory."""
    out = dict(runs[-1])
    for tool in ("gramdist", "grakel"):
        out[tool] = median_of_runs([r[tool] for r in runs])
    out["kernel_speedup"] = out["grakel"]["kernel_s"] / out["gramdist"]["kernel_s"]
    out["end_to_end_speedup"] = out["grakel"]["end_to_end_s"] / out["gramdist"]["end_to_end_s"]
    out["max_abs_difference"] = max(r["max_abs_difference"] for r in runs)
    out["repeats"] = len(runs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--h", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of each tool per dataset (alternating); medians are reported")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            rows.append(median_run([bench(ds, args.h, Path(tmp)) for _ in range(args.repeats)]))
            print(f"{ds}: done", file=sys.stderr)
    save("wl", {"command": this_command(), "results": rows})
    print("| dataset | tool | end to end (s) | kernel phase (s) | peak memory, all processes (MB) | peak memory, largest process (MB) |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        for tool in ("gramdist", "grakel"):
            x = r[tool]
            print(f"| {r['dataset']} | {tool} | {x['end_to_end_s']:.2f} | {x['kernel_s']:.2f} | "
                  f"{x['peak_total_mb']:.0f} | {x['peak_process_mb']:.0f} |")
    print()
    print("| dataset | kernel-phase speed-up | end-to-end speed-up | max abs difference of the Grams |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dataset']} | {r['kernel_speedup']:.1f}x | {r['end_to_end_speedup']:.1f}x | "
              f"{r['max_abs_difference']:.1e} |")


if __name__ == "__main__":
    main()
