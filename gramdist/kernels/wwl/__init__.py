"""Wasserstein Weisfeiler–Lehman graph kernels (Togninalli, Ghisu, Llinares-López, Rieck &
Borgwardt, "Wasserstein Weisfeiler-Lehman Graph Kernels", NeurIPS 2019).

* ``embeddings.py`` — the node embeddings (WL label sequences for categorical labels, the
  paper's continuous WL propagation for attributes) and :class:`NodeSets`, the variable-size
  embedding of a chunk (distinct node rows with multiplicities, ``len`` and slicing by graph).
* ``transport.py`` — the Wasserstein distances between two chunks: the exact closed form for
  categorical embeddings (a tree metric), POT's network simplex (``ot.emd2``) and Sinkhorn.
* ``kernel.py`` — :class:`WWLKernel` (``wwl``): the Laplacian kernel ``exp(-gamma * D_W)``, the
  PSD check of its report (:func:`smallest_eigenvalue_ratio`).
"""
