"""Privacy(ε, δ): which noise, which sensitivity norm, and the one place the noise-variance constant lives.

Notation: see README. δ = 0 gives the Laplace mechanism (ε-DP, L1 sensitivity, variance 2/ε² per unit
of squared sensitivity, Prop. 2). δ > 0 gives the Gaussian mechanism ((ε,δ)-DP, L2 sensitivity,
Theorem 5.22) with σ calibrated *exactly* by the analytic Gaussian mechanism of Balle & Wang (2018,
Thm 8): the smallest σ with δ(σ, ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ) ≤ δ. The paper's
σ = Δ√(2 ln(2/δ))/ε is available as ``calibration="theorem_5_22"`` but only for ε ≤ 1: for large ε it
is not private (at ε = 10, δ = 1e-5 the true δ is 1.36× the claimed one; spec §10.3).

Supported range. ε is any *normal* positive float (2.2e-308 ≤ ε ≤ 1.8e308; subnormal ε is refused);
δ is 0 or any float in (0, 1), subnormals included. The Gaussian σ must itself be a finite float:
that fails only when ε < 4.3e-308 and δ < 1e-310 (ε = 2.3e-308, δ = 5e-324 would need σ ≈ 3.4e308),
and those inputs are refused with a ValueError; every δ works for ε ≥ 1e-307.

How correctness is guaranteed: δ(σ, ε) is evaluated without cancellation by
:func:`mmopt._base.gaussian_delta.log_delta`, whose error bound (below 5e-16·|log δ| + 2e-15 in log δ, measured
against mpmath) is derived in that module's docstring. :func:`analytic_gaussian_sigma` accepts σ only when the
computed log δ(σ) ≤ log δ − 1e-10·|log δ|, a margin over 10⁴ times that error (its branches 3 and 4 have
|log δ| ≥ −log Φ(1) = 0.17; branch 2's error is relative, below 7e-16·|log δ|). So the true δ(σ) ≤ δ, and
σ exceeds the exact optimum by 1e-10·|log δ| / |d log δ / d log σ| relatively: 5e-8 at worst
(at ε = δ = 1e-300 on the test grid), 7e-11 at ε = 1, δ = 1e-5.
"""

from __future__ import annotations

import functools
import math
import sys
import warnings
from dataclasses import dataclass
from functools import cached_property

from scipy import optimize, special

from mmopt._base import validation as v
from mmopt._base.gaussian_delta import log_delta

CALIBRATIONS = ("analytic", "theorem_5_22")

_INV_SQRT2 = 1 / math.sqrt(2)
_LOG_SIGMA_MIN = math.log(sys.float_info.min)  # σ below the normal range would make 1/σ overflow
_LOG_SIGMA_MAX = math.log(sys.float_info.max)
#: δ from which Privacy warns: a guarantee that may fail with probability 1 % protects no one in a table of 100.
LARGE_DELTA = 0.01
_MARGIN = 1e-10  # relative safety margin on log δ; see the module docstring


def _built_by_user() -> bool:
    """Whether the Privacy being built was written by the user (its constructor's caller is outside mmopt and
    dataclasses.replace, or is the command line, which builds the user's flags): frame 0 is this function, 1
    ``__post_init__``, 2 the generated ``__init__``, 3 its caller. (``--delta 0.5`` was taken without a word.)"""
    caller = sys._getframe(3).f_globals.get("__name__", "")
    if caller.startswith("mmopt.cli."):
        return True
    return not (caller == "mmopt" or caller.startswith("mmopt.") or caller == "dataclasses")


