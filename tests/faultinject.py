"""Test fixture: make one chosen tile fail inside the workers, with no hook in the product.

Two ways in, both through Dask's own extension points:

* :class:`FailTile`, a ``WorkerPlugin``: ``client.register_plugin(FailTile((1, 2)))`` on a
  cluster the test owns (``unregister`` restores the workers);
* Dask's worker preload, for a ``gramdist`` command that starts its own cluster: run it with
  ``preload_env((3, 5))`` in its environment and every worker it spawns loads this file.

Either way the worker's ``gramdist.engine.tasks.tile_task`` is wrapped so that, for the chosen
tile, the kernel's ``pairwise`` raises ``FloatingPointError("injected failure")`` inside the
real task, which reports it as it reports any kernel failure (a ``TileError`` naming the tile
and its graphs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

ENV = "GRAMDIST_FAULT_TILE"


class _FailingKernel:
    """The kernel of the chosen tile: every call but ``pairwise`` goes to the real one."""

    def __init__(self, kernel: Any) -> None:
        self._kernel = kernel

    def __getattr__(self, name: str) -> Any:
        return getattr(self._kernel, name)

    def pairwise(self, *args: Any) -> Any:
        raise FloatingPointError("injected failure (test fixture)")


def install(tile: tuple[int, int]) -> None:
    """Wrap ``tile_task`` in this process so that ``tile`` fails."""
    from gramdist.engine import tasks

    original = getattr(tasks.tile_task, "__wrapped__", tasks.tile_task)

    def tile_task(kernel, state, emb_rows, emb_cols, d_rows, d_cols, spec):
        if tuple(spec.tile) == tuple(tile):
            kernel = _FailingKernel(kernel)
        return original(kernel, state, emb_rows, emb_cols, d_rows, d_cols, spec)

    tile_task.__wrapped__ = original
    tasks.tile_task = tile_task


def uninstall() -> None:
    from gramdist.engine import tasks

    tasks.tile_task = getattr(tasks.tile_task, "__wrapped__", tasks.tile_task)


class FailTile(WorkerPlugin):
    """A worker plugin that makes ``tile`` fail on every worker of the cluster."""

    name = "gramdist-test-fail-tile"

    def __init__(self, tile: tuple[int, int]) -> None:
        self.tile = tuple(tile)

    def setup(self, worker: Any) -> None:
        install(self.tile)

    def teardown(self, worker: Any) -> None:
        uninstall()


def preload_env(tile: tuple[int, int]) -> dict[str, str]:
    """Environment for a ``gramdist`` process whose workers must fail ``tile``."""
    return {"DASK_DISTRIBUTED__WORKER__PRELOAD": f'["{Path(__file__).resolve()}"]',
            ENV: f"{tile[0]},{tile[1]}"}


def dask_setup(worker: Any) -> None:
    """Dask's preload entry point (see :func:`preload_env`)."""
    value = os.environ.get(ENV)
    if value:
        i, j = (int(v) for v in value.split(","))
        install((i, j))
