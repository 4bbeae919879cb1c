"""mmopt.records.rows: synthetic rows labelled by a domain count again into the cells they were drawn from."""

import numpy as np
import pytest

from mmopt.records import Attribute, Domain, marginal_counts
from mmopt.records.rows import bin_value, labelled_rows

D = Domain((Attribute("a", categories=("x", "y")),
            Attribute("b", edges=(-np.inf, 0.0, 1e20, np.inf)),
            Attribute("c", categories=(3, 1, 2))))


def test_values_count_again_into_their_cells_and_labels_are_the_domains():
    codes = np.random.default_rng(0).integers(0, [2, 3, 3], size=(500, 3))
    cells = np.zeros(D.shape)
    np.add.at(cells, tuple(codes.T), 1)
    rows = labelled_rows(D, codes)
    assert rows.columns.tolist() == ["a", "b", "c"]
    assert np.array_equal(marginal_counts(rows, D, [(0, 1, 2)])[(0, 1, 2)], cells)
    labels = labelled_rows(D, codes, "labels")
    assert list(labels["b"].cat.categories) == list(D.attributes[1].labels)
    assert marginal_counts(labels, D, [(1,)])[(1,)].sum() == 0  # why "values" is the default: labels are dropped


@pytest.mark.parametrize(("lo", "hi"), [(-np.inf, 0.0), (0.0, 1e20), (1e20, np.inf), (-np.inf, np.inf)])
def test_a_bins_value_lies_inside_it(lo, hi):
    x = bin_value(lo, hi)
    assert lo <= x < hi
