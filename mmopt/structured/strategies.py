"""Implicit strategies: products A₁ ⊗ … ⊗ A_d, weighted unions (stacks) of products, marginals M(θ).

Notation: see README. A union A = [θ₁A⁽¹⁾; θ₂A⁽²⁾; …] with A⁽ᵏ⁾ = ⊗ᵢ Aᵢ⁽ᵏ⁾ has Gram X = Σₖ θₖ² ⊗ᵢ Xᵢ⁽ᵏ⁾ and
column c = (c₁, …, c_d) of norm

    L1: Σₖ θₖ ∏ᵢ ‖Aᵢ⁽ᵏ⁾[:, cᵢ]‖₁,        L2: (Σₖ θₖ² ∏ᵢ ‖Aᵢ⁽ᵏ⁾[:, cᵢ]‖₂²)^{1/2},

because the stacked blocks occupy disjoint rows and a Kronecker column is the product of its factors'
columns. Sensitivity is the largest column norm (Li et al., PODS 2010, Prop. 1 and Thm 5.22). The same strategy
at a moderate scale, for its error figures: :mod:`mmopt.structured._normalised`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mmopt._base import validation as v
from mmopt._base.hints import factor_names
from mmopt.dense._strategy_core import (
    NORMS,
    Strategy,
    check_gram_range,
    column_norm_parts,
    norm_from_parts,
)
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

    @property
    def gram(self) -> np.ndarray:
        """X = AᵀA (N×N), a property as on the dense Strategy. Refuses past ``MAX_DENSE_ENTRIES`` (10⁸) entries,
        before allocating."""
        N = self.domain_size
        ck.check_allocation(N * N, what=f"the N×N Gram of '{self.name}'", caller="ImplicitStrategy.gram",
                            remedy=" Use mmopt.structured.evaluate, which never forms X.")
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):  # inf·0: judged below, as one refusal
            X = self._gram_sum(lambda f: f.gram)
        check_gram_range(X, f"ImplicitStrategy '{self.name}'", "its weights and factors' scales multiply",
                         "Rescale the terms' weights (A and cA have the same error).")  # it returned zeros
        return X

    def to_strategy(self, *, max_entries: int = ck.MAX_DENSE_ENTRIES) -> Strategy:
        """The dense :class:`mmopt.strategy.Strategy` (the reference path), for small domains."""
        return Strategy(self.dense(max_entries=max_entries), self.name)

    def __repr__(self) -> str:
        return (f"ImplicitStrategy(name={self.name!r}, shape={self.shape}, N={ck.fmt_int(self.domain_size)}, "
                f"p={ck.fmt_int(self.n_rows)}, terms={len(self.terms)})")


def _as_factor(f, caller: str, position: int) -> Strategy:
    if isinstance(f, Strategy):
        return f
    if callable(getattr(f, "to_strategy", None)) and not isinstance(f, ImplicitStrategy):
        # a Toeplitz, weighted square-root or tree strategy: "must be a 2-D array" gave no hint of the remedy
        raise TypeError(f"The factors of {caller} are dense one-attribute strategies; factor {position} is a "
                        f"{type(f).__name__}. Pass its dense form, factors[{position}].to_strategy() (small n).")
    return Strategy(v.check_matrix(f, name=f"factors[{position}]", caller=caller), f"A{position}")


def kron_strategy(*factors, weight: float = 1.0, name: str | None = None) -> ImplicitStrategy:
    """The product strategy θ·(A₁ ⊗ … ⊗ A_d) from one-attribute strategies (or matrices)."""
    caller = "kron_strategy"
    fs = tuple(_as_factor(f, caller, i) for i, f in enumerate(flatten_factors(factors, caller)))
    w = ck.check_weight(weight, name="weight", caller=caller)
    return ImplicitStrategy((StrategyProduct(fs, w),), name or factor_names(f.name for f in fs))


def union_strategy(parts, weights=None, *, name: str | None = None, caller: str = "union_strategy"
                   ) -> ImplicitStrategy:
    """The stack [θ₁A₁; θ₂A₂; …] of implicit strategies on one domain (X = Σ θₖ² Xₖ); ``caller`` names the public
    function in messages (mmopt.strategy.stack reaches here)."""
    return union_of(parts, weights, union_type=ImplicitStrategy, caller=caller, build_with="kron_strategy",
                    name=name)


def marginals_strategy(shape, theta, *, name: str = "marginals") -> ImplicitStrategy:
    """HDMM's M(θ): the weighted marginals θ_S·⊗ᵢ(I if i ∈ S else 1ᵀ), one weight per attribute subset S.

    ``theta`` is a dict {attribute tuple: weight ≥ 0}, a list of attribute tuples (each at weight 1), or a length-2^d
    array indexed by the bitmask of S (bit i set iff attribute i ∈ S). Zero weights are dropped. Every column has
    one 1 per marginal, so Δ₁ = Σ θ_S and Δ₂ = (Σ θ_S²)^{1/2} exactly. Source: McKenna et al., PVLDB 2018, §5.
    """
    caller = "marginals_strategy"
    shape = ck.check_shape(shape, caller=caller)
    d = len(shape)
    if isinstance(theta, list | tuple) and theta and all(isinstance(S, list | tuple) for S in theta):
        # a list of subsets, [(0, 1), (2, 3)]: each at weight 1 (it met "must be a 1-D array" of a (2, 2) array)
        keys = [tuple(S) for S in theta]
        if len(set(keys)) != len(keys):
            raise ValueError(f"The 'theta' parameter of {caller} lists a subset twice ({keys}). List each once, or "
                             "give weights as a dict {subset: weight}.")
        theta = dict.fromkeys(keys, 1.0)
    if isinstance(theta, dict):
        items = []
        for S, w in theta.items():
            S = (S,) if isinstance(S, int | np.integer) else tuple(S)
            S = tuple(v.check_int(a, name="theta", caller=caller, low=0, high=d - 1) for a in S)
            if len(set(S)) != len(S):  # 1 << a summed twice would carry into the next attribute's bit
                raise ValueError(f"The 'theta' parameter of {caller}: the key {S} repeats an attribute; give each "
                                 "attribute of a marginal once.")
            mask = sum(1 << a for a in S)
            items.append((mask, v.check_real(w, name="theta", caller=caller, low=0.0)))
    else:
        th = v.check_vector(theta, name="theta", caller=caller, length=2**d,
                            meaning="2^d, one weight per attribute subset by bitmask", bools=False)
        if np.any(th < 0):
            raise ValueError(f"The 'theta' parameter of {caller} must hold weights >= 0. "
                             f"Got {int(np.sum(th < 0))} negative entries.")
        items = list(enumerate(th.tolist()))
    items = [(mask, w) for mask, w in items if w > 0]
    if not items:
        raise ValueError(f"The 'theta' parameter of {caller} must have a positive weight. Got all zeros.")
    used = 0
    for mask, _ in items:
        used |= mask
    # an identity only for the attributes some marginal keeps (each was built, 7.3 TiB for 10⁶ values, even for the
    # total alone), and refused by name, not by MemoryError, when it would not fit
    sizes = sorted({n for i, n in enumerate(shape) if used >> i & 1})
    v.check_allocation(sum(n * n for n in sizes), what=f"the identity factors of sizes {sizes}", caller=caller)
    eye = {n: Strategy(np.eye(n), f"I{n}") for n in sizes}
    one = {n: Strategy(np.ones((1, n)), f"T{n}") for n in shape}
    terms = tuple(StrategyProduct(tuple(eye[n] if mask >> i & 1 else one[n] for i, n in enumerate(shape)), w)
                  for mask, w in items)
    return ImplicitStrategy(terms, name)


@dataclass(frozen=True)
class SensitivityParts:
    """Δ (L1) or Δ² (L2) = ``scaled``·2^``exponent``: the sensitivity before it is made a float.

    ``scaled`` lies in [2⁻²ᵈ⁻², K·∏pᵢ] whatever the strategy's scale, so figures built from it (Δ², c·Δ²·u)
    never over- or underflow on the way; :meth:`value` gives Δ itself as a normal float, or raises.
    """

    scaled: float
    exponent: int
    norm: str
    exact: bool
    method: str

    def value(self, *, what: str, caller: str = "sensitivity", round_up: bool = False) -> float:
        return norm_from_parts(self.scaled, self.exponent, self.norm, what=what, caller=caller, round_up=round_up)

    def rescaled(self, shift: int) -> float:
        """Δ·2⁻ˢʰⁱᶠᵗ as a float (L2: the root taken), for a strategy rescaled by 2⁻ˢʰⁱᶠᵗ; shift is chosen
        by :func:`normalised` so that this is of moderate size."""
        power = 1 if self.norm == "l1" else 2
        x = math.ldexp(self.scaled, self.exponent - power * shift)
        return x if power == 1 else math.sqrt(x)


def sensitivity_parts(strategy: ImplicitStrategy, norm: str = "l1", *, scan_limit: int = SCAN_LIMIT
                      ) -> SensitivityParts:
    """:func:`sensitivity` before the final conversion to a float (see :class:`SensitivityParts`).

    Each factor's column norms are taken at a power-of-two scale (:func:`column_norm_parts`: c·2ᵏ with
    max c ≥ 1/4), each weight split as θ = m·2ᵗ (frexp), and the exponents summed as integers. Term k's
    largest column norm is then Tₖ = μₖ·2^{Eₖ}, μₖ in [1/2, 1); all terms are expressed relative to
    R = maxₖ Eₖ (coefficients μ·2^{Eₖ−R} ≤ 1), so the largest term is in [1/2, 1) and Δ^power/2^R in
    [1/2, K·∏pᵢ]. A term below 2⁻¹⁰⁷⁴ of the largest underflows to 0 in this sum: relative to Δ that is
    < K·2⁻¹⁰⁷³, far below rounding (and covered by the release's upward rounding).
    """
    caller = "sensitivity"
    if not isinstance(strategy, ImplicitStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be an ImplicitStrategy. "
                        f"Got {type(strategy).__name__}.")
    v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    scan_limit = v.check_int(scan_limit, name="scan_limit", caller=caller, low=0)  # True, nan, -5 turned the scan off
    power = 1 if norm == "l1" else 2
    memo: dict[int, tuple[np.ndarray, int]] = {}  # factors shared by terms (marginals) are read once
    cols, coef_m, coef_k, tops_m, tops_e = [], [], [], [], []
    for t in strategy.terms:
        cs, k = [], 0
        for f in t.factors:
            if id(f) not in memo:
                memo[id(f)] = column_norm_parts(f.matrix, norm)
            c, kf = memo[id(f)]
            cs.append(c)
            k += kf
        wm, we = math.frexp(t.weight)
        m, k = wm**power, k + power * we
        top_m, top_e = m, k  # Tₖ = top_m·2^top_e, renormalised after every factor: never over/underflows
        for c in cs:
            top_m, de = math.frexp(top_m * float(c.max()))
            top_e += de
        cols.append(cs)
        coef_m.append(m)
        coef_k.append(k)
        tops_m.append(top_m)
        tops_e.append(top_e)
    R = max(tops_e)
    with np.errstate(under="ignore"):
        upper = math.fsum(math.ldexp(tm, te - R) for tm, te in zip(tops_m, tops_e, strict=True))
        coef = np.array([math.ldexp(m, k - R) for m, k in zip(coef_m, coef_k, strict=True)])
    if strategy.is_product:
        return SensitivityParts(upper, R, norm, True, "product")
    if all(float(np.ptp(c)) <= 4 * np.finfo(float).eps * float(c.max()) for cs in cols for c in cs):
        return SensitivityParts(upper, R, norm, True, "uniform")
    N = strategy.domain_size
    if N * len(cols) <= scan_limit and N <= ck.MAX_VECTOR_ENTRIES:
        with np.errstate(under="ignore"):
            best = _scan_max(cols, coef, strategy.shape)
        if best is not None and math.isfinite(best) and best > 0:
            return SensitivityParts(best, R, norm, True, "scan")
    return SensitivityParts(upper, R, norm, False, "upper_bound")


def sensitivity(strategy: ImplicitStrategy, norm: str = "l1", *, scan_limit: int = SCAN_LIMIT) -> Sensitivity:
    """Largest column norm of an implicit strategy, computed factor-wise (see the module docstring).

    Exact for a product (the max of a product of non-negative factors is the product of maxima), when
    every factor's column norms are uniform, or by a blocked scan of all N cells when N·terms ≤
    ``scan_limit`` (O(N·terms) time, O(block) memory). Otherwise the upper bound Σₖ θₖ ∏ᵢ maxᵢ (L1; the
    L2 analogue under the root), proven by bounding each summand by its maximum; ``exact`` is then False.

    Scale-safe (:func:`sensitivity_parts`): exact to rounding for any finite weights and factors (e.g. a
    1e-170 ⊗ 1e170 product, weight 1e200), never 0, inf or nan; a Δ outside float64's normal range
    (below ≈2.2e-308 or above ≈1.8e308) raises ValueError telling to rescale the strategy.
    """
    parts = sensitivity_parts(strategy, norm, scan_limit=scan_limit)
    return Sensitivity(parts.value(what=f"strategy '{strategy.name}'"), parts.exact, parts.method)


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