@dataclass(frozen=True)
class Privacy:
    """A privacy budget and the noise that spends it.

    Parameters
    ----------
    epsilon : float
        ε > 0, a normal float (ε ≥ 2.2e-308).
    delta : float, default=0.0
        δ in [0, 1). Zero selects Laplace noise; positive selects Gaussian noise.
    calibration : {"analytic", "theorem_5_22"}, default="analytic"
        How the Gaussian σ is set (ignored when δ = 0). Either way σ is verified against the exact δ(σ, ε)
        when the object is built, so an unsupported (ε, δ) fails here and not later.

    Examples
    --------
    >>> p = Privacy(epsilon=1.0)
    >>> p.noise, p.sensitivity_norm, p.variance_factor
    ('laplace', 'l1', 2.0)
    >>> g = Privacy(epsilon=1.0, delta=1e-5)
    >>> g.noise, g.sensitivity_norm, round(g.noise_scale(1.0), 4)
    ('gaussian', 'l2', 3.7306)
    >>> round(Privacy(1.0, 1e-5, calibration="theorem_5_22").noise_scale(1.0), 4)  # √(2 ln 2e5)
    4.9409
    >>> round(Privacy(1e-300).log_variance_factor, 2)  # variance_factor itself overflows to inf
    1382.24
    """

    epsilon: float
    delta: float = 0.0
    calibration: str = "analytic"

    def __post_init__(self) -> None:
        eps = _check_epsilon(self.epsilon, caller="Privacy")
        delta = v.check_real(self.delta, name="delta", caller="Privacy", low=0.0, high=1.0, high_open=True)
        v.check_choice(self.calibration, name="calibration", caller="Privacy", choices=CALIBRATIONS)
        if self.calibration == "theorem_5_22" and delta > 0 and eps > 1.0:
            raise ValueError(
                f"The 'epsilon' parameter of Privacy must be <= 1 with calibration='theorem_5_22': "
                f"Theorem 5.22's σ is not private for large ε (spec §10.3). Got {eps} instead. "
                "Use calibration='analytic' (the default), which is exact for every ε."
            )
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta + 0.0)  # + 0.0 turns -0.0 into 0.0
        if delta >= LARGE_DELTA and _built_by_user():  # Privacy(1, 0.5) was taken silently: a slip (a second
            # positional argument meant as something else); mmopt's own budgets (plan's unit budget) are not slips
            warnings.warn(f"Privacy: delta={delta:g} lets the guarantee fail outright with probability up to {delta:g} "
                          "(a mechanism that publishes one record in full meets (0, 1/n)-DP); delta is usually far "
                          "below 1/n for n records, e.g. 1e-6. Pass Privacy(epsilon) (on the command line, omit "
                          "--delta) for pure ε-DP (Laplace).", UserWarning, stacklevel=3)
        if delta > 0:
            _ = self.unit_noise_scale  # calibrate now: unsupported (ε, δ) must fail at construction

    @property
    def noise(self) -> str:
        """'laplace' when δ = 0, else 'gaussian'."""
        return "laplace" if self.delta == 0 else "gaussian"

    @property
    def sensitivity_norm(self) -> str:
        """'l1' for Laplace, 'l2' for Gaussian: the column norm that sets the noise."""
        return "l1" if self.delta == 0 else "l2"

    @cached_property
    def unit_noise_scale(self) -> float:
        """Noise scale at sensitivity 1: Laplace b = 1/ε, or Gaussian σ for Δ₂ = 1 (always a finite float)."""
        if self.delta == 0:
            return 1.0 / self.epsilon
        if self.calibration == "analytic":
            return _analytic_sigma(self.epsilon, self.delta)
        # √(2 ln(2/δ))/ε, with ln(2/δ) split so that subnormal δ does not overflow 2/δ
        sigma = math.sqrt(2.0 * (math.log(2.0) - math.log(self.delta))) / self.epsilon
        if not math.isfinite(sigma) or log_delta(sigma, self.epsilon) > _private_log_bound(self.delta):
            raise ValueError(
                f"The 'delta' parameter of Privacy gives no private finite σ with calibration='theorem_5_22' "
                f"at epsilon={self.epsilon!r}: √(2 ln(2/δ))/ε = {sigma:.4g}. Got {self.delta!r} instead. "
                "Use calibration='analytic' (the default)."
            )
        return sigma

    def noise_scale(self, sensitivity: float) -> float:
        """Scale of the noise for a strategy of the given sensitivity (it is linear in Δ); never inf."""
        s = v.check_real(sensitivity, name="sensitivity", caller="Privacy.noise_scale", low=0.0)
        scale = s * self.unit_noise_scale
        if scale == math.inf:  # inf noise would silently turn every answer into inf or nan
            raise ValueError(
                f"The 'sensitivity' parameter of Privacy.noise_scale times the unit noise scale "
                f"{self.unit_noise_scale:.4g} overflows a float. Got {s!r} instead. Use a larger epsilon or delta."
            )
        return scale

    @property
    def variance_factor(self) -> float:
        """Noise variance per unit of squared sensitivity: 2/ε² (Laplace) or σ(Δ=1)² (Gaussian).

        Expected total squared error = variance_factor · Δ² · tr(G (AᵀA)⁻¹)   (Prop. 4.4).
        At extreme budgets (ε = 1e-300; or ε = 1e300, δ = 0) this float overflows to inf or underflows to 0;
        :attr:`log_variance_factor` is finite for every valid budget.
        """
        b = self.unit_noise_scale
        return 2.0 * b * b if self.delta == 0 else b * b

    @property
    def log_variance_factor(self) -> float:
        """Natural log of :attr:`variance_factor`, finite for every valid (ε, δ).

        log 2 − 2 log ε (Laplace) or 2 log σ (Gaussian), computed without forming c itself.

        Examples
        --------
        >>> round(Privacy(1e300, 0.5).log_variance_factor, 2)  # σ = 7.07e-151
        -691.47
        """
        if self.delta == 0:
            return math.log(2.0) - 2.0 * math.log(self.epsilon)
        return 2.0 * math.log(self.unit_noise_scale)


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


def pure_epsilon(budget, caller: str):
    """ε of a pure-ε :class:`Privacy` (δ = 0) for an ε-DP algorithm that takes a float; anything else as given (the
    caller checks it). A Privacy with δ > 0 is refused: the algorithm's noise is Laplace."""
    if not isinstance(budget, Privacy):
        return budget
    if budget.delta != 0:
        raise ValueError(f"The 'epsilon' parameter of {caller} is an ε-DP budget (Laplace noise), so a Privacy "
                         f"must have delta=0. Got {budget!r}; pass Privacy({budget.epsilon!r}) or the float "
                         f"{budget.epsilon!r}.")
    return budget.epsilon


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
