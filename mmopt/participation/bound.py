"""A certified lower bound under a participation schema at any n, in O(n log n): the diagonal bound.

Notation: see :mod:`mmopt.participation.optimum`, whose dual gives, for weights on (pattern, Y) pairs summing
to M, tr(G X⁻¹) ≥ S(M)²/(total weight) for every X of sensitivity ≤ 1. Take disjoint allowed patterns
P_1, …, P_m, Y = I on each (unit gradients orthogonal to each other, an allowed choice) with weight λ_j: then
M = diag(λ_j on P_j) and, as ‖Z‖_* ≥ tr(Z) for any square Z (Q = I in ‖Z‖_* = max_{‖Q‖≤1} tr(QᵀZ)),

    S(M) = ‖G^{1/2} M^{1/2}‖_* ≥ Σ_j √λ_j H_j,   H_j = Σ_{t∈P_j} h_t,   h = diag(G^{1/2}),

so the optimum is at least max_λ (Σ_j √λ_j H_j)²/Σ_j λ_j = Σ_j H_j² (λ_j ∝ H_j², Cauchy–Schwarz). With one
participation (P_j = {t}) this is :func:`mmopt.toeplitz.prefix_bound`'s diagonal bound Σ h_t². The patterns:
fixed epochs' own; for minimum separation (b, k), steps s = max(b, ⌈n/k⌉) apart, {j, j + s, …} for j < s
(each at most k steps, all allowed). h comes in closed form for prefix sums and all ranges
(:func:`mmopt.toeplitz.bound.gram_sqrt_diagonal`).
"""

from __future__ import annotations

import numpy as np

from mmopt.participation.schemas import FixedEpochs, MinSeparation, Single, as_schema

__all__ = ["diagonal_bound"]


def pattern_spacing(schema, n: int) -> int:
    """s: the bound's patterns are {j, j + s, …}, j < s."""
    if isinstance(schema, Single):
        return n
    if isinstance(schema, FixedEpochs):
        return schema.separation(n)
    if isinstance(schema, MinSeparation):
        return max(schema.separation_steps, -(-n // schema.max_participations))
    raise TypeError(f"diagonal_bound: no bound for the schema {schema!r}")


def diagonal_bound(workload, participation) -> float:
    """Σ_j (Σ_{t∈P_j} h_t)², a lower bound on Δ²·tr(G X⁻¹) under ``participation`` (module docstring).

    Parameters
    ----------
    workload : mmopt.toeplitz.prefix(n) / all_range(n), or the dense prefix(n) / all_range(n)
    participation : a schema of :mod:`mmopt.participation`

    Examples
    --------
    >>> import mmopt
    >>> from mmopt import toeplitz
    >>> one = diagonal_bound(toeplitz.prefix(1024), mmopt.participation.single())
    >>> bool(np.isclose(one, toeplitz.prefix_bound(1024).diagonal))
    True
    >>> round(diagonal_bound(toeplitz.prefix(1024), mmopt.participation.fixed_epochs(4)) / one, 3)
    3.902
    """
    from mmopt.toeplitz.bound import gram_sqrt_diagonal
    from mmopt.toeplitz.error import as_stream_workload

    caller = "diagonal_bound"
    W = as_stream_workload(workload, caller)
    schema = as_schema(participation, caller)
    n = W.n
    if not isinstance(schema, Single):
        schema.check_n(n, caller)
    h = gram_sqrt_diagonal(n, W.kind)
    s = pattern_spacing(schema, n)
    H = np.bincount(np.arange(n) % s, weights=h, minlength=s)
    return float(H @ H * (1 - 64 * n * np.finfo(float).eps))  # round-off of the FFT and the sums
