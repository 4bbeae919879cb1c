"""Guards between a computed error and a user: no negative, non-finite or below-bound number gets out.

Notation: see README. An error figure is c·u with c = Privacy.variance_factor and u the unit-privacy value
Δ²·tr(G M); c alone overflows at ε = 1e-300 and underflows at ε = 1e300, so figures are formed in log
space where needed, and ``log10_total`` stays finite whenever the error is defined.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

# A computed error may fall below the SVD bound by round-off only: beyond this relative slack it is a bug.
BOUND_SLACK = 1e-8
_LN10 = math.log(10.0)


class NumericalError(ValueError):
    """A computed error that cannot be right (negative, non-finite, below the lower bound): never returned."""


def check_value(value: float, bound: float | None, name: str, what: str, caller: str) -> None:
    if not math.isfinite(value) or value <= 0.0:
        raise NumericalError(
            f"{caller}: the computed error of strategy '{name}' on {what} is {value!r}, which cannot be right "
            "(an error is finite and positive). The strategy is too ill-conditioned for float64: drop its "
            "near-zero directions (e.g. Strategy.from_gram of its Gram) and evaluate again.")
    if bound is not None and value < bound * (1.0 - BOUND_SLACK):
        raise NumericalError(
            f"{caller}: the computed error of strategy '{name}' on {what} ({value:.6g} per query at unit "
            f"privacy) is below the proven SVD lower bound ({bound:.6g}), so it is wrong: float64 cannot "
            "resolve this strategy. Drop its near-zero directions (e.g. Strategy.from_gram of its Gram).")


def nonnegative(terms: np.ndarray, name: str) -> np.ndarray:
    """Per-query terms w M wᵀ ≥ 0: round-off below zero becomes 0; anything more is a NumericalError."""
    top = float(np.max(np.abs(terms))) if terms.size else 0.0
    if terms.size and float(np.min(terms)) < -1e-9 * top:
        raise NumericalError(f"evaluate: strategy '{name}' gives a negative per-query variance "
                             f"({float(np.min(terms)):.3g}); float64 cannot resolve this strategy.")
    return np.clip(terms, 0.0, None)


def log10_variance_factor(privacy) -> float:
    """log₁₀ of Privacy.variance_factor (0 for unit privacy), finite for every valid Privacy.

    Taken from :attr:`Privacy.log_variance_factor`, the one place c = 2/ε² or σ² is defined; c itself
    overflows at ε = 1e-300 and underflows at ε = 1e300.
    """
    return 0.0 if privacy is None else privacy.log_variance_factor / _LN10


def scaled(unit: float, privacy, name: str) -> float:
    """c·unit with c = privacy.variance_factor (1 for None), without spurious overflow or underflow of c.

    The plain product is used whenever c is a normal float (so figures such as 40.0 stay exact); only at
    extreme ε, where c itself is inf or 0, is the product formed from logarithms.
    """
    if privacy is None:
        return unit
    c = privacy.variance_factor
    if 0.0 < c < math.inf:
        with np.errstate(over="ignore", under="ignore"):
            out = unit * c
        if math.isfinite(out) and (out > 0.0 or unit == 0.0):
            return out
    log10_out = math.log10(unit) + log10_variance_factor(privacy) if unit > 0 else -math.inf
    if log10_out > 308.0:
        warnings.warn(f"An error figure of '{name}' exceeds float64 (≈1e{log10_out:.1f}); returning inf. "
                      "Use log10_total.", RuntimeWarning, stacklevel=3)
        return math.inf
    return 10.0**log10_out  # may underflow to 0.0: log10_total keeps the value


def times_int(x: float, m: int, name: str) -> float:
    try:
        out = x * float(m)
    except OverflowError:
        out = math.inf
    if math.isinf(out) and math.isfinite(x):
        warnings.warn(f"The total error of workload '{name}' exceeds float64 (m = 2^{m.bit_length() - 1}…); "
                      "returning inf. Use the per-query figures or log10_total.", RuntimeWarning, stacklevel=3)
    return out


def log10_int(m: int) -> float:
    try:
        return math.log10(m)
    except OverflowError:  # pragma: no cover - math.log10 takes big ints, kept for safety
        return m.bit_length() * math.log10(2.0)
