"""The exponential mechanism helper and Uniform: probabilities against the formula, the e^ε ratio, sampling."""

import math

import mpmath
import numpy as np
import pytest

from mmopt.adaptive import exponential_mechanism, exponential_probabilities, uniform


def _formula(scores, eps, delta):
    """p(r) = exp(ε s_r / 2Δ) / Σ exp(ε s / 2Δ) in 50-digit arithmetic."""
    with mpmath.workdps(50):
        w = [mpmath.exp(mpmath.mpf(eps) * mpmath.mpf(s) / (2 * mpmath.mpf(delta))) for s in scores]
        z = mpmath.fsum(w)
        return np.array([float(wi / z) for wi in w])


@pytest.mark.parametrize("eps,delta", [(0.1, 1.0), (1.0, 1.0), (2.0, 3.0), (50.0, 0.5)])
def test_probabilities_match_the_formula(eps, delta):
    s = np.random.default_rng(1).uniform(-20, 20, 9)
    p = exponential_probabilities(s, eps, delta)
    np.testing.assert_allclose(p, _formula(s, eps, delta), rtol=1e-13, atol=1e-300)
    assert math.isclose(p.sum(), 1.0, rel_tol=1e-14)


def test_huge_scores_do_not_overflow():
    s = np.array([1e7, 1e7 - 1.0, 0.0, -1e7])  # exp(ε s / 2) overflows float64 directly at ε = 1
    p = exponential_probabilities(s, 1.0, 1.0)
    np.testing.assert_allclose(p, _formula(s, 1.0, 1.0), rtol=1e-13, atol=1e-300)
    assert p[2] == 0.0 and p[0] > p[1] > 0


def test_neighbouring_scores_change_probabilities_by_at_most_e_to_the_epsilon():
    rng = np.random.default_rng(2)
    eps, delta = 0.7, 2.0
    worst = 0.0
    for _ in range(200):
        s = rng.uniform(-10, 10, rng.integers(2, 12))
        s2 = s + rng.uniform(-delta, delta, s.size)  # any neighbour: every score moves by at most Δ
        worst = max(worst, np.max(np.abs(np.log(exponential_probabilities(s, eps, delta))
                                         - np.log(exponential_probabilities(s2, eps, delta)))))
    assert worst <= eps * (1 + 1e-12)
    # the bound is tight: candidate 0 drops by Δ, 1,000 others rise by Δ
    s = np.zeros(1001)
    s2 = np.full(1001, delta)
    s2[0] = -delta
    ratio = exponential_probabilities(s, eps, delta)[0] / exponential_probabilities(s2, eps, delta)[0]
    assert math.exp(0.99 * eps) < ratio <= math.exp(eps) * (1 + 1e-12)


def test_sampling_frequencies_match_probabilities():
    s = np.array([0.0, 1.0, 2.0, 4.0])
    p = exponential_probabilities(s, 1.0, 1.0)
    gen = np.random.default_rng(3)
    N = 20_000
    counts = np.bincount([exponential_mechanism(s, 1.0, 1.0, gen) for _ in range(N)], minlength=4)
    assert np.all(np.abs(counts / N - p) < 5 * np.sqrt(p * (1 - p) / N))


def test_sampling_is_seeded():
    s = np.arange(50.0)
    a = [exponential_mechanism(s, 0.1, 1.0, rng=k) for k in range(20)]
    assert a == [exponential_mechanism(s, 0.1, 1.0, rng=k) for k in range(20)]
    assert len(set(a)) > 1


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(scores=[1.0], epsilon=0.0, sensitivity=1.0), ValueError, "'epsilon' parameter of exponential_probabilities"),
    (dict(scores=[1.0], epsilon=1.0, sensitivity=-1.0), ValueError, "'sensitivity' parameter"),
    (dict(scores=[], epsilon=1.0, sensitivity=1.0), ValueError, "'scores' parameter"),
    (dict(scores=[np.nan], epsilon=1.0, sensitivity=1.0), ValueError, "'scores' parameter"),
    (dict(scores="ab", epsilon=1.0, sensitivity=1.0), TypeError, "'scores' parameter"),
])
def test_probability_validation(kwargs, exc, words):
    with pytest.raises(exc, match=words):
        exponential_probabilities(**kwargs)


