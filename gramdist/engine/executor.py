"""Where the engine's tasks run: a Dask client, or this process.

The engine's steps (:mod:`gramdist.engine.steps`) submit the functions of
:mod:`gramdist.engine.tasks` through an :class:`Executor` and consume their results as they
complete. :class:`DaskExecutor` wraps a ``distributed.Client``; :class:`InlineExecutor` runs
the tasks in the calling process (no scheduler, no pickling), each at once when it is
submitted or, for tiles and given ``threads > 1``, in a pool of that many threads (every
core of a laptop without a LocalCluster's start): what small inputs from Python want, since
a 200-graph Gram is done before a LocalCluster has started. Given the command's forked
worker processes (:mod:`gramdist.engine.processes`), it sends them the embeddings that hold
the GIL. All follow the same sequence of steps, so a Gram is bitwise the same whichever runs
it.
"""

from __future__ import annotations

import itertools
import queue
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


class Executor:
    """What the engine needs from where it runs; see the two implementations."""

    #: total worker threads (the engine keeps about twice as many tiles in flight)
    def n_threads(self) -> int:
        raise NotImplementedError

    def n_workers(self) -> int:
        raise NotImplementedError

    def submit(self, fn: Callable[..., Any], *args: Any, key: str, spread: bool = False,
               retries: int = 0, pooled: bool = False, background: bool = False,
               processes: bool = False) -> Any:
        """Run ``fn(*args)`` as a task named ``key``; futures among ``args`` are passed as their
        results. ``spread`` asks for the next worker in turn (a soft hint); ``pooled`` says the
        task's work mostly releases the GIL (a tile, or an embedding whose kernel declares
        ``embeds_in_threads``), so in process it may run in a thread; ``background`` says it
        holds the GIL but nothing waits for it at once (any other embedding), so in process it
        may run in one thread beside the caller, one such task at a time; ``processes`` says it
        holds the GIL and pickles (an embedding whose kernel declares ``embeds_in_processes``),
        so in process it runs in the command's forked workers where there are some."""
        raise NotImplementedError

    def put(self, value: Any, key: str) -> Any:
        """A future holding ``value`` (shipped to a worker once, then shared by tasks)."""
        raise NotImplementedError

    def as_completed(self, futures: Iterable[Any]) -> Any:
        """An iterator over futures as they finish, to which more can be ``add``-ed."""
        raise NotImplementedError

    def forks(self) -> bool:
        """Whether tasks submitted with ``processes=True`` run in forked worker processes."""
        return False

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
               retries: int = 0, pooled: bool = False, background: bool = False,
               processes: bool = False) -> Any:
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


class PooledFuture:
    """A task of :class:`InlineExecutor` running in its thread pool."""

    __slots__ = ("key", "_future")

    def __init__(self, key: str, future: Future) -> None:
        self.key = key
        self._future = future

    @property
    def status(self) -> str:
        if not self._future.done():
            return "pending"
        return "error" if self._future.exception() is not None else "finished"

    def result(self) -> Any:
        return self._future.result()

    def release(self) -> None:
        pass  # the pool keeps no reference once the task is done; the window drops its own

    def when_done(self, fn: Callable[[PooledFuture], None]) -> None:
        """Call ``fn(self)`` once the task has finished (at once if it has)."""
        self._future.add_done_callback(lambda _: fn(self))


class _PooledCompleted:
    """``as_completed`` over pooled (or finished inline) futures: completion order."""

    def __init__(self, futures: Iterable[PooledFuture | InlineFuture]) -> None:
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._waiting = 0
        self._cleared = False
        self.update(futures)

    def add(self, future: PooledFuture | InlineFuture) -> None:
        self._waiting += 1
        if isinstance(future, InlineFuture):
            self._done.put(future)
        else:
            future.when_done(self._done.put)

    def update(self, futures: Iterable[PooledFuture | InlineFuture]) -> None:
        for f in futures:
            self.add(f)

    def clear(self) -> None:
        self._cleared = True

    def __iter__(self) -> Iterator[PooledFuture | InlineFuture]:
        while self._waiting and not self._cleared:
            fut = self._next_done()
            self._waiting -= 1
            yield fut

    def _next_done(self) -> PooledFuture | InlineFuture:
        while True:  # short timeouts keep the wait interruptible (Ctrl-C)
            try:
                return self._done.get(timeout=0.2)
            except queue.Empty:
                pass


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    """``fn(*args)`` with the futures among ``args`` replaced by their results.

    A pooled task is queued only once its inputs are done (:func:`_when_ready`), so the pool's
    threads never wait. The background thread takes its tasks in the order they were
    submitted, and its tasks' inputs are earlier tasks of its own or pooled ones, which never
    wait on it: no deadlock.
    """
    return fn(*_resolved(args))


