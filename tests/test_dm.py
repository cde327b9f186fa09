"""Tests of the Descriptor Matching kernel (gramdist.kernels.dm.kernel and its helper modules).

References used here are deliberately naive: SC descriptors node by node from the update
rule, Algorithm 2 as a literal loop over levels, and Eq. (4.1) evaluated with new-match counts
J = I - sum(children's I) and the bin weights w = 1 / (1 + s) — not the telescoped form the
kernel uses.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import dataset_dir

from gramdist.datasets import load_dataset, make_synthetic
from gramdist.errors import DatasetError, JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.base import KernelState
from gramdist.kernels.dm.descriptors import raw_node_attributes, sc_iterations
from gramdist.kernels.dm.histograms import K_CAP
from gramdist.kernels.dm.kernel import DescriptorMatchingKernel
from gramdist.kernels.dm.pyramid import Pyramid, descend
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


# ------------------------------------------------------------------ naive references
def sc_reference(graphs: GraphBatch, alphabet: np.ndarray, eta: float, h: int) -> list[np.ndarray]:
    """SC descriptors by the paper's update rule, one node at a time."""
    out = []
    labels = graphs.node_labels
    off = graphs.node_offsets
    a = np.zeros((graphs.n_nodes, len(alphabet)))
    for v in range(graphs.n_nodes):
        hit = np.flatnonzero(alphabet == labels[v])
        if len(hit):
            a[v, hit[0]] = 1.0
    out.append(a.copy())
    nbrs = [set() for _ in range(graphs.n_nodes)]
    for g in range(graphs.n_graphs):
        for u, v in graphs.edges[graphs.edge_offsets[g]:graphs.edge_offsets[g + 1]]:
            nbrs[off[g] + u].add(off[g] + v)
            nbrs[off[g] + v].add(off[g] + u)
    for _ in range(h):
        new = np.empty_like(a)
        for v in range(graphs.n_nodes):
            for i in range(len(alphabet)):
                if a[v, i] == 1.0:
                    new[v, i] = 1.0
                else:
                    new[v, i] = 1.0 - math.prod(1.0 - eta * a[u, i] for u in nbrs[v])
        a = new
        out.append(a.copy())
    return out


def path_reference(x: np.ndarray, pyr: Pyramid, root: int, t: int) -> list[int]:
    """Algorithm 2 for one descriptor: nearest child centre (float64), level by level."""
    path, cur = [root], root
    for _ in range(1, t):
        c0 = pyr.child_start[cur]
        c1 = c0 + pyr.n_children[cur]
        cur = int(c0 + np.argmin(((pyr.centres[c0:c1] - x) ** 2).sum(1)))
        path.append(cur)
    return path


def vg_reference(h1: dict[int, int], h2: dict[int, int], pyr: Pyramid, root: int) -> float:
    """Eq. (4.1): sum over bins of w * (I - sum of the children's I) for one pyramid."""
    total, stack = 0.0, [root]
    while stack:
        j = stack.pop()
        kids = list(range(pyr.child_start[j], pyr.child_start[j] + pyr.n_children[j]))
        inter = min(h1.get(j, 0), h2.get(j, 0))
        new = inter - sum(min(h1.get(k, 0), h2.get(k, 0)) for k in kids)
        total += new / (1.0 + pyr.diameter[j])
        stack.extend(kids)
    return total


def dm_reference(kernel: DescriptorMatchingKernel, state: KernelState, graphs: GraphBatch) -> np.ndarray:
    """Gram of Definition 4.1 from per-graph histograms built by the references above."""
    pyr = Pyramid.from_arrays(state.arrays, "pyr.")
    t, h = state.attrs["t"], state.attrs["h"]
    attrs = kernel._scaled_attributes(graphs, state)
    hists = [[{} for _ in range(h + 1)] for _ in range(graphs.n_graphs)]
    for r, a in enumerate(sc_reference(graphs, state.arrays["labels"], state.attrs["eta"], h)):
        x = a if attrs is None else np.hstack([a, attrs])
        for v in range(graphs.n_nodes):
            hist = hists[graphs.node_graph[v]][r]
            for j in path_reference(x[v], pyr, int(pyr.roots[r]), t):
                hist[j] = hist.get(j, 0) + 1
    n = graphs.n_graphs
    k = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            k[i, j] = sum(vg_reference(hists[i][r], hists[j][r], pyr, int(pyr.roots[r])) for r in range(h + 1))
    return k


