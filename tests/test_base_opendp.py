"""mmopt._base.opendp: the release path's OpenDP noise, its calibration and its lattice, against OpenDP's own maps and
a Monte-Carlo run of its sampler."""

import math
import warnings

import numpy as np
import pytest

from mmopt import Privacy
from mmopt._base import opendp as o

pytest.importorskip("opendp")
dp = o.prelude("tests")  # contrib on, as on the release path


@pytest.mark.parametrize("n, sensitivity, epsilon", [(1, 1.0, 1.0), (10, 1e-6, 0.01), (1000, 37.5, 50.0),
                                                     (10**6, 1.0, 1.0), (10**8, 1e6, 0.1)])
def test_the_laplace_lattice_costs_at_most_a_billionth_of_the_budget(n, sensitivity, epsilon):
    # OpenDP charges the rounding to its lattice as n·2^k more sensitivity: at most 2⁻³⁰·Δ, and 40 bits under the scale
    b = sensitivity / epsilon
    k = o.lattice_exponent(b, sensitivity, n)
    assert n * 2.0**k <= 2.0**-30 * sensitivity and 2.0**k <= 2.0**-40 * b
    domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)
    finest = dp.m.make_laplace(domain, dp.l1_distance(T=float), b).map(sensitivity)
    coarse = dp.m.make_laplace(domain, dp.l1_distance(T=float), b, k=k).map(sensitivity)
    assert finest <= coarse <= finest * (1 + 2.0**-30)
    # calibrated to the budget with the charge included: verified within ε, the scale at most a billionth larger
    _, scale, loss = o.calibrate(n, sensitivity, Privacy(epsilon), noise_scale=None, caller="test")
    assert loss <= epsilon and b <= scale <= b * (1 + 1e-8)


def test_laplace_noise_is_drawn_on_its_lattice_with_its_variance():
    meas, b, _ = o.calibrate(20_000, 1.0, Privacy(0.5), noise_scale=None, caller="test")
    k = o.lattice_exponent(b, 1.0, 20_000)
    y = np.asarray(meas([0.0] * 20_000))
    assert np.all(np.mod(y, 2.0**k) == 0)  # every draw a multiple of 2^k: the lattice is the one asked for
    # Var = 2b², the sample variance's SE ≈ √((μ₄ − σ⁴)/N) = σ²√(5/N) for Laplace (excess kurtosis 3)
    var, N = 2 * b * b, y.size
    assert abs(y.mean()) < 4 * math.sqrt(var / N)
    assert abs(y.var() - var) < 4 * var * math.sqrt(5 / N)


@pytest.mark.parametrize("sensitivity", [1.0, 3.0, 1e-6, 37.5, 1e6])
@pytest.mark.parametrize("n", [1, 10, 1000, 10**6, 2**31 - 1])
def test_the_gaussian_charge_covers_opendps_map_on_its_lattice_at_every_size(sensitivity, n):
    # OpenDP charges the rounding to 2^k as more L2 sensitivity (2^k·√n); Δ' covers it for every size it accepts
    # (its size is an i32), the ledger's ρ = Δ'²/(2σ²) is never below OpenDP's map, and at most 2⁻²⁹ above Δ²/(2σ²)
    from mmopt.accounting import gaussian_rho
    k, charged = o.gaussian_lattice(sensitivity), o.charged_sensitivity(sensitivity)
    assert sensitivity < charged <= sensitivity * (1 + 2.0**-30)
    for sigma in (1e-3 * sensitivity, 3.7 * sensitivity, 1e3 * sensitivity):
        domain = dp.vector_domain(dp.atom_domain(T=float, nan=False), size=n)
        coarse = dp.m.make_gaussian(domain, dp.l2_distance(T=float), sigma, k=k).map(sensitivity)
        naive = sensitivity**2 / (2 * sigma**2)
        assert naive <= coarse <= gaussian_rho(charged, sigma) <= naive * (1 + 2.0**-29)


def test_gaussian_noise_is_drawn_on_its_lattice_calibrated_at_the_charged_sensitivity():
    from mmopt.accounting import gaussian_rho, max_rho
    meas, sigma, loss = o.calibrate(20_000, 2.0, Privacy(1.0, 1e-6), noise_scale=None, caller="test")
    assert loss[0] <= 1.0 and loss[1] == 1e-6
    # the ledger's ρ (at Δ') is within the budget's largest ρ, and OpenDP's search left nothing on the table
    rho = gaussian_rho(o.charged_sensitivity(2.0), sigma)
    assert max_rho(1.0, 1e-6) * (1 - 1e-9) <= rho <= max_rho(1.0, 1e-6) * (1 + 4e-16)
    y = np.asarray(meas([0.0] * 20_000))
    assert np.all(np.mod(y, 2.0 ** o.gaussian_lattice(2.0)) == 0)  # the lattice asked for, not the default
    # the sample variance's SE is σ²√(2/N) for a Gaussian
    N = y.size
    assert abs(y.mean()) < 4 * sigma / math.sqrt(N)
    assert abs(y.var() - sigma**2) < 4 * sigma**2 * math.sqrt(2 / N)


def test_a_gaussian_budget_past_opendps_conversion_is_refused_with_the_limit_named():
    # OpenDP's zCDP → (ε, δ) conversion overflows from ε ≈ 2·10⁴; its own message spoke of inf_exp (a helper's probe)
    with pytest.raises(ValueError, match="pass epsilon ≤ 10000.*Nothing was drawn"):
        o.calibrate(3, 1.0, Privacy(2e4, 1e-6), noise_scale=None, caller="test")
    _, sigma, _ = o.calibrate(3, 1.0, Privacy(o.GAUSSIAN_MAX_EPSILON, 1e-6), noise_scale=None, caller="test")
    assert 0 < sigma < 0.01


def test_a_release_past_epsilon_20_is_warned_about_and_drawn():
    """ε = 1e300 released the true counts to 14 digits without a word (a newcomer's audit): said, not refused."""
    pytest.importorskip("opendp")
    import mmopt
    W, H, x = mmopt.workload.prefix(8), mmopt.strategy.hierarchical(8), np.arange(8.0)
    with pytest.warns(UserWarning, match=r"release: ε = 1e\+06 bounds how much one record"):
        out = mmopt.release(W, H, x, mmopt.Privacy(1e6))
    assert np.allclose(out.answers, W.explicit_matrix() @ x, atol=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mmopt.release(W, H, x, mmopt.Privacy(20.0))
