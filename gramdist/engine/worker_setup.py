"""Set-up of the worker processes of the LocalCluster that gramdist starts (a Dask preload).

Ctrl-C in a terminal sends SIGINT to the whole foreground process group: the command, and the
worker processes its cluster spawned. The command handles it (the done-mask saved, the store's
lock released, the cluster closed, one line: "interrupted; run the same command again to
resume"); a worker that raised ``KeyboardInterrupt`` too only printed its traceback over that
line. So the workers ignore SIGINT, like the forked embedding workers
(:mod:`gramdist.engine.processes`): the command closes them. A worker killed in any other way is
what Dask already handles (its tasks run again elsewhere).
"""

from __future__ import annotations

import signal
import threading
from typing import Any


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, run in the worker process when the worker starts."""
    if threading.current_thread() is threading.main_thread():  # where a handler may be set
        signal.signal(signal.SIGINT, signal.SIG_IGN)
