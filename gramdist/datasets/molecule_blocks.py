"""A SMILES file read block by block where the blocks are needed: ``dataset: {smiles: FILE, block_size: B}``.

For libraries too large for one process (MOSES's 1.58 M training SMILES): the client scans
the file once without RDKit — it counts the molecules, checks the header and the targets, and
remembers where every B-th molecule's row starts (its byte offset in the decompressed stream
and its line) — and nothing more. A block is read by seeking there and splitting B rows; only
then are its SMILES parsed and turned into graphs, on the worker that embeds them
(:class:`LazyMolecules` behaves as the engine's other lazy dataset, :class:`~.lazy.LazySynthetic`).

What differs from reading the whole file (``molecules_to_batch``), and why:

* targets must be numbers (a block cannot code class names that other blocks hold); whether
  they are integers (``y`` int64) or not (float64) is decided over the whole file by the scan;
* ``on_error: skip`` is refused: a skipped molecule would shift every later row out of its
  block, so an unparsable SMILES is one error naming its line, as without ``block_size``;
* the dataset checksum is the file's SHA-256 with the conversion options (the graphs are a pure
  function of them), not a digest of the graphs, which no process holds.

The graphs, their labels and ``graph_ids`` (the molecule's index in the file) are the same as
``molecules_to_batch``'s on the same file and options.
"""

from __future__ import annotations

import csv
import hashlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.datasets.molecules import open_binary
from gramdist.errors import DatasetError, JobError
from gramdist.graphs import GraphBatch, GraphChunk

__all__ = ["BlockIndex", "LazyMolecules", "scan_blocks"]


class _Lines:
    """The text lines of a binary stream from a known position, remembering where the next one
    starts (``offset`` in the decompressed bytes, ``line`` 1-based): ``csv.reader`` pulls
    exactly one record's lines per row, so the position before a row is where the row starts."""

    def __init__(self, raw: Any, offset: int, line: int, encoding: str) -> None:
        self.raw, self.offset, self.line, self.encoding = raw, offset, line, encoding

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        data = self.raw.readline()
        if not data:
            raise StopIteration
        self.offset += len(data)
        self.line += 1
        text = data.decode(self.encoding)
        self.encoding = "utf-8"  # a BOM only ever starts the file
        return text


@dataclass(frozen=True)
class BlockIndex:
    """What the scan of a SMILES file found: ``n`` molecules; for block b (molecules b·B ..)
    the ``offsets[b]``/``lines[b]`` where its first row starts; the CSV ``columns`` (None for
    .smi) and the ``smiles``/``target`` column positions; ``y_dtype`` (None without targets)."""

    path: str
    kind: str
    n: int
    block_size: int
    offsets: tuple[int, ...]
    lines: tuple[int, ...]
    smiles: int = 0
    target: int | None = None
    y_dtype: str | None = None


def scan_blocks(path: Path, smiles_column: str, target: str | None, block_size: int) -> BlockIndex:
    """Scan a .csv/.smi file (gzipped or not) once, without RDKit; see :class:`BlockIndex`."""
    kind = "smi" if path.name.lower().removesuffix(".gz").endswith(".smi") else "csv"
    if kind == "smi" and target is not None:
        raise DatasetError(f"{path}: a .smi file has no target column; use a CSV for targets")
    offsets, lines, n, cols, kinds = [], [], 0, (0, None), set()
    try:
        with open_binary(path) as raw:
            feed = _Lines(raw, 0, 1, "utf-8-sig")
            rows = _csv_rows(feed, path) if kind == "csv" else _smi_rows(feed)
            if kind == "csv":
                cols = _header_columns(next(rows, (0, 0, []))[2], path, smiles_column, target)
            for offset, line, row in rows:
                if n % block_size == 0:
                    offsets.append(offset)
                    lines.append(line)
                if cols[1] is not None:
                    kinds.add(_target_kind(row[cols[1]] if cols[1] < len(row) else "", path, feed.line - 1))
                n += 1
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text ({exc.reason}); save the file as UTF-8") from None
    except (OSError, EOFError, zlib.error) as exc:
        raise DatasetError(f"{path}: not a readable file ({type(exc).__name__}: {exc})") from None
    if n == 0:
        raise DatasetError(f"{path}: no molecules in the file")
    y_dtype = None if cols[1] is None else ("int64" if kinds == {"int"} else "float64")
    return BlockIndex(str(path), kind, n, block_size, tuple(offsets), tuple(lines), cols[0], cols[1], y_dtype)


