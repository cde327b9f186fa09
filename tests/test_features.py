"""Feature stores: exact CSR features against the Gram, Nyström features, resume, damage, mapping later."""

from __future__ import annotations

import logging
import shutil

import numpy as np
import pytest
import scipy.sparse as sp

import gramdist
from gramdist.arrayops import normalize_block
from gramdist.datasets import make_synthetic
from gramdist.datasets.lazy import GraphChunk, LazySynthetic, open_dataset
from gramdist.engine import steps
from gramdist.engine import store as fs
from gramdist.engine.context import RunContext
from gramdist.engine.executor import DaskExecutor, InlineExecutor
from gramdist.engine.featurize import (
    FeatureRequest,
    compute_features,
    feature_plan,
    featurize_job,
    open_sink,
    plan_features,
)
from gramdist.engine.nystroem import NystroemSpec
from gramdist.engine.nystroem import d2_draw as _d2_draw
from gramdist.engine.plan import plan_gram, plan_job
from gramdist.engine.runner import compute_in_memory
from gramdist.engine.store import FeatureStore
from gramdist.errors import JobError, StoreError
from gramdist.jobs import FitSpec, GramSpec, validate_job

QUIET = {"log": lambda _msg: None}


def job(kernel, dataset=None, **gram):
    return validate_job({"dataset": dataset or {"name": "MUTAG"}, "kernel": kernel,
                         "gram": {"tile_size": 64, **gram}, "_job_name": "t"})


def featurize(j, path, ex=None, progress=False, **kwargs):
    """Features of job ``j`` into ``path`` in this process (or on ``ex``)."""
    plan = plan_features(j, **kwargs)
    sink = open_sink(plan, str(path), overwrite=False)
    return compute_features(ex or InlineExecutor(), plan, sink, RunContext(progress=progress, log=lambda m: None))


def exact_gram(j):
    return compute_in_memory(InlineExecutor(), plan_job(j), context=RunContext(log=lambda m: None))


def csr_gram(x):
    """X Xᵀ by SciPy's CSR product: the sequential key-order sum of sparse_features.dot."""
    return (x @ x.T.tocsr()).toarray()


# ------------------------------------------------------------------------------ exact features
@pytest.mark.parametrize("kernel", [{"name": "wl", "h": 3}, {"name": "nspdk", "r": 2, "d": 3}, {"name": "odd"}])
def test_explicit_features_reproduce_the_gram_bit_for_bit(kernel, tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    j = job(kernel, normalize=True)
    res = featurize(j, tmp_path / "f.zarr", chunk_size=50)
    assert res.complete and res.chunks_computed == 4
    x, y = gramdist.open_features(str(tmp_path / "f.zarr"), normalize=False)
    mem = exact_gram(j)
    raw = csr_gram(x)
    assert np.array_equal(np.diag(raw), mem.diag_rows)
    d = np.diag(raw)
    assert np.array_equal(normalize_block(raw, d, d), mem.gram)  # the normalised Gram store's bits
    xn, _ = gramdist.open_features(str(tmp_path / "f.zarr"))  # rows normalised as the job says
    assert np.allclose(csr_gram(xn), mem.gram, rtol=0, atol=1e-12)
    assert np.array_equal(y, mutag.y)
    assert res.nnz == x.nnz


def test_nci1_wl_features_equal_the_gram_store_bit_for_bit(tmp_path, dataset_dir):
    dataset_dir("NCI1")
    j = job({"name": "wl", "h": 5}, {"name": "NCI1"}, tile_size=1028, normalize=True)
    featurize(j, tmp_path / "f.zarr")
    x, y = gramdist.open_features(str(tmp_path / "f.zarr"), normalize=False)
    mem = exact_gram(j)
    raw = csr_gram(x)
    d = np.diag(raw)
    assert np.array_equal(d, mem.diag_rows)
    assert np.array_equal(normalize_block(raw, d, d), mem.gram)


def test_store_layout_columns_and_chunk_size_invariance(tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 2})
    stores = []
    for b in (7, 64, 188):
        featurize(j, tmp_path / f"b{b}.zarr", chunk_size=b)
        stores.append(gramdist.open_features(str(tmp_path / f"b{b}.zarr")))
    for x, y in stores[1:]:
        assert (x != stores[0][0]).nnz == 0 and np.array_equal(x.indptr, stores[0][0].indptr)
        assert np.array_equal(y, mutag.y)
    cols = FeatureStore.open(tmp_path / "b7.zarr").columns()
    assert cols.dtype == np.uint64 and np.all(cols[1:] > cols[:-1]) and len(cols) == stores[0][0].shape[1]
    info = fs.info(tmp_path / "b7.zarr")
    assert info["complete"] and info["chunks_total"] == 27 and info["nnz"] == stores[0][0].nnz
    assert info["feature_kind"] == "sparse" and info["disk_bytes"] > 0
    # another store's columns line rows up with these ones (features outside them dropped)
    x_half, _ = gramdist.open_features(str(tmp_path / "b7.zarr"), columns=cols[::2])
    assert x_half.shape == (188, len(cols[::2]))
    assert np.array_equal(x_half.toarray(), stores[0][0].toarray()[:, ::2])


