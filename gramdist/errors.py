"""Exceptions that carry a one-line, user-readable message.

The CLI prints ``str(exc)`` of these on one line and exits with status 2; anything
else is a bug and keeps its traceback.
"""

from __future__ import annotations


class GramdistError(Exception):
    """Base class of every error the CLI reports as one readable line."""


class DatasetError(GramdistError):
    """Malformed or missing input data.

    The message names the file (and line, where there is one) and the problem,
    e.g. ``MUTAG_A.txt line 17: node id 4000 out of range 1..3371``.
    """


class InputError(DatasetError, ValueError):
    """What was given to the Python API as graphs cannot be read as graphs (a mixed list, an
    empty input, a graph without the named label key); the message names the index. A
    ``ValueError`` too, as scikit-learn expects of invalid input."""


class JobError(GramdistError):
    """An invalid job file, an unknown key, or an out-of-range parameter."""


class StoreError(GramdistError):
    """A Zarr store that is missing, incomplete, or belongs to another job."""


class TileError(GramdistError):
    """A tile task failed; the message names the tile and the graphs it covers."""


class MissingExtraError(GramdistError):
    """An optional dependency is not installed; the message names the extra that brings it,
    e.g. ``plots need matplotlib: pip install "gramdist[plot]"``."""
