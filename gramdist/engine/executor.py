"""Where the engine's tasks run: a Dask client, or this process.

The engine's steps (:mod:`gramdist.engine.steps`) submit the functions of
:mod:`gramdist.engine.tasks` through an :class:`Executor` and consume their results as they
complete. :class:`DaskExecutor` wraps a ``distributed.Client``; :class:`InlineExecutor` runs
each task at once in the calling process (no scheduler, no pickling), which is what small
inputs from Python want: a 200-graph Gram is done before a LocalCluster has started. Both
follow the same sequence of steps, so a Gram is bitwise the same whichever runs it.
"""

from __future__ import annotations

import itertools
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any


class Executor:
    """What the engine needs from where it runs; see the two implementations."""

    #: total worker threads (the engine keeps about twice as many tiles in flight)
    def n_threads(self) -> int:
        raise NotImplementedError

    def n_workers(self) -> int:
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any, key: str, spread: bool = False,
               retries: int = 0) -> Any:
        """Run ``fn(*args)`` as a task named ``key``; futures among ``args`` are passed as their
        results. ``spread`` asks for the next worker in turn (a soft hint)."""
        raise NotImplementedError

    def put(self, value: Any, key: str) -> Any:
        """A future holding ``value`` (shipped to a worker once, then shared by tasks)."""
        raise NotImplementedError

    def as_completed(self, futures: Iterable[Any]) -> Any:
        """An iterator over futures as they finish, to which more can be ``add``-ed."""
        raise NotImplementedError

    def warm_up(self, module: str) -> None:
        """Import ``module`` on every worker ahead of its first task (best effort)."""

    def dashboard(self) -> str:
        return "none (in-process)"


class DaskExecutor(Executor):
    """Tasks on a ``distributed.Client``'s cluster."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._workers = sorted(client.nthreads())
        self._turn = itertools.count()

    def n_threads(self) -> int:
        return sum(self.client.nthreads().values()) or 1

    def n_workers(self) -> int:
        return len(self.client.nthreads())

    def submit(self, fn: Callable[..., Any], *args: Any, key: str, spread: bool = False,
               retries: int = 0) -> Any:
        kwargs: dict[str, Any] = {"key": key, "pure": False}
        if retries:
            kwargs["retries"] = retries
        if spread and self._workers:
            # a soft hint: left to itself the scheduler runs every embedding where the state
            # lives, and every tile then follows its embeddings to that one worker
            kwargs["workers"] = [self._workers[next(self._turn) % len(self._workers)]]
            kwargs["allow_other_workers"] = True
        return self.client.submit(fn, *args, **kwargs)

    def put(self, value: Any, key: str) -> Any:
        return self.client.scatter(value, hash=False)

    def as_completed(self, futures: Iterable[Any]) -> Any:
        from distributed import as_completed

        # this client's loop: it need not be the default client (the shared cluster's is not)
        return as_completed(list(futures), loop=self.client.loop)

    def warm_up(self, module: str) -> None:
        from gramdist.engine import tasks

        try:
            self.client.run(tasks.warm_up, module)
        except Exception:  # noqa: BLE001 - warming is an optimisation only
            pass

    def dashboard(self) -> str:
        """The dashboard address, or why there is none (it needs bokeh)."""
        import importlib.util

        link = getattr(self.client, "dashboard_link", None)
        if importlib.util.find_spec("bokeh") is None:
            return f"unavailable here (install gramdist[dashboard] for {link})"
        return str(link)


class InlineFuture:
    """A finished task of :class:`InlineExecutor`: its value or its exception."""

    __slots__ = ("key", "_value", "_error")

    def __init__(self, key: str, value: Any = None, error: BaseException | None = None) -> None:
        self.key = key
        self._value = value
        self._error = error

    @property
    def status(self) -> str:
        return "error" if self._error is not None else "finished"

    def result(self) -> Any:
        if self._error is not None:
            raise self._error
        return self._value

    def release(self) -> None:
        self._value = None


class _InlineCompleted:
    """``as_completed`` over futures that are already finished: insertion order."""

    def __init__(self, futures: Iterable[InlineFuture]) -> None:
        self._queue: deque[InlineFuture] = deque(futures)

    def add(self, future: InlineFuture) -> None:
        self._queue.append(future)

    def update(self, futures: Iterable[InlineFuture]) -> None:
        self._queue.extend(futures)

    def clear(self) -> None:
        self._queue.clear()

    def __iter__(self) -> Iterator[InlineFuture]:
        while self._queue:
            yield self._queue.popleft()


class InlineExecutor(Executor):
    """Every task runs at once, in this process, when it is submitted.

    Errors are kept in the future and raised by ``result()``, as Dask does, so the steps
    report a failing tile the same way. ``KeyboardInterrupt`` and ``SystemExit`` propagate.
    """

    def n_threads(self) -> int:
        return 1

    def n_workers(self) -> int:
        return 1

    def submit(self, fn: Callable[..., Any], *args: Any, key: str, spread: bool = False,
               retries: int = 0) -> InlineFuture:
        try:
            values = [a.result() if isinstance(a, InlineFuture) else a for a in args]
            return InlineFuture(key, fn(*values))
        except Exception as exc:  # noqa: BLE001 - kept for result(), like a Dask future
            exc.__traceback__ = sys.exc_info()[2]
            return InlineFuture(key, error=exc)

    def put(self, value: Any, key: str) -> InlineFuture:
        return InlineFuture(key, value)

    def as_completed(self, futures: Iterable[InlineFuture]) -> _InlineCompleted:
        return _InlineCompleted(futures)
