"""``gramdist stream JOB.yaml``: run an online learner on a graph stream and report AUROC.

Job file (sections ``stream``, ``kernel``, ``learner``; ``cluster`` as for Gram jobs)::

    stream:
      segments:                      # concatenated in order; each reads one dataset
        - {dataset: NCI1, label_rule: identity}    # dataset: a name or a load_dataset mapping
        - {dataset: NCI109, label_rule: identity}  # label_rule: identity | flip
        - {dataset: NCI1, label_rule: flip}        # optional: positive (class value that is +1;
        - {dataset: NCI109, label_rule: flip}      #   default the largest), limit (graphs)
      shuffle_seed: 0                # shuffle each segment (null: file order)
      limit: null                    # stop after this many examples
      chunk_size: 256                # graphs per feature-extraction task
      prefetch: 2                    # chunks featurised ahead of the learner
      normalize: false               # unit-norm feature vectors (cosine kernel)
      window: 50                     # AUROC of the last `window` predictions ...
      sample_every: 50               # ... sampled every `sample_every` examples
      dask: false                    # featurise on the job's Dask cluster (cluster: section)
    kernel: {name: wl, h: 3}         # an explicit-feature kernel: wl, nspdk or odd
    learner:
      model: primal                  # primal | mixed | dual
      budget: 10000                  # memory units (Eq. (2), Alg. 2 line 9, sigma |w|)
      policy: weight                 # primal: weight|oldest|fscore|random; dual/mixed: tau|oldest|random
      C: 0.01                        # BPA-S aggressiveness
      beta: 1.0                      # update when y S <= beta
      sigma: null                    # primal/mixed memory units per feature (null: by policy / 2)
      seed: 0                        # random policies and tie-breaks

Outputs, in ``out_dir`` (default: the job's ``output`` if it is set, else the working
directory): ``<name>.auroc.csv`` (one row per AUROC sample: example, auroc, model_size,
segment), ``<name>.auroc.png`` (the curve; needs matplotlib) and ``<name>.summary.json``.

The CLI glue is :func:`run_stream_job`; :func:`validate_stream_job` checks the sections and
raises :class:`~gramdist.errors.JobError` naming any unknown key.
"""

from __future__ import annotations

import copy
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.errors import JobError

EXPLICIT_KERNELS = ("wl", "nspdk", "odd")

STREAM_DEFAULTS: dict[str, Any] = {
    "segments": None,
    "shuffle_seed": 0,
    "limit": None,
    "chunk_size": 256,
    "prefetch": 2,
    "normalize": False,
    "window": 50,
    "sample_every": 50,
    "dask": False,
}
SEGMENT_KEYS = ("dataset", "label_rule", "positive", "limit")
LEARNER_DEFAULTS: dict[str, Any] = {
    "model": "primal",
    "budget": 10000,
    "policy": None,  # primal: weight; dual/mixed: tau
    "C": 0.01,
    "beta": 1.0,
    "sigma": None,
    "seed": 0,
}
_POLICIES = {"primal": ("weight", "oldest", "fscore", "random"),
             "mixed": ("tau", "oldest", "random"), "dual": ("tau", "oldest", "random")}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def validate_stream_job(job: Any) -> dict[str, Any]:
    """Check the ``stream``, ``learner`` and ``kernel`` sections; return them with defaults.

    ``job``: a :class:`~gramdist.jobs.Job` or its mapping. Returns the job as a mapping whose
    ``stream`` and ``learner`` sections are complete (``_job_name`` its name).
    Raises :class:`JobError` naming the offending key (unknown keys included).
    """
    from gramdist.jobs import Job

    job = job.to_dict() | {"_job_name": job.name} if isinstance(job, Job) else copy.deepcopy(job)
    job["stream"] = _validate_stream(job.get("stream"))
    job["learner"] = _validate_learner(job.get("learner") or {})
    _validate_kernel(job.get("kernel"))
    return job