def test_mechanism_validation_names_function_and_parameter():
    with pytest.raises(TypeError, match="'rng' parameter of exponential_mechanism"):
        exponential_mechanism([1.0, 2.0], 1.0, 1.0, rng="seed")
    with pytest.raises(ValueError, match="'epsilon' parameter of exponential_mechanism"):
        exponential_mechanism([1.0, 2.0], -1.0, 1.0)


# -- Uniform -------------------------------------------------------------------------------------------------
def test_uniform_spreads_the_noisy_total():
    x = np.array([[3.0, 0.0, 2.0], [5.0, 1.0, 0.0]])
    r = uniform(x, 0.5, rng=4)
    assert r.estimate.shape == x.shape and r.method == "uniform" and r.path == "simulation"
    assert np.all(r.estimate == r.estimate.flat[0])
    assert math.isclose(r.estimate.sum(), r.details["noisy_total"], rel_tol=1e-12)
    assert dict(r.budget) == {"total": 0.5} and r.epsilon == 0.5
    assert r.details["noise_scale"] == 2.0
    with pytest.raises(ValueError):
        r.estimate[0, 0] = 1.0  # read-only


def test_uniform_noise_is_laplace_one_over_epsilon():
    x = np.arange(10.0)
    gen = np.random.default_rng(5)
    z = np.array([uniform(x, 0.25, rng=gen).details["noisy_total"] for _ in range(4000)]) - x.sum()
    assert abs(z.mean()) < 5 * (np.sqrt(2) / 0.25) / np.sqrt(4000)          # unbiased
    assert abs(z.std() / (np.sqrt(2) / 0.25) - 1) < 0.08                     # sd of Lap(b) is √2·b
    assert np.array_equal(uniform(x, 1.0, rng=9).estimate, uniform(x, 1.0, rng=9).estimate)


@pytest.mark.parametrize("x,exc,words", [
    ([1.0, -1.0], ValueError, "'x' parameter of uniform must hold counts >= 0"),
    (np.zeros((2, 2, 2)), ValueError, "'x' parameter of uniform must be a 1-D or 2-D"),
    ([], ValueError, "'x' parameter of uniform must have at least one cell"),
    ("abc", TypeError, "'x' parameter of uniform"),
    ([1.0, np.inf], ValueError, "'x' parameter of uniform must be finite"),
])
def test_uniform_validation(x, exc, words):
    with pytest.raises(exc, match=words):
        uniform(x, 1.0, rng=0)


def test_uniform_epsilon_validation():
    with pytest.raises(ValueError, match="'epsilon' parameter of uniform"):
        uniform([1.0], 0.0)
    with pytest.raises(ValueError, match="'epsilon' parameter of uniform must be a normal float"):
        uniform([1.0], 1e-310)


def test_exponential_mechanism_has_a_vetted_release_path():
    """Issue 30: every public function that draws noise offers OpenDP's samplers; the exponential mechanism
    took only a numpy rng. Its OpenDP draws follow p ∝ exp(ε s/2Δ): P(1) = e/(1 + e) = 0.731 at ε = 2, within
    4.5 standard errors over 3,000 draws (a false alarm about once in 10⁵ runs)."""
    pytest.importorskip("opendp")
    draws = [exponential_mechanism([0.0, 1.0], 2.0, 1.0, noise="opendp") for _ in range(3000)]
    p = np.e / (1 + np.e)
    assert abs(np.mean(draws) - p) < 4.5 * np.sqrt(p * (1 - p) / 3000)
    with pytest.raises(ValueError, match="'rng' parameter of exponential_mechanism must be None"):
        exponential_mechanism([0.0, 1.0], 1.0, 1.0, rng=0, noise="opendp")
    with pytest.raises(ValueError, match="'noise' parameter of exponential_mechanism"):
        exponential_mechanism([0.0, 1.0], 1.0, 1.0, noise="secure")
