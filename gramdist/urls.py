"""Places named by URL (``s3://bucket/key``): what the stores (:mod:`gramdist.engine.store.objects`)
and the dataset readers (:mod:`gramdist.datasets.remote`) share about object stores.

Objects are reached through fsspec; credentials and the endpoint come from their usual places,
never from a job file.
"""

from __future__ import annotations

import re
from typing import Any

#: a URL scheme (``s3://``, ``gs://``, ``az://``, ``http://``...): two or more letters, so that a
#: Windows drive (``C:/``) is never one
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")

#: where credentials and the endpoint come from: said whenever the object store cannot be reached
CREDENTIALS_HINT = ("credentials come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, ~/.aws or an instance role; "
                    "an S3-compatible server's address from AWS_ENDPOINT_URL")

#: what every filesystem is opened with: no listing cache, so that a process sees the objects
#: another process wrote a moment ago (a lock, a tile) rather than a listing it made earlier;
#: ``max_concurrency`` 1: a whole-object read is one GET (s3fs otherwise asks its size first, a
#: HEAD per read, to split large ones: our objects are chunks of at most a few tens of MB)
STORAGE_OPTIONS: dict[str, Any] = {"use_listings_cache": False, "max_concurrency": 1}


def is_url(value: Any) -> bool:
    """Whether ``value`` names a place by URL (``file://`` counts as local)."""
    return isinstance(value, str) and bool(_URL.match(value)) and not value.startswith("file://")


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, the key within it) of ``url``; ImportError names the extra to install."""
    import fsspec

    try:
        return fsspec.core.url_to_fs(url, **STORAGE_OPTIONS)
    except ImportError as exc:
        raise ImportError(f"{url}: {exc}; for s3:// URLs: pip install 'gramdist[s3]'") from None