def _validate_stream(stream: Any) -> dict[str, Any]:
    """The ``stream`` section with its defaults, checked."""
    if not isinstance(stream, dict):
        raise JobError("stream job: section 'stream' must be a mapping with 'segments'")
    for key in stream:
        if key not in STREAM_DEFAULTS:
            raise JobError(f"stream: unknown key stream.{key}; allowed: {', '.join(STREAM_DEFAULTS)}")
    stream = {**STREAM_DEFAULTS, **stream}
    segs = stream["segments"]
    if not isinstance(segs, list) or not segs:
        raise JobError("stream.segments must be a non-empty list of {dataset: ..., label_rule: ...}")
    stream["segments"] = [_validate_segment(i, seg) for i, seg in enumerate(segs)]
    for key in ("chunk_size", "window", "sample_every"):
        if not (_is_int(stream[key]) and stream[key] >= 1):
            raise JobError(f"stream.{key} must be a positive integer, got {stream[key]!r}")
    if not (_is_int(stream["prefetch"]) and stream["prefetch"] >= 0):
        raise JobError(f"stream.prefetch must be an integer >= 0, got {stream['prefetch']!r}")
    if stream["limit"] is not None and not (_is_int(stream["limit"]) and stream["limit"] >= 1):
        raise JobError(f"stream.limit must be a positive integer or null, got {stream['limit']!r}")
    if stream["shuffle_seed"] is not None and not _is_int(stream["shuffle_seed"]):
        raise JobError(f"stream.shuffle_seed must be an integer or null, got {stream['shuffle_seed']!r}")
    for key in ("normalize", "dask"):
        if not isinstance(stream[key], bool):
            raise JobError(f"stream.{key} must be true or false, got {stream[key]!r}")
    return stream


def _validate_segment(i: int, seg: Any) -> dict[str, Any]:
    """Segment ``i`` of ``stream.segments`` (a dataset name or a mapping) as a full mapping."""
    if isinstance(seg, str):
        seg = {"dataset": seg}
    if not isinstance(seg, dict):
        raise JobError(f"stream.segments[{i}] must be a mapping or a dataset name")
    for key in seg:
        if key not in SEGMENT_KEYS:
            raise JobError(f"stream.segments[{i}]: unknown key {key!r}; allowed: {', '.join(SEGMENT_KEYS)}")
    if "dataset" not in seg or not isinstance(seg["dataset"], (str, dict)):
        raise JobError(f"stream.segments[{i}].dataset must be a dataset name or mapping")
    rule = seg.get("label_rule", "identity")
    if rule not in ("identity", "flip"):
        raise JobError(f"stream.segments[{i}].label_rule must be identity or flip, got {rule!r}")
    if seg.get("positive") is not None and not _is_int(seg["positive"]):
        raise JobError(f"stream.segments[{i}].positive must be an integer class label")
    if seg.get("limit") is not None and not (_is_int(seg["limit"]) and seg["limit"] >= 1):
        raise JobError(f"stream.segments[{i}].limit must be a positive integer or null")
    return {"dataset": seg["dataset"], "label_rule": rule, "positive": seg.get("positive"), "limit": seg.get("limit")}


def _validate_learner(learner: Any) -> dict[str, Any]:
    """The ``learner`` section with its defaults (the model's default policy), checked."""
    if not isinstance(learner, dict):
        raise JobError("learner must be a mapping")
    for key in learner:
        if key not in LEARNER_DEFAULTS:
            raise JobError(f"learner: unknown key learner.{key}; allowed: {', '.join(LEARNER_DEFAULTS)}")
    learner = {**LEARNER_DEFAULTS, **learner}
    model = learner["model"]
    if model not in _POLICIES:
        raise JobError(f"learner.model must be primal, mixed or dual, got {model!r}")
    if learner["policy"] is None:
        learner["policy"] = "weight" if model == "primal" else "tau"
    if learner["policy"] not in _POLICIES[model]:
        raise JobError(f"learner.policy for {model} must be one of {', '.join(_POLICIES[model])}, "
                       f"got {learner['policy']!r}")
    if not (_is_int(learner["budget"]) and learner["budget"] >= 1):
        raise JobError(f"learner.budget must be a positive integer, got {learner['budget']!r}")
    if not (_is_num(learner["C"]) and learner["C"] > 0):
        raise JobError(f"learner.C must be a positive number, got {learner['C']!r}")
    if not _is_num(learner["beta"]):
        raise JobError(f"learner.beta must be a number, got {learner['beta']!r}")
    if learner["sigma"] is not None:
        if model == "dual":
            raise JobError("learner.sigma does not apply to the dual model (its size is Eq. (2))")
        if not (_is_int(learner["sigma"]) and learner["sigma"] >= 1):
            raise JobError(f"learner.sigma must be a positive integer or null, got {learner['sigma']!r}")
    if not _is_int(learner["seed"]):
        raise JobError(f"learner.seed must be an integer, got {learner['seed']!r}")
    return learner


