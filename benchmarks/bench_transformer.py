"""GramTransformer (the Python front end) against GraKeL's WeisfeilerLehman, in one run.

    python benchmarks/bench_transformer.py [--small MUTAG PTC_MR] [--large NCI1] [--h 5]
                                           [--repeats 5] [--new 100]

Both tools get the same graphs with the same integer node labels (``common.grakel_labelled_graphs``)
and compute the cosine-normalised WL subtree Gram (GraKeL's ``n_iter`` = gramdist's ``h``);
the script checks that the Grams agree. Every measurement runs in a fresh Python process,
whose peak memory (all processes) :func:`common.run_measured` samples.

* **Small data, in process** (``--small``): ``GramTransformer(WLSubtreeKernel(h), normalize=True)
  .fit_transform(X)`` against ``WeisfeilerLehman(n_iter=h, normalize=True).fit_transform(graphs)``
  on the whole dataset; and ``transform`` of ``--new`` graphs after ``fit`` on the others
  (the last ``--new`` graphs of the dataset are the new ones) against GraKeL's ``fit`` /
  ``transform``. Inside each process the call is repeated ``--repeats`` times: the first call
  (which pays lazy imports and first-touch costs) and the median of the rest are reported.
  Data loading and conversion are outside the timed calls for both.
* **Large data, end to end from a cold process** (``--large``): the wall time of
  ``python -c "load; GramTransformer(...).fit_transform(X)"`` (interpreter start, imports,
  reading the TU files, the Gram; ``in_process="auto"`` chooses in-process for NCI1's 4110
  graphs) against ``python -c "load; convert; WeisfeilerLehman(...).fit_transform(graphs)"``
  (the same reader, then GraKeL). Then, in one more process, two ``fit_transform`` calls with
  ``in_process=False``: the first starts the shared LocalCluster, the second reuses it and
  pays no start-up.

Results go to ``benchmarks/results/transformer.json``; Markdown tables are printed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import grakel_labelled_graphs, last_json_line, run_measured, save, this_command  # noqa: E402


# ------------------------------------------------------------------ child processes
def _timed(fn, repeats: int) -> tuple[float, float, object]:
    """(first call's seconds, median of the other calls, the first call's result)."""
    t = time.perf_counter()
    result = fn()
    first = time.perf_counter() - t
    rest = []
    for _ in range(max(0, repeats - 1)):
        t = time.perf_counter()
        fn()
        rest.append(time.perf_counter() - t)
    return first, (statistics.median(rest) if rest else first), result


def child_small(tool: str, name: str, h: int, n_new: int, repeats: int, out: str) -> None:
    from gramdist.datasets import load_dataset

    batch = load_dataset(name)
    train, new = batch[: len(batch) - n_new], batch[len(batch) - n_new:]
    if tool == "gramdist":
        from gramdist import GramTransformer
        from gramdist.kernels import WLSubtreeKernel

        def full():
            return GramTransformer(WLSubtreeKernel(h=h), normalize=True).fit_transform(batch)

        fitted = GramTransformer(WLSubtreeKernel(h=h), normalize=True).fit(train)
        fit_first, fit_median, _ = _timed(lambda: GramTransformer(WLSubtreeKernel(h=h), normalize=True).fit(train),
                                          repeats)
    else:
        from grakel.kernels import WeisfeilerLehman

        graphs = grakel_labelled_graphs(batch)
        g_train, g_new = graphs[: len(graphs) - n_new], graphs[len(graphs) - n_new:]

        def full():
            return WeisfeilerLehman(n_iter=h, normalize=True).fit_transform(graphs)

        fitted = WeisfeilerLehman(n_iter=h, normalize=True).fit(g_train)
        fit_first, fit_median, _ = _timed(lambda: WeisfeilerLehman(n_iter=h, normalize=True).fit(g_train), repeats)
        new = g_new
    ft_first, ft_median, K = _timed(full, repeats)
    tr_first, tr_median, T = _timed(lambda: fitted.transform(new), repeats)
    np.savez(out, fit_transform=K, transform=T)
    print(json.dumps({"fit_transform_first_s": ft_first, "fit_transform_s": ft_median,
                      "fit_first_s": fit_first, "fit_s": fit_median,
                      "transform_first_s": tr_first, "transform_s": tr_median}))


def child_large(tool: str, name: str, h: int, out: str) -> None:
    from gramdist.datasets import load_dataset

    batch = load_dataset(name)
    if tool == "gramdist":
        from gramdist import GramTransformer
        from gramdist.kernels import WLSubtreeKernel

        K = GramTransformer(WLSubtreeKernel(h=h), normalize=True).fit_transform(batch)
    else:
        from grakel.kernels import WeisfeilerLehman

        K = WeisfeilerLehman(n_iter=h, normalize=True).fit_transform(grakel_labelled_graphs(batch))
    np.save(out, K)


def child_second_call(name: str, h: int) -> None:
    from gramdist import GramTransformer
    from gramdist.datasets import load_dataset
    from gramdist.engine.cluster import shared_client
    from gramdist.kernels import WLSubtreeKernel

    batch = load_dataset(name)
    times = []
    for _ in range(2):
        t = time.perf_counter()
        GramTransformer(WLSubtreeKernel(h=h), normalize=True, in_process=False).fit_transform(batch)
        times.append(time.perf_counter() - t)
    workers = len(shared_client().nthreads())
    print(json.dumps({"first_call_s": times[0], "second_call_s": times[1], "workers": workers}))


# ------------------------------------------------------------------ the parent
def me(*args: object) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", *map(str, args)]


def checked(result: dict) -> dict:
    if result["returncode"]:
        raise SystemExit(result["stderr"][-4000:])
    return result


def small_row(name: str, h: int, n_new: int, repeats: int, tmp: Path) -> dict:
    row: dict = {"dataset": name, "h": h, "new_graphs": n_new}
    grams = {}
    for tool in ("gramdist", "grakel"):
        out = tmp / f"{name}-{tool}-small.npz"
        res = checked(run_measured(me("small", tool, name, h, n_new, repeats, out)))
        row[tool] = last_json_line(res["stdout"]) | {"peak_total_mb": res["peak_total_mb"]}
        grams[tool] = np.load(out)
    for key in ("fit_transform", "transform"):
        row[f"{key}_speedup"] = row["grakel"][f"{key}_s"] / row["gramdist"][f"{key}_s"]
        row[f"{key}_max_abs_difference"] = float(np.max(np.abs(grams["gramdist"][key] - grams["grakel"][key])))
    return row


def large_row(name: str, h: int, tmp: Path) -> dict:
    row: dict = {"dataset": name, "h": h}
    grams = {}
    for tool in ("gramdist", "grakel"):
        out = tmp / f"{name}-{tool}-large.npy"
        res = checked(run_measured(me("large", tool, name, h, out)))
        row[tool] = {"end_to_end_s": res["wall_s"], "peak_total_mb": res["peak_total_mb"],
                     "peak_process_mb": res["peak_process_mb"]}
        grams[tool] = np.load(out)
    row["end_to_end_speedup"] = row["grakel"]["end_to_end_s"] / row["gramdist"]["end_to_end_s"]
    row["max_abs_difference"] = float(np.max(np.abs(grams["gramdist"] - grams["grakel"])))
    res = checked(run_measured(me("second", name, h)))
    row["shared_cluster"] = last_json_line(res["stdout"])
    return row


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, *rest = sys.argv[2:]
        if kind == "small":
            tool, name, h, n_new, repeats, out = rest
            child_small(tool, name, int(h), int(n_new), int(repeats), out)
        elif kind == "large":
            tool, name, h, out = rest
            child_large(tool, name, int(h), out)
        else:
            child_second_call(rest[0], int(rest[1]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", nargs="*", default=["MUTAG", "PTC_MR"])
    ap.add_argument("--large", nargs="*", default=["NCI1"])
    ap.add_argument("--h", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5, help="calls per process for the small data")
    ap.add_argument("--new", type=int, default=100, help="graphs transformed after fit on the others")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        small = [small_row(n, args.h, args.new, args.repeats, Path(tmp)) for n in args.small]
        large = [large_row(n, args.h, Path(tmp)) for n in args.large]
    save("transformer", {"command": this_command(),
                         "small": small, "large": large})
    print("| dataset | call | gramdist (s), first / median | GraKeL (s), first / median | speed-up (medians) | "
          "max abs difference |")
    print("|---|---|---:|---:|---:|---:|")
    for r in small:
        for key, label in (("fit_transform", "fit_transform, all graphs"),
                           ("transform", f"transform of {r['new_graphs']} new graphs")):
            g, k = r["gramdist"], r["grakel"]
            print(f"| {r['dataset']} | {label} | {g[key + '_first_s']:.4f} / {g[key + '_s']:.4f} | "
                  f"{k[key + '_first_s']:.4f} / {k[key + '_s']:.4f} | {r[key + '_speedup']:.1f}x | "
                  f"{r[key + '_max_abs_difference']:.1e} |")
    print()
    print("| dataset | tool | end to end, cold process (s) | peak memory, all processes (MB) |")
    print("|---|---|---:|---:|")
    for r in large:
        for tool in ("gramdist", "grakel"):
            print(f"| {r['dataset']} | {tool} | {r[tool]['end_to_end_s']:.2f} | {r[tool]['peak_total_mb']:.0f} |")
        sc = r["shared_cluster"]
        print(f"\n{r['dataset']}: end-to-end speed-up {r['end_to_end_speedup']:.1f}x (max abs difference "
              f"{r['max_abs_difference']:.1e}); on the shared LocalCluster ({sc['workers']} workers) the first "
              f"call took {sc['first_call_s']:.2f} s (start-up included), the second {sc['second_call_s']:.2f} s")


if __name__ == "__main__":
    main()
