"""GraphHopper kernel (Feragen, Kasenburg, Petersen, de Bruijne & Borgwardt, NIPS 2013).

Paper: A. Feragen, N. Kasenburg, J. Petersen, M. de Bruijne and K. Borgwardt, *Scalable kernels
for graphs with continuous attributes*, NIPS 2013 — a baseline ("GH") of the DM paper's
Tables 2 and 3.

Which file holds which part:

* ``kernel.py`` — the per-node path-position count matrices ``M_v`` (BFS shortest-path DAGs of
  every source, vectorised), :class:`GraphHopperKernel` with the paper's vertex kernels
  (Dirac on labels, linear / Gaussian on attributes, products): explicit features without
  the Gaussian, a tiled ``Σ k_n(v, v')·<M_v, M_v'>`` with it. Distances come from
  :mod:`gramdist.kernels.allpairs`.
"""
