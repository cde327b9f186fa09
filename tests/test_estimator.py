"""GramTransformer and compute_gram: scikit-learn's conventions, the CLI's bits, where it runs."""

from __future__ import annotations

import pickle
import sys

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.svm import SVC

import gramdist
from gramdist import GramTransformer, compute_gram
from gramdist.datasets import make_synthetic
from gramdist.engine.runner import run_job
from gramdist.engine.store import GramStore, open_gram, verify
from gramdist.jobs import validate_job
from gramdist.kernels import ODDSTKernel, PowerKernel, WLSubtreeKernel
from gramdist.kernels.sparse import dot


def wl_reference(rows, cols, h, normalize):
    """K(rows, cols) of the WL kernel by its definition: dot products of count features."""
    k = WLSubtreeKernel(h)
    fr, fc = k.features(rows), k.features(cols)
    gram = dot(fr, fc)
    if normalize:
        gram = gram / np.sqrt(np.diag(dot(fr, fr))[:, None] * np.diag(dot(fc, fc))[None, :])
    return gram


@pytest.fixture(scope="module")
def small():
    return make_synthetic(n_graphs=40, n_nodes=(5, 12), avg_degree=2.5, n_labels=4, attr_dim=2, seed=7)


def test_fit_transform_is_the_cli_store_bit_for_bit(mutag, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    job = validate_job({"dataset": {"name": "MUTAG"}, "kernel": {"name": "wl", "h": 3},
                        "gram": {"tile_size": 64, "normalize": True}, "cluster": {"n_workers": 1}})
    stored = open_gram(run_job(job, out=str(tmp_path / "cli.zarr")).store)[0]
    K = GramTransformer(WLSubtreeKernel(h=3), normalize=True).fit_transform(mutag)
    assert isinstance(K, np.ndarray) and K.dtype == np.float64 and K.shape == (188, 188)
    assert np.array_equal(K, stored)
    raw = GramTransformer("wl", kernel_params={"h": 3}).fit_transform(mutag)
    assert np.array_equal(raw, wl_reference(mutag, mutag, 3, False))


@pytest.mark.parametrize("kernel", [WLSubtreeKernel(h=2), ODDSTKernel(h=2), PowerKernel(k=2)],
                         ids=["wl", "odd", "power"])
@pytest.mark.parametrize("normalize", [False, True])
def test_fit_then_transform_equals_fit_transform_bitwise(small, kernel, normalize):
    a = GramTransformer(kernel, normalize=normalize, tile_size=16).fit(small).transform(small)
    b = GramTransformer(kernel, normalize=normalize, tile_size=16).fit_transform(small)
    assert np.array_equal(a, b)
    assert np.array_equal(b, b.T)


def test_transform_is_k_new_train_with_each_sides_own_diagonal(mutag, dataset_dir):
    dataset_dir("MUTAG")
    train, new = mutag[:120], mutag[120:]
    for normalize in (False, True):
        gt = GramTransformer(WLSubtreeKernel(h=2), normalize=normalize).fit(train)
        K = gt.transform(new)
        assert K.shape == (68, 120)
        np.testing.assert_allclose(K, wl_reference(new, train, 2, normalize), rtol=1e-15, atol=0)
        # the same rows whatever the tile size and whatever else is transformed with them
        other = GramTransformer(WLSubtreeKernel(h=2), normalize=normalize, tile_size=7).fit(train)
        assert np.array_equal(other.transform(new[10:30]), K[10:30])


def test_networkx_graphs_views_and_batches_give_one_gram(mutag, dataset_dir):
    nx = pytest.importorskip("networkx")
    from gramdist.datasets import to_networkx

    dataset_dir("MUTAG")
    batch = mutag[:60]
    graphs = to_networkx(batch)
    by_batch = GramTransformer(WLSubtreeKernel(h=3), normalize=True).fit_transform(batch)
    assert np.array_equal(GramTransformer(WLSubtreeKernel(h=3), normalize=True).fit_transform(graphs), by_batch)
    views = [batch[i] for i in range(len(batch))]  # what cross-validation makes of a GraphBatch
    assert np.array_equal(GramTransformer(WLSubtreeKernel(h=3), normalize=True).fit_transform(views), by_batch)
    assert isinstance(graphs[0], nx.Graph)


def test_string_labels_keep_their_codes_from_fit_to_transform():
    nx = pytest.importorskip("networkx")

    def chain(labels):
        g = nx.path_graph(len(labels))
        nx.set_node_attributes(g, dict(enumerate(labels)), "atom")
        return g

    train = [chain("CCNO"), chain("CNNC"), chain("OCC")]
    new = [chain("COC"), chain("OO")]  # no N: by themselves "O" would be coded 1, not 2
    gt = GramTransformer(WLSubtreeKernel(h=1), node_label="atom").fit(train)
    as_ints = {"C": 0, "N": 1, "O": 2}

    def coded(gs):
        out = []
        for g in gs:
            h = g.copy()
            nx.set_node_attributes(h, {v: as_ints[d["atom"]] for v, d in g.nodes(data=True)}, "atom")
            out.append(h)
        return out

    expected = GramTransformer(WLSubtreeKernel(h=1), node_label="atom").fit(coded(train)).transform(coded(new))
    assert np.array_equal(gt.transform(new), expected)
    assert gt.label_codes_ == {"node label": as_ints}


def test_sklearn_conventions_clone_params_and_not_fitted(mutag, dataset_dir):
    dataset_dir("MUTAG")
    gt = GramTransformer(WLSubtreeKernel(h=3), normalize=True)
    params = gt.get_params(deep=True)
    assert params["kernel__h"] == 3 and params["normalize"] is True
    copy = clone(gt)
    assert copy.kernel is not gt.kernel and copy.kernel.get_params() == {"h": 3}
    copy.set_params(kernel__h=1, seed=3)
    assert copy.kernel.h == 1 and gt.kernel.h == 3 and copy.seed == 3
    with pytest.raises(ValueError, match="invalid parameter 'hh'"):
        copy.set_params(kernel__hh=1)
    with pytest.raises(NotFittedError):
        GramTransformer().transform(mutag)
    # the user's kernel is never modified or fitted in place
    gt.fit(mutag[:20])
    assert gt.kernel_ is not gt.kernel and not hasattr(gt.kernel, "state_")


def test_grid_search_over_a_kernel_parameter_and_c(mutag, dataset_dir):
    dataset_dir("MUTAG")
    pipe = Pipeline([("gram", GramTransformer(WLSubtreeKernel(h=1), normalize=True)),
                     ("svc", SVC(kernel="precomputed"))])
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    search = GridSearchCV(pipe, {"gram__kernel__h": [0, 3], "svc__C": [0.01, 10.0]}, cv=cv, error_score="raise")
    search.fit(mutag, mutag.y)
    assert search.best_params_ == {"gram__kernel__h": 3, "svc__C": 10.0}
    assert search.best_score_ > 0.8
    # the same search on a kernel given by name
    by_name = GridSearchCV(Pipeline([("gram", GramTransformer("wl", normalize=True)), ("svc", SVC(kernel="precomputed"))]),
                           {"gram__kernel_params": [{"h": 0}, {"h": 3}], "svc__C": [0.01, 10.0]}, cv=cv)
    by_name.fit(mutag, mutag.y)
    assert by_name.best_params_["gram__kernel_params"] == {"h": 3}
    assert by_name.best_score_ == search.best_score_


def test_pickled_fitted_transformer_transforms_the_same(mutag, dataset_dir):
    dataset_dir("MUTAG")
    gt = GramTransformer(WLSubtreeKernel(h=2), normalize=True).fit(mutag[:100])
    back = pickle.loads(pickle.dumps(gt))
    assert np.array_equal(back.transform(mutag[100:]), gt.transform(mutag[100:]))


def test_bad_parameters_fail_at_fit_with_the_name(mutag, dataset_dir):
    dataset_dir("MUTAG")
    with pytest.raises(ValueError, match="tile_size"):
        GramTransformer(tile_size=0).fit(mutag)
    with pytest.raises(ValueError, match="kernel_params apply to a kernel given by name"):
        GramTransformer(WLSubtreeKernel(2), kernel_params={"h": 3}).fit(mutag)
    with pytest.raises(gramdist.JobError, match="parameter h must be an integer"):
        GramTransformer(WLSubtreeKernel(h=-1)).fit(mutag)
    with pytest.raises(gramdist.JobError, match="unknown kernel 'nope'"):
        GramTransformer("nope").fit(mutag)
    with pytest.raises(ValueError, match=r"y has shape \(3,\)"):
        GramTransformer().fit(mutag, [0, 1, 0])


# scikit-learn's common checks. check_estimator(GramTransformer()) itself runs only
# check_estimator_cloneable: the input tags say X is no 2-D array, so it skips the rest. The ones
# below do not feed X as a numeric matrix and apply as they are. The others fit on random float
# arrays (fit_score_takes_y, estimators_overwrite_params, dont_overwrite_parameters,
# estimators_fit_returns_self, readonly_memmap_input, n_features_in*, dtypes, complex_data,
# dtype_object, empty_data_messages, pipeline_consistency, nan_inf, sparse_*, estimators_pickle,
# f_contiguous_array_estimator, transformer_data_not_an_array, transformer_general,
# methods_sample_order_invariance, methods_subset_invariance, fit2d_*, dict_unchanged,
# fit_idempotent, fit_check_is_fitted): array validation has no meaning for graphs, and
# GramTransformer refuses a numeric array with an InputError (tested below). Those that test
# behaviour are redone on graphs in test_sklearn_checks_redone_on_graphs.
APPLICABLE_CHECKS = ("check_parameters_default_constructible", "check_no_attributes_set_in_init",
                     "check_get_params_invariance", "check_set_params", "check_estimator_repr",
                     "check_estimator_cloneable", "check_estimator_tags_renamed", "check_valid_tag_types",
                     "check_mixin_order", "check_do_not_raise_errors_in_init_or_set_params",
                     "check_estimators_unfitted", "check_transformers_unfitted", "check_transformer_n_iter",
                     "check_fit1d")


@pytest.mark.parametrize("check_name", APPLICABLE_CHECKS)
def test_sklearn_estimator_checks_that_apply(check_name):
    from sklearn.utils import estimator_checks

    check = getattr(estimator_checks, check_name)
    check(type(GramTransformer()).__name__, GramTransformer())


def test_sklearn_checks_redone_on_graphs(small):
    """fit returns self and leaves the parameters alone, transform leaves the estimator alone,
    results do not depend on the order or the company of the transformed graphs, refits are
    idempotent, and the fitted estimator passes check_is_fitted."""
    from sklearn.utils.validation import check_is_fitted

    gt = GramTransformer(WLSubtreeKernel(h=2), normalize=True, tile_size=8)
    params = clone(gt).get_params(deep=True)
    assert gt.fit(small[:30]) is gt
    check_is_fitted(gt)
    after = gt.get_params(deep=True)
    assert {k: v for k, v in after.items() if k != "kernel"} == {k: v for k, v in params.items() if k != "kernel"}
    before = dict(gt.__dict__)
    K = gt.transform(small[30:])
    assert gt.__dict__.keys() == before.keys() and all(gt.__dict__[k] is before[k] for k in before)
    order = np.random.default_rng(0).permutation(10)
    assert np.array_equal(gt.transform(small[30:][order]), K[order])  # sample order invariance
    assert np.array_equal(gt.transform(small[33:36]), K[3:6])  # subset invariance
    assert np.array_equal(clone(gt).fit(small[:30]).transform(small[30:]), K)  # idempotent refit


def test_numeric_arrays_are_refused_as_graphs():
    with pytest.raises(gramdist.InputError, match="cannot read a ndarray as a graph"):
        GramTransformer().fit(np.zeros((4, 3)))


def test_fit_transform_and_transform_twice_idempotent(small):
    gt = GramTransformer(ODDSTKernel(h=2), normalize=True)
    first = gt.fit_transform(small[:25])
    again = gt.fit_transform(small[:25])
    assert np.array_equal(first, again)
    assert np.array_equal(gt.transform(small[25:]), gt.transform(small[25:]))


def test_small_inputs_run_in_process_without_loading_dask_or_zarr(tmp_path):
    import subprocess

    code = ("import sys, numpy as np, gramdist\n"
            "from gramdist.datasets import make_synthetic\n"
            "g = make_synthetic(n_graphs=30, n_nodes=(4, 9), avg_degree=2, n_labels=3, seed=1)\n"
            "K = gramdist.GramTransformer('wl', kernel_params={'h': 2}).fit_transform(g)\n"
            "assert K.shape == (30, 30)\n"
            "loaded = [m for m in ('distributed', 'dask', 'zarr') if type(sys.modules.get(m)).__name__ == 'module']\n"
            "print(loaded)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"  # imported lazily, never executed: no Dask, no Zarr in process


def test_active_client_and_shared_cluster(small):
    from distributed import Client, LocalCluster

    from gramdist.engine import cluster
    from gramdist.engine.executor import DaskExecutor, InlineExecutor
    from gramdist.engine.placement import Placement
    from gramdist.jobs import ClusterSpec

    def executor_for(n, **kw):
        with Placement(shared=True, **kw).executor(n) as ex:
            return ex

    expected = GramTransformer(WLSubtreeKernel(h=2), normalize=True, in_process=True).fit_transform(small)
    assert isinstance(executor_for(100), InlineExecutor)
    with LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0", processes=False) as lc, \
            Client(lc) as client:
        ex = executor_for(100)
        assert isinstance(ex, DaskExecutor) and ex.client is client  # the active client wins
        K = GramTransformer(WLSubtreeKernel(h=2), normalize=True).fit_transform(small)
        assert np.array_equal(K, expected)
        assert isinstance(executor_for(100, in_process=True), InlineExecutor)
    try:
        first = cluster.shared_client(ClusterSpec(n_workers=1))
        gt = GramTransformer(WLSubtreeKernel(h=2), normalize=True, in_process=False)
        assert np.array_equal(gt.fit_transform(small), expected)
        assert cluster.shared_client() is first  # started once, reused: no second start-up
        assert np.array_equal(gt.transform(small[:5]), expected[:5])
        assert executor_for(10**9).client is first  # big Grams go to it too
    finally:
        cluster.close_shared_client()


def test_clone_shares_a_live_client():
    class FakeClient:  # deepcopy of a real Client is neither cheap nor meaningful
        def __deepcopy__(self, memo):
            raise AssertionError("client deep-copied")

    client = FakeClient()
    copy = clone(GramTransformer(client=client))
    assert copy.client is client
    assert pickle.loads(pickle.dumps(GramTransformer(client=client))).client is None


def test_store_mode_writes_like_gramdist_run_and_returns_dask(mutag, tmp_path, dataset_dir):
    import dask.array as da

    from gramdist.engine.store import StoreLock
    from gramdist.engine.store import info as store_info

    dataset_dir("MUTAG")
    in_memory = GramTransformer(WLSubtreeKernel(h=3), normalize=True).fit(mutag[:150])
    path = tmp_path / "train.zarr"
    gt = GramTransformer(WLSubtreeKernel(h=3), normalize=True, store=str(path), tile_size=64)
    K = gt.fit_transform(mutag[:150], mutag.y[:150])
    assert isinstance(K, da.Array) and K.chunksize == (64, 64)
    assert np.array_equal(K.compute(), in_memory.transform(mutag[:150]))
    info = store_info(path)
    assert info["complete"] and info["symmetric"] and info["tiles_total"] == 6 and not info["needs_upgrade"]
    assert verify(path)["damaged"] == [] and not (tmp_path / "train.zarr.lock").exists()
    assert np.array_equal(open_gram(path)[1], mutag.y[:150])  # y reaches the store, for `evaluate`
    T = gt.transform(mutag[150:])
    assert isinstance(T, da.Array) and T.shape == (38, 150)
    assert np.array_equal(T.compute(), in_memory.transform(mutag[150:]))
    (written,) = tmp_path.glob("train.transform-*.zarr")
    assert store_info(written)["complete"] and store_info(written)["shape"] == [38, 150]
    # resumable: a damaged tile, unmarked by `verify --repair`, is recomputed by the next call alone
    chunk = path / "gram" / "c" / "0" / "1"
    untouched = path / "gram" / "c" / "2" / "2"
    stamp = untouched.stat().st_mtime_ns
    chunk.unlink()
    assert verify(path, repair=True)["damaged"] == [[0, 1]]
    again = GramTransformer(WLSubtreeKernel(h=3), normalize=True, store=str(path), tile_size=64)
    assert np.array_equal(again.fit_transform(mutag[:150], mutag.y[:150]).compute(), K.compute())
    assert chunk.exists() and untouched.stat().st_mtime_ns == stamp
    # locked: a store another writer holds is refused, nothing written
    with StoreLock(path, log=lambda m: None):
        with pytest.raises(gramdist.StoreError, match="lock"):
            GramTransformer(WLSubtreeKernel(h=3), normalize=True, store=str(path), tile_size=64).fit_transform(
                mutag[:150], mutag.y[:150])
    # another computation into the same store is refused unless overwrite=True
    with pytest.raises(gramdist.StoreError, match="different job"):
        GramTransformer(WLSubtreeKernel(h=2), store=str(path), tile_size=64).fit_transform(mutag[:150])
    GramTransformer(WLSubtreeKernel(h=2), store=str(path), tile_size=64, overwrite=True).fit_transform(mutag[:150])


def test_compute_gram_shortcut(mutag, tmp_path, dataset_dir):
    dataset_dir("MUTAG")
    K = compute_gram(mutag, kernel="wl", h=2, normalize=True)
    assert np.array_equal(K, GramTransformer(WLSubtreeKernel(h=2), normalize=True).fit_transform(mutag))
    stored = compute_gram(mutag, kernel="wl", h=2, normalize=True, out=str(tmp_path / "k.zarr"), tile_size=50)
    assert np.array_equal(stored.compute(), K)
    assert np.array_equal(compute_gram(mutag, WLSubtreeKernel(h=2), normalize=True), K)
    with pytest.raises(ValueError, match="unknown parameter"):
        compute_gram(mutag, WLSubtreeKernel(h=2), h=3)


def test_grid_search_over_mlg_eta(small):
    from gramdist.kernels import MLGKernel

    y = np.arange(len(small)) % 2
    search = GridSearchCV(Pipeline([("gram", GramTransformer(MLGKernel(levels=2, n_samples=10), normalize=True)),
                                    ("svc", SVC(kernel="precomputed"))]),
                          {"gram__kernel__eta": [0.1, 1.0], "svc__C": [1.0, 10.0]}, cv=3, error_score="raise")
    search.fit(small, y)
    assert set(search.cv_results_["param_gram__kernel__eta"]) == {0.1, 1.0}
    assert search.best_estimator_.named_steps["gram"].kernel_.eta == search.best_params_["gram__kernel__eta"]


def test_every_kernel_clones_as_a_nested_estimator():
    from gramdist.kernels import KERNELS, kernel_class

    for name in KERNELS:
        kernel = kernel_class(name)()
        copy = clone(GramTransformer(kernel))
        assert copy.kernel is not kernel and copy.kernel.get_params() == kernel.get_params(), name
        assert f"kernel__{kernel.param_names()[0]}" in copy.get_params(deep=True), name


def test_every_kernel_takes_numpy_numbers_for_its_numeric_parameters(tmp_path):
    """A parameter picked from a NumPy grid (``np.int64(3)``, ``np.float32(0.5)``) is the number it
    holds: every kernel accepts it wherever it accepts the Python number, refuses a bool for an
    integer as before, and computes the same Gram with it."""
    import inspect

    from gramdist.kernels import KERNELS, kernel_class, make_kernel

    checked = 0
    for name in KERNELS:
        for p in inspect.signature(kernel_class(name).__init__).parameters.values():
            if isinstance(p.default, bool) or not isinstance(p.default, (int, float)):
                continue
            value = np.int64(p.default) if isinstance(p.default, int) else np.float32(p.default)
            make_kernel(name, **{p.name: value})  # raises JobError if refused
            checked += 1
    assert checked >= 40
    with pytest.raises(gramdist.JobError, match="parameter h must be an integer"):
        make_kernel("wl", h=True)
    graphs = gramdist.datasets.load_dataset("MUTAG")[:12]
    for name, param, value in (("wl", "h", 3), ("pyramid_match", "L", 3), ("nh", "bits", 32)):
        plain = GramTransformer(kernel=name, kernel_params={param: value}).fit_transform(graphs)
        numpy = GramTransformer(kernel=name, kernel_params={param: np.int64(value)}).fit_transform(graphs)
        np.testing.assert_array_equal(numpy, plain, err_msg=name)
        instance = GramTransformer(kernel_class(name)(**{param: np.int64(value)})).fit(graphs)
        np.testing.assert_array_equal(instance.transform(graphs), plain, err_msg=name)
        assert type(instance.kernel_.get_params()[param]) is int, name  # recorded as plain JSON
    core = make_kernel("core", base={"name": "wl", "h": np.int64(2)})
    assert type(core.get_params()["base"]["h"]) is int
    store = tmp_path / "h3.zarr"
    GramTransformer(kernel="wl", kernel_params={"h": np.int64(3)}, store=str(store)).fit_transform(graphs)
    assert GramStore.open(store).kernel == {"name": "wl", "params": {"h": 3}}


def test_integer_parameters_share_one_check_and_one_message():
    """``kernels.base.check_int``: bounds inclusive, no upper bound when ``hi`` is None, None only
    where optional, a bool or a float never an integer, and the message names the kernel, the
    parameter, the range and the value given."""
    from gramdist.kernels import make_kernel
    from gramdist.kernels.base import check_int

    check_int(0, "k", "p", 0, 100)
    check_int(np.int64(100), "k", "p", 0, 100)
    check_int(10**9, "k", "p", 1)
    check_int(None, "k", "p", 1, optional=True)
    for value, hi, optional, message in (
        (101, 100, False, "kernel k: parameter p must be an integer in 0..100, got 101"),
        (-1, None, False, "kernel k: parameter p must be an integer >= 0, got -1"),
        (True, 100, False, "kernel k: parameter p must be an integer in 0..100, got True"),
        (2.0, None, True, "kernel k: parameter p must be null or an integer >= 0, got 2.0"),
        (None, None, False, "kernel k: parameter p must be an integer >= 0, got None"),
        ("3", 100, False, "kernel k: parameter p must be an integer in 0..100, got '3'"),
    ):
        with pytest.raises(gramdist.JobError) as err:
            check_int(value, "k", "p", 0, hi, optional=optional)
        assert str(err.value) == message
    # through the kernels: the same message whichever kernel asks (DM's said no value before)
    for name, param, value, span in (("dm", "h", -1, ">= 0"), ("wl", "h", 101, "in 0..100"),
                                     ("dm", "fit_threads", 0, "null or an integer >= 1"),
                                     ("graphlet", "n_samples", 0, "null or an integer >= 1")):
        with pytest.raises(gramdist.JobError, match=f"kernel {name}: parameter {param} must be .*{span}, "
                                                    f"got {value}$"):
            make_kernel(name, **{param: value})


def test_real_parameters_share_one_check_and_one_message():
    """``kernels.base.check_real``: open and closed bounds, one bound or none, None only where
    optional, infinity and NaN refused even without a bound (matching's ``gamma`` and
    ``nca_lambda`` took ``inf`` before), and one message shape for every kernel."""
    from gramdist.kernels import make_kernel
    from gramdist.kernels.base import check_real

    check_real(0, "k", "p", 0, 1)
    check_real(np.float32(1.0), "k", "p", 0, 1)
    check_real(1e-300, "k", "p", 0, lo_open=True)
    check_real(-5, "k", "p")
    check_real(None, "k", "p", 0, lo_open=True, optional=True)
    for value, bounds, message in (
        (0, dict(lo=0, lo_open=True), "must be a finite number > 0, got 0"),
        (-0.5, dict(lo=0), "must be a finite number >= 0, got -0.5"),
        (1.0, dict(lo=0, hi=1, hi_open=True), "must be a number in [0, 1), got 1.0"),
        (0.0, dict(lo=0, hi=1, lo_open=True), "must be a number in (0, 1], got 0.0"),
        (2, dict(hi=1), "must be a finite number <= 1, got 2"),
        (float("inf"), {}, "must be a finite number, got inf"),
        (float("nan"), dict(lo=0, hi=1), "must be a number in [0, 1], got nan"),
        (10**400, dict(lo=0), "must be a finite number >= 0, got " + str(10**400)),
        (True, dict(lo=0), "must be a finite number >= 0, got True"),
        ("1", dict(lo=0), "must be a finite number >= 0, got '1'"),
        (None, dict(lo=0, lo_open=True), "must be a finite number > 0, got None"),
        ([1], dict(lo=0, lo_open=True, optional=True), "must be null or a finite number > 0, got [1]"),
    ):
        with pytest.raises(gramdist.JobError) as err:
            check_real(value, "k", "p", **bounds)
        assert str(err.value) == f"kernel k: parameter p {message}"
    # through the kernels: the same message whichever kernel asks
    for name, param, value, span in (("dm", "eta", 1.5, r"a number in \[0, 1\]"),
                                     ("random_walk", "lam", 0, "a finite number > 0"),
                                     ("csm", "gamma", float("inf"), "a finite number > 0"),
                                     ("matching", "gamma", float("inf"), "null or a finite number > 0"),
                                     ("svm_theta", "rho_margin", 0, r"a number in \(0, 1\]"),
                                     ("graphlet", "delta", 1, r"a number in \(0, 1\)")):
        with pytest.raises(gramdist.JobError, match=f"kernel {name}: parameter {param} must be {span}, "
                                                    f"got {value}$"):
            make_kernel(name, **{param: value})
    with pytest.raises(gramdist.JobError, match="parameter nca_lambda must be a finite number >= 0"):
        make_kernel("matching", nca_lambda=[0.1, float("inf")])


def test_later_params_are_the_defaults_they_were_added_with():
    """Every parameter a kernel declares in ``later_params`` exists, its declared value is its
    constructor default (the kernel from before it), and a kernel at its defaults records none
    of them in a store; set to another value, it is recorded."""
    import inspect

    from gramdist.kernels import KERNELS, kernel_class

    declared = 0
    for name in KERNELS:
        cls = kernel_class(name)
        defaults = {p.name: p.default for p in inspect.signature(cls.__init__).parameters.values()}
        for param, value in cls.later_params.items():
            declared += 1
            assert param in defaults and defaults[param] == value, (name, param)
            assert param not in cls().recorded_params(), (name, param)
        assert set(cls().recorded_params()) == set(cls().get_params()) - set(cls.later_params), name
    assert declared >= 3  # sp_attr's h, propagation_attr's with_labels and label_w
    assert kernel_class("sp_attr")(h=2).recorded_params()["h"] == 2


def test_front_ends_weigh_nodes_by_the_kernel_like_the_cli(monkeypatch):
    """GramTransformer and FeatureTransformer ask the placement with their graphs' nodes times
    the kernel's ``node_weight``, as ``gramdist run`` does (Lovász θ: 100 per node)."""
    from gramdist import FeatureTransformer
    from gramdist.engine.placement import Placement

    asked = []
    runs_here = Placement.runs_here

    def spy(self, n_entries, n_nodes=0):
        asked.append(n_nodes)
        return runs_here(self.__class__(in_process=True), n_entries, n_nodes)

    monkeypatch.setattr(Placement, "runs_here", spy)
    graphs = make_synthetic(n_graphs=12, n_nodes=(5, 9), avg_degree=2, n_labels=3, seed=3)
    GramTransformer(kernel="lovasz_theta", kernel_params={"n_samples": 4}).fit_transform(graphs)
    assert asked and set(asked) == {100 * graphs.n_nodes}
    asked.clear()
    FeatureTransformer(kernel="wl").fit_transform(graphs)
    assert asked and set(asked) == {graphs.n_nodes // 2}  # WL: one linear pass, half a node each
    asked.clear()
    FeatureTransformer(kernel="sp").fit_transform(graphs)
    assert asked and set(asked) == {graphs.n_nodes}
