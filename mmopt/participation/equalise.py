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
from mmopt.participation.sensitivity import _pair_edges, chain_ends

__all__ = ["equalise", "through_step_max"]


def through_step_max(diagonal: np.ndarray, pairs: np.ndarray, separation: int, participations: int) -> np.ndarray:
    """v_t = max over the patterns π ∋ t of Σ_{s∈π} diagonal_s + 2 Σ_{consecutive pairs} pairs (as
    :func:`~mmopt.participation.sensitivity.chain_pattern_max`, whose value is max_t v_t): the best pattern whose
    m-th step is t (:func:`~mmopt.participation.sensitivity.chain_ends`) joined with its best continuation — the
    max-plus twin of :func:`~mmopt.participation.chain_banded.chain_soft_max`'s forward-backward sums.

    >>> pairs = np.zeros((4, 2))
    >>> pairs[0, 0] = 0.5                                  # the pair (0, 2)
    >>> through_step_max(np.array([1.0, 0.0, 1.0, 1.0]), pairs, 2, 2).tolist()
    [3.0, 1.0, 3.0, 2.0]
    """
    dg = np.asarray(diagonal, dtype=float)
    w = 2.0 * np.asarray(pairs, dtype=float)  # w[s, d]: the pair (s, s + b + d)
    n, b, k = dg.size, separation, participations
    _, _, _, has_tgt, tgt = _pair_edges(n, b)
    F = chain_ends(dg, pairs, b, k)
    B = np.zeros((k + 1, n))  # B[m, t]: the best continuation after the m-th step at t (0: stop there)
    for m in range(k - 1, 0, -1):
        nxt = dg + B[m + 1]
        after = np.maximum.accumulate(nxt[::-1])[::-1]
        far = np.concatenate([after[2 * b:], np.full(min(2 * b, n), -np.inf)])
        near = np.max(np.where(has_tgt, nxt[tgt] + w, -np.inf), axis=1)
        B[m] = np.maximum(0.0, np.maximum(far, near))
    return np.max(F + B[1:], axis=0)


def equalise(C: np.ndarray, separation: int, participations: int):
    """(error, C, its Sensitivity) of the better of C and C with column t scaled by (v_t / max v)^{−1/2}, v = the
    through-step maxima of |X| (module docstring), each scaled to Δ = 1 by :func:`scaled_error` (the chain's proven
    Δ²), whose Sensitivity is returned with it."""
    b, k = separation, participations
    kept = scaled_error(C, b, k)
    dg, P = _gram_band(C, b, k)
    v = through_step_max(dg, np.abs(P), b, k)
    if not np.all(np.isfinite(v)) or v.min() <= 0:
        return kept
    scaled = scaled_error(C * (v / v.max())[None, :] ** -0.5, b, k)
    return scaled if scaled[0] < kept[0] else kept
