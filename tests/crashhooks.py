"""A test hook for the crash harness (tests/test_crash.py): imported before ``gramdist.cli.main``
in the process under test, it slows the steps of an append's commit and of a repair a little,
so that a SIGKILL at a random moment lands inside them often. It changes no result."""

from __future__ import annotations

import functools
import os
import time

DELAY = float(os.environ.get("GRAMDIST_CRASH_DELAY", "0.02"))


def _slowed(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        time.sleep(DELAY)
        out = fn(*args, **kwargs)
        time.sleep(DELAY)
        return out

    return wrapper


def install() -> None:
    from gramdist.engine.store import gram, repair, staging

    for module, names in ((staging, ("_move_chunks", "_move_folders", "_copy_array_files", "write_done_mask",
                                     "write_vector", "mark_group_complete")),
                          (repair, ("write_done_mask", "create_record_array", "mark_group_complete")),
                          (gram, ("write_done_mask",))):
        for name in names:
            setattr(module, name, _slowed(getattr(module, name)))


install()
