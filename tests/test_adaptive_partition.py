"""DAWA's partition step: deviations, sensitivity, exact sampling, privacy of the exponential rule, recovery."""

import dataclasses
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from mmopt.adaptive import private_partition
from mmopt.adaptive._noise import Noise
from mmopt.adaptive.noisy_cost import COST_GRID
from mmopt.adaptive.partition import candidate_lengths, deviations


def _brute_dev(x, a, L):
    w = np.asarray(x[a:a + L], float)
    return float(np.abs(w - w.mean()).sum())


def _partitions(n, lengths):
    """Every partition of [0, n) into consecutive buckets of the given lengths, as tuples of stops."""
    if n == 0:
        yield ()
        return
    for L in lengths:
        if L <= n:
            for rest in _partitions(n - L, lengths):
                yield (L,) + tuple(s + L for s in rest)


def _gibbs(x, eps, c, lengths):
    """Exact law of the exponential rule: P ∝ exp(−ε·Σ_B(dev_B + penalty)/(2Δ)), penalty with entropy correction."""
    delta = 2 * (1 - 1 / max(lengths))
    pen = c + (2 * delta / eps) * math.log(len(lengths))
    logw = {}
    for stops in _partitions(len(x), lengths):
        starts = (0,) + stops[:-1]
        cost = sum(_brute_dev(x, a, b - a) + pen for a, b in zip(starts, stops, strict=True))
        logw[stops] = -eps * cost / (2 * delta)
    top = max(logw.values())
    z = sum(math.exp(w - top) for w in logw.values())
    return {k: math.exp(w - top) / z for k, w in logw.items()}


def test_deviations_match_brute_force():
    x = np.random.default_rng(0).integers(0, 20, 23).astype(float)
    for lengths in (candidate_lengths(23, "dyadic", 23), candidate_lengths(23, "all", 23)):
        dev = deviations(x, lengths)
        for a in range(23):
            for k, L in enumerate(lengths):
                if a + L <= 23:
                    assert math.isclose(dev[a, k], _brute_dev(x, a, L), rel_tol=1e-12, abs_tol=1e-12)
                else:
                    assert np.isnan(dev[a, k])
    assert candidate_lengths(23, "dyadic", 23).tolist() == [1, 2, 4, 8, 16]
    assert candidate_lengths(23, "dyadic", 5).tolist() == [1, 2, 4]


def test_deviation_sensitivity_bound_holds_and_is_attained():
    rng = np.random.default_rng(1)
    lengths = np.arange(1, 13)
    for _ in range(30):
        x = rng.integers(0, 6, 12).astype(float)
        i = int(rng.integers(12))
        x2 = x.copy()
        x2[i] += 1
        moved = np.abs(np.nan_to_num(deviations(x2, lengths) - deviations(x, lengths)))
        assert np.all(moved <= 2 * (1 - 1 / lengths) + 1e-12)
    # a dip: adding the missing record flattens every window around it, by exactly 2(1 − 1/L)
    x = np.ones(9)
    x[4] = 0.0
    x2 = np.ones(9)
    assert math.isclose(_brute_dev(x, 0, 9) - _brute_dev(x2, 0, 9), 2 * (1 - 1 / 9), rel_tol=1e-12)


