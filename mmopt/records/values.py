"""The cell code of every raw value: exact for integers of any size, by value for float32, never an error.

Notation: see README and :mod:`mmopt.records.domain`. The code of a value is its cell j in [0, nᵢ), or −1 when
it is missing, unparseable or outside the domain; such records are dropped by the domain's public rule, so a
single bad record never stops a release (whether a release happens must not depend on one person's record).

* **Integers are compared as integers**: an integer column (NumPy, pandas nullable ``Int64`` with missing
  values, Arrow integers with nulls, whole-number decimals such as SQL's ``NUMERIC(38, 0)``, and whole
  ``Decimal`` objects) is never routed through float64, so 2⁵³ and 2⁵³ + 1 stay two values.
* **A value's cell is the value's alone**, whatever its column's type (a None added to a float32 column makes
  pandas hold its values as Python floats; a NaN added to an int64 column makes it float64): a number equals a
  category exactly (integers as integers), and a value that is not a whole number and equals no category is
  matched by value at float32 precision, then float16's — category c matches v when float32(c) = v (the value
  0.1 stored as float32 is the category 0.1), never an integer by rounding. Bins compare the value itself.
* **Mixed object columns** (pandas ``object``: numbers, None, strings): numbers are coded, missing values are
  dropped, and strings are parsed as CSV text is (below): Dask turns an object column of integers into strings
  and every file or engine parses text, so "3" is the number 3 here as it is in a CSV file (pandas alone had
  dropped it, and one table gave two different counts). Conversely, under string categories a number is matched
  by its text (2 as "2"), as Dask and DuckDB read an object column.
* **CSV text** (every CSV value is text): read as strings and parsed here — integers exactly (as int64 when
  they fit), decimals as float64, true and false (any case) as 1 and 0, as a bool column counts under numeric
  categories (pd.read_csv reads them as bools); an empty or unparseable cell is dropped.

Text dropped from a numeric column, and text that equals a string category but for case or surrounding spaces
(:func:`mmopt.records._text_values.warn_near_misses`), is said in a :class:`mmopt.DataWarning` to whoever runs the
count (the data holder): it names the column (and the category), never a dropped value or a count, and changes
nothing that is released — but whether it is raised depends on the records (one added record can raise it), so it
is outside the privacy guarantee and must not be published with the release; the command line marks it so (a
helper's audit).
"""

from __future__ import annotations

import decimal
import fractions
import math

import numpy as np

from mmopt._base.said_once import warn_data
from mmopt.records._number_values import _number_codes, _whole
from mmopt.records._text_values import _utf8_decoded, arrow_text_codes, text_codes
from mmopt.records.domain import Attribute

_INT = r"^\s*[+-]?\d+\s*$"
_FLOAT = r"(?i)^\s*[+-]?((\d+\.?\d*|\.\d+)(e[+-]?\d+)?|inf|infinity|nan)\s*$"


def _warn_text(attribute: Attribute) -> None:
    warn_data(f"Column {attribute.name!r} holds values that are not numbers, but the domain declares it numeric: "
              "those records are dropped by the domain's out-of-domain rule. If the column holds labels, declare "
              f"{attribute.name!r} with string categories.", stacklevel=4)


def codes(column, attribute: Attribute) -> np.ndarray:
    """The cell of every value of ``column`` (a pandas Series or an Arrow array), −1 when out of domain."""
    import pandas as pd
    if isinstance(column, pd.Series):
        return _pandas_codes(column, attribute)
    return _arrow_codes(column, attribute)


