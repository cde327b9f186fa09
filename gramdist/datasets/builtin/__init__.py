"""MUTAG and PTC_MR inside the package: the datasets a fresh, offline machine still has.

The zips beside this module hold the TU collection's files unchanged (provenance, terms and
checksums in ``README.md`` here). :func:`gramdist.datasets.resolve.resolve_dataset` uses them
for a name that no data folder, ``../shared`` or the download cache holds, extracting the
zip into the download cache exactly as a download would be; :func:`extract_builtin` extracts
one anywhere (the tests use it).
"""

from __future__ import annotations

from pathlib import Path

from gramdist.datasets.cache import install_zip
from gramdist.errors import DatasetError

#: names of the built-in datasets
BUILTIN = ("MUTAG", "PTC_MR")

_HERE = Path(__file__).resolve().parent


def builtin_zip(name: str) -> Path | None:
    """The zip of built-in dataset ``name``, or None when ``name`` is not built in."""
    path = _HERE / f"{name}.zip"
    return path if name in BUILTIN and path.is_file() else None


def extract_builtin(name: str, dest: str | Path) -> Path:
    """Extract built-in dataset ``name`` into ``dest / name`` (atomically; kept if already
    there) and return that folder.

    Raises
    ------
    DatasetError
        ``name`` is not built in.
    """
    source = builtin_zip(name)
    if source is None:
        raise DatasetError(f"dataset {name} is not built into gramdist (built in: {', '.join(BUILTIN)})")
    return install_zip(source, name, Path(dest), source_label=f"built-in {source.name}")


__all__ = ["BUILTIN", "builtin_zip", "extract_builtin"]
