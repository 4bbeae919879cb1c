"""mmopt._base.intent: a strategy optimised with no budget says so when it meets the other noise (evaluate,
expected_error, release); a budget or norm the user chose, or the matching noise, is silent."""

import warnings

import numpy as np
import pytest

import mmopt

W = mmopt.workload.all_range(16)
LAPLACE, GAUSSIAN = mmopt.Privacy(1.0), mmopt.Privacy(1.0, 1e-6)


def _quiet(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call()


def test_unstated_noise_is_said_where_the_other_meets_it():
    l2 = mmopt.optimize(W).strategy            # the L2 objective: Gaussian noise
    with pytest.warns(UserWarning, match="optimised with no privacy given, for Gaussian noise.*meets Laplace"):
        mmopt.evaluate(W, l2, LAPLACE)
    with pytest.warns(UserWarning, match="expected_error: strategy 'l2_approx' was optimised with no privacy"):
        mmopt.expected_error(W, l2, LAPLACE)
    _quiet(lambda: mmopt.evaluate(W, l2, GAUSSIAN))
    _quiet(lambda: mmopt.evaluate(W, l2, norm="l1"))  # the expert's own norm, no privacy
    l1 = mmopt.optimize(W, method="auto", seed=0, budget="fast").strategy   # the L1 objective: Laplace noise
    with pytest.warns(UserWarning, match="for Laplace noise.*meets Gaussian noise"):
        mmopt.evaluate(W, l1, GAUSSIAN)


def test_a_budget_given_marks_nothing_and_constructions_stay_unmarked():
    chosen = mmopt.optimize(W, privacy=GAUSSIAN).strategy
    _quiet(lambda: mmopt.evaluate(W, chosen, LAPLACE))  # optimize warned or not at the user's own choice
    H = mmopt.strategy.hierarchical(16)
    marked = mmopt.optimize(W, method="hierarchical").strategy
    assert np.array_equal(marked.matrix, H.matrix) and "_mmopt_unstated_norm" not in vars(H)


def test_release_says_it_before_the_noise():
    pytest.importorskip("opendp")
    l2 = mmopt.optimize(W).strategy
    with pytest.warns(UserWarning, match="release: strategy 'l2_approx' was optimised with no privacy given"):
        mmopt.release(W, l2, np.arange(16.0), LAPLACE)


def test_expected_error_on_an_implicit_pair_says_it_once():
    """Its implicit path went through evaluate, which said it a second time under evaluate's name."""
    W = mmopt.workload.kron([mmopt.workload.prefix(80), mmopt.workload.identity(80)])  # 6,400 cells: implicit
    A = mmopt.optimize(W, method="kron").strategy   # the L1 objective
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        total = mmopt.expected_error(W, A, GAUSSIAN)
    assert [str(w.message).split(":")[0] for w in said] == ["expected_error"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert total == mmopt.evaluate(W, A, GAUSSIAN).total_squared_error
