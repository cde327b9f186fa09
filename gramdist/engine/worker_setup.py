"""Set-up of the worker processes of the LocalCluster that gramdist starts (a Dask preload).

A terminal sends SIGINT (Ctrl-C) or SIGHUP (the terminal closed) to every process of its
session, and a batch system sends SIGTERM to the whole job: the command, and the worker
processes its cluster spawned. The command handles them (the done-mask saved, the store's lock
released, the cluster closed, one line: "interrupted; run the same command again to resume");
a worker that raised ``KeyboardInterrupt`` too only printed its traceback over that line, and a
worker killed by SIGTERM left its semaphores to the resource tracker's warning. So the workers
ignore the three signals, like the forked embedding workers (:mod:`gramdist.engine.processes`):
the command's nanny stops them, and a worker whose command died exits at once (Dask's
parent-alive pipe). A worker killed otherwise is what Dask handles (its tasks run elsewhere).

A worker still inside a task when its cluster closes (a long libsvm fit of ``evaluate``) is
killed by its nanny once the close's timeout has passed; :func:`_blosc_lock_without_a_name`
keeps that kill from leaving a semaphore behind.
"""

from __future__ import annotations

import threading
from typing import Any

from gramdist.stopping import leave_stop_signals_to_the_command


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():  # where a handler may be set
        leave_stop_signals_to_the_command()
    _blosc_lock_without_a_name()


def _blosc_lock_without_a_name() -> None:
    """Give numcodecs' Blosc the lock it makes on first use, made so that it needs no cleanup.

    numcodecs guards Blosc's global context with ``multiprocessing.Lock()``. In a worker (a
    spawned process) that is a named semaphore, registered with multiprocessing's resource
    tracker and unregistered when the process exits normally. A worker killed by its nanny,
    because a task outlasted the cluster's close, never unregisters it, and the tracker printed
    "There appear to be N leaked semaphore objects" under the command's "interrupted" line (one
    per worker that had read a Zarr chunk). A fork-context lock is unlinked when it is made:
    the same lock for the worker's threads and for any process it forks, nothing to clean up.
    Workaround of numcodecs' private module globals (``_MUTEX``, ``_MUTEX_IS_INIT``: what its
    ``get_mutex()`` reads), so it does nothing where they are not there.
    """
    import multiprocessing

    try:
        import numcodecs.blosc as blosc
        fork = multiprocessing.get_context("fork")
    except (ImportError, ValueError):  # no Blosc build, or no fork (Windows): nothing to do
        return
    if getattr(blosc, "_MUTEX_IS_INIT", True) is False:
        blosc._MUTEX = fork.Lock()
        blosc._MUTEX_IS_INIT = True
