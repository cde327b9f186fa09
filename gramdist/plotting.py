"""Pictures of Gram stores and of evaluations (matplotlib, the ``plot`` extra).

* :func:`plot_store` — one figure of three panels: the Gram as a heatmap with the graphs grouped
  by class (sorted by target for a continuous ``y``), its eigenvalue spectrum (a PSD check:
  the most negative eigenvalue is returned and drawn), and the raw diagonal K(g, g). A store of
  more than ``max_graphs`` graphs is drawn on a seeded random subset of that many graphs (a
  principal submatrix: a negative eigenvalue there proves the whole Gram is not PSD), said in
  the title.
* :func:`plot_evaluation` — for a nested CV over several stores (a grid): each store's outer
  score when used alone (its own C chosen in the inner CV) and how often the inner CV chose it.

matplotlib is imported only here and only when drawing; without it a
:class:`~gramdist.errors.MissingExtraError` says which extra to install.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.errors import MissingExtraError, StoreError

#: relative size of the most negative eigenvalue (to the largest) still taken as rounding
PSD_TOLERANCE = 1e-9
MAX_CLASS_TICKS = 20


def require_matplotlib() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or a one-line error."""
    try:
        import matplotlib
    except ImportError:
        raise MissingExtraError('plots need matplotlib: pip install "gramdist[plot]"') from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


# ------------------------------------------------------------------------------ a store
def _subset(n: int, max_graphs: int, seed: int) -> np.ndarray:
    if n <= max_graphs:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=max_graphs, replace=False))


def load_for_plot(store: str | os.PathLike, max_graphs: int = 4000, seed: int = 0) -> dict[str, Any]:
    """The parts of a store the figure shows, at most ``max_graphs`` per side.

    Returns a dict: ``gram`` (r, c), ``rows``/``cols`` (indices into the store's graphs),
    ``row_labels``/``col_labels`` (or None), ``row_diag``/``col_diag`` (raw K(g, g)), ``shape``
    (the store's), ``symmetric``, ``normalize``, ``kernel`` (name and parameters).
    """
    from gramdist.engine.store import GramStore, open_gram

    gstore = GramStore.open(store)
    if not gstore.complete:
        raise StoreError(f"{store}: incomplete store; rerun its job before plotting it")
    symmetric = gstore.symmetric
    y_rows, y_cols = gstore.labels(), gstore.col_labels()
    diag_rows, diag_cols = gstore.read_diag()
    k_full, _ = open_gram(store, as_dask=True)
    n_rows, n_cols = k_full.shape
    rows = _subset(n_rows, max_graphs, seed)
    cols = rows if symmetric else _subset(n_cols, max_graphs, seed + 1)
    if len(rows) == n_rows and len(cols) == n_cols:
        gram, _ = open_gram(store)  # whole: read with its tile checksums checked
    else:
        gram = k_full[rows][:, cols].compute()
    kernel = dict(gstore.kernel or {})
    return {"gram": np.asarray(gram, dtype=np.float64), "rows": rows, "cols": cols,
            "row_labels": None if y_rows is None else y_rows[rows], "col_labels": None if y_cols is None else y_cols[cols],
            "row_diag": diag_rows[rows], "col_diag": diag_cols[cols], "shape": (n_rows, n_cols),
            "symmetric": symmetric, "normalize": gstore.normalize, "kernel": kernel}


def display_order(y: np.ndarray | None, n: int) -> tuple[np.ndarray, bool]:
    """Order of the ``n`` graphs on the heatmap: grouped by class (a stable sort keeps the
    stored order within a class), sorted by a continuous target, or as stored; and whether
    ``y`` is continuous."""
    from gramdist.evaluation.regression import is_continuous

    if y is None:
        return np.arange(n), False
    return np.argsort(y, kind="stable"), is_continuous(y)


