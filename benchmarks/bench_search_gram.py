"""Similarity search from a Gram store against the alternatives, on NCI1 (issue 34 item 4).

    python benchmarks/bench_search_gram.py [--queries 1000] [--top 10] [--workers 2]

The library is NCI1 (4,110 graphs), the queries its first ``--queries`` graphs (each is in the
library, so its best hit is itself or a graph the kernel cannot tell from it). One run, one tool
at a time, each in a fresh process:

* **gramdist, Gram store**: ``gramdist run jobs/nci1-<kernel>.yaml`` makes the store (timed
  apart), then ``gramdist search STORE '{name: NCI1, limit: Q}' --top K`` evaluates the kernel
  with the store's state: WL (h = 5) and DM (the job's pyramid; no finite feature map, so a Gram
  store is its only library);
* **gramdist, feature store** (WL only): ``gramdist features`` then the same search, by dot
  products;
* **GraKeL** (WL only, what a user would otherwise write): ``WeisfeilerLehman(n_iter=5,
  normalize=True).fit(library)``, ``transform(queries)`` and the top K of each row by
  ``numpy.argsort``, timed as a whole in one process.

Reported: the search's seconds and queries per second, the top-K overlap with GraKeL's (the same
kernel: ties apart, the same graphs), peak memory. Results: ``benchmarks/results/search-gram.json``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, gramdist_cmd, last_json_line, run_measured, save, top_k_overlap  # noqa: E402

GRAKEL_SCRIPT = r"""
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[4])
from common import grakel_labelled_graphs
from grakel.kernels import WeisfeilerLehman, VertexHistogram
from gramdist.datasets import load_dataset
q, top, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
graphs = grakel_labelled_graphs(load_dataset("NCI1"))
t0 = time.perf_counter()
wl = WeisfeilerLehman(n_iter=5, normalize=True, base_graph_kernel=VertexHistogram)
wl.fit(graphs)
k = wl.transform(graphs[:q])
rows = np.argsort(-k, axis=1, kind="stable")[:, :top]
np.save(out, np.stack([rows, np.take_along_axis(k, rows, axis=1)]))
print(json.dumps({"search_s": time.perf_counter() - t0}))
"""


def hits(path: Path, q: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """(rows, values), each (q, top), of a search's CSV."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return (np.array([int(r["row"]) for r in rows]).reshape(q, top),
            np.array([float(r["value"]) for r in rows]).reshape(q, top))


def our_search(store: Path, args: argparse.Namespace, out: Path) -> dict:
    r = run_measured(gramdist_cmd("search", str(store), f"{{name: NCI1, limit: {args.queries}}}", "--top",
                                  str(args.top), "--out", str(out), "--json", "--quiet", "--workers",
                                  str(args.workers)))
    if r["returncode"]:
        raise SystemExit(r["stderr"][-3000:])
    phases = last_json_line(r["stdout"])["timings"]
    search_s = sum(phases.values())
    return {"end_to_end_s": r["wall_s"], "search_s": search_s, "phases": phases,
            "queries_per_s": args.queries / search_s, "peak_total_mb": r["peak_total_mb"]}


def make_store(command: str, kernel: str, out: Path, args: argparse.Namespace) -> dict:
    r = run_measured(gramdist_cmd(command, str(ROOT / "jobs" / f"nci1-{kernel}.yaml"), "--out", str(out), "--quiet",
                                  "--json", "--set", f"cluster.n_workers={args.workers}"))
    if r["returncode"]:
        raise SystemExit(r["stderr"][-3000:])
    return {"wall_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    result: dict = {"queries": args.queries, "top": args.top, "workers": args.workers, "library": 4110}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows = {}
        for name, command, kernel in (("wl_gram", "run", "wl"), ("dm_gram", "run", "dm"),
                                      ("wl_features", "features", "wl")):
            store = tmp / f"{name}.zarr"
            made = make_store(command, kernel, store, args)
            result[name] = {"store": made, **our_search(store, args, tmp / f"{name}.csv")}
            rows[name] = hits(tmp / f"{name}.csv", args.queries, args.top)
            print(name, json.dumps(result[name]), flush=True)
        g = run_measured([sys.executable, "-c", GRAKEL_SCRIPT, str(args.queries), str(args.top),
                          str(tmp / "grakel.npy"), str(Path(__file__).resolve().parent)])
        if g["returncode"]:
            raise SystemExit(g["stderr"][-3000:])
        result["grakel_wl"] = {"search_s": last_json_line(g["stdout"])["search_s"], "end_to_end_s": g["wall_s"],
                               "peak_total_mb": g["peak_total_mb"]}
        result["grakel_wl"]["queries_per_s"] = args.queries / result["grakel_wl"]["search_s"]
        grakel_rows, grakel_values = np.load(tmp / "grakel.npy")
    for name in ("wl_gram", "wl_features"):
        # the same kernel: equal top-K values up to rounding; the sets differ only among ties
        result[name]["top_k_overlap_with_grakel"] = top_k_overlap(rows[name][0], grakel_rows.astype(np.int64))
        result[name]["top_k_values_max_abs_diff_grakel"] = float(np.max(np.abs(rows[name][1] - grakel_values)))
    result["wl_gram"]["same_hits_as_features"] = bool(np.array_equal(rows["wl_gram"][0], rows["wl_features"][0]))
    result["dm_gram"]["self_first"] = float(np.mean(rows["dm_gram"][0][:, 0] == np.arange(args.queries)))
    print(json.dumps(result, indent=2))
    save("search-gram", result)


if __name__ == "__main__":
    main()
