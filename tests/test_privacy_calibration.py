"""The analytic Gaussian calibration checked against an mpmath oracle: σ is always private, and nearly optimal.

The oracle evaluates δ(σ, ε) = Φ(a) − e^ε Φ(b), a = 1/(2σ) − εσ, b = −1/(2σ) − εσ, straight from the
definition with a and b exact (the float inputs are dyadic rationals), at 60 digits and then at doubled
precision until two evaluations agree to 25 digits; the cancellation between the two terms only costs
digits, which the escalation supplies (about 300 extra at ε = 1e-300).
"""

import math

import mpmath as mp
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from mmopt import Privacy
from mmopt._base.gaussian_delta import log_delta as _log_delta
from mmopt.privacy import analytic_gaussian_sigma, gaussian_delta

EPSILONS = [1e-300, 1e-12, 1e-6, 0.01, 1.0, 10.0, 100.0, 1e3, 1e300]
DELTAS = [5e-324, 1e-300, 1e-50, 1e-12, 1e-5, 0.1, 0.5, 0.999]
REPORTED = [(1.0, 5e-324), (1e-12, 1e-50), (1e-300, 1e-300)]  # issue 12: true δ was 1.31×, 4.4e7×, 1e284×


def _mills_asymptotic(x):
    """Φ(x)/φ(x) for x ≤ −1e4: the alternating asymptotic series, stopped below the working precision."""
    inv2 = 1 / (x * x)
    term = total = -1 / x
    j, tol = 1, mp.mpf(2) ** (-mp.mp.prec - 10)
    while abs(term) > tol * abs(total):
        term *= -(2 * j - 1) * inv2
        total += term
        j += 1
    return total


def _ncdf(x):
    # mpmath's erfc fails for arguments beyond ~1e6; Φ(x) = φ(x) R(x) with the asymptotic R there
    if abs(x) < 1e4:
        return mp.ncdf(x)
    return mp.npdf(x) * _mills_asymptotic(x) if x < 0 else 1 - mp.npdf(x) * _mills_asymptotic(-x)


def oracle_log_delta(sigma, epsilon):
    """log δ(σ, ε) to ≥ 25 significant digits (an mpf)."""
    sn, sd = float(sigma).as_integer_ratio()
    en, ed = float(epsilon).as_integer_ratio()
    p, q, den = sd * sd * ed, 2 * en * sn * sn, 2 * sn * sd * ed  # a = (p − q)/den, b = −(p + q)/den
    previous = None
    for dps in (60, 120, 240, 480, 960, 1920):
        with mp.workdps(dps):
            a, b, e = mp.mpf(p - q) / den, mp.mpf(-(p + q)) / den, mp.mpf(en) / ed
            if a > 0:  # δ = 1 − (Φ(−a) + e^ε Φ(b)): log1p keeps log δ relatively accurate near δ = 1
                current = mp.log1p(-(_ncdf(-a) + mp.exp(e) * _ncdf(b)))
            else:
                d = _ncdf(a) - mp.exp(e) * _ncdf(b)
                current = mp.log(d) if d > 0 else None
            if current is not None and previous is not None and abs(current - previous) <= 1e-25 * abs(current):
                return current
            previous = current
    raise AssertionError(f"the oracle did not converge at sigma={sigma!r}, epsilon={epsilon!r}")


def assert_private_and_tight(epsilon, delta):
    sigma = analytic_gaussian_sigma(epsilon, delta)
    assert math.isfinite(sigma) and sigma > 0
    log_delta = mp.log(mp.mpf(delta))
    assert oracle_log_delta(sigma, epsilon) <= log_delta, "σ is not (ε, δ)-private"
    assert oracle_log_delta(sigma * (1 - 1e-6), epsilon) > log_delta, "σ is more than 1e-6 above the optimum"
    return sigma


@pytest.mark.parametrize(("epsilon", "delta"), REPORTED)
def test_reported_failures_are_now_private(epsilon, delta):
    sigma = assert_private_and_tight(epsilon, delta)
    assert Privacy(epsilon, delta).unit_noise_scale == sigma


def test_reported_sigma_38_28_really_was_not_private():
    # the old calibration's σ for ε = 1, δ = 5e-324 (rounded as in the report) has δ above 1.3 × 5e-324
    assert mp.exp(oracle_log_delta(38.28, 1.0)) > 1.3 * mp.mpf(5e-324)
    assert analytic_gaussian_sigma(1.0, 5e-324) > 38.28


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_grid_private_and_tight(epsilon):
    for delta in DELTAS:
        assert_private_and_tight(epsilon, delta)


@settings(max_examples=25, deadline=None)
@given(log_eps=st.floats(-300, 300), log_delta=st.floats(-323.3, -1e-4))
def test_property_private_and_tight(log_eps, log_delta):
    epsilon, delta = 10.0**log_eps, 10.0**log_delta
    assume(0 < delta < 1)
    assert_private_and_tight(epsilon, delta)


