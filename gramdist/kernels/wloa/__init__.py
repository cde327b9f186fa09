"""Weisfeiler–Lehman optimal assignment kernel (Kriege, Giscard & Wilson, *On Valid Optimal
Assignment Kernels and Applications to Graph Classification*, NIPS 2016).

* ``intersection.py`` — the finite feature map of histogram intersection (unary-coded
  counts), shared with the neighbourhood hash kernel.
* ``kernel.py`` — :class:`WLOAKernel` (``wloa``): the histogram-intersection form of the
  optimal assignment on the WL label hierarchy, with explicit sparse features. The WL labels
  come from :func:`gramdist.kernels.relabel.wl_labels`.
"""
