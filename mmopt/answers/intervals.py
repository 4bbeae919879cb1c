"""Exact confidence intervals for released answers: the law of aᵀz for Gaussian or Laplace noise z.

Notation: see README. A least-squares answer is q x̂ = q x + aᵀz with a known weight vector a (a row of W A⁺
times the strategy's noise map) and z independent noise entries. Under Gaussian noise of standard deviation σ,
aᵀz ~ N(0, σ²‖a‖²): the interval is estimate ± z_{1−α/2}·σ‖a‖ at the σ actually drawn. Under Laplace noise of
scale b, X = aᵀz = Σⱼ βⱼ Lⱼ (βⱼ = b|aⱼ|, Lⱼ standard Laplace) is *not* normal: estimate ± z·std_error covers a
single Laplace cell 97.4 % of the time at nominal 99 %. Here the quantile of X is computed from its
characteristic function φ(t) = ∏ⱼ 1/(1 + βⱼ²t²) (real and even: X is symmetric) by Gil-Pelaez inversion,

    F(x) = 1/2 + (1/π) ∫₀^∞ sin(tx) φ(t)/t dt,

with the half-step trapezoidal rule of Davies (Biometrika 60, 1973, 415–417),

    F_Δ(x) = 1/2 + Σ_{k≥0} sin(t_k x) φ(t_k) / (π(k + ½)),   t_k = (k + ½)Δ,

and two proven error terms (``laplace_sum_cdf`` returns their sum as ``error``):

* **discretisation** — the series is exactly 1/2 + E[sq(x − X)]/2 for the ±1 square wave sq of period
  2L = 4π/Δ (its Fourier series), while F(x) = 1/2 + E[sign(x − X)]/2; the two agree unless |X − x| ≥ L, so
  |F_Δ − F| ≤ P(|X − x| ≥ L) ≤ 2 P(X ≥ L − |x|), and P(X ≥ u) ≤ inf_s e^{−su} ∏ⱼ (1 − βⱼ²s²)^{−1}
  (Chernoff; 0 < s < 1/maxβ). L is chosen so that this is ≤ τ/2.
* **truncation** — after K terms, with t' = (K − ½)Δ and R = {j : βⱼt' ≥ 1} (r = |R| ≥ 1 counted with
  multiplicity), φ(t) ≤ ∏_{j∈R} (βⱼt)^{−2} for t ≥ t', so the remainder is at most ∏_{j∈R} (βⱼt')^{−2}/(2πr).
  K is the smallest power-of-two multiple for which this is ≤ τ/2 (a single term uses its closed form instead:
  P(|X| > x) = e^{−x/β}).

The quantile is the root of F_Δ (Brent) on a bracket from the Chernoff bound. Its error is at most
``error``/f(q) (f the density at q) plus the root tolerance; with the default τ = 1e-11 this is below 1e-8
relative for α ≥ 1e-4 on every case tested against closed forms (tests/test_answers_intervals.py); α below
:data:`LAPLACE_MIN_ALPHA` is refused. The release draws OpenDP's Laplace noise on a lattice h = 2^k ≤ 2⁻⁴⁰·b
(:func:`mmopt._base.opendp.lattice_exponent`) and rounds A x to it: each measurement then differs from A x plus a
continuous Laplace draw by at most h (the discrete Laplace on hℤ is the continuous one rounded to hℤ up to a total
variation of order (h/b)²), which moves F by about 2⁻⁴⁰ of the scale, far below the quantile's 1e-8. Gaussian
noise is drawn on h ≤ 2⁻⁴⁶·Δ₂ (:func:`mmopt._base.opendp.gaussian_lattice`), alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from mmopt._base import validation as v

__all__ = ["LaplaceSum", "check_alpha", "half_width", "laplace_sum", "laplace_sum_cdf", "laplace_sum_quantile"]

DEFAULT_TOL = 1e-11
MAX_TERMS = 1 << 23  # trapezoid nodes; past it the truncation bound is returned as it stands (still proven)


@dataclass(frozen=True, eq=False)
class LaplaceSum:
    """X = Σⱼ βⱼ·(sum of mⱼ independent standard Laplace draws): distinct scales ``beta`` > 0, multiplicities
    ``count`` ≥ 1 (build with :func:`laplace_sum`)."""

    beta: np.ndarray
    count: np.ndarray

    @property
    def variance(self) -> float:
        return float(2.0 * np.sum(self.count * self.beta**2))

    def log_mgf(self, s: float) -> float:
        """log E[e^{sX}] = −Σ mⱼ log(1 − βⱼ²s²), for 0 ≤ s < 1/maxβ."""
        return float(-np.sum(self.count * np.log1p(-(self.beta * s) ** 2)))

    def tail_bound(self, u: float) -> float:
        """A proven upper bound on P(X ≥ u) (Chernoff), for u ≥ 0."""
        if u <= 0:
            return 1.0
        top = 1.0 / float(self.beta.max())
        res = optimize.minimize_scalar(lambda s: self.log_mgf(s) - s * u, bounds=(0.0, top * (1 - 1e-12)),
                                       method="bounded", options={"xatol": top * 1e-10})
        return float(min(1.0, math.exp(min(0.0, res.fun))))


def laplace_sum(weights, scale: float = 1.0, *, caller: str = "laplace_sum") -> LaplaceSum:
    """The law of Σⱼ weightsⱼ·Lⱼ·scale for independent standard Laplace Lⱼ, equal |weights| grouped.

    ``weights`` may also be a pair of sequences (values, counts): value vⱼ repeated countⱼ times (a tuple of two
    numbers is two weights).

    Examples
    --------
    >>> X = laplace_sum([1.0, -1.0, 2.0], scale=0.5)
    >>> X.beta.tolist(), X.count.tolist(), X.variance
    ([0.5, 1.0], [2.0, 1.0], 3.0)
    """
    if weights is None:  # np.asarray(None) is a 0-d object, read as [nan]: "must be finite. Got [nan]."
        raise TypeError(f"The 'weights' parameter of {caller} must be the answer's weights on the Laplace terms "
                        "(a sequence, or (values, counts)). Got None.")
    if isinstance(weights, tuple) and len(weights) == 2 and np.ndim(weights[0]) == 1:
        values = np.abs(np.asarray(weights[0], dtype=np.float64)).ravel()
        counts = np.asarray(weights[1], dtype=np.float64)
        if counts.ndim != 1:  # a 2-D one of the right size was flattened
            raise ValueError(f"The 'weights' parameter of {caller} as (values, counts) needs 1-D counts. Got shape "
                             f"{counts.shape}.")
        # an infinite count passed (round(inf) == inf) and the quantile's bracket grew for ever (a helper's probe)
        if (values.shape != counts.shape or not np.all(np.isfinite(counts)) or np.any(counts < 0)
                or np.any(counts != np.round(counts))):
            raise ValueError(f"The 'weights' parameter of {caller} as (values, counts) needs one non-negative "
                             f"finite integer count per value. Got {values.size} values and counts {counts[:5]}.")
    else:
        values = np.asarray(weights, dtype=np.float64)
        if values.ndim > 1:
            raise ValueError(f"The 'weights' parameter of {caller} must be 1-D (the answer's weight on each Laplace "
                             f"term). Got shape {values.shape}.")
        values = np.abs(values).ravel()
        counts = np.ones_like(values)
    scale = v.check_real(scale, name="scale", caller=caller, low=0.0, low_open=True)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"The 'weights' parameter of {caller} must be finite. Got {values[~np.isfinite(values)][:3]}.")
    keep = (values > 0) & (counts > 0)
    if not keep.any():
        raise ValueError(f"The 'weights' parameter of {caller} has no nonzero weight: the sum is 0, not a "
                         "random variable.")
    beta, inverse = np.unique(values[keep] * scale, return_inverse=True)
    count = np.bincount(inverse, weights=counts[keep])
    return LaplaceSum(beta, count)


def _single(X: LaplaceSum) -> bool:
    return X.beta.size == 1 and X.count[0] == 1


def _chernoff(X: LaplaceSum, tail: float) -> tuple[float, float]:
    """(u, bound): a point u with the proven P(X ≥ u) ≤ bound ≤ ``tail`` (Chernoff at one s).

    For each 0 < s < 1/maxβ, P(X ≥ u) ≤ e^{log M(s) − s·u} ≤ tail once u ≥ (log M(s) − log tail)/s, a
    quasi-convex function of s (its numerator's derivative s·(log M)''(s) is ≥ 0): one bounded scalar search gives
    the smallest such u. (It replaced a search over u = sd·1.5ᵏ with a Chernoff optimisation at each k: six
    searches for a larger u, a fifth of a Laplace table's time.)"""
    log_tail = math.log(tail)
    top = 1.0 / float(X.beta.max())
    res = optimize.minimize_scalar(lambda s: (X.log_mgf(s) - log_tail) / s, bounds=(top * 1e-9, top * (1 - 1e-12)),
                                   method="bounded", options={"xatol": top * 1e-10})
    s = float(res.x)
    u = max(float(res.fun), 0.0) * (1 + 1e-12)  # the margin covers the round-off of log M(s) − s·u below
    return u, min(tail, math.exp(min(0.0, X.log_mgf(s) - s * u)))


def _grid(X: LaplaceSum, reach: float, tol: float):
    """(t_k, φ(t_k)/(π(k+½)), error bound) for the trapezoid valid for every |x| ≤ ``reach`` (module docstring)."""
    u, tail = _chernoff(X, tol / 4)  # 2·P(X ≥ L − |x|) ≤ τ/2
    L = u + reach
    step = 2.0 * math.pi / L
    logb = np.log(X.beta)
    K = 64
    while True:
        t_last = (K - 0.5) * step
        inside = X.beta * t_last >= 1.0
        r = float(X.count[inside].sum())
        log_tail = -2.0 * float(np.sum(X.count[inside] * (logb[inside] + math.log(t_last))))
        bound = math.inf if r == 0 else math.exp(log_tail) / (2 * math.pi * r)
        if bound <= tol / 2 or K >= MAX_TERMS:
            break
        K *= 2
    k = np.arange(K, dtype=np.float64) + 0.5
    t = k * step
    logphi = np.zeros(K)
    # log φ(t) = −Σⱼ mⱼ log(1 + βⱼ²t²) as a matrix–vector product over blocks of scales: a row of a product
    # strategy's table has thousands of distinct scales, and a Python loop over them cost 25 ms a row
    block = max(1, (1 << 20) // K)
    for j in range(0, X.beta.size, block):
        logphi -= X.count[j:j + block] @ np.log1p(np.multiply.outer(X.beta[j:j + block], t) ** 2)
    return t, np.exp(logphi) / (math.pi * k), 2.0 * tail + bound


#: The largest ``tol`` accepted: an absolute error on probabilities, so past it an interval at α = 0.05 would be off
#: by a few percent of its tail and no longer exact.
MAX_TOL = 1e-3


def check_tol(tol, caller: str) -> float:
    """τ in (0, :data:`MAX_TOL`], or a ValueError/TypeError naming ``caller`` (a negative τ looped for ever: no tail
    bound falls below it)."""
    return v.check_real(tol, name="tol", caller=caller, low=0.0, high=MAX_TOL, low_open=True)


def laplace_sum_cdf(X: LaplaceSum, x, *, tol: float = DEFAULT_TOL):
    """(F(x), error): P(X ≤ x) with a proven bound on |computed − exact| (module docstring); F is a float for a
    scalar x, else an array like x.

    Examples
    --------
    >>> F, err = laplace_sum_cdf(laplace_sum([1.0, 1.0]), 1.0)  # exact: 1 − e⁻¹(1 + 1/2)/2
    >>> abs(F - (1 - math.exp(-1.0) * 1.5 / 2)) < 1e-10, err < 1e-10
    (True, True)
    """
    tol = check_tol(tol, "laplace_sum_cdf")
    x = np.asarray(x, dtype=np.float64)
    if np.any(np.isnan(x)):
        raise ValueError("The 'x' parameter of laplace_sum_cdf must not hold NaN.")
    if _single(X):
        ax = np.abs(x)
        F = np.where(x >= 0, 1 - 0.5 * np.exp(-ax / X.beta[0]), 0.5 * np.exp(-ax / X.beta[0]))
        return (float(F) if F.ndim == 0 else F), 0.0
    top = float(X.beta.max())
    if top != 1.0:  # computed at max β = 1, as the quantile (P(X ≤ x) = P(X/top ≤ x/top))
        return laplace_sum_cdf(LaplaceSum(X.beta / top, X.count), x / top, tol=tol)
    # Past u with P(X ≥ u) ≤ τ/2 (Chernoff), F is 1 (or 0) within τ/2: the grid is built for the nearer points
    # only. Its span grew with |x| before, up to MAX_TERMS: x = 1e10 read F = 0.63 (error inf), ±inf raised
    # 'math domain error'.
    u, _ = _chernoff(X, tol / 2)
    far = ~(np.abs(x) < u)  # ±inf too
    near = np.where(far, 0.0, x)
    t, w, err = _grid(X, float(np.max(np.abs(near), initial=0.0)), tol)
    F = np.where(far, (x > 0).astype(np.float64), np.clip(0.5 + np.sin(np.multiply.outer(near, t)) @ w, 0.0, 1.0))
    return (float(F) if F.ndim == 0 else F), (max(err, tol / 2) if np.any(far) else err)


def laplace_sum_quantile(X: LaplaceSum, p: float, *, tol: float = DEFAULT_TOL) -> float:
    """The p-quantile of X for 1/2 ≤ p < 1 (X is symmetric: the (1−p)-quantile is its negative).

    Examples
    --------
    >>> q = laplace_sum_quantile(laplace_sum([2.0]), 0.995)  # one Laplace(2): 2·log(1/(2·0.005))
    >>> abs(q - 2 * math.log(100)) < 1e-9
    True
    """
    tol = check_tol(tol, "laplace_sum_quantile")
    p = v.check_real(p, name="p", caller="laplace_sum_quantile")  # '0.9' met a bare '<=' TypeError
    if not 0.5 <= p < 1.0:
        raise ValueError(f"The 'p' parameter of laplace_sum_quantile must be in [0.5, 1). Got {p!r} instead.")
    if p == 0.5:
        return 0.0
    if _single(X):
        return float(-X.beta[0] * math.log(2.0 * (1.0 - p)))
    top = float(X.beta.max())
    if top != 1.0:  # the law scales with β: computed at max β = 1 (at β ~ 1e-200 the variance underflowed to 0
        # and the bracket below, grown from it by factors 1.5, never left 0: a hang; at 1e200 it overflowed)
        return top * laplace_sum_quantile(LaplaceSum(X.beta / top, X.count), p, tol=tol)
    hi, _ = _chernoff(X, 1.0 - p)  # F(hi) ≥ 1 − tail ≥ p: the quantile lies in [0, hi]
    t, w, _ = _grid(X, hi, tol)

    def gap(x: float) -> float:
        return 0.5 + float(np.sin(x * t) @ w) - p

    return float(optimize.brentq(gap, 0.0, hi, xtol=hi * 1e-13, rtol=1e-15))


def half_width(noise: str, alpha: float, *, sd: float | None = None, weights=None, scale: float | None = None,
               tol: float = DEFAULT_TOL) -> float:
    """h such that P(|aᵀz| ≤ h) = 1 − α exactly: the interval is estimate ± h.

    Gaussian: h = Φ⁻¹(1 − α/2)·sd (sd = σ‖a‖, the answer's standard error at the σ drawn). Laplace: the
    (1 − α/2)-quantile of Σ aⱼ·b·Lⱼ, from ``weights`` (a, or (values, counts)) and ``scale`` (b).

    Examples
    --------
    >>> round(half_width("gaussian", 0.05, sd=1.0), 6)
    1.959964
    >>> round(half_width("laplace", 0.05, weights=[1.0], scale=1.0), 6)  # log(1/α) for one Laplace
    2.995732
    """
    alpha = check_alpha(alpha, "half_width")
    tol = check_tol(tol, "half_width")
    if noise == "gaussian":  # sd None, negative or NaN gave a TypeError, a negative width or NaN
        sd = v.check_real(sd, name="sd", caller="half_width", low=0.0)
        return float(-special.ndtri(alpha / 2.0) * sd)
    if noise != "laplace":
        raise ValueError(f"The 'noise' parameter of half_width must be 'gaussian' or 'laplace'. Got {noise!r}.")
    check_laplace_alpha(alpha, "half_width")
    X = laplace_sum(weights, scale, caller="half_width")
    if _single(X):  # P(|bL| > h) = e^{−h/b} = α, from α itself (1 − α/2 rounds for tiny α)
        return float(X.beta[0] * math.log(1.0 / alpha))
    return laplace_sum_quantile(X, 1.0 - alpha / 2.0, tol=tol)


#: Laplace intervals are refused below this α: the series resolves P(X > h) to ~1e-16 absolute, so the tail α/2
#: loses relative accuracy as it shrinks (quantile of two Laplace terms, measured: 5e-13 relative at α = 1e-4,
#: 2.5e-8 at 1e-8, 1.9e-7 at 1e-9, 7e-6 at 1e-11; below ~1e-14 the root search fails).
LAPLACE_MIN_ALPHA = 1e-8


def check_laplace_alpha(alpha: float, caller: str) -> float:
    """α ≥ :data:`LAPLACE_MIN_ALPHA` for a Laplace interval, or a ValueError naming ``caller``."""
    if alpha < LAPLACE_MIN_ALPHA:
        raise ValueError(f"The 'alpha' parameter of {caller} must be ≥ {LAPLACE_MIN_ALPHA:g} for intervals under "
                         f"Laplace noise (the tail of their error law is not resolved below it). Got {alpha!r} "
                         "instead.")
    return alpha


def check_alpha(alpha, caller: str, *, laplace: bool = False) -> float:
    """α in (0, ½] (0.05 for 95 % intervals), and ≥ :data:`LAPLACE_MIN_ALPHA` under Laplace noise (``laplace``), or
    a ValueError/TypeError naming ``caller``.

    Above ½ an interval misses more often than it covers: α = 0.95 is a confidence level given for a miss rate (it
    returned 5 % intervals, a newcomer's slip an auditor made), so it is refused with the reading it meant. The
    checks made before any noise is drawn pass ``laplace``: the Laplace minimum was checked only when the widths were
    written, after the draw (the budget spent, mmopt.sql's release lost; an audit).
    """
    try:
        a = shown = v.check_real(alpha, name="alpha", caller=caller)
    except ValueError:  # NaN or ±inf, which check_real refuses as outside "(-inf, inf)": the range that holds
        a, shown = math.nan, alpha
    if 1.0 < a < 100.0:  # a percentage: alpha=95 (or 5) for 95 % intervals
        raise ValueError(f"The 'alpha' parameter of {caller} is a probability in (0, 0.5], not a percentage. Got "
                         f"{a!r} instead: for {max(a, 100 - a):g} % intervals pass alpha={min(a, 100 - a) / 100:g}.")
    if not 0.0 < a < 1.0:  # 0, 1, NaN and negatives: say the range that holds, (0, 0.5], not (0, 1)
        raise ValueError(f"The 'alpha' parameter of {caller} must be a float in the range (0, 0.5] (0.05 for 95 % "
                         f"intervals). Got {shown!r} instead.")
    if a > 0.5:
        raise ValueError(f"The 'alpha' parameter of {caller} is the probability that an interval misses (0.05 for "
                         f"95 % intervals) and must be at most 0.5. Got {a!r} instead: for {a:.0%} intervals pass "
                         f"alpha={1 - a:.6g}.")
    return check_laplace_alpha(a, caller) if laplace else a