def test_kernel_without_explicit_features_asks_for_nystroem(dataset_dir):
    dataset_dir("MUTAG")
    with pytest.raises(JobError, match="--nystroem"):
        plan_features(job({"name": "dm"}))


def test_gram_and_feature_stores_are_told_apart(tmp_path, dataset_dir):
    from gramdist.engine.runner import compute_into_store
    from gramdist.engine.sinks import StoreSink
    from gramdist.engine.store import GramStore, Location

    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 1})
    featurize(j, tmp_path / "f.zarr")
    plan = plan_job(j)
    store = steps.create_store(plan, Location(tmp_path / "g.zarr"), False)
    compute_into_store(InlineExecutor(), plan, StoreSink(store), RunContext(log=lambda _msg: None))
    with pytest.raises(StoreError, match="not a Gram store"):
        GramStore.open(tmp_path / "f.zarr")
    with pytest.raises(StoreError, match="a Gram store, not a feature store"):
        FeatureStore.open(tmp_path / "g.zarr")
    assert fs.is_feature_store(tmp_path / "f.zarr") and not fs.is_feature_store(tmp_path / "g.zarr")


# ------------------------------------------------------------------------------ resume and damage
def test_interrupted_run_resumes_to_the_same_store(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 3})
    featurize(j, tmp_path / "ref.zarr", chunk_size=20)

    def stop_after_three(done, total):
        if done == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        featurize(j, tmp_path / "s.zarr", chunk_size=20, progress=stop_after_three)
    store = FeatureStore.open(tmp_path / "s.zarr")
    assert not store.complete and int(store.chunk_mask()[0].sum()) == 3
    with pytest.raises(StoreError, match="incomplete"):
        gramdist.open_features(str(tmp_path / "s.zarr"))
    res = featurize(j, tmp_path / "s.zarr", chunk_size=20)
    assert res.complete and res.chunks_computed == 7 and res.chunks_already_done == 3
    a, _ = gramdist.open_features(str(tmp_path / "ref.zarr"))
    b, _ = gramdist.open_features(str(tmp_path / "s.zarr"))
    assert (a != b).nnz == 0
    with pytest.raises(StoreError, match="different job"):
        featurize(job({"name": "wl", "h": 2}), tmp_path / "s.zarr", chunk_size=20)


def test_lost_chunk_is_caught_and_repaired(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 2})
    path = tmp_path / "s.zarr"
    featurize(j, path, chunk_size=50)
    good, _ = gramdist.open_features(str(path))
    shutil.rmtree(path / "data" / "2" / "c")  # Zarr now reads chunk 2's values as zeros
    with pytest.raises(StoreError, match="chunk 2 .graphs 100..149"):
        gramdist.open_features(str(path))
    report = fs.verify(path)
    assert report["damaged"] == [2] and report["checked"] == 4
    report = fs.verify(path, repair=True)
    assert not FeatureStore.open(path).root.attrs["complete"]
    res = featurize(j, path, chunk_size=50)
    assert res.chunks_computed == 1 and res.complete
    again, _ = gramdist.open_features(str(path))
    assert (again != good).nnz == 0 and fs.verify(path)["damaged"] == []


