"""Pyramid match on D&D: the per-step cost of ARPACK and the tiles' key search (issue 31; tried).

Two parts of a D&D pyramid-match run that are overhead rather than arithmetic, each timed
against today's code on the same data, one BLAS thread, interleaved (the seconds are only
comparable inside one run):

* **ARPACK** on the 438 graphs above ``spectral.DENSE_MAX`` nodes. ``lean``: the same ARPACK
  state (SciPy's private ``_SymmetricArpackParams``) driven by a bare reverse-communication
  loop that writes ``csr_matvec`` straight into ARPACK's work array, without ``eigsh``'s
  ``iterate`` and SciPy's product dispatch: the same calls, so the same bits (checked).
  ``spare 1`` and ``tol 1e-10``: one spare eigenpair instead of four, or a looser tolerance;
  they change the Krylov runs, so the script counts the snapped coordinates that move.
* **Key positions** (``SparseFeatures._key_positions``) of the five 256-graph embedding blocks
  that a run in tiles of 256 cuts: ``np.searchsorted`` into the sorted distinct keys against a
  vectorised bisection inside buckets of the key range (keys are 64-bit hashes, so buckets of
  one key on average) and against an open-addressing table (linear probing, load ≤ 1/2), both
  exact (checked).

    python benchmarks/bench_pyramid_overheads.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse import _sparsetools
from threadpoolctl import threadpool_limits

from gramdist.arrayops import run_starts
from gramdist.datasets import load_dataset
from gramdist.kernels.eigen import eigsh
from gramdist.kernels.pyramid.kernel import PyramidMatchKernel
from gramdist.kernels.pyramid.spectral import DENSE_MAX, SNAP, _select

D = 6


def _snapped(vals: np.ndarray, vecs: np.ndarray) -> np.ndarray:
    return np.round(np.clip(np.abs(vecs[:, _select(vals, D)]), 0.0, 1.0) / SNAP) * SNAP


def _today(a: sp.csr_matrix, spare: int = 4, tol: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    n = a.shape[0]
    return eigsh(a, k=min(n - 1, D + spare), which="LM", v0=np.linspace(1.0, 2.0, n), tol=tol, maxiter=100 * n)


def _lean(a: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """``_today(a)`` through a bare reverse-communication loop (mode 1, standard problem)."""
    from scipy.sparse.linalg._eigen.arpack.arpack import _SymmetricArpackParams

    n = a.shape[0]
    p = _SymmetricArpackParams(n, min(n - 1, D + 4), "d", a.dot, 1, None, None, None, None,  # a.dot: unused here
                               np.linspace(1.0, 2.0, n), 100 * n, "LM", 0.0)
    state, workd, ipntr = p.arpack_dict, p.workd, p.ipntr
    while True:
        p._arpack_solver(state, p.resid, p.v, ipntr, workd, p.workl)
        if state["ido"] not in (1, 5):
            break
        y = workd[ipntr[1]:ipntr[1] + n]
        y[:] = 0.0
        _sparsetools.csr_matvec(n, n, a.indptr, a.indices, a.data, workd[ipntr[0]:ipntr[0] + n], y)
    if state["ido"] != 99 or state["info"] != 0:
        raise RuntimeError(f"ARPACK stopped with ido {state['ido']}, info {state['info']}")
    p.converged = True
    return p.extract(True)


def _bucketed(u: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(u, x)`` for sorted distinct uint64 ``u``: bisection inside buckets of
    the key range, all needles at once."""
    n, lo_key, hi_key = len(u), u[0], u[-1]
    shift = max(int(hi_key - lo_key).bit_length() - n.bit_length(), 0)
    n_buckets = (int(hi_key - lo_key) >> shift) + 2
    starts = np.searchsorted(u, (np.arange(n_buckets, dtype=np.uint64) << np.uint64(shift)) + lo_key)
    b = ((np.clip(x, lo_key, hi_key) - lo_key) >> np.uint64(shift)).astype(np.int64)
    lo, hi = starts[b], starts[b + 1]
    for _ in range(int(np.diff(starts).max()).bit_length()):
        mid = (lo + hi) >> 1
        right = (u[np.minimum(mid, n - 1)] < x) & (mid < hi)
        lo, hi = np.where(right, mid + 1, lo), np.where(right, hi, mid)
    lo[x > hi_key] = n
    return lo


def _hashed(u: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Positions in sorted distinct uint64 ``u`` of ``x`` (all present): open addressing,
    linear probing, home slot the key's top bits (so sorted keys fill the table in order)."""
    n = len(u)
    bits = (2 * n).bit_length()
    shift = np.uint64(64 - bits)
    table = np.full((1 << bits) + n, -1, np.int64)
    rank = np.arange(n, dtype=np.int64)
    table[np.maximum.accumulate((u >> shift).astype(np.int64) - rank) + rank] = rank
    slot = (x >> shift).astype(np.int64)
    out = table[slot]
    todo = np.flatnonzero((out < 0) | (u[np.maximum(out, 0)] != x))
    while len(todo):
        slot[todo] += 1
        out[todo] = table[slot[todo]]
        todo = todo[(out[todo] < 0) | (u[np.maximum(out[todo], 0)] != x[todo])]
    return out


def _time(f: Callable, items: list) -> tuple[float, list]:
    t0 = time.perf_counter()
    out = [f(*item) for item in items]
    return time.perf_counter() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    g = load_dataset("DD")
    big = np.flatnonzero(g.nodes_per_graph > DENSE_MAX)
    mats = [(g[int(i)].adjacency(),) for i in big]
    kernel = PyramidMatchKernel()
    with threadpool_limits(1):
        blocks = [kernel.features(g[i:i + 256]) for i in range(0, len(g), 256)]
        searches = []
        for b in blocks:
            s = np.sort(b.keys)
            searches.append((s[run_starts(s)], b.keys))
        arpack = {"today": _today, "lean": _lean, "spare 1": lambda a: _today(a, spare=1),
                  "tol 1e-10": lambda a: _today(a, tol=1e-10)}
        positions = {"searchsorted": np.searchsorted, "bucketed": _bucketed, "hashed": _hashed}
        totals = dict.fromkeys([*arpack, *positions], 0.0)
        for r in range(args.rounds):
            ref = None
            for name, f in arpack.items():
                t, out = _time(f, mats)
                totals[name] += t
                emb = [_snapped(*o) for o in out]
                ref = emb if ref is None else ref
                moved = sum(int(np.count_nonzero(e != e0)) for e, e0 in zip(emb, ref))
                print(f"round {r}: ARPACK, {len(mats)} graphs, {name}: {t:.2f} s; snapped coordinates "
                      f"differing from today's: {moved} of {sum(e.size for e in ref)}", flush=True)
            for name, f in positions.items():
                t, out = _time(f, searches)
                totals[name] += t
                assert all(np.array_equal(o, np.searchsorted(*s)) for o, s in zip(out, searches)), name
                print(f"round {r}: key positions, {sum(len(s[1]) for s in searches)} keys, {name}: {t:.2f} s", flush=True)
    print("all rounds, against today: " + ", ".join(
        f"{name} {totals[name] / totals['today' if name in arpack else 'searchsorted']:.2f}" for name in totals))


if __name__ == "__main__":
    main()
