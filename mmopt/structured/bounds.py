"""The SVD lower bound c·(Σσ(W))²/N (Li et al., PODS 2010, Thm 5.26) for implicit workloads.

Notation: see README; ν(W) = Σσ(W) = tr(G^{1/2}), the nuclear norm. Exact paths:

* one product term: σ(⊗ᵢWᵢ) are the products of the factors' σ, so ν(w⊗ᵢWᵢ) = w ∏ᵢ ν(Wᵢ) and the bound
  is w²∏ᵢ ν(Wᵢ)²/N ((Σσ(W₁⊗W₂))² = (Σσ(W₁))²(Σσ(W₂))²);
* every factor Gram αI + βJ (marginals, IT products): G = Σ_T μ_T Q_T (:mod:`~mmopt.structured.algebra`),
  ν = Σ_T rank(Q_T)·√μ_T;
* a union of marginals with d > 16 (or terms·2^d > 2²²): ν = Σ_S r_S √(N ν_S) over the downward closure of the
  marginals' attribute sets (:mod:`~mmopt.structured.residual`), never enumerating the 2ᵈ subsets;
* N ≤ ``dense_limit``: eigenvalues of the dense G (or of RRᵀ below, where R < N);
* few query directions (R = Σ_j ∏ᵢ rank Gᵢ⁽ʲ⁾ ≤ :data:`MAX_ROOT_ROWS`, at any N): with Gᵢ⁽ʲ⁾ = FᵢⱼFᵢⱼᵀ, G = RᵀR for
  the stacked R = [w_j ⊗ᵢ Fᵢⱼᵀ] (R rows), whose non-zero singular values are those of the R×R matrix RRᵀ,
  block (j, l) = w_j w_l ⊗ᵢ FᵢⱼᵀFᵢₗ: ν = Σ√λ(RRᵀ). The 1- and 2-way prefix marginals on (16,)⁵ have N = 2²⁰ and
  R = 2,640.

Otherwise a proven lower bound (``exact`` False), the largest of three valid ones for G = Σ_j G_j:
(a) ν ≥ max_j ν(G_j) and (b) ν ≥ ν(Σ_{j∈alg} G_j): G ⪰ H ⪰ 0 implies G^{1/2} ⪰ H^{1/2} (Löwner–Heinz: the
square root is operator monotone), so tr G^{1/2} ≥ tr H^{1/2}; (c) ν = Σ√λ ≥ Σλ/√λ_max = tr G/√λ_max(G), with
tr G = Σ_j w_j²∏ᵢ tr Gᵢ⁽ʲ⁾ exact and λ_max(G) ≤ Σ_j w_j²∏ᵢ λ_max(Gᵢ⁽ʲ⁾) (Weyl: λ_max is subadditive).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from mmopt import error as dense_error
from mmopt._base import validation as v
from mmopt.dense.objective import trusted_gram_svd_bound
from mmopt.privacy import Privacy
from mmopt.structured import _checks as ck
from mmopt.structured import algebra as alg
from mmopt.structured import factors as fc
from mmopt.structured.workloads import ImplicitWorkload


@dataclass(frozen=True)
class Bound:
    """A lower bound on every strategy's total error: exactly the SVD bound when ``exact``, else below it."""

    value: float
    exact: bool
    method: str  # "product", "algebra", "closure", "commuting", "dense", "root_gram" or "lower_bound"


