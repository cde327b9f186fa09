"""Getting a Dask client: an existing scheduler, an HPC cluster, or an embedded LocalCluster."""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from typing import Any

from gramdist.errors import JobError
from gramdist.lazy import deferred_import

dask = deferred_import("dask")  # on first use: in-process runs never start Dask


def as_spec(spec: Any) -> Any:
    """A :class:`~gramdist.jobs.ClusterSpec` from a spec or a mapping of its fields."""
    from gramdist.jobs import ClusterSpec

    if spec is None:
        return ClusterSpec()
    return spec if isinstance(spec, ClusterSpec) else ClusterSpec(**dict(spec))


def make_security(spec: dict[str, Any] | None) -> Any:
    """``distributed.security.Security`` from the job's ``cluster.security`` mapping.

    Keys: ``tls_ca_file``, ``tls_client_cert``, ``tls_client_key`` (paths) and
    ``require_encryption`` (default true). ``None`` means plain TCP.
    """
    if not spec:
        return None
    from distributed.security import Security

    allowed = {"tls_ca_file", "tls_client_cert", "tls_client_key", "require_encryption"}
    unknown = set(spec) - allowed
    if unknown:
        raise JobError(f"cluster.security: unknown key(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    for key in ("tls_ca_file", "tls_client_cert", "tls_client_key"):
        if key in spec and not os.path.exists(spec[key]):
            raise JobError(f"cluster.security.{key}: file not found: {spec[key]}")
    if bool(spec.get("tls_ca_file")) != bool(spec.get("tls_client_cert")):
        # distributed would fail later with a TypeError about a missing ssl_context
        raise JobError("cluster.security: TLS needs both the CA (tls_ca_file, --tls-ca-file) and this client's "
                       "certificate (tls_client_cert, --tls-cert; --tls-dir gives both): Dask's TLS is mutual, "
                       "the scheduler refuses clients without a certificate its CA signed")
    return Security(
        tls_ca_file=spec.get("tls_ca_file"),
        tls_client_cert=spec.get("tls_client_cert"),
        tls_client_key=spec.get("tls_client_key"),
        require_encryption=spec.get("require_encryption", True),
    )


def _jobqueue_cluster(spec: dict[str, Any]) -> Any:
    """A dask_jobqueue cluster from ``cluster.jobqueue``: ``{kind: slurm|pbs|sge|lsf, jobs: N, ...}``.

    Every other key is passed to the dask_jobqueue class (cores, memory, queue, account,
    walltime, processes, job_extra_directives, ...).
    """
    spec = dict(spec)
    kind = str(spec.pop("kind", "slurm")).lower()
    jobs = int(spec.pop("jobs", 1))
    try:
        import dask_jobqueue
    except ImportError:
        raise JobError("cluster.jobqueue needs the dask-jobqueue package (pip install dask-jobqueue)") from None
    classes = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster",
               "htcondor": "HTCondorCluster", "oar": "OARCluster"}
    if kind not in classes:
        raise JobError(f"cluster.jobqueue.kind: unknown {kind!r}; one of {', '.join(classes)}")
    # the scheduler's dashboard on this node's loopback only (reach it with an SSH tunnel)
    spec["scheduler_options"] = {"dashboard_address": "127.0.0.1:0", **dict(spec.get("scheduler_options") or {})}
    if not spec.get("security") and not (spec.get("protocol") or "").startswith("tls"):
        print("gramdist: warning: cluster.jobqueue starts a plain-TCP scheduler that the batch jobs' workers reach "
              "over the network: anyone on that network can run code on them; set cluster.jobqueue.security "
              "(a distributed Security with TLS) or start a TLS cluster (deploy/hpc/dask-cluster.slurm)",
              file=sys.stderr, flush=True)
    cluster = getattr(dask_jobqueue, classes[kind])(**spec)
    cluster.scale(jobs=jobs)
    return cluster


def _config_client_tls() -> bool:
    """Whether Dask's own configuration gives this process a client certificate and a CA
    (``DASK_DISTRIBUTED__COMM__TLS__CA_FILE``, ``..._TLS__CLIENT__CERT``, e.g. from a
    Kubernetes secret); ``distributed.Client`` uses them when no ``security`` is passed."""
    return bool(dask.config.get("distributed.comm.tls.ca-file", default=None)
                and dask.config.get("distributed.comm.tls.client.cert", default=None))


