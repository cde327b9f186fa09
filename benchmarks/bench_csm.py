"""CSM (connected subgraph matching): gramdist end to end against GraKeL's SubgraphMatching.

    python benchmarks/bench_csm.py [--datasets NCI1 DD] [--variants labels] [--grakel-timeout 1800]

Variants (each tool in a fresh process; helpers and table from ``bench_graphlets.py``):

* ``labels``: subgraphs of at most 5 nodes, Dirac kernels on node labels (and edge labels where
  the dataset has them), weight 1 per size (``jobs/<ds>-csm.yaml``: explicit features) against
  ``SubgraphMatching(k=5, normalize=True)`` with its Dirac ``kv`` and ``ke`` (``ke=None`` without
  edge labels) — the same kernel, values equal to rounding (``tests/test_csm.py``).
* ``attributes`` (datasets with node attributes, e.g. ENZYMES): Dirac x Gaussian vertex kernel,
  gamma = 0.1, k = 5 (``jobs/enzymes-csm.yaml``), against ``SubgraphMatching`` with that
  ``kv``.

GraKeL builds the modular product graph of every pair in Python and enumerates its cliques in
C++: the DM paper reports its Java CSM at 8 h 24 min on ENZYMES and over 2 days on D&D; GraKeL
gets ``--grakel-timeout`` seconds (30 minutes by default) and a timeout is reported as such.
Results: ``benchmarks/results/csm.json`` and a Markdown table. Timings on a shared machine are
indicative only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import numpy as np  # noqa: E402
from bench_graphlets import (  # noqa: E402
    GRAKEL_PRELUDE,
    differences,
    open_store,
    print_rows,
    run_external,
    run_gramdist,
)
from common import save, this_command, tile_set  # noqa: E402

GRAKEL_CSM = GRAKEL_PRELUDE + r"""
from grakel.kernels import SubgraphMatching
variant, gamma = sys.argv[3], float(sys.argv[4])
edge = g.edge_labels is not None
if variant == "attributes":
    graphs = []
    for x in g:
        adj = {v: [] for v in range(x.n_nodes)}
        e = {}
        for u, v in x.edges.tolist():
            adj[u].append(v)
            e[(u, v)] = 0
            if u != v:
                adj[v].append(u)
                e[(v, u)] = 0
        nl = {v: (int(l), tuple(x.node_attrs[v])) for v, l in enumerate(x.node_labels)}
        graphs.append(Graph(adj, node_labels=nl, edge_labels=e, graph_format="dictionary"))
    def kv(a, b):
        if a[0] != b[0]:
            return 0.0
        d = np.asarray(a[1]) - np.asarray(b[1])
        return float(np.exp(-gamma * np.dot(d, d)))
    kernel = SubgraphMatching(k=5, kv=kv, ke=None, normalize=True)
else:
    # GraKeL's input check wants edge labels even with ke=None: all 0 when the dataset has none
    graphs = grakel_graphs(g, edge_labels=True)
    kernel = SubgraphMatching(k=5, normalize=True) if edge else SubgraphMatching(k=5, ke=None, normalize=True)
t = time.perf_counter()
K = kernel.fit_transform(graphs)
kernel_s = time.perf_counter() - t
np.save(out, K)
print(json.dumps({"kernel_s": kernel_s}))
"""


def bench(dataset: str, variant: str, workdir: Path, timeout: float) -> dict:
    gamma = 0.1
    sets = [f"dataset.name={dataset}", "kernel.k=5", "gram.normalize=true", *tile_set(dataset)]
    if variant == "attributes":
        sets += ["kernel.node_attributes=true", f"kernel.gamma={gamma}"]
    else:
        sets += ["kernel.node_attributes=false"]
    store = workdir / f"{dataset}-{variant}.zarr"
    row = {"dataset": dataset, "variant": variant, "sets": sets}
    row["gramdist"] = run_gramdist("jobs/mutag-csm.yaml", sets, store)
    if "error" in row["gramdist"]:
        raise SystemExit(row["gramdist"]["error"])
    npy = workdir / f"{dataset}-{variant}-grakel.npy"
    row["grakel"] = run_external(GRAKEL_CSM, [dataset, str(npy), variant, repr(gamma)], timeout)
    if npy.exists():
        row["grakel"].update(differences(open_store(store), np.load(npy)))
        row["grakel"]["note"] = "same kernel"
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--variants", nargs="+", default=["labels"], choices=["labels", "attributes"])
    ap.add_argument("--grakel-timeout", type=float, default=1800.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for ds in args.datasets:
            for v in args.variants:
                rows.append(bench(ds, v, Path(tmp), args.grakel_timeout))
                print(f"{ds} {v}: done", file=sys.stderr)
    save("csm", {"command": this_command(), "results": rows})
    print_rows(rows)


if __name__ == "__main__":
    main()
