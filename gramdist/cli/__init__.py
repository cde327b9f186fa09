"""The ``gramdist`` command line: one module per command, assembled here.

Errors a user can fix (bad job, bad data, unusable store) print one line
``gramdist: error: ...`` on stderr and exit with status 2; an interruption (Ctrl-C, and the
SIGTERM or SIGHUP that ``timeout``, SLURM, Kubernetes or a closed terminal send) saves the
progress, releases the store's lock, exits 130 (143, 129) and the job resumes when the same
command is run again. A command that stops on purpose before its end (``evaluate
--time-limit``) says what it saved and exits 3.

A new command is a module of this package with ``register(subparsers)``, which adds its
parser and sets ``func`` (the function run with the parsed arguments, returning the exit
status), plus one entry in :data:`COMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

if "numpy" not in sys.modules:
    # the executable (or ``python -m gramdist.cli``): its parallelism is the in-process pool's
    # threads or Dask's worker processes (whose nannies set the same), and OpenBLAS, when it
    # starts with threads of its own, burns CPU while two pool threads call LAPACK even under
    # ``threadpool_limits(1)``: SVM-θ on D&D 5.3 s of CPU and 3.1 s wall in two threads
    # against 3.3 s and 2.6 s with this (2026-11-29). Set before NumPy loads OpenBLAS; a
    # value the user exported is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from gramdist.lazy import defer_numpy_extras  # noqa: E402

defer_numpy_extras()  # before any command module imports SciPy

from gramdist import stopping  # noqa: E402
from gramdist.errors import GramdistError  # noqa: E402

#: modules of this package, each registering its commands, in the order ``--help`` lists them
COMMANDS = ("run", "features", "append", "search", "submit", "status", "cancel", "store", "evaluate", "combine", "plot",
            "stream", "certs")


def _parser() -> argparse.ArgumentParser:
    from gramdist import __version__

    p = argparse.ArgumentParser(prog="gramdist", description="Distributed Gram matrices between graphs.")
    p.add_argument("--version", action="version", version=f"gramdist {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        importlib.import_module(f"gramdist.cli.{name}").register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    stopping.install()
    try:
        code = args.func(args)
        stopping.raise_if_stopped()  # a signal whose exception was swallowed after the last task
        return code
    except GramdistError as exc:
        print(f"gramdist: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the environment, not a bug: a full disk, a permission, a lost file
        print(f"gramdist: error: {exc}", file=sys.stderr)
        return 2
    except stopping.StoppedEarly as exc:
        print(f"gramdist: {exc}", file=sys.stderr)
        return exc.status
    except stopping.Terminated as exc:
        stopping.take_request()
        print(f"gramdist: stopped by {signal.Signals(exc.signum).name}; run the same command again to resume",
              file=sys.stderr)
        return 128 + exc.signum
    except KeyboardInterrupt:
        print("gramdist: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as exc:
        if type(exc).__name__ != "KilledWorker":  # distributed's; not imported just to name it
            raise
        print(f"gramdist: error: {killed_worker_message(exc)}", file=sys.stderr)
        return 2


def entry_point() -> None:
    """The ``gramdist`` executable: :func:`main`, then :func:`exit_without_teardown`. Only the
    executable may fork worker processes (:mod:`gramdist.engine.processes`)."""
    from gramdist.engine.processes import allow_fork

    allow_fork()
    exit_without_teardown(main())


def exit_without_teardown(code: int) -> None:
    """Exit with ``code`` as Python's own exit would, less its last step.

    Python's exit waits for the threads (``threading._shutdown``: every non-daemon thread and
    every ``concurrent.futures`` pool), runs the ``atexit`` handlers, flushes the standard
    streams, then frees every module and object one by one: 70-80 ms here after a run that
    imported SciPy, Zarr and Dask, for memory the operating system takes back at once. This does
    the first three and leaves with ``os._exit``. Only for the executable: :func:`main` called
    from Python returns as usual.
    """
    import atexit
    import os
    import threading

    threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit calls first
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more can be written there
            pass
    os._exit(int(code or 0))


def killed_worker_message(exc: BaseException) -> str:
    """One line for Dask's ``KilledWorker``: every worker that ran a task died. Almost always a
    task that needs more memory than a worker may use (the nanny kills it at 95 %), so the
    line says which task and what to change; progress saved so far stays valid."""
    task = getattr(exc, "task", None) or (exc.args[0] if exc.args else "?")
    step = str(task).split("-")[0]
    return (f"every Dask worker that ran task {task!r} ({step}) died, most likely out of memory: give the workers "
            "more (cluster.memory_limit, fewer workers per machine) or make the task smaller (fit.sample_size for "
            "a fit, gram.tile_size for tiles); the tiles written so far are kept and a rerun resumes")
