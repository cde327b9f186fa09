"""Propagation kernels (Neumann, Garnett, Bauckhage & Kersting, *Propagation kernels:
efficient graph kernels from propagated information*, Machine Learning 102, 2016).

* ``random.py`` — the seeded random numbers of the locality-sensitive hashing: uniforms,
  Gaussians and Cauchy variates as functions of (seed, stream, index), identical in every
  process.
* ``kernel.py`` — :class:`PropagationKernel` (``propagation``: label distributions diffused
  or label-propagated, hashed by a random projection per iteration) and
  :class:`PropagationAttrKernel` (``propagation_attr``: the same for numerical node
  attributes); explicit sparse features (bin counts per iteration).
"""