def spectrum(gram: np.ndarray) -> np.ndarray:
    """Eigenvalues of the symmetric part of ``gram``, largest first: one large LAPACK call,
    given BLAS threads on every core this process may use (the ``gramdist`` command starts
    OpenBLAS with one; see ``gramdist.cli``)."""
    from threadpoolctl import threadpool_limits

    from gramdist.machine import available_cpus

    with threadpool_limits(limits=available_cpus(), user_api="blas"):
        return np.linalg.eigvalsh((gram + gram.T) / 2)[::-1]


def psd_summary(eigenvalues: np.ndarray) -> dict[str, float | bool]:
    """Most negative eigenvalue, its size relative to the largest, and whether it is rounding."""
    lo, hi = float(eigenvalues.min()), float(eigenvalues.max())
    rel = lo / hi if hi > 0 else float("-inf") if lo < 0 else 0.0
    return {"min_eigenvalue": lo, "max_eigenvalue": hi, "relative": rel, "psd": lo >= -PSD_TOLERANCE * max(hi, 0.0)}


def _kernel_text(kernel: dict[str, Any]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in (kernel.get("params") or {}).items() if v is not None)
    return f"{kernel.get('name', '?')}({params})" if params else str(kernel.get("name", "?"))


def plot_store(store: str | os.PathLike, out: str | os.PathLike | None = None, *, max_graphs: int = 4000,
               seed: int = 0) -> dict[str, Any]:
    """Draw a store's Gram, spectrum and diagonal into ``out`` (default ``STORE.png`` beside it).

    Returns a JSON-ready summary: ``out``, ``graphs_shown``, ``shape``, and for a square store
    the PSD check of :func:`psd_summary` on the graphs shown.
    """
    plt = require_matplotlib()
    data = load_for_plot(store, max_graphs, seed)
    out = Path(out) if out else Path(str(store).rstrip("/\\")).with_suffix(".png")
    gram = data["gram"]
    row_order, continuous = display_order(data["row_labels"], len(data["rows"]))
    col_order = row_order if data["symmetric"] else display_order(data["col_labels"], len(data["cols"]))[0]
    fig = plt.figure(figsize=(17, 6.2), layout="constrained")
    grid = fig.add_gridspec(1, 3, width_ratios=[1.25, 1, 1])
    ax_k, ax_s, ax_d = (fig.add_subplot(grid[0, i]) for i in range(3))
    shown = len(data["rows"]) if data["symmetric"] else f"{len(data['rows'])} x {len(data['cols'])}"
    n_r, n_c = data["shape"]
    sample = "" if (len(data["rows"]), len(data["cols"])) == (n_r, n_c) else f", a random {shown} of them"
    fig.suptitle(f"{Path(str(store)).name}: {_kernel_text(data['kernel'])}, {n_r} x {n_c} graphs{sample}"
                 f"{', cosine-normalised' if data['normalize'] else ''}", fontsize=14)
    y_r = None if data["row_labels"] is None else data["row_labels"][row_order]
    y_c = None if data["col_labels"] is None else data["col_labels"][col_order]
    _draw_heatmap(fig, ax_k, gram[np.ix_(row_order, col_order)], (y_r, y_c), data["symmetric"], continuous)
    summary: dict[str, Any] = {"out": str(out), "graphs_shown": shown, "shape": [n_r, n_c]}
    summary |= _draw_spectrum(ax_s, gram, data["symmetric"])
    y_d = None if continuous else y_r
    _draw_diagonal(ax_d, data["row_diag"][row_order], None if data["symmetric"] else data["col_diag"][col_order], y_d)
    for ax in (ax_k, ax_s, ax_d):
        ax.tick_params(labelsize=10)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return summary


