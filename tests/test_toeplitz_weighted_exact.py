"""mmopt.toeplitz.weighted_exact: the weighted square root's released strategy, its exact Δ₂ and its correctly
rounded answers, against Fraction arithmetic on the same integers; every neighbour within the charged d_in."""

import math
from fractions import Fraction

import numpy as np
import pytest
from _primes import is_primitive_root

import mmopt
from mmopt import toeplitz
from mmopt.dense.exact_answers import MAX_RECORDS, charged_sensitivity, sqrt_up
from mmopt.toeplitz import weighted as ws
from mmopt.toeplitz import weighted_exact as we
from mmopt.toeplitz.exact_product import garner

KINDS = ("prefix", "all_range")


def _dense(r: we.Released) -> list[list[Fraction]]:
    """Â in cell order, exactly: 2^{σ+τ}·φ_j·(α(|i − j|) − α(i + j)) in the frame (prefix reversed)."""
    n, alpha = r.n, [int(t) for t in r.alpha]
    scale = Fraction(2) ** r.exponent
    M = [[scale * int(r.phi[j - 1]) * (alpha[abs(i - j)] - alpha[i + j]) for j in range(1, n + 1)]
         for i in range(1, n + 1)]
    return [row[::-1] for row in M[::-1]] if r.kind == "prefix" else M


def _exact(M, x) -> list[Fraction]:
    return [sum(m * int(t) for m, t in zip(row, x, strict=True)) for row in M]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [1, 2, 5, 16, 33])
def test_the_released_strategy_is_the_weighted_square_root_and_its_sensitivity_is_exact(kind, n):
    r = we.released(kind, n)
    M = _dense(r)
    norms = [sum(M[i][j] ** 2 for i in range(n)) for j in range(n)]
    top = max(norms)
    # an upper bound, and tight: the integer square root rounded up, then to float64 upwards (a few ulps)
    assert Fraction(r.sensitivity) ** 2 >= top
    assert Fraction(r.sensitivity) ** 2 <= top * (1 + Fraction(1, 2**50))
    # the strategy is G^{1/4}E⁻¹ to α's and φ's 53 bits (entries O(1); the sine transforms' rounding ~n·u)
    A = getattr(toeplitz, kind)(n)
    dense = np.array([[float(t) for t in row] for row in M])
    np.testing.assert_allclose(dense, ws.weighted_sqrt(A).to_dense(), rtol=0, atol=1e-13)
    assert abs(r.sensitivity - 1.0) < 1e-13


