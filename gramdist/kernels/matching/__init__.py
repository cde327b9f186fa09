"""Adaptive matching based kernels.

Paper: Woźnica, Kalousis & Hilario, *Adaptive Matching Based Kernels for Labelled Graphs*.

Which file holds which part:

* ``decompositions.py`` — walk and tree decompositions of labelled graphs and the element
  distances between their parts (§2–3).
* ``set_distances.py`` — the eleven set distances (single/complete/average linkage, SMD,
  Hausdorff, RIBL, Tanimoto, …) over multisets of parts.
* ``nca.py`` — Neighbourhood Component Analysis over the vectors of per-decomposition set
  distances (§3, Eq. 1).
* ``kernel.py`` — :class:`AdaptiveMatchingKernel`: the representation set and the proximity
  space kernel on the NCA-combined distances.
"""
