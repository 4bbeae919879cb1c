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

:func:`relative_step` then takes one step of steepest descent on log ‖W C⁻¹‖²_F in the metric of C's entries'
sizes (direction −|C|^2.5 ∘ ∇, so that each entry moves in proportion to itself: the plain gradient's step was
worse at every size tried) and rebalances the steps (the scaling repeated until every v_t is within 2·10⁻⁴ of the
largest): where L-BFGS on the smoothed objective made no progress at 4,096 steps in 67 CPU s (the smoothed Δ²'s
gradient pushes the top patterns down and their near-ties up), it lowers the carried strategy's error by about
½ % in 7–10 CPU s — k = 4: 205,720 → 204,563, k = 8: 474,422 → 472,357 (a helper's exploration; η = 0.04 of C's
norm best among 0.01 … 0.3 and powers 2.5 and 3 beside 1.5 and 2, on these two cases; a second step gained < 0.01 %).
It is a heuristic, kept only when the exact error falls.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.participation.chain_banded import _gram_band, scaled_error
from mmopt.participation.free_banded import _error
from mmopt.participation.sensitivity import _pair_edges, chain_ends

__all__ = ["balanced", "equalise", "relative_step", "through_step_max"]


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


def _through(C: np.ndarray, b: int, k: int, single: bool) -> np.ndarray:
    """The through-step maxima of |X| from X's 2b bands (in float32 with ``single``: a screen, never a Δ²)."""
    dg, P = _gram_band(C.astype(np.float32) if single else C, b, k)
    return through_step_max(dg.astype(float), np.abs(P.astype(float)), b, k)


def balanced(C: np.ndarray, separation: int, participations: int, *, passes: int = 7, tol: float = 2e-4,
             single: bool = True):
    """(C with column t scaled by (v_t / max v)^{−1/2}, repeated until min v ≥ (1 − ``tol``)·max v or ``passes``
    times; max v of what is returned), v the through-step maxima of |X| (module docstring) from X's 2b bands in
    float32 with ``single`` (a screen, never a reported Δ²). C is copied once, then scaled in place."""
    b, k = separation, participations
    passes = v.check_int(passes, name="passes", caller="balanced", low=0)
    done, own = 0, False
    while True:
        top = _through(C, b, k, single)
        if (done == passes or not np.all(np.isfinite(top)) or top.min() <= 0
                or top.min() >= (1 - tol) * top.max()):
            return C, float(top.max())
        factors = (top / top.max())[None, :] ** -0.5
        if own:
            C *= factors
        else:
            C, own = C * factors, True
        done += 1


def relative_step(C: np.ndarray, separation: int, participations: int, error: float, *, steps=(0.04, 0.02),
                  power: float = 2.5):
    """(error, C, its Sensitivity) of C after one relative steepest-descent step and :func:`balanced` (module
    docstring), the first of the step sizes ``steps`` (× ‖C‖/‖direction‖ on the 2b bands) whose exact error
    (:func:`scaled_error`) is below ``error``, C's own; None if none is."""
    b, k = separation, participations
    n = C.shape[0]
    E, g = _error(C, 2 * b, gradient=True, single=True)
    if g is None or not E > 0:
        return None
    # d = −|C|^power ∘ ∇ log E on the bands, in place: at 4,096 steps each n×n array is 134 MB (a review)
    d = np.abs(C)
    d **= power
    d *= g
    del g
    d *= -1.0 / E
    d[~(np.tri(n, dtype=bool) & ~np.tri(n, k=-2 * b, dtype=bool))] = 0.0
    norm = float(np.linalg.norm(d))
    if not np.isfinite(norm) or norm == 0:
        return None
    scale = float(np.linalg.norm(C)) / norm  # C lies on its bands
    for eta in steps:
        D = d * (eta * scale)
        D += C
        D, top = balanced(D, b, k)
        if _error(D, single=True)[0] * top < error * (1 - 1e-5):  # the float32 screen, then the exact error
            out = scaled_error(D, b, k)
            if out[0] < error:
                return out
    return None


def equalise(C: np.ndarray, separation: int, participations: int):
    """(error, C, its Sensitivity) of the better of C and C with column t scaled by (v_t / max v)^{−1/2}, v = the
    through-step maxima of |X| (module docstring), each scaled to Δ = 1 by :func:`scaled_error` (the chain's proven
    Δ²), whose Sensitivity is returned with it."""
    b, k = separation, participations
    kept = scaled_error(C, b, k)
    top = _through(C, b, k, single=False)
    if not np.all(np.isfinite(top)) or top.min() <= 0:
        return kept
    scaled = scaled_error(C * (top / top.max())[None, :] ** -0.5, b, k)
    return scaled if scaled[0] < kept[0] else kept
