"""EFPA (Ács et al. 2012): the real Fourier basis against a dense one, limits at huge ε, budget, noise interface."""

import math
from fractions import Fraction

import numpy as np
import pytest
from _recording_noise import Recording

from mmopt.adaptive._noise import Noise
from mmopt.adaptive.efpa import (
    efpa,
    fourier_coefficients,
    fourier_matrix,
    inverse_fourier,
    kept_sensitivity,
    score_sensitivity,
)
from mmopt.dense.exact_answers import MAX_RECORDS


@pytest.mark.parametrize("n", [1, 2, 3, 8, 9, 16])
def test_basis_is_orthonormal_and_sensitivity_bound_holds(n):
    Phi = np.array([fourier_coefficients(e) for e in np.eye(n)]).T  # column i = Φ e_i
    np.testing.assert_allclose(Phi @ Phi.T, np.eye(n), atol=1e-12)
    x = np.random.default_rng(n).normal(size=n)
    np.testing.assert_allclose(inverse_fourier(fourier_coefficients(x)), x, atol=1e-12)
    for k in range(1, n + 1):  # the bound on Δ₁(k) is an upper bound on the exact max column L1 norm
        assert np.abs(Phi[:k]).sum(axis=0).max() <= kept_sensitivity(k, n) + 1e-12
    if n > 2:  # rows are ordered by frequency: row 1 is the lowest cosine
        np.testing.assert_allclose(Phi[1], math.sqrt(2 / n) * np.cos(2 * np.pi * np.arange(n) / n), atol=1e-12)


def test_tail_norm_score_has_sensitivity_one():
    rng = np.random.default_rng(9)
    for n in (5, 16):
        for _ in range(50):
            x = rng.integers(0, 30, n).astype(float)
            i = int(rng.integers(n))
            xp = x.copy()
            xp[i] += 1
            tails = [np.sqrt(np.cumsum((fourier_coefficients(z) ** 2)[::-1])[::-1]) for z in (x, xp)]
            assert np.max(np.abs(tails[0] - tails[1])) <= 1 + 1e-9


def test_huge_epsilon_recovers_x_and_budget_adds_up():
    x = np.random.default_rng(0).integers(0, 50, 33).astype(float)
    r = efpa(x, 1e9, rng=1)
    assert r.method == "efpa" and r.estimate.shape == x.shape and r.path == "simulation"
    np.testing.assert_allclose(r.estimate, x, atol=1e-3)
    assert dict(r.budget) == {"select_k": 0.5e9, "coefficients": 1e9 - 0.5e9}
    assert math.isclose(sum(r.budget.values()), 1e9, rel_tol=1e-15)


def test_uniform_input_gives_a_uniform_output_at_huge_epsilon():
    x = np.full(40, 12.0)
    for seed in range(3):  # every coefficient but the mean is 0, so any k reproduces x
        np.testing.assert_allclose(efpa(x, 1e6, rng=seed).estimate, 12.0, atol=1e-4)


def test_selection_probabilities_favour_the_smallest_k_on_uniform_input():
    # the exact selection law: scores are −√(2k)·b_k (zero tails), so p(k) decreases in k
    from mmopt.adaptive._exponential import exponential_probabilities

    n, eps2 = 40, 0.5
    ks = np.arange(1, n + 1)
    p = exponential_probabilities(-np.sqrt(2 * ks) * kept_sensitivity(ks, n) / eps2, 0.5, 1.0)
    assert np.all(np.diff(p) < 0)
    counts = np.bincount([efpa(np.full(n, 3.0), 1.0, rng=s).details["k"] for s in range(200)], minlength=n + 1)
    assert counts[1] == counts.max()


