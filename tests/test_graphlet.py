"""Graphlet kernel against brute force (all k-subsets, networkx isomorphism), GraKeL and the
TUDataset C++ baselines, plus the contract (tiles, permutations, out-of-sample rows, seeds)."""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections import Counter

import numpy as np
import pytest

from gramdist.graphs import GraphBatch
from gramdist.kernels.graphlets.kernel import GraphletKernel, weissman_samples
from gramdist.kernels.subgraphs import tables
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio


# ------------------------------------------------------------------ brute force
def random_graphs(n: int, seed: int, max_nodes: int = 9, n_labels: int = 3, edge_labels: bool = False,
                  density: float = 1.5) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels, elabels = [], [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        m = int(rng.integers(0, int(density * k) + 1))
        edges.append(rng.integers(0, k, size=(m, 2)))
        sizes.append(k)
        labels.append(rng.integers(0, n_labels, size=k))
        elabels.append(rng.integers(0, 2, size=m))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels, edge_labels=elabels if edge_labels else None)


def _adjacency(g) -> np.ndarray:
    a = np.zeros((g.n_nodes, g.n_nodes), dtype=bool)
    for u, v in g.edges.tolist():
        if u != v:
            a[u, v] = a[v, u] = True
    return a


class IsoClasses:
    """Isomorphism classes of small graphs by networkx, one representative per class met."""

    def __init__(self):
        import networkx as nx

        self.nx = nx
        self.reps: list = []
        self.cache: dict = {}

    def of(self, sub: np.ndarray) -> int:
        key = sub.tobytes()
        if key not in self.cache:
            g = self.nx.from_numpy_array(sub.astype(int))
            for i, r in enumerate(self.reps):
                if self.nx.is_isomorphic(g, r):
                    self.cache[key] = i
                    break
            else:
                self.reps.append(g)
                self.cache[key] = len(self.reps) - 1
        return self.cache[key]


def brute_counts(graphs: GraphBatch, k: int, connected_only: bool, classes: IsoClasses) -> list[Counter]:
    """Counts of induced k-node subgraphs per networkx isomorphism class, all k-subsets visited."""
    out = []
    for g in graphs:
        a = _adjacency(g)
        c = Counter()
        for sub in itertools.combinations(range(g.n_nodes), k):
            s = a[np.ix_(sub, sub)]
            if connected_only:
                reach = {0}
                for _ in range(k):
                    reach |= {j for i in reach for j in np.flatnonzero(s[i])}
                if len(reach) < k:
                    continue
            c[classes.of(s)] += 1
        out.append(c)
    return out


def gram_of(feats: list[Counter], normalise_by: list[float] | None = None) -> np.ndarray:
    n = len(feats)
    k = np.zeros((n, n))
    scale = normalise_by or [1.0] * n
    for i in range(n):
        for j in range(n):
            k[i, j] = sum(v * feats[j].get(key, 0) for key, v in feats[i].items()) / (scale[i] * scale[j])
    return k


# ------------------------------------------------------------------ tables
def test_pattern_tables_count_the_graphs_on_few_nodes():
    # OEIS A000088 / A001349: graphs and connected graphs on 1..6 nodes
    for s, (total, conn) in enumerate([(1, 1), (2, 1), (4, 2), (11, 6), (34, 21)], start=1):
        t = tables(s)
        assert (t.n_classes, t.n_connected) == (total, conn)
        assert all(t.class_connected[: conn]) and not any(t.class_connected[conn:])
        # |Aut| times the number of patterns of a class is s! (orbit-stabiliser)
        sizes = np.bincount(t.klass, minlength=t.n_classes)
        assert all(sizes[c] * len(t.aut[c]) == math.factorial(s) for c in range(t.n_classes))


def test_weissman_sample_size():
    # ceil(2 (a ln 2 + ln(1/delta)) / eps^2): a = 34 (k = 5), eps = delta = 0.1 -> 5174
    assert weissman_samples(34, 0.1, 0.1) == math.ceil(2 * (34 * math.log(2) + math.log(10)) / 0.01) == 5174
    assert GraphletKernel(k=3, method="sampling").samples_per_graph() == weissman_samples(4, 0.1, 0.1)
    assert GraphletKernel(k=4, method="sampling", n_samples=77).samples_per_graph() == 77


