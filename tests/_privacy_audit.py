"""A StatDP-style statistical privacy audit (Ding, Wang, Wang, Zhang & Kifer, CCS 2018), for the tests.

For a mechanism M claimed ε-DP and neighbouring inputs x, x′ chosen to stress it:

1. **Event selection** on a pilot sample: run M(x) and M(x′) ``n_pilot`` times each; M returns a vector of
   statistics of its output; the candidate events are {s_j ≤ t} and {s_j ≥ t} at pilot quantiles t, and
   {s_j = v} for statistics with few values; the event E and the direction (x over x′ or x′ over x) with the
   largest empirical log-ratio (counts ≥ ``min_count``) is kept.
2. **Test** on a fresh sample (so the selection does not bias it): n runs on each input, k₁ = #{M(x) ∈ E},
   k₂ = #{M(x′) ∈ E}. With Clopper–Pearson bounds at level 1 − α/2 each (Bonferroni), p₁ ≥ lo(k₁) and
   p₂ ≤ hi(k₂) hold jointly with probability ≥ 1 − α, so ε_lo = ln(lo(k₁)/hi(k₂)) ≤ ln(p₁/p₂) ≤ ε for an
   ε-DP M with probability ≥ 1 − α. An audit *fails* the claim when ε_lo > ε.

Every run draws from one seeded numpy Generator per input (successive draws are independent), so the audit is
reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Audit:
    """The outcome: the event (statistic j, operator, value), counts k₁/n and k₂/n, ε̂ and its lower bound."""

    statistic: int
    op: str
    value: float
    swapped: bool
    k1: int
    k2: int
    n: int
    epsilon_hat: float
    epsilon_lower: float


def clopper_pearson(k: int, n: int, level: float) -> tuple[float, float]:
    """The exact two-sided binomial interval for p at confidence ``level``."""
    a = 1.0 - level
    lo = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(k1: int, k2: int, n: int, alpha: float = 1e-3) -> float:
    """ln(lo(k₁)/hi(k₂)), a 1 − α lower confidence bound on ln(p₁/p₂) (module docstring)."""
    lo1, _ = clopper_pearson(k1, n, 1 - alpha / 2)
    _, hi2 = clopper_pearson(k2, n, 1 - alpha / 2)
    return -math.inf if lo1 == 0.0 else math.log(lo1 / hi2)


def sample(mechanism: Callable, data, n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, d) statistics of n runs of ``mechanism(data, rng)``."""
    return np.array([np.atleast_1d(np.asarray(mechanism(data, rng), dtype=float)) for _ in range(n)])


def _events(s1: np.ndarray, s2: np.ndarray, n_quantiles: int = 24):
    for j in range(s1.shape[1]):
        pooled = np.concatenate([s1[:, j], s2[:, j]])
        values = np.unique(pooled)
        if values.size <= 16:
            for v in values.tolist():
                yield j, "==", v
        for t in np.unique(np.quantile(pooled, np.linspace(0.01, 0.99, n_quantiles))).tolist():
            yield j, "<=", t
            yield j, ">=", t


def _hit(s: np.ndarray, j: int, op: str, value: float) -> np.ndarray:
    col = s[:, j]
    return col == value if op == "==" else (col <= value if op == "<=" else col >= value)


def select_event(s1: np.ndarray, s2: np.ndarray, min_count: int) -> tuple[int, str, float, bool]:
    """The candidate event and direction with the largest pilot log-ratio (counts smoothed by 1/2)."""
    best, choice = -math.inf, None
    for j, op, value in _events(s1, s2):
        k1, k2 = int(_hit(s1, j, op, value).sum()), int(_hit(s2, j, op, value).sum())
        for swapped, (a, b) in ((False, (k1, k2)), (True, (k2, k1))):
            if a >= min_count and math.log((a + 0.5) / (b + 0.5)) > best:
                best, choice = math.log((a + 0.5) / (b + 0.5)), (j, op, value, swapped)
    if choice is None:
        raise ValueError("select_event: no candidate event reaches min_count; use a larger pilot.")
    return choice


def audit(mechanism: Callable, x, x2, *, n: int, n_pilot: int, seed: int, alpha: float = 1e-3,
          min_count: int = 20) -> Audit:
    """Select an event on a pilot, then bound ε from below on n fresh runs per input (module docstring)."""
    ss = np.random.SeedSequence(seed)
    g_pilot, g_pilot2, g1, g2 = (np.random.default_rng(s) for s in ss.spawn(4))
    j, op, value, swapped = select_event(sample(mechanism, x, n_pilot, g_pilot),
                                         sample(mechanism, x2, n_pilot, g_pilot2), min_count)
    if swapped:
        x, x2 = x2, x
    k1 = int(_hit(sample(mechanism, x, n, g1), j, op, value).sum())
    k2 = int(_hit(sample(mechanism, x2, n, g2), j, op, value).sum())
    hat = math.log((k1 + 0.5) / (k2 + 0.5))
    return Audit(j, op, float(value), swapped, k1, k2, n, hat, epsilon_lower_bound(k1, k2, n, alpha))