def _pandas_codes(column, attribute: Attribute) -> np.ndarray:
    import pandas as pd
    from pandas.api import types as pt
    if isinstance(column.dtype, pd.SparseDtype):  # its dtype named no numpy type: Sparse[int64, 0] raised a bare
        column = column.sparse.to_dense()  # TypeError (a helper's probe); the values are the dense column's
    if isinstance(column.dtype, pd.CategoricalDtype):  # map the column's few categories, then look up
        cat = column.cat.codes.to_numpy()
        # only those a record holds: an unused category, which every Dask partition carries, raised the warnings of
        # a value no record had ("f" next to the category "F", a label under numeric categories)
        used = np.flatnonzero(np.bincount(cat[cat >= 0], minlength=len(column.cat.categories)))
        lut = np.full(len(column.cat.categories) + 1, -1, dtype=np.int64)
        if used.size:
            lut[used] = codes(pd.Series(column.cat.categories[used]), attribute)
        return lut[cat]  # code −1 (missing) reads lut[−1] = −1
    if attribute.kind == "text":
        return text_codes(column, attribute)
    dtype = column.dtype
    if pt.is_bool_dtype(dtype):
        missing = column.isna().to_numpy()
        # filled first: an Arrow bool column holding a null refused to_numpy(int64, na_value=0), and one record
        # stopped the release
        return _masked(column.fillna(False).to_numpy(dtype=bool).astype(np.int64), missing, attribute)
    if pt.is_integer_dtype(dtype):
        missing = column.isna().to_numpy()
        if _unsigned64(dtype):  # values past 2⁶³ would wrap in int64: compare as Python ints
            return _object_codes(column.astype(object).to_numpy(), attribute)
        return _masked(column.to_numpy(dtype=np.int64, na_value=0), missing, attribute)
    if pt.is_float_dtype(dtype):  # float16 and float32 widen exactly: a value's cell is the value's alone
        with np.errstate(over="ignore"):  # a long double past float64 is ±inf, without a warning one record raised
            floats = column.to_numpy(dtype=np.float64, na_value=np.nan)
        return _number_codes(floats, attribute)
    return _object_codes(column.to_numpy(dtype=object), attribute)  # object / string: value by value


def _unsigned64(dtype) -> bool:
    from pandas.api import types as pt
    base = np.dtype(getattr(dtype, "numpy_dtype", dtype))
    return pt.is_unsigned_integer_dtype(base) and base.itemsize == 8


def _masked(x: np.ndarray, missing: np.ndarray, attribute: Attribute) -> np.ndarray:
    out = _number_codes(x, attribute)
    out[missing] = -1
    return out


def _object_codes(values: np.ndarray, attribute: Attribute) -> np.ndarray:
    """Numbers by value (ints and whole Decimals exactly; other Decimals and Fractions as float64), text parsed as a CSV
    cell (:func:`_parsed_codes`), everything else (None, NaN, other objects) dropped."""
    out = np.full(values.shape[0], -1, dtype=np.int64)
    # bytes are the UTF-8 text they hold, as under string categories: pandas dropped b"1" where Dask (which turns
    # an object column into strings) counted it as 1 (a helper's audit)
    values = _utf8_decoded(values)
    if any(isinstance(v, decimal.Decimal | fractions.Fraction) for v in values):  # whole ones are integers,
        # compared exactly (Fraction(2⁵³ + 1) was counted as 2⁵³ through float64, where Dask's text kept it apart)
        values = np.array([_decimal(v) if isinstance(v, decimal.Decimal) else
                           int(v) if isinstance(v, fractions.Fraction) and v.denominator == 1 else v
                           for v in values], dtype=object)
    is_int = np.fromiter((isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_) for v in values),
                         bool, values.shape[0])
    # pd.read_parquet turns a decimal128 column into Decimal objects: the file itself is read as float64
    is_float = np.fromiter((isinstance(v, float | np.floating | decimal.Decimal | fractions.Fraction) for v in values),
                           bool, values.shape[0])
    is_bool = np.fromiter((isinstance(v, bool | np.bool_) for v in values), bool, values.shape[0])
    # text is parsed as a CSV cell is: Dask turns an object column of ints into strings, and every other source
    # (files, Polars, DuckDB) parses text; pandas alone dropped it, so one table gave two different counts
    is_str = np.fromiter((isinstance(v, str) for v in values), bool, values.shape[0])
    if np.any(is_int):
        ints = values[is_int]
        fits = np.fromiter((-(2**63) <= int(v) < 2**63 for v in ints), bool, ints.shape[0])
        sub = np.full(ints.shape[0], -1, dtype=np.int64)
        if fits.any():
            sub[fits] = _number_codes(ints[fits].astype(np.int64), attribute)
        if (~fits).any():  # beyond int64: equal to a category only if the category is that very integer
            sub[~fits] = _big_int_codes(ints[~fits], attribute)
        out[is_int] = sub
    if np.any(is_float):
        try:  # numpy's overflow on a long double past float64 is inf, silently: a warning said one record was there
            with np.errstate(over="ignore"):
                floats = values[is_float].astype(np.float64)
        except OverflowError:  # a Fraction past float64 (10⁴⁰⁰) raised, and one record stopped the release
            floats = np.array([_as_float(v) for v in values[is_float]], dtype=np.float64)
        out[is_float] = _number_codes(floats, attribute)
    if np.any(is_bool):
        out[is_bool] = _number_codes(values[is_bool].astype(np.int64), attribute)
    if np.any(is_str):
        import pyarrow as pa
        out[is_str] = _parsed_codes(pa.array(values[is_str].tolist(), type=pa.string()), attribute)
    missing = _missing_values()
    if any(all(v is not m for m in missing) for v in values[~(is_int | is_float | is_bool | is_str)]):
        _warn_text(attribute)  # strings, dates, …: values, not missing ones, so the drop is said
    return out


