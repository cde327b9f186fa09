"""``gramdist combine STORE... --weights W... --out STORE``: a convex combination as a store."""

from __future__ import annotations

import argparse
import json
from typing import Any


def register(sub: Any) -> None:
    co = sub.add_parser("combine", help="write a convex combination of stores' normalised Grams as a store",
                        description="Write sum_k w_k K_k / sqrt(K_k(a,a) K_k(b,b)) over stores of the same graphs "
                                    "as a new checksummed store; its attributes record the stores and the weights.")
    co.add_argument("stores", nargs="+", help="complete stores of the same graphs")
    co.add_argument("--weights", required=True, help="one weight per store, non-negative, summing to 1: 0.5,0.25,0.25 "
                                                     "(fractions such as 1/3 allowed)")
    co.add_argument("--out", required=True, help="the combined store")
    co.add_argument("--tile-size", type=int, default=None, help="tile size of the new store (default: the first's)")
    co.add_argument("--dtype", default="float64", choices=("float64", "float32"))
    co.add_argument("--overwrite", action="store_true")
    co.add_argument("--json", action="store_true")
    co.set_defaults(func=cmd_combine)


def cmd_combine(args: argparse.Namespace) -> int:
    from gramdist.engine.context import stderr_log
    from gramdist.evaluation.combine import combine_stores, parse_weights

    summary = combine_stores(args.stores, parse_weights(args.weights), args.out, tile_size=args.tile_size,
                             dtype=args.dtype, overwrite=args.overwrite, log=stderr_log)
    if args.json:
        print(json.dumps(summary))
    return 0 if summary["complete"] else 1
