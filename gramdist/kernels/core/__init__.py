"""The core framework (Nikolentzos, Meladianos, Limnios & Vazirgiannis, "A Degeneracy Framework
for Graph Similarity", IJCAI 2018): any graph kernel applied to the k-cores of two graphs.

* ``decomposition.py`` — core numbers of every node of a batch (vectorised peeling) and the
  batch of the i-cores of chosen graphs (induced subgraphs, labels and attributes kept).
* ``kernel.py`` — :class:`CoreKernel` (``core``): wraps a registered base kernel
  (``kernel: {name: core, base: {name: wl, h: 3}}``), nests its state, and concatenates its
  explicit features over the cores when the base has them.
"""
