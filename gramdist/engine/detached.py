"""Detached jobs: ``gramdist submit`` runs a job's orchestration on the cluster, not in the caller.

``gramdist run`` drives a job from the process that typed the command: close the laptop and the
run stops (resumably). :func:`submit` instead sends the orchestration itself — the very
:func:`~gramdist.engine.runner.run_grid` that ``gramdist run`` calls, with its steps — to the
cluster as one long-running Dask task, and returns within seconds with a job id. The task
(:func:`orchestrate`) *secedes* from its worker's thread pool (it waits on its own sub-tasks
and must not hold a thread slot) and drives the cluster through the worker's client
(``distributed.get_client``); it is launched with ``fire_and_forget``, so it runs on after the
submitting client has closed, been killed or lost its network.

The store is the source of truth. Beside it (``STORE`` is the store, or the folder of a grid's
stores; :mod:`gramdist.engine.jobrecord` reads and writes these files) the orchestrator keeps:

* ``STORE.job.json`` — the job record: ``job_id``, ``state`` (queued, running, cancelled,
  stopped, failed with its ``error``, complete), ``since``, ``phase``, ``orchestrator`` (host,
  process, worker), ``progress`` (tiles done/total, tiles computed and when), ``restarts``,
  ``heartbeat`` (rewritten every :data:`HEARTBEAT_SECONDS`), ``scheduler``, ``dashboard`` and the
  last log lines. The submitter's first record (queued) is written by a worker, as every later
  one is by the orchestrator: the submitting machine need not see the store;
* ``STORE.lock`` — the one-writer lock of :mod:`gramdist.engine.store.lock`, held by the run under the
  job's id, so a second writer is refused naming the job;
* ``STORE.cancel`` — written by :func:`cancel` (a request the orchestrator honours).

:func:`~gramdist.engine.jobrecord.job_status` reads these and the store's done-mask, so
``gramdist status STORE`` works with the cluster gone. A record says *running* while its
orchestrator lives; when its process is gone (same host) or its heartbeat is older than
:data:`~gramdist.engine.store.lock.STALE_SECONDS`, the status is *stopped* and says why. The scheduler
also holds a copy of each job's record (Dask's scheduler metadata, key ``gramdist-jobs``), which
``gramdist status --scheduler`` lists and ``gramdist cancel ID`` uses when the store is not
visible from the caller.

Faults (tested in ``tests/test_submit.py``): the worker running the orchestrator dies → Dask
runs the task again on another worker (counted against ``allowed-failures``); the new
orchestrator takes over the store lock held under its own job id and resumes from the
done-mask, with no person involved. The scheduler dies → every worker closes, the orchestrator
with it; status says *stopped*, and submitting the job again resumes it. Cancel is cooperative:
the orchestrator checks for a request whenever a tile finishes (at most once a second) and
stops like an interrupted run — the done-mask saved, the store never marked complete, the
tiles written valid; a job still reading its graphs or fitting stops at its first finished tile.
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import re
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from gramdist.engine.cluster import connect
from gramdist.engine.context import RunContext
from gramdist.engine.jobrecord import (
    TERMINAL,
    JobStatus,
    cancel_file,
    job_status,
    orchestrator_gone,
    read_record,
    record_file,
    status_from_record,
    store_progress,
)
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_grid, store_path_for
from gramdist.engine.store import Location
from gramdist.engine.store import lock as store_lock
from gramdist.errors import GramdistError, JobError, StoreError

logger = logging.getLogger("gramdist.detached")

#: seconds between two records of a job's progress (and cancel checks)
RECORD_SECONDS = 1.0
#: seconds between two heartbeats of a running orchestrator in its record
HEARTBEAT_SECONDS = store_lock.HEARTBEAT_SECONDS
#: how long :func:`submit` waits for the job to start (reading its graphs, taking its store)
WAIT_SECONDS = 30.0
#: scheduler metadata: job id -> the job's record; and job id -> a cancel request
META = "gramdist-jobs"
CANCEL_META = "gramdist-cancel"
#: log lines kept in the record
MESSAGES_KEPT = 20


class DetachedJobError(GramdistError):
    """A detached job ended without completing (failed, cancelled, stopped), or never started."""


class JobCancelled(GramdistError):
    """Raised inside the orchestrator to stop its run when a cancel was requested."""


class _Superseded(Exception):
    """Another orchestrator of the same job has taken the job over (this one was presumed dead)."""


def new_job_id(job: dict[str, Any]) -> str:
    """``gramdist-<job name>-<6 hex>``: unique per submission (a resubmission is a new job)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "-", str(job.name or "job"))[:40]
    return f"gramdist-{name}-{uuid.uuid4().hex[:6]}"


