"""Damage of every kind on a real store: found, reported in one line each, repaired, recomputed.

Each case damages a copy of a complete store — a chunk truncated, its header overwritten, a
chunk file deleted, a value changed; the ``zarr.json`` of the group or of an array deleted or
garbled; the done-mask, the checksums or the diagonal lost — and checks that ``gramdist
verify`` names the damage (exit 1), that ``open_gram`` fails with one line naming it (never a
codec error), that ``verify --repair`` repairs what it can, and that finishing the store
recomputes just the unmarked tiles and ends bitwise equal to the undamaged store. Every case
runs on a float64 store, a float32 store and a store grown by an append.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_deploy import last_json, one_error_line, run_cli

from gramdist.engine.append import append
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import info as store_info
from gramdist.engine.store import open_gram, verify
from gramdist.errors import StoreError
from gramdist.jobs import validate_job

QUIET = {"log": lambda m: None}
N, TILE = 40, 8  # 5 x 5 tiles, 15 computed; tile (1, 3) is rows 8..15, columns 24..31


def _job(dtype: str, limit: int | None = None) -> dict:
    ds = {"synthetic": {"n_graphs": N, "n_nodes": [6, 12], "avg_degree": 2.5, "n_labels": 4, "attr_dim": 0,
                        "seed": 8}}
    if limit:
        ds["limit"] = limit
    return validate_job({"dataset": ds, "kernel": {"name": "wl", "h": 2},
                         "gram": {"tile_size": TILE, "normalize": True, "dtype": dtype}, "_job_name": "d"})


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """Undamaged complete stores: float64, float32, and float64 grown from 30 to 40 graphs."""
    from distributed import Client, LocalCluster

    folder = tmp_path_factory.mktemp("damage")
    out = {}
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        for name, dtype in (("float64", "float64"), ("float32", "float32")):
            run_job(_job(dtype), out=str(folder / f"{name}.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
            out[name] = folder / f"{name}.zarr"
        run_job(_job("float64", limit=30), out=str(folder / "appended.zarr"), placement=Placement(client=client), context=RunContext(log=lambda m: None))
    append(folder / "appended.zarr", {**_job("float64").dataset, "skip": 30}, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    out["appended"] = folder / "appended.zarr"
    for path in out.values():
        assert verify(path)["problems"] == []
    return out


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def overwrite_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[0:4] = b"\xff\xff\xff\xff"
    path.write_bytes(bytes(data))


def change_value(store: Path) -> None:
    gram = zarr.open_array(str(store / "gram"), mode="r+")
    gram[9, 25] = np.nextafter(gram[9, 25], 2.0).astype(gram.dtype)


# kind -> (damage, the verify line, whether a rerun must recompute tiles)
DAMAGE = {
    # Blosc decodes some truncated chunks without an error (into wrong values): the checksum
    # catches those, so either reason may be given
    "chunk truncated": (lambda s: truncate(s / "gram/c/1/3"), "tile (1, 3): rows 8..15, columns 24..31: chunk "
                        "gram/c/1/3 ", True),
    "chunk header overwritten": (lambda s: overwrite_header(s / "gram/c/1/3"), "tile (1, 3): rows 8..15, columns "
                                 "24..31: chunk gram/c/1/3 cannot be decoded", True),
    "chunk missing": (lambda s: (s / "gram/c/3/1").unlink(), "tile (1, 3): rows 8..15, columns 24..31: chunk "
                      "gram/c/3/1 is missing", True),
    "value changed": (change_value, "tile (1, 3): rows 8..15, columns 24..31: chunk gram/c/1/3 (the tile) does not match the "
                      "checksum", True),
    "group zarr.json missing": (lambda s: (s / "zarr.json").unlink(), "the store's group metadata (zarr.json) is "
                                "missing: its attributes (kernel, dataset, fit, completeness) are lost", False),
    "group zarr.json garbled": (lambda s: (s / "zarr.json").write_bytes(b'{"zarr_format": 3, "attri'),
                                "the store's group metadata (zarr.json) is unreadable", False),
    "gram zarr.json missing": (lambda s: (s / "gram/zarr.json").unlink(), "the metadata of the 'gram' array "
                               "(gram/zarr.json) is missing", False),
    "done-mask zarr.json missing": (lambda s: (s / "tiles_done/zarr.json").unlink(), "the metadata of the "
                                    "'tiles_done' array (tiles_done/zarr.json) is missing", False),
    "done-mask lost": (lambda s: (s / "tiles_done/c/0/0").unlink(), "the done-mask (tiles_done) is missing", False),
    "checksums lost": (lambda s: (s / "tile_checksums/c/0/0").unlink(), "the tile checksums (tile_checksums) is "
                       "missing", False),
    "checksums zarr.json garbled": (lambda s: (s / "tile_checksums/zarr.json").write_bytes(b"\x00\x01"),
                                    "the metadata of the 'tile_checksums' array (tile_checksums/zarr.json) is "
                                    "unreadable", False),
    "diagonal lost": (lambda s: shutil.rmtree(s / "diag"), "diag (the raw K(g, g) of the rows) is missing", False),
}


@pytest.mark.parametrize("variant", ["float64", "float32", "appended"])
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_damage_is_reported_repaired_and_recomputed(stores, tmp_path, kind, variant):
    damage, expected, recompute = DAMAGE[kind]
    undamaged = open_gram(stores[variant])[0]
    store = tmp_path / "s.zarr"
    shutil.copytree(stores[variant], store)
    damage(store)

    report = verify(store)
    assert report["problems"], report
    assert any(expected in line for line in report["problems"]), report["message"]
    if kind == "diagonal lost":  # the Gram itself is whole and can be trusted: it reads
        assert np.array_equal(open_gram(store)[0], undamaged)
    else:
        with pytest.raises(StoreError) as err:  # one line, naming the damage
            open_gram(store)
        assert "\n" not in str(err.value) and "Traceback" not in str(err.value)
        if recompute:
            assert "tile (1, 3): rows 8..15, columns 24..31" in str(err.value)

    repaired = verify(store, repair=True)
    assert repaired["repaired"], repaired
    if kind == "diagonal lost":  # the Gram itself is whole: it still reads
        assert np.array_equal(open_gram(store, allow_incomplete=True)[0], undamaged)
    res = append(store, None, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))  # finish the store from its recorded sources
    assert res.complete
    if recompute:
        assert res.tiles_computed == 1  # just the damaged tile
    elif kind != "diagonal lost":
        assert res.tiles_computed == 0 and res.nothing_to_do  # the repair alone made it whole
    k = open_gram(store)[0]
    assert k.dtype == undamaged.dtype and np.array_equal(k, undamaged)
    assert verify(store)["problems"] == []


def test_lost_group_metadata_without_a_copy_says_it_cannot_be_trusted(stores, tmp_path):
    store = tmp_path / "s.zarr"
    shutil.copytree(stores["float64"], store)
    for name in ("tiles_done", "tile_checksums"):
        meta = zarr.open_array(str(store / name), mode="r+")
        del meta.attrs["backup"]
    (store / "zarr.json").unlink()
    line = one_error_line(run_cli("info", str(store)))
    assert "group metadata (zarr.json) is missing" in line and "no copy of them was kept" in line, line
    r = run_cli("verify", "--repair", str(store))
    assert r.returncode == 1 and "no copy of them was kept" in r.stdout, r.stdout


def test_the_issues_mutag_damage_through_the_cli(tmp_path, dataset_dir):
    """The issue's report, end to end on MUTAG WL: a chunk truncated to 100 bytes and another's
    header overwritten made `verify` crash with a blosc traceback, `evaluate` stop with "cannot
    read array" and a rerun say "already complete". Now: verify names both (exit 1), evaluate
    names them in one line, verify --repair unmarks them, the rerun computes exactly those two
    tiles, and the Gram is bitwise the undamaged one."""
    dataset_dir("MUTAG")
    job = tmp_path / "mutag-wl.yaml"
    job.write_text("dataset: {name: MUTAG}\nkernel: {name: wl, h: 3}\ngram: {tile_size: 64, normalize: true}\n"
                   "cluster: {n_workers: 1}\n")
    out = tmp_path / "mutag-wl.zarr"
    r = run_cli("run", str(job), "--out", str(out), "--quiet")
    assert r.returncode == 0, r.stderr[-3000:]
    undamaged = open_gram(out)[0]
    (out / "gram/c/1/1").write_bytes((out / "gram/c/1/1").read_bytes()[:100])
    overwrite_header(out / "gram/c/0/2")

    r = run_cli("verify", str(out))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "tile (1, 1): rows 64..127, columns 64..127: chunk gram/c/1/1 cannot be decoded" in r.stdout, r.stdout
    assert "tile (0, 2): rows 0..63, columns 128..187: chunk gram/c/0/2 cannot be decoded" in r.stdout
    line = one_error_line(run_cli("evaluate", str(out), "--workers", "0", "--repeats", "1"))
    assert "2 tile(s) damaged on disk" in line and "tile (0, 2)" in line and "tile (1, 1)" in line, line
    r = run_cli("verify", "--repair", str(out))
    assert r.returncode == 1 and "unmarked 2 damaged tile(s)" in r.stdout and "rerun its job" in r.stdout, r.stdout
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    assert last_json(r.stdout)["tiles_computed"] == 2
    assert np.array_equal(open_gram(out)[0], undamaged)
    assert run_cli("verify", str(out)).returncode == 0
    assert store_info(out)["complete"]
