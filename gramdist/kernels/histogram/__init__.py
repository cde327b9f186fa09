"""Vertex and edge histogram kernels: the base kernels of the label-count family.

Sugiyama & Borgwardt, *Halting in random walk kernels* (NIPS 2015) name them (GraKeL's
``VertexHistogram`` and ``EdgeHistogram`` cite that paper); every framework kernel (WL,
Hadamard code, core) uses the vertex histogram as its base.

* ``kernel.py`` — :class:`VertexHistogramKernel` (``vertex_histogram``) and
  :class:`EdgeHistogramKernel` (``edge_histogram``): label counts, linear kernel, explicit
  sparse features.
"""
