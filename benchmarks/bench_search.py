"""Kernel similarity search vs RDKit's bulk Tanimoto on MOSES molecules (issue 34 item 4).

    python benchmarks/bench_search.py [--library 100000] [--queries 1000] [--top 10] [--workers 2]

Needs ``molsets`` (``pip install --no-deps molsets``: its files are read, ``moses`` is never
imported) and RDKit. The library is the first ``--library`` SMILES of MOSES ``train.csv.gz``,
the queries the first ``--queries`` of ``test.csv.gz`` (written to plain files first, so
neither tool pays for the 1.58 M-row gzip). One run, the same machine, one tool at a time:

* **gramdist**: ``gramdist features`` (WL h = 3, explicit, cosine-normalised) makes the library
  store (timed, not part of the search); then ``gramdist search STORE queries.smi --top K`` in a
  fresh process, end to end and its search phase (queries mapped + chunks scored, from
  ``--json``), on ``--workers`` local workers;
* **RDKit**: Morgan fingerprints (radius 2, 2,048 bits) of the library (timed apart, as the
  store) and of the queries, then ``DataStructs.BulkTanimotoSimilarity`` of each query against
  the library and its top K (``numpy.argpartition``), one process.

Reported: queries per second for each (search phase; gramdist also end to end), peak memory
of each process tree, and the mean overlap of the two tools' top-K sets (|A ∩ B| / K: the two
similarities are different measures, so this says how often they agree, not who is right).
Results in ``benchmarks/results/search-<library>-w<workers>.json``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, last_json_line, run_measured, save, top_k_overlap  # noqa: E402

RDKIT_SCRIPT = r"""
import json, sys, time
import numpy as np
from rdkit import Chem, DataStructs, RDLogger
from rdkit.Chem import rdFingerprintGenerator
RDLogger.DisableLog("rdApp.*")
lib_path, q_path, top, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
gen = rdFingerprintGenerator.GetMorganGenerator(radius=2, fpSize=2048)
def fps(path):
    return [gen.GetFingerprint(Chem.MolFromSmiles(line.split()[0])) for line in open(path) if line.strip()]
t = time.perf_counter(); lib = fps(lib_path); lib_s = time.perf_counter() - t
t = time.perf_counter()
queries = fps(q_path)
rows = np.empty((len(queries), top), dtype=np.int64)
for i, fp in enumerate(queries):
    sims = np.asarray(DataStructs.BulkTanimotoSimilarity(fp, lib))
    best = np.argpartition(-sims, top - 1)[:top]
    rows[i] = best[np.lexsort((best, -sims[best]))]
search_s = time.perf_counter() - t
np.save(out, rows)
print(json.dumps({"library_s": lib_s, "search_s": search_s}))
"""


def moses_file(name: str) -> Path:
    spec = importlib.util.find_spec("moses")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("molsets is not installed: pip install --no-deps molsets")
    return Path(list(spec.submodule_search_locations)[0]) / "dataset" / "data" / name


def head_smiles(name: str, n: int, out: Path) -> Path:
    """The first ``n`` SMILES of a MOSES file as a .smi file."""
    with gzip.open(moses_file(name), "rt", newline="") as f, open(out, "w") as w:
        for i, row in enumerate(csv.DictReader(f)):
            if i == n:
                break
            w.write(f"{row['SMILES']} m{i}\n")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--library", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--store", help="a finished feature store of MOSES's first --library training molecules to "
                                    "search (e.g. of jobs/moses-wl-features.yaml) instead of making one")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lib = head_smiles("train.csv.gz", args.library, tmp / "library.smi")
        queries = head_smiles("test.csv.gz", args.queries, tmp / "queries.smi")
        job = tmp / "library.yaml"
        job.write_text(json.dumps({"dataset": {"smiles": str(lib)}, "kernel": {"name": "wl", "h": 3},
                                   "gram": {"normalize": True}, "fit": {"seed": 0}}))
        store = Path(args.store) if args.store else tmp / "library.zarr"
        made = {"wall_s": None, "peak_total_mb": None}
        if not args.store:
            made = run_measured(gramdist_cmd("features", str(job), "--out", str(store), "--quiet", "--json",
                                             "--set", f"cluster.n_workers={args.workers}"))
            if made["returncode"]:
                raise SystemExit(made["stderr"])
        hits = tmp / "hits.csv"
        ours = run_measured(gramdist_cmd("search", str(store), str(queries), "--top", str(args.top), "--out",
                                         str(hits), "--json", "--quiet", "--workers", str(args.workers)))
        if ours["returncode"]:
            raise SystemExit(ours["stderr"])
        phase = last_json_line(ours["stdout"])["timings"]
        with open(hits, newline="") as f:
            ranked = [int(r["row"]) for r in csv.DictReader(f)]
        our_rows = np.array(ranked).reshape(args.queries, args.top)
        theirs = run_measured([sys.executable, "-c", RDKIT_SCRIPT, str(lib), str(queries), str(args.top),
                               str(tmp / "rdkit.npy")])
        if theirs["returncode"]:
            raise SystemExit(theirs["stderr"])
        rd = last_json_line(theirs["stdout"])
        rd_rows = np.load(tmp / "rdkit.npy")
    search_s = phase.get("library_s", 0.0) + phase["map_s"] + phase["chunks_s"]  # store opened, queries mapped, scored
    result = {
        "library": args.library, "queries": args.queries, "top": args.top, "workers": args.workers,
        "gramdist": {"features_store_s": made["wall_s"], "features_peak_total_mb": made["peak_total_mb"],
                     "search_end_to_end_s": ours["wall_s"], "search_phase_s": search_s, "phases": phase,
                     "queries_per_s_phase": args.queries / search_s,
                     "queries_per_s_end_to_end": args.queries / ours["wall_s"],
                     "peak_total_mb": ours["peak_total_mb"], "peak_process_mb": ours["peak_process_mb"]},
        "rdkit": {"library_fingerprints_s": rd["library_s"], "search_s": rd["search_s"],
                  "queries_per_s": args.queries / rd["search_s"], "end_to_end_s": theirs["wall_s"],
                  "peak_total_mb": theirs["peak_total_mb"]},
        "top_k_overlap": top_k_overlap(our_rows, rd_rows),
    }
    result["ratio_phase"] = result["gramdist"]["queries_per_s_phase"] / result["rdkit"]["queries_per_s"]
    print(json.dumps(result, indent=2))
    save(f"search-{args.library}-w{args.workers}", result)


if __name__ == "__main__":
    main()