# ------------------------------------------------------------------ exact, brute force
@pytest.mark.parametrize("k", [3, 4, 5])
@pytest.mark.parametrize("graphlets", ["connected", "all"])
def test_exact_counts_match_brute_force(k, graphlets):
    graphs = random_graphs(30, seed=k, max_nodes=9, density=2.0)
    classes = IsoClasses()
    brute = brute_counts(graphs, k, graphlets == "connected", classes)
    kern = GraphletKernel(k=k, graphlets=graphlets, values="count")
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 7)
    assert np.array_equal(got, gram_of(brute))
    # frequencies: divided by C(n, k) (all) or by the number of connected k-sets
    kern = GraphletKernel(k=k, graphlets=graphlets, values="frequency")
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 7)
    totals = [max(sum(c.values()), 1) for c in brute]
    np.testing.assert_allclose(got, gram_of(brute, totals), rtol=1e-13, atol=0)
    if graphlets == "all":
        n = graphs.nodes_per_graph
        assert all(sum(c.values()) == math.comb(int(x), k) for c, x in zip(brute, n))


def test_exact_counts_match_brute_force_on_mutag(mutag):
    graphs = mutag[:40]
    classes = IsoClasses()
    for k in (3, 4):
        brute = brute_counts(graphs, k, False, classes)
        kern = GraphletKernel(k=k, graphlets="all", values="count")
        assert np.array_equal(gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 16), gram_of(brute))


def test_hand_worked_example():
    # Triangle plus a pendant node (0-1-2-0, 2-3) and the path P4 (0-1-2-3).
    # k = 3, all graphlets: triangle+pendant has {012}: triangle, {023}, {123}: paths, {013}: edge
    # 01 + isolated 3 -> (empty, edge, path, triangle) = (0, 1, 2, 1). P4: {012}, {123} paths,
    # {013}: edge 01, {023}: edge 23 -> (0, 2, 2, 0).
    g = GraphBatch.from_graphs([np.array([[0, 1], [1, 2], [2, 0], [2, 3]]), np.array([[0, 1], [1, 2], [2, 3]])],
                               [4, 4])
    kern = GraphletKernel(k=3, graphlets="all", values="count")
    k = gram_by_tiles(kern, kern.fit(g, 0), g, 2)
    assert k.tolist() == [[1 + 4 + 1, 2 + 4], [2 + 4, 4 + 4]]
    kern = GraphletKernel(k=3, graphlets="connected", values="frequency")
    k = gram_by_tiles(kern, kern.fit(g, 0), g, 2)
    np.testing.assert_allclose(k, [[(4 + 1) / 9, 2 / 3], [2 / 3, 1.0]], rtol=1e-15)


def test_graphs_without_graphlets_have_zero_rows():
    g = GraphBatch.from_graphs([np.zeros((0, 2)), np.array([[0, 1]]), np.array([[0, 1], [1, 2]])], [1, 2, 3])
    kern = GraphletKernel(k=3, graphlets="connected")
    emb = kern.embed(g, kern.fit(g, 0))
    assert emb.row_lengths.tolist() == [0, 0, 1]
    assert kern.embedding_counts(emb) == {"graphs": 3, "empty": 2}
    assert "2 of 3 graphs" in kern.report_embeddings({"graphs": 3, "empty": 2})[0]


