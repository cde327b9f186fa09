"""``gramdist submit JOB``: run a job on a Dask cluster without this process; print its id."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gramdist.cli.common import (
    add_scheduler_arguments,
    add_set_argument,
    add_tls_arguments,
    apply_tls_arguments,
    scheduler_address,
)


def register(sub: Any) -> None:
    p = sub.add_parser("submit", help="run a job on a Dask cluster without this process (returns at once)",
                       description="Send the job's orchestration to the cluster and return with its id: the "
                                   "job goes on after this command ends. Follow it with `gramdist status STORE`, "
                                   "stop it with `gramdist cancel STORE`.")
    p.add_argument("job", help="job file (YAML)")
    add_set_argument(p)
    p.add_argument("--out", help="output store (a folder of stores for a grid); the same absolute path "
                                 "must be writable on every worker")
    add_scheduler_arguments(p)
    p.add_argument("--overwrite", action="store_true", help="replace a store made by a different job")
    p.add_argument("--wait", type=float, default=30.0, metavar="S",
                   help="seconds to wait for the job to start (read its graphs, take its store); default 30")
    p.add_argument("--json", action="store_true", help="print a JSON line on stdout")
    add_tls_arguments(p)
    p.set_defaults(func=cmd_submit)


def cmd_submit(args: argparse.Namespace) -> int:
    from gramdist.engine.detached import submit
    from gramdist.jobs import load_job

    job = load_job(args.job, args.overrides)
    job = job.replace(cluster=apply_tls_arguments(job.cluster, args))
    handle = submit(job, out=args.out, scheduler=scheduler_address(args), overwrite=args.overwrite, wait=args.wait)
    if args.json:
        print(json.dumps({"job_id": handle.job_id, "store": handle.store, "state": handle.state,
                          "scheduler": handle.scheduler, "dashboard": handle.dashboard}))
        return 0
    state = {"queued": "queued (waiting for a worker thread)", "running": "running",
             "complete": "complete (nothing left to compute)"}.get(handle.state, handle.state)
    print(f"job:       {handle.job_id} ({state})")
    print(f"store:     {handle.store}")
    print(f"dashboard: {handle.dashboard}")
    print(f"follow:    gramdist status {handle.store} --watch")
    print(f"cancel:    gramdist cancel {handle.store}")
    return 0