@pytest.mark.parametrize("kind", KINDS)
def test_the_mirrored_sequence_is_the_spectral_one_to_its_rounding(kind):
    # α(m) past the rounded base values is their mirror image (module docstring); the sine transforms' sequence
    # has the same symmetries, so both agree with it at every m the strategy reads (0..2n) to α's half unit
    n = 50
    r = we.released(kind, n)
    a = ws.spectral_sequence(kind, n, 0.25)
    got = np.ldexp(r.alpha[:2 * n + 1].astype(float), r.sigma)
    assert r.sigma == math.frexp(float(np.max(np.abs(a))))[1] - 53
    assert np.max(np.abs(got - a[:2 * n + 1])) <= 2.0 ** (r.sigma - 1) + 1e-15


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [3, 16, 40])
def test_answers_are_the_exact_products_correctly_rounded(kind, n):
    r = we.released(kind, n)
    M = _dense(r)
    rng = np.random.default_rng(n)
    spike = np.zeros(n)
    spike[n // 2] = MAX_RECORDS
    for x in (rng.integers(0, 2**20, n).astype(float), spike,
              rng.multinomial(MAX_RECORDS, np.full(n, 1.0 / n)).astype(float)):
        expected = [float(t) for t in _exact(M, x)]  # Fraction → float is correctly rounded
        assert we.answers(r, x).tolist() == expected


@pytest.mark.parametrize("kind", KINDS)
def test_every_neighbour_stays_within_the_charged_sensitivity(kind):
    # the float64 sine transforms at d_in = 1 + 10⁻⁷ put neighbours up to 8·10⁻⁷ of d_in past it (n = 16,
    # 2³² − 1 records in one cell); the exact answers stay 1.6·10⁻⁶ inside the charged d_in (a measurement of
    # this session, not asserted: the sine transforms' rounding is the FFT library's)
    n = 16
    r = we.released(kind, n)
    d_in = Fraction(charged_sensitivity(r.sensitivity, "l2", n, n, exact=False))
    rng = np.random.default_rng(3)
    spike = np.zeros(n)
    spike[5] = MAX_RECORDS - 1
    for x in (spike, rng.multinomial(MAX_RECORDS - 1, np.full(n, 1.0 / n)).astype(float)):
        y = [Fraction(t) for t in we.answers(r, x).tolist()]
        for j in range(n):
            for step in (1.0, -1.0):
                x2 = x.copy()
                x2[j] += step
                if x2[j] < 0:
                    continue
                y2 = we.answers(r, x2).tolist()
                assert sum((Fraction(s) - t) ** 2 for s, t in zip(y2, y, strict=True)) <= d_in ** 2


def test_the_release_measures_these_answers_at_the_charged_sensitivity(monkeypatch):
    from mmopt._base import opendp
    seen = {}
    real = opendp.measure

    def spy(values, d_in, privacy, **kw):
        seen["values"], seen["d_in"] = np.array(values), d_in
        return real(values, d_in, privacy, **kw)

    monkeypatch.setattr(opendp, "measure", spy)
    n = 40
    x = np.random.default_rng(4).integers(0, 1000, n).astype(float)
    for kind in KINDS:
        W = getattr(toeplitz, kind)(n)
        out = mmopt.release(W, toeplitz.weighted_sqrt(W), x, mmopt.Privacy(1.0, 1e-6))
        r = we.released(kind, n)
        assert seen["values"].tolist() == we.answers(r, x).tolist()
        assert seen["d_in"] == out.sensitivity == charged_sensitivity(r.sensitivity, "l2", n, n, exact=False)


def test_garner_rebuilds_signed_integers_past_int64_and_the_primes_fit():
    primes = [p for p, _ in we.PRIMES]
    P = math.prod(primes)
    rng = np.random.default_rng(5)
    values = [int(rng.integers(-2**62, 2**62)) * int(rng.integers(1, 2**62)) * int(rng.integers(1, 2**28))
              for _ in range(200)] + [P // 2, -(P // 2), 0, -1]
    residues = [np.array([z % p for z in values], np.int64) for p in primes]
    assert garner(residues, primes) == values
    assert P > 2**141  # |z| ≤ 2¹³⁹ (answers), C ≤ 2¹³² (sensitivity at MAX_N)
    for p, g in we.PRIMES:
        assert (p - 1) % 2**26 == 0 and (p - 1) ** 2 + p < 2**63  # a product of two residues plus one fits int64
        assert is_primitive_root(g, p)


def test_past_the_transforms_length_or_the_memory_limit_the_release_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="exactly up to 16,777,216 steps"):
        we.released("prefix", we.MAX_N + 1)
    from mmopt._base import validation
    monkeypatch.setattr(validation, "MAX_ALLOCATION_ENTRIES", 1000)
    with pytest.raises(ValueError, match="exact transforms .* Release the steps in windows"):
        we.released("all_range", 1001)  # not cached: refused before any transform
    r = we.released("prefix", 5)
    assert not (r.alpha.flags.writeable or r.phi.flags.writeable)  # shared by every release of (kind, n)


def test_the_square_root_is_rounded_upwards_even_where_its_floor_is_a_float():
    # isqrt(2¹²⁸ + 1) = 2⁶⁴ exactly, a float: without the rounding up the bound would sit below the root
    for value, exponent in (((1 << 128) + 1, 0), ((1 << 128) + 1, -300), (3, 0), (2, 10), (1 << 300, -2)):
        bound = Fraction(sqrt_up(Fraction(value) * Fraction(2) ** exponent))
        assert bound ** 2 >= value * Fraction(2) ** exponent
        assert bound ** 2 <= value * Fraction(2) ** exponent * (1 + Fraction(1, 2**50))


def test_answers_refuse_what_is_not_a_histogram_of_the_domain():
    # a review: x = [0, 0, 0, 0.9] was cut to 0, a negative count taken, a wrong length a numpy broadcast error
    r = we.released("all_range", 4)
    for bad in (np.array([0.0, 0, 0, 0.9]), np.array([1.0, -1, 0, 0]), np.ones(5), np.array([2.0**32, 1, 0, 0])):
        with pytest.raises(ValueError, match="'x' parameter of answers must be a histogram of 4 cells"):
            we.answers(r, bad)
