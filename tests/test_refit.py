"""Per-fold refits (``evaluate --refit``) and the papers' protocol presets (``--protocol``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gramdist.datasets import load_dataset
from gramdist.errors import JobError
from gramdist.evaluation.nested_cv import Fold, FoldSetup, RunOptions, outer_fold, outer_splits, summarise
from gramdist.evaluation.protocols import PROTOCOLS, HoldoutTask, Protocol, get_protocol
from gramdist.evaluation.refit import RefitSource, evaluate_refit, refit_sources
from gramdist.graphs import GraphBatch
from gramdist.jobs import validate_job
from gramdist.kernels import make_kernel

SYNTH = {"synthetic": {"n_graphs": 40, "n_nodes": [6, 10], "avg_degree": 2.0, "n_labels": 3, "attr_dim": 0,
                       "seed": 3, "label_bias": 0.5}}


def dm_job(**kernel) -> dict:
    return validate_job({"dataset": SYNTH, "kernel": {"name": "dm", "h": 2, "t": 3, "b": 3, **kernel},
                         "gram": {"tile_size": 16, "normalize": False}})


# ---------------------------------------------------------------- refit
def test_refit_blocks_equal_a_kernel_fitted_on_the_training_part_alone():
    job = dm_job()
    graphs = load_dataset(SYNTH)
    train = np.arange(0, 40, 2)
    test = np.arange(1, 40, 4)
    k_tr, k_te = RefitSource("dm", job).blocks(train, test)
    # reference without the engine: fit on the training graphs only, embed, pair
    kern = make_kernel("dm", h=2, t=3, b=3)
    state = kern.fit(graphs.take(train), 0)
    emb_tr, emb_te = kern.embed(graphs.take(train), state), kern.embed(graphs.take(test), state)
    np.testing.assert_allclose(k_tr, kern.pairwise(emb_tr, emb_tr, state), rtol=1e-12, atol=0)
    np.testing.assert_allclose(k_te, kern.pairwise(emb_te, emb_tr, state), rtol=1e-12, atol=0)
    # the pyramids really depend on the fit sample: the transductive Gram (fit on all) differs
    full = kern.fit(graphs, 0)
    emb_all = kern.embed(graphs, full)
    assert not np.allclose(k_tr, kern.pairwise(emb_all, emb_all, full)[np.ix_(train, train)])


def test_refit_never_sees_the_test_graphs():
    # K(train, train) is the same whatever the other graphs are: changing every graph outside
    # the training part (test graphs included) leaves the fold's training block unchanged
    job = dm_job()
    train, test = np.arange(20), np.arange(20, 30)
    a, _ = RefitSource("dm", job).blocks(train, test)
    other = load_dataset({"synthetic": dict(SYNTH["synthetic"], seed=99)})
    mixed = GraphBatch.concat([load_dataset(SYNTH).take(train), other.take(np.arange(20))])
    src = RefitSource("dm", job)
    src.graphs = lambda: mixed  # type: ignore[method-assign]
    b, _ = src.blocks(train, test)
    np.testing.assert_array_equal(a, b)


def test_supervised_refit_learns_on_the_training_part_and_is_honest(tmp_path):
    job = validate_job({"dataset": SYNTH, "kernel": {"name": "matching", "walk_lengths": [1, 2], "tree_heights": [],
                                                     "nca": "full", "nca_lambda": 1.0},
                        "gram": {"tile_size": 32, "normalize": False}})
    graphs = load_dataset(SYNTH)
    train, test = np.arange(0, 30), np.arange(30, 40)
    src = RefitSource("m", job)
    k_tr, k_te = src.blocks(train, test)
    assert k_tr.shape == (30, 30) and k_te.shape == (10, 30)
    kern = make_kernel("matching", walk_lengths=[1, 2], tree_heights=[], nca="full", nca_lambda=1.0)
    state = kern.fit(graphs.take(train), 0)
    assert set(state.attrs["supervised_graph_ids"]) == set(graphs.graph_ids[train].tolist())
    emb = kern.embed(graphs.take(test), state)
    np.testing.assert_allclose(k_te, kern.pairwise(emb, kern.embed(graphs.take(train), state), state),
                               rtol=1e-12, atol=1e-12)


def test_evaluate_refit_runs_resumes_and_matches_outer_fold(tmp_path):
    sources = refit_sources(validate_job({"dataset": SYNTH, "kernel": {"name": "dm", "h": 2, "t": 3, "b": 3},
                                          "gram": {"tile_size": 16, "normalize": False},
                                          "grid": {"kernel.h": [1, 2]}, "_job_name": "g"}))
    assert [s.name for s in sources] == ["h-1", "h-2"]
    out = tmp_path / "folds"
    protocol = Protocol(folds=4, repeats=2, inner_folds=3, c_grid=(0.1, 10.0))
    res = evaluate_refit(sources, protocol, RunOptions(out=out))
    files = sorted(out.glob("fold-*.json"))
    assert len(files) == 8 and res["resumed_folds"] == 0 and res["refit"]
    # one fold by hand: outer_fold on the refitted sources gives the same accuracy and choice
    y = np.asarray(load_dataset(SYNTH).y)
    fold = outer_splits(y, np.zeros(len(y), bool), Protocol(folds=4, repeats=2), seed=0)[5]
    direct = outer_fold(FoldSetup(tuple(sources), y, protocol), fold)
    sel = res["selections"][5]
    assert (sel["repeat"], sel["fold"]) == (fold.repeat, fold.index)
    assert res["fold_accuracies"][fold.repeat][fold.index] == pytest.approx(direct["accuracy"] * 100, abs=1e-4)
    assert (sel["store"], sel["C"]) == (direct["store"], direct["C"])
    # a rerun reads every fold; a lost fold is recomputed to the same result
    again = evaluate_refit(sources, protocol, RunOptions(out=out))
    assert again["resumed_folds"] == 8 and again["fold_accuracies"] == res["fold_accuracies"]
    files[3].unlink()
    third = evaluate_refit(sources, protocol, RunOptions(out=out))
    assert third["resumed_folds"] == 7 and third["fold_accuracies"] == res["fold_accuracies"]
    # another protocol is another set of folds, never mixed with these
    other = evaluate_refit(sources, replace(protocol, inner_folds=2), RunOptions(out=out))
    assert other["resumed_folds"] == 0 and len(list(out.glob("fold-*.json"))) == 16
    # options that leave the Gram as it is (tile size, kept embeddings) keep the saved folds;
    # a kernel parameter does not
    def settings(**gram):
        job = {"dataset": SYNTH, "kernel": {"name": "dm", "h": 2, "t": 3, "b": 3},
               "gram": {"tile_size": 16, "normalize": False, **gram}, "grid": {"kernel.h": [1, 2]}}
        return refit_sources(validate_job(job, name="g"))

    retiled = evaluate_refit(settings(tile_size=7, keep_embeddings=True), protocol, RunOptions(out=out))
    assert retiled["resumed_folds"] == 8 and retiled["fold_accuracies"] == res["fold_accuracies"]
    assert settings(normalize=True)[0].digest() != sources[0].digest() != settings()[1].digest()
    # a kernel parameter left at its default is in the key: a changed default is a changed key
    explicit = refit_sources(validate_job({"dataset": SYNTH, "kernel": {"name": "dm", "h": 1, "t": 3, "b": 3,
                                                                        "eta": make_kernel("dm").eta},
                                           "gram": {"tile_size": 16, "normalize": False}}))
    assert explicit[0].digest() == sources[0].digest()


def test_refit_with_random_test_splits():
    res = evaluate_refit(refit_sources(dm_job()), Protocol(folds=1, repeats=3, inner_folds=3, c_grid=(1.0,),
                                                           test_size=0.25))
    assert res["folds"] == 1 and np.array(res["fold_accuracies"]).shape == (3, 1)
    assert res["accuracy_std_sample"] == pytest.approx(np.std(np.ravel(res["fold_accuracies"]), ddof=1), abs=1e-3)


def test_refit_on_a_dask_cluster_gives_the_inline_figures(tmp_path):
    from distributed import Client, LocalCluster

    sources = refit_sources(dm_job())
    protocol = Protocol(folds=3, repeats=1, inner_folds=3, c_grid=(1.0,))
    inline = evaluate_refit(sources, protocol)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as client:
        dist = evaluate_refit(sources, protocol, RunOptions(out=tmp_path / "f", client=client))
    assert dist["fold_accuracies"] == inline["fold_accuracies"]


def test_fit_free_kernel_reuses_one_gram_across_folds(monkeypatch):
    # the power kernel learns nothing in fit: every fold's state is the same, so the Gram is
    # computed once per process and the refit equals the transductive blocks
    job = validate_job({"dataset": SYNTH, "kernel": {"name": "power", "k": 3},
                        "gram": {"tile_size": 16, "normalize": False}})
    src = RefitSource("p", job)
    computed = []
    from gramdist.engine import plan as plan_module

    original = plan_module.plan_gram

    def counting(kernel, cols, *a, **kw):
        computed.append(len(cols))
        return original(kernel, cols, *a, **kw)

    monkeypatch.setattr(plan_module, "plan_gram", counting)
    y = np.asarray(load_dataset(SYNTH).y)
    blocks = [src.blocks(f.train, f.test) for f in outer_splits(y, np.zeros(40, bool), Protocol(folds=4, repeats=1))]
    # four fits on training parts (plans of 30 graphs) and one Gram of all 40 graphs
    assert computed.count(40) == 1 and len(computed) == 5
    assert len(blocks) == 4


def test_refit_rejects_jobs_with_a_test_section():
    job = dm_job().replace(test={"dataset": "MUTAG"})
    with pytest.raises(JobError, match="test"):
        RefitSource("x", job)


def test_cli_refit_and_protocol(tmp_path, capsys):
    import yaml

    from gramdist.cli import main

    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump({"dataset": SYNTH, "kernel": {"name": "dm", "h": 1, "t": 2, "b": 3},
                                    "gram": {"tile_size": 16}}))
    rc = main(["evaluate", "--refit", str(path), "--protocol", "matching", "--folds", "4", "--inner-folds", "3",
               "--workers", "0", "--out", str(tmp_path / "o"), "--json"])
    assert rc == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["refit"] and line["protocol"] == "matching" and line["repeats"] == 1
    assert line["c_grid"] == [0.1, 1.0, 10.0, 50.0] and line["inner_folds"] == 3 and line["folds"] == 4
    assert line["spread"] == pytest.approx(line["accuracy_fold_std"]) and line["accuracy_se"] is None
    assert len(list((tmp_path / "o").glob("fold-*.json"))) == 4
    assert main(["evaluate", "--protocol", "nope", "--refit", str(path)]) == 2
    assert "unknown protocol 'nope'" in capsys.readouterr().err
    assert main(["evaluate", str(tmp_path / "x.zarr"), "--refit", str(path)]) == 2
    assert main(["evaluate", "--workers", "0"]) == 2


# ---------------------------------------------------------------- protocols
def test_protocol_presets_follow_the_papers():
    dm, power, mlg, matching = (get_protocol(n) for n in ("dm", "power", "mlg", "matching"))
    assert (dm.repeats, dm.folds, dm.inner_folds, dm.spread) == (10, 10, 9, "std")
    assert (power.repeats, power.folds, power.inner_holdout, power.spread) == (10, 10, True, "se")
    assert power.c_grid == tuple(10.0**k for k in range(-7, 8))
    assert (mlg.repeats, mlg.test_size, mlg.inner_folds) == (10, 0.2, 10)
    assert (matching.repeats, matching.folds, matching.inner_folds) == (1, 10, 10)
    assert matching.c_grid == (0.1, 1.0, 10.0, 50.0)
    assert isinstance(power.task(), HoldoutTask) and not isinstance(dm.task(), HoldoutTask)
    assert set(PROTOCOLS) == {"default", "dm", "power", "mlg", "matching"}


def test_holdout_task_validates_on_one_tenth_of_the_training_part():
    y = np.repeat([0, 1], 50)
    splits = list(HoldoutTask().inner_splitter(10, 0).split(np.zeros(100), y))
    assert len(splits) == 1
    tr, va = splits[0]
    assert len(va) == 10 and len(tr) == 90 and np.bincount(y[va]).tolist() == [5, 5]
    # the outer splits of the power protocol stay a full 10-fold CV
    assert len(list(HoldoutTask().splitter(10, 0).split(np.zeros(100), y))) == 10


def test_random_test_split_protocol():
    y = np.repeat([0, 1, 2], [30, 40, 30])
    folds = outer_splits(y, np.zeros(100, bool), Protocol(folds=1, repeats=10, test_size=0.2), seed=0)
    assert len(folds) == 10
    tests = []
    for fold in folds:
        tr, te = fold.train, fold.test
        assert fold.index == 0 and len(te) == 20 and len(tr) == 80 and not np.intersect1d(tr, te).size
        assert np.bincount(y[te]).tolist() == [6, 8, 6]  # stratified
        tests.append(tuple(te))
    assert len(set(tests)) == 10  # a fresh random split per repeat


def test_spreads_of_the_summary():
    acc = np.array([[0.8, 0.9], [0.7, 0.7], [1.0, 0.8]])
    folds = [Fold(r, f, np.zeros(0, np.int64), np.zeros(0, np.int64), 0) for r in range(3) for f in range(2)]
    res = summarise([{"accuracy": a, "store": "s", "C": 1.0} for a in acc.ravel()], folds, Protocol(folds=2, repeats=3))
    assert (res["folds"], res["repeats"]) == (2, 3)
    assert [(s["repeat"], s["fold"]) for s in res["selections"]] == [(f.repeat, f.index) for f in folds]
    per_repeat = np.array([0.85, 0.7, 0.9])
    assert res["accuracy_mean"] == pytest.approx(81.6666667)
    assert res["accuracy_std"] == pytest.approx(np.sqrt(((per_repeat - per_repeat.mean()) ** 2).mean()) * 100)
    sample = np.sqrt(((per_repeat - per_repeat.mean()) ** 2).sum() / 2) * 100
    assert res["accuracy_std_sample"] == pytest.approx(sample)
    assert res["accuracy_se"] == pytest.approx(sample / np.sqrt(3))
    assert res["accuracy_fold_std"] == pytest.approx(acc.std(ddof=1) * 100)


def test_shipped_paper_jobs_validate():
    from gramdist.jobs import expand_grid, load_job

    folder = Path(__file__).resolve().parents[1] / "jobs" / "paper"
    names = sorted(p.stem for p in folder.glob("*.yaml"))
    assert {"dm-mutag", "power-nci1", "mlg-nci109", "matching-ptc_mr"} <= set(names)
    for name in names:
        job = load_job(folder / f"{name}.yaml")
        settings = expand_grid(job)
        if name.startswith("mlg-"):  # the paper's grid: eta x radius x levels, rank 10
            assert len(settings) == 27 and job.kernel["rank"] == 10 and job.kernel["gamma"] == 0.01
        if name.startswith("power-"):
            assert len(settings) == 1 and job.kernel["k"] == 5
        if name.startswith("wwl-"):  # the authors' script: h in range(7), from 0; gamma 1e-4..10
            assert len(settings) == 42 and sorted({s.kernel["h"] for _, s in settings}) == list(range(7))
            assert min(s.kernel["gamma"] for _, s in settings) == 1e-4
        if name.startswith(("dm-", "power-", "wwl-")):
            assert job.gram.normalize is False  # the papers' kernels, not cosine-normalised
