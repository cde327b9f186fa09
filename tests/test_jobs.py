"""Job files: validation, overrides, grids."""

from __future__ import annotations

import pytest

from gramdist.errors import JobError
from gramdist.jobs import expand_grid, load_job, parse_override


def write(tmp_path, text, name="mutag-wl.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_load_fills_defaults_and_name(tmp_path):
    job = load_job(write(tmp_path, "dataset: {name: MUTAG}\nkernel: {name: wl, h: 2}\n"))
    assert job.name == "mutag-wl"
    assert job.gram.tile_size == 256 and job.fit.seed == 0


@pytest.mark.parametrize("text, match", [
    ("dataset: {name: MUTAG}\nkernel: {name: wl}\nkernal: {}\n", "unknown section 'kernal'"),
    ("dataset: {name: MUTAG}\nkernel: {name: wl}\ngram: {tile: 3}\n", "unknown key gram.tile"),
    ("dataset: {name: MUTAG}\nkernel: {name: wl}\ngram: {tile_size: big}\n", "gram.tile_size must be int"),
    ("dataset: {name: MUTAG}\nkernel: {name: wl}\ngram: {normalize: 1}\n", "gram.normalize must be bool"),
    ("dataset: {name: MUTAG}\nkernel: {name: wl}\ngram: {tile_size: 0}\n", "tile_size must be >= 1"),
    ("kernel: {name: wl}\n", "missing section 'dataset'"),
    ("dataset: {name: MUTAG}\n", "kernel.name"),
    ("- a\n- b\n", "must be a mapping"),
    ("dataset: {name: MUTAG\n", "invalid YAML"),
])
def test_invalid_jobs_name_the_problem(tmp_path, text, match):
    with pytest.raises(JobError, match=match):
        load_job(write(tmp_path, text))


def test_missing_job_file(tmp_path):
    with pytest.raises(JobError, match="not found"):
        load_job(tmp_path / "nope.yaml")


def test_overrides_set_dotted_keys(tmp_path):
    p = write(tmp_path, "dataset: {name: MUTAG}\nkernel: {name: wl, h: 2}\n")
    job = load_job(p, ["kernel.h=4", "dataset.path=/data/MUTAG", "gram.normalize=true"])
    assert job.kernel["h"] == 4 and job.dataset["path"] == "/data/MUTAG"
    assert job.gram.normalize is True


def test_comma_override_makes_a_grid(tmp_path):
    p = write(tmp_path, "dataset: {name: MUTAG}\nkernel: {name: wl, h: 2}\n")
    job = load_job(p, ["kernel.h=1,2,3"])
    settings = expand_grid(job)
    assert [name for name, _ in settings] == ["h-1", "h-2", "h-3"]
    assert [j.kernel["h"] for _, j in settings] == [1, 2, 3]
    assert all(j.grid is None for _, j in settings)


def test_grid_section_product(tmp_path):
    p = write(tmp_path, "dataset: {name: MUTAG}\nkernel: {name: wl}\n"
                        "grid: {kernel.h: [1, 2], gram.normalize: [true, false]}\n")
    assert len(expand_grid(load_job(p))) == 4


def test_single_value_override_pins_a_grid_key(tmp_path):
    p = write(tmp_path, "dataset: {name: MUTAG}\nkernel: {name: wl}\n"
                        "grid: {kernel.h: [1, 2], gram.normalize: [true, false]}\n")
    job = load_job(p, ["kernel.h=3"])
    settings = expand_grid(job)
    assert [j.kernel["h"] for _, j in settings] == [3, 3]
    assert [name for name, _ in settings] == ["normalize-True", "normalize-False"]
    job = load_job(p, ["kernel.h=3", "gram.normalize=false"])
    assert [(name, j.kernel["h"], j.gram.normalize) for name, j in expand_grid(job)] == [("", 3, False)]


def test_parse_override_errors():
    with pytest.raises(JobError, match="KEY=VALUE"):
        parse_override("kernel.h")
    assert parse_override('x="a,b"') == ("x", "a,b", False)
