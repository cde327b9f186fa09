"""Stop requests from SIGTERM and SIGHUP that no swallowed exception can lose.

The CLI's handler raises :class:`Terminated` where the main thread is, so that every ``with``
block unwinds (the done-mask saved, the store's lock released). Python swallows an exception
raised inside a weakref callback or a ``__del__`` ("Exception ignored in ..."), and a signal
can land there, e.g. while the garbage collector clears a ``WeakSet``: the exception is then
lost, and the run would go on to the end. So the handler also records the signal, and the
engine's task loop calls :func:`raise_if_stopped` after every task: a request whose exception
was lost is raised there, at the next finished task. :func:`install` also keeps the lost
exception's traceback off the user's terminal, since it is acted on.

A command whose work comes in long units (``evaluate``'s outer folds) can also stop between
them: :func:`finish_in_flight_on` makes a signal (SIGUSR1, what SLURM's ``--signal=USR1@600``
sends before a job's time runs out) a request to start nothing more, which the command reads
with :func:`finish_requested` and ends by raising :class:`StoppedEarly`.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import Iterator
from typing import Any

_requested: int | None = None
_finish: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StoppedEarly(Exception):
    """A command that stopped on purpose before its end, what it finished saved: at a time
    limit (exit status 3) or on a :func:`finish_in_flight_on` signal (128 + its number). The
    message says what was saved and how to resume."""

    def __init__(self, message: str, status: int = 3) -> None:
        super().__init__(message)
        self.status = status


def install() -> None:
    """Handle SIGTERM and SIGHUP in this process (the main thread's; elsewhere a no-op)."""
    take_request()  # none left from an earlier run in this process
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            signal.signal(sig, handle_signal)
        except ValueError:  # not the main thread (main() called from a thread): leave them be
            return
    if not isinstance(sys.unraisablehook, _QuietWhenStopping):
        sys.unraisablehook = _QuietWhenStopping(sys.unraisablehook)


class _QuietWhenStopping:
    """An unraisable-exception hook that passes on everything but a :class:`Terminated`,
    which is acted on at the next task."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:
        if not isinstance(unraisable.exc_value, Terminated):
            self.previous(unraisable)


def leave_stop_signals_to_the_command() -> None:
    """In a worker process of the command (forked embedding workers, the LocalCluster's
    workers): ignore SIGINT, SIGTERM and SIGHUP, which a terminal or a batch system sends to
    every process of the session, and SIGUSR1 (SLURM's warning before the time limit, also sent
    to every process unless ``--signal=B:``), whose default action is to exit. The command handles them and stops its workers; a worker
    that reacted too would only print its traceback over the command's one line. Main thread
    only (where a handler may be set)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)


def handle_signal(signum: int, frame: object) -> None:
    """The handler the CLI installs for SIGTERM and SIGHUP."""
    global _requested
    _requested = signum
    raise Terminated(signum)


def raise_if_stopped() -> None:
    """Raise :class:`Terminated` for a signal whose exception was swallowed; once per signal."""
    signum = take_request()
    if signum is not None:
        raise Terminated(signum)


def take_request() -> int | None:
    """The signal received and not yet acted on, if any; clears it."""
    global _requested
    signum, _requested = _requested, None
    return signum


@contextlib.contextmanager
def finish_in_flight_on(signum: int = signal.SIGUSR1) -> Iterator[None]:
    """Within: ``signum`` asks the command to start no more work and to finish what is in
    flight (:func:`finish_requested`), instead of its default action. The main thread's;
    elsewhere a no-op. A request left over when the block ends is dropped."""
    global _finish
    _finish = None
    try:
        previous = signal.signal(signum, _record_finish)
    except ValueError:  # not the main thread: leave the signal be
        yield
        return
    try:
        yield
    finally:
        signal.signal(signum, previous)
        _finish = None


def _record_finish(signum: int, frame: object) -> None:
    global _finish
    _finish = signum


def finish_requested() -> int | None:
    """The :func:`finish_in_flight_on` signal received, if any (it stays requested)."""
    return _finish
