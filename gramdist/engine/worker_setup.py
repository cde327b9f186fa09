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
"""

from __future__ import annotations

import threading
from typing import Any

from gramdist.stopping import leave_stop_signals_to_the_command


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():  # where a handler may be set
        leave_stop_signals_to_the_command()