def random_graphs(n_graphs: int = 12, seed: int = 0, attr_dim: int = 1, n_nodes=(4, 14)) -> GraphBatch:
    return make_synthetic(n_graphs=n_graphs, n_nodes=n_nodes, avg_degree=2.5, n_labels=4,
                          attr_dim=attr_dim, seed=seed)


# ------------------------------------------------------------------ hand-worked example
def hand_state() -> KernelState:
    """Pyramid (t = 3) over one-hot descriptors of labels {0, 1, 2}, h = 0, built by hand.

    root (s = 2) -> P = {e0, e1}, centre (.5, .5, 0), s = 2 * sqrt(.5)
                 -> Q = {e2}, centre e2, s = 0
    P -> {e0}, {e1}; Q -> {e2}; all leaves s = 0.
    """
    e = np.eye(3)
    pyr = Pyramid(
        centres=np.array([[1 / 3, 1 / 3, 1 / 3], [0.5, 0.5, 0.0], e[2], e[0], e[1], e[2]]),
        parent=np.array([-1, 0, 0, 1, 1, 2]),
        level=np.array([0, 1, 1, 2, 2, 2]),
        diameter=np.array([2.0, 2 * math.sqrt(0.5), 0.0, 0.0, 0.0, 0.0]),
        roots=np.array([0]),
    )
    arrays = {"labels": np.array([0, 1, 2]), **pyr.arrays("pyr.")}
    return KernelState(arrays=arrays, attrs={"version": 1, "h": 0, "eta": 0.5, "t": 3, "b": 2,
                                             "n_attributes": 0, "n_bins": 6, "k_cap": K_CAP})


def test_hand_worked_example() -> None:
    """G1 labels (0, 0, 1, 2), G2 labels (0, 1, 1), no edges.

    Level 2: I(e0) = min(2, 1) = 1, I(e1) = min(1, 2) = 1, I(e2) = 0 -> J = 1, 1, 0, weight 1.
    Level 1: I(P) = min(3, 3) = 3 -> J = 3 - 2 = 1, weight 1 / (1 + sqrt 2); I(Q) = 0.
    Level 0: I = min(4, 3) = 3 -> J = 3 - 3 = 0.
    k = 1 + 1 + 1 / (1 + sqrt 2) = 1 + sqrt 2. K(G1, G1) = 4 and K(G2, G2) = 3 (every
    descriptor matched in a leaf of weight 1).
    """
    graphs = GraphBatch.from_graphs([np.zeros((0, 2)), np.zeros((0, 2))], [4, 3],
                                    node_labels=[np.array([0, 0, 1, 2]), np.array([0, 1, 1])])
    kernel = DescriptorMatchingKernel(h=0, t=3)
    state = hand_state()
    emb = kernel.embed(graphs, state)
    block = kernel.pairwise(emb, emb, state)
    assert block[0, 1] == pytest.approx(1 + math.sqrt(2), abs=1e-15)
    assert block[1, 0] == block[0, 1]
    np.testing.assert_array_equal(kernel.self_similarity(emb, state), [4.0, 3.0])
    np.testing.assert_array_equal(np.diag(block), [4.0, 3.0])
    np.testing.assert_allclose(dm_reference(kernel, state, graphs), block, rtol=1e-14)


# ------------------------------------------------------------------ against the references
def test_sc_descriptors_follow_update_rule() -> None:
    graphs = random_graphs(8, seed=3, attr_dim=0)
    alphabet = np.array([0, 1, 2])  # label 3 unseen: all-zero row, propagates nothing
    for eta in (0.0, 0.35, 1.0):
        got = list(sc_iterations(graphs, alphabet, eta, 4))
        want = sc_reference(graphs, alphabet, eta, 4)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-15)
    # eta = 1 reaches exactly 1 next to a labelled node, and 1 stays 1
    a = list(sc_iterations(graphs, alphabet, 1.0, 3))
    assert np.all(a[2][a[1] == 1.0] == 1.0)


@pytest.mark.parametrize("attr_dim,use_attributes", [(0, True), (2, True), (2, False)])
def test_gram_matches_direct_eq41(attr_dim: int, use_attributes: bool) -> None:
    graphs = random_graphs(10, seed=1, attr_dim=attr_dim)
    kernel = DescriptorMatchingKernel(h=3, eta=0.4, t=3, b=3, use_attributes=use_attributes)
    state = kernel.fit(graphs, seed=5)
    assert state.attrs["n_attributes"] == (attr_dim if use_attributes else 0)
    k = gram_by_tiles(kernel, state, graphs, tile=4)
    np.testing.assert_allclose(k, dm_reference(kernel, state, graphs), rtol=1e-12, atol=0)


