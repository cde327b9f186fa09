"""Stores in an object store against a local folder (issue 33): the same jobs written to a local
S3 server and to a local folder, in one run — each a fresh ``gramdist`` process, as a user runs it.

    nice -n 10 python benchmarks/bench_object_store.py [--tiles 256,514,1028,2055]
        [--synthetic 20000] [--synthetic-tile 2048] [--workers 2] [--name object_store]

The S3 server is moto's standalone server on 127.0.0.1 (:class:`gramdist.testing.LocalS3`):
a real S3 API over HTTP, but in one Python process on this machine, so its figures show the
cost of the protocol (requests, HTTP, checksums of bodies), not of a network or of a cloud
provider's latency. Jobs:

* NCI1, WL h = 5 (``jobs/nci1-wl.yaml``), a Gram for each tile size of ``--tiles``, then a WL
  feature store;
* ``--synthetic`` graphs of molecule size (``dataset.synthetic``), WL h = 3: a feature store,
  and a float32 Gram with tiles of ``--synthetic-tile`` (0: skipped).

For each: wall time and peak memory of the command's process tree, the store's size, its
objects, the requests the S3 server served (from its access log), per tile or chunk;
throughput = store bytes / the phases that write (embed, tiles, finish); and every S3 store
checked bitwise against the local one. Results: ``benchmarks/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import gramdist_cmd, last_json_line, run_measured, save  # noqa: E402

from gramdist.engine.store import Location, open_gram  # noqa: E402
from gramdist.testing import LocalS3  # noqa: E402


def synthetic_job(folder: Path, n: int) -> Path:
    path = folder / f"synthetic-{n}.yaml"
    path.write_text(f"dataset: {{synthetic: {{n_graphs: {n}, n_nodes: [15, 35], avg_degree: 2.2, n_labels: 8, "
                    "attr_dim: 0, seed: 0}}\nkernel: {name: wl, h: 3}\ngram: {normalize: true}\n"
                    "fit: {sample_size: 1000, seed: 0}\n")
    return path


def one(server: LocalS3, command: str, job: Path, out: str, workers: int, *sets: str) -> dict:
    before = server.requests()
    args = [command, str(job), "--out", out, "--json", "--quiet", "--set", f"cluster.n_workers={workers}"]
    for s in sets:
        args += ["--set", s]
    res = run_measured(gramdist_cmd(*args), env=os.environ.copy())
    if res["returncode"] != 0:
        raise SystemExit(f"{command} {out} failed:\n{res['stderr'][-3000:]}")
    summary = last_json_line(res["stdout"])
    t = summary.get("timings", {})
    writing = sum(t.get(k, 0.0) for k in ("embed_s", "tiles_s", "finish_s", "chunks_s")) or res["wall_s"]
    location = Location(out)
    size = location.total_bytes()
    units = summary.get("tiles_total") or summary.get("chunks_total") or summary.get("n_chunks") or 0
    row = {"out": out, "wall_s": round(res["wall_s"], 2), "peak_total_mb": round(res["peak_total_mb"]),
           "store_mb": round(size / 2**20, 1), "objects": len(location.files("")) if location.remote else
           sum(1 for p in Path(out).rglob("*") if p.is_file()),
           "writing_s": round(writing, 2), "mb_per_s": round(size / 2**20 / writing, 1), "units": units,
           "units_per_s": round(units / writing, 1) if units else None, "timings": t}
    if location.remote:
        row["requests"] = server.requests() - before
        row["requests_per_unit"] = round(row["requests"] / units, 1) if units else None
    return row


def pair(server: LocalS3, bucket_prefix: str, tmp: Path, command: str, job: Path, name: str, workers: int,
         *sets: str) -> dict:
    local = str(tmp / f"{name}.zarr")
    remote = f"s3://{server.bucket}/{bucket_prefix}/{name}.zarr"
    rows = {"local": one(server, command, job, local, workers, *sets),
            "s3": one(server, command, job, remote, workers, *sets)}
    if command == "run":
        same = np.array_equal(open_gram(local)[0], open_gram(remote)[0])
    else:
        from gramdist import open_features

        same = (open_features(local)[0] != open_features(remote)[0]).nnz == 0
    rows["bitwise_equal"] = bool(same)
    rows["s3_over_local_wall"] = round(rows["s3"]["wall_s"] / rows["local"]["wall_s"], 2)
    shutil.rmtree(local, ignore_errors=True)
    Location(remote).remove()
    print(f"{name}: local {rows['local']['wall_s']} s, s3 {rows['s3']['wall_s']} s "
          f"({rows['s3'].get('requests_per_unit')} requests per unit), bitwise {same}", flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", default="256,514,1028,2055")
    ap.add_argument("--synthetic", type=int, default=20000)
    ap.add_argument("--synthetic-tile", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--name", default="object_store")
    args = ap.parse_args()
    nci1 = Path(__file__).resolve().parents[1] / "jobs" / "nci1-wl.yaml"
    results: dict = {"command": " ".join(sys.argv), "server": "moto standalone S3 server on 127.0.0.1",
                     "workers": args.workers, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp, LocalS3(bucket="bench") as server:
        os.environ.update(server.env)
        prefix, folder = uuid.uuid4().hex[:8], Path(tmp)
        for t in [int(x) for x in args.tiles.split(",") if x]:
            results["runs"][f"nci1-gram-tile{t}"] = pair(server, prefix, folder, "run", nci1, f"nci1-t{t}",
                                                         args.workers, f"gram.tile_size={t}")
        results["runs"]["nci1-features"] = pair(server, prefix, folder, "features", nci1, "nci1-features",
                                                args.workers)
        if args.synthetic:
            job = synthetic_job(folder, args.synthetic)
            results["runs"][f"synthetic{args.synthetic}-features"] = pair(
                server, prefix, folder, "features", job, "syn-features", args.workers)
            if args.synthetic_tile:
                results["runs"][f"synthetic{args.synthetic}-gram-float32-tile{args.synthetic_tile}"] = pair(
                    server, prefix, folder, "run", job, "syn-gram", args.workers,
                    f"gram.tile_size={args.synthetic_tile}", "gram.dtype=float32")
    print(save(args.name, results))


if __name__ == "__main__":
    main()
