"""Hadamard code kernel (Kataoka & Inokuchi, ICPRAM 2016).

Definition
----------
Each discrete label ``σ`` gets a distinct row ``H_σ`` of a Hadamard matrix ``H`` (order a power
of two at least the number of labels); a node's initial code is the row of its label,
``x_0(v) = H_{label(v)}``, and each iteration adds the neighbours' codes to the node's own:

    x_i(v) = x_{i-1}(v) + Σ_{u ∈ N(v)} x_{i-1}(u),        i = 1..h.

The kernel is the sum over iterations of the vertex-histogram base kernel on these codes:

    K(G, G') = Σ_{i=0..h} Σ_{v ∈ V, v' ∈ V'} δ(x_i(v), x_i(v')).

Exact form used here
--------------------
By linearity ``x_i(v) = Hᵀ n_i(v)``, where ``n_i(v)[σ] = Σ_{u: label(u)=σ} ((I + A)^i)[v, u]``
counts the walks of length ``i`` (with lazy steps) from ``v`` to nodes of label ``σ``. ``H`` is
invertible (``H Hᵀ = m I``), so two codes are equal **iff** their label-count vectors ``n_i``
are: the kernel depends only on which labels are distinct, not on the Hadamard matrix. We
therefore run the same recursion with a random 64-bit code ``r_σ`` per label in place of the
row ``H_σ``, in wrapping uint64 arithmetic: ``x_i(v) = Σ_σ n_i(v)[σ] r_σ mod 2^64``. Two
different count vectors collide only if ``Σ_σ (n - n')[σ] r_σ ≡ 0 (mod 2^64)``, of
probability ``2^(k-64)`` for counts whose difference is divisible by exactly ``2^k``
(``k < 30`` for any realistic graph, so below ``2^-34`` per pair). Unlike a Hadamard matrix
sized from the fit set (GraKeL rebuilds it at ``transform`` from the enlarged label count,
so when new labels push that count past a power of two the new graphs' codes are longer
vectors that match no fitted graph's), the codes need no dictionary: labels
unseen at fit time are handled exactly, and ``fit`` learns nothing. The tests check the
kernel against a literal Hadamard-matrix implementation and against GraKeL's
``HadamardCode``.

Choices
-------
* ``h`` counts aggregation iterations; iteration 0 (the original labels) is included, so
  GraKeL's ``n_iter`` is ``h + 1`` (GraKeL's default ``n_iter = 5`` is ``h = 4``).
* Base kernel: the vertex histogram (linear kernel on counts of equal codes), GraKeL's
  default; every iteration has weight 1; no normalisation (``gram.normalize`` gives the
  cosine form).
* Graphs without node labels: every node has label 0 (then ``n_i(v)`` is the number of
  lazy walks of length ``i`` from ``v``). Edge labels and attributes are ignored; a
  self-loop adds the node's own code once more.
* Isolated nodes keep their code (``x_i = x_0``) and count at every iteration. GraKeL's
  ``HadamardCode`` aggregates over its edge dictionary, which has no entry for them: they
  count at iteration 0 and vanish afterwards (tested: GraKeL's Gram is ours at iteration 0
  plus ours at iterations 1..h on the graphs without their isolated nodes). GraKeL also
  raises "unsupported label purpose" when given ``grakel.Graph`` objects; it accepts
  ``[adjacency dict, label dict]`` pairs.
* The paper's *shortened* Hadamard code (fixed-width bit arrays that may overflow) is not
  implemented: it approximates the exact codes computed here.
"""

from __future__ import annotations

import numpy as np

from gramdist.graphs import GraphBatch
from gramdist.kernels.base import LINEAR_NODE_WEIGHT, check_int
from gramdist.kernels.hashing import as_u64, combine, mix, tag
from gramdist.kernels.sparse import SparseFeatureKernel, SparseFeatures

_CODE = tag("hadamard.code")
_FEAT = tag("hadamard.feature")


def hadamard_codes(graphs: GraphBatch, h: int) -> list[np.ndarray]:
    """The (hashed) codes ``x_i(v)`` of every node for ``i = 0..h`` (uint64, wrapping sums)."""
    base = graphs.node_labels if graphs.node_labels is not None else np.zeros(graphs.n_nodes, np.int64)
    x = mix(as_u64(base) ^ _CODE)
    out = [x]
    indptr, nbrs, _ = graphs.arcs()
    csum = np.zeros(len(nbrs) + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for _ in range(h):
            # wrapping sums over each node's arcs (CSR order): differences of a cumulative sum
            np.cumsum(x[nbrs], out=csum[1:])
            x = x + (csum[indptr[1:]] - csum[indptr[:-1]])
            out.append(x)
    return out


class HadamardCodeKernel(SparseFeatureKernel):
    """Hadamard code kernel with explicit sparse count features.

    Parameters
    ----------
    h : int, default 5
        Number of aggregation iterations; codes of iterations 0..h are compared
        (GraKeL's ``n_iter = h + 1``).
    """

    name = "hadamard"
    node_weight = LINEAR_NODE_WEIGHT  # one linear pass: D&D runs in process
    embedding_worth_keeping = False  # 1-4 ms to embed 1,028 NCI1 graphs, 4-6 ms to read back

    def __init__(self, h: int = 5) -> None:
        self.h = h

    def validate(self) -> None:
        check_int(self.h, self.name, "h", 0, 100)

    def features(self, graphs: GraphBatch) -> SparseFeatures:
        """(G, ·) counts of nodes per (iteration, code)."""
        codes = hadamard_codes(graphs, self.h)
        keys = np.concatenate([combine(_FEAT, np.uint64(i), c) for i, c in enumerate(codes)])
        rows = np.tile(graphs.node_graph, self.h + 1)
        return SparseFeatures.from_pairs(rows, keys, 1.0, len(graphs))
