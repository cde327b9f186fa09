"""``gramdist evaluate STORE|FOLDER ...``: nested cross-validation of an SVM on Gram stores,
or of a linear SVM on feature stores.

A continuous target runs a regression (``--task regression``, or detected from non-integer
targets and said in the output); ``--test`` scores a fixed test set given as K(test, train)
stores; ``--combine`` selects a convex combination of the stores with C; ``--plot`` draws each
setting's score and how often the inner CV chose it.
"""

from __future__ import annotations

import argparse
import json
from functools import partial
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
    ev.add_argument("--task", choices=("auto", "classification", "regression"), default="auto",
                    help="auto: regression when a target is not a whole number (default)")
    ev.add_argument("--learner", choices=("auto", "krr", "svr", "svm", "sgd"), default="auto",
                    help="regression on Gram stores: kernel ridge (krr, alpha = 1/C; auto) or SVR (svr); "
                         "feature stores: LinearSVC in memory (svm), SGD streamed over the store's chunks "
                         "(sgd), or by size (auto)")
    ev.add_argument("--test", nargs="+", metavar="STORE",
                    help="K(test, train) stores (or a folder of them, paired by name): select on the "
                         "training stores by CV, refit, score the test graphs once")
    ev.add_argument("--plot", metavar="FILE.png",
                    help="plot each store's score and how often the inner CV chose it (needs gramdist[plot])")
    ev.add_argument("--combine", action="store_true",
                    help="select a convex combination of the stores' normalised Grams (weights on a grid) with C in "
                         "the inner CV, instead of one store")
    ev.add_argument("--weight-steps", type=int, default=4, metavar="S",
                    help="with --combine: weights are multiples of 1/S (default 4: 15 combinations of 3 stores)")
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
    if args.test:
        return _holdout(args, c_grid)
    if args.plot:
        from gramdist.plotting import require_matplotlib

        require_matplotlib()  # before minutes of CV, not after
    kwargs = dict(folds=args.folds, repeats=args.repeats, seed=args.seed, inner_folds=args.inner_folds,
                  c_grid=c_grid)
    if _feature_stores(args.stores):
        from gramdist.evaluation.linear import evaluate_features

        if args.learner in ("krr", "svr") or args.task == "regression" or args.combine or args.plot:
            raise JobError("feature stores are evaluated by a linear classifier (--learner auto|svm|sgd); "
                           "--task regression, --learner krr|svr, --combine and --plot are for Gram stores")
        evaluate = evaluate_features
        kwargs |= dict(learner=args.learner, epochs=args.epochs, hash_bits=args.hash_bits)
    else:
        kwargs |= dict(task=args.task, learner=_gram_learner(args), per_store=bool(args.plot))
    if args.combine:
        from gramdist.evaluation.combine import evaluate_combined

        evaluate = partial(evaluate_combined, steps=args.weight_steps)  # noqa: F811 - the combining protocol
    if args.workers == 0 and not args.scheduler:
        result = evaluate(args.stores, **kwargs)
    else:
        from gramdist.engine.cluster import connect

        spec = {"n_workers": args.workers, "threads_per_worker": 1, "memory_limit": "auto"}
        apply_tls_arguments(spec, args)
        with connect(spec, args.scheduler) as client:
            result = evaluate(args.stores, client=client, **kwargs)
    if args.plot:
        from gramdist.plotting import plot_evaluation

        plot_evaluation(result, args.plot)
    regression = result["task"] == "regression"
    if args.json:
        head = ("rmse_mean", "rmse_std", "r2_mean", "r2_std") if regression else ("accuracy_mean", "accuracy_std")
        task = {"task": result["task"], "task_reason": result["task_reason"]} if regression else {}
        print(json.dumps(task | {k: result[k] for k in (*head, "folds", "repeats",
                                                        "supervised_fit_graphs", "test_graphs")}
                         | {"stores": result["stores"], "selections": result["selections"]}
                         | {k: result[k] for k in ("weights_chosen", "weight_grid", "learner") if k in result}))
    else:
        learner = {"svm": ", LinearSVC", "sgd": ", SGD streamed"}.get(result.get("learner", ""), "")
        setup = (f"({result['repeats']} x {result['folds']}-fold nested CV, "
                 f"{len(result['stores'])} store(s), C in 10^{args.c_min}..10^{args.c_max}{learner})")
        if regression:
            print(f"task: regression ({result['task_reason']}); {result['task_learner']}")
            print(f"RMSE: {result['rmse_mean']:.4g} ± {result['rmse_std']:.2g}, "
                  f"R²: {result['r2_mean']:.3f} ± {result['r2_std']:.3f} {setup}")
        else:
            print(f"accuracy: {result['accuracy_mean']:.2f} ± {result['accuracy_std']:.2f} % {setup}")
        if result["supervised_fit_graphs"]:
            print(f"tested on {result['test_graphs']} graphs: the {result['supervised_fit_graphs']} graphs whose "
                  "labels the kernel fit used stay in every training part and are never tested")
        chosen: dict[str, int] = {}
        for sel in result["selections"]:
            chosen[Path(sel["store"]).name] = chosen.get(Path(sel["store"]).name, 0) + 1
        if "weights_chosen" in result:
            names = ", ".join(Path(s).name for s in result["stores"])
            print(f"selected weights ({names}; {len(result['weight_grid'])} candidates): "
                  + ", ".join(f"({', '.join(f'{x:.3g}' for x in c['weights'])}) x{c['folds']}"
                              for c in result["weights_chosen"]))
        elif len(result["stores"]) > 1:
            print("selected stores: " + ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())))
    if args.plot:
        print(f"plot: {args.plot}")
    return 0


def _holdout(args: argparse.Namespace, c_grid: tuple[float, ...]) -> int:
    from gramdist.evaluation import evaluate_holdout

    if args.plot:
        raise JobError("--plot is for the nested CV, not with --test")
    result = evaluate_holdout(args.stores, args.test, inner_folds=args.inner_folds, seed=args.seed, c_grid=c_grid,
                              task=args.task, learner=_gram_learner(args))
    if args.json:
        print(json.dumps(result))
        return 0
    if result["task"] == "regression":
        print(f"task: regression ({result['task_reason']}); {result['task_learner']}")
        score = f"RMSE {result['rmse']:.4g}, R² {result['r2']:.3f}"
    else:
        score = f"accuracy {result['accuracy']:.2f} %"
    print(f"test: {score} on {result['test_graphs']} graphs (fitted on {result['train_graphs']}; "
          f"{Path(result['store']).name} and C = {result['C']:g} chosen by {result['inner_folds']}-fold CV "
          f"on the training graphs among {len(result['stores'])} store(s), C in 10^{args.c_min}..10^{args.c_max})")
    return 0


def _gram_learner(args: argparse.Namespace) -> str:
    """The regression learner on Gram stores: ``--learner`` krr (also for auto) or svr."""
    if args.learner in ("svm", "sgd"):
        raise JobError(f"--learner {args.learner} is for feature stores; Gram stores take krr or svr")
    return "krr" if args.learner == "auto" else args.learner


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
