"""Range specs of mmopt.answers.answer (mmopt.answers._specs): items read per attribute, ambiguous spellings refused
with both readings, and a domain read from a flat x̂ pointing to shape= where several attributes were meant."""

import numpy as np
import pytest

import mmopt
from mmopt import answers as ans
from mmopt import strategy as st
from mmopt.answers import _specs


def test_rows_and_contraction_are_the_kronecker_row_applied_to_x():
    x = np.random.default_rng(0).normal(size=(3, 4, 5))
    rows, labels = _specs.range_rows([((0, 1), None, 4), (2, slice(1, 4), np.linspace(0, 1, 5))], (3, 4, 5), "t")
    expected = [(np.r_[1, 1, 0.0], np.ones(4), np.eye(5)[4]), (np.eye(3)[2], np.r_[0, 1, 1, 1.0], np.linspace(0, 1, 5))]
    for r, by_hand in zip(rows, expected, strict=True):
        for got, want in zip(r, by_hand, strict=True):
            np.testing.assert_array_equal(got, want)
        q = np.kron(np.kron(by_hand[0], by_hand[1]), by_hand[2])
        assert _specs.contract(x, r) == pytest.approx(float(q @ x.ravel()), rel=1e-12)
    assert labels[0] == ("[0, 1]", "*", "4") and labels[1][:2] == ("2", "[1, 3]")


def test_a_pair_that_is_also_a_vector_on_two_cells_is_refused_as_ambiguous():
    """[0, 1] on a 2-cell attribute was read as the range (both cells, 12) though it is also the 0/1 vector
    'cell 1' (7): refused now with both spellings; a slice or an array says which."""
    x = np.array([5.0, 7.0])
    for item in ([0, 1], (1, 1)):
        with pytest.raises(ValueError, match=r"ambiguous on an attribute of 2 cells.*slice.*np\.array"):
            ans.answer([item], x)
    assert ans.answer([slice(0, 2)], x).answers.tolist() == [12.0]
    assert ans.answer([np.array([0, 1])], x).answers.tolist() == [7.0]
    assert ans.answer([[0, 0]], x).answers.tolist() == [5.0]  # not a vector (no cell): the range [0, 0]
    assert ans.answer([[0, 1]], np.arange(3.0)).answers.tolist() == [1.0]  # 3 cells: only a range
    # a pair of bools is a mask, never a range (it answered both cells; (True, 3) the cells 1 … 3)
    assert ans.answer([(False, True)], x).answers.tolist() == [7.0]
    with pytest.raises(ValueError, match=r"\(True, 3\) is not a range item on an attribute of 8 cells"):
        ans.answer([(True, 3)], np.arange(8.0))


def test_a_bare_pair_of_cells_on_one_attribute_is_refused_naming_both_readings():
    """answer((0, 7), x) answered the cells 0 and 7 (the tuple is the list of queries) where the range 0 … 7 was
    meant as often: refused, with the two spellings; a list of two cells and one range in a list still answer."""
    x = np.arange(16.0)
    with pytest.raises(ValueError, match=r"reads as two .*Pass \[\(0, 7\)\] for the one range.*\[0, 7\] for the two"):
        ans.answer((0, 7), x)
    assert ans.answer([(0, 7)], x).answers.tolist() == [28.0]
    assert ans.answer(((0, 7),), x).answers.tolist() == [28.0]
    assert ans.answer([0, 7], x).answers.tolist() == [0.0, 7.0]
    assert ans.answer((3,), x).answers.tolist() == [3.0]
    # on two attributes a bare pair of int pairs is as ambiguous: the cells (0, 1) and (2, 3), or the box
    # 0 … 1 × 2 … 3 (it answered the two cells); each list says which
    with pytest.raises(ValueError, match=r"reads as two \(the cells \(0, 1\) and \(2, 3\)\).*Pass "
                                         r"\[\(0, 1\), \(2, 3\)\] for the two cells, or "
                                         r"\[\(\(0, 1\), \(2, 3\)\)\] for the one box"):
        ans.answer(((0, 1), (2, 3)), x.reshape(4, 4))
    assert ans.answer([(0, 1), (2, 3)], x.reshape(4, 4)).answers.tolist() == [1.0, 11.0]
    assert ans.answer([((0, 1), (2, 3))], x.reshape(4, 4)).answers.tolist() == [2.0 + 3 + 6 + 7]
    assert ans.answer(((0, 1), (2, None)), x.reshape(4, 4)).answers.tolist() == [1.0, 8 + 9 + 10 + 11.0]


