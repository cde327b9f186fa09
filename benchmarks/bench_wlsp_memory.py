"""Peak memory of WL-SP's features for one D&D graph (the largest by default), in this process.

    python benchmarks/bench_wlsp_memory.py [--graph INDEX] [--h 3]

Prints the graph's size, its number of features, the seconds ``WLShortestPathKernel(h).features``
took and the process's peak resident memory (``ru_maxrss``: load the dataset, then embed).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from gramdist.datasets import load_dataset
from gramdist.kernels.shortest_path.wlsp import WLShortestPathKernel


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graph", type=int, default=None, help="graph index (default: the largest)")
    ap.add_argument("--h", type=int, default=3)
    args = ap.parse_args()
    dd = load_dataset("DD")
    sizes = dd.nodes_per_graph
    i = int(np.argmax(sizes)) if args.graph is None else args.graph
    t = time.perf_counter()
    f = WLShortestPathKernel(args.h).features(dd.take(np.array([i])))
    print(json.dumps({"graph": i, "nodes": int(sizes[i]), "features": int(f.nnz),
                      "seconds": round(time.perf_counter() - t, 1),
                      "peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


if __name__ == "__main__":
    main()
