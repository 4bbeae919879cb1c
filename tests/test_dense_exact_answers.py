"""mmopt.dense.exact_answers: A x correctly rounded, and the release's d_in covering the computed answers."""

from fractions import Fraction

import numpy as np
import pytest

import mmopt
from mmopt.dense import exact_answers as ea


def _oracle(A, x):
    """The exact sum in rationals, rounded once (Fraction → float rounds correctly)."""
    return np.array([float(sum(Fraction(a) * Fraction(b) for a, b in zip(row, x, strict=True))) for row in A])


@pytest.mark.parametrize("seed", range(6))
def test_every_entry_is_the_correctly_rounded_exact_sum(seed):
    rng = np.random.default_rng(seed)
    m, n = 7, 9
    A = rng.standard_normal((m, n)) * 10.0 ** rng.integers(-8, 8, (m, n))
    A[0, :3] = [1e-310, 3e-320, -2e-315]  # subnormal entries: their products are still within 2⁻¹⁰⁷⁵
    # counts below 2²⁶ (2 terms a product) and above (4), zeros skipped
    top = 2.0**20 if seed % 2 else 2.0**31
    x = np.floor(rng.random(n) * top) * (rng.random(n) < 0.8)
    assert np.array_equal(ea.exact_answers(A, x, caller="t"), _oracle(A, x))


def test_integer_strategies_take_blas_which_is_exact_there():
    H = mmopt.strategy.hierarchical(16).matrix
    assert ea.integer_exact(H) and not ea.integer_exact(H / 3)
    x = np.arange(16.0) * 1e6
    assert np.array_equal(ea.exact_answers(H, x, caller="t"), _oracle(H, x))
    assert ea.charged_sensitivity(3.0, "l1", 31, 16, exact=True) == 3.0


def test_release_d_in_covers_the_computed_answers_of_neighbours(monkeypatch):
    """The noise is calibrated to d_in; the vector it is added to is the *computed* A x. With a BLAS product and
    Δ rounded upwards alone, neighbours' computed answers moved by more than d_in (counts up to 2²⁶: by
    1.3·10⁻⁸ of Δ where d_in allowed 3·10⁻¹⁴); the correctly rounded product and the charged d_in cover every
    neighbour."""
    import mmopt.mechanism as mech
    seen = []

    def capture(Ax, d_in, privacy, **kw):
        seen.append((Ax.copy(), d_in))
        return Ax, 1.0, privacy.epsilon

    monkeypatch.setattr(mech, "measure", capture)
    rng = np.random.default_rng(0)
    n = 64
    A = np.tril(rng.random((n, n)) + 0.1)
    A /= A.sum(axis=0)  # every column at Δ₁ = 1: each neighbour moves the exact A x by Δ, so any rounding shows
    W = mmopt.workload.prefix(n)
    x = np.floor(rng.random(n) * 2**26)
    mech.release(W, A, x, mmopt.Privacy(1.0))
    (y, d_in), Delta = seen.pop(), np.abs(A).sum(axis=0).max()
    assert Delta < d_in < Delta * (1 + 2e-6)
    for j in range(n):
        x2 = x.copy()
        x2[j] += 1
        mech.release(W, A, x2, mmopt.Privacy(1.0))
        y2, _ = seen.pop()
        assert np.abs(y2 - y).sum() <= d_in
        assert np.array_equal(y2, _oracle(A, x2)) if j < 3 else True  # the exact path, spot-checked


def test_release_refuses_fractional_counts_and_more_records_than_the_domain():
    W, H = mmopt.workload.prefix(4), mmopt.strategy.hierarchical(4)
    with pytest.raises(ValueError, match=r"'x' parameter of release must hold counts of records .* Got "
                                         r"fractional counts \(weighted counts\?\)"):
        mmopt.release(W, H, [1.0, 2.5, 0.0, 3.0], mmopt.Privacy(1.0))
    with pytest.raises(ValueError, match=r"at most 4,294,967,296 records in all .* Got more \(the total is not "
                                         r"printed: a figure of the data\)"):
        mmopt.release(W, H, [2.0**31, 2.0**31, 1.0, 0.0], mmopt.Privacy(1.0))
    out = mmopt.release(W, H, [2.0**31, 2.0**31, 0.0, 0.0], mmopt.Privacy(1.0))  # the domain's edge: released
    # integer A: exact, nothing charged (Δ rounded upwards alone, as before)
    assert H.sensitivity("l1") < out.sensitivity < H.sensitivity("l1") * (1 + 1e-12)