# ------------------------------------------------------------------ labelled (TUDataset)
def tudataset_labelled_3(graphs: GraphBatch, use_edge_labels: bool, merge_like_cpp: bool = False) -> list[Counter]:
    """The TUDataset C++ definition of labelled 3-node graphlets, written independently.

    Wedge (path a-c-b, a and b not adjacent): centre label and the two end labels, the path up to
    reversal; triangle: the multiset of labels, or with edge labels the cyclic sequence up to
    rotation and reflection. ``merge_like_cpp``: key triangles and wedges alike (the C++ code
    has no shape tag, so a triangle with sorted labels (x, y, z) and a wedge reading (x, y, z)
    share a feature there).
    """
    out = []
    for g in graphs:
        a = _adjacency(g)
        lab = g.node_labels
        el = {}
        for (u, v), e in zip(g.edges.tolist(), (g.edge_labels if g.edge_labels is not None else [0] * len(g.edges))):
            el[(u, v)] = el[(v, u)] = int(e)
        c = Counter()
        for x, y, z in itertools.combinations(range(g.n_nodes), 3):
            e = [a[x, y], a[y, z], a[x, z]]
            if sum(e) < 2:
                continue
            if sum(e) == 3:
                if use_edge_labels:
                    cyc = []
                    for p in itertools.permutations((x, y, z)):
                        cyc.append((lab[p[0]], el[(p[0], p[1])], lab[p[1]], el[(p[1], p[2])], lab[p[2]],
                                    el[(p[2], p[0])]))
                    key = ("tri" if not merge_like_cpp else "", min(cyc))
                else:
                    key = ("tri" if not merge_like_cpp else "", tuple(sorted((lab[x], lab[y], lab[z]))))
            else:
                centre = [v for v in (x, y, z) if a[v, [w for w in (x, y, z) if w != v]].all()][0]
                ends = [v for v in (x, y, z) if v != centre]
                seqs = []
                for p, q in ((ends[0], ends[1]), (ends[1], ends[0])):
                    if use_edge_labels:
                        seqs.append((lab[p], el[(p, centre)], lab[centre], el[(centre, q)], lab[q]))
                    else:
                        seqs.append((lab[p], lab[centre], lab[q]))
                key = ("wedge" if not merge_like_cpp else "", min(seqs))
            c[key] += 1
        out.append(c)
    return out


@pytest.mark.parametrize("use_edge_labels", [False, True])
def test_labelled_3_graphlets_match_the_tudataset_definition(use_edge_labels):
    graphs = random_graphs(40, seed=11, max_nodes=8, n_labels=2, edge_labels=True, density=2.0)
    kern = GraphletKernel(k=3, graphlets="connected", use_labels=True, use_edge_labels=use_edge_labels,
                          values="count")
    got = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 9)
    assert np.array_equal(got, gram_of(tudataset_labelled_3(graphs, use_edge_labels)))


@pytest.mark.parametrize("mode", ["bytes", "bits", "search"])
def test_adjacency_tests_in_every_layout_match_the_edge_lists(mode, monkeypatch):
    """:class:`Adjacency` answers ``u ~ v`` from a byte per pair, a bit per pair, or a binary
    search over sorted arc keys (by the batch's size): each agrees with the graphs' own edges on
    every pair of every graph, self-loops dropped, multi-edges once, and its CSR lists each
    node's neighbours in increasing order."""
    import gramdist.kernels.subgraphs as subgraphs

    limits = {"bytes": (1 << 32, 1 << 24), "bits": (1 << 32, 0), "search": (0, 0)}[mode]
    monkeypatch.setattr(subgraphs, "BITMAP_LIMIT_BITS", limits[0])
    monkeypatch.setattr(subgraphs, "BYTEMAP_LIMIT", limits[1])
    graphs = random_graphs(30, seed=5, max_nodes=11, density=2.5)  # has self-loops and repeats
    adj = subgraphs.Adjacency(graphs)
    assert (adj.use_bitmap, adj.use_bitmap and adj.packed) == {"bytes": (True, False), "bits": (True, True),
                                                               "search": (False, False)}[mode]
    base = 0
    for g in graphs:
        want = _adjacency(g)
        np.fill_diagonal(want, False)
        u, v = (x.ravel() + base for x in np.meshgrid(np.arange(g.n_nodes), np.arange(g.n_nodes), indexing="ij"))
        assert np.array_equal(adj.test(u, v).reshape(want.shape), want)
        assert np.array_equal(adj.test(u, v, adj.context(u)).reshape(want.shape), want)
        for x in range(g.n_nodes):
            nbrs = adj.nbrs[adj.indptr[base + x]:adj.indptr[base + x + 1]] - base
            assert nbrs.tolist() == np.flatnonzero(want[x]).tolist()
        base += g.n_nodes


