"""``gramdist evaluate STORE|FOLDER ...``: nested cross-validation of an SVM on Gram stores."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gramdist.cli.common import add_tls_arguments, apply_tls_arguments
from gramdist.errors import JobError


def register(sub: Any) -> None:
    ev = sub.add_parser("evaluate", help="nested cross-validation of an SVM on stores")
    ev.add_argument("stores", nargs="+", help="stores, or folders of stores (a grid run's output)")
    ev.add_argument("--folds", type=int, default=10)
    ev.add_argument("--repeats", type=int, default=10)
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--inner-folds", type=int, default=5)
    ev.add_argument("--c-min", type=int, default=-3, help="smallest C exponent (C = 10^k)")
    ev.add_argument("--c-max", type=int, default=3, help="largest C exponent, e.g. 7 as some papers")
    ev.add_argument("--scheduler", help="address of an existing Dask scheduler")
    ev.add_argument("--workers", type=int, default=None, help="local worker processes (0: in-process)")
    ev.add_argument("--learner", choices=("auto", "svm", "sgd"), default="auto",
                    help="feature stores: LinearSVC in memory (svm), SGD streamed over the store's chunks "
                         "(sgd), or by size (auto)")
    ev.add_argument("--epochs", type=int, default=5, help="feature stores, sgd: passes over the training graphs")
    ev.add_argument("--hash-bits", type=int, default=None,
                    help="feature stores, sgd on CSR rows: hash feature ids into 2^BITS columns "
                         "(default: by the store's non-zeros, at most 2^20)")
    ev.add_argument("--json", action="store_true")
    add_tls_arguments(ev)
    ev.set_defaults(func=cmd_evaluate)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from gramdist.evaluation import evaluate

    if args.c_min > args.c_max:
        raise JobError("--c-min must not exceed --c-max")
    c_grid = tuple(10.0**k for k in range(args.c_min, args.c_max + 1))
    kwargs = dict(folds=args.folds, repeats=args.repeats, seed=args.seed,
                  inner_folds=args.inner_folds, c_grid=c_grid)
    if _feature_stores(args.stores):
        from gramdist.evaluation.linear import evaluate_features

        evaluate = evaluate_features
        kwargs |= dict(learner=args.learner, epochs=args.epochs, hash_bits=args.hash_bits)
    if args.workers == 0 and not args.scheduler:
        result = evaluate(args.stores, **kwargs)
    else:
        from gramdist.engine.cluster import connect

        spec = {"n_workers": args.workers, "threads_per_worker": 1, "memory_limit": "auto"}
        apply_tls_arguments(spec, args)
        with connect(spec, args.scheduler) as client:
            result = evaluate(args.stores, client=client, **kwargs)
    if args.json:
        print(json.dumps({k: result[k] for k in ("accuracy_mean", "accuracy_std", "folds", "repeats",
                                                 "supervised_fit_graphs", "test_graphs", "learner")
                          if k in result}
                         | {"stores": result["stores"], "selections": result["selections"]}))
    else:
        learner = {"svm": ", LinearSVC", "sgd": ", SGD streamed"}.get(result.get("learner", ""), "")
        print(f"accuracy: {result['accuracy_mean']:.2f} ± {result['accuracy_std']:.2f} % "
              f"({result['repeats']} x {result['folds']}-fold nested CV, "
              f"{len(result['stores'])} store(s), C in 10^{args.c_min}..10^{args.c_max}{learner})")
        if result["supervised_fit_graphs"]:
            print(f"tested on {result['test_graphs']} graphs: the {result['supervised_fit_graphs']} graphs whose "
                  "labels the kernel fit used stay in every training part and are never tested")
        chosen: dict[str, int] = {}
        for sel in result["selections"]:
            chosen[Path(sel["store"]).name] = chosen.get(Path(sel["store"]).name, 0) + 1
        if len(result["stores"]) > 1:
            print("selected stores: " + ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())))
    return 0


def _feature_stores(paths: list[str]) -> bool:
    """Whether ``paths`` name feature stores (or folders of them); an error if they mix kinds."""
    from gramdist.engine.feature_store import is_feature_store

    kinds = set()
    for p in paths:
        path = Path(p)
        if (path / "zarr.json").exists():
            found = [path]
        else:  # a folder of stores (a grid run), or nothing: the evaluation reports that
            found = [c for c in sorted(path.iterdir()) if (c / "zarr.json").exists()] if path.is_dir() else []
        kinds |= {is_feature_store(c) for c in found}
    if len(kinds) > 1:
        raise JobError("evaluate takes Gram stores or feature stores, not both at once")
    return kinds == {True}
