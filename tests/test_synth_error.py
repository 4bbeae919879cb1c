"""mmopt.synth.error: workload_error on synthetic rows given as bin labels."""

import math

import pandas as pd
import pytest

from mmopt.records.domain import Attribute, Domain
from mmopt.synth import workload_error


def test_labels_score_as_the_values_they_stand_for_past_two_to_the_53():
    # the bin (−inf, 1e20) was read back as 1e20 − 1 = 1e20, counted in the next bin: 1.5 for identical data
    D = Domain((Attribute("t", edges=(-math.inf, 1e20, math.inf)),))
    true = pd.DataFrame({"t": [0.0, 0.0, 0.0, 3e20]})
    labels = pd.DataFrame({"t": pd.Categorical.from_codes([0, 0, 0, 1], categories=list(D.attributes[0].labels))})
    assert workload_error(true, true, D, [("t",)]) == 0.0
    assert workload_error(true, labels, D, [("t",)]) == 0.0


def test_an_unknown_label_is_refused_by_name_and_a_missing_one_dropped():
    D = Domain((Attribute("x", edges=(0, 10, 20)),))
    true = pd.DataFrame({"x": [1.0, 15.0]})
    with pytest.raises(ValueError, match=r"'synthetic' parameter of workload_error .* bin labels of 'x'.*'oops'"):
        workload_error(true, pd.DataFrame({"x": ["[0, 10)", "oops"]}), D, [("x",)])  # was a bare KeyError
    a, b = D.attributes[0].labels
    assert workload_error(true, pd.DataFrame({"x": [a, None, b]}), D, [("x",)]) == 0.0  # as a missing record


def test_a_repeated_marginal_is_refused_not_counted_twice_in_the_mean():
    D = Domain((Attribute("x", edges=(0, 10, 20)), Attribute("y", categories=("a", "b"))))
    true = pd.DataFrame({"x": [1.0, 15.0], "y": ["a", "b"]})
    with pytest.raises(ValueError, match=r"'workload' parameter of workload_error names the marginal \('x', 'y'\) "
                                         r"twice \(also as \('y', 'x'\)\)"):
        workload_error(true, true, D, [("x", "y"), ("y", "x")])
