"""The cell code of every raw value under string categories (split from :mod:`mmopt.records.values`, whose
rules these are: a value outside the domain is −1, never an error; a number is matched by its text, 2 as "2",
as Dask and DuckDB read an object column).

A category is matched exactly, so "f", " F" and "F " are dropped under the category "F", and a count was short
without a word unless every record was dropped (a newcomer's stumble). :func:`warn_near_misses` says it, from the
distinct dropped texts only, with the same message on every engine (Polars and DuckDB list theirs in one extra
pass, only when a text, not a missing value, was dropped): it names the column and the category, never a dropped
text or how many."""

from __future__ import annotations

import numpy as np

from mmopt._base.said_once import warn_data
from mmopt.records.domain import Attribute

__all__ = ["arrow_text_codes", "text_codes", "warn_near_misses"]


def text_codes(column, attribute: Attribute) -> np.ndarray:
    import pyarrow as pa
    try:  # Arrow's hash lookup is fast for strings; a column of other objects is made text first
        arr = pa.array(column, from_pandas=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # OverflowError: a first value of 2¹⁰⁰ made
        arr = None  # the release raise, so whether it happened depended on one record
    if arr is None or not any(f(arr.type) for f in (pa.types.is_string, pa.types.is_large_string,
                                                    pa.types.is_binary, pa.types.is_null)):
        import pandas as pd
        # 2 under string categories: pandas dropped it, Dask and DuckDB read its text "2" (a probe); unhashable
        # values (a list, a dict) are dropped, as any value outside the domain (one such record raised)
        values = _utf8_decoded(column.to_numpy(dtype=object))
        keep = ~pd.isna(values) & np.fromiter(map(_hashable, values), bool, values.shape[0])
        text = [(x if isinstance(x, str) else _text(x)) if k else None for x, k in zip(values, keep, strict=True)]
        if any(k and not isinstance(x, str) for x, k in zip(values, keep, strict=True)):
            warn_data(f"Column {attribute.name!r} holds values that are not strings, but the domain declares it "
                      "with string categories: each is matched by its text (2 as '2', as Dask and DuckDB read it). If "
                      f"the column holds numbers, declare {attribute.name!r} with numeric categories.", stacklevel=4)
        arr = pa.array(text, type=pa.string())
    return arrow_text_codes(arr, attribute)


def _text(x) -> str | None:
    """str(x), or None (dropped) where Python refuses it: an int past 4,300 digits raised ValueError, and one such
    record stopped the release (a helper's audit)."""
    try:
        return str(x)
    except ValueError:
        return None


def _utf8_decoded(values: np.ndarray) -> np.ndarray:
    """bytes as the UTF-8 text they hold (not UTF-8: None, dropped), as Arrow's lookup matches them (a binary
    column against the string categories): the fallback matched no bytes, so b"a" counted as "a" or was dropped by
    whether another record (a number) made Arrow fail — one added record moved a thousand counts."""
    is_bytes = np.fromiter((isinstance(x, bytes) for x in values), dtype=bool, count=len(values))
    if not is_bytes.any():
        return values
    values = values.copy()
    for i in np.flatnonzero(is_bytes):
        try:
            values[i] = values[i].decode("utf-8")
        except UnicodeDecodeError:
            values[i] = None
    return values


def _hashable(x) -> bool:
    try:
        hash(x)
    except TypeError:
        return False
    return True


def arrow_text_codes(arr, attribute: Attribute) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    if pa.types.is_null(arr.type):
        return np.full(len(arr), -1, dtype=np.int64)
    found = pc.index_in(arr, value_set=pa.array(attribute.categories, type=pa.string()))
    if found.null_count > arr.null_count:  # a text was dropped: its distinct texts, not the column, are folded
        warn_near_misses(pc.unique(arr.filter(pc.and_(pc.is_null(found), pc.is_valid(arr)))).to_pylist(), attribute)
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _utf8(v) -> str | None:
    if not isinstance(v, bytes):
        return None
    try:
        return v.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _folded(text: str) -> str:
    return text.strip().casefold()


def warn_near_misses(dropped, attribute: Attribute) -> None:
    """A :class:`mmopt.DataWarning` for each category of ``attribute`` that a text of ``dropped`` (distinct texts the
    domain dropped; other values are skipped) equals but for case and surrounding spaces (``str.strip().casefold()``).

    It names the column and the category (both public, in the domain), never the text or how many records: whether
    it is said depends on the records, so it is for the data holder, as every DataWarning (:mod:`mmopt.records.values`).
    """
    folded: dict[str, list[str]] = {}
    for c in attribute.categories:
        folded.setdefault(_folded(c), []).append(c)
    texts = (v if isinstance(v, str) else _utf8(v) for v in dropped)  # a binary column's bytes: the text they hold
    near = {c for v in texts if v is not None for c in folded.get(_folded(v), ())}
    for c in (c for c in attribute.categories if c in near):  # the domain's order, on every engine
        warn_data(f"Column {attribute.name!r} holds values that differ from its category {c!r} only in case or "
                  "surrounding spaces: those records are dropped, as a category is matched exactly. Clean the column "
                  f"first ({_cleaning(attribute.name, c)}), or declare that spelling a category of {attribute.name!r} "
                  "in the Domain.", stacklevel=3)


def _cleaning(name: str, category: str) -> str:
    """The pandas cleaning that turns a near miss into ``category``: strip, then its case."""
    if category != category.strip():  # a category with its own spaces: strip() would miss it too
        return f"map each spelling in df[{name!r}] to {category!r}"
    for case in ("upper", "lower", "title"):
        if category == getattr(category, case)() and category.upper() != category.lower():
            return f"e.g. df[{name!r}].str.strip().str.{case}()"
    return f"e.g. df[{name!r}].str.strip()" if category.upper() == category.lower() else \
        f"e.g. df[{name!r}].str.strip(), then map each spelling to {category!r}"
