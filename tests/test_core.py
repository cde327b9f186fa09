"""Core framework: the decomposition against networkx, the kernel against a sum over networkx
cores and GraKeL's CoreFramework, nested state and parameters, scikit-learn, the engine."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from sklearn.base import clone

from gramdist.errors import JobError
from gramdist.graphs import GraphBatch
from gramdist.kernels import make_kernel
from gramdist.kernels.core.decomposition import core_batch, core_numbers, degeneracies
from gramdist.kernels.core.kernel import CoreEmbedding, CoreKernel
from gramdist.kernels.features.wl import WLSubtreeKernel
from gramdist.kernels.sparse import dot
from gramdist.kernels.wwl.kernel import WWLKernel
from gramdist.testing import gram_by_tiles, min_eigenvalue_ratio

ROOT = Path(__file__).resolve().parents[1]


def to_nx(g) -> nx.Graph:
    x = nx.Graph()
    x.add_nodes_from(range(g.n_nodes))
    x.add_edges_from((int(u), int(v)) for u, v in g.edges if u != v)
    return x


def random_graphs(n: int, seed: int, max_nodes: int = 14) -> GraphBatch:
    rng = np.random.default_rng(seed)
    edges, sizes, labels = [], [], []
    for _ in range(n):
        k = int(rng.integers(1, max_nodes + 1))
        edges.append(rng.integers(0, k, size=(int(rng.integers(0, 3 * k)), 2)))
        sizes.append(k)
        labels.append(rng.integers(0, 3, size=k))
    return GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def nx_cores(graphs: GraphBatch, level: int) -> tuple[list[int], GraphBatch]:
    """The level-cores by networkx (nodes in their original order), as a batch."""
    members, edges, sizes, labels = [], [], [], []
    for i, g in enumerate(graphs):
        x = to_nx(g)
        cn = nx.core_number(x)
        keep = [v for v in range(g.n_nodes) if cn[v] >= level]
        if not keep:
            continue
        pos = {v: p for p, v in enumerate(keep)}
        members.append(i)
        edges.append(np.array([[pos[int(u)], pos[int(v)]] for u, v in g.edges if int(u) in pos and int(v) in pos],
                              dtype=np.int64).reshape(-1, 2))
        sizes.append(len(keep))
        labels.append(g.node_labels[keep])
    return members, GraphBatch.from_graphs(edges, sizes, node_labels=labels)


def brute_core_kernel(graphs: GraphBatch, base) -> np.ndarray:
    """Σ_i k(C_i(G), C_i(G')) with networkx's cores, the base kernel run level by level."""
    n = len(graphs)
    k = np.zeros((n, n))
    level = 0
    while True:
        members, cores = nx_cores(graphs, level)
        if not members:
            return k
        state = base.fit(cores, 0)
        emb = base.embed(cores, state)
        k[np.ix_(members, members)] += base.pairwise(emb, emb, state)
        level += 1


# --------------------------------------------------------------------------- decomposition
def test_core_numbers_match_networkx(mutag, dataset_dir):
    from gramdist.datasets import read_tu

    for graphs in (random_graphs(40, 1), mutag, read_tu(dataset_dir("ENZYMES"))[:150]):
        core = core_numbers(graphs)
        ref = np.concatenate([[nx.core_number(to_nx(g))[v] for v in range(g.n_nodes)] for g in graphs])
        assert np.array_equal(core, ref)
        deg = degeneracies(graphs, core)
        assert np.array_equal(deg, [max(nx.core_number(to_nx(g)).values(), default=-1) for g in graphs])


def test_core_batches_are_the_induced_subgraphs():
    graphs = random_graphs(30, 2)
    core = core_numbers(graphs)
    deg = degeneracies(graphs, core)
    for level in range(int(deg.max()) + 1):
        members = np.flatnonzero(deg >= level)
        ours = core_batch(graphs, core, level, members)
        ref_members, ref = nx_cores(graphs, level)
        assert members.tolist() == ref_members
        assert np.array_equal(ours.node_offsets, ref.node_offsets) and np.array_equal(ours.node_labels, ref.node_labels)
        for a, b in zip(ours, ref):
            assert sorted(map(tuple, a.edges.tolist())) == sorted(map(tuple, b.edges.tolist()))


# --------------------------------------------------------------------------- the kernel
@pytest.mark.parametrize("h", [0, 2, 4])
def test_matches_sum_over_networkx_cores_with_wl(h):
    graphs = random_graphs(30, seed=h)
    kernel = CoreKernel(base={"name": "wl", "h": h})
    k = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 7)
    assert np.array_equal(k, brute_core_kernel(graphs, WLSubtreeKernel(h=h)))


def test_matches_sum_over_networkx_cores_with_a_base_without_features(mutag):
    """The level-by-level path (CoreEmbedding), here with WWL as the base kernel."""
    graphs = mutag[:40]
    kernel = CoreKernel(base={"name": "wwl", "h": 2, "psd_check": 0})
    state = kernel.fit(graphs, 0)
    assert not kernel.has_feature_vectors and isinstance(kernel.embed(graphs[:3], state), CoreEmbedding)
    k = gram_by_tiles(kernel, state, graphs, 40)
    assert np.allclose(k, brute_core_kernel(graphs, WWLKernel(h=2, psd_check=0)), rtol=1e-14, atol=0)
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 6))
    assert np.array_equal(k, gram_by_tiles(kernel, state, graphs, 1))


@pytest.mark.parametrize("name,count", [("MUTAG", 188), ("PTC_MR", 344), ("ENZYMES", 300)])
def test_equals_grakel_core_framework_with_wl(dataset_dir, name, count):
    pytest.importorskip("grakel")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from common import grakel_labelled_graphs
    from grakel.kernels import CoreFramework, VertexHistogram, WeisfeilerLehman

    from gramdist.datasets import read_tu

    graphs = read_tu(dataset_dir(name))[:count]
    kernel = make_kernel("core", base={"name": "wl", "h": 3})
    ours = gram_by_tiles(kernel, kernel.fit(graphs, 0), graphs, 100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = CoreFramework(base_graph_kernel=(WeisfeilerLehman, {"n_iter": 3, "base_graph_kernel": VertexHistogram})
                               ).fit_transform(grakel_labelled_graphs(graphs))
    assert np.array_equal(ours, theirs)


def test_explicit_features_and_psd(mutag):
    kernel = CoreKernel(base=WLSubtreeKernel(h=3))
    state = kernel.fit(mutag, 0)
    emb = kernel.embed(mutag, state)
    assert kernel.has_feature_vectors
    fv = kernel.feature_vectors(emb, state)
    k = kernel.pairwise(emb, emb, state)
    assert np.array_equal(dot(fv, fv), k) and np.array_equal(np.diag(k), kernel.self_similarity(emb, state))
    assert min_eigenvalue_ratio(k) >= -1e-10
    assert np.array_equal(gram_by_tiles(kernel, state, mutag, 50), gram_by_tiles(kernel, state, mutag, 13))


def test_node_permutation_invariance(mutag):
    rng = np.random.default_rng(0)
    kernel = CoreKernel(base={"name": "wl", "h": 3})
    state = kernel.fit(mutag, 0)
    for i in range(5):
        g = mutag[i]
        perm = rng.permutation(g.n_nodes)
        p = GraphBatch.from_graphs([np.argsort(perm)[g.edges]], [g.n_nodes], node_labels=[g.node_labels[perm]])
        a, b = kernel.embed(mutag[i:i + 1], state), kernel.embed(p, state)
        assert np.array_equal(a.keys, b.keys) and np.array_equal(a.values, b.values)


def test_state_nests_the_base_state(mutag):
    kernel = CoreKernel(base={"name": "wl", "h": 2})
    state = kernel.fit(mutag[:30], 5)
    base_state = WLSubtreeKernel(h=2).fit(_all_cores(mutag[:30]), 5)
    assert set(state.arrays) == {"base." + k for k in base_state.arrays}
    assert np.array_equal(state.arrays["base.labels"], base_state.arrays["labels"])
    assert state.attrs["base"] == base_state.attrs and state.attrs["base_name"] == "wl"
    assert any("WL label dictionary" in line for line in kernel.report(state))


def _all_cores(graphs):
    core = core_numbers(graphs)
    deg = degeneracies(graphs, core)
    return GraphBatch.concat([core_batch(graphs, core, lev, np.flatnonzero(deg >= lev)) for lev in range(int(deg.max()) + 1)])


def test_fit_then_embed_new_graphs(mutag):
    kernel = CoreKernel(base={"name": "wwl", "h": 1, "psd_check": 0})
    state = kernel.fit(mutag[:20], 0)
    full = gram_by_tiles(kernel, state, mutag[:30], 8)
    block = kernel.pairwise(kernel.embed(mutag[20:30], state), kernel.embed(mutag[:20], state), state)
    assert np.array_equal(block, full[20:, :20])


# --------------------------------------------------------------------------- parameters
def test_nested_parameters_are_validated():
    with pytest.raises(JobError, match="kernel core: parameter base: kernel wl: parameter h"):
        make_kernel("core", base={"name": "wl", "h": -1})
    with pytest.raises(JobError, match="kernel core: parameter base: kernel wl: unknown parameter 'depth'"):
        make_kernel("core", base={"name": "wl", "depth": 2})
    with pytest.raises(JobError, match="unknown kernel 'nope'"):
        make_kernel("core", base={"name": "nope"})
    with pytest.raises(JobError, match="base must name its kernel"):
        make_kernel("core", base={"h": 2})
    with pytest.raises(JobError, match="parameter base must be"):
        make_kernel("core", base=3)
    with pytest.raises(JobError, match="kernel wl: parameter h"):
        CoreKernel(base=WLSubtreeKernel(h=-2)).validate()
    assert make_kernel("core", base="wl").base_kernel().h == 5
    nested = make_kernel("core", base={"name": "core", "base": {"name": "wl", "h": 1}})
    assert nested.base_kernel().base_kernel().h == 1


def test_get_params_clone_and_set_params():
    from gramdist import GramTransformer

    base = WLSubtreeKernel(h=2)
    kernel = CoreKernel(base=base)
    assert kernel.get_params(deep=False) == {"base": base}
    assert kernel.get_params() == {"base": {"name": "wl", "h": 2}}  # JSON for stores and job records
    copy = clone(GramTransformer(kernel))
    assert copy.kernel.base is not base and copy.kernel.base.h == 2
    copy.set_params(kernel__base__h=4)  # what GridSearchCV does for gram__kernel__base__h
    assert copy.kernel.base.h == 4 and base.h == 2
    spec = CoreKernel(base={"name": "wl", "h": 1}).set_params(base__h=3)
    assert spec.base == {"name": "wl", "h": 3}
    assert CoreKernel(base="wl").set_params(base__h=2).base == {"name": "wl", "h": 2}
    deep = CoreKernel(base={"name": "core", "base": {"name": "wl", "h": 1}}).set_params(base__base__h=2)
    assert deep.base == {"name": "core", "base": {"name": "wl", "h": 2}}
    assert "kernel__base" in GramTransformer(kernel).get_params(deep=True)


def test_engine_transformer_and_job_file(tmp_path, mutag, dataset_dir):
    import gramdist
    from gramdist import GramTransformer

    kernel = CoreKernel(base={"name": "wl", "h": 2})
    ref = gram_by_tiles(kernel, kernel.fit(mutag[:40], 0), mutag[:40], 40)
    assert np.array_equal(gramdist.compute_gram(mutag[:40], kernel="core", base={"name": "wl", "h": 2}), ref)
    t = GramTransformer(CoreKernel(base=WLSubtreeKernel(h=2))).fit(mutag[:30])
    assert np.array_equal(t.transform(mutag[30:40]), ref[30:40, :30])
    dataset_dir("MUTAG")
    out = tmp_path / "core.zarr"
    r = subprocess.run([sys.executable, "-m", "gramdist.cli", "run", "jobs/mutag-core.yaml", "--out", str(out),
                        "--set", "cluster.n_workers=1", "--set", "kernel.base.h=2", "--set", "gram.normalize=false",
                        "--json"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])["complete"]
    from gramdist.engine.store import open_gram, read_state

    assert np.array_equal(np.asarray(open_gram(out)[0])[:40, :40], ref)
    state = read_state(out)
    assert "base.labels" in state.arrays and state.attrs["base_name"] == "wl"


def test_base_counters_pass_through(mutag):
    kernel = CoreKernel(base={"name": "svm_theta", "n_samples": 5})
    assert kernel.has_embedding_counts and not CoreKernel(base="wl").has_embedding_counts
    state = kernel.fit(mutag[:10], 0)
    emb = kernel.embed(mutag[:10], state)
    import pickle

    counts = kernel.embedding_counts(pickle.loads(pickle.dumps(emb)))
    assert counts["graphs"] == sum(state.attrs["cores_per_level"]) and counts["solver_not_converged"] == 0