def _draw_heatmap(fig: Any, ax: Any, k: np.ndarray, labels: tuple[np.ndarray | None, np.ndarray | None],
                  symmetric: bool, continuous: bool) -> None:
    """The Gram ``k`` (rows and columns in display order), grouped by class or sorted by target."""
    from matplotlib import colors
    from matplotlib.ticker import MaxNLocator

    y_r, y_c = labels
    # colours span the 1st..99th percentile: a few extreme entries (the unit diagonal of a
    # normalised Gram) would otherwise flatten the contrast of everything else
    vmin, vmax = (float(v) for v in np.percentile(k, [1, 99]))
    if vmax <= vmin:
        vmin, vmax = float(np.min(k)), float(np.max(k)) + 1e-12
    im = ax.imshow(k, cmap="viridis", interpolation="antialiased", aspect="auto",
                   norm=colors.Normalize(vmin=vmin, vmax=vmax))
    fig.colorbar(im, ax=ax, shrink=0.85, extend="both", label="K(g, g')  (1st to 99th percentile)")
    title = "Gram matrix"
    if y_r is not None and not continuous:
        title += ", graphs grouped by class"
        _class_ticks(ax, y_r, axis="y")
        _class_ticks(ax, y_c if y_c is not None else y_r, axis="x")
    elif continuous:
        title += f", graphs sorted by target ({y_r.min():.3g} → {y_r.max():.3g})"
        ax.set_xlabel("graphs, by target" if symmetric else "training graphs, by target")
        ax.set_ylabel("graphs, by target" if symmetric else "test graphs, by target")
    else:
        ax.set_xlabel("graph" if symmetric else "training graph")
        ax.set_ylabel("graph" if symmetric else "test graph")
    if y_r is None or continuous:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title(title, fontsize=12)


def _draw_spectrum(ax: Any, gram: np.ndarray, symmetric: bool) -> dict[str, Any]:
    """Eigenvalues of a square Gram (returns :func:`psd_summary`'s check), else the singular
    values of K(test, train) (returns nothing)."""
    from matplotlib.ticker import MaxNLocator

    ax.grid(True, which="major", alpha=0.3)
    if not symmetric:
        sv = np.linalg.svd(gram, compute_uv=False)
        ax.semilogy(np.arange(1, len(sv) + 1), np.maximum(sv, np.finfo(float).tiny), ".", ms=3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("index (largest first)")
        ax.set_ylabel("singular value (log scale)")
        ax.set_title("Singular values of K(test, train)\n(eigenvalues need a square Gram)", fontsize=12)
        return {}
    ev = spectrum(gram)
    psd = psd_summary(ev)
    idx = np.arange(1, len(ev) + 1)
    pos = ev > 0
    ax.semilogy(idx[pos], ev[pos], ".", ms=3, color="tab:blue", label="λ > 0")
    if (~pos).any():
        ax.semilogy(idx[~pos], -ev[~pos], ".", ms=4, color="tab:red", label="|λ| of λ ≤ 0")
    ax.set_xlabel("eigenvalue index (largest first)")
    ax.set_ylabel("eigenvalue (log scale)")
    verdict = "PSD up to rounding" if psd["psd"] else "NOT PSD"
    ax.set_title(f"Eigenvalue spectrum: min λ = {psd['min_eigenvalue']:.3g} ({verdict})", fontsize=12)
    ax.legend(loc="upper right")
    return psd


def _draw_diagonal(ax: Any, d_r: np.ndarray, d_c: np.ndarray | None, y: np.ndarray | None) -> None:
    """Raw self-similarities in the heatmap's order: by class when ``y`` (class labels) is
    given, else rows (and the columns ``d_c`` of a rectangular store)."""
    if y is not None:
        for c in np.unique(y):
            sel = np.flatnonzero(y == c)
            ax.plot(sel, d_r[sel], ".", ms=3, label=f"class {c}")
        if len(np.unique(y)) <= MAX_CLASS_TICKS:
            ax.legend(loc="best", markerscale=3)
    else:
        ax.plot(np.arange(len(d_r)), d_r, ".", ms=3, color="tab:blue", label="rows" if d_c is not None else None)
        if d_c is not None:
            ax.plot(np.arange(len(d_c)), d_c, ".", ms=3, color="tab:orange", label="columns (training graphs)")
            ax.legend(loc="best", markerscale=3)
    ax.set_xlabel("graph, in the heatmap's order")
    ax.set_ylabel("K(g, g) before normalisation")
    ax.set_title("Diagonal: each graph's self-similarity", fontsize=12)
    ax.grid(True, alpha=0.3)


def _class_ticks(ax: Any, y: np.ndarray, axis: str) -> None:
    """Class names at the middle of each class block, and lines between the blocks."""
    classes, starts, counts = np.unique(y, return_index=True, return_counts=True)
    bounds = starts[1:] - 0.5
    line = ax.axhline if axis == "y" else ax.axvline
    for b in bounds:
        line(b, color="white", lw=1.2)
    if len(classes) > MAX_CLASS_TICKS:
        (ax.set_ylabel if axis == "y" else ax.set_xlabel)(f"graphs, by class ({len(classes)} classes)")
        return
    centres = starts + counts / 2 - 0.5
    # one line each under the heatmap only while they fit side by side (ENZYMES' six collided)
    two_lines = axis == "y" or len(classes) > 3
    names = [f"class {c}\n({n})" if two_lines else f"class {c} ({n})" for c, n in zip(classes, counts)]
    (ax.set_yticks if axis == "y" else ax.set_xticks)(centres, names)
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)("graphs, by class (count)")


