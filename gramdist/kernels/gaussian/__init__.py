"""Kernels between graphs seen as Gaussians, compared by the Bhattacharyya kernel.

Papers: Shrivastava & Li, *Graph Kernels via Functional Embedding* (the power kernel), and
Kondor & Pan, *The Multiscale Laplacian Graph Kernel* (NIPS 2016; FLG and MLG).

Which file holds which part:

* ``bhattacharyya.py`` — the closed-form Bhattacharyya kernel between Gaussians, batched over
  pairs (power Eq. 3/4; MLG Eq. 2-4): the shared core.
* ``power.py`` — :class:`PowerKernel`: the power-iteration summary (Algorithm 1) and its
  Gaussian.
* ``mlg.py`` — :class:`FLGKernel` and :class:`MLGKernel`: feature-space Laplacian Gaussians
  (Definitions 2 and 4) and the multiscale recursion with its per-level low-rank basis (§4).
"""
