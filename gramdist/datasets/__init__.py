"""Graph input layer: TU-format files, named datasets, synthetic graphs, NetworkX.

:func:`load_dataset` turns a job's ``dataset:`` section into a :class:`GraphBatch`::

    dataset: MUTAG                                   # a name (same as {name: MUTAG})
    dataset: {name: MUTAG}                           # found by resolve_dataset (or downloaded)
    dataset: {path: /data/ENZYMES}                   # a TU folder
    dataset: {synthetic: {n_graphs: 100, n_nodes: 50, attr_dim: 2, seed: 0}}
    dataset: {name: ENZYMES, node_attributes: [0, 3], limit: 50}

``node_attributes`` is ``all`` (default), ``none`` (drop them) or a list of 0-based column
indices to keep, in that order; ``skip: k`` drops the first ``k`` graphs and ``limit: k``
keeps the first ``k`` graphs (after ``skip``): ``{..., skip: 19800}`` is what a store of the
first 19,800 graphs (``limit: 19800``) is appended.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from gramdist.datasets.nx import from_networkx, to_networkx
from gramdist.datasets.resolve import dataset_search_path, resolve_dataset
from gramdist.datasets.synthetic import make_synthetic
from gramdist.datasets.tu import read_tu
from gramdist.errors import DatasetError, JobError
from gramdist.graphs import GraphBatch

__all__ = [
    "dataset_search_path", "from_networkx", "load_dataset", "make_synthetic", "read_tu",
    "resolve_dataset", "to_networkx",
]

_SOURCES = ("name", "path", "synthetic")
_KEYS = (*_SOURCES, "node_attributes", "skip", "limit")


def load_dataset(spec: str | Path | Mapping) -> GraphBatch:
    """Load the dataset a job describes.

    Parameters
    ----------
    spec : str, Path or mapping
        A dataset name (``"MUTAG"``), a ``Path`` to a TU folder, or the job's ``dataset:``
        mapping with exactly one of ``name``, ``path``, ``synthetic`` (keyword arguments of
        :func:`make_synthetic`), and optionally ``node_attributes``, ``skip`` and ``limit``.

    Returns
    -------
    GraphBatch

    Raises
    ------
    JobError
        An unknown key, not exactly one source, or an invalid option value.
    DatasetError
        The data cannot be found or read, or ``node_attributes`` names a column the data
        does not have.
    """
    if isinstance(spec, Path):
        spec = {"path": str(spec)}
    elif isinstance(spec, str):
        spec = {"name": spec}
    elif not isinstance(spec, Mapping):
        raise JobError(f"dataset: expected a name or a mapping, got {type(spec).__name__}")
    unknown = [k for k in spec if k not in _KEYS]
    if unknown:
        raise JobError(f"dataset: unknown key {unknown[0]!r} (allowed: {', '.join(_KEYS)})")
    sources = [k for k in _SOURCES if k in spec]
    if len(sources) != 1:
        raise JobError(f"dataset: give exactly one of {', '.join(_SOURCES)} (got {', '.join(sources) or 'none'})")
    source = sources[0]
    value = spec[source]

    if source == "name":
        if not isinstance(value, str):
            raise JobError(f"dataset.name: expected a string, got {value!r}")
        batch = read_tu(resolve_dataset(value), name=value)
    elif source == "path":
        if not isinstance(value, (str, Path)):
            raise JobError(f"dataset.path: expected a folder path, got {value!r}")
        batch = read_tu(Path(value).expanduser())
    else:
        batch = _synthetic(value)

    skip = spec.get("skip")
    if skip is not None:
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise JobError(f"dataset.skip: expected a non-negative integer, got {skip!r}")
        batch = batch[skip:]
    limit = spec.get("limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise JobError(f"dataset.limit: expected a positive integer, got {limit!r}")
        batch = batch[:limit]
    return _select_node_attributes(batch, spec.get("node_attributes", "all"))


def _synthetic(kwargs) -> GraphBatch:
    if not isinstance(kwargs, Mapping):
        raise JobError(f"dataset.synthetic: expected a mapping of make_synthetic arguments, got {kwargs!r}")
    params = inspect.signature(make_synthetic).parameters
    for key in kwargs:
        if key not in params:
            raise JobError(f"dataset.synthetic: unknown key {key!r} (allowed: {', '.join(params)})")
    kw = dict(kwargs)
    if isinstance(kw.get("n_nodes"), list):
        kw["n_nodes"] = tuple(kw["n_nodes"])  # YAML gives a list for a range
    try:
        return make_synthetic(**kw)
    except (ValueError, TypeError) as exc:
        raise JobError(f"dataset.synthetic: {exc}") from None


def _select_node_attributes(batch: GraphBatch, sel) -> GraphBatch:
    if sel == "all":
        return batch
    if sel == "none":
        batch.node_attrs = None
        return batch
    if not isinstance(sel, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in sel):
        raise JobError(f"dataset.node_attributes: expected all, none or a list of column indices, got {sel!r}")
    width = 0 if batch.node_attrs is None else batch.node_attrs.shape[1]
    for c in sel:
        if not 0 <= c < width:
            raise DatasetError(
                f"dataset {batch.name}: node attribute column {c} does not exist "
                f"(the data has {width} column{'s' * (width != 1)}{', 0-based' if width else ''})"
            )
    batch.node_attrs = None if not sel else np.ascontiguousarray(batch.node_attrs[:, sel])
    return batch
