"""The download cache of TU datasets, and how a TU zip is installed into a folder.

A dataset folder is extracted into a temporary folder beside its place and renamed into place,
so a crash or a concurrent extraction never leaves a half-written dataset. Downloads
(:mod:`.resolve`), the built-in zips (:mod:`.builtin`) and fetched remote copies
(:mod:`.remote`) all land here.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path, PurePosixPath

from gramdist.errors import DatasetError

_REQUIRED = ("A", "graph_indicator", "graph_labels")


def cache_dir() -> Path:
    """Folder where downloaded datasets are kept: ``$GRAMDIST_CACHE/datasets``."""
    base = os.environ.get("GRAMDIST_CACHE") or Path.home() / ".cache" / "gramdist"
    return Path(base) / "datasets"


def install_zip(zip_path: Path, name: str, dest: Path, source_label: str) -> Path:
    """Extract the TU dataset ``name`` from ``zip_path`` into ``dest / name`` atomically
    (a temporary folder renamed into place); an existing ``dest / name`` is kept.

    ``source_label`` names the zip in errors (its URL for a download).
    """
    target = dest / name
    if target.is_dir():
        return target
    dest.mkdir(parents=True, exist_ok=True)
    tmp_dir: Path | None = Path(tempfile.mkdtemp(prefix=f".{name}.", suffix=".tmp", dir=dest))
    try:
        _extract(str(zip_path), name, tmp_dir, source_label)
        try:
            os.rename(tmp_dir, target)  # atomic on one file system
            tmp_dir = None
        except OSError:
            if not target.is_dir():  # not a concurrent extraction that finished first
                raise
    finally:
        if tmp_dir is not None:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return target


def _extract(zip_path: str, name: str, out: Path, url: str) -> None:
    """Extract the ``NAME_*`` files of the zip's dataset folder, flat, into ``out``."""
    try:
        with zipfile.ZipFile(zip_path) as zf:
            members = {}
            for info in zf.infolist():
                p = PurePosixPath(info.filename)
                if info.is_dir() or p.is_absolute() or ".." in p.parts:
                    continue
                members.setdefault(p.parent, {})[p.name] = info
            # the folder holding NAME_A.txt (TU zips have NAME/NAME_A.txt; accept any depth)
            folders = [d for d, files in members.items() if f"{name}_A.txt" in files]
            if not folders:
                raise DatasetError(f"{url}: zip does not contain {name}_A.txt")
            files = members[min(folders, key=lambda d: len(d.parts))]
            missing = [f"{name}_{p}.txt" for p in _REQUIRED if f"{name}_{p}.txt" not in files]
            if missing:
                raise DatasetError(f"{url}: zip lacks {', '.join(missing)}")
            for fname, info in files.items():
                if fname.startswith(f"{name}_") or fname == "README.txt":
                    with zf.open(info) as src, open(out / fname, "wb") as dst:
                        shutil.copyfileobj(src, dst, length=1 << 20)
    except zipfile.BadZipFile as exc:
        raise DatasetError(f"{url}: corrupt zip file ({exc})") from None
