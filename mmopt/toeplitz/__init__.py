"""Prefix sums and ranges at any n: Toeplitz, banded and BLT strategies, exact error, certified bounds (issue 22).

Notation: see README. The prefix matrix W (lower-triangular ones) is the Toeplitz series 1/(1 − x); a
lower-triangular Toeplitz strategy C = T(c), optionally row-scaled (D·T(c)), is stored by c (or its BLT
parameters), and its decoder B = W C⁻¹ by b = cumsum(1/c): nothing n×n is formed, so n = 2²⁰ takes seconds.
Modules: :mod:`.strategies` (sqrt_strategy, banded, blt, equalized), :mod:`.error` (exact total and max
error for prefix and all ranges, O(n log n)), :mod:`.bound` (certified lower bounds from the closed-form SVD
of W), :mod:`.weighted` (the weighted square root paired with that bound: within 0.35 % of it for prefix and
0.01 % for all ranges at n = 2¹⁶, exact error in O(n log² n); :mod:`.weighted_exact` its release's exact Δ₂ and
correctly rounded answers), :mod:`.solve` (L-BFGS searches with exact FFT
gradients), :mod:`.dual` (the certified optimum of Program 5.2 up to n = 16,384 in O(n²) per iteration, from
the tridiagonal G⁻¹), :mod:`.maxvar` (the largest variance over per-query targets, certified, in prefix
coordinates: all ranges on 1,024 cells with 524,800 targets in ~30 s), :mod:`.streaming` (BLT online, O(d)
state), :mod:`.trees` (H_b, the ε-DP strategy at large n: O(n) release and exact error), :mod:`.auto`
(``mmopt.optimize(..., method="auto")`` on these workloads: the dense search where it is
fast, the closed forms beyond).
Sources: Henzinger, Upadhyay & Upadhyay (SODA 2023) and Fichtenberger, Henzinger & Upadhyay (ICML 2023) for
the square-root factorisation; Dvijotham, McMahan, Pillutla, Steinke & Thakurta (2024) for BLT; McKenna
(ICLR 2025) for banded factorisations.

Examples
--------
>>> from mmopt import toeplitz
>>> r = toeplitz.evaluate(toeplitz.prefix(2**16), toeplitz.sqrt_strategy(2**16))
>>> b = toeplitz.prefix_bound(2**16)
>>> float(round(r.total_squared_error / b.value, 3))   # the square root, certified within 8.3 % of optimal
1.083
>>> e = toeplitz.evaluate(toeplitz.prefix(2**16), toeplitz.equalized(toeplitz.sqrt_strategy(2**16)))
>>> float(round(e.total_squared_error / b.value, 3))   # rows scaled to unit column norms: within 2.4 %
1.024
"""

from mmopt.toeplitz.bound import (
    PrefixBound,
    all_range_bound,
    lower_bound,
    prefix_bound,
    prefix_singular_values,
    range_singular_values,
    svd_bound,
)
from mmopt.toeplitz.dual import DualSolution, solve_dual
from mmopt.toeplitz.error import StreamWorkload, ToeplitzErrorReport, all_range, evaluate, prefix
from mmopt.toeplitz.solve import optimize
from mmopt.toeplitz.strategies import ToeplitzStrategy, banded, blt, equalized, sqrt_strategy
from mmopt.toeplitz.streaming import BLTDecoder, BLTEncoder, offline_decode
from mmopt.toeplitz.trees import TreeStrategy, tree
from mmopt.toeplitz.weighted import WeightedSqrtStrategy, evaluate_weighted, weighted_sqrt

__all__ = ["BLTDecoder", "BLTEncoder", "DualSolution", "PrefixBound", "StreamWorkload", "ToeplitzErrorReport",
           "ToeplitzStrategy", "TreeStrategy", "WeightedSqrtStrategy", "all_range", "all_range_bound", "banded", "blt",
           "equalized", "evaluate", "evaluate_weighted", "lower_bound", "offline_decode", "optimize", "prefix",
           "prefix_bound", "prefix_singular_values", "range_singular_values", "solve_dual", "sqrt_strategy",
           "svd_bound", "tree", "weighted_sqrt"]
