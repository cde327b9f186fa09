"""The files beside a store that describe the detached job writing it, and its status.

``STORE.job.json`` is the job record (see :mod:`gramdist.engine.detached` for who writes what);
``STORE.cancel`` a cancel request. :func:`job_status` reads them with the store's lock and
done-mask, so the status of a job needs nothing but the files: it works with the cluster gone.
Plain JSON, replaced atomically, kept as the store's sidecars
(:meth:`gramdist.engine.store.Location.sidecar`); the store's progress comes from
:meth:`gramdist.engine.store.GramStore.info`.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from gramdist.engine.store import GramStore, Location, Sidecar
from gramdist.engine.store import lock as store_lock
from gramdist.errors import GramdistError, StoreError

#: states a job ends in; queued and running are the others
TERMINAL = ("complete", "failed", "cancelled", "stopped")
#: a running job whose last tile is older than this gets no ETA, and a note instead
QUIET_SECONDS = 15.0


# ------------------------------------------------------------------------------------ record
def record_file(store: str | os.PathLike) -> Sidecar:
    """``STORE.job.json``, beside the store (or beside a grid's folder of stores)."""
    return Location(store).sidecar(".job.json")


def cancel_file(store: str | os.PathLike) -> Sidecar:
    """``STORE.cancel``: a cancel request beside the store."""
    return Location(store).sidecar(".cancel")


def read_record(store: str | os.PathLike) -> dict[str, Any] | None:
    """The job record beside ``store`` (None if there is none or it cannot be read)."""
    return record_file(store).read()


# ------------------------------------------------------------------------------------ status
@dataclass
class JobStatus:
    """Where a detached job stands (what ``gramdist status`` prints).

    ``state`` is one of queued, running, cancelled, stopped, failed, complete; ``reason`` says
    why for stopped, failed and cancelled. ``tiles_done``/``tiles_total`` count the tiles of all
    of the job's stores that exist; ``rate`` (tiles/s) and ``eta_s`` come from the tiles the
    current orchestrator computed and when (None until it has computed two). Times are Unix
    seconds.
    """

    store: str
    state: str
    job_id: str | None = None
    reason: str | None = None
    since: float | None = None
    phase: str | None = None
    tiles_done: int | None = None
    tiles_total: int | None = None
    rate: float | None = None
    eta_s: float | None = None
    orchestrator: dict[str, Any] | None = None
    restarts: int = 0
    submitted: float | None = None
    submitted_by: str | None = None
    scheduler: str | None = None
    dashboard: str | None = None
    cancel_requested: bool = False
    settings: list[dict[str, Any]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.state in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: state, tiles, rate and ETA."""
        text = self.state
        if self.state == "running" and self.cancel_requested:
            text += " (cancel requested)"
        if self.tiles_total:
            text += f", {self.tiles_done}/{self.tiles_total} tiles ({100 * (self.tiles_done or 0) / self.tiles_total:.1f} %)"
        if self.state == "running" and self.rate:
            text += f", {self.rate:.2f} tiles/s"
            if self.eta_s is not None:
                text += f", ETA {format_duration(self.eta_s)}"
        if self.reason:
            text += f": {self.reason}"
        return text


def format_duration(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds // 60:.0f} min {seconds % 60:.0f} s"
    return f"{seconds // 3600:.0f} h {seconds % 3600 // 60:.0f} min"


def store_progress(store: str) -> dict[str, Any] | None:
    """``store_info`` of a store, or None while it does not exist (yet) or cannot be read."""
    if not Location(store).exists():
        return None
    try:
        return GramStore.open(store).info()
    except (GramdistError, OSError):
        return None


def orchestrator_gone(record: dict[str, Any], now: float) -> str | None:
    """Why the record's orchestrator is no longer running (its process is gone, or no
    heartbeat for too long), or None while it runs."""
    orch = record.get("orchestrator") or {}
    why = store_lock.is_stale({"host": orch.get("host"), "pid": orch.get("pid", -1),
                               "heartbeat": record.get("heartbeat", 0)}, now)
    if why is None:
        return None
    where = f"worker {orch.get('name') or orch.get('worker')} on {orch.get('host')}, process {orch.get('pid')}"
    return f"its orchestrator ({where}) stopped: {why}"


def status_from_record(record: dict[str, Any], store: str, *, read_stores: bool = True,
                       now: float | None = None) -> JobStatus:
    """A :class:`JobStatus` from a job record (the file beside the store, or the scheduler's
    copy); ``read_stores`` adds what the stores' done-masks say (and lets them overrule)."""
    now = time.time() if now is None else now
    state = record.get("state", "queued")
    reason = record.get("error") or record.get("reason")
    stores = record.get("stores") or [["", store]]
    progress = record.get("progress") or {}
    settings: list[dict[str, Any]] = []
    done = total = None
    if read_stores:
        infos = [(name, path, store_progress(path)) for name, path in stores]
        settings = [{"name": name, "store": path, "tiles_done": info and info["tiles_done"],
                     "tiles_total": info and info["tiles_total"], "complete": bool(info and info["complete"])}
                    for name, path, info in infos]
        known = [info for _, _, info in infos if info is not None]
        if known:
            done = sum(info["tiles_done"] for info in known)
            total = sum(info["tiles_total"] for info in known)
        if infos and all(s["complete"] for s in settings):
            # the stores are the truth: complete, whoever finished them (this job or a `gramdist run`)
            state, reason = "complete", None
    if state in ("queued", "running"):
        gone = orchestrator_gone(record, now) if state == "running" else None
        if gone:
            state, reason = "stopped", (f"{gone}; if its scheduler still runs, Dask starts it again on "
                                        "another worker within seconds, else submit the job again to resume")
    if state == "queued" and not reason:
        reason = "waiting for a worker to start its orchestrator (if its scheduler is gone, submit it again)"
    if state == "running" and progress.get("done") is not None and len(stores) == 1:
        # the orchestrator's count is fresher than the done-mask it saves every few seconds
        done = max(done or 0, int(progress["done"]))
        total = total or int(progress["total"])
    rate = eta = quiet = None
    if state == "running" and progress.get("computed", 0) > 1 and progress["at"] > progress["first_at"]:
        rate = (progress["computed"] - 1) / (progress["at"] - progress["first_at"])
        quiet = now - progress["at"]
        if quiet > QUIET_SECONDS:  # no tile for a while: an ETA from the old rate would mislead
            reason = reason or f"no tile finished for {quiet:.0f} s"
        elif len(stores) == 1 and done is not None and total is not None:
            eta = (total - done) / rate
    return JobStatus(
        store=str(store), state=state, job_id=record.get("job_id"), reason=reason,
        since=record.get("since"), phase=record.get("phase") if state == "running" else None,
        tiles_done=done, tiles_total=total, rate=rate, eta_s=eta, orchestrator=record.get("orchestrator"),
        restarts=int(record.get("restarts", 0)), submitted=record.get("submitted"),
        submitted_by=record.get("submitted_by"), scheduler=record.get("scheduler"),
        dashboard=record.get("dashboard"), cancel_requested=bool(record.get("cancel_requested")),
        settings=settings if len(stores) > 1 else [], messages=list(record.get("messages") or []))


def job_status(store: str | os.PathLike) -> JobStatus:
    """Status of the job writing ``store`` (or a grid's folder), from the files alone.

    A store no detached job wrote is described too: complete, being written by a
    ``gramdist run`` (its lock), or stopped (incomplete, nobody writing it).
    """
    store = str(store)
    record = read_record(store)
    if record is None:
        parent = Location(store).parent()  # a setting's store of a submitted grid
        grid = read_record(str(parent))
        if grid and any(Location(p) == Location(store) for _, p in grid.get("stores", [])):
            record, store = grid, str(parent)
    if record is not None:
        status = status_from_record(record, store)
        request = cancel_file(store).read()
        status.cancel_requested = bool(request and request.get("job_id") == status.job_id)
        return status
    info = store_progress(store)
    held = store_lock.read_lock(store)
    if held is not None and store_lock.is_stale(held) is None:
        what = f"job {held['job_id']}" if held.get("job_id") else "`gramdist run`"
        return JobStatus(store, "running", job_id=held.get("job_id"), since=held.get("since"),
                         reason=f"written by {what} ({store_lock.describe(held)})",
                         tiles_done=info and info["tiles_done"], tiles_total=info and info["tiles_total"],
                         orchestrator={"host": held.get("host"), "pid": held.get("pid")})
    if info is None:
        if not Location(store).exists():
            raise StoreError(f"{store}: no such store, and no job submitted to it")
        GramStore.open(store).info()  # raises the store's own one-line error
    if info["complete"]:
        return JobStatus(store, "complete", tiles_done=info["tiles_done"], tiles_total=info["tiles_total"])
    return JobStatus(store, "stopped", tiles_done=info["tiles_done"], tiles_total=info["tiles_total"],
                     reason="no job is writing it; run or submit its job again to resume")
