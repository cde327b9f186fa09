"""Stores nothing can corrupt (issue #29): nothing deleted that is not a store, a store is data
and never configuration, checksums that see every change, every state of an append
recoverable, loopback by default. Real processes and real files throughout."""

from __future__ import annotations

import json
import os
import shutil
import time

import numpy as np
import pytest
import zarr
from test_deploy import one_error_line, reference_gram, run_cli, synthetic_job

from gramdist.engine.store import GramStore, open_gram, verify


@pytest.fixture
def job(tmp_path):
    return synthetic_job(tmp_path / "j.yaml", n_graphs=60, tile=16, seed=3)


def run(job, out, *args):
    r = run_cli("run", str(job), "--out", str(out), "--quiet", *args)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


# ------------------------------------------------------------------------------- deleting
@pytest.mark.parametrize("command", ["run", "features"])
def test_overwrite_never_deletes_what_is_not_a_store(tmp_path, job, command):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    line = one_error_line(run_cli(command, str(job), "--out", str(precious), "--overwrite", "--quiet"))
    assert f"{precious}: not a gramdist store" in line and "left as it is" in line
    assert (precious / "thesis.tex").read_text() == "years of work"
    file_ = tmp_path / "notes.txt"
    file_.write_text("keep")
    assert "not a gramdist store (a file)" in one_error_line(
        run_cli(command, str(job), "--out", str(file_), "--overwrite", "--quiet"))
    assert file_.read_text() == "keep"


@pytest.mark.parametrize("where", [".", "/"])
def test_out_naming_a_folder_itself_is_one_line(tmp_path, job, where):
    line = one_error_line(run_cli("run", str(job), "--out", where, "--overwrite", "--quiet", cwd=tmp_path))
    assert "names the folder itself" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.yaml"]  # not even a lock file


@pytest.mark.parametrize("args", [("run", "{job}", "--out", "gs://b/x.zarr"), ("features", "{job}", "--out", "az://b/f.zarr"),
                                  ("info", "gs://bucket/x.zarr"), ("verify", "gs://bucket/x.zarr"),
                                  ("append", "gs://bucket/x.zarr", "{job}")])
def test_a_url_of_an_unwired_scheme_is_refused_not_written_as_a_local_folder(tmp_path, job, args):
    """Only ``s3://`` is wired (tests/test_object_store.py); another scheme is one line, never
    a local folder named ``gs:``."""
    line = one_error_line(run_cli(*[a.format(job=job) for a in args], cwd=tmp_path))
    assert "are not supported yet (only s3://)" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.yaml"]
    with pytest.raises(Exception, match="not supported yet"):
        open_gram("gs://bucket/x.zarr")


