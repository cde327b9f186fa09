"""Weisfeiler–Lehman subtree kernel (Shervashidze et al., JMLR 2011; "FS" in Da San Martino et al.).

Features of a graph are the counts of its WL labels at iterations ``0..h``; the kernel is the
dot product of these count vectors:

    k(G, G') = Σ_{i=0..h} Σ_σ c_i(G, σ) · c_i(G', σ)

where ``c_i(G, σ)`` counts the nodes of ``G`` whose label after ``i`` relabelling iterations is
``σ``, and iteration ``i`` relabels each node by its own label and the sorted multiset of its
neighbours' labels.

Label identity (how unseen labels are handled)
---------------------------------------------
The paper compresses signatures with a dictionary built while scanning the data. A
dictionary learned on a fit sample could not name the labels of graphs it never saw, and
would make a graph's features depend on whether it was in the sample. Here a label is
instead a **stable 64-bit hash of its complete WL signature** (the iteration number, the
node's previous label and the multiset of its neighbours' previous labels, recursively down
to the original node labels). The hash is a fixed arithmetic function (splitmix64 mixing,
multiset = wrapping sum of mixed neighbour labels), so:

* a graph embedded after fit gets exactly the features it would get inside the fit sample,
  and two out-of-sample graphs that share a label never seen in fit still match on it;
* every worker process computes the same keys (no Python ``hash()``, which is salted);
* two different signatures collide only with probability ~2^-64 per pair of labels, so for
  realistic alphabets (< 10^8 labels) the Gram equals the dictionary-based WL kernel; the
  tests check it against a dictionary-based brute force on MUTAG.

The fit phase learns the label dictionary of the sample (sorted keys per iteration, stored
in the state) for reporting: :meth:`WLSubtreeKernel.report` says how many labels it holds.
Graphs without node labels get label 0 on every node. Edge labels and attributes are
ignored, as in the original kernel.
"""

from __future__ import annotations

import numpy as np

from gramdist.arrayops import unique_sorted
from gramdist.graphs import GraphBatch
from gramdist.kernels.base import LINEAR_NODE_WEIGHT, KernelState, check_int
from gramdist.kernels.relabel import wl_labels
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures


class WLSubtreeKernel(SparseFeatureKernel):
    """Weisfeiler–Lehman subtree kernel with explicit sparse count features.

    Parameters
    ----------
    h : int, default 5
        Number of relabelling iterations; features are label counts of iterations 0..h.

    Notes
    -----
    ``embed`` returns :class:`~gramdist.kernels.sparse.SparseFeatures` (one row per
    graph); ``pairwise`` is their exact dot product (integer counts, so the Gram is exact and
    bitwise independent of tiling). See the module docstring for label hashing.
    """

    name = "wl"
    node_weight = LINEAR_NODE_WEIGHT  # one linear pass: D&D runs in process
    embeds_in_threads = True  # NumPy hashing and sorts over whole chunks

    def __init__(self, h: int = 5) -> None:
        self.h = h

    def validate(self) -> None:
        check_int(self.h, self.name, "h", 0, 100)

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        """(G, ·) sparse WL count vectors of ``graphs`` (no state needed)."""
        labels = wl_labels(graphs, self.h)
        keys = np.concatenate(labels)
        rows = np.tile(graphs.node_graph, self.h + 1)
        return SparseFeatures.from_pairs(rows, keys, 1.0, len(graphs))

    def fit(self, graphs: GraphBatch, seed: int) -> KernelState:
        labels = wl_labels(graphs, self.h)
        per_iter = [unique_sorted(lab) for lab in labels]
        return KernelState(
            arrays={"labels": unique_sorted(np.concatenate(per_iter), runs=True)},
            attrs={"labels_per_iteration": [int(len(p)) for p in per_iter], "fit_graphs": len(graphs)},
        )


    def report(self, state: KernelState) -> list[str]:
        counts = state.attrs.get("labels_per_iteration", [])
        return [f"WL label dictionary of the fit sample: {sum(counts)} labels ({counts} per iteration); "
                "labels unseen in fit are hashed the same way, so out-of-sample graphs match exactly"]

    def unseen_fraction(self, features: SparseFeatures, state: KernelState) -> float:
        """Fraction of the feature mass of ``features`` on labels absent from the fit sample."""
        known = np.isin(features.keys, state.arrays["labels"])
        total = features.values.sum()
        return float(features.values[~known].sum() / total) if total else 0.0