def test_counts_above_cap_use_overflow_path() -> None:
    """Stars whose leaves share one descriptor put > K_CAP nodes into the same deep bins."""
    edge_lists, sizes, labels = [], [], []
    for n_leaves, seed in ((K_CAP + 9, 0), (K_CAP + 25, 1), (5, 2), (2 * K_CAP + 3, 3)):
        edge_lists.append(np.array([[0, i] for i in range(1, n_leaves + 1)]))
        sizes.append(n_leaves + 1)
        lab = np.zeros(n_leaves + 1, dtype=np.int64)
        lab[0] = 1
        lab[1 + np.random.default_rng(seed).choice(n_leaves, 2, replace=False)] = 2
        labels.append(lab)
    graphs = GraphBatch.from_graphs(edge_lists, sizes, node_labels=labels)
    kernel = DescriptorMatchingKernel(h=2, t=3, b=2)
    state = kernel.fit(graphs, seed=0)
    emb = kernel.embed(graphs, state)
    assert len(emb.over_sparse) > 0  # the overflow list is exercised
    k = gram_by_tiles(kernel, state, graphs, tile=3)
    np.testing.assert_allclose(k, dm_reference(kernel, state, graphs), rtol=1e-12)
    np.testing.assert_array_equal(gram_by_tiles(kernel, state, graphs, tile=1), k)
    np.testing.assert_array_equal(kernel.self_similarity(emb, state), np.diag(k))


def test_threshold_product_equals_public_scipy_product(monkeypatch: pytest.MonkeyPatch) -> None:
    """The direct call of SciPy's Gustavson kernel gives the public product's values, bit for bit."""
    graphs = random_graphs(20, seed=9, n_nodes=(10, 40))
    kernel = DescriptorMatchingKernel(h=3, t=4, b=3)
    state = kernel.fit(graphs, seed=1)
    emb = kernel.embed(graphs, state)
    fast = kernel.pairwise(emb[0:13], emb[5:20], state)
    monkeypatch.setattr("gramdist.kernels.dm.histograms._csr_matmat", None)
    np.testing.assert_array_equal(kernel.pairwise(emb[0:13], emb[5:20], state), fast)


def test_descend_matches_nearest_centre_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gramdist.kernels.dm.pyramid._FALLBACK_ROWS", 2)  # many float64 slices
    graphs = random_graphs(30, seed=7, attr_dim=1, n_nodes=(10, 30))
    kernel = DescriptorMatchingKernel(h=2, t=4, b=4)
    state = kernel.fit(graphs, seed=1)
    pyr = Pyramid.from_arrays(state.arrays, "pyr.")
    attrs = kernel._scaled_attributes(graphs, state)
    for r, a in enumerate(sc_iterations(graphs, state.arrays["labels"], 0.5, 2)):
        x = np.hstack([a, attrs])
        got = descend(x, pyr, int(pyr.roots[r]), 4)
        want = np.array([path_reference(v, pyr, int(pyr.roots[r]), 4)[1:] for v in x])
        np.testing.assert_array_equal(got, want)


def test_descend_breaks_exact_ties_by_first_child() -> None:
    """A descriptor equidistant from two children goes to the first, in any block."""
    pyr = Pyramid(
        centres=np.array([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]]),
        parent=np.array([-1, 0, 0]), level=np.array([0, 1, 1]),
        diameter=np.array([2.0, 0.0, 0.0]), roots=np.array([0]),
    )
    x = np.array([[0.5, 0.5], [0.9, 0.1], [0.3, 0.3], [0.1, 0.9]])
    np.testing.assert_array_equal(descend(x, pyr, 0, 2)[:, 0], [1, 1, 1, 2])
    np.testing.assert_array_equal(descend(x[2:3], pyr, 0, 2)[:, 0], [1])


# ------------------------------------------------------------------ invariances
def permute_nodes(graphs: GraphBatch, seed: int) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, attrs = [], [], [], []
    for g in graphs:
        p = rng.permutation(g.n_nodes)  # new id of old node v is p[v]
        inv = np.argsort(p)
        edges.append(p[g.edges])
        sizes.append(g.n_nodes)
        labels.append(g.node_labels[inv])
        attrs.append(None if g.node_attrs is None else g.node_attrs[inv])
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels,
                                  node_attrs=None if graphs.node_attrs is None else attrs, y=graphs.y)


