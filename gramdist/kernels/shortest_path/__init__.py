"""Shortest-path kernels: Borgwardt & Kriegel (ICDM 2005) and its WL version (Shervashidze et al. 2011).

Papers: K. M. Borgwardt and H.-P. Kriegel, *Shortest-path kernels on graphs*, ICDM 2005;
N. Shervashidze, P. Schweitzer, E. J. van Leeuwen, K. Mehlhorn and K. M. Borgwardt,
*Weisfeiler–Lehman graph kernels*, JMLR 12, 2011 (the WL framework with the shortest-path
base kernel, "WLSP"). Both are baselines of the DM paper's Tables 2 and 3.

Which file holds which part:

* (``gramdist/kernels/allpairs.py``, shared with GraphHopper and the hash graph kernels, so
  outside every family folder) — all-pairs hop distances of every graph of a batch (BFS in
  bounded blocks) and the vectorised counting of ``(label(u), label(v), d)`` per graph.
* ``sp.py`` — ``sp``: the labelled / unlabelled shortest-path kernel with explicit count
  features (equal to GraKeL's ``ShortestPath``; relation to the TUDataset C++ baseline).
* ``attributed.py`` — ``sp_attr``: the shortest-path kernel on numerical node attributes
  (a node kernel on the endpoints times a kernel on the lengths), explicit features for
  the linear node kernel, a pairwise O(n·n'·(n+n')) formulation for the Gaussian one.
* ``wlsp.py`` — ``wlsp``: shortest-path features on the WL labels of iterations 0..h.
"""
