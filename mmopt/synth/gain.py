"""MST's edge score on a workload: what a pair's exact 2-way marginal gains on the workload marginals containing it.

Notation: see README and :mod:`mmopt.synth.mst`. MST (McKenna, Miklau & Sheldon 2021, §4) scores a candidate edge
e = (a, b) by ‖m_e − Î_e‖₁, Î_e = p̂_a p̂_bᵀ/t the independence model of the noisy one-way marginals: the L1 error
on e's own marginal that measuring e removes (after the measurement the model holds m_e up to noise). When the
marginals to preserve are a workload R of larger sets (AIM's setting: all 3-way marginals), the same quantity,
taken on the workload, is the *gain* of e on each r ∈ R with r ⊋ e,

    g_r(e) = ‖m_r − Î_r‖₁ − ‖m_r − m_e ⊗ q_{r∖e}‖₁,    Î_r = t·∏_{i∈r} qᵢ,  qᵢ = p̂ᵢ/t,

the L1 error on r of the independence model minus that of the model that knows m_e and keeps the rest of r
independent; the score of e is the mean of g_r(e) over R(e) = {r ∈ R : r ⊋ e} (the paper's score when R(e) is
empty). For r = e it *is* the paper's score, so this generalises it from 2-way to any workload.

**Sensitivity** (add or remove one record, which moves one cell x of m_r by one, so m_e by one in cell x_e):
the first norm moves by at most 1; in the second, m_r moves by one in x and m_e ⊗ q_{r∖e} by q_{r∖e} over the
fibre of x_e, so it moves by at most 1 + Σ q_{r∖e}. Hence |Δg_r| ≤ 2 + Σ q_{r∖e} (= 3 for shares summing to one),
and the mean over R(e) moves by at most the largest of these. In floats, as :func:`mmopt.synth.curator.quality`
does: counts clamped to [0, 2³¹] (clamping is 1-Lipschitz, and m_e is summed from the clamped m_r), Î_r rounded
to the grid 2⁻²⁰, q_{r∖e} rounded *down* to it (Q = ⌊2²⁰q⌋, so m_e ⊗ Q is exact in integers and moves by ΣQ
exactly), both norms summed exactly in integers and clamped to [0, 2³²] (1-Lipschitz); the mean is one correctly
rounded division of a number below 2³² in magnitude, off by at most 2⁻²¹. So the float score moves by at most
:func:`gain_sensitivity` = max_r (2 + ΣQ_r/2²⁰) + 2⁻²⁰, rounded up.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = ["gain", "gain_sensitivity", "GRID"]

#: The fixed-point grid (as :func:`mmopt.synth.curator.quality`): 2²⁰ steps per count.
GRID = 2**20
_CAP = 2**31


def _shares(rest_shares) -> np.ndarray:
    """Q = ⌊2²⁰·q_{r∖e}⌋ ≥ 0 as int64 (q clipped to [0, 1]), shaped over the rest of r; a scalar 2²⁰ when empty."""
    q = np.ones(())
    for s in rest_shares:
        q = np.multiply.outer(q, np.clip(np.asarray(s, dtype=np.float64), 0.0, 1.0))
    return np.floor(np.clip(q, 0.0, 1.0) * GRID).astype(np.int64)


def _l1(grid_values: np.ndarray) -> int:
    """Σ|v| of int64 grid values, exactly (blocks of 2⁹ in int64, then Python ints), clamped to [0, 2³²·2²⁰]."""
    v = np.abs(grid_values).ravel()
    total = sum(int(v[k:k + 512].sum()) for k in range(0, v.size, 512))
    return min(total, 2 * _CAP * GRID)


def gain(counts, edge_axes, independent, rest_shares) -> int:
    """g_r(e) of the module docstring on the grid (an int; divide by :data:`GRID`).

    Parameters
    ----------
    counts : ndarray
        m_r, the exact marginal on r (non-negative counts).
    edge_axes : tuple of int
        The axes of ``counts`` that are e's attributes (in the order of r); the others are r ∖ e, in order.
    independent : ndarray
        Î_r, public (same shape as ``counts``).
    rest_shares : sequence of ndarray
        q_i for the attributes of r ∖ e, in the order of their axes: public.

    Examples
    --------
    >>> m = np.array([[[4, 0], [0, 0]], [[0, 0], [0, 4]]])          # a = b = c, 8 records
    >>> q = np.array([0.5, 0.5])
    >>> ind = 8 * np.einsum("i,j,k->ijk", q, q, q)
    >>> gain(m, (0, 1), ind, [q]) / GRID                            # ‖m − Î‖₁ − ‖m − m_ab ⊗ q_c‖₁ = 12 − 8
    4.0
    """
    m = np.minimum(np.asarray(counts, dtype=np.int64), _CAP)
    edge_axes = tuple(int(a) for a in edge_axes)
    rest_axes = tuple(a for a in range(m.ndim) if a not in edge_axes)
    mm = np.transpose(m, edge_axes + rest_axes)  # edge axes first: m_e ⊗ Q broadcasts over the rest
    ind = np.transpose(np.asarray(independent, dtype=np.float64), edge_axes + rest_axes)
    grid_m = mm * GRID
    grid_ind = np.rint(np.clip(ind, -_CAP, _CAP) * GRID).astype(np.int64)
    first = _l1(grid_m - grid_ind)
    if not rest_axes:
        return first
    me = np.minimum(mm.sum(axis=tuple(range(len(edge_axes), mm.ndim))), _CAP)
    Q = _shares(rest_shares)
    est = me.reshape(me.shape + (1,) * Q.ndim) * Q  # ≤ 2³¹·2²⁰: exact in int64
    return first - _l1(grid_m - est)


def gain_sensitivity(rest_shares_per_set) -> float:
    """max over the scored sets r of 2 + ΣQ_r/2²⁰, plus 2⁻²⁰, rounded up to a float (module docstring); 1 + 2⁻²⁰
    rounded up when every set is its edge (no rest: the paper's score).

    Examples
    --------
    >>> q = np.array([0.25, 0.75])
    >>> 3.0 < gain_sensitivity([[q]]) <= 3.0 + 2**-19
    True
    """
    worst = Fraction(1)
    for rest in rest_shares_per_set:
        if len(rest):
            worst = max(worst, 2 + Fraction(int(_shares(rest).sum()), GRID))
    bound = worst + Fraction(1, GRID)
    f = float(bound)
    return math.nextafter(f, math.inf) if Fraction(f) < bound else f
