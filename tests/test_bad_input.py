"""Bad input, end to end through `gramdist run`: malformed datasets and job files.

A corpus of broken TU datasets and job files is generated here (nothing is checked in): each
must end with exit status 2 and one line ``gramdist: error: ...`` naming the file, line or key
— never a traceback, never a hang (every run has a time limit). Odd but valid input (self-loops,
duplicate edges, graphs without edges, a 100,000-node graph, a tile larger than the dataset)
is handled as documented in gramdist/datasets/tu.py and computes the right Gram.

Also: nothing gramdist persists is ever unpickled. Stores with planted pickle payloads (a
pickle-codec array where the Gram, the labels or the kernel state should be; a Zarr v2 store
of object arrays; pickle files; YAML/pickle-looking attributes) are opened with open_gram,
store_info, read_state, `gramdist info` and `gramdist evaluate`: the payload never runs and
the answer is a StoreError. A source scan shows gramdist never calls an unpickling loader.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from test_deploy import ROOT, last_json, one_error_line, reference_gram, run_cli

from gramdist.datasets import read_tu
from gramdist.engine.context import RunContext
from gramdist.engine.placement import Placement
from gramdist.engine.runner import run_job
from gramdist.engine.store import info, open_gram, read_state
from gramdist.errors import StoreError
from gramdist.jobs import load_job

# A valid toy dataset "TOY": graph 1 = path 1-2-3, graph 2 = triangle 4-5-6, graph 3 = edge 7-8.
TOY = {
    "A": "1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5, 4\n5, 6\n6, 5\n4, 6\n6, 4\n7, 8\n8, 7\n",
    "graph_indicator": "1\n1\n1\n2\n2\n2\n3\n3\n",
    "graph_labels": "1\n-1\n1\n",
    "node_labels": "0\n1\n0\n2\n2\n2\n1\n0\n",
}


def run_main(*argv: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """``gramdist.cli.main(argv)`` in this process (the CLI's code path without the ~1 s of
    interpreter start-up per case), with a time limit: a hang fails the test."""
    from gramdist.cli import main

    def hung(signum, frame):
        raise TimeoutError(f"gramdist {' '.join(argv)}: no answer after {timeout} s")

    err, out = io.StringIO(), io.StringIO()
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(timeout)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse usage errors
                rc = exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return subprocess.CompletedProcess(["gramdist", *argv], rc, out.getvalue(), err.getvalue())


def write_tu(folder: Path, parts: dict[str, str | bytes], name: str = "TOY") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for part, text in parts.items():
        data = text if isinstance(text, bytes) else text.encode()
        (folder / f"{name}_{part}.txt").write_bytes(data)
    return folder


def toy(**changes: str | bytes | None) -> dict[str, str | bytes]:
    parts = dict(TOY)
    for k, v in changes.items():
        if v is None:
            parts.pop(k)
        else:
            parts[k] = v
    return parts


def dataset_job(path: Path, folder: Path, tile: int = 2, kernel: str = "{name: wl, h: 2}", extra: str = "") -> Path:
    path.write_text(f"dataset: {{path: {folder}}}\nkernel: {kernel}\ngram: {{tile_size: {tile}}}\n"
                    f"cluster: {{n_workers: 1}}\n{extra}")
    return path


# ----------------------------------------------------------------------------- datasets
BAD_DATASETS = {
    # name: (files, substring of the message)
    "truncated_A": (toy(A="1, 2\n2, 1\n2, 3\n3, 2\n4, 5\n5,"), "TOY_A.txt line 6"),
    "truncated_A_mid_number": (toy(A=TOY["A"][:-3]), "TOY_A.txt"),
    "truncated_indicator": (toy(graph_indicator="1\n1\n1\n2\n2\n"), "TOY_graph_labels.txt line 3"),
    "indicator_cut_mid_line": (toy(graph_indicator=b"1\n1\n1\n2\n2\n2\n3\n3\n"[:-1] + b"\xe2"), "TOY_graph_indicator.txt"),
    "empty_indicator": (toy(graph_indicator=""), "empty dataset"),
    "tab_delimiter": (toy(A=TOY["A"].replace(", ", "\t")), "TOY_A.txt line 1"),
    "semicolon_delimiter": (toy(A=TOY["A"].replace(", ", ";")), "TOY_A.txt line 1"),
    "space_delimiter_labels": (toy(node_labels="0 1\n" + TOY["node_labels"][2:]), "TOY_node_labels.txt line 1"),
    "negative_node_id": (toy(A=TOY["A"].replace("7, 8", "-7, 8")), "out of range"),
    "zero_node_id": (toy(A="0, 1\n" + TOY["A"]), "node id 0 out of range 1..8"),
    "node_id_too_large": (toy(A=TOY["A"] + "8, 9\n"), "node id 9 out of range 1..8"),
    "edge_between_graphs": (toy(A=TOY["A"] + "3, 4\n"), "joins graph 1 and graph 2"),
    "zero_node_graph_in_the_middle": (toy(graph_indicator="1\n1\n1\n3\n3\n3\n4\n4\n", graph_labels="1\n1\n1\n1\n"),
                                      "contiguous"),
    "zero_node_graph_at_the_end": (toy(graph_labels="1\n-1\n1\n1\n"), "TOY_graph_labels.txt line 4"),
    "graph_id_zero": (toy(graph_indicator="0\n1\n1\n2\n2\n2\n3\n3\n"), "ids must start at 1"),
    "negative_graph_id": (toy(graph_indicator="-1\n1\n1\n2\n2\n2\n3\n3\n"), "TOY_graph_indicator.txt line 1"),
    "non_utf8_labels": (toy(node_labels=b"0\n1\n\xff\xfe\n2\n2\n2\n1\n0\n"), "TOY_node_labels.txt line 3"),
    "latin1_in_A": (toy(A=TOY["A"].encode() + "9é, 1\n".encode("latin-1")), "TOY_A.txt line 13"),
    "binary_garbage_A": (toy(A=bytes(range(256)) * 4), "TOY_A.txt"),
    "nul_bytes": (toy(graph_labels=b"1\n\x00\n1\n"), "TOY_graph_labels.txt line 2"),
    "float_label": (toy(node_labels="0\n1\n0.5\n2\n2\n2\n1\n0\n"), "TOY_node_labels.txt line 3"),
    "nan_attribute": (toy(node_attributes="0.1\n0.2\nnan\n1\n1\n1\n1\n1\n"), "not finite"),
    "attribute_widths_differ": (toy(node_attributes="0.1, 1\n0.2\n0.3\n1\n1\n1\n1\n1\n"), "TOY_node_attributes.txt"),
    "too_few_node_labels": (toy(node_labels="0\n1\n"), "TOY_node_labels.txt line 3"),
    "missing_graph_labels": (toy(graph_labels=None), "TOY_graph_labels.txt: file not found"),
    "huge_integer": (toy(A=TOY["A"] + "99999999999999999999999, 1\n"), "int64"),
}


@pytest.mark.parametrize("case", sorted(BAD_DATASETS))
def test_malformed_dataset_is_one_clear_error(case, tmp_path):
    files, message = BAD_DATASETS[case]
    folder = write_tu(tmp_path / "TOY", files)
    job = dataset_job(tmp_path / "job.yaml", folder)
    line = one_error_line(run_main("run", str(job), "--out", str(tmp_path / "g.zarr")))
    assert message in line, line
    assert not (tmp_path / "g.zarr").exists()  # the data is read before anything is written


def test_missing_or_empty_dataset_folder(tmp_path):
    job = dataset_job(tmp_path / "job.yaml", tmp_path / "nowhere")
    assert "dataset folder not found" in one_error_line(run_main("run", str(job)))
    (tmp_path / "empty").mkdir()
    job = dataset_job(tmp_path / "job2.yaml", tmp_path / "empty")
    assert "empty_graph_indicator.txt: file not found" in one_error_line(run_main("run", str(job)))
    job = dataset_job(tmp_path / "job3.yaml", job)  # a file, not a folder
    assert "dataset folder not found" in one_error_line(run_main("run", str(job)))


# ----------------------------------------------------------------------------- job files
SYN = "dataset: {synthetic: {n_graphs: 10, n_nodes: 5, avg_degree: 1.0, n_labels: 2, attr_dim: 0, seed: 0}}\n"
KER = "kernel: {name: wl, h: 1}\n"
BAD_JOBS = {
    "unknown_section": (SYN + KER + "datset: {name: MUTAG}\n", "unknown section 'datset'"),
    "unknown_gram_key": (SYN + KER + "gram: {tilesize: 8}\n", "unknown key gram.tilesize"),
    "unknown_cluster_key": (SYN + KER + "cluster: {workers: 2}\n", "unknown key cluster.workers"),
    "unknown_kernel_parameter": (SYN + "kernel: {name: wl, depth: 3}\n", "unknown parameter 'depth'"),
    "unknown_kernel": (SYN + "kernel: {name: nope}\n", "nope"),
    "kernel_without_name": (SYN + "kernel: {h: 3}\n", "kernel.name"),
    "unknown_dataset_key": ("dataset: {name: MUTAG, limt: 3}\n" + KER, "unknown key 'limt'"),
    "unknown_synthetic_key": ("dataset: {synthetic: {n_graph: 3}}\n" + KER, "unknown key 'n_graph'"),
    "two_dataset_sources": ("dataset: {name: MUTAG, path: /x}\n" + KER, "exactly one"),
    "tile_size_string": (SYN + KER + "gram: {tile_size: big}\n", "gram.tile_size must be int"),
    "tile_size_float": (SYN + KER + "gram: {tile_size: 12.5}\n", "gram.tile_size must be int"),
    "tile_size_bool": (SYN + KER + "gram: {tile_size: true}\n", "gram.tile_size must be int"),
    "tile_size_zero": (SYN + KER + "gram: {tile_size: 0}\n", "gram.tile_size must be >= 1"),
    "tile_size_negative": (SYN + KER + "gram: {tile_size: -5}\n", "gram.tile_size must be >= 1"),
    "normalize_string": (SYN + KER + "gram: {normalize: 'yes'}\n", "gram.normalize must be bool"),
    "h_negative": (SYN + "kernel: {name: wl, h: -1}\n", "parameter h"),
    "h_string": (SYN + "kernel: {name: wl, h: three}\n", "parameter h"),
    "h_huge": (SYN + "kernel: {name: wl, h: 100000}\n", "parameter h"),
    "sample_size_zero": (SYN + KER + "fit: {sample_size: 0}\n", "fit.sample_size must be >= 1"),
    "seed_float": (SYN + KER + "fit: {seed: 1.5}\n", "fit.seed must be int"),
    "n_graphs_zero": ("dataset: {synthetic: {n_graphs: 0}}\n" + KER, "n_graphs must be >= 1"),
    "n_nodes_zero": ("dataset: {synthetic: {n_graphs: 3, n_nodes: 0}}\n" + KER, "n_nodes must be >= 1"),
    "limit_zero": ("dataset: {synthetic: {n_graphs: 3}, limit: 0}\n" + KER, "dataset.limit"),
    "node_attribute_column_missing": (
        "dataset: {synthetic: {n_graphs: 3, attr_dim: 1}, node_attributes: [4]}\n" + KER, "column 4"),
    "output_not_a_string": (SYN + KER + "output: 5\n", "output must be a path string"),
    "n_workers_string": (SYN + KER + "cluster: {n_workers: two}\n", "cluster.n_workers must be int"),
    "security_unknown_key": (SYN + KER + "cluster: {n_workers: 1, security: {tls_cert: x}}\n",
                             "cluster.security: unknown key"),
    "jobqueue_unknown_kind": (SYN + KER + "cluster: {jobqueue: {kind: moab}}\n", "moab"),
    "grid_not_a_list": (SYN + KER + "grid: {kernel.h: 3}\n", "grid.kernel.h must be a non-empty list"),
    "grid_bad_key": (SYN + KER + "grid: {cluster.n_workers: [1, 2]}\n", "grid key"),
    "yaml_syntax_error": (SYN + KER + "gram: {tile_size: [1, 2\n", "invalid YAML"),
    "yaml_tab_indent": ("dataset:\n\tname: MUTAG\n", "invalid YAML"),
    "python_object_tag": (SYN + KER + "fit: !!python/object/apply:os.system ['touch {sentinel}']\n", "invalid YAML"),
    "list_not_mapping": ("- dataset\n- kernel\n", "must be a mapping"),
    "scalar_not_mapping": ("just a string\n", "must be a mapping"),
    "empty_file": ("", "missing section 'dataset'"),
    "section_not_mapping": (SYN + KER + "gram: 256\n", "section 'gram' must be a mapping"),
    "dataset_name_invalid": ("dataset: {name: '../../etc'}\n" + KER, "not a valid TU dataset name"),
}


@pytest.mark.parametrize("case", sorted(BAD_JOBS))
def test_malformed_job_is_one_clear_error(case, tmp_path, monkeypatch):
    text, message = BAD_JOBS[case]
    sentinel = tmp_path / "executed"
    job = tmp_path / "job.yaml"
    job.write_text(text.replace("{sentinel}", str(sentinel)))
    monkeypatch.setenv("GRAMDIST_TU_URL", "http://127.0.0.1:9/{name}.zip")  # no downloads
    monkeypatch.setenv("GRAMDIST_CACHE", str(tmp_path))
    line = one_error_line(run_main("run", str(job), "--out", str(tmp_path / "g.zarr")))
    assert message in line, line
    assert not sentinel.exists()


@pytest.mark.parametrize("kind, case", [("dataset", "truncated_A"), ("dataset", "non_utf8_labels"),
                                        ("job", "unknown_gram_key"), ("job", "python_object_tag")])
def test_bad_input_in_a_real_process(kind, case, tmp_path):
    """The same, as a user runs it: a new `gramdist` process, exit status 2, one line on stderr."""
    sentinel = tmp_path / "executed"
    if kind == "dataset":
        files, message = BAD_DATASETS[case]
        job = dataset_job(tmp_path / "job.yaml", write_tu(tmp_path / "TOY", files))
    else:
        text, message = BAD_JOBS[case]
        job = tmp_path / "job.yaml"
        job.write_text(text.replace("{sentinel}", str(sentinel)))
    line = one_error_line(run_cli("run", str(job), "--out", str(tmp_path / "g.zarr"), timeout=60))
    assert message in line and not sentinel.exists()


def test_unreadable_job_files(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("dataset: {name: MUT\xc4G}\n".encode("latin-1"))
    assert "cannot read job file" in one_error_line(run_main("run", str(bad)))
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(bytes(range(256)))
    assert str(binary) in one_error_line(run_main("run", str(binary)))
    folder = tmp_path / "a_folder.yaml"
    folder.mkdir()
    assert "cannot read job file" in one_error_line(run_main("run", str(folder)))


@pytest.mark.parametrize("args, message", [
    (["--set", "gram.tile_size"], "expected KEY=VALUE"),
    (["--set", "=3"], "invalid key"),
    (["--set", "gram..tile_size=3"], "invalid key"),
    (["--set", "gram.tile_size=[1"], "cannot parse value"),
    (["--set", "gram.tile_size=0"], "gram.tile_size must be >= 1"),
    (["--set", "kernel.h=1,x"], "parameter h"),
])
def test_bad_overrides(args, message, tmp_path):
    job = tmp_path / "job.yaml"
    job.write_text(SYN + KER + "cluster: {n_workers: 1}\n")
    line = one_error_line(run_main("run", str(job), "--out", str(tmp_path / "g"), *args))
    assert message in line, line


# ----------------------------------------------------------------------------- odd but valid
@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as cl:
        yield cl


def run_ok(job: Path, out: Path, client=None) -> dict:
    """Run ``job`` to completion: in-process on ``client``, else through the real CLI."""
    if client is not None:
        res = run_job(load_job(job), out=str(out), placement=Placement(client=client), context=RunContext(log=lambda m: None))
        assert res.complete
        return {"tiles_total": res.tiles_total, "complete": res.complete}
    r = run_cli("run", str(job), "--out", str(out), "--quiet", "--json", timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    summary = last_json(r.stdout)
    assert summary["complete"]
    return summary


def test_self_loops_duplicates_and_one_direction_are_handled_as_documented(tmp_path, client):
    """TU lists undirected edges twice; duplicates are dropped, a one-directional edge is an
    undirected edge, a self-loop is kept once: the Gram equals that of the clean dataset plus
    the self-loop, and the reader's batch shows it."""
    clean = write_tu(tmp_path / "clean" / "TOY", toy(A=TOY["A"] + "1, 1\n"))
    messy_a = (TOY["A"] + TOY["A"]  # every line twice
               + "1, 1\n1, 1\n"  # a self-loop, listed twice
               ).replace("8, 7\n", "")  # edge 7-8 in one direction only
    messy = write_tu(tmp_path / "messy" / "TOY", toy(A=messy_a))
    a, b = read_tu(clean), read_tu(messy)
    assert a.checksum() == b.checksum()
    assert len(b.edges) == 7 and b.edges.tolist()[0] == [0, 0]  # loop + 2, triangle 3, edge 1
    ka = run_ok(dataset_job(tmp_path / "a.yaml", clean), tmp_path / "a.zarr", client)
    kb = run_ok(dataset_job(tmp_path / "b.yaml", messy), tmp_path / "b.zarr", client)
    assert ka["tiles_total"] == kb["tiles_total"]
    ga, gb = open_gram(tmp_path / "a.zarr")[0], open_gram(tmp_path / "b.zarr")[0]
    assert np.array_equal(ga, gb) and np.array_equal(gb, reference_gram(tmp_path / "b.yaml"))