@pytest.mark.parametrize("args", [("run", "{job}", "--out", "s3://bucket/x.zarr"), ("info", "s3://bucket/x.zarr")])
def test_an_s3_url_without_credentials_is_one_line_naming_where_they_come_from(tmp_path, job, args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {"AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
            "AWS_EC2_METADATA_DISABLED": "true"}
    line = one_error_line(run_cli(*[a.format(job=job) for a in args], cwd=tmp_path, env=env))
    assert "s3://bucket/x.zarr: cannot reach the object store" in line and "AWS_ACCESS_KEY_ID" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.yaml"]


def test_overwrite_replaces_a_store_and_an_empty_folder(tmp_path, job):
    out = tmp_path / "s.zarr"
    out.mkdir()  # an empty folder made beforehand: fine, with or without --overwrite
    run(job, out)
    run(job, out, "--overwrite", "--set", "kernel.h=1")
    assert GramStore.open(out).kernel["params"]["h"] == 1


def test_combine_never_writes_over_one_of_its_inputs(tmp_path, job):
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run(job, a)
    run(job, b, "--set", "kernel.h=1")
    before = open_gram(a)[0]
    line = one_error_line(run_cli("combine", str(a), str(b), "--weights", "0.5,0.5", "--out", str(a), "--overwrite"))
    assert "the output is one of the stores being combined" in line
    assert np.array_equal(open_gram(a)[0], before) and verify(a)["problems"] == []


def test_gram_transformer_overwrite_refuses_a_folder_of_other_files(tmp_path):
    from gramdist import GramTransformer, StoreError
    from gramdist.datasets import load_dataset

    precious = tmp_path / "data"
    precious.mkdir()
    (precious / "keep.csv").write_text("x")
    graphs = load_dataset({"synthetic": {"n_graphs": 10, "n_nodes": 6, "seed": 1}})
    with pytest.raises(StoreError, match="not a gramdist store"):
        GramTransformer("wl", store=str(precious), overwrite=True).fit_transform(graphs)
    assert (precious / "keep.csv").exists()


# ------------------------------------------------------------------------------- data, not configuration
def test_append_never_runs_what_the_store_recorded(tmp_path, job):
    """A store whose recorded job names a jobqueue with a shell prologue and a scheduler: an
    append runs in this process (a small one) and neither runs nor dials anything recorded."""
    out = tmp_path / "s.zarr"
    run(job, out, "--set", "dataset.synthetic.n_graphs=40")
    meta = json.loads((out / "zarr.json").read_text())
    marker = tmp_path / "pwned"
    meta["attributes"]["job"]["cluster"] = {"scheduler": "tcp://10.255.255.1:8786",
                                            "jobqueue": {"kind": "slurm", "job_script_prologue": [f"touch {marker}"]}}
    (out / "zarr.json").write_text(json.dumps(meta))
    t = time.time()
    r = run_cli("append", str(out), json.dumps({"synthetic": {"n_graphs": 60, "n_nodes": [8, 16], "avg_degree": 2.5,
                                                              "n_labels": 5, "attr_dim": 0, "seed": 3}, "skip": 40}),
                "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "computing in this process" in r.stderr and time.time() - t < 60
    assert not marker.exists()


def test_append_reads_recorded_sources_from_local_files_only(tmp_path, dataset_dir):
    """A recorded spec that would import a package (a dotted name) or download is refused in
    one line pointing to --base; given with --base, the same graphs are appended."""
    from gramdist.engine.store import GramStore

    path = dataset_dir("MUTAG")
    job = tmp_path / "m.yaml"
    job.write_text(f"dataset: {{path: {path}, limit: 150}}\nkernel: {{name: wl, h: 2}}\ngram: {{tile_size: 64}}\n")
    out = tmp_path / "m.zarr"
    run(job, out)
    meta = json.loads((out / "zarr.json").read_text())
    meta["attributes"]["dataset"]["spec"] = {"smiles": "x.csv", "package": "os.path"}
    (out / "zarr.json").write_text(json.dumps(meta))
    new = json.dumps({"path": str(path), "skip": 150})
    line = one_error_line(run_cli("append", str(out), new, "--quiet"))
    assert "a dotted package name imports code" in line and "--base" in line
    r = run_cli("append", str(out), new, "--base", json.dumps({"path": str(path), "limit": 150}), "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    assert GramStore.open(out).grid.n_rows == 188 and verify(out)["problems"] == []


def test_cancel_dials_no_recorded_address(tmp_path, job):
    out = tmp_path / "s.zarr"
    run(job, out)
    from gramdist.engine.jobrecord import record_file

    record_file(out).write({"job_id": "gramdist-x-000000", "state": "running", "scheduler": "tcp://10.255.255.1:8786",
                            "since": time.time(), "heartbeat": time.time(), "stores": [["", str(out)]]})
    t = time.time()
    r = run_cli("cancel", str(out), "--wait", "1")
    assert time.time() - t < 20, "dialled the recorded scheduler"
    assert "complete" in r.stdout, r.stdout + r.stderr


# ------------------------------------------------------------------------------- checksums
def _tile(out, i, j):
    return zarr.open_array(str(out / "gram"), mode="r+"), (slice(16 * i, 16 * i + 16), slice(16 * j, 16 * j + 16))


DAMAGE = {
    "two values swapped in a tile": lambda out: _swap(out, (0, 1), (3, 5), (7, 9)),
    "a mirror changed alone": lambda out: _poke(out, (1, 0), (2, 3)),
    "a label flipped": lambda out: _vector(out, "y", lambda v: np.r_[1 - v[0], v[1:]]),
    "a graph id changed": lambda out: _vector(out, "graph_ids", lambda v: np.r_[v[0] + 1000, v[1:]]),
    "the diagonal changed": lambda out: _vector(out, "diag", lambda v: np.r_[v[0] * 2, v[1:]]),
    "the fitted state changed": lambda out: _vector(out, "fit_indices", lambda v: v[::-1].copy()),
}


def _swap(out, tile, a, b):
    arr, (rs, cs) = _tile(out, *tile)
    block = arr[rs, cs]
    block[a], block[b] = block[b], block[a]
    arr[rs, cs] = block


def _poke(out, tile, at):
    arr, (rs, cs) = _tile(out, *tile)
    block = arr[rs, cs]
    block[at] = np.nextafter(block[at], 2.0)
    arr[rs, cs] = block


def _vector(out, name, change):
    arr = zarr.open_array(str(out / name), mode="r+")
    arr[...] = change(np.asarray(arr[...]))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_verify_sees_every_change_and_repair_plus_rerun_restores_the_bits(tmp_path, job, damage):
    out = tmp_path / "s.zarr"
    run(job, out)
    reference = (out / "gram").exists() and open_gram(out)
    DAMAGE[damage](out)
    r = run_cli("verify", str(out))
    assert r.returncode == 1 and "problem(s) found" in r.stdout, (damage, r.stdout)
    r = run_cli("verify", str(out), "--repair")
    assert "repaired" in r.stdout, r.stdout
    run(job, out)
    assert verify(out)["problems"] == []
    k, y = open_gram(out)
    assert np.array_equal(k, reference[0]) and np.array_equal(y, reference[1])
    assert np.array_equal(k, reference_gram(job))


def test_a_store_of_gramdist_0_2_verifies_says_what_it_cannot_see_and_upgrades(tmp_path, job):
    """Checksums of 0.2 (order-free word sums): read as such, the limit said, and `gramdist
    upgrade` re-records them after checking them."""
    from gramdist.engine.store.checksums import tile_checksum

    out = tmp_path / "old.zarr"
    run(job, out)
    store = GramStore.open(out, mode="r+")
    grid, mask = store.grid, store.done_mask()
    sums = np.zeros(grid.shape, np.uint64)
    for tl in grid.tiles():
        (r0, r1), (c0, c1) = grid.row_range(tl[0]), grid.col_range(tl[1])
        sums[tl] = tile_checksum(store.read_block((r0, r1), (c0, c1)), 1)
    store.save_progress(mask, sums)
    meta = json.loads((out / "zarr.json").read_text())
    for key in ("checksum_format", "vector_checksums"):
        meta["attributes"].pop(key)
    (out / "zarr.json").write_text(json.dumps(meta))
    report = verify(out)
    assert report["problems"] == [] and "cannot see two values swapped" in report["message"]
    _swap(out, (0, 1), (3, 5), (7, 9))
    assert verify(out)["problems"] == []  # the old format's blind spot, as documented
    _swap(out, (0, 1), (3, 5), (7, 9))  # put back
    r = run_cli("upgrade", str(out))
    assert r.returncode == 0 and "re-recorded the checksums" in r.stdout, r.stdout + r.stderr
    _swap(out, (0, 1), (3, 5), (7, 9))
    assert verify(out)["damaged"] == [[0, 1]]


def test_feature_rows_swapped_are_seen(tmp_path, job):
    out = tmp_path / "f.zarr"
    r = run_cli("features", str(job), "--out", str(out), "--quiet", "--chunk-size", "20")
    assert r.returncode == 0, r.stderr[-2000:]
    arr = zarr.open_array(str(out / "data" / "1"), mode="r+")
    values = np.asarray(arr[...])
    values[[0, 1]] = values[[1, 0]] + np.array([0.0, 1.0])  # two values swapped (and one changed)
    arr[...] = values
    r = run_cli("verify", str(out))
    assert r.returncode == 1 and "chunk 1" in r.stdout, r.stdout


# ------------------------------------------------------------------------------- appends
def test_abort_during_a_commit_rolls_forward(tmp_path, job, monkeypatch):
    """An append killed inside its commit (chunks moved, metadata grown): --abort finishes
    the commit instead of discarding half of it; the store equals a from-scratch run."""
    from gramdist.engine.append import append
    from gramdist.engine.context import RunContext
    from gramdist.engine.placement import Placement
    from gramdist.engine.store import staging

    out, full = tmp_path / "s.zarr", tmp_path / "full.zarr"
    run(job, out, "--set", "dataset.limit=40")
    real = staging._copy_array_files
    died = []

    def dies_in_the_commit(location, source, target):
        if not died:  # after the chunks and the Gram's metadata moved
            died.append(1)
            raise KeyboardInterrupt
        return real(location, source, target)

    monkeypatch.setattr(staging, "_copy_array_files", dies_in_the_commit)
    spec = {"synthetic": {"n_graphs": 60, "n_nodes": [8, 16], "avg_degree": 2.5, "n_labels": 5, "attr_dim": 0,
                          "seed": 3}, "skip": 40}
    with pytest.raises(KeyboardInterrupt):
        append(out, spec, placement=Placement(in_process=True), context=RunContext(log=lambda m: None))
    monkeypatch.setattr(staging, "_copy_array_files", real)
    r = run_cli("append", str(out), "--abort", "--quiet")
    assert r.returncode == 0 and "--abort cannot undo a commit that has begun" in r.stderr, r.stderr[-2000:]
    run(job, full, "--set", f"fit.from_store={out}")
    assert verify(out)["problems"] == [] and np.array_equal(open_gram(out)[0], open_gram(full)[0])


# ------------------------------------------------------------------------------- grids, ports, small ones
def test_grid_settings_are_validated_and_stay_inside_out(tmp_path, job):
    line = one_error_line(run_cli("run", str(job), "--out", str(tmp_path / "g"), "--set", "gram./tmp/x=1,2"))
    assert "gram./tmp/x" in line and not list(tmp_path.glob("**/*-1.zarr"))
    line = one_error_line(run_cli("run", str(job), "--out", str(tmp_path / "z"), "--set", "gram.tile_size=0,16"))
    assert "gram.tile_size must be >= 1" in line and not (tmp_path / "z").exists()


def test_embedded_clusters_listen_on_loopback_only():
    from gramdist.engine.cluster import connect
    from gramdist.jobs import ClusterSpec

    with connect(ClusterSpec(n_workers=1)) as client:
        assert client.scheduler.address.startswith("tcp://127.0.0.1:")
        dashboard = client.cluster.scheduler.http_server.port and client.dashboard_link
        assert "127.0.0.1" in dashboard


def test_address_clients_get_the_plain_tcp_warning(capsys, monkeypatch):
    from gramdist.engine import cluster

    monkeypatch.setattr(cluster, "_WARNED", set())
    monkeypatch.setattr(cluster, "_check_scheme", lambda *a: (_ for _ in ()).throw(RuntimeError("stop")))
    cluster.warn_plain_tcp("tcp://10.1.2.3:8786")
    assert "plain TCP" in capsys.readouterr().err


def test_certs_keep_an_existing_folders_mode(tmp_path):
    pytest.importorskip("cryptography")
    folder = tmp_path / "shared-certs"
    folder.mkdir(mode=0o750)
    os.chmod(folder, 0o750)
    r = run_cli("certs", str(folder))
    assert r.returncode == 0, r.stderr
    assert (folder.stat().st_mode & 0o777) == 0o750
    assert (os.stat(folder / "ca.key").st_mode & 0o777) == 0o600


def test_bad_inputs_are_one_line(tmp_path, job):
    import gramdist
    from gramdist.graphs import GraphBatch

    long_smiles = tmp_path / "long.csv"
    # a comment column past the csv module's default field limit (131072 characters) still reads
    long_smiles.write_text("smiles,y,note\nCCC,1," + "x" * 140_000 + "\nCCO,0,\n")
    r = run_cli("run", str(_mol_job(tmp_path, "long.csv")), "--out", str(tmp_path / "l.zarr"), "--quiet")
    assert r.returncode == 0, r.stderr[-2000:]
    latin = tmp_path / "latin.smi"
    latin.write_bytes("CCO ethanol\nCCN \xe9thylamine\n".encode("latin-1"))
    line = one_error_line(run_cli("run", str(_mol_job(tmp_path, "latin.smi")), "--out", str(tmp_path / "s.zarr")))
    assert "latin.smi line 2: not UTF-8 text" in line
    with pytest.raises(gramdist.InputError, match="outside its 2 nodes"):
        gramdist.compute_gram(GraphBatch(node_offsets=[0, 2], edge_offsets=[0, 1], edges=[[0, 5]]), kernel="wl")
    with pytest.raises(gramdist.InputError, match="not finite"):
        gramdist.compute_gram(GraphBatch(node_offsets=[0, 2], edge_offsets=[0, 1], edges=[[0, 1]],
                                         node_attrs=[[1.0], [np.nan]]), kernel="sp_attr")
    nx = pytest.importorskip("networkx")
    g = nx.path_graph(3)
    nx.set_node_attributes(g, {0: 2**63, 1: 1, 2: 1}, "label")
    with pytest.raises(gramdist.DatasetError, match="does not fit in 64 bits"):
        gramdist.compute_gram([g, g], kernel="wl")
    out = tmp_path / "s.zarr"
    run(job, out)
    from gramdist.engine.jobrecord import record_file

    record_file(out).path.write_text("{not json")
    r = run_cli("status", str(out))
    assert r.returncode == 0 and "complete" in r.stdout and "Traceback" not in r.stderr


def _mol_job(tmp_path, name):
    pytest.importorskip("rdkit")
    path = tmp_path / f"{name}.yaml"
    target = ", target: y" if name.endswith(".csv") else ""
    path.write_text(f"dataset: {{smiles: {tmp_path / name}{target}}}\nkernel: {{name: wl, h: 1}}\n")
    return path


def test_verify_refuses_nothing_but_reports_a_damaged_kept_embedding(tmp_path, job):
    out = tmp_path / "k.zarr"
    run(job, out, "--set", "gram.keep_embeddings=true")
    chunk = sorted((out / "embeddings").iterdir())[0]
    arrays = [p for p in chunk.iterdir() if p.is_dir()]
    arr = zarr.open_array(str(arrays[0]), mode="r+")
    values = np.asarray(arr[...])
    values.flat[0] += 1
    arr[...] = values
    r = run_cli("verify", str(out), "--repair")
    assert f"the kept embedding embeddings/{chunk.name}" in r.stdout and not chunk.exists(), r.stdout
    shutil.rmtree(out / "embeddings", ignore_errors=True)
