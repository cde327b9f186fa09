"""What every store is: a Zarr group at a :class:`~.location.Location`, its attributes read
through typed properties, its vectors, its fitted state and its identity (digest, version).

:class:`Store` is the base of :class:`~.gram.GramStore` and :class:`~.features.FeatureStore`.
Only the client process writes attributes and the small arrays; workers write whole chunks
through the store's picklable *targets* (:class:`~.tiles.TileTarget`,
:class:`~.features.ChunkTarget`), never attributes. Nothing here unpickles anything. The group
beneath (opening, recognising, small arrays) is :mod:`~.groups`; what makes writes durable is
in :mod:`~.location`.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from gramdist.arrayops import digest_arrays
from gramdist.engine.store.checksums import array_digest
from gramdist.engine.store.groups import present, read_array, store_kind, write_vector
from gramdist.engine.store.layout import (
    FINGERPRINT_DEFAULTS,
    STATE,
    ArraySpec,
    AttrSpec,
    fingerprint,
)
from gramdist.engine.store.location import Location
from gramdist.errors import StoreError
from gramdist.kernels.base import KernelState, as_jsonable


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
        """Bytes the store takes on disk (its files' sizes)."""
        return self.location.total_bytes()


def store_version(location: Location) -> tuple[int, int]:
    """:meth:`Store.version` without opening the store (cheap; (-1, -1) when unreadable)."""
    try:
        generation = json.loads(location.read_file("zarr.json")).get("attributes", {}).get("generation", 0)
        return int(generation), location.child("zarr.json").stat().st_mtime_ns
    except (OSError, ValueError, AttributeError):
        return -1, -1
