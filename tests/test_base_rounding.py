"""mmopt._base.rounding: a figure printed up is never below the value, one printed down never above it."""

import math

from hypothesis import given
from hypothesis import strategies as st

from mmopt._base.rounding import UP_SLACK, down, up

FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@given(FINITE, st.integers(1, 15))
def test_the_printed_side_is_the_safe_one(x, digits):
    hi, lo = float(up(x, digits)), float(down(x, digits))
    assert lo <= x and hi >= x - UP_SLACK * abs(x)
    for text in (up(x, digits), down(x, digits)):
        mantissa = text.lstrip("-").split("e")[0].replace(".", "").lstrip("0")
        assert len(mantissa) <= digits


def test_a_decimal_prints_as_written():
    assert (up(0.1), down(0.1), up(2.5), down(-2.5)) == ("0.1", "0.1", "2.5", "-2.5")
    assert (down(0.6666667), up(0.6666667)) == ("0.666666", "0.666667") and math.isinf(float(up(math.inf)))