def _check_scheme(address: str, security: Any) -> None:
    """A clear error when the address and the TLS settings disagree (distributed raises
    a TypeError or RuntimeError for these, which would otherwise surface as a traceback)."""
    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if scheme == "tls" and security is None and not _config_client_tls():
        raise JobError(f"{address}: a tls:// scheduler needs --tls-ca-file, --tls-cert and --tls-key "
                       "(or cluster.security in the job)")
    if scheme != "tls" and security is not None and security.require_encryption:
        raise JobError(f"{address}: TLS certificates were given but the address is {scheme}://; "
                       "use tls://HOST:PORT")


@contextlib.contextmanager
def connect(cluster_spec: Any, scheduler: str | None = None, *, timeout: str = "20s") -> Iterator[Any]:
    """Yield a ``distributed.Client`` for the job, closing what this function started.

    ``cluster_spec``: the job's :class:`~gramdist.jobs.ClusterSpec` (or a mapping of its
    fields); ``timeout``: how long to try to reach an existing scheduler.

    Order: ``scheduler`` argument, then ``cluster.scheduler``, then ``$DASK_SCHEDULER_ADDRESS``
    connect to an existing cluster; else ``cluster.jobqueue`` starts HPC workers; else a
    LocalCluster sized to the machine (one single-threaded worker process per core by default).
    """
    from distributed import Client

    spec = as_spec(cluster_spec)
    security = make_security(spec.security)
    address = scheduler or spec.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if address:
        _check_scheme(address, security)
        warn_plain_tcp(address)
        try:
            client = Client(address, security=security, timeout=timeout)
        except OSError as exc:
            raise JobError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    if spec.jobqueue:
        cluster = _jobqueue_cluster(spec.jobqueue)
    else:
        with dask.config.set(worker_malloc_environ()):
            cluster = _local_cluster(spec)
    client = Client(cluster, security=security)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


