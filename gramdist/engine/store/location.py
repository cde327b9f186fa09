"""Where a store lives, and the small files that live beside it.

:class:`Location` is the one place that knows a store is a folder on a file system: the
store package opens Zarr through it, and its *sidecars* (``STORE.lock``, ``STORE.job.json``,
``STORE.cancel``) are small JSON objects next to the store that it creates, replaces and
removes. Code outside the store package never builds such a path itself, so that another
backend (an object store, where a "rename" or an exclusive create are conditional writes)
replaces this class and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gramdist.errors import StoreError

#: a URL scheme (``s3://``, ``gs://``, ``az://``, ``http://``...): two or more letters, so that a
#: Windows drive (``C:/``) is never one
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")


class Location:
    """A store's place: a local folder ``path`` (which need not exist yet)."""

    def __init__(self, path: str | os.PathLike) -> None:
        text = os.fspath(path)
        if isinstance(text, str) and text.startswith("file://"):
            text = text[len("file://"):]
        elif isinstance(text, str) and _URL.match(text):
            # Refused until an object-store backend exists: Path("s3://b/x.zarr") would quietly
            # be a local folder named "s3:" (issue 33).
            raise StoreError(f"{text}: stores at URLs ({text.split(':', 1)[0]}://) are not supported yet; "
                             "give a local folder, or a shared one every worker sees at the same path")
        self.path = Path(text)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Location({str(self.path)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Location) and self.resolved() == other.resolved()

    def __hash__(self) -> int:
        return hash(self.resolved())

    @property
    def name(self) -> str:
        return self.path.name

    def resolved(self) -> str:
        """The absolute form, as recorded in stores and sent to workers."""
        return str(self.path.resolve())

    def exists(self) -> bool:
        return self.path.exists()

    def is_folder(self) -> bool:
        return self.path.is_dir()

    def is_empty_folder(self) -> bool:
        return self.path.is_dir() and not any(self.path.iterdir())

    def join(self, name: str) -> Location:
        """The store ``name`` inside this folder of stores (a grid's output)."""
        return Location(self.path / name)

    def parent(self) -> Location:
        """The folder holding this store (a grid's folder, for one of its settings)."""
        return Location(self.path.parent)

    def sibling(self, name: str) -> Location:
        """Another store beside this one."""
        return Location(self.path.with_name(name))

    def is_absolute(self) -> bool:
        return self.path.is_absolute()

    def absolute(self) -> Location:
        """The same place named absolutely (what workers elsewhere are sent)."""
        return Location(self.path.absolute())

    def child(self, *parts: str) -> Path:
        """A file or folder inside the store (only the store package reads these)."""
        return self.path.joinpath(*parts)

    def sidecar(self, suffix: str) -> Sidecar:
        """The small object ``STORE<suffix>`` beside the store (``.lock``, ``.job.json``)."""
        return Sidecar(self.path.with_name(self.path.name + suffix))

    def remove(self) -> None:
        shutil.rmtree(self.path)

    def parent_writable(self) -> Path:
        """The nearest existing folder above the store (where it will be created)."""
        parent = self.path.resolve().parent
        while not parent.exists():
            parent = parent.parent
        return parent


class Sidecar:
    """A small JSON object beside a store: read, replaced atomically, created exclusively."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __str__(self) -> str:
        return str(self.path)

    @property
    def name(self) -> str:
        return self.path.name

    def exists(self) -> bool:
        return self.path.exists()

    def read(self) -> dict[str, Any] | None:
        """The JSON mapping it holds; None when it is absent, unreadable or not a mapping."""
        try:
            value = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return value if isinstance(value, dict) else None

    def write(self, value: dict[str, Any]) -> None:
        """Replace it atomically (a reader sees the old or the new object, never half of one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(value, f)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def create(self, value: dict[str, Any]) -> bool:
        """Create it holding ``value`` only if it does not exist; False if it did. Atomic with
        its content: written to a private file, then hard-linked into place (a link fails if the
        name exists), so no reader or renamer ever sees it empty."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.new.")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(value, f)
            os.link(tmp, self.path)
        except FileExistsError:
            return False
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        return True

    def modified(self) -> float | None:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)

    def beside(self, suffix: str) -> Path:
        """A scratch file next to it (for a replace through a temporary name)."""
        return self.path.with_name(f"{self.path.name}.{suffix}")

    def rename_to(self, target: Path) -> bool:
        """Move it to ``target`` atomically; False if it was not there (another process moved or
        removed it first: of several renamers of one file, exactly one succeeds)."""
        try:
            os.rename(self.path, target)
        except FileNotFoundError:
            return False
        return True

    def restore_to(self, other: Sidecar) -> None:
        """Put this object's content back as ``other`` (only if ``other`` is absent), then remove it."""
        value = self.read()
        if value is not None:
            other.create(value)
        self.remove()
