"""Pyramid match graph kernel (Nikolentzos, Meladianos & Vazirgiannis, "Matching Node
Embeddings for Graph Similarity", AAAI 2017).

* ``spectral.py`` — each graph's node embedding: absolute values of the adjacency matrix's
  eigenvectors for the d eigenvalues largest in magnitude (batched dense ``eigh`` per graph
  size up to 300 nodes; ARPACK for the d+4 eigenpairs of larger graphs), snapped to a 2^-32 grid.
* ``kernel.py`` — :class:`PyramidMatchKernel` (``pyramid_match``): per-dimension multi-resolution
  histograms at levels 0..L (the embedding: weighted counts per cell), the weighted intersection
  of the paper, and its explicit features (histogram intersection by unary coding), exact in
  floating point.
"""
