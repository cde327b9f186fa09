"""MUTAG and PTC_MR built into the package; GRAMDIST_OFFLINE; the README's first command offline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from test_datasets_resolve import env as isolated_env  # noqa: F401 - a fixture: the isolated search path

from gramdist.datasets import read_tu, resolve_dataset
from gramdist.datasets.builtin import BUILTIN, builtin_zip, extract_builtin
from gramdist.errors import DatasetError

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gramdist"


def test_builtin_copies_are_the_tu_files_small_and_documented(tmp_path, dataset_dir):
    sizes = [builtin_zip(name).stat().st_size for name in BUILTIN]
    assert sum(sizes) < 200_000  # well under 1 MB together
    notes = (PACKAGE / "datasets" / "builtin" / "README.md").read_text()
    for name in BUILTIN:
        assert name in notes and "TUDataset" in notes
        with zipfile.ZipFile(builtin_zip(name)) as zf:
            assert f"{name}/{name}_A.txt" in zf.namelist()
        shared = dataset_dir(name)
        extracted = extract_builtin(name, tmp_path)
        assert read_tu(extracted).checksum() == read_tu(shared, name=name).checksum()
        for f in shared.iterdir():  # the collection's files, byte for byte
            assert (extracted / f.name).read_bytes() == f.read_bytes()
    assert len(read_tu(tmp_path / "MUTAG")) == 188 and len(read_tu(tmp_path / "PTC_MR")) == 344


@pytest.fixture
def no_repo_shared(isolated_env, monkeypatch):  # noqa: F811 - the imported fixture
    """The search path without the checkout's own ../shared (which CI has): $GRAMDIST_DATA,
    the working folder's ../shared (absent here) and the download cache."""
    from gramdist.datasets import resolve

    roots = [p for p in resolve.dataset_search_path() if str(p).startswith(str(isolated_env))]
    monkeypatch.setattr(resolve, "dataset_search_path", lambda: roots)
    return isolated_env


def test_builtin_is_used_only_when_no_folder_has_the_dataset(no_repo_shared, monkeypatch):
    from test_datasets_tu import write_toy

    root = no_repo_shared
    # nothing anywhere: the built-in copy, extracted into the download cache, no network
    found = resolve_dataset("MUTAG")
    assert found == root / "cache" / "datasets" / "MUTAG" and len(read_tu(found)) == 188
    # a folder on $GRAMDIST_DATA wins over it
    mine = write_toy(root / "data", name="PTC_MR")
    assert resolve_dataset("PTC_MR") == mine


def test_offline_disables_downloads_with_a_clear_error(no_repo_shared, monkeypatch):
    monkeypatch.setenv("GRAMDIST_OFFLINE", "1")
    monkeypatch.setenv("GRAMDIST_TU_URL", "http://192.0.2.1/{name}.zip")  # never contacted when offline
    with pytest.raises(DatasetError, match=r"dataset NCI1 not found in .* \(GRAMDIST_OFFLINE is set"):
        resolve_dataset("NCI1")
    assert len(read_tu(resolve_dataset("PTC_MR"))) == 344  # built in: no download needed


def fresh_machine(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An installed-looking gramdist (the package alone, no source checkout around it), an empty
    $GRAMDIST_DATA, an empty cache, downloads disabled, and a working folder with no ../shared."""
    site = tmp_path / "site"
    shutil.copytree(PACKAGE, site / "gramdist", ignore=shutil.ignore_patterns("__pycache__"))
    work = tmp_path / "clone" / "work"
    (work / "jobs").mkdir(parents=True)
    shutil.copy(ROOT / "jobs" / "mutag-wl.yaml", work / "jobs")
    (tmp_path / "empty").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAMDIST_", "DASK_"))}
    env.update(PYTHONPATH=str(site), GRAMDIST_DATA=str(tmp_path / "empty"), GRAMDIST_OFFLINE="1",
               GRAMDIST_CACHE=str(tmp_path / "cache"), GRAMDIST_TU_URL="http://192.0.2.1/{name}.zip")
    return env, work


def readme_first_command(tmp_path: Path, evaluate_options: list[str]) -> None:
    """`gramdist run jobs/mutag-wl.yaml && gramdist evaluate mutag-wl.zarr`, as the README says."""
    env, work = fresh_machine(tmp_path)
    assert not (work.parent / "shared").exists()
    cli = [sys.executable, "-m", "gramdist.cli"]
    run = subprocess.run([*cli, "run", "jobs/mutag-wl.yaml", "--json"], cwd=work, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1])["complete"]
    ev = subprocess.run([*cli, "evaluate", "mutag-wl.zarr", *evaluate_options, "--json"], cwd=work, env=env,
                        capture_output=True, text=True, timeout=600)
    assert ev.returncode == 0, ev.stderr
    assert json.loads(ev.stdout.splitlines()[-1])["accuracy_mean"] > 80
    assert (tmp_path / "cache" / "datasets" / "MUTAG" / "MUTAG_A.txt").is_file()


def test_readme_first_command_runs_offline_on_a_fresh_machine(tmp_path):
    # the default 10 x 10 nested CV takes most of a minute here: one repeat, in process, shows
    # the same thing (the data resolve offline, the store runs and evaluates)
    readme_first_command(tmp_path, ["--repeats", "1", "--workers", "0"])


@pytest.mark.slow
def test_readme_first_command_exactly(tmp_path):
    readme_first_command(tmp_path, [])


def test_python_one_liner_runs_offline_on_a_fresh_machine(tmp_path):
    env, work = fresh_machine(tmp_path)
    code = ("import gramdist; from sklearn.svm import SVC; "
            "K = gramdist.compute_gram('MUTAG', kernel='wl', h=3, normalize=True); "
            "y = gramdist.datasets.load_dataset('MUTAG').y; "
            "print(K.shape, SVC(kernel='precomputed').fit(K, y).score(K, y) > 0.8)")
    out = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(188, 188) True"
