"""``gramdist status STORE`` (or ``--scheduler ADDR``): where submitted jobs stand."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from gramdist.cli.common import (
    add_scheduler_arguments,
    add_tls_arguments,
    apply_tls_arguments,
    scheduler_address,
)
from gramdist.errors import JobError

#: what a running job is doing, by the phase its record names
PHASES = {"preparing": "reading its graphs", "computing": "fitting and embedding", "tiles": "computing tiles"}


def register(sub: Any) -> None:
    p = sub.add_parser("status", help="state, progress and ETA of a submitted job (or of a store)",
                       description="Read from the store's files, so it works with the cluster gone; with "
                                   "--scheduler and no STORE, list the jobs that scheduler knows of.")
    p.add_argument("store", nargs="?", help="the job's store (or a grid's folder)")
    add_scheduler_arguments(p)
    p.add_argument("--watch", action="store_true", help="a live progress bar until the job ends "
                                                        "(exit 0 if it completes, 1 otherwise)")
    p.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between two looks (--watch)")
    p.add_argument("--json", action="store_true", help="print JSON on stdout")
    add_tls_arguments(p)
    p.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from gramdist.engine.jobrecord import job_status

    address = scheduler_address(args)
    if args.store is None:
        if not address:
            raise JobError("give a STORE, or --scheduler ADDR to list the jobs of a scheduler")
        return _list(args, address)
    if args.watch:
        return _watch(args.store, args.interval)
    status = job_status(args.store)
    if args.json:
        print(json.dumps(status.to_dict()))
    else:
        print("\n".join(describe(status)))
    return 0


def describe(status: Any) -> list[str]:
    from gramdist.engine.jobrecord import format_duration

    lines = [f"store:        {status.store}"]
    if status.job_id:
        who = f" by {status.submitted_by}" if status.submitted_by else ""
        when = f" (submitted {_clock(status.submitted)}{who})" if status.submitted else ""
        lines.append(f"job:          {status.job_id}{when}")
    state = status.state + (" (cancel requested)" if status.cancel_requested and not status.finished else "")
    if status.since:
        state += f" since {_clock(status.since)} ({format_duration(time.time() - status.since)} ago)"
    if status.phase:
        state += f": {PHASES.get(status.phase, status.phase)}"
    lines.append(f"state:        {state}")
    if status.reason:
        lines.append(f"why:          {status.reason}")
    if status.tiles_total:
        tiles = f"{status.tiles_done}/{status.tiles_total} ({100 * status.tiles_done / status.tiles_total:.1f} %)"
        if status.rate:
            tiles += f", {status.rate:.2f} tiles/s"
        if status.eta_s is not None:
            tiles += f", ETA {format_duration(status.eta_s)}"
        lines.append(f"tiles:        {tiles}")
    for s in status.settings:
        done = f"{s['tiles_done']}/{s['tiles_total']}" if s["tiles_total"] else "not started"
        lines.append(f"  {s['name']}: {done}{' complete' if s['complete'] else ''}")
    orch = status.orchestrator or {}
    if orch and status.state in ("running", "stopped"):
        where = f"worker {orch.get('name')} ({orch.get('worker')}) on " if orch.get("worker") else ""
        lines.append(f"orchestrator: {where}{orch.get('host')}, process {orch.get('pid')}"
                     + (f"; restarted {status.restarts}x" if status.restarts else ""))
    if status.dashboard and status.state in ("queued", "running"):
        lines.append(f"dashboard:    {status.dashboard}")
    return lines


def _clock(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t or 0))


def _watch(store: str, interval: float) -> int:
    from tqdm import tqdm

    from gramdist.engine.jobrecord import job_status

    status = job_status(store)
    bar = tqdm(total=status.tiles_total or 0, initial=status.tiles_done or 0, unit="tile", file=sys.stderr,
               dynamic_ncols=True, desc=status.state)
    try:
        while not status.finished:
            time.sleep(interval)
            status = job_status(store)
            if status.tiles_total and bar.total != status.tiles_total:
                bar.total = status.tiles_total
            bar.n = status.tiles_done or 0
            bar.set_description(PHASES.get(status.phase or "", status.state), refresh=False)
            bar.refresh()
    finally:
        bar.close()
    print(f"{status.store}: {status.summary()}")
    return 0 if status.state == "complete" else 1


def _list(args: argparse.Namespace, address: str) -> int:
    from gramdist.engine.cluster import connect
    from gramdist.engine.detached import list_jobs
    from gramdist.engine.jobrecord import format_duration
    from gramdist.jobs import ClusterSpec

    with connect(apply_tls_arguments(ClusterSpec(), args), address, timeout="10s") as client:
        jobs = list_jobs(client)
    if args.json:
        for status in jobs:
            print(json.dumps(status.to_dict()))
        return 0
    if not jobs:
        print(f"no gramdist jobs on {address}")
        return 0
    rows = [("JOB", "STATE", "TILES", "RATE", "ETA", "SINCE", "WHERE", "STORE")]
    for s in jobs:
        tiles = f"{s.tiles_done}/{s.tiles_total}" if s.tiles_total else "-"
        rate = f"{s.rate:.2f}/s" if s.rate else "-"
        eta = format_duration(s.eta_s) if s.eta_s is not None else "-"
        where = (s.orchestrator or {}).get("host", "-") if s.state == "running" else "-"
        rows.append((s.job_id or "?", s.state, tiles, rate, eta, _clock(s.since), where, s.store))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0
