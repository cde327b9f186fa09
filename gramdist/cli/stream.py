"""``gramdist stream JOB``: budget-aware online learning on a stream of graphs."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from gramdist.cli.common import add_set_argument
from gramdist.errors import JobError


def register(sub: Any) -> None:
    stream = sub.add_parser("stream", help="online learning on a stream of graphs")
    stream.add_argument("job")
    add_set_argument(stream)
    stream.add_argument("--out", help="output folder for the AUROC curve (CSV, PNG)")
    stream.add_argument("--json", action="store_true")
    stream.set_defaults(func=cmd_stream)


def cmd_stream(args: argparse.Namespace) -> int:
    from gramdist.jobs import load_job

    job = load_job(args.job, args.overrides)
    try:
        from gramdist.stream.run import run_stream_job
    except ImportError as exc:
        raise JobError(f"stream learning is not available in this build: {exc}") from None
    out_dir = args.out or str(Path(job.output or job.name))
    run_stream_job(job, out_dir=out_dir, json_output=args.json)  # prints its own report
    return 0
