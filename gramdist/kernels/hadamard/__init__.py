"""Hadamard code kernel (Kataoka & Inokuchi, *Hadamard Code Graph Kernels for Classifying
Graphs*, ICPRAM 2016).

* ``kernel.py`` — :class:`HadamardCodeKernel` (``hadamard``): label vectors summed over
  neighbourhoods for ``h`` iterations, vertex-histogram base kernel on the resulting labels,
  explicit sparse features.
"""
