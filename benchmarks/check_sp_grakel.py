"""A shortest-path Gram store against GraKeL's ``ShortestPath`` on the same dataset, every entry.

    python benchmarks/check_sp_grakel.py STORE DATASET [--with-labels] [--raw]

For a row of REPRODUCTION.md that falls below its published figure: is the Gram the one another
library computes, on the whole dataset and not only on the tests' small ones? The store is the
output of ``gramdist run jobs/mutag-sp.yaml --set dataset.name=DATASET ...``; GraKeL gets the same
graphs (``common.grakel_labelled_graphs``) and cosine-normalises as our store does (``--raw``:
the store is unnormalised, so neither is). Prints one JSON line: the largest absolute difference,
how many entries differ by more than 1e-15, and GraKeL's seconds (one process).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from common import grakel_labelled_graphs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("dataset")
    ap.add_argument("--with-labels", action="store_true", help="the store's kernel used node labels")
    ap.add_argument("--raw", action="store_true", help="the store's Gram is not cosine-normalised")
    args = ap.parse_args()
    import grakel

    import gramdist
    from gramdist.datasets import load_dataset

    ours, _ = gramdist.open_gram(args.store)
    ours = np.asarray(ours)
    graphs = grakel_labelled_graphs(load_dataset(args.dataset))
    start = time.perf_counter()
    theirs = grakel.ShortestPath(with_labels=args.with_labels, normalize=not args.raw,
                                 algorithm_type="floyd_warshall").fit_transform(graphs)
    seconds = time.perf_counter() - start
    if theirs.shape != ours.shape:
        raise SystemExit(f"{args.store} is {ours.shape}, GraKeL's Gram {theirs.shape}")
    diff = np.abs(ours - theirs)
    print(json.dumps({"dataset": args.dataset, "graphs": len(ours), "max_abs_diff": float(diff.max()),
                      "entries_over_1e-15": int((diff > 1e-15).sum()), "grakel_seconds": round(seconds, 1)}))


if __name__ == "__main__":
    main()
