"""Split strategies: residual measurements with an optimised basis per attribute, for any union of products.

Notation: see README and :mod:`mmopt.structured.residual`. Per attribute, ℝⁿⁱ = span(1) ⊕ 1^⊥ (u = 1/√nᵢ). A
*split* strategy measures, for each member S of a set of attribute subsets,

    c_S · K_S,    K_S = ⊗_{i∈S} Bᵢ ⊗_{i∉S} 1ᵀ,    Bᵢ 1 = 0,

so that K_SᵀK_S = ⊗_{i∈S} Xᵢ ⊗_{i∉S} J (Xᵢ = BᵢᵀBᵢ) lives on the subspace Q_S = ⊗_{i∈S} 1^⊥ ⊗_{i∉S} span(1). The
Q_S are mutually orthogonal, so X⁺ = Σ_S c_S⁻² ⊗_{i∈S} Xᵢ⁺ ⊗_{i∉S} J/nᵢ², and for a workload term
w_k ⊗ᵢ W_ki (G_ki = W_kiᵀW_ki) only the diagonal blocks of G_k meet X⁺:

    tr(G_k X⁺) = w_k² Σ_S c_S⁻² ∏_{i∉S} (1ᵀG_ki1/nᵢ²) ∏_{i∈S} tr(G_ki Xᵢ⁺).            (1)

This is ResidualPlanner's algebra (Xiao et al., NeurIPS 2023) with the isotropic residual basis replaced by any
basis of 1^⊥ — the divide-and-conquer into orthogonal sub-workloads of QuerySmasher (He et al., arXiv
2604.00868) — so it scores *any* union of products exactly (prefix, range or predicate factors), not only
marginals. G_k has a component on Q_S iff ∏_{i∉S} 1ᵀG_ki1 · ∏_{i∈S} tr(Π⊥G_kiΠ⊥) ≠ 0; the strategy supports
W iff every such S is measured (and Π⊥G_kiΠ⊥ lies in the range of Xᵢ).

**Sensitivity.** Column x of the stack has squared norm Σ_S c_S² ∏_{i∈S} ‖Bᵢe_{xᵢ}‖²: every summand grows
with each ‖Bᵢe_{xᵢ}‖, so the maximum over x is at the cell where each factor's column norm is largest:
Δ₂² = Σ_S c_S² ∏_{i∈S} βᵢ with βᵢ = max diag Xᵢ, and likewise Δ₁ = Σ_S c_S ∏_{i∈S} max‖Bᵢe‖₁ (exact).

**Allocation.** With a_S the sum of (1) over k at c_S = 1 and b_S = ∏ βᵢ, min Δ₂²·Σ a_S/c_S² is
(Σ_S √(a_S b_S))² at c_S² ∝ √(a_S/b_S) (Cauchy–Schwarz), and min Δ₁²·Σ a_S/c_S² is (Σ_S (a_S b_S²)^⅓)³ at
c_S ∝ (a_S/b_S)^⅓ (Hölder). √(a_S b_S) factorises over attributes when every term has the same residual
Gram on an attribute, so the Xᵢ minimising tr(Π⊥G_iΠ⊥ Xᵢ⁺)·max diag Xᵢ — a small L2 program per attribute,
solved with a duality certificate (:mod:`mmopt.structured.residual._fitted_basis`) — is optimal among split
strategies under Gaussian noise. It is not the optimum among all strategies: the exact SVD bound can be lower
(1+2-way prefix marginals on (16,)⁵: 121,460.86 against a bound of 102,459.49).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from mmopt._base.guards import Unsupported
from mmopt.dense.support import support_tolerance
from mmopt.structured import _rows as rw
from mmopt.structured import factors as fc
from mmopt.structured.residual import closure as cl
from mmopt.structured.residual import strategy as rs
from mmopt.structured.residual._fitted_basis import fitted_basis as _fitted_basis
from mmopt.structured.strategies import ImplicitStrategy, kron_strategy, union_strategy
from mmopt.structured.workloads import ImplicitWorkload

# Above this size an attribute's basis is the isotropic residual basis (not fitted): the fit takes ~1 s at
# n = 115 and grows as n³ (one thread).
FIT_MAX_SIZE = 256
# Relative size below which a Gram part counts as zero (Grams of 0/1 factors are exact to a few ulps).
_ZERO = 1e-12


@dataclass(frozen=True)
class _Parts:
    """One workload factor split: t = 1ᵀG1/n² (its share on span(1)), its Gram G, Π⊥GΠ⊥ (its residual part) and,
    when its root is its rows, a row's largest residual and total shares of its own ‖r‖² (else None)."""

    total: float
    gram: np.ndarray
    residual: np.ndarray
    shares: tuple[float, float] | None

    @property
    def residual_trace(self) -> float:
        return float(np.trace(self.residual))


