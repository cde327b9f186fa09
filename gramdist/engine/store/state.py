"""A kernel's fitted state and kept embeddings inside a store: arrays plus JSON, never pickles.

The state is the ``state/`` group: one array per :class:`~gramdist.kernels.base.KernelState`
array, the JSON part as its attributes. Kept embeddings (``embeddings/<chunk>``) are what an
append reads back instead of embedding the old graphs again; :class:`EmbeddingCache` is the
picklable handle the workers use for them.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from gramdist.arrayops import digest_arrays
from gramdist.engine.store.chunkfiles import write_small_group
from gramdist.engine.store.groups import as_location, open_root, read_array, zarr
from gramdist.engine.store.layout import EMBEDDINGS
from gramdist.engine.store.location import sync_tree
from gramdist.errors import StoreError
from gramdist.kernels import MOVED_CLASSES
from gramdist.kernels.base import GraphKernel, KernelState, as_jsonable

#: the only package whose classes a kept embedding may be rebuilt as: the kernels' own
_KERNEL_PACKAGE = GraphKernel.__module__.rpartition(".")[0] + "."


def state_dimensions(name: str, ndim: int) -> tuple[str, ...]:
    """Each state array's own axes (``labels_0``, ...): the arrays share no axis."""
    return tuple(f"{name}_{k}" for k in range(ndim))


def write_state_group(group: Any, state: KernelState) -> None:
    for name, value in state.arrays.items():
        value = np.ascontiguousarray(value)
        arr = group.create_array(name, shape=value.shape, chunks=value.shape if value.size else None,
                                 dtype=value.dtype, fill_value=0, overwrite=True,
                                 dimension_names=state_dimensions(name, value.ndim))
        if value.size:
            arr[...] = value
    group.update_attributes({"kernel_attrs": as_jsonable(state.attrs), "arrays": sorted(state.arrays)})


def read_state_group(group: Any, where: str) -> KernelState:
    names = group.attrs.get("arrays", [])
    arrays = {name: read_array(group, name, where) for name in names}
    return KernelState.from_store_parts(arrays, group.attrs.get("kernel_attrs", {}))


def state_digest(state: KernelState) -> str:
    """A digest of a fitted state (its arrays and its JSON part), recorded when it is written."""
    import json

    return digest_arrays({**{f"array:{k}": v for k, v in state.arrays.items()},
                          "attrs": np.frombuffer(json.dumps(as_jsonable(state.attrs), sort_keys=True).encode(),
                                                 dtype=np.uint8)})


def state_attrs(group: Any) -> dict[str, Any]:
    return dict(group.attrs.get("kernel_attrs", {}))


def state_array_names(root: Any) -> list[str]:
    try:
        return list(root["state"].attrs.get("arrays", [])) if "state" in root else []
    except Exception:  # noqa: BLE001 - an undecodable state group: reading the state reports it
        return []


def load_state(path: str) -> KernelState:
    """The fitted state of the store at ``path`` (a worker's recomputable way to get it)."""
    from gramdist.engine.store import open_store

    return open_store(path).read_state()


# ------------------------------------------------------------------------------- kept embeddings
@dataclass(frozen=True)
class EmbeddingCache:
    """Where the embeddings of a run's chunks are read from and kept (store folders, or None).

    ``get`` returns the embedding kept for a chunk of graphs with a given content checksum
    (None when there is none); ``put`` keeps one. An embedding is kept only when it is a
    dataclass of arrays defined in a ``gramdist.kernels`` module: each field becomes an
    array, the class's dotted name an attribute, and only such classes are rebuilt; and, with
    ``max_bytes``, only when its arrays take at most that many bytes (see :func:`keep_budget`).
    """

    read_from: str | None
    write_to: str | None
    lease: Any = None  # a :class:`~.lock.Lease` checked before every write
    max_bytes: int | None = None

    def get(self, name: str, checksum: str) -> Any | None:
        return None if self.read_from is None else read_embedding(self.read_from, name, checksum)

    def keeps(self, name: str, checksum: str) -> bool:
        """Whether an embedding of these graphs is kept for chunk ``name`` (its attributes
        only, not its arrays: what a placement decision can afford to ask)."""
        return self.read_from is not None and kept_embedding_attrs(self.read_from, name).get("checksum") == checksum

    def put(self, name: str, emb: Any, checksum: str) -> bool:
        if self.write_to is None:
            return False
        if self.lease is not None:
            self.lease.check()
        try:
            return write_embedding(self.write_to, name, emb, checksum, self.max_bytes)
        except Exception:  # noqa: BLE001 - keeping it is an optimisation: never fail the chunk for it
            return False


#: ``gram.keep_embeddings: auto`` keeps a chunk's embedding when its arrays take at most this
#: fraction of the bytes of the (uncompressed) Gram rows of its graphs: all kept embeddings
#: then cost at most a tenth of the Gram on disk, and an append reads them back instead of
#: embedding the store's graphs again
KEEP_FRACTION = 0.1


