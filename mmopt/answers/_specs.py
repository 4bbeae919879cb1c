"""Range specs of :func:`mmopt.answers.answer` (split from :mod:`mmopt.answers.queries`): each spec read as one
row per attribute (q = ⊗ᵢ rᵢ), labelled, and contracted with x̂ shaped like the domain.

An item is an int c, a pair of ints (a, b) (cells a … b), None or "*", a ``slice``, or a vector of length nᵢ; on one
attribute the item alone will do. A domain read from a flat x̂ (no strategy, output or ``shape=`` giving its shape)
has one attribute of N cells: there ``(2, 5)`` is the range 2 … 5, and a spec that fails as one item (``(2, 5, 1)``,
``((0, 1), None)``) or a bare tuple of cells is refused naming ``shape=``, the way to say the domain has several.
"""

from __future__ import annotations

import numpy as np

from mmopt._base import validation as v
from mmopt.answers.labels import _row, _set

__all__ = ["contract", "flat_remedy", "range_rows"]


def flat_remedy(n: int, caller: str) -> str:
    """The remedy appended to a refusal on a domain read from a flat x̂ (one attribute of ``n`` cells)."""
    return (f" x̂ is flat and neither the strategy nor the output gives the domain's shape, so it reads as one "
            f"attribute of {n:,} cells; for a domain of several attributes, pass its shape: {caller}(..., "
            "shape=(n1, ..., nd)), cells in C order (or x̂ shaped like the domain).")


def range_rows(queries, shape: tuple[int, ...], caller: str, *, flat: bool = False):
    """(rows, labels): per spec of ``queries`` one row per attribute of ``shape`` and one label per attribute.
    ``flat``: the domain was read from a flat x̂, so a failing spec may be meant for several attributes (the
    refusal then names ``shape=``)."""
    d = len(shape)
    _refuse_bare_tuple(queries, d, caller, shape[0] if flat else None)
    rows, labels = [], []
    for spec in _spec_list(queries, caller):
        items = _items(spec, d, caller)
        try:
            r = tuple(_item_row(item, n, caller) for item, n in zip(items, shape, strict=True))
        except ValueError as exc:
            # on a flat x̂ (2, 5, 1) or ((0, 1), None) fails as one item on N cells where the user meant one item per
            # attribute: the message listed the items of one attribute and never said how to give the shape
            if flat and isinstance(items[0], tuple | list) and len(items[0]) >= 2:
                raise ValueError(f"{exc}{flat_remedy(shape[0], caller)}") from None
            raise
        rows.append(r)
        labels.append(tuple(_describe(item, row, len(labels)) for item, row in zip(items, r, strict=True)))
    return rows, tuple(labels)


def contract(x: np.ndarray, rows) -> float:
    """(⊗ᵢ rᵢ) x̂ for x̂ shaped like the domain, one attribute at a time."""
    y = x
    for r in rows:
        y = np.tensordot(r, y, axes=(0, 0))
    return float(y)


def _spec_list(queries, caller: str) -> list:
    if not isinstance(queries, list | tuple) or not len(queries):
        raise TypeError(f"The 'queries' parameter of {caller} must be a non-empty list of range specs, a numpy array "
                        f"(k, N) or a scipy.sparse matrix. Got {type(queries).__name__}.")
    return list(queries)


def _refuse_bare_tuple(queries, d: int, caller: str, flat_n: int | None) -> None:
    """A bare pair of ints on one attribute: answer((0, 7), out) answered the cells 0 and 7 (two queries: the tuple
    is the list of specs), where the range 0 … 7 was meant as often; which one is not ours to guess. On a domain
    read from a flat x̂ (``flat_n`` its cells), a bare tuple of more ints is as ambiguous: (2, 5, 1) answered three
    cells where the cell (2, 5, 1) of a domain of three attributes was meant. On two attributes, a bare pair of int
    pairs ((0, 1), (2, 3)) answered the cells (0, 1) and (2, 3) where the box 0 … 1 × 2 … 3 was meant as often."""
    if d == 2 and isinstance(queries, tuple) and len(queries) == 2 and all(_range(e) for e in queries):
        (a, b), (c, e) = ((int(v) for v in pair) for pair in queries)
        raise ValueError(f"The 'queries' parameter of {caller} is a list of queries; {queries!r} reads as two (the "
                         f"cells ({a}, {b}) and ({c}, {e})) and is refused as ambiguous. Pass [({a}, {b}), ({c}, {e})] "
                         f"for the two cells, or [(({a}, {b}), ({c}, {e}))] for the one box {a} … {b} × {c} … {e}.")
    if d != 1 or not isinstance(queries, tuple) or len(queries) < 2 or not all(
            isinstance(e, int | np.integer) and not isinstance(e, bool) for e in queries):
        return
    cells = [int(e) for e in queries]
    if len(cells) == 2:
        a, b = cells
        raise ValueError(f"The 'queries' parameter of {caller} is a list of queries; {queries!r} reads as two (the "
                         f"cells {a} and {b}) and is refused as ambiguous. Pass [({a}, {b})] for the one range "
                         f"{a} … {b}, or [{a}, {b}] for the two cells."
                         + (flat_remedy(flat_n, caller) if flat_n is not None else ""))
    if flat_n is not None:
        raise ValueError(f"The 'queries' parameter of {caller} is a list of queries; {queries!r:.60} reads as "
                         f"{len(cells)} (cells of one attribute) and is refused as ambiguous. Pass {cells!r:.60} for "
                         f"those cells, or [{tuple(cells)!r:.60}] for the one cell of a domain of {len(cells)} "
                         f"attributes.{flat_remedy(flat_n, caller)}")