@pytest.mark.parametrize("candidates", ["dyadic", "all"])
def test_exponential_rule_samples_the_exact_distribution(candidates):
    x = np.array([0.0, 3.0, 1.0, 1.0])
    lengths = candidate_lengths(4, candidates, 4).tolist()
    law = _gibbs(x, 1.5, 0.5, lengths)
    gen = np.random.default_rng(2)
    N = 6000
    draws = [tuple(private_partition(x, 1.5, bucket_penalty=0.5, candidates=candidates, rng=gen).bounds[:, 1])
             for _ in range(N)]
    for stops, p in law.items():
        f = draws.count(stops) / N
        assert abs(f - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-9, (stops, f, p)
    assert set(draws) <= set(law)


def test_exponential_rule_is_epsilon_dp_on_every_neighbour():
    """The exact law moves by at most e^{ε₁} between x and x ± e_i (this checks the sensitivity Δ)."""
    rng = np.random.default_rng(3)
    eps = 0.8
    for candidates in ("dyadic", "all"):
        lengths = candidate_lengths(5, candidates, 5).tolist()
        worst = 0.0
        for _ in range(12):
            x = rng.integers(0, 4, 5).astype(float)
            p = _gibbs(x, eps, 1.0, lengths)
            for i, step in itertools.product(range(5), (1.0, -1.0)):
                if x[i] + step < 0:
                    continue
                x2 = x.copy()
                x2[i] += step
                q = _gibbs(x2, eps, 1.0, lengths)
                worst = max(worst, max(abs(math.log(p[k] / q[k])) for k in p))
        assert worst <= eps * (1 + 1e-9)
        assert worst > 0.3 * eps  # the neighbours really move the law


def test_noisy_cost_rule_uses_the_documented_noise_scales():
    """n = 2: {[0,1]} wins iff dev + Z₂ − Z₀ − Z₁ < c, Z₂ ~ Lap((Δ₂ + Δ)/ε), Z₀, Z₁ ~ Lap(Δ/ε), Δ = Δ₂ = 1."""
    eps, c, x = 1.0, 1.0, np.array([0.0, 4.0])  # dev = 4
    g = np.random.default_rng(4)
    M = 2_000_000
    ref = np.mean(4 + g.laplace(0, 2 / eps, M) - g.laplace(0, 1 / eps, M) - g.laplace(0, 1 / eps, M) < c)
    gen = np.random.default_rng(5)
    N = 6000
    f = np.mean([private_partition(x, eps, bucket_penalty=c, selection="noisy_cost", entropy_correction=False,
                                   rng=gen).n_buckets == 1 for _ in range(N)])
    assert abs(f - ref) < 5 * math.sqrt(ref * (1 - ref) / N)
    assert 0.15 < ref < 0.35  # the reference code's rule (b = (2 − 1/2 − 1/2)/ε, no singleton noise): ½e⁻³ ≈ 0.025


def test_noisy_cost_rule_picks_the_least_total_in_its_tie_order_on_tied_noise():
    """n = 3 cells, lengths 1 and 2: partitions A = {0|1|2}, B = {01|2}, C = {0|12}, first in that order on ties
    (shortest final bucket first, read backwards), through private_partition with prepared integer noise (the law
    itself is checked in tests/test_adaptive_noisy_cost.py)."""
    eps, c = 4.0, 1

    @dataclasses.dataclass(frozen=True, eq=False)
    class Given(Noise):  # adds the next prepared integer noise vector
        draws: list = dataclasses.field(default_factory=list)

        def add_discrete_laplace(self, values, scale):
            return np.asarray(values, dtype=np.int64) + self.draws.pop(0)

    g = np.random.default_rng(3)
    for _ in range(300):
        x = g.integers(0, 4, 3).astype(float)
        z = g.integers(-2, 3, 5)  # in records: the noise is K·z (two-cell deviations |x₀ − x₁| are whole too)
        totals = np.array([3 * c, abs(x[0] - x[1]) + 2 * c, abs(x[1] - x[2]) + 2 * c]) + [
            z[0] + z[1] + z[2], z[3] + z[2], z[0] + z[4]]
        p = private_partition(x, eps, bucket_penalty=c, selection="noisy_cost", entropy_correction=False,
                              noise=Given("opendp", None, [COST_GRID * z[:3], COST_GRID * z[3:]]))
        want = [[[0, 1], [1, 2], [2, 3]], [[0, 2], [2, 3]], [[0, 1], [1, 3]]][int(np.argmin(totals))]
        assert p.bounds.tolist() == want


@pytest.mark.parametrize("selection", ["exponential", "noisy_cost"])
def test_huge_epsilon_recovers_the_step_partition(selection):
    x = np.repeat([5.0, 40.0, 0.0, 0.0], 16)  # dyadic-aligned steps: three buckets 16 + 16 + 32
    p = private_partition(x, 1e6, bucket_penalty=1e-3, selection=selection, rng=0)
    assert p.bounds.tolist() == [[0, 16], [16, 32], [32, 64]]
    y = np.repeat([3.0, 10.0, 0.0, 2.0], [7, 13, 5, 9])  # unaligned steps need "all" intervals
    q = private_partition(y, 1e6, bucket_penalty=1e-3, selection=selection, candidates="all", rng=1)
    assert q.bounds.tolist() == [[0, 7], [7, 20], [20, 25], [25, 34]]
    r = private_partition(y, 1e6, bucket_penalty=1e-3, selection=selection, rng=2)  # dyadic: refines the steps
    assert {7, 20, 25} <= set(r.bounds[:, 1].tolist()) and r.n_buckets <= 12


def test_partition_record_and_single_cell():
    p = private_partition(np.arange(8.0), 2.0, bucket_penalty=0.5, rng=0)
    assert p.bounds[0, 0] == 0 and p.bounds[-1, 1] == 8 and np.all(p.bounds[1:, 0] == p.bounds[:-1, 1])
    assert p.sensitivity == 2 * (1 - 1 / 8) and p.epsilon == 2.0 and p.bucket_penalty == 0.5
    assert math.isclose(p.penalty, 0.5 + (2 * p.sensitivity / 2.0) * math.log(4))
    one = private_partition([7.0], 1.0, bucket_penalty=1.0, rng=0)
    assert one.bounds.tolist() == [[0, 1]] and one.sensitivity == 0.0
    capped = private_partition(np.arange(8.0), 1.0, bucket_penalty=1.0, max_bucket_length=1, rng=0)
    assert capped.n_buckets == 8


def test_seeded_reproducibility():
    x = np.random.default_rng(6).integers(0, 30, 200).astype(float)
    for sel in ("exponential", "noisy_cost"):
        a = private_partition(x, 0.5, bucket_penalty=2.0, selection=sel, rng=7).bounds
        assert np.array_equal(a, private_partition(x, 0.5, bucket_penalty=2.0, selection=sel, rng=7).bounds)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(epsilon=0.0), ValueError, "'epsilon' parameter of private_partition"),
    (dict(bucket_penalty=-1.0), ValueError, "'bucket_penalty' parameter of private_partition"),
    (dict(candidates="dyad"), ValueError, "'candidates' parameter of private_partition"),
    (dict(selection="max"), ValueError, "'selection' parameter of private_partition"),
    (dict(max_bucket_length=0), ValueError, "'max_bucket_length' parameter of private_partition"),
    (dict(entropy_correction=1), TypeError, "'entropy_correction' parameter of private_partition"),
    (dict(x=[1.0, -2.0]), ValueError, "'x' parameter of private_partition"),
    (dict(x=np.ones((2, 2))), ValueError, "'x' parameter of private_partition must be a 1-D"),
])
def test_validation(kwargs, exc, words):
    args = dict(x=np.ones(4), epsilon=1.0, bucket_penalty=1.0, rng=0) | kwargs
    with pytest.raises(exc, match=words):
        private_partition(**args)


