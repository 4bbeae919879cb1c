"""Implicit strategies: products A₁ ⊗ … ⊗ A_d, weighted unions (stacks) of products, marginals M(θ).

Notation: see README. A union A = [θ₁A⁽¹⁾; θ₂A⁽²⁾; …] with A⁽ᵏ⁾ = ⊗ᵢ Aᵢ⁽ᵏ⁾ has Gram X = Σₖ θₖ² ⊗ᵢ Xᵢ⁽ᵏ⁾ and
column c = (c₁, …, c_d) of norm

    L1: Σₖ θₖ ∏ᵢ ‖Aᵢ⁽ᵏ⁾[:, cᵢ]‖₁,        L2: (Σₖ θₖ² ∏ᵢ ‖Aᵢ⁽ᵏ⁾[:, cᵢ]‖₂²)^{1/2},

because the stacked blocks occupy disjoint rows and a Kronecker column is the product of its factors'
columns. Sensitivity is the largest column norm (Li et al., PODS 2010, Prop. 1 and Thm 5.22).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mmopt import _validation as v
from mmopt._strategy_core import NORMS, Strategy
from mmopt.structured import _checks as ck
from mmopt.structured._terms import ProductTerm, ProductUnion, flatten_factors, union_of

# Exact sensitivity of a union by scanning every cell when N·terms is at most this (a BLAS product per block).
SCAN_LIMIT = 4 * 10**9
_BLOCK = 2**22  # cells per block of the scan (32 MB of float64)


@dataclass(frozen=True, eq=False)
class StrategyProduct(ProductTerm):
    """One block θ·(A₁ ⊗ … ⊗ A_d) of an implicit strategy; ``weight`` θ > 0."""

    factors: tuple[Strategy, ...]
    weight: float = 1.0

    def __post_init__(self) -> None:
        self._check_factors(Strategy, "StrategyProduct")

    @property
    def n_rows(self) -> int:
        return math.prod(f.matrix.shape[0] for f in self.factors)


@dataclass(frozen=True)
class Sensitivity:
    """A strategy's sensitivity: the exact largest column norm, or (``exact`` False) a proven upper bound."""

    value: float
    exact: bool
    method: str  # "product", "uniform", "scan" or "upper_bound"


