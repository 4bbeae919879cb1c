"""mmopt.auto.budget: the budget's names, numbers and refusals; optimize refuses it for a method that ignores it."""

import pytest

import mmopt
from mmopt import workload as wl
from mmopt.auto.budget import LEVELS, Budget, check_budget


@pytest.mark.parametrize("name", sorted(LEVELS))
def test_names_map_to_their_seconds(name):
    assert check_budget(name) == Budget(LEVELS[name], name)


def test_none_is_default_and_numbers_are_seconds():
    assert check_budget(None) == check_budget("default")
    assert check_budget(12.5) == Budget(12.5, "12.5 s") and check_budget(3).describe() == "3 s"
    assert check_budget("thorough").describe() == "'thorough' (600 s)"


@pytest.mark.parametrize("bad,err,match", [
    ("slow", ValueError, "must be one of"), (0, ValueError, "> 0"), (-1.0, ValueError, "> 0"),
    (float("inf"), ValueError, "finite"), (float("nan"), ValueError, "finite"), (True, TypeError, "Got bool"),
    ([5], TypeError, "Got list"),
])
def test_bad_budgets_are_refused_by_name(bad, err, match):
    with pytest.raises(err, match=match) as info:
        check_budget(bad)
    assert "'budget' parameter of optimize" in str(info.value)


def test_optimize_refuses_a_budget_for_a_method_that_does_not_read_it():
    with pytest.raises(ValueError, match="applies to method='auto' only"):
        mmopt.optimize(wl.prefix(8), method="l2_approx", budget="fast")
    with pytest.raises(ValueError, match="must be one of"):
        mmopt.optimize(wl.prefix(8), privacy=mmopt.Privacy(1.0), budget="forever")


def test_the_small_dense_min_error_is_planned_with_its_sdp_stage():
    """At n ≤ 16 the dense MinError pipeline runs its SDP stage (14 CPU s at n = 12, measured, where the rest takes
    0.3 s): its estimate counts it, so budget="fast" (5 s) skips it for the p-Identity search alone (the same
    67.34 on prefix(12)); it was planned at 1.1 s and overran the fast budget 3×. The default budget still runs it."""
    from mmopt.auto.costs import min_error_dense

    assert min_error_dense(12) > LEVELS["fast"] > min_error_dense(17)
    fast = mmopt.optimize(wl.prefix(12), privacy=mmopt.Privacy(1.0), budget="fast", verbose=False)
    assert "over the budget 'fast'" in fast.extra["skipped"]["min_error"]
    assert fast.method == "auto:min_error(local)" and fast.extra["budget"]["planned"] <= LEVELS["fast"]
    assert fast.lower_bound <= fast.objective <= 78.0  # identity's error: never worse than a closed form
