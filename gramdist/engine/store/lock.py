"""One writer per store: a lease with an epoch, taken atomically, checked before every write.

The lock is two kinds of small objects beside the store (its :class:`~.location.Location`'s
sidecars), so that it works where only "create if absent" and "replace" exist (a local file
system today; an object store's conditional writes next):

* ``STORE.lock`` — who holds the store: ``token`` (random, per holder), ``epoch`` (one more than
  the holder it replaced), ``host``, ``pid``, ``since``, ``command``, ``job_id``. Created only if
  absent (``O_CREAT | O_EXCL``), so of two writers starting together exactly one gets it; its
  holder never rewrites it.
* ``STORE.lock.<token>`` — that holder's heartbeat, rewritten every :data:`HEARTBEAT_SECONDS`
  by a thread. Each holder writes only its own, so a writer that wakes up after losing its
  lease can never overwrite the heartbeat (or the lock) of the one that replaced it.

A lease lasts :data:`STALE_SECONDS` from the last heartbeat. A lock is *stale* when its lease
has expired, or its process is gone (same host), or it cannot be read and is older than a
lease. A stale lock is taken over by renaming it away (a rename of one file succeeds for one
renamer only) and creating a new one with the next epoch. A detached job's orchestrator
restarted by Dask takes over its own job's lock the same way, once it is stale.

**Fencing.** A writer checks its lease before every write (:meth:`StoreLock.check` on the
client, :meth:`Lease.check` in a worker's tile or chunk task): the lock must still be its own
(same token) and its last heartbeat younger than the lease less a safety margin. So a writer
that was stopped past its lease (a suspended laptop, ``SIGSTOP``, an NFS stall) finds, when it
continues, either another holder or an expired lease, and stops before its next write with
:class:`LeaseLost`; the next writer resumes from what is on disk. SIGTERM and SIGHUP end the
command line's process through ``SystemExit``, so the lock is released (see ``gramdist.cli``).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from gramdist.engine.store.location import Location, Sidecar
from gramdist.errors import StoreError

#: a lease lasts this long after its holder's last heartbeat (``$GRAMDIST_LEASE_SECONDS``, default
#: 60: long enough for a busy machine's heartbeat thread, short enough to resume after a crash)
STALE_SECONDS = float(os.environ.get("GRAMDIST_LEASE_SECONDS") or 60.0)
HEARTBEAT_SECONDS = min(10.0, STALE_SECONDS / 6)
#: a writer stops writing this long before its lease would expire (its heartbeat is late)
SAFETY_SECONDS = min(15.0, STALE_SECONDS / 4)
#: a lease that passed its check this recently is not read again (in a bucket, a check is two
#: GETs per tile); well below SAFETY_SECONDS, so a write still lands long before anyone could
#: take the lock over (that needs the lease expired: STALE_SECONDS without a heartbeat)
RECHECK_SECONDS = min(1.0, SAFETY_SECONDS / 4)
_checked: dict[tuple[str, str], float] = {}


class StoreBusyError(StoreError):
    """The store is being written by another run."""


class LeaseLost(StoreError):
    """This writer's lease on the store has expired or been taken over: it must stop writing."""


def lock_file(store: str | os.PathLike | Location) -> Sidecar:
    """``STORE.lock``, beside the store."""
    location = store if isinstance(store, Location) else Location(store)
    return location.sidecar(".lock")


def beat_file(store: str | os.PathLike | Location, token: str) -> Sidecar:
    """``STORE.lock.<token>``: the heartbeat of the holder ``token``."""
    location = store if isinstance(store, Location) else Location(store)
    return location.sidecar(f".lock.{token}")


