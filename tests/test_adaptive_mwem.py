"""MWEM: convergence as ε grows, the total, non-negativity, budget, 2-D input, workloads, validation."""

import math

import numpy as np
import pytest

import mmopt
from mmopt.adaptive import mwem

X = np.array([0, 0, 30, 50, 20, 0, 0, 5, 0, 0, 0, 40, 0, 0, 0, 0], float)
P = mmopt.workload.prefix(16)
W = P.explicit_matrix()


def _prefix_error(r):
    return float(np.mean(np.abs(W @ r.estimate - W @ X)))


def test_error_decreases_as_epsilon_grows_and_is_near_exact_at_huge_epsilon():
    errs = [np.mean([_prefix_error(mwem(X, P, eps, rounds=16, replay_passes=20, rng=s)) for s in range(4)])
            for eps in (0.05, 1.0, 1e5)]
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 0.03 * X.sum()
    # the last iterate of 16 nearly exact measurements, replayed, pins the 16-cell histogram
    assert _prefix_error(mwem(X, P, 1e5, rounds=16, replay_passes=20, output="last", rng=0)) < 0.005 * X.sum()


def test_algorithm_one_at_huge_epsilon_improves_with_rounds():
    flat = np.full(16, X.sum() / 16)
    errs = [_prefix_error(mwem(X, P, 1e6, rounds=T, rng=0)) for T in (10, 30, 100)]  # one update per round
    assert float(np.mean(np.abs(W @ flat - W @ X))) > errs[0] > errs[1] > errs[2]


def test_measured_total_nonnegativity_and_budget():
    r = mwem(X, P, 1.0, rounds=5, rng=1)
    N = r.details["total_used"]
    assert N == max(r.details["noisy_total"], 1.0) and not r.details["total_public"]
    assert math.isclose(r.estimate.sum(), N, rel_tol=1e-12)  # every iterate has total N, so does the average
    assert np.all(r.estimate > 0)  # multiplicative weights never reach zero
    b = r.budget
    assert set(b) == {"total", "select", "measure"}
    assert math.isclose(sum(b.values()), 1.0, rel_tol=1e-15) and math.isclose(b["total"], 0.1)
    assert math.isclose(b["select"], b["measure"], rel_tol=1e-12)
    assert math.isclose(r.details["select_epsilon"], 0.9 / 10, rel_tol=1e-12)  # (ε − ε₀)/(2T)
    assert r.details["measure_noise_scale"] == 1.0 / r.details["measure_epsilon"]  # Δ = 1 for 0/1 queries


def test_tiny_noisy_total_is_floored_at_one():
    r = mwem(np.zeros(8), mmopt.workload.prefix(8), 1e-3, rounds=2, rng=3, total_fraction=0.5)
    assert r.details["total_used"] >= 1.0
    assert math.isclose(r.estimate.sum(), r.details["total_used"], rel_tol=1e-12)


def test_public_total_spends_nothing_on_it():
    r = mwem(X, P, 1.0, rounds=4, rng=2, total=X.sum())
    assert r.details["total_public"] and r.budget["total"] == 0.0 and r.details["noisy_total"] is None
    assert math.isclose(r.estimate.sum(), X.sum(), rel_tol=1e-12)
    assert math.isclose(r.budget["select"] + r.budget["measure"], 1.0, rel_tol=1e-15)


def test_average_equals_last_iterate_with_one_round():
    a = mwem(X, P, 1.0, rounds=1, rng=7)
    b = mwem(X, P, 1.0, rounds=1, rng=7, output="last")
    np.testing.assert_allclose(a.estimate, b.estimate, rtol=1e-14)
    assert not np.allclose(mwem(X, P, 1.0, rounds=6, rng=7).estimate,
                           mwem(X, P, 1.0, rounds=6, rng=7, output="last").estimate)


def test_seeded_reproducibility():
    a = mwem(X, W, 0.5, rounds=6, rng=11)
    assert np.array_equal(a.estimate, mwem(X, W, 0.5, rounds=6, rng=11).estimate)
    assert a.details["selected"] == mwem(X, W, 0.5, rounds=6, rng=11).details["selected"]
    assert not np.array_equal(a.estimate, mwem(X, W, 0.5, rounds=6, rng=12).estimate)


def test_two_dimensional_input_is_flattened_row_major():
    x2 = X.reshape(4, 4)
    r = mwem(x2, np.eye(16), 1e5, rounds=40, replay_passes=5, output="last", rng=0)
    assert r.estimate.shape == (4, 4)
    np.testing.assert_allclose(r.estimate, x2, atol=0.01 * X.sum())
    np.testing.assert_allclose(r.answer(np.eye(16)), r.estimate.ravel())


def test_sensitivity_is_the_largest_absolute_query_weight():
    r = mwem(X, 2.0 * W, 1.0, rounds=3, rng=0)
    assert r.details["sensitivity"] == 2.0
    assert r.details["measure_noise_scale"] == 2.0 / r.details["measure_epsilon"]


