"""Whole chunks of a local store's array written straight to their files, encoded as Zarr would.

Why: a Gram tile is one chunk (two with its mirror). Zarr's synchronous ``arr[region] = block``
hands the write to its event-loop thread, which copies the block into a chunk buffer and runs
each codec and the file write in further threads; beside a second tile thread (in process) the
hand-offs and the GIL made a 1028² float64 chunk of NCI1 cost 10–40 ms. The same encoding done
here, the bytes from NumPy and the compression by numcodecs' Blosc (the library Zarr's own
``BloscCodec`` calls, which releases the GIL), takes about 6 ms, and the file is written by the
store's :meth:`~.location.Location.write_atomic` (fsynced before it is renamed into place), so
no separate sync is needed.

The bytes are exactly those Zarr writes: :func:`chunk_encoding` accepts only the layouts
gramdist's stores use (a regular grid, the ``bytes`` codec, at most one ``blosc`` codec), which
the tests check against Zarr's own chunk files for every compression level, both Gram dtypes and
padded edge chunks. Any other array, and every array in an object store, is written by Zarr.

:func:`write_small_group` writes a whole group of one-chunk arrays the same way (a kept
embedding: four arrays and the group's attributes). Through Zarr that was 14 hand-offs to its
event loop, about 11 ms per NCI1 chunk of SVM-θ and 13 % of that job's wall time, and the files
then waited for the store's completion to be synced; here it is nine small files written and
fsynced in the calling thread, about 3 ms. The metadata documents are Zarr's own
(``metadata.to_dict()`` of the same array created in memory), with the shape put in.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from gramdist.engine.store.groups import blosc, zarr
from gramdist.engine.store.location import Location
from gramdist.lazy import deferred_import

#: Zarr's names of Blosc's shuffle modes, as numcodecs numbers them
_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}


@dataclass(frozen=True)
class ChunkEncoding:
    """How an array's chunks are encoded: their shape, little-endian dtype, fill value, and the
    numcodecs Blosc compressor (None: the raw bytes)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fill_value: Any
    blosc: Any

    def encode(self, values: np.ndarray) -> bytes | memoryview:
        """The stored bytes of one chunk whose array region is ``values`` (smaller than
        :attr:`shape` at the array's far edges, where Zarr pads with the fill value)."""
        if values.shape == self.shape:
            chunk = np.ascontiguousarray(values, dtype=self.dtype)
        else:
            chunk = np.full(self.shape, self.fill_value, dtype=self.dtype)
            chunk[tuple(slice(0, n) for n in values.shape)] = values
        raw = memoryview(chunk).cast("B")
        return raw if self.blosc is None else self.blosc.encode(chunk)


def chunk_encoding(arr: Any) -> ChunkEncoding | None:
    """The encoding of ``arr``'s chunks where this module can reproduce it, else None."""
    meta = arr.metadata
    if getattr(meta, "zarr_format", None) != 3 or type(meta.chunk_grid).__name__ != "RegularChunkGrid":
        return None
    codecs = list(meta.codecs)
    names = [type(c).__name__ for c in codecs]
    if names not in (["BytesCodec"], ["BytesCodec", "BloscCodec"]):
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    dtype = np.dtype(arr.dtype)
    if endian not in (None, "little") or dtype.kind not in "fiub":
        return None
    blosc = _blosc(*_blosc_config(codecs[1])) if len(codecs) == 2 else None
    return ChunkEncoding(tuple(meta.chunk_grid.chunk_shape), dtype.newbyteorder("<"),
                         np.asarray(meta.fill_value, dtype=dtype).item(), blosc)


def _blosc_config(codec: Any) -> tuple[str, int, int, int, int]:
    return (codec.cname.value, codec.clevel, _SHUFFLE[codec.shuffle.value], codec.blocksize, codec.typesize)


@lru_cache(maxsize=8)
def _blosc(cname: str, clevel: int, shuffle: int, blocksize: int, typesize: int) -> Any:
    return deferred_import("numcodecs").Blosc(cname=cname, clevel=clevel, shuffle=shuffle, blocksize=blocksize,
                                          typesize=typesize)


