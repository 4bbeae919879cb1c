"""The data-independent QuadTree of experiments.dpbench, with an exact least-squares solve in the Haar basis.

Cormode, Procopiuc, Srivastava, Shen & Yu, *Differentially Private Spatial Decompositions* (ICDE 2012): every
node of the complete quad-tree on an n × n grid is a noisy count, level budgets geometric (leaves largest),
then ordinary least squares over the tree. The strategy is :func:`mmopt.baselines.hierarchies.quadtree` (its docstring
has the levels and the budget); A = Σ_ℓ w_ℓ (L_ℓ ⊗ L_ℓ) with Δ₁ = Σ w_ℓ = 1.

Why a solve of its own: the library's union-strategy least squares (LSMR) and :func:`mmopt.evaluate` take
90–100 s each at 64 × 64 cells on this machine (measured), because nothing there knows the tree. Each level's
Gram L_ℓᵀL_ℓ is block-constant, hence diagonal in the orthonormal Haar basis Q (the fact
:func:`mmopt.baselines.transforms.haar_evaluate` uses), so X = AᵀA = (Q ⊗ Q)ᵀ D (Q ⊗ Q) with D = Σ_ℓ w_ℓ² d_ℓ ⊗ d_ℓ,
d_ℓ = diag(Q L_ℓᵀL_ℓ Qᵀ), and the least-squares estimate is x̂ = X⁻¹Aᵀy = Qᵀ [(Q Aᵀy Qᵀ) ⊘ D] Q: two small
matrix products per trial. D > 0 because the leaves are measured (X has full rank).

Noise is numpy's, seeded: simulation, as :func:`mmopt.matrix_mechanism`.
"""

from __future__ import annotations

import numpy as np

from mmopt.baselines.transforms import haar_basis
from mmopt.structured import mechanism as smech
from mmopt.structured.strategies import sensitivity

__all__ = ["haar_spectrum", "least_squares", "mechanism"]


def haar_spectrum(A) -> tuple[np.ndarray, np.ndarray]:
    """(Q, D): the Haar basis of A's side and the n × n eigenvalues of AᵀA in the basis Q ⊗ Q (module docstring).

    Raises ValueError if a factor's Gram is not diagonal in the Haar basis (A is then not a quad-tree-like
    union of Haar-diagonal products) or A is not square n × n."""
    n1, n2 = A.shape
    if n1 != n2:
        raise ValueError(f"haar_spectrum: needs an n × n strategy. Got {A.shape}.")
    Q = haar_basis(n1)[0]
    D = np.zeros((n1, n1))
    for t in A.terms:
        ds = []
        for f in t.factors:
            Y = Q @ f.gram @ Q.T
            d = np.diagonal(Y).copy()
            if float(np.abs(Y - np.diag(d)).max()) > 1e-9 * max(float(d.max()), 1e-300):
                raise ValueError(f"haar_spectrum: factor '{f.name}' of '{A.name}' is not diagonal in the Haar basis.")
            ds.append(d)
        D += t.weight**2 * np.outer(ds[0], ds[1])
    if float(D.min()) <= 1e-12 * float(D.max()):
        raise ValueError(f"haar_spectrum: '{A.name}' does not have full rank (some Haar coefficient is unmeasured).")
    return Q, D


def least_squares(A, y: np.ndarray, spectrum=None) -> np.ndarray:
    """x̂ = (AᵀA)⁻¹Aᵀy for each row of y (trials × rows of A), shaped (trials, n, n)."""
    Q, D = haar_spectrum(A) if spectrum is None else spectrum
    y = np.atleast_2d(y)
    out = np.empty((y.shape[0], *A.shape))
    for k, row in enumerate(y):
        z = Q @ smech.strategy_apply_transpose(A, row) @ Q.T  # Aᵀy in the Haar basis
        out[k] = Q.T @ (z / D) @ Q
    return out


def mechanism(A, x: np.ndarray, epsilon: float, gen: np.random.Generator, trials: int, spectrum=None) -> np.ndarray:
    """(trials, n, n) least-squares estimates from y = A x + Lap(Δ₁/ε) per row, Δ₁ = A's L1 sensitivity
    (:func:`mmopt.structured.sensitivity`; exact for the quad-tree: Σ_ℓ w_ℓ, one node per level holds a cell)."""
    delta = sensitivity(A, "l1").value
    Ax = smech.strategy_apply(A, np.asarray(x, dtype=float))
    y = Ax + gen.laplace(0.0, delta / epsilon, size=(trials, Ax.size))
    return least_squares(A, y, spectrum)