def _resolved(args: tuple[Any, ...]) -> list[Any]:
    """``args`` with the futures among them replaced by their results."""
    return [a.result() if isinstance(a, (InlineFuture, PooledFuture)) else a for a in args]


def _when_ready(pool: ThreadPoolExecutor | _WorkerLane, fn: Callable[..., Any], args: tuple[Any, ...]) -> Future:
    """``fn(*args)`` queued on ``pool`` once every pooled future among ``args`` is done, so that
    no thread of the pool sits waiting on an input: a task that keeps a chunk's embedding would
    otherwise hold a thread until that chunk is embedded while tiles ready to run wait behind it.
    Tasks whose inputs are done are queued at once, in the order they were submitted."""
    waiting = [a._future for a in args if isinstance(a, PooledFuture) and not a._future.done()]
    if not waiting:
        return pool.submit(_run, fn, args)
    outer: Future = Future()
    left = [len(waiting)]
    lock = threading.Lock()

    def input_done(done: Future) -> None:
        if done.cancelled():  # at close, under the pool's shutdown lock, where a submit would deadlock
            outer.cancel()
            return
        with lock:
            left[0] -= 1
            if left[0] or outer.cancelled():
                return
        try:
            inner = pool.submit(_run, fn, args)
        except RuntimeError:  # the executor was closed meanwhile: dropped like a queued task
            outer.cancel()
            return
        inner.add_done_callback(lambda done: _copy_outcome(done, outer))

    for f in waiting:
        f.add_done_callback(input_done)
    return outer


class _WorkerLane:
    """The forked workers as :func:`_when_ready` submits to a pool: ``submit(_run, fn, args)``
    sends ``fn`` and the values of ``args`` (done by then) to a worker. Where the workers can
    no longer take a task (one died, e.g. killed for memory: the process pool is broken), the
    task runs in ``threads`` instead, so the run goes on. Tasks sent here never write to a
    store (embeddings only), so a run's lock is free of them once its own threads are done."""

    def __init__(self, workers: Any, threads: ThreadPoolExecutor) -> None:
        self.workers, self.threads = workers, threads
        self._sent: set[Future] = set()

    def submit(self, run: Callable[..., Any], fn: Callable[..., Any], args: tuple[Any, ...]) -> Future:
        from concurrent.futures import BrokenExecutor

        try:
            inner = self.workers.submit(fn, *_resolved(args))
        except BrokenExecutor:
            return self.threads.submit(run, fn, args)
        outer: Future = Future()
        self._sent.add(inner)

        def finished(done: Future) -> None:
            self._sent.discard(done)
            if not done.cancelled() and isinstance(done.exception(), BrokenExecutor):
                try:
                    self.threads.submit(run, fn, args).add_done_callback(lambda d: _copy_outcome(d, outer))
                except RuntimeError:  # the run was closed meanwhile
                    outer.cancel()
                return
            _copy_outcome(done, outer)

        inner.add_done_callback(finished)
        return outer

    def cancel_queued(self) -> None:
        for f in list(self._sent):
            f.cancel()


def _copy_outcome(src: Future, dst: Future) -> None:
    if src.cancelled():
        dst.cancel()
    elif src.exception() is not None:
        dst.set_exception(src.exception())
    else:
        dst.set_result(src.result())


