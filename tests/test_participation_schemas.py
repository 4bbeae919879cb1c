"""Participation schemas: the patterns each allows, against a direct enumeration of all subsets of steps."""

from itertools import combinations

import numpy as np
import pytest

import mmopt
from mmopt.participation import fixed_epochs, min_separation, single


def _all_min_sep(n, b, k):
    return sorted(p for m in range(1, k + 1) for p in combinations(range(n), m)
                  if all(q - r >= b for r, q in zip(p, p[1:], strict=False)))


@pytest.mark.parametrize("n,b,k", [(6, 2, 2), (7, 3, 3), (8, 2, 4), (5, 1, 2), (4, 3, 2), (9, 4, 5)])
def test_min_separation_lists_every_allowed_pattern_once(n, b, k):
    schema = min_separation(b, k)
    got = schema.patterns(n)
    assert sorted(got) == _all_min_sep(n, b, k)
    assert len(got) == len(set(got)) == schema.count(n)


def test_fixed_epochs_patterns_partition_the_steps():
    U = fixed_epochs(3).vectors(12)
    assert U.shape == (4, 12)
    np.testing.assert_array_equal(U.sum(axis=0), np.ones(12))
    assert fixed_epochs(3).separation(12) == 4 and fixed_epochs(3).participations(12) == 3


def test_single_is_one_step_each():
    np.testing.assert_array_equal(single().vectors(5), np.eye(5))


def test_public_names():
    assert mmopt.participation.fixed_epochs(4) == fixed_epochs(4)
    assert mmopt.participation.min_separation(2, 3).max_participations == 3


@pytest.mark.parametrize("call,error", [
    (lambda: fixed_epochs(0), ValueError), (lambda: fixed_epochs(2.5), TypeError),
    (lambda: min_separation(0, 2), ValueError), (lambda: fixed_epochs(3).patterns(10), ValueError),
    (lambda: min_separation(1, 20).patterns(60), ValueError),
])
def test_bad_input_is_refused(call, error):
    with pytest.raises(error):
        call()


def test_low_level_solvers_refuse_what_they_would_solve_wrongly():
    """A helper's probe: W passed where WᵀW belongs (lower-triangular, not symmetric) was solved as another problem
    and marked optimal or certified; budgets of -5 or nan seconds, a bad options type under participation, and the
    inputs of solve_max_variance, schema_error and toeplitz_sensitivity_squared failed deep or not at all."""
    from mmopt.participation.chain_dual import chain_dual
    from mmopt.participation.cutting import solve_min_separation
    from mmopt.participation.objectives import solve_max_variance
    from mmopt.participation.optimum import solve_fixed_epochs
    from mmopt.participation.toeplitz import schema_error, toeplitz_sensitivity_squared
    W = np.tril(np.ones((8, 8)))
    for call, caller in ((lambda: solve_fixed_epochs(W, 2), "solve_fixed_epochs"),
                         (lambda: solve_min_separation(W.T.copy(), 2, 2), "solve_min_separation"),
                         (lambda: chain_dual(W.T.copy(), 4), "chain_dual")):
        with pytest.raises(ValueError, match=f"'gram' parameter of {caller} must be symmetric.*W.T @ W"):
            call()
    with pytest.raises(ValueError, match="'seconds' parameter of solve_min_separation"):
        solve_min_separation(16, 4, 4, seconds=-5)
    with pytest.raises(ValueError, match="'seconds' parameter of chain_dual"):
        chain_dual(16, 2, seconds=float("nan"))
    with pytest.raises(ValueError, match="'W' parameter of solve_max_variance must be a 2-D array"):
        solve_max_variance(np.ones(8), 2)
    with pytest.raises(ValueError, match="'max_iterations' parameter of solve_max_variance"):
        solve_max_variance(W, 2, max_iterations=0)
    with pytest.raises(ValueError, match="'tol' parameter of solve_max_variance"):
        solve_max_variance(W, 2, tol=float("nan"))
    C = mmopt.toeplitz.sqrt_strategy(8)
    with pytest.raises(TypeError, match="'schema' parameter of schema_error must be a participation schema"):
        schema_error(mmopt.toeplitz.prefix(8), C, "x")
    with pytest.raises(TypeError, match="'strategy' parameter of sensitivity_squared must be a ToeplitzStrategy"):
        toeplitz_sensitivity_squared(np.eye(8), mmopt.participation.fixed_epochs(2))
    with pytest.raises(TypeError, match="'options' parameter of optimize must be a dict or None. Got str"):
        mmopt.optimize(mmopt.workload.prefix(8), privacy=mmopt.Privacy(1, 1e-6),
                       participation=mmopt.participation.fixed_epochs(2), options="x")
    # what they take still works: the Gram of W, symmetric to round-off
    assert solve_fixed_epochs(W.T @ W, 2).status == "optimal"


def test_size_errors_name_the_callers_parameter():
    """optimize has no 'n' and gram_sensitivity_squared's size is its 'gram', and MinSeparation.count/.patterns
    named MinSeparation.participations (a helper's audit)."""
    from mmopt import workload as wl
    from mmopt.participation import gram_sensitivity_squared
    with pytest.raises(ValueError, match="'workload' parameter of optimize must have a number of steps n that is a "
                                         "multiple of the 3 epochs"):
        mmopt.optimize(wl.prefix(8), privacy=mmopt.Privacy(1.0, 1e-6), participation=fixed_epochs(3))
    with pytest.raises(ValueError, match="'gram' parameter of gram_sensitivity_squared"):
        gram_sensitivity_squared(np.eye(8), fixed_epochs(3))
    for method in ("count", "patterns"):
        with pytest.raises(ValueError, match=f"'n' parameter of MinSeparation.{method}"):
            getattr(min_separation(2, 2), method)(0)


def test_the_functions_that_report_privacy_refuse_a_participation_left_none():
    """None meant single() there too: a variable left None gave ρ 4.5× too small under fixed_epochs(3) (an
    audit); optimize keeps None as its default (each record once)."""
    import mmopt
    from mmopt.participation.noise import run_privacy
    from mmopt.participation.objectives import last_iterate_error
    from mmopt.participation.sensitivity import gram_sensitivity_squared
    C = np.tril(np.ones((6, 6)))
    for call in (lambda: run_privacy(C, None, 1.0), lambda: mmopt.participation.sensitivity_squared(C, None),
                 lambda: gram_sensitivity_squared(C.T @ C, None), lambda: last_iterate_error(C, C, None)):
        with pytest.raises(TypeError, match="'participation' parameter of .*Got None.*single()"):
            call()
    assert run_privacy(C, mmopt.participation.single(), 1.0).rho < run_privacy(C, fixed_epochs(3), 1.0).rho
    assert mmopt.optimize(mmopt.workload.prefix(6), participation=None).success
