"""H_b, the b-ary tree of ranges, on prefix sums and all ranges at any n: O(n) to release and to evaluate exactly.

Notation: see README and :mod:`mmopt.toeplitz._tree_algebra`. The strategy is B: one row 1ᵥᵀ per node v of the
b-ary tree on n cells (near-equal splits, larger parts first, down to single cells: HDMM's ``hier``), each node
measured once (Hay et al.'s H_b with uniform weights), Δ₁ = the tree's depth, Δ₂ = its square root. Under ε-DP it
is the strategy that wins at large n: on prefix sums of 8,192 cells H₈ has 1/235 of the Laplace error of the
Toeplitz square root with unit column norms. With M = BᵀB,

* release: y = B x + z, x̂ = M⁻¹Bᵀy (two passes over the tree);
* total error Δ²·tr(G M⁻¹), G semiseparable: one pass (:func:`~mmopt.toeplitz._tree_algebra.unit_total`);
* a query q's variance s²‖B M⁻¹ q‖² (a norm, not a quadratic form that could cancel to below zero).

Scaling each column to Δ₁ = 1 instead (the p-Identity form of H_b, :func:`mmopt.search.min_error_fast.hierarchy_theta`)
is the same strategy when n is a power of b; otherwise leaves sit at two depths, the internal rows stop being sums,
and the error rose 3.3× (prefix sums of 6,000 cells, H₈; 1.8× on all ranges): it is not offered.
The branching matters more than its usual advice (b ≈ 16, Qardaji, Yang & Li): a tree whose levels end near the
cells, b = ⌈n^{1/L}⌉, had 0.80× the error of H₈ on prefix sums of 6,000 cells (b = 9); see :func:`branchings`.
So do the levels' weights (``level_weights``, one per depth, root first; each row of a level is scaled by it):
searched on the exact error (:func:`weighted`) they gave 0.87–0.92× the unit-weight error on prefix sums and
0.68–0.80× on all ranges (1,024 to 10⁶ cells), whose root's weight goes to its lower bound.

Sources: Hay, Rastogi, Miklau & Suciu (VLDB 2010) for hierarchical counts and their least-squares consistency;
Qardaji, Yang & Li (VLDB 2013) for the branching under Laplace noise.

Examples
--------
>>> from mmopt import Privacy, toeplitz
>>> H = toeplitz.tree(10**6, 16)
>>> r = toeplitz.evaluate(toeplitz.prefix(10**6), H, Privacy(1.0))
>>> r.sensitivity, f"{r.total_squared_error:.6e}"
(6.0, '8.791695e+08')
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from mmopt._base import validation as v
from mmopt.toeplitz import _tree_algebra as ta
from mmopt.toeplitz.error import StreamWorkload, ToeplitzErrorReport, resolve_privacy

__all__ = ["EVALUATIONS_PER_LEVEL", "MAX_WEIGHT_RATIO", "RANGE_EXACT_MAX_N", "TreeStrategy", "branchings",
           "path_sensitivity", "prefix_report", "tree", "weighted"]

#: The largest ratio between two level weights: the total's relative round-off grows as its square (2·10⁻⁹ here).
MAX_WEIGHT_RATIO = 1e4

#: :func:`weighted`'s default evaluation budget, per level of the tree.
EVALUATIONS_PER_LEVEL = 100


@dataclass(frozen=True)
class TreeStrategy:
    """H_b on n cells, each node measured once with its level's weight (all 1 by default; module docstring); stored
    as (n, branching, level_weights)."""

    n: int
    branching: int = 8
    level_weights: tuple[float, ...] | None = None

    def __post_init__(self):
        # frozen: the checked Python ints replace what was passed (numpy integers included); a branching past n is
        # the tree of branching n (the root's children are the cells), so tree(5, 5) == tree(5, 100)
        n = v.check_int(self.n, name="n", caller="TreeStrategy", low=1)
        b = v.check_int(self.branching, name="branching", caller="TreeStrategy", low=2)
        object.__setattr__(self, "n", n)
        object.__setattr__(self, "branching", max(2, min(b, n)))
        if self.level_weights is not None:
            w = v.check_vector(self.level_weights, name="level_weights", caller="TreeStrategy",
                               length=len(self.tree.levels), meaning="the tree's levels, root first")
            if not np.all(w > 0):
                raise ValueError(f"The 'level_weights' parameter of TreeStrategy must hold weights > 0. Got "
                                 f"{w.min():.6g}.")
            # the passes subtract rank-one terms: the total lost half its digits at a 10⁸ ratio between levels
            # (47.7 for 32.0 on 3 cells) and 8·10⁻⁶ of itself at 10⁶, 2·10⁻⁹ at 10⁴; and w⁴ must stay in float64
            if w.max() > MAX_WEIGHT_RATIO * w.min() or not (1e-50 <= w.min() and w.max() <= 1e50):
                raise ValueError(f"The 'level_weights' parameter of TreeStrategy must hold weights within a ratio of "
                                 f"{MAX_WEIGHT_RATIO:.0e} of each other, between 1e-50 and 1e50 (the exact passes "
                                 f"keep their digits there). Got {w.min():.3g} to {w.max():.3g}. A common factor "
                                 "changes neither the error nor a release: scale them together.")
            object.__setattr__(self, "level_weights", tuple(float(x) for x in w))

    @property
    def name(self) -> str:
        return f"H{self.branching}" + ("" if self.level_weights is None else "w")

    @property
    def _w(self) -> np.ndarray | None:
        return None if self.level_weights is None else np.asarray(self.level_weights)

    @property
    def domain_size(self) -> int:
        return self.n

    @functools.cached_property
    def tree(self) -> ta.Levels:
        return ta.levels(self.n, self.branching)

    @property
    def n_rows(self) -> int:
        return self.n + sum(L.inner.size for L in self.tree.levels)

    def sensitivity(self, norm: str = "l1") -> float:
        """Exact: column j holds its root-to-leaf path's weights, so Δ₁ = max_j Σ_path w and Δ₂ = max_j (Σ_path w²)^½
        (the deepest leaf's dⱼ and √dⱼ with unit weights)."""
        norm = v.check_choice(norm, name="norm", caller="TreeStrategy.sensitivity", choices=("l1", "l2"))
        return path_sensitivity(self.tree, self._w, norm)

    def apply(self, x) -> np.ndarray:
        """A x = Ω B x: the cells, then each internal node level by level, root first (:meth:`to_dense`'s rows)."""
        x = v.check_vector(x, name="x", caller="TreeStrategy.apply", length=self.n)
        return ta.row_weights(self.tree, self._w) * ta.node_sums(self.tree, x)

    def estimate(self, y) -> np.ndarray:
        """x̂ = (AᵀA)⁻¹Aᵀy, the least-squares estimate from noisy answers y to :meth:`apply`'s rows."""
        y = v.check_vector(y, name="y", caller="TreeStrategy.estimate", length=self.n_rows,
                           meaning="the strategy's rows, n_rows")
        w = self._w
        return ta.solve(self.tree, ta.transpose_apply(self.tree, ta.row_weights(self.tree, w) * y), w)

    def unit_total(self, kind: str) -> float:
        """tr(G X⁻¹) at Δ = 1 for ``kind`` in {"prefix", "all_range"} on n cells."""
        kind = v.check_choice(kind, name="kind", caller="TreeStrategy.unit_total", choices=("prefix", "all_range"))
        return ta.unit_total(self.tree, kind, self._w)

    def query_norms(self, Q) -> np.ndarray:
        """‖B M⁻¹ q‖ per row q of ``Q`` (queries × n): a query's standard deviation per unit of noise standard
        deviation."""
        Q = v.check_matrix(Q, name="Q", caller="TreeStrategy.query_norms")
        v.check_same_domain(Q.shape[1], self.n, caller="TreeStrategy.query_norms", what=("the queries Q", "the tree"))
        out, w = np.empty(Q.shape[0]), self._w
        rows = ta.row_weights(self.tree, w)
        for i, q in enumerate(Q):
            out[i] = np.linalg.norm(rows * ta.node_sums(self.tree, ta.solve(self.tree, q, w)))
        return out

    def inverse_gram_columns(self, lo: int, hi: int) -> np.ndarray:
        """(AᵀA)⁻¹[:, lo:hi], one O(n) solve a column (at this strategy's scale, Δ = 1's as
        :meth:`prefix_variances`). ``0 ≤ lo ≤ hi ≤ n``: a negative ``lo`` wrapped round to other columns."""
        hi = v.check_int(hi, name="hi", caller="TreeStrategy.inverse_gram_columns", low=0, high=self.n)
        lo = v.check_int(lo, name="lo", caller="TreeStrategy.inverse_gram_columns", low=0, high=hi)
        out = np.zeros((self.n, hi - lo))
        unit = np.zeros(self.n)
        for j in range(lo, hi):
            unit[j] = 1.0
            out[:, j - lo] = ta.solve(self.tree, unit, self._w)
            unit[j] = 0.0
        return out

    def prefix_variances(self) -> np.ndarray:
        """q (AᵀA)⁻¹ qᵀ for every prefix q = 1_[0, t], t = 0..n−1 (at this strategy's scale), O(n log_b n)
        (:func:`~mmopt.toeplitz._tree_algebra.prefix_variances`)."""
        return ta.prefix_variances(self.tree, self._w)

    def stream_report(self, W: StreamWorkload, privacy, norm, caller: str) -> ToeplitzErrorReport:
        """Its exact report for :func:`mmopt.toeplitz.evaluate` (:func:`prefix_report`): the total in one pass, every
        prefix's variance in O(n log_b n) (on all ranges of 200 cells with H₄ the bound on the largest variance is
        517.3, the true maximum 209.0 and the prefix's own variance 129.3)."""
        return prefix_report(self, W, privacy, norm, caller)

    def to_dense(self) -> np.ndarray:
        """A as an (n + p)×n array, rows as :meth:`apply` orders them (small n; refused past the allocation
        limit before allocating)."""
        rows = self.n_rows
        v.check_allocation(rows * self.n, what=f"the dense {rows:,}×{self.n:,} tree strategy",
                           caller="TreeStrategy.to_dense")
        A = np.zeros((rows, self.n))
        A[np.arange(self.n), np.arange(self.n)] = 1.0
        r = self.n
        for L in self.tree.levels:
            for lo, size in zip(L.lo[L.inner], L.size[L.inner], strict=True):
                A[r, lo:lo + size] = 1.0
                r += 1
        return A * ta.row_weights(self.tree, self._w)[:, None]

    def to_strategy(self):
        """A as a dense :class:`~mmopt.Strategy` (small n only, as :meth:`to_dense`)."""
        from mmopt.dense._strategy_core import Strategy, handed_over
        return Strategy(handed_over(self.to_dense()), self.name)

    def json_summary(self) -> dict:
        """The JSON summary :meth:`mmopt.OptimizeResult.to_dict` records (n and b rebuild it)."""
        return {"kind": "tree", "name": self.name, "shape": [self.n_rows, self.n], "domain_shape": [self.n],
                "domain_size": self.n, "n_rows": self.n_rows, "branching": self.branching,
                "level_weights": None if self.level_weights is None else list(self.level_weights)}

    def __repr__(self) -> str:
        weights = "" if self.level_weights is None else f", level_weights=({len(self.level_weights)} levels)"
        return f"TreeStrategy(n={self.n}, branching={self.branching}{weights})"


#: Up to this many cells a tree's report on all ranges holds the largest range variance exactly (one O(n) solve a
#: column and an O(n²) pass: 0.35 CPU s at 2,048 cells, binary trees 0.7 s; 0.9 s at 4,096, 4.1 s at 8,192, paid
#: by every evaluation, auto's tree candidates too); past it the largest prefix's and a proven bound, 2.3–2.7× the
#: truth
RANGE_EXACT_MAX_N = 2_048


def path_sensitivity(T: ta.Levels, w: np.ndarray | None, norm: str) -> float:
    """max over cells of Σ w (L1) or √Σ w² (L2) along the root-to-leaf path: only the leaves' depths matter."""
    if w is None:
        deepest = float(T.depth.max())
        return deepest if norm == "l1" else float(np.sqrt(deepest))
    ends = np.unique(T.depth) - 1
    if norm == "l1":
        return float(np.cumsum(w)[ends].max())
    return float(np.sqrt(np.cumsum(w * w)[ends].max()))


def tree(n: int, branching: int = 8) -> TreeStrategy:
    """H_b on n cells for prefix sums or all ranges (module docstring): O(n) to build, release and evaluate."""
    return TreeStrategy(n, branching)


def branchings(n: int) -> tuple[int, ...]:
    """The branchings worth scoring on n cells: b = ⌈n^{1/L}⌉ for the depths L from ⌈log₃₂ n⌉ to ⌈log₄ n⌉ (each
    level then ends near single cells, where a fixed b leaves a last level of few, small nodes), with 8 and 16.

    >>> branchings(6000)
    (4, 5, 6, 8, 9, 16, 19)
    """
    if n < 2:
        return (2,)
    lo, hi = max(1, math.ceil(math.log(n, 32) - 1e-9)), max(1, math.ceil(math.log(n, 4) - 1e-9))
    out = {8, 16} | {max(2, math.ceil(n ** (1.0 / L) - 1e-9)) for L in range(lo, hi + 1)}
    return tuple(sorted(b for b in out if b <= max(n, 2)))


def weighted(n: int, branching: int, kind: str, *, max_evaluations: int | None = None):
    """H_b with level weights searched for ``kind``: L-BFGS-B (finite differences) on the exact log Δ₁(w)² +
    log tr(G X(w)⁻¹) over weights in [1/100, 100] (so within :data:`MAX_WEIGHT_RATIO` of each other), the deepest
    level's fixed at 1, from unit weights. Returns (strategy, unit-ε objective, converged, evaluations). A
    heuristic: the error of what it returns is exact, its optimality is not claimed. Each evaluation is one O(n)
    pass (:func:`~mmopt.toeplitz._tree_algebra.unit_total`); ``max_evaluations`` defaults to
    :data:`EVALUATIONS_PER_LEVEL` per level.
    Measured: prefix sums 0.87–0.92× the unit-weight error (1,024 to 10⁶ cells), all ranges 0.68–0.80×, where the
    root's weight goes to the bound (it barely informs a range)."""
    from scipy.optimize import minimize
    unit = TreeStrategy(n, branching)
    T = unit.tree
    L = len(T.levels)
    if L < 2:
        return unit, unit.sensitivity("l1") ** 2 * unit.unit_total(kind), True, 1
    calls, values = [0], {}

    def objective(x):
        calls[0] += 1
        w = np.exp(np.append(x, 0.0))
        f = 2.0 * math.log(path_sensitivity(T, w, "l1")) + math.log(ta.unit_total(T, kind, w))
        values.setdefault("start", f)  # L-BFGS-B evaluates its start first: unit weights
        return f

    budget = max_evaluations if max_evaluations is not None else EVALUATIONS_PER_LEVEL * L
    edge = 0.5 * math.log(MAX_WEIGHT_RATIO)
    res = minimize(objective, np.zeros(L - 1), method="L-BFGS-B", bounds=[(-edge, edge)] * (L - 1),
                   # a 10⁻⁶ difference step: at 10⁻⁸ the round-off of a total over 10⁶ cells broke the line search
                   # (all ranges of 10⁶ cells: stopped after 343 evaluations, 34 s; 126 and converged, 12 s)
                   options={"maxfun": budget, "ftol": 1e-8, "gtol": 1e-6, "eps": 1e-6})
    x = res.x if res.fun < values["start"] else np.zeros(L - 1)
    S = TreeStrategy(n, branching, tuple(np.exp(np.append(x, 0.0))))
    return S, S.sensitivity("l1") ** 2 * S.unit_total(kind), bool(res.success), calls[0]


def prefix_report(strategy, W: StreamWorkload, privacy, norm, caller: str) -> ToeplitzErrorReport:
    """The report of a strategy that gives its Δ (``sensitivity(norm)``), its exact unit total on prefix sums or all
    ranges (``unit_total(kind)``) and every prefix's variance (``prefix_variances()``, at Δ = 1's scale): the
    largest prefix variance exactly. On all ranges, with ``inverse_gram_columns`` (the tree: O(n) a column) and n ≤
    :data:`RANGE_EXACT_MAX_N`, the largest range variance exactly
    (:func:`mmopt.toeplitz.range_variance.range_maximum`); else the largest prefix's (attained) with
    ``max_variance_exact`` False and the proven upper bound (2·max_t σₜ)² (a range is a difference of two prefixes)
    as ``max_variance_upper``. The tree strategy and the p-Identity one past the dense size
    (:class:`mmopt.search.pidentity.PIdentityStrategy`) report this way."""
    v.check_same_domain(W.n, strategy.n, caller=caller)
    norm, factor = resolve_privacy(privacy, norm, caller)
    delta = strategy.sensitivity(norm)
    scale = factor * delta * delta
    prefixes = strategy.prefix_variances()
    if W.kind == "all_range":
        from mmopt.toeplitz.range_variance import all_ranges
        worst, query, exact, bound = all_ranges(prefixes, getattr(strategy, "inverse_gram_columns", None), W.n,
                                                RANGE_EXACT_MAX_N)
    else:
        t = int(np.argmax(prefixes))
        worst, query, exact, bound = float(prefixes[t]), (0, t), True, None
    return ToeplitzErrorReport(W.name, strategy.name, W.n, W.n_queries, norm, delta, factor,
                               scale * strategy.unit_total(W.kind), scale * worst, query, exact, privacy,
                               None if bound is None else scale * bound)
