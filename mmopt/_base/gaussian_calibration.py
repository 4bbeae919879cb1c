"""The Gaussian mechanism's exact calibration behind :class:`mmopt.privacy.Privacy` (split from :mod:`mmopt.privacy`,
which re-exports the public functions): δ(σ, ε), the smallest private σ for (ε, δ), the smallest ε for σ, and
the check that σ is proven private. Each accepts σ (or ε) only with the safety margin on log δ that
:mod:`mmopt.privacy`'s docstring derives from the error bound of :func:`mmopt._base.gaussian_delta.log_delta`.
"""

from __future__ import annotations

import functools
import math
import sys

from scipy import optimize, special

from mmopt._base import validation as v
from mmopt._base.gaussian_delta import log_delta

__all__ = ["analytic_gaussian_sigma", "gaussian_delta", "gaussian_epsilon", "gaussian_is_private"]

_INV_SQRT2 = 1 / math.sqrt(2)
_LOG_SIGMA_MIN = math.log(sys.float_info.min)  # σ below the normal range would make 1/σ overflow
_LOG_SIGMA_MAX = math.log(sys.float_info.max)
_MARGIN = 1e-10  # relative safety margin on log δ; see mmopt.privacy's docstring


def gaussian_delta(sigma: float, epsilon: float) -> float:
    """Exact δ(ε) of the Gaussian mechanism with noise σ at L2 sensitivity 1 (Balle & Wang 2018, Thm 8).

    δ = Φ(1/(2σ) − εσ) − e^ε Φ(−1/(2σ) − εσ), evaluated as φ(a)(R(a) − R(b)) without cancellation
    (:mod:`mmopt._base.gaussian_delta`). Accurate for every σ > 0 and ε > 0: the relative error is below
    5e-16·|log δ| + 2.3e-15 (3.5e-13 at δ = 1e-300); subnormal results are correct to their coarser grid.

    Examples
    --------
    >>> round(gaussian_delta(3.7306, 1.0) * 1e5, 3)
    1.0
    >>> f"{gaussian_delta(1e12, 1e-12):.6e}"  # both Φ terms are 0.1587 and agree to 12 digits
    '8.331547e-14'
    """
    s = v.check_real(sigma, name="sigma", caller="gaussian_delta", low=0.0, low_open=True)
    e = v.check_real(epsilon, name="epsilon", caller="gaussian_delta", low=0.0, low_open=True)
    return math.exp(log_delta(s, e))


def gaussian_is_private(sigma: float, epsilon: float, delta: float) -> bool:
    """True when Gaussian noise σ at L2 sensitivity 1 is proven (ε, δ)-DP: the computed log δ(σ, ε) lies below
    log δ by more than its error bound (the margin :func:`analytic_gaussian_sigma` and :func:`gaussian_epsilon`
    use; inputs are positive floats, δ < 1).

    Examples
    --------
    >>> gaussian_is_private(analytic_gaussian_sigma(1.0, 1e-9), 1.0, 1e-9), gaussian_is_private(5.0, 1.0, 1e-9)
    (True, False)
    """
    return log_delta(float(sigma), float(epsilon)) <= _private_log_bound(float(delta))


def analytic_gaussian_sigma(epsilon: float, delta: float) -> float:
    """The smallest σ (at L2 sensitivity 1) giving (ε, δ)-DP: Balle & Wang (2018), Algorithm 1, made safe.

    Solves log δ(σ, ε) = log δ − 1e-10·|log δ| for log σ with Brent's method, then raises σ by ulps
    until the accurate log δ(σ, ε) satisfies that bound, so the true δ(σ, ε) ≤ δ (:mod:`mmopt._base.gaussian_delta`).

    Parameters
    ----------
    epsilon : float
        ε > 0, a normal float.
    delta : float
        δ in (0, 1); subnormal δ is supported.

    Raises
    ------
    ValueError
        When no finite float σ is private enough (only if ε < 4.3e-308 and δ < 1e-310).

    Examples
    --------
    >>> s = analytic_gaussian_sigma(1.0, 1e-5)
    >>> gaussian_delta(s, 1.0) <= 1e-5
    True
    """
    eps = _check_epsilon(epsilon, caller="analytic_gaussian_sigma")
    dlt = v.check_real(delta, name="delta", caller="analytic_gaussian_sigma", low=0.0, high=1.0,
                       low_open=True, high_open=True)
    return _analytic_sigma(eps, dlt)