#: addresses this process has already warned about (the warning is given once per address)
_WARNED: set[str] = set()


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an IP address) is this machine's loopback interface only."""
    host = host.strip("[]")
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def plain_tcp_warning(address: str) -> str | None:
    """The warning for sending work over plain TCP to ``address``, or None (TLS, loopback)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host = parse_host_port(location)[0] if scheme in ("tcp", "ws") else ""
    except ValueError:
        return None  # distributed reports the malformed address itself
    if scheme not in ("tcp", "ws"):
        return None  # tls://, wss://, inproc://, ucx:// ...: encrypted, or not a network socket
    if is_loopback(host):
        return None
    return (f"gramdist: warning: sending the job over plain TCP to {address}: anyone who can reach "
            "that scheduler can run code on its workers as their user and read or change every store "
            "they can write; use TLS (`gramdist certs DIR`, then tls:// with --tls-dir DIR; see "
            "deploy/README.md) or reach it through an SSH tunnel to 127.0.0.1")


def warn_plain_tcp(address: str) -> None:
    """Print :func:`plain_tcp_warning` on stderr, once per address and process."""
    if address in _WARNED:
        return
    message = plain_tcp_warning(address)
    if message:
        _WARNED.add(address)
        print(message, file=sys.stderr, flush=True)


def worker_malloc_environ() -> dict[str, Any]:
    """Dask config that keeps worker processes from page-faulting every large array anew.

    Dask starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``; setting any malloc tunable
    freezes glibc's adaptive mmap threshold at 128 KiB, so every NumPy temporary above that
    is a fresh ``mmap`` whose pages fault in one by one, and a 64 KiB trim threshold hands
    the heap's top back to the OS after every task — measured here, WL features of DD took
    1.1 s instead of 0.36 s in such a process. ``MALLOC_MMAP_THRESHOLD_`` and
    ``MALLOC_TRIM_THRESHOLD_`` of 64 MiB serve arrays below that from the heap and keep up
    to 64 MiB of freed heap per worker (0.29-0.38 s). Values the user configured (Dask
    config or the environment) are kept. For ``dask worker`` processes started by hand, see
    ``deploy/README.md``.
    """
    current = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    out: dict[str, Any] = {}
    if "MALLOC_MMAP_THRESHOLD_" not in current and "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        out["distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_"] = 64 << 20
    if current.get("MALLOC_TRIM_THRESHOLD_") in (65536, "65536") and "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        out["distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"] = 64 << 20
    return out


def worker_preloads() -> dict[str, Any]:
    """``preload`` and ``preload_argv`` for the LocalCluster's workers: the user's Dask
    configured preloads (``distributed.worker.preload``, kept: an explicit argument would
    replace them), then :mod:`gramdist.engine.worker_setup`, which takes no arguments."""
    preload = dask.config.get("distributed.worker.preload", default=None) or []
    preload = [preload] if isinstance(preload, str) else list(preload)
    argv = list(dask.config.get("distributed.worker.preload-argv", default=None) or [])
    if argv and not isinstance(argv[0], str):  # one list per preload: none for ours
        argv.append([])
    return {"preload": [*preload, "gramdist.engine.worker_setup"], "preload_argv": argv}


def _resource_tracker_ignoring_session_signals() -> None:
    """Start multiprocessing's resource tracker with SIGHUP and SIGUSR1 ignored, if it is not
    running yet.

    The tracker is the process that unlinks the semaphores of the cluster's queues once their
    users are gone. Python's tracker ignores SIGINT and SIGTERM so that it outlives them, but
    not SIGHUP: the hang-up of a terminal's session (SIGHUP to each of its processes) killed it,
    and the command and every worker then printed a warning and a ``KeyError`` traceback per
    semaphore into the log. SIGUSR1, which SLURM sends to every process of a job before its
    time runs out (``--signal=USR1@…``) and ``evaluate`` takes as "finish the folds in
    flight", would kill it the same way. An ignored signal stays ignored across ``exec``, so the
    tracker started in this window keeps ignoring both; the command's own handlers are back at
    once.
    """
    if threading.current_thread() is not threading.main_thread():  # signal() works there only
        return
    from multiprocessing import resource_tracker

    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGHUP, signal.SIGUSR1)}
    try:
        resource_tracker.ensure_running()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _local_cluster(spec: Any) -> Any:
    from distributed import LocalCluster

    from gramdist.engine.main_guard import unguarded_hint, unguarded_script

    if (script := unguarded_script()) is not None:  # its workers would fail to start (main_guard)
        raise JobError(f"{unguarded_hint(script)}, or run in this process "
                       "(in_process=True, or cluster.n_workers: 0)")
    _resource_tracker_ignoring_session_signals()
    return LocalCluster(
        n_workers=spec.n_workers or os.cpu_count() or 1,
        threads_per_worker=spec.threads_per_worker or 1,
        processes=True,
        memory_limit=spec.memory_limit,
        dashboard_address=spec.dashboard_address or "127.0.0.1:0",
        # a level (the string "error" makes nannies fail); CRITICAL because a failing tile is
        # reported once, as a TileError naming it, not again in worker log records
        silence_logs=logging.CRITICAL,
        **worker_preloads(),  # the workers leave Ctrl-C, SIGTERM and SIGHUP to the command
    )


# ------------------------------------------------------------------ the Python front end's cluster
_shared: dict[str, Any] = {}
_shared_lock = threading.Lock()


def active_client() -> Any | None:
    """The ``distributed.Client`` this process made current (``Client()`` or ``with Client()``),
    or None. Without ``distributed`` imported there can be none, and it is not imported here."""
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        client = default_client()
    except ValueError:
        return None
    return client if client.status == "running" else None


def shared_client(cluster_spec: Any = None) -> Any:
    """The one embedded LocalCluster's client of this Python process, started on first use.

    Later calls reuse it (no start-up cost); it is closed when the interpreter exits, or by
    :func:`close_shared_client`. Its client is not made the default, so the user's own Dask
    computations keep their scheduler. ``cluster_spec`` (``n_workers``, ``threads_per_worker``,
    ``memory_limit``) applies only to the call that starts it.
    """
    with _shared_lock:
        client = _shared.get("client")
        if client is not None and client.status == "running":
            return client
        _close_shared_locked()
        from distributed import Client

        with dask.config.set(worker_malloc_environ()):
            cluster = _local_cluster(as_spec(cluster_spec))
        client = Client(cluster, set_as_default=False)
        _shared.update(cluster=cluster, client=client)
        if not _shared.get("atexit"):
            atexit.register(close_shared_client)
            _shared["atexit"] = True
        return client


def close_shared_client() -> None:
    """Close the shared LocalCluster (the next :func:`shared_client` starts a new one)."""
    with _shared_lock:
        _close_shared_locked()


def _close_shared_locked() -> None:
    client, cluster = _shared.pop("client", None), _shared.pop("cluster", None)
    for closable in (client, cluster):
        if closable is not None:
            with contextlib.suppress(Exception):  # already gone at interpreter exit
                closable.close()


def address_client(address: str) -> Any:
    """One client per scheduler address for the process (reconnected if it was closed)."""
    from distributed import Client

    with _shared_lock:
        clients = _shared.setdefault("by_address", {})
        client = clients.get(address)
        if client is None or client.status != "running":
            _check_scheme(address, None)
            warn_plain_tcp(address)
            try:
                client = Client(address, timeout="20s", set_as_default=False)
            except OSError as exc:
                raise JobError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
            clients[address] = client
        return client
