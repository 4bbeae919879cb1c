"""Equalising a 2b-band strategy's steps under ``min_separation(b, k)``: a heuristic, evaluated exactly.

Notation: see :mod:`mmopt.participation.chain_banded`. Δ² is the largest pattern sum of |X| (X = CᵀC; the chain's
upper bound, exact when X ≥ 0 on the worst pattern), so a step t whose best pattern through it sums to
v_t < Δ² has slack: the noise it adds could be smaller. Scaling column t of C by (v_t / Δ²)^{−1/2} spends it
(X_tt grows by Δ²/v_t, each pair by the geometric mean of its two steps' factors), after which every step's best
pattern is close to Δ²; the error ‖W C⁻¹‖²_F falls wherever the scaled columns gain more than Δ² does. Nothing
guarantees that, so :func:`equalise` keeps the scaled strategy only when its exact error (:func:`scaled_error`:
one triangular inverse and the chain) is lower.

Measured (prefix sums, min_separation(1,024, 4) on 4,096 steps, the 2b-band strategy carried from 2,048 steps by
:func:`mmopt.participation.chain_levels.carry`: most steps' v_t at 0.995–0.997 of Δ²): 205,949 → 205,389 in 2 CPU s
(a helper's exploration; exponent ½ of v_t best among 0.25 … 0.75, a second pass no gain).
"""

from __future__ import annotations

import numpy as np

from mmopt.participation.chain_banded import _gram_band, scaled_error
from mmopt.participation.sensitivity import _pair_edges

__all__ = ["equalise", "through_step_max"]


def _forward(dg: np.ndarray, w_in: np.ndarray, src: np.ndarray, b: int, k: int) -> np.ndarray:
    """F[i − 1, t]: the best sum of a pattern of exactly i steps ending at t (the chain of
    :func:`mmopt.participation.sensitivity.chain_pattern_max`, every count kept)."""
    n = dg.size
    F = np.empty((k, n))
    F[0] = dg
    for i in range(1, k):
        before = np.maximum.accumulate(F[i - 1])
        far = np.concatenate([np.full(min(2 * b, n), -np.inf), before[:max(n - 2 * b, 0)]])
        F[i] = dg + np.maximum(far, np.max(F[i - 1][src] + w_in, axis=1))
    return F


def through_step_max(diagonal: np.ndarray, pairs: np.ndarray, separation: int, participations: int) -> np.ndarray:
    """v_t = max over the patterns π ∋ t of Σ_{s∈π} diagonal_s + 2 Σ_{consecutive pairs} pairs (as
    :func:`~mmopt.participation.sensitivity.chain_pattern_max`, whose value is max_t v_t): the best pattern ending
    at t joined with the best starting there, of at most k steps in all.

    >>> pairs = np.zeros((4, 2))
    >>> pairs[0, 0] = 0.5                                  # the pair (0, 2)
    >>> through_step_max(np.array([1.0, 0.0, 1.0, 1.0]), pairs, 2, 2).tolist()
    [3.0, 1.0, 3.0, 2.0]
    """
    dg = np.asarray(diagonal, dtype=float)
    P = np.asarray(pairs, dtype=float)
    n, b, k = dg.size, separation, participations
    d, has_src, src, _, _ = _pair_edges(n, b)
    w_in = np.where(has_src, 2.0 * P[src, d[None, :]], -np.inf)
    F = _forward(dg, w_in, src, b, k)
    # backward: the same chain in reversed time u = n − 1 − t, where the pair (s, s + b + d) starts at
    # u = n − 1 − s − b − d: its weight there is P[n − 1 − b − d − u, d]
    start = n - 1 - b - d[None, :] - np.arange(n)[:, None]
    rev = np.where(start >= 0, P[np.maximum(start, 0), d[None, :]], 0.0)
    B = _forward(dg[::-1], np.where(has_src, 2.0 * rev[src, d[None, :]], -np.inf), src, b, k)[:, ::-1]
    best = np.full(n, -np.inf)
    for i in range(1, k + 1):  # i steps up to t, j from t on (t counted once): i + j − 1 ≤ k
        best = np.maximum(best, F[i - 1] + np.max(B[:k + 1 - i], axis=0) - dg)
    return best


def equalise(C: np.ndarray, separation: int, participations: int):
    """(error, C) of the better of C and C with column t scaled by (v_t / max v)^{−1/2}, v = the through-step
    maxima of |X| (module docstring), each scaled to Δ = 1 by :func:`scaled_error` (the chain's proven Δ²)."""
    b, k = separation, participations
    error, C0, _ = scaled_error(C, b, k)
    dg, P = _gram_band(C, b, k)
    v = through_step_max(dg, np.abs(P), b, k)
    if not np.all(np.isfinite(v)) or v.min() <= 0:
        return error, C0
    scaled_err, C1, _ = scaled_error(C * (v / v.max())[None, :] ** -0.5, b, k)
    return (scaled_err, C1) if scaled_err < error else (error, C0)
