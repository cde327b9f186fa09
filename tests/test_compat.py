"""Stores written by an earlier release open, resume and keep their bits (tests/data/stores-*)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from gramdist.engine.runner import run_job
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram
from gramdist.jobs import load_job

DATA = Path(__file__).parent / "data" / "stores-0.1.0"


def sha256(k: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(k, dtype=np.float64).tobytes()).hexdigest()


def test_store_of_release_0_1_0_resumes_to_the_same_bits(tmp_path):
    expected = json.loads((DATA / "sha256.json").read_text())
    store = tmp_path / "wl-partial.zarr"
    shutil.copytree(DATA / "wl-partial.zarr", store)
    info = store_info(store)
    assert info["gramdist_version"] == "0.1.0" and (info["tiles_done"], info["tiles_total"]) == (4, 10)
    job = load_job(DATA / "wl-partial.yaml", ["cluster.n_workers=1"])
    result = run_job(job, out=str(store))
    assert result.complete and result.tiles_already_done == 4 and result.tiles_computed == 6
    assert sha256(open_gram(store)[0]) == expected["wl-partial.zarr"]


def test_complete_store_of_release_0_1_0_opens_and_is_not_recomputed(tmp_path):
    expected = json.loads((DATA / "sha256.json").read_text())
    store = tmp_path / "dm-complete.zarr"
    shutil.copytree(DATA / "dm-complete.zarr", store)
    k, y = open_gram(store)
    assert k.shape == (40, 40) and sha256(k) == expected["dm-complete.zarr"]
    result = run_job(load_job(DATA / "dm-complete.yaml"), out=str(store))
    assert result.complete and result.tiles_computed == 0
