"""Pyramid match's eigenvectors by Lanczos in lockstep, against today's path (issue 31; tried).

Today ``kernels.pyramid.spectral`` runs one dense ``eigh`` per graph up to 300 nodes and one
ARPACK ``eigsh`` per graph above. This script measures three Lanczos alternatives on D&D, one BLAS
thread, interleaved with today's path on the same graphs:

* ``plain``: Lanczos without reorthogonalisation for every graph above 100 nodes at once (one
  block-diagonal CSR product and segmented sums a step, as ``kernels.eigen.smallest_eigenvalues``
  does for one eigenvalue). Pass 1 records the tridiagonal matrices; each graph's step count is
  the first multiple of 10 at which its 6 selected distinct Ritz values have residual
  ``β |s_m| ≤ 1e-12 max(1, |θ|)`` (copies of a converged value, Paige's ghosts, count once); pass
  2 runs the same steps again and accumulates the Ritz vectors.
* ``reorth``: Lanczos with full reorthogonalisation (classical Gram–Schmidt twice), graphs of
  101–300 nodes padded with isolated nodes to multiples of 16 and run as stacked NumPy products,
  ``min(n, 60 + n / 4)`` steps (above the most any of these graphs needed), one check at the end.
* ``per-graph``: the same full reorthogonalisation one graph at a time, the Gram–Schmidt
  products as BLAS matrix–vector products on the contiguous (steps × n) block, the CSR product
  through SciPy's ``csr_matvec``; checked first at ``min(n, 50 + n / 8)`` steps, then every 10;
  on graphs of 101–300 and of 301–1,000 nodes. With ``--numba`` (numba from the ``bench`` extra;
  gramdist never imports it) also the same steps compiled (``numba.njit``, the CSR product as a loop, the
  products still BLAS), which takes away the Python cost of each step.

Each reports the embedding's difference from today's after the 2^-32 snap. The seconds are only
comparable inside one run.

    python benchmarks/bench_pyramid_lanczos.py [--rounds 2] [--numba]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.linalg as sla
from scipy.sparse import _sparsetools
from threadpoolctl import threadpool_limits

from gramdist.datasets import load_dataset
from gramdist.graphs import GraphBatch
from gramdist.kernels.pyramid.spectral import SNAP, _select, _spectral_embedding

D = 6
TOL = 1e-12


def _snap(x: np.ndarray) -> np.ndarray:
    return np.round(np.clip(np.abs(x), 0.0, 1.0) / SNAP) * SNAP


class _Plain:
    """Lanczos without reorthogonalisation on the block-diagonal matrix of graphs ``ids``."""

    def __init__(self, g: GraphBatch, ids: np.ndarray) -> None:
        self.sizes = g.nodes_per_graph[ids].astype(np.int64)
        self.a = g[ids].adjacency()  # block-diagonal, unit weights
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self.seg = np.repeat(np.arange(len(ids)), self.sizes)

    def run(self, steps: int, coeffs: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(steps, B) α and β; with ``coeffs`` (steps, B, D), also Y = Σ_j q_j coeffs[j] (N, D)."""
        seg, starts = self.seg, self.starts
        v = np.concatenate([np.linspace(1.0, 2.0, int(n)) for n in self.sizes])
        v /= np.sqrt(np.add.reduceat(v * v, starts))[seg]
        v_prev, beta_prev = np.zeros_like(v), np.zeros(len(starts))
        alphas, betas = np.zeros((steps, len(starts))), np.zeros((steps, len(starts)))
        y = None if coeffs is None else np.zeros((len(v), coeffs.shape[2]))
        for s in range(steps):
            if y is not None:
                y += v[:, None] * coeffs[s][seg]
            w = self.a @ v
            w -= beta_prev[seg] * v_prev
            alphas[s] = np.add.reduceat(w * v, starts)
            w -= alphas[s][seg] * v
            betas[s] = np.sqrt(np.add.reduceat(w * w, starts))
            v_prev, v = v, w / np.where(betas[s] > 0, betas[s], 1.0)[seg]
            beta_prev = betas[s]
        return alphas, betas, y

    def converged_at(self, alphas: np.ndarray, betas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each block's step count (0: not within ``len(alphas)``), Ritz coefficients and values."""
        steps, b_count = alphas.shape
        need, coeffs, thetas = np.zeros(b_count, int), np.zeros((steps, b_count, D)), np.zeros((b_count, D))
        for b in range(b_count):
            for m in range(30, steps + 1, 10):
                m = min(m, int(self.sizes[b]))
                th, s = sla.eigh_tridiagonal(alphas[:m, b], betas[:m - 1, b])
                res = np.abs(betas[m - 1, b] * s[-1])
                scale = max(1.0, float(np.abs(th).max()))
                keep = _distinct(th, res, scale)
                sel = keep[_select(th[keep], D)]
                if np.all(res[sel] <= TOL * scale):
                    need[b], coeffs[:m, b], thetas[b] = m, s[:, sel], th[sel]
                    break
                if m == self.sizes[b]:
                    break
        return need, coeffs, thetas


def _distinct(th: np.ndarray, res: np.ndarray, scale: float) -> np.ndarray:
    """Indices of ``th`` with one copy (the smallest residual) per cluster within 1e-9 scale."""
    keep: list[int] = []
    for i in np.argsort(th):
        if keep and th[i] - th[keep[-1]] <= 1e-9 * scale:
            if res[i] < res[keep[-1]]:
                keep[-1] = int(i)
        else:
            keep.append(int(i))
    return np.array(keep)


def reorth_embedding(g: GraphBatch, ids: np.ndarray, pad: int = 16) -> tuple[dict[int, np.ndarray], float]:
    """Full-reorthogonalisation Lanczos on graphs ``ids``: their |eigenvectors| and the worst
    relative Ritz residual."""
    n_nodes = g.nodes_per_graph
    padded = -(-n_nodes[ids] // pad) * pad
    out, worst = {}, 0.0
    for p in np.unique(padded).tolist():
        members = ids[padded == p]
        m = int(min(p, 60 + p // 4))
        a = np.zeros((len(members), p, p))
        q = np.zeros((len(members), m + 1, p))
        for k, i in enumerate(members):
            n = int(n_nodes[i])
            a[k, :n, :n] = g.graph(i).adjacency().toarray()
            v = np.linspace(1.0, 2.0, int(n_nodes[i]))
            q[k, 0, :len(v)] = v / np.linalg.norm(v)
        alphas, betas = np.zeros((len(members), m)), np.zeros((len(members), m))
        for j in range(m):
            w = (a @ q[:, j, :, None])[..., 0]
            for rep in range(2):
                h = q[:, :j + 1] @ w[..., None]
                w -= (q[:, :j + 1].transpose(0, 2, 1) @ h)[..., 0]
                if rep == 0:
                    alphas[:, j] = h[:, j, 0]
            betas[:, j] = np.linalg.norm(w, axis=1)
            q[:, j + 1] = w / np.where(betas[:, j] > 0, betas[:, j], 1.0)[:, None]
        for k, i in enumerate(members):
            mm = min(m, int(n_nodes[i]))
            th, s = sla.eigh_tridiagonal(alphas[k, :mm], betas[k, :mm - 1])
            sel = _select(th, D)
            worst = max(worst, float(np.abs(betas[k, mm - 1] * s[-1, sel]).max()) / max(1.0, float(np.abs(th).max())))
            out[int(i)] = np.abs(q[k, :mm].T @ s[:, sel])[:n_nodes[i]]
    return out, worst


def _steps_numpy(indptr: np.ndarray, indices: np.ndarray, q: np.ndarray, alphas: np.ndarray,
                 betas: np.ndarray, j0: int, j1: int) -> int:
    """Lanczos steps ``j0..j1-1`` with full reorthogonalisation; the rows of ``q`` are the
    Lanczos vectors. Returns the steps done (fewer where β = 0)."""
    n = q.shape[1]
    ones = np.ones(len(indices))
    for j in range(j0, j1):
        w = np.zeros(n)
        _sparsetools.csr_matvec(n, n, indptr, indices, ones, q[j], w)
        alpha = 0.0
        for _ in range(2):  # classical Gram-Schmidt, twice
            h = q[:j + 1] @ w
            w -= h @ q[:j + 1]
            alpha += h[j]
        alphas[j], betas[j] = alpha, np.sqrt(w @ w)
        if betas[j] == 0.0:
            return j + 1
        np.divide(w, betas[j], out=q[j + 1])
    return j1


def _steps_loop(indptr: np.ndarray, indices: np.ndarray, q: np.ndarray, alphas: np.ndarray,
                betas: np.ndarray, j0: int, j1: int) -> int:
    """:func:`_steps_numpy` in the form numba compiles: the CSR product as a loop."""
    n = q.shape[1]
    w = np.empty(n)
    for j in range(j0, j1):
        for r in range(n):
            s = 0.0
            for p in range(indptr[r], indptr[r + 1]):
                s += q[j, indices[p]]
            w[r] = s
        alpha = 0.0
        for _ in range(2):
            h = q[:j + 1] @ w
            w -= q[:j + 1].T @ h
            alpha += h[j]
        alphas[j], betas[j] = alpha, np.sqrt(w @ w)
        if betas[j] == 0.0:
            return j + 1
        for r in range(n):
            q[j + 1, r] = w[r] / betas[j]
    return j1


def per_graph_embedding(g: GraphBatch, ids: np.ndarray, steps) -> tuple[list[np.ndarray], np.ndarray]:
    """Full-reorthogonalisation Lanczos one graph at a time: |eigenvectors| and step counts."""
    out, used = [], []
    for i in ids.tolist():
        n = int(g.nodes_per_graph[i])
        a = g.graph(i).adjacency()  # unit weights, as today's path
        cap = min(n, 400)
        q, alphas, betas = np.zeros((cap + 1, n)), np.zeros(cap), np.zeros(cap)
        v = np.linspace(1.0, 2.0, n)
        q[0] = v / np.linalg.norm(v)
        m, target = 0, min(n, 50 + n // 8, cap)
        while True:
            done = steps(a.indptr, a.indices, q, alphas, betas, m, target)
            m = done
            th, s = sla.eigh_tridiagonal(alphas[:m], betas[:m - 1])
            sel = _select(th, D)
            scale = max(1.0, float(np.abs(th).max()))
            if done < target or m == cap or np.all(np.abs(betas[m - 1] * s[-1, sel]) <= TOL * scale):
                break
            target = min(m + 10, cap)
        out.append(np.abs(q[:m].T @ s[:, sel]))
        used.append(m)
    return out, np.array(used)


def _timed(f, *args):
    t0 = time.perf_counter()
    r = f(*args)
    return time.perf_counter() - t0, r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-steps", type=int, default=400)
    parser.add_argument("--numba", action="store_true", help="also the compiled per-graph steps")
    args = parser.parse_args()
    variants = {"per-graph": _steps_numpy}
    if args.numba:
        try:
            import numba
        except ImportError:
            raise SystemExit("--numba needs numba: pip install numba") from None
        variants["per-graph, numba"] = numba.njit(_steps_loop)
    g = load_dataset("DD")
    n_nodes = g.nodes_per_graph
    big = np.flatnonzero(n_nodes > 100)
    mid = np.flatnonzero((n_nodes > 100) & (n_nodes <= 300))
    with threadpool_limits(1):
        plain = _Plain(g, big)
        for r in range(args.rounds):
            t_today, ref = _timed(_spectral_embedding, g[big], D, 300)
            t_p1, (alphas, betas, _) = _timed(plain.run, args.max_steps)
            t_chk, (need, coeffs, thetas) = _timed(plain.converged_at, alphas, betas)
            t_p2, (_, _, y) = _timed(plain.run, int(need.max()), coeffs)
            print(f"round {r}: {len(big)} graphs > 100 nodes: today {t_today:.2f} s | plain pass 1 ({args.max_steps} steps, "
                  f"all blocks) {t_p1:.2f} s, checks {t_chk:.2f} s, pass 2 ({need.max()} steps) {t_p2:.2f} s")
            t_mid, ref_mid = _timed(_spectral_embedding, g[mid], D, 300)
            t_re, (vecs, worst) = _timed(reorth_embedding, g, mid)
            print(f"round {r}: {len(mid)} graphs of 101-300 nodes: today (dense eigh) {t_mid:.2f} s | reorth {t_re:.2f} s")
            for lo, hi in ((100, 300), (300, 1000)):
                ids = np.flatnonzero((n_nodes > lo) & (n_nodes <= hi))
                t_ref, ref_band = _timed(_spectral_embedding, g[ids], D, 300)
                line = f"round {r}: {len(ids)} graphs of {lo + 1}-{hi} nodes: today {t_ref:.2f} s"
                for name, steps in variants.items():
                    if r == 0 and name != "per-graph":
                        per_graph_embedding(g, ids[:1], steps)  # compile outside the timing
                    t_v, (vecs_v, used) = _timed(per_graph_embedding, g, ids, steps)
                    diff = np.abs(_snap(np.concatenate(vecs_v)) - ref_band)
                    line += (f" | {name} {t_v:.2f} s ({t_v / t_ref:.2f}; steps median {np.median(used):.0f},"
                             f" max {used.max()}; {int((diff > 0).sum())} of {diff.size} snapped coordinates differ)")
                print(line)
    done = need > 0
    print(f"plain: steps median {np.median(need[done]):.0f}, 90th pct {np.percentile(need[done], 90):.0f}, "
          f"max {need.max()}; not converged in {args.max_steps} steps: {int((~done).sum())} of {len(big)}")
    y /= np.sqrt(np.add.reduceat(y * y, plain.starts))[plain.seg]
    res = np.sqrt(np.add.reduceat((plain.a @ y - y * thetas[plain.seg]) ** 2, plain.starts)).max(axis=1)
    ok = done & (res <= 1e-10)
    rows = np.isin(plain.seg, np.flatnonzero(ok))
    diff = np.abs(_snap(y[rows]) - ref[rows])
    print(f"plain: converged graphs with ||Ay - θy|| ≤ 1e-10: {int(ok.sum())}; their snapped coordinates "
          f"that differ from today's: {int((diff > 0).sum())} of {diff.size} (max {diff.max():.3g})")
    emb = _snap(np.concatenate([vecs[int(i)] for i in mid]))
    diff = np.abs(emb - ref_mid)
    print(f"reorth: worst relative Ritz residual {worst:.2g}; snapped coordinates that differ from today's: "
          f"{int((diff > 0).sum())} of {diff.size} (max {diff.max():.3g})")


if __name__ == "__main__":
    main()