def _csv_rows(feed: _Lines, path: Path) -> Iterator[tuple[int, int, list[str]]]:
    """(offset, line, fields) of each non-empty CSV row, the header first."""
    reader = csv.reader(feed)
    while True:
        offset, line = feed.offset, feed.line
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DatasetError(f"{path} line {feed.line - 1}: not a readable CSV row ({exc})") from None
        if row:  # csv.DictReader skips empty rows too
            yield offset, line, row


def _smi_rows(feed: _Lines) -> Iterator[tuple[int, int, list[str]]]:
    """(offset, line, [smiles]) of each molecule line of a .smi file (no blanks or comments)."""
    while True:
        offset, line = feed.offset, feed.line
        try:
            text = next(feed).strip()
        except StopIteration:
            return
        if text and not text.startswith("#"):
            yield offset, line, [text.split()[0]]


def _header_columns(header: list[str], path: Path, smiles_column: str, target: str | None) -> tuple[int, int | None]:
    for col, what in ((smiles_column, "smiles_column"), (target, "target")):
        if col is not None and col not in header:
            raise DatasetError(f"{path}: no column {col!r} ({what}); the header has: {', '.join(header)}")
    return header.index(smiles_column), None if target is None else header.index(target)


def _target_kind(value: str, path: Path, line: int) -> str:
    if not value.strip():
        raise DatasetError(f"{path} line {line}: no target value")
    try:
        x = float(value.strip())
    except ValueError:
        raise DatasetError(f"{path} line {line}: target {value!r} is not a number; a file read in blocks "
                           "(dataset.block_size) needs numeric targets (class names are coded over the whole "
                           "file)") from None
    if not np.isfinite(x):
        raise DatasetError(f"{path} line {line}: target {value!r} is not finite")
    return "int" if x == round(x) else "float"


def read_block_rows(index: BlockIndex, b: int, lo: int = 0, hi: int | None = None) -> list[tuple[int, list[str]]]:
    """Rows ``lo..hi-1`` of block ``b`` as (line, fields): a seek to the block's start, rows split
    up to ``hi`` only (those before ``lo`` are split to be counted, not kept)."""
    path = Path(index.path)
    size = min(index.block_size, index.n - b * index.block_size)
    hi = size if hi is None else min(hi, size)
    out = []
    with open_binary(path) as raw:
        raw.seek(index.offsets[b])  # gzip: decompresses up to it (the price of not keeping the file whole)
        feed = _Lines(raw, index.offsets[b], index.lines[b], "utf-8")
        rows = _csv_rows(feed, path) if index.kind == "csv" else _smi_rows(feed)
        for k, (_, _, row) in enumerate(rows):
            if k >= lo:
                out.append((feed.line - 1, row))
            if k + 1 == hi:
                break
    if len(out) != hi - lo:
        raise DatasetError(f"{path}: block {b} has fewer than {hi} molecules: the file changed since it was scanned")
    return out