# ------------------------------------------------------------------------------ Nyström
def nystroem_reference(k, landmarks, cutoff):
    """Φ from the exact Gram with NumPy: K(·, L) U_k Λ_k^{-1/2} over eigenpairs above the cutoff."""
    w = k[np.ix_(landmarks, landmarks)]
    lam, u = np.linalg.eigh(w)
    keep = lam > cutoff * lam.max()
    return k[:, landmarks] @ (u[:, keep] / np.sqrt(lam[keep]))


@pytest.mark.parametrize("rule", ["kmeans++", "uniform"])
def test_nystroem_features_match_a_numpy_reference(rule, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "power"}, normalize=True)  # not an explicit-feature kernel
    featurize(j, tmp_path / "n.zarr", chunk_size=40, nystroem=NystroemSpec(60, rule))
    phi, y = gramdist.open_features(str(tmp_path / "n.zarr"))
    nys = FeatureStore.open(tmp_path / "n.zarr").read_nystroem()
    k = exact_gram(j).gram
    ref = nystroem_reference(k, nys.landmark_indices, 1e-8)
    assert phi.shape == ref.shape == (188, nys.rank) and nys.rank <= 60
    assert np.allclose(phi @ phi.T, ref @ ref.T, atol=1e-8)  # the same kernel approximation
    assert np.all(nys.eigenvalues[:-1] >= nys.eigenvalues[1:])
    assert len(np.unique(nys.landmark_indices)) == len(nys.landmark_indices) == 60
    err = np.linalg.norm(phi @ phi.T - k) / np.linalg.norm(k)
    assert err < 0.1
    # landmarks reproduce their own rows of the Gram (Nyström is exact on the landmarks)
    lm = nys.landmark_indices
    assert np.allclose((phi @ phi.T)[np.ix_(lm, lm)], k[np.ix_(lm, lm)], atol=1e-8)


def test_nystroem_with_every_graph_as_landmark_is_the_gram(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 2}, normalize=True)
    featurize(j, tmp_path / "n.zarr", nystroem=NystroemSpec(188, "uniform", 1e-10))
    phi, _ = gramdist.open_features(str(tmp_path / "n.zarr"))
    k = exact_gram(j).gram
    assert np.abs(phi @ phi.T - k).max() < 1e-8


def test_nystroem_bits_do_not_depend_on_chunks_or_workers(tmp_path, dataset_dir):
    from distributed import Client, LocalCluster

    dataset_dir("MUTAG")
    j = job({"name": "dm", "h": 3, "descriptor_sample": 2000}, normalize=True)
    spec = NystroemSpec(50)
    featurize(j, tmp_path / "a.zarr", chunk_size=7, nystroem=spec)
    featurize(j, tmp_path / "b.zarr", chunk_size=188, nystroem=spec)
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", silence_logs=logging.ERROR) as c:
        with Client(c) as client:
            res = featurize(j, tmp_path / "c.zarr", ex=DaskExecutor(client), chunk_size=40, nystroem=spec)
    assert len(res.workers) == 2  # both workers wrote chunks
    a, b, c = (gramdist.open_features(str(tmp_path / f"{n}.zarr"))[0] for n in "abc")
    assert np.array_equal(a, b) and np.array_equal(a, c)
    na, nc = FeatureStore.open(tmp_path / "a.zarr").read_nystroem(), FeatureStore.open(tmp_path / "c.zarr").read_nystroem()
    assert np.array_equal(na.landmark_indices, nc.landmark_indices)
    assert np.array_equal(na.projection, nc.projection)