def _decimal(v: decimal.Decimal):
    """A whole Decimal as an int (compared exactly), NaN and sNaN as missing (float() of an sNaN raised, so one
    record stopped the release), any other as itself (coded as a float)."""
    if v.is_nan():
        return None
    if v.is_finite() and v.adjusted() > _LONGEST_INT_TEXT:  # int(Decimal("1e1000000")) took 26 CPU s (a review)
        return -_PAST_FLOAT if v < 0 else _PAST_FLOAT
    return int(v) if v.is_finite() and v == v.to_integral_value() else v


def _missing_values() -> tuple:
    """The objects that stand for a missing value: None, and pandas.NA and pandas.NaT when pandas is there."""
    try:
        import pandas as pd
    except ImportError:
        return (None,)
    return None, pd.NA, pd.NaT


def default_csv_nulls() -> list[str]:
    """pyarrow's default null strings: the CSV cells every engine reads as missing (but for the string categories a
    domain declares, :func:`mmopt.records.read.csv_nulls`)."""
    import pyarrow.csv as pcsv
    return list(pcsv.ConvertOptions().null_values)


def _big_int_codes(ints: np.ndarray, attribute: Attribute) -> np.ndarray:
    if attribute.kind == "bins":  # past float64 (10⁴⁰⁰): ±inf, which the bins place as the integer would be —
        # float() raised OverflowError before, and one such record stopped the release
        return _number_codes(np.array([_as_float(v) for v in ints]), attribute)
    exact = {w: j for j, c in enumerate(attribute.categories) if (w := _whole(c)) is not None}
    return np.array([exact.get(int(v), -1) for v in ints], dtype=np.int64)


#: Integer text longer than this (significant digits) is past every category and finite bin edge (all below
#: 1.8·10³⁰⁸): it is read as ±:data:`_PAST_FLOAT`, since Python refuses int() of text past 4,300 digits
#: (ValueError), and one such cell stopped every release of its table (a helper's audit).
_LONGEST_INT_TEXT = 400
#: The integer standing for one past float64's range, placed as the bins and categories place the value itself.
_PAST_FLOAT = 10**400


def _int_of_text(s: str) -> int:
    """The integer of integer text (:data:`_INT`), or ±:data:`_PAST_FLOAT` past :data:`_LONGEST_INT_TEXT` digits."""
    body = s.lstrip("+-").lstrip("0")  # leading zeros count towards Python's limit too: "0"·4,300 + "1" raised
    value = _PAST_FLOAT if len(body) > _LONGEST_INT_TEXT else int(body or "0")
    return -value if s.startswith("-") else value


def _as_float(v) -> float:
    try:
        return float(v)
    except OverflowError:
        return math.inf if v > 0 else -math.inf