def _number(value: Any, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def read_lock(store: str | os.PathLike | Location) -> dict[str, Any] | None:
    """The lock record of ``store`` with its holder's ``heartbeat`` (None when nobody holds it
    or it cannot be read as a lock record)."""
    record = lock_file(store).read()
    if record is None or not isinstance(record.get("token", ""), str):
        return None
    beat = beat_file(store, str(record.get("token", ""))).read() or {}
    return record | {"heartbeat": _number(beat.get("heartbeat"), _number(record.get("since"), 0.0))}


def describe(record: dict[str, Any]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(_number(record.get("since"), 0.0)))
    job = f", job {record['job_id']}" if record.get("job_id") else ""
    return f"host {record.get('host')}, process {record.get('pid')}, since {since}{job}"


def is_stale(record: dict[str, Any], now: float | None = None) -> str | None:
    """Why the lock is stale (its process gone, or its lease expired), or None."""
    now = time.time() if now is None else now
    pid = int(_number(record.get("pid"), -1))
    if record.get("host") == socket.gethostname() and not _alive(pid):
        return f"its process {record.get('pid')} is gone"
    age = now - _number(record.get("heartbeat"), 0.0)
    if age > STALE_SECONDS:
        return f"no heartbeat for {age:.0f} s (more than {STALE_SECONDS:.0f} s)"
    return None


def current_writer(store: str | os.PathLike | Location) -> dict[str, Any] | None:
    """Who holds the store's lock now, for ``gramdist info``: the lock record (host, pid,
    since, heartbeat, command, job_id, epoch) with ``stale`` (why it no longer counts, or
    None) and ``description``; None when nobody holds it."""
    record = read_lock(store)
    if record is None:
        return None
    record = {k: v for k, v in record.items() if k != "token"}
    return record | {"stale": is_stale(record), "description": describe(record)}


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """A process killed but not reaped (where PID 1 reaps nothing, e.g. a container) still
    answers ``kill(pid, 0)``; Linux shows its state ``Z`` in ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[-1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


@dataclass(frozen=True)
class Lease:
    """What a worker's task checks before it writes: the store and the holder's token
    (picklable; :meth:`StoreLock.lease` makes one)."""

    store: str
    token: str

    def check(self) -> None:
        """:class:`LeaseLost` unless the holder still holds the store with a fresh heartbeat
        (read again unless it passed within :data:`RECHECK_SECONDS`)."""
        key = (self.store, self.token)
        if time.monotonic() - _checked.get(key, -1e9) < RECHECK_SECONDS:
            return
        record = read_lock(self.store)
        if record is None or record.get("token") != self.token:
            raise LeaseLost(f"{self.store}: this run no longer holds the store (its lock was taken over or "
                            "removed); it stops writing, and the run holding it now carries on")
        age = time.time() - _number(record.get("heartbeat"), 0.0)
        if age > STALE_SECONDS - SAFETY_SECONDS:
            raise LeaseLost(f"{self.store}: this run's lease ran out (no heartbeat for {age:.0f} s: was it stopped "
                            "or suspended?); it stops writing; run it again to resume")
        _checked[key] = time.monotonic()


class StoreLock:
    """Hold ``STORE.lock`` while writing ``store``; use as a context manager.

    Parameters
    ----------
    store : the store's location (or path).
    job_id : the detached job this writer is (recorded; shown to the writers it refuses).
    log : where the note about a taken-over stale lock goes.
    """

    def __init__(self, store: str | os.PathLike | Location, *, job_id: str | None = None,
                 log: Any = None) -> None:
        self.store = store if isinstance(store, Location) else Location(store)
        self.file = lock_file(self.store)
        self.job_id = job_id
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.token = uuid.uuid4().hex
        self.epoch = 0
        self._beat = beat_file(self.store, self.token)
        self._last_beat = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self, epoch: int) -> dict[str, Any]:
        return {"token": self.token, "epoch": epoch, "host": socket.gethostname(), "pid": os.getpid(),
                "since": time.time(), "command": " ".join(sys.argv[:3]), "job_id": self.job_id,
                "lease_seconds": STALE_SECONDS}

    def acquire(self) -> StoreLock:
        self._beat_now()  # the heartbeat exists before the lock names it: never a lock without one
        try:
            for _ in range(5):
                if self._try_create(1):
                    break
                held = self._held()
                why = is_stale(held) or self._wait_for_own_job(held)
                if why is None:
                    raise StoreBusyError(
                        f"{self.store}: being written by another run ({describe(held)}); wait for it, or stop it "
                        f"(its lock {self.file.name} is freed when it ends)") from None
                if self._take_over(held):
                    self.log(f"gramdist: note: took over the lock of {self.store} left by {describe(held)}: {why}")
                    break
            else:
                raise StoreBusyError(f"{self.store}: could not take its lock {self.file} (other writers keep taking it)")
        except BaseException:
            self._beat.remove()
            raise
        self._thread = threading.Thread(target=self._heartbeat, name="gramdist-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _wait_for_own_job(self, held: dict[str, Any]) -> str | None:
        """A detached job restarted elsewhere finds its own lock still held by the run it
        replaces (a worker lost, not yet seen dead): wait up to one lease for it to go stale,
        rather than fail a job nobody watches. Only ever for the same job id, and only stale."""
        if self.job_id is None or held.get("job_id") != self.job_id:
            return None
        deadline = time.monotonic() + STALE_SECONDS + 5
        while time.monotonic() < deadline:
            time.sleep(0.5)
            self._beat_now()
            current = read_lock(self.store)
            if current is None or current.get("token") != held.get("token"):
                return None  # released or taken meanwhile: the caller looks again
            why = is_stale(current)
            if why is not None:
                return why
        return None

    def _try_create(self, epoch: int) -> bool:
        if self.file.create(self._record(epoch)):
            self.epoch = epoch
            return True
        return False

    def _held(self) -> dict[str, Any]:
        """The current holder's record; an unreadable lock counts as held since it was written."""
        held = read_lock(self.store)
        if held is None:
            time.sleep(0.2)  # being written this instant: look again
            held = read_lock(self.store)
        if held is None:
            held = {"host": "?", "pid": -1, "token": None, "heartbeat": self.file.modified() or 0.0}
        return held

    def _take_over(self, held: dict[str, Any]) -> bool:
        """Replace a stale lock by ours with the next epoch; False if another writer got there
        first (then the caller looks again). The replace is conditional on the lock still being
        the stale one (:meth:`~.location.Sidecar.replace_if`: a rename locally, a compare-and-swap
        on its ETag in an object store), so of several writers taking it over exactly one does."""
        epoch = int(_number(held.get("epoch"), 0)) + 1
        if not self.file.replace_if(held.get("token"), self._record(epoch)):
            return False
        self.epoch = epoch
        if held.get("token"):
            beat_file(self.store, str(held["token"])).remove()
        return True

    def _beat_now(self) -> None:
        now = time.time()
        self._beat.write({"token": self.token, "heartbeat": now})
        self._last_beat = now

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            record = self.file.read()
            if record is None or record.get("token") != self.token or self._expired():
                return  # taken over, or the lease ran out while stopped: fenced, never revived
            try:
                self._beat_now()
            except OSError:
                pass  # a full disk must not kill the run; the lease may then run out and fence it

    def check(self) -> None:
        """:class:`LeaseLost` unless this writer still holds the store with a fresh lease: what
        the client checks before each save of its progress."""
        if time.time() - self._last_beat > STALE_SECONDS - SAFETY_SECONDS:
            try:  # the heartbeat thread may simply be late (a busy machine): beat if the lock is ours
                record = self.file.read()
                if record is not None and record.get("token") == self.token and not self._expired():
                    self._beat_now()
            except OSError:
                pass
        self.lease().check()

    def _expired(self) -> bool:
        return time.time() - self._last_beat > STALE_SECONDS

    def lease(self) -> Lease:
        """What tasks on workers check before they write."""
        return Lease(str(self.store), self.token)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.file.remove_if(self.token)  # not ours (we had lost it): left to its holder
        self._beat.remove()

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
