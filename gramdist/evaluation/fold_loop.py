"""Running an evaluation's outer folds, here or on a cluster, and stopping between them.

A batch system's allocation ends at a wall time, and a power-kernel evaluation's folds take
ten minutes each: killed mid-fold (SIGTERM, then SIGKILL), the folds in flight are lost,
though the saved ones resume. So an evaluation can stop between folds instead, keeping every
fold it started:

* at a time limit (:class:`FoldClock`): a fold starts only if the folds' times so far (their
  90th percentile, the saved folds' included) say it ends before the deadline;
* on SIGUSR1 (:func:`gramdist.stopping.finish_in_flight_on`; SLURM's ``--signal=USR1@600``):
  no fold starts after it, the ones in flight finish and are saved.

To know which folds are in flight, a cluster is given at most one fold per worker thread at a
time, the next submitted when one ends or a worker joins. A fold of seconds or minutes loses nothing to the
round trip between two folds (a few milliseconds); folds shorter than :data:`SHORT_FOLD`
(small datasets: 70 ms a fold on MUTAG) would lose some 6 % of the run to it, so without a time
limit they are given two per thread, and SIGUSR1 then lets one more of them run on each thread.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gramdist import stopping

#: seconds under which folds are queued two per worker thread, so that none waits for a round trip
SHORT_FOLD = 1.0

#: how often the cluster's threads are counted while folds run: a worker that joins late (an
#: adaptive cluster, a batch queue's workers) is given a fold within this many seconds
POLL_SECONDS = 2.0

#: one fold's work: a picklable function and its arguments, returning the fold's result dict
FoldCall = tuple[Callable[..., dict[str, Any]], tuple[Any, ...]]


@dataclass
class FoldClock:
    """When an evaluation stops starting folds.

    Parameters
    ----------
    deadline : float, optional
        A ``time.monotonic()`` reading by which every fold started should have ended; None:
        no time limit.
    seconds : list of float
        The folds' times known so far (saved folds' and this run's), from which a fold's time is
        estimated: their 90th percentile (the higher of two neighbours), so that one slow fold in
        ten is allowed for. With none known yet, folds start until the deadline itself passes.
    """

    deadline: float | None = None
    seconds: list[float] = field(default_factory=list)
    stopped: str | None = field(default=None, init=False)

    def record(self, result: dict[str, Any]) -> None:
        """Add a fold's time (its result's ``seconds``; NaN when it has none) to :attr:`seconds`."""
        self.seconds.append(float(result.get("seconds", float("nan"))))

    def estimate(self, quantile: float = 0.9) -> float | None:
        """Seconds a fold is expected to take (that ``quantile`` of the known times); None while
        no fold's time is known."""
        known = [s for s in self.seconds if np.isfinite(s)]
        return float(np.quantile(known, quantile, method="higher")) if known else None

    def may_start(self) -> bool:
        """Whether another fold may start now; if not, :attr:`stopped` says why (``"signal"``
        or ``"time"``)."""
        if self.stopped is None and stopping.finish_requested() is not None:
            self.stopped = "signal"
        elif self.stopped is None and self.deadline is not None:
            if time.monotonic() + (self.estimate() or 0.0) > self.deadline:
                self.stopped = "time"
        return self.stopped is None


def run_calls(calls: Sequence[FoldCall], client: Any, clock: FoldClock,
              report: Callable[[int], None]) -> list[dict[str, Any] | None]:
    """Each call's result, in order, None for those not started because ``clock`` stopped them:
    in this process one after another (``client`` None), or as tasks on ``client``'s cluster,
    at most one per worker thread at a time (two while folds are short and there is no
    deadline). ``report(1)`` after each; a fold's ``seconds`` is
    added to ``clock``. A failed fold raises its error at once."""
    if client is None:
        return _run_here(calls, clock, report)
    return _run_on_cluster(calls, client, clock, report)


def _run_here(calls: Sequence[FoldCall], clock: FoldClock,
              report: Callable[[int], None]) -> list[dict[str, Any] | None]:
    results: list[dict[str, Any] | None] = [None] * len(calls)
    for i, (fn, args) in enumerate(calls):
        if not clock.may_start():
            break
        results[i] = _finished(fn(*args), clock, report)
    return results


def _run_on_cluster(calls: Sequence[FoldCall], client: Any, clock: FoldClock,
                    report: Callable[[int], None]) -> list[dict[str, Any] | None]:
    from distributed import wait

    results: list[dict[str, Any] | None] = [None] * len(calls)
    waiting = list(range(len(calls)))[::-1]  # popped from the end: in order
    in_flight: dict[Any, int] = {}

    def submit_more() -> None:
        typical = clock.estimate(0.5)  # the median: a worker's first fold also loads the Gram
        short = clock.deadline is None and typical is not None and typical < SHORT_FOLD
        per_thread = 2 if short else 1
        while waiting and len(in_flight) < per_thread * _threads(client) and clock.may_start():
            i = waiting.pop()
            fn, args = calls[i]
            in_flight[client.submit(fn, *args, pure=False)] = i

    submit_more()
    while in_flight:
        try:  # woken by a fold's end, or after POLL_SECONDS to give workers that joined a fold
            done = wait(list(in_flight), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED").done
        except TimeoutError:
            done = set()
        for future in sorted(done, key=in_flight.__getitem__):
            results[in_flight.pop(future)] = _finished(future.result(), clock, report)  # a failed fold raises
        submit_more()
    return results


def _threads(client: Any) -> int:
    """The cluster's worker threads now (at least 1: an adaptive cluster at zero workers is
    given one fold, which makes it scale up)."""
    return max(1, sum(client.nthreads().values()))


def _finished(result: dict[str, Any], clock: FoldClock, report: Callable[[int], None]) -> dict[str, Any]:
    clock.record(result)
    report(1)
    return result


def stopped_early(clock: FoldClock, done: int, total: int, out: Any) -> stopping.StoppedEarly:
    """The :class:`~gramdist.stopping.StoppedEarly` of an evaluation that ``clock`` stopped
    between folds, with ``done`` of ``total`` folds (saved in the folder ``out``, if any)."""
    saved = (f"{done} of {total} folds saved in {out}; run the same command again to resume" if out
             else f"{done} of {total} folds done and none saved (no --out)")
    if clock.stopped == "signal":
        signum = stopping.finish_requested() or 0
        name = signal.Signals(signum).name if signum else "a signal"
        return stopping.StoppedEarly(f"stopped by {name} after the folds in flight: {saved}", 128 + signum)
    estimate = clock.estimate()
    why = f"the next fold would take about {_about(estimate)}" if estimate else "the time limit has passed"
    return stopping.StoppedEarly(f"stopped at the time limit ({why}): {saved}", 3)


def _about(seconds: float) -> str:
    """A fold's estimated time for the stop line: tenths of a second, seconds, or minutes."""
    if seconds < 10:  # folds of a small dataset: "about 0 s" said nothing
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


__all__ = ["FoldCall", "FoldClock", "run_calls", "stopped_early"]
