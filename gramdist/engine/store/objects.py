"""Stores in an object store (``s3://bucket/path.zarr``): the :class:`~.location.Location` of a
store that lives at a URL, for Dask clusters whose workers share no file system.

The store itself is plain Zarr v3 under the URL (``zarr``, ``xarray.open_zarr`` and tensorstore
read it as they read any Zarr in a bucket); only the guarantees that a local store gets from
renames, hard links and ``fsync`` are made here from what S3's API offers instead:

* **create if absent** (``PUT`` with ``If-None-Match: *``): the lock, the job record;
* **replace if unchanged** (``PUT``/``DELETE`` with ``If-Match: <ETag>``): taking over a stale
  lock, releasing one's own; of several writers racing, exactly one succeeds;
* **atomic replace** of one object (every ``PUT``): a sidecar or a metadata document is read
  whole, old or new;
* **durability**: an object is durable once its ``PUT`` is acknowledged, so there is nothing to
  ``fsync``; a store is marked complete only after every tile's ``PUT`` returned.

Objects are reached through fsspec (``s3fs``): credentials and the endpoint come from their
usual places (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``~/.aws``, an instance role,
``AWS_ENDPOINT_URL`` for MinIO, Ceph or any S3-compatible server), never from a job file. Only
``s3://`` is offered: the conditional writes above are S3's; ``gs://`` and ``az://`` have their
own (generation and ETag preconditions), not wired yet.
"""

from __future__ import annotations

import contextlib
import functools
import json
import uuid
from collections.abc import Callable
from typing import Any

from gramdist.engine.store.location import Location, Sidecar
from gramdist.errors import StoreError
from gramdist.lazy import deferred_import
from gramdist.urls import CREDENTIALS_HINT, STORAGE_OPTIONS

fsspec = deferred_import("fsspec")

#: the schemes whose conditional writes are wired (see the module's docstring)
SCHEMES = ("s3",)


def unreachable(where: Any, exc: BaseException) -> StoreError:
    """One line for an object store that refused or could not be reached (no credentials, no
    endpoint, a bucket missing): botocore's errors are not ``OSError``s."""
    return StoreError(f"{where}: cannot reach the object store ({type(exc).__name__}: {exc}); {CREDENTIALS_HINT}")


def _object_errors(cls: type) -> type:
    """Every public method of ``cls`` raises :class:`StoreError` in one line instead of
    botocore's exceptions; ``OSError`` (a missing object, a precondition) passes as it is."""
    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except (OSError, StoreError):
                raise
            except Exception as exc:
                if type(exc).__module__.split(".")[0] in ("botocore", "aiobotocore", "s3fs"):
                    raise unreachable(self, exc) from None
                raise
        return call

    for name, value in list(vars(cls).items()):
        if callable(value) and not name.startswith("_"):
            setattr(cls, name, wrap(value))
    return cls


def _filesystem(scheme: str) -> Any:
    try:
        import upath  # noqa: F401 - child() paths
        return fsspec.filesystem(scheme, **STORAGE_OPTIONS)
    except ImportError:
        raise StoreError(f"stores at {scheme}:// URLs need s3fs: pip install 'gramdist[s3]'") from None


