"""Tests of the DM §5.1 synthetic graph generator."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest
from scipy import stats

from gramdist.datasets import SyntheticSpec, make_synthetic
from gramdist.errors import JobError


def _check_simple(b):
    assert np.all(b.edges[:, 0] < b.edges[:, 1])  # no self-loops, canonical order
    e = b.global_edges
    assert len(np.unique(e[:, 0] * b.n_nodes + e[:, 1])) == len(e)  # no multi-edges
    assert np.all(b.edges[:, 1] < np.repeat(b.nodes_per_graph, b.edges_per_graph))


def test_paper_defaults():
    b = make_synthetic(seed=0)
    assert b.n_graphs == 10 and np.all(b.nodes_per_graph == 200)
    assert np.all(b.edges_per_graph == 500)  # average degree 5
    _check_simple(b)
    assert b.node_attrs.shape == (2000, 1) and b.node_labels.min() >= 0 and b.node_labels.max() < 10
    assert set(np.unique(b.y)) <= {0, 1}


def test_deterministic_from_seed():
    a, b, c = (make_synthetic(n_graphs=50, n_nodes=20, avg_degree=3.0, n_labels=4, attr_dim=2, seed=s) for s in (7, 7, 8))
    assert a.checksum() == b.checksum() != c.checksum()


@pytest.mark.parametrize("density", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_density(density):
    n = 25
    b = make_synthetic(n_graphs=20, n_nodes=n, density=density, seed=1)
    assert np.all(b.edges_per_graph == round(density * n * (n - 1) / 2))
    _check_simple(b)


def test_node_count_range():
    b = make_synthetic(n_graphs=300, n_nodes=(5, 12), avg_degree=2.0, seed=2)
    sizes = b.nodes_per_graph
    assert sizes.min() == 5 and sizes.max() == 12
    np.testing.assert_array_equal(b.edges_per_graph, np.rint(sizes * 2.0 / 2))
    _check_simple(b)


@pytest.mark.parametrize("m", [2, 5])  # sparse path and dense (complement) path
def test_edge_sets_uniform(m):
    # n = 4 has 6 possible edges; every m-subset must be equally likely (G(n, m))
    b = make_synthetic(n_graphs=3000, n_nodes=4, density=m / 6, n_labels=0, attr_dim=0, seed=3)
    counts = Counter(tuple(map(tuple, g.edges.tolist())) for g in b)
    n_sets = len(list(itertools.combinations(range(6), m)))
    assert len(counts) == n_sets
    assert stats.chisquare(list(counts.values())).pvalue > 1e-3


def test_class_signal_options():
    b = make_synthetic(n_graphs=400, n_nodes=10, avg_degree=2.0, n_labels=3, attr_dim=2, seed=4, n_classes=3,
                       attr_shift=5.0, label_bias=1.0)
    node_y = np.repeat(b.y, b.nodes_per_graph)
    np.testing.assert_array_equal(b.node_labels, node_y % 3)
    means = [b.node_attrs[node_y == c].mean() for c in range(3)]
    np.testing.assert_allclose(means, [0.0, 5.0, 10.0], atol=0.1)
    plain = make_synthetic(n_graphs=400, n_nodes=10, avg_degree=2.0, n_labels=3, attr_dim=2, seed=4, n_classes=3)
    assert abs(plain.node_attrs[np.repeat(plain.y, 10) == 2].mean()) < 0.1


def test_no_labels_or_attributes():
    b = make_synthetic(n_graphs=5, n_nodes=10, avg_degree=2.0, n_labels=0, attr_dim=0)
    assert b.node_labels is None and b.node_attrs is None


@pytest.mark.parametrize("kwargs", [dict(avg_degree=30.0), dict(density=1.5), dict(n_graphs=0),
                                    dict(n_nodes=(5, 3)), dict(label_bias=2.0)])
def test_invalid_arguments(kwargs):
    args = dict(n_graphs=3, n_nodes=20) | kwargs
    with pytest.raises(ValueError):
        make_synthetic(**args)


def test_a_spec_is_the_keywords():
    spec = SyntheticSpec(n_graphs=30, n_nodes=(4, 9), avg_degree=2.0, n_labels=3, seed=5)
    by_keywords = make_synthetic(n_graphs=30, n_nodes=(4, 9), avg_degree=2.0, n_labels=3, seed=5)
    assert make_synthetic(spec).checksum() == by_keywords.checksum()
    assert make_synthetic(spec, seed=6).checksum() == make_synthetic(SyntheticSpec(
        n_graphs=30, n_nodes=(4, 9), avg_degree=2.0, n_labels=3, seed=6)).checksum()
    blocked = make_synthetic(spec, block_size=7)
    assert np.array_equal(blocked.graph_ids, np.arange(30)) and blocked.checksum() != by_keywords.checksum()
    assert SyntheticSpec.keys()[:3] == ("n_graphs", "n_nodes", "avg_degree") and len(SyntheticSpec.keys()) == 11
    assert set(spec.draws()) == set(SyntheticSpec.keys()) - {"n_graphs", "seed", "block_size"}
    with pytest.raises(TypeError):
        make_synthetic(colour=1)
    with pytest.raises(TypeError, match="SyntheticSpec"):
        make_synthetic(30)


def test_job_keys_are_the_spec_fields():
    from gramdist.datasets import load_dataset
    from gramdist.datasets.lazy import open_dataset

    allowed = ", ".join(SyntheticSpec.keys())
    for load, extra in ((load_dataset, {}), (open_dataset, {"block_size": 5})):
        with pytest.raises(JobError, match=f"unknown key 'colour' \\(allowed: {allowed}\\)"):
            load({"synthetic": {"n_graphs": 10, "colour": 1, **extra}})


def test_twenty_thousand_graphs():
    # Size of the soak run; its speed is measured in benchmarks/soak.py, not asserted here.
    b = make_synthetic(n_graphs=20_000, n_nodes=30, avg_degree=5.0, n_labels=5, attr_dim=3, seed=0)
    assert b.n_graphs == 20_000 and b.n_edges == 20_000 * 75