def _parts(f, memo: dict) -> _Parts:
    key = id(f)
    if key not in memo:
        G = fc.workload_gram(f)
        n = G.shape[0]
        one = np.ones(n)
        tot = float(one @ G @ one) / n**2
        Gp = G - np.outer(G @ one, one) / n - np.outer(one, one @ G) / n + tot * np.outer(one, one)
        shares = None
        if fc.root_is_rows(f):
            shares = rw.row_shares(fc.row_stats(f), n)
            if f.matrix is not None:  # stored rows (≤ 10⁶ entries): Π⊥GΠ⊥ from them, centred, where G beside
                # 10⁹·1ᵀ loses e₀ − e₁ outright (a residual trace of 0.0 that the plan divided by)
                R = fc.workload_root(f)
                R = R - R.mean(axis=0)
                Gp = R @ R.T
        memo[key] = (f, _Parts(tot, G, Gp, shares))  # f kept alive: its id stays unique while the memo lives
    return memo[key][1]


def _active(term, memo) -> tuple[frozenset, frozenset] | None:
    """(attributes that must be in S, attributes that may be) for a term's non-zero Q_S components."""
    must, may = set(), set()
    for i, f in enumerate(term.factors):
        p = _parts(f, memo)
        # the dense path's round-off share where it is stricter (a light query's residual part, 1.9·10⁻¹³ of the
        # trace beside a 10⁶-weighted total, was dropped as zero and the pair answered; a helper's audit)
        scale = float(np.trace(p.gram)) * min(_ZERO, support_tolerance(f.domain_size))
        res, tot = p.residual_trace > scale, p.total * f.domain_size > scale
        if p.shares is not None:  # and each query by its own norm: [10⁷·1ᵀ; e₀ − e₁]'s residual, 10⁻¹⁴ of the trace,
            # was dropped, and a residual no block measures went unchecked: an 'exact' 3·10¹⁶ (a helper's audit)
            res = res or p.shares[0] > support_tolerance(f.domain_size)
            tot = tot or p.shares[1] > support_tolerance(f.domain_size)
        if not tot:
            if not res:
                return None
            must.add(i)
        elif res:
            may.add(i)
    return frozenset(must), frozenset(may)


def required_subsets(workload: ImplicitWorkload, memo: dict | None = None) -> dict | None:
    """{term index: list of S (sorted tuples) on which G_k has a component}, or None past the size limit."""
    memo = {} if memo is None else memo
    out, count = {}, 0
    for k, t in enumerate(workload.terms):
        act = _active(t, memo)
        if act is None:
            return None
        must, may = act
        count += 1 << len(may)
        if count > cl.MAX_INCIDENCES:
            return None
        may = sorted(may)
        out[k] = [tuple(sorted(must | set(c))) for r in range(len(may) + 1) for c in itertools.combinations(may, r)]
    return out


def classify(strategy: ImplicitStrategy) -> dict | None:
    """{S: (term, {i: factor inverse})} when every term is split (module docstring), else None.

    A factor is "residual" when F1 = 0 and "total" when F = v1ᵀ (then its Gram is ‖v‖²J); no two terms may
    measure the same S (their sum on Q_S would not be a product).
    """
    blocks = {}
    for term in strategy.terms:
        S, info = [], {}
        for i, A in enumerate(term.factors):
            M = A.matrix
            n, big = M.shape[1], float(np.max(np.abs(M)))
            if not 1e-100 < big < 1e100:  # extreme scales: left to evaluate's scale-safe paths
                return None
            scale = float(np.sum(M * M))
            r1 = M @ np.ones(n)
            if float(r1 @ r1) <= _ZERO * scale * n:
                S.append(i)
            elif float(np.sum((M - np.outer(r1 / n, np.ones(n))) ** 2)) <= _ZERO * scale:
                info[i] = float(r1 @ r1) / n**2  # α with FᵀF = αJ
            else:
                return None
        key = tuple(S)
        if key in blocks:
            return None
        blocks[key] = (term, info)
    return blocks


