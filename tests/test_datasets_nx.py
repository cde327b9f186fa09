"""Tests of the NetworkX conversions."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from test_datasets_tu import write_toy

from gramdist.datasets import from_networkx, make_synthetic, read_tu, to_networkx
from gramdist.errors import DatasetError

nx = pytest.importorskip("networkx")
FIELDS = ("node_offsets", "edge_offsets", "edges", "node_labels", "node_attrs", "edge_labels", "edge_attrs", "y")


def assert_same(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert (x is None) == (y is None), f
        if x is not None:
            np.testing.assert_array_equal(x, y, err_msg=f)


def roundtrip(b):
    return from_networkx(to_networkx(b), node_label="label", node_attr="attr", edge_label="label",
                         edge_attr="attr", y="label")


def test_roundtrip_toy_with_everything(tmp_path):
    b = read_tu(write_toy(tmp_path))  # self-loop, edgeless graph, attrs on nodes and edges
    assert_same(roundtrip(b), b)


def test_roundtrip_mutag(mutag):
    b = mutag[:40]
    back = from_networkx(to_networkx(b), edge_label="label", y="label")
    assert_same(back, b)


def test_roundtrip_synthetic():
    b = make_synthetic(n_graphs=20, n_nodes=15, avg_degree=3.0, n_labels=4, attr_dim=3, seed=0)
    back = from_networkx(to_networkx(b), node_attr="attr", y="label")
    assert_same(back, b)


def test_to_networkx_content(mutag):
    g = to_networkx(mutag[:1])[0]
    assert g.number_of_nodes() == mutag[0].n_nodes and g.number_of_edges() == len(mutag[0].edges)
    assert g.graph["graph_id"] == 1 and g.graph["label"] == int(mutag.y[0])
    assert g.nodes[0]["label"] == int(mutag.node_labels[0])


def test_directed_multigraph_string_labels():
    g = nx.MultiDiGraph()
    g.add_nodes_from([("c", {"el": "C"}), ("a", {"el": "O"}), ("b", {"el": "C"})])
    g.add_edge("a", "c", bond="single", w=1.5)
    g.add_edge("c", "a", bond="double", w=2.0)  # same undirected edge, and first in G.edges order
    g.add_edge("b", "b", bond="ring", w=0.5)  # self-loop kept once
    b = from_networkx([g], node_label="el", edge_label="bond", edge_attr="w", y=[3])
    np.testing.assert_array_equal(b.node_labels, [0, 1, 0])  # "C" < "O"
    np.testing.assert_array_equal(b.edges, [[0, 1], [2, 2]])  # c=0, a=1, b=2; sorted
    assert [(u, v) for u, v, _ in g.edges(data=True)][0] == ("c", "a")
    np.testing.assert_array_equal(b.edge_labels, [0, 1])  # kept: "double" < "ring"
    np.testing.assert_array_equal(b.edge_attrs[:, 0], [2.0, 0.5])
    np.testing.assert_array_equal(b.y, [3])


def test_missing_node_label():
    g = nx.path_graph(3)
    with pytest.raises(DatasetError, match="graph 0 node 0 has no 'label'"):
        from_networkx([g])
    b = from_networkx([g], node_label=None)
    assert b.node_labels is None and b.n_edges == 2


def test_attribute_width_mismatch_and_nan():
    g1, g2 = nx.path_graph(2), nx.path_graph(2)
    nx.set_node_attributes(g1, {0: [1.0, 2.0], 1: [3.0, 4.0]}, "x")
    nx.set_node_attributes(g2, {0: [1.0], 1: [2.0]}, "x")
    with pytest.raises(DatasetError, match="width 1 differs from 2"):
        from_networkx([g1, g2], node_label=None, node_attr="x")
    nx.set_node_attributes(g2, {0: [1.0, float("nan")], 1: [2.0, 0.0]}, "x")
    with pytest.raises(DatasetError, match="finite"):
        from_networkx([g1, g2], node_label=None, node_attr="x")


def test_y_length_checked():
    with pytest.raises(DatasetError, match="2 labels in y for 1 graphs"):
        from_networkx([nx.path_graph(2)], node_label=None, y=[0, 1])


def test_missing_networkx_is_a_one_line_hint(monkeypatch):
    from gramdist.datasets.molecules import molecules_to_networkx
    from gramdist.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "networkx", None)  # import networkx now raises ImportError
    b = make_synthetic(n_graphs=2, seed=0)
    for call in (lambda: to_networkx(b), lambda: molecules_to_networkx(["CCO"])):
        with pytest.raises(MissingExtraError, match=r'^networkx graphs need networkx: pip install "gramdist\[networkx\]"$'):
            call()
