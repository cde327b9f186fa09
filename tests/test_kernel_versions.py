"""Kernel definition versions in stores: a store made with one version of a kernel's definition
is never resumed, grown, searched or fitted from with another, and stores written before
versions were recorded still match every kernel at version 1."""

from __future__ import annotations

import pytest
import zarr
from test_features import featurize
from test_features import job as feature_job

from gramdist.cli import main
from gramdist.engine.append import append
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.search import search
from gramdist.engine.store import GramStore
from gramdist.errors import StoreError
from gramdist.jobs import validate_job
from gramdist.kernels import KERNELS, kernel_class, make_kernel
from gramdist.kernels.features.wl import WLSubtreeKernel as WLKernel

HERE = Placement(in_process=True)
QUIET = RunContext(log=lambda m: None)


def gram_job(n: int, kernel: dict | None = None, from_store: str | None = None):
    return validate_job({"dataset": {"name": "MUTAG", "limit": n}, "kernel": kernel or {"name": "wl", "h": 2},
                         "gram": {"tile_size": 16}, "fit": {"from_store": from_store}, "_job_name": "versions"})


#: kernels past their first version, and why: a bump is deliberate, it makes every store of that
#: kernel refuse this code (add it here)
BUMPED = {
    "svm_theta": 2,  # Lanczos λ_min and one factorisation per graph above 100 nodes
    "pyramid_match": 3,  # v2: embedding scaled by 2^S, S even; v3: counts per cell, not their unary features
}


def test_every_registered_kernel_is_at_its_recorded_version():
    for name in KERNELS:
        cls = kernel_class(name)
        assert cls.version == BUMPED.get(name, 1), name
        want = {name: BUMPED[name]} if name in BUMPED else {}
        assert cls().definition_versions() == want, name  # not validated: optional dependencies need not be there


def test_a_bumped_version_is_recorded_and_core_records_its_base(monkeypatch):
    monkeypatch.setattr(WLKernel, "version", 3)
    assert make_kernel("wl").definition_versions() == {"wl": 3}
    assert make_kernel("core", base={"name": "wl"}).definition_versions() == {"wl": 3}
    assert make_kernel("core", base={"name": "sp"}).definition_versions() == {}


def test_gram_store_refuses_another_version_on_resume_append_search_and_from_store(tmp_path, monkeypatch, dataset_dir):
    dataset_dir("MUTAG")
    store = tmp_path / "g.zarr"
    run_job(gram_job(40), out=str(store), placement=HERE, context=QUIET)
    opened = GramStore.open(store)
    assert opened.kernel_versions == {} and "kernel_versions" in opened.root.attrs

    monkeypatch.setattr(WLKernel, "version", 2)
    with pytest.raises(StoreError, match=r"wl v1; this gramdist computes wl v2"):
        run_job(gram_job(40), out=str(store), placement=HERE, context=QUIET)
    with pytest.raises(StoreError, match="wl v2"):
        append(str(store), {"name": "MUTAG", "skip": 40, "limit": 5}, placement=HERE, context=QUIET)
    with pytest.raises(StoreError, match="wl v2"):
        run_job(gram_job(40, from_store=str(store)), out=str(tmp_path / "other.zarr"), placement=HERE,
                context=QUIET)
    with pytest.raises(StoreError, match="wl v2"):
        search(str(store), {"name": "MUTAG", "skip": 40, "limit": 3}, top=2, placement=HERE, context=QUIET)
    assert GramStore.open(store).info()["tiles_done"] == 6  # nothing was written to it

    # a store made by the new version records it, and is refused by the old one
    run_job(gram_job(40), out=str(tmp_path / "v2.zarr"), placement=HERE, context=QUIET)
    assert GramStore.open(tmp_path / "v2.zarr").kernel_versions == {"wl": 2}
    monkeypatch.setattr(WLKernel, "version", 1)
    with pytest.raises(StoreError, match=r"wl v2; this gramdist computes wl v1"):
        append(str(tmp_path / "v2.zarr"), {"name": "MUTAG", "skip": 40, "limit": 5}, placement=HERE,
               context=QUIET)
    # the store made at version 1 grows again at version 1
    assert append(str(store), {"name": "MUTAG", "skip": 40, "limit": 5}, placement=HERE,
                  context=QUIET).n_rows == 45


def test_a_store_written_before_versions_were_recorded_resumes_and_grows(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    store = tmp_path / "old.zarr"
    run_job(gram_job(30), out=str(store), placement=HERE, context=QUIET)
    group = zarr.open_group(str(store), mode="r+")
    del group.attrs["kernel_versions"]  # as gramdist 0.2 wrote it
    assert GramStore.open(store).kernel_versions == {}
    result = run_job(gram_job(30), out=str(store), placement=HERE, context=QUIET)
    assert result.tiles_computed == 0
    assert append(str(store), {"name": "MUTAG", "skip": 30, "limit": 4}, placement=HERE,
                  context=QUIET).n_rows == 34


def test_feature_store_refuses_another_version_on_resume_and_from(tmp_path, monkeypatch, dataset_dir):
    dataset_dir("MUTAG")
    j = feature_job({"name": "wl", "h": 2}, {"name": "MUTAG", "limit": 30})
    featurize(j, tmp_path / "f.zarr", chunk_size=10)
    monkeypatch.setattr(WLKernel, "version", 2)
    with pytest.raises(StoreError, match="wl v2"):
        featurize(j, tmp_path / "f.zarr", chunk_size=10)
    with pytest.raises(StoreError, match="wl v2"):
        featurize(feature_job({"name": "wl", "h": 2}, {"name": "MUTAG", "skip": 30, "limit": 10}),
                  tmp_path / "g.zarr", chunk_size=10, from_store=str(tmp_path / "f.zarr"))
    with pytest.raises(StoreError, match="wl v2"):
        search(str(tmp_path / "f.zarr"), {"name": "MUTAG", "skip": 30, "limit": 3}, top=2, placement=HERE,
               context=QUIET)


def test_cli_names_the_versions_in_one_line_and_info_shows_them(tmp_path, monkeypatch, capsys, dataset_dir):
    dataset_dir("MUTAG")
    job_file = tmp_path / "j.yaml"
    job_file.write_text("dataset: {name: MUTAG, limit: 20}\nkernel: {name: wl, h: 1}\ngram: {tile_size: 16}\n")
    store = str(tmp_path / "s.zarr")
    assert main(["run", str(job_file), "--out", store, "--quiet"]) == 0
    monkeypatch.setattr(WLKernel, "version", 2)
    capsys.readouterr()
    assert main(["run", str(job_file), "--out", store, "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gramdist: error: ") and "wl v1" in err[0] and "wl v2" in err[0]
    assert main(["run", str(job_file), "--out", store, "--quiet", "--overwrite"]) == 0
    capsys.readouterr()
    assert main(["info", store]) == 0
    assert "wl v2" in capsys.readouterr().out
