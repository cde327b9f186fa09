"""``gramdist.kernels.eigen``: the ARPACK wrapper against SciPy's own ``eigsh``, and the batched
Lanczos (``smallest_eigenvalues``) against dense ``eigvalsh``."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from gramdist.kernels.eigen import eigsh, smallest_eigenvalues


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


def _adjacency(g: nx.Graph) -> sp.csr_matrix:
    return sp.csr_matrix(nx.to_scipy_sparse_array(g, nodelist=range(g.number_of_nodes()), dtype=np.float64))


def _graphs() -> list[sp.spmatrix]:
    """Adjacencies with easy and hard spectra: random, disconnected, bipartite (λ_min = -λ_max),
    highly symmetric ones whose Krylov space is exhausted in a few steps (a star, copies of one
    edge, a complete graph), and matrices that are not adjacencies (λ_min > 0, a 1 × 1 block,
    the identity: β = 0 at the first step)."""
    rng = np.random.default_rng(8)
    out = [_adjacency(nx.gnm_random_graph(n, m, seed=int(rng.integers(1 << 30))))
           for n, m in [(150, 300), (400, 1200), (60, 70), (900, 2000)]]
    out += [_adjacency(nx.disjoint_union(nx.cycle_graph(40), nx.path_graph(75))),
            _adjacency(nx.complete_bipartite_graph(30, 50)), _adjacency(nx.star_graph(120)),
            _adjacency(nx.from_edgelist([(2 * i, 2 * i + 1) for i in range(60)])),
            _adjacency(nx.complete_graph(45)), _adjacency(nx.petersen_graph())]
    lone_edge = nx.empty_graph(150)
    lone_edge.add_edge(3, 97)  # Krylov space of dimension 3, then rounding noise
    out.append(_adjacency(nx.disjoint_union(lone_edge, nx.star_graph(40))))
    out += [sp.diags(np.linspace(1.0, 3.0, 70), format="csr"), sp.csr_matrix([[3.0]]), sp.identity(25, format="csr")]
    return out


def test_smallest_eigenvalues_of_blocks_match_dense_eigvalsh():
    blocks = _graphs()
    offsets = np.concatenate([[0], np.cumsum([b.shape[0] for b in blocks])])
    got = smallest_eigenvalues(sp.block_diag(blocks, format="csr"), offsets)
    want = np.array([np.linalg.eigvalsh(b.toarray())[0] for b in blocks])
    assert np.allclose(got, want, rtol=1e-11, atol=1e-12)
    # a Ritz value never lies below the smallest eigenvalue (ρ = -λ_min stays an upper bound)
    assert (got >= want - 1e-12 * np.abs(want)).all()


def test_a_blocks_eigenvalue_has_the_same_bits_alone_and_among_others():
    """Each block's steps use its own rows and segments only: alone, in another order and
    among other blocks (which finish at other steps and are dropped), the same bits."""
    blocks = _graphs()
    offsets = np.concatenate([[0], np.cumsum([b.shape[0] for b in blocks])])
    together = smallest_eigenvalues(sp.block_diag(blocks, format="csr"), offsets)
    order = np.random.default_rng(1).permutation(len(blocks))
    shuffled = [blocks[i] for i in order]
    offsets2 = np.concatenate([[0], np.cumsum([b.shape[0] for b in shuffled])])
    assert np.array_equal(smallest_eigenvalues(sp.block_diag(shuffled, format="csr"), offsets2), together[order])
    for i, b in enumerate(blocks):
        assert smallest_eigenvalues(b, [0, b.shape[0]])[0] == together[i]


def test_smallest_eigenvalues_checks_its_blocks():
    with pytest.raises(ValueError, match="at least one row"):
        smallest_eigenvalues(sp.identity(4, format="csr"), [0, 2, 2, 4])
    assert smallest_eigenvalues(sp.csr_matrix((0, 0)), [0]).shape == (0,)
