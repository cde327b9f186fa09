"""Nested CV: selection of store and C inside the training folds only."""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import replace

import numpy as np
import pytest

from gramdist.engine.store import GramStore
from gramdist.errors import StoreError
from gramdist.evaluation import nested_cv
from gramdist.evaluation.nested_cv import Fold, FoldSetup, RunOptions, evaluate, outer_fold
from gramdist.evaluation.protocols import Protocol


def make_store(path, k, y, checksum="same", complete=True):
    from storeutil import matrix_store

    return matrix_store(path, k, y, attrs={"dataset_checksum": checksum}, complete=complete)


def informative_and_noise(n=80, seed=0):
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1], n // 2)
    x_good = (y[:, None] * 2.0 - 1.0) + 0.3 * rng.standard_normal((n, 3))
    x_noise = rng.standard_normal((n, 3))
    return y, x_good @ x_good.T, x_noise @ x_noise.T


def test_separable_kernel_scores_perfectly(tmp_path):
    y, good, _ = informative_and_noise()
    s = make_store(tmp_path / "good.zarr", good, y)
    res = evaluate([s], Protocol(folds=4, repeats=2), RunOptions(seed=0))
    assert res["accuracy_mean"] == 100.0 and res["accuracy_std"] == 0.0
    assert np.array(res["fold_accuracies"]).shape == (2, 4)


def test_store_selection_prefers_informative_kernel(tmp_path):
    y, good, noise = informative_and_noise()
    folder = tmp_path / "grid"
    folder.mkdir()
    make_store(folder / "a-noise.zarr", noise, y)
    make_store(folder / "b-good.zarr", good, y)
    res = evaluate([str(folder)], Protocol(folds=4, repeats=1), RunOptions(seed=0))
    assert len(res["stores"]) == 2
    assert all(sel["store"].endswith("b-good.zarr") for sel in res["selections"])
    assert res["accuracy_mean"] > 95


