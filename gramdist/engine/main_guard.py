"""Whether starting Dask worker processes would run the user's script again.

A LocalCluster starts its workers with ``multiprocessing``'s ``spawn`` (Dask's default): each
worker imports the ``__main__`` script again before it can serve. A script that calls gramdist
at its top level, not under ``if __name__ == "__main__":``, then runs its whole job again in
every worker, which tries to start workers of its own; Python refuses ("An attempt has been made
to start a new process before the current process has finished its bootstrapping phase") and the
user gets a few hundred lines of tracebacks ending in "Nanny failed to start". GraKeL users write
such scripts: their library never starts a process.

:func:`unguarded_script` tells the placement beforehand, from the script's own source: the
statement of ``__main__`` that is running (the bottom of this thread's stack) and whether it lies
inside an ``if __name__ == "__main__":`` block.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
from collections.abc import Iterator
from types import FrameType


def unguarded_script() -> str | None:
    """The path of the ``__main__`` script whose unguarded top-level statement is calling us, if
    a worker started now would run that statement again; else None.

    None where a worker imports no script (an interactive session, ``python -c``, a notebook, a
    package's ``__main__`` run with ``-m``, workers started by ``fork``), where the call comes
    from another thread than the main one (its stack does not show the script's statement), and
    where the script cannot be read or parsed (nothing to judge by).
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if path is None or _start_method() == "fork" or threading.current_thread() is not threading.main_thread():
        return None
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name == "__main__" or spec_name.endswith(".__main__"):  # multiprocessing imports none of these again
        return None
    frame = _module_frame()
    if frame is None:
        return None
    try:
        guards = _guarded_lines(str(path), os.stat(path).st_mtime_ns)
    except (OSError, SyntaxError, ValueError):
        return None
    return None if any(lo <= frame.f_lineno <= hi for lo, hi in guards) else str(path)


def _start_method() -> str:
    """How Dask's nannies start workers (its ``distributed.worker.multiprocessing-method``)."""
    from distributed.utils import get_mp_context

    return get_mp_context().get_start_method()


def _main_frames(frame: FrameType | None) -> Iterator[tuple[int, FrameType]]:
    """(depth from ``frame``, starting at 1; frame) of every frame running ``__main__``'s code,
    nearest first."""
    main = sys.modules.get("__main__")
    namespace = vars(main) if main is not None else None
    level = 1
    while frame is not None:
        if frame.f_globals is namespace:
            yield level, frame
        frame, level = frame.f_back, level + 1


def _module_frame() -> FrameType | None:
    """The frame running ``__main__``'s top-level code, at the bottom of this thread's stack."""
    found = None
    for _, frame in _main_frames(sys._getframe()):
        if frame.f_code.co_name == "<module>":
            found = frame
    return found


@functools.cache
def _guarded_lines(path: str, mtime_ns: int) -> tuple[tuple[int, int], ...]:
    """(first, last) lines of each top-level ``if __name__ == "__main__":`` body of ``path``."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), filename=path)
    return tuple((node.body[0].lineno, node.end_lineno or node.lineno) for node in tree.body
                 if isinstance(node, ast.If) and _is_main_test(node.test))


def _is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"``, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    return (any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            and any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides))


def script_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in our caller name the nearest line of
    the ``__main__`` script (1, the caller itself, where the script is not on the stack)."""
    return next((level for level, _ in _main_frames(sys._getframe(1))), 1)


def unguarded_hint(path: str) -> str:
    """What to tell the user of the script at ``path``."""
    return (f"starting Dask workers would run {path} again in each of them (they import the script): "
            'put its work under `if __name__ == "__main__":`')


__all__ = ["script_stacklevel", "unguarded_hint", "unguarded_script"]
