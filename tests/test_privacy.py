"""Privacy: the noise constants, the analytic Gaussian calibration, Theorem 5.22's valid range."""

import math

import numpy as np
import pytest

from mmopt import Privacy
from mmopt.privacy import analytic_gaussian_sigma, gaussian_delta


def test_laplace_constants():
    p = Privacy(0.5)
    assert (p.noise, p.sensitivity_norm) == ("laplace", "l1")
    assert p.variance_factor == pytest.approx(2 / 0.25)
    assert p.noise_scale(3.0) == pytest.approx(6.0)


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 5.0, 10.0, 50.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.1])
def test_analytic_sigma_is_tight_and_private(eps, delta):
    s = analytic_gaussian_sigma(eps, delta)
    assert gaussian_delta(s, eps) <= delta
    assert gaussian_delta(s * (1 - 1e-6), eps) > delta  # no smaller σ would do


def test_theorem_5_22_sigma_is_looser_than_exact_where_valid():
    for eps in (0.1, 0.5, 1.0):
        p = Privacy(eps, 1e-5, calibration="theorem_5_22")
        assert p.unit_noise_scale == pytest.approx(math.sqrt(2 * math.log(2e5)) / eps)
        assert gaussian_delta(p.unit_noise_scale, eps) <= 1e-5
        assert p.unit_noise_scale >= Privacy(eps, 1e-5).unit_noise_scale


def test_theorem_5_22_refused_for_large_epsilon():
    # spec §10.3: at ε = 10 the paper's σ gives δ_exact ≈ 1.36 δ — not private
    sigma = math.sqrt(2 * math.log(2e5)) / 10
    assert gaussian_delta(sigma, 10.0) > 1e-5
    with pytest.raises(ValueError, match="theorem_5_22"):
        Privacy(10.0, 1e-5, calibration="theorem_5_22")


def test_gaussian_variance_factor_is_sigma_squared():
    p = Privacy(1.0, 1e-6)
    assert p.variance_factor == pytest.approx(p.unit_noise_scale**2)
    assert np.isclose(p.noise_scale(2.0), 2 * p.unit_noise_scale)