def svd_bound(workload: ImplicitWorkload, privacy: Privacy | None = None, *, dense_limit: int = ck.DENSE_LIMIT,
              cache: fc.Cache | None = None, root_limit: int | None = None) -> Bound:
    """c·(Σσ(W))²/N, exactly where the structure allows, else a proven lower bound (module docstring).

    ``root_limit`` caps R for the factor-root path (seconds at R ≈ 4,000; default :data:`MAX_ROOT_ROWS`);
    0 skips it, as the quick sanity checks inside evaluate do. Its value is remembered per workload object.

    Examples
    --------
    >>> from mmopt.structured import workloads as sw
    >>> b = svd_bound(sw.kron(sw.prefix(2), sw.prefix(2)))    # 2.5² for prefix(2) ⊗ prefix(2)
    >>> round(b.value, 12), b.exact, b.method
    (6.25, True, 'product')
    """
    if not isinstance(workload, ImplicitWorkload):
        raise TypeError("The 'workload' parameter of svd_bound must be an ImplicitWorkload. "
                        f"Got {type(workload).__name__}.")
    if privacy is not None and not isinstance(privacy, Privacy):
        raise TypeError("The 'privacy' parameter of svd_bound must be a Privacy or None. "
                        f"Got {type(privacy).__name__}.")
    dense_limit = v.check_int(dense_limit, name="dense_limit", caller="svd_bound", low=0)
    if root_limit is not None:
        root_limit = v.check_int(root_limit, name="root_limit", caller="svd_bound", low=0)
    c = 1.0 if privacy is None else privacy.variance_factor
    cache = cache or fc.Cache()
    N = workload.domain_size
    terms = workload.terms
    d = len(workload.shape)  # past the 2^d algebra (or where its terms·2^d table gets large): the closure
    if len(terms) > 1 and (d > alg.MAX_ATTRIBUTES - 6 or len(terms) << d > 1 << 22):
        from mmopt.structured.residual.solve import closure_bound  # lazy: that subpackage imports this layer
        if (value := closure_bound(workload)) is not None:
            return Bound(c * value, True, "closure")
    nuclear = [t.weight * math.prod(float(np.sum(cache.get(fc.singular_values, f))) for f in t.factors)
               for t in terms]
    if len(terms) == 1:
        return Bound(c * _square(nuclear[0]) / N, True, "product")
    co = [[cache.get(_gram_coefficients, f) for f in t.factors] for t in terms]
    in_alg = [j for j, cs in enumerate(co) if all(x is not None for x in cs)]
    if len(in_alg) == len(terms) and len(workload.shape) <= alg.MAX_ATTRIBUTES - 6:
        return Bound(c * _square(_algebra_nuclear(workload, co, in_alg)) / N, True, "algebra")
    from mmopt.structured.two_term import commuting_nuclear  # lazy: it imports the strategies layer
    # commuting factors: λ(G) in O(Σnᵢ³ + N·K); not in the quick floor evaluate checks every figure against
    # (dense_limit = root_limit = 0), where it would redo those eigendecompositions on every call
    if (dense_limit or root_limit != 0) and (nu := commuting_nuclear(workload, cache)) is not None:
        return Bound(c * _square(nu) / N, True, "commuting")
    limit = MAX_ROOT_ROWS if root_limit is None else root_limit
    if N <= dense_limit:
        # the R×R root Gram first where it is the smaller (P⊗T ∪ T⊗R on 64²: R = 128 against N = 4,096, whose
        # N×N eigh took 7.8 of a 'fast' auto call's 15.5 CPU s)
        if (root := _root_nuclear(workload, cache, min(limit, N - 1))) is not None:
            return Bound(c * _square(root) / N, True, "root_gram")
        return Bound(c * trusted_gram_svd_bound(workload.gram), True, "dense")
    if (root := _root_nuclear(workload, cache, limit)) is not None:
        return Bound(c * _square(root) / N, True, "root_gram")
    candidates = [max(nuclear)]
    if len(in_alg) > 1 and len(workload.shape) <= alg.MAX_ATTRIBUTES - 6:
        candidates.append(_algebra_nuclear(workload, co, in_alg))
    trace = gram_trace(workload, cache)
    lam_max = sum(t.weight**2 * math.prod(float(np.max(cache.get(fc.singular_values, f))) ** 2 for f in t.factors)
                  for t in terms)
    candidates.append(trace / math.sqrt(lam_max))
    return Bound(c * _square(max(candidates)) / N, False, "lower_bound")


def gram_trace(workload, cache: fc.Cache | None = None) -> float:
    """tr(G) = Σⱼ wⱼ² ∏ᵢ ‖Wᵢ⁽ʲ⁾‖²_F of a union of products, factor by factor (each distinct factor's spectrum
    once): the identity's error (Δ = 1, X = I), and the numerator of the trace/√λ_max bound above."""
    cache = cache or fc.Cache()
    return sum(t.weight**2 * math.prod(float(np.sum(cache.get(fc.singular_values, f) ** 2)) for f in t.factors)
               for t in workload.terms)


# R×R eigenvalues take ~6 s of one core at R = 4,151 (census sf1), and RRᵀ 200 MB at R = 5,000.
MAX_ROOT_ROWS = 5000
_ROOT_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _root_nuclear(workload, cache, limit: int) -> float | None:
    """ν(W) = Σ√λ(RRᵀ) from the stacked factor roots (module docstring), or None when R > ``limit``."""
    if limit <= 0:  # skipped on request (evaluate's quick sanity check), even when remembered
        return None
    if workload in _ROOT_MEMO:
        return _ROOT_MEMO[workload]
    roots = [[cache.get(fc.workload_root, f) for f in t.factors] for t in workload.terms]
    sizes = [math.prod(F.shape[1] for F in Fs) for Fs in roots]
    R = sum(sizes)
    if R > limit:
        return None
    K = np.empty((R, R))
    at = np.concatenate([[0], np.cumsum(sizes)])
    for j, (tj, Fj) in enumerate(zip(workload.terms, roots, strict=True)):
        for k in range(j, len(roots)):
            block = np.ones((1, 1)) * (tj.weight * workload.terms[k].weight)
            for a, b in zip(Fj, roots[k], strict=True):
                block = np.kron(block, a.T @ b)
            K[at[j]:at[j + 1], at[k]:at[k + 1]] = block
            K[at[k]:at[k + 1], at[j]:at[j + 1]] = block.T
    lam = np.clip(np.linalg.eigvalsh(K)[::-1], 0.0, None)
    lam[dense_error.numerical_rank(lam, (R, R)):] = 0.0  # one rank rule with the factor spectra
    _ROOT_MEMO[workload] = value = float(np.sum(np.sqrt(lam)))
    return value


def _gram_coefficients(f):
    return alg.ij_coefficients(fc.workload_gram(f))


def _algebra_nuclear(workload, co, which) -> float:
    shape = workload.shape
    mu = sum(alg.product_spectrum(co[j], shape, workload.terms[j].weight ** 2) for j in which)
    return float(alg.multiplicities(shape) @ np.sqrt(np.clip(mu, 0.0, None)))


def _square(x: float) -> float:
    """x², inf past float64 (a Python float's ``** 2`` raised OverflowError: weight 1e154 on kron(prefix(3), …))."""
    return x * x
