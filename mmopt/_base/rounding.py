"""Numbers for people, rounded in the direction that is safe to act on.

A figure a user may copy — an ε spent or needed, a noise scale, a sensitivity, a variance or an error — is printed
rounded *up*; a remaining budget, a cap or a certified lower bound rounded *down*. Rounded to the nearest, they
landed on the wrong side: the ledger refused the remaining ε it had just printed, a plan's "ε = 2.49282 meets every
target" did not, a certified minimum was printed above itself (a helper's audit of every printed figure). A float
stands for the decimal it is written as (its shortest repr), as the ledger counts it: 0.1 prints as 0.1.
"""

from __future__ import annotations

import math

__all__ = ["down", "down_float", "up"]


def up(value: float, digits: int | None = None) -> str:
    """``value`` to ``digits`` significant digits (6 when not given), never below it.

    Without ``digits``, a value just above a 6-digit number (by at most :data:`NEAR` of its last digit's unit) is
    shown to :data:`NEAR_DIGITS` digits: a sensitivity of 1 + 10⁻⁷ (an upper bound's margin) printed as 1.00001 read
    as 10⁻⁵ over (a newcomer's audit). Given ``digits`` are never exceeded.

    >>> up(1.0000007005), up(2.5), up(0.1234561), up(0.1), up(0.1 ** 2 / 2), up(1.0000001000000003)
    ('1.00001', '2.5', '0.123457', '0.1', '0.005', '1.0000001')
    >>> up(1.0000001000000003, 6)
    '1.00001'
    """
    value = float(value)
    near, digits = digits is None, 6 if digits is None else digits
    if near and math.isfinite(value) and value != 0:
        step = 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)
        if 0 < abs(value) - abs(float(f"{value:.{digits}g}")) <= NEAR * step:
            digits = max(digits, NEAR_DIGITS)
    return _toward(value, digits, +1)


#: :func:`up` shows a value within this fraction of a unit in its last digit above a shorter number to
#: :data:`NEAR_DIGITS` digits.
NEAR = 0.02
NEAR_DIGITS = 10


def down(value: float, digits: int = 6) -> str:
    """``value`` to ``digits`` significant digits, never above it.

    >>> down(0.6666667), down(3.1954662), down(2.5), down(0.1)
    ('0.666666', '3.19546', '2.5', '0.1')
    """
    return _toward(value, digits, -1)


def down_float(value: float, digits: int = 6) -> float:
    """:func:`down` as a float, for a number pasted into code (``Privacy(0.436691)``) that must still fit a budget.

    >>> down_float(0.6666667), down_float(0.000436691999)
    (0.666666, 0.000436691)
    """
    return float(down(value, digits))


#: Up rounds past the nearest only when the nearest is further below than this (relative): ρ = 0.1²/2 is the float
#: 0.005000000000000001, and a spend of Privacy(0.1) printed as ρ = 0.00500001 stood for one ulp of round-off.
#: Down has no such slack: a remaining 0.004999999999999999 printed 0.005 is refused when spent.
UP_SLACK = 1e-12


def _toward(value: float, digits: int, sign: int) -> str:
    value = float(value)
    shown = float(f"{value:.{digits}g}")
    slack = UP_SLACK * abs(value) if sign > 0 else 0.0
    if value != 0 and math.isfinite(value) and (shown - value) * sign < -slack:
        step = 10.0 ** (math.floor(math.log10(abs(value))) - digits + 1)
        shown = float(f"{shown + sign * step:.{digits}g}")
    return f"{shown:.{digits}g}"
