"""End-to-end times of every kernel on NCI1 and D&D: the two last columns of README's kernel table.

Usage::

    python benchmarks/bench_kernel_table.py [--limit-s 240] [--rows wl sp ...] [--datasets NCI1 DD] [--readme]

Each run is ``gramdist run`` of a job file of ``jobs/`` (the dataset's own when there is one,
otherwise the MUTAG job with ``dataset.name`` set and the dataset's tile size) in a fresh
process, timed end to end (interpreter, imports, local cluster, fit, embed, tiles, checksums)
with the peak memory of the whole process tree. A run past ``--limit-s`` is stopped and
reported as "> limit". ``--readme`` writes the cells into README.md's kernel table (the row
whose first cell names the kernel). Results: ``benchmarks/results/kernel_table.json``. Other
tools are compared per family in the scripts named in BENCHMARKS.md; this one only fills the
table, on the machine it runs on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import RESULTS, ROOT, gramdist_cmd, last_json_line, run_measured, save  # noqa: E402

TILE = {"NCI1": 1028, "DD": 256}
#: README row (its first cell's first name) -> job file stem (``{ds}`` = nci1 or dd) and overrides
ROWS: dict[str, dict] = {
    "wl": {"job": "{ds}-wl"},
    "dm": {"job": "{ds}-dm"},
    "power": {"job": "nci1-power"},
    "flg": {"job": "nci1-mlg"},
    # the fit decomposes its sample's graphs: all of D&D's 1,178 exceed a worker's memory (11.8 GB seen)
    "matching": {"job": "nci1-matching", "set_dd": ["fit.sample_size=300"]},
    "nspdk": {"job": "dd-nspdk"},
    "odd": {"job": "dd-odd"},
    "sp": {"job": "{ds}-sp"},
    "wlsp": {"job": "{ds}-wlsp"},
    "wl_edge": {"job": "mutag-wl_edge", "set": ["kernel.use_edge_labels=false"]},
    "wloa": {"job": "mutag-wloa"},
    "graphhopper": {"job": "{ds}-graphhopper"},
    "propagation": {"job": "mutag-propagation"},
    "graphlet": {"job": "{ds}-graphlet"},
    "random_walk": {"job": "{ds}-random_walk"},
    "csm": {"job": "{ds}-csm"},
    "vertex_histogram": {"job": "mutag-vertex_histogram"},
    "nh": {"job": "mutag-nh"},
    "hadamard": {"job": "mutag-hadamard"},
    "wwl": {"job": "mutag-wwl"},
    "pyramid_match": {"job": "mutag-pyramid_match"},
    "lovasz_theta": {"job": "mutag-svm_theta", "set": ["kernel.base_kernel=linear"], "cell_prefix": "svm_theta "},
    "core": {"job": "mutag-core"},
}


def job_for(row: str, dataset: str) -> tuple[Path, list[str]]:
    spec = ROWS[row]
    stem = spec["job"].format(ds={"NCI1": "nci1", "DD": "dd"}[dataset])
    sets = [f"dataset.name={dataset}", *spec.get("set", []), *spec.get(f"set_{dataset.lower()}", [])]
    if not stem.startswith(dataset.lower()):
        sets.append(f"gram.tile_size={TILE[dataset]}")
    return ROOT / "jobs" / f"{stem}.yaml", sets


def run_one(row: str, dataset: str, workdir: Path, limit_s: int, extra: tuple[str, ...] = ()) -> dict:
    """``gramdist run`` of the row's job on ``dataset`` (``extra``: more ``--set``), measured."""
    job, sets = job_for(row, dataset)
    sets = [*sets, *extra]
    store = workdir / f"{dataset}-{row}.zarr"
    args = ["run", str(job), "--out", str(store), "--overwrite", "--quiet", "--json"]
    for s in sets:
        args += ["--set", s]
    r = run_measured(["timeout", str(limit_s), *gramdist_cmd(*args)])
    out = {"row": row, "dataset": dataset, "job": job.name, "set": sets, "wall_s": round(r["wall_s"], 2),
           "peak_total_mb": round(r["peak_total_mb"]), "returncode": r["returncode"],
           "timed_out": r["returncode"] == 124}
    if r["returncode"] == 0:
        out["timings"] = last_json_line(r["stdout"]).get("timings")
    elif not out["timed_out"]:
        out["error"] = (r["stderr"].strip().splitlines() or [""])[-1][:300]
    return out


def cell(result: dict, limit_s: int) -> str:
    prefix = ROWS[result["row"]].get("cell_prefix", "")
    if result["timed_out"]:
        return f"{prefix}> {limit_s} s"
    if result["returncode"]:
        oom = any(w in result.get("error", "") for w in ("KilledWorker", "out of memory"))
        return f"{prefix}{'workers out of memory' if oom else 'failed'} (BENCHMARKS.md)"
    wall, gib = result["wall_s"], result["peak_total_mb"] / 1024
    return f"{prefix}{wall:.1f} s, {gib:.1f} GiB" if wall < 10 else f"{prefix}{wall:.0f} s, {gib:.1f} GiB"


def write_readme(cells: dict[tuple[str, str], str]) -> None:
    path = ROOT / "README.md"
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\| `([a-z_]+)`", line)
        if not m or m.group(1) not in ROWS:
            continue
        parts = line.split(" | ")
        for j, ds in ((-2, "NCI1"), (-1, "DD")):
            if (m.group(1), ds) in cells:
                parts[j] = cells[m.group(1), ds] + (" |" if j == -1 else "")
        lines[i] = " | ".join(parts)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    ap.add_argument("--datasets", nargs="+", default=["NCI1", "DD"], choices=list(TILE))
    ap.add_argument("--limit-s", type=int, default=240)
    ap.add_argument("--readme", action="store_true", help="write the cells into README.md")
    ap.add_argument("--readme-only", action="store_true", help="write README.md's cells from the saved results")
    args = ap.parse_args()
    # the file this run saves to (suffix included), so that a partial rerun adds to its own rows
    path = RESULTS / f"kernel_table{os.environ.get('GRAMDIST_BENCH_SUFFIX', '')}.json"
    previous = json.loads(path.read_text()) if path.exists() else {"results": []}
    results = {(r["row"], r["dataset"]): r for r in previous["results"]}
    if args.readme_only:
        args.rows, args.readme = [], True
    measured: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for row in args.rows:
            for ds in args.datasets:
                r = run_one(row, ds, Path(tmp), args.limit_s)
                r["limit_s"] = args.limit_s
                results[row, ds] = measured[row, ds] = r
                print(f"{row:18s} {ds:5s} {cell(r, args.limit_s):24s} {r.get('error', '')}", flush=True)
                save("kernel_table", {"results": list(results.values())})
    if args.readme:
        # only this run's cells (all the saved ones with --readme-only): a rerun of two rows
        # once rewrote every other cell from an older results file
        cells = results if args.readme_only else measured
        write_readme({k: cell(r, r["limit_s"]) for k, r in cells.items()})


if __name__ == "__main__":
    main()
