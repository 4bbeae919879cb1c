"""NoiseFirst / StructureFirst (Xu et al. 2012): the v-optimal DP vs brute force, limits, sensitivity, budget."""

import itertools
import math

import numpy as np
import pytest
from _recording_noise import Recording

from mmopt.adaptive.vopt import _prefixes, _sse, noise_first, score_sensitivity, structure_first, vopt_table


def _brute(z, k):
    n = z.size
    best = math.inf
    for cuts in itertools.combinations(range(1, n), k - 1):
        e = [0, *cuts, n]
        best = min(best, sum(float(((z[a:b] - z[a:b].mean()) ** 2).sum()) for a, b in zip(e[:-1], e[1:], strict=True)))
    return best


def test_vopt_table_matches_brute_force():
    z = np.random.default_rng(0).integers(0, 10, 9).astype(float)
    E, arg = vopt_table(z, 5)
    for k in range(1, 6):
        assert E[k, 9] == pytest.approx(_brute(z, k), abs=1e-9)
    assert np.isinf(E[3, 2])  # two cells cannot make three buckets


def test_noise_first_huge_epsilon_is_exact_on_piecewise_constant_data():
    x = np.repeat([3.0, 40.0, 0.0, 12.0], [6, 4, 8, 5])
    r = noise_first(x, 1e7, rng=1)
    assert r.method == "noise_first" and r.path == "simulation" and r.estimate.shape == x.shape
    np.testing.assert_allclose(r.estimate, x, atol=1e-4)
    assert dict(r.budget) == {"counts": 1e7} and r.details["k"] >= 4


def test_noise_first_is_bucket_means_of_the_noisy_counts():
    x = np.random.default_rng(2).integers(0, 30, 40).astype(float)
    rec = Recording("numpy", np.random.default_rng(3))
    r = noise_first(x, 0.5, max_buckets=10, noise=rec)
    assert rec.calls == [("laplace", 2.0, (40,))]
    noisy = x + np.random.default_rng(3).laplace(0.0, 2.0, 40)
    k = r.details["k"]
    E, _ = vopt_table(noisy, 10)
    assert r.details["estimated_errors"][k - 1] == pytest.approx(E[k, 40] - (40 - 2 * k) * 8.0)
    edges = [*r.details["buckets"], 40]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        np.testing.assert_allclose(r.estimate[a:b], noisy[a:b].mean(), rtol=1e-12)
    assert ((r.estimate - noisy) ** 2).sum() == pytest.approx(E[k, 40], rel=1e-9)  # optimal for its k


def test_structure_first_huge_epsilon_finds_the_v_optimal_boundaries():
    x = np.repeat([3.0, 40.0, 0.0, 12.0], [6, 4, 8, 5])
    r = structure_first(x, 1e7, count_bound=50, buckets=4, rng=4)
    assert r.details["buckets"] == [0, 6, 10, 18]
    np.testing.assert_allclose(r.estimate, x, atol=1e-4)
    assert math.isclose(sum(r.budget.values()), 1e7)
    assert r.details["score_sensitivity"] == score_sensitivity(50, x.size, 4) == pytest.approx(101.0, rel=1e-11)


def test_structure_first_score_sensitivity_bound():
    rng = np.random.default_rng(5)
    F = 6.0
    for _ in range(100):
        m = int(rng.integers(1, 9))
        z = rng.integers(0, int(F), m).astype(float)  # z_i ≤ F − 1, so z + e_i stays within [0, F]
        zp = z.copy()
        zp[int(rng.integers(m))] += 1
        assert abs(_sse(*_prefixes(z), 0, m) - _sse(*_prefixes(zp), 0, m)) <= 2 * F + 1
        E, Ep = vopt_table(z, 3)[0], vopt_table(zp, 3)[0]
        fin = np.isfinite(E)
        assert np.all(np.abs(E[fin] - Ep[fin]) <= 2 * F + 1 + 1e-9)


def test_structure_first_draws_and_budget():
    x = np.random.default_rng(6).integers(0, 20, 30).astype(float)
    rec = Recording("numpy", np.random.default_rng(7))
    r = structure_first(x, 1.0, count_bound=25, buckets=4, ratio=0.4, noise=rec)
    em = [c for c in rec.calls if c[0] == "exponential"]
    assert len(em) == 3 and all(c[1:] == (pytest.approx(0.4 / 3), pytest.approx(51.0, rel=1e-11)) for c in em)
    assert [c[0] for c in rec.calls][-1] == "laplace" and rec.calls[-1][2] == (4,)
    assert dict(r.budget) == {"structure": 0.4, "counts": pytest.approx(0.6)}
    b = r.details["buckets"]
    assert b[0] == 0 and all(p < q for p, q in zip(b[:-1], b[1:], strict=True)) and len(b) == 4
    np.testing.assert_array_equal(r.estimate, structure_first(x, 1.0, count_bound=25, buckets=4, ratio=0.4,
                                                              rng=7).estimate)


