"""Budget-aware online learning on graph streams (Da San Martino, Navarin & Sperduti 2016).

* :mod:`gramdist.stream.source` — streams of (graph, label) from segments of datasets with
  label rules (concept drift), featurised ahead of the learner;
* :mod:`gramdist.stream.learners` — the Dual, Mixed and Primal budget perceptrons with the
  BPA-S step;
* :mod:`gramdist.stream.policies` — budget maintenance policies and the incremental F-score;
* :mod:`gramdist.stream.protocol` — test-then-train loop and windowed AUROC;
* :mod:`gramdist.stream.run` — job validation and the ``gramdist stream`` entry point
  (:func:`run_stream_job`, :func:`validate_stream_job`).
"""

from gramdist.stream.run import run_stream_job, validate_stream_job

__all__ = ["run_stream_job", "validate_stream_job"]
