"""D&D in this process or on a LocalCluster: the A/B behind the kernels' ``node_weight`` of 0.5.

Usage::

    python benchmarks/bench_placement_dd.py [--rows wl hadamard ...] [--repeats 2]
    python benchmarks/bench_placement_dd.py --rows pyramid_match dm sp graphlet lovasz_theta nspdk

Each run is ``gramdist run`` of the kernel table's D&D job (``bench_kernel_table.run_one``) in a
fresh process, timed end to end with the peak memory of its process tree, once with
``cluster.n_workers=2`` (a LocalCluster of two workers: what D&D's 335,000 nodes got at a
``node_weight`` of 1) and once with ``cluster.n_workers=0`` (this process, tiles in a pool of
threads), the two alternated ``--repeats`` times. Results:
``benchmarks/results/placement_dd.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_kernel_table import run_one  # noqa: E402
from common import save, this_command  # noqa: E402

ROWS = ["wl", "wl_edge", "wloa", "vertex_histogram", "hadamard", "nh", "propagation", "power", "core", "odd"]
MODES = {"two workers": ("cluster.n_workers=2",), "in process": ("cluster.n_workers=0",)}
LIMIT_S = 600


def measured(row: str, extra: tuple[str, ...], workdir: Path) -> dict:
    r = run_one(row, "DD", workdir, LIMIT_S, extra)
    if r["returncode"]:
        raise SystemExit(f"{row}: {r.get('error', 'timed out')}")
    return {k: r[k] for k in ("wall_s", "peak_total_mb", "timings")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=ROWS)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    runs: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):
            for row in args.rows:
                for mode, extra in MODES.items():
                    runs.setdefault((row, mode), []).append(measured(row, extra, Path(tmp)))
    print("| kernel | two workers (s) | in process (s) | speed-up | peak MB, workers / here |")
    print("|---|---:|---:|---:|---:|")
    results = []
    for row in args.rows:
        med = {m: statistics.median(r["wall_s"] for r in runs[row, m]) for m in MODES}
        peak = {m: max(r["peak_total_mb"] for r in runs[row, m]) for m in MODES}
        print(f"| `{row}` | {med['two workers']:.2f} | {med['in process']:.2f} | "
              f"{med['two workers'] / med['in process']:.2f}x | {peak['two workers']} / {peak['in process']} |")
        results.append({"row": row, "median_wall_s": med, "peak_total_mb": peak,
                        "runs": {m: runs[row, m] for m in MODES}})
    print(save("placement_dd", {"command": this_command(), "results": results}))


if __name__ == "__main__":
    main()
