"""What every store is: a Zarr group at a :class:`~.location.Location`, its attributes read
through typed properties, its vectors, its fitted state and its identity (digest, version).

:class:`Store` is the base of :class:`~.gram.GramStore` and :class:`~.features.FeatureStore`.
Only the client process writes attributes and the small arrays; workers write whole chunks
through the store's picklable *targets* (:class:`~.gram.TileTarget`,
:class:`~.features.ChunkTarget`), never attributes. Nothing here unpickles anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from gramdist.arrayops import digest_arrays
from gramdist.engine.store.checksums import array_digest
from gramdist.engine.store.layout import (
    FEATURE_KIND,
    FINGERPRINT_DEFAULTS,
    STATE,
    ArraySpec,
    AttrSpec,
    fingerprint,
)
from gramdist.engine.store.location import Location
from gramdist.errors import StoreError
from gramdist.kernels.base import KernelState, as_jsonable
from gramdist.lazy import deferred_import

# imported on first use (with its codecs): a Gram computed in memory never touches a store
zarr = deferred_import("zarr")


def as_location(where: str | Any) -> Location:
    return where if isinstance(where, Location) else Location(where)


# ------------------------------------------------------------------------------- group metadata
def lost_metadata(folder: Any, name: str = "") -> str | None:
    """'missing' or 'unreadable (why)' when the ``zarr.json`` of ``name`` ("" = the group) is
    lost or damaged; None when it parses."""
    meta = folder / name / "zarr.json" if name else folder / "zarr.json"
    try:
        doc = json.loads(meta.read_bytes())
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as exc:
        return f"unreadable ({type(exc).__name__}: {exc})"
    if not isinstance(doc, dict) or doc.get("zarr_format") != 3 or "node_type" not in doc:
        return "unreadable (not Zarr v3 metadata)"
    return None


def group_attributes(location: Location) -> dict[str, Any] | None:
    """The group attributes straight from ``zarr.json`` (None when unreadable): cheap, no Zarr."""
    try:
        attrs = json.loads(location.child("zarr.json").read_bytes()).get("attributes", {})
    except (OSError, ValueError, AttributeError):
        return None
    return attrs if isinstance(attrs, dict) else None


def create_root(location: Location, attrs: dict[str, Any]) -> Any:
    """The root group of a new store, its attributes in the first file written (so a creation
    cut short at any later point is recognisably ours) and ``creating`` set until
    :meth:`Store.finish_creation`."""
    return zarr.open_group(location.zarr_store(), mode="w-", zarr_format=3,
                           attributes=as_jsonable(attrs | {"creating": True}))


def creation_cut_short(location: Location) -> bool:
    """Whether ``location`` holds a store whose creation never finished (a kill while it was laid
    out): it holds nothing computed, and a run replaces it rather than resuming it."""
    attrs = group_attributes(location) if location.is_folder() else None
    return bool(attrs and "gramdist_version" in attrs and attrs.get("creating"))


def open_root(location: Location, mode: str = "r") -> Any:
    """The Zarr group of a gramdist store, unchecked beyond its group metadata and
    ``gramdist_version``; :class:`StoreError` if it is not one."""
    from gramdist.engine.store import backup

    if not location.exists():
        raise StoreError(f"{location}: no such store")
    lost = lost_metadata(location.path)
    if lost and backup.looks_like_gram_store(location):
        raise StoreError(backup.group_metadata_message(location, lost))
    try:
        root = zarr.open_group(location.zarr_store(), mode=mode, zarr_format=3)
    except Exception as exc:  # zarr raises several types for a non-store folder
        raise StoreError(f"{location}: not a Zarr store ({type(exc).__name__}: {exc})") from None
    if "gramdist_version" not in root.attrs:
        raise StoreError(f"{location}: not a gramdist store (no gramdist_version attribute)")
    return root


def store_kind(location: Location) -> str | None:
    """``"gram"``, ``"features"`` or None (not a gramdist store) from the group metadata alone;
    a folder laid out as a Gram store whose metadata is lost counts as ``"gram"``, so that
    opening it says what is wrong."""
    from gramdist.engine.store import backup

    if not location.is_folder():
        return None
    attrs = group_attributes(location)
    if attrs is None:
        return "gram" if backup.looks_like_gram_store(location) else None
    if "gramdist_version" not in attrs:
        return None
    return "features" if attrs.get("store_kind") == FEATURE_KIND else "gram"


# ------------------------------------------------------------------------------- arrays
def read_array(group: Any, name: str, where: Any, optional: bool = False) -> Any:
    """``group[name]`` as NumPy (None if ``optional`` and absent); :class:`StoreError` when it
    is missing or cannot be decoded."""
    try:
        if optional and name not in group:
            return None
        return np.asarray(group[name][...])
    except Exception as exc:
        raise StoreError(f"{where}: cannot read array {name!r} ({type(exc).__name__}: {exc})") from None


def write_vector(group: Any, name: str, values: np.ndarray, dims: tuple[str, ...] | None = None) -> None:
    """(Over)write a small 1-D array (diag, labels, ids) as one chunk; the client only."""
    values = np.asarray(values)
    arr = group.create_array(name, shape=values.shape, chunks=(max(1, len(values)),), dtype=values.dtype,
                             fill_value=0, config={"write_empty_chunks": True}, overwrite=True,
                             dimension_names=dims)
    arr[...] = values


def present(group: Any, name: str) -> bool:
    try:
        return name in group
    except Exception:  # noqa: BLE001 - zarr's lookup parses the metadata
        return False


def keep_empty(arr: Any) -> Any:
    """``arr`` writing every chunk, even one equal to the fill value everywhere: Zarr's
    default skips (and deletes) such chunks, which would make an all-zero tile, or a done-mask
    of zeros, indistinguishable from a lost chunk file. The setting is not persisted in the
    metadata, so every writer opens the array through here."""
    return arr.with_config({"write_empty_chunks": True})


def blosc(level: int, typesize: int = 8) -> Any:
    """Blosc LZ4 with byte shuffle (``level`` 0: no compression). For a float64 Gram it writes a
    2 MiB tile ~2x faster than Zstd level 1 (5.7 vs 13.6 ms here) and smaller (87% vs 92% of raw
    on a normalised WL Gram); counts and ids compress well with it too."""
    if level <= 0:
        return None
    return deferred_import("zarr.codecs").BloscCodec(cname="lz4", clevel=min(level, 9), shuffle="shuffle",
                                                 typesize=typesize)


def check_replaceable(location: Location, overwrite: bool) -> None:
    """:class:`StoreError` in one line unless a new store may be made at ``location``: nothing
    there, a gramdist store of either kind (reused, or replaced with ``overwrite``), or an empty
    folder. ``--overwrite`` never deletes what gramdist did not make, and a store is never the
    working directory, the root or the home folder itself."""
    special = location.is_special()
    if special:
        raise StoreError(f"{location}: {special}; give a store's name, e.g. --out result.zarr")
    if location.is_file_here():
        raise StoreError(f"{location}: not a gramdist store (a file); --overwrite replaces only stores and empty "
                         "folders, so it is left as it is")
    if not location.exists():
        return
    if store_kind(location) is None and not location.is_empty_folder():
        raise StoreError(f"{location}: not a gramdist store (a folder of other files); --overwrite replaces only "
                         "stores and empty folders, so it is left as it is")


def prepare_location(location: Location, overwrite: bool) -> None:
    """Make room for a new store: nothing there, or (``overwrite``) a store or an empty folder,
    removed; see :func:`check_replaceable`."""
    check_replaceable(location, overwrite)
    if location.exists():
        if not (overwrite or location.is_empty_folder()):
            raise StoreError(f"{location}: already exists")
        location.remove()


def sync_tree(folder: Any, files: bool = True, durable: tuple[str, ...] = ()) -> None:
    """``fsync`` every file under ``folder`` (``files``) and every folder, so that what is written
    is on disk before a store says it is complete (a crash of the machine right after cannot
    leave a "complete" store with chunks still in the page cache). ``durable``: subfolders
    (relative) whose files are known to be on disk already (synced before being renamed in):
    only their folders are synced."""
    if not isinstance(folder, (str, os.PathLike)):
        return  # an object store's folder (a UPath): every object is durable once its PUT returned
    root = Path(folder)
    skip = tuple(str(root / d) for d in durable)
    for here, _dirs, names in os.walk(root):
        if files and not (skip and here.startswith(skip)):
            for name in names:
                try:
                    fd = os.open(os.path.join(here, name), os.O_RDONLY)
                except OSError:
                    continue  # gone meanwhile (a .partial renamed): nothing to sync
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        try:
            fd = os.open(here, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        except OSError:
            pass  # some file systems do not sync folders
        finally:
            os.close(fd)


def sync_files(folder: Any, names: list[str]) -> None:
    """``fsync`` the files ``names`` (relative to ``folder``) where they exist: a tile task
    syncs its own chunks while other tiles compute, so that :func:`sync_tree` at completion
    finds them clean (NCI1's 16 chunks of 8 MB: 77 ms dirty, 1.4 ms clean, in one thread)."""
    if not isinstance(folder, (str, os.PathLike)):
        return  # an object store: durable once its PUT returned
    for name in names:
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def disk_bytes(location: Location) -> int:
    """Bytes the store takes on disk (its files' sizes)."""
    return location.total_bytes()


def remove_tree(folder: Any) -> None:
    """Remove a folder inside a store (a local ``Path`` or an object store's ``UPath``)."""
    import shutil

    if isinstance(folder, os.PathLike):
        shutil.rmtree(folder, ignore_errors=True)
    else:
        folder.fs.rm(folder.path, recursive=True)


# ------------------------------------------------------------------------------- the store
class Store:
    """A gramdist store opened at a location (``mode`` "r" or "r+"); see the subclasses.

    Attributes are read through typed properties; the ``_attr``/``_set`` pair is the only way
    in, so the layout's names stay in this package.
    """

    KIND: ClassVar[str] = ""
    ARRAYS: ClassVar[dict[str, ArraySpec]] = {}
    ATTRIBUTES: ClassVar[dict[str, AttrSpec]] = {}

    def __init__(self, location: Location, root: Any, mode: str = "r") -> None:
        self.location = location
        self.root = root
        self.mode = mode
        # what this process checks before each of its writes: the lock's ``check`` while a
        # run holds it (see :meth:`fence`), so a writer that lost the store writes nothing more
        self._fence: Any = None

    def fence(self, check: Any) -> None:
        """Check ``check()`` (a :class:`~.lock.StoreLock`'s ``check``: :class:`~.lock.LeaseLost`
        once the lock was taken over or its lease ran out) before every write through this
        object: attributes, vectors, the fitted state, progress, completion."""
        self._fence = check

    def _check_fence(self) -> None:
        if self._fence is not None:
            self._fence()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.location)!r})"

    @property
    def path(self) -> str:
        return str(self.location)

    # -------------------------------------------------------------- attributes
    def _attr(self, name: str, default: Any = None) -> Any:
        return self.root.attrs.get(name, default)

    def _set(self, **values: Any) -> None:
        self._check_fence()
        # one write of the group's zarr.json: ``attrs.update`` would write it once per key
        self.root.update_attributes(as_jsonable(values))

    def attributes(self) -> dict[str, Any]:
        """A copy of every group attribute (what ``gramdist info --json`` shows)."""
        return dict(self.root.attrs)

    @property
    def complete(self) -> bool:
        return bool(self._attr("complete"))

    def finish_creation(self) -> None:
        """The store is laid out: from now on a run resumes it (see :func:`create_root`)."""
        self._set(creating=False)

    @property
    def state_complete(self) -> bool:
        return bool(self._attr("state_complete"))

    @property
    def kernel(self) -> dict[str, Any] | None:
        """``{"name": ..., "params": {...}}`` of the kernel that made the store."""
        return self._attr("kernel")

    @property
    def kernel_versions(self) -> dict[str, int]:
        """Versions past 1 of the definitions of the kernels that made the store, by name."""
        return dict(self._attr("kernel_versions") or FINGERPRINT_DEFAULTS["kernel_versions"])

    def check_kernel_versions(self, versions: dict[str, int]) -> None:
        """:class:`StoreError` unless the store's values come from the kernel definitions
        ``versions`` (a kernel's ``definition_versions()``): values of two versions of a kernel
        are never mixed in a store, nor a state or embedding of one used by the other."""
        stored = self.kernel_versions
        if stored == versions:
            return
        names = sorted(set(stored) | set(versions))
        was = ", ".join(f"{n} v{stored.get(n, 1)}" for n in names)
        now = ", ".join(f"{n} v{versions.get(n, 1)}" for n in names)
        made = f"gramdist {self.gramdist_version}" if self.gramdist_version else "an older gramdist"
        raise StoreError(f"{self.location}: made by {made} with kernel definition {was}; this gramdist "
                         f"computes {now}, whose values, state or embeddings differ: run the job again into a new "
                         "store (or --overwrite)")

    @property
    def dataset(self) -> dict[str, Any] | None:
        return self._attr("dataset")

    @property
    def dataset_checksum(self) -> str | None:
        return self._attr("dataset_checksum")

    @property
    def fit(self) -> dict[str, Any] | None:
        return self._attr("fit")

    @property
    def normalize(self) -> bool:
        return bool(self._attr("normalize"))

    @property
    def job(self) -> dict[str, Any]:
        return dict(self._attr("job") or {})

    @property
    def stats(self) -> dict[str, Any]:
        return dict(self._attr("stats") or {})

    @property
    def gramdist_version(self) -> str | None:
        return self._attr("gramdist_version")

    def fingerprint_mismatch(self, attrs: dict[str, Any]) -> list[str]:
        """Names of the fingerprint attributes that differ between the store and ``attrs``
        (a computation's :class:`~.layout.GramMeta`/:class:`~.layout.FeatureMeta` attributes)."""
        stored = dict(self.root.attrs)
        new = json.loads(json.dumps(as_jsonable(attrs)))
        return [k for k in fingerprint(self.ATTRIBUTES)
                if stored.get(k, FINGERPRINT_DEFAULTS.get(k)) != new.get(k, FINGERPRINT_DEFAULTS.get(k))]

    def record_stats(self, timings: dict[str, float]) -> None:
        """Merge a run's phase timings (seconds) into the store's ``stats``."""
        stats = self.stats
        stats.update({k: round(v, 4) for k, v in timings.items()})
        self._set(stats=stats)

    # -------------------------------------------------------------- vectors
    def _write_vector(self, name: str, values: np.ndarray) -> None:
        self._check_fence()
        spec = self.ARRAYS.get(name)
        write_vector(self.root, name, values, spec.dims if spec is not None else None)
        self._record_digest(name, array_digest(np.asarray(values)))

    def _record_digest(self, name: str, digest: str) -> None:
        """Record what an array (or the fitted state) held when written, for ``verify``."""
        digests = dict(self._attr("vector_checksums") or {})
        digests[name] = digest
        self._set(vector_checksums=digests)

    @property
    def vector_checksums(self) -> dict[str, str]:
        return dict(self._attr("vector_checksums") or {})

    def _read(self, name: str, optional: bool = False) -> Any:
        return read_array(self.root, name, self.location, optional=optional)

    def labels(self) -> np.ndarray | None:
        """Class labels (or targets) of the (row) graphs; None when the dataset has none."""
        return self._read("y", optional=True)  # not `"y" in root`: zarr's lookup can raise

    def graph_ids(self) -> np.ndarray:
        return self._read("graph_ids")

    def fit_indices(self) -> np.ndarray:
        return self._read("fit_indices")

    # -------------------------------------------------------------- state
    def write_state(self, state: KernelState, fit_indices: np.ndarray) -> None:
        """Persist the kernel state as arrays + JSON attributes, then mark it complete."""
        from gramdist.engine.store.state import state_digest, write_state_group

        self._check_fence()
        write_state_group(self.root.require_group(STATE), state)
        self._write_vector("fit_indices", np.asarray(fit_indices, dtype=np.int64))
        self._record_digest(STATE, state_digest(state))
        self._set(state_complete=True)

    def read_state(self) -> KernelState:
        """The kernel's fitted state (arrays and JSON attributes; no pickles)."""
        from gramdist.engine.store.state import read_state_group

        if not self.state_complete:
            raise StoreError(f"{self.location}: the fitted state was never completely written")
        try:
            group = self.root[STATE]
        except Exception as exc:  # missing, or metadata zarr refuses to decode
            raise StoreError(f"{self.location}: cannot read the fitted state ({type(exc).__name__}: {exc})") from None
        return read_state_group(group, f"{self.location}/{STATE}")

    def kernel_attrs(self) -> dict[str, Any]:
        """The JSON part of the fitted state ({} when the store has no state yet)."""
        from gramdist.engine.store.state import state_attrs

        return state_attrs(self.root[STATE]) if present(self.root, STATE) else {}

    # -------------------------------------------------------------- identity
    def version(self) -> tuple[int, int]:
        """Changes whenever the store does (an append's commit, a rerun, ``--overwrite``): its
        ``generation`` and the time its group metadata was last written. For caches."""
        return store_version(self.location)

    def digest(self) -> str:
        """A digest of what the store holds, for keys of results computed from it (saved folds
        of a nested CV): its fingerprint attributes, generation, shape and checksums, which
        change with every tile or chunk written. A store without checksums (before 0.2) is
        keyed by :meth:`version` instead."""
        attrs = dict(self.root.attrs)
        keys = ("kernel", "dataset_checksum", "test_checksum", "fit", "normalize", "symmetric", "dtype", "generation",
                "n_graphs", "n_test", "store_kind", "feature_kind", "nystroem")
        values: dict[str, np.ndarray | None] = {
            "attrs": np.frombuffer(json.dumps({k: attrs.get(k) for k in keys}, sort_keys=True, default=str).encode(),
                                   dtype=np.uint8)}
        for name in ("gram", "features", "tile_checksums", "chunk_checksums"):
            if name in self.root:
                values[f"{name}.shape"] = np.asarray(self.root[name].shape, dtype=np.int64)
        sums = [name for name in ("tile_checksums", "chunk_checksums") if name in self.root]
        if sums and attrs.get("checksummed", True):
            for name in sums:
                values[name] = np.asarray(self.root[name][...], dtype=np.uint64)
        else:
            values["version"] = np.asarray(self.version(), dtype=np.int64)
        return digest_arrays(values)

    def lock(self, *, job_id: str | None = None, log: Any = None) -> Any:
        """The one-writer lock of this store (a context manager)."""
        from gramdist.engine.store.lock import StoreLock

        return StoreLock(self.location, job_id=job_id, log=log)

    def disk_bytes(self) -> int:
        return disk_bytes(self.location)


def store_version(location: Location) -> tuple[int, int]:
    """:meth:`Store.version` without opening the store (cheap; (-1, -1) when unreadable)."""
    try:
        meta = location.child("zarr.json")
        generation = json.loads(meta.read_bytes()).get("attributes", {}).get("generation", 0)
        return int(generation), meta.stat().st_mtime_ns
    except (OSError, ValueError, AttributeError):
        return -1, -1