def job_stores(job: Any, path: str) -> list[tuple[str, str]]:
    """``(setting, store)`` of every store the job writes: ``path`` itself, or one per grid
    setting in the folder ``path`` (as :func:`~gramdist.engine.runner.run_grid` names them)."""
    from gramdist.jobs import expand_grid

    settings = expand_grid(job)
    if len(settings) == 1 and not settings[0][0]:
        return [("", path)]
    return [(name, str(Location(path).join(f"{name}.zarr"))) for name, _ in settings]


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}"


# ------------------------------------------------------------------------------------ worker side
def probe_location(path: str) -> dict[str, Any]:
    """Run on a worker: can the store ``path`` be created and written here? Returns this
    worker's host and the problem (None when there is none)."""
    problem = Location(path).writable_problem()
    return {"host": socket.gethostname(), "problem": problem}


def claim_stores(path: str, stores: list[tuple[str, str]], record: dict[str, Any]) -> None:
    """Run on one worker: refuse when a live writer holds one of the stores, else write the
    job's first record (state queued) beside ``path``."""
    for _, store in stores:
        held = store_lock.read_lock(store)
        if held is not None and store_lock.is_stale(held) is None:
            raise store_lock.StoreBusyError(busy_message(store, held))
    current = read_record(path)
    if current is not None and current.get("state") == "running" and current.get("job_id") != record["job_id"]:
        if orchestrator_gone(current, time.time()) is None:
            raise store_lock.StoreBusyError(busy_message(path, {**(current.get("orchestrator") or {}),
                                                              "since": current.get("since", 0),
                                                              "job_id": current.get("job_id")}))
    record_file(path).write(record)


def busy_message(store: str, held: dict[str, Any]) -> str:
    if held.get("job_id"):
        where = store_lock.describe({**held, "job_id": None})  # host, process, since
        return (f"{store}: being written by job {held['job_id']} ({where}); "
                f"follow it with `gramdist status {store}`, stop it with `gramdist cancel {store}`")
    return (f"{store}: being written by another run ({store_lock.describe(held)}); wait for it, or stop it "
            f"(its lock {store_lock.lock_file(store).name} is freed when it ends)")


def orchestrate(job: dict[str, Any], path: str, job_id: str, overwrite: bool) -> str:
    """The long-running task of a detached job: run it on this worker's client. Returns the
    state it ended in. Never called by hand: :func:`submit` launches it."""
    from distributed import get_client, get_worker, secede

    secede()  # it waits on its own tasks: give the worker's thread back to them
    return _Orchestrator(job, path, job_id, get_client(), get_worker()).run(overwrite)


