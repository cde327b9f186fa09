"""Dataset inputs at URLs: a TU folder, a CSV/SMILES or SDF file in a bucket (``s3://…``).

A cluster whose workers share no file system reads its graphs where it writes its stores: a job
names ``dataset: {path: s3://bucket/datasets/NCI1}`` or ``{smiles: s3://bucket/mols.csv.gz}``,
or ``$GRAMDIST_DATA`` lists ``s3://bucket/datasets`` among its roots. The readers stay
file readers: :func:`fetch` copies the objects once into the download cache (through fsspec,
credentials from their usual places) and returns the local copy. The copy is keyed by the URL
and by the objects' sizes and ETags, so a dataset changed in the bucket is fetched anew, and it
is written into a temporary folder renamed into place, so a crash or a concurrent fetch never
leaves half a dataset.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from gramdist.datasets.cache import cache_dir
from gramdist.errors import DatasetError
from gramdist.urls import CREDENTIALS_HINT, filesystem, is_url

__all__ = ["fetch", "is_url", "remote_folder_exists"]


def _filesystem(url: str) -> tuple[Any, str]:
    try:
        return filesystem(url)
    except (ImportError, ValueError) as exc:
        raise DatasetError(f"cannot read datasets at {url} ({exc})") from None


def _fail(url: str, exc: BaseException) -> DatasetError:
    return DatasetError(f"{url}: cannot read it ({type(exc).__name__}: {exc}); {CREDENTIALS_HINT}")


def remote_folder_exists(url: str) -> bool:
    """Whether a folder (a prefix with objects under it) exists at ``url``."""
    fs, key = _filesystem(url)
    try:
        return bool(fs.isdir(key))
    except FileNotFoundError:
        return False
    except Exception as exc:  # noqa: BLE001 - botocore's errors are not OSErrors
        raise _fail(url, exc) from None


def fetch(url: str, cache: Path | None = None) -> Path:
    """A local copy of the file or folder at ``url`` (see the module docstring); its name is
    the URL's last part, so a TU folder keeps its dataset name.

    Raises
    ------
    DatasetError
        Nothing at ``url``, or the object store cannot be reached (one line, naming where
        credentials come from).
    """
    fs, key = _filesystem(url)
    try:
        listing = sorted(fs.find(key, detail=True).items()) if fs.isdir(key) else None
        if listing is None:
            info = fs.info(key)
            listing = [(key, info)]
            folder = False
        else:
            folder = True
    except FileNotFoundError:
        raise DatasetError(f"{url}: no such file or folder") from None
    except Exception as exc:  # noqa: BLE001
        raise _fail(url, exc) from None
    if not listing:
        raise DatasetError(f"{url}: an empty folder")
    digest = hashlib.blake2b(url.encode(), digest_size=10)
    for name, info in listing:
        digest.update(f"{name}\0{info.get('size')}\0{info.get('ETag') or info.get('mtime')}\n".encode())
    base = (cache or cache_dir()) / "remote" / digest.hexdigest()
    target = base / key.rstrip("/").rsplit("/", 1)[-1]
    if target.exists():
        return target
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=base))
    try:
        staged = tmp / target.name
        if folder:
            staged.mkdir()
            for name, _ in listing:
                rel = name[len(key.rstrip("/")) + 1:]
                (staged / rel).parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(name, str(staged / rel))
        else:
            fs.get_file(key, str(staged))
        try:
            os.rename(staged, target)
        except OSError:
            if not target.exists():  # not a concurrent fetch that finished first
                raise
    except DatasetError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise _fail(url, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
