"""Chunks written straight to a local store's files are the bytes Zarr writes (gramdist.engine.store.chunkfiles)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from gramdist.engine.store.chunkfiles import chunk_encoding, write_chunk, write_small_group
from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.location import Location
from gramdist.engine.store.tiles import create_tile_arrays, folder_of


def _two_gram_arrays(tmp_path: Path, grid: TileGrid, dtype: str, level: int) -> tuple[zarr.Array, zarr.Array]:
    """The same Gram layout twice: one written by Zarr, one by write_chunk."""
    out = []
    for name in ("by_zarr", "direct"):
        group = zarr.open_group(str(tmp_path / f"{name}.zarr"), mode="w", zarr_format=3)
        create_tile_arrays(group, grid, dtype, level)
        out.append(group["gram"].with_config({"write_empty_chunks": True}))
    return out[0], out[1]


def _chunk_file(arr: zarr.Array, coords: tuple[int, int]) -> Path:
    return folder_of(arr) / arr.metadata.encode_chunk_key(coords)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("level", [0, 1, 5])
@pytest.mark.parametrize("in_thread", [False, True])
def test_every_tile_is_the_file_zarr_writes(tmp_path, dtype, level, in_thread):
    # 23 x 23 in tiles of 8: edge tiles of 7 rows/columns, which Zarr pads with the fill value
    grid = TileGrid(23, 23, 8, symmetric=True)
    by_zarr, direct = _two_gram_arrays(tmp_path, grid, dtype, level)
    rng = np.random.default_rng(level)
    gram = rng.random((23, 23)).astype(dtype)
    gram[:8, :8] = np.round(gram[:8, :8] * 4)  # integer-valued: compresses, unlike the rest
    gram[8:16, 16:] = 0.0  # all fill value: still a file
    written = []

    def write_all() -> None:
        for i, j in [(i, j) for i in range(3) for j in range(3)]:
            region = (grid.row_range(i), grid.col_range(j))
            (r0, r1), (c0, c1) = region
            written.append(write_chunk(direct, Location(tmp_path / "direct.zarr"), (i, j), region, gram[r0:r1, c0:c1]))
            by_zarr[r0:r1, c0:c1] = gram[r0:r1, c0:c1]

    if in_thread:  # numcodecs' Blosc compresses with its own context outside the main thread
        t = threading.Thread(target=write_all)
        t.start()
        t.join()
    else:
        write_all()
    assert all(written) and len(written) == 9
    for i in range(3):
        for j in range(3):
            assert _chunk_file(direct, (i, j)).read_bytes() == _chunk_file(by_zarr, (i, j)).read_bytes(), (i, j)
    np.testing.assert_array_equal(zarr.open_array(str(folder_of(direct)), mode="r")[...], gram)
    assert not [p for p in folder_of(direct).rglob(".*")]  # no temporary file left behind


def test_a_transposed_view_is_written_as_its_values(tmp_path):
    # the mirror tile is written from block.T, a non-contiguous view
    grid = TileGrid(10, 10, 5, symmetric=True)
    by_zarr, direct = _two_gram_arrays(tmp_path, grid, "float64", 1)
    block = np.random.default_rng(0).random((5, 5))
    assert write_chunk(direct, Location(tmp_path / "direct.zarr"), (1, 0), ((5, 10), (0, 5)), block.T)
    by_zarr[5:10, 0:5] = block.T
    assert _chunk_file(direct, (1, 0)).read_bytes() == _chunk_file(by_zarr, (1, 0)).read_bytes()


def test_anything_but_one_whole_local_chunk_is_left_to_zarr(tmp_path):
    grid = TileGrid(10, 10, 5, symmetric=True)
    _, direct = _two_gram_arrays(tmp_path, grid, "float64", 1)
    folder, local = folder_of(direct), Location(tmp_path / "direct.zarr")
    block = np.ones((5, 5))
    assert not write_chunk(direct, local, (0, 0), ((0, 5), (1, 6)), block)  # not chunk-aligned
    assert not write_chunk(direct, local, (0, 0), ((0, 4), (0, 4)), block[:4, :4])  # part of a chunk
    assert not write_chunk(direct, SimpleNamespace(remote=True), (0, 0), ((0, 5), (0, 5)), block)  # a bucket
    zstd = zarr.create_array(str(tmp_path / "zstd.zarr"), shape=(10, 10), chunks=(5, 5), dtype="float64",
                             compressors=[zarr.codecs.ZstdCodec()])
    assert chunk_encoding(zstd) is None
    assert not write_chunk(zstd, Location(tmp_path / "zstd.zarr"), (0, 0), ((0, 5), (0, 5)), block)
    assert not (folder / "c").exists()


# ------------------------------------------------------------------ write_small_group
_SMALL_ARRAYS = {
    "indptr": np.array([0, 2, 5], dtype=np.int64),
    "keys": np.array([3, 1, 4, 1, 5], dtype=np.uint64),
    "values": np.linspace(0.0, 1.0, 5),
    "flags": np.array([True, False]),
    "block": np.arange(12, dtype=np.float32).reshape(3, 4),
    "scalar": np.array(7, dtype=np.int32),
    "empty": np.zeros((0, 3), dtype=np.float64),
}


def _by_zarr(folder: Path, arrays: dict[str, np.ndarray], attrs: dict, level: int) -> None:
    """The same group written through Zarr's API: what write_small_group must reproduce."""
    from gramdist.engine.store.groups import blosc

    group = zarr.open_group(str(folder), mode="w", zarr_format=3)
    for name, value in arrays.items():
        arr = group.create_array(name, shape=value.shape, chunks=tuple(max(1, d) for d in value.shape),
                                 dtype=value.dtype, fill_value=0, compressors=blosc(level, value.dtype.itemsize),
                                 config={"write_empty_chunks": True})
        if value.size:
            arr[...] = value
    group.attrs.update(attrs)