class _Orchestrator:
    """The orchestration of one detached job on a worker: the run, its record, its cancel checks."""

    def __init__(self, job: dict[str, Any], path: str, job_id: str, client: Any, worker: Any) -> None:
        self.job, self.path, self.job_id, self.client, self.worker = job, path, job_id, client, worker
        self.stores = [s for _, s in job_stores(job, path)]
        self.me = {"host": socket.gethostname(), "pid": os.getpid(), "worker": worker.address,
                   "name": str(worker.name)}
        self.messages: list[str] = []
        self.progress_state = {"computed": 0, "first_at": None, "at": None, "done": None, "total": None}
        self.phase = "preparing"
        self._write_lock = threading.Lock()
        self._last_record = 0.0
        self._stop = threading.Event()

    # -------------------------------------------------------------- record
    def update(self, *, claim: bool = False, **fields: Any) -> None:
        """Merge ``fields`` into the record (and the scheduler's copy). Raises
        :class:`_Superseded` when another orchestrator of this job has taken it over."""
        with self._write_lock:
            record = read_record(self.path) or {}
            if not claim and record.get("orchestrator") not in (None, self.me):
                raise _Superseded(record.get("orchestrator"))
            now = time.time()
            record.update(fields, job_id=self.job_id, heartbeat=now, updated=now, messages=self.messages[-MESSAGES_KEPT:])
            record_file(self.path).write(record)
            self._last_record = time.monotonic()
        self._publish(record)

    def _publish(self, record: dict[str, Any]) -> None:
        with contextlib.suppress(Exception):  # the scheduler's copy is a convenience; the file is the truth
            self.client.set_metadata([META, self.job_id], record)

    def finish(self, state: str, **fields: Any) -> str:
        self._stop.set()
        try:
            self.update(state=state, since=time.time(), phase=None, **fields)
        except _Superseded:
            pass
        logger.info("gramdist job %s: %s %s", self.job_id, state, fields.get("error") or fields.get("reason") or "")
        return state

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                self.update()
            except _Superseded:
                return
            except OSError as exc:  # a full disk must not kill the job; its status may then look stale
                logger.warning("gramdist job %s: cannot write its record: %s", self.job_id, exc)

    # -------------------------------------------------------------- hooks of the run
    def log(self, msg: str) -> None:
        self.messages.append(msg)
        logger.info("%s: %s", self.job_id, msg)
        if self.phase == "preparing" and self._holds_a_store():
            self.phase = "computing"
        self.update(phase=self.phase)

    def _holds_a_store(self) -> bool:
        for store in self.stores:
            held = store_lock.read_lock(store)
            if held and held.get("job_id") == self.job_id and held.get("pid") == os.getpid():
                return True
        return False

    def progress(self, done: int, total: int) -> None:
        now = time.time()
        p = self.progress_state
        p["computed"] += 1
        if p["first_at"] is None:
            p["first_at"] = now
        p.update(at=now, done=int(done), total=int(total))
        if time.monotonic() - self._last_record >= RECORD_SECONDS or done == total:
            who = self.cancel_requested()
            if who:
                raise JobCancelled(f"cancelled by {who}")
            self.phase = "tiles"
            self.update(phase="tiles", progress=dict(p))

    def cancel_requested(self) -> str | None:
        """Who asked to cancel this job (through the store or the scheduler), or None."""
        request = cancel_file(self.path).read()
        if request and request.get("job_id") == self.job_id:
            return str(request.get("by") or "a cancel request")
        with contextlib.suppress(Exception):
            request = self.client.get_metadata([CANCEL_META, self.job_id], default=None)
            if request:
                return str(request.get("by") if isinstance(request, dict) else "a cancel request")
        return None

    def _worker_closing(self) -> bool:
        return getattr(getattr(self.worker, "status", None), "name", "running") not in ("running", "paused")

    def _scheduler_lost(self, exc: BaseException | None) -> bool:
        """Whether ``exc`` comes from losing the scheduler (its futures cancelled for that reason,
        or a closed connection)."""
        from distributed.client import FutureCancelledError
        from distributed.comm.core import CommClosedError

        while exc is not None:
            if isinstance(exc, CommClosedError):
                return True
            if isinstance(exc, FutureCancelledError) and exc.reason in ("scheduler-connection-lost",
                                                                        "scheduler-restart"):
                return True
            exc = exc.__cause__ or exc.__context__
        return False

    # -------------------------------------------------------------- the run
    def run(self, overwrite: bool) -> str:
        record = read_record(self.path)
        if record is None or record.get("job_id") != self.job_id:
            # another submission claimed the store since: leave its record alone
            self._publish({"job_id": self.job_id, "state": "failed", "since": time.time(),
                           "error": f"{self.path}: claimed by job {record and record.get('job_id')} before this one started"})
            return "failed"
        if record.get("state") == "cancelled":  # while queued, or while Dask was restarting it
            self._publish(record)
            return "cancelled"
        restarted = record.get("state") != "queued"  # an earlier orchestrator of this job started
        who = self.cancel_requested()
        if who:
            return self.finish("cancelled", reason=f"cancelled by {who} before it started")
        fields: dict[str, Any] = {"state": "running", "phase": "preparing", "since": time.time(),
                                  "orchestrator": self.me}
        if restarted:
            fields["restarts"] = int(record.get("restarts", 0)) + 1
            before = record.get("orchestrator") or {}
            self.messages = list(record.get("messages") or [])
            self.messages.append(f"gramdist: orchestrator restarted on worker {self.me['name']} ({self.me['host']}); "
                                 f"the previous one (worker {before.get('name')} on {before.get('host')}) stopped")
        self.update(claim=True, **fields)
        threading.Thread(target=self._heartbeat, name=f"{self.job_id}-heartbeat", daemon=True).start()
        try:
            # a restarted orchestrator never overwrites: its predecessor may have written tiles
            results = run_grid(self.job, out=self.path, placement=Placement(client=self.client),
                               overwrite=overwrite and not restarted,
                               context=RunContext(progress=self.progress, log=self.log, job_id=self.job_id))
        except _Superseded:
            self._stop.set()
            logger.warning("gramdist job %s: taken over by another orchestrator; this one stops", self.job_id)
            return "superseded"
        except JobCancelled as exc:
            complete = all((store_progress(s) or {}).get("complete") for s in self.stores)
            return self.finish("complete") if complete else self.finish("cancelled", reason=str(exc))
        except BaseException as exc:
            if self._scheduler_lost(exc) or (not self._worker_closing()
                                             and getattr(self.client, "status", "running") != "running"):
                logger.warning("gramdist job %s: lost its scheduler: %s: %s", self.job_id, type(exc).__name__, exc)
                self.finish("stopped", reason=f"lost the connection to its scheduler {self.client.scheduler.address}; "
                                              "submit the job again to resume")
            elif self._worker_closing():
                self.finish("stopped", reason=f"its worker {self.me['name']} closed; if its scheduler still runs, "
                                              "Dask starts the orchestrator again on another worker")
            elif isinstance(exc, GramdistError | OSError):
                self.finish("failed", error=str(exc))
            elif isinstance(exc, Exception):
                logger.exception("gramdist job %s failed", self.job_id)
                self.finish("failed", error=f"{type(exc).__name__}: {exc}")
            else:
                self.finish("stopped", reason=f"interrupted ({type(exc).__name__})")
            if not isinstance(exc, Exception):
                raise
            return "failed"
        if all(result.complete for _, result in results):
            return self.finish("complete")
        return self.finish("failed", error="the run ended without completing its store; submit it again")


