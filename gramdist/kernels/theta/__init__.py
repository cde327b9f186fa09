"""Lovász θ and SVM-θ kernels (Johansson, Jethava, Dubhashi & Bhattacharyya, "Global graph
kernels using geometric embeddings", ICML 2014).

* ``solvers.py`` — the numerical parts: the Lovász θ semidefinite program (cvxopt's interior
  point method, an optional dependency) and the orthonormal representation it yields; the
  one-class SVM of Jethava et al. (2013) as a non-negative QP (block principal pivoting);
  the batched minimum-norm point of small convex hulls (a subset's Lovász value).
* ``kernel.py`` — :class:`LovaszThetaKernel` (``lovasz_theta``) and :class:`SvmThetaKernel`
  (``svm_theta``): per graph, the representation and the sampled subset values (``embed``),
  then the paper's kernel over equal subset sizes with a linear (explicit features) or
  Gaussian base kernel.
"""