@pytest.mark.parametrize("level", [0, 1])
def test_a_small_group_is_the_files_zarr_writes(tmp_path, level):
    attrs = {"class": "x.Y", "none": ["absent"], "complete": True}
    _by_zarr(tmp_path / "by_zarr.zarr" / "g", _SMALL_ARRAYS, attrs, level)
    zarr.open_group(str(tmp_path / "direct.zarr"), mode="w", zarr_format=3)
    assert write_small_group(Location(tmp_path / "direct.zarr"), ("g",), _SMALL_ARRAYS, attrs, level)
    ours, theirs = tmp_path / "direct.zarr" / "g", tmp_path / "by_zarr.zarr" / "g"
    files = sorted(p.relative_to(ours).as_posix() for p in ours.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(theirs).as_posix() for p in theirs.rglob("*") if p.is_file())
    assert "scalar/c" in files and not any(f.startswith("empty/c") for f in files)
    for f in files:
        if f.endswith("zarr.json"):  # the same documents (Zarr may order or space its keys otherwise)
            assert json.loads((ours / f).read_bytes()) == json.loads((theirs / f).read_bytes()), f
        else:
            assert (ours / f).read_bytes() == (theirs / f).read_bytes(), f
    group = zarr.open_group(str(ours), mode="r")
    assert dict(group.attrs) == attrs
    for name, value in _SMALL_ARRAYS.items():
        got = group[name][...]
        assert got.dtype == value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got, value)
    assert not [p for p in ours.rglob(".*")]


def test_a_small_group_replaces_the_old_one_and_its_attributes_come_last(tmp_path, monkeypatch):
    store = Location(tmp_path / "s.zarr")
    zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=3)
    assert write_small_group(store, ("g",), {"a": np.arange(3), "old": np.arange(2)}, {"complete": True})
    written: list[tuple[str, ...]] = []
    real = Location.write_atomic

    def record(self, data, *parts):
        written.append(parts)
        return real(self, data, *parts)

    monkeypatch.setattr(Location, "write_atomic", record)
    assert write_small_group(store, ("g",), {"a": np.arange(4)}, {"complete": True, "n": 4})
    assert written[-1] == ("g", "zarr.json") and len(written) == 3  # a's document and chunk, then the group's
    assert not (tmp_path / "s.zarr" / "g" / "old").exists()  # nothing of the old group survives
    np.testing.assert_array_equal(zarr.open_group(str(tmp_path / "s.zarr" / "g"), mode="r")["a"][...], np.arange(4))


def test_a_small_group_zarr_must_write_is_left_to_it(tmp_path):
    zarr.open_group(str(tmp_path / "s.zarr"), mode="w", zarr_format=3)
    assert not write_small_group(SimpleNamespace(remote=True), ("g",), {"a": np.arange(3)}, {})  # a bucket
    assert not write_small_group(Location(tmp_path / "s.zarr"), ("g",),
                                 {"a": np.arange(3), "z": np.ones(2, dtype=np.complex128)}, {})
    assert not (tmp_path / "s.zarr" / "g").exists()  # nothing written when one array cannot be
