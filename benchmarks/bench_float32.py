"""float32 vs float64 Gram stores: size on disk, write time, and (optionally) nested-CV accuracy.

    nice -n 10 python benchmarks/bench_float32.py [--datasets NCI1 DD] [--repeats 3] [--evaluate]

For each dataset, WL h = 5 (``jobs/<dataset>-wl.yaml``) is run ``--repeats`` times per dtype,
alternating float64 / float32, each a fresh ``gramdist run`` process on its default
LocalCluster. Reported per dtype (medians): the store's size on disk (the Gram's chunks and
all), the wall time of the command and the tile phase (``tiles_s``: computing the tiles and
writing their chunks, from the run's own timings). The Grams are compared: the float32 one
must be the float64 one rounded to nearest, entry for entry. With ``--evaluate``, both stores
go through ``gramdist evaluate --folds 10 --repeats 3`` (the project's protocol) and the
accuracies are reported side by side. Results: ``benchmarks/results/float32.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, gramdist_cmd, last_json_line, run_measured, save  # noqa: E402


def size_on_disk(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--evaluate", action="store_true", help="also nested CV (10 x 3) of both stores")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    args = ap.parse_args()

    from gramdist.engine.store import open_gram

    work = Path(tempfile.mkdtemp(prefix="gramdist-f32-", dir=args.workdir))
    result: dict = {}
    try:
        for name in args.datasets:
            job = ROOT / "jobs" / f"{name.lower()}-wl.yaml"
            runs: dict[str, list] = {"float64": [], "float32": []}
            for r in range(args.repeats):
                for dtype in ("float64", "float32"):
                    out = work / f"{name}-{dtype}-{r}.zarr"
                    m = run_measured(gramdist_cmd("run", str(job), "--set", f"gram.dtype={dtype}", "--out",
                                                  str(out), "--quiet", "--json"))
                    if m["returncode"] != 0:
                        raise SystemExit(m["stderr"][-3000:])
                    s = last_json_line(m["stdout"])
                    runs[dtype].append({"wall_s": m["wall_s"], "tiles_s": s["timings"]["tiles_s"],
                                        "bytes": size_on_disk(out)})
            k64 = open_gram(work / f"{name}-float64-0.zarr")[0]
            k32 = open_gram(work / f"{name}-float32-0.zarr")[0]
            entry = {dtype: {"store_mb": round(runs[dtype][0]["bytes"] / 1e6, 2),
                             "wall_s": round(statistics.median(x["wall_s"] for x in runs[dtype]), 2),
                             "tiles_s": round(statistics.median(x["tiles_s"] for x in runs[dtype]), 3),
                             "raw_gram_mb": round(k64.size * (8 if dtype == "float64" else 4) / 1e6, 2)}
                     for dtype in runs}
            entry["float32_is_float64_rounded"] = bool(np.array_equal(k32, k64.astype(np.float32)))
            entry["max_abs_difference"] = float(np.abs(k32.astype(np.float64) - k64).max())
            if args.evaluate:
                for dtype in ("float64", "float32"):
                    r = run_measured(gramdist_cmd("evaluate", str(work / f"{name}-{dtype}-0.zarr"), "--folds", "10",
                                                  "--repeats", "3", "--workers", "0", "--json"))
                    ev = json.loads(r["stdout"])
                    entry[dtype]["accuracy"] = [round(ev["accuracy_mean"], 2), round(ev["accuracy_std"], 2)]
            result[name] = entry
            print(name, json.dumps(entry))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"saved {save('float32', result)}")
    return 0 if all(e["float32_is_float64_rounded"] for e in result.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
