"""Summarise the outer folds that ``gramdist evaluate --out DIR`` saved, without the store.

REPRODUCTION's long rows (the power protocol on NCI1 and NCI109, hours of libsvm a row) are run
over several sessions and resumed from ``--out``. Their folds are kept in
``benchmarks/results/folds/`` so that a figure can be checked, and a run resumed on another
machine (rebuild the store with the row's command: the same job gives the same bits, so the
same fold keys; then copy the folder to the command's ``--out``). This script prints what the
rows quote: the mean and its spreads over the complete repeats (``accuracy_spreads``, as
``gramdist evaluate`` computes them), each repeat's mean, the fold time, and which C and store
the inner selection chose.

    python benchmarks/fold_summary.py benchmarks/results/folds/NCI1-usp-power [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from gramdist.evaluation.tasks import accuracy_spreads, nan_as_none

_NAME = re.compile(r"fold-r(\d+)-f(\d+)-[0-9a-f]+\.json$")


def read_folds(folder: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """{(repeat, fold): the fold's saved result} of every ``fold-rRR-fFF-<key>.json`` in ``folder``."""
    folds = {}
    for path in sorted(folder.glob("fold-r*-f*-*.json")):
        m = _NAME.search(path.name)
        if m:
            key = (int(m[1]), int(m[2]))
            if key in folds:
                sys.exit(f"fold_summary: error: {folder}: two results for repeat {key[0]} fold {key[1]} "
                         "(folds of different evaluations in one folder)")
            folds[key] = json.loads(path.read_text())
    return folds


def summary(folds: dict[tuple[int, int], dict[str, Any]], n_folds: int) -> dict[str, Any]:
    """The figures of the complete repeats (``n_folds`` folds each) and of every fold kept."""
    repeats = sorted({r for r, _ in folds})
    complete = [r for r in repeats if all((r, f) in folds for f in range(n_folds))]
    out: dict[str, Any] = {"folds_kept": len(folds), "complete_repeats": len(complete)}
    if complete:
        acc = np.array([[folds[(r, f)]["accuracy"] for f in range(n_folds)] for r in complete])
        out.update(accuracy_spreads(acc))
        out["repeat_means"] = [round(float(m), 2) for m in acc.mean(axis=1) * 100]
    kept = list(folds.values())
    seconds = np.array([res["seconds"] for res in kept if "seconds" in res])
    out["fold_std_all_kept"] = float(np.std([res["accuracy"] * 100 for res in kept], ddof=1)) if len(kept) > 1 else None
    if len(seconds):
        out.update(fold_seconds_median=float(np.median(seconds)), fold_seconds_max=float(seconds.max()),
                   fold_hours=float(seconds.sum() / 3600))
    out["C"] = {f"{c:.0e}": n for c, n in sorted(Counter(res["C"] for res in kept).items())}
    out["store"] = dict(Counter(res["store"] for res in kept).most_common())
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="an evaluation's --out folder")
    parser.add_argument("--folds", type=int, default=10, help="outer folds a repeat (default 10)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    folds = read_folds(args.folder)
    if not folds:
        sys.exit(f"fold_summary: error: {args.folder}: no saved folds (fold-rRR-fFF-<key>.json)")
    s = summary(folds, args.folds)
    if args.json:
        print(json.dumps(nan_as_none(s), indent=1))  # strict JSON: an undefined spread is null
        return
    print(f"{args.folder}: {s['folds_kept']} folds kept, {s['complete_repeats']} complete repeat{'' if s['complete_repeats'] == 1 else 's'}")
    if s["complete_repeats"] == 1:  # no spread over repeats from one repeat
        print(f"  {s['accuracy_mean']:.2f} over the one complete repeat (fold std {s['accuracy_fold_std']:.2f})")
    elif s["complete_repeats"]:
        print(f"  {s['accuracy_mean']:.2f} ± {s['accuracy_se']:.2f} SE over the complete repeats "
              f"(std of the repeat means {s['accuracy_std_sample']:.2f}, fold std {s['accuracy_fold_std']:.2f})")
        print(f"  repeat means: {', '.join(f'{m:.2f}' for m in s['repeat_means'])}")
    if s["fold_std_all_kept"] is not None and s["folds_kept"] > s["complete_repeats"] * args.folds:
        print(f"  fold std over all {s['folds_kept']} folds kept {s['fold_std_all_kept']:.2f}")
    if "fold_seconds_median" in s:
        print(f"  fold time: median {s['fold_seconds_median']:.0f} s, longest {s['fold_seconds_max']:.0f} s, "
              f"{s['fold_hours']:.1f} h in all (one worker each)")
    print(f"  C chosen: {', '.join(f'{c} ×{n}' for c, n in s['C'].items())}")
    if len(s["store"]) > 1:
        print(f"  store chosen: {', '.join(f'{k} ×{n}' for k, n in s['store'].items())}")


if __name__ == "__main__":
    main()
