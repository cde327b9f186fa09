"""``gramdist features JOB``: a job's explicit or Nyström features into a feature store."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gramdist.cli.common import (
    add_job_run_arguments,
    forked_placement,
    job_kernel_names,
    job_placement,
    run_context,
)
from gramdist.lazy import prefetch


def register(sub: Any) -> None:
    p = sub.add_parser("features", help="compute one feature vector per graph into a Zarr feature store "
                                        "(explicit features, or Nyström features for any kernel)")
    add_job_run_arguments(p)
    p.add_argument("--out", help="output feature store (a folder of stores for a grid); "
                                 "default <job name>-features.zarr")
    p.add_argument("--nystroem", type=int, metavar="M",
                   help="Nyström features with M landmark graphs from the fit sample (any kernel); "
                        "without it, the kernel's explicit features (WL, SP, NSPDK and most others)")
    p.add_argument("--landmarks", choices=("kmeans++", "uniform"), default="kmeans++",
                   help="how landmarks are drawn from the fit sample (default kernel k-means++ seeding)")
    p.add_argument("--eig-cutoff", type=float, default=None,
                   help="keep eigenpairs of K(L, L) above this fraction of the largest (default 1e-8)")
    p.add_argument("--chunk-size", type=int, help="graphs per chunk (one task and one Zarr chunk each)")
    p.add_argument("--from", dest="from_store", metavar="STORE",
                   help="map this job's graphs with a finished feature store's fitted state and "
                        "Nyström basis (no refit); its kernel must be the job's")
    p.set_defaults(func=cmd_features)


def cmd_features(args: argparse.Namespace) -> int:
    from gramdist.engine.featurize import FeatureRequest, featurize_grid
    from gramdist.engine.nystroem import DEFAULT_EIG_CUTOFF, NystroemSpec
    from gramdist.errors import JobError
    from gramdist.jobs import load_job

    job = load_job(args.job, args.overrides)
    nystroem = None
    if args.nystroem is not None:
        cutoff = DEFAULT_EIG_CUTOFF if args.eig_cutoff is None else args.eig_cutoff
        nystroem = NystroemSpec(args.nystroem, args.landmarks, cutoff)
    elif args.eig_cutoff is not None:
        raise JobError("--eig-cutoff applies to Nyström features: give --nystroem M")
    request = FeatureRequest(args.chunk_size, nystroem, args.from_store)
    # forked before any thread starts (as `gramdist run` does), so before Zarr's import below
    with forked_placement(job_kernel_names(job), job_placement(job, args)) as placement:
        prefetch("zarr")  # while the dataset is read, as `gramdist run` does
        results = featurize_grid(job, out=args.out, request=request, placement=placement,
                                 overwrite=args.overwrite, context=run_context(args))
    summaries = [{"store": r.store, "complete": r.complete, "chunks_total": r.chunks_total,
                  "chunks_computed": r.chunks_computed, "chunks_already_done": r.chunks_already_done,
                  "workers": r.workers, "timings": {k: round(v, 4) for k, v in r.timings.items()}}
                 | ({"setting": name} if name else {}) for name, r in results]
    if args.json:
        for s in summaries:
            print(json.dumps(s))
    return 0 if all(s["complete"] for s in summaries) else 1
