"""What the command line does at its start and its exit (gramdist.cli.entry_point, gramdist.lazy)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120)


def test_the_exit_waits_for_threads_runs_the_handlers_and_flushes(tmp_path):
    """``exit_without_teardown`` skips only the interpreter's teardown: a non-daemon thread still
    running is waited for, a ``concurrent.futures`` pool finishes its queued work, the atexit
    handlers run (last registered first), buffered output reaches the pipes, and the status is
    the command's."""
    r = _python(f"""
        import atexit, sys, threading, time
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path
        from gramdist.cli import exit_without_teardown

        def late():
            time.sleep(0.5)
            Path({str(tmp_path / "thread")!r}).write_text("done")

        threading.Thread(target=late).start()
        pool = ThreadPoolExecutor(1)
        pool.submit(lambda: (time.sleep(0.3), Path({str(tmp_path / "pool")!r}).write_text("done")))
        atexit.register(lambda: print("first registered", flush=False))
        atexit.register(lambda: print("second registered", end="; ", flush=False))
        print("buffered", end="; ")
        sys.stderr.write("to stderr")
        exit_without_teardown(3)
        print("never")
    """)
    assert r.returncode == 3, r.stderr
    assert r.stdout == "buffered; second registered; first registered\n"
    assert r.stderr == "to stderr"
    assert (tmp_path / "thread").read_text() == "done"
    assert (tmp_path / "pool").read_text() == "done"


def test_the_command_line_defers_numpy_extras_and_they_still_work():
    """The command line makes NumPy's f2py and testing lazy before SciPy clones NumPy's namespace:
    a run of a command does not execute them, and they load at their first use."""
    r = _python("""
        import sys
        import gramdist.cli
        import scipy.sparse
        loaded = [m for m in ("numpy.f2py.crackfortran", "numpy.testing._private.utils") if m in sys.modules]
        import numpy
        numpy.testing.assert_array_equal(numpy.ones(2), numpy.ones(2))
        from numpy.f2py import main
        print(loaded, callable(main), "numpy.testing._private.utils" in sys.modules)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[] True True"


def test_importing_gramdist_leaves_numpy_as_it_is():
    """Only the command line changes how NumPy's submodules load: ``import gramdist`` (a library
    in someone else's process) does not, and ``gramdist.GraphBatch`` still resolves."""
    r = _python("""
        import sys
        import gramdist
        import scipy.sparse
        print(type(sys.modules["numpy.testing"]).__name__, gramdist.GraphBatch.__name__)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "module GraphBatch"


def test_a_prefetched_module_is_waited_for_not_read_half_imported(tmp_path):
    """``prefetch`` imports a module in a background thread; a :func:`deferred_import` of it
    touched meanwhile from the main thread waits for that import (Python's module lock) rather
    than reading a half-executed module, and the module runs once. A deferred module is not
    imported before its first attribute, and a missing one fails at once."""
    (tmp_path / "slowmod.py").write_text(
        "import time\nfrom pathlib import Path\n"
        f"with open({str(tmp_path / 'runs')!r}, 'a') as f:\n    f.write('x')\n"
        "time.sleep(0.5)\nVALUE = 42\n")
    (tmp_path / "idlemod.py").write_text("VALUE = 7\n")
    r = _python(f"""
        import sys, time
        sys.path.insert(0, {str(tmp_path)!r})
        from gramdist.lazy import deferred_import, prefetch
        idle = deferred_import("idlemod")
        before = "idlemod" in sys.modules
        prefetch("slowmod")
        time.sleep(0.1)  # the background import is under way, sleeping
        slow = deferred_import("slowmod")
        try:
            deferred_import("no_such_module_here")
        except ModuleNotFoundError:
            missing = "raised"
        print(before, slow.VALUE, idle.VALUE, "idlemod" in sys.modules, missing)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False 42 7 True raised"
    assert (tmp_path / "runs").read_text() == "x"