def test_kmeanspp_spends_no_landmark_on_a_duplicate(tmp_path, mutag, dataset_dir):
    from gramdist.kernels.features.wl import WLSubtreeKernel

    dataset_dir("MUTAG")
    tripled = gramdist.GraphBatch.concat([mutag, mutag, mutag])  # each graph three times
    tripled.graph_ids = np.arange(len(tripled))
    ranks = {}
    for rule in ("kmeans++", "uniform"):
        gram = plan_gram(WLSubtreeKernel(3), tripled, fit=FitSpec(**{"seed": 0}), gram=GramSpec(tile_size=64, normalize=True))
        plan = feature_plan(gram, chunk_size=200, nystroem=NystroemSpec(100, rule))
        compute_features(InlineExecutor(), plan, open_sink(plan, str(tmp_path / f"{rule}.zarr"), False), RunContext(log=lambda m: None))
        nys = FeatureStore.open(tmp_path / f"{rule}.zarr").read_nystroem()
        ranks[rule] = (len(set(nys.landmark_indices % 188)), nys.rank)
    # MUTAG has 171 distinct WL(h=3) vectors of rank 156: k-means++ picks 100 different graphs,
    # uniform draws repeats and gets a smaller basis
    assert ranks["kmeans++"][0] == 100 and ranks["uniform"][0] < 100
    assert ranks["kmeans++"][1] > ranks["uniform"][1]


def test_d2_draw_is_proportional_and_skips_zero_weights():
    rng = np.random.default_rng(0)
    w = np.array([0.0, 1.0, 3.0, 0.0])
    counts = np.zeros(4)
    for _ in range(4000):
        counts[_d2_draw(rng, w, 1)] += 1
    assert counts[0] == counts[3] == 0 and 0.2 < counts[1] / counts[2] < 0.45
    assert list(_d2_draw(rng, w, 5)) == [1, 2]  # fewer than asked: only two positive weights


def test_map_new_graphs_later_without_refit(tmp_path, mutag, dataset_dir):
    dataset_dir("MUTAG")
    for kernel, spec in (({"name": "wl", "h": 3}, None), ({"name": "dm", "h": 3, "descriptor_sample": 2000},
                                                           NystroemSpec(40))):
        train = job(kernel, {"name": "MUTAG", "limit": 120}, normalize=True)
        featurize(train, tmp_path / "train.zarr", chunk_size=50, nystroem=spec)
        later = job(kernel, {"name": "MUTAG"}, normalize=True)
        res = featurize(later, tmp_path / "all.zarr", chunk_size=33, from_store=str(tmp_path / "train.zarr"))
        assert res.complete
        a, _ = gramdist.open_features(str(tmp_path / "train.zarr"))
        if spec is None:  # explicit rows, lined up on the training store's columns
            b, _ = gramdist.open_features(str(tmp_path / "all.zarr"), columns=FeatureStore.open(tmp_path / "train.zarr").columns())
            assert (b[:120] != a).nnz == 0
        else:  # Nyström rows: the same landmarks and projection, the same bits
            b, _ = gramdist.open_features(str(tmp_path / "all.zarr"))
            assert np.array_equal(b[:120], a)
        assert fs.info(tmp_path / "all.zarr")["from_store"].endswith("train.zarr")
        with pytest.raises(JobError, match="kernel"):
            plan_features(job({"name": "wl", "h": 1}), from_store=str(tmp_path / "train.zarr"))
        shutil.rmtree(tmp_path / "train.zarr")
        shutil.rmtree(tmp_path / "all.zarr")


# ------------------------------------------------------------------------------ lazy datasets
def test_lazy_synthetic_is_the_blocked_collection(mutag):
    kw = {"n_graphs": 250, "n_nodes": [5, 12], "avg_degree": 2.0, "n_labels": 4, "attr_dim": 0, "seed": 3,
          "block_size": 60}
    ds = open_dataset({"synthetic": kw})
    assert isinstance(ds, LazySynthetic) and len(ds) == 250
    full = make_synthetic(**{**kw, "n_nodes": (5, 12)})
    assert np.array_equal(full.graph_ids, np.arange(250))
    chunk = ds[55:130]
    assert isinstance(chunk, GraphChunk) and len(chunk) == 75
    part = chunk.load()
    assert part.checksum() == full[55:130].checksum()
    idx = np.array([249, 3, 61, 3, 120])
    assert ds.take(idx).checksum() == full.take(idx).checksum()
    assert ds.checksum() == open_dataset({"synthetic": dict(kw)}).checksum()
    assert ds.checksum() != open_dataset({"synthetic": {**kw, "seed": 4}}).checksum()
    with pytest.raises(JobError, match="unknown key 'colour'"):
        open_dataset({"synthetic": {**kw, "colour": 1}})
    short = open_dataset({"synthetic": kw, "limit": 100})
    assert len(short) == 100 and short[60:200].load().checksum() == full[60:100].checksum()