@dataclass(frozen=True, eq=False)
class ImplicitStrategy(ProductUnion):
    """A union of Kronecker-product strategies over one product domain (one term: a product strategy)."""

    terms: tuple[StrategyProduct, ...] = field(repr=False)
    name: str = "strategy"

    def __post_init__(self) -> None:
        self._check_terms(StrategyProduct, "ImplicitStrategy")

    @property
    def n_rows(self) -> int:
        """p = Σₖ ∏ᵢ pᵢ⁽ᵏ⁾, the number of measurements."""
        return sum(t.n_rows for t in self.terms)

    @property
    def is_product(self) -> bool:
        return len(self.terms) == 1

    def sensitivity(self, norm: str = "l1") -> float:
        """The largest column norm when computable exactly, else a proven upper bound (see
        :func:`sensitivity`, which also says which)."""
        return sensitivity(self, norm).value

    def dense(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> np.ndarray:
        """A (p×N) itself. Refuses past ``max_entries`` entries."""
        ck.check_allocation(self.n_rows * self.domain_size, what=f"the explicit A of '{self.name}'",
                            caller="ImplicitStrategy.dense", limit=max_entries)
        return self._stacked(lambda f: f.matrix)

    def gram(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> np.ndarray:
        """X = AᵀA (N×N). Refuses past ``max_entries`` entries."""
        N = self.domain_size
        ck.check_allocation(N * N, what=f"the N×N Gram of '{self.name}'", caller="ImplicitStrategy.gram",
                            limit=max_entries)
        return self._gram_sum(lambda f: f.gram)

    def to_strategy(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> Strategy:
        """The dense :class:`mmopt.strategy.Strategy` (the reference path), for small domains."""
        return Strategy(self.dense(max_entries=max_entries), self.name)

    def __repr__(self) -> str:
        return (f"ImplicitStrategy(name={self.name!r}, shape={self.shape}, N={ck.fmt_int(self.domain_size)}, "
                f"p={ck.fmt_int(self.n_rows)}, terms={len(self.terms)})")


def _as_factor(f, caller: str, position: int) -> Strategy:
    if isinstance(f, Strategy):
        return f
    return Strategy(v.check_matrix(f, name=f"factors[{position}]", caller=caller), f"A{position}")


def kron_strategy(*factors, weight: float = 1.0, name: str | None = None) -> ImplicitStrategy:
    """The product strategy θ·(A₁ ⊗ … ⊗ A_d) from one-attribute strategies (or matrices)."""
    caller = "kron_strategy"
    fs = tuple(_as_factor(f, caller, i) for i, f in enumerate(flatten_factors(factors, caller)))
    w = ck.check_weight(weight, name="weight", caller=caller)
    return ImplicitStrategy((StrategyProduct(fs, w),), name or "⊗".join(f.name for f in fs))


def union_strategy(parts, weights=None, *, name: str | None = None) -> ImplicitStrategy:
    """The stack [θ₁A₁; θ₂A₂; …] of implicit strategies on one domain (X = Σ θₖ² Xₖ)."""
    return union_of(parts, weights, union_type=ImplicitStrategy, caller="union_strategy",
                    build_with="kron_strategy", name=name)


def marginals_strategy(shape, theta, *, name: str = "marginals") -> ImplicitStrategy:
    """HDMM's M(θ): the weighted marginals θ_S·⊗ᵢ(I if i ∈ S else 1ᵀ), one weight per attribute subset S.

    ``theta`` is a dict {attribute tuple: weight ≥ 0} or a length-2^d array indexed by the bitmask of S
    (bit i set iff attribute i ∈ S). Zero weights are dropped. Every column has one 1 per marginal, so
    Δ₁ = Σ θ_S and Δ₂ = (Σ θ_S²)^{1/2} exactly. Source: McKenna et al., PVLDB 2018, §5.
    """
    caller = "marginals_strategy"
    shape = ck.check_shape(shape, caller=caller)
    d = len(shape)
    if isinstance(theta, dict):
        items = []
        for S, w in theta.items():
            S = (S,) if isinstance(S, int) else tuple(S)
            mask = sum(1 << v.check_int(a, name="theta", caller=caller, low=0, high=d - 1) for a in S)
            items.append((mask, v.check_real(w, name="theta", caller=caller, low=0.0)))
    else:
        th = v.check_vector(theta, name="theta", caller=caller, length=2**d)
        if np.any(th < 0):
            raise ValueError(f"The 'theta' parameter of {caller} must hold weights >= 0. "
                             f"Got {int(np.sum(th < 0))} negative entries.")
        items = list(enumerate(th.tolist()))
    items = [(mask, w) for mask, w in items if w > 0]
    if not items:
        raise ValueError(f"The 'theta' parameter of {caller} must have a positive weight. Got all zeros.")
    eye = {n: Strategy(np.eye(n), f"I{n}") for n in shape}
    one = {n: Strategy(np.ones((1, n)), f"T{n}") for n in shape}
    terms = tuple(StrategyProduct(tuple(eye[n] if mask >> i & 1 else one[n] for i, n in enumerate(shape)), w)
                  for mask, w in items)
    return ImplicitStrategy(terms, name)


def column_norms(A: Strategy, norm: str) -> np.ndarray:
    """Per-column L1 norms, or squared L2 norms, of one factor."""
    M = A.matrix
    return np.sum(np.abs(M), axis=0) if norm == "l1" else np.sum(M * M, axis=0)


def sensitivity(strategy: ImplicitStrategy, norm: str = "l1", *, scan_limit: int = SCAN_LIMIT) -> Sensitivity:
    """Largest column norm of an implicit strategy, computed factor-wise (see the module docstring).

    Exact for a product (the max of a product of non-negative factors is the product of maxima), when
    every factor's column norms are uniform, or by a blocked scan of all N cells when N·terms ≤
    ``scan_limit`` (O(N·terms) time, O(block) memory). Otherwise the upper bound Σₖ θₖ ∏ᵢ maxᵢ (L1; the
    L2 analogue under the root), proven by bounding each summand by its maximum; ``exact`` is then False.
    """
    caller = "sensitivity"
    if not isinstance(strategy, ImplicitStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be an ImplicitStrategy. "
                        f"Got {type(strategy).__name__}.")
    v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    power = 1 if norm == "l1" else 2
    cols = [[column_norms(f, norm) for f in t.factors] for t in strategy.terms]
    coef = np.array([t.weight**power for t in strategy.terms])
    root = (lambda s: s) if norm == "l1" else math.sqrt
    upper = float(coef @ np.array([math.prod(float(c.max()) for c in cs) for cs in cols]))
    if strategy.is_product:
        return Sensitivity(root(upper), True, "product")
    if all(float(np.ptp(c)) <= 4 * np.finfo(float).eps * float(c.max()) for cs in cols for c in cs):
        return Sensitivity(root(upper), True, "uniform")
    N = strategy.domain_size
    if N * len(cols) <= scan_limit and N <= ck.MAX_VECTOR_ENTRIES:
        best = _scan_max(cols, coef, strategy.shape)
        if best is not None:
            return Sensitivity(root(best), True, "scan")
    return Sensitivity(root(upper), False, "upper_bound")


def _kron_vectors(vectors) -> np.ndarray:
    out = np.ones(1)
    for x in vectors:
        out = np.multiply.outer(out, x).ravel()
    return out


def _scan_max(cols, coef, shape) -> float | None:
    """max over cells of Σₖ coefₖ ∏ᵢ colsₖᵢ[cᵢ], as blocks of (leading cells × terms) @ (terms × trailing)."""
    K, d = len(cols), len(shape)
    s = d
    while s > 0 and math.prod(shape[s - 1:]) * K <= _BLOCK:
        s -= 1  # trailing attributes s..d−1 are tabulated per term (≤ _BLOCK entries in all)
    if math.prod(shape[:s]) * K > 8 * _BLOCK:
        return None  # one attribute alone is too large to tabulate: the caller bounds instead
    trail = np.stack([_kron_vectors(cs[s:]) for cs in cols])  # K × N_trail
    lead = np.stack([c * _kron_vectors(cs[:s]) for cs, c in zip(cols, coef, strict=True)], axis=1)  # N_lead × K
    rows = max(1, _BLOCK // trail.shape[1])
    best = 0.0
    for start in range(0, lead.shape[0], rows):
        best = max(best, float(np.max(lead[start:start + rows] @ trail)))
    return best
