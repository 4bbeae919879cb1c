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
