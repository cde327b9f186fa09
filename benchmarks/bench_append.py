"""Appending to a Gram store vs recomputing it (issue 32): DM on 20,000 molecule-size graphs and
WL on NCI1 — each step a fresh ``gramdist`` process, as a user runs them.

    nice -n 10 python benchmarks/bench_append.py [--n-graphs 20000] [--tiles 2000,600]
        [--workers 2] [--successive 10] [--workdir /tmp] [--nci1 | --no-nci1] [--name append]

DM part: ``--n-graphs`` synthetic graphs of molecule size (15-35 nodes, average degree 2.2, 8
node labels; ``dataset.synthetic``), the DM kernel with NCI1's settings (h = 10, t = 4, b = 10,
η = 0.5, pyramids fitted on 1,000 graphs), cosine-normalised, ``--workers`` worker processes,
the job's defaults otherwise (``gram.keep_embeddings: auto``). For each tile size of
``--tiles`` (2,000 makes every append straddle the old edge; 600 divides 19,800 and 18,000):

1. ``base``: ``gramdist run`` on the first 99 % of the graphs (this fits the state);
2. ``full``: ``gramdist run`` on all the graphs with ``fit.from_store: base`` — recomputing
   the whole Gram with the same state, the reference;
3. ``append 1 %``: ``gramdist append`` of the last 1 % (200 of 20,000) to a copy of ``base``
   (where the command puts it: a small append computes in its own process), and on
   ``--workers`` workers;
4. ``append 10 %`` (first tile size only): the same from a store of the first 90 % (made with
   ``fit.from_store: base``; not timed) appending the last 10 %.

Then ``--successive`` appends of 1 % each (of the store's current size) to a store of the first
``n - 1.05 %·successive``… graphs — each timed against the full run of the *first* store's size
(conservative: every later full run is larger) — and the final store checked bitwise against a
from-scratch run over the same graphs.

Each append's store must equal the full run's bit for bit (checked). Reported: the wall time of
each command (interpreter start, imports, reading the data, cluster start, state, embed, tiles,
commit), its phases (its JSON timings), the kernel values it computed (``entries_computed``,
the command's own count) against the full run's, peak memory of the process tree, and the
ratios full / append end to end and for the embed + tile phases. Targets: 1 % ≥ 10× end to end
with both tile sizes, 10 % ≥ 5×, every successive 1 % ≥ 10×.

NCI1 part (``--nci1``, default on): WL h = 5 with ``jobs/nci1-wl.yaml`` as it is (tiles of
1,028: the 1 % append straddles) — a store of the first 4,069 graphs, the full 4,110 with its
state, and the append of the last 41 in a fresh process, its fixed costs broken down
(interpreter start and imports, reading the data, cluster start, embed, tiles, the rest).
Target ≥ 3× end to end.

No other tool grows a Gram store, so there is no GraKeL column here; ``bench_wl.py`` and
``bench_dm_scaling.py`` compare full runs with GraKeL. Results: ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, gramdist_cmd, last_json_line, run_measured, save  # noqa: E402


def dm_job(n_graphs: int, tile: int, workers: int, seed: int = 0) -> str:
    return (
        f"# bench_append: {n_graphs} molecule-size synthetic graphs, DM with NCI1's settings\n"
        f"dataset: {{synthetic: {{n_graphs: {n_graphs}, n_nodes: [15, 35], avg_degree: 2.2, n_labels: 8, "
        f"attr_dim: 0, seed: {seed}}}}}\n"
        "kernel: {name: dm, h: 10, eta: 0.5, t: 4, b: 10, descriptor_sample: 20000}\n"
        f"fit: {{sample_size: {min(1000, n_graphs)}, seed: 0}}\n"
        f"gram: {{tile_size: {tile}, normalize: true}}\n"
        f"cluster: {{n_workers: {workers}, threads_per_worker: 1}}\n"
    )


def measured(*args: str) -> dict:
    """A fresh gramdist process; its wall time, peak memory and JSON summary."""
    r = run_measured(gramdist_cmd(*args))
    if r["returncode"] != 0:
        raise SystemExit(f"gramdist {' '.join(args)} failed:\n{r['stderr'][-4000:]}")
    return {"wall_s": round(r["wall_s"], 3), "peak_total_mb": round(r["peak_total_mb"], 1),
            "peak_process_mb": round(r["peak_process_mb"], 1), "summary": last_json_line(r["stdout"])}


def full_entries(n: int, tile: int) -> int:
    """Kernel values a from-scratch run over ``n`` graphs computes (upper tiles, diagonal ones whole)."""
    from gramdist.engine.store import TileGrid

    grid = TileGrid(n, n, tile, True)
    return sum(grid.entries(tl) for tl in grid.tiles())


def phases(summary: dict) -> float:
    t = summary["timings"]
    return t.get("embed_s", 0.0) + t.get("tiles_s", 0.0)


def compare(full: dict, app: dict, n: int, tile: int) -> dict:
    f, a = full["summary"], app["summary"]
    computed = a["entries_computed"]
    return {
        "end_to_end_ratio": round(full["wall_s"] / app["wall_s"], 2),
        "embed_tiles_ratio": round(phases(f) / max(phases(a), 1e-9), 2),
        "entries_full": full_entries(n, tile), "entries_append": computed,
        "entries_ratio": round(full_entries(n, tile) / max(computed, 1), 2),
    }


def same_gram(a: Path, b: Path) -> bool:
    from gramdist.engine.store import open_gram

    return bool(np.array_equal(open_gram(a)[0], open_gram(b)[0]))


def appended(store: Path, spec: dict, old: int, limit: int | None, *workers: str) -> dict:
    data = json.dumps({**spec, "skip": old, **({"limit": limit} if limit else {})})
    return measured("append", str(store), data, *workers, "--quiet", "--json")


def dm_tile_part(work: Path, n: int, tile: int, workers: int, ten_percent: bool) -> dict:
    job = work / f"dm-{tile}.yaml"
    job.write_text(dm_job(n, tile, workers))
    spec = __import__("yaml").safe_load(job.read_text())["dataset"]
    one, ten = n - n // 100, n - n // 10
    base, full = work / f"dm-{tile}-base.zarr", work / f"dm-{tile}-full.zarr"
    out: dict = {"n_graphs": n, "tile": tile, "workers": workers, "job": job.read_text()}
    out["base_run"] = measured("run", str(job), "--set", f"dataset.limit={one}", "--out", str(base), "--quiet",
                               "--json")
    out["full_run"] = measured("run", str(job), "--set", f"fit.from_store={base}", "--out", str(full), "--quiet",
                               "--json")
    cases = [("append_1pct", one, ()), ("append_1pct_workers", one, ("--workers", str(workers)))]
    if ten_percent:
        cases.append(("append_10pct", ten, ()))
    for label, old, where in cases:
        store = work / f"dm-{tile}-{label}.zarr"
        if old == one:
            shutil.copytree(base, store)
        else:  # the 90 % store, with the same fitted state (not timed)
            measured("run", str(job), "--set", f"dataset.limit={old}", "--set", f"fit.from_store={base}", "--out",
                     str(store), "--quiet", "--json")
        res = appended(store, spec, old, None, *where)
        res.update({"old_graphs": old, "added": n - old, "where": " ".join(where) or "as the command decides",
                    "bitwise_equal_to_full": same_gram(store, full)})
        res.update(compare(out["full_run"], res, n, tile))
        out[label] = res
        shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    shutil.rmtree(full, ignore_errors=True)
    return out


def successive_part(work: Path, n: int, tile: int, workers: int, count: int) -> dict:
    """``count`` appends of 1 % each to a store that ends at about ``n`` graphs."""
    sizes = [round(n / 1.01 ** count)]
    for _ in range(count):
        sizes.append(sizes[-1] + max(1, sizes[-1] // 100))
    total = sizes[-1]
    job = work / "dm-successive.yaml"
    job.write_text(dm_job(total, tile, workers))
    spec = __import__("yaml").safe_load(job.read_text())["dataset"]
    store, full = work / "dm-successive.zarr", work / "dm-successive-full.zarr"
    out: dict = {"tile": tile, "sizes": sizes}
    out["base_run"] = measured("run", str(job), "--set", f"dataset.limit={sizes[0]}", "--out", str(store),
                               "--quiet", "--json")
    out["appends"] = []
    for old, new in zip(sizes, sizes[1:]):
        res = appended(store, spec, old, new - old)
        res.update({"old_graphs": old, "added": new - old,
                    "end_to_end_ratio_vs_base_run": round(out["base_run"]["wall_s"] / res["wall_s"], 2)})
        out["appends"].append(res)
    out["full_run"] = measured("run", str(job), "--set", f"fit.from_store={store}", "--out", str(full), "--quiet",
                               "--json")
    out["bitwise_equal_to_full"] = same_gram(store, full)
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(full, ignore_errors=True)
    return out


def nci1_part(work: Path) -> dict:
    """NCI1 WL with the job as it is (tiles of 1,028: the append straddles the old edge)."""
    job = ROOT / "jobs" / "nci1-wl.yaml"
    n = 4110
    old = n - 41
    base, full = work / "nci1-base.zarr", work / "nci1-full.zarr"
    out: dict = {"job": str(job.relative_to(ROOT))}
    out["startup"] = {"wall_s": round(run_measured(gramdist_cmd("--version"))["wall_s"], 3)}
    out["base_run"] = measured("run", str(job), "--set", f"dataset.limit={old}", "--out", str(base), "--quiet",
                               "--json")
    out["full_run"] = measured("run", str(job), "--set", f"fit.from_store={base}", "--out", str(full), "--quiet",
                               "--json")
    res = appended(base, {"name": "NCI1"}, old, None)
    t = res["summary"]["timings"]
    inside = ("read_s", "cluster_s", "embed_s", "tiles_s")
    res["fixed_costs_s"] = {
        "interpreter_and_imports": out["startup"]["wall_s"],
        "read_sources_and_new_graphs": t.get("read_s"), "cluster_start": t.get("cluster_s"),
        "embed": t.get("embed_s"), "tiles": t.get("tiles_s"),
        "rest (lock, store checks, state, commit, shutdown)": round(
            res["wall_s"] - out["startup"]["wall_s"] - sum(t.get(k, 0.0) for k in inside), 3),
    }
    tile = int(__import__("yaml").safe_load(job.read_text())["gram"]["tile_size"])
    res.update({"old_graphs": old, "added": n - old, "bitwise_equal_to_full": same_gram(base, full)})
    res.update(compare(out["full_run"], res, n, tile))
    out["append_1pct"] = res
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-graphs", type=int, default=20_000)
    ap.add_argument("--tiles", default="2000,600", help="tile sizes of the DM part (the first also runs the 10 %%)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--successive", type=int, default=10, help="successive 1 %% appends (0: none)")
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--nci1", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--name", default="append", help="results/<name>.json")
    args = ap.parse_args()

    import os

    work = Path(tempfile.mkdtemp(prefix="gramdist-append-", dir=args.workdir))
    result: dict = {"load_avg_start": [round(x, 2) for x in os.getloadavg()], "started": time.ctime()}
    tiles = [int(t) for t in args.tiles.split(",")]
    try:
        result["dm"] = [dm_tile_part(work, args.n_graphs, t, args.workers, k == 0) for k, t in enumerate(tiles)]
        if args.successive:
            result["successive"] = successive_part(work, args.n_graphs, tiles[0], args.workers, args.successive)
        if args.nci1:
            result["nci1_wl"] = nci1_part(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    path = save(args.name, result)
    print(report(result))
    print(f"saved {path}")
    rows = [part[k] for part in result["dm"] for k in part if k.startswith("append_")]
    rows += [result["nci1_wl"]["append_1pct"]] if "nci1_wl" in result else []
    ok = all(r["bitwise_equal_to_full"] for r in rows) and result.get("successive", {}).get("bitwise_equal_to_full",
                                                                                          True)
    return 0 if ok else 1


def report(result: dict) -> str:
    """The Markdown tables of a result."""
    lines = ["| case | full run (s) | append (s) | end to end | embed + tiles | values computed (fewer) | bitwise |",
             "|---|---:|---:|---:|---:|---:|---|"]
    parts = [(f"DM T={p['tile']}", p) for p in result["dm"]] + (
        [("NCI1 WL", result["nci1_wl"])] if "nci1_wl" in result else [])
    for label, part in parts:
        for key in (k for k in part if k.startswith("append_")):
            a = part[key]
            lines.append(f"| {label} {key} (+{a['added']} to {a['old_graphs']}) | {part['full_run']['wall_s']:.1f} | "
                         f"{a['wall_s']:.2f} | {a['end_to_end_ratio']}x | {a['embed_tiles_ratio']}x | "
                         f"{a['entries_append']:,} ({a['entries_ratio']}x) | {a['bitwise_equal_to_full']} |")
    if "successive" in result:
        s = result["successive"]
        lines += ["", f"Successive 1 % appends (T={s['tile']}), base run {s['base_run']['wall_s']:.1f} s "
                      f"({s['sizes'][0]} graphs), final store bitwise equal to a from-scratch run: "
                      f"{s['bitwise_equal_to_full']}", "",
                  "| append | graphs | append (s) | ratio vs the base run |", "|---:|---|---:|---:|"]
        for k, a in enumerate(s["appends"], 1):
            lines.append(f"| {k} | {a['old_graphs']} + {a['added']} | {a['wall_s']:.2f} | "
                         f"{a['end_to_end_ratio_vs_base_run']}x |")
    if "nci1_wl" in result:
        lines.append("\nNCI1 append fixed costs (s): " + json.dumps(result["nci1_wl"]["append_1pct"]["fixed_costs_s"]))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