def keep_budget(setting: bool | str | None, chunk: int, n_cols: int, itemsize: int) -> int | None:
    """The ``max_bytes`` of a chunk's kept embedding under a store's ``keep_embeddings``
    setting: None (no limit) for ``True``, :data:`KEEP_FRACTION` of the chunk's Gram rows for
    ``"auto"``; 0 (nothing kept) for ``False``."""
    if setting is True:
        return None
    if setting == "auto":
        return int(KEEP_FRACTION * chunk * n_cols * itemsize)
    return 0


def write_embedding(path: str, name: str, emb: Any, checksum: str, max_bytes: int | None = None) -> bool:
    """Keep the embedding of chunk ``name`` (``r<i>`` / ``c<j>``) in ``path/embeddings/name``,
    tagged with the content checksum of the chunk's graphs; False when it is not keepable (or
    its arrays take more than ``max_bytes``). A local store's files are on disk on return (the
    store's completion syncs only the folders of ``embeddings/``)."""
    cls = type(emb)
    if not dataclasses.is_dataclass(emb) or not cls.__module__.startswith(_KERNEL_PACKAGE):
        return False
    values = {f.name: getattr(emb, f.name) for f in dataclasses.fields(emb) if f.init and not f.name.startswith("_")}
    if not all(v is None or isinstance(v, np.ndarray) for v in values.values()):
        return False
    if max_bytes is not None and sum(v.nbytes for v in values.values() if v is not None) > max_bytes:
        return False
    attrs = {"class": f"{cls.__module__}.{cls.__qualname__}", "checksum": checksum,
             "none": [k for k, v in values.items() if v is None], "digest": digest_arrays(values), "complete": True}
    arrays = {k: np.ascontiguousarray(v) for k, v in values.items() if v is not None}
    location = as_location(path)
    if write_small_group(location, (EMBEDDINGS, name), arrays, attrs):
        return True
    group = zarr.open_group(str(location.child(EMBEDDINGS, name)), mode="w", zarr_format=3)
    for key, value in arrays.items():
        arr = group.create_array(key, shape=value.shape, chunks=tuple(max(1, d) for d in value.shape),
                                 dtype=value.dtype, fill_value=0, config={"write_empty_chunks": True})
        if value.size:
            arr[...] = value
    # written last: a group without it (a writer killed halfway) is never read
    group.update_attributes(attrs)
    sync_tree(location.child(EMBEDDINGS, name))  # durable on return, like write_small_group's
    return True


def kept_embedding_attrs(path: str, name: str) -> dict[str, Any]:
    """The attributes of chunk ``name``'s kept embedding; {} when none was completely kept."""
    try:
        attrs = json.loads(as_location(path).read_file(EMBEDDINGS, name, "zarr.json")).get("attributes") or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return attrs if isinstance(attrs, dict) and attrs.get("complete") else {}


def read_embedding(path: str, name: str, checksum: str) -> Any | None:
    """The embedding kept for chunk ``name`` if it was made from graphs with this content
    checksum; None when there is none, it is for other graphs, or it cannot be read."""
    folder = as_location(path).child(EMBEDDINGS, name)
    if not (folder / "zarr.json").is_file():
        return None
    try:
        group = zarr.open_group(str(folder), mode="r", zarr_format=3)
        attrs = dict(group.attrs)
        if not attrs.get("complete") or attrs.get("checksum") != checksum:
            return None
        class_name = str(attrs["class"])
        module, _, qualname = MOVED_CLASSES.get(class_name, class_name).rpartition(".")  # older stores' names
        if not module.startswith(_KERNEL_PACKAGE):
            return None
        cls = getattr(importlib.import_module(module), qualname)
        if not dataclasses.is_dataclass(cls):
            return None
        fields = {f.name for f in dataclasses.fields(cls) if f.init and not f.name.startswith("_")}
        values = {k: None for k in attrs.get("none", [])}
        values.update({k: np.asarray(group[k][...]) for k in fields - set(values)})
        if attrs.get("digest") != digest_arrays(values):  # damaged on disk but decodable: embed again
            return None
        return cls(**values)
    except Exception:  # noqa: BLE001 - a damaged cache entry: the chunk is embedded again
        return None


def embedding_problem(folder: Any) -> str | None:
    """What is wrong with a kept embedding's folder (None when it reads and matches its digest)."""
    try:
        group = zarr.open_group(str(folder), mode="r", zarr_format=3)
        attrs = dict(group.attrs)
        if not attrs.get("complete"):
            return "was never completely written"
        values = {k: None for k in attrs.get("none", [])}
        values.update({name: np.asarray(arr[...]) for name, arr in group.arrays()})
    except Exception as exc:  # noqa: BLE001
        return f"cannot be read ({type(exc).__name__}: {exc})"
    if attrs.get("digest") != digest_arrays(values):
        return "does not match the digest recorded when it was kept"
    return None


def check_state_readable(root: Any, where: Any) -> str | None:
    """Why the fitted state cannot be read (None when it can)."""
    try:
        read_state_group(root["state"], f"{where}/state")
    except StoreError as exc:
        return str(exc)
    except Exception as exc:  # noqa: BLE001 - missing or undecodable group
        return f"{where}: cannot read the fitted state ({type(exc).__name__}: {exc})"
    return None


__all__ = ["EmbeddingCache", "load_state", "open_root"]
