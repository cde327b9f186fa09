"""Stop requests from SIGTERM and SIGHUP that no swallowed exception can lose.

The CLI's handler raises :class:`Terminated` where the main thread is, so that every ``with``
block unwinds (the done-mask saved, the store's lock released). Python swallows an exception
raised inside a weakref callback or a ``__del__`` ("Exception ignored in ..."), and a signal
can land there, e.g. while the garbage collector clears a ``WeakSet``: the exception is then
lost, and the run would go on to the end. So the handler also records the signal, and the
engine's task loop calls :func:`raise_if_stopped` after every task: a request whose exception
was lost is raised there, at the next finished task. :func:`install` also keeps the lost
exception's traceback off the user's terminal, since it is acted on.
"""

from __future__ import annotations

import signal
import sys
from typing import Any

_requested: int | None = None


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where the process is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
    every process of the session. The command handles them and stops its workers; a worker
    that reacted too would only print its traceback over the command's one line. Main thread
    only (where a handler may be set)."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
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