def _arrow_codes(column, attribute: Attribute) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.compute as pc
    if attribute.kind == "text":
        return arrow_text_codes(column, attribute)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return _parsed_codes(column, attribute)  # a CSV column: every value is text
    if pa.types.is_boolean(column.type):
        column = pc.cast(column, pa.int64())
    missing = column.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_integer(column.type):
        if pa.types.is_uint64(column.type):
            return _object_codes(np.array(column.to_pylist(), dtype=object), attribute)
        filled = pc.cast(column.fill_null(0), pa.int64()).to_numpy(zero_copy_only=False)
        return _masked(filled, missing, attribute)
    if pa.types.is_decimal(column.type) and column.type.scale <= 0:
        # whole numbers (decimal(38, 0), SQL's NUMERIC ids and codes) are compared as integers: through float64,
        # 2⁵³ + 1 was counted in the cell of 2⁵³. A safe cast to int64 is exact, and refuses what does not fit.
        try:
            filled = pc.cast(column.fill_null(0), pa.int64()).to_numpy(zero_copy_only=False)
        except pa.ArrowInvalid:  # past int64: value by value, as Python ints
            return _object_codes(np.array(column.to_pylist(), dtype=object), attribute)
        return _masked(filled, missing, attribute)
    if pa.types.is_decimal(column.type):
        # through its text: Arrow's decimal → float64 cast is not correctly rounded (Decimal("0.3") became
        # 0.30000000000000004, missing the category 0.3 and the bin edge 0.3: 14–47 % of values, by scale, in a
        # helper's probe); the text's parse is, so every engine counts a DECIMAL column as pandas does
        column = pc.cast(column, pa.string())
    return _number_codes(pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False), attribute)


def _parsed_codes(arr, attribute: Attribute) -> np.ndarray:
    """CSV text: integers exactly, decimals as float64, anything else (and empty cells) dropped."""
    import pyarrow as pa
    import pyarrow.compute as pc
    out = np.full(len(arr), -1, dtype=np.int64)
    text = pc.utf8_trim_whitespace(arr)
    is_int = pc.fill_null(pc.match_substring_regex(text, _INT), False).to_numpy(zero_copy_only=False)
    is_num = pc.fill_null(pc.match_substring_regex(text, _FLOAT), False).to_numpy(zero_copy_only=False)
    if is_int.any():
        out[is_int] = _integer_text_codes(text.filter(pa.array(is_int)), attribute)
    decimals = is_num & ~is_int
    if decimals.any():
        out[decimals] = _number_codes(pc.cast(text.filter(pa.array(decimals)), pa.float64())
                                      .to_numpy(zero_copy_only=False), attribute)
    # true/false in any case are 1/0, as a bool column is under numeric categories: pd.read_csv reads True/False
    # as bools, so the CSV paths dropped what the same file through pandas counted (a helper's audit)
    folded = pc.utf8_lower(text)
    for word, value in (("true", 1), ("false", 0)):
        is_word = pc.fill_null(pc.equal(folded, word), False).to_numpy(zero_copy_only=False)
        if is_word.any():
            out[is_word] = _number_codes(np.full(int(is_word.sum()), value, dtype=np.int64), attribute)
            is_num = is_num | is_word
    # a null string read as text (another column declares it a category: mmopt.records.read.csv_nulls) is missing
    nulls = pa.array(["", *default_csv_nulls()])
    blank = pc.or_(pc.is_null(text), pc.fill_null(pc.is_in(text, value_set=nulls), False)).to_numpy(
        zero_copy_only=False)  # is_in says False, not null, for a null cell
    if (~(is_num | blank)).any():
        _warn_text(attribute)
    return out


#: Integer text of at most this many characters (sign and leading zeros included) is below 10¹⁸ < 2⁶³ in size
_INT64_TEXT = 18


def _integer_text_codes(digits, attribute: Attribute) -> np.ndarray:
    """Codes of integer text (each value matches :data:`_INT`, trimmed): Arrow's cast for text of at most
    :data:`_INT64_TEXT` characters, exact in int64; Python ints (:func:`_int_of_text`) for longer text. Value by value
    in Python, a CSV of 2·10⁶ rows and 3 integer columns took 10.7 CPU s to count, 1.0 s under engine='polars'."""
    import pyarrow as pa
    import pyarrow.compute as pc
    out = np.empty(len(digits), dtype=np.int64)
    short = pc.less_equal(pc.utf8_length(digits), _INT64_TEXT).to_numpy(zero_copy_only=False)
    if short.any():
        try:  # Arrow refuses a leading "+" ("+5"): trimmed (one sign at most, by _INT)
            ints = pc.cast(pc.utf8_ltrim(digits.filter(pa.array(short)), characters="+"), pa.int64())
        except pa.ArrowInvalid:  # text Arrow's trim left whitespace in: value by value, as longer text
            short[:] = False
        else:
            out[short] = _number_codes(ints.to_numpy(zero_copy_only=False), attribute)
    if not short.all():
        rest = digits.filter(pa.array(~short)).to_pylist()
        out[~short] = _object_codes(np.array([_int_of_text(s) for s in rest], dtype=object), attribute)
    return out
