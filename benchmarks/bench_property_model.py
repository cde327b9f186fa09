"""A property model at library size (issue 34, item 3): RDKit's logP of MOSES's molecules learned
from WL features in feature stores, against ridge on RDKit Morgan count fingerprints — same
molecules, same split, same streamed learner — in one run.

    pip install --no-deps molsets
    nice -n 10 python benchmarks/bench_property_model.py [--limit N] [--test-limit N] [--workers 2]
        [--epochs 5] [--hash-bits 20] [--name property_model]

gramdist: ``jobs/moses-logp.yaml`` (WL h = 3 features, not normalised, target ``{descriptor:
MolLogP}`` computed on the workers) made into three feature stores with ``gramdist features``:
the training set (``--limit``: its first N molecules; default all 1,584,663), the random test
set and the scaffold test set (``--test-limit``; default all 176,074 and 176,226); then
``gramdist evaluate TRAIN --test RANDOM SCAFFOLD --json``: ridge by streamed SGD, alpha chosen
on 10 % of the training molecules, refitted on all, scored once on each test set.

Baseline, in this process (its fingerprints on ``--workers`` processes): the same molecules
parsed by RDKit, their Morgan fingerprint counts (radius 2, unfolded, ``rdFingerprintGenerator``;
ids spread over 64 bits by an odd multiplier and hashed into the same 2^bits signed columns as
the stores' WL ids), the same logP, and
:func:`gramdist.evaluation.feature_holdout.fit_and_score` — the learner, grid, split, epochs and
seed of the gramdist side. The targets of both sides are checked equal bit for bit (the same
molecules in the same order). Reported: RMSE, MAE, R² per test set, the chosen alpha, wall time
and peak memory of each step. Results: ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import importlib.util
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, gramdist_cmd, last_json_line, run_measured, save  # noqa: E402

from gramdist.engine.store import FeatureStore  # noqa: E402
from gramdist.evaluation.feature_holdout import HoldoutSettings, Rows, fit_and_score  # noqa: E402
from gramdist.evaluation.linear import InMemoryChunks  # noqa: E402

JOB = ROOT / "jobs" / "moses-logp.yaml"
SETS = {"train": "dataset/data/train.csv.gz", "random": "dataset/data/test.csv.gz",
        "scaffold": "dataset/data/test_scaffolds.csv.gz"}
SPREAD = np.uint64(0x9E3779B97F4A7C15)  # odd: a bijection of 64-bit ids, top bit well mixed


def moses_file(rel: str) -> Path:
    spec = importlib.util.find_spec("moses")
    if spec is None:
        raise SystemExit("needs MOSES's files: pip install --no-deps molsets")
    return Path(list(spec.submodule_search_locations)[0]) / rel


def make_store(folder: Path, which: str, limit: int | None, workers: int, sets: list[str]) -> dict:
    out = folder / f"{which}.zarr"
    args = ["features", str(JOB), "--out", str(out), "--json", "--quiet", "--set", f"dataset.smiles={SETS[which]}",
            "--set", f"cluster.n_workers={workers}"]
    for item in sets:
        args += ["--set", item]
    if limit:
        args += ["--set", f"dataset.limit={limit}"]
        if limit <= 2000:  # the job fits on 2,000 molecules: a smaller slice fits on half of it
            args += ["--set", f"fit.sample_size={limit // 2}"]
    res = run_measured(gramdist_cmd(*args))
    if res["returncode"] != 0:
        raise SystemExit(f"features {which} failed:\n{res['stderr'][-3000:]}")
    print(f"store {which}: {res['wall_s']:.1f} s", flush=True)
    return {"path": str(out), "wall_s": round(res["wall_s"], 1), "peak_total_mb": round(res["peak_total_mb"]),
            "peak_process_mb": round(res["peak_process_mb"]), "summary": last_json_line(res["stdout"])}


def _morgan_block(args: tuple[list[str], int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(columns, signed counts, row lengths, logP) of a block of SMILES (in a worker process)."""
    from rdkit import Chem, rdBase
    from rdkit.Chem import Descriptors, rdFingerprintGenerator

    smiles, bits = args
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=2)
    mask = np.uint64((1 << bits) - 1)
    cols, vals, lengths, y = [], [], [], []
    with rdBase.BlockLogs():
        for text in smiles:
            mol = Chem.MolFromSmiles(text)
            y.append(float(Descriptors.MolLogP(mol)))
            counts = gen.GetSparseCountFingerprint(mol).GetNonzeroElements()
            keys = np.fromiter(counts.keys(), dtype=np.uint64, count=len(counts)) * SPREAD
            values = np.fromiter(counts.values(), dtype=np.float64, count=len(counts))
            cols.append((keys & mask).astype(np.int32))
            vals.append(np.where((keys >> np.uint64(63)).astype(bool), -values, values))
            lengths.append(len(counts))
    return np.concatenate(cols), np.concatenate(vals), np.asarray(lengths, dtype=np.int64), np.asarray(y)