@pytest.mark.slow
@pytest.mark.parametrize("log_eps", range(-300, 301, 20))
def test_dense_grid_private_and_tight(log_eps):
    for delta in [5e-324, 1e-320, 1e-310, 1e-250, 1e-200, 1e-150, 1e-100, 1e-30, 1e-8, 1e-3, 0.3, 0.9, 0.99999]:
        assert_private_and_tight(10.0**log_eps, delta)


@pytest.mark.parametrize(("epsilon", "delta"), [(4.3e-308, 5e-324), (2.2250738585072014e-308, 1e-310)])
def test_documented_corners_of_the_supported_range(epsilon, delta):
    # σ decreases in both ε and δ, so these two corners cover "ε ≥ 4.3e-308 or δ ≥ 1e-310 works"
    sigma = assert_private_and_tight(epsilon, delta)
    assert sigma > 1e307


@pytest.mark.parametrize(("epsilon", "delta"), [(2.3e-308, 5e-324), (2.2250738585072014e-308, 1e-320)])
def test_sigma_that_would_overflow_is_refused(epsilon, delta):
    with pytest.raises(ValueError, match="analytic_gaussian_sigma.*largest float.*larger epsilon"):
        analytic_gaussian_sigma(epsilon, delta)
    with pytest.raises(ValueError, match="largest float"):
        Privacy(epsilon, delta)  # refused when built, not later when σ is used


# --- gaussian_delta against the oracle -------------------------------------------------------------------

def _log_error_bound(log_delta):
    return 5e-16 * abs(log_delta) + 2e-15  # the documented bound (1e-15 was passed 1.19× at the last point below)


@pytest.mark.parametrize(("sigma", "epsilon"), [
    (1e12, 1e-12),  # naive formula: relative error 7e-4
    (2.76e299, 1e-300),  # the two Φ terms agree to 300 digits
    (38.28, 1.0),  # subnormal δ
    (3.730631635074623, 1.0),
    (7.071067811866e-151, 1e300),  # a = 1/(2σ) − εσ is a difference of two 1e150s
    (0.01, 100.0), (0.5, 2.0), (1e-5, 1.0), (1e5, 1e-5), (2.0, 1e-300), (1e300, 1e-300),
    (0.833142140142143, 0.6751452393279225),  # δ ≈ 0.27: the largest error of a denser search (0.74× the bound)
])
def test_log_delta_matches_oracle_at_hard_points(sigma, epsilon):
    exact = oracle_log_delta(sigma, epsilon)
    assert abs(_log_delta(sigma, epsilon) - exact) <= _log_error_bound(float(exact))


@settings(max_examples=60, deadline=None)
@given(log_sigma=st.floats(-150, 300), log_eps=st.floats(-300, 300), near=st.booleans())
def test_log_delta_matches_oracle(log_sigma, log_eps, near):
    epsilon = 10.0**log_eps
    # `near` puts y = εσ in [1e-3, 40], where δ is neither 0 nor 1 to double precision
    sigma = 10.0 ** (log_sigma % 4.6 - 3 - log_eps) if near else 10.0**log_sigma
    assume(1e-300 < sigma < 1e300)
    estimate = _log_delta(sigma, epsilon)
    assume(estimate > -1e6)  # below that δ is 0 in any float format; the sign check is below
    exact = oracle_log_delta(sigma, epsilon)
    assert abs(estimate - exact) <= _log_error_bound(float(exact))


def test_gaussian_delta_relative_error_is_small():
    rng = np.random.default_rng(12)
    for _ in range(40):
        epsilon = 10.0 ** rng.uniform(-12, 3)
        sigma = 10.0 ** rng.uniform(-3, 1.6) / epsilon
        exact = oracle_log_delta(sigma, epsilon)
        if exact < math.log(1e-300):
            continue
        value = gaussian_delta(sigma, epsilon)
        assert abs(mp.mpf(value) / mp.exp(exact) - 1) <= 5e-16 * abs(float(exact)) + 2.3e-15  # documented


def test_gaussian_delta_is_decreasing_in_sigma():
    rng = np.random.default_rng(3)
    for _ in range(200):
        epsilon, sigma = 10.0 ** rng.uniform(-300, 300), 10.0 ** rng.uniform(-150, 300)
        assert _log_delta(sigma * 1.001, epsilon) <= _log_delta(sigma, epsilon)


def test_gaussian_delta_limits():
    assert gaussian_delta(1e-300, 1.0) == 1.0  # no noise: δ is 1 − Φ(−5e299)
    assert gaussian_delta(1e300, 1e300) == 0.0  # underflows, and is not negative
    assert 0.0 < gaussian_delta(1e300, 1e-300) < 1e-299  # ε σ = 1: δ ≈ 0.24/σ