def test_node_permutation_invariance(mutag: GraphBatch) -> None:
    graphs = mutag[:40]
    kernel = DescriptorMatchingKernel(h=4, t=4, b=5)
    state = kernel.fit(graphs, seed=0)
    k = gram_by_tiles(kernel, state, graphs, tile=16)
    k_perm = gram_by_tiles(kernel, state, permute_nodes(graphs, seed=1), tile=16)
    np.testing.assert_allclose(k_perm, k, rtol=1e-12)


def test_tile_size_invariance_is_bitwise(mutag: GraphBatch) -> None:
    kernel = DescriptorMatchingKernel(h=5)
    state = kernel.fit(mutag, seed=0)
    ref = gram_by_tiles(kernel, state, mutag, tile=len(mutag))
    for tile in (7, 64):
        np.testing.assert_array_equal(gram_by_tiles(kernel, state, mutag, tile=tile), ref)
    np.testing.assert_array_equal(gram_by_tiles(kernel, state, mutag[:30], tile=1), ref[:30, :30])
    emb = kernel.embed(mutag, state)
    np.testing.assert_array_equal(kernel.self_similarity(emb, state), np.diag(ref))
    np.testing.assert_array_equal(gram_by_tiles(kernel, state, mutag, tile=50, normalize=True),
                                  gram_by_tiles(kernel, state, mutag, tile=188, normalize=True))


def test_embedding_slices_equal_embedding_of_slices() -> None:
    graphs = random_graphs(20, seed=2, attr_dim=1)
    kernel = DescriptorMatchingKernel(h=3, t=3, b=3)
    state = kernel.fit(graphs, seed=0)
    whole = kernel.embed(graphs, state)
    part = kernel.embed(graphs[5:13], state)
    np.testing.assert_array_equal(kernel.pairwise(whole[5:13], whole, state), kernel.pairwise(part, whole, state))
    assert len(whole[5:13]) == 8 and len(whole[20:20]) == 0


# ------------------------------------------------------------------ pyramid properties
def check_pyramid(state: KernelState, b: int) -> None:
    pyr = Pyramid.from_arrays(state.arrays, "pyr.")
    child = pyr.parent >= 0
    w = pyr.weight
    assert np.all(w[child] >= w[pyr.parent[child]])  # Theorem 4.3's condition
    assert np.all(pyr.diameter[child] <= pyr.diameter[pyr.parent[child]])
    n_children = pyr.n_children
    assert np.all(n_children <= b)
    assert np.all(n_children[pyr.level < state.attrs["t"] - 1] >= 1)
    assert np.all(n_children[pyr.level == state.attrs["t"] - 1] == 0)
    inner = np.flatnonzero(n_children > 0)
    assert np.all(pyr.parent[pyr.child_start[inner]] == inner)
    assert np.all(pyr.parent[pyr.child_start[inner] + n_children[inner] - 1] == inner)
    assert np.all(np.diff(pyr.parent[child]) >= 0)  # parent-major numbering
    assert len(pyr.roots) == state.attrs["h"] + 1 and np.all(pyr.level[pyr.roots] == 0)


def test_fitted_pyramids_have_monotone_weights(mutag: GraphBatch) -> None:
    kernel = DescriptorMatchingKernel(h=3, t=4, b=10)
    check_pyramid(kernel.fit(mutag, seed=0), 10)
    graphs = random_graphs(15, seed=4, attr_dim=2)
    kernel = DescriptorMatchingKernel(h=2, t=5, b=3, descriptor_sample=50)
    state = kernel.fit(graphs, seed=0)
    check_pyramid(state, 3)
    assert state.attrs["descriptor_sample"] == 50


def test_bins_with_few_distinct_descriptors() -> None:
    """All nodes alike (one label, no edges): every bin has one distinct point."""
    graphs = GraphBatch.from_graphs([np.zeros((0, 2))] * 3, [4, 1, 6],
                                    node_labels=[np.zeros(4), np.zeros(1), np.zeros(6)])
    kernel = DescriptorMatchingKernel(h=2, t=4, b=10)
    state = kernel.fit(graphs, seed=0)
    check_pyramid(state, 10)
    pyr = Pyramid.from_arrays(state.arrays, "pyr.")
    assert pyr.n_bins == 3 * 4 and np.all(pyr.diameter == 0)
    k = gram_by_tiles(kernel, state, graphs, tile=2)
    # every descriptor matches in a leaf of weight 1: k = (h + 1) * min(n_a, n_b)
    n = np.array([4, 1, 6])
    np.testing.assert_array_equal(k, 3.0 * np.minimum.outer(n, n))