@_object_errors
class ObjectLocation(Location):
    """A store at ``s3://bucket/key.zarr``. ``path`` is the URL (``bucket/key.zarr`` without
    the scheme is ``key``)."""

    remote = True

    def __init__(self, path: str) -> None:
        url = str(path).rstrip("/")
        scheme, _, key = url.partition("://")
        if scheme not in SCHEMES:
            raise StoreError(f"{url}: stores at {scheme}:// URLs are not supported yet (only "
                             f"{', '.join(s + '://' for s in SCHEMES)}); give an s3:// URL (any S3-compatible "
                             "server through $AWS_ENDPOINT_URL) or a local folder")
        self.scheme, self.key, self.url = scheme, key.strip("/"), f"{scheme}://{key.strip('/')}"
        self.fs = _filesystem(scheme)

    @property
    def path(self) -> Any:  # type: ignore[override]
        """The store's root as a ``upath.UPath`` (pathlib's API over fsspec)."""
        return self.child()

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"Location({self.url!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (Location, (self.url,))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def bucket(self) -> str:
        return self.key.split("/", 1)[0]

    def resolved(self) -> str:
        return self.url

    def _key(self, *parts: str) -> str:
        return "/".join((self.key, *[p.strip("/") for p in parts if p]))

    def exists(self) -> bool:
        return self.fs.exists(self.key)

    def is_folder(self) -> bool:
        return self.fs.isdir(self.key)

    def is_empty_folder(self) -> bool:
        return False  # an object store has no empty folders: a prefix exists only with objects under it

    def join(self, name: str) -> Location:
        return Location(f"{self.url}/{name}")

    def children(self) -> list[Location]:
        names = self.fs.ls(self.key, detail=False) if self.fs.isdir(self.key) else []
        return sorted((Location(f"{self.scheme}://{n}") for n in names if n.rstrip("/") != self.key), key=str)

    def parent(self) -> Location:
        return Location(self.url.rsplit("/", 1)[0])

    def sibling(self, name: str) -> Location:
        return Location(f"{self.url.rsplit('/', 1)[0]}/{name}")

    def is_absolute(self) -> bool:
        return True

    def absolute(self) -> Location:
        return self

    def child(self, *parts: str) -> Any:
        """A file or folder inside the store, as a ``upath.UPath`` (the pathlib API over fsspec)."""
        from upath import UPath

        return UPath(f"{self.scheme}://{self._key(*parts)}", **STORAGE_OPTIONS)

    def sidecar(self, suffix: str) -> Sidecar:
        return ObjectSidecar(self.fs, f"{self.key}{suffix}")

    def remove(self) -> None:
        self.fs.rm(self.key, recursive=True)

    def remove_child(self, *parts: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self._key(*parts), recursive=True)

    def files(self, under: str) -> list[str]:
        base = self._key(under)
        return sorted(k[len(base) + 1:] for k in self.fs.find(base)
                      if not k.rsplit("/", 1)[-1].startswith("."))

    def folders(self, under: str = "") -> list[str]:
        base = self._key(under) if under else self.key
        if not self.fs.isdir(base):
            return []
        return sorted(e["name"].rstrip("/").rsplit("/", 1)[-1] for e in self.fs.ls(base, detail=True)
                      if e["type"] == "directory")

    def move_file(self, source: str, target: str) -> None:
        """A server-side copy (CopyObject: the target object is whole at once), then a delete
        of the source: a move cut short between the two leaves the source, moved again by the
        rerun that finishes the commit."""
        self.fs.copy(self._key(source), self._key(target))
        self.fs.rm_file(self._key(source))

    def copy_file(self, source: str, target: str) -> None:
        self.fs.copy(self._key(source), self._key(target))

    def move_folder(self, source: str, target: str) -> None:
        self.remove_child(target)
        for rel in self.files(source):
            self.move_file(f"{source}/{rel}", f"{target}/{rel}")

    def zarr_store(self) -> Any:
        from zarr.storage import FsspecStore

        return FsspecStore.from_url(self.url, storage_options=STORAGE_OPTIONS)

    def read_file(self, *parts: str) -> bytes:
        # one GET of the whole object. Not ``child(...).read_bytes()``: s3fs's file objects HEAD
        # the object, then GET it with ``If-Match`` on that ETag, so a writer's PUT between the two
        # (the run updating the group's zarr.json while a worker or a reader opens the store)
        # fails the read with 412 Precondition Failed, which read as damaged metadata
        return self.fs.cat_file(self._key(*parts))

    def write_atomic(self, data: bytes, *parts: str) -> None:
        self.fs.pipe_file(self._key(*parts), data)  # one PUT: readers see the old object or the new

    def version(self, *parts: str) -> tuple[Any, ...]:
        return (self.fs.info(self._key(*parts)).get("ETag"),)

    def total_bytes(self) -> int:
        return int(self.fs.du(self.key))

    def is_special(self) -> str | None:
        if "/" not in self.key:
            return f"names a bucket, not a store in it (e.g. {self.url}/result.zarr)"
        return None

    def is_file_here(self) -> bool:
        return self.fs.isfile(self.key)

    def parent_writable(self) -> Any:
        return self.parent()

    def writable_problem(self) -> str | None:
        """Whether an object can be written beside the store (a probe put and deleted): wrong
        credentials, a missing bucket or an unreachable endpoint show here, before any compute."""
        probe = f"{self.key}.probe-{uuid.uuid4().hex}"
        try:
            if not self.fs.exists(self.bucket):
                return f"bucket {self.bucket} does not exist (or these credentials cannot see it)"
            self.fs.pipe_file(probe, b"")
            self.fs.rm_file(probe)
        except Exception as exc:  # noqa: BLE001 - s3fs raises many kinds; all mean "cannot write"
            return f"cannot write to {self.scheme}://{self.bucket} ({type(exc).__name__}: {exc})"
        return None

    def free_bytes(self) -> int | None:
        return None

    def sync(self) -> None:
        """Nothing to do: an object is durable once its ``PUT`` returned."""


@_object_errors
class ObjectSidecar(Sidecar):
    """A small JSON object beside a store in a bucket, written with S3's conditional writes."""

    def __init__(self, fs: Any, key: str) -> None:
        self.fs, self.key = fs, key
        self.path = key

    def __str__(self) -> str:
        return f"s3://{self.key}"

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    def exists(self) -> bool:
        return self.fs.exists(self.key)

    def _read_with_etag(self) -> tuple[dict[str, Any] | None, str | None]:
        """(its mapping, its ETag); the ETag is read first, so a replace conditional on it fails
        if the object changed after the content was read."""
        try:
            etag = self.fs.info(self.key).get("ETag")
            value = json.loads(self.fs.cat_file(self.key))
        except (OSError, ValueError):
            return None, None
        return (value if isinstance(value, dict) else None), etag

    def read(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.fs.cat_file(self.key))
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write(self, value: dict[str, Any]) -> None:
        self.fs.pipe_file(self.key, json.dumps(value).encode())

    def create(self, value: dict[str, Any]) -> bool:
        try:
            self.fs.pipe_file(self.key, json.dumps(value).encode(), mode="create")  # If-None-Match: *
        except FileExistsError:
            return False
        return True

    def modified(self) -> float | None:
        try:
            return self.fs.info(self.key)["LastModified"].timestamp()
        except (OSError, KeyError, AttributeError):
            return None

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self.key)

    def replace_if(self, token: str | None, value: dict[str, Any]) -> bool:
        current, etag = self._read_with_etag()
        if etag is None:
            return self.create(value)  # gone meanwhile: whoever creates it first holds it
        if (current or {}).get("token") != token:
            return False
        try:
            self.fs.pipe_file(self.key, json.dumps(value).encode(), IfMatch=etag)
        except OSError:  # 412 Precondition Failed: changed since read; FileNotFound: removed
            return False
        return True

    def remove_if(self, token: str) -> bool:
        current, etag = self._read_with_etag()
        if etag is None or (current or {}).get("token") != token:
            return False
        bucket, _, key = self.key.partition("/")
        try:
            self.fs.call_s3("delete_object", Bucket=bucket, Key=key, IfMatch=etag)
        except OSError:
            return False
        return True
