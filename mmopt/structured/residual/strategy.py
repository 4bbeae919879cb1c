"""Residual strategies: one weighted residual measurement per member S of a downward closure.

Notation: see README and :mod:`mmopt.structured.residual.closure`. The measurement of S is

    K_S = ⊗_{i∈S} Bᵢ ⊗_{i∉S} 1ᵀ,    BᵢᵀBᵢ = Rᵢ = I − J/nᵢ,

i.e. the marginal on S followed by a residual basis Bᵢ on each of its attributes; the strategy stacks c_S·K_S.
Since K_SᵀK_S = ⊗_{i∈S} Rᵢ ⊗_{i∉S} J = (N/N_S)·Q_S, its Gram is X = N·Σ_S (c_S²/N_S) Q_S: a scalar on every
residual subspace, so error and bounds are sums over the closure (:mod:`.error`).

**Which residual basis.** Any Bᵢ with BᵢᵀBᵢ = Rᵢ gives the same Gram, hence the same L2 error and Δ₂; they
differ in Δ₁. We take Bᵢ = [1, −1]/√2 for nᵢ = 2 (column L1 norm 1/√2, the least possible since it equals
the L2 norm) and the projector Bᵢ = Rᵢ itself for nᵢ ≥ 3 (column L1 norm 2(nᵢ−1)/nᵢ). Both have *equal*
column norms, and 1ᵀ has too, so every column of the strategy has the same norm and

    Δ₂² = Σ_S c_S² ∏_{i∈S} (1 − 1/nᵢ),      Δ₁ = Σ_S c_S ∏_{i∈S} ‖Bᵢ‖₁      (both exact).

(A Helmert basis has a smaller largest column L1 norm for nᵢ = 3, 4 — 1.12 and 1.40 against 1.33 and 1.5 —
but unequal columns; the projector keeps the measurement of S the size of the marginal on S.) ResidualPlanner
(Xiao et al., NeurIPS 2023, arXiv 2305.08175) uses difference matrices with correlated noise; its Gram per
subset is the same (N/N_S)·Q_S up to the scale, so the allocations agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from mmopt._base import validation as v
from mmopt._base.readonly import read_only
from mmopt.dense._strategy_core import NORMS, Strategy
from mmopt.structured import _checks as ck
from mmopt.structured.residual import closure as cl
from mmopt.structured.strategies import ImplicitStrategy, Sensitivity, StrategyProduct


def residual_basis(n: int) -> np.ndarray:
    """Bᵢ with BᵢᵀBᵢ = I − J/n and equal column norms: [1, −1]/√2 for n = 2, else I − J/n (module docstring).

    Examples
    --------
    >>> B = residual_basis(3)
    >>> bool(np.allclose(B.T @ B, np.eye(3) - 1 / 3)), residual_basis(2).round(4).tolist()
    (True, [[0.7071, -0.7071]])
    """
    n = v.check_int(n, name="n", caller="residual_basis", low=2)
    if n == 2:
        return np.array([[1.0, -1.0]]) / math.sqrt(2.0)
    return np.eye(n) - 1.0 / n


def basis_norm(n: int, norm: str) -> float:
    """The column norm of :func:`residual_basis` (n): L1 1/√2 or 2(n−1)/n; squared L2 1 − 1/n."""
    if norm == "l1":
        return 1.0 / math.sqrt(2.0) if n == 2 else 2.0 * (n - 1) / n
    return (n - 1) / n


@dataclass(frozen=True, eq=False)
class ResidualStrategy:
    """The stack of c_S·K_S over ``subsets`` (module docstring), as small per-attribute factors.

    Attributes
    ----------
    shape : tuple of int
    subsets : tuple of tuple of int
        The measured subsets S (sorted tuples, distinct; no attribute of size 1, whose residual space is empty).
    weights : ndarray
        c_S > 0. The Gaussian noise on measurement S, at noise σ per row, has variance σ² and the estimate of
        the residual of S variance σ²/c_S²: a larger weight is a more precise measurement.
    name : str

    Examples
    --------
    >>> A = residual_strategy((2, 3), {(): 1.0, (0,): 2.0, (1,): 2.0, (0, 1): 1.0})
    >>> A.n_rows, round(A.sensitivity("l2") ** 2, 12)           # 1 + 1 + 3 + 3 rows; 1 + 4·½ + 4·⅔ + ⅓
    (8, 6.0)
    """

    shape: tuple[int, ...]
    subsets: tuple[tuple[int, ...], ...]
    weights: np.ndarray = field(repr=False)
    name: str = "residual"

    def __post_init__(self) -> None:
        caller = "ResidualStrategy"
        shape = v.check_shape(self.shape, caller=caller)
        subsets = cl.check_sets(self.subsets, shape, name="subsets", caller=caller)
        if not subsets:
            raise ValueError(f"The 'subsets' parameter of {caller} must list at least one subset. Got none.")
        if len(set(subsets)) != len(subsets):
            raise ValueError(f"The 'subsets' parameter of {caller} must not repeat a subset. Got {len(subsets)} "
                             f"subsets, {len(set(subsets))} distinct.")
        empty = [S for S in subsets if any(shape[i] == 1 for i in S)]
        if empty:
            raise ValueError(f"The 'subsets' parameter of {caller} names {empty[0]}, which holds an attribute of "
                             "size 1: its residual space is empty. Leave such subsets out.")
        w = np.asarray(self.weights, dtype=float).ravel()
        if w.shape != (len(subsets),) or not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"The 'weights' parameter of {caller} must hold {len(subsets)} finite weights > 0 (one "
                             f"per subset). Got {np.asarray(self.weights).ravel().tolist()!r:.80} instead.")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "subsets", subsets)
        object.__setattr__(self, "weights", read_only(w))  # its Δ is charged from them: no edit in place

    @property
    def domain_size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def index(self) -> dict:
        """S → position in ``subsets``."""
        return {S: k for k, S in enumerate(self.subsets)}

    @property
    def n_rows(self) -> int:
        """p = Σ_S ∏_{i∈S} rows(Bᵢ)."""
        return sum(math.prod(self.rows(i) for i in S) for S in self.subsets)

    def rows(self, i: int) -> int:
        """Rows of the basis on attribute i: 1 for a binary attribute, else nᵢ."""
        return 1 if self.shape[i] == 2 else self.shape[i]

    def sensitivity(self, norm: str = "l1") -> float:
        """Δ₁ or Δ₂, exact (module docstring)."""
        return sensitivity(self, norm).value

    def to_implicit(self) -> ImplicitStrategy:
        """The same strategy as an :class:`~mmopt.structured.ImplicitStrategy`, one product per subset.

        Factors are shared per attribute size, so the object costs O(|subsets|·d) references.
        """
        bases = {n: Strategy(residual_basis(n), f"R{n}") for n in set(self.shape) if n > 1}
        ones = {n: Strategy(np.ones((1, n)), f"T{n}") for n in set(self.shape)}
        totals, terms = [ones[n] for n in self.shape], []
        for S, c in zip(self.subsets, self.weights.tolist(), strict=True):
            fs = list(totals)  # a C-level copy; only the attributes of S change
            for i in S:
                fs[i] = bases[self.shape[i]]
            term = StrategyProduct(tuple(fs), c)
            term.__dict__["shape"] = self.shape  # its cached shape, known (frozen dataclasses allow this write)
            terms.append(term)
        return ImplicitStrategy(tuple(terms), self.name)

    def json_summary(self) -> dict:
        """The summary ``OptimizeResult.to_dict`` and mmopt.save write (kind "residual", as save stores it)."""
        n, p = int(self.domain_size), int(self.n_rows)
        return {"kind": "residual", "name": self.name, "shape": [p, n],
                "domain_shape": [int(k) for k in self.shape], "domain_size": n, "n_rows": p}

    def __repr__(self) -> str:
        top = max(len(S) for S in self.subsets)
        return (f"ResidualStrategy(name={self.name!r}, d={len(self.shape)}, subsets={len(self.subsets):,}, "
                f"largest={top}, p={ck.fmt_int(self.n_rows)})")


def residual_strategy(shape, weights, *, name: str = "residual") -> ResidualStrategy:
    """A residual strategy from ``weights`` = {S: c_S} (attribute tuples; zero weights dropped).

    Raises ValueError naming the parameter for a bad shape, a repeated or out-of-range attribute, a subset
    with a size-1 attribute, or a weight that is negative, zero everywhere or not finite.
    """
    caller = "residual_strategy"
    shape = v.check_shape(shape, caller=caller)
    if not isinstance(weights, dict):
        raise TypeError(f"The 'weights' parameter of {caller} must be a dict {{attribute tuple: weight}}. "
                        f"Got {type(weights).__name__} instead.")
    # distinct: (1, 0) and (0, 1) as two keys (ResidualStrategy's own check named 'subsets', not this parameter)
    subsets = cl.check_sets(list(weights), shape, name="weights", caller=caller, distinct=True)
    c = [v.check_real(x, name="weights", caller=caller, low=0.0) for x in weights.values()]
    keep = [(S, x) for S, x in zip(subsets, c, strict=True) if x > 0]
    empty = [S for S, _ in keep if any(shape[i] == 1 for i in S)]
    if empty:
        raise ValueError(f"The 'weights' parameter of {caller} must not weight a subset holding an attribute of "
                         f"size 1 (its residual space is empty). Got a weight for {empty[0]} instead.")
    if not keep:
        raise ValueError(f"The 'weights' parameter of {caller} must have a positive weight. Got all zeros.")
    return ResidualStrategy(shape, tuple(S for S, _ in keep), np.array([x for _, x in keep]), name)


def sensitivity(strategy: ResidualStrategy, norm: str = "l1") -> Sensitivity:
    """Exact Δ₁ = Σ_S c_S ∏_{i∈S} ‖Bᵢ‖₁ or Δ₂ = (Σ_S c_S² ∏_{i∈S} (1 − 1/nᵢ))^{1/2}.

    Exact because every column of every factor has the same norm, so all N columns of the strategy do
    (the method is "uniform", as :func:`mmopt.structured.sensitivity` calls it).
    """
    caller = "residual.sensitivity"
    if not isinstance(strategy, ResidualStrategy):
        raise TypeError(f"The 'strategy' parameter of {caller} must be a ResidualStrategy. "
                        f"Got {type(strategy).__name__} instead.")
    v.check_choice(norm, name="norm", caller=caller, choices=NORMS)
    col = subset_norms(strategy.shape, strategy.subsets, norm)
    if norm == "l1":
        return Sensitivity(float(strategy.weights @ col), True, "uniform")
    return Sensitivity(math.sqrt(float(strategy.weights**2 @ col)), True, "uniform")


def subset_norms(shape, subsets, norm: str) -> np.ndarray:
    """Column norm of K_S per subset: ∏_{i∈S} ‖Bᵢ‖₁ (L1) or the squared L2 ∏_{i∈S} (1 − 1/nᵢ)."""
    per = {n: basis_norm(n, norm) for n in set(shape) if n > 1}
    return np.array([math.prod(per[shape[i]] for i in S) for S in subsets])
