"""Graphs from whatever a Python user holds: one dispatch for the estimators and ``compute_gram``.

:func:`as_graph_batch` accepts, in this order of checks:

1. molecules — RDKit ``Mol`` objects, SMILES strings, an SDF file, a CSV with a SMILES column —
   when :mod:`gramdist.datasets.molecules` is present and recognises them
   (``molecules.is_molecule_input``); ``input_options`` go to ``molecules_to_batch``;
2. a :class:`~gramdist.graphs.GraphBatch`, returned as is;
3. a TU folder (``str`` or ``os.PathLike``), or a dataset name (``"MUTAG"``) resolved like a
   job's ``dataset: {name: ...}`` (``$GRAMDIST_DATA``, ``../shared/datasets``, the download
   cache, the built-in MUTAG and PTC_MR, then a download);
4. a job-style ``dataset:`` mapping (``{"name": "NCI1", "limit": 100}``);
5. a list (or any iterable) of networkx graphs, converted by
   :func:`~gramdist.datasets.nx.from_networkx` with the ``node_label``, ``node_attr``,
   ``edge_label`` and ``edge_attr`` keys;
6. a list of :class:`~gramdist.graphs.Graph` views (what scikit-learn's cross-validation makes
   of a GraphBatch when it takes the graphs of a fold).

Anything else, an empty input, a list mixing kinds of items, or a graph lacking a named key
raises :class:`~gramdist.errors.InputError` naming the index of the offending item.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gramdist.errors import DatasetError, InputError
from gramdist.graphs import Graph, GraphBatch

__all__ = ["as_graph_batch"]


def as_graph_batch(
    X: Any,
    *,
    node_label: str | None = "label",
    node_attr: str | None = None,
    edge_label: str | None = None,
    edge_attr: str | None = None,
    input_options: Mapping[str, Any] | None = None,
    codes: dict[str, dict] | None = None,
) -> GraphBatch:
    """The graphs of ``X`` as one :class:`GraphBatch` (see the module docstring for the kinds).

    Parameters
    ----------
    X : GraphBatch, str, os.PathLike, mapping, or iterable of networkx graphs (or molecules)
    node_label, node_attr, edge_label, edge_attr : str or None
        Keys of networkx node and edge data (as :func:`~gramdist.datasets.nx.from_networkx`);
        ignored for other inputs.
    input_options : mapping or None
        Keyword arguments of ``molecules.molecules_to_batch`` for molecule inputs (e.g.
        ``{"smiles_column": "smiles", "aromaticity": False}``); ignored for other inputs.
    codes : dict or None
        Integer codes of non-integer networkx labels, extended in place (see ``from_networkx``):
        the mapping filled while converting training graphs keeps test graphs' labels consistent.

    Returns
    -------
    GraphBatch
        ``len(X)`` graphs (for a list), in the order given.

    Raises
    ------
    InputError
        ``X`` is empty, of an unknown kind, a list mixing kinds, or a graph lacks a named key.
    DatasetError
        A folder or dataset that cannot be read (the message names the file and line).
    """
    if isinstance(X, Iterator):
        X = list(X)  # a generator is read once: by whichever check below takes it
    molecules = _molecule_module()
    if molecules is not None and molecules.is_molecule_input(X):
        return molecules.molecules_to_batch(X, **dict(input_options or {}))
    if isinstance(X, GraphBatch):
        if len(X) == 0:
            raise InputError("X: the GraphBatch holds no graphs")
        return X.validate("X")
    if isinstance(X, (str, os.PathLike)):
        return _from_path_or_name(X)
    if isinstance(X, Mapping):
        from gramdist.datasets import load_dataset

        return load_dataset(X)
    if isinstance(X, (bytes, bytearray)) or not isinstance(X, Iterable):
        raise InputError(f"X: cannot read graphs from a {type(X).__name__}; give a list of networkx graphs, "
                         "a GraphBatch, a TU folder or a dataset name" + _molecule_hint(molecules))
    items = list(X)
    if not items:
        raise InputError("X: no graphs given (an empty sequence)")
    nx = sys.modules.get("networkx")
    if nx is not None and isinstance(items[0], nx.Graph):
        for i, g in enumerate(items):
            if not isinstance(g, nx.Graph):
                raise InputError(f"X[{i}]: a {type(g).__name__} in a list of networkx graphs (X[0] is a "
                                 f"{type(items[0]).__name__}); give one kind of graph")
        return _from_networkx(items, node_label, node_attr, edge_label, edge_attr, codes)
    if isinstance(items[0], Graph):
        return _from_graph_views(items)
    first = type(items[0]).__name__
    raise InputError(f"X[0]: cannot read a {first} as a graph; give networkx graphs, a GraphBatch, a TU folder "
                     "or a dataset name" + _molecule_hint(molecules))


def _from_graph_views(items: list) -> GraphBatch:
    """A batch from :class:`~gramdist.graphs.Graph` views (what scikit-learn's cross-validation
    makes of a GraphBatch when it indexes one: a list of its graphs)."""
    fields = ("node_labels", "node_attrs", "edge_labels", "edge_attrs")
    for i, g in enumerate(items):
        if not isinstance(g, Graph):
            raise InputError(f"X[{i}]: a {type(g).__name__} in a list of gramdist graphs; give one kind of graph")
        for name in fields:
            if (getattr(g, name) is None) != (getattr(items[0], name) is None):
                raise InputError(f"X[{i}]: {'has' if getattr(g, name) is not None else 'lacks'} {name}, "
                                 f"unlike X[0]; graphs of one batch all have it or all lack it")
    parts = {name: None if getattr(items[0], name) is None else [getattr(g, name) for g in items]
             for name in fields}
    has_y = all(g.y is not None for g in items)
    return GraphBatch.from_graphs([g.edges for g in items], [g.n_nodes for g in items], **parts,
                                  y=[g.y for g in items] if has_y else None,
                                  graph_ids=[g.graph_id for g in items])


def _molecule_module() -> Any:
    """:mod:`gramdist.datasets.molecules`, or None where this build has no such module."""
    try:
        return importlib.import_module("gramdist.datasets.molecules")
    except ModuleNotFoundError as exc:
        if exc.name == "gramdist.datasets.molecules":
            return None
        raise


def _molecule_hint(molecules: Any) -> str:
    return "" if molecules is None else ", or molecules (RDKit Mol objects, SMILES, an SDF or CSV file)"


def _from_path_or_name(X: str | os.PathLike) -> GraphBatch:
    from gramdist.datasets import load_dataset
    from gramdist.datasets.resolve import _NAME_RE
    from gramdist.datasets.tu import read_tu

    path = Path(X).expanduser()
    if path.is_dir():
        return read_tu(path)
    if path.exists():
        raise InputError(f"{X}: a file; a TU dataset is a folder of NAME_*.txt files")
    if isinstance(X, str) and _NAME_RE.fullmatch(X):
        return load_dataset({"name": X})
    raise InputError(f"{X}: no such folder, and not a dataset name")


def _from_networkx(graphs: list, node_label: str | None, node_attr: str | None, edge_label: str | None,
                   edge_attr: str | None, codes: dict[str, dict] | None) -> GraphBatch:
    from gramdist.datasets.nx import from_networkx

    try:
        return from_networkx(graphs, node_label=node_label, node_attr=node_attr, edge_label=edge_label,
                             edge_attr=edge_attr, codes=codes)
    except DatasetError as exc:
        message = str(exc).removeprefix("from_networkx: ")
        if " has no " in message:  # a missing key: say which parameter names it
            message += ("; set node_label / node_attr / edge_label / edge_attr to the keys the graphs use, "
                        "or None to use none")
        indexed = re.sub(r"^graph (\d+) ", r"X[\1]: ", message)
        raise InputError(indexed if indexed != message else f"X: {message}") from None
