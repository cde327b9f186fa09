"""The ``gramdist`` command line: ``run``, ``info``, ``verify``, ``evaluate``, ``stream``.

Errors a user can fix (bad job, bad data, unusable store) print one line
``gramdist: error: ...`` on stderr and exit with status 2; an interruption exits 130 and the
job resumes when the same command is run again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from gramdist.errors import GramdistError, JobError


def _parser() -> argparse.ArgumentParser:
    from gramdist import __version__

    p = argparse.ArgumentParser(prog="gramdist", description="Distributed Gram matrices between graphs.")
    p.add_argument("--version", action="version", version=f"gramdist {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="compute the Gram matrix of a job into a Zarr store")
    run.add_argument("job", help="job file (YAML)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a job key by dotted path; a,b,c makes a grid")
    run.add_argument("--out", help="output store (a folder of stores for a grid)")
    run.add_argument("--scheduler", help="address of an existing Dask scheduler (tcp://HOST:PORT)")
    run.add_argument("--overwrite", action="store_true", help="replace a store made by a different job")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--json", action="store_true", help="print a JSON summary line on stdout")
    _add_tls_arguments(run)

    info = sub.add_parser("info", help="describe a store")
    info.add_argument("store")
    info.add_argument("--json", action="store_true")

    verify = sub.add_parser("verify", help="check a store's tiles against the checksums recorded when written")
    verify.add_argument("store")
    verify.add_argument("--repair", action="store_true",
                        help="unmark damaged tiles so that rerunning the job recomputes them")
    verify.add_argument("--json", action="store_true")

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
    ev.add_argument("--json", action="store_true")
    _add_tls_arguments(ev)

    stream = sub.add_parser("stream", help="online learning on a stream of graphs")
    stream.add_argument("job")
    stream.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    stream.add_argument("--out", help="output folder for the AUROC curve (CSV, PNG)")
    stream.add_argument("--json", action="store_true")
    return p


def _add_tls_arguments(p: argparse.ArgumentParser) -> None:
    tls = p.add_argument_group("TLS (a scheduler started with --protocol tls; address tls://HOST:PORT)")
    tls.add_argument("--tls-ca-file", metavar="PEM", help="CA certificate(s) the scheduler and workers are signed by")
    tls.add_argument("--tls-cert", metavar="PEM", help="this client's certificate")
    tls.add_argument("--tls-key", metavar="PEM", help="this client's private key (if not in --tls-cert)")


def _apply_tls_arguments(cluster: dict[str, Any], args: argparse.Namespace) -> None:
    """Merge ``--tls-*`` flags into ``cluster.security`` (flags win over the job file)."""
    flags = {"tls_ca_file": args.tls_ca_file, "tls_client_cert": args.tls_cert, "tls_client_key": args.tls_key}
    flags = {k: v for k, v in flags.items() if v}
    if flags:
        cluster["security"] = {**(cluster.get("security") or {}), **flags}


def _injected_failure() -> tuple[int, int] | None:
    """Testing hook: ``GRAMDIST_TEST_FAIL_TILE=I,J`` makes tile (I, J) raise in its task."""
    value = os.environ.get("GRAMDIST_TEST_FAIL_TILE")
    if not value:
        return None
    try:
        i, j = (int(v) for v in value.split(","))
    except ValueError:
        raise JobError(f"GRAMDIST_TEST_FAIL_TILE={value!r}: expected I,J") from None
    return i, j


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"run": cmd_run, "info": cmd_info, "verify": cmd_verify, "evaluate": cmd_evaluate,
                "stream": cmd_stream}[args.command](args)
    except GramdistError as exc:
        print(f"gramdist: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not a bug: a full disk, a permission, a lost file
        print(f"gramdist: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("gramdist: interrupted; run the same command again to resume", file=sys.stderr)
        return 130


def cmd_run(args: argparse.Namespace) -> int:
    from gramdist.engine.cluster import connect
    from gramdist.engine.runner import run_job
    from gramdist.jobs import expand_grid, load_job

    job = load_job(args.job, args.overrides)
    _apply_tls_arguments(job["cluster"], args)
    inject = _injected_failure()
    settings = expand_grid(job)
    summaries: list[dict[str, Any]] = []
    if len(settings) == 1 and not settings[0][0]:
        result = run_job(settings[0][1], out=args.out, scheduler=args.scheduler,
                         overwrite=args.overwrite, progress=not args.quiet, inject_failure=inject)
        summaries.append(_summary(result))
    else:
        folder = Path(args.out or job.get("output") or f"{job['_job_name']}")
        folder.mkdir(parents=True, exist_ok=True)
        with connect(job["cluster"], args.scheduler) as client:
            for name, sub in settings:
                print(f"gramdist: grid setting {name}", file=sys.stderr)
                result = run_job(sub, out=str(folder / f"{name}.zarr"), client=client,
                                 overwrite=args.overwrite, progress=not args.quiet, inject_failure=inject)
                summaries.append(_summary(result) | {"setting": name})
    if args.json:
        for s in summaries:
            print(json.dumps(s))
    return 0 if all(s["complete"] for s in summaries) else 1


def _summary(result: Any) -> dict[str, Any]:
    return {"store": result.store, "complete": result.complete, "tiles_total": result.tiles_total,
            "tiles_computed": result.tiles_computed, "tiles_already_done": result.tiles_already_done,
            "timings": {k: round(v, 4) for k, v in result.timings.items()}}


def cmd_info(args: argparse.Namespace) -> int:
    from gramdist.engine.store import store_info

    info = store_info(args.store)
    if args.json:
        print(json.dumps(info))
        return 0
    k = info["kernel"] or {}
    ds = info["dataset"] or {}
    print(f"store:     {info['store']}")
    print(f"status:    {'complete' if info['complete'] else 'INCOMPLETE'} "
          f"({info['tiles_done']}/{info['tiles_total']} tiles of {info['tile_size']})")
    print(f"shape:     {info['shape'][0]} x {info['shape'][1]} "
          f"({'symmetric' if info['symmetric'] else 'test x train'})")
    print(f"kernel:    {k.get('name')} {k.get('params')}")
    print(f"dataset:   {ds.get('name')} ({ds.get('n_graphs')} graphs, checksum {ds.get('checksum')})")
    if info["test_dataset"]:
        td = info["test_dataset"]
        print(f"test:      {td.get('name')} ({td.get('n_graphs')} graphs)")
    print(f"fit:       {info['fit']}")
    print(f"normalize: {info['normalize']}")
    print(f"version:   {info['gramdist_version']}")
    if info["stats"]:
        print(f"timings:   {info['stats']}")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when every written tile matches its checksum (or there are none to check), 1 when
    some do not."""
    from gramdist.engine.store import verify_store

    report = verify_store(args.store, repair=args.repair)
    print(json.dumps(report) if args.json else report["message"])
    return 1 if report["damaged"] else 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from gramdist.evaluate import evaluate

    if args.c_min > args.c_max:
        raise JobError("--c-min must not exceed --c-max")
    c_grid = tuple(10.0**k for k in range(args.c_min, args.c_max + 1))
    kwargs = dict(folds=args.folds, repeats=args.repeats, seed=args.seed,
                  inner_folds=args.inner_folds, c_grid=c_grid)
    if args.workers == 0 and not args.scheduler:
        result = evaluate(args.stores, **kwargs)
    else:
        from gramdist.engine.cluster import connect

        spec = {"n_workers": args.workers, "threads_per_worker": 1, "memory_limit": "auto"}
        _apply_tls_arguments(spec, args)
        with connect(spec, args.scheduler) as client:
            result = evaluate(args.stores, client=client, **kwargs)
    if args.json:
        print(json.dumps({k: result[k] for k in ("accuracy_mean", "accuracy_std", "folds", "repeats",
                                                 "supervised_fit_graphs", "test_graphs")}
                         | {"stores": result["stores"], "selections": result["selections"]}))
    else:
        print(f"accuracy: {result['accuracy_mean']:.2f} ± {result['accuracy_std']:.2f} % "
              f"({result['repeats']} x {result['folds']}-fold nested CV, "
              f"{len(result['stores'])} store(s), C in 10^{args.c_min}..10^{args.c_max})")
        if result["supervised_fit_graphs"]:
            print(f"tested on {result['test_graphs']} graphs: the {result['supervised_fit_graphs']} graphs whose "
                  "labels the kernel fit used stay in every training part and are never tested")
        chosen: dict[str, int] = {}
        for sel in result["selections"]:
            chosen[Path(sel["store"]).name] = chosen.get(Path(sel["store"]).name, 0) + 1
        if len(result["stores"]) > 1:
            print("selected stores: " + ", ".join(f"{k} x{v}" for k, v in sorted(chosen.items())))
    return 0


def cmd_stream(args: argparse.Namespace) -> int:
    from gramdist.jobs import load_job

    job = load_job(args.job, args.overrides)
    try:
        from gramdist.stream.run import run_stream_job
    except ImportError as exc:
        raise JobError(f"stream learning is not available in this build: {exc}") from None
    out_dir = args.out or str(Path(job.get("output") or job["_job_name"]))
    run_stream_job(job, out_dir=out_dir, json_output=args.json)  # prints its own report
    return 0


if __name__ == "__main__":
    sys.exit(main())