def test_expected_estimate_is_the_rank_k_projection():
    x = np.random.default_rng(3).integers(0, 20, 24).astype(float)
    rec = Recording("numpy", np.random.default_rng(4))
    r = efpa(x, 2.0, ratio=0.25, noise=rec)
    k = r.details["k"]
    assert [c[0] for c in rec.calls] == ["exponential", "laplace"]
    assert rec.calls[0][1:] == (0.5, r.details["score_sensitivity"])
    assert rec.calls[1][1:] == (r.details["noise_scale"], (k,))
    # replay the same stream: the estimate minus the projection is exactly the inverse transform of the noise
    gen = np.random.default_rng(4)
    Noise("numpy", gen).exponential(np.zeros(24), 0.5, 1.0)
    eta = gen.laplace(0.0, r.details["noise_scale"], k)
    c = fourier_coefficients(x)
    c[k:] = 0.0
    c[:k] += eta
    np.testing.assert_allclose(r.estimate, inverse_fourier(c), atol=1e-9)
    assert r.details["noise_scale"] == pytest.approx(kept_sensitivity(k, 24) / 1.5)


def test_seeded_runs_repeat():
    x = np.random.default_rng(5).poisson(10, 100).astype(float)
    np.testing.assert_array_equal(efpa(x, 1.0, rng=6).estimate, efpa(x, 1.0, rng=6).estimate)
    assert not np.array_equal(efpa(x, 1.0, rng=6).estimate, efpa(x, 1.0, rng=7).estimate)


@pytest.mark.parametrize("amp", [30, 400])
def test_beats_identity_on_a_smooth_histogram(amp):
    n, eps = 256, 0.05
    t = np.arange(n)
    x = np.round(amp * np.exp(-0.5 * ((t - 100) / 30) ** 2))
    mse = np.mean([np.mean((efpa(x, eps, rng=s).estimate - x) ** 2) for s in range(5)])
    assert mse < 0.5 * (2 / eps**2)  # identity's expected per-cell squared error is 2/ε²


def test_input_checks():
    with pytest.raises(ValueError, match="'x' parameter of efpa must be a 1-D"):
        efpa(np.ones((2, 2)), 1.0)
    with pytest.raises(ValueError, match="'epsilon' parameter of efpa"):
        efpa([1, 2], -1.0)
    with pytest.raises(ValueError, match="'ratio' parameter of efpa"):
        efpa([1, 2], 1.0, ratio=0.0)
    with pytest.raises(ValueError, match="'noise' parameter of efpa"):
        efpa([1, 2], 1.0, noise="gpu")
    with pytest.raises(ValueError, match="'rng' parameter of efpa must be None"):
        efpa([1, 2], 1.0, noise="opendp", rng=3)
    with pytest.raises(ValueError, match="'x' parameter of efpa must hold counts"):
        efpa([1, -1], 1.0)


def test_efpa_runs_on_opendp_samplers():
    pytest.importorskip("opendp")
    x = np.random.default_rng(0).poisson(5, 32).astype(float)
    r = efpa(x, 1.0, noise="opendp")
    assert r.path == "release" and r.details["noise"] == "opendp" and r.estimate.shape == x.shape
    assert np.all(np.isfinite(r.estimate)) and math.isclose(sum(r.budget.values()), 1.0)


@pytest.mark.slow
def test_efpa_privacy_audit():
    """StatDP-style audit (tests/_privacy_audit.py): neighbours x, x + e_0 on 4 cells; ε_lo must not exceed ε."""
    from _privacy_audit import audit

    def stats(x, g):
        r = efpa(x, 1.0, rng=g)
        return [r.estimate.sum(), r.estimate[0], r.details["k"]]

    a = audit(stats, np.zeros(4), np.array([1.0, 0, 0, 0]), n=40_000, n_pilot=4000, seed=0)
    assert a.epsilon_lower <= 1.0


@pytest.mark.parametrize("pick", [None, lambda m: 0, lambda m: m - 1])
def test_privacy_loss_bound_over_all_neighbours(pick):
    """Brute force (tests/_replay.py): on every x ± e_i, the tail-norm scores move by at most Δu = 1 and the kept
    coefficients by at most their Δ₁(k) bound in L1, so the path's loss is at most ε (k small, middle, n)."""
    from _replay import worst_loss
    for x in (np.array([0.0, 3.0, 1.0, 7.0, 7.0, 2.0]), np.array([5.0, 0.0, 2.0, 9.0, 1.0])):
        assert 0 < worst_loss(lambda z, n: efpa(z, 1.0, noise=n), x, pick) <= 1.0 + 1e-9