# ------------------------------------------------------------------------------------ client side
@dataclass
class SubmittedJob:
    """A job submitted with :func:`submit`: its id and store, and how to reach its scheduler.

    ``status()`` reads the store's files when this machine sees them, else asks the scheduler;
    ``wait()`` returns once the job has ended; ``cancel()`` stops it.
    """

    job_id: str
    store: str
    scheduler: str | None
    dashboard: str | None
    state: str
    cluster: dict[str, Any] = field(default_factory=dict, repr=False)  # TLS settings to reconnect

    def status(self) -> JobStatus:
        if record_file(self.store).exists():
            return job_status(self.store)
        with connect(self.cluster, self.scheduler, timeout="10s") as client:
            return scheduler_status(client, self.job_id)

    def wait(self, timeout: float | None = None, poll: float = 1.0) -> JobStatus:
        """Block until the job ends; return its final status if complete, else raise
        :class:`DetachedJobError` (failed, cancelled, stopped) or ``TimeoutError``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if status.finished:
                if status.state != "complete":
                    raise DetachedJobError(f"job {self.job_id} {status.summary()}")
                return status
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.job_id} still {status.summary()} after {timeout} s")
            time.sleep(poll)

    def cancel(self, wait: float = WAIT_SECONDS) -> JobStatus:
        return cancel(self.store if record_file(self.store).exists() else self.job_id,
                      scheduler=self.scheduler, cluster=self.cluster, wait=wait)


def submit(job: dict[str, Any] | str | os.PathLike, *, out: str | None = None, scheduler: str | None = None,
           client: Any = None, overwrite: bool = False, wait: float = WAIT_SECONDS) -> SubmittedJob:
    """Submit a job to run on a Dask cluster without this process; return at once.

    Parameters
    ----------
    job : a job file, or a job dict from :func:`gramdist.jobs.load_job`.
    out : the store (a folder of stores for a grid); made absolute here, and it must be at that
        path on the workers (checked from every worker before submitting).
    scheduler : the scheduler's address (else ``cluster.scheduler``, ``$DASK_SCHEDULER_ADDRESS``);
        the job's ``cluster.security`` gives the TLS settings.
    client : an existing ``distributed.Client`` instead.
    overwrite : replace a store made by a different job.
    wait : seconds to wait for the job to start (read its graphs and take its store); a job that
        fails in that time raises :class:`DetachedJobError`; a slower one is returned still
        starting (or queued).

    Raises
    ------
    JobError : no scheduler that outlives this process (none given, or ``cluster.jobqueue``).
    StoreError : the store cannot be written from the workers, or is being written
        (:class:`~gramdist.engine.store.StoreBusyError`, naming the job that writes it).
    """
    from distributed import fire_and_forget

    from gramdist.jobs import Job, load_job

    if not isinstance(job, Job):
        job = load_job(job)
    cluster = job.cluster
    address = scheduler or cluster.scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS")
    if client is None and not address:
        if cluster.jobqueue:
            raise JobError("cluster.jobqueue starts the Dask scheduler inside this process, so it would end with it; "
                           "start a cluster that lasts (deploy/hpc/dask-cluster.slurm) and submit to it with "
                           "--scheduler-file or --scheduler, or use `gramdist run`")
        raise JobError("submit needs a running Dask scheduler that outlives this process: --scheduler ADDR, "
                       "cluster.scheduler or $DASK_SCHEDULER_ADDRESS (`gramdist run` starts a cluster of its own)")
    given = store_path_for(job, out)
    path = str(Location(given).absolute())
    stores = job_stores(job, path)
    job_id = new_job_id(job)
    with (connect(cluster, address) if client is None else contextlib.nullcontext(client)) as c:
        _wait_for_workers(c)
        _check_from_workers(c, path, given)
        _refuse_if_pending(c, path, job_id)
        now = time.time()
        record = {"job_id": job_id, "job_name": job.name, "state": "queued", "since": now,
                  "submitted": now, "submitted_by": _who(), "store": path, "stores": stores,
                  "scheduler": c.scheduler.address, "dashboard": c.dashboard_link, "restarts": 0,
                  "heartbeat": now, "messages": []}
        first = sorted(c.nthreads())[0]
        c.run(claim_stores, path, stores, record, workers=[first])
        c.set_metadata([META, job_id], record)
        future = c.submit(orchestrate, job, path, job_id, overwrite, key=job_id, pure=False)
        fire_and_forget(future)
        entry = _wait_until_started(c, future, job_id, wait)
        return SubmittedJob(job_id, path, address or c.scheduler.address, c.dashboard_link,
                            entry.get("state", "queued"), {"security": cluster.security})


def _wait_for_workers(client: Any, timeout: float = 30.0) -> None:
    try:
        client.wait_for_workers(1, timeout=timeout)
    except TimeoutError:
        raise JobError(f"the scheduler at {client.scheduler.address} has no workers (waited {timeout:.0f} s); "
                       "start some and submit again") from None


def _check_from_workers(client: Any, path: str, given: str) -> None:
    """Every worker must be able to create and write the store at ``path`` (tile tasks write
    their chunks from wherever they run)."""
    answers = client.run(probe_location, path)
    bad = {addr: a for addr, a in answers.items() if a["problem"]}
    if not bad:
        return
    addr, answer = sorted(bad.items())[0]
    if Location(given).remote:
        need = "the workers need the bucket's credentials in their environment (or an instance role)"
    else:
        hint = f" (--out {given} was resolved on this machine)" if not Location(given).is_absolute() else ""
        need = f"the store must be on a file system the workers share, at the same absolute path{hint}"
    raise StoreError(f"{path}: cannot be written from {len(bad)} of {len(answers)} workers: on worker {addr} "
                     f"(host {answer['host']}) {answer['problem']}; {need}")


def _refuse_if_pending(client: Any, path: str, job_id: str) -> None:
    """A job queued on this scheduler for the same store has not taken its lock yet: refuse too."""
    jobs = client.get_metadata([META], default={}) or {}
    for other, entry in jobs.items():
        if other != job_id and entry.get("store") == path and entry.get("state") == "queued":
            states = client.run_on_scheduler(_task_states, [other])
            if states.get(other, {}).get("state") not in (None, "erred", "forgotten", "memory"):
                raise store_lock.StoreBusyError(f"{path}: job {other}, queued on this scheduler, will write it; "
                                                f"cancel it first (`gramdist cancel {other}`)")


def _wait_until_started(client: Any, future: Any, job_id: str, wait: float) -> dict[str, Any]:
    """Poll the scheduler's copy of the record until the job holds its store (or ended, or
    ``wait`` seconds passed)."""
    deadline = time.monotonic() + wait
    entry: dict[str, Any] = {}
    while time.monotonic() < deadline:
        entry = client.get_metadata([META, job_id], default=None) or {}
        state = entry.get("state")
        if state == "failed":
            raise DetachedJobError(f"job {job_id} failed: {entry.get('error')}")
        if state in TERMINAL or (state == "running" and entry.get("phase") != "preparing"):
            return entry
        if future.status == "error":
            raise DetachedJobError(f"job {job_id}: its orchestrator task failed on the cluster: "
                                   f"{type(future.exception()).__name__}: {future.exception()}")
        time.sleep(0.2)
    return entry


def _task_states(keys: list[str], dask_scheduler: Any = None) -> dict[str, dict[str, Any]]:
    """Run on the scheduler: the state of each orchestrator task (None once forgotten)."""
    out = {}
    for key in keys:
        ts = dask_scheduler.tasks.get(key)
        out[key] = {"state": ts.state if ts is not None else None,
                    "error": str(ts.exception_text) if ts is not None and ts.exception_text else None}
    return out


def list_jobs(client: Any) -> list[JobStatus]:
    """The gramdist jobs the scheduler knows of (since it started), oldest first."""
    jobs = client.get_metadata([META], default={}) or {}
    states = client.run_on_scheduler(_task_states, list(jobs)) if jobs else {}
    out = []
    for job_id, entry in sorted(jobs.items(), key=lambda kv: kv[1].get("submitted") or 0):
        status = status_from_record(entry, entry.get("store") or "?", read_stores=False)
        task = states.get(job_id, {})
        if status.state in ("queued", "running") and task.get("state") in (None, "erred", "forgotten", "memory"):
            status.state = "stopped"
            status.reason = (f"its orchestrator task erred: {task['error']}" if task.get("state") == "erred"
                             else "its orchestrator task is no longer on the scheduler")
        out.append(status)
    return out


def scheduler_status(client: Any, job_id: str) -> JobStatus:
    """One job's status as the scheduler knows it (for a store this machine cannot see)."""
    for status in list_jobs(client):
        if status.job_id == job_id:
            return status
    raise JobError(f"no job {job_id} on the scheduler at {client.scheduler.address}")


