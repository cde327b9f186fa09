"""Chunks written straight to a local store's files are the bytes Zarr writes (gramdist.engine.store.chunkfiles)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import zarr

from gramdist.engine.store.chunkfiles import chunk_encoding, write_chunk
from gramdist.engine.store.gram import create_tile_arrays, folder_of
from gramdist.engine.store.grids import TileGrid
from gramdist.engine.store.location import Location


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
