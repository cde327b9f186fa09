"""Test fixture: slow and hold tile tasks inside Dask workers, with no hook in the product.

A Dask worker preload (``preload_env(...)`` in the worker's environment): the worker's
``gramdist.engine.tasks.tile_task`` is wrapped so that each tile first sleeps
``$GRAMDIST_TEST_TILE_SECONDS`` and then waits while the file ``$GRAMDIST_TEST_TILE_GATE``
exists. A test creates the gate to hold a job in the middle of its tile phase (the tiles in
flight wait, unwritten), acts (kills a process, submits again, cancels) and removes the gate to
let the job go on. The wrapper takes the original's name, so the tasks that an orchestrator
running on a worker submits refer to it by name and every worker runs its own wrapper.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

SECONDS = "GRAMDIST_TEST_TILE_SECONDS"
GATE = "GRAMDIST_TEST_TILE_GATE"


def preload_env(gate: Path, seconds: float = 0.03) -> dict[str, str]:
    """Environment for ``dask worker`` processes whose tiles take ``seconds`` and wait on ``gate``."""
    return {"DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{Path(__file__).resolve()}"]',
            SECONDS: str(seconds), GATE: str(gate)}


def install(seconds: float, gate: str) -> None:
    from gramdist.engine import tasks

    original = getattr(tasks.tile_task, "__wrapped__", tasks.tile_task)

    def tile_task(*args: Any) -> Any:
        time.sleep(seconds)
        while os.path.exists(gate):
            time.sleep(0.02)
        return original(*args)

    tile_task.__wrapped__ = original
    tile_task.__module__ = original.__module__
    tile_task.__qualname__ = original.__qualname__
    tasks.tile_task = tile_task


def dask_setup(worker: Any) -> None:
    """Dask's preload entry point."""
    if os.environ.get(GATE):
        install(float(os.environ.get(SECONDS, "0")), os.environ[GATE])
