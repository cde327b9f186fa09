"""One writer per store: a lock file beside it, with a heartbeat, taken over when stale.

``STORE.lock`` (next to the store folder ``STORE``) is created atomically (``O_CREAT |
O_EXCL``) by the process that writes the store — ``gramdist run``, an append, a detached
job's orchestrator — and removed when it stops. It holds JSON: ``host``, ``pid``, ``since``,
``heartbeat`` (both Unix times), ``command`` and an optional ``job_id``. While held, a thread
rewrites ``heartbeat`` every :data:`HEARTBEAT_SECONDS`.

A second writer is refused with a :class:`StoreBusyError` naming the holder. A lock is *stale*
— its writer was killed without removing it — when its process is gone (same host) or its
heartbeat is older than :data:`STALE_SECONDS` (any host; processes on other hosts cannot be
checked); a stale lock is taken over with a note. A lock with the same ``job_id`` as the new
writer (a detached job restarted on another worker) is taken over as well.

The lock sits beside the store rather than inside it because it is taken before the store
exists and must survive ``--overwrite`` clearing the store. Atomic creation holds on local
file systems and on NFS v3+; two writers that both find the same stale lock and take it over
in the same instant are told apart by re-reading the lock after writing it.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
import uuid
from typing import Any

from gramdist.engine.store.location import Location, Sidecar
from gramdist.errors import StoreError

HEARTBEAT_SECONDS = 10.0
#: a lock whose heartbeat is older than this is stale, whatever host holds it
STALE_SECONDS = 60.0


class StoreBusyError(StoreError):
    """The store is being written by another run."""


def lock_file(store: str | os.PathLike | Location) -> Sidecar:
    """``STORE.lock``, beside the store."""
    location = store if isinstance(store, Location) else Location(store)
    return location.sidecar(".lock")


def read_lock(store: str | os.PathLike | Location) -> dict[str, Any] | None:
    """The lock record of ``store`` (None when nobody holds it or it cannot be read)."""
    return lock_file(store).read()


def describe(record: dict[str, Any]) -> str:
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.get("since", 0)))
    job = f", job {record['job_id']}" if record.get("job_id") else ""
    return f"host {record.get('host')}, process {record.get('pid')}, since {since}{job}"


def is_stale(record: dict[str, Any], now: float | None = None) -> str | None:
    """Why the lock is stale (its process gone, or no heartbeat for too long), or None."""
    now = time.time() if now is None else now
    if record.get("host") == socket.gethostname() and not _alive(int(record.get("pid", -1))):
        return f"its process {record.get('pid')} is gone"
    age = now - float(record.get("heartbeat", 0))
    if age > STALE_SECONDS:
        return f"no heartbeat for {age:.0f} s (more than {STALE_SECONDS:.0f} s)"
    return None


def current_writer(store: str | os.PathLike | Location) -> dict[str, Any] | None:
    """Who holds the store's lock now, for ``gramdist info``: the lock record (host, pid,
    since, heartbeat, command, job_id) with ``stale`` (why it no longer counts, or None) and
    ``description``; None when nobody holds it."""
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
    return True


class StoreLock:
    """Hold ``STORE.lock`` while writing ``store``; use as a context manager.

    Parameters
    ----------
    store : the store's path.
    job_id : identifies a detached job: a lock held under the same id is taken over.
    log : where the note about a taken-over stale lock goes.
    """

    def __init__(self, store: str | os.PathLike | Location, *, job_id: str | None = None,
                 log: Any = None) -> None:
        self.store = store if isinstance(store, Location) else Location(store)
        self.file = lock_file(self.store)
        self.job_id = job_id
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.token = uuid.uuid4().hex
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self) -> dict[str, Any]:
        now = time.time()
        return {"host": socket.gethostname(), "pid": os.getpid(), "since": now, "heartbeat": now,
                "command": " ".join(sys.argv[:3]), "job_id": self.job_id, "token": self.token}

    def acquire(self) -> StoreLock:
        for _ in range(3):
            if not self.file.create(self._record()):
                held = self.file.read()
                if held is None:  # being written this instant, or unreadable: look again
                    time.sleep(0.2)
                    held = self.file.read()
                    if held is None:
                        held = {"host": "?", "pid": -1, "heartbeat": self.file.modified() or 0.0}
                why = "it belongs to this job" if self.job_id and held.get("job_id") == self.job_id else is_stale(held)
                if why is None:
                    raise StoreBusyError(
                        f"{self.store}: being written by another run ({describe(held)}); wait for it, "
                        f"or stop it (its lock {self.file.name} is freed when it ends)") from None
                if self._take_over(held):
                    self.log(f"gramdist: note: took over the lock of {self.store} left by "
                             f"{describe(held)}: {why}")
                    break
                continue
            break
        else:
            raise StoreBusyError(f"{self.store}: could not take its lock {self.file} (another writer keeps taking it)")
        self._thread = threading.Thread(target=self._beat, name="gramdist-lock-heartbeat", daemon=True)
        self._thread.start()
        return self

    def _take_over(self, held: dict[str, Any]) -> bool:
        """Replace a stale lock by ours; False if another writer got there first."""
        current = self.file.read()
        if current is not None and current.get("token") != held.get("token"):
            return False
        self.file.write(self._record())
        time.sleep(0.05)
        mine = self.file.read()
        return mine is not None and mine.get("token") == self.token

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            record = self.file.read()
            if record is None or record.get("token") != self.token:
                return  # taken over (we were presumed dead): never write over the new holder
            record["heartbeat"] = time.time()
            try:
                self.file.write(record)
            except OSError:
                pass  # a full disk must not kill the run; the lock may then look stale

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        record = self.file.read()
        if record is not None and record.get("token") == self.token:
            self.file.remove()

    def __enter__(self) -> StoreLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