def test_features_of_a_lazy_dataset_equal_those_of_the_loaded_one(tmp_path):
    kw = {"n_graphs": 300, "n_nodes": [10, 20], "avg_degree": 2.2, "n_labels": 5, "attr_dim": 0, "seed": 1,
          "block_size": 70}
    with pytest.raises(JobError, match="fit.sample_size"):
        plan_features(job({"name": "wl", "h": 2}, {"synthetic": kw}))
    lazy = validate_job({"dataset": {"synthetic": kw}, "kernel": {"name": "wl", "h": 2},
                         "fit": {"sample_size": 50}, "_job_name": "t"})
    featurize(lazy, tmp_path / "lazy.zarr", chunk_size=64)
    x, y = gramdist.open_features(str(tmp_path / "lazy.zarr"), normalize=False)
    eager = make_synthetic(**{**kw, "n_nodes": (10, 20)})
    from gramdist.kernels.features.wl import WLSubtreeKernel

    f = WLSubtreeKernel(2).features(eager)
    assert np.array_equal(y, eager.y)
    assert np.array_equal(csr_gram(x), csr_gram(f.to_csr(np.unique(f.keys))))
    # a sample_size of at least N fits on all N graphs (no more than the user allowed): the same rows
    whole = validate_job({"dataset": {"synthetic": kw}, "kernel": {"name": "wl", "h": 2},
                          "fit": {"sample_size": 300}, "_job_name": "t"})
    featurize(whole, tmp_path / "whole.zarr", chunk_size=64)
    x_all, _ = gramdist.open_features(str(tmp_path / "whole.zarr"), normalize=False)
    assert np.array_equal(csr_gram(x_all), csr_gram(x))


# ------------------------------------------------------------------------------ evaluation
def test_evaluate_features_svm_and_streamed_sgd(tmp_path, dataset_dir):
    from gramdist.evaluation.linear import evaluate_features
    from gramdist.evaluation.nested_cv import RunOptions
    from gramdist.evaluation.protocols import Protocol

    dataset_dir("MUTAG")
    for h in (1, 3):
        featurize(job({"name": "wl", "h": h}, normalize=True), tmp_path / "grid" / f"h-{h}.zarr")
    protocol = Protocol(folds=5, repeats=1, c_grid=(0.1, 1.0, 10.0))
    res = evaluate_features([str(tmp_path / "grid")], protocol)
    assert res["learner"] == "svm" and len(res["stores"]) == 2 and res["accuracy_mean"] > 75
    assert set(res) >= {"accuracy_mean", "accuracy_std", "fold_accuracies", "selections", "test_graphs"}
    sgd = evaluate_features([str(tmp_path / "grid" / "h-3.zarr")], Protocol(folds=3, repeats=1, c_grid=(1.0, 10.0)),
                            learner="sgd", epochs=20)
    assert sgd["learner"] == "sgd" and sgd["accuracy_mean"] > 70
    # --out: the folds are saved and read back; another learner is another set of folds
    out = tmp_path / "folds"
    first = evaluate_features([str(tmp_path / "grid")], protocol, RunOptions(out=out))
    again = evaluate_features([str(tmp_path / "grid")], protocol, RunOptions(out=out))
    assert first["fold_accuracies"] == res["fold_accuracies"] and first["resumed_folds"] == 0
    assert again["resumed_folds"] == 5 and again["fold_accuracies"] == res["fold_accuracies"]
    other = evaluate_features([str(tmp_path / "grid")], protocol, RunOptions(out=out), learner="sgd", epochs=2)
    assert other["resumed_folds"] == 0


def test_feature_stores_take_no_other_task():
    from gramdist.evaluation.linear import evaluate_features
    from gramdist.evaluation.nested_cv import RunOptions

    with pytest.raises(StoreError, match="linear classifier"):
        evaluate_features(["nowhere.zarr"], options=RunOptions(task="regression"))