def test_workload_without_matrix_is_refused_with_a_remedy():
    with pytest.raises(ValueError, match=r"'workload' parameter of mwem needs an explicit query matrix.*random_range"):
        mwem(np.ones(600), mmopt.workload.all_range(600), 1.0, rng=0)  # m·n = 1.08e8
    with pytest.raises(ValueError, match="'workload' parameter of mwem must have 8 columns"):
        mwem(np.ones(8), np.ones((3, 9)), 1.0, rng=0)
    with pytest.raises(ValueError, match="'workload' parameter of mwem must have a non-zero entry"):
        mwem(np.ones(8), np.zeros((3, 8)), 1.0, rng=0)


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(rounds=0), ValueError, "'rounds' parameter of mwem"),
    (dict(rounds=2.5), TypeError, "'rounds' parameter of mwem"),
    (dict(total_fraction=1.0), ValueError, "'total_fraction' parameter of mwem"),
    (dict(total=4.0, total_fraction=5), ValueError, "'total_fraction' parameter of mwem"),  # unused, still checked
    (dict(total=-3.0), ValueError, "'total' parameter of mwem"),
    (dict(output="mean"), ValueError, "'output' parameter of mwem"),
    (dict(replay_passes=-1), ValueError, "'replay_passes' parameter of mwem"),
    (dict(epsilon=-1.0), ValueError, "'epsilon' parameter of mwem"),
])
def test_validation_names_function_and_parameter(kwargs, exc, words):
    args = dict(x=X, workload=W, epsilon=1.0, rng=0) | kwargs
    with pytest.raises(exc, match=words):
        mwem(**args)


def test_result_answer_accepts_workloads():
    r = mwem(X, P, 1.0, rounds=2, rng=0)
    np.testing.assert_allclose(r.answer(P), W @ r.estimate)
    with pytest.raises(ValueError, match="AdaptiveResult.answer must have 16 columns"):
        r.answer(np.ones((2, 3)))


def test_implicit_workload_is_refused():
    W2 = mmopt.workload.kron(mmopt.workload.prefix(128), mmopt.workload.prefix(64))  # 8,192 cells: implicit
    with pytest.raises(TypeError, match="'workload' parameter of mwem must be a dense Workload or a matrix"):
        mwem(np.ones((128, 64)), W2, 1.0, rng=0)


def _workloads():
    rng = np.random.default_rng(1)
    return {"0.1": np.full((1, 8), 0.1), "1/3": np.full((1, 8), 1 / 3), "uniform": rng.random((4, 8))}


@pytest.mark.parametrize("name", ["0.1", "1/3", "uniform"])
def test_release_answers_are_correctly_rounded_and_neighbours_stay_within_the_charged_sensitivities(name):
    """The audit's construction (2³² − 1 records on 8 cells, non-integer W; BLAS moved a measured answer by
    1 + 5·10⁻⁷ of Δ): every measured answer is the correctly rounded qᵢ·x (Fraction oracle), moves between
    neighbours by at most the stated Δ_y, and every score by at most the selection's stated Δ_s, exactly."""
    from fractions import Fraction

    from _float_neighbours import N_TOP, ratios, recorder

    W = _workloads()[name]
    rng = np.random.default_rng(2)
    worst_y = worst_s = Fraction(0)
    for _ in range(25):
        x = rng.multinomial(N_TOP - 8, rng.dirichlet(np.full(8, 0.3))).astype(float)
        j = int(rng.integers(8))
        A = recorder(total=1e9, cycle=True)
        r = mwem(x, W, 1.0, rounds=4, noise=A)
        delta_y = Fraction(r.details["measure_sensitivity"])
        exact = [sum(Fraction(float(w)) * int(v) for w, v in zip(row, x, strict=True)) for row in W]
        measured = [float(e[1]) for e in A.log if e[0] == "laplace"][1:]  # after the total
        for i, value in zip(r.details["selected"], measured, strict=True):
            assert value == float(exact[i])
        for sign in (1, -1):
            xp = x.copy()
            xp[j] += sign
            if xp[j] < 0:
                continue
            B = recorder(total=1e9, cycle=True)
            mwem(xp, W, 1.0, rounds=4, noise=B)
            for a, b in zip(A.log[1:], B.log[1:], strict=True):
                if a[0] == "laplace":
                    worst_y = max(worst_y, abs(Fraction(float(a[1])) - Fraction(float(b[1]))) / delta_y)
            worst_s = max(worst_s, *ratios(A.log, B.log, kinds=("exp",)), Fraction(0))
    assert worst_y <= 1 and worst_s <= 1


def test_release_refuses_fractional_counts_and_more_than_max_records():
    from _float_neighbours import recorder

    with pytest.raises(ValueError, match="'x' parameter of mwem must hold whole counts of at most"):
        mwem(np.array([0.5, 2.0]), np.eye(2), 1.0, noise=recorder())
    with pytest.raises(ValueError, match="'x' parameter of mwem must hold whole counts of at most"):
        mwem(np.array([2.0**31, 2.0**31 + 1]), np.eye(2), 1.0, noise=recorder())
    assert mwem(np.array([0.5, 2.0]), np.eye(2), 1.0, rng=0).path == "simulation"


def test_mwem_selection_charges_the_scores_subtraction():  # mutant mwem-score-no-charge
    from fractions import Fraction

    from _float_neighbours import recorder

    from mmopt.adaptive import mwem
    n = 64
    W = np.vstack([np.full(n, 0.1), 0.1 * np.eye(n)[1]])
    x = np.zeros(n)
    x[0] = 3221225473.0
    y = x.copy()
    y[0] += 1
    A, B = recorder(10226334317.33636), recorder(10226334317.33636)
    r = mwem(x, W, 1.0, rounds=1, noise=A)
    mwem(y, W, 1.0, rounds=1, noise=B)
    (_, s, _, delta), (_, t, _, _) = A.log[1], B.log[1]
    moved = max(abs(Fraction(p) - Fraction(q)) for p, q in zip(s.tolist(), t.tolist(), strict=True))
    assert Fraction(r.details["measure_sensitivity"]) < moved <= Fraction(delta)