def test_a_bare_tuple_of_cells_on_a_flat_estimate_is_refused_naming_shape():
    """answer((2, 5, 1), x̂) answered the cells 2, 5 and 1 of a flat x̂ (the tuple is the list of queries) where the
    cell (2, 5, 1) of a domain of three attributes was meant as often: refused, naming both spellings and shape=;
    where the strategy gives one attribute, and as a list, the cells still answer."""
    x = np.arange(32.0)
    with pytest.raises(ValueError, match=r"\(2, 5, 1\) reads as 3 .*Pass \[2, 5, 1\] for those cells, or "
                                         r"\[\(2, 5, 1\)\] for the one cell .*shape=\(n1"):
        ans.answer((2, 5, 1), x)
    with pytest.raises(ValueError, match=r"reads as two .*for the two cells\. x̂ is flat.*shape="):
        ans.answer((2, 5), x)
    assert ans.answer([2, 5, 1], x).answers.tolist() == [2.0, 5.0, 1.0]
    one = st.kron(st.hierarchical(32))  # an implicit strategy of one attribute: the domain is known
    assert one.shape == (32,) and ans.answer((2, 5, 1), x, one, mmopt.Privacy(1.0)).answers.tolist() == [2.0, 5.0, 1.0]
    with pytest.raises(ValueError, match=r"is not a range item on an attribute of 32 cells[^;]*\)\.$"):
        ans.answer([(2, 5, 1)], x, one, mmopt.Privacy(1.0))  # the strategy gave one attribute: no shape= remedy


def test_a_shape_given_is_the_domain_so_no_refusal_points_back_to_it():
    """shape= says the domain outright: on (32,) a bare tuple of cells answers them, as a one-attribute strategy's
    domain does, and a failing item is refused without the flat-x̂ remedy (which told the user to pass the shape
    they had passed); a name given for the one attribute of a flat x̂ is refused without pointing to shape=."""
    x = np.arange(32.0)
    assert ans.answer((2, 5, 1), x, shape=(32,)).answers.tolist() == [2.0, 5.0, 1.0]
    for queries, shape in [([(2, 5, 1)], (32,)), ([((0, 9), None)], (4, 8))]:
        with pytest.raises(ValueError, match=r"is not a range item") as info:
            ans.answer(queries, x, shape=shape)
        assert "x̂ is flat" not in str(info.value) and "shape=" not in str(info.value)
    with pytest.raises(ValueError, match=r"must name the 1 attribute once each") as info:
        ans.answer([1], x, attributes=("answer",))
    assert "shape=" not in str(info.value)


def test_only_a_bare_pair_of_int_pairs_on_two_attributes_is_refused_as_a_box():
    """Three int pairs on two attributes can only be three cells (a box has one item per attribute): answered, by a
    direct index; on three attributes a pair of int pairs is refused for its item count, never offered as a box."""
    x = np.arange(16.0).reshape(4, 4)
    got = ans.answer(((0, 1), (2, 3), (3, 0)), x).answers.tolist()
    assert got == [x[0, 1], x[2, 3], x[3, 0]]
    with pytest.raises(ValueError, match=r"one item per attribute \(3\)") as info:
        ans.answer(((0, 1), (2, 3)), np.arange(64.0).reshape(4, 4, 4))
    assert "box" not in str(info.value)