def test_selection_never_sees_the_test_fold():
    # A kernel that is perfect on the test fold only and useless on the training part must not
    # be chosen: the inner CV sees only training rows.
    rng = np.random.default_rng(1)
    n = 60
    y = np.repeat([0, 1], n // 2)
    test = np.arange(0, n, 5)
    train = np.setdiff1d(np.arange(n), test)
    sign = y * 2.0 - 1.0
    cheat = rng.standard_normal((n, n)) * 0.01
    cheat = cheat @ cheat.T
    cheat[np.ix_(test, test)] += np.outer(sign[test], sign[test])
    x = sign[:, None] + 0.5 * rng.standard_normal((n, 2))
    honest = x @ x.T
    import gramdist.evaluation.nested_cv as ev

    ev._load.cache_clear()
    original = ev._load
    ev._load = lambda p: {"cheat": cheat, "honest": honest}[p]
    try:
        res = outer_fold(FoldSetup(("cheat", "honest"), y, Protocol(inner_folds=5, c_grid=(0.1, 1.0, 10.0))),
                         Fold(0, 0, train, test, inner_seed=0))
    finally:
        ev._load = original
    assert res["store"] == "honest"


def test_incompatible_or_incomplete_stores_are_refused(tmp_path):
    y, good, noise = informative_and_noise()
    a = make_store(tmp_path / "a.zarr", good, y, checksum="one")
    b = make_store(tmp_path / "b.zarr", noise, y, checksum="two")
    with pytest.raises(StoreError, match="different graphs"):
        evaluate([a, b], Protocol(folds=4, repeats=1))
    c = make_store(tmp_path / "c.zarr", good, y, complete=False)
    with pytest.raises(StoreError, match="incomplete"):
        evaluate([c], Protocol(folds=4, repeats=1))
    with pytest.raises(StoreError, match="fewer than --folds"):
        evaluate([a], Protocol(folds=50, repeats=1))


def test_evaluate_is_deterministic(tmp_path):
    y, good, noise = informative_and_noise(seed=3)
    s = make_store(tmp_path / "n.zarr", noise + 0.5 * good, y)
    r1 = evaluate([s], Protocol(folds=5, repeats=2), RunOptions(seed=4))
    r2 = evaluate([s], Protocol(folds=5, repeats=2), RunOptions(seed=4))
    assert r1["fold_accuracies"] == r2["fold_accuracies"]


def test_evaluate_saves_each_fold_and_a_rerun_resumes(tmp_path, monkeypatch):
    y, good, noise = informative_and_noise(seed=5)
    folder = tmp_path / "grid"
    folder.mkdir()
    make_store(folder / "a.zarr", noise + 0.3 * good, y)
    make_store(folder / "b.zarr", noise + 0.6 * good, y)
    out = tmp_path / "folds"
    protocol = Protocol(folds=4, repeats=2, inner_folds=3, c_grid=(0.1, 10.0))
    plain = evaluate([str(folder)], protocol, RunOptions(seed=1))
    first = evaluate([str(folder)], protocol, RunOptions(seed=1, out=out))
    files = sorted(out.glob("fold-*.json"))
    assert len(files) == 8 and first["resumed_folds"] == 0
    assert first["fold_accuracies"] == plain["fold_accuracies"] and first["selections"] == plain["selections"]

    def must_not_run(*args, **kwargs):
        raise AssertionError("a saved fold was computed again")

    # every fold is read back, none computed, with the same figures and selections
    with monkeypatch.context() as m:
        m.setattr(nested_cv, "outer_fold", must_not_run)
        again = evaluate([str(folder)], protocol, RunOptions(seed=1, out=out))
    assert again["resumed_folds"] == 8
    assert again["fold_accuracies"] == first["fold_accuracies"] and again["selections"] == first["selections"]
    assert again["accuracy_mean"] == first["accuracy_mean"] and again["accuracy_se"] == first["accuracy_se"]
    # an interrupted run (folds lost, one half-written) computes only what is missing
    files[2].unlink()
    files[6].unlink()
    (out / (files[3].name + ".tmp-123")).write_text("{")
    partial = evaluate([str(folder)], protocol, RunOptions(seed=1, out=out))
    assert partial["resumed_folds"] == 6 and partial["fold_accuracies"] == first["fold_accuracies"]
    # another C grid, or a store whose content changed at the same path, is not resumed
    assert evaluate([str(folder)], replace(protocol, c_grid=(1.0,)), RunOptions(seed=1, out=out))["resumed_folds"] == 0
    shutil.rmtree(folder / "b.zarr")
    make_store(folder / "b.zarr", noise + 0.9 * good, y)
    changed = evaluate([str(folder)], protocol, RunOptions(seed=1, out=out))
    assert changed["resumed_folds"] == 0
    assert changed["fold_accuracies"] == evaluate([str(folder)], protocol, RunOptions(seed=1))["fold_accuracies"]


@pytest.mark.parametrize("on_cluster", [False, True])
def test_progress_counts_each_fold_computed_on_top_of_the_saved_ones(tmp_path, on_cluster):
    """In process the folds run in order; on a cluster they finish in any order, and the count
    the callback sees still rises by one per fold computed."""
    from distributed import Client, LocalCluster

    y, good, noise = informative_and_noise(seed=5)
    s = make_store(tmp_path / "a.zarr", noise + 0.5 * good, y)
    out = tmp_path / "folds"
    protocol = Protocol(folds=4, repeats=1, inner_folds=3, c_grid=(0.1, 10.0))
    calls: list[tuple[int, int]] = []

    def run(client):
        calls.clear()
        options = RunOptions(seed=1, out=out, client=client, progress=lambda done, total: calls.append((done, total)))
        return evaluate([s], protocol, options)

    with contextlib.ExitStack() as stack:
        client = None
        if on_cluster:
            cluster = stack.enter_context(LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                                       dashboard_address=":0"))
            client = stack.enter_context(Client(cluster))
        first = run(client)
        assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]
        sorted(out.glob("fold-*.json"))[2].unlink()
        again = run(client)
        assert calls == [(4, 4)]  # three folds read back count as done from the start
        assert again["resumed_folds"] == 3 and again["fold_accuracies"] == first["fold_accuracies"]