def isotropic(blocks: dict) -> bool:
    """True when every residual factor's Gram is ∝ I − J/n: the αI + βJ algebra scores those exactly."""
    for S, (term, _) in blocks.items():
        for i in S:
            M = term.factors[i].matrix
            X = M.T @ M
            n = X.shape[0]
            if not np.allclose(X, X[0, 0] * (np.eye(n) - 1.0 / n) * n / (n - 1), rtol=0, atol=1e-12 * abs(X[0, 0])):
                return False
    return True


def unit_error(workload: ImplicitWorkload, strategy: ImplicitStrategy, *, caller: str = "evaluate"):
    """(tr(G X⁺), per-term upper bounds of the largest query variance) by (1), or None outside the form.

    Raises ValueError when the strategy does not support the workload.
    """
    blocks = classify(strategy)
    memo = {}
    need = None if blocks is None or isotropic(blocks) else required_subsets(workload, memo)
    if need is None:
        return None
    cache, pairs = fc.Cache(), {}
    total, worst = 0.0, []
    for k, t in enumerate(workload.terms):
        term_total, term_max = 0.0, 0.0
        for S in need[k]:
            if S not in blocks:
                raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support workload '{workload.name}': "
                                 f"term {k} has a component on the residual subspace of attributes {S}, which no "
                                 "block of the strategy measures.")
            block, alpha = blocks[S]
            val, mx = 1.0 / block.weight**2, 1.0 / block.weight**2
            for i, (Wf, Af) in enumerate(zip(t.factors, block.factors, strict=True)):
                key = (id(Wf), id(Af), alpha.get(i))  # terms and blocks share factors: each pair once
                if key not in pairs:
                    pairs[key] = _factor_pair(Wf, Af, alpha.get(i), memo, cache)
                v, m = pairs[key]
                if v is None:
                    raise Unsupported(f"{caller}: strategy '{strategy.name}' does not support workload "
                                     f"'{workload.name}': attribute {i}'s residual factor misses part of term "
                                     f"{k}'s queries.")
                val, mx = val * v, mx * m
            term_total += val
            term_max += mx
        total += t.weight**2 * term_total
        worst.append(t.weight**2 * term_max)
    return total, worst


def _factor_pair(Wf, Af, alpha: float | None, memo: dict, cache):
    """One attribute's factor of (1) for workload factor Wf and strategy factor Af (α when Af = v1ᵀ), and of
    the largest query variance; (None, None) when Af's residual part misses part of Wf's."""
    p = _parts(Wf, memo)
    n = Wf.domain_size
    if alpha is not None:  # (1ᵀG1/n²)/α: G's share on u over X's, αn
        return p.total / alpha, fc.query_terms_max(Wf, np.full((n, n), 1.0 / (alpha * n**2)))[1]
    inv = cache.get(fc.strategy_inverse, Af)
    F = cache.get(fc.workload_root, Wf)
    outside = F - inv.pinv @ (Af.matrix @ F)   # the part of G's root outside X's range …
    outside -= np.outer(np.ones(n), np.ones(n) @ outside) / n   # … within 1^⊥
    # where F's columns are W's queries, each is judged by its own norm, as the dense path does: G's share let a
    # 10⁻⁵-light query's part outside X's range through beside a heavy one (a helper's audit); and G's residual
    # part is no scale there: beside 10⁹·1ᵀ it loses e₀ − e₁ outright (0.0), and the heavy query's round-off
    # outside (3.7·10⁻¹³) refused a supported pair once _active kept that residual
    if fc.root_is_rows(Wf):
        if rw.columns_off(np.sum(outside**2, axis=0), np.sum(F**2, axis=0), n):
            return None, None
    elif float(np.sum(outside**2)) > min(1e-9, support_tolerance(n)) * max(p.residual_trace, 1e-300):
        return None, None
    # tr(G X⁺) as a sum of squares, never negative
    return float(np.sum((inv.B.T @ F) ** 2)), fc.query_terms_max(Wf, inv.profile)[1]


@dataclass(frozen=True)
class SplitPlan:
    """A split strategy with its planned unit error, per-attribute bases and whether it is the family optimum."""

    strategy: ImplicitStrategy
    objective: float
    bases: dict
    family_optimal: bool


