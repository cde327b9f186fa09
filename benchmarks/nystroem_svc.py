"""Nyström features judged by an SVC on Φ Φᵀ (precomputed), beside ``nystroem_fidelity.py``.

``nystroem_fidelity.py`` trains LinearSVC on the feature rows, the learner a feature store is
for; at m = 3000 on NCI1 that costs tens of CPU minutes per store. An SVC on the
approximated Gram Φ Φᵀ under the same nested CV (folds, seed, inner CV, C grid) separates the
approximation's loss from the learner's: both solve the same hinge-loss problem (LinearSVC
regularises its intercept, SVC does not). Run on the stores ``nystroem_fidelity.py`` wrote:

    nice -n 10 python benchmarks/nystroem_svc.py --work /tmp/nys-exp [--stores NCI1-wl-m1000 ...]

Writes ``WORK/svc_on_phi.json`` (accuracy, CPU seconds per store; a separate file, so that it
can run beside ``nystroem_fidelity.py``, which rewrites ``results.json``).
"""

from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path

import numpy as np

import gramdist
from gramdist.evaluation.nested_cv import GramSource, RunOptions, cross_validate
from gramdist.evaluation.protocols import Protocol


class PhiSource(GramSource):
    """Φ Φᵀ of a Nyström feature store as a candidate Gram."""

    def __init__(self, name: str, phi: np.ndarray) -> None:
        super().__init__(name)
        self._gram = phi @ phi.T

    def gram(self) -> np.ndarray:
        return self._gram


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--work", required=True, type=Path)
    p.add_argument("--stores", nargs="+", required=True, help="names like NCI1-wl-m3000")
    p.add_argument("--folds", type=int, default=10)
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    path = args.work / "svc_on_phi.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    for name in args.stores:
        if name in results:
            continue
        phi, y = gramdist.open_features(str(args.work / f"{name}.zarr"))
        t = resource.getrusage(resource.RUSAGE_SELF).ru_utime
        res = cross_validate([PhiSource(name, phi)], y, np.zeros(len(y), bool),
                             Protocol(folds=args.folds, repeats=args.repeats), RunOptions(seed=0, task="classification"))
        cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime - t
        results[name] = {"accuracy": res["accuracy_mean"], "std": res["accuracy_std"], "cpu_s": cpu}
        path.write_text(json.dumps(results, indent=1))
        print(f"{name}: SVC on Φ Φᵀ {res['accuracy_mean']:.2f} ({cpu:.0f} s CPU)", flush=True)


if __name__ == "__main__":
    main()