def test_planning_allows_for_the_charge():
    from mmopt.planning import calibration
    # twice: the p-Identity stream release charges its two roundings (its drawn variance passed the bound by
    # 6.9e-7 with one, a review)
    assert calibration._D_IN >= (1 + 2e-7) * (1 + ea.RELATIVE_CHARGE) ** 2


def test_a_strategy_too_large_for_exact_answers_is_refused_from_a_alone():
    """2⁹⁸⁰·I: a count below 2²⁰ was released and its neighbour at 2²⁰ refused, the refusal telling them apart (a
    review); the strategy is refused whatever the counts."""
    W, A = mmopt.workload.identity(2), 2.0**980 * np.eye(2)
    for x in ([2**20 - 1, 0], [0, 0]):
        with pytest.raises(ValueError, match=r"release: the strategy's entries \(up to .*\) are too large for A x"):
            mmopt.release(W, A, x, mmopt.Privacy(1.0))
    # 2^967.5: check_strategy had allowed max|A|·2³² < 2¹⁰⁰⁰ where exact_answers asks < 2⁹⁹⁹ of the counts' total,
    # so one count of 2³² was refused after the check and a count of 1 was not (a review)
    with pytest.raises(ValueError, match="too large for A x"):
        ea.check_strategy(np.diag([2.0**967.5, 1.0, 1.0]), "release")


def test_dawa_checks_the_release_histogram_before_its_partition_draws():
    """dawa(noise="opendp") with a callable strategy measures the buckets through mmopt.release: fractional counts
    were refused there, after the partition (ε₁) had been drawn (a review); now before anything is drawn."""
    from mmopt.adaptive import dawa
    pytest.importorskip("opendp")
    with pytest.raises(ValueError, match="'x' parameter of dawa must hold whole counts of at most 4,294,967,296 "
                                         "records in all on the release path"):
        dawa([3.5, 2, 0, 7.25, 1, 4, 0, 2], 1.0, strategy=lambda k: mmopt.strategy.identity(k), noise="opendp")


def test_cover_roundings_meets_its_stated_bound():
    """r > value·(1 + k·u)·(1 + u/2) exactly, for scalars and arrays, every even k it is called with (a charge
    rounded down, or raised by (k − 1)u, or not past the rounded product, passed the test files before)."""
    rng = np.random.default_rng(0)
    u = Fraction(ea.UNIT_ROUNDOFF)
    values = np.concatenate([rng.uniform(0, 10, 400), 2.0 ** rng.integers(-1000, 1000, 100) * rng.uniform(1, 2, 100),
                             [0.0, 5e-324, 1.0, 2.0 - 2.0**-52, 0.1]])
    for k in (2, 4, 8, 2**10, 2**25):
        bound = (1 + k * u) * (1 + u / 2)
        as_array = ea.cover_roundings(values, k)
        for v, r in zip(values.tolist(), as_array.tolist(), strict=True):
            assert Fraction(r) > Fraction(v) * bound and ea.cover_roundings(v, k) == r


def test_gamma_is_highams():
    """γ_n = n·u/(1 − n·u) to within two roundings."""
    u = Fraction(ea.UNIT_ROUNDOFF)
    for n in (1, 2, 3, 7, 1000, 2**20, 2**40, 2**52 - 1):
        exact = n * u / (1 - n * u)
        assert abs(Fraction(ea.gamma(n)) - exact) <= 3 * u * exact
    assert ea.gamma(0) == 0.0
