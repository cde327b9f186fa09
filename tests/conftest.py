"""Shared test helpers: where the real TU datasets are, and a loaded MUTAG.

Use ``dataset_dir("NAME")`` (importable: ``from conftest import dataset_dir``, or as the
fixture ``dataset_dir``, which returns that same function). It looks in ``$GRAMDIST_DATA``,
then in ``../shared/datasets`` beside the repository, then (MUTAG and PTC_MR) at the copy built
into gramdist, extracted once per test session; a missing dataset skips the test, except
under ``CI=true`` where it fails it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

SHARED_DATASETS = Path(__file__).resolve().parents[1] / ".." / "shared" / "datasets"
_builtin_copies: dict[str, Path] = {}


def dataset_dir(name: str) -> Path:
    """Folder of the TU dataset ``name``; skips (fails under ``CI=true``) when it is missing."""
    roots = [Path(p) for p in os.environ.get("GRAMDIST_DATA", "").split(os.pathsep) if p]
    roots.append(SHARED_DATASETS)
    for root in roots:
        if (root / name / f"{name}_graph_indicator.txt").is_file():
            return root / name
    builtin = builtin_dataset_dir(name)
    if builtin is not None:
        return builtin
    msg = f"dataset {name} not found in {', '.join(str(r) for r in roots)}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def builtin_dataset_dir(name: str) -> Path | None:
    """The copy of ``name`` built into gramdist, extracted into a folder of this test session
    (None when ``name`` is not built in). Jobs that name the dataset find it on their own."""
    from gramdist.datasets.builtin import builtin_zip, extract_builtin

    if builtin_zip(name) is None:
        return None
    if "_root" not in _builtin_copies:
        root = Path(tempfile.mkdtemp(prefix="gramdist-test-builtin-"))
        atexit.register(shutil.rmtree, root, True)
        _builtin_copies["_root"] = root
    return extract_builtin(name, _builtin_copies["_root"])


@pytest.fixture(name="dataset_dir")
def _dataset_dir_fixture():
    """The :func:`dataset_dir` function, for tests that prefer a fixture."""
    return dataset_dir


@pytest.fixture(scope="session")
def mutag():
    """MUTAG as a GraphBatch (188 graphs, node and edge labels); treat it as read-only."""
    from gramdist.datasets import read_tu

    return read_tu(dataset_dir("MUTAG"))