def gaussian_epsilon(sigma: float, delta: float) -> float:
    """The smallest ε with δ(σ, ε) ≤ δ for the Gaussian mechanism with noise σ at L2 sensitivity 1: the exact
    (ε, δ) of one Gaussian release (Balle & Wang 2018, Thm 8), rounded up. 0.0 when every ε > 0 is (δ alone pays).

    The zCDP conversion of ρ = 1/(2σ²) is looser: 1.0779 against 1.0 at the analytic σ of ε = 1, δ = 10⁻⁶.

    Examples
    --------
    >>> e = gaussian_epsilon(analytic_gaussian_sigma(1.0, 1e-6), 1e-6)
    >>> round(e, 6), gaussian_delta(analytic_gaussian_sigma(1.0, 1e-6), e) <= 1e-6
    (1.0, True)
    """
    caller = "gaussian_epsilon"
    s = v.check_real(sigma, name="sigma", caller=caller, low=0.0, low_open=True)
    bound = _private_log_bound(v.check_real(delta, name="delta", caller=caller, low=0.0, high=1.0,
                                            low_open=True, high_open=True))

    def excess(log_eps: float) -> float:  # decreasing in ε: a larger ε allows a smaller δ
        return log_delta(s, min(math.exp(log_eps), sys.float_info.max)) - bound

    lo, hi = math.log(sys.float_info.min), 0.0
    if excess(lo) <= 0:
        return 0.0
    while excess(hi) > 0:  # δ(σ, ε) falls like e^{−ε²σ²/2}: a few doublings reach any δ
        lo, hi = hi, hi + 1.0 if hi < 1 else 2 * hi
    root = optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=4 * sys.float_info.epsilon, maxiter=500)
    eps = math.exp(root)
    # the bound is checked at the ε returned itself: exp(log ε) is not always ε (2859.6, 9.89e-5 returned an ε the
    # margin refused, checked 4 ulps above it), and :func:`gaussian_is_private` must accept what this returns
    while log_delta(s, eps) > bound:  # round-off may land the root a hair on the wrong side
        eps = math.nextafter(eps, math.inf) * (1 + 4 * sys.float_info.epsilon)
    # brentq's root may also lie a few ulps past the crossing (xtol): step down while the float below is still
    # proven private, so that an ε the margin accepts is never below the one reported (the analytic σ of (ε, δ)
    # read back above ε in 6,484 of 20,000 draws: a release of exactly the total would have shown as over it)
    for _ in range(64):
        below = math.nextafter(eps, 0.0)
        if not (below > 0.0 and log_delta(s, below) <= bound):
            break
        eps = below
    return eps


def _check_epsilon(epsilon, *, caller: str) -> float:
    """ε as a finite, positive, *normal* float: below 2.2e-308 it has lost precision, and 1/ε overflows."""
    eps = v.check_real(epsilon, name="epsilon", caller=caller, low=0.0, low_open=True)
    if eps < sys.float_info.min:
        raise ValueError(
            f"The 'epsilon' parameter of {caller} must be a normal float, at least {sys.float_info.min!r} "
            f"(subnormal values have lost precision and make the noise scale 1/ε overflow). Got {eps!r} instead."
        )
    return eps


def _private_log_bound(delta: float) -> float:
    """The largest computed log δ(σ) accepted as proof that the true δ(σ) ≤ δ."""
    log_delta = math.log(delta)
    return log_delta - _MARGIN * abs(log_delta)


@functools.lru_cache(maxsize=4096)
def _analytic_sigma(eps: float, delta: float) -> float:
    bound = _private_log_bound(delta)

    def excess(log_sigma: float) -> float:  # decreasing in log σ: more noise, less δ
        return log_delta(min(math.exp(log_sigma), sys.float_info.max), eps) - bound

    # start near the σ that ignores the e^ε Φ(b) term: the privacy loss is N(μ, 2μ) with μ = 1/(2σ²), and
    # P(loss > ε) = δ gives √μ = w − z/√2, w = √(z²/2 + ε), z = Φ⁻¹(1 − δ); rationalised when z > 0
    z = -float(special.ndtri(delta))
    w = math.sqrt(z * z / 2 + eps)
    root_mu = eps / (w + z * _INV_SQRT2) if z > 0 else w - z * _INV_SQRT2
    s0 = -math.log(root_mu) - 0.5 * math.log(2) if root_mu > 0 else _LOG_SIGMA_MAX
    s0 = min(max(s0, _LOG_SIGMA_MIN + 0.5), _LOG_SIGMA_MAX - 0.5)
    lo, hi, width = s0 - 0.5, s0 + 0.5, 0.5
    while excess(hi) > 0:
        if hi >= _LOG_SIGMA_MAX:
            raise ValueError(
                f"The 'delta' parameter of analytic_gaussian_sigma is too small for epsilon={eps!r}: "
                f"even σ = {sys.float_info.max:.4g} (the largest float) gives δ(σ) > δ. Got {delta!r} instead. "
                "Use a larger epsilon (ε ≥ 4.3e-308 works with every δ) or a larger delta."
            )
        lo, width = hi, 2 * width
        hi = min(hi + width, _LOG_SIGMA_MAX)
    while excess(lo) <= 0:
        if lo <= _LOG_SIGMA_MIN:  # δ(σ) ≥ 1 − 1e-300 there, so this cannot happen for δ < 1
            raise ArithmeticError(f"analytic_gaussian_sigma: no bracket for epsilon={eps!r}, delta={delta!r}.")
        hi, width = lo, 2 * width
        lo = max(lo - width, _LOG_SIGMA_MIN)
    root = optimize.brentq(excess, lo, hi, xtol=1e-15, rtol=4 * sys.float_info.epsilon, maxiter=500)
    sigma, sigma_hi = (min(math.exp(s), sys.float_info.max) for s in (root, hi))  # σ_hi passed the check
    step = sigma * sys.float_info.epsilon
    while log_delta(sigma, eps) > bound:  # round-off may land the root a hair on the wrong side
        sigma, step = min(sigma + step, sigma_hi), 2 * step
    return sigma
