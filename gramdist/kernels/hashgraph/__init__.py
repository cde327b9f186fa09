"""Hash graph kernels (Morris, Kriege, Kersting & Mutzel, ICDM 2016).

Paper: C. Morris, N. M. Kriege, K. Kersting and P. Mutzel, *Faster kernels for graphs with
continuous attributes via hashing*, ICDM 2016 (arXiv:1610.00064).

Which file holds which part:

* ``kernel.py`` — the LSH discretisation of node attributes (drawn in ``fit`` from its seed,
  stored in the state), and the two instances of the paper: ``hgk_wl`` (WL subtree base
  kernel, :mod:`gramdist.kernels.features.wl`) and ``hgk_sp`` (shortest-path base kernel,
  :mod:`gramdist.kernels.shortest_path`), with explicit concatenated features.
"""
