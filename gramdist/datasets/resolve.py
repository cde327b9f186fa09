"""Find the folder of a dataset named in a job, downloading it from the TU collection if needed.

Search order for ``name`` (the first folder ``<root>/<name>`` that exists wins):

1. each root in ``$GRAMDIST_DATA`` (``os.pathsep``-separated; a root may be a URL,
   ``s3://bucket/datasets``, whose dataset folders are fetched into the cache once);
2. ``../shared/datasets`` relative to the current working directory;
3. ``../shared/datasets`` relative to the repository root (the parent of the ``gramdist``
   package, when it is a source checkout holding ``pyproject.toml``: an editable install);
4. the download cache ``$GRAMDIST_CACHE/datasets`` (default ``~/.cache/gramdist/datasets``);
5. the datasets built into gramdist (MUTAG and PTC_MR, :mod:`gramdist.datasets.builtin`),
   extracted into the download cache on first use.

If none holds it, the zip is fetched from ``$GRAMDIST_TU_URL`` (a template with ``{name}``;
default the TU Dortmund collection, :data:`TU_URL`) into a temporary file in the cache,
checked to be a zip holding ``NAME_A.txt``, ``NAME_graph_indicator.txt`` and
``NAME_graph_labels.txt``, extracted into a temporary folder and renamed into place
atomically, so a crash or a concurrent download never leaves a half-written dataset.
``GRAMDIST_OFFLINE=1`` (or ``true``/``yes``) disables downloads: a dataset found nowhere is
then an error that says so, and nothing touches the network.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

from gramdist.datasets.builtin import builtin_zip, extract_builtin
from gramdist.datasets.cache import cache_dir, install_zip
from gramdist.errors import DatasetError
from gramdist.urls import is_url

__all__ = ["TU_URL", "cache_dir", "dataset_search_path", "download_tu", "downloads_enabled", "install_zip",
           "resolve_dataset"]

#: Public zip of each TU dataset; ``$GRAMDIST_TU_URL`` overrides it (tests use a local server).
TU_URL = "https://www.chrsmrrs.com/graphkerneldatasets/{name}.zip"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")


def downloads_enabled() -> bool:
    """False when ``$GRAMDIST_OFFLINE`` is set to 1, true or yes (any case)."""
    return os.environ.get("GRAMDIST_OFFLINE", "").strip().lower() not in ("1", "true", "yes")


def data_roots() -> list[Path | str]:
    """The roots ``$GRAMDIST_DATA`` lists: local folders, and URLs (``s3://bucket/datasets``,
    whose ``:`` is not a separator) kept as strings."""
    value = os.environ.get("GRAMDIST_DATA", "")
    parts = re.split(r":(?!//)", value) if os.pathsep == ":" else value.split(os.pathsep)
    return [p if is_url(p) else Path(p) for p in parts if p]


def dataset_search_path() -> list[Path | str]:
    """The folders searched for ``<root>/<name>``, in order (the download cache last); a root
    at a URL is a string (see :func:`data_roots`)."""
    roots = data_roots()
    roots.append(Path.cwd() / ".." / "shared" / "datasets")
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file():
        roots.append(repo / ".." / "shared" / "datasets")
    roots.append(cache_dir())
    seen, unique = set(), []
    for r in roots:
        key = r if isinstance(r, str) else os.path.normpath(os.path.abspath(r))
        if key not in seen:
            seen.add(key)
            unique.append(r)
    return unique


def resolve_dataset(name: str, download: bool = True) -> Path:
    """Folder of the TU dataset ``name``, searching :func:`dataset_search_path`.

    Parameters
    ----------
    name : str
        Dataset name as in the TU collection, e.g. ``"MUTAG"``.
    download : bool
        Fetch it into the cache when no folder has it and it is not built in (see the module
        docstring); ``GRAMDIST_OFFLINE=1`` turns this off too.

    Raises
    ------
    DatasetError
        Invalid name, or not found (listing the folders searched) and not downloadable.
    """
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise DatasetError(f"dataset name {name!r} is not a valid TU dataset name")
    roots = dataset_search_path()
    for root in roots:
        if isinstance(root, str):  # a URL: fetched into the cache (gramdist.datasets.remote)
            from gramdist.datasets.remote import fetch, remote_folder_exists

            if remote_folder_exists(f"{root.rstrip('/')}/{name}"):
                return fetch(f"{root.rstrip('/')}/{name}")
        elif (root / name).is_dir():
            return root / name
    if builtin_zip(name) is not None:
        try:
            return extract_builtin(name, cache_dir())
        except OSError:  # an unwritable cache: a private copy for this process
            return extract_builtin(name, Path(tempfile.mkdtemp(prefix="gramdist-builtin-")))
    if not download or not downloads_enabled():
        why = "GRAMDIST_OFFLINE is set" if download else "downloads disabled"
        raise DatasetError(
            f"dataset {name} not found in {', '.join(str(r) for r in roots)} ({why}; put its TU folder "
            "in one of them or in $GRAMDIST_DATA)"
        )
    try:
        return download_tu(name)
    except DatasetError as exc:
        raise DatasetError(f"{exc} (and not found in {', '.join(str(r) for r in roots[:-1])})") from None


def download_tu(name: str, dest: Path | None = None, timeout: float = 60.0) -> Path:
    """Download and extract the TU zip of ``name`` into ``dest`` (default :func:`cache_dir`).

    Returns ``dest / name``. Raises :class:`DatasetError` naming the URL on a network error,
    an HTTP error, a file that is not a zip, or a zip without the required files.
    """
    # here, not at the top: urllib.request brings http.client, ssl and email (15 ms), which
    # every `gramdist run` would import to read a dataset that is already on disk
    import urllib.error
    import urllib.request

    dest = Path(dest) if dest is not None else cache_dir()
    target = dest / name
    if target.is_dir():
        return target
    url = os.environ.get("GRAMDIST_TU_URL", TU_URL).format(name=name)
    dest.mkdir(parents=True, exist_ok=True)
    fd, tmp_zip = tempfile.mkstemp(prefix=f".{name}.", suffix=".zip.part", dir=dest)
    try:
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
                shutil.copyfileobj(resp, out, length=1 << 20)
        except urllib.error.HTTPError as exc:
            raise DatasetError(f"{url}: download failed (HTTP {exc.code} {exc.reason})") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise DatasetError(f"{url}: download failed ({reason})") from None
        if not zipfile.is_zipfile(tmp_zip):
            raise DatasetError(f"{url}: the download is not a zip file")
        return install_zip(Path(tmp_zip), name, dest, source_label=url)
    finally:
        os.unlink(tmp_zip)
