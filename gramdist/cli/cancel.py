"""``gramdist cancel STORE|ID``: stop a submitted job cleanly (its tiles stay valid, it resumes)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gramdist.cli.common import (
    add_scheduler_arguments,
    add_tls_arguments,
    apply_tls_arguments,
    scheduler_address,
)


def register(sub: Any) -> None:
    p = sub.add_parser("cancel", help="stop a submitted job; its written tiles stay valid and resume",
                       description="Ask the job to stop: it stops when its next tile finishes, saving its "
                                   "done-mask; `gramdist submit` or `gramdist run` of the same job resumes it. "
                                   "By id, the scheduler is asked (--scheduler, or $DASK_SCHEDULER_ADDRESS).")
    p.add_argument("target", metavar="STORE|ID", help="the job's store (or grid folder), or its job id")
    add_scheduler_arguments(p)
    p.add_argument("--wait", type=float, default=30.0, metavar="S", help="seconds to wait for it to stop (default 30)")
    p.add_argument("--json", action="store_true", help="print the final status as JSON")
    add_tls_arguments(p)
    p.set_defaults(func=cmd_cancel)


def cmd_cancel(args: argparse.Namespace) -> int:
    """Exit 0 once the job has stopped (or had already ended), 1 if it still runs after --wait."""
    import os

    from gramdist.engine.detached import cancel
    from gramdist.jobs import ClusterSpec

    spec = apply_tls_arguments(ClusterSpec(), args)
    address = scheduler_address(args) or os.environ.get("DASK_SCHEDULER_ADDRESS")
    status = cancel(args.target, scheduler=address, cluster=spec, wait=args.wait)
    if args.json:
        print(json.dumps(status.to_dict()))
    else:
        print(f"{status.job_id}: {status.summary()}")
    return 0 if status.finished else 1
