"""The sensitivity of a strategy under a participation schema, whatever holds it: an array, a dense
:class:`~mmopt.Strategy`, or a :class:`~mmopt.toeplitz.ToeplitzStrategy` (O(n·k), never n×n).

Notation and methods: see :mod:`mmopt.participation.sensitivity` (dense Gram) and
:mod:`mmopt.participation.toeplitz` (Toeplitz, banded, BLT).
"""

from __future__ import annotations

import math

import numpy as np

from mmopt._base import validation as v
from mmopt.dense.profile import SAFE_EXPONENT, power_of_two_scale
from mmopt.participation.schemas import Single, as_schema
from mmopt.participation.sensitivity import Sensitivity, gram_sensitivity_squared

__all__ = ["sensitivity_for", "sensitivity_squared"]

_TINY = np.finfo(float).tiny


def sensitivity_squared(strategy, participation) -> Sensitivity:
    """Δ² under ``participation`` of ``strategy``: an array C, a :class:`~mmopt.Strategy`, or a
    :class:`~mmopt.toeplitz.ToeplitzStrategy` (held in O(n): :mod:`mmopt.participation.toeplitz`).

    Examples
    --------
    >>> import mmopt
    >>> import numpy as np
    >>> C = np.tril(np.ones((4, 4)))   # the prefix matrix as a strategy
    >>> sensitivity_squared(C, mmopt.participation.min_separation(2, 2)).squared   # steps 0 and 2
    10.0
    """
    caller = "sensitivity_squared"
    return sensitivity_for(strategy, as_schema(participation, caller, none=False), caller)


def sensitivity_for(strategy, schema, caller: str) -> Sensitivity:
    """:func:`sensitivity_squared` of a checked ``schema``, its refusals in the name of ``caller`` (whose parameter
    ``strategy`` is)."""
    from mmopt.participation.toeplitz import toeplitz_sensitivity_squared
    from mmopt.toeplitz.strategies import ToeplitzStrategy  # lazy: the stream layer only for its strategies

    if isinstance(strategy, ToeplitzStrategy):
        unit, e = strategy.normalised()
        return _rescaled(toeplitz_sensitivity_squared(unit, schema, caller=caller), e, caller)
    C = getattr(strategy, "matrix", strategy)
    if not isinstance(C, (np.ndarray, list, tuple)) and not hasattr(C, "__array__"):
        # a WeightedSqrtStrategy or a tree: "must be a 2-D array" named neither what it got nor what it takes
        raise TypeError(f"The 'strategy' parameter of {caller} must be an array C, a Strategy or a "
                        f"ToeplitzStrategy (a square lower-triangular C over the steps). Got "
                        f"{type(strategy).__name__} instead; optimize(..., participation=...) returns one.")
    C = v.check_matrix(C, name="strategy", caller=caller)
    if not isinstance(schema, Single):
        schema.check_n(C.shape[1], caller, "strategy")
    v.check_allocation(C.shape[1] ** 2, what=f"the {C.shape[1]:,}×{C.shape[1]:,} Gram CᵀC", caller=caller)
    e = power_of_two_scale(C)
    e = e if abs(e) > SAFE_EXPONENT else 0  # a usual C's Gram as it is (as mmopt.toeplitz.strategies)
    Cs = np.ldexp(C, -e) if e else C
    return _rescaled(gram_sensitivity_squared(Cs.T @ Cs, schema), e, caller)


def _rescaled(s: Sensitivity, e: int, caller: str) -> Sensitivity:
    """Δ² of C = 2ᵉ·C′ from C′'s: ×4ᵉ exactly, refused when it is not a normal float64 — CᵀC underflowed at
    |C| ~ 1e-170 and the run's ε was reported 0 (no privacy proven), Δ² = 5e-320 lost digits, and past 1e154 it
    overflowed inside the accounting."""
    if e == 0:
        return s
    with np.errstate(over="ignore", under="ignore"):  # judged below
        squared = float(np.ldexp(s.squared, 2 * e))
    if not _TINY <= squared < math.inf:
        raise ValueError(f"{caller}: Δ² of this strategy is {'above' if e > 0 else 'below'} float64's normal range "
                         f"(its entries are ~2^{e}). Rescale the strategy and the noise together: a run's privacy "
                         "depends on their ratio only (e.g. C/s with the noise multiplier σ/s).")
    with np.errstate(under="ignore"):
        return Sensitivity(squared, float(np.ldexp(s.lower, 2 * e)), s.exact, s.method)