def test_graphs_without_edges_and_a_single_graph(tmp_path, client):
    no_edges = write_tu(tmp_path / "noedge" / "TOY", toy(A=""))
    run_ok(dataset_job(tmp_path / "n.yaml", no_edges), tmp_path / "n.zarr", client)
    k = open_gram(tmp_path / "n.zarr")[0]
    labels = np.array([0, 1, 0, 2, 2, 2, 1, 0])
    counts = np.stack([np.bincount(labels[s], minlength=3) for s in (slice(0, 3), slice(3, 6), slice(6, 8))])
    # WL on edgeless graphs: every iteration only relabels, so K = (h + 1) * <label counts>
    assert np.array_equal(k, 3.0 * counts @ counts.T)
    one = write_tu(tmp_path / "one" / "TOY", {"A": "1, 2\n2, 1\n", "graph_indicator": "1\n1\n",
                                              "graph_labels": "0\n", "node_labels": "3\n3\n"})
    s = run_ok(dataset_job(tmp_path / "o.yaml", one, tile=64), tmp_path / "o.zarr", client)
    assert s["tiles_total"] == 1 and open_gram(tmp_path / "o.zarr")[0].shape == (1, 1)


def test_tile_larger_than_the_dataset(tmp_path, client):
    """gram.tile_size = 10**6 on 8 graphs: one tile, one chunk of the Gram's size (a chunk of
    the tile's size would need 7 TiB per write)."""
    folder = write_tu(tmp_path / "TOY", TOY)
    job = dataset_job(tmp_path / "job.yaml", folder, tile=10**6)
    run_ok(job, tmp_path / "g.zarr", client)
    assert zarr.open_group(str(tmp_path / "g.zarr"), mode="r")["gram"].chunks == (3, 3)
    assert np.array_equal(open_gram(tmp_path / "g.zarr")[0], reference_gram(job))


