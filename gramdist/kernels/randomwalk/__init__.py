"""Random-walk kernels (Vishwanathan, Schraudolph, Kondor & Borgwardt, "Graph kernels", JMLR
2010; Sugiyama & Borgwardt, "Halting in random walk kernels", NIPS 2015).

* ``kernel.py`` — :class:`RandomWalkKernel` (``random_walk``): p-step, geometric and exponential
  kernels on the direct product graph, the definition and every choice made, and which solver
  runs when.
* ``solvers.py`` — the solvers: explicit walk-count features, per-graph spectral
  decomposition, and the series on the implicit (Kronecker) product graph with per-pair
  stopping.
"""
