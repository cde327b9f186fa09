"""as_graph_batch: one dispatch from what Python users hold to a GraphBatch, with clear errors."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from gramdist.datasets import make_synthetic, read_tu
from gramdist.datasets.inputs import as_graph_batch
from gramdist.errors import DatasetError, InputError
from gramdist.graphs import GraphBatch

FIELDS = ("node_offsets", "edge_offsets", "edges", "node_labels", "node_attrs", "edge_labels", "edge_attrs", "y")


def assert_same(a, b, fields=FIELDS):
    for f in fields:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=f)


def test_batch_folder_name_and_mapping(mutag, dataset_dir):
    folder = dataset_dir("MUTAG")
    assert as_graph_batch(mutag) is mutag
    assert_same(as_graph_batch(str(folder)), mutag)
    assert_same(as_graph_batch(folder), mutag)
    assert as_graph_batch("MUTAG").checksum() == mutag.checksum()
    assert len(as_graph_batch({"name": "MUTAG", "limit": 10})) == 10


def test_graph_views_rebuild_the_batch():
    b = make_synthetic(n_graphs=12, n_nodes=(3, 8), avg_degree=2, n_labels=3, attr_dim=2, seed=2)
    back = as_graph_batch([b[i] for i in (3, 4, 5)])
    assert_same(back, b[3:6])
    np.testing.assert_array_equal(back.graph_ids, b.graph_ids[3:6])


def test_networkx_list_with_keys(tmp_path):
    nx = pytest.importorskip("networkx")
    from test_datasets_tu import write_toy

    from gramdist.datasets import to_networkx

    b = read_tu(write_toy(tmp_path))
    graphs = to_networkx(b)
    back = as_graph_batch(graphs, node_label="label", node_attr="attr", edge_label="label", edge_attr="attr")
    assert_same(back, b, FIELDS[:-1])
    assert as_graph_batch(graphs, node_label=None).node_labels is None
    assert as_graph_batch(iter(graphs)).n_graphs == len(graphs)  # any iterable
    assert isinstance(graphs[0], nx.Graph)


def test_errors_name_the_index():
    nx = pytest.importorskip("networkx")
    labelled = nx.path_graph(3)
    nx.set_node_attributes(labelled, 1, "label")
    with pytest.raises(InputError, match=r"X\[1\]: node 0 has no 'label'; set node_label"):
        as_graph_batch([labelled, nx.path_graph(2)])
    with pytest.raises(InputError, match=r"X\[2\]: a str in a list of networkx graphs"):
        as_graph_batch([labelled, labelled, "C1CC1"])
    with pytest.raises(InputError, match="no graphs given"):
        as_graph_batch([])
    with pytest.raises(InputError, match="no graphs"):
        as_graph_batch(GraphBatch.from_graphs([], []))
    with pytest.raises(InputError, match="cannot read graphs from a int"):
        as_graph_batch(3)
    with pytest.raises(InputError, match="nope/there: no such folder, and not a dataset name"):
        as_graph_batch("nope/there")
    with pytest.raises(InputError, match=r"X\[0\]: cannot read a ndarray"):
        as_graph_batch(np.zeros((3, 3)))
    b = make_synthetic(n_graphs=4, n_nodes=(3, 5), avg_degree=1.5, n_labels=2, seed=0)
    unlabelled = GraphBatch.from_graphs([b[0].edges], [b[0].n_nodes])
    with pytest.raises(InputError, match=r"X\[1\]: lacks node_labels, unlike X\[0\]"):
        as_graph_batch([b[0], unlabelled[0]])
    # InputError is a ValueError (scikit-learn's invalid-input type) and a DatasetError (the CLI's)
    assert issubclass(InputError, ValueError) and issubclass(InputError, DatasetError)


def test_molecule_inputs_go_to_the_molecule_module_with_its_options(monkeypatch):
    """The molecules module (gramdist[chem]) is asked first; its options pass through whole."""
    b = make_synthetic(n_graphs=3, n_nodes=(3, 5), avg_degree=1.5, n_labels=2, seed=0)
    calls = []
    fake = types.ModuleType("gramdist.datasets.molecules")
    fake.is_molecule_input = lambda X: isinstance(X, list) and all(isinstance(s, str) for s in X)
    fake.molecules_to_batch = lambda X, **options: calls.append((X, options)) or b
    monkeypatch.setitem(sys.modules, "gramdist.datasets.molecules", fake)
    assert as_graph_batch(["CCO", "c1ccccc1", "O"], input_options={"aromaticity": False}) is b
    assert calls == [(["CCO", "c1ccccc1", "O"], {"aromaticity": False})]
    assert as_graph_batch(b) is b  # not a molecule input: the usual dispatch


def test_without_the_molecule_module_the_rest_still_works(monkeypatch):
    import importlib

    real = importlib.import_module

    def no_molecules(name, *args):
        if name == "gramdist.datasets.molecules":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", no_molecules)
    b = make_synthetic(n_graphs=3, n_nodes=(3, 5), avg_degree=1.5, n_labels=2, seed=0)
    assert as_graph_batch(b) is b
    with pytest.raises(InputError, match="cannot read a str as a graph"):
        as_graph_batch(["CCO"])