class InlineExecutor(Executor):
    """Tasks in this process: each at once when it is submitted, or, for a task submitted
    ``pooled`` (a tile), in a pool of ``threads`` threads.

    Tiles go to the pool: their work (sparse and dense products, checksums, compression)
    mostly releases the GIL. Embeddings go there only where the kernel declares
    ``embeds_in_threads`` (LAPACK per graph, NumPy over whole chunks: pyramid match's NCI1
    embedding 1.50 -> 0.86 s on two cores, core over WL on D&D 1.05 -> 0.68 s): most kernels'
    embeddings are many small Python-level calls that two threads run slower than one
    (measured on NCI1: the adaptive matching kernel's 44 s in one thread, 52 s in two; SVM-θ's,
    1.9 and 3.3 s while it solved graph by graph, is in the pool since it stacks them). Those
    are submitted ``background``: one thread runs them one after another, as the caller would,
    while the pool computes the tiles of the chunks already embedded (NCI1, 4 chunks: the first
    tiles start after one chunk's embedding, not all four).
    The fit runs at its submit, in the calling thread, with BLAS as the process has it.

    Errors are kept in the future and raised by ``result()``, as Dask does, so the steps
    report a failing tile the same way. ``KeyboardInterrupt`` and ``SystemExit`` propagate.

    With ``threads > 1`` the pool starts at the first pooled task, and BLAS and OpenMP are
    held to one thread each while it lives (what Dask's workers do too): the pool's threads are the
    parallelism, and a kernel's ``threadpool_limits(1)`` block in one thread can then never
    restore a larger count under another thread's block (the global limit they share).
    :meth:`close` waits for the running tasks, drops the queued ones and lifts the limit; the
    placement calls it before the run gives up its store's lock, so no task writes after it.
    """

    def __init__(self, threads: int = 1, workers: Any = None) -> None:
        self.threads = max(1, int(threads))
        self.workers = workers  # the command's ForkedWorkers (gramdist.engine.processes), or None
        self._pool: ThreadPoolExecutor | None = None
        self._lane: _WorkerLane | None = None
        self._background: ThreadPoolExecutor | None = None
        self._limits: Any = None

    def n_threads(self) -> int:
        return self.threads

    def n_workers(self) -> int:
        return 1

    def submit(self, fn: Callable[..., Any], *args: Any, key: str, spread: bool = False,
               retries: int = 0, pooled: bool = False, background: bool = False,
               processes: bool = False) -> InlineFuture | PooledFuture:
        if processes and self.forks():
            return PooledFuture(key, _when_ready(self._started_worker_lane(), fn, args))
        if pooled and self.threads > 1:
            return PooledFuture(key, _when_ready(self._started_pool(), fn, args))
        if background and self.threads > 1:
            # in submission order, inputs or not: a chunk's K(g, g) right behind its embedding
            return PooledFuture(key, self._started_background().submit(_run, fn, args))
        try:
            return InlineFuture(key, _run(fn, args))
        except Exception as exc:  # noqa: BLE001 - kept for result(), like a Dask future
            exc.__traceback__ = sys.exc_info()[2]
            return InlineFuture(key, error=exc)

    def put(self, value: Any, key: str) -> InlineFuture:
        return InlineFuture(key, value)

    def forks(self) -> bool:
        return self.workers is not None and self.threads > 1

    def dashboard(self) -> str:
        if self.workers is None:
            return super().dashboard()
        return f"none (in-process; the embeddings in {self.workers.n} forked processes)"

    def as_completed(self, futures: Iterable[Any]) -> _InlineCompleted | _PooledCompleted:
        return _PooledCompleted(futures) if self.threads > 1 else _InlineCompleted(futures)

    def _started_pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = self._threads(self.threads, "gramdist")
        return self._pool

    def _started_worker_lane(self) -> _WorkerLane:
        if self._lane is None:
            self._lane = _WorkerLane(self.workers, self._started_pool())
        return self._lane

    def _started_background(self) -> ThreadPoolExecutor:
        if self._background is None:
            self._background = self._threads(1, "gramdist-background")
        return self._background

    def _threads(self, n: int, name: str) -> ThreadPoolExecutor:
        from threadpoolctl import threadpool_limits

        if self._limits is None:
            self._limits = threadpool_limits(limits=1)
        # OpenMP's thread count is per thread: each thread sets its own
        return ThreadPoolExecutor(n, thread_name_prefix=name, initializer=threadpool_limits, initargs=(1, "openmp"))

    def close(self) -> None:
        """Wait for the running tasks, cancel the queued ones, lift the BLAS limit."""
        if self._lane is not None:
            self._lane.cancel_queued()  # the workers outlive this run: the next setting uses them
            self._lane = None
        for pool in (self._background, self._pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._pool = self._background = None
        if self._limits is not None:
            self._limits.restore_original_limits()
            self._limits = None