def test_empty_graphs_and_unseen_labels() -> None:
    """A graph without nodes has K = 0 with everything; an unseen label propagates nothing."""
    fit = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]]), np.array([[0, 1]])], [3, 2],
                                 node_labels=[np.array([0, 1, 0]), np.array([1, 1])])
    kernel = DescriptorMatchingKernel(h=2, t=3, b=2)
    state = kernel.fit(fit, seed=0)
    other = GraphBatch.from_graphs([np.zeros((0, 2)), np.array([[0, 1]]), np.array([[0, 1]])], [0, 2, 2],
                                   node_labels=[np.zeros(0), np.array([7, 7]), np.array([1, 1])])
    emb = kernel.embed(other, state)
    k = kernel.pairwise(emb, kernel.embed(fit, state), state)
    np.testing.assert_array_equal(k[0], 0.0)
    np.testing.assert_array_equal(kernel.self_similarity(emb, state)[0], 0.0)
    np.testing.assert_allclose(k[2], kernel.pairwise(kernel.embed(fit[1:2], state), kernel.embed(fit, state), state)[0])
    assert np.all(k[1] > 0)  # all-zero descriptors still match (at the root at least)


def test_deterministic_given_seed() -> None:
    graphs = random_graphs(15, seed=6, attr_dim=1)
    kernel = DescriptorMatchingKernel(h=2, t=3, b=4, descriptor_sample=60)
    s1, s2, s3 = kernel.fit(graphs, seed=3), kernel.fit(graphs, seed=3), kernel.fit(graphs, seed=4)
    for name in s1.arrays:
        np.testing.assert_array_equal(s1.arrays[name], s2.arrays[name])
    assert s1.attrs == s2.attrs
    assert not np.array_equal(s1.arrays["pyr.centres"], s3.arrays["pyr.centres"])


def test_fit_threads_do_not_change_the_state() -> None:
    graphs = random_graphs(15, seed=8, attr_dim=1)
    states = [DescriptorMatchingKernel(h=3, t=3, b=4, descriptor_sample=80, fit_threads=n).fit(graphs, seed=5)
              for n in (1, 3)]
    for name in states[0].arrays:
        np.testing.assert_array_equal(states[0].arrays[name], states[1].arrays[name])
    assert states[0].attrs == states[1].attrs


def test_sc_descriptors_with_eta_one() -> None:
    # eta = 1: log(1 - eta A) is -inf for A = 1; a neighbour carrying the label gives exactly 1
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])], [4], node_labels=[np.array([0, 1, 1, 1])])
    alphabet = np.array([0, 1])
    got = list(sc_iterations(graphs, alphabet, 1.0, 3))
    ref = sc_reference(graphs, alphabet, 1.0, 3)
    for a, b in zip(got, ref):
        np.testing.assert_array_equal(a, b)
    assert got[2][2, 0] == 1.0 and got[3][3, 0] == 0.0  # reaches distance 2 by r = 2; node 3 is isolated


# ------------------------------------------------------------------ PSD on real data
@pytest.mark.parametrize("name,cols", [("MUTAG", None), ("ENZYMES", [1])])
def test_gram_is_psd_on_real_data(name: str, cols: list[int] | None) -> None:
    graphs = load_dataset({"path": str(dataset_dir(name)), "node_attributes": cols or "all"})
    kernel = DescriptorMatchingKernel(h=4 if name == "ENZYMES" else 10)
    state = kernel.fit(graphs, seed=0)
    k = gram_by_tiles(kernel, state, graphs, tile=256)
    np.testing.assert_array_equal(k, k.T)
    assert min_eigenvalue_ratio(k) >= -1e-9