def _validate_kernel(kernel: Any) -> None:
    """The ``kernel`` section names an explicit-feature kernel whose parameters are valid."""
    if not isinstance(kernel, dict) or "name" not in kernel:
        raise JobError("stream job: section 'kernel' must name a kernel (kernel.name)")
    if kernel["name"] not in EXPLICIT_KERNELS:
        raise JobError(f"stream jobs need an explicit-feature kernel ({', '.join(EXPLICIT_KERNELS)}), "
                       f"got {kernel['name']!r}")
    from gramdist.kernels import make_kernel

    make_kernel(kernel["name"], **{k: v for k, v in kernel.items() if k != "name"})  # raises JobError


def build(job: dict[str, Any]):
    """(kernel, GraphStream, learner factory) of a validated stream job."""
    from gramdist.kernels import make_kernel
    from gramdist.stream.learners import make_learner
    from gramdist.stream.source import GraphStream, Segment

    st, ln, kn = job["stream"], job["learner"], job["kernel"]
    kernel = make_kernel(kn["name"], **{k: v for k, v in kn.items() if k != "name"})
    stream = GraphStream([Segment(**s) for s in st["segments"]], shuffle_seed=st["shuffle_seed"],
                         limit=st["limit"])

    def learner_for(featurize_graphs):
        return make_learner(ln["model"], ln["budget"], ln["policy"], ln["C"], ln["beta"], ln["sigma"],
                            ln["seed"], featurize=featurize_graphs)

    return kernel, stream, learner_for


def execute(job: dict[str, Any], client: Any = None, progress: Any = None):
    """Run a validated stream job; returns (StreamResult, learner, kernel)."""
    from gramdist.stream.protocol import run_protocol
    from gramdist.stream.source import FeatureStream, featurize

    st = job["stream"]
    kernel, stream, learner_for = build(job)
    first, _ = stream.segment_data(0)
    state = kernel.fit(first[: st["chunk_size"]], int(job["learner"]["seed"]))
    learner = learner_for(lambda graphs: featurize(kernel, state, graphs, st["normalize"])[0])
    feats = FeatureStream(stream, kernel, state, chunk_size=st["chunk_size"], prefetch=st["prefetch"],
                          normalize=st["normalize"], client=client)
    result = run_protocol(feats, learner, window=st["window"], sample_every=st["sample_every"],
                          progress=progress)
    return result, learner, kernel