def test_kept_sensitivity_refuses_zero_coefficients():
    from mmopt.adaptive.efpa import kept_sensitivity
    with pytest.raises(ValueError, match="'k' parameter of kept_sensitivity"):
        kept_sensitivity(0, 4)  # was −0.207, a negative sensitivity


def test_one_cell_spends_all_of_epsilon_on_its_coefficient():
    # k = 1 is the only choice: no exponential draw, the coefficient's noise at ε whole (Δ₁ = 1 on one cell)
    rec = Recording("numpy", np.random.default_rng(0))
    r = efpa([5.0], 2.0, noise=rec)
    assert [c[0] for c in rec.calls] == ["laplace"] and r.details["noise_scale"] == pytest.approx(0.5)
    assert r.budget == {"select_k": 0.0, "coefficients": 2.0} and r.details["k"] == 1


# --- the release's floating point inside the proof (module docstring, "Privacy") ---------------------------------

U = Fraction(1, 2**53)


def integer_basis(n):
    """Q = 2⁶²·Φ̂ as Python integers (object array): exact, Φ̂'s entries being multiples of 2⁻⁶² (checked)."""
    Q = fourier_matrix(n) * 2.0**62
    assert np.all(Q == np.round(Q)) and np.all(np.abs(Q) <= 2.0**62)
    return Q.astype(np.int64).astype(object)


def adversarial(n, seed, cell):
    """2³² − 1 records: ~2²⁰ spread by a multinomial, the rest in one cell."""
    x = np.random.default_rng(seed).multinomial(2**20, np.ones(n) / n).astype(float)
    x[cell] = 0.0
    x[cell] = MAX_RECORDS - 1 - x.sum()
    return x


def prefix_l1(a, b):
    """Exact ‖a_{:k} − b_{:k}‖₁ for k = 1..n (Fractions)."""
    out, acc = [], Fraction(0)
    for p, q in zip(a.tolist(), b.tolist(), strict=True):
        acc += abs(Fraction(p) - Fraction(q))
        out.append(acc)
    return out