# ----------------------------------------------------------------------- an evaluation
def plot_evaluation(result: dict[str, Any], out: str | os.PathLike) -> None:
    """Each store's score alone and how often the inner CV chose it, from
    :func:`~gramdist.evaluation.evaluate` run with ``per_store=True``."""
    plt = require_matplotlib()
    if "per_store" not in result:
        raise StoreError("plot_evaluation needs evaluate(..., per_store=True)")
    regression = result["task"] == "regression"
    key, label = ("rmse", "RMSE (lower is better)") if regression else ("accuracy", "accuracy (%)")
    scale = 1.0 if regression else 100.0
    names = [Path(s).name.removesuffix(".zarr") for s in result["stores"]]
    scores = np.array([[st[key] * scale for st in fold] for fold in result["per_store"]])  # (folds, stores)
    chosen = np.zeros(len(names), dtype=int)
    index = {os.fspath(s): i for i, s in enumerate(result["stores"])}
    for sel in result["selections"]:
        chosen[index[os.fspath(sel["store"])]] += 1
    mean = scores.mean(axis=0)
    per_repeat = scores.reshape(result["repeats"], result["folds"], -1).mean(axis=1)
    std = per_repeat.std(axis=0)

    n = len(names)
    fig, (ax_a, ax_c) = plt.subplots(2, 1, figsize=(max(7.0, 0.55 * n + 3), 8.5), sharex=True, layout="constrained")
    x = np.arange(n)
    ax_a.errorbar(x, mean, yerr=std, fmt="o", capsize=4, color="tab:blue", label="store alone (its own C)")
    head = result["rmse_mean"] if regression else result["accuracy_mean"]
    ax_a.axhline(head, color="tab:red", ls="--",
                 label=f"nested CV with the store selected: {head:.4g}" if regression else
                 f"nested CV with the store selected: {head:.2f} %")
    ax_a.set_ylabel(label, fontsize=12)
    ax_a.set_title(f"Outer-fold {'RMSE' if regression else 'accuracy'} per setting "
                   f"({result['repeats']} x {result['folds']}-fold, mean ± std over repeats)", fontsize=13)
    ax_a.legend(loc="best")
    ax_a.grid(True, alpha=0.3)
    ax_c.bar(x, chosen, color="tab:green")
    ax_c.set_ylabel("times chosen by the inner CV", fontsize=12)
    ax_c.set_title(f"Selections over the {len(result['selections'])} outer folds", fontsize=13)
    ax_c.set_xticks(x, names, rotation=45 if n > 4 else 0, ha="right" if n > 4 else "center", fontsize=10)
    ax_c.set_xlabel("setting (store)", fontsize=12)
    ax_c.grid(True, axis="y", alpha=0.3)
    fig.savefig(out, dpi=110)
    plt.close(fig)