def _isotropic(n: int) -> np.ndarray:
    """ResidualPlanner's basis scaled to unit column norm: BᵀB = (I − J/n)·n/(n−1) ([1, −1] for n = 2)."""
    return rs.residual_basis(n) / math.sqrt(rs.basis_norm(n, "l2"))


def _center(B: np.ndarray) -> np.ndarray:
    return B - np.outer(B.sum(axis=1) / B.shape[1], np.ones(B.shape[1]))


def split_plan(workload: ImplicitWorkload, norm: str = "l2") -> SplitPlan | None:
    """The split strategy of the module docstring for total squared error, or None when W is out of reach."""
    memo = {}
    need = required_subsets(workload, memo)
    if need is None:
        return None
    d = len(workload.shape)
    grams, first, same = {}, {}, {}
    for k, t in enumerate(workload.terms):
        for i in set().union(*map(set, need[k])):
            p = _parts(t.factors[i], memo)
            Gp = p.residual / p.residual_trace
            if i in grams:
                same[i] = same[i] and np.allclose(first[i], Gp, rtol=0, atol=1e-12)
                grams[i] = grams[i] + Gp
            else:
                grams[i], first[i], same[i] = Gp, Gp, True
    bases, certified = {}, {}
    for i, H in grams.items():
        n = H.shape[0]
        iso = _isotropic(n)
        if n > FIT_MAX_SIZE or n == 2:  # n = 2: 1^⊥ is a line, [1, −1] is the only basis (up to sign)
            # isotropic Π⊥ is optimal when H ∝ Π⊥ (marginals): constant diagonal and H^½ ∝ Π⊥
            B, certified[i] = iso, n == 2 or np.allclose(H / np.trace(H), (np.eye(n) - 1.0 / n) / (n - 1), atol=1e-12)
        else:
            B, value, bound = _fitted_basis(H)
            B, certified[i] = _center(B), value <= bound * (1 + 1e-6)
        if norm == "l1":  # the SDP basis targets Δ₂; keep it under Δ₁ only where it does better there
            B = min((B, iso), key=lambda b: _score(H, b, "l1"))
        bases[i] = B
    beta = {i: float(np.max(np.sum(B * B, axis=0) if norm == "l2" else np.sum(np.abs(B), axis=0))) for i, B in
            bases.items()}
    pinvs = {}
    for i, B in bases.items():
        X = B.T @ B
        pinvs[i] = np.linalg.pinv(X, rcond=1e-12, hermitian=True)
    a = {}
    for k, t in enumerate(workload.terms):
        for S in need[k]:
            v = t.weight**2
            for i, f in enumerate(t.factors):
                p = _parts(f, memo)
                v *= float(np.sum(p.residual * pinvs[i])) if i in S else p.total  # = tr(G X⁺), X⁺1 = 0: the
                # residual alone, as G's constant part (10¹⁴ beside e₀ − e₁) put its round-off into the plan
            a[S] = a.get(S, 0.0) + v
    subsets = sorted(a, key=lambda S: (len(S), S))
    av = np.array([a[S] for S in subsets])
    bv = np.array([math.prod(beta[i] for i in S) for S in subsets])
    if norm == "l2":
        c = (av / bv) ** 0.25
        objective = float(np.sum(np.sqrt(av * bv))) ** 2
    else:
        c = (av / bv) ** (1.0 / 3.0)
        objective = float(np.sum((av * bv**2) ** (1.0 / 3.0))) ** 3
    c = c / np.max(c)
    shape = workload.shape
    parts = [kron_strategy(*[bases[i] if i in S else np.ones((1, shape[i])) for i in range(d)], weight=float(w))
             for S, w in zip(subsets, c, strict=True)]
    A = union_strategy(parts, name=f"split({workload.name})")
    return SplitPlan(A, objective, bases, all(same.values()) and all(certified.values()) and norm == "l2")


def _score(H: np.ndarray, B: np.ndarray, norm: str) -> float:
    X = B.T @ B
    t = float(np.sum(H * np.linalg.pinv(X, rcond=1e-12, hermitian=True)))
    beta = np.max(np.sum(B * B, axis=0)) if norm == "l2" else np.max(np.sum(np.abs(B), axis=0)) ** 2
    return t * float(beta)


__all__ = ["SplitPlan", "classify", "isotropic", "required_subsets", "split_plan", "unit_error"]