def test_hashed_rows_give_the_gram_when_ids_do_not_collide(tmp_path, dataset_dir):
    from gramdist.evaluation.linear import _ChunkReader

    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 2}, normalize=True)
    featurize(j, tmp_path / "f.zarr", chunk_size=50)
    cols = FeatureStore.open(tmp_path / "f.zarr").columns()
    bits = 24
    assert len(np.unique(cols & np.uint64((1 << bits) - 1))) == len(cols)  # no collision at this width
    reader = _ChunkReader(str(tmp_path / "f.zarr"), bits)
    x = sp.vstack([reader.chunk(i) for i in range(reader.grid.n_chunks)]).tocsr()
    assert np.allclose((x @ x.T).toarray(), exact_gram(j).gram, atol=1e-12)  # signs square away


def test_streamed_sgd_learns_a_large_lazy_collection(tmp_path):
    from gramdist.evaluation.linear import evaluate_features
    from gramdist.evaluation.protocols import Protocol

    kw = {"n_graphs": 3000, "n_nodes": [15, 25], "avg_degree": 2.2, "n_labels": 6, "attr_dim": 0, "seed": 0,
          "label_bias": 0.3, "block_size": 1000}
    j = validate_job({"dataset": {"synthetic": kw}, "kernel": {"name": "wl", "h": 1},
                      "fit": {"sample_size": 100}, "gram": {"normalize": True}, "_job_name": "t"})
    featurize(j, tmp_path / "s.zarr", chunk_size=500)
    res = evaluate_features([str(tmp_path / "s.zarr")], Protocol(folds=2, repeats=1, inner_folds=2, c_grid=(1.0,)),
                            learner="sgd", epochs=3)
    assert res["accuracy_mean"] > 80


def test_featurize_job_on_a_cluster_spreads_chunks(tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    j = job({"name": "wl", "h": 3})
    j = j.with_cluster(n_workers=2)
    res = featurize_job(j, out=str(tmp_path / "f.zarr"), request=FeatureRequest(chunk_size=20), context=RunContext(log=lambda m: None))
    assert res.complete and res.chunks_computed == 10 and sum(res.workers.values()) == 10
    assert len(res.workers) == 2
    again = featurize_job(j, out=str(tmp_path / "f.zarr"), request=FeatureRequest(chunk_size=20), context=RunContext(log=lambda m: None))
    assert again.chunks_computed == 0 and again.complete


# ------------------------------------------------------------------------------ command line
def test_features_command_info_verify_and_evaluate(tmp_path, dataset_dir):
    import json

    from test_cli import run_cli

    out = tmp_path / "syn.zarr"
    r = run_cli("features", "jobs/synthetic-wl.yaml", "--out", str(out), "--set", "cluster.n_workers=2",
                "--chunk-size", "64", "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["complete"] and summary["chunks_computed"] == 5 and sum(summary["workers"].values()) == 5
    info = json.loads(run_cli("info", str(out), "--json").stdout)
    assert info["store_kind"] == "features" and info["complete"] and info["nnz"] > 0
    assert "feature store" in run_cli("info", str(out)).stdout
    v = run_cli("verify", str(out))
    assert v.returncode == 0 and "all 5 written chunks match" in v.stdout
    ev = run_cli("evaluate", str(out), "--folds", "3", "--repeats", "1", "--workers", "0", "--json")
    assert ev.returncode == 0, ev.stderr
    res = json.loads(ev.stdout)
    assert res["learner"] == "svm" and res["folds"] == 3 and 0 <= res["accuracy_mean"] <= 100


@pytest.mark.parametrize("args, match", [
    (["features", "jobs/mutag-dm.yaml"], "--nystroem M"),
    (["features", "jobs/mutag-wl.yaml", "--eig-cutoff", "1e-3"], "--eig-cutoff applies to Nyström"),
    (["features", "jobs/mutag-wl.yaml", "--nystroem", "0"], "positive integer"),
    (["features", "jobs/mutag-wl.yaml", "--from", "/nonexistent/f.zarr"], "no such store"),
    (["features", "jobs/mutag-dm.yaml", "--nystroem", "10", "--eig-cutoff", "2"], "--eig-cutoff"),
])
def test_feature_errors_are_one_line_and_exit_2(args, match, dataset_dir):
    from test_cli import run_cli

    dataset_dir("MUTAG")
    r = run_cli(*args)
    assert r.returncode == 2, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("gramdist: error:") and match in lines[0], r.stderr
