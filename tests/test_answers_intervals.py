"""mmopt.answers.intervals: the law of a weighted sum of Laplace draws against closed forms (one term, distinct
scales by partial fractions, equal scales by the gamma-difference law), Monte Carlo coverage, and refusals."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from mmopt.answers import intervals as iv


def _tail_distinct(betas, x):
    """P(X > x), x ≥ 0, for distinct scales: φ = Σⱼ cⱼ/(1 + βⱼ²t²) with cⱼ = ∏_{k≠j} βⱼ²/(βⱼ² − β_k²)."""
    b = np.asarray(betas, dtype=float)
    return sum(0.5 * math.exp(-x / b[j]) * math.prod(b[j] ** 2 / (b[j] ** 2 - b[k] ** 2)
                                                       for k in range(b.size) if k != j) for j in range(b.size))


def _tail_equal(m, x):
    """P(G₁ − G₂ > x) for independent Gamma(m, 1): the sum of m standard Laplace draws (numerical quadrature)."""
    val, err = integrate.quad(lambda g: stats.gamma.pdf(g, m) * stats.gamma.sf(g + x, m), 0, np.inf,
                              epsabs=1e-15, epsrel=1e-13, limit=500)
    return val


@pytest.mark.parametrize("betas", [[1.0, 0.5], [1.0, 0.7, 0.3], [2.0, 1.0, 0.9, 0.1], [1.0, 1e-3]])
@pytest.mark.parametrize("alpha", [0.1, 0.05, 0.01, 1e-4])
def test_quantile_matches_partial_fractions(betas, alpha):
    q = iv.laplace_sum_quantile(iv.laplace_sum(betas), 1 - alpha / 2)
    # the exact tail at the computed quantile is α/2; its slope there is ≥ the smallest-scale density, so a
    # relative tail error of 1e-8 means a quantile error far below 1e-6 relative
    assert _tail_distinct(betas, q) == pytest.approx(alpha / 2, rel=1e-8)


@pytest.mark.parametrize("m", [2, 5, 40])
def test_equal_scales_gamma_difference(m):
    X = iv.laplace_sum(([0.5], [m]))
    for alpha in (0.1, 0.01):
        q = iv.laplace_sum_quantile(X, 1 - alpha / 2)
        assert _tail_equal(m, q / 0.5) == pytest.approx(alpha / 2, rel=1e-7)


def test_cdf_error_bound_is_honest_and_small():
    betas = [1.0, 0.6, 0.2]
    x = np.array([0.0, 0.4, 1.5, 6.0])
    F, err = iv.laplace_sum_cdf(iv.laplace_sum(betas), x)
    exact = np.array([1 - _tail_distinct(betas, t) for t in x])
    assert 0 < err < 1e-10
    assert np.all(np.abs(F - exact) <= err)


def test_single_term_closed_form_and_gaussian():
    assert iv.half_width("laplace", 0.01, weights=[3.0], scale=2.0) == pytest.approx(6 * math.log(100), rel=1e-14)
    assert iv.half_width("gaussian", 0.01, sd=2.0) == pytest.approx(2 * stats.norm.ppf(0.995), rel=1e-14)


def test_monte_carlo_coverage_and_normal_undercoverage():
    rng = np.random.default_rng(0)
    a = np.array([1.0, 0.5, 0.5, 0.2])
    z = rng.laplace(size=(200_000, a.size)) @ a
    h = iv.half_width("laplace", 0.01, weights=a, scale=1.0)
    miss = float(np.mean(np.abs(z) > h))
    assert abs(miss - 0.01) < 5 * math.sqrt(0.01 * 0.99 / z.size)  # 5 sd of a binomial share
    naive = stats.norm.ppf(0.995) * math.sqrt(2 * np.sum(a**2))
    assert np.mean(np.abs(z) > naive) > 0.012  # the normal interval misses too often: the reason for this module


def test_grouping_and_refusals():
    X = iv.laplace_sum([2.0, -2.0, 0.0, 1.0], scale=0.5)
    assert X.beta.tolist() == [0.5, 1.0] and X.count.tolist() == [1, 2] and X.variance == pytest.approx(4.5)
    assert iv.laplace_sum((1.0, 2.0)).count.tolist() == [1, 1]  # two numbers are two weights, not (value, count)
    with pytest.raises(ValueError, match="has no nonzero weight"):
        iv.laplace_sum([0.0, 0.0])
    with pytest.raises(ValueError, match=r"'alpha' parameter of half_width is a probability in \(0, 0\.5\], not a "
                                         r"percentage\. Got 1\.5 instead: for 98\.5 % intervals pass alpha=0\.015"):
        iv.half_width("gaussian", 1.5, sd=1.0)
    with pytest.raises(ValueError, match="'alpha' parameter of half_width must be a float in the range"):
        iv.half_width("gaussian", 100.0, sd=1.0)   # past any percentage: the range
    with pytest.raises(ValueError, match="'scale' parameter of laplace_sum"):
        iv.laplace_sum([1.0], scale=-1.0)
    with pytest.raises(ValueError, match="'p' parameter of laplace_sum_quantile must be in"):
        iv.laplace_sum_quantile(X, 0.2)
    with pytest.raises(ValueError, match="'noise' parameter of half_width"):
        iv.half_width("uniform", 0.1, sd=1.0)


def test_laplace_alpha_below_the_resolved_tail_is_refused_and_one_term_is_exact_at_any_alpha():
    """α = 1e-15 hit 'f(a) and f(b) must have different signs' (p = 1 − α/2 rounds); one Laplace term took
    log(2(1 − p)), 3e-6 off at α = 1e-12: now β·log(1/α) from α itself."""
    for alpha in (1e-9, 1e-15, 1e-100):
        with pytest.raises(ValueError, match="'alpha' parameter of half_width must be ≥ 1e-08 .* Laplace"):
            iv.half_width("laplace", alpha, weights=[1.0, 1.0], scale=1.0)
    assert iv.half_width("laplace", 1e-8, weights=[2.0], scale=1.5) == pytest.approx(3.0 * math.log(1e8), rel=1e-15)
    assert iv.half_width("gaussian", 1e-15, sd=1.0) == pytest.approx(-stats.norm.ppf(0.5e-15), rel=1e-12)


@pytest.mark.parametrize("weights, scale", [([1e-200, 3e-200], 1.0), ([1.0, 3.0], 1e-170), ([1.0, 3.0], 1e200)])
def test_the_laplace_quantile_is_scale_free_at_float64_s_ends(weights, scale):
    """At β ~ 1e-200 the variance underflowed to 0 and the quantile's bracket never grew from it (a hang); the law
    scales with β, so it is computed at max β = 1."""
    unit = iv.half_width("laplace", 0.05, weights=[1.0, 3.0], scale=1.0)
    got = iv.half_width("laplace", 0.05, weights=weights, scale=scale)
    assert got == pytest.approx(unit * max(weights) / 3.0 * scale, rel=1e-12)
    F, _ = iv.laplace_sum_cdf(iv.laplace_sum(weights, scale), 2.0 * max(weights) / 3.0 * scale)
    assert F == pytest.approx(iv.laplace_sum_cdf(iv.laplace_sum([1.0, 3.0]), 2.0)[0], rel=1e-12)


def test_gaussian_half_width_checks_its_sd():
    """sd None was a bare TypeError from '*', −1 gave a negative width, NaN a NaN."""
    with pytest.raises(TypeError, match="'sd' parameter of half_width"):
        iv.half_width("gaussian", 0.05)
    for sd in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="'sd' parameter of half_width"):
            iv.half_width("gaussian", 0.05, sd=sd)


def test_laplace_sum_cdf_far_in_the_tails_and_at_infinity():
    """x = 1e10 read F = 0.63 with error inf (the grid's span grew with |x| to MAX_TERMS), and ±inf raised 'math
    domain error'; past the Chernoff point F is 1 (or 0) within the stated error."""
    from mmopt.answers.intervals import laplace_sum, laplace_sum_cdf
    X = laplace_sum([1.0, 2.0])
    for x, truth in ((1e8, 1.0), (1e10, 1.0), (-1e10, 0.0), (np.inf, 1.0), (-np.inf, 0.0)):
        F, err = laplace_sum_cdf(X, x)
        assert abs(F - truth) <= err <= 1e-9
    F, err = laplace_sum_cdf(X, np.array([0.5, 1e12]))
    near, _ = laplace_sum_cdf(X, 0.5)
    assert F[1] == 1.0 and abs(F[0] - near) <= 2 * err
    with pytest.raises(ValueError, match="'x' parameter of laplace_sum_cdf must not hold NaN"):
        laplace_sum_cdf(X, np.nan)


@pytest.mark.parametrize("tol", [-1.0, 0.0, float("nan"), 2.0, 0.5])
def test_tol_is_checked_by_every_public_function(tol):
    """A negative tol looped for ever in the Chernoff point search (no tail bound falls below it); NaN and 2.0
    ended in scipy's "f(a) and f(b) must have different signs"; 0.5 returned a width off by its tail (a helper's
    probe)."""
    X = iv.laplace_sum([1.0, 2.0])
    with pytest.raises(ValueError, match="'tol' parameter of half_width must be a float in the range"):
        iv.half_width("laplace", 0.05, weights=[1.0, 2.0], scale=1.0, tol=tol)
    with pytest.raises(ValueError, match="'tol' parameter of laplace_sum_quantile"):
        iv.laplace_sum_quantile(X, 0.975, tol=tol)
    with pytest.raises(ValueError, match="'tol' parameter of laplace_sum_cdf"):
        iv.laplace_sum_cdf(X, 1.0, tol=tol)


def test_half_width_names_itself_for_its_weights_and_scale():
    with pytest.raises(TypeError, match="'weights' parameter of half_width must be the answer's weights"):
        iv.half_width("laplace", 0.05, scale=1.0)  # was "must be finite. Got [nan]" of laplace_sum
    with pytest.raises(TypeError, match="'scale' parameter of half_width"):
        iv.half_width("laplace", 0.05, weights=[1.0, 2.0])
    with pytest.raises(ValueError, match="'weights' parameter of half_width must be finite"):
        iv.half_width("laplace", 0.05, weights=[1.0, np.nan], scale=1.0)


def test_infinite_or_multidimensional_counts_and_text_p_are_refused():
    # an infinite count passed (round(inf) == inf) and half_width looped for ever; 2-D weights were flattened;
    # p = '0.9' met a bare '<=' TypeError (a helper's probe)
    with pytest.raises(ValueError, match="non-negative finite integer count"):
        iv.half_width("laplace", 0.1, weights=([1.0, 2.0], [1, np.inf]), scale=1.0)
    with pytest.raises(ValueError, match="must be 1-D"):
        iv.laplace_sum(np.ones((2, 2)))
    with pytest.raises(ValueError, match="needs 1-D counts"):
        iv.laplace_sum(([1.0, 2.0], np.ones((1, 2))))
    with pytest.raises(TypeError, match="'p' parameter of laplace_sum_quantile must be a real number"):
        iv.laplace_sum_quantile(iv.laplace_sum([1.0, 2.0]), "0.9")


def test_a_confidence_level_given_for_alpha_is_refused_with_the_alpha_it_meant():
    # answers_table(..., alpha=0.95) returned 5 % intervals (an auditor's probe); α ≤ ½ is taken as it is
    import mmopt
    from mmopt.answers.intervals import check_alpha
    W, A = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
    out = mmopt.release(W, A, [1, 2, 3, 4], mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match=r"'alpha' parameter of answers_table is the probability that an interval "
                                         r"misses .*Got 0\.95 instead: for 95% intervals pass alpha=0\.05\."):
        mmopt.answers_table(out, W, A, alpha=0.95)
    assert check_alpha(0.5, "f") == 0.5 and check_alpha(0.05, "f") == 0.05
    # the range that holds, (0, 0.5], not (0, 1) (a helper's audit); NaN and ±inf were "(-inf, inf)" (an audit)
    for bad in (0.0, 1.0, -0.05, float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ValueError, match=r"'alpha' parameter of f must be a float in the range \(0, 0\.5\] "):
            check_alpha(bad, "f")


@pytest.mark.parametrize("tail", [0.4, 1e-3, 1e-8, 1e-12])
def test_chernoff_point_is_a_proven_tail_and_no_larger_than_the_old_search(tail):
    """The grid's span and the quantile's bracket come from u with a proven P(X ≥ u) ≤ tail: on two unit Laplace
    terms (P(X ≥ u) = e⁻ᵘ(1 + u/2)/2 exactly) the bound holds, and u is at most what the former search over
    u = sd·1.5ᵏ (a Chernoff optimisation at each k) found."""
    X = iv.laplace_sum([1.0, 1.0])
    u, bound = iv._chernoff(X, tail)
    exact = math.exp(-u) * (1 + u / 2) / 2
    assert exact <= bound <= tail
    old = math.sqrt(X.variance)
    while X.tail_bound(old) > tail:
        old *= 1.5
    assert u <= old


def test_a_table_row_with_many_scales_lies_between_equal_scales():
    """The characteristic function is summed over blocks of scales (a product strategy's row has thousands; the
    block is 2²⁰/K scales, 16,384 at the K = 64 nodes used here, so 40,000 scales take three blocks). The
    quantile grows with each scale (a sum of symmetric unimodal terms is less peaked when one is scaled up:
    Birnbaum 1948), so 40,000 distinct scales in [1, 1 + 4·10⁻⁸] lie between 40,000 scales of 1 and of 1 + 4·10⁻⁸
    (each computed with one scale and a count), up to the quantile's 1e-9."""
    many = 1.0 + 1e-12 * np.arange(40_000)
    assert np.unique(many).size == 40_000
    low = iv.half_width("laplace", 0.05, weights=(np.ones(1), np.full(1, 40_000.0)), scale=1.0)
    high = iv.half_width("laplace", 0.05, weights=(np.full(1, many[-1]), np.full(1, 40_000.0)), scale=1.0)
    h = iv.half_width("laplace", 0.05, weights=many, scale=1.0)
    assert low * (1 - 1e-9) <= h <= high * (1 + 1e-9)
