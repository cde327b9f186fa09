"""Tests of dataset resolution and download, against a local HTTP server only."""

from __future__ import annotations

import http.server
import threading
import zipfile
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from test_datasets_tu import TOY, write_toy

from gramdist.datasets import dataset_search_path, read_tu, resolve_dataset
from gramdist.datasets.cache import cache_dir
from gramdist.errors import DatasetError


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Isolated search path: data root, cache, a cwd without ../shared, and no real URL."""
    data, cache, work = tmp_path / "data", tmp_path / "cache", tmp_path / "proj" / "work"
    for d in (data, cache, work):
        d.mkdir(parents=True)
    monkeypatch.setenv("GRAMDIST_DATA", str(data))
    monkeypatch.setenv("GRAMDIST_CACHE", str(cache))
    monkeypatch.setenv("GRAMDIST_TU_URL", "http://127.0.0.1:9/{name}.zip")  # discard port: refused
    monkeypatch.chdir(work)
    return tmp_path


class _Handler(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, *args) -> None:  # keep test output quiet
        pass

    def do_GET(self) -> None:
        type(self).requests.append(self.path)
        super().do_GET()


@pytest.fixture
def server(env, monkeypatch):
    """Serve env/'www' on 127.0.0.1 and point $GRAMDIST_TU_URL at it."""
    www = env / "www"
    www.mkdir()
    _Handler.requests = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(_Handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    monkeypatch.setenv("GRAMDIST_TU_URL", f"http://127.0.0.1:{httpd.server_address[1]}/{{name}}.zip")
    yield www
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def make_zip(path: Path, name: str = "TOY", skip: tuple[str, ...] = (), prefix: str | None = None,
             extra: dict[str, bytes] | None = None) -> None:
    prefix = f"{name}/" if prefix is None else prefix
    with zipfile.ZipFile(path, "w") as zf:
        for part, text in TOY.items():
            if part not in skip:
                zf.writestr(f"{prefix}{name}_{part}.txt", text)
        zf.writestr(f"{prefix}README.txt", "toy dataset\n")
        for member, data in (extra or {}).items():
            zf.writestr(member, data)


def test_search_path_order(env, monkeypatch):
    roots = dataset_search_path()
    assert roots[0] == env / "data"
    assert roots[1] == Path.cwd() / ".." / "shared" / "datasets"
    assert roots[-1] == env / "cache" / "datasets" == cache_dir()
    # the repository's ../shared/datasets (source checkout) sits between cwd and cache
    repo = Path(__file__).resolve().parents[1]
    assert any(r.resolve() == (repo / ".." / "shared" / "datasets").resolve() for r in roots[2:-1])


def test_data_env_wins_over_cwd_and_cache(env):
    shared = env / "proj" / "shared" / "datasets"
    for root in (env / "data", shared, cache_dir()):
        write_toy(root)
    assert resolve_dataset("TOY") == env / "data" / "TOY"
    (env / "data" / "TOY").rename(env / "data" / "moved")
    assert resolve_dataset("TOY").resolve() == (shared / "TOY").resolve()


def test_cache_folder_is_used_without_download(env):
    write_toy(cache_dir())
    assert resolve_dataset("TOY") == cache_dir() / "TOY"


def test_download_extract_and_reuse(server):
    make_zip(server / "TOY.zip")
    folder = resolve_dataset("TOY")
    assert folder == cache_dir() / "TOY"
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"TOY_{p}.txt" for p in TOY] + ["README.txt"])
    assert _Handler.requests == ["/TOY.zip"]
    b = read_tu(folder)
    ref = read_tu(write_toy(server.parent / "ref"))
    assert b.checksum() == ref.checksum()
    assert resolve_dataset("TOY") == folder and _Handler.requests == ["/TOY.zip"]  # cached
    assert [p.name for p in cache_dir().iterdir()] == ["TOY"]  # no temp files left


def test_download_nested_folder_and_unsafe_members(server):
    make_zip(server / "TOY.zip", prefix="outer/TOY/", extra={"../evil.txt": b"x", "/abs.txt": b"y"})
    folder = resolve_dataset("TOY")
    np.testing.assert_array_equal(read_tu(folder).y, [1, -1, 1])
    assert not (server.parent / "evil.txt").exists() and not (cache_dir() / "evil.txt").exists()


def test_download_http_404(server):
    with pytest.raises(DatasetError, match=r"127\.0\.0\.1.*/NOPE\.zip: download failed \(HTTP 404"):
        resolve_dataset("NOPE")
    assert not (cache_dir() / "NOPE").exists()


def test_download_not_a_zip(server):
    (server / "TOY.zip").write_bytes(b"<html>not a zip</html>")
    with pytest.raises(DatasetError, match="not a zip file"):
        resolve_dataset("TOY")
    assert list(cache_dir().iterdir()) == []


def test_download_zip_missing_files(server):
    make_zip(server / "TOY.zip", skip=("graph_labels",))
    with pytest.raises(DatasetError, match="zip lacks TOY_graph_labels.txt"):
        resolve_dataset("TOY")
    assert list(cache_dir().iterdir()) == []


def test_download_zip_of_another_dataset(server):
    make_zip(server / "TOY.zip", name="OTHER")
    with pytest.raises(DatasetError, match="zip does not contain TOY_A.txt"):
        resolve_dataset("TOY")


def test_download_connection_refused(env):
    with pytest.raises(DatasetError, match="download failed"):
        resolve_dataset("TOY")


def test_download_disabled(env):
    with pytest.raises(DatasetError, match="not found in .*downloads disabled"):
        resolve_dataset("TOY", download=False)


@pytest.mark.parametrize("bad", ["../TOY", "a/b", "", ".hidden"])
def test_invalid_name(env, bad):
    with pytest.raises(DatasetError, match="not a valid TU dataset name"):
        resolve_dataset(bad)
