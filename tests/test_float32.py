"""float32 Grams: the float64 values rounded once, half the store, checksums exact, resumable."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from test_deploy import one_error_line, run_cli, synthetic_job

from gramdist.datasets import load_dataset
from gramdist.engine import store as st
from gramdist.engine.context import RunContext
from gramdist.engine.executor import InlineExecutor
from gramdist.engine.placement import Placement
from gramdist.engine.plan import plan_gram
from gramdist.engine.runner import compute_in_memory, run_job
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram, verify
from gramdist.errors import StoreError
from gramdist.jobs import FitSpec, GramSpec, load_job
from gramdist.kernels.features.wl import WLSubtreeKernel


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as cl:
        yield cl


def test_float32_store_is_the_float64_gram_rounded_and_half_the_size(tmp_path, client):
    job = synthetic_job(tmp_path / "j.yaml", n_graphs=150, tile=16, seed=2)
    a = run_job(load_job(job), out=str(tmp_path / "64.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    b = run_job(load_job(job, ["gram.dtype=float32"]), out=str(tmp_path / "32.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    k64, k32 = open_gram(a.store)[0], open_gram(b.store)[0]
    assert k64.dtype == np.float64 and k32.dtype == np.float32
    assert np.array_equal(k32, k64.astype(np.float32))  # rounded once, from the float64 tile
    assert np.array_equal(k32, k32.T)
    info = store_info(b.store)
    assert info["dtype"] == "float32" and info["complete"]
    size = {s: sum(f.stat().st_size for f in (tmp_path / s / "gram").rglob("*") if f.is_file())
            for s in ("64.zarr", "32.zarr")}
    assert size["32.zarr"] < 0.6 * size["64.zarr"]
    assert verify(b.store)["problems"] == []
    # the in-memory steps give the same bits
    plan = plan_gram(WLSubtreeKernel(2), load_dataset(load_job(job).dataset), fit=FitSpec(**{"seed": 0}), gram=GramSpec(tile_size=16, normalize=True, dtype="float32"))
    assert np.array_equal(compute_in_memory(InlineExecutor(), plan, context=RunContext(log=lambda m: None)).gram, k32)


def test_float32_checksum_catches_one_ulp(tmp_path, client):
    job = synthetic_job(tmp_path / "j.yaml", n_graphs=60, tile=10, seed=3)
    res = run_job(load_job(job, ["gram.dtype=float32"]), out=str(tmp_path / "s.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    import zarr

    gram = zarr.open_array(str(tmp_path / "s.zarr" / "gram"), mode="r+")
    value = np.float32(gram[12, 45])
    gram[12, 45] = np.nextafter(value, np.float32(2))
    with pytest.raises(StoreError, match=r"tile \(1, 4\): rows 10\.\.19, columns 40\.\.49"):
        open_gram(res.store)
    # the checksum of a float32 block is the float64 one of its widened values: exact, order-free
    block = np.asarray(gram[0:10, 0:10])
    assert st.tile_checksum(block) == st.tile_checksum(block.astype(np.float64))
    assert st.tile_checksum(block) == st.tile_checksum(np.ascontiguousarray(block.T))


def test_float32_store_resumes_to_the_same_bits(tmp_path, client):
    job = synthetic_job(tmp_path / "j.yaml", n_graphs=120, tile=10, seed=4)
    whole = run_job(load_job(job, ["gram.dtype=float32"]), out=str(tmp_path / "whole.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))

    def stop(done, total):
        if done >= 20:
            raise KeyboardInterrupt

    path = str(tmp_path / "part.zarr")
    with pytest.raises(KeyboardInterrupt):
        run_job(load_job(job, ["gram.dtype=float32"]), out=path, placement=Placement(client=client), context=RunContext(progress=stop, log=lambda m: None))
    again = run_job(load_job(job, ["gram.dtype=float32"]), out=path, placement=Placement(client=client), context=RunContext(log=lambda m: None))
    assert again.tiles_already_done == 20 and again.complete
    assert np.array_equal(open_gram(path)[0], open_gram(whole.store)[0])
    # a rerun asking for float64 is another computation
    with pytest.raises(StoreError, match="dtype"):
        run_job(load_job(job), out=path, placement=Placement(client=client), context=RunContext(log=lambda m: None))


def test_bad_dtype_is_one_line(tmp_path):
    job = synthetic_job(tmp_path / "j.yaml", n_graphs=20, tile=10)
    line = one_error_line(run_cli("run", str(job), "--set", "gram.dtype=float16"))
    assert "gram.dtype must be float64 or float32, got 'float16'" in line
