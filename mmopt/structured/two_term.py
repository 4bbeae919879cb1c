"""The exact error of a union of two product strategies, on any union-of-products workload, in O(Σ nᵢ³ + N·K).

Notation: see README and :mod:`mmopt.structured.analysis`. OPT_+ on a two-term workload (R⊗I ∪ I⊗R, prefix on one
attribute ∪ the other, …) returns A = [w₁ ⊗ᵢ Aᵢ; w₂ ⊗ᵢ Bᵢ], whose Gram X = w₁² ⊗ᵢ Pᵢ + w₂² ⊗ᵢ Qᵢ (Pᵢ = AᵢᵀAᵢ,
Qᵢ = BᵢᵀBᵢ) is no product, so the product and marginal algebras do not apply. With every Pᵢ positive definite,
Pᵢ = LᵢLᵢᵀ (Cholesky) and Lᵢ⁻¹QᵢLᵢ⁻ᵀ = UᵢdiagμᵢUᵢᵀ give, with Tᵢ = Lᵢ⁻ᵀUᵢ,

    X⁻¹ = (⊗ᵢ Tᵢ) diag(1 / (w₁² + w₂² ⊗ᵢ μᵢ)) (⊗ᵢ Tᵢ)ᵀ,   tr(G X⁻¹) = Σₖ vₖ² Σₐ [⊗ᵢ diag(TᵢᵀGₖᵢTᵢ)]ₐ / Dₐ

for the workload G = Σₖ vₖ² ⊗ᵢ Gₖᵢ (a simultaneous diagonalisation of the pair per attribute; the N-vectors are
Kronecker products of n-vectors, nothing N×N). Where no side has positive-definite factors on every attribute, or
one is too ill-conditioned for the congruence to keep the digits (:data:`MAX_CONDITION`), this returns None and the
caller falls back to its dense or bracketing path. The largest per-query variance is bounded above by the Löwner
order: X ⪰ w₁² ⊗ Pᵢ gives qᵀX⁻¹q ≤ w₁⁻² ∏ᵢ qᵢᵀPᵢ⁻¹qᵢ (likewise for Q), whose maximum over a product's rows is the
product of the factors' maxima.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg

from mmopt.dense.profile import numerical_rank
from mmopt.structured import factors as fc
from mmopt.structured.eigenbasis import ACCURACY  # the first-order relative error accepted as exact, one for both
from mmopt.structured.strategies import _kron_vectors

__all__ = ["ACCURACY", "MAX_CONDITION", "commuting_nuclear", "two_term"]

#: The congruence by Lᵢ amplifies round-off by cond(Pᵢ); past this it is not trusted (the dense path runs).
MAX_CONDITION = 1e8
_EPS = np.finfo(float).eps


def _side(grams):
    """Cholesky factors of a side's per-attribute Grams, or None if one is not well-conditioned and PD."""
    out = []
    for P in grams:
        lam = np.linalg.eigvalsh(P)
        if lam[0] <= 0 or lam[-1] > MAX_CONDITION * lam[0]:
            return None
        out.append(scipy.linalg.cholesky(P, lower=True))
    return out


