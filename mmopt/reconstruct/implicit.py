"""Non-negative reconstruction on product domains (implicit unions of Kronecker products), never forming N×N.

Notation: see README. Both choices minimise ½ hᵀQh − cᵀh over C = {h ≥ 0, h_Z = 0 [, Σh = total]} by
:func:`~mmopt.reconstruct.first_order.fista`:

* ``"nnls"``: Q = AᵀA = Σₖ θₖ² ⊗ᵢ Aᵢᵀ Aᵢ, c = Aᵀy, applied axis by axis (a sparse factor as Aᵢ then Aᵢᵀ, a
  dense one through its Gram), L = Σₖ θₖ² ∏ᵢ ‖Aᵢ‖₂² ≥ λ_max(AᵀA) (equal for a product strategy, since the
  eigenvalues of a Kronecker product are the products of the factors'; the triangle inequality for a union).
* ``"projection"``: Q = G = Σₖ wₖ² ⊗ᵢ Gᵢ (the workload's implicit Gram), c = G x̂, L = Σₖ wₖ² ∏ᵢ λ_max(Gᵢ).

When Q is a single Kronecker product (a product strategy; a product workload) and every factor has at most
:data:`mmopt.reconstruct.admm.MAX_FACTOR` cells, :func:`mmopt.reconstruct.admm.solve` replaces FISTA: ADMM with the
exact (Q + ρI)⁻¹ from the factors' eigendecompositions, a few hundred steps where FISTA needs thousands
(NNLS after H₂ ⊗ H₂ on 10⁶ cells: benchmarks/bench_reconstruct.py). Both stop on the same relative KKT residual.

Memory is O(N + Σ factor sizes²). The strategy and workload are read through their ``terms`` (``weight`` and
``factors``) only, so this module does not import :mod:`mmopt.structured` (which calls it).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import linalg, sparse

from mmopt.reconstruct import admm
from mmopt.reconstruct._common import Reconstruction
from mmopt.reconstruct.first_order import DEFAULT_MAX_ITERATIONS, DEFAULT_TOL, fista

_SPARSE_DENSITY = 0.25  # a factor with fewer non-zeros than this fraction is applied as a sparse matrix


def _along(op, x: np.ndarray, axis: int) -> np.ndarray:
    """Apply ``op`` (a matrix, dense or sparse, or a callable on 2-D arrays) along one axis of x."""
    xm = np.moveaxis(x, axis, 0)
    flat = xm.reshape(xm.shape[0], -1)
    out = op(flat) if callable(op) else op @ flat
    return np.moveaxis(np.asarray(out).reshape((out.shape[0],) + xm.shape[1:]), 0, axis)


def _kron(ops, x: np.ndarray) -> np.ndarray:
    for i, op in enumerate(ops):
        x = _along(op, x, i)
    return x


def _normal_op(M: np.ndarray):
    """v ↦ MᵀM v: sparse M then Mᵀ when M is sparse enough to beat its n×n Gram, else the Gram itself."""
    p, n = M.shape
    nnz = int(np.count_nonzero(M))
    if nnz < _SPARSE_DENSITY * M.size and 2 * nnz < n * n:
        S = sparse.csr_matrix(M)
        St = S.T.tocsr()
        return lambda v: St @ (S @ v)
    return M.T @ M


def _transpose_op(M: np.ndarray):
    return sparse.csr_matrix(M.T) if np.count_nonzero(M) < _SPARSE_DENSITY * M.size else M.T


def _lambda_max_sq(M: np.ndarray) -> float:
    return float(linalg.svdvals(M, check_finite=False)[0]) ** 2


def nnls(strategy, y: np.ndarray, start: np.ndarray, *, total=None, zeros=None, tol: float = DEFAULT_TOL,
         max_iterations: int = DEFAULT_MAX_ITERATIONS) -> tuple[np.ndarray, Reconstruction]:
    """argmin ‖A h − y‖₂ over C for an implicit A (``strategy.terms``); h shaped like the domain.

    ``start`` is the least-squares x̂ (the unconstrained minimiser), projected onto C for the first iterate.
    """
    shape = tuple(strategy.shape)
    terms = [(float(t.weight) ** 2, [_normal_op(f.matrix) for f in t.factors]) for t in strategy.terms]
    c, pos = np.zeros(shape), 0
    for t in strategy.terms:
        rows = tuple(f.matrix.shape[0] for f in t.factors)
        block = y[pos:pos + math.prod(rows)].reshape(rows)
        c += float(t.weight) * _kron([_transpose_op(f.matrix) for f in t.factors], block)
        pos += math.prod(rows)

    def Q(h: np.ndarray) -> np.ndarray:
        x = h.reshape(shape)
        return sum(w * _kron(ops, x) for w, ops in terms).ravel()

    if len(strategy.terms) == 1 and admm.usable(shape):
        t = strategy.terms[0]
        grams = [f.matrix.T @ f.matrix for f in t.factors]
        grams[0] = grams[0] * float(t.weight) ** 2
        h, it, res = admm.solve(grams, Q, c.ravel(), np.asarray(start, float).ravel(), total=total, zeros=zeros,
                                tol=tol, max_iterations=max_iterations, what="nnls")
        return h.reshape(shape), Reconstruction("nnls", "admm", it, res, tol, total, _count(zeros))
    L = sum(float(t.weight) ** 2 * math.prod(_lambda_max_sq(f.matrix) for f in t.factors) for t in strategy.terms)
    h, it, res = fista(Q, c.ravel(), L, np.asarray(start, float).ravel(), total=total, zeros=zeros, tol=tol,
                       max_iterations=max_iterations, what="nnls")
    return h.reshape(shape), Reconstruction("nnls", "fista", it, res, tol, total, _count(zeros))


def projection(workload, xhat: np.ndarray, *, total=None, zeros=None, tol: float = DEFAULT_TOL,
               max_iterations: int = DEFAULT_MAX_ITERATIONS) -> tuple[np.ndarray, Reconstruction]:
    """argmin (h − x̂)ᵀG(h − x̂) over C for an implicit workload (``workload.terms``); h shaped like the domain."""
    shape = tuple(workload.shape)
    terms = [(float(t.weight) ** 2, [f.mean_gram * float(f.n_queries) for f in t.factors]) for t in workload.terms]

    def Q(h: np.ndarray) -> np.ndarray:
        x = h.reshape(shape)
        return sum(w * _kron(Gs, x) for w, Gs in terms).ravel()

    x0 = np.asarray(xhat, float).ravel()
    if len(terms) == 1 and admm.usable(shape):
        w, Gs = terms[0]
        h, it, res = admm.solve([Gs[0] * w, *Gs[1:]], Q, Q(x0), x0, total=total, zeros=zeros, tol=tol,
                                max_iterations=max_iterations, what="projection")
        return h.reshape(shape), Reconstruction("projection", "admm", it, res, tol, total, _count(zeros))
    L = sum(w * math.prod(float(linalg.eigvalsh(G, check_finite=False)[-1]) for G in Gs) for w, Gs in terms)
    h, it, res = fista(Q, Q(x0), L, x0, total=total, zeros=zeros, tol=tol, max_iterations=max_iterations,
                       what="projection")
    return h.reshape(shape), Reconstruction("projection", "fista", it, res, tol, total, _count(zeros))


def _count(zeros) -> int:
    return 0 if zeros is None else int(np.sum(zeros))