@pytest.mark.parametrize("n_labels, max_nodes", [(1, 9), (3, 9), (40, 30)])
def test_labelled_3_counted_before_keyed_equals_keying_every_set(n_labels, max_nodes):
    """The closed-form path for k = 3 without edge labels (``labelled3.py``) gives the bits of
    :func:`labelled_forms` over every set: keys, counts and row order, frequencies too; with
    graphs without nodes, without edges, and labels that are negative or far apart."""
    graphs = random_graphs(60, seed=n_labels, max_nodes=max_nodes, n_labels=n_labels, density=2.5)
    labels = np.asarray(graphs.node_labels) * 7919 - 3  # ranks, not values, are packed
    graphs = GraphBatch.from_graphs([g.edges for g in graphs] + [np.zeros((0, 2), np.int64)],
                                    [*graphs.nodes_per_graph.tolist(), 0],
                                    node_labels=[*np.split(labels, np.cumsum(graphs.nodes_per_graph)[:-1]),
                                                 np.zeros(0, np.int64)])
    for values in ("count", "frequency"):
        kern = GraphletKernel(k=3, graphlets="connected", use_labels=True, values=values)
        fast = kern.features(graphs)
        slow = kern._labelled_forms(graphs, graphs.node_labels, None)
        if values == "frequency":
            totals = np.bincount(slow.row_index, slow.values, minlength=len(graphs))
            slow = type(slow)(slow.indptr, slow.keys, slow.values / totals[slow.row_index])
        for name in ("indptr", "keys", "values"):
            assert np.array_equal(getattr(fast, name), getattr(slow, name)), (values, name)


def test_labelled_3_too_many_labels_to_pack_falls_back():
    """Labels of more than 21 bits' worth of ranks do not fit a packed set: the closed form says
    so (None) and the kernel keys every set instead, with the same counts as brute force."""
    from gramdist.kernels.graphlets.labelled3 import labelled_three_node_features

    n = (1 << 21) + 1
    edges = np.array([[0, 1], [1, 2], [0, 2], [2, 3]])
    big = GraphBatch.from_graphs([edges], [n], node_labels=[np.arange(n)])
    assert labelled_three_node_features(big, big.node_labels, np.uint64(1)) is None
    kern = GraphletKernel(k=3, graphlets="connected", use_labels=True, values="count")
    small = GraphBatch.from_graphs([edges], [4], node_labels=[np.arange(4)])
    assert sorted(kern.features(big).values.tolist()) == sorted(kern.features(small).values.tolist()) == [1.0] * 3


def test_exact_three_node_graphlets_run_in_process_on_dd_sizes():
    """Exact k = 3 is a linear pass (it weighs half a node per node for ``in_process: auto``); 4
    and 5 nodes and sampling keep the weight of 1 that sends D&D to worker processes."""
    from gramdist.engine.placement import IN_PROCESS_MAX_NODES, Placement

    dd_nodes = 334_925
    weights = {(k, m): GraphletKernel(k=k, method=m, graphlets="all").placement_nodes(dd_nodes)
               for k in (3, 5) for m in ("exact", "sampling")}
    assert weights[3, "exact"] <= IN_PROCESS_MAX_NODES < min(weights[5, "exact"], weights[3, "sampling"])
    assert Placement().runs_here(1178 * 1179 // 2, weights[3, "exact"])


@pytest.mark.parametrize("k", [4, 5])
def test_labelled_graphlets_match_networkx_isomorphism_classes(k):
    import networkx as nx
    from networkx.algorithms.isomorphism import categorical_edge_match, categorical_node_match

    graphs = random_graphs(14, seed=k + 20, max_nodes=8, n_labels=2, edge_labels=True, density=2.0)
    reps: list = []
    feats = []
    for g in graphs:
        a = _adjacency(g)
        el = {}
        for (u, v), e in zip(g.edges.tolist(), g.edge_labels.tolist()):
            el[(min(u, v), max(u, v))] = e
        c = Counter()
        for sub in itertools.combinations(range(g.n_nodes), k):
            h = nx.Graph()
            h.add_nodes_from((v, {"l": int(g.node_labels[v])}) for v in sub)
            h.add_edges_from((u, v, {"e": el[(u, v)]}) for u, v in itertools.combinations(sub, 2) if a[u, v])
            if not nx.is_connected(h):
                continue
            for i, r in enumerate(reps):
                if nx.is_isomorphic(h, r, node_match=categorical_node_match("l", None),
                                    edge_match=categorical_edge_match("e", None)):
                    c[i] += 1
                    break
            else:
                reps.append(h)
                c[len(reps) - 1] += 1
        feats.append(c)
    kern = GraphletKernel(k=k, graphlets="connected", use_labels=True, use_edge_labels=True, values="count")
    assert np.array_equal(gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 5), gram_of(feats))


