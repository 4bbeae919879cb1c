"""A certified lower bound on the L2 optimum from the Lagrange dual, for symmetric 1- and 2-way unions.

Notation: see README; G = WᵀW, X = AᵀA, c = ``privacy.variance_factor``. Under L2 sensitivity every strategy's
total error is at least c·min{tr(G X⁻¹) : X ≻ 0, Xₓₓ ≤ 1}, and for any weights u ≥ 0 on the N cells

    tr(G X⁻¹) ≥ ν(u)² / Σu,    ν(u) = tr (D_u^{1/2} G D_u^{1/2})^{1/2}                            (1)

(weak duality: min_X tr(G X⁻¹) + t·tr(D_u X) = 2√t·ν(u) for t > 0 and tr(D_u X) ≤ Σu; maximise over t).
u = 1 is the SVD bound (ν(1)²/N); the maximum over u is the optimum itself (the L2 program's strong dual).

**Product weights.** Take u = ⊗ᵢ ũ (one weight vector per attribute, the same for all). With v = ũ^{1/2}, e = v/‖v‖
and an orthonormal completion V⊥ of e, a factor Gram β·J becomes β‖v‖²·eeᵀ and a factor Gram s·G₀ becomes
s·M, M = D^{1/2}G₀D^{1/2} = [[a, bᵀ], [b, C]] in the basis (e, V⊥). For a union whose terms are β·J or s·G₀ on
every attribute, with attribute sets S (the attributes carrying G₀) of size ≤ 2, the matrix D_u^{1/2}GD_u^{1/2}
lives on the blocks ∅, {i} (V⊥ on attribute i) and {i, j}. In the eigenbasis C = U diag(γ) Uᵀ, b̃ = Uᵀb, its
blocks have the coefficients (c_S the term weights w²∏β∏s summed per S, c_p the smallest over |S| = p)

    κ₀ = c₀‖v‖^{2d} + d·c₁·a‖v‖^{2d-2} + (d choose 2)·c₂·a²‖v‖^{2d-4},
    κ₁ = c₁‖v‖^{2d-2} + (d-1)·c₂·a‖v‖^{2d-4},    κ₂ = c₂‖v‖^{2d-4},

(∅,∅) = κ₀, (∅,{i}) = κ₁b̃ᵀ, ({i},{i}) = κ₁diag(γ), ({i},{j}) = κ₂b̃b̃ᵀ, (∅,{i,j}) = κ₂(b̃⊗b̃)ᵀ,
({i},{i,j}) = κ₂ diag(γ)⊗b̃ᵀ, ({i,j},{i,j}) = κ₂ diag(γ)⊗diag(γ), and 0 between distinct pairs. It commutes with
the permutations of the attributes, so it splits into its invariant part (dimension 1 + m + m(m+1)/2, m = n-1),
d-1 copies of its standard part (dimension m + m²) and pair directions left alone, with eigenvalues κ₂γ_kγ_l
(:mod:`mmopt.structured._dual_blocks` forms them). ν(u) is then the sum of √λ over the eigenvalues of two small
symmetric matrices and a closed-form remainder: exact, in O(n⁶) at worst instead of O(N³).

**Certification.** Any u is valid, so u is only searched: ũ = ũ₁ᵗ with ũ₁ the 1-D dual weights of G₀ alone
(golden-section search over t), then log ũ = t·log ũ₁ + Σₖ θₖPₖ with Legendre polynomials Pₖ (k ≤ 6) of the
position, by L-BFGS-B on ν's value (finite differences); the value reported is re-evaluated once with every
eigenvalue lowered by a round-off margin (64·eps × size × the block's Frobenius norm) before its square
root. Lowering c_S to
the smallest weight of its level keeps the bound valid (G ⪰ G' ⪰ 0 ⇒ tr G^{1/2} ≥ tr G'^{1/2}, Löwner–Heinz), so
unequal weights only cost tightness. It bounds the L1 (ε-DP) objective too:
a column's L1 norm is at least its L2 norm, so ‖A‖₁² tr(G X⁻¹) ≥ ‖A‖₂² tr(G X⁻¹), as for the SVD bound.

It is exact (the optimum) only when the optimal dual weights are of the searched form; ``exact`` is always
False here: the value is a certified lower bound on the optimum, not the SVD bound.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from mmopt._base import validation as v
from mmopt.privacy import Privacy
from mmopt.structured import factors as fc
from mmopt.structured._dual_blocks import MAX_SIZE, _form, _one_dim_weights, _value  # noqa: F401 (MAX_SIZE: API)
from mmopt.structured.workloads import ImplicitWorkload

__all__ = ["DualBound", "dual_bound", "dual_value", "optimum_floor"]

#: Legendre shapes added to log ũ₁ in the weight search.
_SHAPES = 6
#: evaluations of ν the bounded 1-D search over t takes (xatol 1e-3 on [0, 1.5]), for max_work's budget
_T_EVALUATIONS = 25
#: the work optimize spends on this bound (optimum_floor): ~100 evaluations at n = 32 (about 7 s), none past n ≈ 40
FLOOR_WORK = 1.2e11


@dataclass(frozen=True)
class DualBound:
    """A certified lower bound on every strategy's total error, either noise (``exact`` False: not the SVD bound)."""

    value: float
    exact: bool
    method: str  # "dual_product"
    weights: np.ndarray  # the per-attribute dual weights ũ (mean 1)


