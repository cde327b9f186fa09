"""Graphlet kernel (Shervashidze, Vishwanathan, Petri, Mehlhorn & Borgwardt, AISTATS 2009),
and the small-subgraph machinery it shares with the CSM kernel (``kernels/csm/``).

* ``kernel.py`` — :class:`GraphletKernel` (``graphlet``): exact and sampled graphlet counts of
  3, 4 and 5 nodes as explicit features, connected or all graphlets, frequencies or counts,
  and the labelled graphlets of the TUDataset C++ baselines.
* ``patterns.py`` — lookup tables over the adjacency patterns of graphs on <= 6 nodes:
  isomorphism classes, connectivity, non-cut nodes, canonical node orders, automorphisms.
* ``enumerate.py`` — every connected induced node set of size <= k of every graph of a batch,
  each once, vectorised over CSR neighbourhoods; uniform random k-subsets from per-graph
  counter-based random streams.
* ``canonical.py`` — canonical forms (and label-preserving automorphism counts) of labelled
  small subgraphs.
* ``disconnected.py`` — exact counts of disconnected graphlets from connected counts
  (inclusion–exclusion with brute-forced coefficients).
"""
