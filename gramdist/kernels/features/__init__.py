"""Explicit-feature kernels: WL subtree, NSPDK and ODD_ST as sparse count vectors.

Paper: Da San Martino, Navarin & Sperduti, *An empirical study on budget-aware online kernel
algorithms for streams of graphs* (Neurocomputing 2016), which takes WL subtree ("FS",
Shervashidze et al. 2011), NSPDK (Costa & De Grave 2010) and ODD_ST (Da San Martino et al.
2012) as its explicit feature maps; the budget-aware learners built on them live in
:mod:`gramdist.stream`.

Which file holds which part:

* ``wl.py`` — the WL subtree kernel (§2.1 of the stream paper, Shervashidze et al. 2011) on
  the relabelling of :mod:`gramdist.kernels.relabel`.
* ``nspdk.py`` — rooted neighbourhood subgraphs, their exact pair codes per radius/distance.
* ``odd.py`` — ordered decompositional DAGs with the ST subtree kernel, built on NSPDK's
  distance patterns.

Feature ids are hashes from :mod:`gramdist.kernels.hashing` (shared with the matching family),
so they are the same on every worker and for out-of-sample graphs. The sparse vectors and the
shared exact-dot-product base live in :mod:`gramdist.kernels.sparse`, beside the hashing.
"""