def dual_value(workload: ImplicitWorkload, weights, privacy: Privacy | None = None) -> float | None:
    """The certified bound (1) at the product weights u = ⊗ ``weights`` (one attribute's ũ, all > 0).

    None when the workload is not of the symmetric form :func:`dual_bound` covers.
    """
    form = _check(workload, privacy, "dual_value")
    if form is None:
        return None
    u = np.asarray(weights, dtype=float)
    if u.shape != (form.n,) or not np.all(np.isfinite(u)) or np.any(u <= 0):
        raise ValueError(f"The 'weights' parameter of dual_value must be {form.n} positive finite numbers. "
                         f"Got shape {u.shape}.")
    c = 1.0 if privacy is None else privacy.variance_factor
    return c * _value(form, u / u.mean(), certified=True)


def _check(workload, privacy, caller: str):
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError(f"The 'workload' parameter of {caller} must be an ImplicitWorkload. "
                        f"Got {type(workload).__name__}.")
    if privacy is not None:
        if not isinstance(privacy, Privacy):
            raise TypeError(f"The 'privacy' parameter of {caller} must be a Privacy or None. "
                            f"Got {type(privacy).__name__}.")
    return _form(workload, fc.Cache())


def dual_bound(workload: ImplicitWorkload, privacy: Privacy | None = None, *, max_evaluations: int = 100,
               max_work: float | None = None) -> DualBound | None:
    """c·max_u ν(u)²/Σu over product weights: a certified lower bound on the L2 optimum (module docstring).

    Covers unions of products whose factor Grams are, on every attribute, β·J (summed out) or s·G₀ for one
    common G₀ (prefix, identity, ranges, …) on at most two attributes per term, all attributes of one size n ≤
    ``MAX_SIZE`` (64); returns None otherwise. The bound is valid for every strategy under Gaussian noise (L2
    sensitivity) and under Laplace noise (L1 sensitivity, ‖a_j‖₁ ≥ ‖a_j‖₂); when every term of a level has the
    same weight it is at least the SVD bound c·(tr G^{1/2})²/N (the search starts at u = 1; unequal weights are
    lowered to their level's smallest, which can cost more), and it equals the optimum only when the optimal dual
    weights are a product of the searched form (``exact`` is False). :func:`optimum_floor` is what optimize takes
    the larger of with its SVD bound.

    Parameters
    ----------
    workload : ImplicitWorkload
    privacy : Privacy or None
        The budget (c = its variance factor); None for unit scale (c = 1). Under ε-DP the bound holds too (‖a_j‖₁ ≥
        ‖a_j‖₂).
    max_evaluations : int
        Evaluations of ν for the weight search after the 1-D search over t (0: t only). Each costs two
        eigenvalue problems of sizes ≈ n²/2 and n² (about 0.07 s at n = 32).
    max_work : float or None
        A cap on the search's floating-point work (≈ evaluations × (n−1+(n−1)²)³): fewer evaluations where they
        cost more, and None (no bound) when the 1-D search over t alone would exceed it. Effort only tightens the
        bound; any value returned is valid.

    Returns
    -------
    DualBound or None

    Examples
    --------
    >>> import numpy as np
    >>> from mmopt.structured import workloads as sw
    >>> P, T = np.tril(np.ones((4, 4))), np.ones((1, 4))
    >>> W = sw.union([sw.kron(P, T), sw.kron(T, P), sw.kron(P, P)])
    >>> b = dual_bound(W)
    >>> from mmopt.structured import svd_bound
    >>> bool(b.value > svd_bound(W).value), b.exact, b.method
    (True, False, 'dual_product')
    """
    form = _check(workload, privacy, "dual_bound")
    max_evaluations = v.check_int(max_evaluations, name="max_evaluations", caller="dual_bound", low=0)
    if isinstance(max_work, float) and max_work == np.inf:
        max_work = None  # no cap (it failed converting inf to an int, NaN likewise)
    elif max_work is not None:
        max_work = v.check_real(max_work, name="max_work", caller="dual_bound", low=0.0)
    if form is None:
        return None
    c = 1.0 if privacy is None else privacy.variance_factor
    n = form.n
    if max_work is not None:
        per = float(n - 1 + (n - 1) ** 2) ** 3  # the larger reduced eigenvalue problem, per evaluation of ν
        if _T_EVALUATIONS * per > max_work:
            return None
        max_evaluations = min(max_evaluations, int((max_work - _T_EVALUATIONS * per) / per))
    base = _one_dim_weights(form.gram) if n > 1 else np.ones(1)
    logb = np.log(base)

    def neg(t):
        return -_value(form, np.exp(t * logb))

    # golden-section search over t on [0, 1.5] (the SVD bound at t = 0) …
    res = optimize.minimize_scalar(neg, bounds=(0.0, 1.5), method="bounded", options={"xatol": 1e-3})
    best_t = float(res.x) if res.fun < neg(0.0) else 0.0
    theta = np.zeros(1 + _SHAPES)
    theta[0] = best_t
    if n > 2 and max_evaluations > 0:  # … then log ũ = t·log ũ₁ + Σₖ θₖ Pₖ (Legendre in the position), L-BFGS-B
        x = np.linspace(-1.0, 1.0, n)
        phi = np.column_stack([logb] + [np.polynomial.legendre.Legendre.basis(k)(x) for k in range(1, _SHAPES + 1)])
        start = -_value(form, np.exp(phi @ theta))
        fit = optimize.minimize(lambda th: -_value(form, np.exp(np.clip(phi @ th, -50, 50))), theta,
                                method="L-BFGS-B", options={"maxfun": max_evaluations})
        if np.all(np.isfinite(fit.x)) and fit.fun < start:
            theta = fit.x
        u = np.exp(np.clip(phi @ theta, -50, 50))
    else:
        u = np.exp(best_t * logb)
    u *= n / u.sum()
    return DualBound(c * _value(form, u, certified=True), False, "dual_product", u)


def optimum_floor(structure) -> float:
    """:func:`dual_bound`'s value at unit privacy for an implicit workload, else 0.0 (no product structure, or one
    it does not cover): a floor optimize takes the larger of with its SVD bound, under either noise (the L2
    optimum bounds the L1 objective too: a column's L1 norm is at least its L2 norm, as for the SVD bound)."""
    if not isinstance(structure, ImplicitWorkload):
        return 0.0
    if structure not in _FLOOR_MEMO:  # auto and each search ask for it; the weight search costs seconds at n = 32
        b = dual_bound(structure, max_work=FLOOR_WORK)
        _FLOOR_MEMO[structure] = 0.0 if b is None else b.value
    return _FLOOR_MEMO[structure]


def known_floor(structure) -> float | None:
    """:func:`optimum_floor`'s value if it has been computed for this workload object (free), else None."""
    try:
        return _FLOOR_MEMO.get(structure)
    except TypeError:  # not weakly referenceable: never computed
        return None


_FLOOR_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
