"""PHP (Ács et al. 2012): split scores against a brute force, limits at huge ε, the budget, the noise interface."""

import math

import numpy as np
import pytest
from _recording_noise import Recording

from mmopt.adaptive.php import php, score_sensitivity, split_deviations


def _dev(a):
    return float(np.abs(a - a.mean()).sum())


def test_split_deviations_match_brute_force():
    rng = np.random.default_rng(0)
    for m in (2, 3, 7, 40):
        xb = rng.integers(0, 9, m).astype(float)
        brute = [_dev(xb[:s]) + _dev(xb[s:]) for s in range(1, m)]
        np.testing.assert_allclose(split_deviations(xb), brute, rtol=1e-12, atol=1e-12)


def test_deviation_sensitivity_is_below_two():
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = int(rng.integers(2, 12))
        xb = rng.integers(0, 5, m).astype(float)
        i = int(rng.integers(m))
        xp = xb.copy()
        xp[i] += 1
        assert np.max(np.abs(split_deviations(xb) - split_deviations(xp))) <= 2 * (1 - 1 / m) + 1e-12


def test_huge_epsilon_recovers_a_piecewise_constant_histogram():
    x = np.repeat([0.0, 40.0, 5.0, 5.0, 90.0], [7, 5, 3, 9, 8])
    r = php(x, 1e7, rng=0)
    assert r.method == "php" and r.estimate.shape == x.shape and r.path == "simulation"
    np.testing.assert_allclose(r.estimate, x, atol=1e-3)
    assert math.isclose(sum(r.budget.values()), 1e7, rel_tol=1e-15)
    assert dict(r.budget) == {"partition": 0.5e7, "counts": 1e7 - 0.5e7}


def test_estimate_is_bucket_means_plus_noise_and_buckets_tile_the_domain():
    x = np.random.default_rng(3).integers(0, 30, 50).astype(float)
    r = php(x, 0.5, ratio=0.3, depth=3, rng=4)
    b = r.details["buckets"]
    assert b[0][0] == 0 and b[-1][1] == 50 and all(p[1] == q[0] for p, q in zip(b[:-1], b[1:], strict=True))
    assert len(b) <= 2**3
    for lo, hi in b:  # constant over a bucket; the bucket total is off by the Laplace draw only
        assert np.ptp(r.estimate[lo:hi]) < 1e-9
    rec = Recording("numpy", np.random.default_rng(4))
    r2 = php(x, 0.5, ratio=0.3, depth=3, noise=rec)
    np.testing.assert_array_equal(r2.estimate, r.estimate)  # the same stream: every draw went through Noise
    kinds = [c[0] for c in rec.calls]
    assert kinds.count("laplace") == 1 and kinds.count("exponential") >= len(b) - 1
    rec = Recording("numpy", np.random.default_rng(4))
    r3 = php(x, 0.5, ratio=0.3, depth=3, keep_option=False, noise=rec)
    # no keep candidate: every choice is a split, so the calls are one fewer than the buckets
    assert [c[0] for c in rec.calls].count("exponential") == len(r3.details["buckets"]) - 1
    # Δ = 2 plus the rounding charge (no keep candidate: penalty 0)
    assert all(c[1] == pytest.approx(0.15 / 3) and c[2] == score_sensitivity(0.0) for c in rec.calls
               if c[0] == "exponential")


def test_uniform_input_gives_a_uniform_expected_output():
    x = np.full(64, 7.0)
    r = php(x, 1e8, rng=5)
    np.testing.assert_allclose(r.estimate, 7.0, atol=1e-4)


def test_seeded_runs_repeat_and_seeds_differ():
    x = np.random.default_rng(6).poisson(10, 128).astype(float)
    a, b, c = php(x, 1.0, rng=7), php(x, 1.0, rng=7), php(x, 1.0, rng=8)
    np.testing.assert_array_equal(a.estimate, b.estimate)
    assert not np.array_equal(a.estimate, c.estimate)


def test_beats_identity_on_a_smooth_histogram_at_low_signal():
    n, eps = 256, 0.05
    t = np.arange(n)
    x = np.round(30 * np.exp(-0.5 * ((t - 100) / 30) ** 2))
    mse = np.mean([np.mean((php(x, eps, rng=s).estimate - x) ** 2) for s in range(5)])
    assert mse < 0.8 * (2 / eps**2)  # identity's expected per-cell squared error is 2/ε²


def test_input_checks():
    with pytest.raises(ValueError, match="'x' parameter of php must be a 1-D"):
        php(np.ones((3, 3)), 1.0)
    with pytest.raises(ValueError, match="'epsilon' parameter of php"):
        php([1, 2], 0.0)
    with pytest.raises(ValueError, match="'ratio' parameter of php"):
        php([1, 2], 1.0, ratio=1.0)
    with pytest.raises(ValueError, match="'depth' parameter of php"):
        php([1, 2], 1.0, depth=0)
    with pytest.raises(ValueError, match="'x' parameter of php must hold counts"):
        php([1, -2], 1.0)
    with pytest.raises(ValueError, match="'noise' parameter of php"):
        php([1, 2], 1.0, noise="torch")
    with pytest.raises(ValueError, match="'rng' parameter of php must be None"):
        php([1, 2], 1.0, noise="opendp", rng=0)
    with pytest.raises(TypeError, match="'rng' parameter of php"):
        php([1, 2], 1.0, rng="seed")