# ------------------------------------------------------------------ attributes and state
def test_attribute_scaling_and_clipping() -> None:
    fit_graphs = GraphBatch.from_graphs([np.array([[0, 1]])], [2], node_labels=[np.array([0, 0])],
                                        node_attrs=[np.array([[2.0, 5.0], [4.0, 5.0]])])
    kernel = DescriptorMatchingKernel(h=0, t=2, b=2)
    state = kernel.fit(fit_graphs, seed=0)
    np.testing.assert_array_equal(state.arrays["attr_lo"], [2.0, 5.0])
    np.testing.assert_array_equal(state.arrays["attr_hi"], [4.0, 5.0])
    other = GraphBatch.from_graphs([np.zeros((0, 2))], [3], node_labels=[np.array([0, 0, 0])],
                                   node_attrs=[np.array([[1.0, 9.0], [3.0, 5.0], [7.0, 1.0]])])
    np.testing.assert_array_equal(kernel._scaled_attributes(other, state), [[0, 0], [0.5, 0], [1, 0]])
    no_attrs = GraphBatch.from_graphs([np.zeros((0, 2))], [1], node_labels=[np.array([0])])
    with pytest.raises(DatasetError, match="fitted with 2 numerical"):
        kernel.embed(no_attrs, state)


def test_edge_attributes_become_node_attributes() -> None:
    graphs = GraphBatch.from_graphs([np.array([[0, 1], [1, 2]])], [4], node_labels=[np.zeros(4)],
                                    edge_attrs=[np.array([[2.0], [6.0]])])
    raw = raw_node_attributes(graphs)
    np.testing.assert_array_equal(raw[:3, 0], [2.0, 4.0, 6.0])  # mean over incident edges
    assert np.isnan(raw[3, 0])  # isolated node
    kernel = DescriptorMatchingKernel(h=1, t=2, b=2)
    state = kernel.fit(graphs, seed=0)
    assert state.attrs["n_attributes"] == 1
    np.testing.assert_array_equal(kernel._scaled_attributes(graphs, state)[:, 0], [0, 0.5, 1, 0])
    assert DescriptorMatchingKernel(use_attributes=False).fit(graphs, 0).attrs["n_attributes"] == 0


def test_state_is_storable() -> None:
    graphs = random_graphs(6, seed=0, attr_dim=1)
    state = DescriptorMatchingKernel(h=1, t=3, b=3).fit(graphs, seed=0)
    json.dumps(state.attrs)
    assert all(a.size > 0 for a in state.arrays.values())
    again = KernelState.from_store_parts({k: v.copy() for k, v in state.arrays.items()}, json.loads(json.dumps(state.attrs)))
    kernel = DescriptorMatchingKernel(h=1, t=3, b=3)
    e1, e2 = kernel.embed(graphs, state), kernel.embed(graphs, again)
    np.testing.assert_array_equal(kernel.pairwise(e1, e1, state), kernel.pairwise(e2, e2, again))


@pytest.mark.parametrize("param,value", [("h", -1), ("h", 1.5), ("eta", 1.5), ("eta", True), ("t", 0),
                                         ("b", 1), ("descriptor_sample", 0), ("kmeans_iter", 0),
                                         ("use_attributes", "yes"), ("fit_threads", 0)])
def test_invalid_parameters_are_rejected(param: str, value: object) -> None:
    with pytest.raises(JobError, match=param):
        make_kernel("dm", **{param: value})


def test_registry_and_defaults() -> None:
    kernel = make_kernel("dm")
    assert isinstance(kernel, DescriptorMatchingKernel)
    assert kernel.name == "dm" and kernel.uses_node_attributes
    assert kernel.get_params()["h"] == 10 and kernel.get_params()["t"] == 4 and kernel.get_params()["b"] == 10