def test_edge_labels_missing_means_one_edge_label(mutag):
    plain = GraphBatch.from_graphs([g.edges for g in mutag[:20]], mutag[:20].nodes_per_graph,
                                   node_labels=[g.node_labels for g in mutag[:20]])
    a = GraphletKernel(k=3, graphlets="connected", use_labels=True, use_edge_labels=True).features(plain)
    b = GraphletKernel(k=3, graphlets="connected", use_labels=True).features(plain)
    np.testing.assert_array_equal(a.values, b.values)


def tudataset_module():
    """The TUDataset C++ ``kernel_baselines`` module, if built (GRAMDIST_TUDATASET_BASELINES)."""
    where = os.environ.get("GRAMDIST_TUDATASET_BASELINES")
    if not where:
        pytest.skip("GRAMDIST_TUDATASET_BASELINES is not set (the TUDataset C++ kernel_baselines module)")
    sys.path.insert(0, where)
    try:
        import kernel_baselines  # type: ignore[import-not-found]
    except ImportError as exc:
        pytest.skip(f"kernel_baselines not importable from {where}: {exc}")
    finally:
        sys.path.remove(where)
    return kernel_baselines


@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_labelled_3_graphlets_against_the_tudataset_cpp_baseline(name, dataset_dir, tmp_path, monkeypatch):
    """Our Gram equals compute_graphlet_dense where triangles and wedges never share a label
    sequence; where they do, C++ merges them (no shape tag): the test's independent
    re-implementation with that merge equals C++, and ours equals the unmerged definition."""
    kb = tudataset_module()
    from gramdist.datasets import read_tu

    src = dataset_dir(name)
    graphs = read_tu(src)
    # the module reads datasets/DS/DS/raw/DS_*.txt relative to the working directory
    raw = tmp_path / "datasets" / name / name / "raw"
    raw.mkdir(parents=True)
    for f in src.iterdir():
        (raw / f.name).symlink_to(f)
    monkeypatch.chdir(tmp_path)
    for use_edge in ([False, True] if graphs.edge_labels is not None else [False]):
        cpp = np.asarray(kb.compute_graphlet_dense(name, True, use_edge), dtype=np.float64)
        kern = GraphletKernel(k=3, graphlets="connected", use_labels=True, use_edge_labels=use_edge,
                              values="count")
        ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 256)
        merged = gram_of(tudataset_labelled_3(graphs, use_edge, merge_like_cpp=True))
        np.testing.assert_allclose(cpp, merged, rtol=1e-12, atol=0)
        if use_edge:  # with edge labels the C++ keys have different lengths: no merge
            np.testing.assert_allclose(ours, cpp, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ sampling
def test_sampling_is_within_the_stated_error(mutag):
    """||D - D^||_1 >= epsilon for at most a delta fraction of the graphs (the paper's bound)."""
    graphs = mutag[:80]
    for k in (3, 4, 5):
        eps, delta = 0.1, 0.1
        exact = GraphletKernel(k=k, graphlets="all").features(graphs)
        sampled = GraphletKernel(k=k, method="sampling", epsilon=eps, delta=delta).features(graphs, seed=3)
        keys = np.union1d(exact.keys, sampled.keys)
        d = exact.to_csr(keys).toarray() - sampled.to_csr(keys).toarray()
        l1 = np.abs(d).sum(axis=1)
        assert np.mean(l1 >= eps) <= delta
        assert np.allclose(sampled.to_csr(keys).toarray().sum(axis=1), 1.0)


def test_sampling_is_deterministic_per_graph_and_seed(mutag):
    kern = GraphletKernel(k=4, method="sampling", n_samples=300)
    state = kern.fit(mutag, seed=7)
    whole = kern.embed(mutag[:60], state)
    parts = [kern.embed(mutag[i:min(i + 13, 60)], state) for i in range(0, 60, 13)]
    from gramdist.kernels.sparse import SparseFeatures

    joined = SparseFeatures.concat(parts)
    assert np.array_equal(whole.keys, joined.keys) and np.array_equal(whole.values, joined.values)
    again = kern.embed(mutag[:60], kern.fit(mutag[:5], seed=7))
    assert np.array_equal(again.values, whole.values)
    other = kern.embed(mutag[:60], kern.fit(mutag, seed=8))
    assert not np.array_equal(other.values, whole.values)
    # a count estimate scales the frequencies by C(n, k)
    counts = GraphletKernel(k=4, method="sampling", n_samples=300, values="count").embed(mutag[:60], state)
    n = mutag[:60].nodes_per_graph
    np.testing.assert_allclose(counts.values, whole.values * np.repeat(
        [math.comb(int(x), 4) for x in n], whole.row_lengths), rtol=1e-13)


def test_sampled_subsets_are_uniform():
    from gramdist.kernels.subgraphs import sample_subsets

    g = GraphBatch.from_graphs([np.zeros((0, 2))], [6])
    _, sets = sample_subsets(g, 3, 20000, seed=1)
    assert all(len(set(r)) == 3 for r in sets.tolist())
    counts = Counter(tuple(sorted(r)) for r in sets.tolist())
    assert len(counts) == math.comb(6, 3)
    freq = np.array(list(counts.values())) / 20000
    assert np.abs(freq - 1 / 20).max() < 0.01


# ------------------------------------------------------------------ GraKeL
@pytest.mark.parametrize("name", ["MUTAG", "PTC_MR", "ENZYMES"])
def test_grakel_exact_mode_relation(name, dataset_dir):
    """GraKeL's GraphletSampling(k) without sampling counts connected k-graphlets, but (a) its
    ConSubg enumeration misses some connected sets and (b) its binning adds 1 to the count of
    each (graph, class) whose class was first met in an earlier graph. Its Gram equals the one
    of our counts minus the sets ConSubg misses plus that 1, exactly."""
    pytest.importorskip("grakel")
    from grakel.kernels import GraphletSampling
    from grakel.kernels._c_functions import ConSubg

    from gramdist.datasets import read_tu
    from gramdist.kernels.subgraphs import connected_sets

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benchmarks"))
    from common import grakel_labelled_graphs

    graphs = read_tu(dataset_dir(name))[: 25 if name == "ENZYMES" else 60]
    gk_graphs = grakel_labelled_graphs(graphs)
    for k in (3, 4, 5):
        classes = IsoClasses()
        kern = GraphletKernel(k=k, graphlets="connected", values="count")
        ours = gram_by_tiles(kern, kern.fit(graphs, 0), graphs, 16)
        sets: dict = {}
        for _s, rows, _p in connected_sets(graphs, k, min_size=k):
            for r in rows.tolist():
                gi = int(graphs.node_graph[r[0]])
                sets.setdefault(gi, set()).add(frozenset(v - int(graphs.node_offsets[gi]) for v in r))
        mine_feats, grakel_feats, seen, missed = [], [], set(), 0
        for gi, g in enumerate(graphs):
            a = _adjacency(g)
            nb = {i: set(np.flatnonzero(a[i]).tolist()) for i in range(g.n_nodes)}
            theirs = {frozenset(s) for s in ConSubg(nb, k, True)}
            mine = sets.get(gi, set())
            assert theirs <= mine  # ConSubg finds no set we miss
            missed += len(mine - theirs)

            def classify(group, a=a, classes=classes):
                return Counter(classes.of(a[np.ix_(sorted(s), sorted(s))]) for s in group)

            mine_c = classify(mine)
            mine_feats.append(mine_c)
            c = mine_c - classify(mine - theirs)  # our counts, less what ConSubg misses
            grakel_feats.append(Counter({key: v + (1 if key in seen else 0) for key, v in c.items()}))
            seen |= set(c)
        assert np.array_equal(ours, gram_of(mine_feats))
        theirs_k = GraphletSampling(k=k).fit_transform(gk_graphs)
        np.testing.assert_array_equal(theirs_k, gram_of(grakel_feats))


# ------------------------------------------------------------------ contract
@pytest.mark.parametrize("params", [dict(k=4), dict(k=5, graphlets="connected"),
                                    dict(k=3, method="sampling", n_samples=200),
                                    dict(k=3, graphlets="connected", use_labels=True, use_edge_labels=True)])
def test_tiles_psd_and_out_of_sample_rows(mutag, params):
    kern = GraphletKernel(**params)
    kern.validate()
    state = kern.fit(mutag[:50], seed=1)
    a = gram_by_tiles(kern, state, mutag, 64)
    b = gram_by_tiles(kern, state, mutag, 23)
    assert np.array_equal(a, b)
    assert min_eigenvalue_ratio(a) >= -1e-10
    new = kern.embed(mutag[150:], state)
    train = kern.embed(mutag[:150], state)
    assert np.array_equal(kern.pairwise(new, train, state), a[150:, :150])
    assert np.array_equal(kern.self_similarity(new, state), np.diag(a)[150:])
    rows = kern.feature_vectors(new, state)
    assert np.array_equal(rows.keys, new.keys)


def test_node_permutation_invariance(mutag):
    rng = np.random.default_rng(4)
    perm_graphs = []
    for g in mutag[:30]:
        p = rng.permutation(g.n_nodes)
        inv = np.argsort(p)
        perm_graphs.append((inv[g.edges], g.n_nodes, g.node_labels[p], g.edge_labels))
    permuted = GraphBatch.from_graphs([x[0] for x in perm_graphs], [x[1] for x in perm_graphs],
                                      node_labels=[x[2] for x in perm_graphs],
                                      edge_labels=[x[3] for x in perm_graphs])
    for params in (dict(k=5), dict(k=4, graphlets="connected", use_labels=True, use_edge_labels=True)):
        kern = GraphletKernel(**params)
        a, b = kern.features(mutag[:30]), kern.features(permuted)
        assert np.array_equal(a.keys, b.keys) and np.allclose(a.values, b.values, rtol=1e-15)


@pytest.mark.parametrize("params,match", [
    (dict(k=6), "k"), (dict(graphlets="some"), "graphlets"), (dict(method="sampling", graphlets="connected"),
                                                               "graphlets"),
    (dict(values="norm"), "values"), (dict(epsilon=0.0), "epsilon"), (dict(n_samples=0), "n_samples"),
    (dict(use_labels=True), "use_labels"), (dict(use_labels=True, method="sampling"), "use_labels")])
def test_invalid_parameters_are_named(params, match):
    from gramdist.errors import JobError
    from gramdist.kernels import make_kernel

    with pytest.raises(JobError, match=match):
        make_kernel("graphlet", **params)


def test_through_the_engine(mutag, dataset_dir, tmp_path):
    import subprocess

    import gramdist
    from gramdist import FeatureTransformer, GramTransformer

    dataset_dir("MUTAG")
    kern = GraphletKernel(k=4)
    ref = gram_by_tiles(kern, kern.fit(mutag, 0), mutag, 188)
    k1 = gramdist.compute_gram(mutag, kernel="graphlet", k=4)
    assert np.array_equal(k1, ref)
    k2 = GramTransformer(kernel="graphlet", kernel_params={"k": 4}, tile_size=50).fit(mutag[:100]).transform(mutag[100:])
    assert np.array_equal(k2, ref[100:, :100])
    x = FeatureTransformer(kernel="graphlet", kernel_params={"k": 4}).fit_transform(mutag)
    np.testing.assert_allclose((x @ x.T).toarray() if hasattr(x, "toarray") else x @ x.T, ref, rtol=1e-14)
    root = os.path.join(os.path.dirname(__file__), "..")
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-graphlet.yaml", "--out",
                        str(tmp_path / "g.zarr"), "--quiet", "--json"], cwd=root, capture_output=True, text=True,
                       timeout=240)
    assert r.returncode == 0, r.stderr
    from gramdist.engine.store import open_gram

    stored, _ = open_gram(tmp_path / "g.zarr")
    d = np.sqrt(np.diag(ref))
    np.testing.assert_allclose(np.asarray(stored), ref / np.outer(d, d), rtol=1e-14)