def write_chunk(arr: Any, location: Location, coords: tuple[int, ...], region: tuple[tuple[int, int], ...],
                values: np.ndarray) -> bool:
    """Write ``values`` as chunk ``coords`` of ``arr`` (an array of the store at ``location``)
    if ``region`` (its ``(start, stop)`` per axis) is that whole chunk; durable on return.
    False, with nothing written, where Zarr must write it (see the module docstring)."""
    if location.remote:
        return False  # an object store: Zarr's PUT
    enc = chunk_encoding(arr)
    if enc is None or not _is_whole_chunk(enc.shape, tuple(arr.shape), coords, region):
        return False
    location.write_atomic(enc.encode(values), arr.path, arr.metadata.encode_chunk_key(coords))
    return True


def _is_whole_chunk(chunk: tuple[int, ...], shape: tuple[int, ...], coords: tuple[int, ...],
                    region: tuple[tuple[int, int], ...]) -> bool:
    return all(start == c * n and stop == min((c + 1) * n, size)
               for (start, stop), c, n, size in zip(region, coords, chunk, shape, strict=True))


@dataclass(frozen=True)
class _OneChunkTemplate:
    """What Zarr writes for a one-chunk array of a dtype and rank: its metadata document (for
    shape ``(1,) * ndim``), its chunk's key and its chunks' encoding."""

    metadata: dict[str, Any]
    chunk_key: str
    encoding: ChunkEncoding

    def files(self, values: np.ndarray) -> dict[str, bytes | memoryview]:
        """The files of ``values`` as such an array (chunks of its shape, at least 1 per axis)."""
        chunks = tuple(max(1, n) for n in values.shape)
        meta = copy.deepcopy(self.metadata)
        meta["shape"] = list(values.shape)
        meta["chunk_grid"]["configuration"]["chunk_shape"] = list(chunks)
        out: dict[str, bytes | memoryview] = {"zarr.json": _json_bytes(meta)}
        if values.size:  # then chunks == values.shape: one whole chunk
            out[self.chunk_key] = dataclasses.replace(self.encoding, shape=chunks).encode(values)
        return out


def _json_bytes(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, indent=2).encode()  # as Zarr indents its documents


@lru_cache(maxsize=64)
def _one_chunk_template(dtype: str, ndim: int, compression_level: int) -> _OneChunkTemplate | None:
    shape = (1,) * ndim
    arr = zarr.create_array(zarr.storage.MemoryStore(), shape=shape, chunks=shape,
                            dtype=np.dtype(dtype), fill_value=0, zarr_format=3,
                            compressors=blosc(compression_level, np.dtype(dtype).itemsize))
    enc = chunk_encoding(arr)
    if enc is None:
        return None
    return _OneChunkTemplate(arr.metadata.to_dict(), arr.metadata.encode_chunk_key((0,) * ndim), enc)


def write_small_group(location: Location, parts: tuple[str, ...], arrays: dict[str, np.ndarray],
                      attrs: dict[str, Any], compression_level: int = 1) -> bool:
    """Replace the group ``parts`` of the local store at ``location`` by one holding ``arrays``
    (each one chunk, Blosc LZ4 at ``compression_level``) and then ``attrs``, every file fsynced
    before it is renamed into place (durable on return; the folders are synced at completion).
    The attributes go last, so a group whose writer was killed halfway has none.
    False, with nothing written, where Zarr must write it (an object store, or a dtype this
    module does not encode)."""
    if location.remote:
        return False
    files: dict[tuple[str, ...], bytes | memoryview] = {}
    for name, value in arrays.items():
        template = _one_chunk_template(value.dtype.str, value.ndim, compression_level)
        if template is None:
            return False
        for key, data in template.files(value).items():
            files[(name, *key.split("/"))] = data
    location.remove_child(*parts)
    for rel, data in files.items():
        location.write_atomic(data, *parts, *rel)
    group = zarr.core.group.GroupMetadata(attributes=attrs, zarr_format=3)
    location.write_atomic(_json_bytes(group.to_dict()), *parts, "zarr.json")
    return True


__all__ = ["ChunkEncoding", "chunk_encoding", "write_chunk", "write_small_group"]