@pytest.mark.parametrize("n", [1, 2, 5, 64, 1000])
def test_kept_sensitivity_bounds_the_exact_column_sums_of_the_computed_basis(n):
    sums = np.cumsum(np.abs(integer_basis(n)), axis=0)  # exact column sums of |Q| over the first k rows
    for k in sorted({1, 2, 3, n // 2, n - 1, n} & set(range(1, n + 1))):
        exact = Fraction(int(max(sums[k - 1])), 2**62)
        bound = Fraction(float(kept_sensitivity(k, n)))
        assert exact <= bound <= exact * (1 + Fraction(1, 10**12))  # proven, and tight
        analytic = min(1 / math.sqrt(n) + (k - 1) * math.sqrt(2 / n), math.sqrt(k))  # module docstring
        assert bound <= Fraction(analytic) * (1 + Fraction(1, 10**12))


@pytest.mark.parametrize("n", [1, 2, 5, 64, 512, 1000])
def test_coefficients_are_correctly_rounded_and_tails_within_two_ulps(n):
    from mmopt.adaptive.efpa import _coefficients
    Q = integer_basis(n)
    for x in (adversarial(n, 0, 0), adversarial(n, 1, n // 2), np.random.default_rng(n).integers(0, 9, n) * 1.0):
        Y = Q.dot(x.astype(np.int64).astype(object))  # 2⁶²·Φ̂x exactly
        c, tail, exact = _coefficients(x)
        assert exact and c.tolist() == [y / 2**62 for y in Y]  # int / int: correctly rounded
        S = Fraction(0)
        for k in range(n - 1, 0, -1):  # |t̂_{k−1} − ‖(Φ̂x)_{k:}‖| ≤ 2u‖(Φ̂x)_{k:}‖, in squares
            S += Fraction(int(Y[k]) ** 2, 2**124)
            t = Fraction(tail[k - 1])
            assert (t / (1 + 2 * U)) ** 2 <= S <= (t / (1 - 2 * U)) ** 2
        assert tail[n - 1] == 0.0


def recorded_draws(x, eps=1.0):
    """efpa on x with a recording noise that picks k = 2: (scores, Δ_u, kept coefficients, scale, details)."""
    from _replay import Replay
    rec = Replay("numpy", np.random.default_rng(0), pick=lambda m: 1)
    r = efpa(x, eps, noise=rec)
    (_, e1, du, scores, _), (_, b, kept, _) = rec.tape
    assert e1 == r.budget["select_k"]
    return scores, du, kept, b, r.details


@pytest.mark.parametrize("n", [64, 1000])
def test_adversarial_neighbours_stay_within_the_charged_sensitivities(n):
    """At 2³² − 1 records, one cell huge: the exact L1 distance of the computed coefficients of x and x ± e_i is
    within d_in(k) for every k, and every score moves by at most Δ_u. The uncharged Δ₁ is exceeded (the charge is
    needed; the float64 rFFT of old exceeded Δ₁ by 2.4·10⁻⁷ of it at n = 64 and 4,096)."""
    from mmopt.adaptive.efpa import _plan
    delta1, d_in, _, _ = _plan(n, 0.5)
    excess = Fraction(-1)
    for seed, cell in ((0, 0), (1, n // 3)):
        x = adversarial(n, seed, cell)
        scores, du, _, _, _ = recorded_draws(x)
        c = fourier_coefficients(x)
        for i, d in ((cell, -1.0), (cell, 1.0), (0, 1.0), (n // 2, 1.0)):
            xp = x.copy()
            xp[i] += d
            assert xp.sum() <= MAX_RECORDS
            dist = prefix_l1(c, fourier_coefficients(xp))
            assert all(dist[k] <= Fraction(d_in[k]) for k in range(n))
            excess = max(excess, max(dist[k] / Fraction(delta1[k]) - 1 for k in range(n)))
            scores_p, du_p, _, _, _ = recorded_draws(xp)
            assert du_p == du and np.max(np.abs(scores - scores_p)) <= du
    assert 0 < excess < Fraction(d_in[1] / delta1[1]) - 1


def test_release_path_measures_these_coefficients_at_this_d_in(monkeypatch):
    """noise="opendp": OpenDP's Laplace is given ĉ_{:k} (the exact coefficients rounded once) at b = d_in(k)/ε₂,
    its exponential mechanism the computed scores at Δ_u ≥ C₂(1 + (2N + 1)·3u) (C₂ the exact max column norm)."""
    import mmopt.adaptive._opendp_noise as od
    from mmopt.adaptive.efpa import _plan
    calls = []
    monkeypatch.setattr(od, "exponential", lambda s, e, d: calls.append(("exp", np.array(s), e, d)) or 3)
    monkeypatch.setattr(od, "add_laplace", lambda v, b: calls.append(("lap", np.array(v), b)) or np.array(v))
    n, eps = 64, 0.8
    x = adversarial(n, 2, 5)
    r = efpa(x, eps, noise="opendp")
    assert r.path == "release" and r.details["k"] == 4 and [c[0] for c in calls] == ["exp", "lap"]
    _, d_in, b_all, terms = _plan(n, eps / 2)
    (_, scores, e1, du), (_, values, b) = calls
    assert e1 == eps / 2 and du == r.details["score_sensitivity"] == score_sensitivity(n, terms)
    assert values.tolist() == fourier_coefficients(x)[:4].tolist()
    assert b == r.details["noise_scale"] == b_all[3] == d_in[3] / (eps / 2) and r.details["d_in"] == d_in[3]
    np.testing.assert_array_equal(scores, recorded_draws(x, eps)[0])
    c2 = max(sum(Fraction(int(q) ** 2, 2**124) for q in col) for col in integer_basis(n).T)
    assert Fraction(du) ** 2 >= c2 * (1 + (2 * MAX_RECORDS + 1) * 3 * U) ** 2
    calls.clear()  # outside the proof's domain: refused before anything is drawn
    for bad in (x + 0.5, np.full(n, 2.0**27)):
        with pytest.raises(ValueError, match="'x' parameter of efpa must hold"):
            efpa(bad, eps, noise="opendp")
    assert calls == []


def test_kept_sensitivity_bounds_every_k():  # mutant efpa-no-widen (3.5-22 ulp under at 89-2,115 k)
    from fractions import Fraction

    from mmopt.adaptive.efpa import fourier_matrix, kept_sensitivity
    n = 1000
    Q = (np.abs(fourier_matrix(n)) * 2.0**62).astype(np.int64).astype(object)
    sums = np.cumsum(Q, axis=0)
    bound = kept_sensitivity(np.arange(1, n + 1), n)
    for k in range(1, n + 1):
        assert Fraction(int(max(sums[k - 1])), 2**62) <= Fraction(float(bound[k - 1])), k


# --- the transforms of mmopt.adaptive.fourier_exact (powers of two) against the integer basis -------------------

@pytest.mark.parametrize("n", [2, 4, 8, 16, 32, 128])
def test_transform_path_gives_the_exact_integers(n):
    """2⁶²·Φ̂x by the group transforms equals Q·x in Python integers (Q read off fourier_matrix), on extremes:
    one cell of 2³², 2³² − 1 records spread or heaped, sparse and small counts; and c, t̂ equal the slice path's."""
    from mmopt.adaptive.efpa import _exact, _scaled
    Q = integer_basis(n)
    rng = np.random.default_rng(n)
    cases = [np.zeros(n), adversarial(n, 0, 0), adversarial(n, 1, n - 1), rng.integers(0, 9, n) * 1.0,
             rng.multinomial(MAX_RECORDS, np.ones(n) / n) * 1.0]
    for cell in (0, 1, n // 2, n - 1):
        one = np.zeros(n)
        one[cell] = MAX_RECORDS
        cases.append(one)
    sparse = np.zeros(n)
    sparse[rng.choice(n, max(1, n // 8), replace=False)] = 2.0**31 / max(1, n // 8)
    cases.append(np.floor(sparse))
    for x in cases:
        exact = [int(y) for y in Q.dot(x.astype(np.int64).astype(object))]
        assert _scaled(x, fast=True) == exact and _scaled(x, fast=False) == exact
        c, tail = _exact(x)
        assert c.tolist() == [float(Fraction(y, 2**62)) for y in exact]  # correctly rounded
        ref = sum(Fraction(y * y, 2**124) for y in exact[1:])
        assert Fraction(tail[0]) ** 2 <= ref * (1 + 2 * U) ** 2 and ref <= (Fraction(tail[0]) * (1 + 2 * U)) ** 2


def test_multiplicative_sums_are_exact_for_any_tables():
    """Σ_i x_i·T[f·i mod n] for random int64 tables up to 2⁶² (four primes) and counts up to 2³², every f."""
    from mmopt.adaptive.fourier_exact import multiplicative_sums
    rng = np.random.default_rng(0)
    for k in range(7):
        n = 1 << k
        T = [rng.integers(-2**62, 2**62, n, dtype=np.int64, endpoint=True), rng.integers(-3, 4, n, dtype=np.int64)]
        x = rng.multinomial(2**32, np.ones(n) / n).astype(np.int64)
        got = multiplicative_sums(x, T, n, 2**32)
        for t, table in zip(got, T, strict=True):
            assert t == [sum(int(x[i]) * int(table[f * i % n]) for i in range(n)) for f in range(n)]
    with pytest.raises(ValueError, match="'x' parameter of multiplicative_sums"):
        multiplicative_sums(np.ones(6, dtype=np.int64), T, 6, 6)
    with pytest.raises(ValueError, match="'records' parameter of multiplicative_sums"):
        multiplicative_sums(np.full(4, 2, dtype=np.int64), [np.ones(4, dtype=np.int64)], 4, 7)


def test_multiplicative_sums_at_both_edges_of_every_prime_count():
    """|Y| = records·max|T| at the smallest and the largest bound of each count of primes (one to five), the
    largest |T| in the second half of the second table: planted faults that read the bound from the first table or
    half of each, or dropped the factor 2 of |Y| < P/2, chose a prime too few and passed the random tables above."""
    from mmopt.adaptive.fourier_exact import PRIMES, multiplicative_sums
    primes = [p for p, _ in PRIMES]
    n, edges = 16, 0
    small = np.arange(n, dtype=np.int64) % 7 - 3
    for q in range(1, len(primes) + 1):
        below, P = math.prod(primes[:q - 1]), math.prod(primes[:q])
        for records in (1, 2**32, 2**62):
            lowest = -(-below // (2 * records)) if q > 1 else 1  # 2·records·top ≥ P_{q−1}: q − 1 primes are too few
            highest = min(2**62, (P - 1) // (2 * records))  # 2·records·top < P_q
            for top in {lowest, highest}:
                if not 1 <= lowest <= top <= highest:
                    continue
                edges += 1
                big = small.copy()
                big[n - 1], big[n // 2 + 1] = -top, top
                for cell in (1, n - 1):  # f·i mod n reaches every entry
                    for sign in (1, -1):
                        x = np.zeros(n, dtype=np.int64)
                        x[cell] = sign * records
                        got = multiplicative_sums(x, [small, big], n, records)
                        for t, T in zip(got, (small, big), strict=True):
                            assert t == [sign * records * int(T[f * cell % n]) for f in range(n)], (q, records, top)
    assert edges >= 14


def test_multiplicative_sums_refuses_what_an_int64_sum_wrapped():
    """Σ|x| and max|T| were read in int64: four counts of 2⁶² summed to 0 and passed records = 0 (the sums came back
    wrong), and −2⁶³ (|−2⁶³| wraps to itself) passed |T| ≤ 2⁶²."""
    from mmopt.adaptive.fourier_exact import multiplicative_sums
    T = np.array([5, -7, 11, 13], dtype=np.int64)
    for x in (np.full(4, 2**62, dtype=np.int64), np.array([-2**63, 0, 0, 0], dtype=np.int64)):
        for records in (0, 2**62):
            with pytest.raises(ValueError, match="'records' parameter of multiplicative_sums"):
                multiplicative_sums(x, [T], 4, records)
    with pytest.raises(ValueError, match="'tables' parameter of multiplicative_sums"):
        multiplicative_sums(np.array([1, 0, 0, 0], dtype=np.int64), [np.array([-2**63, 1, 1, 1], dtype=np.int64)], 4, 1)
    with pytest.raises(ValueError, match="'x' parameter of multiplicative_sums"):
        multiplicative_sums(np.zeros(0, dtype=np.int64), [np.zeros(0, dtype=np.int64)], 0, 0)
    x = np.array([2**61, -2**61, 0, 2**61], dtype=np.int64)  # Σ|x| = 3·2⁶¹ > 2⁶²: refused; without x₃ exact
    with pytest.raises(ValueError, match="'records' parameter of multiplicative_sums"):
        multiplicative_sums(x, [T], 4, 2**62)
    x[3] = 0
    assert multiplicative_sums(x, [T], 4, 2**62) == [[2**61 * int(T[0] - T[f % 4]) for f in range(4)]]


def test_powers_of_two_from_512_take_the_transforms_with_a_data_independent_bound(monkeypatch):
    """The number of primes follows from the bound passed, so it must not depend on the counts (it would time
    them); and only powers of two from 512 take this path by default."""
    from mmopt.adaptive import fourier_exact as fe
    real, seen = fe.multiplicative_sums, []
    monkeypatch.setattr(fe, "multiplicative_sums", lambda x, tables, rows, records: (
        seen.append((x.size, records)) or real(x, tables, rows, records)))
    for n in (256, 512, 1000, 1024):
        for total in (0, 1, 2**20):
            x = np.zeros(n)
            x[3] = total
            fourier_coefficients(x)
    assert seen == [(512, MAX_RECORDS)] * 3 + [(1024, MAX_RECORDS)] * 3
