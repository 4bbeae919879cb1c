"""An implicit strategy at a moderate scale, for its error figures (scale-invariant: A and cA have one error).

Split from :mod:`mmopt.structured.strategies`, which re-exports :func:`normalised`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mmopt.dense._strategy_core import Strategy, _exponent
from mmopt.structured.strategies import ImplicitStrategy, StrategyProduct

__all__ = ["Normalised", "normalised"]

# :func:`normalised` leaves a factor as it is when its binary exponent is within ±_FACTOR_SPAN/d (d attributes:
# a term's factors then multiply to at most 2^±200), and the weights when theirs is within ±_MODERATE, so
# ordinary strategies are evaluated bit for bit as given; terms more than _SPAN binary orders below the
# largest are dropped there (their θ² X is below 2⁻⁸⁰⁰ of the largest term's).
_FACTOR_SPAN = 200
_MODERATE = 100
_SPAN = 400


@dataclass(frozen=True)
class Normalised:
    """A = 2^``shift``·``strategy`` (exactly, up to ``dropped`` terms): see :func:`normalised`."""

    strategy: ImplicitStrategy
    shift: int
    dropped: tuple[int, ...]


def normalised(strategy: ImplicitStrategy) -> Normalised:
    """The same strategy at a moderate scale: error figures are invariant under A → cA, so they are computed
    on the result, whose Grams, pseudo-inverses and Δ² never over- or underflow.

    A factor with max|entry| = m·2ᵉ (frexp) outside 2^±(200/d) is replaced by itself·2⁻ᵉ and its term's weight
    multiplied by 2ᵉ (exact); the combined weights θₖ·2^{Σeᵢ} = mₖ·2^{xₖ} are then divided by 2^R, R = max xₖ
    when that is outside ±100 (else 0), so the largest weight is within 2^±100. Terms with xₖ < max x − 400 are
    dropped (listed in ``dropped``): their share of AᵀA is below 2⁻⁸⁰⁰, round-off for every figure, and
    their θ² would underflow. The result is ``strategy`` itself when nothing needs changing.
    """
    memo: dict[int, tuple[Strategy, int]] = {}
    terms, xs = [], []
    changed = False
    limit = max(1, _FACTOR_SPAN // len(strategy.shape))
    for t in strategy.terms:
        fs, x = [], 0
        for f in t.factors:
            if id(f) not in memo:
                _, e = _exponent(f.matrix)
                memo[id(f)] = (f, 0) if abs(e) <= limit else (Strategy(np.ldexp(f.matrix, -e), f.name), e)
            g, e = memo[id(f)]
            fs.append(g)
            x += e
            changed |= g is not f
        wm, we = math.frexp(t.weight)
        terms.append((tuple(fs), wm))
        xs.append(x + we)
    top = max(xs)
    shift = top if abs(top) > _MODERATE else 0
    keep = [k for k, x in enumerate(xs) if x >= top - _SPAN]
    dropped = tuple(k for k in range(len(xs)) if k not in keep)
    if not changed and shift == 0 and not dropped:
        return Normalised(strategy, 0, ())
    new = tuple(StrategyProduct(terms[k][0], math.ldexp(terms[k][1], xs[k] - shift)) for k in keep)
    return Normalised(ImplicitStrategy(new, strategy.name), shift, dropped)
