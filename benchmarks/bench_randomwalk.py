"""Random-walk kernels: gramdist end to end against GraKeL's RandomWalkLabeled / RandomWalk.

    python benchmarks/bench_randomwalk.py [--datasets NCI1 DD] [--variants pstep3 geometric]
                                          [--grakel-timeout 1800]

Variants (each tool in a fresh process; helpers and table from ``bench_graphlets.py``):

* ``pstep3``: p-step, p = 3, lam = 0.1, node labels (``jobs/<ds>-random_walk.yaml``: explicit
  walk-count features) against ``RandomWalkLabeled(lamda=0.1, p=3, kernel_type="geometric")``.
* ``geometric``: geometric, node labels, lam = 0.5 / d_max^2 of the dataset (the series on the
  implicit product graph) against ``RandomWalkLabeled(lamda=..., kernel_type="geometric")`` (its
  conjugate gradients, 20 iterations at most).
* ``unlabelled``: geometric without labels, lam as above (truncated walk-count series) against
  ``RandomWalk(lamda=...)``.

The labelled kernels differ by definition: GraKeL's product graph keeps every node pair, so
``K_grakel = K + n n' - |V_x|``; gramdist runs with ``gram.normalize=false``, the script adds
that term (from the label histograms) and normalises both before comparing. GraKeL gets
``--grakel-timeout`` seconds (30 minutes by default): on NCI1 and D&D its p-step mode forms
``n n' x n n'`` Kronecker products per pair, and a timeout is reported as such. Results:
``benchmarks/results/randomwalk.json`` and a Markdown table. Timings on a shared machine are
indicative only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_graphlets import (  # noqa: E402
    GRAKEL_PRELUDE,
    differences,
    normalised,
    open_store,
    print_rows,
    run_external,
    run_gramdist,
)
from common import save, this_command, tile_set  # noqa: E402

GRAKEL_RW = GRAKEL_PRELUDE + r"""
from grakel.kernels import RandomWalk, RandomWalkLabeled
variant, lam = sys.argv[3], float(sys.argv[4])
graphs = grakel_graphs(g)
t = time.perf_counter()
if variant == "pstep3":
    K = RandomWalkLabeled(lamda=lam, p=3, kernel_type="geometric").fit_transform(graphs)
elif variant == "geometric":
    K = RandomWalkLabeled(lamda=lam, kernel_type="geometric").fit_transform(graphs)
else:
    K = RandomWalk(lamda=lam, kernel_type="geometric").fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""


def geometric_lambda(dataset: str) -> float:
    from gramdist.datasets import load_dataset
    from gramdist.kernels.randomwalk.solvers import max_degrees

    d = int(max_degrees(load_dataset(dataset)).max())
    return 0.5 / d ** 2


def grakel_shift(dataset: str) -> np.ndarray:
    """``n n' - |V_x|`` for every pair: GraKeL's extra t = 0 terms of differently labelled pairs."""
    from gramdist.datasets import load_dataset

    g = load_dataset(dataset)
    n = g.nodes_per_graph.astype(np.float64)
    codes = np.unique(g.node_labels, return_inverse=True)[1]
    hist = np.zeros((len(g), codes.max() + 1))
    np.add.at(hist, (g.node_graph, codes), 1.0)
    return np.outer(n, n) - hist @ hist.T


def bench(dataset: str, variant: str, workdir: Path, timeout: float) -> dict:
    lam = 0.1 if variant == "pstep3" else geometric_lambda(dataset)
    sets = {"pstep3": ["kernel.kind=p_step", "kernel.p=3"],
            "geometric": ["kernel.kind=geometric"],
            "unlabelled": ["kernel.kind=geometric", "kernel.use_labels=false"]}[variant]
    sets = [f"dataset.name={dataset}", f"kernel.lam={lam!r}", "gram.normalize=false", *tile_set(dataset), *sets]
    store = workdir / f"{dataset}-{variant}.zarr"
    row = {"dataset": dataset, "variant": variant, "lam": lam, "sets": sets}
    row["gramdist"] = run_gramdist("jobs/mutag-random_walk.yaml", sets, store)
    if "error" in row["gramdist"]:
        raise SystemExit(row["gramdist"]["error"])
    raw = open_store(store)
    npy = workdir / f"{dataset}-{variant}-grakel.npy"
    row["grakel"] = run_external(GRAKEL_RW, [dataset, str(npy), variant, repr(lam)], timeout)
    if npy.exists():
        ours = raw + grakel_shift(dataset) if variant != "unlabelled" else raw
        row["grakel"].update(differences(normalised(ours), normalised(np.load(npy))))
        row["grakel"]["note"] = "normalised; labelled: ours + n n' - |V_x|"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--variants", nargs="+", default=["pstep3", "geometric"],
                    choices=["pstep3", "geometric", "unlabelled"])
    ap.add_argument("--grakel-timeout", type=float, default=1800.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            for v in args.variants:
                rows.append(bench(ds, v, Path(tmp), args.grakel_timeout))
                print(f"{ds} {v}: done", file=sys.stderr)
    save("randomwalk", {"command": this_command(),
                        "results": rows})
    print_rows(rows)


if __name__ == "__main__":
    main()
