"""Convex combinations of kernels: K = Σ_k w_k K̃_k over stores of the same graphs.

Each store's Gram is first cosine-normalised, K̃_k(a, b) = K_k(a, b) / sqrt(K_k(a, a) K_k(b, b)),
with the raw K(g, g) the store keeps (``diag``) and the engine's own normalisation
(:func:`gramdist.arrayops.normalize_block`), so a store made with ``gram.normalize: false``
enters the sum exactly as the same job with ``normalize: true`` would have stored it; a
normalised store enters as stored. Normalising first puts kernels of different scales on one
footing (each K̃ has a unit diagonal), so the weights say how much each kernel counts. A
convex combination of PSD kernels is PSD.

Two uses:

* :func:`evaluate_combined` (``gramdist evaluate --combine``): the inner CV of the nested CV
  selects the weights from a grid on the simplex (:func:`weight_grid`: every ``w`` with
  ``w_k = a_k / steps`` for integers ``a_k ≥ 0`` summing to ``steps``; the single kernels come
  first, so a tie goes to a single kernel) together with C, never looking at the test fold:
  each weight vector is a :class:`CombinedSource`, one candidate of the nested CV;
* :func:`combine_stores` (``gramdist combine``): write one weighted sum as a store of its own,
  tile by tile, checksummed, with its provenance (the stores, their kernels, the weights) in
  its attributes; it opens, verifies and evaluates like any store.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.arrayops import normalize_block
from gramdist.engine.store import (
    GramStore,
    Location,
    StoreLock,
    TileGrid,
    check_replaceable,
    open_gram,
    store_version,
)
from gramdist.errors import StoreError
from gramdist.evaluation.nested_cv import GramSource, RunOptions, check_compatible, evaluate, find_stores
from gramdist.evaluation.protocols import Protocol


def weight_grid(n_kernels: int, steps: int) -> list[tuple[float, ...]]:
    """The convex weights ``a / steps`` (``a`` non-negative integers summing to ``steps``):
    the ``n_kernels`` single kernels first, then the mixtures in lexicographic order of ``a``
    (largest first). ``weight_grid(3, 4)`` has 15 vectors."""
    if n_kernels < 1 or steps < 1:
        raise StoreError(f"a weight grid needs at least one kernel and one step (got {n_kernels}, {steps})")
    vectors = [a for a in itertools.product(range(steps, -1, -1), repeat=n_kernels) if sum(a) == steps]
    singles = [a for a in vectors if max(a) == steps]
    mixed = [a for a in vectors if max(a) < steps]
    return [tuple(x / steps for x in a) for a in singles + mixed]


def normalised_gram(path: str) -> np.ndarray:
    """The cosine-normalised Gram of a complete store (checked against its checksums), float64;
    loaded once per process for as long as the store is unchanged."""
    return _normalised_gram(path, store_version(Location(path)))


@lru_cache(maxsize=8)
def _normalised_gram(path: str, version: Any) -> np.ndarray:
    k, _ = open_gram(path)
    k = np.ascontiguousarray(k, dtype=np.float64)
    store = GramStore.open(path)
    if store.normalize:
        return k
    diag_rows, diag_cols = store.read_diag()
    return normalize_block(k, diag_rows, diag_cols, out=k)


@lru_cache(maxsize=16)
def _train_test_blocks(path: str, version: Any, train_key: bytes, test_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    train = np.frombuffer(train_key, dtype=np.int64)
    test = np.frombuffer(test_key, dtype=np.int64)
    k = _normalised_gram(path, version)
    return k[np.ix_(train, train)], k[np.ix_(test, train)]


def combined(parts: list[np.ndarray], weights: tuple[float, ...]) -> np.ndarray:
    """Σ w_k K_k in float64, skipping zero weights (a single kernel is itself, bit for bit)."""
    out = None
    for w, k in zip(weights, parts):
        if w == 0:
            continue
        out = w * k if out is None else out + w * k
    if out is None:
        raise StoreError("all weights are zero")
    return out


class CombinedSource(GramSource):
    """One candidate of the nested CV: the weighted sum of the stores' normalised Grams.

    The normalised Grams and their train/test blocks are cached per process, so the candidates
    of a weight grid share one extraction per store and fold.
    """

    def __init__(self, stores: tuple[str, ...], weights: tuple[float, ...]) -> None:
        if len(stores) != len(weights):
            raise StoreError(f"{len(weights)} weights for {len(stores)} stores")
        self.stores = tuple(str(s) for s in stores)
        self.weights = tuple(float(w) for w in weights)
        super().__init__(describe(self.stores, self.weights))

    def gram(self) -> np.ndarray:
        return combined([normalised_gram(s) for s, w in zip(self.stores, self.weights) if w], [
            w for w in self.weights if w])

    def digest(self) -> str:
        """The weights and the content digests of the stores they weigh."""
        return json.dumps([[w, GramStore.open(s).digest()] for s, w in zip(self.stores, self.weights)])

    def blocks(self, train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = (np.ascontiguousarray(train, dtype=np.int64).tobytes(), np.ascontiguousarray(test, dtype=np.int64).tobytes())
        parts = [_train_test_blocks(s, store_version(Location(s)), *keys)
                 for s, w in zip(self.stores, self.weights) if w]
        weights = [w for w in self.weights if w]
        return combined([p[0] for p in parts], weights), combined([p[1] for p in parts], weights)


def describe(stores: tuple[str, ...], weights: tuple[float, ...]) -> str:
    return " + ".join(f"{w:.4g}*{Path(s).name}" for s, w in zip(stores, weights) if w)


def evaluate_combined(stores: list[str], protocol: Protocol | None = None, options: RunOptions | None = None, *,
                      steps: int = 4) -> dict[str, Any]:
    """Nested CV selecting a convex combination of the stores (from :func:`weight_grid`) and C
    in the inner CV.

    Parameters
    ----------
    stores : list of str
        Complete square stores over the same graphs (or folders of them).
    protocol, options : Protocol, RunOptions, optional
        As :func:`~gramdist.evaluation.nested_cv.evaluate`'s.
    steps : int
        The weights are multiples of ``1 / steps``.

    Returns
    -------
    dict
        ``evaluate``'s, with ``weight_grid`` (the candidates), ``weights`` (per outer fold,
        the weights selected, in the order of ``stores``) and ``weights_chosen`` (each distinct
        weight vector with how many outer folds selected it, most often first).
    """
    stores = find_stores(stores)
    check_compatible(stores)
    grid = weight_grid(len(stores), steps)
    sources = [CombinedSource(tuple(stores), w) for w in grid]
    by_name = {s.name: s.weights for s in sources}
    result = evaluate(stores, protocol, options, candidates=sources)
    weights = [list(by_name[sel["store"]]) for sel in result["selections"]]
    for sel, w in zip(result["selections"], weights):
        sel["weights"] = w
    counts: dict[tuple[float, ...], int] = {}
    for w in weights:
        counts[tuple(w)] = counts.get(tuple(w), 0) + 1
    result.update({"weight_grid": [list(w) for w in grid], "weights": weights,
                   "weights_chosen": [{"weights": list(w), "folds": n}
                                      for w, n in sorted(counts.items(), key=lambda kv: -kv[1])]})
    return result


# ------------------------------------------------------------------------------------ a store
def combine_stores(stores: list[str], weights: list[float], out: str | os.PathLike, *, tile_size: int | None = None,
                   dtype: str = "float64", overwrite: bool = False, log: Any = None) -> dict[str, Any]:
    """Write Σ_k w_k K̃_k (normalised as in the module docstring) as a store at ``out``.

    The stores must hold the same graphs (content checksums, graph ids; for test × train
    stores both sides), be complete and verify clean. ``weights`` are non-negative and sum to
    1 (a convex combination). The new store is written tile by tile from this process, each
    tile checksummed and recorded in the done-mask; its attributes record the combination
    (``combination``: the stores' paths, kernels, dtypes and content checksums, and the
    weights) and take the dataset attributes of the first store. It holds no fitted state:
    it cannot be appended to (append to each store, then combine again).

    Returns a JSON-ready summary: ``store``, ``shape``, ``tiles``, ``weights``.
    """
    log = log or (lambda msg: None)
    if not stores:
        raise StoreError("no stores to combine")
    w = np.asarray(weights, dtype=np.float64)
    if len(w) != len(stores):
        raise StoreError(f"{len(w)} weights for {len(stores)} stores")
    if np.any(w < 0) or not np.isfinite(w).all() or abs(float(w.sum()) - 1.0) > 1e-9:
        raise StoreError(f"--weights must be non-negative and sum to 1 (a convex combination), got {list(weights)}")
    if Location(out) in {Location(s) for s in stores}:
        raise StoreError(f"{out}: the output is one of the stores being combined; choose another --out")
    sources = _check_sources(stores)
    first = sources[0]
    grid = TileGrid(first.grid.n_rows, first.grid.n_cols, int(tile_size or first.tile_size), first.symmetric)
    check_replaceable(Location(out), overwrite)
    with StoreLock(out, log=log):
        if Location(out).exists() and not overwrite:
            raise StoreError(f"{out}: already exists; choose another --out or pass --overwrite")
        t0 = time.perf_counter()
        target = GramStore.create_combination(out, sources, [float(x) for x in w], grid, dtype=dtype,
                                              overwrite=overwrite)
        diag_rows = _write_tiles(target, sources, w)
        target.write_diag(diag_rows if grid.symmetric else _combined_side_diag(sources, w, "rows"),
                          None if grid.symmetric else _combined_side_diag(sources, w, "cols"))
        complete = target.mark_complete()
        target.record_stats({"combine_s": time.perf_counter() - t0})
    log(f"gramdist: wrote {out}: {describe(tuple(stores), tuple(w))} ({len(grid.tiles())} tiles)")
    return {"store": str(out), "shape": [grid.n_rows, grid.n_cols], "tiles": len(grid.tiles()), "complete": complete,
            "weights": [float(x) for x in w], "stores": [str(s) for s in stores]}


def _check_sources(stores: list[str]) -> list[GramStore]:
    """The stores, once checked to hold the same graphs, complete and verifying clean."""
    sources = [GramStore.open(s) for s in stores]
    first = sources[0]
    for s, src in zip(stores, sources):
        if (src.grid.n_rows, src.grid.n_cols) != (first.grid.n_rows, first.grid.n_cols) \
                or src.symmetric != first.symmetric:
            raise StoreError(f"{s}: its Gram is {(src.grid.n_rows, src.grid.n_cols)}, {stores[0]}'s "
                             f"{(first.grid.n_rows, first.grid.n_cols)}: not the same graphs")
        for what, mine, theirs in (("dataset_checksum", src.dataset_checksum, first.dataset_checksum),
                                   ("test_checksum", src.test_checksum, first.test_checksum)):
            if mine != theirs:
                raise StoreError(f"{s}: holds different graphs than {stores[0]} ({what} differs)")
        if not np.array_equal(src.graph_ids(), first.graph_ids()):
            raise StoreError(f"{s}: its graph ids differ from {stores[0]}'s")
        report = src.verify()
        if report["problems"]:
            raise StoreError(f"{s}: {report['problems'][0]}")
        if not src.info()["complete"]:
            raise StoreError(f"{s}: incomplete store; finish it before combining")
    return sources


def _write_tiles(target: GramStore, sources: list[GramStore], w: np.ndarray) -> np.ndarray:
    """Every tile of the combination, written and recorded; the diagonal of a symmetric one."""
    from gramdist.arrayops import mirror_upper

    grid = target.grid
    diags = [src.read_diag() for src in sources]
    mask = np.zeros(grid.shape, dtype=bool)
    sums = np.zeros(grid.shape, dtype=np.uint64)
    diag_rows = np.zeros(grid.n_rows)
    for tl in grid.tiles():
        (r0, r1), (c0, c1) = grid.row_range(tl[0]), grid.col_range(tl[1])
        parts = []
        for src, (d_rows, d_cols), weight in zip(sources, diags, w):
            if weight == 0:
                continue
            block = src.read_block((r0, r1), (c0, c1)).astype(np.float64)
            if not src.normalize:
                block = normalize_block(block, d_rows[r0:r1], d_cols[c0:c1], out=block)
            parts.append(block)
        block = combined(parts, tuple(float(x) for x in w if x))
        if grid.symmetric and tl[0] == tl[1]:
            mirror_upper(block)
            diag_rows[r0:r1] = np.diag(block)
        sums[tl] = target.write_tile(tl, block)
        mask[tl] = True
    target.save_progress(mask, sums)
    return diag_rows


def _combined_side_diag(sources: list[GramStore], w: np.ndarray, side: str) -> np.ndarray:
    """K(g, g) of the combination for one side of a test × train store: Σ w_k K̃_k(g, g),
    where K̃(g, g) is 1 for K(g, g) > 0 and 0 otherwise (as the normalisation sets it)."""
    total = None
    for (d_rows, d_cols), weight in zip((src.read_diag() for src in sources), w):
        d = d_rows if side == "rows" else d_cols
        part = weight * (np.asarray(d) > 0).astype(np.float64)
        total = part if total is None else total + part
    return total


def parse_weights(text: str) -> list[float]:
    """``"0.5,0.25,0.25"`` → ``[0.5, 0.25, 0.25]``; fractions like ``1/3`` are allowed."""
    out = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "/" in part:
                a, b = part.split("/", 1)
                out.append(float(a) / float(b))
            else:
                out.append(float(part))
        except (ValueError, ZeroDivisionError):
            raise StoreError(f"--weights {text!r}: cannot read {part!r} as a number") from None
    return out