def test_uniform_input_gives_uniform_output_at_huge_epsilon():
    x = np.full(30, 5.0)
    np.testing.assert_allclose(noise_first(x, 1e8, rng=0).estimate, 5.0, atol=1e-5)
    np.testing.assert_allclose(structure_first(x, 1e8, count_bound=5, rng=0).estimate, 5.0, atol=1e-5)


def test_seeded_runs_repeat():
    x = np.random.default_rng(8).poisson(5, 50).astype(float)
    np.testing.assert_array_equal(noise_first(x, 1.0, rng=1).estimate, noise_first(x, 1.0, rng=1).estimate)
    assert not np.array_equal(noise_first(x, 1.0, rng=1).estimate, noise_first(x, 1.0, rng=2).estimate)


def test_beat_identity_on_a_smooth_histogram_at_low_signal():
    n, eps = 256, 0.05
    t = np.arange(n)
    x = np.round(30 * np.exp(-0.5 * ((t - 100) / 30) ** 2))
    nf = np.mean([np.mean((noise_first(x, eps, rng=s).estimate - x) ** 2) for s in range(3)])
    sf = np.mean([np.mean((structure_first(x, eps, count_bound=30, rng=s).estimate - x) ** 2) for s in range(3)])
    assert nf < 0.8 * 2 / eps**2 and sf < 0.8 * 2 / eps**2


def test_input_checks():
    with pytest.raises(ValueError, match="'x' parameter of noise_first must be a 1-D"):
        noise_first(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="'max_buckets' parameter of noise_first"):
        noise_first([1, 2], 1.0, max_buckets=0)
    with pytest.raises(ValueError, match="'count_bound' parameter of structure_first"):
        structure_first([1, 2], 1.0, count_bound=0)
    with pytest.raises(TypeError):
        structure_first([1, 2], 1.0)  # F is required: it cannot be read from the data
    with pytest.raises(ValueError, match="'buckets' parameter of structure_first"):
        structure_first([1, 2], 1.0, count_bound=3, buckets=0)
    with pytest.raises(ValueError, match="'epsilon' parameter of structure_first"):
        structure_first([1, 2], -1.0, count_bound=3)
    with pytest.raises(ValueError, match="'rng' parameter of noise_first must be None"):
        noise_first([1, 2], 1.0, noise="opendp", rng=0)
    with pytest.raises(ValueError, match="noise_first: the v-optimal table would need"):
        noise_first(np.ones(2 * 10**6), 1.0, max_buckets=64)  # refused before any draw or table