def test_a_100k_node_graph(tmp_path):
    """One graph of 100,000 nodes (a long cycle with chords) among three small ones."""
    rng = np.random.default_rng(0)
    n_big = 100_000
    u = np.arange(n_big)
    v = np.concatenate([(u + 1) % n_big, rng.integers(0, n_big, n_big // 2)])
    u = np.concatenate([u, rng.integers(0, n_big, n_big // 2)])
    edges = np.concatenate([np.stack([u, v], 1), np.stack([v, u], 1)]) + 1
    small = np.array([[1, 2], [2, 1], [2, 3], [3, 2]])
    offsets = [n_big, n_big + 3, n_big + 6]
    edges = np.concatenate([edges, *[small + o for o in offsets]])
    folder = tmp_path / "BIG"
    folder.mkdir()
    np.savetxt(folder / "BIG_A.txt", edges, fmt="%d", delimiter=", ")
    np.savetxt(folder / "BIG_graph_indicator.txt", np.repeat([1, 2, 3, 4], [n_big, 3, 3, 3]), fmt="%d")
    np.savetxt(folder / "BIG_graph_labels.txt", [1, 0, 1, 0], fmt="%d")
    np.savetxt(folder / "BIG_node_labels.txt", rng.integers(0, 5, n_big + 9), fmt="%d")
    job = dataset_job(tmp_path / "job.yaml", folder, tile=2, kernel="{name: wl, h: 3}")
    t0 = time.perf_counter()
    run_ok(job, tmp_path / "g.zarr")
    assert time.perf_counter() - t0 < 120
    k = open_gram(tmp_path / "g.zarr")[0]
    assert k.shape == (4, 4) and np.array_equal(k, reference_gram(job))
    assert k[0, 0] > 4 * n_big - 1  # (h + 1) * n + the repeated labels


# ----------------------------------------------------------------------------- no unpickling
class Payload:
    """Unpickling this runs ``touch <sentinel>``."""

    def __init__(self, sentinel: Path) -> None:
        self.sentinel = str(sentinel)

    def __reduce__(self):
        return (os.system, (f"touch {self.sentinel}",))


@pytest.fixture(scope="module")
def good_store(tmp_path_factory):
    from distributed import Client, LocalCluster

    folder = tmp_path_factory.mktemp("store")
    job = folder / "job.yaml"
    job.write_text(SYN + KER + "gram: {tile_size: 4}\n")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0",
                      silence_logs=logging.ERROR) as c, Client(c) as client:
        res = run_job(load_job(job), out=str(folder / "good.zarr"), placement=Placement(client=client))
    assert res.complete
    return folder / "good.zarr"


def _pickle_codec(array_dir: Path, payload: bytes) -> None:
    """Make a v3 array decode its chunks with numcodecs' pickle codec, chunks = the payload."""
    meta = json.loads((array_dir / "zarr.json").read_text())
    meta["codecs"] = [{"name": "numcodecs.pickle", "configuration": {"protocol": 5}}]
    (array_dir / "zarr.json").write_text(json.dumps(meta))
    for f in (array_dir / "c").rglob("*"):
        if f.is_file():
            f.write_bytes(payload)


def _v2_object_array(array_dir: Path, payload: bytes) -> None:
    """A Zarr v2 object array whose filter is pickle, its one chunk the payload."""
    shutil.rmtree(array_dir, ignore_errors=True)
    array_dir.mkdir(parents=True)
    (array_dir / ".zarray").write_text(json.dumps({
        "zarr_format": 2, "shape": [1], "chunks": [1], "dtype": "|O", "compressor": None,
        "fill_value": None, "order": "C", "filters": [{"id": "pickle"}]}))
    (array_dir / "0").write_bytes(payload)


PLANTS = ["gram_pickle_codec", "y_pickle_codec", "checksums_pickle_codec", "state_pickle_codec", "state_v2_object_array",
          "whole_store_v2_objects", "pickle_files_and_attributes"]


@pytest.mark.parametrize("plant", PLANTS)
def test_planted_pickle_payload_never_runs(plant, good_store, tmp_path):
    sentinel = tmp_path / "executed"
    payload = pickle.dumps(np.array([Payload(sentinel)], dtype=object))
    store = tmp_path / "evil.zarr"
    shutil.copytree(good_store, store)
    if plant == "gram_pickle_codec":
        _pickle_codec(store / "gram", payload)
    elif plant == "y_pickle_codec":
        _pickle_codec(store / "y", payload)
    elif plant == "checksums_pickle_codec":
        _pickle_codec(store / "tile_checksums", payload)
    elif plant == "state_pickle_codec":
        _pickle_codec(store / "state" / "labels", payload)
    elif plant == "state_v2_object_array":
        _v2_object_array(store / "state" / "labels", payload)
    elif plant == "whole_store_v2_objects":
        attrs = json.loads((store / "zarr.json").read_text())["attributes"]
        shutil.rmtree(store)
        store.mkdir()
        (store / ".zgroup").write_text('{"zarr_format": 2}')
        (store / ".zattrs").write_text(json.dumps(attrs))
        for name in ("gram", "tiles_done", "y", "diag"):
            _v2_object_array(store / name, payload)
    else:
        for f in ("gram.pkl", "state/labels.npy", "state.pickle", "y/c/0.pkl"):
            (store / f).write_bytes(payload)
        meta = json.loads((store / "zarr.json").read_text())
        meta["attributes"]["kernel"]["params"]["h"] = {"py/reduce": [{"py/function": "os.system"}],
                                                       "!!python/object/apply:os.system": [str(sentinel)]}
        meta["attributes"]["dataset"]["spec"] = f"!!python/object/apply:os.system ['touch {sentinel}']"
        meta["attributes"]["pickled"] = payload.hex()
        (store / "zarr.json").write_text(json.dumps(meta))

    outcomes = {}
    for name, fn in (("open_gram", open_gram), ("store_info", info), ("read_state", read_state)):
        try:
            fn(store)
            outcomes[name] = "ok"
        except StoreError as exc:
            outcomes[name] = f"StoreError: {exc}"
    for args in (("info", str(store)), ("info", str(store), "--json"),
                 ("evaluate", str(store), "--folds", "2", "--repeats", "1", "--workers", "0")):
        r = run_main(*args)
        if r.returncode:
            line = one_error_line(r)
            if plant == "y_pickle_codec" and args[0] == "evaluate":
                assert "cannot read array 'y'" in line, line
        outcomes[args[0]] = r.returncode
    assert not sentinel.exists(), f"the payload ran: {outcomes}"
    if plant == "pickle_files_and_attributes":  # inert data: the store still works
        assert outcomes["open_gram"] == outcomes["read_state"] == "ok"
    else:
        assert "StoreError" in outcomes[{"gram_pickle_codec": "open_gram", "y_pickle_codec": "open_gram",
                                         "checksums_pickle_codec": "open_gram"}.get(plant, "read_state")], outcomes


def test_rerun_into_a_store_with_a_planted_state_does_not_unpickle(good_store, tmp_path):
    """Resuming reads the state back from the store on the workers: a pickle payload there
    fails the run with one line and never runs."""
    sentinel = tmp_path / "executed"
    store = tmp_path / "evil.zarr"
    shutil.copytree(good_store, store)
    _pickle_codec(store / "state" / "labels", pickle.dumps(np.array([Payload(sentinel)], dtype=object)))
    root = zarr.open_group(str(store), mode="r+")
    mask = root["tiles_done"].with_config({"write_empty_chunks": True})  # as gramdist writes it: kept whole
    mask[...] = np.zeros(mask.shape, dtype=np.uint8)  # force tiles to be recomputed
    root.attrs["complete"] = False
    job = store.parent / "job.yaml"
    job.write_text(SYN + KER + "gram: {tile_size: 4}\ncluster: {n_workers: 1}\n")
    r = run_cli("run", str(job), "--out", str(store), timeout=120)
    line = one_error_line(r, worker_logs=True)
    assert "cannot read array 'labels'" in line, line
    assert not sentinel.exists()


UNPICKLING = re.compile(
    r"\bpickle\.loads?\(|\bcloudpickle\.loads?\(|\bdill\.|\bmarshal\.loads?\(|\bshelve\.|"
    r"allow_pickle\s*=\s*True|\bnp\.load\(|\bnumpy\.load\(|\byaml\.load\(|\byaml\.unsafe_load|"
    r"\byaml\.full_load|\bUnsafeLoader\b|\beval\(|\bexec\(|\bjoblib\.load\("
)


def test_gramdist_never_calls_an_unpickling_loader():
    hits = []
    for path in sorted((ROOT / "gramdist").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if UNPICKLING.search(code):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert hits == [], "\n".join(hits)
    # the pattern does catch what it is meant to catch
    for bad in ("pickle.load(f)", "np.load(p, allow_pickle=True)", "yaml.load(text)", "eval(s)"):
        assert UNPICKLING.search(bad)
    assert not UNPICKLING.search("yaml.safe_load(text)")
