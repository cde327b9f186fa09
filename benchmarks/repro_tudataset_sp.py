"""The TUDataset C++ shortest-path Gram under the protocol our `tud-DS-sp` store was evaluated with.

    export GRAMDIST_TUDATASET_BASELINES=/work/tools/tudataset/lib   # the built kernel_baselines module
    python benchmarks/repro_tudataset_sp.py STORE DS [--folder F]

The TUDataset study's SP row is its own C++ ``compute_shortestpath_dense``, whose feature map is
not Borgwardt & Kriegel's (``gramdist/kernels/shortest_path/sp.py`` says how: node self-pairs at
distance 2, unreachable pairs, first label 0 dropped). This script cosine-normalises that Gram
and runs the same nested CV as ``gramdist evaluate STORE --protocol power --c-min -3 --c-max 3``
(same folds, same seed, the store's labels), in this process, so that a gap between our SP row and
the published figure can be told apart from the protocol. ``--folder``: where the module finds
``datasets/DS/DS/raw/DS_*.txt`` (default: the module's folder's parent, as in its HOWTO). Prints
one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np


def cpp_gram(ds: str, folder: Path) -> np.ndarray:
    """The C++ SP Gram of ``ds`` (node labels), cosine-normalised."""
    sys.path.insert(0, os.environ["GRAMDIST_TUDATASET_BASELINES"])
    import kernel_baselines as kb  # type: ignore[import-not-found]

    cwd = os.getcwd()
    os.chdir(folder)  # the module reads datasets/DS/DS/raw/ relative to the working directory
    try:
        k = np.asarray(kb.compute_shortestpath_dense(ds, True), dtype=np.float64)
    finally:
        os.chdir(cwd)
    d = np.sqrt(np.diag(k))
    d[d == 0] = 1.0
    return k / np.outer(d, d)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("store")
    ap.add_argument("dataset")
    ap.add_argument("--folder", type=Path, default=None)
    args = ap.parse_args()
    from gramdist.evaluation.nested_cv import (
        GramSource,
        RunOptions,
        check_compatible,
        cross_validate,
        find_stores,
    )
    from gramdist.evaluation.protocols import get_protocol

    folder = args.folder or Path(os.environ["GRAMDIST_TUDATASET_BASELINES"]).parent
    gram = cpp_gram(args.dataset, folder)

    class CppSource(GramSource):
        def gram(self) -> np.ndarray:
            return gram

        def digest(self) -> str:
            return f"tudataset-cpp-sp-{args.dataset}"

    y, _ = check_compatible(find_stores([args.store]))
    if len(y) != len(gram):
        raise SystemExit(f"{args.store} has {len(y)} graphs, the C++ Gram {len(gram)}")
    protocol = replace(get_protocol("power"), c_grid=tuple(10.0 ** k for k in range(-3, 4)))
    res = cross_validate([CppSource("tudataset-cpp-sp")], y, np.zeros(len(y), bool), protocol, RunOptions(seed=0))
    print(json.dumps({"dataset": args.dataset} | {k: res[k] for k in ("accuracy_mean", "accuracy_std",
                                                                       "accuracy_fold_std")}))


if __name__ == "__main__":
    main()
