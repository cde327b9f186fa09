"""Collections too large for one process: graphs made where they are needed, chunk by chunk.

:func:`open_dataset` is :func:`~gramdist.datasets.load_dataset` for the engine's streaming
paths (feature stores): a synthetic spec with ``block_size`` gives a :class:`LazySynthetic`,
which holds only the generator's arguments, a SMILES file with ``block_size`` a
:class:`~gramdist.datasets.molecule_blocks.LazyMolecules` (the file scanned once, its blocks
parsed on the workers); every other spec is loaded as usual (a
:class:`~gramdist.graphs.GraphBatch`). A lazy dataset supports what those paths ask of a
batch, without ever holding all graphs:

* ``len(ds)``, ``ds.name``, ``ds.checksum()`` (of the generator's arguments: the graphs are a
  pure function of them);
* ``ds[a:b]`` -> a :class:`~gramdist.graphs.GraphChunk`, a few bytes that a worker turns into the graphs with
  its ``load()`` (generating only the blocks that hold them);
* ``ds.take(indices)`` -> a :class:`GraphBatch` of those graphs (a fit sample, landmarks),
  generated block by block;
* ``ds.y_dtype`` (the class labels' dtype; None when there are none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from gramdist.datasets.synthetic import SyntheticSpec, synthetic_block
from gramdist.errors import JobError
from gramdist.graphs import GraphBatch, GraphChunk

__all__ = ["LazySynthetic", "open_dataset"]


class LazySynthetic:
    """A blocked synthetic collection (``make_synthetic(..., block_size=B)``), generated lazily.

    Parameters
    ----------
    kwargs : dict
        Fields of :class:`~gramdist.datasets.synthetic.SyntheticSpec` (the arguments of
        :func:`~gramdist.datasets.make_synthetic`), ``block_size`` included.
    limit : int, optional
        Keep only the first ``limit`` graphs.
    node_attributes : "all", "none" or list of int
        As ``load_dataset``'s ``node_attributes``, applied to every chunk.
    """

    name = "synthetic"

    def __init__(self, kwargs: Mapping[str, Any], limit: int | None = None,
                 node_attributes: Any = "all") -> None:
        kw = dict(kwargs)
        if isinstance(kw.get("n_nodes"), list):
            kw["n_nodes"] = tuple(kw["n_nodes"])
        self.block_size = int(kw.pop("block_size"))
        self.n_total = int(kw.pop("n_graphs", 10))
        self.seed = int(kw.pop("seed", 0))
        self.synthetic = SyntheticSpec(**kw, n_graphs=self.n_total, seed=self.seed, block_size=self.block_size)
        self.n_graphs = min(self.n_total, limit) if limit is not None else self.n_total
        self.node_attributes = node_attributes
        if self.block_size < 1 or self.n_total < 1:
            raise JobError(f"dataset.synthetic: n_graphs and block_size must be >= 1, got "
                           f"{self.n_total} and {self.block_size}")
        try:
            self._block(0)  # argument errors now, on the client, not later on a worker
        except (ValueError, TypeError) as exc:
            raise JobError(f"dataset.synthetic: {exc}") from None

    def __len__(self) -> int:
        return self.n_graphs

    @property
    def y_dtype(self) -> np.dtype:
        return np.dtype(np.int64)

    def spec(self) -> dict[str, Any]:
        """The arguments that determine the graphs (JSON)."""
        kw = {k: list(v) if isinstance(v, tuple) else v for k, v in self.synthetic.draws().items()}
        return {"generator": "make_synthetic", "n_graphs": self.n_total, "block_size": self.block_size,
                "seed": self.seed, "limit": self.n_graphs, "node_attributes": self.node_attributes, **kw}

    def checksum(self) -> str:
        """SHA-256 of :meth:`spec`: the same arguments always make the same graphs."""
        return hashlib.sha256(json.dumps(self.spec(), sort_keys=True).encode()).hexdigest()

    def _block(self, b: int) -> GraphBatch:
        from gramdist.datasets import _select_node_attributes

        batch = synthetic_block(self.synthetic, b)
        return _select_node_attributes(batch, self.node_attributes)

    def load(self, start: int, stop: int) -> GraphBatch:
        """Graphs ``start..stop-1`` as a batch, generating only the blocks that hold them."""
        stop = min(stop, self.n_graphs)
        if not 0 <= start < stop:
            raise IndexError(f"graphs {start}..{stop - 1} are outside 0..{self.n_graphs - 1}")
        bs = self.block_size
        parts = []
        for b in range(start // bs, (stop - 1) // bs + 1):
            lo, hi = max(start, b * bs) - b * bs, min(stop, (b + 1) * bs) - b * bs
            block = self._block(b)
            parts.append(block if (lo, hi) == (0, len(block)) else block[lo:hi])
        return parts[0] if len(parts) == 1 else GraphBatch.concat(parts, name=self.name)

    def __getitem__(self, key: slice) -> GraphChunk:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a lazy dataset is sliced by contiguous ranges only")
        start, stop, _ = key.indices(self.n_graphs)
        return GraphChunk(self, start, max(start, stop))

    def take(self, indices: np.ndarray) -> GraphBatch:
        """The graphs at ``indices`` (any order), generated one block at a time."""
        idx = np.asarray(indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.n_graphs):
            raise IndexError(f"graph index out of range 0..{self.n_graphs - 1}")
        blocks = idx // self.block_size
        parts, where = [], []
        for b in np.unique(blocks):
            sel = np.flatnonzero(blocks == b)
            parts.append(self._block(int(b)).take(idx[sel] - int(b) * self.block_size))
            where.append(sel)
        batch = GraphBatch.concat(parts, name=self.name)
        order = np.empty(len(idx), dtype=np.int64)
        order[np.concatenate(where)] = np.arange(len(idx))
        return batch.take(order)

    def __repr__(self) -> str:
        return f"LazySynthetic({self.n_graphs} graphs in blocks of {self.block_size})"


def open_dataset(spec: Any) -> GraphBatch | LazySynthetic:
    """A job's ``dataset:`` for a streaming path: lazy when it is a blocked synthetic spec.

    A ``synthetic`` mapping with ``block_size`` becomes a :class:`LazySynthetic` (nothing is
    generated here); anything else is :func:`~gramdist.datasets.load_dataset`'s batch.
    """
    from gramdist.datasets import load_dataset

    if isinstance(spec, Mapping) and spec.get("block_size") is not None and isinstance(spec.get("smiles"), str):
        return _lazy_molecules(spec)
    if isinstance(spec, Mapping) and isinstance(spec.get("synthetic"), Mapping) \
            and spec["synthetic"].get("block_size") is not None:
        unknown = [k for k in spec if k not in ("synthetic", "limit", "node_attributes")]
        if unknown:
            raise JobError(f"dataset: unknown key {unknown[0]!r} for a blocked synthetic dataset")
        params = SyntheticSpec.keys()
        for key in spec["synthetic"]:
            if key not in params:
                raise JobError(f"dataset.synthetic: unknown key {key!r} (allowed: {', '.join(params)})")
        limit = spec.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise JobError(f"dataset.limit: expected a positive integer, got {limit!r}")
        return LazySynthetic(spec["synthetic"], limit=limit, node_attributes=spec.get("node_attributes", "all"))
    return load_dataset(spec)


def _lazy_molecules(spec: Mapping[str, Any]) -> Any:
    """``{smiles: FILE, block_size: B, ...}`` as a :class:`~.molecule_blocks.LazyMolecules`."""
    from gramdist.datasets import _molecule_file, _molecule_options
    from gramdist.datasets.molecule_blocks import LazyMolecules

    unknown = [k for k in spec if k in ("skip", "node_attributes", "name", "path", "synthetic", "sdf")]
    if unknown:
        raise JobError(f"dataset.{unknown[0]}: not with a SMILES file read in blocks (dataset.block_size)")
    limit = spec.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise JobError(f"dataset.limit: expected a positive integer, got {limit!r}")
    path = _molecule_file(spec, "smiles")
    if path is None or not path.is_file():
        from gramdist.errors import DatasetError

        raise DatasetError(f"{path}: no such molecule file")
    return LazyMolecules(path, _molecule_options(spec, "smiles"), spec["block_size"], limit=limit)
