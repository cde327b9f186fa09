"""``gramdist evaluate STORE|FOLDER ...``: nested cross-validation of an SVM on Gram stores.

``--protocol NAME`` applies a paper's evaluation protocol (:mod:`gramdist.evaluation.protocols`);
the explicit flags (``--folds``, ``--repeats``, ``--inner-folds``, ``--c-min``/``--c-max``,
``--test-size``) override its values. ``--refit JOB`` evaluates a job instead of stores, with
the kernel's state refitted on every outer training part (:mod:`gramdist.evaluation.refit`).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from gramdist.cli.common import add_set_argument, add_tls_arguments, apply_tls_arguments
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
    ev.add_argument("--out", help="with --refit: folder of the per-fold results (a rerun resumes from them)")
    ev.add_argument("--scheduler", help="address of an existing Dask scheduler")
    ev.add_argument("--workers", type=int, default=None, help="local worker processes (0: in-process)")
    ev.add_argument("--json", action="store_true")
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
    from gramdist.evaluation.protocols import c_grid_text

    proto = resolve_protocol(args)
    if bool(args.stores) == bool(args.refit):
        raise JobError("give either stores (or folders of stores) or --refit JOB")
    if args.overrides and not args.refit:
        raise JobError("--set applies to the job of --refit")
    if args.out and not args.refit:
        raise JobError("--out is the folder of --refit's per-fold results")
    kwargs = proto.evaluate_kwargs()
    if args.refit:
        from gramdist.evaluation.refit import evaluate_refit, refit_sources
        from gramdist.jobs import load_job

        sources = refit_sources(load_job(args.refit, args.overrides))
        run = lambda client: evaluate_refit(sources, out=args.out, client=client, seed=args.seed,  # noqa: E731
                                            **kwargs)
    else:
        from gramdist.evaluation import evaluate

        run = lambda client: evaluate(args.stores, client=client, seed=args.seed, **kwargs)  # noqa: E731
    if args.workers == 0 and not args.scheduler:
        result = run(None)
    else:
        from gramdist.engine.cluster import connect

        spec = {"n_workers": args.workers, "threads_per_worker": 1, "memory_limit": "auto"}
        apply_tls_arguments(spec, args)
        with connect(spec, args.scheduler) as client:
            result = run(client)
    spread, spread_name = proto.spread_of(result)
    if args.json:
        keys = ("accuracy_mean", "accuracy_std", "accuracy_std_sample", "accuracy_se", "accuracy_fold_std",
                "folds", "repeats", "inner_folds", "test_size", "c_grid", "supervised_fit_graphs", "test_graphs")
        extra = {k: result[k] for k in ("refit", "resumed_folds", "fold_seconds") if k in result}
        print(json.dumps(_finite({k: result[k] for k in keys} | extra
                                 | {"protocol": proto.name, "spread": spread, "spread_kind": spread_name,
                                    "stores": result["stores"], "selections": result["selections"]})))
        return 0
    outer = (f"{result['repeats']} x {result['folds']}-fold" if result["test_size"] is None
             else f"{result['repeats']} x {result['test_size']:g} test split")
    print(f"accuracy: {result['accuracy_mean']:.2f} ± {result['accuracy_std']:.2f} % "
          f"({outer} nested CV, {len(result['stores'])} {'setting' if args.refit else 'store'}(s), "
          f"C in {c_grid_text(tuple(result['c_grid']))}{', state refitted per fold' if args.refit else ''})")
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
    if len(result["stores"]) > 1:
        print(f"selected {'settings' if args.refit else 'stores'}: " + ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())))
    return 0


def _finite(value: Any) -> Any:
    """``value`` with NaN floats as None, so that the printed line is strict JSON."""
    if isinstance(value, float):
        return None if value != value else value
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
