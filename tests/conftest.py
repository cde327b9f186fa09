"""Shared test helpers: where the real TU datasets are, and a loaded MUTAG.

Use ``dataset_dir("NAME")`` (importable: ``from conftest import dataset_dir``, or as the
fixture ``dataset_dir``, which returns that same function). It looks in ``$GRAMDIST_DATA``,
then in ``../shared/datasets`` beside the repository; a missing dataset skips the test, except
under ``CI=true`` where it fails it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATASETS = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"


def dataset_dir(name: str) -> Path:
    """Folder of the TU dataset ``name``; skips (fails under ``CI=true``) when it is missing."""
    roots = [Path(p) for p in os.environ.get("GRAMDIST_DATA", "").split(os.pathsep) if p]
    roots.append(SHARED_DATASETS)
    for root in roots:
        if (root / name / f"{name}_graph_indicator.txt").is_file():
            return root / name
    msg = f"dataset {name} not found in {', '.join(str(r) for r in roots)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(name="dataset_dir")
def _dataset_dir_fixture():
    """The :func:`dataset_dir` function, for tests that prefer a fixture."""
    return dataset_dir


@pytest.fixture(scope="session")
def mutag():
    """MUTAG as a GraphBatch (188 graphs, node and edge labels); treat it as read-only."""
    from gramdist.datasets import read_tu

    return read_tu(dataset_dir("MUTAG"))