def test_single_cell_spends_nothing_on_splits():
    rec = Recording("numpy", np.random.default_rng(0))
    r = php([5.0], 1e6, noise=rec)
    assert [c[0] for c in rec.calls] == ["laplace"] and r.estimate[0] == pytest.approx(5.0, abs=1e-4)
    # nor charges them: the count takes ε whole (the partition's ρ·ε went unused, twice the noise scale)
    rec = Recording("numpy", np.random.default_rng(0))
    r = php([5.0], 2.0, ratio=0.5, noise=rec)
    assert rec.calls == [("laplace", 0.5, (1,))] and r.budget == {"partition": 0.0, "counts": 2.0}


def test_php_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, 32).astype(float)
    r = php(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


@pytest.mark.slow
def test_php_privacy_audit():
    """StatDP-style audit (tests/_privacy_audit.py): neighbours x, x + e_0 on 4 cells; ε_lo must not exceed ε."""
    from _privacy_audit import audit

    def stats(x, g):
        r = php(x, 1.0, depth=2, rng=g)
        return [r.estimate.sum(), r.estimate[0], len(r.details["buckets"])]

    a = audit(stats, np.zeros(4), np.array([1.0, 0, 0, 0]), n=40_000, n_pilot=4000, seed=0)
    assert a.epsilon_lower <= 1.0


@pytest.mark.parametrize("keep_option", [True, False])
@pytest.mark.parametrize("pick", [None, lambda m: 0, lambda m: 1 if m > 1 else 0])
def test_privacy_loss_bound_over_all_neighbours(keep_option, pick):
    """Brute force (tests/_replay.py): on every x ± e_i, the same path's score changes stay within Δ = 2 (the keep
    candidate included) and the Laplace and per-level choices add up to at most ε."""
    from _replay import worst_loss
    x = np.array([0.0, 3.0, 1.0, 7.0, 7.0, 2.0, 0.0])
    loss = worst_loss(lambda z, n: php(z, 1.0, keep_option=keep_option, noise=n), x, pick)
    assert 0 < loss <= 1.0 + 1e-9



def test_a_depth_past_n_minus_one_is_cut_so_no_budget_goes_unused():
    # 8 cells can be bisected on at most 7 levels: depth=50 spent ε₁/50 per level, 43/50 of ε₁ never drawn
    rec = Recording("numpy", np.random.default_rng(0))
    r = php(np.arange(8.0), 1.0, depth=50, noise=rec)
    assert r.details["depth"] == 7 and r.budget["partition"] == 0.5
    choices = [c[1] for c in rec.calls if c[0] == "exponential"]
    assert choices and all(math.isclose(e, 0.5 / 7) for e in choices)
    assert php(np.arange(8.0), 1.0, depth=3, rng=0).details["depth"] == 3



def test_deviations_are_correctly_rounded_against_a_fraction_oracle():
    from fractions import Fraction

    from mmopt.adaptive.php import deviation

    def exact(v):
        mean = Fraction(sum(v), len(v))
        return sum(abs(Fraction(a) - mean) for a in v)

    rng = np.random.default_rng(8)
    xb = rng.multinomial(2**32 - 1, rng.dirichlet(np.full(37, 0.4))).astype(float)
    w = [int(v) for v in xb]
    assert deviation(xb) == float(exact(w))
    got = split_deviations(xb)
    for s in range(1, 37):
        assert got[s - 1] == float(exact(w[:s])) + float(exact(w[s:]))


@pytest.mark.parametrize(("m", "epsilon"), [(1000, 1.0), (4095, 1.0), (300, 2e-17)])
def test_adversarial_neighbours_at_2_32_records_stay_within_the_charged_sensitivity(m, epsilon):
    """The audit's construction x = [0, K, …, K] → x + e₀, K ≈ 2³²/(m − 1) (exact change 2(1 − 1/m)), root
    bucket's keep and split scores; at ε = 2·10⁻¹⁷ the penalty c = 10¹⁷ (ulp 16) dominates the rounding."""
    from fractions import Fraction

    from _float_neighbours import ratios, recorder

    worst = Fraction(0)
    for dK in range(0, 40, 3):
        x = np.full(m, float((2**32 - 1) // (m - 1) - dK))
        x[0] = 0.0
        xp = x.copy()
        xp[0] = 1.0
        A, B = recorder(), recorder()
        php(x, epsilon, depth=1, noise=A)
        php(xp, epsilon, depth=1, noise=B)
        worst = max(worst, *ratios(A.log, B.log, kinds=("exp",)))
    assert worst <= 1


def test_release_refuses_fractional_counts():
    from _float_neighbours import recorder

    with pytest.raises(ValueError, match="'x' parameter of php must hold whole counts of at most"):
        php(np.array([0.5, 2.0, 3.0]), 1.0, noise=recorder())


def test_php_refuses_more_than_2_20_cells_even_with_a_raised_work_limit(monkeypatch):  # mutant php-no-maxcells
    import importlib

    from mmopt._base import guards
    from mmopt.adaptive import php
    P = importlib.import_module("mmopt.adaptive.php")
    monkeypatch.setattr(guards, "MAX_WORK", 10**20)
    monkeypatch.setattr(P, "split_deviations", lambda xb: pytest.fail("scored past 2^20 cells"))
    with pytest.raises(ValueError, match="'x' parameter of php must have at most"):
        php(np.zeros(2**20 + 1), 1.0, rng=0)