class LazyMolecules:
    """A SMILES file as a lazy dataset: ``len``, ``name``, ``checksum()``, ``ds[a:b]`` (a
    :class:`~gramdist.graphs.GraphChunk`), ``take(indices)``, ``load(start, stop)``, ``y_dtype``.

    Parameters
    ----------
    path : the resolved file (.csv or .smi, gzipped or not).
    options : ``smiles_column``, ``target`` and the conversion options of ``molecules_to_batch``
        (``on_error`` must be ``"raise"``).
    block_size : molecules per block (what one seek reads).
    limit : keep only the first ``limit`` molecules.
    """

    def __init__(self, path: Path, options: dict[str, Any], block_size: int, limit: int | None = None) -> None:
        if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
            raise JobError(f"dataset.block_size: expected a positive integer, got {block_size!r}")
        if options.get("on_error", "raise") != "raise":
            raise JobError("dataset.on_error: skip is not possible with block_size (a skipped molecule would "
                           "shift every later row out of its block)")
        from gramdist.datasets.molecules import descriptor_target

        self.options = {k: v for k, v in options.items() if k not in ("smiles_column", "target", "on_error")}
        self.descriptor = descriptor_target(options.get("target"))
        column = None if self.descriptor else options.get("target")
        self.index = scan_blocks(path, options.get("smiles_column", "smiles"), column, block_size)
        self.n_graphs = self.index.n if limit is None else min(self.index.n, limit)
        self.name = path.name.split(".")[0]
        self._sha256: str | None = None

    def __len__(self) -> int:
        return self.n_graphs

    @property
    def y_dtype(self) -> np.dtype | None:
        if self.descriptor:
            return np.dtype(np.float64)
        return None if self.index.y_dtype is None else np.dtype(self.index.y_dtype)

    def checksum(self) -> str:
        """SHA-256 of the file's bytes, the conversion options and the molecule count."""
        if self._sha256 is None:
            digest = hashlib.sha256()
            with open(self.index.path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            digest.update(json.dumps([self.options, self.n_graphs] + ([self.descriptor] if self.descriptor else []),
                                     sort_keys=True).encode())
            self._sha256 = digest.hexdigest()
        return self._sha256

    def _records(self, start: int, stop: int) -> list[Any]:
        from gramdist.datasets.molecules import _Record

        bs, recs = self.index.block_size, []
        for b in range(start // bs, (stop - 1) // bs + 1):
            lo, hi = max(start, b * bs) - b * bs, min(stop, (b + 1) * bs) - b * bs
            for k, (line, row) in enumerate(read_block_rows(self.index, b, lo, hi), lo):
                i = b * bs + k
                smiles = (row[self.index.smiles] if self.index.smiles < len(row) else "").strip()
                target = None if self.index.target is None else row[self.index.target]
                recs.append(_Record(f"{Path(self.index.path).name} line {line} (molecule {i})", smiles, None, target))
        return recs

    def _batch(self, recs: list[Any], ids: np.ndarray) -> GraphBatch:
        from gramdist.datasets.molecules import records_to_batch

        batch = records_to_batch(recs, self.name, descriptor=self.descriptor, **self.options)
        batch.graph_ids = ids.astype(np.int64)
        if batch.y is not None:
            batch.y = batch.y.astype(self.y_dtype)
        return batch

    def load(self, start: int, stop: int) -> GraphBatch:
        """Molecules ``start..stop-1`` as a batch, reading only the blocks that hold them."""
        stop = min(stop, self.n_graphs)
        if not 0 <= start < stop:
            raise IndexError(f"molecules {start}..{stop - 1} are outside 0..{self.n_graphs - 1}")
        return self._batch(self._records(start, stop), np.arange(start, stop))

    def __getitem__(self, key: slice) -> Any:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("a lazy dataset is sliced by contiguous ranges only")
        start, stop, _ = key.indices(self.n_graphs)
        return GraphChunk(self, start, max(start, stop))

    def take(self, indices: np.ndarray) -> GraphBatch:
        """The molecules at ``indices`` (any order): their blocks split, only they parsed."""
        idx = np.asarray(indices, dtype=np.int64)
        if len(idx) and (idx.min() < 0 or idx.max() >= self.n_graphs):
            raise IndexError(f"molecule index out of range 0..{self.n_graphs - 1}")
        wanted = np.unique(idx)
        recs: list[Any] = []
        bs = self.index.block_size
        for b in np.unique(wanted // bs):
            here = wanted[wanted // bs == b]
            block = self._records(int(b) * bs, int(here[-1]) + 1)  # the block up to its last wanted row
            recs.extend(block[int(i) - int(b) * bs] for i in here)
        batch = self._batch(recs, wanted)
        return batch.take(np.searchsorted(wanted, idx))

    def __repr__(self) -> str:
        return f"LazyMolecules({self.index.path!r}: {self.n_graphs} molecules in blocks of {self.index.block_size})"
