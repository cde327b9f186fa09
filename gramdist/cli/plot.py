"""``gramdist plot STORE [--out FILE.png]``: the Gram as a heatmap, its spectrum, its diagonal."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("plot", help="draw a store: Gram heatmap by class, eigenvalue spectrum (PSD check), diagonal")
    p.add_argument("store")
    p.add_argument("--out", metavar="FILE.png", help="image to write (default: STORE.png beside the store)")
    p.add_argument("--max-graphs", type=int, default=4000,
                   help="draw at most this many graphs per side, a seeded random subset (default 4000)")
    p.add_argument("--seed", type=int, default=0, help="seed of that subset")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_plot)


def cmd_plot(args: argparse.Namespace) -> int:
    from gramdist.errors import JobError
    from gramdist.plotting import PSD_TOLERANCE, plot_store

    if args.max_graphs < 2:
        raise JobError("--max-graphs must be at least 2")
    summary = plot_store(args.store, args.out, max_graphs=args.max_graphs, seed=args.seed)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"plot: {summary['out']} ({summary['graphs_shown']} graphs shown of {summary['shape'][0]} x "
          f"{summary['shape'][1]})")
    if "min_eigenvalue" in summary:
        verdict = ("PSD up to rounding" if summary["psd"] else
                   f"NOT PSD (below -{PSD_TOLERANCE:g} x the largest eigenvalue)")
        print(f"most negative eigenvalue: {summary['min_eigenvalue']:.6g} "
              f"({summary['relative']:.3g} x the largest, {summary['max_eigenvalue']:.6g}): {verdict}")
    return 0