def cancel(target: str, *, scheduler: str | None = None, cluster: dict[str, Any] | None = None,
           client: Any = None, wait: float = WAIT_SECONDS) -> JobStatus:
    """Stop the job writing the store ``target`` (or the job with id ``target``) cleanly.

    The request goes beside the store (when this machine sees it) and to the scheduler the
    caller names (``client``, or ``scheduler`` with the TLS settings of ``cluster``): the address
    recorded beside the store is shown, never dialled (a file beside a store is data, and
    anyone who can write it could point it elsewhere). A job that has ended is reported at
    once, with nothing dialled. The orchestrator stops when its next tile finishes, saving its
    done-mask: the tiles written stay valid, and submitting or running the job again resumes
    from them. A job that no longer runs is marked cancelled at once. Returns the status after
    at most ``wait`` seconds (still running, with ``cancel_requested``, if it has not stopped).
    """
    store, record = _submitted_store(target)
    job_id = record["job_id"] if record else target
    address = scheduler
    request = {"job_id": job_id, "by": _who(), "requested": time.time()}
    if store is not None and job_status(store).finished:
        return job_status(store)
    with contextlib.ExitStack() as stack:
        c = client
        if c is None and address:
            try:
                c = stack.enter_context(connect(cluster or {}, address, timeout="5s"))
            except GramdistError:
                if store is None:
                    raise
        if c is None and store is None:
            raise JobError(f"{target}: neither a store with a submitted job nor, without --scheduler "
                           "(or $DASK_SCHEDULER_ADDRESS), a job id that can be looked up")

        def current() -> JobStatus:
            return job_status(store) if store is not None else scheduler_status(c, job_id)

        if store is None and record_file(found := scheduler_status(c, job_id).store).exists():
            store = found
        status = current()
        if status.finished:
            return status
        if store is not None:
            cancel_file(store).write(request)
            if status.state == "queued":  # nobody runs it yet: record the cancel now
                _mark_cancelled(store, job_id, f"cancelled by {request['by']} while queued")
        if c is not None:
            c.set_metadata([CANCEL_META, job_id], request)
        deadline = time.monotonic() + wait
        while True:
            status = current()
            status.cancel_requested = True
            if status.state == "stopped" and store is not None:  # its orchestrator is gone
                _mark_cancelled(store, job_id, f"cancelled by {request['by']} while stopped ({status.reason})")
                status = current()
            if status.finished or time.monotonic() > deadline:
                if c is None and not status.finished:
                    status.reason = "its scheduler could not be reached; the request waits beside the store"
                return status
            time.sleep(0.5)


def _submitted_store(target: str) -> tuple[str | None, dict[str, Any] | None]:
    """``(store, record)`` of the submitted job writing ``target`` (a store, a grid's folder or
    one of its stores), or ``(None, None)`` when ``target`` is not a path (a job id)."""
    record = read_record(target)
    if record is not None:
        return target, record
    if not Location(target).exists():
        return None, None
    status = job_status(target)  # a setting of a grid, or a store no job was submitted to
    record = read_record(status.store) if status.job_id else None
    if record is None:
        raise JobError(f"{target}: no submitted job writes it ({status.summary()}); "
                       "only submitted jobs can be cancelled")
    return status.store, record


def _mark_cancelled(store: str, job_id: str, reason: str) -> None:
    record = read_record(store) or {}
    if record.get("job_id") == job_id and record.get("state") not in TERMINAL:
        record.update(state="cancelled", since=time.time(), phase=None, reason=reason)
        record_file(store).write(record)
