"""``gramdist evaluate STORE|FOLDER ...``: nested cross-validation of an SVM on Gram stores,
or of a linear SVM on feature stores.

A continuous target runs a regression (``--task regression``, or detected from non-integer
targets and said in the output); ``--test`` scores a fixed test set given as K(test, train)
stores, or, for one training feature store, as feature stores
(:mod:`gramdist.evaluation.feature_holdout`); ``--combine`` selects a convex combination of the stores with C; ``--plot`` draws each
setting's score and how often the inner CV chose it. ``--protocol NAME`` applies a paper's
evaluation protocol (:mod:`gramdist.evaluation.protocols`); the explicit flags (``--folds``,
``--repeats``, ``--inner-folds``, ``--c-min``/``--c-max``, ``--test-size``) override its values.
``--refit JOB`` evaluates a job instead of stores, with the kernel's state refitted on every
outer training part (:mod:`gramdist.evaluation.refit`). ``--out DIR`` saves each outer fold's
result there, so that an interrupted evaluation, rerun, computes only the folds it lacks;
``--time-limit`` (or SIGUSR1) stops it between folds, every fold started finished and saved
(:mod:`gramdist.evaluation.fold_loop`), exit status 3 (128 + 10).
Before the folds, a raw Gram whose grid reaches a C at which libsvm crawls is named in a note
(:mod:`gramdist.evaluation.conditioning`).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from gramdist import stopping
from gramdist.cli.common import add_set_argument, add_tls_arguments, apply_tls_arguments, duration
from gramdist.errors import JobError


def register(sub: Any) -> None:
    ev = sub.add_parser("evaluate", help="nested cross-validation of an SVM on stores")
    ev.add_argument("stores", nargs="*", help="stores, or folders of stores (a grid run's output)")
    ev.add_argument("--protocol", default="default", metavar="NAME",
                    help="a paper's evaluation protocol: dm, power, mlg, matching, or default (folds, repeats, "
                         "inner CV, C grid, spread; see gramdist.evaluation.protocols); the flags below override it")
    ev.add_argument("--folds", type=int, default=None, help="outer folds (default: the protocol's; 10)")
    ev.add_argument("--repeats", type=int, default=None, help="repetitions (default: the protocol's; 10)")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument("--inner-folds", type=int, default=None, help="inner CV folds (default: the protocol's; 5)")
    ev.add_argument("--c-min", type=int, default=None, help="smallest C exponent (C = 10^k; default -3)")
    ev.add_argument("--c-max", type=int, default=None, help="largest C exponent, e.g. 7 as some papers (default 3)")
    ev.add_argument("--test-size", type=float, default=None,
                    help="one stratified random split per repeat testing this fraction, instead of k folds")
    ev.add_argument("--refit", metavar="JOB",
                    help="evaluate this job (each setting of its grid a candidate) with the kernel's state "
                         "refitted on every outer training part, instead of stores")
    add_set_argument(ev)
    ev.add_argument("--out", metavar="DIR",
                    help="folder of the per-fold results: a rerun of the same evaluation reads the folds found "
                         "there and computes the rest (an interrupted evaluation resumes)")
    ev.add_argument("--time-limit", type=duration, metavar="DURATION",
                    help="with --out: start no outer fold that the folds' times so far say would end past this "
                         "long after the start (5400, 90m, 1h30m), then exit 3 with every fold started saved; "
                         "SIGUSR1 (SLURM's --signal=USR1@600) does the same at once, exit 138")
    ev.add_argument("--scheduler", help="address of an existing Dask scheduler")
    ev.add_argument("--workers", type=int, default=None, help="local worker processes (0: in-process)")
    ev.add_argument("--task", choices=("auto", "classification", "regression"), default="auto",
                    help="auto: regression when a target is not a whole number (default)")
    ev.add_argument("--learner", choices=("auto", "krr", "svr", "svm", "sgd"), default="auto",
                    help="regression on Gram stores: kernel ridge (krr, alpha = 1/C; auto) or SVR (svr); "
                         "feature stores: LinearSVC in memory (svm), SGD streamed over the store's chunks "
                         "(sgd), or by size (auto)")
    ev.add_argument("--test", nargs="+", metavar="STORE",
                    help="Gram stores: K(test, train) stores (or a folder of them, paired by name): select on the "
                         "training stores by CV, refit, score the test graphs once. Feature stores: test stores "
                         "featurised like the one training store; the streamed learner's penalty is chosen on 10%% of "
                         "the training rows, then each test store is scored (RMSE, MAE, R² or accuracy)")
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
    ev.add_argument("--quiet", action="store_true", help="no progress bar of the outer folds")
    add_tls_arguments(ev)
    ev.set_defaults(func=cmd_evaluate)


def resolve_protocol(args: argparse.Namespace) -> Any:
    """The ``--protocol`` preset with the explicitly given flags applied."""
    from gramdist.evaluation.protocols import get_protocol

    proto = get_protocol(args.protocol)
    changes: dict[str, Any] = {}
    for flag, field in (("folds", "folds"), ("repeats", "repeats"), ("inner_folds", "inner_folds"),
                        ("test_size", "test_size")):
        if getattr(args, flag) is not None:
            changes[field] = getattr(args, flag)
    if args.c_min is not None or args.c_max is not None:
        lo = -3 if args.c_min is None else args.c_min
        hi = 3 if args.c_max is None else args.c_max
        if lo > hi:
            raise JobError("--c-min must not exceed --c-max")
        changes["c_grid"] = tuple(10.0**k for k in range(lo, hi + 1))
    if args.folds is not None and args.test_size is None:
        changes["test_size"] = None
    return replace(proto, **changes) if changes else proto


def cmd_evaluate(args: argparse.Namespace) -> int:
    started = time.monotonic()
    proto = resolve_protocol(args)
    if bool(args.stores) == bool(args.refit):
        raise JobError("give either stores (or folders of stores) or --refit JOB")
    if args.overrides and not args.refit:
        raise JobError("--set applies to the job of --refit")
    if args.test:
        return _holdout(args, proto)
    if args.plot:
        from gramdist.plotting import require_matplotlib

        require_matplotlib()  # before minutes of CV, not after
    evaluate, inputs, options = _evaluation(args, proto)
    from gramdist.engine.executor import DaskExecutor
    from gramdist.engine.placement import Placement
    from gramdist.jobs import ClusterSpec

    placement = Placement(scheduler=args.scheduler, in_process=False,
                          cluster=apply_tls_arguments(ClusterSpec(n_workers=args.workers), args))
    deadline = None if args.time_limit is None else started + args.time_limit
    with stopping.finish_in_flight_on(), placement.executor(0) as ex:  # --workers 0: folds run in this process
        client = ex.client if isinstance(ex, DaskExecutor) else None
        result = evaluate(inputs, proto, replace(options, client=client, deadline=deadline))
    if args.plot:
        from gramdist.plotting import plot_evaluation

        plot_evaluation(result, args.plot)
    _report(args, proto, result)
    return 0


def _evaluation(args: argparse.Namespace, proto: Any) -> tuple[Any, Any, Any]:
    """``(evaluate, inputs, options)``: the evaluation function for the inputs the command
    names (a job's settings, feature stores, Gram stores, a combination of them) and its
    :class:`~gramdist.evaluation.nested_cv.RunOptions`."""
    from gramdist.evaluation.nested_cv import RunOptions

    options = RunOptions(seed=args.seed, out=args.out, progress=not args.quiet)
    if args.time_limit is not None and not args.out:
        raise JobError("--time-limit stops between outer folds and keeps those done in --out FOLDER: give --out")
    if args.time_limit is not None and args.time_limit <= 0:
        raise JobError("--time-limit must be longer than 0 s")
    if args.refit:
        from gramdist.evaluation.refit import evaluate_refit, refit_sources
        from gramdist.jobs import load_job

        if args.combine or args.plot or args.task == "regression" or args.learner != "auto":
            raise JobError("--refit evaluates a classification job with an SVC; --combine, --plot, --learner "
                           "and --task regression are for stores")
        return evaluate_refit, refit_sources(load_job(args.refit, args.overrides)), options
    if _feature_stores(args.stores):
        from gramdist.evaluation.linear import evaluate_features

        if args.learner in ("krr", "svr") or args.task == "regression" or args.combine or args.plot:
            raise JobError("feature stores are evaluated by a linear classifier (--learner auto|svm|sgd); "
                           "--task regression, --learner krr|svr, --combine and --plot are for Gram stores")
        return (partial(evaluate_features, learner=args.learner, epochs=args.epochs, hash_bits=args.hash_bits),
                args.stores, options)
    from gramdist.evaluation import evaluate

    if args.protocol == "default":
        task: Any = args.task
    elif args.task == "regression":
        raise JobError(f"--protocol {args.protocol} is a paper's classification protocol; "
                       "it does not apply to --task regression")
    else:
        task = proto.task()  # a paper's protocol: its classification, whatever the targets
    options = replace(options, task=task, learner=_gram_learner(args), per_store=bool(args.plot))
    if args.combine:
        from gramdist.evaluation.combine import evaluate_combined

        return partial(evaluate_combined, steps=args.weight_steps), args.stores, options
    _warn_slow_fits(args.stores, proto)  # --combine normalises; refits and features use no precomputed Gram
    return evaluate, args.stores, options


def _report(args: argparse.Namespace, proto: Any, result: dict[str, Any]) -> None:
    """Print the result of a nested CV: one JSON line, or the figures and what was selected."""
    from gramdist.evaluation.protocols import c_grid_text

    regression = result.get("task") == "regression"
    spread, spread_name = (float("nan"), "") if regression else proto.spread_of(result)
    if args.json:
        head = (("rmse_mean", "rmse_std", "r2_mean", "r2_std") if regression else
                ("accuracy_mean", "accuracy_std", "accuracy_std_sample", "accuracy_se", "accuracy_fold_std"))
        task = {"task": result["task"], "task_reason": result["task_reason"]} if regression else {}
        keys = (*head, "folds", "repeats", "inner_folds", "test_size", "c_grid", "supervised_fit_graphs",
                "test_graphs")
        extra = {k: result[k] for k in ("refit", "resumed_folds", "fold_seconds", "weights_chosen", "weight_grid",
                                        "learner") if k in result}
        protocol = {} if regression else {"protocol": proto.name, "spread": spread, "spread_kind": spread_name}
        from gramdist.evaluation.tasks import nan_as_none  # loaded by the evaluation already

        print(json.dumps(nan_as_none(task | {k: result[k] for k in keys} | extra | protocol
                                 | {"stores": result["stores"], "selections": result["selections"]})))
        return
    outer = (f"{result['repeats']} x {result['folds']}-fold" if result["test_size"] is None
             else f"{result['repeats']} x {result['test_size']:g} test split")
    learner = {"svm": ", LinearSVC", "sgd": ", SGD streamed"}.get(result.get("learner", ""), "")
    setup = (f"({outer} nested CV, {len(result['stores'])} {'setting' if args.refit else 'store'}(s), "
             f"C in {c_grid_text(tuple(result['c_grid']))}{learner}"
             f"{', state refitted per fold' if args.refit else ''})")
    if regression:
        print(f"task: regression ({result['task_reason']}); {result['task_learner']}")
        print(f"RMSE: {result['rmse_mean']:.4g} ± {result['rmse_std']:.2g}, "
              f"R²: {result['r2_mean']:.3f} ± {result['r2_std']:.3f} {setup}")
    else:
        print(f"accuracy: {result['accuracy_mean']:.2f} ± {result['accuracy_std']:.2f} % {setup}")
        if args.protocol != "default":
            print(f"{proto.describe()}: {result['accuracy_mean']:.2f} ± {spread:.2f} % ({spread_name})")
    if result.get("resumed_folds"):
        print(f"{result['resumed_folds']} of {len(result['selections'])} folds read from {args.out}")
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
        print(f"selected {'settings' if args.refit else 'stores'}: "
              + ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())))
    if args.plot:
        print(f"plot: {args.plot}")


def _holdout(args: argparse.Namespace, proto: Any) -> int:
    from gramdist.evaluation import evaluate_holdout
    from gramdist.evaluation.protocols import c_grid_text

    if args.plot or args.refit or args.combine or args.out or args.time_limit is not None:
        raise JobError("--test scores a fixed test set; --plot, --refit, --combine, --out and --time-limit are for "
                       "the nested CV")
    from gramdist.evaluation.nested_cv import RunOptions

    if _feature_stores(args.stores):
        return _feature_holdout(args)
    # --test has always selected by a full inner CV, also under a protocol with one validation split
    selection = replace(proto, inner_holdout=False)
    result = evaluate_holdout(args.stores, args.test, selection,
                              RunOptions(seed=args.seed, task=args.task, learner=_gram_learner(args)))
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
          f"on the training graphs among {len(result['stores'])} store(s), C in {c_grid_text(proto.c_grid)})")
    return 0


def _feature_holdout(args: argparse.Namespace) -> int:
    """``evaluate TRAIN.zarr --test T1.zarr [T2.zarr…]`` on feature stores: a streamed linear
    model, its penalty chosen on a validation part of the training store (see
    :mod:`gramdist.evaluation.feature_holdout`)."""
    from gramdist.evaluation.feature_holdout import evaluate_feature_holdout

    if len(args.stores) != 1:
        raise JobError("--test with feature stores: give one training store")
    if args.learner in ("krr", "svr", "svm"):
        raise JobError("--test with feature stores trains the streamed learner (--learner auto or sgd)")
    result = evaluate_feature_holdout(args.stores[0], args.test, epochs=args.epochs, hash_bits=args.hash_bits,
                                      seed=args.seed, task=args.task)
    if args.json:
        print(json.dumps(result))
        return 0
    chosen = f"{result['penalty']['name']} = {result['penalty']['value']:g}"
    print(f"task: {result['task']}; {result['learner']}, {result['epochs']} epochs, 2^{result['hash_bits']} hashed "
          f"columns; {chosen} chosen on {result['validation']['graphs']} validation graphs of "
          f"{result['train_graphs']}")
    for t in result["tests"]:
        score = (f"RMSE {t['rmse']:.4g}, MAE {t['mae']:.4g}, R² {t['r2']:.3f}" if result["task"] == "regression"
                 else f"accuracy {t['accuracy']:.2f} %")
        print(f"test {t['name']}: {score} on {t['graphs']} graphs")
    return 0


def _warn_slow_fits(stores: list[str], proto: Any) -> None:
    """Say so before the folds when libsvm will crawl on a raw Gram at the grid's largest C
    (see :mod:`gramdist.evaluation.conditioning`)."""
    import sys

    from gramdist.evaluation.conditioning import slow_fit_warning
    from gramdist.evaluation.nested_cv import find_stores

    warning = slow_fit_warning(find_stores(stores), proto.c_grid)
    if warning:
        print(f"gramdist: note: {warning}", file=sys.stderr)


def _gram_learner(args: argparse.Namespace) -> str:
    """The regression learner on Gram stores: ``--learner`` krr (also for auto) or svr."""
    if args.learner in ("svm", "sgd"):
        raise JobError(f"--learner {args.learner} is for feature stores; Gram stores take krr or svr")
    return "krr" if args.learner == "auto" else args.learner


def _feature_stores(paths: list[str]) -> bool:
    """Whether ``paths`` name feature stores (or folders of them); an error if they mix kinds."""
    from gramdist.engine.store import is_feature_store, is_store
    from gramdist.evaluation.nested_cv import find_stores

    kinds = {is_feature_store(s) for s in find_stores(paths, is_store=is_store)}
    if len(kinds) > 1:
        raise JobError("evaluate takes Gram stores or feature stores, not both at once")
    return kinds == {True}
