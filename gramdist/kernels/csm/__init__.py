"""Connected subgraph matching kernel, CSM (Kriege & Mutzel, "Subgraph matching kernels for
attributed graphs", ICML 2012).

* ``kernel.py`` — :class:`CSMKernel` (``csm``): the kernel as a sum over pairs of isomorphic
  connected induced subgraphs of at most k nodes (the paper's product-graph cliques), explicit
  features for discrete labels, a vectorised per-class sum for node attributes. It uses the
  enumeration and canonical forms of ``gramdist/kernels/subgraphs.py`` (shared with graphlets).
"""
