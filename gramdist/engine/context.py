"""What every run carries besides its plan: how it reports, and which detached job it is.

A :class:`RunContext` is passed down the engine's sequences (run, features, append) instead
of ``progress``/``log``/``job_id`` parameters at every level.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

Log = Callable[[str], None]
#: ``progress`` of a run: a bar on stderr (True), nothing (False), or ``callback(done, total)``
Progress = bool | Callable[[int, int], None]


def stderr_log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def silent(msg: str) -> None:
    return None


@dataclass(frozen=True)
class RunContext:
    """How a run reports and who runs it.

    ``progress``: a bar on stderr (True), none (False), or ``callback(done, total)`` called
    after each tile or chunk (an exception it raises stops the run, resumably); ``log``: where
    status lines go; ``job_id``: the detached job (``gramdist submit``) this run is, which its
    store lock carries.
    """

    progress: Progress = False
    log: Log = stderr_log
    job_id: str | None = None

    def note(self, message: str) -> None:
        self.log(f"gramdist: note: {message}")

    def quiet(self) -> RunContext:
        """The same run without status lines or progress (for inner computations)."""
        return replace(self, progress=False, log=silent)


def progress_reporter(progress: Progress, total: int, initial: int, unit: str = "tile") -> Callable[[int | None], None]:
    """``report(n)`` after n more tiles (or other ``unit``), ``report(None)`` at the end."""
    if callable(progress):
        done = [initial]

        def call(n: int | None) -> None:
            if n is not None:
                done[0] += n
                progress(done[0], total)

        return call
    if not progress:  # no bar to draw: tqdm not even imported (7 ms of every --quiet run)
        return lambda n: None
    from tqdm import tqdm

    bar = tqdm(total=total, initial=initial, unit=unit, desc=f"{unit}s",
               file=sys.stderr, dynamic_ncols=True)
    return lambda n: bar.close() if n is None else bar.update(n)


def as_context(context: RunContext | None = None, **fields: Any) -> RunContext:
    """``context`` (default a quiet one) with the given fields changed."""
    base = context or RunContext()
    return replace(base, **{k: v for k, v in fields.items() if v is not None}) if fields else base
