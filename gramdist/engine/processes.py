"""Worker processes forked when the ``gramdist`` executable starts, for embeddings that hold the GIL.

Some kernels' embeddings hold the GIL for most of their time: SVM-θ's per-graph QPs are
SciPy's SuperLU (which takes the GIL for every allocation it makes) and short NumPy calls, so
two threads of one process embed D&D's five chunks in 1.5 s against 1.75 s for one. Processes
do not share a GIL, but a fresh process (``spawn``, ``forkserver``) first imports NumPy,
SciPy and the kernel (0.25 s here before its first task), and a ``fork`` is only safe before
any thread starts (a thread holding a lock at the fork leaves it held forever in the child).

So the executable forks its workers at once, before it reads the dataset or starts a thread
(the Zarr import, the store lock's heartbeat, the pools), with the kernel's module already
imported: the children start in milliseconds with every module they need. A run in this
process (:class:`~gramdist.engine.executor.InlineExecutor`) then sends the embeddings of a
kernel that ``embeds_in_processes`` to them; a run placed on a cluster leaves them idle, and
the command closes them at its end.

Only the executable forks (:func:`allow_fork`, called by its entry point): a library must not
fork its host process, and ``multiprocessing``'s other start methods would import the host's
``__main__`` again (a user's script without a ``__main__`` guard would fail). Only on Linux
(``fork`` is unsafe on macOS), only with more than one core for the run
(:func:`~gramdist.engine.placement.in_process_threads`), and never where ``$GRAMDIST_FORK`` is
``0``. A child ignores the signals that stop a run (the command handles them and kills its
children) and dies with its parent (``PR_SET_PDEATHSIG``), so that no worker outlives the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from typing import Any

from gramdist.stopping import leave_stop_signals_to_the_command

_FORK_ALLOWED = False


def allow_fork() -> None:
    """Let :func:`forked_workers` fork this process: the ``gramdist`` executable only."""
    global _FORK_ALLOWED
    _FORK_ALLOWED = True


def fork_possible(n_workers: int) -> bool:
    """Whether :func:`forked_workers` would fork ``n_workers`` processes here and now."""
    return (_FORK_ALLOWED and n_workers > 1 and sys.platform == "linux"
            and os.environ.get("GRAMDIST_FORK", "").strip() != "0" and threading.active_count() == 1)


class ForkedWorkers:
    """``n`` worker processes forked from this one (see the module docstring); ``submit`` runs
    a picklable function there and returns a :class:`concurrent.futures.Future`."""

    def __init__(self, n: int) -> None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self.n = n
        self._pool = ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_child_start, initargs=(os.getpid(),))
        # a fork-context pool forks all its workers in its first submit: now, while this
        # process has no other thread (not waited for: the workers start beside the read)
        self._pool.submit(os.getpid)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        return self._pool.submit(fn, *args)

    def close(self) -> None:
        """Drop the queued tasks and stop the workers, running tasks included: a run that ends
        early (an error, a signal) does not wait for embeddings it no longer needs."""
        processes = list((getattr(self._pool, "_processes", None) or {}).values())
        self._pool.shutdown(wait=False, cancel_futures=True)
        # ProcessPoolExecutor has no way to stop running tasks before Python 3.14's
        # ``kill_workers``; its ``_processes`` are the multiprocessing.Process objects
        for p in processes:
            if p.is_alive():
                p.kill()
        for p in processes:
            p.join(timeout=5)


@contextlib.contextmanager
def forked_workers(n_workers: int) -> Iterator[ForkedWorkers | None]:
    """:class:`ForkedWorkers` of ``n_workers`` processes where :func:`fork_possible`, else None;
    closed on exit."""
    workers = ForkedWorkers(n_workers) if fork_possible(n_workers) else None
    try:
        yield workers
    finally:
        if workers is not None:
            workers.close()


def _child_start(parent: int) -> None:
    """A worker's start: die with the parent, leave stopping signals to it, BLAS single-threaded."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    # checked after the prctl, not before: a parent that exits between the check and the prctl
    # (the import above takes milliseconds on a loaded machine) would leave this worker orphaned
    if os.getppid() != parent:
        os._exit(1)
    leave_stop_signals_to_the_command()
    from threadpoolctl import threadpool_limits

    global _LIMITS
    # as the in-process pool's threads: the results must not depend on where a task ran
    _LIMITS = threadpool_limits(1)


_LIMITS: Any = None  # a worker's BLAS limit, kept for its life


__all__ = ["ForkedWorkers", "allow_fork", "fork_possible", "forked_workers"]
