"""Arguments several commands share: ``--set`` overrides, the TLS flags, the scheduler."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any


def add_set_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a job key by dotted path; a,b,c makes a grid")


def duration(text: str) -> float:
    """Seconds in ``text``: a number of seconds (``5400``) or hours, minutes and seconds
    (``1h30m``, ``90m``, ``45s``, ``2h``); an argparse ``type``."""
    match = re.fullmatch(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?", text.strip())
    if not text.strip() or match is None:
        raise argparse.ArgumentTypeError(f"{text!r}: not a duration (e.g. 5400, 90m, 1h30m)")
    hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return 3600 * hours + 60 * minutes + seconds


def add_job_run_arguments(p: argparse.ArgumentParser) -> None:
    """What every command that runs a job on a cluster takes: the job, ``--set``, where to
    run, whether to replace a store, and how to report (TLS flags included)."""
    p.add_argument("job", help="job file (YAML)")
    add_set_argument(p)
    p.add_argument("--scheduler", help="address of an existing Dask scheduler (tcp://HOST:PORT)")
    p.add_argument("--overwrite", action="store_true", help="replace a store made by a different job")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print a JSON summary line on stdout")
    add_tls_arguments(p)


def add_tls_arguments(p: argparse.ArgumentParser) -> None:
    tls = p.add_argument_group("TLS (a scheduler started with --protocol tls; address tls://HOST:PORT)")
    tls.add_argument("--tls-ca-file", metavar="PEM", help="CA certificate(s) the scheduler and workers are signed by")
    tls.add_argument("--tls-cert", metavar="PEM", help="this client's certificate")
    tls.add_argument("--tls-key", metavar="PEM", help="this client's private key (if not in --tls-cert)")
    tls.add_argument("--tls-dir", metavar="DIR",
                     help="a folder made by `gramdist certs`: its ca.pem, client.pem and client.key")


def apply_tls_arguments(cluster: Any, args: argparse.Namespace) -> Any:
    """``cluster`` (a :class:`~gramdist.jobs.ClusterSpec`) with the ``--tls-*`` flags merged into
    its ``security`` (flags win over the job file)."""
    flags = {"tls_ca_file": args.tls_ca_file, "tls_client_cert": args.tls_cert, "tls_client_key": args.tls_key}
    if getattr(args, "tls_dir", None):
        folder = Path(args.tls_dir)
        defaults = {"tls_ca_file": folder / "ca.pem", "tls_client_cert": folder / "client.pem",
                    "tls_client_key": folder / "client.key"}
        flags = {k: v or str(defaults[k]) for k, v in flags.items()}
    flags = {k: v for k, v in flags.items() if v}
    if not flags:
        return cluster
    return cluster.replace(security={**(cluster.security or {}), **flags})


def job_placement(job: Any, args: argparse.Namespace, scheduler: str | None = None) -> Any:
    """Where a CLI command runs ``job``: ``--scheduler``, else its ``cluster:`` section with the
    TLS flags; a small job that names no cluster runs in this process
    (:mod:`gramdist.engine.placement`)."""
    from gramdist.engine.placement import Placement

    return Placement(scheduler=scheduler or getattr(args, "scheduler", None),
                     cluster=apply_tls_arguments(job.cluster, args), in_process="auto")


def run_context(args: argparse.Namespace) -> Any:
    """The progress bar (unless ``--quiet``) and status lines on stderr."""
    from gramdist.engine.context import RunContext

    return RunContext(progress=not getattr(args, "quiet", False))


def add_scheduler_arguments(p: argparse.ArgumentParser) -> None:
    """``--scheduler ADDR`` and ``--scheduler-file PATH`` (the JSON ``dask scheduler
    --scheduler-file`` writes, e.g. by deploy/hpc/dask-cluster.slurm)."""
    p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://HOST:PORT or tls://HOST:PORT)")
    p.add_argument("--scheduler-file", metavar="PATH", help="the scheduler's address from the JSON file "
                   "`dask scheduler --scheduler-file PATH` writes")


def scheduler_address(args: argparse.Namespace) -> str | None:
    """The address ``--scheduler`` or ``--scheduler-file`` names (None when neither is given)."""
    if getattr(args, "scheduler_file", None):
        from gramdist.errors import JobError

        try:
            return str(json.loads(Path(args.scheduler_file).read_text())["address"])
        except FileNotFoundError:
            raise JobError(f"--scheduler-file {args.scheduler_file}: not found (has the scheduler started?)") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise JobError(f"--scheduler-file {args.scheduler_file}: no scheduler address in it ({exc})") from None
    return getattr(args, "scheduler", None)


def job_kernel_names(job: Any) -> set[str]:
    """The names of the kernels a job (and its grid) runs."""
    names = {(job.kernel or {}).get("name")} | set((job.grid or {}).get("kernel.name", ()))
    return {str(n) for n in names if n}


def embedding_processes(kernel_names: Iterable[str], placement: Any) -> int:
    """Worker processes for the command to fork for its embeddings: as many as a run in this
    process has threads where one of the kernels ``embeds_in_processes`` and nothing sends the
    run to a cluster (the data's size, which may still send it to one, is not known before the
    read); else 0."""
    from gramdist.engine.placement import in_process_threads
    from gramdist.errors import JobError
    from gramdist.kernels import kernel_class

    if placement.in_process is False or placement.names_a_cluster():
        return 0
    try:
        forks = any(kernel_class(name).embeds_in_processes for name in kernel_names)
    except JobError:
        return 0  # the run reports it
    return in_process_threads() if forks else 0


@contextlib.contextmanager
def forked_placement(kernel_names: Iterable[str], placement: Any) -> Iterator[Any]:
    """``placement`` with the command's embedding workers (:func:`embedding_processes` of them)
    forked now, so call it before anything starts a thread (Zarr's import, a store's read);
    the workers are closed at the end."""
    from gramdist.engine.processes import forked_workers

    with forked_workers(embedding_processes(kernel_names, placement)) as forked:
        yield replace(placement, forked=forked)