def test_noise_first_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, 32).astype(float)
    r = noise_first(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


def test_structure_first_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, 32).astype(float)
    r = structure_first(x, 1.0, count_bound=20, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


@pytest.mark.slow
def test_noise_first_and_structure_first_privacy_audits():
    """StatDP-style audits (tests/_privacy_audit.py), x and x + e_0; ε_lo must not exceed ε (NoiseFirst's event
    is near tight: ε̂ ≈ 0.97 measured)."""
    from _privacy_audit import audit

    def nf(x, g):
        r = noise_first(x, 1.0, rng=g)
        return [r.estimate.sum(), r.estimate[0], r.details["k"]]

    def sf(x, g):
        r = structure_first(x, 1.0, count_bound=1, buckets=2, rng=g)
        return [r.estimate.sum(), r.estimate[0], r.details["buckets"][1]]

    assert audit(nf, np.zeros(3), np.array([1.0, 0, 0]), n=40_000, n_pilot=4000, seed=0).epsilon_lower <= 1.0
    assert audit(sf, np.zeros(4), np.array([1.0, 0, 0, 0]), n=40_000, n_pilot=4000, seed=0).epsilon_lower <= 1.0


@pytest.mark.parametrize("buckets", [2, 3])
def test_structure_first_privacy_loss_bound_with_counts_above_the_bound(buckets):
    """Brute force (tests/_replay.py): counts up to 3.5F; the scores are computed on the clipped data, so on every
    x ± e_i they move by at most 2F + 1 and the path's loss is at most ε (unclipped scores would move by ~2x_i)."""
    from _replay import worst_loss
    x = np.array([0.0, 3.0, 1.0, 7.0, 7.0, 2.0, 0.0])
    loss = worst_loss(lambda z, n: structure_first(z, 1.0, count_bound=2.0, buckets=buckets, noise=n), x)
    assert 0 < loss <= 1.0 + 1e-9


def test_noise_first_privacy_loss_bound_over_all_neighbours():
    from _replay import worst_loss
    x = np.array([0.0, 3.0, 1.0, 7.0, 7.0, 2.0])
    assert math.isclose(worst_loss(lambda z, n: noise_first(z, 1.0, noise=n), x), 1.0)


def test_structure_first_single_bucket_spends_all_of_epsilon_on_its_total():
    r = structure_first(np.arange(6.0), 2.0, count_bound=5, buckets=1, ratio=0.3, rng=0)
    assert dict(r.budget) == {"structure": 0.0, "counts": 2.0} and r.details["noise_scale"] == 0.5


def test_structure_first_with_a_bucket_per_cell_spends_all_of_epsilon_on_the_counts():
    """k = n leaves every boundary choice one candidate: ε₁ read nothing, and each cell's variance was 4× what ε
    allows at ratio ½ (a helper's audit). Now no choice is drawn and the counts get ε: Laplace scale 1/ε per cell."""
    x = np.random.default_rng(9).integers(0, 20, 12).astype(float)
    rec = Recording("numpy", np.random.default_rng(3))
    r = structure_first(x, 2.0, count_bound=25, buckets=12, noise=rec)
    assert dict(r.budget) == {"structure": 0.0, "counts": 2.0} and r.details["noise_scale"] == 0.5
    assert not [c for c in rec.calls if c[0] == "exponential"] and r.details["buckets"] == list(range(12))
    assert rec.calls[-1][0] == "laplace" and rec.calls[-1][2] == (12,)  # one noisy count per cell
    assert np.all(np.abs(r.estimate - x) < 0.5 * 40)  # scale 0.5: |noise| < 20 with probability 1 − 12·e⁻⁴⁰


def test_structure_first_scores_of_neighbours_at_a_large_count_bound_stay_within_the_charged_sensitivity():
    """With F = 10⁸ + 7 the float64 table (Σz² by cumsum, past 2⁵³) moved scores by 352 past 2F + 1 (a helper's
    audit); Σz² is now kept exactly in two parts and the rest of the rounding charged (score_sensitivity). Every
    score of the first and second choices, for neighbours at four cells, exact differences (Fraction)."""
    from fractions import Fraction

    from mmopt.dense.exact_answers import MAX_RECORDS
    F, n, k = 1e8 + 7, 40, 5
    rng = np.random.default_rng(11)
    x = rng.integers(0, int(F), n).astype(float)
    x[7] = F + 5e7  # clipped
    assert x.sum() < MAX_RECORDS
    delta = Fraction(score_sensitivity(F, n, k))
    assert 2 * F + 1 < delta < (2 * F + 1) * (1 + 1e-2)

    def scores(v):
        z = np.minimum(v, math.floor(F))
        E, pre = vopt_table(z, k - 1)[0], _prefixes(z)
        return [-(E[kk - 1, np.arange(kk - 1, j)] + _sse(*pre, np.arange(kk - 1, j), j)) for kk, j in
                ((k, n), (k - 1, n - 3), (2, 20))]

    base = scores(x)
    for cell in (0, 7, 19, 39):
        for step in (1.0, -1.0):
            y = x.copy()
            y[cell] += step
            for a, b in zip(base, scores(y), strict=True):
                assert max(abs(Fraction(s) - Fraction(t)) for s, t in zip(a.tolist(), b.tolist(), strict=True)) <= delta


def test_the_split_sum_of_squares_is_exact_and_a_bucket_one_rounding_from_it():
    from fractions import Fraction
    z = np.array([2.0**31 - 5, 3.0, 2.0**31 - 10, 0.0, 7.0])  # 2³² − 5 records: a histogram
    P, H, L = _prefixes(z)
    for j in range(6):
        assert int(H[j]) * 2**32 + int(L[j]) == sum(int(t) ** 2 for t in z[:j].tolist())
    got = _sse(P, H, L, 1, 4)
    part = [Fraction(t) for t in z[1:4].tolist()]
    exact = sum(t * t for t in part) - sum(part) ** 2 / 3
    assert abs(Fraction(float(got)) - exact) <= Fraction(4.03 * 2.0**-53) * sum(t * t for t in part)
    P2, H2, L2 = _prefixes(np.array([0.5, 1.5]))  # not a histogram: float sums (the simulation's path)
    assert _sse(P2, H2, L2, 0, 2) == pytest.approx(0.5)


def test_structure_first_release_refuses_what_its_proof_does_not_cover():
    pytest.importorskip("opendp")
    for bad in (np.array([0.5, 2.0, 3.0]), np.array([2.0**32, 1.0, 0.0])):
        with pytest.raises(ValueError, match="structure_first"):
            structure_first(bad, 1.0, count_bound=5, buckets=2, noise="opendp")
    with pytest.raises(ValueError, match="'count_bound' parameter of structure_first must be below"):
        structure_first(np.ones(4), 1.0, count_bound=1e300, buckets=2, rng=0)


def test_structure_first_clips_at_the_floor_of_a_fractional_bound():  # mutant vopt-no-floor-clip
    from _float_neighbours import recorder

    from mmopt.adaptive import structure_first
    x = np.array([3.0, 9.0, 8.0, 1.0, 12.0, 7.0, 0.0, 5.0])
    A, B = recorder(), recorder()
    structure_first(x, 1.0, count_bound=7.5, buckets=3, noise=A)
    structure_first(x, 1.0, count_bound=7.0, buckets=3, noise=B)
    for a, b in zip(A.log, B.log, strict=True):
        if a[0] == "exp":
            assert a[1].tolist() == b[1].tolist()
