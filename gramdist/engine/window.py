"""The engine's one task loop: a window of tasks in flight, each result recorded as it arrives.

Tiles (:func:`gramdist.engine.steps.compute_tiles`), feature chunks
(:mod:`gramdist.engine.featurize`) and in-memory feature rows all run through
:func:`run_window`: submit a window of tasks, take them ``as_completed``, record each result,
submit one more per finished one, save progress every few seconds (the sink's throttled
``flush``), and save it once more on any error or interruption before re-raising, so a rerun
resumes from every task that finished. Only the window's tasks exist at any time, so memory on
the client and the scheduler stays bounded whatever the number of tiles or chunks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from gramdist.engine.context import Log
from gramdist.engine.executor import Executor
from gramdist.errors import TileError
from gramdist.stopping import raise_if_stopped


class Flushable(Protocol):
    """Progress that can be saved: ``flush(force=False)`` saves only past its interval."""

    def flush(self, force: bool = True) -> bool: ...


@dataclass
class Watched:
    """Futures watched beside the window's tasks (a tile loop's embeddings, K(g, g) and
    counters): ``handle(future)`` is called as each one finishes; it may raise."""

    futures: list[Any]
    handle: Callable[[Any], None]


@dataclass
class Window:
    """One loop: ``submit(item)`` makes a task's future, ``record(result)`` takes its result.

    ``width`` fixes the tasks in flight; None means twice the cluster's threads (at least 4),
    widened when workers join (HPC jobs leaving their queue). ``what`` (``"tile"``) names the
    tasks in messages; ``report`` is a progress reporter (``report(1)`` per task, ``report(None)`` at
    the end).
    """

    ex: Executor
    submit: Callable[[Any], Any]
    record: Callable[[Any], None]
    report: Callable[[int | None], None]
    log: Log
    sink: Flushable | None = None
    width: int | None = None
    what: str = "task"
    watched: Watched | None = None


def default_width(ex: Executor) -> int:
    return max(4, 2 * ex.n_threads())


def run_window(window: Window, todo: Iterable[Any]) -> int:
    """Run every item of ``todo`` through ``window``; returns how many tasks finished."""
    ex = window.ex
    width = window.width or default_width(ex)
    watched = {}
    if window.watched is not None:
        # those finished already are handled before the first task (in process every task ran
        # at its submit), so that what they record, e.g. when the embeddings were ready, is
        # not after the window's first tasks
        for f in window.watched.futures:
            if f.status == "finished":
                window.watched.handle(f)
            else:
                watched[f.key] = f
        window.watched.futures = []  # the queue holds the others until each is yielded
    pending = iter(todo)
    queue = ex.as_completed([window.submit(item) for item in take_next(pending, width)])
    queue.update(list(watched.values()))
    done = 0
    try:
        for fut in queue:
            if fut.key in watched:
                del watched[fut.key]
                window.watched.handle(fut)
                continue
            window.record(_result(fut, window.what))
            fut.release()
            done += 1
            window.report(1)
            raise_if_stopped()
            for item in take_next(pending, 1):
                queue.add(window.submit(item))
            if window.sink is not None and window.sink.flush(force=False) and not window.width:
                width = _widen(window, queue, pending, width)
    except BaseException:
        queue.clear()
        _save(window)
        window.report(None)
        raise
    window.report(None)
    return done


def _result(fut: Any, what: str) -> Any:
    from gramdist.engine.store import LeaseLost

    try:
        return fut.result()
    except (TileError, LeaseLost):
        raise
    except Exception as exc:  # a worker-side error not wrapped (e.g. KilledWorker)
        raise TileError(f"{what} task {fut.key} failed: {type(exc).__name__}: {exc}") from exc


def _widen(window: Window, queue: Any, pending: Iterator[Any], width: int) -> int:
    """Workers that joined since the start widen the window."""
    want = default_width(window.ex)
    if want <= width:
        return width
    for item in take_next(pending, want - width):
        queue.add(window.submit(item))
    window.log(f"gramdist: {window.ex.n_workers()} workers now; {want} {window.what}s in flight")
    return want


def _save(window: Window) -> None:
    if window.sink is None:
        return
    try:
        window.sink.flush()
    except OSError as exc:  # e.g. the disk is full: report the first error, not this one
        window.log(f"gramdist: warning: could not save the done-mask ({exc}); {window.what}s finished since "
                   "its last save will be recomputed")


def take_next(it: Iterator[Any], n: int) -> list[Any]:
    """Up to ``n`` more items of the iterator ``it``."""
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out
