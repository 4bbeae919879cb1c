"""zCDP arithmetic for the accountant, with OpenDP's own maps wherever OpenDP has one.

Sources: M. Bun and T. Steinke, *Concentrated Differential Privacy: Simplifications, Extensions, and Lower
Bounds*, TCC 2016 (arXiv:1605.02065), and C. Canonne, G. Kamath and T. Steinke, *The Discrete Gaussian for
Differential Privacy*, NeurIPS 2020 (arXiv:2004.00010), §2.3.

* The Gaussian mechanism N(0, σ²) at L2 sensitivity Δ₂ is ρ-zCDP with ρ = Δ₂²/(2σ²) (Bun & Steinke,
  Prop. 1.6). :func:`gaussian_rho` asks ``opendp.measurements.make_gaussian``'s privacy map, which rounds
  upwards. A release draws on a lattice whose rounding OpenDP charges as a little more sensitivity; the ledger
  evaluates the map at that charged Δ' (:func:`mmopt._base.opendp.charged_sensitivity`, ≤ (1 + 2⁻³⁰)Δ₂), the
  sensitivity the release was calibrated at.
* An ε-DP mechanism is (ε²/2)-zCDP (Bun & Steinke, Prop. 1.4); :func:`pure_rho` computes it exactly in rational
  arithmetic and rounds upwards (``opendp.combinators.make_pureDP_to_zCDP`` gives the same number).
* ρ-zCDP implies (ε, δ)-DP for every δ > 0. Bun & Steinke's Prop. 1.3 gives ε = ρ + 2√(ρ log(1/δ)); OpenDP's
  ``make_zCDP_to_approxDP`` uses the tighter bound of Canonne, Kamath & Steinke (Cor. 13: δ = inf over α > 1 of
  exp((α − 1)(αρ − ε))/(α − 1) · (1 − 1/α)^α), 9% below Prop. 1.3 at ρ = 0.5, δ = 10⁻⁶ (ε = 5.22 against
  5.76). :func:`epsilon_of_rho` calls it through ``make_fix_delta(make_zCDP_to_approxDP(·), δ)``, the chain
  that :func:`mmopt.release` verifies every Gaussian release with. OpenDP offers this conversion only on a
  measurement, so it is applied to a stand-in: ``make_gaussian`` at scale 1, evaluated at d_in = √(2ρ) (raised
  by ulps until its map is at least ρ). The conversion depends on the measurement only through its ρ, so this
  is OpenDP's conversion of ρ, never below it. (``make_user_measurement`` would avoid the stand-in but needs
  OpenDP's "honest-but-curious" feature switched on for the whole process.)
* :func:`max_rho` inverts it: the largest float ρ whose ε at δ is at most a given ε, by bisection on the same
  map. A Gaussian release that OpenDP verified at (ε, δ) therefore has ρ ≤ max_rho(ε, δ) (to a few ulps),
  known before its noise scale is searched for.

Each conversion costs ~4 ms (OpenDP optimises over α), a bisection ~55 of them (0.25 s); both are cached.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from fractions import Fraction

from mmopt._base import validation as v


def opendp(caller: str):
    """``opendp.prelude`` with the "contrib" feature on (as :mod:`mmopt._base.opendp` enables it), or ImportError."""
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError(f"{caller} needs OpenDP for zCDP accounting. Install it with: pip install opendp "
                          "(from a checkout: pip install -e '.[release]'), or use composition='basic'.") from None
    dp.enable_features("contrib")
    return dp


@functools.cache
def _stand_in():
    dp = opendp("Accountant")
    return dp, dp.m.make_gaussian(dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), 1.0)


@functools.lru_cache(maxsize=64)
def _fix_delta(delta: float):
    dp, gauss = _stand_in()
    return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(gauss), delta)


def _check_delta(delta, caller: str) -> float:
    return v.check_real(delta, name="delta", caller=caller, low=0.0, high=1.0, low_open=True, high_open=True)


def epsilon_of_rho(rho: float, delta: float) -> float:
    """ε such that ρ-zCDP implies (ε, δ)-DP, by OpenDP's conversion (Canonne, Kamath & Steinke 2020, Cor. 13).

    Parameters
    ----------
    rho : float
        ρ ≥ 0 (0 gives ε = 0).
    delta : float
        δ in (0, 1).

    Returns
    -------
    float
        ``make_fix_delta(make_zCDP_to_approxDP(M), δ)``'s ε for a measurement M whose map gives ρ (rounded up);
        inf when OpenDP's computation overflows (ρ beyond about 10⁴·log(1/δ)), where no finite ε is proven.

    Examples
    --------
    >>> round(epsilon_of_rho(0.5, 1e-6), 4)                       # Bun & Steinke's Prop. 1.3: 5.7565
    5.2215
    >>> rho, L = 0.5, math.log(1e6)
    >>> epsilon_of_rho(rho, 1e-6) <= rho + 2 * math.sqrt(rho * L)
    True
    """
    caller = "mmopt.accounting.epsilon_of_rho"
    return _epsilon_of_rho(v.check_real(rho, name="rho", caller=caller, low=0.0), _check_delta(delta, caller))


@functools.lru_cache(maxsize=4096)
def _epsilon_of_rho(rho: float, delta: float) -> float:
    if rho == 0:
        return 0.0
    # ε(ρ) increases with ρ, so a subnormal ρ (run_privacy at noise multiplier 10²⁰⁰) takes the smallest normal
    # float's ε, still an upper bound: the map's rounding could not be resolved there and returned inf
    rho = max(rho, sys.float_info.min)
    dp, gauss = _stand_in()
    d_in = math.sqrt(2.0 * rho)
    for _ in range(64):  # √ and the map's own rounding may land an ulp or two low
        if gauss.map(d_in) >= rho:
            break
        d_in = math.nextafter(d_in, math.inf)
    else:  # pragma: no cover - only for ρ deep in the subnormal range
        return math.inf
    try:
        eps, _ = _fix_delta(delta).map(d_in)
    except dp.OpenDPException:  # OpenDP's exp overflows (ρ ≳ 10⁴·log(1/δ)): no finite ε is proven
        return math.inf
    return float(eps)


RHO_FLOOR = 1e-290  # the smallest ρ max_rho works with: normal floats, with room for the bisection's ulps


def max_rho(epsilon: float, delta: float) -> float:
    """The largest float ρ whose :func:`epsilon_of_rho` at δ is ≤ ε (the next float up gives more than ε).

    Bisection down to adjacent floats, started from Bun & Steinke's ρ = (√(log(1/δ) + ε) − √log(1/δ))² (at least
    :data:`RHO_FLOOR`), where Prop. 1.3 gives exactly ε and OpenDP's tighter bound usually gives less (not at
    ε ~ 10⁴ with δ near 1, where the search goes down from it); a galloping search and a geometric bisection first
    bracket ρ within a factor 2. A Gaussian release
    that OpenDP verified at (ε, δ) has ρ ≤ max_rho(ε, δ), to within the ulps by which the stand-in's map may
    differ from the release's own (the same order as reading ε as a decimal, :mod:`._ledger`).

    Examples
    --------
    >>> r = max_rho(1.0, 1e-6)
    >>> round(r, 6), epsilon_of_rho(r, 1e-6) <= 1.0 < epsilon_of_rho(math.nextafter(r, 1), 1e-6)
    (0.024356, True)
    """
    caller = "mmopt.accounting.max_rho"
    return _max_rho(v.check_real(epsilon, name="epsilon", caller=caller, low=0.0, low_open=True),
                    _check_delta(delta, caller))


@functools.lru_cache(maxsize=1024)
def _max_rho(epsilon: float, delta: float) -> float:
    epsilon_of_rho = _epsilon_of_rho  # checked by max_rho
    L = -math.log(delta)
    lo = epsilon * epsilon / (math.sqrt(L + epsilon) + math.sqrt(L)) ** 2  # Prop. 1.3's ρ, without cancellation
    # ε² underflows below ε ~ 10⁻¹⁵⁰ (ρ = 0: the doubling below never left it, and ran forever); OpenDP's map is
    # tighter than Prop. 1.3 — under heavy noise it proves (0, δ)-DP outright (ρ ≤ 1.36·10⁻¹⁸ at δ = 10⁻⁹: the two
    # Gaussians' total variation is below δ) — so the floor is feasible whenever the map says so
    lo = max(lo, RHO_FLOOR)
    if not math.isfinite(epsilon_of_rho(lo, delta)):  # OpenDP's conversion overflows (ε ~ 10⁵ and up)
        raise ValueError(f"The budget ε={epsilon!r}, δ={delta!r} is past what OpenDP's zCDP → (ε, δ) conversion can "
                         f"evaluate (at ρ = {lo:.4g} its ε overflows). Give ε ≤ 10⁴: the noise there is already "
                         "about 10⁻⁴ of a count.")
    factor = 2.0  # galloping: the factor squares at each step (from the floor, 10²⁷² in 9 steps, not 900)
    if epsilon_of_rho(lo, delta) > epsilon:
        # OpenDP's map is looser than Prop. 1.3 where ε is huge and δ near 1 (ε = 10⁴, δ = 0.9: 10,039.6 at its ρ,
        # which raised an ArithmeticError; a helper's probe): gallop down to a feasible ρ
        while True:
            hi, lo = lo, max(lo / factor, RHO_FLOOR)
            if epsilon_of_rho(lo, delta) <= epsilon:
                break
            if lo == RHO_FLOOR:
                raise ValueError(f"The budget ε={epsilon!r}, δ={delta!r} admits no ρ ≥ {RHO_FLOOR:g} under OpenDP's "
                                 "zCDP → (ε, δ) conversion. Give a smaller δ.")
            factor = min(factor * factor, 1e100)
    else:
        hi = factor * lo
        while epsilon_of_rho(hi, delta) <= epsilon:
            lo, factor = hi, min(factor * factor, 1e100)
            hi = factor * lo
    while hi > 2.0 * lo:  # geometric bisection down to a factor 2
        mid = math.sqrt(lo) * math.sqrt(hi)
        if epsilon_of_rho(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    while True:  # hi ≤ 2·lo here: about 53 halvings reach adjacent floats
        mid = lo + (hi - lo) / 2
        if mid in (lo, hi):
            return lo
        if epsilon_of_rho(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid


def gaussian_rho(sensitivity: float, sigma: float) -> float:
    """ρ = Δ₂²/(2σ²) of Gaussian noise σ at L2 sensitivity Δ₂, as OpenDP's ``make_gaussian`` map rounds it (up):
    inf when it overflows float64 (σ ≲ Δ₂·1e-154, e.g. a subnormal σ), which every budget refuses.

    Examples
    --------
    >>> gaussian_rho(2.0, 4.0)
    0.125
    """
    caller = "mmopt.accounting.gaussian_rho"
    sensitivity = v.check_real(sensitivity, name="sensitivity", caller=caller, low=0.0)
    sigma = v.check_real(sigma, name="sigma", caller=caller, low=0.0, low_open=True)
    dp = opendp("Accountant")
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False))
    return float(dp.m.make_gaussian(domain, dp.l2_distance(T=float), float(sigma)).map(float(sensitivity)))


def pure_rho(epsilon: float) -> float:
    """ρ = ε²/2 of an ε-DP mechanism (Bun & Steinke, Prop. 1.4), exact in rationals, then rounded up to a float.

    Examples
    --------
    >>> pure_rho(1.0), pure_rho(0.1)
    (0.5, 0.005000000000000001)
    """
    checked = v.check_real(epsilon, name="epsilon", caller="mmopt.accounting.pure_rho", low=0.0)
    # a Fraction or an int stays exact; a numpy float (not Rational: Fraction() refused it) is taken as its float
    return round_up(Fraction(epsilon if isinstance(epsilon, numbers.Rational) else checked) ** 2 / 2)


def round_up(q: Fraction) -> float:
    """The smallest float ≥ q (the nearest float, raised by one ulp if it fell below; inf past the largest float,
    where float() raised OverflowError: pure_rho(1e200))."""
    try:
        f = float(q)
    except OverflowError:
        return math.inf if q > 0 else -math.nextafter(math.inf, 0.0)
    return math.nextafter(f, math.inf) if Fraction(f) < q else f


def round_down(q: Fraction) -> float:
    """The largest float ≤ q (q below the largest float): a share of a budget, never rounded up."""
    f = float(q)
    return math.nextafter(f, -math.inf) if Fraction(f) > q else f