def _items(spec, d: int, caller: str) -> tuple:
    if d == 1 and not (isinstance(spec, tuple | list) and len(spec) == 1):
        return (spec,)
    if not isinstance(spec, tuple | list) or len(spec) != d:
        raise ValueError(f"The 'queries' parameter of {caller} must give one item per attribute ({d}) in every range "
                         f"spec. Got {spec!r:.80}.")
    return tuple(spec)


def _item_row(item, n: int, caller: str) -> np.ndarray:
    r = np.zeros(n)
    bad = ValueError(f"The 'queries' parameter of {caller}: {item!r:.60} is not a range item on an attribute of {n} "
                     "cells (an int c, a pair (a, b) with 0 <= a <= b < n, None/'*', a slice or a vector of length n).")
    if item is None or (isinstance(item, str) and item == "*"):
        r[:] = 1.0
    elif isinstance(item, slice):
        r[np.arange(n)[item]] = 1.0
    elif isinstance(item, int | np.integer) and not isinstance(item, bool):
        if not 0 <= item < n:
            raise bad
        r[int(item)] = 1.0
    elif n == 2 and _pair(item) and all(_integral(e) for e in item) and tuple(map(int, item)) in ((0, 1), (1, 1)):
        a, b = int(item[0]), int(item[1])  # also a 0/1 vector of length 2 (float pairs too), answering another query
        raise ValueError(f"The 'queries' parameter of {caller}: {item!r} is ambiguous on an attribute of 2 "
                         f"cells, the range [{a}, {b}] or the 0/1 vector {list(item)}. Give the range as a "
                         f"slice (slice({a}, {b + 1})) or the vector as a numpy array (np.array({list(item)})).")
    elif _range(item):
        a, b = int(item[0]), int(item[1])
        if not 0 <= a <= b < n:
            raise bad
        r[a:b + 1] = 1.0
    else:  # a vector, float pairs (1.0, 3.0) included: a range is a pair of ints
        try:
            r = v.check_vector(item, name="queries", caller=caller, length=n)
        except (TypeError, ValueError):
            if _pair(item) and all(_integral(e) for e in item):  # (2.0, 5.0): bounds read from a float column;
                # the generic message listed "a pair (a, b)", which it looks like (an auditor's probe)
                a, b = (int(e) for e in item)
                raise ValueError(f"The 'queries' parameter of {caller}: {item!r:.60} is not a range item: a range is a "
                                 f"pair of ints, and these are floats. Pass ({a}, {b}) for cells {a} … {b}.") from None
            raise bad from None
    if not np.any(r):
        raise bad
    return r


def _pair(item) -> bool:
    return isinstance(item, tuple | list) and len(item) == 2


def _range(item) -> bool:
    """A range item (a, b): a pair of ints, not bools ((False, True) on 2 cells answered the range of both cells,
    where the mask means cell 1; (True, 3) was the range 1 … 3)."""
    return _pair(item) and all(isinstance(e, int | np.integer) and not isinstance(e, bool) for e in item)


def _integral(e) -> bool:
    """An int, or a real number with an integral value (a float pair on 2 cells is as ambiguous as an int pair)."""
    if isinstance(e, bool | np.bool_):
        return False
    return isinstance(e, int | np.integer) or (isinstance(e, float | np.floating) and float(e).is_integer())


def _describe(item, r: np.ndarray, index: int) -> str:
    if _range(item):
        return f"[{int(item[0])}, {int(item[1])}]"
    if isinstance(item, slice):
        return _set(np.flatnonzero(r), r.size)
    return _row(r, index) if not isinstance(item, int | np.integer) else str(int(item))