def test_a_failing_fold_on_the_cluster_raises_without_waiting_for_the_others(tmp_path, monkeypatch):
    """The progress loop waits for folds as they complete; a failed one ends the wait, and its
    error is raised while the other folds are still running (they are held until then)."""
    import threading

    from distributed import Client, LocalCluster

    y, good, noise = informative_and_noise(seed=5)
    s = make_store(tmp_path / "a.zarr", noise + 0.5 * good, y)
    release, finished = threading.Event(), []
    real = nested_cv.outer_fold

    def fold_or_fail(setup, fold):
        if fold.index == 0:
            raise FloatingPointError("fold 0 fails")
        release.wait(timeout=60)
        finished.append(fold.index)
        return real(setup, fold)

    monkeypatch.setattr(nested_cv, "outer_fold", fold_or_fail)
    with LocalCluster(n_workers=1, threads_per_worker=4, processes=False, dashboard_address=":0") as cluster, \
            Client(cluster) as client:
        options = RunOptions(seed=1, client=client, progress=lambda done, total: None)
        with pytest.raises(FloatingPointError, match="fold 0 fails"):
            evaluate([s], Protocol(folds=4, repeats=1, inner_folds=3, c_grid=(1.0,)), options)
        assert finished == []  # raised before any other fold was let go
        release.set()


def test_out_must_be_a_folder(tmp_path):
    y, good, _ = informative_and_noise()
    s = make_store(tmp_path / "good.zarr", good, y)
    (tmp_path / "afile").write_text("")
    with pytest.raises(StoreError, match="not a folder"):
        evaluate([s], Protocol(folds=2, repeats=1), RunOptions(out=tmp_path / "afile"))


def test_store_digest_follows_the_content(tmp_path):
    y, good, noise = informative_and_noise(seed=6)
    a = make_store(tmp_path / "a.zarr", good, y)
    b = make_store(tmp_path / "b.zarr", good, y)
    c = make_store(tmp_path / "c.zarr", good + 1e-9, y)
    digest = [GramStore.open(s).digest() for s in (a, b, c)]
    assert digest[0] == digest[1] != digest[2]


def test_supervised_fit_graphs_are_never_tested(tmp_path, monkeypatch):
    # A kernel whose fit used the labels of some graphs lists them in its state
    # (supervised_graph_ids): evaluate must keep them in every training part, never in a test fold.

    import gramdist.evaluation.nested_cv as ev
    from gramdist.kernels.base import KernelState

    y, good, noise = informative_and_noise(n=80, seed=5)
    path = make_store(tmp_path / "sup.zarr", noise + good, y)
    supervised = np.r_[np.arange(0, 30, 2), np.arange(40, 70, 3)]        # graph_ids are 0..n-1 here
    GramStore.open(path, "r+").write_state(KernelState(attrs={"supervised_graph_ids": supervised.tolist()}),
                                           supervised)
    seen = []
    original = ev.outer_fold

    def spy(setup, fold):
        seen.append((fold.train, fold.test))
        return original(setup, fold)

    monkeypatch.setattr(ev, "outer_fold", spy)
    res = evaluate([path], Protocol(folds=5, repeats=2), RunOptions(seed=1))
    assert len(seen) == 10
    free = np.setdiff1d(np.arange(80), supervised)
    for r in range(2):
        tested = np.concatenate([te for _, te in seen[5 * r:5 * r + 5]])
        assert np.array_equal(np.sort(tested), free)                   # every other graph tested once
    for train, test in seen:
        assert not np.isin(test, supervised).any()
        assert np.isin(supervised, train).all()
        assert not np.isin(test, train).any()
    assert res["supervised_fit_graphs"] == len(supervised) and res["test_graphs"] == len(free)
    # a store without the record is evaluated on every graph, as before
    plain = make_store(tmp_path / "plain.zarr", noise + good, y)
    assert evaluate([plain], Protocol(folds=5, repeats=1))["supervised_fit_graphs"] == 0
    # too few unsupervised graphs left for the folds: refused, with the reason
    GramStore.open(path, "r+").write_state(KernelState(attrs={"supervised_graph_ids": list(range(75))}),
                                           np.arange(75))
    with pytest.raises(StoreError, match="kernel fit used"):
        evaluate([path], Protocol(folds=5, repeats=1))


