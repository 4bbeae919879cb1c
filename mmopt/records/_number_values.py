"""Numbers to cells under numeric categories or bins (split from :mod:`mmopt.records.values`, whose rules these
are): a number equals a category exactly (integers as integers), a value that is not a whole number may match a
category's float32 or float16 rounding, and bins place the value itself by np.searchsorted; anything else is −1.
"""

from __future__ import annotations

import math

import numpy as np

from mmopt.records.domain import Attribute


def _whole(c) -> int | None:
    """The integer a numeric category equals exactly, or None (0.5, inf, NaN)."""
    if isinstance(c, int | np.integer):
        return int(c)
    f = float(c)
    return int(f) if math.isfinite(f) and f.is_integer() else None


def _number_codes(x: np.ndarray, attribute: Attribute) -> np.ndarray:
    """Numeric categories by equality (sorted lookup), or bins by np.searchsorted (domain module's rule)."""
    if attribute.kind == "bins":
        e = np.asarray(attribute.edges)
        k = len(e) - 1
        xf = x.astype(np.float64, copy=False)  # exact for int64 below 2⁵³ and for every float32
        j = np.searchsorted(e, xf, side="right") - 1  # e_j ≤ x < e_{j+1}; NaN sorts last: j = k
        j[(j == k) & (xf == e[-1])] = k - 1  # the last bin is closed on the right
        j[(j < 0) | (j >= k)] = -1
        return j.astype(np.int64, copy=False)
    cats = attribute.categories
    integral = all(float(c).is_integer() and abs(c) < 2**62 for c in cats)
    lo, hi = (int(min(cats)), int(max(cats))) if integral else (0, -1)
    if integral and hi - lo < max(1 << 16, 64 * len(cats)):  # small integer categories: a lookup table
        lut = np.full(hi - lo + 2, -1, dtype=np.int64)  # the extra last entry catches everything outside
        lut[np.asarray(cats, dtype=np.int64) - lo] = np.arange(len(cats))
        if x.dtype.kind in "iub":
            k = x.astype(np.int64, copy=False) - lo
        else:  # a float is a category only when it is an integer in range (NaN is not)
            with np.errstate(invalid="ignore"):
                ok = (x >= lo) & (x <= hi) & (np.floor(x) == x)
            # only the in-range values are converted: hi + 1 as a float rounds (to hi for float32 and
            # hi = 2²⁴ − 1), which put NaN and every value outside the categories in the last cell
            k = np.full(x.shape[0], hi - lo + 1, dtype=np.int64)
            k[ok] = x[ok].astype(np.int64) - lo
        k[(k < 0) | (k > hi - lo)] = hi - lo + 1
        return lut[k]
    if x.dtype.kind in "iub":  # integers equal only the whole categories, compared as integers: through float64,
        # one category past 2⁶² (a 64-bit id) or one non-whole category put 2⁵³ and 2⁵³ + 1 in one cell
        whole = [(w, j) for j, c in enumerate(cats) if (w := _whole(c)) is not None and -(2**63) <= w < 2**63]
        if not whole:
            return np.full(x.shape[0], -1, dtype=np.int64)
        ref, index = np.array([w for w, _ in whole], dtype=np.int64), np.array([j for _, j in whole])
        x = x.astype(np.int64, copy=False)
    else:
        return _float_codes(x.astype(np.float64, copy=False), cats)
    return _lookup(ref, index, x)


def _float_codes(x: np.ndarray, cats) -> np.ndarray:
    """Float values (float64, which holds every float16 and float32 exactly) against numeric categories: equal to
    a category (an integer one only when the float is that very integer: rounded to float64, 2⁵³ + 1 became 2⁵³
    and the value 2⁵³ was counted in its cell), else, for a value that is not a whole number, equal to a
    category's float32 rounding, else to its float16 one (a category and its rounding both not whole: an integer
    never matches by rounding). The cell depends on the value alone, not on how its column was stored: a float32
    column matched by its own rounding lost every match when one added None made pandas hold it as Python floats,
    and one added record moved a thousand counts."""
    index = np.arange(len(cats))
    whole = np.array([_whole(c) is not None for c in cats], dtype=bool)
    ref = np.array(cats, dtype=np.float64)
    exact = np.array([not isinstance(c, int | np.integer) or (math.isfinite(r) and int(r) == int(c))
                      for c, r in zip(cats, ref, strict=True)], dtype=bool)
    j = _lookup(np.where(exact, ref, np.nan), index, x)
    with np.errstate(invalid="ignore"):
        fraction = np.isfinite(x) & (np.floor(x) != x)
    for narrow in (np.float32, np.float16):
        miss = (j < 0) & fraction
        if not miss.any():
            break
        with np.errstate(over="ignore"):  # a category past the type's range becomes inf, equal to no finite value
            rounded = ref.astype(narrow).astype(np.float64)
        usable = ~whole & np.isfinite(rounded) & (np.floor(rounded) != rounded)
        j[miss] = _lookup(np.where(usable, rounded, np.nan), index, x[miss])
    return j


def _lookup(ref: np.ndarray, index: np.ndarray, x: np.ndarray) -> np.ndarray:
    """index[i] of the first i (in index order) with ref[i] = x, else −1; NaN in ref matches nothing."""
    order = np.argsort(ref, kind="stable")
    srt = ref[order]
    j = np.minimum(np.searchsorted(srt, x), len(srt) - 1)
    return np.where(srt[j] == x, index[order[j]], -1).astype(np.int64, copy=False)  # NaN never equals
