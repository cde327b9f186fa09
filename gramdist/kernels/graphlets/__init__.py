"""Graphlet kernel (Shervashidze, Vishwanathan, Petri, Mehlhorn & Borgwardt, AISTATS 2009).

The enumeration of connected induced subgraphs, the pattern tables and the canonical labelled
forms it shares with the CSM kernel live in ``gramdist/kernels/subgraphs.py``.

* ``kernel.py`` — :class:`GraphletKernel` (``graphlet``): exact and sampled graphlet counts of
  3, 4 and 5 nodes as explicit features, connected or all graphlets, frequencies or counts,
  and the labelled graphlets of the TUDataset C++ baselines.
* ``labelled3.py`` — the labelled 3-node graphlets without edge labels, counted in closed form
  before they are keyed.
* ``disconnected.py`` — exact counts of disconnected graphlets from connected counts
  (inclusion–exclusion with brute-forced coefficients).
"""
