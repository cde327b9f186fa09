"""Appending to a Gram store vs recomputing it: the DM kernel on 20,000 molecule-size graphs, and
WL on NCI1 — each step a fresh ``gramdist`` process, as a user runs them.

    nice -n 10 python benchmarks/bench_append.py [--n-graphs 20000] [--tile 600] [--workers 2]
        [--workdir /tmp] [--nci1 | --no-nci1] [--name append]

DM part (issue 16): ``--n-graphs`` synthetic graphs of molecule size (15-35 nodes, average
degree 2.2, 8 node labels; ``dataset.synthetic``), the DM kernel with NCI1's settings (h = 10,
t = 4, b = 10, η = 0.5, pyramids fitted on 1,000 graphs), cosine-normalised, tiles of ``--tile``,
``--workers`` worker processes. Steps:

1. ``base``: ``gramdist run`` on the first 99 % of the graphs (this fits the state);
2. ``full``: ``gramdist run`` on all the graphs with ``fit.from_store: base`` — recomputing
   the whole Gram with the same state, the reference;
3. ``append 1 %``: ``gramdist append`` of the last 1 % (200 of 20,000) to a copy of ``base``,
   on ``--workers`` workers as the full run, and again in the command's own process
   (``--workers 0``: no cluster to start, which is most of a small append's fixed cost);
4. ``append 10 %``: the same from a store of the first 90 % (made with ``fit.from_store:
   base``; its run is not timed) appending the last 10 %.

The DM stores keep their chunks' embeddings (``gram.keep_embeddings: true``, the setting for a
store meant to grow): an append then reads the old graphs' embeddings from the store instead
of computing them again — without it, embedding the N old graphs (about a tenth of a full DM
run's CPU here) bounds the embed + tile ratio near 10x. ``--no-keep-embeddings`` measures that
case (a store's first append, which keeps them for the next).

Each append's store must equal the full run's bit for bit (checked). Reported: the wall time of
each command (interpreter start, imports, reading the data, cluster start, state, embed, tiles,
commit), its phases from the command's own JSON timings, the entries computed (kernel
evaluations, from the tiles computed), peak memory of the process tree, and the ratios full /
append end to end and for the embed + tile phases. The issue's targets: 1 % ≥ 10× end to end
and ≥ 30× in embed + tiles; 10 % ≥ 5× end to end.

The tile size matters: a tile that straddles the old edge grows and is recomputed whole (so the
result is the from-scratch tile bit for bit), which costs up to T × N extra entries. The
default 600 divides both 19,800 and 18,000, so neither append straddles; ``--tile 512``
measures the straddling case.

NCI1 part (``--nci1``, default on): WL h = 5 (``jobs/nci1-wl.yaml`` with tiles of 313, which
divides 4,069, and kept embeddings) — a store
of the first 4,069 graphs, the full 4,110 with its state, and the append of the last 41 (1 %),
with the append's fixed costs broken down: interpreter start and imports (the wall time of
``gramdist --version``), reading the data (the store's sources re-read and checked, the new
graphs), cluster start, embed, tiles and commit. The append runs as a user runs it (a small
append computes in its own process: no cluster to start) and again on 2 workers.

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


def dm_job(n_graphs: int, tile: int, workers: int, seed: int = 0, keep: bool = True) -> str:
    return (
        f"# bench_append: {n_graphs} molecule-size synthetic graphs, DM with NCI1's settings\n"
        f"dataset: {{synthetic: {{n_graphs: {n_graphs}, n_nodes: [15, 35], avg_degree: 2.2, n_labels: 8, "
        f"attr_dim: 0, seed: {seed}}}}}\n"
        "kernel: {name: dm, h: 10, eta: 0.5, t: 4, b: 10, descriptor_sample: 20000}\n"
        f"fit: {{sample_size: {min(1000, n_graphs)}, seed: 0}}\n"
        f"gram: {{tile_size: {tile}, normalize: true, keep_embeddings: {str(keep).lower()}}}\n"
        f"cluster: {{n_workers: {workers}, threads_per_worker: 1}}\n"
    )


def measured(*args: str) -> dict:
    """A fresh gramdist process; its wall time, peak memory and JSON summary."""
    r = run_measured(gramdist_cmd(*args))
    if r["returncode"] != 0:
        raise SystemExit(f"gramdist {' '.join(args)} failed:\n{r['stderr'][-4000:]}")
    return {"wall_s": round(r["wall_s"], 3), "peak_total_mb": round(r["peak_total_mb"], 1),
            "peak_process_mb": round(r["peak_process_mb"], 1), "summary": last_json_line(r["stdout"])}


def entries(n: int, tile: int, old: int | None = None) -> int:
    """Kernel evaluations (Gram entries computed, mirrors not counted) of a symmetric run over
    ``n`` graphs in tiles of ``tile``, or of an append growing ``old`` graphs to ``n``: the
    entries of the tiles it does not keep (straddling tiles whole)."""
    from gramdist.engine.store import TileGrid, kept_tiles

    grid = TileGrid(n, n, tile, True)
    kept = set(kept_tiles(TileGrid(old, old, tile, True), grid)) if old else set()
    total = 0
    for i, j in grid.tiles():
        if (i, j) not in kept:
            (r0, r1), (c0, c1) = grid.row_range(i), grid.col_range(j)
            total += (r1 - r0) * (c1 - c0)
    return total


def phases(summary: dict) -> float:
    t = summary["timings"]
    return t.get("embed_s", 0.0) + t.get("tiles_s", 0.0)


def compare(full: dict, app: dict, n: int, old: int, tile: int) -> dict:
    f, a = full["summary"], app["summary"]
    return {
        "end_to_end_ratio": round(full["wall_s"] / app["wall_s"], 2),
        "embed_tiles_ratio": round(phases(f) / max(phases(a), 1e-9), 2),
        "entries_full": entries(n, tile), "entries_append": entries(n, tile, old),
        "entries_ratio": round(entries(n, tile) / entries(n, tile, old), 2),
    }


def same_gram(a: Path, b: Path) -> bool:
    from gramdist.engine.store import open_gram

    return bool(np.array_equal(open_gram(a)[0], open_gram(b)[0]))


def dm_part(work: Path, n: int, tile: int, workers: int, keep: bool) -> dict:
    job = work / "dm.yaml"
    job.write_text(dm_job(n, tile, workers, keep=keep))
    one, ten = n - n // 100, n - n // 10
    base = work / "dm-base.zarr"
    out: dict = {"n_graphs": n, "tile": tile, "workers": workers, "job": job.read_text()}
    out["base_run"] = measured("run", str(job), "--set", f"dataset.limit={one}", "--out", str(base), "--quiet",
                               "--json")
    full = work / "dm-full.zarr"
    out["full_run"] = measured("run", str(job), "--set", f"fit.from_store={base}", "--out", str(full), "--quiet",
                               "--json")
    spec = json.loads(json.dumps(__import__("yaml").safe_load(job.read_text())["dataset"]))
    for label, old, where in (("append_1pct", one, workers), ("append_1pct_in_process", one, 0),
                              ("append_10pct", ten, workers)):
        store = work / f"dm-{label}.zarr"
        if old == one:
            shutil.copytree(base, store)
        else:  # the 90 % store, with the same fitted state (not timed)
            measured("run", str(job), "--set", f"dataset.limit={old}", "--set", f"fit.from_store={base}", "--out",
                     str(store), "--quiet", "--json")
        data = json.dumps({**spec, "skip": old})
        res = measured("append", str(store), data, "--workers", str(where), "--quiet", "--json")
        res.update({"old_graphs": old, "added": n - old, "workers": where,
                    "bitwise_equal_to_full": same_gram(store, full)})
        res.update(compare(out["full_run"], res, n, old, tile))
        out[label] = res
        shutil.rmtree(store, ignore_errors=True)
    return out


def nci1_part(work: Path, tile: int = 313) -> dict:
    """NCI1 WL; tiles of 313, which divides 4,069 (the job's 1,028 would make the 1 % append
    recompute the whole straddling tile column: 2.5x fewer entries than a full run, not 40x)."""
    job = ROOT / "jobs" / "nci1-wl.yaml"
    n = 4110
    old = n - 41
    base, full = work / "nci1-base.zarr", work / "nci1-full.zarr"
    out: dict = {"job": str(job.relative_to(ROOT)), "tile": tile}
    out["startup"] = {"wall_s": round(run_measured(gramdist_cmd("--version"))["wall_s"], 3)}
    tiles = ("--set", f"gram.tile_size={tile}", "--set", "gram.keep_embeddings=true")
    out["base_run"] = measured("run", str(job), *tiles, "--set", f"dataset.limit={old}", "--out", str(base),
                               "--quiet", "--json")
    out["full_run"] = measured("run", str(job), *tiles, "--set", f"fit.from_store={base}", "--out", str(full),
                               "--quiet", "--json")
    on_cluster = work / "nci1-base-cluster.zarr"
    shutil.copytree(base, on_cluster)
    data = json.dumps({"name": "NCI1", "skip": old})
    # as a user runs it: a small append computes in its own process (no cluster to start)
    res = measured("append", str(base), data, "--quiet", "--json")
    t = res["summary"]["timings"]
    res["fixed_costs_s"] = {
        "interpreter_and_imports": out["startup"]["wall_s"],
        "read_sources_and_new_graphs": t.get("read_s"),
        "cluster_start": t.get("cluster_s"),
        "embed": t.get("embed_s"),
        "tiles": t.get("tiles_s"),
        "rest (lock, store checks, state, commit, shutdown)": round(
            res["wall_s"] - out["startup"]["wall_s"] - sum(t.get(k, 0.0) for k in ("read_s", "cluster_s", "embed_s",
                                                                                  "tiles_s")), 3),
    }
    res.update({"old_graphs": old, "added": n - old, "bitwise_equal_to_full": same_gram(base, full)})
    res.update(compare(out["full_run"], res, n, old, tile))
    out["append_1pct"] = res
    # the same on a 2-worker LocalCluster, as the full run
    res = measured("append", str(on_cluster), data, "--workers", "2", "--quiet", "--json")
    res.update({"old_graphs": old, "added": n - old, "workers": 2, "bitwise_equal_to_full": same_gram(on_cluster, full)})
    res.update(compare(out["full_run"], res, n, old, tile))
    out["append_1pct_cluster"] = res
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-graphs", type=int, default=20_000)
    ap.add_argument("--tile", type=int, default=600)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--workdir", default=tempfile.gettempdir())
    ap.add_argument("--nci1", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--keep-embeddings", action=argparse.BooleanOptionalAction, default=True,
                    help="the DM stores keep their chunks' embeddings (gram.keep_embeddings), so an append reads "
                         "the old graphs' embeddings instead of computing them (--no-keep-embeddings: it re-embeds)")
    ap.add_argument("--name", default="append", help="results/<name>.json")
    args = ap.parse_args()

    import os

    work = Path(tempfile.mkdtemp(prefix="gramdist-append-", dir=args.workdir))
    result: dict = {"load_avg_start": [round(x, 2) for x in os.getloadavg()], "started": time.ctime()}
    try:
        result["dm"] = dm_part(work, args.n_graphs, args.tile, args.workers, args.keep_embeddings)
        if args.nci1:
            result["nci1_wl"] = nci1_part(work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    path = save(args.name, result)
    rows = [("DM", result["dm"], k) for k in ("append_1pct", "append_1pct_in_process", "append_10pct")]
    if "nci1_wl" in result:
        rows += [("NCI1 WL", result["nci1_wl"], k) for k in ("append_1pct", "append_1pct_cluster")]
    print("| case | full run (s) | append (s) | end to end | embed + tiles | entries | bitwise |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for label, part, key in rows:
        a = part[key]
        print(f"| {label} {key} (+{a['added']} to {a['old_graphs']}) | {part['full_run']['wall_s']:.1f} | "
              f"{a['wall_s']:.1f} | {a['end_to_end_ratio']}x | {a['embed_tiles_ratio']}x | {a['entries_ratio']}x | "
              f"{a['bitwise_equal_to_full']} |")
    if "nci1_wl" in result:
        print("NCI1 append fixed costs (s):", json.dumps(result["nci1_wl"]["append_1pct"]["fixed_costs_s"]))
    print(f"saved {path}")
    ok = all(part[key]["bitwise_equal_to_full"] for _, part, key in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
