"""Exact tr(G X⁺) for a union strategy whose factor Grams commute attribute by attribute (a shared eigenbasis).

Notation: see README. For A = [θ₁K₁; θ₂K₂; …] with Kₜ = ⊗ᵢ Aᵢ⁽ᵗ⁾, X = AᵀA = Σₜ θₜ² ⊗ᵢ Xᵢ⁽ᵗ⁾. When, for each
attribute i, the Grams Xᵢ⁽ᵗ⁾ of all terms commute, they share an orthonormal eigenbasis Qᵢ:
Xᵢ⁽ᵗ⁾ = Qᵢ diag(dᵢ⁽ᵗ⁾) Qᵢᵀ, so X = (⊗Qᵢ) D (⊗Qᵢ)ᵀ with D = Σₜ θₜ² ⊗ᵢ dᵢ⁽ᵗ⁾, and for G = Σⱼ wⱼ² ⊗ᵢ Gᵢ⁽ʲ⁾

    tr(G X⁺) = Σⱼ wⱼ² Σ_cells (⊗ᵢ gᵢ⁽ʲ⁾) / D,   gᵢ = diag(Qᵢᵀ Gᵢ Qᵢ),

O(Σᵢ nᵢ³·T + N·(T + J)) with nothing N×N. This is :func:`mmopt.baselines.transforms.haar_evaluate` without
naming the basis: the quad-tree, the H₂/Hb trees and Privelet per attribute (nested partitions' block Grams
commute), identity and total mixes, and any other commuting family. Before it, a union past the dense limit
(2-D ranges on 128², quad-tree) got only the Löwner bracket, whose ends were 29× apart.

Qᵢ is the eigenbasis of a fixed generic combination Σₜ cₜ Xᵢ⁽ᵗ⁾/‖Xᵢ⁽ᵗ⁾‖: for a commuting family its
eigenspaces are the joint ones (a coincidence of the cₜ aside). Each factor is then checked diagonal in Qᵢ, and
the neglected off-diagonal part Eₜ bounds the error: X differs from (⊗Q) D (⊗Q)ᵀ by at most
Σₜ θₜ² Σᵢ ‖Eᵢ⁽ᵗ⁾‖ Πⱼ≠ᵢ ‖Xⱼ⁽ᵗ⁾‖ =: δ in norm, which moves tr(G X⁺) by at most δ·tr(X⁺ G X⁺) = δ·Σ g/D² to first
order; when that is under :data:`ACCURACY` of the total, the total is exact to that relative accuracy.
Otherwise (a non-commuting family, or a near-degenerate basis) :func:`unit` returns None and the caller keeps its
other routes.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt.dense.support import support_tolerance
from mmopt.structured.strategies import _kron_vectors

__all__ = ["ACCURACY", "MAX_FLOPS", "unit"]

ACCURACY = 1e-6  # the first-order bound on the relative error accepted as exact. The neglected part is mostly the
# round-off of Qᵀ X Q (its Frobenius norm ~n·eps·‖X‖, itself a loose bound on the spectral norm), so the bound is
# far from attained: 2.2·10⁻⁹ for the quad-tree on 2-D ranges at 128² and 10⁻⁸ at 256², while at 64² the total
# agrees with the dense path's to all 16 digits (bound 4.7·10⁻¹⁰).
#: The flops the route may spend (an eigh ~10n³ and two products ~4n³ per distinct factor, per attribute): about
#: 10 CPU s; past it the caller's other routes run.
MAX_FLOPS = 4e10
_EPS = np.finfo(float).eps


def unit(workload, strategy, caller: str = "evaluate") -> float | None:
    """tr(G X⁺) for implicit W and A when A's factor Grams commute per attribute (see module docstring), else None.

    Raises :class:`~mmopt._base.guards.Unsupported` when G has weight where D is zero.

    Examples
    --------
    >>> from mmopt import strategy as st, workload as wl
    >>> G1 = wl.all_range(16).gram                 # 2-D ranges: G = G₁ ⊗ G₁
    >>> exact = unit(wl.ranges_2d(16), st.quadtree(16))
    >>> bool(np.isclose(exact, np.trace(np.kron(G1, G1) @ np.linalg.pinv(st.quadtree(16).gram)), rtol=1e-10))
    True
    """
    distinct = [len({id(t.factors[i]) for t in strategy.terms}) for i in range(len(strategy.shape))]
    if sum(n**3 * (10 + 4 * T) for n, T in zip(strategy.shape, distinct, strict=True)) > MAX_FLOPS:
        return None  # the other routes (the bracket's per-factor work is of the same order, once per factor)
    bases, spectra = {}, {}  # spectra[(i, id(factor))]: (its diagonal in Qᵢ, the bound on what that neglects)
    for i, n in enumerate(strategy.shape):
        grams = {id(t.factors[i]): t.factors[i].gram for t in strategy.terms}
        found = _joint_basis(list(grams.values()), n)
        if found is None:
            return None
        bases[i] = found[0]
        spectra.update({(i, key): part for key, part in zip(grams, zip(*found[1:], strict=True), strict=True)})
    D, perturbation = 0.0, 0.0
    for t in strategy.terms:
        ds, slack = zip(*(spectra[(i, id(f))] for i, f in enumerate(t.factors)), strict=True)
        D = D + t.weight**2 * _kron_vectors(ds)
        norms = [float(np.max(d)) for d in ds]  # ‖Xᵢ‖ (the diagonal is its spectrum up to E)
        perturbation += t.weight**2 * sum(s * math.prod(norms[:i] + norms[i + 1:]) for i, s in enumerate(slack))
    pos = D > 0
    if not np.any(pos):
        return None
    total, slope = 0.0, 0.0
    for t in workload.terms:
        gs = [np.einsum("ji,jk,ki->i", bases[i], f.mean_gram * float(f.n_queries), bases[i])
              for i, f in enumerate(t.factors)]
        g = t.weight**2 * _kron_vectors(gs)
        if float(np.sum(g[~pos])) > support_tolerance(g.size) * float(np.sum(g)):
            raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support workload '{workload.name}': "
                              "its Gram has weight on eigendirections where AᵀA is zero. Add rows covering them.")
        total += float(np.sum(g[pos] / D[pos]))
        slope += float(np.sum(g[pos] / D[pos] ** 2))
    # |tr(G (X + E)⁻¹) − tr(G X⁻¹)| ≤ ‖E‖·tr(X⁻¹ G X⁻¹) to first order, and tr(X⁻¹ G X⁻¹) = Σ g/D² in the basis
    return total if perturbation * slope <= ACCURACY * total else None


def _joint_basis(grams: list, n: int):
    """(Q, the diagonals of Qᵀ Xₜ Q with round-off zeros cleared, ‖off-diagonal‖₂ bounds) or None when some Xₜ
    is not diagonal in the eigenbasis of a generic combination (to a relative 10⁻⁸, round-off being far less);
    the bounds carry the cleared round-off too."""
    scales = [float(np.linalg.norm(X)) for X in grams]
    if len(grams) == 1 or not all(s > 0 for s in scales):
        lam, Q = np.linalg.eigh(grams[int(np.argmax(scales))])
    else:
        weights = 1.0 + np.sqrt(np.arange(2, len(grams) + 2)) % 1.0  # fixed, generic: irrational fractional parts
        lam, Q = np.linalg.eigh(sum(c * X / s for c, X, s in zip(weights, grams, scales, strict=True)))
    diagonals, slack = [], []
    for X, s in zip(grams, scales, strict=True):
        Y = Q.T @ X @ Q
        d = np.diagonal(Y).copy()
        off = Y - np.diag(d)
        bound = float(np.linalg.norm(off))  # Frobenius ≥ spectral
        if bound > 1e-8 * max(s, 1e-300):
            return None
        round_off = 64 * n * _EPS * max(float(np.max(d)), 0.0)
        d[d <= round_off] = 0.0  # a PSD factor's zero eigenvalues come back as ±round-off
        diagonals.append(d)
        slack.append(bound + round_off)
    return Q, diagonals, slack