# ------------------------------------------------- Algorithm 1 against a literal reference
def algorithm1_reference(x: np.ndarray, t: int, b: int) -> list[list[dict]]:
    """Algorithm 1 of the DM paper written out literally, independent of ``fit_pyramid``.

    Bins are dicts ``{"members": row indices of x (the multiset), "centre", "s", "parent"}``,
    level by level. The root's centre is the mean of all descriptors and its diameter bound
    ``2 max ||x - c||`` (lines 3-4; the "2 x" of the garbled line 3 belongs to the bound, as
    in line 9: the kernel's documented reading). Each bin is split by k-means into b children
    (scikit-learn's KMeans on the multiset itself, 10 restarts, an implementation unrelated to
    the kernel's), a child's centre is the mean of its members, its diameter bound is
    ``2 max ||x - c||`` (line 9) capped by its parent's (line 10). A bin with fewer than b
    distinct descriptors gets one child per distinct descriptor (the kernel's documented
    choice where k-means is undefined).
    """
    from sklearn.cluster import KMeans

    c0 = x.mean(axis=0)
    root = {"members": np.arange(len(x)), "centre": c0,
            "s": 2.0 * max(float(np.linalg.norm(v - c0)) for v in x), "parent": None}
    levels = [[root]]
    for _ in range(1, t):
        nxt = []
        for j, bin_ in enumerate(levels[-1]):
            pts = x[bin_["members"]]
            distinct = np.unique(pts, axis=0)
            if len(distinct) < b:
                labels = np.array([int(np.flatnonzero((distinct == p).all(1))[0]) for p in pts])
            else:
                labels = KMeans(n_clusters=b, n_init=10, random_state=0).fit(pts).labels_
            for lab in np.unique(labels):
                members = bin_["members"][labels == lab]
                c = x[members].mean(axis=0)
                s = 2.0 * max(float(np.linalg.norm(x[i] - c)) for i in members)   # line 9
                nxt.append({"members": members, "centre": c, "s": min(s, bin_["s"]),  # line 10
                            "s_uncapped": s, "parent": j})
        levels.append(nxt)
    return levels


def _motif(offset, heavy: int = 100) -> np.ndarray:
    """Two heavy points L, R and a light one P nearer R: k-means (b = 2) splits {L} | {R, P}
    whatever its seeds, and {R, P} has a larger bound than its parent (the cap of line 10)."""
    L, R, P = np.array([-1.0, 0.0]), np.array([1.0, 0.0]), np.array([0.2, 1.5])
    return np.vstack([np.repeat(L[None], heavy, 0), np.repeat(R[None], heavy, 0), P[None]]) + offset


def test_pyramid_fit_equals_a_literal_algorithm_1_bin_by_bin() -> None:
    from scipy.spatial.distance import pdist

    from gramdist.kernels.dm.pyramid import fit_pyramid

    x = np.vstack([_motif([3.0, 3.0]), _motif([103.0, 3.0])])
    t, b = 4, 2
    ref = algorithm1_reference(x, t, b)
    pyr = fit_pyramid(x, t, b, np.random.default_rng(0), max_iter=100)
    assert pyr.n_bins == sum(len(level) for level in ref)
    # the kernel's Lloyd rounds accumulate centres in float32 (documented: the fit must be
    # deterministic, not exact), so centres agree to float32 precision of the coordinates (~100)
    tol = 1e-4
    capped = 0
    for lvl, bins in enumerate(ref):
        ids = np.flatnonzero(pyr.level == lvl)
        assert len(ids) == len(bins)
        for rb in bins:
            # the kernel's bin at this level with this centre (centres are distinct here)
            hit = ids[np.flatnonzero(np.linalg.norm(pyr.centres[ids] - rb["centre"], axis=1) < tol)]
            assert len(hit) == 1, f"level {lvl}: no bin with centre {rb['centre']}"
            j = int(hit[0])
            np.testing.assert_allclose(pyr.diameter[j], rb["s"], rtol=1e-5)
            if rb["parent"] is None:
                assert pyr.parent[j] == -1
            else:
                parent_centre = ref[lvl - 1][rb["parent"]]["centre"]
                np.testing.assert_allclose(pyr.centres[pyr.parent[j]], parent_centre, atol=tol)
                capped += rb["s_uncapped"] > rb["s"]
            # the bound is an upper bound of the true diameter (max pairwise distance)
            pts = np.unique(x[rb["members"]], axis=0)
            true = float(pdist(pts).max()) if len(pts) > 1 else 0.0
            assert pyr.diameter[j] >= true * (1 - 1e-5)
    # the hand-made set exercises the cap: {R, P} of each motif, 2 * 1.683 > its parent's 3.011
    assert capped == 2
    mid = [rb for rb in ref[2] if len(np.unique(x[rb["members"]], axis=0)) == 2]
    assert len(mid) == 2 and all(rb["s_uncapped"] == pytest.approx(2 * 100 / 101 * np.hypot(0.8, 1.5))
                                 for rb in mid)
    assert all(rb["s"] == pytest.approx(ref[1][rb["parent"]]["s"]) for rb in mid)
    # weights are monotone along every path (Theorem 4.3's condition), leaves of one point are 0
    w = pyr.weight
    assert np.all(w[pyr.parent >= 0] >= w[pyr.parent[pyr.parent >= 0]])
    assert np.all(pyr.diameter[pyr.level == t - 1] == 0)
