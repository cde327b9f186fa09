"""The ARPACK wrapper (``gramdist.kernels.eigen``) against SciPy's own ``eigsh``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from gramdist.kernels.eigen import eigsh


@pytest.mark.parametrize("which, k, vectors", [("LM", 6, True), ("SA", 1, False), ("LA", 3, True)])
def test_eigsh_gives_scipys_eigenpairs_bit_for_bit(which, k, vectors):
    """The same products in the same order: the eigenpairs of a random graph's adjacency are
    SciPy's, to the last bit (integer-typed input converted as SciPy converts it)."""
    rng = np.random.default_rng(4)
    n = 120
    a = sp.random(n, n, density=0.04, random_state=rng, format="csr")
    a = ((a + a.T) > 0).astype(np.int64).tocsr()
    v0 = np.linspace(1.0, 2.0, n)
    kw = dict(k=k, which=which, v0=v0, tol=0.0, return_eigenvectors=vectors)
    got = eigsh(a, **kw)
    want = spla.eigsh(a.astype(np.float64), **kw)
    for x, y in zip(got if vectors else [got], want if vectors else [want]):
        assert np.array_equal(x, y)
