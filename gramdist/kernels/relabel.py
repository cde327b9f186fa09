"""Weisfeiler–Lehman relabelling as stable hashes: shared by the WL family of kernels.

:func:`wl_labels` gives every node its label at iterations ``0..h``: the WL subtree kernel
counts them, WL edge counts edges by them, WL-OA intersects their histograms, WWL compares
their sequences. A label is a 64-bit hash of its complete WL signature (see
:mod:`gramdist.kernels.features.wl`), identical in every process.
"""

from __future__ import annotations

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.hashing import mix


def wl_labels(graphs: GraphBatch, h: int) -> list[np.ndarray]:
    """Hashed WL labels of every node at iterations ``0..h``.

    Returns
    -------
    list of h+1 arrays of shape (N,) uint64, one per iteration, over the batch's nodes.
    """
    base = graphs.node_labels if graphs.node_labels is not None else np.zeros(graphs.n_nodes, np.int64)
    labels = mix(base.astype(np.int64).view(np.uint64))
    out = [labels]
    indptr, nbrs, _ = graphs.arcs()
    with np.errstate(over="ignore"):
        for it in range(1, h + 1):
            # Multiset hash of the neighbours' labels: a wrapping sum of a second mix of each
            # label (order-free, so no sort is needed); differences of a cumulative sum give
            # every node's segment sum, including empty segments (isolated nodes).
            mixed = mix(labels[nbrs] ^ np.uint64(0xA0761D6478BD642F))
            csum = np.zeros(len(mixed) + 1, dtype=np.uint64)
            np.cumsum(mixed, out=csum[1:])
            neigh = csum[indptr[1:]] - csum[indptr[:-1]]
            salt = mix(np.uint64(it))
            labels = mix(mix(labels ^ salt) + neigh)
            out.append(labels)
    return out
