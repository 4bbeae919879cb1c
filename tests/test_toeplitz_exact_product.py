"""mmopt.toeplitz.exact_product: a Toeplitz release's C x correctly rounded (exact integer convolutions by NTT),
against a Fraction oracle, and what it buys: neighbours' answers within the charged d_in at 2³² records."""

from fractions import Fraction

import numpy as np
import pytest
from _primes import is_primitive_root

import mmopt
from mmopt import toeplitz
from mmopt.dense.exact_answers import MAX_RECORDS, charged_sensitivity
from mmopt.toeplitz.exact_product import MAX_N, PRIMES, _slices, causal_exact, ntt_convolve, truncation_charge


def _oracle(c, x, d=None):
    out = []
    for t in range(len(c)):
        exact = sum(Fraction(float(c[t - s])) * int(x[s]) for s in range(t + 1))
        out.append(float(exact * Fraction(float(d[t])) if d is not None else exact))
    return np.array(out)


@pytest.mark.parametrize("seed", range(12))
def test_every_entry_is_the_correctly_rounded_exact_sum(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 48))
    # exponents spread over 50 binades: two 54-bit slices hold every bit; signs mixed; some zeros
    c = rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))
    c[rng.random(n) < 0.2] = 0.0
    x = rng.integers(0, 2**32 // n if seed % 2 else 50, n).astype(float)  # at most 2³² records
    d = rng.random(n) + 0.5 if seed % 3 == 0 else None
    y = causal_exact(c, x, d)
    np.testing.assert_array_equal(y, _oracle(c, x, d))
    assert truncation_charge(c, d, "l1") == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_past_two_slices_the_kept_part_is_exact_and_the_rest_is_charged(seed):
    rng = np.random.default_rng(seed)
    n = 40
    c = rng.standard_normal(n) * np.exp2(rng.integers(-150, 5, n))  # 155 binades: a remainder is left
    x = rng.integers(0, 2**26, n).astype(float)
    kept = c - _slices(c, float(np.abs(c).max()))[1]
    y = causal_exact(c, x)
    np.testing.assert_array_equal(y, _oracle(kept, x))
    # against all of c: within u·|y| and the charged remainder's share (a third of it per answer vector)
    charge = truncation_charge(c, None, "l1", records=int(x.sum()))
    assert charge > 0
    assert np.abs(y - _oracle(c, x)).sum() <= 2.0**-53 * np.abs(y).sum() + charge / 3


def test_the_convolution_is_exact_up_to_its_range():
    rng = np.random.default_rng(1)
    a = rng.integers(-2**54, 2**54, 300)
    b = rng.integers(0, 2**32 // 300, 300)  # Σb ≤ 2³²: |a * b| ≤ 2⁸⁶, the range causal_exact uses
    got, = ntt_convolve([a], b)
    want = np.convolve(a.astype(object), b.astype(object)).tolist()
    assert got == want and max(abs(z) for z in want) > 2**80


def test_the_primes_support_the_length_and_their_roots_are_primitive():
    for p, g in PRIMES:
        assert (p - 1) % (2 * MAX_N) == 0 and p < 2**31 and is_primitive_root(g, p)


def test_neighbours_answers_stay_within_the_charged_sensitivity():
    # a sanity check of the charge at ~2³² records on 512 steps (exactly rounded answers differ by at most
    # Δ(1 + u(2N + 1))); the FFT passes it too on these data: the Fraction-oracle tests above are what guard
    # the exactness the FFT lacked (a review had found it 10⁻⁷ of Δ past d_in on 6 of 40 datasets at n = 4,096)
    n = 512
    S = toeplitz.sqrt_strategy(n)
    for norm in ("l1", "l2"):
        d_in = charged_sensitivity(S.sensitivity(norm), norm, n, n, exact=False)
        rng = np.random.default_rng(2)
        for _ in range(6):
            x = rng.multinomial(MAX_RECORDS - 1, np.full(n, 1.0 / n)).astype(float)
            j = int(rng.integers(n))
            x2 = x.copy()
            x2[j] += 1
            diff = causal_exact(S.column, x2) - causal_exact(S.column, x)
            moved = np.abs(diff).sum() if norm == "l1" else np.sqrt(diff @ diff)
            assert moved <= d_in


def test_the_release_measures_the_exact_answers_and_refuses_what_it_cannot_charge():
    n = 64
    S, W = toeplitz.sqrt_strategy(n), toeplitz.prefix(n)
    with pytest.raises(ValueError, match="whole numbers"):
        mmopt.release(W, S, np.full(n, 0.5), mmopt.Privacy(1.0, 1e-6))
    with pytest.raises(ValueError, match="at most 4,294,967,296 records"):
        mmopt.release(W, S, np.full(n, 2.0**27), mmopt.Privacy(1.0, 1e-6))


def test_a_sensitivity_past_float64_at_the_domain_is_refused_whatever_the_counts():
    # |C x| ≤ N·Δ: refused from Δ alone (the exact division overflowed at 2³² records and not at 1, a review)
    S = toeplitz.ToeplitzStrategy(np.array([2.0**600, 2.0**599]), 4, "b", "banded", row_scale=np.full(4, 2.0**800))
    for x in (np.array([1.0, 0, 0, 0]), np.array([2.0**32, 0, 0, 0])):
        with pytest.raises(ValueError, match="too large for C x to stay within float64"):
            mmopt.release(toeplitz.prefix(4), S, x, mmopt.Privacy(1.0))


def test_counts_outside_the_domain_are_refused_not_wrapped():
    # past P/2 the CRT would wrap (1 − 2⁻⁵³ times 2⁴⁰ came out negative) and int64 truncates fractions
    with pytest.raises(ValueError, match="must be a histogram"):
        causal_exact(np.array([1 - 2**-53]), np.array([2.0**40]))
    with pytest.raises(ValueError, match="must be a histogram"):
        causal_exact(np.array([1.0]), np.array([0.5]))


def test_bad_input_is_refused_with_the_parameter_named():
    with pytest.raises(ValueError, match="'x' parameter of causal_exact must have 3 entries"):
        causal_exact(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="finite"):
        causal_exact(np.array([1.0, np.inf]), np.ones(2))
    with pytest.raises(ValueError, match="'row_scale' parameter"):
        causal_exact(np.ones(2), np.ones(2), np.ones(3))
    assert causal_exact(np.zeros(3), np.ones(3)).tolist() == [0.0, 0.0, 0.0]


def test_the_shortest_transforms_length_two_and_four_are_exact():
    # a review's mutant skipped the inverse's 1/L only at L = 2 (causal_exact at n = 1) and no test saw it
    from mmopt.toeplitz import weighted_exact
    from mmopt.toeplitz.exact_product import ntt_forward, ntt_inverse, padded
    assert causal_exact(np.array([0.5]), np.array([3.0])).tolist() == [1.5]
    assert ntt_convolve([np.array([1, -2])], np.array([5])) == [[5, -10]]
    for p, g in PRIMES + weighted_exact.PRIMES:
        for L in (2, 4, 8):
            a = np.arange(1, L + 1, dtype=np.int64) * (p // (L + 1))
            assert ntt_inverse(ntt_forward(padded(a, L), p, g), p, g).tolist() == a.tolist()


def test_a_stack_of_transforms_is_transformed_row_by_row():
    # mmopt.adaptive.fourier_exact transforms (rows, L) stacks at once
    from mmopt.toeplitz.exact_product import ntt_forward, ntt_inverse, padded
    p, g = PRIMES[0]
    rows = np.random.default_rng(0).integers(0, p, (3, 8)).astype(np.uint64)
    one_by_one = np.stack([ntt_forward(padded(r, 8), p, g) for r in rows])
    stacked = ntt_forward(rows.copy(), p, g)
    assert stacked.tolist() == one_by_one.tolist()
    assert ntt_inverse(stacked, p, g).tolist() == rows.astype(np.int64).tolist()


def test_a_stack_that_is_not_c_contiguous_is_refused_and_a_strided_vector_is_not():
    # reshaping such a stack into a stage's blocks copied it: the transform came back half done, silently
    from mmopt.toeplitz.exact_product import ntt_forward, ntt_inverse
    p, g = PRIMES[0]
    rows = np.arange(32, dtype=np.uint64).reshape(4, 8)
    for stack in (np.asfortranarray(rows[:2]), rows[::2]):
        for transform in (ntt_forward, ntt_inverse):
            with pytest.raises(ValueError, match="'a' parameter of ntt_.* must be C-contiguous"):
                transform(stack, p, g)
    vector = np.arange(32, dtype=np.uint64)[::2]  # a 1-D view reshapes into blocks without a copy
    expected = ntt_forward(vector.copy(), p, g).tolist()  # (in place: the copy first)
    assert ntt_forward(vector, p, g).tolist() == expected
