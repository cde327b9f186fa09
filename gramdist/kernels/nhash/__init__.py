"""Neighbourhood hash kernel (Hido & Kashima, *A Linear-Time Graph Kernel*, ICDM 2009).

* ``kernel.py`` — :class:`NeighborhoodHashKernel` (``nh``): bit-vector labels, the simple and
  count-sensitive neighbourhood hashes (ROT and XOR), and the kernel averaged over ``R``
  hash iterations of the ratio ``c / (|V| + |V'| - c)`` of common labels; the common-label
  counts come from the unary features of :mod:`gramdist.kernels.intersection`.
"""