def test_inner_cv_never_validates_on_supervised_fit_graphs():
    # A kernel that is perfect on the supervised-fit graphs only (as a label-leaking fit would
    # be) must not win the inner selection: those graphs are never inner validation graphs.
    rng = np.random.default_rng(3)
    n = 80
    y = np.tile([0, 1], n // 2)
    sign = y * 2.0 - 1.0
    held = np.zeros(n, bool)
    held[: n // 2] = True
    test = np.arange(n // 2, n, 4)
    train = np.setdiff1d(np.arange(n), test)
    cheat = 0.01 * rng.standard_normal((n, 3))
    cheat = cheat @ cheat.T
    cheat[np.ix_(held, held)] += np.outer(sign[held], sign[held])
    x = sign[:, None] + 2.0 * rng.standard_normal((n, 2))
    honest = x @ x.T
    import gramdist.evaluation.nested_cv as ev

    original = ev._load
    ev._load = lambda p: {"cheat": cheat, "honest": honest}[p]
    try:
        protocol = Protocol(inner_folds=5, c_grid=(0.1, 1.0, 10.0))
        fold = Fold(0, 0, train, test, inner_seed=0)
        leaky = outer_fold(FoldSetup(("cheat", "honest"), y, protocol), fold)
        res = outer_fold(FoldSetup(("cheat", "honest"), y, protocol, held=held), fold)
    finally:
        ev._load = original
    assert leaky["store"] == "cheat"           # the trap works when the graphs are not declared
    assert res["store"] == "honest"


def test_saved_fold_names_do_not_change(tmp_path):
    """The key of a saved fold (its file name) is what an ``--out`` folder written by an earlier
    version resumes by: these names are those gramdist 0.2.0 wrote for the same folds."""

    class Fixed(nested_cv.GramSource):
        def digest(self):
            return "digest-" + self.name

    y = np.repeat([0, 1], 10)
    held = np.zeros(20, bool)
    held[:2] = True
    protocol = Protocol(folds=3, repeats=2, inner_folds=3, c_grid=(0.1, 10.0))
    setup = FoldSetup((Fixed("a"), Fixed("b")), y, protocol, held=held)
    assert setup.key() == (
        '{"c_grid": [0.1, 10.0], "inner_folds": 3, "labels": "128ee3684cad4393ea1ad7bf770103c3", "per_store": false, '
        '"sources": [["a", "digest-a"], ["b", "digest-b"]], "task": ["Task", {"params": "(0.1, 10.0)"}]}')
    folds = nested_cv.outer_splits(y, held, protocol, seed=4)
    assert [(f.repeat, f.index, f.inner_seed) for f in folds] == [(r, f, 4 + 1000 * (r + 1) + f)
                                                                  for r in range(2) for f in range(3)]
    names = [p.rsplit("/", 1)[1] for p in nested_cv.fold_paths(tmp_path, setup.key(), folds)]
    assert names == ["fold-r00-f00-7377dc3f23874bef.json", "fold-r00-f01-1eacde7616f183fb.json",
                     "fold-r00-f02-c01d243430ad5cc2.json", "fold-r01-f00-a315d00d986e5159.json",
                     "fold-r01-f01-a1d28a5992e9e2ef.json", "fold-r01-f02-dac0db0875ec28ce.json"]
    assert nested_cv.fold_paths(None, setup.key(), folds) == [None] * 6


def test_the_protocol_travels_to_every_fold(tmp_path, monkeypatch):
    y, good, noise = informative_and_noise(seed=7)
    s = make_store(tmp_path / "s.zarr", noise + good, y)
    protocol = Protocol(folds=3, repeats=1, inner_folds=2, c_grid=(1.0,))
    seen = []
    original = nested_cv.outer_fold

    def spy(setup, fold):
        seen.append(setup)
        return original(setup, fold)

    monkeypatch.setattr(nested_cv, "outer_fold", spy)
    res = evaluate([s], protocol, RunOptions(seed=3))
    assert len(seen) == 3 and all(setup.protocol is protocol for setup in seen)
    assert (res["folds"], res["repeats"], res["inner_folds"], res["c_grid"]) == (3, 1, 2, [1.0])
    assert res["task_reason"] == "detected: integer labels" and evaluate([s])["repeats"] == 10  # Protocol()


def test_every_candidate_of_a_grid_is_loaded_once_per_process(tmp_path, monkeypatch):
    """Each fold reads every candidate store: the five stores of an h = 1..5 grid stay loaded
    across the folds (a cache of four, as before, reloaded every store at every fold), and one
    past the memory budget is dropped, least recently used first."""
    from storeutil import matrix_store

    rng = np.random.default_rng(0)
    y = np.repeat([0, 1], 20)
    x = rng.standard_normal((40, 3)) + y[:, None]
    stores = [matrix_store(tmp_path / f"h-{h}.zarr", (x @ x.T) * h, y) for h in range(1, 6)]
    loads = []
    real = nested_cv.open_gram
    monkeypatch.setattr(nested_cv, "open_gram", lambda p: (loads.append(p), real(p))[1])
    nested_cv._load.cache_clear()
    res = evaluate(stores, Protocol(folds=4, repeats=2, inner_folds=3, c_grid=(0.1, 1.0)), RunOptions())
    assert res["repeats"] == 2 and sorted(loads) == sorted(stores)
    monkeypatch.setattr(nested_cv, "GRAM_CACHE_FRACTION", 0.0)  # no room: only the last one stays
    nested_cv._load.cache_clear()
    loads.clear()
    for path in (*stores[:2], stores[0]):
        nested_cv._load(path)
    assert loads == [stores[0], stores[1], stores[0]]
    nested_cv._load.cache_clear()


def test_a_raw_gram_at_a_large_c_is_announced_before_the_folds(tmp_path, monkeypatch, capsys):
    """libsvm crawls on raw Grams at large C (467 s per fit on NCI1 WL-edge at C = 100): the
    command says so, once, naming the store; a normalised store or a small C says nothing."""
    from gramdist.cli import main
    from gramdist.evaluation import conditioning

    monkeypatch.setattr(conditioning, "SLOW_MIN_GRAPHS", 10)  # the real bound is 500 graphs
    y, good, _ = informative_and_noise(n=40)
    raw = make_store(tmp_path / "raw.zarr", good * 100.0, y)  # median K(g, g) about 200
    from storeutil import matrix_store

    d = np.sqrt(np.diag(good))
    cosine = matrix_store(tmp_path / "cos.zarr", good / np.outer(d, d), y,
                          attrs={"dataset_checksum": "same", "normalize": True}, diag=(np.diag(good) * 100.0, None))

    def note(*args):
        capsys.readouterr()
        assert main(["evaluate", *args, "--folds", "2", "--repeats", "1", "--inner-folds", "2", "--workers", "0"]) == 0
        return [line for line in capsys.readouterr().err.splitlines() if "libsvm can take minutes" in line]

    lines = note(raw, "--c-max", "2")
    assert len(lines) == 1 and "raw.zarr" in lines[0] and "C reaches 100" in lines[0]
    assert note(raw, "--c-min", "-3", "--c-max", "0") == []  # 1 x 200 stays under the bound
    assert note(cosine, "--c-max", "7") == []  # the raw diagonal is large, but the Gram is normalised
