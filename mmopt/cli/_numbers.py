"""The command line's numbers: decimal literals as written, refused where Python's ``float`` would silently
change what was typed."""

from __future__ import annotations

import argparse
import math
import re

__all__ = ["integer", "is_number", "number"]

_INTEGER = re.compile(r"[+-]?\d+")

# digits with an optional point and exponent, or nan/inf spelled out (their refusals are the options' own)
_LITERAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|[+-]?(nan|inf|infinity)", re.IGNORECASE)


def number(text: str) -> float:
    """``float(text)`` for a plain decimal literal. Refused: digit separators (``float`` reads ``1_0`` as 10, where a
    typo for 1.0 or 0.1 is as likely), and a literal that is not zero but rounds to 0 or ±inf in float64 (``1e-400``
    for δ became 0, and so Laplace noise, without a word).

    >>> number("1e-1"), number("5")
    (0.1, 5.0)
    >>> number("1e-400")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '1e-400' is not zero but rounds to 0.0 in double precision: ...
    """
    s = text.strip()
    if not _LITERAL.fullmatch(s):
        raise argparse.ArgumentTypeError(f"{text!r} is not a decimal number (e.g. 0.5, 1e-6)")
    value = float(s)
    mantissa = re.split("[eE]", s)[0]
    underflow = value == 0.0 and re.search("[1-9]", mantissa) is not None
    overflow = math.isinf(value) and "inf" not in s.lower()
    if underflow or overflow:
        raise argparse.ArgumentTypeError(f"{text!r} is not zero but rounds to {value!r} in double precision: write a "
                                         "number between 1e-308 and 1e308 in size (or 0)")
    return value


def integer(text: str) -> int:
    """``int(text)`` for plain decimal digits, with an optional sign. Refused: digit separators (``int`` reads ``1_0``
    as 10: ``prefix:1_6`` became prefix(16) and ``--seed 1_0`` seed 10, where a typo is as likely; a newcomer's
    audit), and anything else ``int`` takes but a person would not write (``'٣'``, other scripts' digits).

    >>> integer(" 16"), integer("-3")
    (16, -3)
    >>> integer("1_6")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: '1_6' is not an integer written in digits (e.g. 16)
    """
    s = text.strip()
    if not _INTEGER.fullmatch(s) or not s.lstrip("+-").isascii():
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer written in digits (e.g. 16)")
    return int(s)


def is_number(text: str) -> bool:
    """Whether Python's ``float`` reads ``text`` (a CSV cell, an --option value): a looser test than :func:`number`."""
    try:
        float(text)
    except ValueError:
        return False
    return True
