"""FeatureTransformer: explicit rows against the Gram, Nyström rows against the CLI's store,
feature stores from Python, scikit-learn's conventions."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.svm import LinearSVC

import gramdist
from gramdist import FeatureTransformer, GramTransformer
from gramdist.engine import store as fs
from gramdist.engine.context import RunContext
from gramdist.engine.executor import InlineExecutor
from gramdist.engine.featurize import (
    compute_features,
    open_sink,
    plan_features,
)
from gramdist.engine.nystroem import DEFAULT_EIG_CUTOFF, LANDMARK_RULES, NystroemSpec
from gramdist.engine.store import FeatureStore
from gramdist.jobs import validate_job
from gramdist.kernels import WLSubtreeKernel

QUIET = {"log": lambda _msg: None}


def cli_store(kernel, path, nystroem=None, normalize=True, **fit):
    """What ``gramdist features`` computes for MUTAG once planned (in this process)."""
    job = validate_job({"dataset": {"name": "MUTAG"}, "kernel": kernel, "fit": {"seed": 0, **fit},
                        "gram": {"normalize": normalize}, "_job_name": "t"})
    plan = plan_features(job, nystroem=nystroem)
    compute_features(InlineExecutor(), plan, open_sink(plan, str(path), overwrite=False), RunContext(log=lambda m: None))
    return str(path)


def dense(x):
    return x.toarray() if sp.issparse(x) else np.asarray(x)


# ------------------------------------------------------------------------------ explicit features
@pytest.mark.parametrize("kernel", [WLSubtreeKernel(h=3), gramdist.kernels.ODDSTKernel(h=2)], ids=["wl", "odd"])
@pytest.mark.parametrize("normalize", [False, True])
def test_explicit_rows_give_the_gram_of_gram_transformer(mutag, dataset_dir, kernel, normalize):
    dataset_dir("MUTAG")
    train, test = mutag[:150], mutag[150:]
    ft = FeatureTransformer(kernel, normalize=normalize)
    x_tr = ft.fit_transform(train)
    x_te = ft.transform(test)
    assert isinstance(x_tr, sp.csr_matrix) and x_tr.dtype == np.float64
    assert x_tr.shape == (150, len(ft.columns_)) and x_te.shape == (38, len(ft.columns_))
    assert ft.columns_.dtype == np.uint64 and np.all(np.diff(ft.columns_.astype(np.float64)) > 0)
    gram = GramTransformer(kernel, normalize=normalize).fit(train).transform(test)  # K(test, train)
    product = (x_tr @ x_te.T).toarray()
    if normalize:  # rows scaled before the product, the Gram divided after it: rounding apart
        assert np.allclose(product, gram.T, rtol=0, atol=1e-12)
    else:
        assert np.array_equal(product, gram.T)
    assert (ft.fit(train).transform(train) != x_tr).nnz == 0  # fit_transform == fit + transform


def test_networkx_graphs_and_features_unseen_at_fit(dataset_dir):
    nx = pytest.importorskip("networkx")

    def chain(atoms, ring=False):
        g = nx.cycle_graph(len(atoms)) if ring else nx.path_graph(len(atoms))
        nx.set_node_attributes(g, dict(enumerate(atoms)), "atom")
        return g

    train = [chain("CCNO"), chain("CNNC", ring=True), chain("OCC"), chain("CCCCO", ring=True)]
    test = [chain("CSC"), chain("NCO"), chain("SS")]  # S never seen at fit
    kernel = WLSubtreeKernel(h=2)
    for normalize in (False, True):
        ft = FeatureTransformer(kernel, node_label="atom", normalize=normalize)
        x_tr, x_te = ft.fit_transform(train), ft.transform(test)
        gram = GramTransformer(kernel, node_label="atom", normalize=normalize).fit(train).transform(test)
        if normalize:
            assert np.allclose((x_tr @ x_te.T).toarray(), gram.T, rtol=0, atol=1e-12)
        else:
            assert np.array_equal((x_tr @ x_te.T).toarray(), gram.T)
    # the test graphs' full feature vectors (columns learned on them too) have more features
    # than their rows over the training columns; what is dropped meets only zero columns
    full = FeatureTransformer(kernel, node_label="atom").fit(train + test)
    x_full = full.transform(test)
    x_te = FeatureTransformer(kernel, node_label="atom").fit(train).transform(test)
    assert x_te.getnnz(axis=1)[2] == 0 and x_full.getnnz(axis=1)[2] > 0  # "SS": nothing seen at fit
    assert np.all(x_te.getnnz(axis=1) < x_full.getnnz(axis=1))
    dropped = np.setdiff1d(full.columns_, FeatureTransformer(kernel, node_label="atom").fit(train).columns_)
    assert len(dropped) > 0
    x_tr_wide = full.transform(train)  # the training rows over the wider columns
    at = np.searchsorted(full.columns_, dropped)
    assert x_tr_wide[:, at].nnz == 0  # every dropped feature is zero in every training row
    # normalised: a test row keeps its full norm's scale, so dropping features leaves norm < 1
    xn = FeatureTransformer(kernel, node_label="atom", normalize=True).fit(train).transform(test)
    norms = np.sqrt(np.asarray(xn.multiply(xn).sum(axis=1)).ravel())
    assert np.all(norms[:2] < 1.0) and norms[2] == 0.0


def test_explicit_rows_equal_the_cli_store(mutag, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    path = cli_store({"name": "wl", "h": 3}, tmp_path / "cli.zarr")
    stored, _ = gramdist.open_features(path)
    ours = FeatureTransformer("wl", kernel_params={"h": 3}, normalize=True).fit_transform(mutag)
    assert (ours != stored).nnz == 0 and np.array_equal(ours.indptr, stored.indptr)


def test_kernel_without_explicit_features_names_the_nystroem_option(mutag, dataset_dir):
    dataset_dir("MUTAG")
    with pytest.raises(ValueError, match=r"kernel dm has no explicit feature vectors: set nystroem=M") as info:
        FeatureTransformer("dm").fit(mutag[:20])
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------ Nyström
@pytest.mark.parametrize("kernel, rule", [({"name": "wl", "h": 3}, "kmeans++"),
                                          ({"name": "dm", "h": 3, "descriptor_sample": 2000}, "uniform")],
                         ids=["wl-kmeans++", "dm-uniform"])
def test_nystroem_rows_equal_the_cli_store_bit_for_bit(mutag, tmp_path, dataset_dir, kernel, rule):
    dataset_dir("MUTAG")
    path = cli_store(kernel, tmp_path / "cli.zarr", nystroem=NystroemSpec(24, rule))
    stored, _ = gramdist.open_features(path)
    name, params = kernel["name"], {k: v for k, v in kernel.items() if k != "name"}
    ft = FeatureTransformer(name, kernel_params=params, nystroem=24, landmarks=rule, normalize=True, seed=0)
    phi = ft.fit_transform(mutag)
    nys = FeatureStore.open(path).read_nystroem()
    assert np.array_equal(ft.nystroem_.landmark_indices, nys.landmark_indices)
    assert np.array_equal(ft.nystroem_.projection, nys.projection)
    assert isinstance(phi, np.ndarray) and phi.shape == stored.shape == (188, ft.n_features_out_)
    assert np.array_equal(phi, stored)
    # new graphs mapped with no refit: each row is the one it has among all the graphs
    assert np.array_equal(ft.transform(mutag[100:130]), stored[100:130])


def test_nystroem_with_every_graph_as_landmark_approximates_the_gram(mutag, dataset_dir):
    dataset_dir("MUTAG")
    exact = GramTransformer("wl", kernel_params={"h": 2}, normalize=True).fit_transform(mutag)
    errors = {}
    for m in (20, 188):
        phi = FeatureTransformer("wl", kernel_params={"h": 2}, nystroem=m, landmarks="uniform",
                                 normalize=True).fit_transform(mutag)
        errors[m] = np.linalg.norm(phi @ phi.T - exact) / np.linalg.norm(exact)
    assert errors[188] < 1e-6 < errors[20] < 0.5


# ------------------------------------------------------------------------------ stores
@pytest.mark.parametrize("nystroem", [None, 16], ids=["explicit", "nystroem"])
def test_store_mode_writes_the_cli_store_and_maps_new_graphs_with_from(mutag, tmp_path, dataset_dir, nystroem):
    dataset_dir("MUTAG")
    train, test = mutag[:120], mutag[120:]
    params = {"kernel_params": {"h": 2}, "nystroem": nystroem, "normalize": True, "chunk_size": 50}
    mem = FeatureTransformer("wl", **params)
    expected_tr, expected_te = mem.fit_transform(train), mem.transform(test)
    ft = FeatureTransformer("wl", store=str(tmp_path / "f.zarr"), **params)
    x_tr = ft.fit_transform(train)
    assert ft.store_ == str(tmp_path / "f.zarr") and FeatureStore.open(ft.store_).root.attrs["complete"]
    assert np.array_equal(dense(x_tr), dense(expected_tr))
    assert np.array_equal(dense(gramdist.open_features(ft.store_)[0]), dense(expected_tr))
    x_te = ft.transform(test)
    siblings = sorted(p.name for p in tmp_path.iterdir() if ".transform-" in p.name and p.suffix == ".zarr")
    assert len(siblings) == 1 and siblings[0].startswith("f.transform-")
    assert np.array_equal(dense(x_te), dense(expected_te))
    info = fs.info(tmp_path / siblings[0])
    assert info["complete"] and info["from_store"] == str((tmp_path / "f.zarr").resolve())
    # a second fit finds the store complete and reads it back: same bits
    assert np.array_equal(dense(FeatureTransformer("wl", store=str(tmp_path / "f.zarr"), **params)
                                .fit_transform(train)), dense(expected_tr))
    with pytest.raises(gramdist.StoreError, match="different job"):
        FeatureTransformer("wl", store=str(tmp_path / "f.zarr"), **{**params, "normalize": False}).fit(train)


# ------------------------------------------------------------------------------ scikit-learn
def test_pipeline_with_linear_svc_and_grid_search(mutag, dataset_dir):
    dataset_dir("MUTAG")
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    pipe = Pipeline([("feat", FeatureTransformer(WLSubtreeKernel(h=1), normalize=True)),
                     ("svm", LinearSVC(C=1.0, max_iter=20000))])
    search = GridSearchCV(pipe, {"feat__kernel__h": [0, 3], "svm__C": [0.01, 10.0]}, cv=cv, error_score="raise")
    search.fit(mutag, mutag.y)
    assert search.best_params_["feat__kernel__h"] == 3 and search.best_score_ > 0.8
    assert search.predict(mutag[:10]).shape == (10,)
    nys = GridSearchCV(Pipeline([("feat", FeatureTransformer("wl", normalize=True, nystroem=40)),
                                 ("svm", LinearSVC(max_iter=20000))]),
                       {"feat__kernel_params": [{"h": 3}], "feat__landmarks": ["uniform", "kmeans++"]}, cv=cv)
    nys.fit(mutag, mutag.y)
    assert nys.best_score_ > 0.75


def test_sklearn_conventions_params_clone_pickle_and_not_fitted(mutag, dataset_dir):
    dataset_dir("MUTAG")
    ft = FeatureTransformer(WLSubtreeKernel(h=2), nystroem=10, normalize=True)
    params = ft.get_params(deep=True)
    assert params["kernel__h"] == 2 and params["nystroem"] == 10 and params["landmarks"] == "kmeans++"
    assert params["eig_cutoff"] == DEFAULT_EIG_CUTOFF  # the CLI's default, repeated without importing Zarr
    copy = clone(ft).set_params(kernel__h=1, nystroem=None)
    assert copy.kernel.h == 1 and ft.kernel.h == 2 and ft.nystroem == 10
    with pytest.raises(NotFittedError):
        FeatureTransformer().transform(mutag)
    assert ft.fit(mutag[:60]) is ft and ft.kernel_ is not ft.kernel
    back = pickle.loads(pickle.dumps(ft))
    assert np.array_equal(back.transform(mutag[60:90]), ft.transform(mutag[60:90]))
    assert len(ft.get_feature_names_out()) == ft.n_features_out_ == ft.nystroem_.rank
    explicit = FeatureTransformer("wl", kernel_params={"h": 1}).fit(mutag[:60])
    names = explicit.get_feature_names_out()
    assert len(names) == len(explicit.columns_) and names[0] == f"f{int(explicit.columns_[0]):016x}"
    assert explicit.nystroem_ is None and explicit.store_ is None


@pytest.mark.parametrize("params, match", [
    ({"nystroem": 0}, "nystroem must be a positive integer"),
    ({"nystroem": 5, "landmarks": "leverage"}, "landmarks must be one of"),
    ({"nystroem": 5, "eig_cutoff": 1.0}, "eig_cutoff"),
    ({"chunk_size": -3}, "chunk_size"),
    ({"sample_size": 0}, "sample_size"),
])
def test_bad_parameters_fail_at_fit_with_the_name(mutag, dataset_dir, params, match):
    dataset_dir("MUTAG")
    with pytest.raises(ValueError, match=match):
        FeatureTransformer("wl", **params).fit(mutag[:10])


def test_the_transformer_shares_the_engines_nystroem_settings_and_imports_no_zarr():
    import subprocess
    import sys

    from gramdist import feature_transformer

    assert feature_transformer.LANDMARK_RULES is LANDMARK_RULES  # one definition, Zarr-free
    assert "FeatureTransformer" in gramdist.__all__
    code = ("import sys, gramdist.feature_transformer\n"
            "print([m for m in ('zarr', 'dask', 'distributed') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_client_gives_the_same_bits_as_this_process(mutag, dataset_dir):
    from distributed import Client

    dataset_dir("MUTAG")
    inline = {n: FeatureTransformer("wl", kernel_params={"h": 2}, nystroem=n, chunk_size=40, in_process=True)
              for n in (None, 12)}
    expected = {n: ft.fit(mutag[:100]).transform(mutag[100:]) for n, ft in inline.items()}
    with Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as client:
        for n, want in expected.items():
            ft = FeatureTransformer("wl", kernel_params={"h": 2}, nystroem=n, chunk_size=40, client=client)
            got = ft.fit(mutag[:100]).transform(mutag[100:])
            assert np.array_equal(dense(got), dense(want))


def test_fewer_landmarks_than_asked_is_a_note(mutag, dataset_dir):
    dataset_dir("MUTAG")
    ft = FeatureTransformer("wl", kernel_params={"h": 2}, nystroem=500, sample_size=30).fit(mutag)
    assert ft.nystroem_.attrs["m"] <= 30 and ft.n_features_out_ <= 30
    assert any("500 landmarks asked" in note for note in ft.notes_)
