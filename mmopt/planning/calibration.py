"""The noise variance a budget buys, and the smallest ε that buys a given one, as :func:`mmopt.release` draws
it or as the analytic Gaussian mechanism does (for :func:`mmopt.planning.budget.plan`, split from it)."""

from __future__ import annotations

import math

from scipy import optimize as so

from mmopt._base.opendp import GAUSSIAN_MAX_EPSILON
from mmopt.dense.exact_answers import RELEASE_D_IN_RATIO, RELEASE_SEARCH_SLACK
from mmopt.privacy import Privacy

__all__ = ["CALIBRATIONS", "MAX_EPSILON", "smallest_epsilon", "variance_factor"]

#: how the variance of the noise at a budget is computed: "release", the σ (or b) :func:`mmopt.release` draws
#: (OpenDP's calibration at d_in = Δ rounded upwards; under Gaussian noise through zCDP, σ 4–9 % above the
#: analytic one), or "analytic", the exact analytic Gaussian mechanism's (Balle & Wang 2018) and b = Δ/ε
CALIBRATIONS = ("release", "analytic")
#: d_in / Δ in a release, at most, and room for OpenDP's search of σ (mmopt.dense.exact_answers)
_D_IN, _SEARCH = RELEASE_D_IN_RATIO, RELEASE_SEARCH_SLACK


def variance_factor(epsilon: float, delta: float, calibration: str = "release") -> float:
    """c(ε, δ): the noise variance per unit Δ² at this budget, as ``calibration`` computes it (see
    :data:`CALIBRATIONS`); with "release" an upper bound on what :func:`mmopt.release` draws at any Δ.

    Release: OpenDP's Laplace scale is d_in/ε and its Gaussian σ is d_in/√(2ρ*) with ρ* = the largest ρ whose
    zCDP → (ε, δ) conversion is ≤ ε (:func:`mmopt.accounting.max_rho`; OpenDP searches σ to adjacent floats), at
    d_in ≤ Δ·(1 + 2·10⁻⁷)·(1 + 9.6·10⁻⁷)² (the p-Identity stream release charges twice).
    """
    if calibration == "analytic":
        return (Privacy(epsilon, delta) if delta > 0 else Privacy(epsilon)).variance_factor
    if delta == 0:
        return 2.0 * (_D_IN / epsilon) ** 2 * _SEARCH
    from mmopt.accounting._zcdp import max_rho
    return _D_IN**2 / (2.0 * max_rho(epsilon, delta)) * _SEARCH


#: the largest ε plan returns under Gaussian noise: OpenDP's calibration overflows past ~10⁴
MAX_EPSILON = GAUSSIAN_MAX_EPSILON


def _release_epsilon(c_max: float, delta: float, *, upper: bool) -> float:
    """The smallest ε whose release noise has variance ≤ ``c_max`` per unit Δ² (``upper``: with d_in's rounding
    and the search's slack, so :func:`variance_factor` ≤ c_max; else the certified lower end, without them):
    the zCDP → (ε, δ) conversion of the ρ that σ² = c_max needs, in one OpenDP call."""
    slack = _D_IN**2 * _SEARCH if upper else 1.0
    if delta == 0:  # b = d_in/ε
        eps = math.sqrt(2.0 * slack / c_max)
        return eps * (1 + 1e-12) if upper else eps * (1 - 1e-12)
    from mmopt.accounting._zcdp import epsilon_of_rho
    eps = epsilon_of_rho(slack / (2.0 * c_max), delta)  # OpenDP's ε, rounded up
    if eps <= 0:
        _any_epsilon(c_max, delta)
    if not math.isfinite(eps) or eps > MAX_EPSILON:  # past 10⁴ OpenDP's calibration overflows: ε = 26,171 was
        # returned, and mmopt.release refused it (a helper's probe); the analytic route stops there too
        raise ValueError(f"plan: the targets need a noise variance {c_max:.3g} per unit Δ², smaller than the "
                         f"Gaussian mechanism gives at ε = 10⁴ with δ = {delta!r} (where OpenDP's calibration "
                         "stops). Loosen the targets or raise delta.")
    return eps if upper else eps * (1 - 1e-12)


_TINY_EPSILON = 1e-300  # where the analytic search starts; c(ε, δ) there equals its limit as ε → 0 to 1e-15


def _any_epsilon(c_max: float, delta: float, below: float = 0.0):
    """Under δ > 0 the Gaussian mechanism's variance stays finite as ε → 0: targets that loose are met by every
    ε > 0 (every ε ≥ ``below``), so there is no smallest budget to return (ε = 0 is not a Privacy)."""
    where = f"every ε ≥ {below:g}" if below else "every ε > 0"
    raise ValueError(f"plan: the targets allow a noise variance {c_max:.3g} per unit Δ², which the Gaussian "
                     f"mechanism meets at {where} with δ = {delta!r} (δ alone pays for it): there is no "
                     "smallest ε. Tighten the targets, or lower delta.")


def smallest_epsilon(c_max: float, delta: float, *, upper: bool, calibration: str = "analytic") -> float:
    """The smallest ε with c(ε, δ) ≤ ``c_max``: its feasible end (``upper``) or its certified lower end."""
    if calibration == "release":
        return _release_epsilon(c_max, delta, upper=upper)
    if delta == 0:  # c = 2/ε²
        eps = math.sqrt(2.0 / c_max)
        return eps * (1 + 1e-12) if upper else eps * (1 - 1e-12)

    def c(eps):
        return variance_factor(eps, delta, calibration)

    def excess(log_eps):
        return math.log(c(math.exp(log_eps))) - math.log(c_max)

    # from ε = 1e-300, not 1e-8: c(ε, δ) keeps falling below 1e-8 (to 5e-9 for targets near its limit as ε → 0),
    # and a root there was reported as "every ε meets the targets" (a helper's probe)
    lo, hi = math.log(_TINY_EPSILON), math.log(MAX_EPSILON)
    if excess(hi) > 0:
        raise ValueError(f"plan: the targets need a variance factor {c_max:.3g}, smaller than the "
                         f"{'Laplace' if delta == 0 else 'Gaussian'} mechanism gives at ε = 10⁴ with δ = {delta!r}. "
                         "Loosen the targets or raise delta.")
    if excess(lo) <= 0:
        _any_epsilon(c_max, delta, below=_TINY_EPSILON)
    root = so.brentq(excess, lo, hi, xtol=1e-13, rtol=1e-13)
    # brentq's root is within its tolerance: step to the side that is certainly feasible / certainly below
    eps = math.exp(root)
    step = 1 + 1e-9
    while (c(eps) > c_max) if upper else (c(eps) <= c_max):
        eps = eps * step if upper else eps / step
    return eps