def two_term(workload, strategy_terms, cache: fc.Cache | None = None) -> tuple[float, float] | None:
    """(tr(G X⁻¹), an upper bound on max_q qᵀX⁻¹q) for a two-term strategy (module docstring), or None.

    Examples
    --------
    >>> from mmopt.structured import workloads as sw, strategies as ss
    >>> import mmopt
    >>> W = sw.union([sw.kron(sw.prefix(3), np.eye(2)), sw.kron(np.eye(3), sw.prefix(2))])
    >>> A = ss.union_strategy([ss.kron_strategy(np.eye(3), np.eye(2)), ss.kron_strategy(np.eye(3), np.eye(2))])
    >>> unit, _ = two_term(W, A.terms)
    >>> bool(np.isclose(unit, np.trace(np.linalg.pinv(A.gram) @ W.gram)))
    True
    """
    if len(strategy_terms) != 2:
        return None
    cache = cache or fc.Cache()
    first, second = strategy_terms
    P = [f.gram for f in first.factors]  # Strategy.gram: cached on the factor, sparse where it is mostly zero
    Q = [f.gram for f in second.factors]
    w1, w2 = first.weight ** 2, second.weight ** 2
    L = _side(P)
    if L is None:
        P, Q, w1, w2 = Q, P, w2, w1
        L = _side(P)
        if L is None:
            return None
    T, mu = [], []
    for Li, Qi in zip(L, Q, strict=True):
        C = scipy.linalg.solve_triangular(Li, scipy.linalg.solve_triangular(Li, Qi, lower=True).T, lower=True)
        m_i, U = np.linalg.eigh((C + C.T) / 2)
        mu.append(np.clip(m_i, 0.0, None))  # Qᵢ is PSD: negative eigenvalues are round-off
        T.append(scipy.linalg.solve_triangular(Li.T, U, lower=False))
    D = w1 + w2 * _kron_vectors(mu)
    # each μᵢ is known to ~nᵢ·eps·max μᵢ, and the product multiplies one attribute's error by the others' μ: with
    # factor conditions of 10⁷ each (each under MAX_CONDITION) the total came out 0.7 % off, labelled exact (a
    # helper's audit). |δD| ≤ w₂·Σᵢ δμᵢ ⊗ ∏_{j≠i} μⱼ moves Σ g/D by at most Σ g·|δD|/D² to first order.
    dD = w2 * sum(_kron_vectors([np.full(m.size, m.size * _EPS * float(m.max())) if j == i else m
                                 for j, m in enumerate(mu)]) for i in range(len(mu)))
    Pinv = [np.linalg.inv(Pi) for Pi in P]  # small (nᵢ×nᵢ): for the Löwner bound on the largest variance
    total, upper, drift = 0.0, 0.0, 0.0
    for t in workload.terms:
        grams = [cache.get(fc.workload_gram, f) for f in t.factors]
        diag = _kron_vectors([np.einsum("ij,ij->j", Ti, G @ Ti) for Ti, G in zip(T, grams, strict=True)])
        total += t.weight ** 2 * float(np.sum(diag / D))
        drift += t.weight ** 2 * float(np.sum(np.abs(diag) * dD / D**2))
        row_max = math.prod(fc.query_terms_max(f, M)[1] for f, M in zip(t.factors, Pinv, strict=True))
        upper = max(upper, t.weight ** 2 * row_max / w1)
    if not drift <= ACCURACY * total:
        return None  # not exact to ACCURACY: the other routes
    return total, upper


def commuting_nuclear(workload, cache: fc.Cache | None = None, max_entries: int = 10**8) -> float | None:
    """Σσ(W) for a union whose Gram factors commute on every attribute (R⊗I ∪ I⊗R, marginals of identities, …):
    one orthogonal Vᵢ per attribute diagonalises every Gₖᵢ, so λ(G) = Σₖ vₖ² ⊗ᵢ diag(VᵢᵀGₖᵢVᵢ), an N-vector.
    None when a pair does not commute, or a factor is not diagonal in the common basis (to 10⁻⁹ relative), or N is
    past ``max_entries``.

    Examples
    --------
    >>> from mmopt.structured import workloads as sw
    >>> W = sw.union([sw.kron(sw.all_range(4), np.eye(3)), sw.kron(np.eye(4), sw.all_range(3))])
    >>> bool(np.isclose(commuting_nuclear(W), np.sum(np.sqrt(np.clip(np.linalg.eigvalsh(W.gram), 0, None)))))
    True
    """
    if workload.domain_size > max_entries:
        return None
    cache = cache or fc.Cache()
    grams = [[cache.get(fc.workload_gram, f) for f in t.factors] for t in workload.terms]
    bases = []
    for i in range(len(workload.shape)):
        # the distinct factors of attribute i
        Gs = list({id(t.factors[i]): g[i] for t, g in zip(workload.terms, grams, strict=True)}.values())
        scale = max(float(np.linalg.norm(G)) for G in Gs) or 1.0
        if any(np.linalg.norm(A @ B - B @ A) > 1e-12 * scale**2 for A in Gs for B in Gs):
            return None
        # a generic combination separates the joint eigenspaces (its eigenvalues are distinct where theirs are)
        combo = sum(G * (1.0 + 0.618034 * k) ** 0.5 / (np.linalg.norm(G) or 1.0) for k, G in enumerate(Gs))
        _, V = np.linalg.eigh(combo)
        for G in Gs:
            R = V.T @ G @ V
            if np.linalg.norm(R - np.diag(np.diag(R))) > 1e-9 * scale:
                return None
        bases.append(V)
    lam = sum(t.weight ** 2 * _kron_vectors([np.einsum("ij,ij->j", V, G @ V) for V, G in zip(bases, g, strict=True)])
              for t, g in zip(workload.terms, grams, strict=True))
    # the one rank rule (mmopt.dense.profile.numerical_rank) on G's spectrum, as the root Gram route applies it: G's
    # zero eigenvalues come back as ~eps·λ_max, and the sum of their square roots lifted an "exact" bound above the
    # true one (+2.3·10⁻⁷ relative at 256 cells; a helper's audit), the unsafe side of a lower bound
    lam = np.sort(np.clip(lam, 0.0, None))[::-1]
    lam[numerical_rank(lam, (lam.size, lam.size)):] = 0.0
    return float(np.sum(np.sqrt(lam)))