def test_deviations_refuses_an_empty_window():
    from mmopt.adaptive.partition import deviations
    with pytest.raises(ValueError, match="'lengths' parameter of deviations"):
        deviations([1.0, 2.0], [0])  # was a ZeroDivisionError


def test_deviations_are_the_correctly_rounded_exact_deviations():
    """Fraction oracle: dev = fl(Σ|x_j − S/L|) exactly, at counts near 2³² records."""
    from fractions import Fraction

    from mmopt.adaptive.partition import deviations

    rng = np.random.default_rng(4)
    for L in (3, 5, 7, 12, 100):
        x = rng.multinomial(2**32 - 1, rng.dirichlet(np.full(L + 3, 0.4))).astype(float)
        dev = deviations(x, [L])[:, 0]
        for a in range(x.size - L + 1):
            w = [int(v) for v in x[a:a + L]]
            mean = Fraction(sum(w), L)
            assert dev[a] == float(sum(abs(v - mean) for v in w))


@pytest.mark.parametrize("L", [3, 7, 100, 1000])
def test_adversarial_neighbours_at_2_32_records_stay_within_the_charged_length_sensitivity(L):
    """The audit's construction x = [0, K, …, K] → x + e₀, K ≈ 2³²/(L − 1) (exact change 2(1 − 1/L); the
    former float deviations moved by up to 1 + 4.8·10⁻⁷ of it): within the charged Δ_L, exactly."""
    from fractions import Fraction

    from mmopt.adaptive.partition import deviations, length_sensitivities

    charged = Fraction(float(length_sensitivities([L])[0]))
    worst = Fraction(0)
    for dK in range(60):
        K = float((2**32 - 1) // (L - 1) - dK)
        x = np.full(L, K)
        x[0] = 0.0
        xp = x.copy()
        xp[0] = 1.0
        a, b = deviations(x, [L])[0, 0], deviations(xp, [L])[0, 0]
        worst = max(worst, abs(Fraction(float(a)) - Fraction(float(b))) / charged)
    assert 0.999 < worst <= 1


def test_release_refuses_fractional_counts_and_noisy_costs_measure_the_deviations_alone():
    from _float_neighbours import recorder

    from mmopt.adaptive.partition import deviations

    with pytest.raises(ValueError, match="'x' parameter of private_partition must hold whole counts of at most"):
        private_partition(np.array([0.5, 2.0, 3.0]), 1.0, bucket_penalty=1.0, noise=recorder())
    x = np.array([3.0, 0.0, 7.0, 7.0, 1.0])
    A = recorder()
    p = private_partition(x, 1.0, bucket_penalty=5.0, candidates="all", selection="noisy_cost", noise=A)
    dev = deviations(x, np.arange(1, 6))
    measured = [e for e in A.log if e[0] == "dlaplace"]
    assert [e[1].size for e in measured] == [5, 4, 3, 2, 1] and {e[0] for e in A.log} == {"dlaplace"}
    K = COST_GRID
    assert all(np.array_equal(m[1], np.floor(dev[~np.isnan(dev[:, k]), k] * K)) for k, m in enumerate(measured))
    from mmopt.adaptive.partition import length_sensitivities

    delta_L = length_sensitivities(np.arange(1, 6))
    assert p.sensitivity == max(delta_L)
    steps = np.ceil(delta_L * K)  # the scales are (⌈KΔ_L⌉ + max⌈KΔ_L⌉ + 1)/ε, rounded up, as exact Fractions
    for (_, _, _, b), s_L in zip(measured, steps + steps.max() + 1, strict=True):
        assert Fraction(b) >= Fraction(int(s_L)) and Fraction(b) - Fraction(int(s_L)) < Fraction(b) * 2**-51


def test_noisy_cost_rule_refuses_scales_past_its_integers_before_drawing():
    from _float_neighbours import recorder
    A = recorder()
    with pytest.raises(ValueError, match="selection='noisy_cost' adds its noise in 64-bit integers, and epsilon=1e-09"):
        private_partition(np.arange(8.0), 1e-9, bucket_penalty=1.0, selection="noisy_cost", noise=A)
    assert A.log == []
    with pytest.raises(ValueError, match="penalty in units of 2\\^-20 record, up to 2\\^42 records; got 4.5e\\+12"):
        private_partition(np.arange(8.0), 1.0, bucket_penalty=4.5e12, selection="noisy_cost", noise=A)
    assert A.log == []
    with pytest.raises(ValueError, match="counts them exactly only below 2"):  # a simulation past the release domain
        private_partition(np.array([0.0, 2.0**40]), 1.0, bucket_penalty=1.0, selection="noisy_cost", rng=0)
    p = private_partition(np.arange(8.0), 1e-6, bucket_penalty=1.0, selection="noisy_cost", noise=A)
    assert p.n_buckets >= 1 and {e[0] for e in A.log} == {"dlaplace"}


def test_noisy_cost_scales_are_rounded_up_at_inexact_epsilons():
    """b_L ≥ s_L/ε₁ as exact rationals where the quotient is inexact (at ε = 1 it is exact and proves nothing)."""
    from _float_neighbours import recorder

    from mmopt.adaptive.partition import length_sensitivities
    x = np.array([0.0, 3, 3, 1, 7, 7, 0, 2])
    steps = np.ceil(length_sensitivities(np.arange(1, 9)) * COST_GRID)
    s = [Fraction(int(t)) for t in steps + steps.max() + 1]
    inexact = 0
    for eps in (0.3, 0.7, 1 / 3, 0.1, 2.9, 1e-3):
        A = recorder()
        private_partition(x, eps, bucket_penalty=1.0, candidates="all", selection="noisy_cost", noise=A)
        got = [Fraction(e[3]) for e in A.log if e[0] == "dlaplace"]
        assert len(got) == 8 and all(b >= s_L / Fraction(eps) for b, s_L in zip(got, s, strict=True))
        inexact += sum(Fraction(float(s_L) / eps) < s_L / Fraction(eps) for s_L in s)
    assert inexact > 0  # the round-to-nearest quotient is below s_L/ε somewhere: the test can see a missing round-up


def test_noisy_cost_totals_are_exact_past_2_53():
    """The totals are Python integers: two partitions 1 unit apart at 2^55 are told apart (float64 would tie them
    and the tie order would pick the other one)."""
    @dataclasses.dataclass(frozen=True, eq=False)
    class Given(Noise):
        draws: list = dataclasses.field(default_factory=list)

        def add_discrete_laplace(self, values, scale):
            return np.asarray(values, dtype=np.int64) + self.draws.pop(0)

    c = 2.0**54 / COST_GRID  # c·K = 2^54: B = {01|2} and C = {0|12} total 2^55 + noise, A = {0|1|2} 3·2^54
    for z01, z12, want in ((1, 0, [[0, 1], [1, 3]]), (0, 1, [[0, 2], [2, 3]]), (0, 0, [[0, 2], [2, 3]])):
        p = private_partition(np.zeros(3), 4.0, bucket_penalty=c, selection="noisy_cost", entropy_correction=False,
                              noise=Given("opendp", None, [np.zeros(3, dtype=np.int64), np.array([z01, z12])]))
        assert p.bounds.tolist() == want


def test_partition_refuses_buckets_past_2_20(monkeypatch):  # mutant part-no-maxlen
    from mmopt.adaptive import private_partition
    with pytest.raises(ValueError, match="'max_bucket_length' parameter of private_partition must be at most"):
        private_partition(np.zeros(2**20 + 1), 1.0, bucket_penalty=1.0, candidates="all", rng=0)
