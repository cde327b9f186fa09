"""Weisfeiler–Lehman edge kernel (Shervashidze, Schweitzer, van Leeuwen, Mehlhorn & Borgwardt,
*Weisfeiler–Lehman Graph Kernels*, JMLR 12, 2011, §3.4.1).

* ``kernel.py`` — :class:`WLEdgeKernel` (``wl_edge``): counts of edges by the sorted pair of
  their endpoints' WL labels (and the edge label) at iterations 0..h, explicit sparse
  features. The WL labels themselves come from
  :func:`gramdist.kernels.relabel.wl_labels` (the WL subtree kernel's relabelling).
"""