def morgan_rows(which: str, limit: int | None, bits: int, workers: int) -> tuple[object, np.ndarray, float]:
    """Hashed Morgan count rows (CSR) and RDKit logP of the set's first ``limit`` molecules,
    blocks of 20,000 SMILES fingerprinted by ``workers`` processes, kept in file order."""
    import multiprocessing

    import scipy.sparse as sp

    t0 = time.perf_counter()
    with gzip.open(moses_file(SETS[which]), "rt", newline="") as f:
        reader = csv.reader(f)
        column = next(reader).index("SMILES")
        smiles = [row[column] for i, row in enumerate(reader) if not limit or i < limit]
    blocks = [(smiles[i:i + 20000], bits) for i in range(0, len(smiles), 20000)]
    with multiprocessing.get_context("spawn").Pool(max(1, workers)) as pool:
        parts = pool.map(_morgan_block, blocks)
    lengths = np.concatenate([p[2] for p in parts])
    indptr = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    x = sp.csr_matrix((np.concatenate([p[1] for p in parts]), np.concatenate([p[0] for p in parts]), indptr),
                      shape=(len(lengths), 1 << bits))
    return x, np.concatenate([p[3] for p in parts]), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--test-limit", type=int, default=None)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--hash-bits", type=int, default=20)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--name", default="property_model")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                    help="a change to the job (a variant tried beside the shipped job), e.g. dataset.hydrogens=count")
    ap.add_argument("--no-baseline", action="store_true", help="skip the Morgan baseline (a variant's run)")
    args = ap.parse_args()
    folder = Path(args.workdir or tempfile.mkdtemp(prefix="bench-logp-"))
    limits = {"train": args.limit, "random": args.test_limit, "scaffold": args.test_limit}
    results: dict = {"command": " ".join(sys.argv), "epochs": args.epochs, "hash_bits": args.hash_bits,
                     "job_changes": args.sets, "stores": {}, "gramdist": None, "morgan": None}
    for which in SETS:
        results["stores"][which] = make_store(folder, which, limits[which], args.workers, args.sets)
    paths = [results["stores"][w]["path"] for w in SETS]
    res = run_measured(gramdist_cmd("evaluate", paths[0], "--test", *paths[1:], "--epochs", str(args.epochs),
                                    "--hash-bits", str(args.hash_bits), "--json"))
    if res["returncode"] != 0:
        raise SystemExit(f"evaluate failed:\n{res['stderr'][-3000:]}")
    results["gramdist"] = last_json_line(res["stdout"]) | {"wall_s": round(res["wall_s"], 1),
                                                            "peak_total_mb": round(res["peak_total_mb"])}
    print("gramdist:", [(t["name"], round(t["rmse"], 4), round(t["r2"], 4)) for t in results["gramdist"]["tests"]],
          flush=True)
    if args.no_baseline:
        print(save(args.name, json.loads(json.dumps(results, default=float))))
        return
    rows, seconds = {}, {}
    for which in SETS:
        x, y, seconds[which] = morgan_rows(which, limits[which], args.hash_bits, args.workers)
        stored = FeatureStore.open(results["stores"][which]["path"]).labels()
        if not np.array_equal(stored, y):
            raise SystemExit(f"{which}: the store's logP differs from RDKit's on the same molecules")
        rows[which] = Rows(InMemoryChunks(x), y, f"{which} (Morgan r=2 counts)")
    t0 = time.perf_counter()
    settings = HoldoutSettings(True, args.epochs, args.hash_bits, 0)
    morgan = fit_and_score(rows["train"], [rows["random"], rows["scaffold"]], settings)
    results["morgan"] = morgan | {"fingerprint_s": {k: round(v, 1) for k, v in seconds.items()},
                                  "learn_s": round(time.perf_counter() - t0, 1),
                                  "peak_process_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    print("morgan:", [(t["name"], round(t["rmse"], 4), round(t["r2"], 4)) for t in morgan["tests"]], flush=True)
    print(save(args.name, json.loads(json.dumps(results, default=float))))


if __name__ == "__main__":
    main()
