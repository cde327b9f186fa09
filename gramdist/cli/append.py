"""``gramdist append STORE [DATA]``: add graphs to a Gram store, computing only their entries."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gramdist.cli.common import add_tls_arguments, apply_tls_arguments, forked_placement, run_context
from gramdist.errors import JobError
from gramdist.jobs import yaml_problem


def register(sub: Any) -> None:
    ap = sub.add_parser(
        "append", help="append graphs to a store (only the entries involving them are computed)",
        description="Append graphs to a Gram store with its fitted state: the new rows against every graph and "
                    "the new block are computed (O(M*N)); the result equals a from-scratch run over all the graphs. "
                    "Without DATA: finish an interrupted append, or recompute the tiles `gramdist verify --repair` "
                    "unmarked.")
    ap.add_argument("store")
    ap.add_argument("data", nargs="?", help="the new graphs: a dataset name (MUTAG), a TU folder, or a job's dataset "
                                            "mapping in YAML, e.g. '{name: NCI1, skip: 4000}'")
    ap.add_argument("--base", help="the store's current graphs (same forms as DATA), when the sources it recorded "
                                   "cannot be re-read; checked against the store's content checksum")
    ap.add_argument("--scheduler", help="address of an existing Dask scheduler (tcp://HOST:PORT)")
    ap.add_argument("--workers", type=int, default=None,
                    help="local worker processes (default: this process for an append of at most 2.5 x 10^7 "
                         "kernel values, else a LocalCluster of one worker per core; 0: in this process)")
    ap.add_argument("--abort", action="store_true", help="discard an interrupted append instead of finishing it")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--json", action="store_true", help="print a JSON summary line on stdout")
    add_tls_arguments(ap)
    ap.set_defaults(func=cmd_append)


def parse_dataset_argument(text: str | None) -> Any:
    """A command-line DATA: an existing folder is a TU path, a YAML mapping is a ``dataset:``
    section, anything else a dataset name."""
    if text is None:
        return None
    if Path(text).expanduser().is_dir():
        return {"path": str(Path(text).expanduser().resolve())}
    if text.lstrip().startswith("{"):
        import yaml

        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise JobError(f"{text}: cannot parse the dataset mapping: {yaml_problem(exc)}") from None
        if not isinstance(value, dict):
            raise JobError(f"{text}: expected a mapping like '{{name: NCI1, skip: 4000}}'")
        return value
    return text


def cmd_append(args: argparse.Namespace) -> int:
    from gramdist.engine.append import append
    from gramdist.engine.placement import Placement
    from gramdist.engine.store import recorded_kernel_name
    from gramdist.jobs import ClusterSpec

    cluster = apply_tls_arguments(ClusterSpec(n_workers=args.workers), args)
    kernel = recorded_kernel_name(args.store)
    # forked before any thread starts, as `gramdist run` does (the store is read after)
    with forked_placement([kernel] if kernel else [],
                          Placement(scheduler=args.scheduler, cluster=cluster, in_process="auto")) as placement:
        result = append(args.store, parse_dataset_argument(args.data), base=parse_dataset_argument(args.base),
                        placement=placement, abort=args.abort, context=run_context(args))
    if args.json:
        print(json.dumps({"store": result.store, "added": result.added, "n_rows": result.n_rows,
                          "complete": result.complete, "tiles_total": result.tiles_total,
                          "tiles_computed": result.tiles_computed, "tiles_kept": result.tiles_kept,
                          "entries_computed": result.entries_computed,
                          "nothing_to_do": result.nothing_to_do,
                          "timings": {k: round(v, 4) for k, v in result.timings.items()}}))
    return 0 if result.complete or result.nothing_to_do else 1
