"""Descriptor Matching (DM) kernel.

Paper: Su, Han, Harang & Yan, *A Fast Kernel for Attributed Graphs* (SDM 2016).

Which file holds which part:

* ``descriptors.py`` — Stochastic Cascade node descriptors (§4.1) with scaled numerical node
  attributes appended.
* ``pyramid.py`` — the vocabulary-guided pyramid: Algorithm 1 (hierarchical k-means, bin
  diameters and weights) and the descent of descriptors into bins.
* ``histograms.py`` — sparse multi-resolution histograms and their exact tile-wide matching
  (the VG kernel of Definition 4.2, rewritten as in Theorem 4.3).
* ``kernel.py`` — :class:`DescriptorMatchingKernel`, which ties the three into the engine's
  fit → embed → pairwise contract.
"""