def run_stream_job(job: Any, *, out_dir: str | Path | None = None,
                   json_output: bool = False) -> dict[str, Any]:
    """Run a stream job like the CLI: validate, learn, write the curve, print the summary.

    Parameters
    ----------
    job : Job
        The loaded job (``gramdist.jobs.load_job``; its name names the outputs).
    out_dir : path or None
        Folder for ``<name>.auroc.csv``, ``<name>.auroc.png`` and ``<name>.summary.json``
        (created if needed); default: the job's ``output`` if set, else the working directory.
    json_output : bool
        Print one JSON line (auroc_mean, seconds_per_example, peak_model_size, examples, ...)
        instead of the human-readable report.

    Returns
    -------
    dict
        The summary that was printed, with the output paths.
    """
    job = validate_stream_job(job)
    name = str(job.get("_job_name") or "stream")
    out = Path(out_dir if out_dir is not None else (job.get("output") or "."))
    out.mkdir(parents=True, exist_ok=True)
    if job["stream"]["dask"]:
        from gramdist.engine.cluster import connect

        with connect(job.get("cluster") or {}) as client:
            result, learner, kernel = execute(job, client=client)
    else:
        result, learner, kernel = execute(job)
    summary = {"job": name, **result.summary(), "budget": learner.budget, **_learner_info(learner),
               "kernel": kernel.get_params() | {"name": kernel.name},
               "window": job["stream"]["window"], "sample_every": job["stream"]["sample_every"]}
    csv_path = out / f"{name}.auroc.csv"
    write_curve_csv(csv_path, result)
    summary["curve_csv"] = str(csv_path)
    png_path = out / f"{name}.auroc.png"
    if plot_curves({f"{summary['model']} ({summary['policy']})": result}, png_path,
                   title=f"{name}: AUROC over the stream (budget {learner.budget})"):
        summary["curve_png"] = str(png_path)
    (out / f"{name}.summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
    if json_output:
        print(json.dumps(_jsonable(summary)))
    else:
        print(f"stream {name}: {summary['model']} learner, policy {summary['policy']}, budget {learner.budget}, "
              f"kernel {kernel!r}")
        print(f"  examples            {result.examples} ({result.updates} updates)")
        print(f"  mean AUROC          {result.auroc_mean:.4f} ± {result.auroc_std:.4f} "
              f"({len(result.samples_auroc)} samples, window {job['stream']['window']}, "
              f"every {job['stream']['sample_every']})")
        print(f"  seconds per example {result.seconds_per_example:.6f} "
              f"({result.examples / max(result.wall_seconds, 1e-12):.0f} examples/s, features included)")
        print(f"  peak model size     {result.peak_model_size} memory units")
        print(f"  curve               {csv_path}" + (f", {png_path}" if "curve_png" in summary else ""))
        sys.stdout.flush()
    return summary


def _learner_info(learner: Any) -> dict[str, Any]:
    info = learner.describe()
    info.pop("budget", None)
    if hasattr(learner, "n_examples"):
        info["final_examples_in_model"] = learner.n_examples
    if learner.kind == "primal":
        info["final_features_in_model"] = len(learner.keys)
    info["final_model_size"] = learner.model_size
    return info


def write_curve_csv(path: str | Path, result: Any) -> None:
    """One row per AUROC sample: example, auroc, model_size, segment."""
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["example", "auroc", "model_size", "segment"])
        for row in zip(result.samples_at, result.samples_auroc, result.samples_model_size, result.samples_segment):
            w.writerow([row[0], "" if not math.isfinite(row[1]) else f"{row[1]:.6f}", row[2], row[3]])


def plot_curves(results: dict[str, Any], path: str | Path, title: str = "", smooth: int = 20) -> bool:
    """Plot AUROC samples of one or more runs (faint) with a moving average over ``smooth``
    samples; vertical lines at segment changes. Returns False if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for label, res in results.items():
        x = np.asarray(res.samples_at)
        yv = np.asarray(res.samples_auroc, dtype=np.float64)
        line = ax.plot(x, yv, alpha=0.18, linewidth=0.8)[0]
        ok = np.isfinite(yv)
        if ok.sum() >= smooth:
            k = np.ones(smooth) / smooth
            ax.plot(x[ok][smooth - 1:], np.convolve(yv[ok], k, mode="valid"), color=line.get_color(),
                    linewidth=1.8, label=f"{label}: mean {res.auroc_mean:.3f}")
        else:
            line.set_label(f"{label}: mean {res.auroc_mean:.3f}")
    first = next(iter(results.values()))
    seg = np.asarray(first.samples_segment)
    for i in np.flatnonzero(np.diff(seg)) + 1:
        ax.axvline(first.samples_at[i], color="grey", linestyle=":", linewidth=1)
    ax.axhline(0.5, color="black", linewidth=0.6, alpha=0.5)
    ax.set_xlabel("example")
    ax.set_ylabel("AUROC (window)")
    ax.set_ylim(0.0, 1.0)
    ax.set_title(title)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


__all__ = ["EXPLICIT_KERNELS", "execute", "plot_curves", "run_stream_job", "validate_stream_job",
           "write_curve_csv"]
