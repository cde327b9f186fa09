"""Pictures: ``gramdist plot`` (heatmap, spectrum with the PSD check, diagonal) and
``evaluate --plot``; a missing matplotlib is one line."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from test_evaluate import informative_and_noise, make_store
from test_regression import linear_data, make_rect_store

from gramdist.plotting import _subset, plot_store

pytest.importorskip("matplotlib")
PNG = b"\x89PNG\r\n\x1a\n"


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gramdist.cli", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_plot_store_classes_psd_check_and_subset(tmp_path):
    y, good, _ = informative_and_noise(n=60)
    s = make_store(tmp_path / "good.zarr", good, y)
    out = plot_store(s, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:8] == PNG and out["graphs_shown"] == 60
    ref = np.linalg.eigvalsh(good)
    assert out["min_eigenvalue"] == pytest.approx(ref.min(), abs=1e-9) and out["psd"]
    sub = plot_store(s, tmp_path / "sub.png", max_graphs=25, seed=3)
    idx = _subset(60, 25, 3)
    assert sub["graphs_shown"] == 25 and len(np.unique(idx)) == 25
    assert sub["max_eigenvalue"] == pytest.approx(np.linalg.eigvalsh(good[np.ix_(idx, idx)]).max())
    assert plot_store(s)["out"] == str(tmp_path / "good.png")  # default: beside the store


def test_plot_cli_says_when_a_gram_is_not_psd(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((30, 30))
    k = (a + a.T) / 2  # symmetric, indefinite
    s = make_store(tmp_path / "bad.zarr", k, np.repeat([0, 1, 2], 10))
    r = _cli("plot", s, "--out", str(tmp_path / "bad.png"))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"plot: {tmp_path / 'bad.png'} (30 graphs shown of 30 x 30)"
    assert lines[1].startswith(f"most negative eigenvalue: {np.linalg.eigvalsh(k).min():.6g} (")
    assert lines[1].endswith("NOT PSD (below -1e-09 x the largest eigenvalue)")


def test_plot_regression_and_rectangular_stores(tmp_path):
    x, y, k = linear_data(n=50)
    s = make_store(tmp_path / "reg.zarr", k, y)
    assert plot_store(s, tmp_path / "reg.png")["psd"]
    attrs = {key: dict(__import__('zarr').open_group(str(s), mode='r').attrs)[key] for key in ("gramdist_version", "tile_size", "dataset_checksum",
                                                                "kernel")}
    rect = make_rect_store(tmp_path / "rect.zarr", k[:20], y[:20], y, attrs)
    out = plot_store(rect, tmp_path / "rect.png")
    assert out["graphs_shown"] == "20 x 50" and "min_eigenvalue" not in out
    assert (tmp_path / "rect.png").read_bytes()[:8] == PNG


def test_missing_matplotlib_is_one_line(tmp_path):
    y, good, _ = informative_and_noise(n=20)
    s = make_store(tmp_path / "s.zarr", good, y)
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from gramdist.cli import main\n"
            f"sys.exit(main(['plot', {s!r}]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip() == 'gramdist: error: plots need matplotlib: pip install "gramdist[plot]"'
    code = code.replace(f"['plot', {s!r}]", f"['evaluate', {s!r}, '--plot', 'x.png', '--workers', '0']")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2 and "plots need matplotlib" in r.stderr and not (tmp_path / "x.png").exists()


def test_evaluate_plot_of_a_grid(tmp_path):
    y, good, noise = informative_and_noise(n=40)
    folder = tmp_path / "grid"
    folder.mkdir()
    make_store(folder / "a-noise.zarr", noise, y)
    make_store(folder / "b-good.zarr", good, y)
    r = _cli("evaluate", str(folder), "--folds", "3", "--repeats", "1", "--workers", "0", "--c-min", "-1",
             "--c-max", "1", "--plot", str(tmp_path / "ev.png"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == f"plot: {tmp_path / 'ev.png'}"
    assert (tmp_path / "ev.png").read_bytes()[:8] == PNG
