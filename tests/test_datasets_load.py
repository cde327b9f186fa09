"""Tests of load_dataset, the job's dataset: section."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import dataset_dir
from test_datasets_tu import write_toy

from gramdist.datasets import load_dataset, make_synthetic, read_tu
from gramdist.errors import DatasetError, JobError


@pytest.fixture
def toy(tmp_path, monkeypatch):
    monkeypatch.setenv("GRAMDIST_DATA", str(tmp_path))
    monkeypatch.setenv("GRAMDIST_TU_URL", "http://127.0.0.1:9/{name}.zip")  # never the real URL
    return write_toy(tmp_path)


def test_name_string_and_dict(toy):
    ref = read_tu(toy)
    assert load_dataset("TOY").checksum() == ref.checksum()
    assert load_dataset({"name": "TOY"}).checksum() == ref.checksum()


def test_path(toy):
    assert load_dataset({"path": str(toy)}).checksum() == read_tu(toy).checksum()
    assert load_dataset(toy).n_graphs == 3


def test_real_name(monkeypatch):
    monkeypatch.setenv("GRAMDIST_DATA", str(dataset_dir("MUTAG").parent))
    b = load_dataset("MUTAG")
    assert b.n_graphs == 188 and b.name == "MUTAG"


def test_synthetic():
    spec = {"synthetic": {"n_graphs": 12, "n_nodes": [5, 9], "avg_degree": 2.0, "seed": 3}}
    b = load_dataset(spec)
    ref = make_synthetic(n_graphs=12, n_nodes=(5, 9), avg_degree=2.0, seed=3)
    assert b.checksum() == ref.checksum()


def test_limit(toy):
    b = load_dataset({"name": "TOY", "limit": 2})
    assert b.n_graphs == 2 and b.n_nodes == 5
    assert load_dataset({"name": "TOY", "limit": 99}).n_graphs == 3


def test_node_attributes_selection(toy):
    full = read_tu(toy).node_attrs
    assert load_dataset({"name": "TOY", "node_attributes": "none"}).node_attrs is None
    np.testing.assert_array_equal(load_dataset({"name": "TOY", "node_attributes": "all"}).node_attrs, full)
    np.testing.assert_array_equal(load_dataset({"name": "TOY", "node_attributes": [1, 0]}).node_attrs,
                                  full[:, [1, 0]])
    np.testing.assert_array_equal(load_dataset({"name": "TOY", "node_attributes": [1]}).node_attrs,
                                  full[:, [1]])


def test_node_attribute_column_out_of_range(toy):
    with pytest.raises(DatasetError, match="node attribute column 2 does not exist"):
        load_dataset({"name": "TOY", "node_attributes": [0, 2]})
    with pytest.raises(DatasetError, match="column 0 does not exist .*0 columns"):
        load_dataset({"synthetic": {"n_graphs": 2, "n_nodes": 5, "avg_degree": 1, "attr_dim": 0},
                      "node_attributes": [0]})


@pytest.mark.parametrize("spec, pattern", [
    ({"name": "TOY", "colour": "red"}, "unknown key 'colour'"),
    ({"name": "TOY", "path": "/x"}, "exactly one of name, path, synthetic"),
    ({"limit": 3}, "exactly one of"),
    ({"name": "TOY", "limit": 0}, "dataset.limit"),
    ({"name": "TOY", "limit": True}, "dataset.limit"),
    ({"name": "TOY", "node_attributes": "some"}, "dataset.node_attributes"),
    ({"name": 5}, "dataset.name"),
    ({"synthetic": {"n_graph": 3}}, "dataset.synthetic: unknown key 'n_graph'"),
    ({"synthetic": {"n_graphs": 3, "n_nodes": 4, "avg_degree": 9.0}}, "dataset.synthetic: avg_degree"),
    ({"synthetic": [1]}, "dataset.synthetic"),
    (3.5, "expected a name or a mapping"),
])
def test_job_errors(toy, spec, pattern):
    with pytest.raises(JobError, match=pattern):
        load_dataset(spec)


def test_missing_dataset_names_search_path(toy):
    with pytest.raises(DatasetError, match="download failed.*not found in"):
        load_dataset("NOSUCH")


def test_conftest_dataset_dir_fixture_skip_and_ci_fail(dataset_dir, monkeypatch):
    assert (dataset_dir("MUTAG") / "MUTAG_A.txt").is_file()
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="NOSUCH not found"):
        dataset_dir("NOSUCH")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="NOSUCH not found"):
        dataset_dir("NOSUCH")
